"""Where posixlab keeps what it downloads and computes: one cache folder for models, paraphrases and scores."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$POSIXLAB_CACHE`` if set, else ``~/.cache/posixlab``: converted models, paraphrase files, score caches."""
    return Path(os.environ.get("POSIXLAB_CACHE", Path.home() / ".cache" / "posixlab"))
