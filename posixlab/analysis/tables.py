"""Tables 1 and 2 rebuilt from per-set rows, as Markdown and CSV, in the paper's mean ± sd form.

- ``table1``: zero-shot POSIX, one row per model, one column per (data set, variant type); Tables 6-8 of the paper
  (OLMo-1B, Llama-2-13B) have the same layout, so their models are rows of this table too. Table 9 (BBH) is the
  BBH column.
- ``table2``: few-shot POSIX, one row per (shots, variant type), one column per model, for the data sets and variant
  types that have few-shot cells, with the paired test of each k-shot cell against the 0-shot cell of the same model
  and variant type (and, below the table, against k − 1 shots).
- every table ends with paired Wilcoxon tests on per-set ψ over the prompt sets the two cells share, each with its
  raw p and its Holm-adjusted p over all the tests of that table (a table is read as one family of comparisons).

Where the model and setting match a paper cell, the paper's value is printed beside ours.
"""

from __future__ import annotations

import csv
import itertools
import warnings
from pathlib import Path

import numpy as np

from posixlab.analysis.collect import Cell, GridWarning, cell_workers, cells, process_map
from posixlab.analysis.paper import dataset_label, label, paper_value, size
from posixlab.metrics import summarize
from posixlab.metrics.stats import bootstrap_ci, holm_adjust, paired_wilcoxon

VARIANT_ORDER = ["spelling", "template", "paraphrase", "mixture"]
DATASET_ORDER = ["mmlu", "alpaca", "bbh"]


def psi_stats(psis: list[float]) -> dict:
    """POSIX and the spread of ψ over one cell's sets, with the bootstrap 95% interval of POSIX."""
    stats = summarize(psis)
    lo, hi = bootstrap_ci(psis, bounds=(0.0, None))
    return {**stats, "ci95_low": lo, "ci95_high": hi}


def fmt(mean: float | None, sd: float | None) -> str:
    if mean is None:
        return ""
    return f"{mean:.3f} ± {sd:.3f}" if sd is not None else f"{mean:.3f}"


def summary_rows(rows: list[dict], workers: int | None = None) -> list[dict]:
    """One line per cell: POSIX, sd, median, bootstrap 95% interval, sets, and the paper's value when it has one.
    ``workers``: processes for the cells' bootstraps (``collect.cell_workers`` by default: one a core for a paper
    grid's two million sets, where they take minutes; one below)."""
    grouped = cells(rows)
    jobs = [[r["psi"] for r in members] for members in grouped.values()]
    workers = cell_workers(len(rows), len(jobs)) if workers is None else workers
    out = []
    for cell, stats in zip(grouped, process_map(psi_stats, jobs, workers)):
        paper = paper_value(cell.model, cell.dataset, cell.variant, cell.shots)
        out.append({"model": cell.model, "model_label": label(cell.model), "dataset": cell.dataset,
                    "variant": cell.variant, "shots": cell.shots, "posix": stats["posix"], "sd": stats["sd"],
                    "median": stats["median"], "ci95_low": stats["ci95_low"], "ci95_high": stats["ci95_high"],
                    "num_sets": stats["num_sets"], "paper_mean": paper[0] if paper else None,
                    "paper_sd": paper[1] if paper else None})
    return out


def paired_tests(rows: list[dict], vary: str) -> list[dict]:
    """Wilcoxon signed-rank tests between every two cells that differ only in ``vary`` (model, variant or shots),
    on the prompt sets (item ids) they share."""
    grouped = cells(rows)
    fixed = [f for f in ("dataset", "model", "variant", "shots") if f != vary]
    buckets: dict[tuple, list[Cell]] = {}
    for cell in grouped:
        buckets.setdefault(tuple(getattr(cell, f) for f in fixed), []).append(cell)
    tests = []
    for key, members in buckets.items():
        for a, b in itertools.combinations(sorted(members, key=lambda c: _order(vary, getattr(c, vary))), 2):
            psi_a = {r["item_id"]: r["psi"] for r in grouped[a]}
            psi_b = {r["item_id"]: r["psi"] for r in grouped[b]}
            shared = sorted(set(psi_a) & set(psi_b))
            if len(shared) < 2:
                continue
            test = paired_wilcoxon([psi_a[i] for i in shared], [psi_b[i] for i in shared])
            tests.append({**dict(zip(fixed, key)), "compared": vary, "a": getattr(a, vary), "b": getattr(b, vary),
                          "shared_sets": len(shared), "mean_a": float(np.mean([psi_a[i] for i in shared])),
                          "mean_b": float(np.mean([psi_b[i] for i in shared])),
                          "median_difference": test["median_difference"], "wilcoxon_w": test["statistic"],
                          "p_value": test["pvalue"]})
    return tests


def with_holm(tests: list[dict]) -> list[dict]:
    """The tests with ``p_holm``: Holm's adjusted p over this list, the family of tests one table prints."""
    adjusted = holm_adjust([t["p_value"] for t in tests])
    return [{**t, "p_holm": p} for t, p in zip(tests, adjusted)]


def _cells_of(rows: list[dict], cell_rows: list[dict] | None, kept) -> list[dict]:
    """``summary_rows`` of ``rows``, or the caller's ``summary_rows`` of a superset of them (``cell_rows``: each
    cell's bootstrap takes about a second at 14,000 sets) cut to the cells ``kept`` keeps, in the same order."""
    return summary_rows(rows) if cell_rows is None else [c for c in cell_rows if kept(c)]


def table1(rows: list[dict], shots: int = 0, cell_rows: list[dict] | None = None) -> tuple[str, list[dict]]:
    """The paper's Table 1 (and Tables 6-9): POSIX per model, data set and variant type, with the paired tests.
    Only the paper's variant types (``VARIANT_ORDER``): others (``format``, your own sets) would change the table's
    layout and its family of tests; they are in ``cells.md`` and ``accuracy.md``, named under the table.
    ``cell_rows``: ``summary_rows(rows)`` where the caller has it."""
    at_shots = [r for r in rows if int(r["shots"]) == shots]
    zero = [r for r in at_shots if r["variant"] in VARIANT_ORDER]
    others = sorted({r["variant"] for r in at_shots} - set(VARIANT_ORDER))
    cells_at = _cells_of(zero, cell_rows, lambda c: int(c["shots"]) == shots and c["variant"] in VARIANT_ORDER)
    summaries = {(s["model"], s["dataset"], s["variant"]): s for s in cells_at}
    models = sorted({m for m, _, _ in summaries}, key=lambda m: (size(m), m))
    columns = sorted({(d, v) for _, d, v in summaries}, key=lambda c: (_order("dataset", c[0]),
                                                                        _order("variant", c[1])))
    lines = [f"| model | {' | '.join(f'{dataset_label(d)} {v}' for d, v in columns)} |",
             f"|---|{'---|' * len(columns)}"]
    for model in models:
        texts = [_cell_text(summaries.get((model, dataset, variant)), f"table 1: {model} · {dataset} · {variant}")
                 for dataset, variant in columns]
        lines.append(f"| {label(model)} | {' | '.join(texts)} |")
    tests = with_holm(paired_tests(zero, "model") + paired_tests(zero, "variant"))
    note = [f"Not in the paper, so not in this table: {', '.join(others)} variants (see cells.md and accuracy.md).",
            ""] if others else []
    markdown = "\n".join([f"## Table 1: {shots}-shot POSIX (mean ± sd of ψ over prompt sets)", "", *lines, "", *note,
                          _tests_markdown(tests)])
    return markdown, list(summaries.values()) + tests


def table2(rows: list[dict], cell_rows: list[dict] | None = None) -> tuple[str, list[dict]]:
    """Few-shot POSIX for the (data set, variant type) pairs that have a k-shot cell (k > 0), beside their 0-shot
    cells: the paper's Table 2 (MMLU; spelling, template, paraphrase) when the grid is that one. Each k-shot cell is
    tested against 0-shot (printed in its cell) and against k − 1 shots (listed below the table). ``cell_rows``:
    ``summary_rows(rows)`` where the caller has it."""
    studied = {(r["dataset"], r["variant"]) for r in rows if int(r["shots"]) > 0}
    rows = [r for r in rows if (r["dataset"], r["variant"]) in studied]
    cells_of = _cells_of(rows, cell_rows, lambda c: (c["dataset"], c["variant"]) in studied)
    summaries = {(s["model"], s["dataset"], s["variant"], s["shots"]): s for s in cells_of}
    shot_tests = with_holm([t for t in paired_tests(rows, "shots") if t["a"] == 0 or t["b"] == t["a"] + 1])
    tests = {(t["dataset"], t["model"], t["variant"], t["b"]): t for t in shot_tests if t["a"] == 0}
    models = sorted({k[0] for k in summaries}, key=lambda m: (size(m), m))
    keys = sorted({(k[1], k[3], k[2]) for k in summaries}, key=lambda k: (_order("dataset", k[0]), k[1],
                                                                          _order("variant", k[2])))
    lines = [f"| data set | shots | variant | {' | '.join(label(m) for m in models)} |",
             f"|---|---|---|{'---|' * len(models)}"]
    for dataset, shots, variant in keys:
        texts = [_cell_text(summaries.get((model, dataset, variant, shots)),
                            f"table 2: {model} · {dataset} · {variant} · {shots}-shot",
                            tests.get((dataset, model, variant, shots))) for model in models]
        lines.append(f"| {dataset_label(dataset)} | {shots} | {variant} | {' | '.join(texts)} |")
    markdown = "\n".join(["## Table 2: POSIX by number of few-shot exemplars (mean ± sd of ψ over prompt sets; "
                          "p: Wilcoxon signed-rank against 0-shot on the same sets)", "", *lines, "",
                          _tests_markdown(shot_tests)])
    return markdown, list(summaries.values()) + shot_tests


def write_table(markdown: str, records: list[dict], folder: Path, name: str, note: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / f"{name}.md"
    md.write_text(markdown + ("\n\n" + note if note else "") + "\n", encoding="utf-8")
    out = folder / f"{name}.csv"
    fields = list(dict.fromkeys(k for r in records for k in r))
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: ("" if r.get(k) is None else r[k]) for k in fields})
    return [md, out]


def _cell_text(summary: dict | None, where: str, test: dict | None = None) -> str:
    """'mean ± sd', the paper's value beside it when there is one, and the p of a test against 0-shot."""
    if summary is None:
        warnings.warn(f"{where}: no results; the cell is blank", GridWarning, stacklevel=3)
        return ""
    text = fmt(summary["posix"], summary["sd"])
    if summary["paper_mean"] is not None:
        text += f" (paper {fmt(summary['paper_mean'], summary['paper_sd'])})"
    if test is not None and test["p_value"] is not None:
        text += f"; vs 0-shot p = {test['p_value']:.2g}"
    return text


def _tests_markdown(tests: list[dict]) -> str:
    if not tests:
        return "No two cells share prompt sets, so there are no paired tests."
    lines = ["Paired tests (Wilcoxon signed-rank on per-set ψ, two-sided, over the prompt sets both cells share; "
             f"p (Holm): Holm–Bonferroni adjusted over the {len(tests)} tests of this table):", "",
             "| data set | same | compared | a | b | sets | mean ψ a | mean ψ b | median a − b | p | p (Holm) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in tests:
        same = " · ".join(f"{k}={t[k]}" for k in ("model", "variant", "shots") if k in t and k != t["compared"])
        p, holm = ("n/a" if t.get(k) is None else f"{t[k]:.2g}" for k in ("p_value", "p_holm"))
        a, b = (label(t["a"]), label(t["b"])) if t["compared"] == "model" else (t["a"], t["b"])
        lines.append(f"| {dataset_label(t['dataset'])} | {same} | {t['compared']} | {a} | {b} | {t['shared_sets']} | "
                     f"{t['mean_a']:.3f} | {t['mean_b']:.3f} | {t['median_difference']:.3f} | {p} | {holm} |")
    return "\n".join(lines)


def _order(kind: str, value):
    if kind == "variant":
        return (VARIANT_ORDER.index(value) if value in VARIANT_ORDER else len(VARIANT_ORDER), str(value))
    if kind == "dataset":
        return (DATASET_ORDER.index(value) if value in DATASET_ORDER else len(DATASET_ORDER), str(value))
    if kind == "model":
        return (size(value), value)
    return (value,)
