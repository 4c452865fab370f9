"""The classification tables, copied from the runs' summaries: Table 1 (micro-F1, S_τ, C_y per run) and its
per-class companion, each as Markdown and records for ``posixlab.analysis.tables.write_table``."""

from __future__ import annotations

from collections import Counter

from posixlab.analysis.classification.load import STRATEGY_LABELS, ClassificationRun
from posixlab.analysis.paper import label
from posixlab.analysis.tables import fmt


def classification_table1(runs: list[ClassificationRun]) -> tuple[str, list[dict]]:
    """The paper's Table 1 layout: one row per run with micro-F1 (mean ± sd over the Q rephrasings), sensitivity
    (mean ± sd over samples) and consistency (mean over classes, no self-pairs), all copied from ``summary.json``."""
    records = [_record(run) for run in runs]
    lines = ["## Classification: micro-F1, sensitivity and consistency (Errica et al., Table 1)", "",
             "| data set | model | strategy | probability | samples | Q | micro-F1 (mean ± sd over rephrasings) | "
             "sensitivity S_τ (mean ± sd over samples, [95% CI]) | consistency C_y (mean over classes, [95% CI]) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {label(r['model'])} | {STRATEGY_LABELS.get(r['strategy'], r['strategy'])} | "
                     f"{r['probability']} | {r['samples']} | {r['rephrasings']} | "
                     f"{fmt(r['micro_f1_mean'], r['micro_f1_sd'])} | "
                     f"{_with_interval(fmt(r['sensitivity_mean'], r['sensitivity_sd']), r, 'sensitivity')} | "
                     f"{_with_interval(fmt(r['consistency_mean'], None), r, 'consistency')} |")
    lines += ["", "Consistency: C_y(x, x') = 1 − TVD over the pairs of distinct samples of a gold class, averaged per "
                  "class, then over classes (the CSV also has the pooled mean and the mean with self-pairs). Blank: "
                  "the run has no gold labels."]
    return "\n".join(lines), records


def _with_interval(text: str, record: dict, name: str) -> str:
    """A table cell and, after it, the 95% interval of ``name`` where the run's summary has one ("0.046 ± 0.091
    [0.015, 0.085]"; a summary written before the intervals: the cell alone).

    >>> _with_interval("0.807", {"consistency_ci95_low": 0.6274, "consistency_ci95_high": 0.9783}, "consistency")
    '0.807 [0.627, 0.978]'
    """
    low, high = record.get(f"{name}_ci95_low"), record.get(f"{name}_ci95_high")
    return text if low is None or high is None else f"{text} [{low:.3f}, {high:.3f}]"


def per_class_table(runs: list[ClassificationRun]) -> tuple[str, list[dict]]:
    """Sensitivity and consistency per gold class, one row per (run, class), from ``summary.json``."""
    records = []
    for run in runs:
        s, c = run.summary["sensitivity"].get("per_class") or {}, run.summary["consistency"].get("per_class") or {}
        golds = Counter(run.gold)
        for cls in run.real_classes:
            records.append({"dataset": run.dataset, "model": run.model, "strategy": run.strategy,
                            "probability": run.probability, "class": cls, "samples": golds.get(cls, 0),
                            "sensitivity": s.get(cls), "consistency": c.get(cls)})
    lines = ["## Classification: sensitivity and consistency per gold class", "",
             "| data set | model | strategy | probability | class | samples | sensitivity S_τ | consistency C_y |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {label(r['model'])} | {STRATEGY_LABELS.get(r['strategy'], r['strategy'])} | "
                     f"{r['probability']} | {r['class']} | {r['samples']} | {fmt(r['sensitivity'], None)} | "
                     f"{fmt(r['consistency'], None)} |")
    return "\n".join(lines), records


def _record(run: ClassificationRun) -> dict:
    s, c, f1 = run.summary["sensitivity"], run.summary.get("consistency") or {}, run.summary.get("micro_f1") or {}
    low, high = s.get("ci95") or (None, None)  # a summary written before S (or C) had its interval has none
    c_low, c_high = c.get("ci95") or (None, None)
    return {"dataset": run.dataset, "model": run.model, "strategy": run.strategy, "probability": run.probability,
            "samples": run.summary.get("num_samples", len(run.samples)),
            "rephrasings": run.summary.get("num_rephrasings"),
            "micro_f1_mean": f1.get("mean"), "micro_f1_sd": f1.get("sd"),
            "sensitivity_mean": s.get("mean"), "sensitivity_sd": s.get("sd"), "sensitivity_median": s.get("median"),
            "sensitivity_ci95_low": low, "sensitivity_ci95_high": high,
            "consistency_mean": c.get("mean"), "consistency_ci95_low": c_low, "consistency_ci95_high": c_high,
            "consistency_pooled": c.get("pooled"),
            "consistency_with_self_pairs": c.get("mean_with_self_pairs"), "source": str(run.folder)}
