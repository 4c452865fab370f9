"""The results of a run, as files a person can open; the one source of truth for every later table and figure.

A run folder holds:

- ``config.yaml``: the resolved configuration (written by the caller, e.g. ``run.py``);
- ``sets.jsonl``: one JSON record per prompt set, appended and flushed as each set finishes, so an interrupted run
  keeps every set it completed;
- ``summary.json`` and ``summary.md``: POSIX with mean, standard deviation, median, number of sets and a bootstrap
  95% interval, the mean of each factor, the model's identity and the run's compute accounting.

A classification run folder (``posixlab/classify/run.py``) holds ``rephrasings.json``, ``samples.jsonl`` and its own
``summary.json`` and ``summary.md`` (``"task": "classification"``; written by ``write_classification_summary``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from posixlab.metrics import summarize
from posixlab.metrics.classification import NA
from posixlab.metrics.factors import FACTOR_NAMES
from posixlab.metrics.stats import bootstrap_ci

SETS_FILE = "sets.jsonl"
SUMMARY_FILE = "summary.json"
# classification runs (posixlab/classify/run.py) write these beside summary.json
SAMPLES_FILE = "samples.jsonl"
REPHRASINGS_FILE = "rephrasings.json"
SUMMARY_MD = "summary.md"
SCHEMA_VERSION = 1


class SetWriter:
    """Appends one record per prompt set to ``sets.jsonl`` and flushes it to disk at once."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / SETS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_sets(folder: str | Path) -> list[dict]:
    path = Path(folder) / SETS_FILE
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    # the engine finishes sets in order of prompt length; the file keeps that order, readers get the data set's
    return sorted(records, key=lambda r: r.get("set_index", 0))


def build_summary(records: list[dict], meta: dict) -> dict:
    summary = {"schema_version": SCHEMA_VERSION, **meta}
    psis = [r["psi"] for r in records]
    summary["psi"] = {**summarize(psis), "ci95": list(bootstrap_ci(psis, seed=meta.get("seed", 0)))}
    summary["factors"] = factor_means(records)
    summary["psi_reference_compat"] = {
        "label": "prompt-sensitivity-index 0.0.1 formula (transposed index, divided by max_new_tokens); not the paper's",
        **summarize([r["psi_reference_compat"] for r in records]),
    }
    stats = [r["stats"] for r in records]
    naive = sum(s["forward_tokens_naive"] for s in stats)
    engine = sum(s["engine_tokens"] for s in stats)
    summary["compute"] = {
        "forward_tokens": sum(s["forward_tokens"] for s in stats),  # run through the model by this run
        "forward_tokens_naive": naive,  # one full pass per (prompt, response) pair, as the authors' library
        "saved_by_reuse": naive - engine,  # prefix caches, generation-pass diagonal, deduplication, response tries
        "saved_by_cache": sum(s["engine_tokens"] for s in stats if s["cached"]),  # served from the score cache
        "sets_from_cache": sum(bool(s["cached"]) for s in stats),
        **{k: v for k, v in meta.get("engine", {}).items() if k == "processed_tokens"},  # padding included
    }
    return summary


def factor_means(records: list[dict]) -> dict:
    """The mean of each factor over the sets that have it, and how many sets do (variance in confidence exists only
    for sets whose responses are all identical; semantic coherence only when responses were embedded)."""
    means = {}
    for name in FACTOR_NAMES:
        values = [r["factors"][name] for r in records if r.get("factors", {}).get(name) is not None]
        means[name] = {"mean": sum(values) / len(values) if values else None, "num_sets": len(values)}
    return means


def write_summary(folder: str | Path, summary: dict) -> None:
    folder = Path(folder)
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    p, c = summary["psi"], summary["psi_reference_compat"]
    fmt = lambda v: "n/a" if v is None else f"{v:.4f}"  # noqa: E731
    lines = [
        f"# POSIX: {summary.get('model', {}).get('name', '?')}, {summary.get('dataset', '?')}, "
        f"{summary.get('variant', '?')} variants",
        "",
        "| metric | POSIX (mean ψ) | bootstrap 95% interval | sd | median | sets |",
        "|---|---|---|---|---|---|",
        f"| ψ (paper, Def. 3.3) | {fmt(p['posix'])} | {fmt(p['ci95'][0])} to {fmt(p['ci95'][1])} | {fmt(p['sd'])} | "
        f"{fmt(p['median'])} | {p['num_sets']} |",
        f"| ψ (reference_compat, library 0.0.1) | {fmt(c['posix'])} | | {fmt(c['sd'])} | {fmt(c['median'])} | "
        f"{c['num_sets']} |",
        "",
        "| factor (paper §3.3) | mean over sets | sets |",
        "|---|---|---|",
        *[f"| {name} | {fmt(v['mean'])} | {v['num_sets']} |" for name, v in summary.get("factors", {}).items()],
        "",
        f"Forward tokens computed: {summary['compute']['forward_tokens']:,}; one pass per pair would need "
        f"{summary['compute']['forward_tokens_naive']:,}. Saved by reuse: {summary['compute']['saved_by_reuse']:,}; "
        f"by the score cache: {summary['compute']['saved_by_cache']:,} "
        f"({summary['compute']['sets_from_cache']} sets).",
    ]
    (folder / SUMMARY_MD).write_text("\n".join(lines) + "\n")


def write_classification_summary(folder: str | Path, summary: dict) -> None:
    """A classification run's ``summary.json`` and ``summary.md`` (``classify.run.build_classification_summary``)."""
    folder = Path(folder)
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / SUMMARY_MD).write_text(classification_summary_markdown(summary), encoding="utf-8")


def _f(x, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def classification_summary_markdown(summary: dict) -> str:
    s, c, f1 = summary["sensitivity"], summary["consistency"], summary["micro_f1"]
    lines = [f"# Classification: {summary['model'].get('name')} · {summary['dataset']} · {summary['strategy']} · "
             f"{summary['probability']}", "",
             f"{summary['num_samples']} samples × Q = {summary['num_rephrasings']} rephrasings of the task sentence; "
             f"answers naming no class (N/A): {summary['na_share']:.1%}.", "",
             "| metric | value |", "|---|---|",
             f"| sensitivity S_τ (mean ± sd over samples) | {_f(s['mean'])} ± {_f(s['sd'])} |",
             f"| consistency C_y (mean over classes, no self-pairs) | {_f(c['mean']) if c else '—'} |",
             f"| consistency, pooled over pairs / with self-pairs | "
             f"{_f(c['pooled']) if c else '—'} / {_f(c['mean_with_self_pairs']) if c else '—'} |",
             f"| micro-F1 (mean ± sd over rephrasings) | "
             f"{_f(f1['mean']) + ' ± ' + _f(f1['sd']) if f1 else '—'} |", "",
             "| class | sensitivity | consistency |", "|---|---|---|"]
    for cls in [x for x in summary["classes"] if x != NA]:
        lines.append(f"| {cls} | {_f(s['per_class'].get(cls))} | "
                     f"{_f((c['per_class'] or {}).get(cls)) if c else '—'} |")
    return "\n".join(lines) + "\n"
