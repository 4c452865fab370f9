"""Check that the engine is exact on a model: greedy == transformers' generate, engine matrix == brute force, past
the model's attention window too, and batched chats (the judge's, the rephraser's) == each chat alone.

``tests/test_model_families.py`` holds 20 architectures to their own passes on tiny random weights; run this on the
checkpoint itself before trusting its numbers (a packaged model, a configured one, a hub id or a local folder):

    python -m experiments.verify_models                      # every packaged model
    python -m experiments.verify_models --models gemma3-270m
    python -m experiments.verify_models --models meta-llama/Llama-2-7b-hf --device cuda

Three checks a model, each a field of the JSON line it prints, and exit status 1 if one fails:
- ``short``: an MMLU template set (0-shot, a few hundred tokens at most): greedy responses against ``generate``, the
  engine's matrix against one full pass per pair (``max_abs_logprob_diff``), ψ both ways.
- ``past_window`` (a model with sliding-window attention: Gemma 2 and 3, Mistral v0.1, OLMo 3, ...): the same on a
  set whose prompts are ``--past`` tokens longer than the window, with a long shared beginning.
- ``chats`` (a model with a chat template): those long prompts (``--past`` tokens without a window) as chats,
  decoded together and each alone, greedily with first-token log-probabilities (the judge) and sampled (the
  rephraser): replies that differ, the largest gap between log-probabilities.

Measured (2026-11-25, 2 CPU cores, float32; 1.1 GB fetched and converted once) for qwen2.5-coder-1.5b-instruct:
greedy equals ``generate`` on all 5 prompts of a template set, engine against brute force max |Δ log P| 2.4e-5,
ψ 0.788106 (engine) and 0.788106 (brute force). Gemma-3-270M past its 512-token window: docs/choices.md, twelfth
session.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np
import torch

from experiments import run_main
from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError
from posixlab.metrics import psi
from posixlab.models import PACKAGED_MODELS, load_model
from posixlab.scoring import bruteforce_matrix, score_prompt_set
from posixlab.tasks.posix import PosixConfig, build_prompt_sets

TOLERANCE = 1e-4  # nats: the engine's contract (posixlab/scoring/engine.py); a wrong key moves an entry far more
SENTENCE = "On day {i} the committee met and discussed item {j}, which was then put to a vote. "
QUESTIONS = ("\nQuestion: what was discussed on day 3?\nAnswer:", "\nQ: which item came up on day three?\nA:",
             "\nWhat was the topic on day 3? Answer:", "\nDay 3: what did they discuss?")


def verify(lm, num_variants: int, max_new_tokens: int, past: int) -> dict:
    """The three checks on ``lm`` (a ``CausalLM``), as a JSON-ready dict."""
    prompt_set = build_prompt_sets(PosixConfig(model=None, dataset=DatasetSpec("mmlu"), variant="template",
                                               num_sets=1, num_variants=num_variants), progress=False)[0][0]
    out = {"model": lm.name, "sliding_window": lm.sliding_window,
           "short": exact(lm, [lm.encode(t) for t in prompt_set.texts()], max_new_tokens)}
    if lm.sliding_window or lm.tokenizer.chat_template:  # the long prompts only where a check reads them
        texts = long_prompts(lm, (lm.sliding_window or 0) + past, max_new_tokens)
    if lm.sliding_window:
        out["past_window"] = exact(lm, [lm.encode(t) for t in texts], max_new_tokens)
    if lm.tokenizer.chat_template:  # a model without one is no judge or rephraser
        out["chats"] = batched_chats(lm, texts, max_new_tokens)
    checks = [out["short"], out.get("past_window", {})]
    out["exact"] = all(c.get("greedy_equals_generate", True) and c.get("max_abs_logprob_diff", 0) < TOLERANCE
                       for c in checks) and out.get("chats", {}).get("same", True)
    return out


def long_prompts(lm, tokens: int, max_new_tokens: int) -> list[str]:
    """Prompts of about ``tokens`` tokens (a passage they share, then one question each), within the context."""
    if lm.max_context and tokens + max_new_tokens + 32 > lm.max_context:
        raise ConfigError(f"--past takes {lm.name} beyond its {lm.max_context}-token context; give a smaller one")
    passage, i = "", 0
    while len(lm.encode(passage)) < tokens:
        passage += SENTENCE.format(i=i, j=i * 7 % 13)
        i += 1
    return [passage + q for q in QUESTIONS]


def exact(lm, ids: list[list[int]], max_new_tokens: int) -> dict:
    """Greedy responses against ``generate`` and the engine's matrix against one full pass per pair."""
    scores = score_prompt_set(lm, ids, max_new_tokens)
    agrees = True
    for p, r in zip(ids, scores.responses):
        with torch.inference_mode():
            ref = lm.model.generate(torch.tensor([p], device=lm.device),
                                    attention_mask=torch.ones(1, len(p), dtype=torch.long, device=lm.device),
                                    max_new_tokens=max_new_tokens, do_sample=False,
                                    pad_token_id=lm.tokenizer.pad_token_id)[0, len(p):].tolist()
        agrees &= ref[: len(r)] == r
    reference = bruteforce_matrix(lm, ids, scores.responses)
    return {"N": len(ids), "tokens": max(map(len, ids)), "greedy_equals_generate": bool(agrees),
            "max_abs_logprob_diff": float(np.max(np.abs(scores.matrix - reference))),
            "psi_engine": psi(scores.matrix, scores.lengths), "psi_bruteforce": psi(reference, scores.lengths)}


def batched_chats(lm, texts: list[str], max_new_tokens: int) -> dict:
    """The chats of ``texts`` decoded together and each alone: greedy with first-token log-probabilities (the
    judge's ``replies_and_first_tokens``) and sampled (the rephraser's ``sample_chats``)."""
    from posixlab.models.sampling import replies_and_first_tokens, sample_chats
    from posixlab.openai_client import Generation

    chats = [[{"role": "user", "content": t}] for t in texts]
    greedy = Generation(max_tokens=max_new_tokens, temperature=0.0)
    together = replies_and_first_tokens(lm, chats, greedy, 5)
    alone = [replies_and_first_tokens(lm, [chat], greedy, 5)[0] for chat in chats]
    gap = max(abs(a - b) for (_, x), (_, y) in zip(together, alone) for (_, a), (_, b) in zip(x, y))
    sampled = Generation(max_tokens=max_new_tokens, temperature=1.0, n=2, seed=0)
    drawn = sample_chats(lm, [(chat, sampled) for chat in chats])
    drawn_alone = [sample_chats(lm, [(chat, sampled)])[0] for chat in chats]
    differ = sum(a[0] != b[0] for a, b in zip(together, alone)) + sum(a != b for a, b in zip(drawn, drawn_alone))
    return {"chats": len(chats), "replies_that_differ": differ, "max_first_token_logprob_diff": gap,
            "same": differ == 0 and gap < TOLERANCE}


def main(argv=None) -> int:
    from posixlab.api import resolve_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(PACKAGED_MODELS),
                        help="packaged or configured names, hub ids or folders")
    parser.add_argument("--num-variants", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--past", type=int, default=200, help="tokens the long prompts run past the window")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32", help="float32: the engine's exactness is measured in it")
    args = parser.parse_args(argv)
    specs = [resolve_model(name, None)[0] for name in args.models]  # every name checked before any model loads
    failed = 0
    for spec in specs:
        started = time.perf_counter()
        lm = load_model(dataclasses.replace(spec, device=args.device, dtype=args.dtype))
        result = {"load_s": round(time.perf_counter() - started, 1),
                  **verify(lm, args.num_variants, args.max_new_tokens, args.past)}
        failed += not result["exact"]
        print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main)
