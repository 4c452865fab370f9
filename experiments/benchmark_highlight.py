"""Benchmark: the report's edit highlight (each variant against its set's original, ``posixlab.report.html``), as the
page draws it (differing stretches past 400 characters matched word by word, then by character within short
replaced runs) against matching every character (what it replaced), on the prompt sets of the bundled MMLU sample
(no model is loaded). A page opens 500 sets of up to 21 prompts, so its time goes where the prompts are long and
their edits far apart: few-shot prompts whose exemplars are edited too (``task.perturb_shots``), templates, format
variants. Per workload: the median over ``--repeats`` of the seconds to highlight every pair both ways in this
process, their ratio, and how many pairs got other (equally valid) opcodes.

    python -m experiments.benchmark_highlight                   # 60 sets a workload, 3 repeats (about 3 minutes)
    python -m experiments.benchmark_highlight --sets 20 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager

import posixlab.report.html as page
from posixlab.data import DatasetSpec
from posixlab.models import ModelSpec
from posixlab.tasks.posix import PosixConfig, build_prompt_sets

WORKLOADS = {  # name: (variant, shots, perturb_shots)
    "spelling, 0-shot": ("spelling", 0, False),
    "spelling, 3-shot, exemplars edited": ("spelling", 3, True),
    "template, 0-shot": ("template", 0, False),
    "format, 0-shot": ("format", 0, False),
}


@contextmanager
def every_character():
    """The highlight as it was: every differing stretch matched character by character."""
    saved = page.CHARACTER_MATCHED
    page.CHARACTER_MATCHED = float("inf")
    try:
        yield
    finally:
        page.CHARACTER_MATCHED = saved


def pairs(variant: str, shots: int, perturb: bool, sets: int) -> list[tuple[str, str]]:
    model = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")  # its name only: never loaded
    config = PosixConfig(model=model, dataset=DatasetSpec("mmlu", source="sample"), variant=variant, shots=shots,
                         perturb_shots=perturb, num_sets=sets, embedding=None)
    prompt_sets, _ = build_prompt_sets(config, progress=False)
    return [(s.prompts[0].text, p.text) for s in prompt_sets for p in s.prompts[1:]]


def seconds(work: list[tuple[str, str]]) -> tuple[float, list]:
    start = time.perf_counter()
    ops = [page._edit_opcodes(original, variant) for original, variant in work]
    return time.perf_counter() - start, ops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=60, help="prompt sets a workload (N = 21)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print("| workload | pairs | mean characters | every character (s) | by word, then character (s) | ratio | "
          "other opcodes |\n|---|---|---|---|---|---|---|")
    for name, (variant, shots, perturb) in WORKLOADS.items():
        work = pairs(variant, shots, perturb, args.sets)
        old, new = [], []
        for _ in range(args.repeats):  # alternated, so that a busy machine slows both alike
            with every_character():
                took, old_ops = seconds(work)
            old.append(took)
            took, new_ops = seconds(work)
            new.append(took)
        other = sum(a != b for a, b in zip(old_ops, new_ops))
        length = statistics.mean(len(v) for _, v in work)
        print(f"| {name} | {len(work)} | {length:.0f} | {statistics.median(old):.3f} | {statistics.median(new):.3f} "
              f"| {statistics.median(old) / statistics.median(new):.1f}x | {other} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
