"""What the command line, the CI gate and the run tracker say about a classification run (``ClassificationTask``'s
``config_from``, ``report_lines``, gate metrics, ``tracked`` and ``figures``): read from the composed config and from
a finished run's summary and folder alone."""

from __future__ import annotations

import json
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.models.loading import spec_from_dict
from posixlab.results import SAMPLES_FILE, api_lines
from posixlab.tasks.base import (ACCURACY_GATES, ACCURACY_MISSING, FRACTION, Tracked, model_name, read_setting,
                                  shared_settings)
from posixlab.tasks.classification.config import ClassificationConfig, ClassificationData

GATE_METRICS = {"max_sensitivity": "sensitivity.mean", "min_consistency": "consistency.mean",
                "min_micro_f1": "micro_f1.mean", **ACCURACY_GATES}
# a constant classifier has S = 0 and C = 1, which would pass every threshold above: its answer share is checked
# beside any of them (gate.max_answer_share, default 0.95)
GATE_GUARDS = {"max_answer_share": "answers.majority_share"}
# S is a normalised entropy, C one minus a mean total variation distance: both, like micro-F1 and a share, 0 to 1
GATE_RANGES = dict.fromkeys((*GATE_METRICS, *GATE_GUARDS), FRACTION)
GATE_MISSING = {
    "consistency": "the run has no gold labels (consistency compares the samples of each gold class)",
    "consistency.mean": "no gold class has two samples (consistency compares pairs of samples of a class)",
    "micro_f1": "not every sample has a gold label",
    **ACCURACY_MISSING,
}
TABLE_COLUMNS = ("sample_id", "gold", "sensitivity", "distribution", "labels", "answers")


def config_from(c: dict, output_dir: str) -> ClassificationConfig:
    from posixlab.structured.schema import load_schema_file

    dataset = dict(c["dataset"])
    if dataset.pop("task", "posix") != "classification":
        raise ConfigError(f"dataset {dataset['name']} is not a classification data set; with task=classification "
                          f"choose dataset=mmlu_letters (offline), trec, cb, rte, dbpedia14, wos46985, or classifier "
                          f"dataset.path=my_task.yaml (your own)")
    dataset.pop("max_new_tokens", None)
    task = c["task"]
    return ClassificationConfig(
        model=spec_from_dict(c["model"]),
        data=read_setting(dataset, ClassificationData, f"dataset {dataset['name']}"),
        strategy=c["strategy"]["name"],
        num_rephrasings=task["num_rephrasings"],
        task_sentence=task["task_sentence"],
        probability=task["probability"],
        repeats=task["repeats"],
        variants=task["variants"],
        structured_mode=task["structured_mode"],
        schema_reasoning=task["schema_reasoning"],
        schema_dimensions=None if task["schema_dimensions"] is None else tuple(task["schema_dimensions"]),
        schema=None if task.get("schema") is None else load_schema_file(task["schema"]),
        **shared_settings(c, output_dir),
    )


def report_lines(summary: dict) -> list[str]:
    s, c, f1 = summary["sensitivity"], summary["consistency"], summary["micro_f1"]
    consistency = "n/a (no gold labels)" if c is None else "n/a (no class has two samples)" \
        if c["mean"] is None else f"{c['mean']:.4f}" + (
            f" (95% CI {c['ci95'][0]:.4f} to {c['ci95'][1]:.4f})" if c.get("ci95") else "")
    f1_text = ("n/a (no gold labels)" if c is None else "n/a (a sample has no gold label)") if f1 is None else \
        f"{f1['mean']:.4f} ± {f1['sd'] or 0:.4f}" + (
            "" if f1.get("majority_baseline") is None else f" (majority class alone: {f1['majority_baseline']:.4f})")
    n = summary["num_samples"]
    interval = " (no interval from one sample)" if n == 1 else \
        f" (95% CI {s['ci95'][0]:.4f} to {s['ci95'][1]:.4f})" if s.get("ci95") else ""
    lines = [f"sensitivity S = {s['mean']:.4f}{interval} · consistency C = {consistency} · micro-F1 = {f1_text} "
             f"({n} sample{'' if n == 1 else 's'} × Q = {summary['num_rephrasings']}) · "
             f"{model_name(summary)} · {summary['dataset']} · {summary['strategy']} · "
             f"{summary['probability']}"]
    answers = summary.get("answers") or {}
    if answers.get("one_class"):
        lines.append(f"warning: {answers['majority_share']:.0%} of the {answers['num_answers']} answers are "
                     f"{answers['majority_class']!r}: a (nearly) constant classifier, whose low S and high C say "
                     f"nothing about robustness (a gated run fails: gate.max_answer_share)")
    return lines + api_lines(summary)


def tracked(summary: dict, folder: Path) -> Tracked:
    """S, C, micro-F1 in the summary; one table row per sample."""
    s, c, f1 = summary["sensitivity"], summary.get("consistency") or {}, summary.get("micro_f1") or {}
    low, high = s.get("ci95") or (None, None)  # a summary written before S (or C) had its interval has none
    c_low, c_high = c.get("ci95") or (None, None)
    rows = []
    with open(Path(folder) / SAMPLES_FILE, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            rows.append([r["sample_id"], r["gold"], r["sensitivity"], json.dumps(r["distribution"]),
                         json.dumps([p["label"] for p in r["predictions"]], ensure_ascii=False),
                         json.dumps([p["answer"] for p in r["predictions"]], ensure_ascii=False)])
    return Tracked({
        "sensitivity": s["mean"], "sensitivity_sd": s["sd"], "sensitivity_median": s["median"],
        "sensitivity_ci95_low": low, "sensitivity_ci95_high": high,
        "consistency": c.get("mean"), "consistency_pooled": c.get("pooled"),
        "consistency_ci95_low": c_low, "consistency_ci95_high": c_high,
        "consistency_with_self_pairs": c.get("mean_with_self_pairs"),
        "micro_f1": f1.get("mean"), "micro_f1_sd": f1.get("sd"), "na_share": summary.get("na_share"),
        "num_samples": summary["num_samples"], "num_rephrasings": summary["num_rephrasings"],
        **{f"sensitivity/{k}": v for k, v in s.get("per_class", {}).items()},
        **{f"consistency/{k}": v for k, v in (c.get("per_class") or {}).items()},
    }, "samples", list(TABLE_COLUMNS), rows, "classification-results",
        {"sensitivity": s["mean"], "consistency": c.get("mean")})


def figures(folder: Path) -> dict[str, Path]:
    """The per-run figures of Errica et al.'s measurements (PNG files; the W&B log takes those)."""
    from posixlab.analysis.classification import run_classification_figures

    made = run_classification_figures(str(folder), Path(folder) / "figures")
    return {k: v for k, v in made.items() if str(v).endswith(".png")}


def live_metrics(records: list[dict]) -> dict:
    """Mean S over the samples finished so far, and C once two samples of a gold class are in."""
    from posixlab.metrics.classification import consistency

    out = {"S": sum(r["sensitivity"] for r in records) / len(records)} if records else {}
    gold = [r.get("gold") for r in records]
    if any(g is not None for g in gold):
        try:
            out["C"] = consistency([r["distribution"] for r in records], gold)["mean"]
        except Exception:  # noqa: BLE001 (fewer than 2 samples of any class so far)
            pass
    return out
