"""Regenerate every table and figure from saved results into one folder: POSIX runs' at its top, classification
runs' (Errica et al.) under ``classification/``. Either kind may be absent."""

from __future__ import annotations

from pathlib import Path

from posixlab.analysis.accuracy import accuracy_rows, accuracy_table
from posixlab.analysis.classification import find_classification_runs, regenerate_classification
from posixlab.analysis.collect import PER_SET_CSV, Cell, data_caption, load_rows, write_rows
from posixlab.analysis.collect import cells as grouped_cells
from posixlab.analysis.figures import accuracy_figures, paper_figures, save
from posixlab.analysis.judged import JUDGED_GRID_FIGURE, judged_grid_figure, judged_table
from posixlab.analysis.tables import summary_rows, table1, table2, write_table
from posixlab.metrics.factors import FACTOR_NAMES
from posixlab.paths import check_folder_to_write
from posixlab.results import SETS_FILE, SUMMARY_FILE

CLASSIFICATION_DIR = "classification"


def regenerate(sources: list[str | Path], out: str | Path) -> list[Path]:
    """Read results (run or sweep folders, or a per_set.csv), write per_set.csv, the cell summary, Tables 1 and 2,
    the judged cells' table and figure (``judged.md``, ``figure_psi_judged``, where a judge read any) and every
    figure into ``out``, and the classification runs' tables, figures and reports into ``out/classification``.
    Returns the files written."""
    out = Path(out)
    check_folder_to_write(out, "the tables and figures")
    classification = find_classification_runs(sources)
    written = []
    # with neither kind of results, load_rows raises its usual error
    if not classification or _has_posix(sources):
        written += regenerate_posix(sources, out)
    if classification:
        written += regenerate_classification(sources, out / CLASSIFICATION_DIR)
    return written


def _has_posix(sources: list[str | Path]) -> bool:
    """A per_set.csv file, or a run folder (summary.json beside sets.jsonl) somewhere under a folder."""
    return any(Path(s).is_file() or any((p.parent / SETS_FILE).is_file() for p in Path(s).rglob(SUMMARY_FILE))
               for s in sources)


def regenerate_posix(sources: list[str | Path], out: Path) -> list[Path]:
    """The POSIX tables and figures (see ``regenerate``)."""
    rows = load_rows(*sources)
    out.mkdir(parents=True, exist_ok=True)
    caption = data_caption(rows)
    written = [write_rows(rows, out / PER_SET_CSV)]
    cells = summary_rows(rows)  # each cell's bootstrap once: Tables 1 and 2 take theirs from here
    lines = ["## Every cell: POSIX with its bootstrap 95% interval", "",
             "| model | data set | variant | shots | POSIX | sd | median | 95% CI | sets | paper |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        paper = "" if c["paper_mean"] is None else f"{c['paper_mean']:.3f} ± {c['paper_sd']:.3f}"
        sd = "" if c["sd"] is None else f"{c['sd']:.3f}"
        lines.append(f"| {c['model_label']} | {c['dataset']} | {c['variant']} | {c['shots']} | {c['posix']:.3f} | "
                     f"{sd} | {c['median']:.3f} | {c['ci95_low']:.3f} to {c['ci95_high']:.3f} | "
                     f"{c['num_sets']} | {paper} |")
    written += write_table("\n".join(lines), cells, out, "cells", caption)
    if any(int(r["shots"]) == 0 for r in rows):
        written += write_table(*table1(rows, cell_rows=cells), out, "table1", caption)
    if len({int(r["shots"]) for r in rows}) > 1:
        # Table 2 holds only data sets with a few-shot cell, so its caption names only their sources
        few_shot = {r["dataset"] for r in rows if int(r["shots"]) > 0}
        table2_rows = [r for r in rows if r["dataset"] in few_shot]
        written += write_table(*table2(rows, cell_rows=cells), out, "table2", data_caption(table2_rows))
    factor_lines = ["## Factors: mean over sets per cell (paper §3.3)", "",
                    f"| model | data set | variant | shots | {' | '.join(FACTOR_NAMES)} |",
                    f"|---|---|---|---|{'---|' * len(FACTOR_NAMES)}"]
    factor_records = []
    by_cell = grouped_cells(rows)
    for c in cells:
        members = by_cell[Cell(c["model"], c["dataset"], c["variant"], c["shots"])]
        means = {}
        for name in FACTOR_NAMES:
            values = [r[name] for r in members if r.get(name) is not None]
            means[name] = sum(values) / len(values) if values else None
        factor_records.append({k: c[k] for k in ("model", "dataset", "variant", "shots")} | means)
        factor_lines.append(f"| {c['model_label']} | {c['dataset']} | {c['variant']} | {c['shots']} | " +
                            " | ".join("" if v is None else f"{v:.3f}" for v in means.values()) + " |")
    written += write_table("\n".join(factor_lines), factor_records, out, "factors", caption)
    accuracy = None  # computed once: the table and a figure show it, and its bootstrap takes seconds a cell
    if any(r.get("correct_options") or r.get("correct_greedy") for r in rows):
        accuracy = accuracy_rows(rows)
        written += write_table(*accuracy_table(rows, records=accuracy), out, "accuracy", caption)
    judged = judged_table(rows)  # the cells a judge read (judge.jsonl beside their records), where any was
    if judged:
        written += write_table(*judged, out, "judged", caption)
        judged_rows = [r for r in rows if r.get("judge")]
        title = f"ψ against judged inconsistency, a point a set\n{data_caption(judged_rows)}"
        figure = judged_grid_figure(rows, title)
        written += save(figure, out, JUDGED_GRID_FIGURE) if figure is not None else []
    written += paper_figures(rows, out)
    written += accuracy_figures(rows, out, accuracy)
    return written
