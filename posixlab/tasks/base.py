"""The seam between the one run skeleton (``posixlab/runner.py``) and a task: what a task must say about its work.

A task turns its configuration into **units** (a POSIX prompt set; a classification sample with its Q prompts),
says what it needs from a model (``needs``: generate text; score token sequences), turns each unit into
**requests** for the model, and turns the model's answers back into one **record** per unit; at the end it
summarises the records. Everything else (config checks shared by all tasks, the model, the score cache, shards,
progress, the records file, the summary files) is the runner's, so every task gets all of it.

A task also owns what the command line, the CI gate and the run tracker say about it (``config_from``,
``report_lines``, ``gate_metrics``, ``tracked``, ``figures``) and what its page in ``posixlab report`` shows
(``report_sections``, ``report_values``), so ``posixlab/cli.py``, ``gate.py`` and
``tracking.py`` serve any task without knowing one. A third task is one module with a ``Task`` subclass that calls
``posixlab.tasks.register_task`` (a test-only one lives in ``tests/``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.errors import ConfigError, is_whole

from posixlab.models.capabilities import GENERATE, SCORE  # noqa: F401  (what a task may need)


@dataclass
class Request:
    """Prompts for one pass of the engine: every prompt gets a greedy response of at most ``max_new_tokens``; with
    more than one prompt, every response is scored under every prompt (a POSIX prompt set); ``candidates`` are more
    continuations scored under every prompt (answer options, class labels). A text-only model (a chat API) gets the
    texts alone (``ids`` empty) and answers each with text."""

    texts: list[str]  # what the model reads (after a chat template, if any)
    ids: list[list[int]]  # their token ids; empty for a text-only model
    max_new_tokens: int
    candidates: list[list[int]] = field(default_factory=list)
    repeat: int = 0  # the same request sent again (task.repeats): part of a chat API's cache key
    structured: object = None  # a ``ClassifierSchema``: the answer is a JSON object of that schema (strategy=structured)


def answer_texts(result, lm) -> list[str]:
    """The responses of one request as text: a chat API's answers as they came; token ids decoded (their
    end-of-sequence ids left out)."""
    if hasattr(result, "texts"):
        return list(result.texts)
    return [lm.decode([t for t in response if t not in lm.eos_ids]) for response in result.responses]


# the accuracy thresholds every task whose records hold graded answers takes (posixlab.answers.accuracy_summary);
# {reading}: the accuracy reading, options or greedy
ACCURACY_GATES = {"min_accuracy": "accuracy.by_{reading}.accuracy",
                  "max_accuracy_spread": "accuracy.by_{reading}.spread.range",
                  "min_worst_case_accuracy": "accuracy.by_{reading}.worst_case"}
FRACTION = (0.0, 1.0)  # the values an accuracy, a share or a normalised metric can take
ACCURACY_RANGES = dict.fromkeys(ACCURACY_GATES, FRACTION)
ACCURACY_MISSING = {
    "accuracy": "no item has a gold answer (POSIX: the data set's answers or your sets' \"answer\"; "
                "classification: gold labels)",
    "accuracy.by_options": "the run did not score the options (score_options=false, or items without options); "
                           "set gate.accuracy_reading=greedy",
    "accuracy.by_greedy": "the run has no greedy answers",
}


@dataclass
class Tracked:
    """What a run tracker (W&B: ``posixlab/tracking.py``) logs for a finished run: summary numbers, one table with a
    row per unit, and the results folder as an artifact of ``artifact_type`` with ``artifact_metadata``."""

    scalars: dict
    table_name: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[list] = field(default_factory=list)
    artifact_type: str = "results"
    artifact_metadata: dict = field(default_factory=dict)


def model_name(summary: dict) -> str | None:
    """The model's name as a run's results give it: its identity's (``<name>+<adapter>`` with an adapter), else the
    config's (an older or partial summary)."""
    return (summary.get("model") or {}).get("name") or ((summary.get("config") or {}).get("model") or {}).get("name")


def summary_value(summary: dict, key: str) -> float | None:
    """The number at a dotted ``key`` of a run's summary; None where it has none (or not a number there).

    >>> summary_value({"psi": {"posix": 0.3}}, "psi.posix"), summary_value({"psi": None}, "psi.posix")
    (0.3, None)
    """
    node = _at(summary, key)
    return node if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def _at(summary: dict, key: str):
    """What a summary holds at a dotted key (``psi.ci95``), or None."""
    node = summary
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def summary_interval(summary: dict, key: str) -> tuple[float, float] | None:
    """The 95% interval at the dotted ``key`` of a run's summary (a pair of numbers); None where it has none.

    >>> summary_interval({"psi": {"posix": 0.3, "ci95": [0.2, 0.4]}}, "psi.ci95")
    (0.2, 0.4)
    >>> summary_interval({"psi": {}}, "psi.ci95"), summary_interval({"a": {"ci95": None}}, "a.ci95")
    (None, None)
    """
    node = _at(summary, key)
    if isinstance(node, (list, tuple)) and len(node) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in node):
        return float(node[0]), float(node[1])
    return None


UNRECORDED_METHOD = ("its run records no method: written before 2026-12-07, when intervals over sets and samples were "
                     "plain percentile bootstraps, narrower on few of them")


def unrecorded_words(summary: dict, key: str) -> str:
    """What a run's own page adds after an interval written without its method (``interval_unrecorded``); empty for
    one that records it.

    >>> unrecorded_words({"psi": {"ci95": [0.2, 0.4]}}, "psi.ci95")
    ' (plain percentile: a run before 2026-12-07)'
    """
    return " (plain percentile: a run before 2026-12-07)" if interval_unrecorded(summary, key) else ""


def interval_unrecorded(summary: dict, key: str) -> bool:
    """Whether the interval at the dotted ``key`` (``psi.ci95``) was written without its method beside it
    (``ci_method``, since 2026-12-07): an older run's plain percentile interval, which a page marks so that it is not
    read as the expanded one beside it.

    >>> interval_unrecorded({"psi": {"ci95": [0.2, 0.4]}}, "psi.ci95")
    True
    >>> interval_unrecorded({"psi": {"ci95": [0.2, 0.4], "ci_method": "t interval"}}, "psi.ci95")
    False
    >>> interval_unrecorded({"psi": {"ci95": None}}, "psi.ci95")   # no interval: nothing to mark
    False
    """
    *parent, _ = key.split(".")
    holder = _at(summary, ".".join(parent)) if parent else summary
    return summary_interval(summary, key) is not None and isinstance(holder, dict) and "ci_method" not in holder


def read_setting(values: dict, cls, where: str):
    """``cls(**values)``, or a ``ConfigError`` naming the keys ``cls`` does not have.

    >>> from posixlab.models.capabilities import GENERATE
    >>> read_setting({"texts": [], "ids": [], "max_new_tokens": 5}, Request, "request").max_new_tokens
    5
    >>> read_setting({"txt": []}, Request, "a request")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: a request has no setting(s) txt (the schema is Request: texts, ids, max_new_tokens, candidates, repeat, structured)
    """
    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"{where} has no setting(s) {', '.join(sorted(unknown))} (the schema is {cls.__name__}: "
                          f"{', '.join(f.name for f in dataclasses.fields(cls))})")
    return cls(**values)


def check_max_new_tokens(value) -> None:
    """Every task's response length: a whole number of tokens, at least one."""
    if not is_whole(value, 1):
        raise ConfigError(f"max_new_tokens must be a whole number of at least 1 (a response has at least one token), "
                          f"got {value!r}")


def shared_settings(c: dict, output_dir: str) -> dict:
    """The settings every task's configuration takes alike, from the composed config's top level."""
    from posixlab.rephrase.config import RephraserConfig
    from posixlab.scoring.options import EngineOptions

    return {"max_new_tokens": c["max_new_tokens"], "seed": c["seed"], "chat_template": c["chat_template"],
            "output_dir": output_dir, "cache_dir": c["cache_dir"], "score_cache": c["score_cache"],
            "score_cache_dir": c["score_cache_dir"], "engine": read_setting(c["engine"], EngineOptions, "engine"),
            "rephraser": read_setting(c["rephraser"], RephraserConfig, "rephraser"),
            "shard": None if c.get("shard") is None else str(c["shard"]), "dry_run": bool(c.get("dry_run"))}


_records_memo: contextvars.ContextVar[dict | None] = contextvars.ContextVar("records_memo", default=None)


@contextlib.contextmanager
def records_read_once():
    """While a report page is drawn: the task's methods that each read a run's records (its sections, its values,
    what is behind a failed gate) share one read of them, the last run's kept (a paper-sized cell's records are
    gigabytes as Python objects: one run's at a time). They must not change the records they are given."""
    token = _records_memo.set({})
    try:
        yield
    finally:
        _records_memo.reset(token)


class Task:
    """One kind of measurement. Subclasses set the class attributes and implement the methods below."""

    config_type: type = object  # the task's configuration dataclass (``make_task`` picks the task by it)

    name: str = ""
    records_file: str = ""  # one JSON line per unit, in the run folder
    index_key: str = "index"  # each record's position among all the cell's units (shards keep it)
    unit_name: str = "unit"  # progress bars count these
    # the top-level scalar keys of a record ``live_metrics`` reads, when those are all it reads: ``posixlab status``
    # then finds them in each line without parsing it (a POSIX record holds N prompts and an N×N matrix)
    live_keys: tuple[str, ...] = ()
    in_order: bool = False  # the engine takes the requests in the given order (neighbours share long prefixes)
    summary_keys: tuple[str, ...] = ()  # the summary's computed keys (the rest is the run's metadata)
    input_files: tuple[str, ...] = ()  # files about the inputs a run folder holds besides records and summary

    # what the command line, the gate and the tracker read (class attributes: a saved summary needs no task object)
    headline_name: str = ""  # the run's one number, as the result line names it ("POSIX", "sensitivity S")
    headline_key: str = ""  # its dotted key in the summary ("psi.posix")
    grid_columns: tuple[str, ...] = ()  # a page of runs: the settings its grid tables take as columns (report/grid.py)
    # what else the grid tables besides the headline, each where a run has it: (name, dotted summary key, the key of
    # its 95% interval or None)
    grid_extra: tuple[tuple[str, str, str | None], ...] = ()
    gate_metrics: dict[str, str] = {}  # gate threshold (max_... or min_...) -> the summary key it reads
    gate_guards: dict[str, str] = {}  # thresholds checked beside any other of this task's, never alone
    gate_guarded: dict[str, str] = {}  # a guard checked beside this one threshold only (not beside any)
    # the values the metric a threshold reads can take (max_posix: 0 to inf, an accuracy: 0 to 1): a threshold outside
    # could never pass, or never fail (min_accuracy=80 meant as a percentage), and is refused before the run
    gate_ranges: dict[str, tuple[float, float]] = {}
    gate_missing: dict[str, str] = {}  # why a summary has no value at a key (by the first missing key on the path)
    accuracy_readings: tuple[str, ...] = ("options", "greedy")  # what gate.accuracy_reading may be for this task
    config_groups: tuple[str, ...] = ()  # top-level config groups only this task reads (variant=..., embedding=...)
    task_settings: tuple[str, ...] = ()  # the config's fields set under task.* (their defaults: the dataclass's)
    # another task's setting (or config group) -> this task's nearest one, for the message that refuses it here
    instead_of: dict[str, str] = {}
    # settings that were top-level keys before they moved under task.*: the old spelling still works (with a notice)
    moved_settings: tuple[str, ...] = ()

    def __init__(self, cfg, given=None):
        if given is not None:
            raise ConfigError(f"the {self.name} task takes no prompt sets of yours (given=)")
        self.cfg = cfg

    # --- before any work ------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Settings that are wrong whatever the data: raise ``ConfigError`` before anything is loaded."""

    def needs(self) -> dict[str, str]:
        """The model capabilities this configuration needs, each with the setting that needs it (for the error)."""
        return {GENERATE: "every task"}

    # --- inputs ---------------------------------------------------------------------------------------------------
    def build_units(self, progress: bool) -> list:
        """Every unit of the cell, in a fixed order (a shard takes a slice of it)."""
        raise NotImplementedError

    def prepare(self, lm, units: list, out: Path) -> None:
        """Work that needs the loaded model but is done once per run (label tokens, files about the inputs)."""

    def requests(self, unit, lm) -> list[Request]:
        """The unit's requests, encoded and checked to fit the model's context."""
        raise NotImplementedError

    def rounds(self, units: list) -> list[list[int]]:
        """The units (their positions in ``units``) in rounds: a round's requests are made again, and run, once every
        unit of the rounds before it is recorded (a prompt race asks what the earlier rounds left racing). Default:
        one round of every unit."""
        return [list(range(len(units)))]

    # --- results --------------------------------------------------------------------------------------------------
    def record(self, unit, requests: list[Request], scores: list, lm) -> dict:
        """The unit's record from its requests and their ``SetScores`` (in the order ``requests`` gave them)."""
        raise NotImplementedError

    def progress_note(self, record: dict) -> str:
        """A few characters about a finished unit for the progress line."""
        return ""

    def meta(self, lm) -> dict:
        """What the summary records about this task's run (data set, variant or strategy, ...)."""
        return {}

    # summaries are computed from the records and the run's metadata alone, so that merged shards and saved folders
    # are summarised by the same code as a run
    @classmethod
    def summarize(cls, records: list[dict], meta: dict) -> dict:
        raise NotImplementedError

    @classmethod
    def summary_records(cls, folder: Path, skip_unreadable: bool = False) -> list[dict]:
        """The records ``summarize`` reads from a run folder, in the cell's order: by default each whole; a task may
        leave out what its summary does not read (a paper-sized cell's records take GBs whole).
        ``skip_unreadable``: leave out a last line cut short (a run killed while writing)."""
        from posixlab.results import read_records

        return read_records(folder, cls.records_file, cls.index_key, skip_unreadable=skip_unreadable)

    @classmethod
    def write_summary(cls, folder: Path, summary: dict) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The run in a few words, for progress bars."""
        return self.name

    # --- the command line, the gate, the tracker ------------------------------------------------------------------------
    @classmethod
    def config_from(cls, node: dict, output_dir: str):
        """The task's configuration from the composed, resolved config (plain dicts: no Hydra here)."""
        raise NotImplementedError

    @classmethod
    def headline(cls, summary: dict) -> float | None:
        """The run's one number (what a Hydra job returns, e.g. to a sweeper); None when the summary has none."""
        return summary_value(summary, cls.headline_key)

    @classmethod
    def headline_interval(cls, summary: dict) -> tuple[float, float] | None:
        """The headline's 95% interval, where the summary gives one beside it (``ci95`` in the mapping that holds the
        headline: POSIX's expanded percentile bootstrap over sets); None otherwise.

        >>> class T(Task):
        ...     headline_key = "psi.posix"
        >>> T.headline_interval({"psi": {"posix": 0.3, "ci95": [0.2, 0.4]}}), T.headline_interval({"psi": {}})
        ((0.2, 0.4), None)
        """
        return summary_interval(summary, cls.grid_measures()[0][2])

    @classmethod
    def grid_measures(cls) -> tuple[tuple[str, str, str | None], ...]:
        """What a page's grid tables, (name, dotted summary key, its interval's key or None): the headline (its
        interval: ``ci95`` beside it), then the task's ``grid_extra``."""
        beside = ".".join([*cls.headline_key.split(".")[:-1], "ci95"])
        return ((cls.headline_name, cls.headline_key, beside), *cls.grid_extra)

    @classmethod
    def with_files_beside(cls, folder: Path, summary: dict) -> dict:
        """The summary a page and a gate read: the run's, with what other files of its folder add (a POSIX run's
        judge, ``judged``); ``summary.json`` itself is never changed."""
        return summary

    @classmethod
    def num_units(cls, summary: dict) -> int | None:
        """How many units the summary covers."""
        return summary.get(f"num_{cls.unit_name}s")

    @classmethod
    def report_lines(cls, summary: dict) -> list[str]:
        """What the command prints about a finished run (its result line first)."""
        value = cls.headline(summary)
        return [f"{cls.headline_name} = {'n/a' if value is None else f'{value:.4f}'}"]

    @classmethod
    def tracked(cls, summary: dict, folder: Path) -> Tracked:
        """What the run tracker logs about a finished run."""
        return Tracked({cls.headline_key: cls.headline(summary)}, artifact_type=f"{cls.name}-results")

    # --- posixlab status (a sweep's cells while they run) -------------------------------------------------------------
    @classmethod
    def units_planned(cls, config: dict) -> int | None:
        """How many units a run of this resolved config (its ``config.yaml``) covers before any shard is taken;
        None: the whole data set (unknown until it is read)."""
        return None

    @classmethod
    def live_metrics(cls, records: list[dict]) -> dict:
        """A few numbers over the records written so far, by short name (``posixlab status``)."""
        return {}

    @classmethod
    def final_metrics(cls, summary: dict) -> dict:
        """The same numbers, from a finished run's summary."""
        value = cls.headline(summary)
        return {} if value is None else {cls.headline_name: value}

    @classmethod
    def figures(cls, folder: Path) -> dict[str, Path]:
        """The figures of a finished run, written under ``folder / "figures"`` (name -> file)."""
        return {}

    # --- posixlab report (one HTML page per run: posixlab/report/) ----------------------------------------------------
    # A task's report reads the run folder alone. Ids on the page: the units table is ``{prefix}units`` and unit
    # I's detail ``{prefix}unit-I`` (prefix "" for the first run of a page, so that several runs fit on one page).
    @classmethod
    def report_sections(cls, folder: Path, summary: dict, prefix: str = "") -> str:
        """The report's sections about one run (HTML): by default its final metrics as cards and a table of its
        records, one row per unit, whose detail is the record itself."""
        from posixlab.report import html as h

        records = cls.read_unit_records(folder)
        metrics = [(name, h.fmt(value)) for name, value in cls.final_metrics(summary).items()]
        scalars = [k for k, v in (records[0] if records else {}).items()
                   if isinstance(v, (str, int, float, bool)) or v is None][:8]
        key = cls.headline_key.split(".")[0]  # a unit's own value of the headline, where it has one, ranks it
        values = [v if isinstance(v := r.get(key), (int, float)) and not isinstance(v, bool) else None
                  for r in records]
        rows, row_attrs, details, counts = h.unit_rows(
            records, values, cls.index_key, prefix,
            lambda r, n: [h.cell(r.get(k)) if not isinstance(r.get(k), str) else h.cell(None, h.esc(r[k][:80]))
                          for k in scalars],
            lambda r, n: (f"{cls.unit_name} {n}",
                          f"<pre>{h.esc(json.dumps(r, indent=1, ensure_ascii=False)[:4000])}</pre>"),
            None if cls.page_record is Task.page_record else lambda indices: cls.whole_unit_records(folder, indices))
        units = h.table([(k, k) for k in scalars], rows, id=f"{prefix}units", row_attrs=row_attrs)
        note = h.details_note(counts, cls.unit_name, key, cls.records_file)
        return (h.section(f"{cls.name}: headline", h.cards(metrics or [(cls.headline_name, "n/a")]))
                + h.section(f"{len(records)} {cls.unit_name}s (click a row)", note + units + "".join(details)))

    report_value_name: str = ""  # what report_values are ("ψ", "S"); empty: the headline key's first part

    @classmethod
    def grid_note(cls, summary: dict) -> str | None:
        """A line under the run's headline in a page's grid (``posixlab.report.grid``): a published value of the same
        cell to read it against, say; none by default."""
        return None

    @classmethod
    def report_values(cls, folder: Path, summary: dict) -> list[float]:
        """One number per unit, in the order of ``read_unit_records``, for comparing runs' distributions: by default
        each record's value at the headline key's first part (``agreement`` for ``agreement.mean``) when it is a
        number."""
        key = cls.headline_key.split(".")[0]
        values = [r.get(key) for r in cls.read_unit_records(folder)]
        return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]

    @classmethod
    def report_gate_detail(cls, folder: Path, summary: dict, row, prefix: str = "") -> str:
        """What is behind a failed gate threshold (``row``: a ``posixlab.gate.GateRow``), as HTML: the prompts of
        lowest accuracy for an accuracy threshold; the units furthest on the wrong side for the headline's."""
        from posixlab.report import html as h

        if row.key.startswith("accuracy.") and row.key.count(".") >= 2:
            reading = row.key.split(".")[1]
            per_prompt = ((summary.get("accuracy") or {}).get(reading) or {}).get("per_prompt") or []
            worst = sorted(range(len(per_prompt)), key=lambda q: (per_prompt[q] is None, per_prompt[q] or 0))[:5]
            return "lowest accuracy: " + ", ".join(f"prompt {q} ({h.fmt(per_prompt[q], 3)})" for q in worst)
        if row.key != cls.headline_key:
            return ""
        records = cls.read_unit_records(folder)
        pairs = list(zip(cls._unit_indices(records), cls.report_values(folder, summary)))
        pairs.sort(key=lambda p: -p[1] if row.metric.startswith("max_") else p[1])
        return ("highest" if row.metric.startswith("max_") else "lowest") + ": " + ", ".join(
            f"{h.unit_link(prefix, n, f'{cls.unit_name} {n}')} ({h.fmt(v, 3)})" for n, v in pairs[:5])

    @classmethod
    def partial_meta(cls, config: dict, folder: Path) -> dict:
        """What ``summarize`` needs besides the records to summarise a run that stopped before its summary (a killed
        run: its ``config.yaml`` and records file only); the task's own keys are added by its subclass."""
        meta = {"task": cls.name, "seed": config.get("seed", 0), "model": dict(config.get("model") or {}),
                "engine": {}, "config": config}
        try:  # the configuration as a run records it (the dataclass); the resolved config where it cannot be read
            meta["config"] = dataclasses.asdict(cls.config_from(config, str(folder)))
        except Exception:  # noqa: BLE001 (a config this posixlab cannot read still names the model and data)
            pass
        return meta

    @staticmethod
    def page_record(record: dict) -> dict:
        """A unit's record as the report's tables, values and gate read it (``read_unit_records``): by default
        whole; a task may leave out what only a unit's detail reads (``whole_unit_records`` reads it again)."""
        return record

    @classmethod
    def whole_unit_records(cls, folder: Path, indices) -> dict:
        """The records of the units ``indices``, whole, by index (for the details a page opens)."""
        from posixlab.results import whole_records

        return whole_records(folder, cls.records_file, cls.index_key, indices)

    @classmethod
    def read_unit_records(cls, folder: Path) -> list[dict]:
        """The records file's records in unit order, as ``page_record`` keeps them; a last line cut short (a run
        killed while writing) is left out."""
        path = Path(folder) / cls.records_file
        if not path.is_file():
            return []
        memo, key = _records_memo.get(), None
        if memo is not None:  # a report page being drawn: the last run's records, if this file has not changed
            stat = path.stat()
            key = (cls.index_key, str(path.resolve()), stat.st_mtime_ns, stat.st_size)
            if key in memo:
                return memo[key]
        from posixlab.results import iter_records

        if memo is not None:
            memo.clear()  # before the read: a page holds one run's records at a time
        records = sorted(map(cls.page_record, iter_records(folder, cls.records_file, skip_unreadable=True)),
                         key=lambda r: r.get(cls.index_key, 0))
        if memo is not None:
            memo[key] = records
        return records

    @classmethod
    def _unit_indices(cls, records: list[dict]) -> list[int]:
        return [r.get(cls.index_key, n) for n, r in enumerate(records)]
