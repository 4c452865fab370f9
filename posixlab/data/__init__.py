"""Data sets as lists of ``PromptItem``: one loader per data set, each with hub, bundled and local-file sources."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from posixlab.data.mmlu import load_mmlu
from posixlab.errors import ConfigError
from posixlab.prompts import PromptItem

LOADERS = {"mmlu": load_mmlu}


@dataclass(frozen=True)
class DatasetSpec:
    name: str  # a key of LOADERS
    source: str = "sample"  # sample | hub | path
    path: str | None = None
    split: str = "test"
    subjects: list[str] | None = field(default=None, hash=False)


def load_items(spec: DatasetSpec) -> list[PromptItem]:
    try:
        loader = LOADERS[spec.name]
    except KeyError:
        raise ConfigError(f"unknown dataset {spec.name!r}; choose one of {', '.join(LOADERS)}") from None
    return loader(source=spec.source, path=spec.path, split=spec.split, subjects=spec.subjects)


def select_items(items: list[PromptItem], num: int | None, seed: int) -> list[PromptItem]:
    """``num`` items drawn by a seeded shuffle (all of them, shuffled, when ``num`` is None or too large)."""
    if num is not None and num < 1:
        raise ConfigError(f"num_sets must be at least 1, got {num}")
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    return [items[i] for i in order[: num or len(items)]]


__all__ = ["DatasetSpec", "LOADERS", "load_items", "load_mmlu", "select_items"]
