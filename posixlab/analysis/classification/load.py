"""Classification runs as saved (``summary.json``, ``samples.jsonl``, ``rephrasings.json``): ``ClassificationRun``
and the functions that find and load them. The POSIX side's counterpart is ``posixlab.analysis.collect``."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from posixlab.analysis.collect import GridWarning
from posixlab.analysis.paper import label
from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA
from posixlab.results import REPHRASINGS_FILE, SAMPLES_FILE, SUMMARY_FILE

STRATEGIES = ("simple", "detail", "1shot")  # the paper's order: Simple, Detail, 1-shot
STRATEGY_LABELS = {"simple": "Simple", "detail": "Detail", "1shot": "1-shot"}


@dataclass
class ClassificationRun:
    """One classification run, as saved: its summary, its samples (in file order) and its rephrasings."""

    folder: Path
    summary: dict
    samples: list[dict]
    rephrasings: list[str]

    @property
    def model(self) -> str:
        return self.summary["model"]["name"]

    @property
    def dataset(self) -> str:
        return self.summary["dataset"]

    @property
    def strategy(self) -> str:
        return self.summary["strategy"]

    @property
    def probability(self) -> str:
        return self.summary.get("probability", "greedy")

    @property
    def classes(self) -> list[str]:
        """Every class of the distributions, N/A last (the order of ``distribution``)."""
        return list(self.summary["classes"])

    @property
    def real_classes(self) -> list[str]:
        """The task's classes without N/A: what a gold label can be."""
        return [c for c in self.classes if c != NA]

    @property
    def group(self) -> tuple[str, str, str]:
        """What the cross-strategy figures compare within: (data set, model, probability mode)."""
        return (self.dataset, self.model, self.probability)

    @property
    def cell(self) -> tuple[str, str, str, str]:
        return (*self.group, self.strategy)

    @property
    def title(self) -> str:
        return f"{self.dataset} · {label(self.model)} · {STRATEGY_LABELS.get(self.strategy, self.strategy)} · " \
               f"{self.probability}"

    @cached_property
    def distributions(self) -> np.ndarray:
        return np.array([s["distribution"] for s in self.samples], dtype=float).reshape(len(self.samples), -1)

    @cached_property
    def sensitivities(self) -> np.ndarray:
        return np.array([s["sensitivity"] for s in self.samples], dtype=float)

    @property
    def gold(self) -> list[str | None]:
        # a gold label outside the task's classes (or N/A) cannot belong to a class block: treated as unknown
        return [s.get("gold") if s.get("gold") in self.real_classes else None for s in self.samples]

    @property
    def labels(self) -> list[list[str]]:
        """Each sample's parsed label per rephrasing (rephrasing order)."""
        return [[p["label"] for p in sorted(s["predictions"], key=lambda p: p["rephrasing"])] for s in self.samples]


def find_classification_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders under ``paths`` (each a run folder or a folder of runs, searched recursively) whose summary says
    ``"task": "classification"``. Files (a POSIX ``per_set.csv``) hold no classification results and are skipped."""
    folders = []
    for source in _as_list(paths):
        source = Path(source)
        if not source.exists():
            raise ConfigError(f"no results at {source}: give a run folder, a sweep folder or a per_set.csv file")
        if source.is_file():
            continue
        for summary in sorted(source.rglob(SUMMARY_FILE)):
            if (summary.parent / SAMPLES_FILE).is_file() and _is_classification(summary):
                folders.append(summary.parent)
    return folders


def load_run(folder: str | Path) -> ClassificationRun:
    folder = Path(folder)
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    text = (folder / SAMPLES_FILE).read_text(encoding="utf-8")
    samples = [json.loads(line) for line in text.split("\n") if line.strip()]
    rephrasings_file = folder / REPHRASINGS_FILE
    rephrasings = (json.loads(rephrasings_file.read_text(encoding="utf-8"))["rephrasings"]
                   if rephrasings_file.is_file() else [])
    return ClassificationRun(folder, summary, samples, rephrasings)


def load_classification_runs(paths: Iterable[str | Path] | str | Path) -> list[ClassificationRun]:
    """Every classification run under ``paths`` (POSIX runs are skipped), ordered by data set, model, probability
    mode and strategy. When two runs cover the same cell, the one whose folder sorts last (the newest, for Hydra's
    dated folders) is kept and a ``GridWarning`` names both, as ``collect.load_rows`` does for POSIX runs."""
    by_cell: dict[tuple, ClassificationRun] = {}
    for folder in find_classification_runs(paths):
        run = load_run(folder)
        if run.cell in by_cell:
            warnings.warn(f"{run.title} has results in {by_cell[run.cell].folder} and {folder}; keeping the latter",
                          GridWarning, stacklevel=2)
        by_cell[run.cell] = run
    return sorted(by_cell.values(), key=lambda r: (r.dataset, r.model, r.probability, _strategy_order(r.strategy)))


def _is_classification(summary: Path) -> bool:
    try:
        return json.loads(summary.read_text(encoding="utf-8")).get("task") == "classification"
    except (OSError, ValueError):
        return False  # not ours to judge: collect.load_rows reports broken POSIX summaries


def _as_list(paths) -> list:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


def _strategy_order(strategy: str):
    return (STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES), strategy)
