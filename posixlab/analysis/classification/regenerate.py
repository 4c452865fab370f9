"""Entry points: a single run's figures, tables and report (``run_classification_figures``, called after each
classification job) and every classification output the saved runs allow (``regenerate_classification``, called by
``posixlab.analysis.regenerate``)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from pathlib import Path

from posixlab.analysis.classification.baselines import NOISE, SEED
from posixlab.analysis.classification.figures import (histogram_figure, matrix_figure, per_class_figure,
                                                      scatter_figure, violin_figure)
from posixlab.analysis.classification.load import (STRATEGIES, ClassificationRun, _as_list,
                                                   load_classification_runs, load_run)
from posixlab.analysis.classification.report import TOP_K, most_sensitive_report
from posixlab.analysis.classification.tables import classification_table1, per_class_table
from posixlab.analysis.collect import GridWarning
from posixlab.analysis.figures import save
from posixlab.analysis.paper import label
from posixlab.analysis.tables import write_table
from posixlab.errors import ConfigError


def run_classification_figures(run_dir: str | Path, out_dir: str | Path, noise: float = NOISE,
                               seed: int = SEED, k: int = TOP_K) -> dict[str, Path]:
    """The figures and report of a single run (run.py calls this after each job and logs them): the sensitivity
    violin and per-class line (one strategy), the consistency matrix and histograms, the sensitivity-consistency
    scatter with its baselines, ``most_sensitive.md`` and ``table1.md/csv``. Returns name -> file (the PNG for a
    figure)."""
    run, out = load_run(run_dir), Path(out_dir)
    paths: dict[str, Path] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)  # a small run often lacks a class; regeneration warns
        for name, fig in _run_figures(run, noise, seed, [run.strategy]):
            paths[name] = save(fig, out, name)[0]
    paths["most_sensitive"] = _write(out / "most_sensitive.md", most_sensitive_report(run, k))
    paths["table1"] = write_table(*classification_table1([run]), out, "table1")[0]
    return paths


def regenerate_classification(sources: Iterable[str | Path], out: str | Path, noise: float = NOISE,
                              seed: int = SEED, k: int = TOP_K) -> list[Path]:
    """Every classification figure, table and report the runs under ``sources`` allow, into ``out`` (``python -m
    posixlab.analysis`` passes ``<out>/classification``). Returns the files written. Names carry the data set, model
    and probability mode (and strategy, for a run's own figures), e.g. ``sensitivity_violin_trec_llama3_greedy``."""
    runs = load_classification_runs(sources)
    if not runs:
        raise ConfigError(f"found no classification results (summary.json with \"task\": \"classification\" beside "
                          f"samples.jsonl) in {', '.join(map(str, _as_list(sources)))}")
    out = Path(out)
    written = (write_table(*classification_table1(runs), out, "table1")
               + write_table(*per_class_table(runs), out, "per_class"))
    groups: dict[tuple, dict[str, ClassificationRun]] = {}
    for run in runs:
        groups.setdefault(run.group, {})[run.strategy] = run
    for group, by_strategy in groups.items():
        strategies = list(STRATEGIES) + sorted(s for s in by_strategy if s not in STRATEGIES)
        title = f"{group[0]} · {label(group[1])} · {group[2]}"
        written += save(violin_figure(by_strategy, strategies, title), out, f"sensitivity_violin_{_slug(*group)}")
        if _has_gold(by_strategy.values(), title):
            written += save(per_class_figure(by_strategy, strategies, title), out,
                            f"sensitivity_per_class_{_slug(*group)}")
    for run in runs:
        tag = _slug(run.dataset, run.model, run.strategy, run.probability)
        for name, fig in _run_figures(run, noise, seed, None):
            written += save(fig, out, f"{name}_{tag}")
        written.append(_write(out / f"most_sensitive_{tag}.md", most_sensitive_report(run, k)))
    return written


def _run_figures(run: ClassificationRun, noise: float, seed: int, strategies: list[str] | None):
    """(name, figure) pairs for one run; the cross-strategy ones only when ``strategies`` is given (single runs).
    Figures that need gold labels are skipped, with a warning, for a run without them."""
    if strategies is not None:
        yield "sensitivity_violin", violin_figure({run.strategy: run}, strategies, run.title)
    if not _has_gold([run], run.title):
        return
    if strategies is not None:
        yield "sensitivity_per_class", per_class_figure({run.strategy: run}, strategies, run.title)
    yield "consistency_matrix", matrix_figure(run)
    yield "consistency_histogram", histogram_figure(run)
    yield "sensitivity_vs_consistency", scatter_figure(run, noise, seed)


def _has_gold(runs: Iterable[ClassificationRun], title: str) -> bool:
    if any(g is not None for run in runs for g in run.gold):
        return True
    warnings.warn(f"{title}: no gold labels; the per-class and consistency figures are skipped", GridWarning,
                  stacklevel=3)
    return False


def _slug(*parts: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)).strip("-") for p in parts)



def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
