"""Two sweeps compared cell by cell: each finished run of the new sweep against the base sweep's run of the same
cell, as ``posixlab compare`` pairs two runs (``posixlab.compare``).

A prompt change gated across a grid (``posixlab compare main_sweep/ change_sweep/ --fail-if-worse``): a cell is the
values of the settings that differ between the runs within either sweep (``report.grid.varying``: the model, the
variant type, the shots), so the setting the change moved, the same in every cell of a sweep, is not part of it.
A folder of one run is a sweep of one cell (a run against the grid's matching cell). Every cell of the new sweep
must match one base cell; a cell that matches none, or several, or has not finished, is named, not compared, and
fails a gate (``--fail-if-worse``): a gate passes only on what it checked.

Each pair's intervals are read at 1 − α/k for k pairs (Bonferroni, α = 1 − ``confidence``): a gate over k cells
then calls some metric worse where nothing changed no more often than a gate over one cell does (for that metric,
across the cells). The verdicts are ``posixlab compare``'s at that level.

No Hydra, no W&B; ``posixlab.cli`` prints it.
"""

from __future__ import annotations

import json
from pathlib import Path

from posixlab.compare import CONFIDENCE, compare_runs, interval_words, number_words, unpaired_lines
from posixlab.errors import ConfigError
from posixlab.report.build import run_folders
from posixlab.report.grid import settings, varying
from posixlab.results import SUMMARY_FILE
from posixlab.status import cells_without_results
from posixlab.tasks.base import model_name


def finished_runs(folder: str | Path) -> tuple[list[tuple[Path, dict[str, str]]], list[Path]]:
    """A sweep's (or one run's) finished runs, each with its settings (``report.grid.settings``), and its runs that
    have not finished (no summary: killed, failed or still running); a clear error for a folder with no finished
    run."""
    out, unfinished = [], []
    for path in run_folders(folder):
        summary_path = path / SUMMARY_FILE
        if summary_path.is_file():
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            out.append((path, settings(summary, model_name(summary))))
        else:
            unfinished.append(path)
    if not out:
        raise ConfigError(f"{folder} holds no finished run ({SUMMARY_FILE}): compare the folders of finished runs or "
                          f"of sweeps of them")
    return out, unfinished


def match_cells(base: list[dict[str, str]], new: list[dict[str, str]]) -> tuple[list[str], list, list]:
    """The cell settings (those that vary within either sweep), the (new, base) position pairs of one cell, and the
    new runs that match no base run or several, with why.

    >>> base = [{"model": "a", "shots": "0", "t": "5"}, {"model": "a", "shots": "1", "t": "5"}]
    >>> new = [{"model": "a", "shots": "1", "t": "8"}, {"model": "b", "shots": "0", "t": "8"}]
    >>> match_cells(base, new)
    (['model', 'shots'], [(0, 1)], [(1, 'no base run with model=b shots=0')])
    """
    names = list(dict.fromkeys(varying(new) + varying(base)))  # the new sweep's order: model first
    pairs, unmatched = [], []
    for k, row in enumerate(new):
        same = [j for j, other in enumerate(base) if all(other.get(n) == row.get(n) for n in names)]
        cell = cell_name(row, names)
        if len(same) == 1:
            pairs.append((k, same[0]))
        else:
            unmatched.append((k, f"no base run with {cell}" if not same else
                                 f"{len(same)} base runs with {cell}: give the base sweep one run a cell"))
    return names, pairs, unmatched


def cell_name(row: dict[str, str], names: list[str]) -> str:
    """A cell as its settings' overrides: "model=a shots=0" ("the run" for a sweep of one cell)."""
    return " ".join(f"{n}={row.get(n, '—')}" for n in names) or "the run"


def compare_sweeps(base_folder: str | Path, new_folder: str | Path, seed: int = 0, confidence: float = CONFIDENCE,
                   metrics=None) -> dict:
    """Each finished run of ``new_folder`` (a sweep or a run) against ``base_folder``'s run of the same cell, every
    pair at the Bonferroni level 1 − (1 − ``confidence``)/k for k pairs (module docstring)."""
    (base, _), (new, unfinished) = finished_runs(base_folder), finished_runs(new_folder)
    # the new sweep's cells that left no run at all (failed before their first unit, pending): not compared either
    holes = cells_without_results(Path(new_folder), {path.resolve() for path, _ in new} |
                                  {path.resolve() for path in unfinished})
    names, pairs, unmatched = match_cells([row for _, row in base], [row for _, row in new])
    if not pairs:
        raise ConfigError(f"no run of {new_folder} has a run of the same cell in {base_folder} (cells by "
                          f"{', '.join(names) or 'nothing'}): " + "; ".join(why for _, why in unmatched))
    level = 1 - (1 - confidence) / len(pairs)
    cells = [{"cell": cell_name(new[k][1], names), "base": str(base[j][0]), "new": str(new[k][0]),
              "result": compare_runs(base[j][0], new[k][0], seed, level, metrics)} for k, j in pairs]
    return {"base": str(base_folder), "new": str(new_folder), "cell_settings": names, "confidence": confidence,
            "pairs": len(pairs), "per_pair_confidence": level, "cells": cells,
            "unmatched": [{"new": str(new[k][0]), "why": why} for k, why in unmatched]
            + [{"new": str(path), "why": f"not finished (no {SUMMARY_FILE})"} for path in unfinished]
            + [{"new": str(new_folder), "why": f"a cell without results: {cell}"} for cell in holes],
            "base_only": [str(base[j][0]) for j in range(len(base)) if j not in {b for _, b in pairs}]}


def sweeps_table(result: dict) -> str:
    """``compare_sweeps``'s result as Markdown: what changed, then a row per cell and metric."""
    f = number_words
    first = result["cells"][0]["result"]
    changed = "; ".join(f"{k}: {a} → {b}" for k, (a, b) in first["changed"].items()) or "nothing in the configs"
    cells = f"{result['pairs']} cell{'s' * (result['pairs'] > 1)}"
    lines = [f"{result['new']} against {result['base']}: {cells} paired by "
             f"{', '.join(result['cell_settings']) or 'nothing (one run each)'}.", "",
             f"Changed (in the first cell): {changed}.", "",
             f"| cell | metric | better | units | base | new | new − base | {result['per_pair_confidence']:.2%} "
             "interval | Wilcoxon p | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    for cell in result["cells"]:
        by = cell["result"]["paired_by"]
        for m in cell["result"]["metrics"]:
            lines.append(f"| {cell['cell']} | {m['metric']} | {m['better']} | {m['units']} {by}s | {f(m['base'])} | "
                         f"{f(m['new'])} | {m['difference']:+.4f} | {interval_words(m['interval'])} | "
                         f"{f(m['wilcoxon_p'])} | {m['verdict']} |")
    level, overall = f"{result['per_pair_confidence']:.2%}", f"{result['confidence']:.0%}"
    lines += ["", f"Each cell as `posixlab compare` pairs two runs; its intervals at {level} (Bonferroni: {overall} "
                  f"over the {cells}), so a metric is called worse in some cell where nothing changed no more often "
                  f"than in one cell at {overall}."]
    lines += [line for cell in result["cells"] for line in unpaired_lines(cell["result"], f"{cell['cell']}: ")]
    lines += [f"Not compared: {u['new']}: {u['why']}." for u in result["unmatched"]]
    if result["base_only"]:
        lines.append(f"Base runs of no cell of the new sweep: {len(result['base_only'])}.")
    return "\n".join(lines)
