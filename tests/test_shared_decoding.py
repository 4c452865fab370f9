"""Shared decoding (``EngineOptions.shared_decoding``, the default on a GPU): the prompts of a set that share most of
their tokens (few-shot exemplars) decode together on one copy of their distinct beginnings, so that a decoding step
reads those keys and values once. Against decoding a row at a time and one full forward pass per (prompt, response),
on small random-weight Llamas on the CPU (real transformers), with groups of different sizes (padded queries) and
rows that end at different steps."""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_memory_model import measured, small_llama

from posixlab.errors import ConfigError
from posixlab.scoring import EngineOptions, ScoringEngine, bruteforce_matrix, memory


class Recording(ScoringEngine):
    """The engine, keeping the sizes of the groups of every decoding block."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = []

    def _decode(self, block):
        self.blocks.append([len(group) for group in block.groups])
        return super()._decode(block)


def few_shot_sets(vocab: int, sizes=(21, 18, 15), exemplars: int = 300, seed: int = 0) -> list[list[list[int]]]:
    """Sets of prompts that each begin with the set's exemplars, then its question with a misspelling or two; the
    prompts of a set differ in length by up to 4 tokens."""
    rng = random.Random(seed)
    sets = []
    for size in sizes:
        shots = [rng.randrange(3, vocab) for _ in range(exemplars)]
        question = [rng.randrange(3, vocab) for _ in range(60)]
        prompts = []
        for _ in range(size):
            prompt = list(question)
            for _ in range(rng.randrange(1, 3)):
                prompt[rng.randrange(len(prompt))] = rng.randrange(3, vocab)
            prompts.append(shots + prompt[:len(prompt) - rng.randrange(0, 5)])
        sets.append(prompts)
    return sets


def open_sets(vocab: int, seed: int = 1) -> list[list[list[int]]]:
    """Sets of prompts that share nothing: each decodes alone."""
    rng = random.Random(seed)
    return [[[rng.randrange(3, vocab) for _ in range(rng.randrange(20, 60))] for _ in range(6)] for _ in range(2)]


def test_shared_decoding_equals_decoding_a_row_at_a_time_and_one_pass_per_pair():
    lm = small_llama(layers=4, hidden=128, heads=4, kv_heads=4, vocab=2048)
    sets = few_shot_sets(2048) + open_sets(2048)
    rows = dict(ScoringEngine(lm, 8, EngineOptions(shared_decoding=False)).score_sets(sets))
    # an end-of-sequence token that ends every response of the first set at its first step and some others later:
    # groups finish at different steps, and the finished ones are dropped
    first = [r[0] for r in rows[0].responses]
    lm.eos_ids = frozenset({max(set(first), key=first.count)})
    rows = dict(ScoringEngine(lm, 8, EngineOptions(shared_decoding=False)).score_sets(sets))
    engine = Recording(lm, 8, EngineOptions(shared_decoding=True))
    shared = dict(engine.score_sets(sets))
    assert sorted(size for block in engine.blocks for size in block if size > 1) == [15, 18, 21]  # the few-shot sets
    assert sum(size == 1 for block in engine.blocks for size in block) == 12  # the open sets' prompts, a row each
    assert engine.shared_rows == 54
    lengths = [len(r) for k in range(len(sets)) for r in shared[k].responses]
    assert min(lengths) == 1 and max(lengths) == 8, sorted(set(lengths))
    for k, prompts in enumerate(sets):
        assert shared[k].responses == rows[k].responses
        assert np.abs(shared[k].matrix - rows[k].matrix).max() < 1e-5
        diff = max(abs(a - b) for x, y in zip(shared[k].generation_logprobs, rows[k].generation_logprobs)
                   for a, b in zip(x, y))
        assert diff < 1e-5
    for k in (2, 3):  # a group of 15, and rows alone
        reference = bruteforce_matrix(lm, sets[k], shared[k].responses)
        assert np.abs(shared[k].matrix - reference).max() < 1e-4


def test_a_set_decodes_together_only_where_that_reads_less():
    """Grouped-query attention with several queries repeats a layer's keys and values for every head (transformers),
    so a 4-head model with one key/value head reads more as a group than a row at a time: its rows decode alone."""
    sets = few_shot_sets(1024, sizes=(21,), exemplars=120)
    for kv_heads, grouped in ((4, [21]), (1, [])):
        engine = Recording(small_llama(layers=2, hidden=64, heads=4, kv_heads=kv_heads, vocab=1024), 3,
                           EngineOptions(shared_decoding=True))
        list(engine.score_sets(sets))
        assert [size for block in engine.blocks for size in block if size > 1] == grouped


def test_shared_decoding_stays_within_its_budget():
    """Few-shot sets under budgets that cut waves and blocks: the peak of tensors within 1.1x each budget, the same
    numbers under each, and a budget too small for a set's segments refused before any work."""
    lm = small_llama(layers=16, hidden=64, heads=1, kv_heads=1, vocab=1024)  # 8 KB of keys and values a token
    sets = few_shot_sets(1024, sizes=(21, 21, 18, 15), exemplars=400, seed=2)
    results = {}

    def run(engine, mb):
        results[mb] = dict(engine.score_sets(sets))

    for mb, blocks in ((40, 10), (48, 4), (160, 1)):  # 40 MB: the second wave's 21 prompts decode a row at a time
        engine = Recording(lm, 5, EngineOptions(memory_gb=mb / 1024, shared_decoding=True))
        ratio = measured(run, engine, mb) / engine.memory
        assert 0.5 <= ratio <= 1.1, (mb, ratio)  # measured: 1.05, 1.03, 0.99
        assert len(engine.blocks) == blocks and engine.shared_rows == (54 if mb == 40 else 75), engine.blocks
    for mb in (48, 160):
        for k in results[40]:
            assert results[mb][k].responses == results[40][k].responses
            assert np.abs(results[mb][k].matrix - results[40][k].matrix).max() < 1e-4
    with pytest.raises(ConfigError, match="Raise engine.memory_gb"):
        ScoringEngine(lm, 5, EngineOptions(memory_gb=2 / 1024, shared_decoding=True))._plan_waves(sets, [0, 1])


def test_groups_are_blocked_by_their_padded_size():
    shape = memory.ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=2, head_dim=4, vocab=10,
                              dtype_bytes=4)
    groups = [(400, 21), (30, 1), (380, 18), (20, 1), (420, 21)]
    # rows alone first, then the groups by size; a block's groups are padded to its largest (420 keys, 21 queries)
    assert memory.group_blocks(shape, groups, 5, room=10**9, max_rows=10**6, keep=False) == [[3, 1], [2, 0, 4]]
    one = memory.decode_group(shape, 420, 21, 5)
    assert memory.group_blocks(shape, groups, 5, room=2 * one, max_rows=10**6, keep=False) == [[3, 1], [2, 0], [4]]
    assert memory.group_blocks(shape, groups, 5, room=10**9, max_rows=42, keep=False) == [[3, 1], [2, 0], [4]]


def test_the_option_is_checked_and_follows_the_device():
    import torch

    assert EngineOptions().shares_decoding(torch.device("cuda")) and not EngineOptions().shares_decoding(
        torch.device("cpu"))
    assert EngineOptions(shared_decoding=True).shares_decoding(torch.device("cpu"))
    assert not EngineOptions(shared_decoding=False).shares_decoding(torch.device("cuda"))
    with pytest.raises(ConfigError, match="engine.shared_decoding takes true, false or null"):
        EngineOptions(shared_decoding="yes")
