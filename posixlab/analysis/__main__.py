"""python -m posixlab.analysis RESULTS [RESULTS ...] --out figures/

RESULTS are run folders, sweep folders (searched recursively for summary.json + sets.jsonl) or per_set.csv files.
Classification runs (summary.json with "task": "classification" + samples.jsonl) found there add their tables,
figures and most-sensitive-samples reports under OUT/classification/. No model is loaded: this only reads results.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from pathlib import Path

from posixlab.analysis.collect import GridWarning
from posixlab.analysis.regenerate import regenerate
from posixlab.errors import PosixlabError
from posixlab.results import SUMMARY_FILE
from posixlab.status import cells_without_results


def _show_grid_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if not issubclass(category, GridWarning):
        return _default_show(message, category, filename, lineno, file, line)
    print(f"warning: {message}", file=file or sys.stderr)


_default_show = warnings.showwarning


def warn_of_holes(sources: list[str]) -> None:
    """A warning for each cell of a sweep under ``sources`` that has no finished run (one that failed, is still
    running or never started, as ``posixlab status`` says it): the tables leave it out."""
    for source in map(Path, sources):
        if not source.is_dir():
            continue
        shown = {summary.parent.resolve() for summary in source.rglob(SUMMARY_FILE)}
        for sweep in sorted({source, *(found.parent for found in source.rglob("multirun.yaml"))}):
            for cell in cells_without_results(sweep, shown):
                warnings.warn(f"{sweep}: not in the tables, no finished run: {cell}", GridWarning, stacklevel=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posixlab.analysis", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="run or sweep folders, or per_set.csv files")
    parser.add_argument("--out", default="figures", help="folder for the tables and figures (default: figures)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # a gap in the grid is one line for the reader (Python's default adds the library line that warned)
            warnings.showwarning = _show_grid_warning
            warn_of_holes(args.results)
            written = regenerate(args.results, args.out)
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    print(f"{len(written)} files in {args.out} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
