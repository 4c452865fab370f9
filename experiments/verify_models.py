"""Check that the engine is exact on a model: greedy == transformers' generate, engine matrix == brute force.

The test suite does this on SmolLM2; run this for any other model before trusting its numbers (architectures differ
in their caches: Gemma 3 mixes sliding-window and global attention layers, for example).

    python -m experiments.verify_models                      # every packaged model
    python -m experiments.verify_models --models gemma3-270m

Measured for qwen2.5-coder-1.5b-instruct (2026-11-25, 2 CPU cores, float32; 1.1 GB fetched and converted once):
greedy equals ``generate`` on all 5 prompts of a template set, engine against brute force max |Δ log P| 2.4e-5,
ψ 0.788106 (engine) and 0.788106 (brute force).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from experiments import run_main
from posixlab.data import DatasetSpec
from posixlab.metrics import psi
from posixlab.models import PACKAGED_MODELS, ModelSpec, load_model
from posixlab.tasks.posix import PosixConfig, build_prompt_sets
from posixlab.scoring import bruteforce_matrix, score_prompt_set


def verify(name: str, num_variants: int, max_new_tokens: int) -> dict:
    t0 = time.perf_counter()
    lm = load_model(ModelSpec(name, "packaged", name))
    load_s = time.perf_counter() - t0
    prompt_set = build_prompt_sets(PosixConfig(model=None, dataset=DatasetSpec("mmlu"), variant="template",
                                             num_sets=1, num_variants=num_variants), progress=False)[0][0]
    ids = [lm.encode(t) for t in prompt_set.texts()]
    scores = score_prompt_set(lm, ids, max_new_tokens)
    generate_agrees = True
    for p, r in zip(ids, scores.responses):
        with torch.inference_mode():
            ref = lm.model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                    max_new_tokens=max_new_tokens, do_sample=False,
                                    pad_token_id=lm.tokenizer.pad_token_id)[0, len(p):].tolist()
        generate_agrees &= ref[: len(r)] == r
    reference = bruteforce_matrix(lm, ids, scores.responses)
    return {"model": name, "load_s": round(load_s, 1), "N": len(ids), "greedy_equals_generate": bool(generate_agrees),
            "max_abs_logprob_diff": float(np.max(np.abs(scores.matrix - reference))),
            "psi_engine": psi(scores.matrix, scores.lengths), "psi_bruteforce": psi(reference, scores.lengths)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(PACKAGED_MODELS))
    parser.add_argument("--num-variants", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    args = parser.parse_args(argv)
    for name in args.models:
        print(json.dumps(verify(name, args.num_variants, args.max_new_tokens)))


if __name__ == "__main__":
    run_main(main)
