"""The engine's memory model (posixlab/scoring/memory.py): what a pass and a wave allocate, and the batches the engine
cuts from one budget. Pure sizes: no model is loaded (a 7B-shaped config without weights)."""

from __future__ import annotations

import pytest
import torch

from posixlab.errors import ConfigError
from posixlab.scoring import EngineOptions, ScoringEngine
from posixlab.scoring.engine import distinct_prefixes
from posixlab.scoring.memory import GIB, ModelShape, pass_bytes, wave_bytes
from test_gpu_check import llama7b_stub

LLAMA7B = ModelShape(layers=32, hidden=4096, intermediate=11008, heads=32, kv_heads=32, head_dim=128, vocab=32000,
                     dtype_bytes=2)


def engine(gb: float, max_new_tokens: int = 5, **options) -> ScoringEngine:
    return ScoringEngine(llama7b_stub(), max_new_tokens, EngineOptions(gpu_memory_gb=gb, **options))


def mmlu_like(n_sets: int, length: int = 120, n: int = 21) -> list[list[list[int]]]:
    """Sets of ``n`` prompts sharing a header of 40 tokens, each then its own."""
    return [[[1] * 40 + [1000 * s + p] * (length - 40) for p in range(n)] for s in range(n_sets)]


def test_the_shape_of_a_transformers_config_is_read_from_it():
    assert ModelShape.of(llama7b_stub().model) == LLAMA7B
    assert LLAMA7B.kv_bytes_per_token == 2**19


def test_a_pass_by_hand():
    # 4 rows x 10 queries seeing 30 keys, keeping 2 logits a row, Llama-2-7B in bfloat16:
    # masks 10*30*(1+2) = 900; hidden 6*10*4096*2 = 491,520; MLP 3*10*11008*2 = 660,480 (attention 2*32*10*30*2 =
    # 38,400 is smaller); appended 10 * 524,288 = 5,242,880; one layer's cache copy 30*2*32*128*2 = 491,520;
    # logits 2 * 32000 * (2 + 8) = 640,000 -> 7,527,300 a row
    assert pass_bytes(LLAMA7B, rows=4, queries=10, keys=30, kept=2) == 4 * 7_527_300
    # a wave of 3 rows of 100 tokens (+5 new), 150 distinct prefix tokens: (150 + 3 * 105) * 524,288
    assert wave_bytes(LLAMA7B, 3, 100, 5, 150) == 465 * 524_288


def test_waves_blocks_and_chunks_stay_within_the_budget():
    for gb in (8, 20, 40):
        e = engine(gb)
        sets = mmlu_like(24)
        waves = e._plan_waves(sets, list(range(24)))
        for wave in waves:
            rows = sum(len({tuple(p) for p in sets[i]}) for i in wave)
            tokens = sum(distinct_prefixes({tuple(p) for p in sets[i]}) for i in wave)
            width = max(len(p) for i in wave for p in sets[i])
            assert wave_bytes(e.shape, rows, width, 5, tokens) <= e.wave_budget
            prompts = list({tuple(p) for i in wave for p in sets[i]})
            for block in e._blocks(prompts):
                longest = max(len(prompts[u]) for u in block)
                assert len(block) * e._decode_row(longest) <= e.pass_budget
        assert sum(len(w) for w in waves) == 24
    assert len(engine(8)._plan_waves(mmlu_like(24), list(range(24)))) > \
        len(engine(40)._plan_waves(mmlu_like(24), list(range(24))))  # a larger budget: fewer, larger waves


def test_the_budget_splits_in_two_halves_and_the_default_batches_do_not_read_free_memory():
    e = engine(20)
    assert e.memory == 20 * GIB and e.wave_budget + e.pass_budget == e.memory
    assert e.wave_budget == 10 * GIB


def test_a_budget_that_cannot_hold_one_set_is_an_error_before_any_work():
    sets = mmlu_like(2, length=2000)  # 21 prompts of 2,000 tokens: 22 GB of keys and values in bfloat16 at 7B
    with pytest.raises(ConfigError) as caught:
        engine(8)._plan_waves(sets, [0, 1])
    message = str(caught.value)
    assert "memory budget (8.00 GB) cannot hold one prompt set of 21 prompts of up to 2000 tokens" in message
    assert "the set's caches need" in message
    assert "Raise engine.gpu_memory_gb to at least" in message
    needed = float(message.split("at least ")[1].split(" ")[0])
    engine(needed)._plan_waves(sets, [0, 1])  # the size it names is enough


def test_the_cpu_keeps_its_own_budget_option_name():
    cpu = ScoringEngine(llama7b_stub("cpu"), 5, EngineOptions(memory_gb=0.01))
    with pytest.raises(ConfigError, match="Raise engine.memory_gb"):
        cpu._plan_waves(mmlu_like(1), [0])


def test_distinct_prefixes_counts_a_radix_tree():
    assert distinct_prefixes([(1, 2, 3), (1, 2, 3)]) == 3
    assert distinct_prefixes([tuple(range(10)), tuple(range(5)) + (99,)]) == 11
    assert distinct_prefixes([]) == 0


def test_one_transfer_a_decoding_step():
    """The decode loop reads a step's tokens and log-probabilities with one .tolist() each, not one per row."""
    import inspect

    source = inspect.getsource(ScoringEngine._decode)
    assert source.count(".tolist()") == 1 and "int(choice[" not in source and "float(chosen[" not in source
    assert torch.tensor([3, 4]).tolist() == [3, 4]


def test_a_set_over_half_the_budget_runs_in_a_wave_of_its_own_and_its_passes_take_the_rest():
    # 21 prompts of 226 tokens sharing 40: (40 + 21 * 186 distinct prefix tokens + 21 * 231 stacked) * 0.5 MB = 4.3 GB
    # of caches, over half of 8 GB; with a pass's largest row beside them the set still fits 8 GB
    e, sets = engine(8), mmlu_like(3, length=226)
    assert wave_bytes(e.shape, 21, 226, 5, 40 + 21 * 186) > e.wave_budget
    assert e._plan_waves(sets, [0, 1, 2]) == [[0], [1], [2]]
