"""Benchmark: what a cell costs before its first forward pass, tokenising its prompts one at a time (the baseline)
against one tokenizer call per set (``TokenizedModel.encode_batch``), in one process, on the same sets.

Every request is built and checked before any forward pass, so a paper-sized cell (MMLU's 14,042 sets of N = 21 at
3 shots: about 300,000 prompts of about 525 tokens) tokenises everything first, and holds the ids until its last set
is scored. The benchmark builds the sets once, then times each method ``--repeats`` times (median) and measures what
the ids of every set hold in memory (tracemalloc): one int object per id against shared ones.

    python -m experiments.benchmark_inputs                       # 100 sets of the bundled sample, 3 shots
    python -m experiments.benchmark_inputs --sets 1000 --data mmlu.jsonl   # the full test split, saved as JSONL
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc

from posixlab.data import DatasetSpec
from posixlab.errors import PosixlabError
from posixlab.models import ModelSpec
from posixlab.models.loading import open_for_plan
from posixlab.tasks.posix import PosixConfig, build_prompt_sets

MODEL = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")


def one_at_a_time(lm, sets: list[list[str]]) -> list[list[list[int]]]:
    """The baseline: one tokenizer call per prompt."""
    return [[lm.encode(text) for text in texts] for texts in sets]


def one_call_a_set(lm, sets: list[list[str]]) -> list[list[list[int]]]:
    return [lm.encode_batch(texts) for texts in sets]


def held_bytes(method, lm, sets) -> tuple[int, list]:
    """The bytes the ids ``method`` returns still hold once it is done (tracemalloc), and the ids."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    ids = method(lm, sets)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held, ids


def measure(num_sets: int, shots: int, repeats: int, data: str | None = None) -> dict:
    dataset = DatasetSpec("mmlu", source="path", path=data) if data else DatasetSpec("mmlu")
    cfg = PosixConfig(model=MODEL, dataset=dataset, num_sets=num_sets, shots=shots, embedding=None)
    prompt_sets, _ = build_prompt_sets(cfg, progress=False)
    sets = [[p.text for p in s.prompts] for s in prompt_sets]
    lm = open_for_plan(MODEL)
    times = {"one at a time": [], "one call a set": []}
    for _ in range(repeats):  # interleaved, so that a busy machine slows both alike
        for name, method in (("one at a time", one_at_a_time), ("one call a set", one_call_a_set)):
            start = time.perf_counter()
            method(lm, sets)
            times[name].append(time.perf_counter() - start)
    held_base, base_ids = held_bytes(one_at_a_time, lm, sets)
    held_batch, batch_ids = held_bytes(one_call_a_set, lm, sets)
    if base_ids != batch_ids:
        raise AssertionError("one call a set gave other ids than one call a prompt")
    tokens = sum(len(ids) for s in batch_ids for ids in s)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"sets": len(sets), "prompts": sum(map(len, sets)), "tokens": tokens, "shots": shots, "repeats": repeats,
            "median_s": medians, "speedup": medians["one at a time"] / medians["one call a set"],
            "bytes_per_token": {"one at a time": held_base / tokens, "one call a set": held_batch / tokens}}


def report(result: dict) -> str:
    lines = [f"{result['sets']} sets, {result['prompts']} prompts, {result['tokens']} tokens "
             f"({result['shots']}-shot), median of {result['repeats']}:",
             "| method | seconds | seconds a set | bytes a token held |", "|---|---|---|---|"]
    for name, seconds in result["median_s"].items():
        lines.append(f"| {name} | {seconds:.3f} | {seconds / result['sets']:.4f} | "
                     f"{result['bytes_per_token'][name]:.1f} |")
    lines.append(f"one call a set is {result['speedup']:.2f}x faster, and its ids take "
                 f"{result['bytes_per_token']['one at a time'] / result['bytes_per_token']['one call a set']:.1f}x "
                 f"less memory (the same ids: checked)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark_inputs", description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=100, help="prompt sets (N = 21 each; default 100)")
    parser.add_argument("--shots", type=int, default=3, help="few-shot exemplars a prompt (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="timings per method; the median is reported")
    parser.add_argument("--data", help="MMLU as JSONL (question, subject, choices, answer); default: the bundled "
                                       "sample of 285 questions")
    args = parser.parse_args(argv)
    try:
        print(report(measure(args.sets, args.shots, args.repeats, args.data)))
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
