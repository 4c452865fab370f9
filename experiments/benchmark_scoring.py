"""Benchmark: posixlab's scoring engine against the authors' library, on the same model and the same prompt sets.

In one process, for each workload, it times
  (a) prompt-sensitivity-index 0.0.1, batched (its default batch_size=4),
  (b) prompt-sensitivity-index 0.0.1, unbatched,
  (c) posixlab's engine, cold (no score cache),
and reports wall times, the speed-ups of (c), the largest |Δψ| between (c) in ``reference_compat`` mode and (b),
the largest |Δψ| between (c) in paper mode and a brute-force computation (one full forward pass per pair), the peak
memory of each, and how close (c) comes to the machine's limit:

    limit = irreducible token work / best forward throughput measured in this run
    irreducible work = every distinct prompt's tokens once + every generated token once
                       + every distinct response's tokens once per distinct prompt it is scored under (other than
                         the prompt that generated it)

A scaling table (engine time per set against N and against response length) follows, to plan a full grid.

    python -m experiments.benchmark_scoring                  # both workloads, 1 set each (~8 min on 2 CPU cores)
    python -m experiments.benchmark_scoring --sets 3 --out bench.json
    python -m experiments.benchmark_scoring --no-authors     # the engine, brute force and scaling only

Workloads (N = 21 prompts a set: the original and 20 spelling variants):
  mmlu: the paper's MMLU prompt (header, question, options), 5 new tokens;
  open: the same questions in the open-ended format ``Q:{question}\\nA:`` (Table 5's original), 30 new tokens.
Both use the bundled MMLU sample, so the benchmark needs no download.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from posixlab.data import DatasetSpec, load_items, select_items
from posixlab.metrics import REFERENCE_COMPAT, psi
from posixlab.models import ModelSpec, load_model
from posixlab.scoring import ScoringEngine, bruteforce_matrix
from posixlab.variants import get_variant_generator

WORKLOADS = {"mmlu": {"max_new_tokens": 5, "open": False}, "open": {"max_new_tokens": 30, "open": True}}


# --- measuring ---------------------------------------------------------------------------------------------------------
class PeakMemory:
    """Peak resident memory (CPU) or peak allocated memory (CUDA) above the level at entry, in MiB."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            self.base = self.peak = self._rss()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self._rss())
        self.mib = round((self.peak - self.base) / 2**20, 1)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


@torch.inference_mode()
def best_throughput(lm, repeats: int = 3) -> dict:
    """Tokens per second of plain forward passes over several batch shapes, with every position's logits (what
    scoring needs) and with the last position's only (what a prefill needs); the best of all is the limit's rate."""
    shapes = [(1, 512), (4, 256), (8, 128), (16, 64), (32, 32), (64, 16)]
    generator = torch.Generator().manual_seed(0)
    results = {}
    for batch, length in shapes:
        ids = torch.randint(100, lm.vocab_size - 100, (batch, length), generator=generator).to(lm.device)
        for keep in (0, 1):
            lm.model(input_ids=ids, logits_to_keep=keep)  # warm-up
            times = [timed(lambda: lm.model(input_ids=ids, logits_to_keep=keep))[1] for _ in range(repeats)]
            results[f"{batch}x{length}{'' if keep == 0 else ' last-logits'}"] = batch * length / statistics.median(times)
    best = max(results, key=results.get)
    return {"best_tokens_per_s": round(results[best], 1), "best_shape": best,
            "by_shape": {k: round(v, 1) for k, v in results.items()}}


def irreducible_tokens(prompts, responses) -> int:
    unique_prompts = {}
    for p, r in zip(prompts, responses):
        unique_prompts.setdefault(tuple(p), tuple(r))
    unique_responses = {tuple(r) for r in responses}
    total = 0
    for p, own in unique_prompts.items():
        total += len(p) + len(own) + sum(len(r) for r in unique_responses if r != own)
    return total


# --- the three contenders ----------------------------------------------------------------------------------------------
def authors_model(lm):
    """The authors' HFModel around our already-loaded model and tokenizer (same weights, same tokenizer)."""
    from prompt_sensitivity_index.models.hf_model import HFModel

    model = HFModel.__new__(HFModel)
    model.model_name_or_path, model.model, model.tokenizer = lm.name, lm.model, lm.tokenizer
    if not model.tokenizer.pad_token:  # what HFModel.__init__ does
        model.tokenizer.pad_token = model.tokenizer.unk_token or model.tokenizer.eos_token
    return model


def run_authors(lm, texts, max_new_tokens: int, batched: bool):
    from prompt_sensitivity_index.posix import PosixConfig, get_prompt_sensitivity

    _, trace = get_prompt_sensitivity(authors_model(lm), texts, PosixConfig(max_new_tokens=max_new_tokens,
                                                                            batched=batched))
    return trace


def build_workload(lm, name: str, num_sets: int, seed: int):
    spec = WORKLOADS[name]
    items = select_items(load_items(DatasetSpec("mmlu")), num_sets, seed)
    if spec["open"]:
        items = [dataclasses.replace(i, options=(), subject=None) for i in items]
    generator = get_variant_generator("spelling")
    texts = [generator.build_set(item, 20, seed).texts() for item in items]
    return texts, [[lm.encode(t) for t in s] for s in texts]


def bench_workload(lm, name: str, num_sets: int, seed: int, throughput: float, authors: bool) -> dict:
    max_new = WORKLOADS[name]["max_new_tokens"]
    texts, ids = build_workload(lm, name, num_sets, seed)
    row = {"workload": name, "sets": num_sets, "N": len(ids[0]), "max_new_tokens": max_new,
           "mean_prompt_tokens": round(float(np.mean([len(p) for s in ids for p in s])), 1)}
    print(f"[{name}] engine (c) ...", file=sys.stderr)
    with PeakMemory(lm.device) as mem:
        results, seconds = timed(lambda: dict(ScoringEngine(lm, max_new).score_sets(ids)))
    ours = [results[k] for k in range(len(ids))]
    row["c_engine"] = {"seconds": round(seconds, 2), "s_per_set": round(seconds / num_sets, 2), "peak_mib": mem.mib,
                       "forward_tokens": sum(s.stats["forward_tokens"] for s in ours)}
    work = sum(irreducible_tokens(p, s.responses) for p, s in zip(ids, ours))
    limit = work / throughput
    row["limit"] = {"irreducible_tokens": work, "seconds": round(limit, 2), "engine_over_limit": round(seconds / limit, 2)}
    row["unique_responses_per_set"] = [s.stats["unique_responses"] for s in ours]

    print(f"[{name}] brute force ...", file=sys.stderr)
    with PeakMemory(lm.device) as mem:
        brute, seconds = timed(lambda: [bruteforce_matrix(lm, p, s.responses) for p, s in zip(ids, ours)])
    row["bruteforce"] = {"seconds": round(seconds, 2), "peak_mib": mem.mib}
    row["max_abs_dpsi_paper_vs_bruteforce"] = max(abs(psi(s.matrix, s.lengths) - psi(b, s.lengths))
                                                  for s, b in zip(ours, brute))
    row["max_abs_dlogprob_vs_bruteforce"] = float(max(np.max(np.abs(s.matrix - b)) for s, b in zip(ours, brute)))
    if authors:
        for key, batched in (("a_authors_batched", True), ("b_authors_unbatched", False)):
            print(f"[{name}] authors' library, {'batched' if batched else 'unbatched'} ...", file=sys.stderr)
            with PeakMemory(lm.device) as mem:
                trace, seconds = timed(lambda: run_authors(lm, texts, max_new, batched))
            row[key] = {"seconds": round(seconds, 2), "s_per_set": round(seconds / num_sets, 2), "peak_mib": mem.mib}
            row[f"speedup_over_{key[0]}"] = round(seconds / row["c_engine"]["seconds"], 1)
            if not batched:
                row["max_abs_dpsi_compat_vs_b"] = max(
                    abs(psi(s.matrix, s.lengths, mode=REFERENCE_COMPAT, max_new_tokens=max_new) - ref)
                    for s, ref in zip(ours, trace.prompt_sensitivities))
                decode = lambda r: lm.tokenizer.decode(r, skip_special_tokens=False)  # noqa: E731 - as the library
                row["responses_equal_b"] = all([decode(r) for r in s.responses] == list(tr)
                                               for s, tr in zip(ours, trace.responses))
    return row


def scaling(lm, seed: int) -> list[dict]:
    """Engine seconds per set against N (MMLU, 5 new tokens) and against response length (open, N = 21)."""
    rows = []
    grid = [("mmlu", n, 5) for n in (6, 11, 21)] + [("open", 21, L) for L in (5, 10, 20, 30)]
    cache = {}
    for name, n, max_new in grid:
        if name not in cache:
            cache[name] = build_workload(lm, name, 1, seed)[1][0]
        prompts = cache[name][:n]
        (result,), seconds = timed(lambda: list(ScoringEngine(lm, max_new).score_sets([prompts])))
        stats = result[1].stats
        rows.append({"workload": name, "N": n, "max_new_tokens": max_new, "s_per_set": round(seconds, 2),
                     "forward_tokens": stats["forward_tokens"], "unique_responses": stats["unique_responses"],
                     "mean_response_tokens": round(float(np.mean(result[1].lengths)), 1)})
        print(f"[scaling] {rows[-1]}", file=sys.stderr)
    return rows


# --- reporting ---------------------------------------------------------------------------------------------------------
def markdown(report: dict) -> str:
    lines = [f"# Scoring benchmark: {report['model']} on {report['machine']}", "",
             f"Best forward throughput measured: {report['throughput']['best_tokens_per_s']} tokens/s "
             f"({report['throughput']['best_shape']}).", "",
             "| workload | sets × N | (a) authors batched | (b) authors unbatched | (c) posixlab | (c) vs (a) | "
             "(c) vs (b) | (c) / limit | max abs Δψ compat (c)-(b) | max abs Δψ paper (c)-brute | peak MiB a / b / c |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["workloads"]:
        a, b, c = r.get("a_authors_batched", {}), r.get("b_authors_unbatched", {}), r["c_engine"]
        fmt = lambda d: f"{d['seconds']:.1f} s" if d else "n/a"  # noqa: E731
        lines.append(
            f"| {r['workload']} ({r['max_new_tokens']} new tokens) | {r['sets']} × {r['N']} | {fmt(a)} | {fmt(b)} | "
            f"{fmt(c)} | {r.get('speedup_over_a', 'n/a')}× | {r.get('speedup_over_b', 'n/a')}× | "
            f"{r['limit']['engine_over_limit']}× | {r.get('max_abs_dpsi_compat_vs_b', float('nan')):.2e} | "
            f"{r['max_abs_dpsi_paper_vs_bruteforce']:.2e} | {a.get('peak_mib', 'n/a')} / {b.get('peak_mib', 'n/a')} / "
            f"{c['peak_mib']} |")
    lines += ["", "Scaling (engine, cold, one set):", "",
              "| workload | N | max new tokens | mean response tokens | unique responses | forward tokens | s per set |",
              "|---|---|---|---|---|---|---|"]
    for s in report["scaling"]:
        lines.append(f"| {s['workload']} | {s['N']} | {s['max_new_tokens']} | {s['mean_response_tokens']} | "
                     f"{s['unique_responses']} | {s['forward_tokens']:,} | {s['s_per_set']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a packaged model")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--sets", type=int, default=1, help="prompt sets per workload")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-authors", action="store_true", help="skip the authors' library (a) and (b)")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--out", default=None, help="write the JSON report here, and the Markdown beside it")
    args = parser.parse_args(argv)

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    lm = load_model(ModelSpec(args.model, "packaged", args.model))
    machine = f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    if lm.device.type == "cuda":
        machine = torch.cuda.get_device_name(lm.device)
    print("measuring forward throughput ...", file=sys.stderr)
    throughput = best_throughput(lm)
    report = {"model": args.model, "machine": machine, "throughput": throughput, "workloads": [], "scaling": []}
    for name in args.workloads:
        report["workloads"].append(bench_workload(lm, name, args.sets, args.seed, throughput["best_tokens_per_s"],
                                                  authors=not args.no_authors))
    if not args.no_scaling:
        report["scaling"] = scaling(lm, args.seed)
    text = markdown(report)
    print(json.dumps(report, indent=2))
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        Path(args.out).with_suffix(".md").write_text(text)
    return report


if __name__ == "__main__":
    main()
