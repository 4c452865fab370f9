"""Scripts that measure, compare and write what the README and the figures quote (experiments/README.md).

What they share: ``run_main`` gives a script's bad input one line and exit status 2, as the ``posixlab`` command
does; ``paraphrase_file`` opens a paraphrase file that must exist.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def run_main(main: Callable[[], int | None]) -> None:
    """Exit with ``main()``'s status; a posixlab error (a missing file, a folder that is not a run) is one line,
    ``posixlab error: ...``, and status 2, not a traceback."""
    from posixlab.errors import PosixlabError

    try:
        status = main()
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(status or 0)


def paraphrase_file(path: str | Path):
    """The paraphrase file at ``path``, read; a ``ConfigError`` if there is none (or a line is not a record)."""
    from posixlab.errors import ConfigError
    from posixlab.rephrase import ParaphraseFile

    if not Path(path).is_file():
        raise ConfigError(f"no paraphrase file at {path}; give a JSONL file a rephraser wrote (by default in "
                          f"~/.cache/posixlab/paraphrases/)")
    return ParaphraseFile(path, user_supplied=True, read_only=True)  # a checksum, where a line has one, is checked
