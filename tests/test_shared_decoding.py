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


@pytest.mark.parametrize("kv_heads, attention", [(4, "sdpa"), (1, "sdpa"), (2, "eager")])
def test_shared_decoding_equals_decoding_a_row_at_a_time_and_one_pass_per_pair(kv_heads, attention):
    """Multi-head attention; grouped-query attention, whose query heads fold onto their key/value head
    (``folded_sdpa_attention``); and eager attention, which repeats keys and values whatever the queries."""
    lm = small_llama(layers=3, hidden=128, heads=4, kv_heads=kv_heads, vocab=2048, attention=attention)
    sets = few_shot_sets(2048, exemplars=200) + open_sets(2048)
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


def test_folded_heads_equal_repeated_keys_and_values():
    """One pass of several queries with a mask on a grouped-query model: folding the heads gives what repeating the
    keys and values gives, within float rounding, and leaves the model's attention as it was."""
    import torch

    lm = small_llama(layers=2, hidden=64, heads=4, kv_heads=2, vocab=256)
    torch.manual_seed(1)
    ids, keys = torch.randint(3, 256, (3, 5)), 12
    visible = torch.rand(3, 5, keys) < 0.6
    visible[:, :, :1] = True
    positions = torch.arange(7, 12).expand(3, 5)

    def run(fold):
        buffer = torch.randn(2, 2, 3, 2, keys, 16, generator=torch.Generator().manual_seed(2))
        return lm.forward_masked(ids, positions, visible, torch.arange(keys).expand(3, keys),
                                 lm.slot_cache(buffer, keys - 5), fold_heads=fold)

    from transformers import AttentionInterface

    from posixlab.models import causal_lm

    calls = []

    def spy(module, query, *args, **kwargs):
        calls.append(tuple(query.shape))
        return causal_lm.folded_sdpa_attention(module, query, *args, **kwargs)

    AttentionInterface.register(causal_lm.FOLDED_SDPA, spy)
    try:
        folded = run(True)
        assert calls == [(3, 4, 5, 16)] * 2  # both layers, 4 heads of 5 queries
        repeated = run(False)
        assert len(calls) == 2
    finally:
        AttentionInterface.register(causal_lm.FOLDED_SDPA, causal_lm.folded_sdpa_attention)
    assert torch.allclose(folded, repeated, atol=1e-5)
    assert lm.model.config._attn_implementation == "sdpa"


def test_a_folded_pass_allocates_what_the_model_counts():
    """A shared-decoding step of a grouped-query model (4 groups of 21 queries on 300 keys, every query's logits
    kept), heads folded: within the count of ``pass_bytes(folded=True)``, and not far under it."""
    import torch

    from posixlab.scoring.memory import ModelShape, pass_bytes

    lm = small_llama(layers=4, hidden=256, heads=4, kv_heads=1)
    shape = ModelShape.of(lm.model, "cpu")
    rows, queries, keys = 4, 21, 300
    buffer = torch.zeros((shape.layers, 2, rows, shape.kv_heads, keys, shape.head_dim))
    visible = torch.rand(rows, queries, keys) < 0.5
    used = measured(lm.forward_masked, torch.randint(3, 2048, (rows, queries)),
                    torch.arange(keys - queries, keys).expand(rows, queries), visible,
                    torch.arange(keys).expand(rows, keys), lm.slot_cache(buffer, keys - queries), 0, True)
    counted = pass_bytes(shape, rows, queries, keys, queries, folded=True)
    assert 0.6 * counted <= used <= counted, (used, counted, round(used / counted, 2))  # measured: 0.75


def test_a_set_decodes_together_only_where_its_prompts_share_most_of_their_tokens():
    lm = small_llama(layers=2, hidden=64, heads=4, kv_heads=1, vocab=1024)
    for exemplars, grouped in ((120, [21]), (20, [])):  # 21 prompts of about 180 and 80 tokens sharing 120 and 20
        engine = Recording(lm, 3, EngineOptions(shared_decoding=True))
        list(engine.score_sets(few_shot_sets(1024, sizes=(21,), exemplars=exemplars)))
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


def test_shared_decoding_with_class_labels_and_a_grammar_equals_decoding_a_row_at_a_time():
    """What a classifier run decodes on a GPU: the prompts of a sample under each rephrasing share its long text, so
    they decode together; the class labels are read beside the responses, and greedy decoding held to a JSON schema
    (llguidance) masks each prompt's logits by its own grammar. Both give what decoding a row at a time gives."""
    import json

    import llguidance
    from tiny_model import CLASSES, build_tiny_lm

    from posixlab.structured.constrain import ConstrainedEngine

    lm = build_tiny_lm()
    texts = ["a joy from start to finish, with a cast that never once lets the story down. " * 3,
             "two hours i will not get back, and a plot that goes nowhere at all in the end. " * 3]
    tasks = ["is the review positive or negative?", "say if the review is positive or negative.",
             "positive or negative: which is it?", "what does the review say?"]
    sets = [[lm.encode(f"{text}\n{task}\nanswer:") for task in tasks] for text in texts]
    labels = [[lm.encode(c, add_special_tokens=False) for c in CLASSES]] * len(sets)
    grammar = llguidance.grammar_from("json_schema", json.dumps(
        {"type": "object", "properties": {"label": {"enum": CLASSES}}, "required": ["label"],
         "additionalProperties": False}))
    grammars = {tuple(p): grammar for prompts in sets for p in prompts}
    for make in (lambda o: Recording(lm, 24, o),
                 lambda o: type("RecordingConstrained", (Recording, ConstrainedEngine), {})(lm, 24, o, grammars)):
        alone = dict(make(EngineOptions(shared_decoding=False)).score_sets(sets, candidates=labels))
        engine = make(EngineOptions(shared_decoding=True))
        shared = dict(engine.score_sets(sets, candidates=labels))
        assert sorted(size for block in engine.blocks for size in block) == [4, 4]  # a group a sample
        for k in range(len(sets)):
            assert shared[k].responses == alone[k].responses
            # sums of up to 24 log-probabilities of a model with large logits: 1e-5 measured at most
            assert np.abs(shared[k].matrix - alone[k].matrix).max() < 5e-5
            assert np.abs(shared[k].candidates - alone[k].candidates).max() < 5e-5
    answers = [json.loads(lm.decode([t for t in r if t not in lm.eos_ids])) for k in shared
               for r in shared[k].responses]
    assert all(answer["label"] in CLASSES for answer in answers), answers  # the last engine: held to the schema


def test_folding_the_heads_of_every_pass_equals_repeating_keys_and_values():
    """``EngineOptions.fold_heads`` (the default on a GPU): prefill and scoring passes of a grouped-query model fold
    its query heads onto their key/value head too. The same greedy tokens and numbers within float rounding as
    repeating keys and values (the CPU's default), with the folded attention really run by both kinds of pass."""
    import torch
    from transformers import AttentionInterface

    from posixlab.models import causal_lm

    lm = small_llama(layers=2, hidden=128, heads=4, kv_heads=1, vocab=2048)
    sets = few_shot_sets(2048, sizes=(6, 5), exemplars=100) + open_sets(2048)
    repeated = dict(ScoringEngine(lm, 6, EngineOptions(shared_decoding=False)).score_sets(sets))
    queries = []

    def spy(module, query, *args, **kwargs):
        queries.append(query.shape[2])
        return causal_lm.folded_sdpa_attention(module, query, *args, **kwargs)

    AttentionInterface.register(causal_lm.FOLDED_SDPA, spy)
    try:
        folded = dict(ScoringEngine(lm, 6, EngineOptions(shared_decoding=False, fold_heads=True)).score_sets(sets))
    finally:
        AttentionInterface.register(causal_lm.FOLDED_SDPA, causal_lm.folded_sdpa_attention)
    # prefill passes (a segment's tokens, up to a whole prompt) and scoring passes (a trie of 5 responses); decoding
    # steps of one query a row are transformers' own (it packs the heads of a single query itself)
    assert max(queries) >= 100 and any(5 < q < 40 for q in queries), sorted(set(queries))
    for k in range(len(sets)):
        assert folded[k].responses == repeated[k].responses
        assert np.abs(folded[k].matrix - repeated[k].matrix).max() < 1e-5
    assert not EngineOptions().folds_heads(torch.device("cpu")) and EngineOptions().folds_heads(torch.device("cuda"))
    with pytest.raises(ConfigError, match="engine.fold_heads takes true, false or null"):
        EngineOptions(fold_heads=1.5)
