"""Two runs on the same items, compared item by item: did a change (a prompt, a model, a quantisation, a backend, a
shot count) move ψ, sensitivity or accuracy beyond the noise of the items drawn?

POSIX runs are matched set by set (``set_id``: the item a set was built from and its variant type), classification
runs sample by sample (``sample_id``), so the comparison is paired: each unit's value under the new run minus its
value under the base run. Runs that share no set but ask the same questions (a spelling run and a template run of one
data set and seed) are matched by item (``item_id``), where each item has one set in each run: the change is then the
prompt set's kind, and the result says so (``paired_by``). For each metric both runs have, ``compare_runs`` reports
the means over the shared sets, the mean difference with an expanded percentile bootstrap interval over the sets
(``metrics.stats.bootstrap_ci(expanded=True)``, seeded: POSIX's resampling, read at t-corrected tails so that few sets
do not make it too narrow; on 2 to 4 sets, which no resampling reads so far out, the t interval) and the two-sided
Wilcoxon signed-rank p-value (``metrics.stats.paired_wilcoxon``), and a verdict from the interval: ``worse`` or
``better`` when it excludes 0 (ψ: lower is better; accuracy: higher is better), ``identical`` when every set's value
is the same, else ``within noise`` (one shared set has no interval: never worse or better). Each verdict is at 95 %
on its own (2.5 % a side), so a CI gate names the metrics it guards (``metrics``); a metric named there that the runs
do not both have is listed in ``not_compared`` (a gate on it must fail, not pass unchecked). The metrics:

- POSIX: ``psi``, the set's ψ (its mean over sets is POSIX); ``accuracy_options`` / ``accuracy_greedy``, the set's
  accuracy over the prompts it answered, in each reading; ``judged_share``, the share of the set's variants a judge
  called the same as the original's response (``posixlab.judge``: a run with ``judge=``, or ``posixlab judge``), where
  both runs were judged, by one judge (model, instruction and options: its ``key``; shares of two judges measure two
  things, so they are not paired, and ``notes`` says why);
- classification: ``sensitivity``, the sample's S_τ (its mean is S); ``accuracy``, the share of its rephrasings
  answered with the gold class (N/A is wrong). Consistency C pairs samples of a class with each other, so it has no
  per-sample value to pair and is not compared.

A set's prompts may differ between the runs (that may be the change): only the units are paired, never prompt j.
Records are read one at a time (``results.iter_records``), so a paper-sized cell compares in little memory.

>>> sets = lambda psis: [{"id": f"q{n}", "psi": p} for n, p in enumerate(psis)]
>>> psi = paired_metrics(sets([0.2, 0.3, 0.4, 0.5, 0.6]), sets([0.3, 0.5, 0.5, 0.8, 0.7]))[0]
>>> psi["metric"], psi["units"], round(psi["difference"], 4), psi["verdict"]   # every set higher: worse
('psi', 5, 0.16, 'worse')
>>> round(psi["wilcoxon_p"], 4)     # five differences, all positive: the exact two-sided p is 2 · 2⁻⁵
0.0625
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from posixlab.errors import ConfigError
from posixlab.judge import read_judged, verdicts_by_set
from posixlab.metrics.classification import NA
from posixlab.metrics.stats import bootstrap_ci, paired_wilcoxon
from posixlab.results import SAMPLES_FILE, SETS_FILE, SUMMARY_FILE, iter_records

CONFIDENCE = 0.95
# settings that say where a run wrote or cached, not what it computed: left out of "what changed"
ITEM_SETTINGS = ("num_sets", "num_samples", "seed")  # besides dataset.*: what draws the items a run asks
UNCOMPARED = {"output_dir", "score_cache", "score_cache_dir", "cache_dir", "shard", "dry_run", "progress"}


def set_values(record: dict) -> dict:
    """One set's values: ψ, and the accuracy over the prompts answered in each reading (None where the set has
    none)."""
    out = {"id": record.get("set_id", f"#{record.get('set_index')}"), "item": record.get("item_id"),
           "psi": record.get("psi")}
    for reading in ("options", "greedy"):
        marks = [a[f"by_{reading}"]["correct"] for a in record.get("answers") or []
                 if a and a.get(f"by_{reading}") and a[f"by_{reading}"].get("correct") is not None]
        out[f"accuracy_{reading}"] = sum(map(float, marks)) / len(marks) if marks else None
    return out


def sample_values(record: dict) -> dict:
    """One classification sample's values: S_τ, and the share of its rephrasings answered with the gold class
    (None without a gold label)."""
    gold, labels = record.get("gold"), [p["label"] for p in record.get("predictions") or []]
    accuracy = sum(label == gold and label != NA for label in labels) / len(labels) if gold is not None and labels \
        else None
    return {"id": record.get("sample_id", f"#{record.get('sample_index')}"), "sensitivity": record.get("sensitivity"),
            "accuracy": accuracy}


@dataclass(frozen=True)
class Units:
    """What a task's runs are compared by: the records file, the unit's name, its values, and each metric with the
    direction that is better."""

    file: str
    name: str
    index_key: str  # each record's place among the cell's units: the order values are read in
    values: Callable[[dict], dict]
    metrics: tuple[tuple[str, str], ...]
    # what a unit is about that runs with other units share (a set's item: its question), or None; runs that share
    # no unit are paired by it
    shared_by: str | None = None


UNITS = {"posix": Units(SETS_FILE, "set", "set_index", set_values,
                        (("psi", "lower"), ("accuracy_options", "higher"), ("accuracy_greedy", "higher"),
                         ("judged_share", "higher")), "item"),
         "classification": Units(SAMPLES_FILE, "sample", "sample_index", sample_values,
                                 (("sensitivity", "lower"), ("accuracy", "higher")))}
METRICS = tuple(dict.fromkeys(name for units in UNITS.values() for name, _ in units.metrics))


def run_values(folder: str | Path) -> tuple[dict, Units, list[dict]]:
    """A run folder's summary, its task's ``Units`` and its per-unit values in unit order (the order the bootstrap
    draws from: not the order the units finished and were written in, so that two runs of one cell compare alike);
    a clear error for a folder that holds no finished run of a task compared here."""
    folder = Path(folder)
    summary_path = folder / SUMMARY_FILE
    if not summary_path.is_file():
        raise ConfigError(f"{folder} holds no {SUMMARY_FILE}: compare the folders of finished runs (a run writes it "
                          f"at its end; `posixlab merge` writes it for shards)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    task = summary.get("task", "posix")
    units = UNITS.get(task)
    if units is None or not (folder / units.file).is_file():
        raise ConfigError(f"{folder} is a {task} run without its records: posixlab compare reads the POSIX runs' "
                          f"{SETS_FILE} and the classification runs' {SAMPLES_FILE}")
    read = ((r.get(units.index_key, n), units.values(r)) for n, r in enumerate(iter_records(folder, units.file)))
    values = checked_values(folder, units, [v for _, v in sorted(read, key=lambda p: p[0])])
    return summary, units, judged_values(folder, summary, values)


def judged_values(folder: str | Path, summary: dict, values: list[dict]) -> list[dict]:
    """A run's per-unit ``values`` with each judged set's ``judged_share`` and its judge's key (``judge``),
    where the folder holds a judge of this POSIX run (``judge.json``: ``posixlab.judge.read_judged``, which leaves out one
    written for an earlier run in the folder); unchanged where it holds none, or verdicts that cannot be read."""
    judged = read_judged(folder, summary)[0]
    rows = verdicts_by_set(folder, judged)
    if not rows:  # no judge of this run, or its verdicts gone: nothing to pair
        return values
    key, model = judged["judge"]["key"], judged["judge"].get("model")
    return [{**v, "judged_share": rows[v["id"]].get("judged_share"), "judge": key, "judge_model": model}
            if v["id"] in rows else v for v in values]


def judged_alike(base: list[dict], new: list[dict], folders=("BASE_DIR", "NEW_DIR")) \
        -> tuple[list[dict], list[dict], list[str]]:
    """(base, new, notes): judged shares are paired only where both runs were judged by one judge (its key); else
    they are dropped from both, and a note says why and what to run (``folders``: the runs' folders).

    >>> one = [{"id": "a", "judged_share": 0.5, "judge": "k1", "judge_model": "j"}]
    >>> other = [{"id": "a", "judged_share": 1.0, "judge": "k2", "judge_model": "j"}]
    >>> judged_alike(one, other)[0], judged_alike(one, other)[2][0].split(":")[0]
    ([{'id': 'a'}], 'judged_share not compared')
    >>> judged_alike(one, [{"id": "a"}], ("runs/main", "runs/pr"))[2]
    ['judged_share not compared: only the base run was judged (posixlab judge runs/pr --judge j, with its options)']
    >>> judged_alike(one, one)[2], judged_alike([{"id": "a"}], [{"id": "a"}])[2]
    ([], [])
    """
    judges = [{v.get("judge") for v in values if v.get("judged_share") is not None} for values in (base, new)]
    if not judges[0] and not judges[1] or judges[0] == judges[1] and len(judges[0]) == 1:  # neither, or one judge
        return base, new, []
    if judges[0] and judges[1]:
        why = ("the runs were judged by different judges (model, instruction or options): judge both with one "
               "(posixlab judge RUN_DIR --judge MODEL)")
    else:
        judged = base if judges[0] else new
        model = next(v.get("judge_model") for v in judged if v.get("judged_share") is not None) or "MODEL"
        why = f"only the {'base' if judges[0] else 'new'} run was judged (posixlab judge " \
              f"{folders[1] if judges[0] else folders[0]} --judge {model}, with its options)"
    dropped = [[{k: x for k, x in v.items() if k not in ("judged_share", "judge", "judge_model")} for v in values]
               for values in (base, new)]
    return *dropped, [f"judged_share not compared: {why}"]


def checked_values(folder, units: Units, values: list[dict]) -> list[dict]:
    """``values``, refused when two units share an id (they could not be paired by it)."""
    ids = [v["id"] for v in values]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{folder} has {units.name}s with the same {units.name}_id: they cannot be paired by it")
    return values


def paired_metrics(base: list[dict], new: list[dict], seed: int = 0, confidence: float = CONFIDENCE,
                   metrics=None, units: Units = UNITS["posix"]) -> list[dict]:
    """Each metric of ``units`` (or of ``metrics``, names) that both runs have on at least one shared unit: means,
    mean difference (new − base), its bootstrap interval, the Wilcoxon p-value and the verdict. ``base``/``new``:
    per-unit values (``set_values``, ``sample_values``)."""
    by_id = {v["id"]: v for v in new}
    pairs = [(b, by_id[b["id"]]) for b in base if b["id"] in by_id]
    out = []
    for metric, better in units.metrics:
        if metrics is not None and metric not in metrics:
            continue
        both = [(b[metric], n[metric]) for b, n in pairs if b.get(metric) is not None and n.get(metric) is not None]
        if not both:
            continue
        old, now = np.array(both, dtype=np.float64).T
        diff = now - old
        # one set has no spread to read: no interval, and never a verdict but "identical" or "within noise"
        lo, hi = bootstrap_ci(diff, confidence, seed=seed, expanded=True) if diff.size > 1 else (None, None)
        higher = "worse" if better == "lower" else "better"
        lower = "better" if better == "lower" else "worse"
        verdict = "identical" if not diff.any() else "within noise" if lo is None else higher if lo > 0 \
            else lower if hi < 0 else "within noise"
        test = paired_wilcoxon(now, old)
        out.append({"metric": metric, "better": better, "units": len(both), "base": float(old.mean()),
                    "new": float(now.mean()), "difference": float(diff.mean()), "interval": [lo, hi],
                    "wilcoxon_p": test["pvalue"], "verdict": verdict})
    return out


def config_changes(base: dict, new: dict) -> dict:
    """The settings whose values differ between two runs' configs (dotted keys -> [base, new]), less where they
    wrote (``UNCOMPARED``)."""
    flat_base, flat_new = flatten(base), flatten(new)
    keys = sorted(set(flat_base) | set(flat_new))
    return {k: [flat_base.get(k), flat_new.get(k)] for k in keys
            if flat_base.get(k) != flat_new.get(k) and not set(k.split(".")) & UNCOMPARED}


# where a run's numbers were computed, outside its config: words -> the summary's dotted key
ENVIRONMENT = {"posixlab": "posixlab", "python": "python", "torch": "model.torch", "transformers": "model.transformers",
               "device": "model.device", "machine": "environment.machine", "torch threads": "environment.torch_threads"}


def environment_changes(base: dict, new: dict) -> dict:
    """What differs between two runs' summaries outside their configs: versions, device, machine, torch's thread
    count (words -> [base, new]). A value one run did not record (an older run, a model behind a server) is no change.

    >>> environment_changes({"python": "3.11.7", "environment": {"torch_threads": 1}},
    ...                     {"python": "3.11.7", "environment": {"torch_threads": 2}, "model": {"torch": "2.13.0"}})
    {'torch threads': [1, 2]}
    """
    flat_base, flat_new = flatten(base), flatten(new)
    pairs = {words: [flat_base.get(key), flat_new.get(key)] for words, key in ENVIRONMENT.items()}
    return {words: pair for words, pair in pairs.items() if None not in pair and pair[0] != pair[1]}


def item_settings_changed(base: dict | None, new: dict | None) -> str:
    """Words for a refusal of two runs that share no unit: the settings that choose the items (the data set's, the
    number of units, the seed) and differ between the runs, base → new.

    >>> item_settings_changed({"num_sets": 20, "dataset": {"max_question_chars": None}, "variant": "spelling"},
    ...                       {"num_sets": 6, "dataset": {"max_question_chars": 130}, "variant": "mixture"})
    '; the settings that choose the items differ: dataset.max_question_chars null → 130, num_sets 20 → 6'
    """
    changed = {key: values for key, values in config_changes(base or {}, new or {}).items()
               if key.split(".")[0] == "dataset" or key.rpartition(".")[2] in ITEM_SETTINGS}
    return "; the settings that choose the items differ: " + ", ".join(
        f"{key} {json.dumps(old)} → {json.dumps(now)}" for key, (old, now) in changed.items()) if changed else ""


def flatten(node: dict, prefix: str = "") -> dict:
    """A nested configuration's leaves by dotted key, in its order (an empty mapping has none)."""
    out = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def compare_runs(base_folder: str | Path, new_folder: str | Path, seed: int = 0, confidence: float = CONFIDENCE,
                 metrics=None) -> dict:
    """Compare the run in ``new_folder`` with the one in ``base_folder`` on the units both hold (module docstring);
    ``metrics``: names of the task's metrics (default: all). Refuses runs of different tasks, runs that share no
    unit, and metrics the task has not."""
    return compare_values((base_folder, *run_values(base_folder)), (new_folder, *run_values(new_folder)), seed,
                          confidence, metrics)


def compare_values(base_run: tuple, new_run: tuple, seed: int = 0, confidence: float = CONFIDENCE,
                   metrics=None) -> dict:
    """``compare_runs`` of two runs already read: each ``(folder, summary, units, values)`` as ``run_values`` gives
    them (a report page reads a run's records once, for its sections and its pairing)."""
    base_folder, base_summary, units, base = base_run
    new_folder, new_summary, new_units, new = new_run
    if new_units is not units:
        raise ConfigError(f"{base_folder} and {new_folder} are runs of different tasks ({base_summary.get('task')}, "
                          f"{new_summary.get('task')}): compare runs of one task")
    names = [name for name, _ in units.metrics]
    unknown = sorted(set(metrics or ()) - set(names))
    if unknown:
        raise ConfigError(f"unknown metric(s) {', '.join(unknown)} for {units.name}s: name some of {', '.join(names)}")
    shared, by = {v["id"] for v in base} & {v["id"] for v in new}, units.name
    if not shared and units.shared_by:  # other units of the same questions (another variant type): by question
        key = units.shared_by
        keys = [[v.get(key) for v in values] for values in (base, new)]
        if all(None not in k and len(set(k)) == len(k) for k in keys) and set(keys[0]) & set(keys[1]):
            base, new = ([{**v, "id": v[key]} for v in values] for values in (base, new))
            shared, by = set(keys[0]) & set(keys[1]), key
    if not shared:
        raise ConfigError(f"{base_folder} and {new_folder} share no {units.name} (by {units.name}_id"
                          + (f" or {units.shared_by}_id" if units.shared_by else "")
                          + "): compare runs of the same data set, sample and seed"
                          + item_settings_changed(base_summary.get("config"), new_summary.get("config")))
    base, new, notes = judged_alike(base, new, (base_folder, new_folder))
    compared = paired_metrics(base, new, seed, confidence, metrics, units)
    missing = [m for m in dict.fromkeys(metrics or ()) if m not in {c["metric"] for c in compared}]
    return {"base": str(base_folder), "new": str(new_folder), "unit": units.name, "paired_by": by,
            "confidence": confidence, "seed": seed,
            "units": {"shared": len(shared), "base_only": len(base) - len(shared), "new_only": len(new) - len(shared)},
            "changed": config_changes(base_summary.get("config") or {}, new_summary.get("config") or {}),
            "environment_changed": environment_changes(base_summary, new_summary),
            "metrics": compared, "not_compared": missing, "notes": notes}


def compare_table(result: dict) -> str:
    """``compare_runs``'s result as Markdown: what changed, then one row per metric."""
    f = number_words
    units, unit = result["units"], result["unit"]
    changed = "; ".join(f"{k}: {a} → {b}" for k, (a, b) in result["changed"].items()) or "nothing in the configs"
    by = result.get("paired_by", unit)
    shared = f"{units['shared']} shared {unit}s" if by == unit else f"the {unit}s of {units['shared']} shared {by}s"
    lines = [f"{result['new']} against {result['base']}, on {shared} ({units['base_only']} only in the base run, "
             f"{units['new_only']} only in the new one" + ("" if by == unit else f"; the runs share no {unit}, so "
                                                          f"each {by}'s {unit} in one is paired with its {unit} in "
                                                          f"the other") + ").", "", f"Changed: {changed}.",
             *environment_lines(result.get("environment_changed")), "",
             f"| metric | better | {unit}s | base | new | new − base | {result['confidence']:.0%} interval | "
             "Wilcoxon p | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for m in result["metrics"]:
        lines.append(f"| {m['metric']} | {m['better']} | {m['units']} | {f(m['base'])} | {f(m['new'])} | "
                     f"{m['difference']:+.4f} | {interval_words(m['interval'])} | {f(m['wilcoxon_p'])} | "
                     f"{m['verdict']} |")
    lines += ["", f"Paired by {by}: each {unit}'s value in the new run minus the base run's; interval: expanded "
                  f"percentile bootstrap of the mean difference over the {unit}s (on 2 to 4 {unit}s, the t interval); "
                  f"verdict from the interval (0 outside it)."]
    return "\n".join(lines + unpaired_lines(result))


def environment_lines(changed: dict | None) -> list[str]:
    """The line under "Changed:" naming what differed outside the configs, where anything did.

    >>> changed = {"python": ["3.11.7", "3.11.9"], "torch threads": [1, 2]}
    >>> print(*environment_lines(changed))  # doctest: +NORMALIZE_WHITESPACE
    Ran differently: python 3.11.7 → 3.11.9; torch threads 1 → 2 (another thread count moves a CPU run's numbers
    in their last bits).
    """
    if not changed:
        return []
    return [f"Ran differently: {environment_words(changed)}."]


def environment_words(changed: dict) -> str:
    """``environment_changes`` in words (a report page's "what changed" cell too), and why a thread count matters.

    >>> environment_words({"device": ["cpu", "cuda:0"]})
    'device cpu → cuda:0'
    """
    why = " (another thread count moves a CPU run's numbers in their last bits)" if "torch threads" in changed else ""
    return "; ".join(f"{k} {a} → {b}" for k, (a, b) in changed.items()) + why


def unpaired_lines(result: dict, cell: str = "") -> list[str]:
    """What a comparison left out, as a table's closing lines: metrics named but not held by both runs, and why
    judged shares were not paired."""
    missing = result.get("not_compared") or []
    lines = [f"{cell}{note}." for note in result.get("notes") or []] + \
        [f"{cell}Named but not compared (a run lacks it): {', '.join(missing)}."] * bool(missing)
    return [""] * bool(lines and not cell) + lines


def number_words(value) -> str:
    """A mean or p-value as a table shows it: four decimals, n/a where there is none (a p-value of no difference).

    >>> number_words(0.06251), number_words(None), number_words(float("nan"))
    ('0.0625', 'n/a', 'n/a')
    """
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def interval_words(interval) -> str:
    """A difference's interval as a table shows it (n/a for a single unit's, which has none)."""
    lo, hi = interval
    return "n/a (one unit)" if lo is None else f"{lo:+.4f} to {hi:+.4f}"
