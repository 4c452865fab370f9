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
``min_judged_share``        ``judged.judged_share`` (``judge.json``)       posix (a judge read the run)
=========================== ============================================== ==============================

``max_answer_share`` (default 0.95; ``answers.majority_share``, classification) guards the others: whenever a
classification run is gated, it also fails when that share of its answers name one class (a constant classifier
has S = 0 and C = 1, which would pass every sensitivity and consistency threshold). ``gate.max_answer_share=null``
turns it off (a data set that is itself nearly one class), a value sets it; it is never checked on its own.
``max_judge_control_same`` (default 0.5; the judge's ``control_judged_same``) guards ``min_judged_share`` alone: the
share of decoys (another question's response) the judge called the same; a judge that says yes to everything would
pass any ``min_judged_share``. A judge with no control verdict read (every reply to a decoy neither yes nor no, or a
run of one set, which has no decoy) fails it: nothing vouches for its shares. ``min_judged_share`` reads the judge's
summary beside the run's (``Task.with_files_beside``): a run that ends with a judge (``judge=``), or one
``posixlab judge`` read.

``max_`` thresholds pass when the value is at most the threshold, ``min_`` ones when it is at least the threshold.
The accuracy reading (``accuracy_reading``): ``options`` (the best-scoring option, lm-evaluation-harness's multiple
choice) or ``greedy`` (the greedy response parsed); unset, ``options`` when the run scored the options, else
``greedy`` (classification runs have only ``greedy``). ``max_accuracy_spread`` is max − min of the per-prompt
accuracies; ``min_worst_case_accuracy`` is HELM's worst case (an item counts only when right under every prompt).

A threshold on a metric the run cannot have is a ``ConfigError``, not a failed gate: ``check_gate_applies`` refuses
one the task has no metric for before the run starts; ``check_gate`` refuses one the run's data leaves out (no gold
labels, options not scored) after it. So is a threshold outside the values its metric can take (``Task.gate_ranges``:
``min_accuracy=80`` meant as a percentage could never pass). A run that stopped before its end (``summary["stopped"]``
set) fails the gate.
No Hydra here: ``posixlab.cli`` builds a ``GateConfig`` from the ``gate`` config node and exits 1 on a failed gate.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
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
    min_judged_share: float | None = None  # judged.judged_share: a judge's (judge.json beside the run's summary)
    accuracy_reading: str | None = None  # options | greedy; None: options when the run has them, else greedy
    # answers.majority_share: checked beside any other threshold of a classification run (a constant classifier)
    max_answer_share: float | None = 0.95
    # judged.control_judged_same: checked beside min_judged_share (a judge that calls unrelated responses the same)
    max_judge_control_same: float | None = 0.5
    # thresholds of tasks registered outside the package (their Task.gate_metrics): name -> value
    more: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Metric:
    key: str  # dotted path into the summary; {reading} is the accuracy reading
    tasks: tuple[str, ...]  # the tasks whose summaries have it

    @property
    def task(self) -> str | None:
        """The only task whose summary has it; None: more than one."""
        return self.tasks[0] if len(self.tasks) == 1 else None


def _collect(attribute: str) -> dict[str, _Metric]:
    """Every registered task's thresholds (``Task.gate_metrics`` or ``gate_guards``): name -> summary key, tasks."""
    from posixlab.tasks import TASK_TYPES

    out: dict[str, _Metric] = {}
    for task_type in TASK_TYPES.values():
        for name, key in getattr(task_type, attribute).items():
            had = out.get(name)
            out[name] = _Metric(key, (*had.tasks, task_type.name) if had else (task_type.name,))
    # one task's own thresholds first, in the order the tasks registered, then those several tasks share (accuracy)
    return dict(sorted(out.items(), key=lambda item: len(item[1].tasks) > 1))


def ranges() -> dict[str, tuple[float, float]]:
    """The values each threshold's metric can take (``Task.gate_ranges``; where tasks share a threshold, the widest)."""
    from posixlab.tasks import TASK_TYPES

    out: dict[str, tuple[float, float]] = {}
    for task_type in TASK_TYPES.values():
        for name, (low, high) in task_type.gate_ranges.items():
            had_low, had_high = out.get(name, (low, high))
            out[name] = (min(low, had_low), max(high, had_high))
    return out


def check_range(name: str, value: float, bounds: tuple[float, float] | None) -> None:
    """Refuse a threshold outside the values its metric can take: the gate would never pass, or never fail.

    >>> check_range("min_accuracy", 0.8, (0.0, 1.0))
    >>> check_range("min_accuracy", 80, (0.0, 1.0))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate.min_accuracy=80 is outside the values its metric can take (0 to 1), so the gate could never pass; a fraction is meant (0.8 for 80%)
    >>> check_range("max_posix", -0.1, (0.0, float("inf")))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate.max_posix=-0.1 is outside the values its metric can take (0 or more), so the gate could never pass
    """
    if bounds is None or bounds[0] <= value <= bounds[1]:
        return
    low, high = bounds
    never = "pass" if (value < low) == name.startswith("max_") else "fail"
    span = f"{low:g} or more" if math.isinf(high) else f"{low:g} to {high:g}"
    hint = f"; a fraction is meant ({value / 100:g} for {value:g}%)" if high == 1 and 1 < value <= 100 else ""
    raise ConfigError(f"gate.{name}={value:g} is outside the values its metric can take ({span}), so the gate could "
                      f"never {never}{hint}")


def metrics() -> dict[str, _Metric]:
    """The thresholds a gate takes: the registered tasks' ``gate_metrics``, in their order."""
    return _collect("gate_metrics")


def guards() -> dict[str, _Metric]:
    """Thresholds checked whenever another threshold of the run's task is, never alone (``gate_guards``)."""
    return _collect("gate_guards")


def __getattr__(name: str):  # METRICS and GUARDS, read when asked: a task registered later has its thresholds too
    if name == "METRICS":
        return metrics()
    if name == "GUARDS":
        return guards()
    raise AttributeError(f"module 'posixlab.gate' has no attribute {name!r}")


@dataclass(frozen=True)
class GateRow:
    """One checked threshold: ``value`` read from ``key`` of the summary, against ``threshold``."""

    metric: str  # the threshold's name (max_posix, ...), or "complete" for a run that stopped early
    threshold: float | None
    value: float | str
    passed: bool
    key: str = ""  # the summary key read


def make_gate(values: dict | None) -> GateConfig:
    """A ``GateConfig`` from a config node, or a ``ConfigError`` naming an unknown key, a value that is not a number,
    or one its metric can never reach (``check_range``). A threshold of a task registered outside the package goes to
    ``more``.

    >>> make_gate({"max_sensitivity": 0.2, "min_consistency": None})
    GateConfig(max_posix=None, max_sensitivity=0.2, min_consistency=None, min_micro_f1=None, min_accuracy=None, max_accuracy_spread=None, min_worst_case_accuracy=None, min_judged_share=None, accuracy_reading=None, max_answer_share=0.95, max_judge_control_same=0.5, more={})
    >>> make_gate({"max_sensitvity": 0.2})
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate has no setting max_sensitvity (the thresholds are max_posix, min_judged_share, max_sensitivity, min_consistency, min_micro_f1, min_accuracy, max_accuracy_spread, min_worst_case_accuracy; and accuracy_reading, max_judge_control_same, max_answer_share)
    """
    values = dict(values or {})
    values.update(values.pop("more", None) or {})
    fields = {f.name for f in dataclasses.fields(GateConfig)} - {"more"}
    if set(values) - {*metrics(), *guards()} - fields:  # a plug-in task's threshold, its module not imported yet
        from posixlab.plugins import load_plugins

        load_plugins()
    known, bounds = {*metrics(), *guards()}, ranges()
    unknown = sorted(set(values) - known - fields)
    if unknown:
        from posixlab.plugins import not_imported_note

        raise ConfigError(f"gate has no setting {', '.join(unknown)} (the thresholds are {', '.join(metrics())}; "
                          f"and accuracy_reading, {', '.join(guards())}){not_imported_note()}")
    for name in known:
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise ConfigError(f"gate.{name} must be a number, got {value!r}")
        if value is not None:
            values[name] = float(value)
            check_range(name, values[name], bounds.get(name))
    reading = values.get("accuracy_reading")
    if reading is not None and reading not in READINGS:
        raise ConfigError(f"gate.accuracy_reading must be options or greedy (or null: options when the run scored "
                          f"them, else greedy), got {reading!r}")
    more = {name: values.pop(name) for name in list(values) if name not in fields}
    return GateConfig(**values, more=more)


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


def _value(gate: GateConfig, name: str):
    return gate.more.get(name) if name in gate.more else getattr(gate, name, None)


def thresholds_of(gate: GateConfig) -> dict[str, float]:
    """The thresholds that are set, in ``metrics()`` order."""
    return {name: _value(gate, name) for name in metrics() if _value(gate, name) is not None}


def check_gate_applies(task_name: str, gate: GateConfig) -> None:
    """A ``ConfigError`` for a threshold whose metric runs of task ``task_name`` never have (called before the run).

    >>> check_gate_applies("classification", GateConfig(max_sensitivity=0.2, min_accuracy=0.5))
    >>> check_gate_applies("posix", GateConfig(min_consistency=0.8))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: gate.min_consistency reads consistency.mean, which only task=classification runs have; this is a task=posix run (its gates: max_posix, min_judged_share, min_accuracy, max_accuracy_spread, min_worst_case_accuracy)
    """
    from posixlab.tasks import task_named

    gate = make_gate(dataclasses.asdict(gate))  # the same checks whichever way the gate was built
    every = metrics()
    for name in thresholds_of(gate):
        metric = every[name]
        if task_name not in metric.tasks:
            own = ", ".join(n for n, m in every.items() if task_name in m.tasks)
            raise ConfigError(f"gate.{name} reads {metric.key}, which only "
                              f"{' and '.join(f'task={t}' for t in metric.tasks)} runs have; this is a "
                              f"task={task_name} run (its gates: {own})")
    readings = task_named(task_name).accuracy_readings
    if gate.accuracy_reading is not None and gate.accuracy_reading not in readings:
        raise ConfigError(f"gate.accuracy_reading={gate.accuracy_reading}: {task_name} runs score no "
                          f"{gate.accuracy_reading}; their accuracy is the {readings[0]} reading "
                          f"(gate.accuracy_reading={readings[0]}, or leave it unset)")


def accuracy_reading(summary: dict, gate: GateConfig) -> str:
    """The accuracy reading the gate reads: the one set, else ``options`` when the summary has it, else ``greedy``."""
    if gate.accuracy_reading is not None:
        return gate.accuracy_reading
    return "options" if (summary.get("accuracy") or {}).get("by_options") else "greedy"


def _lookup(summary: dict, name: str, key: str, missing: dict):
    node, path = summary, []
    for part in key.split("."):
        path.append(part)
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            where = ".".join(path)
            why = missing.get(where, f"it has no {where}")
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
    from posixlab.tasks import task_of_summary

    task_type = task_of_summary(summary)  # summaries written before "task" existed are POSIX's
    check_gate_applies(task_type.name, gate)
    rows = []
    stopped = summary.get("stopped")
    if stopped:
        reason = stopped if isinstance(stopped, str) else json.dumps(stopped, ensure_ascii=False)
        rows.append(GateRow("complete", None, f"stopped early: {reason}", False, "stopped"))
    reading = accuracy_reading(summary, gate)
    for name, threshold in thresholds.items():
        key = metrics()[name].key.format(reading=reading)
        value = _lookup(summary, name, key, task_type.gate_missing)
        passed = value <= threshold if name.startswith("max_") else value >= threshold  # NaN never passes
        rows.append(GateRow(name, threshold, value, passed, key))
    for name, key in task_type.gate_guards.items():  # runs written before a guard's key existed have none
        guarded = task_type.gate_guarded.get(name)
        if guarded is not None and guarded not in thresholds:
            continue  # a guard of one threshold only (the judge's controls, of min_judged_share), not set
        threshold, value = _value(gate, name), _read(summary, key)
        if threshold is None:
            continue
        if value is None:  # a guard of every threshold: a run from before its key; of one: nothing to vouch with
            if guarded is not None:
                rows.append(GateRow(name, threshold, "none read", False, key))
            continue
        rows.append(GateRow(name, threshold, float(value), value <= threshold if name.startswith("max_")
                            else value >= threshold, key))
    return rows


def _read(summary: dict, key: str):
    for part in key.split("."):
        summary = summary.get(part) if isinstance(summary, dict) else None
    return summary


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
            value = row.value if isinstance(row.value, str) else _number(row.value)
            if value == _number(row.threshold) and row.value != row.threshold:
                value = repr(row.value)  # rounding would hide why it failed (or passed)
        lines.append(f"| {row.metric} | {row.key} | {threshold} | {value} | {'pass' if row.passed else 'FAIL'} |")
    return "\n".join(lines)


def _lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError:
        return 0


def read_summaries(folder: str | Path) -> list[tuple[Path, dict]]:
    """The summary of a run folder, or of every job of a sweep folder (its sub-folders holding a ``summary.json``),
    with what files beside it add (a judge's: ``Task.with_files_beside``); a ``ConfigError`` when there is none or it
    cannot be read."""
    from posixlab.tasks import task_of_summary

    folder = Path(folder)
    own = folder / "summary.json"
    files = [own] if own.is_file() else sorted(folder.glob("*/summary.json")) if folder.is_dir() else []
    if not files:
        from posixlab.tasks import task_of_records

        stopped = task_of_records(folder)
        if stopped is not None:  # records and no summary: a run that stopped (or is still running)
            n = _lines(folder / stopped.records_file)
            raise ConfigError(f"{folder} holds a run with no summary yet: it stopped (or is still running) after "
                              f"{n} {stopped.unit_name}{'s' if n != 1 else ''}. Run its command again to finish "
                              f"it (the score cache keeps what was done); posixlab status {folder} says where it "
                              f"stands")
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
        out.append((path.parent, task_of_summary(summary).with_files_beside(path.parent, summary)))
    return out
