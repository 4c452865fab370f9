"""The model backend and the scoring engine on the real packaged SmolLM2, against independent references:
Hugging Face ``generate``, one full forward pass per pair, and the authors' library ``prompt-sensitivity-index``."""

import numpy as np
import pytest
import torch

from posixlab.data import DatasetSpec
from posixlab.errors import ContextLengthError
from posixlab.metrics import psi
from posixlab.tasks.posix import PosixConfig, build_prompt_sets
from posixlab.errors import CacheError
from posixlab.scoring import EngineOptions, ScoreCache, ScoringEngine, bruteforce_matrix, score_prompt_set

pytestmark = pytest.mark.slow  # every test runs the packaged model (the session fixture `lm`)

OPEN_PROMPTS = ["Q:Name a color.\nA:", "Q:What is the capital of France?\nA:", "Q:Say hi.\nA:",
                "Q: Write one word.\nA:"]


def mmlu_sets(variant, num_sets, num_variants):
    cfg = PosixConfig(model=None, dataset=DatasetSpec("mmlu"), variant=variant, num_sets=num_sets,
                    num_variants=num_variants, seed=0)
    return build_prompt_sets(cfg, progress=False)[0]


def test_greedy_matches_transformers_generate(lm):
    for text in OPEN_PROMPTS[:2] + [mmlu_sets("template", 1, 1)[0].prompts[1].text]:
        ids = lm.encode(text)
        ours, _ = lm.greedy(lm.prefill(ids), 12)
        with torch.inference_mode():
            ref = lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                    max_new_tokens=12, do_sample=False, pad_token_id=lm.tokenizer.pad_token_id)
        assert ours == ref[0, len(ids):].tolist()


def test_response_stops_at_first_eos_and_keeps_it(lm):
    # An instruct model under its own chat template ends its answer with <|im_end|>.
    ids = lm.encode(lm.apply_chat_template("What is the capital of France?"), add_special_tokens=False)
    tokens, logprobs = lm.greedy(lm.prefill(ids), 30)
    assert tokens[-1] in lm.eos_ids and not any(t in lm.eos_ids for t in tokens[:-1])
    assert lm.decode(tokens) == "The capital of France is Paris." and len(logprobs) == len(tokens)


def chat_ids(lm, question):
    return lm.encode(lm.apply_chat_template(question), add_special_tokens=False)


def mixed_sets(lm):
    """Two sets with prompts of different lengths whose responses have different lengths (some end at EOS)."""
    # the chat prompts share their long system-prompt beginning, which the engine runs once
    return [[chat_ids(lm, q) for q in ("What is the capital of France?", "Name one primary color.",
                                        "What is 2+2? Answer with a number only.", "Say hello.")],
            [lm.encode(t) for t in OPEN_PROMPTS]]


def test_batched_engine_equals_one_at_a_time_for_mixed_lengths(lm):
    """Rows of different lengths, two sets in one wave, responses of different lengths: every response equals the
    one-prompt greedy decode and every entry equals one full forward pass of that (prompt, response) alone."""
    sets = mixed_sets(lm)
    results = dict(ScoringEngine(lm, 12).score_sets(sets))
    lengths = set()
    for k, prompts in enumerate(sets):
        scores = results[k]
        for prompt, response in zip(prompts, scores.responses):
            assert response == lm.greedy(lm.prefill(prompt), 12)[0]
        assert np.max(np.abs(scores.matrix - bruteforce_matrix(lm, prompts, scores.responses))) < 1e-4
        lengths |= set(scores.lengths)
    assert len(lengths) >= 2 and min(lengths) < 12, lengths  # some end at EOS, some run to the limit


def test_batch_sizes_do_not_change_results(lm):
    """The smallest budgets (one row per forward pass, one row per scoring chunk; a memory budget that holds one set
    and little more) against the defaults."""
    sets = mixed_sets(lm) + [[lm.encode(t) for t in mmlu_sets("spelling", 1, 4)[0].texts()]]
    default = dict(ScoringEngine(lm, 12).score_sets(sets))
    tiny = dict(ScoringEngine(lm, 12, EngineOptions(batch_tokens=1, memory_gb=0.5, max_wave_rows=1)).score_sets(sets))
    for k in range(len(sets)):
        assert tiny[k].responses == default[k].responses
        assert np.max(np.abs(tiny[k].matrix - default[k].matrix)) < 1e-4


def test_response_trie_shares_prefixes_and_counts_work(lm):
    sets = mixed_sets(lm)
    results = dict(ScoringEngine(lm, 12).score_sets(sets))
    for k, prompts in enumerate(sets):
        stats = results[k].stats
        responses = {tuple(r) for r in results[k].responses}
        # per prompt: its tokens, its generated tokens but the last, and at most every other response's inputs
        bound = sum(len(p) + len(r) - 1 + sum(len(o) - 1 for o in responses if o != tuple(r))
                    for p, r in zip(prompts, results[k].responses))
        assert 0 < stats["forward_tokens"] == stats["engine_tokens"] <= bound < stats["forward_tokens_naive"]
        if k == 0:  # the shared system prompt (over 20 tokens) runs once instead of four times
            assert stats["engine_tokens"] <= bound - 3 * 20


def test_engine_matrix_equals_bruteforce_and_paper_psi_agrees(lm):
    for prompt_set, max_new in [(mmlu_sets("spelling", 1, 4)[0], 5), (None, 16)]:
        texts = prompt_set.texts() if prompt_set else OPEN_PROMPTS
        ids = [lm.encode(t) for t in texts]
        scores = score_prompt_set(lm, ids, max_new)
        reference = bruteforce_matrix(lm, ids, scores.responses)
        assert np.max(np.abs(scores.matrix - reference)) < 1e-4
        assert abs(psi(scores.matrix, scores.lengths) - psi(reference, scores.lengths)) < 1e-4
        # the diagonal agrees with the log-probabilities recorded while generating
        assert np.allclose(np.diag(scores.matrix), [sum(g) for g in scores.generation_logprobs], atol=1e-4)
    assert len(set(scores.lengths)) > 1, "the open-ended set should have responses of different lengths"


def test_duplicate_prompts_and_responses_are_computed_once(lm):
    ids = [lm.encode(t) for t in [OPEN_PROMPTS[0], OPEN_PROMPTS[0], OPEN_PROMPTS[2]]]
    scores = score_prompt_set(lm, ids, 4)
    assert scores.stats["unique_prompts"] == 2
    assert scores.responses[0] == scores.responses[1]
    assert np.array_equal(scores.matrix[0], scores.matrix[1])
    assert scores.stats["forward_tokens"] < scores.stats["forward_tokens_naive"]


def test_reference_compat_equals_the_authors_library(lm):
    """prompt-sensitivity-index==0.0.1, unbatched, on the same model and the same prompt sets."""
    from prompt_sensitivity_index.posix import PosixConfig, get_prompt_sensitivity
    from prompt_sensitivity_index.models.hf_model import HFModel

    ref_model = HFModel.__new__(HFModel)
    ref_model.model, ref_model.tokenizer = lm.model, lm.tokenizer
    sets = mmlu_sets("spelling", 2, 4) + mmlu_sets("template", 1, 4)
    _, trace = get_prompt_sensitivity(ref_model, [s.texts() for s in sets], PosixConfig(max_new_tokens=5, batched=False))
    for k, prompt_set in enumerate(sets):
        scores = score_prompt_set(lm, [lm.encode(t) for t in prompt_set.texts()], 5)
        # The library's float32 forward passes differ from ours by a near-constant offset per prompt row, measured
        # at 0.8e-4 to 1.01e-4 on summed 5-token log-probs (about 4.2 in size) depending on the machine: rounding, not
        # a different computation (a wrong, missing or extra token moves an entry by 0.1 or more).
        assert np.max(np.abs(scores.matrix - np.array(trace.logprob_matrices[k]))) < 3e-4
        ours = psi(scores.matrix, scores.lengths, mode="reference_compat", max_new_tokens=5)
        assert abs(ours - trace.prompt_sensitivities[k]) < 1e-4


def test_prompt_longer_than_context_is_refused_before_any_forward_pass(lm, tmp_path):
    """A whole run whose too-long prompt is the last prompt of its last set: every prompt is encoded and checked
    before the first forward pass, so the sets before it are not run either."""
    import posixlab

    sets = [OPEN_PROMPTS[:2], OPEN_PROMPTS[2:] + ["word " * (lm.max_context + 10)]]
    before = lm.forward_tokens
    with pytest.raises(ContextLengthError, match=r"prompt 2 of set set-1\S* has \d+ tokens.*more than the "
                                                 r"8192-token context of smollm2-135m-instruct"):
        posixlab.evaluate(sets, model=lm, max_new_tokens=5, embedding=None, output_dir=tmp_path / "run",
                          progress=False)
    assert lm.forward_tokens == before
    assert not (tmp_path / "run" / "sets.jsonl").exists()  # no set was scored and written
    # the counter does count this path: the first set alone runs
    posixlab.evaluate(sets[:1], model=lm, max_new_tokens=5, embedding=None, progress=False)
    assert lm.forward_tokens > before


def test_score_cache_serves_a_rerun_bit_for_bit(lm, tmp_path):
    sets = [[lm.encode(t) for t in s.texts()] for s in mmlu_sets("template", 2, 3)]
    cache = ScoreCache(tmp_path, lm.identity)
    first = dict(ScoringEngine(lm, 5, cache=cache).score_sets(sets))
    before = lm.forward_tokens
    second = dict(ScoringEngine(lm, 5, cache=cache).score_sets(sets))
    assert lm.forward_tokens == before, "a cached rerun runs no forward pass"
    for k in range(len(sets)):
        assert second[k].stats["cached"] and not first[k].stats["cached"]
        assert np.array_equal(first[k].matrix, second[k].matrix) and first[k].responses == second[k].responses
        assert first[k].generation_logprobs == second[k].generation_logprobs


def test_corrupted_or_foreign_cache_files_are_reported(lm, tmp_path):
    import shutil
    import sqlite3

    sets = [[lm.encode(t) for t in OPEN_PROMPTS[:2]]]
    cache = ScoreCache(tmp_path / "a", lm.identity)
    list(ScoringEngine(lm, 3, cache=cache).score_sets(sets))
    cache.close()

    # another model's cache copied in place of this one's
    other = {**lm.identity, "dtype": "bfloat16"}
    ScoreCache(tmp_path / "b", other).close()
    (foreign_path,) = (tmp_path / "b").glob("*.sqlite")
    shutil.copy(cache.path, foreign_path)
    with pytest.raises(CacheError, match="belongs to another model or setting"):
        ScoreCache(tmp_path / "b", other)

    # a value changed behind the cache's back: its checksum no longer matches
    db = sqlite3.connect(cache.path)
    db.execute("UPDATE scores SET payload = ? WHERE rowid = (SELECT MIN(rowid) FROM scores)", ('{"logprob": -1.0}',))
    db.commit()
    db.close()
    with pytest.raises(CacheError, match="fails its checksum.*rm '"):
        list(ScoringEngine(lm, 3, cache=ScoreCache(tmp_path / "a", lm.identity)).score_sets(sets))

    # not a database at all
    cache.path.write_bytes(b"this is not a cache " * 400)
    with pytest.raises(CacheError, match="cannot be read as a cache|not a posixlab score cache"):
        ScoreCache(tmp_path / "a", lm.identity)
