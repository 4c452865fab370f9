"""Saved results -> one flat table of per-set rows, the input of every table and figure (no model is loaded).

A row is one prompt set of one run: the run's cell (model, dataset, variant, shots), the set's item id, ψ, and the
four factors; where a judge read the run (``posixlab judge``, ``judge=``), the set's judged share and the judge.
Rows come from run folders (``summary.json`` + ``sets.jsonl``, found recursively under the folders
given) or from a ``per_set.csv`` written by an earlier regeneration, so figures can be redrawn from that file alone.

When two runs cover the same cell, the one whose folder sorts last (the newest, for Hydra's dated folders) is kept
and a warning names both. A ``psi=false`` run (greedy answers, no ψ) does not replace a cell: it refreshes the greedy
answers (``correct_greedy``, ``pred_greedy``) of the cell an earlier source holds, set by set, so that a cell's greedy
accuracy can be recomputed (a new answer parser, a model's answers again) without scoring its sets again.

A data set whose answers are reference outputs (``posixlab.data.UNGRADED``: Alpaca) has no correctness columns, even
where results written before 2026-11-28 graded its 30-token responses against those paragraphs (all wrong).
"""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from threadpoolctl import threadpool_limits

from posixlab.data import UNGRADED
from posixlab.errors import ConfigError
from posixlab.judge import read_judged, verdicts_by_set
from posixlab.metrics.factors import FACTOR_NAMES, set_factors
from posixlab.results import SETS_FILE, SUMMARY_FILE, iter_records

CELL = ("model", "dataset", "variant", "shots")
# per prompt of the set, one character each ("-": not scored): correctness "1"/"0", predicted option letters
PER_PROMPT = ("correct_options", "correct_greedy", "pred_options", "pred_greedy")
# per prompt, ";"-joined: where a format variant shows the options and the gold ("2013:1"; "-": a prompt that does
# not balance the gold's position), for position bias (analysis/accuracy.py)
# judged_share: the share of the set's variants a judge of the run called the same as the original's response
# (posixlab judge, judge=: judge.jsonl beside the records); judge: who judged (none: the run was not judged)
ROW_FIELDS = (*CELL, "item_id", "subject", "psi", "psi_reference_compat", *FACTOR_NAMES, *PER_PROMPT,
              "psi_per_prompt", "judged_share", "judge", "data", "source", "positions")
STRING_FIELDS = ("model", "dataset", "variant", "item_id", "subject", "data", "source", *PER_PROMPT, "psi_per_prompt",
                 "judge", "positions")
PER_SET_CSV = "per_set.csv"
SHARED_FIELDS = ("model", "dataset", "variant", "subject", "data", "source", "judge")  # the same in many rows
PARALLEL_READ_BYTES = 256 * 2**20  # records of a sweep above which its run folders are read in parallel
MAX_READERS = 8  # processes at most, reading results or computing per-cell statistics
PARALLEL_SETS = 100_000  # prompt sets above which per-cell statistics run a process a core (cell_workers)


class GridWarning(UserWarning):
    """A cell of a table or figure has no results (it is left blank) or has results from more than one run."""


@dataclass(frozen=True)
class Cell:
    model: str
    dataset: str
    variant: str
    shots: int


def cell_of(row: dict) -> Cell:
    return Cell(row["model"], row["dataset"], row["variant"], int(row["shots"]))


def load_rows(*sources: str | Path) -> list[dict]:
    """Per-set rows from run folders (searched recursively) and ``per_set.csv`` files. A ``psi=false`` run refreshes
    the greedy answers of its cell as a source before it (or a ψ run in its folder) holds them; one whose cell has no
    ψ anywhere before it (an API model's, which cannot score) is left out with a warning."""
    if not sources:
        raise ConfigError("give at least one results folder (a run or a sweep) or per_set.csv file")
    by_cell: dict[Cell, tuple[str, list[dict]]] = {}
    answers_alone = []  # psi=false runs of cells no source holds a ψ of
    for source in sources:
        source = Path(source)
        if not source.exists():
            raise ConfigError(f"no results at {source}: give a run folder, a sweep folder or a per_set.csv file")
        if source.is_file():
            groups = _rows_from_csv(source)
        else:
            groups = {}
            folders = [s.parent for s in sorted(source.rglob(SUMMARY_FILE)) if (s.parent / SETS_FILE).is_file()]
            for folder, rows in zip(folders, _rows_from_runs(folders)):
                if rows:
                    groups.setdefault(cell_of(rows[0]), []).append((str(folder), rows))
        for cell, runs in groups.items():
            # a folder's ψ runs of a cell first, then its psi=false runs, which refresh their greedy answers
            for origin, rows in sorted(runs, key=lambda run: bool(run[1][0].get("answers_only"))):
                if rows[0].get("answers_only") and cell not in by_cell:  # no ψ of the cell to refresh: left out
                    answers_alone.append(origin)
                    warnings.warn(f"{origin} is a psi=false run (greedy answers, no ψ) of {_label(cell)}, and no "
                                  f"source holds a ψ of that cell before it: left out of the tables and figures (its "
                                  f"own summary has its accuracy; to refresh a cell's greedy answers, give the "
                                  f"per_set.csv or the ψ run first)", GridWarning, stacklevel=2)
                    continue
                if rows[0].get("answers_only"):  # psi=false: the cell's greedy answers, refreshed in place
                    kept_origin, kept_rows = by_cell[cell]
                    by_cell[cell] = (kept_origin, refresh_greedy(kept_rows, rows, _label(cell), origin))
                    continue
                if cell in by_cell:
                    warnings.warn(f"{_label(cell)} has results in {by_cell[cell][0]} and {origin}; keeping the "
                                  f"latter", GridWarning, stacklevel=2)
                by_cell[cell] = (origin, rows)
    if not by_cell:
        alone = (f": only psi=false runs (greedy answers, no ψ), {', '.join(answers_alone[:3])}"
                 f"{', ...' if len(answers_alone) > 3 else ''}; to refresh a cell's greedy answers with one, give the "
                 f"per_set.csv (or the ψ run) first") if answers_alone else ""
        raise ConfigError(f"found no results (summary.json beside sets.jsonl, or per_set.csv) in "
                          f"{', '.join(map(str, sources))}{alone}")
    return [_graded(row) for cell in sorted(by_cell, key=_cell_order) for row in by_cell[cell][1]]


def _graded(row: dict) -> dict:
    """``row`` without correctness and predictions where its data set is never graded (older results graded it)."""
    if row["dataset"] not in UNGRADED:
        return row
    return {**row, **{key: None for key in PER_PROMPT}}


def write_rows(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=ROW_FIELDS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in ROW_FIELDS})
    return path


def cells(rows: list[dict]) -> dict[Cell, list[dict]]:
    grouped: dict[Cell, list[dict]] = {}
    for row in rows:
        grouped.setdefault(cell_of(row), []).append(row)
    return grouped


def _rows_from_runs(folders: list[Path]) -> list[list[dict]]:
    """Each run folder's rows, in order. Reading a cell's records is JSON parsing, about 50 MB a second a core (a
    paper-sized cell holds 0.5-0.9 GB): a sweep holding more than ``PARALLEL_READ_BYTES`` of them is read by a
    process a core (never more than ``MAX_READERS``), each streaming its cell's records and returning its rows."""
    size = sum((folder / SETS_FILE).stat().st_size for folder in folders)
    workers = min(len(folders), _cores(), MAX_READERS) if size >= PARALLEL_READ_BYTES else 1
    return process_map(_rows_from_run, folders, workers)


def cell_workers(sets: int, jobs: int) -> int:
    """Processes for per-cell statistics over ``sets`` prompt sets in ``jobs`` cells: one a core (at most
    ``MAX_READERS``) from ``PARALLEL_SETS`` sets (a paper grid: about two million), else one: below that the
    processes' start costs more than they save."""
    return min(jobs, _cores(), MAX_READERS) if sets >= PARALLEL_SETS else 1


def process_map(function, jobs: list, workers: int) -> list:
    """``[function(job) for job in jobs]``, by ``workers`` processes where more than one (each job's result is
    computed alone and seeded by itself, so the results do not depend on ``workers``)."""
    if workers < 2 or len(jobs) < 2:
        return [function(job) for job in jobs]
    # fork where there is one: a spawned process would first run the caller's script again (one without an
    # `if __name__ == "__main__":` guard, all of it); a job here parses JSON or resamples numpy arrays, which the
    # fork of a process holding threads (BLAS's, which re-initialise after a fork) leaves safe
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                             initializer=_one_blas_thread) as pool:
        return list(pool.map(function, jobs))


def _one_blas_thread() -> None:
    """A process of ``process_map`` runs numpy's BLAS on one thread: with a process a core, BLAS's own thread a core
    in each made a grid's statistics 1.1x faster on 2 cores instead of 1.6x (``experiments.benchmark_analysis``)."""
    threadpool_limits(limits=1)


def _cores() -> int:
    """The cores this process may use (a SLURM job's allocation, not the node's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _rows_from_run(folder: Path, records=None) -> list[dict]:
    """A run folder's per-set rows, in set order, from its records (by default streamed from its ``sets.jsonl``)."""
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    dataset = summary.get("config", {}).get("dataset", {})
    data = summary.get("dataset_source") or dataset.get("source")
    if dataset.get("path"):  # the file's name says what it is; the folder it sat in is the user's business
        data = f"{data}:{Path(dataset['path']).name}"
    base = {"model": summary["model"]["name"], "dataset": summary["dataset"], "variant": summary["variant"],
            "shots": int(summary.get("shots", 0)), "data": data, "source": str(folder)}
    answers_only = not summary.get("psi_computed", True)  # psi=false: the greedy answers only (refresh_greedy)
    judged = read_judged(folder, summary)[0]  # a judge of this run, not of an earlier one in its folder
    verdicts = verdicts_by_set(folder, judged)
    judge = (judged or {}).get("judge", {}).get("model") if verdicts else None
    rows = []  # (set index, row): records streamed, so a large cell's memory is its rows, not its records
    subjects: dict = {}  # one copy of each subject's name (see SHARED_FIELDS)
    for record in iter_records(folder, SETS_FILE) if records is None else records:
        subject = subjects.setdefault(record.get("subject"), record.get("subject"))
        if answers_only:
            row = {**base, "item_id": record["item_id"], "subject": subject, "answers_only": True,
                   **{k: v for k, v in per_prompt_columns(record).items() if k.endswith("_greedy") or
                      k == "positions"}}
        else:
            factors = record.get("factors")
            if factors is None:  # results written before factors were stored: the three that need no embedding
                factors = set_factors([tuple(r["token_ids"]) for r in record["responses"]], record["logprob_matrix"])
            row = {**base, "item_id": record["item_id"], "subject": subject, "psi": record["psi"],
                   "psi_reference_compat": record.get("psi_reference_compat"), **factors,
                   **per_prompt_columns(record)}
            if record.get("set_id") in verdicts:
                row.update(judged_share=verdicts[record["set_id"]].get("judged_share"), judge=judge)
        rows.append((record.get("set_index", 0), row))
    return [row for _, row in sorted(rows, key=lambda pair: pair[0])]  # the data set's order, as read_sets gives


def refresh_greedy(rows: list[dict], answers: list[dict], label: str, origin: str) -> list[dict]:
    """The cell's rows with their greedy answers replaced by a ``psi=false`` run's (``answers``), set by set. The run
    must cover the cell's sets exactly, each with as many prompts: otherwise its answers are of other prompts.

    >>> old = [{"item_id": "q1", "psi": 0.4, "correct_greedy": "10", "pred_greedy": "AB", "source": "runs/a"}]
    >>> new = [{"item_id": "q1", "answers_only": True, "correct_greedy": "11", "pred_greedy": "AA"}]
    >>> refresh_greedy(old, new, "cell", "runs/b")[0]
    {'item_id': 'q1', 'psi': 0.4, 'correct_greedy': '11', 'pred_greedy': 'AA', 'source': 'runs/a; greedy: runs/b'}
    """
    by_item = {a["item_id"]: a for a in answers}
    if set(by_item) != {r["item_id"] for r in rows}:
        raise ConfigError(f"{origin} answers other sets than {label} holds ({len(by_item)} against {len(rows)}): "
                          f"run it with the cell's own settings (data set, num_sets, seed)")
    out = []
    for row in rows:
        new, old = by_item[row["item_id"]], row.get("correct_greedy")
        if old and len(old) != len(new["correct_greedy"] or ""):  # a cell with no greedy answers yet takes any
            raise ConfigError(f"{origin}: set {row['item_id']} of {label} has {len(new['correct_greedy'] or '')} "
                              f"prompts there and {len(old)} in the cell: run it with the cell's settings")
        source = (row.get("source") or "").split("; greedy: ")[0]  # a refresh replaces an earlier refresh
        out.append({**row, "correct_greedy": new["correct_greedy"], "pred_greedy": new["pred_greedy"],
                    "source": f"{source}; greedy: {origin}"})
    return out


def per_prompt_columns(record: dict) -> dict:
    """A set's per-prompt answers as compact strings (one character a prompt) and its ψ per prompt.

    >>> per_prompt_columns({"answers": [{"by_options": {"pred": "B", "correct": True},
    ...                                  "by_greedy": {"pred": None, "correct": False}}],
    ...                     "psi_per_prompt": [0.25]})
    {'correct_options': '1', 'pred_options': 'B', 'correct_greedy': '0', 'pred_greedy': '-', 'psi_per_prompt': '0.25'}
    """
    answers = record.get("answers") or []
    out = {}
    for reading in ("options", "greedy"):
        picked = [a.get(f"by_{reading}") for a in answers]
        has = any(p is not None for p in picked)
        out[f"correct_{reading}"] = "".join("-" if p is None else str(int(bool(p["correct"]))) for p in picked) \
            if has else None
        out[f"pred_{reading}"] = "".join("-" if p is None or p.get("pred") is None else str(p["pred"])[:1]
                                         for p in picked) if has else None
    psis = record.get("psi_per_prompt")
    out["psi_per_prompt"] = ";".join(repr(float(v)) for v in psis) if psis else None
    shown = [p.get("record") or {} for p in record.get("prompts") or []]
    if any(s.get("gold_position") is not None for s in shown):  # format variants: position bias
        out["positions"] = ";".join("-" if s.get("gold_position") is None else
                                    "".join(map(str, s["option_order"])) + f":{s['gold_position']}" for s in shown)
    return out


def decode_positions(text: str | None) -> list[tuple[list[int], int] | None] | None:
    """``"-;2013:1"`` -> ``[None, ([2, 0, 1, 3], 1)]``: per prompt, the option order shown and the gold's place."""
    if not text:
        return None
    placed = [None if code == "-" else code.partition(":") for code in text.split(";")]
    return [None if p is None else ([int(c) for c in p[0]], int(p[2])) for p in placed]


def decode_correct(text: str | None) -> list[float | None] | None:
    """``"10-"`` -> ``[1.0, 0.0, None]``."""
    return None if not text else [None if c == "-" else float(c) for c in text]


def decode_preds(text: str | None) -> list[str | None] | None:
    """``"B-C"`` -> ``["B", None, "C"]``."""
    return None if not text else [None if c == "-" else c for c in text]


def _rows_from_csv(path: Path) -> dict[Cell, list[tuple[str, list[dict]]]]:
    groups: dict[Cell, list[tuple[str, list[dict]]]] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = set(CELL) | {"item_id", "psi"}
        if reader.fieldnames is None or not missing <= set(reader.fieldnames):
            raise ConfigError(f"{path} is not a per_set.csv: it needs the columns {', '.join(sorted(missing))}")
        shared: dict[str, str] = {}  # one copy of each cell's and subject's strings, not one a row (a quarter of it)
        for raw in reader:
            row = {k: _parse(k, v) for k, v in raw.items()}
            for key in SHARED_FIELDS:
                if row.get(key) is not None:
                    row[key] = shared.setdefault(row[key], row[key])
            groups.setdefault(cell_of(row), [(str(path), [])])[0][1].append(row)
    return groups


def _parse(key: str, value: str):
    if key in STRING_FIELDS:
        return value or None
    if value == "":
        return None
    number = float(value)
    return int(number) if key in ("shots", "unique_responses") else number


def _cell_order(cell: Cell):
    return (cell.dataset, cell.model, cell.variant, cell.shots)


def _label(cell: Cell) -> str:
    return f"{cell.model} · {cell.dataset} · {cell.variant} · {cell.shots}-shot"


def data_caption(rows: list[dict]) -> str:
    """Which data each data set's rows came from (the bundled MMLU sample, a local file, the hub)."""
    sources = sorted({(r["dataset"], r.get("data") or "?") for r in rows})
    notes = {"sample": " (the bundled 285-question MMLU sample)",
             "path:selfinstruct_seed_tasks.jsonl": " (Self-Instruct seed tasks, standing in for Alpaca)"}
    return "Data: " + "; ".join(f"{d} = {s}{notes.get(s, '')}" for d, s in sources)


def finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]
