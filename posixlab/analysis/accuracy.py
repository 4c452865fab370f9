"""Accuracy beside ψ, per cell, from the per-set rows: how far the model's *answers* move across prompts.

For each cell with gold answers: POSIX, then from each reading of the answers (the options' log-likelihoods; the
greedy response parsed) the mean accuracy over prompts (AvgP) with its two-way bootstrap interval, the spread of
the per-prompt accuracies (min to max, sd), worst-case accuracy (right under every prompt), MaxP and CPS, the
consistency rate and PSS, the prompts needed for a stable mean, and the greedy parse rate; for template and format
cells (prompt j the same prompt for every set), how many prompts are within noise of the best
(``metrics.selection.best_prompt_set``); for format cells, position bias (RStd of the accuracies by where the gold
is shown, and the χ² test of the picks against no preference: ``metrics.position``). Prompt j is the j-th prompt of
every set (0: the original).
"""

from __future__ import annotations

from posixlab.analysis.collect import cell_workers, cells, decode_correct, decode_positions, decode_preds, process_map
from posixlab.analysis.paper import label
from posixlab.analysis.tables import VARIANT_ORDER
from posixlab.answers import SHARED_PROMPT_KINDS
from posixlab.metrics import accuracy as acc
from posixlab.metrics import best_prompt_set, summarize
from posixlab.metrics.position import position_bias, position_row

COLUMNS = ("model", "dataset", "variant", "shots", "num_sets", "num_prompts", "posix", "reading", "accuracy",
           "ci95_low", "ci95_high", "min", "max", "range", "sd", "worst_case", "best_case", "max_p", "cps",
           "consistency_rate", "pss", "variants_needed", "parse_rate", "near_best", "position_rstd", "position_p")


def accuracy_rows(rows: list[dict], seed: int = 0, workers: int | None = None) -> list[dict]:
    """One record per (cell, reading) with gold answers; cells without any are left out. ``workers``: processes
    for the cells (``collect.cell_workers`` by default: one a core for a paper grid, whose two-way bootstraps take
    seconds a cell; one below)."""
    grouped = sorted(cells(rows).items(), key=lambda kv: _order(kv[0]))
    jobs = [(cell, [{k: r.get(k) for k in _CELL_KEYS} for r in members], seed) for cell, members in grouped]
    workers = cell_workers(len(rows), len(jobs)) if workers is None else workers
    return [record for records in process_map(_cell_accuracy, jobs, workers) for record in records]


_CELL_KEYS = ("psi", "correct_options", "pred_options", "correct_greedy", "pred_greedy", "positions")


def position_rows(members: list[dict], reading: str) -> list[tuple]:
    """A cell's format prompts as ``metrics.position.position_bias`` takes them, from its rows' ``positions`` and
    per-prompt answers (``collect.per_prompt_columns``)."""
    rows = []
    for r in members:
        shown, correct = decode_positions(r.get("positions")), decode_correct(r.get(f"correct_{reading}"))
        if not shown or not correct:
            continue
        preds = decode_preds(r.get(f"pred_{reading}")) or [None] * len(correct)
        rows += [position_row(*place, pred, right) for place, right, pred in zip(shown, correct, preds)
                 if place is not None and right is not None]
    return rows


def _cell_accuracy(job: tuple) -> list[dict]:
    """The records of one cell (``accuracy_rows``), from its sets' ψ and per-prompt answers."""
    cell, members, seed = job
    out = []
    for reading in ("options", "greedy"):
        correct = [decode_correct(r.get(f"correct_{reading}")) for r in members]
        if not any(correct):
            continue
        kept = [(c, decode_preds(r.get(f"pred_{reading}"))) for c, r in zip(correct, members) if c]
        width = max(len(c) for c, _ in kept)
        matrix = [c + [None] * (width - len(c)) for c, _ in kept]
        preds = [p + [None] * (width - len(p)) for _, p in kept if p]
        spread = acc.accuracy_spread(matrix)
        lo, hi = acc.two_way_bootstrap_ci(matrix, seed=seed) if len(matrix) > 1 else (None, None)
        parsed = [p is not None for _, ps in kept for p in (ps or [])]
        bias = position_bias(position_rows(members, reading)) or {}
        out.append({
            "model": cell.model, "dataset": cell.dataset, "variant": cell.variant, "shots": cell.shots,
            "num_sets": len(matrix), "num_prompts": width, "posix": summarize([r["psi"] for r in members])["posix"],
            "reading": reading, "accuracy": spread["mean"], "ci95_low": lo, "ci95_high": hi,
            "min": spread["min"], "max": spread["max"], "range": spread["range"], "sd": spread["sd"],
            "worst_case": acc.worst_case_accuracy(matrix), "best_case": acc.best_case_accuracy(matrix),
            "max_p": acc.max_performance(matrix), "cps": acc.combined_performance_score(matrix),
            "consistency_rate": acc.consistency_rate(preds) if len(preds) == len(matrix) else None,
            "pss": acc.prompt_sensitivity_score(matrix),
            "variants_needed": acc.variants_needed(matrix, seed=seed),
            "parse_rate": sum(parsed) / len(parsed) if reading == "greedy" and parsed else None,
            # prompts within noise of the best, where prompt j is one prompt for every set
            "near_best": len(best_prompt_set(matrix)["prompts"])
            if cell.variant in SHARED_PROMPT_KINDS and width > 1 else None,
            "position_rstd": bias.get("rstd"), "position_p": bias.get("p_value"),
        })
    return out


def accuracy_table(rows: list[dict], seed: int = 0, records: list[dict] | None = None) -> tuple[str, list[dict]]:
    """The Markdown table and its records (``figures/accuracy.md``, ``accuracy.csv``); ``records``:
    ``accuracy_rows(rows, seed)`` where the caller has it."""
    records = accuracy_rows(rows, seed) if records is None else records
    f = lambda v: "" if v is None else f"{v:.3f}"  # noqa: E731
    lines = ["## Accuracy across prompts, beside ψ", "",
             "Per cell: POSIX (mean ψ); accuracy as the mean over prompts of each prompt's accuracy (AvgP) with its "
             "two-way bootstrap 95% interval (items and prompts resampled); the per-prompt accuracies' min, max and "
             "sd; worst case (right under every prompt of the set), CPS (MaxP · (1 − (MaxP − AvgP))), consistency "
             "rate (share of prompt pairs giving the same answer), PSS (mean |difference| of correctness over "
             "prompt pairs), prompts needed for the mean to be within 0.01 with probability 0.9, greedy parse rate, "
             "and for template and format cells the prompts within noise of the best (95%, exact paired tests); "
             "for format cells, position bias: the sd over positions of the accuracy by where the gold is shown "
             "(RStd) and the χ² test of the picks against no preference. options: the option with the highest "
             "log-likelihood; greedy: the greedy response parsed (unparsed = wrong).", "",
             "| model | data set | variant | shots | sets | POSIX | from | accuracy | 95% CI | min to max | sd | "
             "worst case | CPS | consistency | PSS | prompts needed | parsed | near best | position RStd | "
             "picks χ² p |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        ci = "" if r["ci95_low"] is None else f"{r['ci95_low']:.3f} to {r['ci95_high']:.3f}"
        near = "" if r["near_best"] is None else f"{r['near_best']} of {r['num_prompts']}"
        p_value = "" if r["position_p"] is None else f"{r['position_p']:.3g}"
        lines.append(f"| {label(r['model'])} | {r['dataset']} | {r['variant']} | {r['shots']} | {r['num_sets']} | "
                     f"{f(r['posix'])} | {r['reading']} | {f(r['accuracy'])} | {ci} | {f(r['min'])} to "
                     f"{f(r['max'])} | {f(r['sd'])} | {f(r['worst_case'])} | {f(r['cps'])} | "
                     f"{f(r['consistency_rate'])} | {f(r['pss'])} | {r['variants_needed']} | {f(r['parse_rate'])} | "
                     f"{near} | {f(r['position_rstd'])} | {p_value} |")
    return "\n".join(lines), [{k: r[k] for k in COLUMNS} for r in records]


def _order(cell):
    variant = VARIANT_ORDER.index(cell.variant) if cell.variant in VARIANT_ORDER else len(VARIANT_ORDER)
    return (cell.dataset, cell.model, cell.shots, variant, cell.variant)
