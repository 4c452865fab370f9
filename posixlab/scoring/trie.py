"""The responses one prompt must score, as a token trie, so shared beginnings are computed once.

To score response ``y`` under prompt ``x`` the model reads ``x`` then ``y[:-1]``; the log-probability of ``y[0]``
comes from the prompt's own last position. Responses of one set often begin alike ("The answer is (B)" and
"The answer is (C)"), so their inputs form a trie: one node per distinct input prefix, each node a token whose
keys and values every longer response reuses. One forward pass runs every node of the trie on the prompt's
cache with a mask that lets a node see the prompt and its own ancestors only (tree attention), which is exactly
the context it has when that response is read alone.

>>> trie = ResponseTrie([(5, 6, 7), (5, 6, 8, 9), (4,)])
>>> trie.tokens          # inputs: 5, 5→6, 5→6→8 (the trailing 7 and 9 and the lone 4 are only targets)
[5, 6, 8]
>>> trie.depth, trie.parent
([1, 2, 3], [-1, 0, 1])
>>> trie.targets[1]      # (node whose output predicts it, token): y[1]=6 after node 0, y[2]=8 after node 1, ...
[(0, 6), (1, 8), (2, 9)]
>>> trie.ancestors().int().tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

import numpy as np
import torch


class ResponseTrie:
    def __init__(self, responses):
        self.responses = [tuple(r) for r in responses]
        self.tokens: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.targets: list[list[tuple[int, int]]] = []  # per response: (node, next token) for y[1:]
        children: list[dict[int, int]] = [{}]  # per node + 1 (0 is the root): its children by token
        for y in self.responses:
            if not y:
                raise ValueError("a response to score has no tokens")
            steps, node = [], -1
            for k in range(1, len(y)):  # walk the trie one token at a time: linear in the response's length
                child = children[node + 1].get(y[k - 1])
                if child is None:
                    child = len(self.tokens)
                    children[node + 1][y[k - 1]] = child
                    children.append({})
                    self.tokens.append(y[k - 1])
                    self.parent.append(node)
                    self.depth.append(k)
                steps.append((child, y[k]))
                node = child
            self.targets.append(steps)

    def __len__(self) -> int:
        return len(self.tokens)

    def target_arrays(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Every response's targets in one run, response after response: the nodes whose outputs predict them, the
        tokens, and how many targets each response has.

        >>> nodes, tokens, counts = ResponseTrie([(5, 6, 7), (4,)]).target_arrays()
        >>> nodes.tolist(), tokens.tolist(), counts
        ([0, 1], [6, 7], [2, 0])
        """
        counts = [len(steps) for steps in self.targets]
        flat = np.array([pair for steps in self.targets for pair in steps], dtype=np.int64).reshape(-1, 2)
        return flat[:, 0], flat[:, 1], counts

    def ancestors(self) -> torch.Tensor:
        """``(n, n)`` bool: ``[i, j]`` is True when node ``j`` is node ``i`` or one of its ancestors. Built a
        generation at a time (as many steps as the deepest node), not node by node."""
        n = len(self.tokens)
        seen = np.zeros((n, n), dtype=bool)
        parent = np.array(self.parent + [-1], dtype=np.int64)  # parent[-1]: the root's, so -1 stays -1
        rows, chain = np.arange(n), np.arange(n)
        while len(rows):
            seen[rows, chain] = True
            chain = parent[chain]
            rows, chain = rows[chain >= 0], chain[chain >= 0]
        return torch.from_numpy(seen)
