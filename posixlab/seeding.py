"""Per-instance seeded randomness (HELM-style): every random choice about one item has its own random stream.

A draw is a deterministic function of (run seed, item id, what is drawn, index), hashed into a private
``random.Random``: adding items, reordering them, filtering them or running them in parallel never changes what
another item gets, and the same arguments give the same stream on every machine and Python version. Prompt
variants (``posixlab.variants``) and few-shot exemplars (``posixlab.data.exemplars``) both draw this way, so it
lives here, beside neither.
"""

from __future__ import annotations

import hashlib
import random

from posixlab.errors import ConfigError


def rng_for(seed: int, item_id: str, kind: str, index: int) -> random.Random:
    """A random stream private to one (seed, item, kind, index): the same arguments give the same stream everywhere.

    >>> rng_for(0, "mmlu/x/1", "spelling", 3).random() == rng_for(0, "mmlu/x/1", "spelling", 3).random()
    True
    >>> rng_for(0, "mmlu/x/1", "spelling", 3).random() == rng_for(0, "mmlu/x/1", "spelling", 4).random()
    False
    """
    digest = hashlib.sha256(f"{seed}\x1f{item_id}\x1f{kind}\x1f{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def check_seed(seed) -> None:
    """A ``ConfigError`` for a seed that is not a whole number of at least 0, before any work: a run's seed also seeds
    numpy's bootstrap intervals (``SeedSequence``), which take nothing else and would fail only once every set is
    done.

    >>> check_seed(0)
    >>> check_seed("abc")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: seed takes a whole number of at least 0, not 'abc'
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed takes a whole number of at least 0, not {seed!r}")


__all__ = ["check_seed", "rng_for"]
