"""Files are written and read as UTF-8 whatever the locale: a summary holding "ψ", "—" or "×" must survive a machine
whose preferred encoding is ASCII (LANG=C without Python's UTF-8 mode) or cp1252 (Windows)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "posixlab"

# a subprocess whose locale encoding is ASCII: no UTF-8 mode (PEP 540), no coercion of the C locale (PEP 538)
ASCII_ENV = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
             "PYTHONIOENCODING": "ascii"}

WRITE_SUMMARY = r"""
import locale, sys
from pathlib import Path
from posixlab.results import SUMMARY_FILE, SUMMARY_MD, write_summary

assert locale.getpreferredencoding(False).lower() in ("ascii", "ansi_x3.4-1968", "us-ascii"), \
    locale.getpreferredencoding(False)
folder = Path(sys.argv[1])
stat = {"posix": 0.5, "ci95": [0.25, 0.75], "sd": 0.1, "median": 0.5, "num_sets": 2}
summary = {"model": {"name": "ψ-model — 2×"}, "dataset": "données", "variant": "spelling", "psi": stat,
           "psi_reference_compat": {"posix": 0.4, "sd": 0.1, "median": 0.4, "num_sets": 2}, "factors": {},
           "compute": {"forward_tokens": 10, "forward_tokens_naive": 20, "saved_by_reuse": 10, "saved_by_cache": 0,
                       "sets_from_cache": 0}}
write_summary(folder, summary)
print("written")
"""


@pytest.mark.slow  # a Python subprocess under an ASCII locale
def test_summaries_are_utf8_under_an_ascii_locale(tmp_path):
    script = tmp_path / "write_summary.py"  # a UTF-8 source file: a non-ASCII -c argument would be decoded as ASCII
    script.write_text(WRITE_SUMMARY, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], env=ASCII_ENV, cwd=tmp_path,
                          capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = (tmp_path / "summary.json").read_bytes().decode("utf-8")
    markdown = (tmp_path / "summary.md").read_bytes().decode("utf-8")
    assert '"name": "ψ-model — 2×"' in summary and '"dataset": "données"' in summary  # ensure_ascii=False
    assert "# POSIX: ψ-model — 2×, données, spelling variants" in markdown
    assert "| ψ (paper, Def. 3.3) |" in markdown


def _text_io_without_encoding(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls that open a file in text mode with the locale's encoding: ``x.read_text()``/``x.write_text()``, builtin
    or ``io.open(path[, mode])`` and ``path.open([mode])`` in a mode without "b", each lacking ``encoding=``.
    ``os.open`` (a file descriptor), a zip member's ``zf.open`` and ``sqlite3`` are not text files."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, keywords = node.func, {k.arg for k in node.keywords}
        if "encoding" in keywords:
            continue
        if isinstance(func, ast.Attribute) and func.attr in ("read_text", "write_text"):
            found.append((node.lineno, f".{func.attr}()"))
            continue
        if isinstance(func, ast.Name) and func.id == "open" or (
                isinstance(func, ast.Attribute) and func.attr == "open" and isinstance(func.value, ast.Name)
                and func.value.id == "io"):
            mode_at = 1  # open(file, mode, ...)
        elif isinstance(func, ast.Attribute) and func.attr == "open":
            receiver = func.value.id if isinstance(func.value, ast.Name) else None
            if receiver in ("os", "zf", "zipfile", "sqlite3", "webbrowser"):
                continue
            if node.args and not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                continue  # some other object's open(spec, ...): Path.open's first argument is its mode
            mode_at = 0  # Path.open(mode, ...)
        else:
            continue
        mode = next((k.value for k in node.keywords if k.arg == "mode"),
                    node.args[mode_at] if len(node.args) > mode_at else ast.Constant("r"))
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and "b" in mode.value:
            continue  # binary: no encoding
        found.append((node.lineno, "open() in text mode"))
    return sorted(found)


def test_every_text_file_in_posixlab_is_opened_with_an_explicit_encoding():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{path.relative_to(ROOT)}:{line}: {what} without encoding="
                      for line, what in _text_io_without_encoding(tree)]
    assert not offenders, "text I/O in the locale's encoding (pass encoding=\"utf-8\"):\n" + "\n".join(offenders)


def test_the_static_check_catches_what_it_should():
    source = """
from pathlib import Path
import os, io
Path("a").write_text("ψ")
Path("a").read_text()
open("a", "w")
open("a")
io.open("a", mode="r")
Path("a").open()
Path("a").open("a")
Path("a").write_text("x", encoding="utf-8")
open("a", "rb"); open("a", mode="wb"); open("a", "ab"); Path("a").open("rb")
open("a", "w", encoding="utf-8", newline="")
os.open("a", os.O_RDONLY)
zf.open("member")
backend.open(spec, cache_dir)
"""
    assert [line for line, _ in _text_io_without_encoding(ast.parse(source))] == [4, 5, 6, 7, 8, 9, 10]
