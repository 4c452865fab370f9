"""The model backend and the scoring engine on the real packaged SmolLM2, against independent references:
Hugging Face ``generate``, one full forward pass per pair, and the authors' library ``prompt-sensitivity-index``."""

import numpy as np
import pytest
import torch

from posixlab.data import DatasetSpec
from posixlab.errors import ContextLengthError
from posixlab.metrics import psi
from posixlab.pipeline import RunConfig, build_prompt_sets
from posixlab.scoring import bruteforce_matrix, score_prompt_set

OPEN_PROMPTS = ["Q:Name a color.\nA:", "Q:What is the capital of France?\nA:", "Q:Say hi.\nA:",
                "Q: Write one word.\nA:"]


def mmlu_sets(variant, num_sets, num_variants):
    cfg = RunConfig(model=None, dataset=DatasetSpec("mmlu"), variant=variant, num_sets=num_sets,
                    num_variants=num_variants, seed=0)
    return build_prompt_sets(cfg)


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


def test_cached_batched_scores_equal_full_passes_for_mixed_lengths(lm):
    prompt = lm.encode(OPEN_PROMPTS[1])
    prefix = lm.prefill(prompt)
    continuations = [[33488], [33488, 198], [216, 33, 30, 378, 3426], [12869, 198, 50, 42, 23390, 198, 51, 42, 15420],
                     [lm.tokenizer.eos_token_id]]
    batched = lm.score(prefix, continuations)
    one_at_a_time = [lm.score(prefix, [c])[0] for c in continuations]
    full = [lm.score_full(prompt, c) for c in continuations]
    assert np.max(np.abs(np.array(batched) - np.array(full))) < 1e-4
    assert np.max(np.abs(np.array(batched) - np.array(one_at_a_time))) < 1e-4
    # small batches (forced by a tiny logits budget) give the same numbers too
    lm.max_batch_logits, saved = 1, lm.max_batch_logits
    try:
        assert np.max(np.abs(np.array(lm.score(prefix, continuations)) - np.array(batched))) < 1e-4
    finally:
        lm.max_batch_logits = saved


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
        assert np.max(np.abs(scores.matrix - np.array(trace.logprob_matrices[k]))) < 1e-4
        ours = psi(scores.matrix, scores.lengths, mode="reference_compat", max_new_tokens=5)
        assert abs(ours - trace.prompt_sensitivities[k]) < 1e-4


def test_prompt_longer_than_context_is_refused_before_any_forward_pass(lm):
    long_question = "word " * (lm.max_context + 10)
    ids = lm.encode(long_question)
    before = lm.forward_tokens
    with pytest.raises(ContextLengthError, match=r"more than the 8192-token context of smollm2-135m-instruct"):
        lm.check_fits(ids, 5, what="prompt 0 of set demo")
    assert lm.forward_tokens == before
