"""Two POSIX runs on the same prompt sets, compared set by set: did a change (a prompt, a model, a quantisation, a
backend, a shot count) move ψ or accuracy beyond the noise of the sets drawn?

The sets are matched by ``set_id`` (the item a set was built from), so the comparison is paired: each set's value
under the new run minus its value under the base run. For each metric both runs have, ``compare_runs`` reports the
means over the shared sets, the mean difference with a percentile bootstrap interval over the sets
(``metrics.stats.bootstrap_ci``, seeded) and the two-sided Wilcoxon signed-rank p-value
(``metrics.stats.paired_wilcoxon``), and a verdict from the interval: ``worse`` or ``better`` when it excludes 0
(ψ: lower is better; accuracy: higher is better), ``identical`` when every set's value is the same, else
``within noise``. Each verdict is at 95 % on its own (2.5 % a side; the percentile interval is a little narrow on few
sets: 4 % at 20 sets, docs/choices.md), so a CI gate names the metrics it guards (``metrics``). The metrics:

- ``psi``: the set's ψ (its mean over sets is POSIX);
- ``accuracy_options`` / ``accuracy_greedy``: the set's accuracy over the prompts it answered, in each reading.

A set's prompts may differ between the runs (that may be the change): only the sets are paired, never prompt j.
Records are read one at a time (``results.iter_records``), so a paper-sized cell compares in little memory.

>>> sets = lambda psis: [{"set_id": f"q{n}", "psi": p} for n, p in enumerate(psis)]
>>> psi = paired_metrics(sets([0.2, 0.3, 0.4, 0.5, 0.6]), sets([0.3, 0.5, 0.5, 0.8, 0.7]))[0]
>>> psi["metric"], psi["sets"], round(psi["difference"], 4), psi["verdict"]   # every set higher: worse
('psi', 5, 0.16, 'worse')
>>> round(psi["wilcoxon_p"], 4)     # five differences, all positive: the exact two-sided p is 2 · 2⁻⁵
0.0625
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from posixlab.errors import ConfigError
from posixlab.metrics.stats import bootstrap_ci, paired_wilcoxon
from posixlab.results import SETS_FILE, SUMMARY_FILE, iter_records

METRICS = (("psi", "lower"), ("accuracy_options", "higher"), ("accuracy_greedy", "higher"))  # name, better
CONFIDENCE = 0.95
# settings that say where a run wrote or cached, not what it computed: left out of "what changed"
UNCOMPARED = {"output_dir", "score_cache", "score_cache_dir", "cache_dir", "shard", "dry_run", "progress"}


def set_values(record: dict) -> dict:
    """One set's metrics (``METRICS``): ψ, and the accuracy over the prompts answered in each reading (None where
    the set has none)."""
    out = {"set_id": record.get("set_id", f"#{record.get('set_index')}"), "psi": record.get("psi")}
    for reading in ("options", "greedy"):
        marks = [a[f"by_{reading}"]["correct"] for a in record.get("answers") or []
                 if a and a.get(f"by_{reading}") and a[f"by_{reading}"].get("correct") is not None]
        out[f"accuracy_{reading}"] = sum(map(float, marks)) / len(marks) if marks else None
    return out


def run_values(folder: str | Path) -> tuple[dict, list[dict]]:
    """A POSIX run folder's summary and per-set values (``set_values``), in file order; a clear error for a folder
    that holds no finished POSIX run."""
    folder = Path(folder)
    summary_path, sets_path = folder / SUMMARY_FILE, folder / SETS_FILE
    if not summary_path.is_file():
        raise ConfigError(f"{folder} holds no {SUMMARY_FILE}: compare the folders of finished runs (a run writes it "
                          f"at its end; `posixlab merge` writes it for shards)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    if summary.get("task", "posix") != "posix" or not sets_path.is_file():
        raise ConfigError(f"{folder} is a {summary.get('task')} run: posixlab compare reads POSIX runs "
                          f"({SETS_FILE}), whose sets are paired by their set_id")
    values = [set_values(r) for r in iter_records(folder, SETS_FILE)]
    ids = [v["set_id"] for v in values]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{folder} has sets with the same set_id: sets cannot be paired by it")
    return summary, values


def paired_metrics(base: list[dict], new: list[dict], seed: int = 0, confidence: float = CONFIDENCE,
                   metrics=None) -> list[dict]:
    """Each metric of ``METRICS`` (or of ``metrics``, names) that both runs have on at least one shared set: means,
    mean difference (new − base), its bootstrap interval, the Wilcoxon p-value and the verdict. ``base``/``new``:
    ``set_values`` rows."""
    by_id = {v["set_id"]: v for v in new}
    pairs = [(b, by_id[b["set_id"]]) for b in base if b["set_id"] in by_id]
    out = []
    for metric, better in METRICS:
        if metrics is not None and metric not in metrics:
            continue
        both = [(b[metric], n[metric]) for b, n in pairs if b.get(metric) is not None and n.get(metric) is not None]
        if not both:
            continue
        old, now = np.array(both, dtype=np.float64).T
        diff = now - old
        lo, hi = bootstrap_ci(diff, confidence=confidence, seed=seed)
        higher = "worse" if better == "lower" else "better"
        lower = "better" if better == "lower" else "worse"
        verdict = "identical" if not diff.any() else higher if lo > 0 else lower if hi < 0 else "within noise"
        test = paired_wilcoxon(now, old)
        out.append({"metric": metric, "better": better, "sets": len(both), "base": float(old.mean()),
                    "new": float(now.mean()), "difference": float(diff.mean()), "interval": [lo, hi],
                    "wilcoxon_p": test["pvalue"], "verdict": verdict})
    return out


def config_changes(base: dict, new: dict) -> dict:
    """The settings whose values differ between two runs' configs (dotted keys -> [base, new]), less where they
    wrote (``UNCOMPARED``)."""
    flat_base, flat_new = _flatten(base), _flatten(new)
    keys = sorted(set(flat_base) | set(flat_new))
    return {k: [flat_base.get(k), flat_new.get(k)] for k in keys
            if flat_base.get(k) != flat_new.get(k) and not set(k.split(".")) & UNCOMPARED}


def _flatten(node: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def compare_runs(base_folder: str | Path, new_folder: str | Path, seed: int = 0, confidence: float = CONFIDENCE,
                 metrics=None) -> dict:
    """Compare the run in ``new_folder`` with the one in ``base_folder`` on the sets both hold (module docstring);
    ``metrics``: names from ``METRICS`` (default: all). Refuses runs that share no set, and unknown metrics."""
    unknown = sorted(set(metrics or ()) - {name for name, _ in METRICS})
    if unknown:
        raise ConfigError(f"unknown metric(s) {', '.join(unknown)}: name some of {', '.join(n for n, _ in METRICS)}")
    base_summary, base = run_values(base_folder)
    new_summary, new = run_values(new_folder)
    shared = {v["set_id"] for v in base} & {v["set_id"] for v in new}
    if not shared:
        raise ConfigError(f"{base_folder} and {new_folder} share no set (by set_id): compare runs of the same data "
                          f"set, sample and seed (task.num_sets, dataset, seed)")
    return {"base": str(base_folder), "new": str(new_folder), "confidence": confidence, "seed": seed,
            "sets": {"shared": len(shared), "base_only": len(base) - len(shared), "new_only": len(new) - len(shared)},
            "changed": config_changes(base_summary.get("config") or {}, new_summary.get("config") or {}),
            "metrics": paired_metrics(base, new, seed, confidence, metrics)}


def compare_table(result: dict) -> str:
    """``compare_runs``'s result as Markdown: what changed, then one row per metric."""
    f = lambda v: "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"  # noqa: E731
    sets = result["sets"]
    changed = "; ".join(f"{k}: {a} → {b}" for k, (a, b) in result["changed"].items()) or "nothing in the configs"
    lines = [f"{result['new']} against {result['base']}, on {sets['shared']} shared sets ({sets['base_only']} only in "
             f"the base run, {sets['new_only']} only in the new one).", "", f"Changed: {changed}.", "",
             f"| metric | better | sets | base | new | new − base | {result['confidence']:.0%} interval | Wilcoxon p "
             "| verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for m in result["metrics"]:
        lines.append(f"| {m['metric']} | {m['better']} | {m['sets']} | {f(m['base'])} | {f(m['new'])} | "
                     f"{m['difference']:+.4f} | {m['interval'][0]:+.4f} to {m['interval'][1]:+.4f} | "
                     f"{f(m['wilcoxon_p'])} | {m['verdict']} |")
    lines += ["", "Paired by set: each set's value in the new run minus the base run's; interval: percentile "
                  "bootstrap of the mean difference over the sets; verdict from the interval (0 outside it)."]
    return "\n".join(lines)
