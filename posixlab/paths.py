"""Where posixlab keeps what it downloads and computes: one cache folder for models, paraphrases and scores."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$POSIXLAB_CACHE`` if set, else ``~/.cache/posixlab``: converted models, paraphrase files, score caches."""
    return Path(os.environ.get("POSIXLAB_CACHE", Path.home() / ".cache" / "posixlab"))


def shown(path: str | Path) -> str:
    """A path for a message: a relative one also as it resolved, since it is read from the folder the command ran in.

    >>> shown("/data/x.jsonl")
    '/data/x.jsonl'
    >>> shown("../x.jsonl") == f"../x.jsonl (from {Path.cwd()}: {Path.cwd().parent / 'x.jsonl'})"
    True
    """
    path = Path(path)
    return str(path) if path.is_absolute() else f"{path} (from {Path.cwd()}: {os.path.abspath(path)})"
