"""The engine's memory model (posixlab/scoring/memory.py): what a pass and a wave allocate, and the batches the engine
cuts from one budget. Pure sizes with a 7B-shaped config without weights; then the count against what torch's profiler
measures, pass by pass and for a whole run, with small random-weight models on the CPU."""

from __future__ import annotations

import pytest
import torch
from test_gpu_check import llama7b_stub

from posixlab.errors import ConfigError
from posixlab.scoring import EngineOptions, ScoringEngine, memory
from posixlab.scoring.engine import distinct_prefixes
from posixlab.scoring.memory import GIB, ModelShape, pass_bytes, wave_bytes

LLAMA7B = ModelShape(layers=32, hidden=4096, intermediate=11008, heads=32, kv_heads=32, head_dim=128, vocab=32000,
                     dtype_bytes=2)


def engine(gb: float, max_new_tokens: int = 5, **options) -> ScoringEngine:
    """A 7B-shaped engine on a GPU stub; by default decoding a row at a time, every block holding its buffer until
    the wave is scored (the GPU's default, shared decoding, is ``shared_decoding=True``)."""
    options = {"shared_decoding": False, **options}
    return ScoringEngine(llama7b_stub(), max_new_tokens, EngineOptions(gpu_memory_gb=gb, **options))


def mmlu_like(n_sets: int, length: int = 120, n: int = 21) -> list[list[list[int]]]:
    """Sets of ``n`` prompts sharing a header of 40 tokens, each then its own."""
    return [[[1] * 40 + [1000 * s + p] * (length - 40) for p in range(n)] for s in range(n_sets)]


def test_the_shape_of_a_transformers_config_is_read_from_it():
    assert ModelShape.of(llama7b_stub().model, "cuda") == LLAMA7B
    # the CPU's attention in bfloat16 materialises the scores (its math path); in float32 it does not
    assert ModelShape.of(llama7b_stub().model, "cpu").score_bytes == 2 * 2 + 8
    assert LLAMA7B.kv_bytes_per_token == 2**19


def test_a_pass_by_hand():
    # 4 rows x 10 queries seeing 30 keys, keeping 2 logits a row, Llama-2-7B in bfloat16: masks 10*30*(2+2*2) = 1,800;
    # hidden 6*10*4096*2 = 491,520; then the MLP 3*10*11008*2 = 660,480 (no grouped-query copy, scores not
    # materialised, logits 2*32000*2 = 128,000) -> 1,153,800 a row
    assert pass_bytes(LLAMA7B, rows=4, queries=10, keys=30, kept=2) == 4 * 1_153_800
    # eager attention keeps 32 heads x 10 x 30 scores at 2*2+8 bytes: 115,200, still under the MLP's
    eager = ModelShape(**{**LLAMA7B.__dict__, "score_bytes": 12})
    assert pass_bytes(eager, 1, 10, 30, 2) == 1_153_800
    assert pass_bytes(eager, 1, 10, 3000, 2) == 10 * 3000 * 6 + 491_520 + 32 * 10 * 3000 * 12
    # a wave of 3 rows of 100 tokens (+5 new, 104 slots), 150 distinct prefix tokens, and 3 x 3 rows of logits
    assert wave_bytes(LLAMA7B, 3, 100, 5, 150) == (150 + 3 * 104) * 524_288 + 9 * 32000 * 2


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
            prompts = list(dict.fromkeys(tuple(p) for i in wave for p in sets[i]))
            room = e._wave_room(prompts)
            held = 0  # every block keeps its buffer while the next decodes, and all of them while the wave scores
            for groups in e._blocks([[u] for u in range(len(prompts))], [len(p) for p in prompts], room):
                block = [u for group in groups for u in group]
                longest = max(len(prompts[u]) for u in block)
                assert held + len(block) * memory.decode_row(e.shape, longest, 5) <= room
                held += len(block) * memory.decode_buffer(e.shape, longest, 5)
            chunk = memory.score_chunk(e.shape, 21 * 5, longest, room - held - e.slice_bytes, e.batch_tokens)
            assert chunk * memory.score_row(e.shape, 21 * 5, longest) <= room - held - e.slice_bytes
        assert sum(len(w) for w in waves) == 24
    assert len(engine(8)._plan_waves(mmlu_like(24), list(range(24)))) > \
        len(engine(40)._plan_waves(mmlu_like(24), list(range(24))))  # a larger budget: fewer, larger waves


def test_waves_are_planned_within_half_the_budget_from_a_fixed_budget():
    e = engine(20)
    assert e.memory == 20 * GIB and e.wave_budget == 10 * GIB and e.slice_bytes == 2**28


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


def test_the_size_an_error_names_is_the_smallest_that_holds_the_set_whatever_the_budget_given():
    """A scoring row's logits slice is a sixteenth of a small budget, so a row needs more at a larger budget: the
    size named is counted at itself. Each budget too small names the same size; it holds the set, 0.01 GB less
    does not (found on the CPU: 0.05 GB named 0.09 and 0.001 GB named 0.08, which was refused in turn)."""
    sets = mmlu_like(1, length=250)  # 4,450 distinct tokens: 2.2 GB of keys and values at 7B

    def named(gb: float) -> float:
        with pytest.raises(ConfigError) as caught:
            engine(gb)._plan_waves(sets, [0])
        return float(str(caught.value).split("at least ")[1].split(" ")[0])

    sizes = {named(gb) for gb in (0.25, 1, 2)}
    assert len(sizes) == 1, sizes
    size = sizes.pop()
    engine(size)._plan_waves(sets, [0])  # enough
    assert named(round(size - 0.01, 2)) == size  # and the smallest, to the 0.01 GB it is named in


def test_the_cpu_keeps_its_own_budget_option_name():
    cpu = ScoringEngine(llama7b_stub("cpu"), 5, EngineOptions(memory_gb=0.01))
    with pytest.raises(ConfigError, match="Raise engine.memory_gb"):
        cpu._plan_waves(mmlu_like(1), [0])


def test_distinct_prefixes_counts_a_radix_tree():
    assert distinct_prefixes([(1, 2, 3), (1, 2, 3)]) == 3
    assert distinct_prefixes([tuple(range(10)), tuple(range(5)) + (99,)]) == 11
    assert distinct_prefixes([]) == 0


def test_decoding_blocks_grow_with_the_room_and_keep_the_token_budget():
    lengths = [100] * 300
    rows = [len(memory.decode_blocks(LLAMA7B, lengths, 5, room=gb * GIB, max_rows=10**6)[0]) for gb in (8, 20, 40)]
    assert rows[0] < rows[1] < rows[2]
    # a row of 100 prompt tokens with 5 new: 104 slots of 0.5 MB, 1.77 times with the copies dropping rows makes
    assert rows[0] == 8 * GIB // memory.decode_row(LLAMA7B, 100, 5) == 88
    assert memory.decode_blocks(LLAMA7B, lengths, 5, room=40 * GIB, max_rows=64)[0] == list(range(64))


def test_one_transfer_a_decoding_step():
    """The decode loop reads a step's tokens and log-probabilities with one .tolist() each, not one per row."""
    import inspect

    source = inspect.getsource(ScoringEngine._decode)
    assert source.count(".tolist()") == 1 and "int(choice[" not in source and "float(chosen[" not in source
    assert torch.tensor([3, 4]).tolist() == [3, 4]


def test_a_set_over_half_the_budget_runs_in_a_wave_of_its_own_and_its_passes_take_the_rest():
    # 21 prompts of 226 tokens sharing 40: (40 + 21 * 186 distinct prefix tokens + 21 * 230 slots) * 0.5 MB = 4.3 GB
    # of caches, over half of 8 GB; with a pass's largest row beside them the set still fits 8 GB
    e, sets = engine(8), mmlu_like(3, length=226)
    assert wave_bytes(e.shape, 21, 226, 5, 40 + 21 * 186) > e.wave_budget
    assert e._plan_waves(sets, [0, 1, 2]) == [[0], [1], [2]]


# --- the count against the measure: torch's profiler on the CPU, float32 ------------------------------------------------
def small_llama(layers: int = 4, hidden: int = 256, heads: int = 4, kv_heads: int = 4, vocab: int = 2048,
                attention: str = "sdpa"):
    """A random-weight Llama on the CPU in float32 (the tiny model's tokenizer: token ids are all a pass reads)."""
    from tiny_model import build_tokenizer
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    from posixlab.models.causal_lm import CausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=int(hidden * 2.6875),
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=4096, bos_token_id=1, eos_token_id=2)
    config._attn_implementation = attention
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(eos_token_id=2)
    return CausalLM(model, build_tokenizer(), name=f"llama-{layers}x{hidden}", identity={})


def measured(run, *args) -> int:
    """Bytes of tensors ``run(*args)`` holds at its peak on the CPU, above what was held before."""
    from experiments.gpu_phases import PeakMemory

    with PeakMemory(torch.device("cpu"), tensors=True) as peak, torch.inference_mode():
        run(*args)
    return peak.peak - peak.base


def one_pass(lm, rows: int, queries: int, past: int, kept: int, fold: bool = False) -> int:
    """What a pass of ``rows`` × ``queries`` new tokens on ``past`` cached ones allocates, its buffer allocated
    before it (``fold``: its heads folded)."""
    shape, keys = ModelShape.of(lm.model, "cpu"), past + queries
    buffer = torch.zeros((shape.layers, 2, rows, shape.kv_heads, keys, shape.head_dim))
    visible = torch.ones((rows, queries, keys), dtype=torch.bool).tril(past)
    return measured(lm.forward_masked, torch.randint(3, 2048, (rows, queries)),
                    torch.arange(past, keys).expand(rows, queries), visible, torch.arange(keys).expand(rows, keys),
                    lm.slot_cache(buffer, past), 0 if kept == queries else torch.tensor([queries - 1]), fold)


# rows, queries, cached keys, logits kept a row: the engine's passes
PASSES = {"prefill": (4, 64, 0, 1), "prefill after a shared beginning": (4, 64, 500, 1),
          "decoding step": (16, 1, 300, 1), "scoring": (4, 40, 300, 40), "long prefill": (2, 400, 400, 1)}


@pytest.mark.parametrize("kv_heads, attention, least, fold", [(4, "sdpa", 0.7, False), (2, "sdpa", 0.7, False),
                                                               (1, "sdpa", 0.6, True), (4, "eager", 0.5, False)])
def test_a_pass_allocates_what_the_model_counts(kv_heads, attention, least, fold):
    """Every kind of pass, measured: within the count, and not far under it (eager attention is counted with room;
    ``fold``: a grouped-query model's heads folded, ``EngineOptions.fold_heads``, whose mask copy is counted twice
    for the CUDA kernel's padding: 0.64 of the count measured here at the least)."""
    lm = small_llama(kv_heads=kv_heads, attention=attention)
    shape = ModelShape.of(lm.model, "cpu")
    for name, (rows, queries, past, kept) in PASSES.items():
        used = one_pass(lm, rows, queries, past, kept, fold)
        counted = pass_bytes(shape, rows, queries, past + queries, kept, fold)
        assert least * counted <= used <= counted, (name, used, counted, round(used / counted, 2))


def test_a_run_stays_within_its_budget_and_uses_it():
    """The whole engine on 8 MMLU-like sets of 21 prompts, under three budgets that cut waves, blocks and chunks:
    the peak of tensors above the weights within 1.1x each budget (issue 43's promise) and at least half of it,
    and the same numbers under every budget."""
    import random

    from posixlab.scoring import ScoringEngine

    lm = small_llama(layers=16, hidden=64, heads=1, kv_heads=1, vocab=1024)  # caches outweigh passes, as at 7B
    rng = random.Random(0)
    header = [rng.randrange(3, 1024) for _ in range(30)]
    sets = []
    for _ in range(8):
        question = [rng.randrange(3, 1024) for _ in range(rng.randrange(50, 90))]
        variants = []
        for _ in range(21):  # a misspelling or two: the prompts share beginnings of different lengths
            prompt = list(question)
            for _ in range(rng.randrange(1, 3)):
                prompt[rng.randrange(len(prompt))] = rng.randrange(3, 1024)
            variants.append(header + prompt)
        sets.append(variants)
    results = {}

    def run(engine, mb):
        results[mb] = sorted(engine.score_sets(sets), key=lambda x: x[0])

    for mb in (40, 80, 160):
        engine = ScoringEngine(lm, 5, EngineOptions(memory_gb=mb / 1024))
        waves = engine._plan_waves(sets, list(range(8)))
        ratio = measured(run, engine, mb) / engine.memory
        assert 0.5 <= ratio <= 1.1, (mb, ratio, len(waves))  # measured: 0.95, 0.53 (a set a wave), 0.56
    for mb in (80, 160):
        for (_, a), (_, b) in zip(results[40], results[mb]):
            assert a.responses == b.responses
            assert abs(a.matrix - b.matrix).max() < 1e-4


def test_a_set_too_large_to_hold_its_buffers_runs_on_its_segments_within_the_budget():
    """Few-shot sets whose 21 prompts' decoding buffers outgrow the budget (as 3-shot MMLU at 7B does at 8 GB): each
    block's buffer is freed once decoded and scoring rebuilds the caches from the shared segments, within 1.1x the
    budget, with the numbers an ample budget gives."""
    import random

    from posixlab.scoring import ScoringEngine

    lm = small_llama(layers=16, hidden=64, heads=1, kv_heads=1, vocab=1024)  # 8 KB of keys and values a token
    rng = random.Random(1)
    exemplars = [rng.randrange(3, 1024) for _ in range(400)]  # shared by every prompt, as few-shot exemplars are
    sets = []
    for _ in range(2):
        question = [rng.randrange(3, 1024) for _ in range(60)]
        variants = []
        for _ in range(21):
            prompt = list(question)
            prompt[rng.randrange(len(prompt))] = rng.randrange(3, 1024)
            variants.append(exemplars + prompt)
        sets.append(variants)
    tight = ScoringEngine(lm, 5, EngineOptions(memory_gb=40 / 1024))
    unique = distinct_prefixes({tuple(p) for p in sets[0]})
    assert not tight._holds_buffers(21, 460, unique)  # 21 buffers of 465 slots: 76 MB, and more
    results = {}

    def run(engine, name):
        results[name] = sorted(engine.score_sets(sets), key=lambda x: x[0])

    ratio = measured(run, tight, "tight") / tight.memory
    assert 0.5 <= ratio <= 1.1, ratio  # measured: 0.96
    ample = ScoringEngine(lm, 5, EngineOptions(memory_gb=400 / 1024))
    assert ample._holds_buffers(21, 460, unique)
    run(ample, "ample")
    for (_, a), (_, b) in zip(results["tight"], results["ample"]):
        assert a.responses == b.responses
        assert abs(a.matrix - b.matrix).max() < 1e-4
    with pytest.raises(ConfigError) as caught:  # below the segments and one row beside them: refused
        ScoringEngine(lm, 5, EngineOptions(memory_gb=8 / 1024))._plan_waves(sets, [0, 1])
    needed = float(str(caught.value).split("at least ")[1].split(" ")[0])
    assert needed < 40 / 1024  # the size named is the segments' way, far below the buffers'
    ScoringEngine(lm, 5, EngineOptions(memory_gb=needed))._plan_waves(sets, [0, 1])  # and it is enough


def test_a_tensor_of_an_earlier_profile_freed_in_a_later_one_does_not_lower_its_peak():
    """torch keeps the size of every block allocated under any profile: one from an earlier measurement, freed (by the
    garbage collector, when it runs) inside a later one, was counted against the later run (CI: 0.43 of a budget
    measured 0.53 here). Only blocks allocated inside a measurement count."""
    kept = []
    assert measured(lambda: kept.append(torch.ones(2**20))) == 4 * 2**20  # allocated under a profile, kept beyond

    def free_the_earlier_block_then_use_one_mib():
        kept.clear()
        block = torch.ones(2**18)
        del block

    assert measured(free_the_earlier_block_then_use_one_mib) == 2**20  # was 0: the 4 MiB freed counted first


def test_a_process_group_s_resident_memory_is_sampled():
    """benchmark_scoring's sampler of a vLLM server's processes: PeakMemory's sampling, over a process group."""
    import os

    from experiments.benchmark_scoring import GroupMemory

    with GroupMemory(os.getpgid(0)) as sampler:
        block = bytearray(64 * 2**20)  # touched: resident
        block[::4096] = b"x" * len(block[::4096])
    assert sampler.peak >= 64 * 2**20


def test_running_out_of_memory_stops_with_what_to_set_and_keeps_the_finished_waves(tmp_path):
    """The device refusing an allocation in the second wave (a real one: the CPU allocator refusing a petabyte, as
    a card shared with another process refuses a pass) stops the run at once with a ``DeviceMemoryError`` (a
    ``PosixlabError``: the CLI prints it and exits 2) that says which budget to set; the first wave's sets were
    yielded and are in the score cache, so the same run again computes only the rest, with the same numbers."""
    import random

    import numpy as np

    from posixlab.errors import DeviceMemoryError, PosixlabError
    from posixlab.scoring import ScoreCache

    lm = small_llama(layers=2, hidden=64, heads=4, kv_heads=1, vocab=512)
    rng = random.Random(0)
    sets = [[[rng.randrange(3, 512) for _ in range(rng.randrange(8, 20))] for _ in range(4)] for _ in range(4)]
    options = EngineOptions(max_wave_rows=8, memory_gb=0.5)  # two waves of two sets
    reference = dict(ScoringEngine(lm, 4, options).score_sets(sets))
    forward, failing = lm.model.forward, []

    def refusing(*args, **kwargs):
        if failing:
            torch.empty(2**50, dtype=torch.uint8)  # past any machine's address space: refused, overcommit or not
        return forward(*args, **kwargs)

    lm.model.forward = refusing
    cache = ScoreCache(tmp_path, {"name": "oom", "model": "small-llama"})
    done = {}
    with pytest.raises(DeviceMemoryError) as caught:
        for index, scores in ScoringEngine(lm, 4, options, cache=cache).score_sets(sets):
            done[index] = scores
            failing.append(True)  # the next pass (the second wave's first) is refused
    message = str(caught.value)
    assert isinstance(caught.value, PosixlabError) and not caught.value.__context__
    assert "ran out of memory on cpu in the scoring engine (it asked for 1048576.00 GB more)" in message
    assert "set engine.memory_gb=0.25" in message and "same command again resumes" in message, message
    assert len(done) == 2
    lm.model.forward = forward
    before = lm.forward_tokens
    again = dict(ScoringEngine(lm, 4, options, cache=cache).score_sets(sets))
    assert sorted(k for k in again if again[k].stats["cached"]) == sorted(done)
    assert lm.forward_tokens > before
    for k in range(len(sets)):
        assert again[k].responses == reference[k].responses
        assert np.array_equal(again[k].matrix, reference[k].matrix)


def test_scoring_chunks_are_cut_where_their_padding_stops_paying():
    """A chunk's rows are padded to its longest trie. Sets of 12, 3 and 2 prompts in one block give tries of about
    11, 2 and 1 responses: one chunk would be a third padding, so the engine cuts it (``padding_pays``), with the same
    numbers as one full pass per pair. (MMLU answers of a trained model vary the same way: on the packaged SmolLM2's
    20 main-job sets, scoring's padding fell from 48% to 19% of its tokens.)"""
    import random

    import numpy as np

    from posixlab.scoring import bruteforce_matrix
    from posixlab.scoring.engine import padding_pays

    class Recording(ScoringEngine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.chunks = []

        def _score_chunk(self, block, chunk, width, tries, *args, **kwargs):
            self.chunks.append((width, [len(t) for t in tries]))
            return super()._score_chunk(block, chunk, width, tries, *args, **kwargs)

    lm = small_llama(layers=2, hidden=64, heads=4, kv_heads=1, vocab=2048)
    rng = random.Random(0)
    sets = [[[rng.randrange(3, 2048) for _ in range(rng.randrange(10, 30))] for _ in range(n)] for n in (12, 3, 2)]
    engine = Recording(lm, 4, EngineOptions(memory_gb=1))
    results = dict(engine.score_sets(sets))
    assert len(engine.chunks) >= 2, engine.chunks
    padded = sum(width * len(lengths) for width, lengths in engine.chunks)
    real = sum(sum(lengths) for _, lengths in engine.chunks)
    assert not padding_pays(engine.chunks[0][0] * sum(map(len, (c[1] for c in engine.chunks))), real)  # one chunk
    assert all(len(lengths) == 1 or padding_pays(width * len(lengths), sum(lengths))
               for width, lengths in engine.chunks)
    assert padded - real < 0.2 * padded
    for k, prompts in enumerate(sets):
        assert np.abs(results[k].matrix - bruteforce_matrix(lm, prompts, results[k].responses)).max() < 1e-4


def test_selected_log_probabilities_are_the_same_whatever_the_slice():
    """``selected_logprobs`` copies and widens a slice of the targets' logit rows at a time (8 MB on a CPU, where
    that is 2-3.5x faster than 256 MB: the slice stays in the caches). Every slice size gives each target its own
    row's log-softmax, against float64, and the same bits: one row a slice (a single row's reduction is not split
    among threads: ``causal_lm.logsumexp``), three, the CPU's slice and everything at once."""
    from posixlab.scoring.engine import selected_logprobs

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 49152, generator=generator) * 4
    rows, queries = torch.arange(5).repeat_interleave(7), torch.arange(7).repeat(5)
    targets = torch.randint(0, 49152, (35,), generator=generator)
    exact = torch.log_softmax(logits.double(), -1)[rows, queries, targets]
    row_bytes = 49152 * (4 + 8)
    assert memory.slice_bytes(4 * GIB, "cpu") // row_bytes == 14  # the CPU's slice: 14 of these rows
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a single row's sum split among threads is what differs: at least two
    try:
        everything = selected_logprobs(logits, rows, queries, targets, 2**28)
        for size in (1, 3 * row_bytes, memory.slice_bytes(4 * GIB, "cpu"), 2**28):
            values = selected_logprobs(logits, rows, queries, targets, size)
            assert values.dtype == torch.float32 and (values.double() - exact).abs().max() < 1e-5, size
            assert torch.equal(values, everything), size
    finally:
        torch.set_num_threads(threads)
