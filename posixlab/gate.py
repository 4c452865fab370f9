"""A CI gate: thresholds on a run's ``summary.json``, so that a prompt change is checked like code.

Each threshold reads one key of the summary a run writes (``posixlab.results.build_summary`` for POSIX,
``posixlab.tasks.classification.build_classification_summary`` for classifiers, the accuracy block of
``posixlab.answers.accuracy_summary`` for both):

=========================== ============================================== ==============================
threshold                   summary key                                    task
=========================== ============================================== ==============================
``max_posix``               ``psi.posix``                                  posix
``max_sensitivity``         ``sensitivity.mean``                           classification
``min_consistency``         ``consistency.mean``                           classification (gold labels)
``min_micro_f1``            ``micro_f1.mean``                              classification (gold labels)
``min_accuracy``            ``accuracy.by_<reading>.accuracy``             both (gold answers)
``max_accuracy_spread``     ``accuracy.by_<reading>.spread.range``         both (gold answers)
``min_worst_case_accuracy`` ``accuracy.by_<reading>.worst_case``           both (gold answers)
=========================== ============================================== ==============================

``max_answer_share`` (default 0.95; ``answers.majority_share``, classification) guards the others: whenever a
classification run is gated, it also fails when that share of its answers name one class (a constant classifier
has S = 0 and C = 1, which would pass every sensitivity and consistency threshold). ``gate.max_answer_share=null``
turns it off (a data set that is itself nearly one class), a value sets it; it is never checked on its own.

``max_`` thresholds pass when the value is at most the threshold, ``min_`` ones when it is at least the threshold.
The accuracy reading (``accuracy_reading``): ``options`` (the best-scoring option, lm-evaluation-harness's multiple
choice) or ``greedy`` (the greedy response parsed); unset, ``options`` when the run scored the options, else
``greedy`` (classification runs have only ``greedy``). ``max_accuracy_spread`` is max − min of the per-prompt
accuracies; ``min_worst_case_accuracy`` is HELM's worst case (an item counts only when right under every prompt).

A threshold on a metric the run cannot have is a ``ConfigError``, not a failed gate: ``check_gate_applies`` refuses
one the task has no metric for before the run starts; ``check_gate`` refuses one the run's data leaves out (no gold
labels, options not scored) after it. A run that stopped before its end (``summary["stopped"]`` set) fails the gate.
No Hydra here: ``posixlab.cli`` builds a ``GateConfig`` from the ``gate`` config node and exits 1 on a failed gate.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from posixlab.errors import ConfigError

READINGS = ("options", "greedy")


@dataclass(frozen=True)
class GateConfig:
    """Thresholds on a run's summary; None (the default) checks nothing."""

    max_posix: float | None = None  # psi.posix
    max_sensitivity: float | None = None  # sensitivity.mean
    min_consistency: float | None = None  # consistency.mean
    min_micro_f1: float | None = None  # micro_f1.mean
    min_accuracy: float | None = None  # accuracy.by_<reading>.accuracy (mean over prompts)
    max_accuracy_spread: float | None = None  # accuracy.by_<reading>.spread.range (max - min over prompts)
    min_worst_case_accuracy: float | None = None  # accuracy.by_<reading>.worst_case
    accuracy_reading: str | None = None  # options | greedy; None: options when the run has them, else greedy
    # answers.majority_share: checked beside any other threshold of a classification run (a constant classifier)
    max_answer_share: float | None = 0.95


@dataclass(frozen=True)
class _Metric:
    key: str  # dotted path into the summary; {reading} is the accuracy reading
    task: str | None  # the only task whose summary has it; None: both


METRICS = {
    "max_posix": _Metric("psi.posix", "posix"),
    "max_sensitivity": _Metric("sensitivity.mean", "classification"),
    "min_consistency": _Metric("consistency.mean", "classification"),
    "min_micro_f1": _Metric("micro_f1.mean", "classification"),
    "min_accuracy": _Metric("accuracy.by_{reading}.accuracy", None),
    "max_accuracy_spread": _Metric("accuracy.by_{reading}.spread.range", None),
    "min_worst_case_accuracy": _Metric("accuracy.by_{reading}.worst_case", None),
}
# checked whenever a threshold of METRICS is, never alone
GUARDS = {"max_answer_share": _Metric("answers.majority_share", "classification")}

# why a summary has null (or nothing) at a key, by the first key on the path that is missing
WHY_MISSING = {
    "consistency": "the run has no gold labels (consistency compares the samples of each gold class)",
    "consistency.mean": "no gold class has two samples (consistency compares pairs of samples of a class)",
    "micro_f1": "not every sample has a gold label",
    "accuracy": "no item has a gold answer (POSIX: the data set's answers or your sets' \"answer\"; "
                "classification: gold labels)",
    "accuracy.by_options": "the run did not score the options (score_options=false, or items without options); "
                           "set gate.accuracy_reading=greedy",
    "accuracy.by_greedy": "the run has no greedy answers",
}


@dataclass(frozen=True)
class GateRow:
    """One checked threshold: ``value`` read from ``key`` of the summary, against ``threshold``."""

    metric: str  # the threshold's name (max_posix, ...), or "complete" for a run that stopped early
    threshold: float | None
    value: float | str
    passed: bool
    key: str = ""  # the summary key read


def make_gate(values: dict | None) -> GateConfig:
    """A ``GateConfig`` from a config node, or a ``ConfigError`` naming an unknown key or a value that is not a
    number.

    >>> make_gate({"max_sensitivity": 0.2, "min_consistency": None})
    GateConfig(max_posix=None, max_sensitivity=0.2, min_consistency=None, min_micro_f1=None, min_accuracy=None, max_accuracy_spread=None, min_worst_case_accuracy=None, accuracy_reading=None, max_answer_share=0.95)
    >>> make_gate({"max_sensitvity": 0.2})
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate has no setting max_sensitvity (the thresholds are max_posix, max_sensitivity, min_consistency, min_micro_f1, min_accuracy, max_accuracy_spread, min_worst_case_accuracy; and accuracy_reading, max_answer_share)
    """
    values = dict(values or {})
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(GateConfig)})
    if unknown:
        raise ConfigError(f"gate has no setting {', '.join(unknown)} (the thresholds are {', '.join(METRICS)}; and "
                          f"accuracy_reading, max_answer_share)")
    for name in (*METRICS, *GUARDS):
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise ConfigError(f"gate.{name} must be a number, got {value!r}")
        if value is not None:
            values[name] = float(value)
    reading = values.get("accuracy_reading")
    if reading is not None and reading not in READINGS:
        raise ConfigError(f"gate.accuracy_reading must be options or greedy (or null: options when the run scored "
                          f"them, else greedy), got {reading!r}")
    return GateConfig(**values)


def parse_gate_overrides(overrides: list[str]) -> GateConfig:
    """A ``GateConfig`` from command-line overrides (``gate.max_sensitivity=0.2``), as the run command takes them.

    >>> parse_gate_overrides(["gate.max_posix=0.5", "gate.accuracy_reading=greedy"]).max_posix
    0.5
    """
    values = {}
    for override in overrides:
        key, _, text = override.partition("=")
        if not key.startswith("gate.") or not text:
            raise ConfigError(f"{override!r}: write thresholds as gate.KEY=VALUE, e.g. gate.max_sensitivity=0.2")
        name = key[len("gate."):]
        if text.lower() in ("null", "none", "~"):
            values[name] = None
            continue
        try:
            values[name] = float(text)
        except ValueError:
            values[name] = text
    return make_gate(values)


def thresholds_of(gate: GateConfig) -> dict[str, float]:
    """The thresholds that are set, in ``METRICS`` order."""
    return {name: getattr(gate, name) for name in METRICS if getattr(gate, name) is not None}


def check_gate_applies(task_name: str, gate: GateConfig) -> None:
    """A ``ConfigError`` for a threshold whose metric runs of task ``task_name`` never have (called before the run).

    >>> check_gate_applies("classification", GateConfig(max_sensitivity=0.2, min_accuracy=0.5))
    >>> check_gate_applies("posix", GateConfig(min_consistency=0.8))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate.min_consistency reads consistency.mean, which only task=classification runs have; this is a task=posix run (its gates: max_posix, min_accuracy, max_accuracy_spread, min_worst_case_accuracy)
    """
    gate = make_gate(dataclasses.asdict(gate))  # the same checks whichever way the gate was built
    for name in thresholds_of(gate):
        metric = METRICS[name]
        if metric.task is not None and metric.task != task_name:
            own = ", ".join(n for n, m in METRICS.items() if m.task in (None, task_name))
            raise ConfigError(f"gate.{name} reads {metric.key}, which only task={metric.task} runs have; this is a "
                              f"task={task_name} run (its gates: {own})")
    if task_name == "classification" and gate.accuracy_reading == "options":
        raise ConfigError("gate.accuracy_reading=options: classification runs score no options; their accuracy is "
                          "the greedy reading (gate.accuracy_reading=greedy, or leave it unset)")


def accuracy_reading(summary: dict, gate: GateConfig) -> str:
    """The accuracy reading the gate reads: the one set, else ``options`` when the summary has it, else ``greedy``."""
    if gate.accuracy_reading is not None:
        return gate.accuracy_reading
    return "options" if (summary.get("accuracy") or {}).get("by_options") else "greedy"


def _lookup(summary: dict, name: str, key: str):
    node, path = summary, []
    for part in key.split("."):
        path.append(part)
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            where = ".".join(path)
            why = WHY_MISSING.get(where, f"it has no {where}")
            raise ConfigError(f"gate.{name} reads {key}, which this run's summary does not have: {why}")
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ConfigError(f"gate.{name} reads {key}, which is not a number in this summary ({node!r})")
    return float(node)


def check_gate(summary: dict, gate: GateConfig) -> list[GateRow]:
    """Every threshold set, checked against a run's summary (no thresholds: no rows). A threshold whose metric the
    summary does not have is a ``ConfigError`` naming the key and why; a run that stopped early fails.

    >>> summary = {"task": "classification", "sensitivity": {"mean": 0.25}, "consistency": {"mean": 0.9},
    ...            "micro_f1": None, "accuracy": None}
    >>> rows = check_gate(summary, GateConfig(max_sensitivity=0.2, min_consistency=0.8))
    >>> [(r.metric, r.key, r.value, r.passed) for r in rows]
    [('max_sensitivity', 'sensitivity.mean', 0.25, False), ('min_consistency', 'consistency.mean', 0.9, True)]
    >>> print(gate_table(rows))
    | gate | summary key | threshold | value | result |
    |---|---|---|---|---|
    | max_sensitivity | sensitivity.mean | ≤ 0.2 | 0.2500 | FAIL |
    | min_consistency | consistency.mean | ≥ 0.8 | 0.9000 | pass |
    >>> check_gate(summary, GateConfig(min_micro_f1=0.5))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate.min_micro_f1 reads micro_f1.mean, which this run's summary does not have: not every sample has a gold label
    >>> [(r.metric, r.passed) for r in check_gate({**summary, "stopped": "budget reached"},
    ...                                          GateConfig(min_consistency=0.8))]
    [('complete', False), ('min_consistency', True)]
    >>> check_gate(summary, GateConfig())
    []
    >>> constant = {**summary, "sensitivity": {"mean": 0.0}, "consistency": {"mean": 1.0},
    ...             "answers": {"majority_share": 1.0}}          # every answer one class
    >>> [(r.metric, r.value, r.passed) for r in check_gate(constant, GateConfig(max_sensitivity=0.2,
    ...                                                                          min_consistency=0.8))]
    [('max_sensitivity', 0.0, True), ('min_consistency', 1.0, True), ('max_answer_share', 1.0, False)]
    """
    thresholds = thresholds_of(gate)
    if not thresholds:
        return []
    check_gate_applies(summary.get("task", "posix"), gate)  # summaries written before "task" existed are POSIX's
    rows = []
    stopped = summary.get("stopped")
    if stopped:
        reason = stopped if isinstance(stopped, str) else json.dumps(stopped, ensure_ascii=False)
        rows.append(GateRow("complete", None, f"stopped early: {reason}", False, "stopped"))
    reading = accuracy_reading(summary, gate)
    for name, threshold in thresholds.items():
        key = METRICS[name].key.format(reading=reading)
        value = _lookup(summary, name, key)
        passed = value <= threshold if name.startswith("max_") else value >= threshold  # NaN never passes
        rows.append(GateRow(name, threshold, value, passed, key))
    share = (summary.get("answers") or {}).get("majority_share")  # runs written before it existed have none
    if gate.max_answer_share is not None and summary.get("task") == "classification" and share is not None:
        rows.append(GateRow("max_answer_share", gate.max_answer_share, float(share),
                            share <= gate.max_answer_share, GUARDS["max_answer_share"].key))
    return rows


def gate_passed(rows: list[GateRow]) -> bool:
    return all(row.passed for row in rows)


def _number(value: float) -> str:
    return f"{value:.4f}"


def gate_table(rows: list[GateRow]) -> str:
    """A short Markdown table of the checked rows, with a pass/FAIL column."""
    lines = ["| gate | summary key | threshold | value | result |", "|---|---|---|---|---|"]
    for row in rows:
        if row.threshold is None:
            threshold, value = "the run finished", str(row.value)
        else:
            threshold = f"{'≤' if row.metric.startswith('max_') else '≥'} {row.threshold:g}"
            value = _number(row.value)
            if value == _number(row.threshold) and row.value != row.threshold:
                value = repr(row.value)  # rounding would hide why it failed (or passed)
        lines.append(f"| {row.metric} | {row.key} | {threshold} | {value} | {'pass' if row.passed else 'FAIL'} |")
    return "\n".join(lines)


def read_summaries(folder: str | Path) -> list[tuple[Path, dict]]:
    """The summary of a run folder, or of every job of a sweep folder (its sub-folders holding a ``summary.json``);
    a ``ConfigError`` when there is none or it cannot be read."""
    folder = Path(folder)
    own = folder / "summary.json"
    files = [own] if own.is_file() else sorted(folder.glob("*/summary.json")) if folder.is_dir() else []
    if not files:
        raise ConfigError(f"no summary.json in {folder} (give a run's results folder, or a sweep folder holding "
                          f"them; a sharded cell: posixlab merge its shards first)")
    out = []
    for path in files:
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path} cannot be read as JSON ({exc})") from None
        if not isinstance(summary, dict):
            raise ConfigError(f"{path} is not a run summary (a JSON object)")
        out.append((path.parent, summary))
    return out
