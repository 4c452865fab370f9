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

import torch


class ResponseTrie:
    def __init__(self, responses):
        self.responses = [tuple(r) for r in responses]
        self.tokens: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.targets: list[list[tuple[int, int]]] = []  # per response: (node, next token) for y[1:]
        index: dict[tuple[int, ...], int] = {}
        for y in self.responses:
            if not y:
                raise ValueError("a response to score has no tokens")
            steps = []
            for k in range(1, len(y)):
                path = y[:k]
                if path not in index:
                    index[path] = len(self.tokens)
                    self.tokens.append(y[k - 1])
                    self.parent.append(index[path[:-1]] if k > 1 else -1)
                    self.depth.append(k)
                steps.append((index[path], y[k]))
            self.targets.append(steps)

    def __len__(self) -> int:
        return len(self.tokens)

    def ancestors(self) -> torch.Tensor:
        """``(n, n)`` bool: ``[i, j]`` is True when node ``j`` is node ``i`` or one of its ancestors."""
        n = len(self.tokens)
        seen = torch.zeros((n, n), dtype=torch.bool)
        for i, p in enumerate(self.parent):  # parents come before their children
            if p >= 0:
                seen[i] = seen[p]
            seen[i, i] = True
        return seen
