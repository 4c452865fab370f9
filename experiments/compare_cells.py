"""What changed between two versions of the same cells: POSIX and accuracy set by set, with paired tests.

    python -m experiments.compare_cells BEFORE.csv AFTER.csv [--variants paraphrase,mixture] [--out FILE.md]
    python -m experiments.compare_cells RESULTS RESULTS --models llama2-7b,llama2-7b+my-lora   # two models


BEFORE and AFTER are per_set.csv files (``python -m posixlab.analysis`` writes them) or run/sweep folders. Each cell
(model, data set, variant type, shots) found in both, with some ψ changed, is compared on the prompt sets both have: mean ± sd of ψ before
and after, the median of the per-set difference (after − before), the paired Wilcoxon signed-rank p over those sets
(Holm-adjusted over the cells compared), and the options accuracy before and after where both runs scored options.
Written for redoing the paraphrase cells with a new rephraser (figures/rephraser_effect.md), so a reader sees what
the rephraser did to each number; any two versions of a grid compare the same way.

``--models A,B`` compares model A's cells in BEFORE with model B's in AFTER (the same folder may be both): a fine-tune
against its base (``model.adapter``: the adapted model is named ``<base>+<adapter>``), an instruction-tuned model
against its base, on the prompt sets both were run on (the same seed and data give both the same sets).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from posixlab.analysis.collect import GridWarning, cells, decode_correct, load_rows
from posixlab.analysis.paper import dataset_label, label
from posixlab.errors import PosixlabError
from posixlab.metrics import accuracy as acc
from posixlab.metrics.stats import holm_adjust, paired_wilcoxon


def options_accuracy(rows: list[dict]) -> float | None:
    """Options accuracy as accuracy.md reports it (AvgP: the mean over prompts of each prompt's accuracy over the
    sets that scored it); None if no set was scored.

    >>> options_accuracy([{"correct_options": "10"}, {"correct_options": "1-"}])  # prompt 0: 1.0, prompt 1: 0.0
    0.5
    >>> options_accuracy([{"correct_options": None}]) is None
    True
    """
    matrix = [c for c in (decode_correct(r.get("correct_options")) for r in rows) if c]
    if not matrix:
        return None
    width = max(len(c) for c in matrix)
    return float(acc.accuracy_spread([c + [None] * (width - len(c)) for c in matrix])["mean"])


def compare(before: list[dict], after: list[dict], variants: set[str] | None = None,
            models: tuple[str, str] | None = None) -> list[dict]:
    """One record per cell present in both, compared on the sets both have (see the module docstring); ``models``
    (A, B): model A's cells before against model B's after, as one model named "A → B"."""
    if models:
        pair = f"{models[0]} → {models[1]}"
        before = [{**r, "model": pair} for r in before if r["model"] == models[0]]
        after = [{**r, "model": pair} for r in after if r["model"] == models[1]]
    old, new = cells(before), cells(after)
    out = []
    for cell in sorted(set(old) & set(new), key=lambda c: (c.dataset, c.model, c.variant, c.shots)):
        if variants and cell.variant not in variants:
            continue
        psi_old = {r["item_id"]: float(r["psi"]) for r in old[cell]}
        psi_new = {r["item_id"]: float(r["psi"]) for r in new[cell]}
        shared = sorted(set(psi_old) & set(psi_new))
        if len(shared) < 2:
            continue
        a = np.array([psi_old[i] for i in shared])
        b = np.array([psi_new[i] for i in shared])
        if np.array_equal(a, b):  # the same run on both sides (a cell not redone): nothing to compare
            continue
        test = paired_wilcoxon(b, a)
        keep = set(shared)
        out.append({"model": cell.model, "dataset": cell.dataset, "variant": cell.variant, "shots": cell.shots,
                    "sets": len(shared), "before": float(a.mean()), "before_sd": float(a.std(ddof=1)),
                    "after": float(b.mean()), "after_sd": float(b.std(ddof=1)),
                    "median_difference": test["median_difference"], "p_value": test["pvalue"],
                    "accuracy_before": options_accuracy([r for r in old[cell] if r["item_id"] in keep]),
                    "accuracy_after": options_accuracy([r for r in new[cell] if r["item_id"] in keep])})
    for record, p in zip(out, holm_adjust([r["p_value"] for r in out])):
        record["p_holm"] = p
    return out


def markdown(records: list[dict]) -> str:
    def acc(value):
        return "" if value is None else f"{value:.3f}"

    def p(value):
        return "" if value is None else f"{value:.2g}"

    lines = ["| data | model | variant | shots | sets | POSIX before | POSIX after | median Δψ | p | p (Holm) | "
             "accuracy before | accuracy after |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {dataset_label(r['dataset'])} | {label(r['model'])} | {r['variant']} | {r['shots']} | "
                     f"{r['sets']} | {r['before']:.3f} ± {r['before_sd']:.3f} | {r['after']:.3f} ± "
                     f"{r['after_sd']:.3f} | {r['median_difference']:+.3f} | {p(r['p_value'])} | {p(r['p_holm'])} | "
                     f"{acc(r['accuracy_before'])} | {acc(r['accuracy_after'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.compare_cells", description=__doc__.splitlines()[0])
    parser.add_argument("before", help="per_set.csv or results folder: the cells as they were")
    parser.add_argument("after", help="per_set.csv or results folder: the same cells redone")
    parser.add_argument("--variants", default="", help="comma-separated variant types to compare (default: all)")
    parser.add_argument("--models", help="A,B: model A's cells in BEFORE against model B's in AFTER (a fine-tune "
                                         "against its base)")
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    models = tuple(m.strip() for m in args.models.split(",")) if args.models else None
    if models is not None and (len(models) != 2 or not all(models)):
        print(f"posixlab error: --models takes two model names, A,B; got {args.models!r}", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GridWarning)
            records = compare(load_rows(args.before), load_rows(args.after),
                              {v for v in args.variants.split(",") if v} or None, models)
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    if not records:
        found = "" if not models else (f" (--models: the models BEFORE has are "
                                       f"{', '.join(sorted({r['model'] for r in load_rows(args.before)}))})")
        print(f"posixlab error: no cell is in both, with at least two shared prompt sets and some ψ changed{found}",
              file=sys.stderr)
        return 2
    text = markdown(records)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
