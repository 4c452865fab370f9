"""Data sets as lists of ``PromptItem``: one loader per data set (MMLU, Alpaca, BBH, your questions), for the hub or a
local file."""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field

from posixlab.data.alpaca import load_alpaca
from posixlab.data.bbh import BBH_TASKS, load_bbh
from posixlab.data.mmlu import load_mmlu
from posixlab.data.questions import load_questions
from posixlab.errors import ConfigError, check_field_types
from posixlab.prompts import PromptItem

LOADERS = {"mmlu": load_mmlu, "alpaca": load_alpaca, "bbh": load_bbh, "questions": load_questions}
# data sets whose items' answers are reference outputs, never graded (``PromptItem.graded``): no accuracy
UNGRADED = frozenset({"alpaca"})
OPEN_ENDED = frozenset({"alpaca"})  # loaders whose items never have options (BBH's are open-ended, some tasks' MCQ)


@dataclass(frozen=True)
class DatasetSpec:
    name: str  # a key of LOADERS, or (your questions) the name results give the data: see ``loader``
    source: str = "sample"  # sample (MMLU only) | hub | path
    path: str | None = None
    split: str | None = None  # None: the data set's own (MMLU, BBH: test; Alpaca: train, its only split)
    subjects: list[str] | None = field(default=None, hash=False)  # MMLU subjects or BBH tasks to keep
    options: dict = field(default_factory=dict, hash=False)  # loader-specific keyword arguments (see each loader)
    variants: list[str] | None = field(default=None, hash=False)  # variant types that keep its intent; None: all
    # keep only items whose question has at most this many characters (None: all). The offline experiments use it:
    # the packaged 0.5B rephraser cannot paraphrase long passages faithfully (README, "Paraphrases").
    max_question_chars: int | None = None
    # item ids never drawn as prompt sets (still usable as exemplars); skipped after the seeded shuffle, so leaving
    # an item out replaces it with the next in the draw and leaves every other set as it was
    exclude_items: list[str] | None = field(default=None, hash=False)
    # few-shot exemplars from this file (the data set's own format: MMLU's dev split saved as JSONL, for a replication
    # without the hub), the first k of the question's subject in file order, as from the hub's dev split; None: the
    # hub's dev split for MMLU from the hub, else a seeded draw from the data's other items (data/exemplars.py)
    exemplar_path: str | None = None
    # few-shot exemplars from this split of a hub data set (ARC's train, MMLU-Pro's validation, CommonsenseQA's
    # train), the first k of the question's subject in split order, as MMLU's dev split is used from the hub (its
    # default); None: that default, else a seeded draw from the evaluated items (data/exemplars.py)
    exemplar_split: str | None = None
    # the key of LOADERS that reads it, where ``name`` is not one: ``dataset=questions`` names a run of your questions
    # by its file or hub data set (``questions.data_name``) and reads it with ``load_questions``
    loader: str | None = None

    def __post_init__(self):  # where the config is read, before any data or model loads
        for key in ("subjects", "variants", "exclude_items"):
            value = getattr(self, key)
            if isinstance(value, str):  # one name written alone (dataset.subjects=astronomy): a list of one
                object.__setattr__(self, key, [value])  # (it was read letter by letter: a, s, t, r, ...)
            elif value is not None and (not isinstance(value, (list, tuple))
                                        or not all(isinstance(v, str) for v in value)):
                raise ConfigError(f"dataset.{key} takes a list of names ([a,b]) or null, not {value!r}")
        check_field_types(self, "dataset")
        if self.max_question_chars is not None and self.max_question_chars < 1:
            raise ConfigError(f"dataset.max_question_chars must be at least 1 (or null: every question), got "
                              f"{self.max_question_chars}")


def load_items(spec: DatasetSpec) -> list[PromptItem]:
    kind = spec.loader or spec.name
    try:
        loader = LOADERS[kind]
    except KeyError:
        raise ConfigError(f"unknown dataset {kind!r}; choose one of {', '.join(LOADERS)}") from None
    known = [p for p in inspect.signature(loader).parameters if p not in ("source", "path", "split", "subjects")]
    unknown = sorted(set(spec.options) - set(known))
    if unknown:  # a typo in dataset.options would otherwise surface as a TypeError traceback
        raise ConfigError(f"unknown dataset.options for {kind}: {', '.join(unknown)}; "
                          f"it takes {', '.join(known) or 'none'}")
    split = {} if spec.split is None else {"split": spec.split}
    items = loader(source=spec.source, path=spec.path, subjects=spec.subjects, **split, **spec.options)
    if spec.max_question_chars is not None:
        kept = [item for item in items if len(item.question) <= spec.max_question_chars]
        if not kept:
            raise ConfigError(f"no {spec.name} question has at most max_question_chars={spec.max_question_chars} "
                              f"characters (the shortest has {min(len(i.question) for i in items)}); raise the "
                              f"limit or set dataset.max_question_chars=null")
        items = kept
    return items


def select_items(items: list[PromptItem], num: int | None, seed: int,
                 exclude: list[str] | None = None) -> list[PromptItem]:
    """``num`` items drawn by a seeded shuffle (all of them, shuffled, when ``num`` is None or too large), skipping
    the item ids in ``exclude``. An excluded id from another data set's namespace (the part before its first "/",
    e.g. ``mmlu/``) is ignored, so one exclusion list can serve a sweep over several data sets.

    >>> from posixlab.prompts import PromptItem
    >>> items = [PromptItem(f"q{i}", f"Question {i}?") for i in range(6)]
    >>> [i.item_id for i in select_items(items, 3, seed=0)]
    ['q4', 'q2', 'q1']
    >>> [i.item_id for i in select_items(items, 3, seed=0, exclude=["q2"])]   # the next in the draw takes its place
    ['q4', 'q1', 'q0']
    >>> [i.item_id for i in select_items(items, 2, seed=0, exclude=["bbh/x/1"])]   # not this data set's namespace
    ['q4', 'q2']
    """
    if num is not None and num < 1:
        raise ConfigError(f"num_sets must be at least 1, got {num}")
    namespaces = {item.item_id.split("/")[0] for item in items}
    unknown = sorted(i for i in set(exclude or ()) - {item.item_id for item in items}
                     if "/" not in i or i.split("/")[0] in namespaces)
    if unknown:
        raise ConfigError(f"dataset.exclude_items names item ids that are not in the data set: {', '.join(unknown)}")
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    skip = set(exclude or ())
    kept = [items[i] for i in order if items[i].item_id not in skip]
    return kept[: num or len(kept)]


__all__ = ["BBH_TASKS", "DatasetSpec", "LOADERS", "OPEN_ENDED", "UNGRADED", "load_alpaca", "load_bbh", "load_items",
           "load_mmlu", "load_questions", "select_items"]
