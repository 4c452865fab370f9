"""The seam between the one run skeleton (``posixlab/runner.py``) and a task: what a task must say about its work.

A task turns its configuration into **units** (a POSIX prompt set; a classification sample with its Q prompts),
says what it needs from a model (``needs``: generate text; score token sequences), turns each unit into
**requests** for the model, and turns the model's answers back into one **record** per unit; at the end it
summarises the records. Everything else (config checks shared by all tasks, the model, the score cache, shards,
progress, the records file, the summary files) is the runner's, so every task gets all of it.

A third task is one new module in ``posixlab/tasks/`` with a ``Task`` subclass, registered in
``posixlab/tasks/__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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


class Task:
    """One kind of measurement. Subclasses set the class attributes and implement the methods below."""

    name: str = ""
    records_file: str = ""  # one JSON line per unit, in the run folder
    index_key: str = "index"  # each record's position among all the cell's units (shards keep it)
    unit_name: str = "unit"  # progress bars count these
    in_order: bool = False  # the engine takes the requests in the given order (neighbours share long prefixes)
    summary_keys: tuple[str, ...] = ()  # the summary's computed keys (the rest is the run's metadata)
    input_files: tuple[str, ...] = ()  # files about the inputs a run folder holds besides records and summary

    def __init__(self, cfg):
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
    def write_summary(cls, folder: Path, summary: dict) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The run in a few words, for progress bars."""
        return self.name
