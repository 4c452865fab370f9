"""The engine's two trees against brute-force definitions: the prompts' radix tree (``scoring/radix.py``) and the
responses' trie (``scoring/trie.py``). Both are built a run or a generation at a time for speed (issue 43); here
every segment, node, mask and target is checked against what the definitions say, token by token."""

from __future__ import annotations

import random

import pytest
import torch

from posixlab.scoring.engine import distinct_prefixes
from posixlab.scoring.radix import path, radix_segments
from posixlab.scoring.trie import ResponseTrie


def random_prompts(rng: random.Random) -> list[tuple[int, ...]]:
    """Prompts that share beginnings, part, end inside one another and repeat (few token values: many collisions)."""
    vocab, length = rng.choice([2, 3, 40]), rng.randint(0, 14)
    head = [rng.randrange(vocab) for _ in range(length)]
    prompts = []
    for _ in range(rng.randint(1, 12)):
        prompt = head[:rng.randint(0, length)] if rng.random() < 0.8 else []
        prompt += [rng.randrange(vocab) for _ in range(rng.randint(0 if prompt else 1, 5))]
        prompts.append(tuple(prompt) or (0,))
    return prompts


CASES = [random_prompts(random.Random(seed)) for seed in range(400)]


@pytest.mark.parametrize("min_saving", [0, 2, 5])
def test_the_radix_tree_gives_every_prompt_its_tokens_and_shares_exactly_what_its_definition_says(min_saving):
    for prompts in CASES:
        segments, end = radix_segments(prompts, min_saving=min_saving)
        for u, prompt in enumerate(prompts):  # a prompt is its chain of segments, each starting where the last ended
            chain = path(segments, end[u])
            assert [t for k in chain for t in segments[k].tokens] == list(prompt)
            assert [segments[k].start for k in chain] == [sum(len(segments[j].tokens) for j in chain[:i])
                                                          for i in range(len(chain))]
            assert [segments[k].level for k in chain] == list(range(len(chain)))
        assert [s.level for s in segments] == sorted(s.level for s in segments)  # parents first, levels contiguous
        if min_saving == 0:  # the full tree: every distinct prefix once, so the tokens are the distinct prefixes
            prefixes = {p[:k] for p in prompts for k in range(1, len(p) + 1)}
            assert sum(len(s.tokens) for s in segments) == len(prefixes) == distinct_prefixes(prompts)
            # a segment ends where prompts part or one ends, never in between: no segment has an only child
            children = [sum(s.parent == k for s in segments) for k in range(len(segments))]
            for k in range(len(segments)):
                assert children[k] != 1 or k in end


def test_the_radix_tree_orders_siblings_by_the_first_prompt_that_reaches_them():
    segments, end = radix_segments([(1, 2, 9), (1, 3), (1, 2, 8), (4,)])
    assert [(s.tokens, s.parent) for s in segments] == [([1], -1), ([4], -1), ([2], 0), ([3], 0), ([9], 2), ([8], 2)]
    assert end == [4, 3, 5, 1]


def brute_ancestors(trie: ResponseTrie) -> torch.Tensor:
    n = len(trie)
    seen = torch.zeros((n, n), dtype=torch.bool)
    for i in range(n):
        j = i
        while j >= 0:
            seen[i, j] = True
            j = trie.parent[j]
    return seen


def test_the_response_trie_holds_each_input_prefix_once_and_masks_each_node_to_its_own_path():
    for prompts in CASES:
        responses = list(dict.fromkeys(prompts))
        trie = ResponseTrie(responses)
        inputs = {y[:k] for y in responses for k in range(1, len(y))}  # what the model reads: y without its last
        assert len(trie) == len(inputs) == distinct_prefixes([y[:-1] for y in responses])
        assert torch.equal(trie.ancestors(), brute_ancestors(trie))
        nodes, tokens, counts = trie.target_arrays()
        at = 0
        for y, count in zip(trie.responses, counts):
            assert count == len(y) - 1
            for k in range(1, len(y)):  # node at ``at`` reads y[:k] (its path spells it) and predicts y[k]
                node, spelled = int(nodes[at]), []
                while node >= 0:
                    spelled.append(trie.tokens[node])
                    node = trie.parent[node]
                assert tuple(spelled[::-1]) == y[:k] and int(tokens[at]) == y[k]
                at += 1
        assert at == len(nodes)
