"""The ``posixlab`` command's entry point (``pyproject.toml``, ``run.py``, ``python -m posixlab``): the application,
``posixlab.cli.entry``, behind a guard for Ctrl-C where the application cannot catch it itself.

Importing the application (torch, transformers, Hydra, scipy) takes seconds, and composing a run's config a moment
more; Ctrl-C there (a setting seen wrong just after Enter) printed forty lines of import machinery. A run that has
started says what it kept and exits 130 itself (``cli.main``); this says the same in one line before that.
"""

from __future__ import annotations

import sys


def entry() -> None:
    try:
        from posixlab.cli import entry as application
    except KeyboardInterrupt:
        print("posixlab: interrupted (Ctrl-C) while starting; nothing was run.", file=sys.stderr)
        sys.exit(130)  # 128 + SIGINT, as a shell reports it
    try:
        application()
    except KeyboardInterrupt:  # before a run's job began (a command's own work, Hydra composing the config)
        print("\nposixlab: interrupted (Ctrl-C).", file=sys.stderr)
        sys.exit(130)
