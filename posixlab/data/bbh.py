"""BIG-Bench Hard (BBH) as open-ended ``PromptItem``s: the hub's ``lukaemon/bbh`` or a local copy.

Sources. "hub" loads split ``test`` of one hub config per task (fields ``input``, ``target``). "path" reads either
- a JSON, JSONL, CSV or Parquet file in the hub's layout plus a ``task`` (or ``subject``) column, or
- the original BBH repository's layout (github.com/suzgunmirac/BIG-Bench-Hard, folder ``bbh/``): a folder of
  ``<task>.json`` files, each ``{"examples": [{"input", "target"}, ...]}``, or one such file.
A record without a task column takes its task from the file name when that is a BBH task name.

Decisions.
- Items are open-ended (``options=()``): a BBH input carries its own options in its text where it has any, and the
  paper prompts BBH with the open-ended template family.
- ``subject`` is the task name as written in BBH (with underscores); ``item_id`` is ``bbh/<task>/<index within the
  task>``, so ids are stable whatever the task filter.
- Only template variation keeps BBH's intent (paper, App. E); ``conf/dataset/bbh.yaml`` says so for the pipeline.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from posixlab.data.files import FILE_SUFFIXES, hub_rows, read_records
from posixlab.errors import ConfigError, DatasetUnavailableError
from posixlab.prompts import PromptItem

HUB_ID = "lukaemon/bbh"
# The 27 subsets of the 23 tasks (logical deduction and shuffled-object tracking come with 3, 5 and 7 objects);
# each is a config of the hub data set and a <task>.json file of the original repository.
BBH_TASKS = (
    "boolean_expressions", "causal_judgement", "date_understanding", "disambiguation_qa", "dyck_languages",
    "formal_fallacies", "geometric_shapes", "hyperbaton", "logical_deduction_five_objects",
    "logical_deduction_seven_objects", "logical_deduction_three_objects", "movie_recommendation",
    "multistep_arithmetic_two", "navigate", "object_counting", "penguins_in_a_table",
    "reasoning_about_colored_objects", "ruin_names", "salient_translation_error_detection", "snarks",
    "sports_understanding", "temporal_sequences", "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects", "tracking_shuffled_objects_three_objects", "web_of_lies",
    "word_sorting",
)
LOCAL_WAYS = ("dataset.source=path dataset.path=<JSON/JSONL/CSV/Parquet file with fields task, input, target>, or "
              "dataset.path=<the original BBH repository's bbh/ folder of <task>.json files, or one of them>")
LOCAL_HINT = f"To run offline, use a local copy: {LOCAL_WAYS}."


def _wanted_tasks(subjects: list[str] | None) -> list[str] | None:
    """The task filter, validated; spaces are accepted for underscores, as in MMLU subjects."""
    if not subjects:
        return None
    wanted = [str(s).strip().replace(" ", "_") for s in subjects]
    unknown = [s for s in wanted if s not in BBH_TASKS]
    if unknown:
        raise ConfigError(f"unknown BBH task(s) {', '.join(unknown)} in dataset.subjects; valid tasks: "
                          f"{', '.join(BBH_TASKS)}")
    return wanted


def items_from_rows(rows, source: str, default_task: str | None = None) -> list[PromptItem]:
    """Open-ended items from rows with ``input``, ``target`` and ``task`` (or ``subject``, or ``default_task``).

    >>> rows = [{"task": "navigate", "input": "Take 1 step. Options: - Yes - No", "target": "No"}]
    >>> [(i.item_id, i.subject, i.answer) for i in items_from_rows(rows, "doc")]
    [('bbh/navigate/0', 'navigate', 'No')]
    """
    items, per_task = [], defaultdict(int)
    for n, row in enumerate(rows):
        where = f"{source}, record {n}"
        if not isinstance(row, dict) or "input" not in row:
            fields = ", ".join(row) if isinstance(row, dict) else type(row).__name__
            raise DatasetUnavailableError(f"{where}: no 'input' field (fields: {fields}); BBH records need "
                                          f"input, target and task")
        task = str(row.get("task") or row.get("subject") or default_task or "").strip()
        if not task:
            raise DatasetUnavailableError(f"{where}: no 'task' field; add a task column, or name the file "
                                          f"<task>.json after one of the BBH tasks")
        target = row.get("target")
        items.append(PromptItem(item_id=f"bbh/{task}/{per_task[task]}", question=str(row["input"]), options=(),
                                subject=task, answer=None if target is None else str(target),
                                meta={"source": source}))
        per_task[task] += 1
    return items


def _read_local(path: Path) -> list[PromptItem]:
    """Items of one file, or of every JSON/JSONL/CSV/Parquet file of a folder (the original repository's layout)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in FILE_SUFFIXES and p.is_file())
        if not files:
            raise DatasetUnavailableError(f"{path} holds no .json, .jsonl, .csv or .parquet file; give the BBH "
                                          f"repository's bbh/ folder of <task>.json files, or one file with a task "
                                          f"column")
    else:
        files = [path]
    items = []
    for file in files:
        stem_task = file.stem if file.stem in BBH_TASKS else None  # <task>.json: the file names the task
        items += items_from_rows(read_records(file), str(file), stem_task)
    return items


def load_bbh(source: str = "hub", path: str | None = None, split: str = "test",
             subjects: list[str] | None = None) -> list[PromptItem]:
    """BBH items. ``source`` is "hub" (``lukaemon/bbh``) or "path" (a local file or folder); ``subjects``: tasks."""
    wanted = _wanted_tasks(subjects)
    if source == "path":
        if not path:
            raise DatasetUnavailableError("dataset.source=path needs dataset.path=<a JSON, JSONL, CSV or Parquet "
                                          "file, or a folder of <task>.json files>")
        if not Path(path).expanduser().exists():
            raise DatasetUnavailableError(f"no file or folder at {path}; use {LOCAL_WAYS}")
        items = _read_local(Path(path).expanduser())
        if wanted:
            found = sorted({it.subject for it in items})
            items = [it for it in items if it.subject in wanted]
            if not items:
                raise DatasetUnavailableError(f"no BBH example of task(s) {', '.join(wanted)} in {path}; it holds "
                                              f"{', '.join(found)}")
        return items
    if source == "hub":
        tasks = wanted or list(BBH_TASKS)  # only the configs asked for are downloaded
        per_task = hub_rows(HUB_ID, tasks, split, "BBH", LOCAL_HINT)
        items = []
        for task in tasks:
            items += items_from_rows(per_task[task], f"{HUB_ID}/{task}:{split}", task)
        return items
    raise DatasetUnavailableError(f"unknown BBH source {source!r}; choose hub or path (there is no bundled sample)")
