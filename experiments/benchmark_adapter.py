"""Benchmark: a LoRA adapter merged into the weights (what ``model.adapter`` does) against peft's unmerged model, in
one process, on the same batch: forward-pass time (median of ``--repeats``) and the largest difference in
log-probabilities.

The adapter is made here (rank ``--rank`` on every attention and MLP projection, seeded weights of a trained
adapter's size), on the packaged
SmolLM2-135M-Instruct in float32, so nothing is downloaded.

    python -m experiments.benchmark_adapter                     # 16 prompts of 256 tokens, rank 16
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from posixlab.models import ModelSpec
from posixlab.models.loading import load_model

MODEL = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct", device="cpu", dtype="float32")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_adapter(base_folder: str, folder: Path, rank: int) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_folder),
                           LoraConfig(r=rank, target_modules=TARGETS, init_lora_weights=False))
    with torch.no_grad():  # peft's random B (a trained adapter's starts at zero) shrunk to a trained one's size
        for name, weights in model.named_parameters():
            if "lora_B" in name:
                weights.mul_(0.05)
    model.save_pretrained(folder)


def timed(model, batch: torch.Tensor, repeats: int) -> tuple[float, torch.Tensor]:
    with torch.no_grad():
        out = torch.log_softmax(model(batch).logits.float(), dim=-1)  # warm-up, and the numbers compared
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            model(batch)
            times.append(time.perf_counter() - start)
    return statistics.median(times), out


def measure(prompts: int, tokens: int, rank: int, repeats: int) -> dict:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from posixlab.models.loading import model_folder

    base_folder = model_folder(MODEL)[0]
    with tempfile.TemporaryDirectory() as tmp:
        adapter = Path(tmp) / "lora"
        make_adapter(base_folder, adapter, rank)
        merged = load_model(dataclasses.replace(MODEL, adapter=str(adapter))).model
        unmerged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_folder), str(adapter)).eval()
        seeded = torch.Generator().manual_seed(0)
        batch = torch.randint(100, merged.config.vocab_size, (prompts, tokens), generator=seeded)
        merged_s, merged_out = timed(merged, batch, repeats)
        unmerged_s, unmerged_out = timed(unmerged, batch, repeats)
    greedy = unmerged_out.argmax(dim=-1, keepdim=True)  # the tokens a response is made of: what ψ scores
    return {"prompts": prompts, "tokens": tokens, "rank": rank, "repeats": repeats, "merged_s": merged_s,
            "unmerged_s": unmerged_s, "max_difference": float((merged_out - unmerged_out).abs().max()),
            "greedy_difference": float((merged_out.gather(-1, greedy) - unmerged_out.gather(-1, greedy)).abs().max())}


def report(r: dict) -> str:
    return (f"{r['prompts']} prompts of {r['tokens']} tokens, LoRA rank {r['rank']} on every projection, float32, "
            f"median of {r['repeats']}:\n| model | seconds a forward pass |\n|---|---|\n"
            f"| merged (model.adapter) | {r['merged_s']:.3f} |\n| peft, unmerged | {r['unmerged_s']:.3f} |\n"
            f"merged is {r['unmerged_s'] / r['merged_s']:.2f}x faster; the greedy tokens' log-probabilities within "
            f"{r['greedy_difference']:.1e} (every token's within {r['max_difference']:.1e})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark_adapter",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(report(measure(args.prompts, args.tokens, args.rank, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
