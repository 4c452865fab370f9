"""A sweep whose cells fail: each fails alone, the grid goes on, and the sweep ends with the worst status (2: an
error, 1: only missed gates), naming every failed cell; ``fail_fast=true`` stops at the first; ``skip_done=true``
runs again only what did not finish; the page, the gate and a comparison of two sweeps name the hole. The cells run
the rule backend and the agreement task of ``tests/plugin_backend.py`` and ``tests/plugin_task.py`` (no model
file), and a third plug-in whose model crashes as a CUDA out-of-memory would: an error posixlab does not know; the
comparison runs POSIX cells of the packaged model."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CRASH_BACKEND = '''
import os

import plugin_backend
from posixlab.backends import Backend, register
from posixlab.models.capabilities import GENERATE


def open_model(spec, cache_dir=None):
    if os.environ.get("CRASH") == "1":
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (a crash on cue)")
    return plugin_backend.open_model(spec, cache_dir)


register(Backend("crash-test", frozenset({GENERATE}), open_model, plugin_backend.engine))
'''
CELL = ["task=agreement", "model.source=api", "model.path=rule", "logger=none", "report=false",
        "progress=false", "task.questions=[[What is 2 + 2?,What is 2 + 2 ?,What is 2+2?]]"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The plug-ins beside the sweep, as a user's modules would be."""
    folder = tmp_path_factory.mktemp("work")
    for name in ("plugin_backend.py", "plugin_task.py"):
        shutil.copy(ROOT / "tests" / name, folder / name)
    (folder / "crash_backend.py").write_text(CRASH_BACKEND, encoding="utf-8")
    return folder


def sweep(work: Path, folder: Path, *args: str, crash: bool = True) -> subprocess.CompletedProcess:
    """The sweep of ``CELL`` and ``args`` into ``folder``; ``crash``: every crash-test cell crashes."""
    env = {**{k: v for k, v in os.environ.items() if k not in ("POSIXLAB_PLUGINS", "PYTHONPATH", "HYDRA_FULL_ERROR")},
           "POSIXLAB_PLUGINS": "plugin_backend,plugin_task,crash_backend", "POSIXLAB_CACHE": str(folder / "cache"),
           "CRASH": str(int(crash))}
    named = [] if any(arg.startswith("model.name=") for arg in args) else ["model.name=rule"]
    return subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", *CELL, *named, *args,
                           f"hydra.sweep.dir={folder}"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)


def cells(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name[0].isdigit())


@pytest.mark.slow
def test_failed_cells_fail_alone_and_skip_done_runs_again_only_what_did_not_finish(work, tmp_path):
    folder = tmp_path / "sweep"
    proc = sweep(work, folder, "model.backend=crash-test,rule-test,rule-test", "gate.min_agreement=1.0")
    assert proc.returncode == 2, proc.stderr[-3000:]
    crashed, missed, missed_too = cells(folder)
    end = proc.stderr[proc.stderr.index("posixlab: the sweep ended"):]
    assert end.startswith(f"posixlab: the sweep ended; 3 of 3 cells failed (posixlab status {folder}):\n")
    assert f"posixlab: cell {crashed.name} failed: RuntimeError: CUDA out of memory. Tried to allocate" in end
    assert re.search(rf"posixlab: (cell {missed.name} failed|2 cells failed with the same error \({missed.name}, "
                     rf"{missed_too.name}\)): missed its gate: min_agreement 0\.\d{{4}}", end), end
    assert "Traceback" in proc.stderr and "Traceback" not in end  # the crash's traceback, printed as it happened
    assert end.endswith("the same command with skip_done=true runs again only the cells that did not finish\n")
    for later in cells(folder)[1:]:  # the cells after the crash ran to their end, results written, then the gate
        assert json.loads((later / "summary.json").read_text())["task"] == "agreement"
    status = subprocess.run([sys.executable, "-m", "posixlab", "status", str(folder)], cwd=work, capture_output=True,
                            text=True, timeout=120)  # the plug-ins the cells were made with, read from their folders
    assert status.returncode == 3, status.stderr[-2000:]  # posixlab status: the crashed cell failed
    table = status.stdout
    assert "3 cells (jobs of this machine): 2 done, 0 running, 1 failed" in table, table
    assert "the run finished; then missed its gate: min_agreement" in table
    page = subprocess.run([sys.executable, "-m", "posixlab", "report", str(folder), "--out", str(tmp_path / "p.html")],
                          cwd=work, capture_output=True, text=True, timeout=120)
    assert page.returncode == 0, page.stderr[-2000:]
    html = (tmp_path / "p.html").read_text()  # the grid's page: two runs, and the cell that has none, with why
    assert "2 runs compared" in html and "<strong>Not on this page</strong>: 1 cell of the sweep without results: " \
        f"{crashed.name}: failed (RuntimeError: CUDA out of memory." in html

    gate = subprocess.run([sys.executable, "-m", "posixlab", "gate", str(folder), "gate.min_agreement=0"], cwd=work,
                          capture_output=True, text=True, timeout=120)  # a CI gate on the grid: the hole fails it
    assert gate.returncode == 1 and gate.stdout.count("gate passed") == 2, gate.stdout + gate.stderr[-2000:]
    assert f"| complete | summary.json | the run finished | no results: {crashed.name}: failed (RuntimeError: CUDA " \
        "out of memory." in gate.stdout

    # the same sweep again, with skip_done=true: the crashed cell runs (no crash this time), the finished ones are
    # not run again (their results untouched), their gates checked again: only gates missed, status 1
    written = {cell: (cell / "summary.json").stat().st_mtime_ns for cell in (missed, missed_too)}
    again = sweep(work, folder, "model.backend=crash-test,rule-test,rule-test", "gate.min_agreement=1.0",
                  "skip_done=true", crash=False)
    assert again.returncode == 1, again.stderr[-3000:]
    assert again.stdout.count("holds this run, finished: not run again (skip_done=true)") == 2, again.stdout
    assert {cell: (cell / "summary.json").stat().st_mtime_ns for cell in written} == written
    assert json.loads((crashed / "summary.json").read_text())["task"] == "agreement"
    assert "posixlab: the sweep ended; 3 of 3 cells failed" in again.stderr
    live, end = again.stderr.split("posixlab: the sweep ended")
    assert live.count("failed: missed its gate: min_agreement") == 3  # as each ended; at the end, each cell named
    assert all(re.search(rf"{cell.name}[^\n]*: missed its gate: min_agreement", end) for cell in cells(folder)), end
    other = sweep(work, folder, "model.backend=rule-test", "skip_done=true")  # cell 0 with another setting: run
    assert other.returncode == 0 and "not run again" not in other.stdout, other.stderr[-3000:]
    assert json.loads((crashed / "summary.json").read_text())["config"]["model"]["backend"] == "rule-test"
    skipped = sweep(work, folder, "model.backend=rule-test", "skip_done=true")  # the same again: not run
    assert skipped.returncode == 0 and "not run again" in skipped.stdout, skipped.stderr[-3000:]
    status = subprocess.run([sys.executable, "-m", "posixlab", "status", str(folder)], cwd=work, capture_output=True,
                            text=True, timeout=120)  # the older summary is the skipped job's result
    assert re.search(rf"{crashed.name} +done .*\n +└ finished by an earlier job; not run again \(skip_done=true\)",
                     status.stdout), status.stdout


@pytest.mark.slow
def test_only_missed_gates_end_the_sweep_with_status_1_and_fail_fast_stops_at_the_first(work, tmp_path):
    gated = sweep(work, tmp_path / "gated", "model.backend=rule-test", "gate.min_agreement=1.0,0.0")
    assert gated.returncode == 1, gated.stderr[-3000:]
    assert "posixlab: the sweep ended; 1 of 2 cells failed" in gated.stderr and "gate passed" in gated.stdout
    assert len(cells(tmp_path / "gated")) == 2
    fast = sweep(work, tmp_path / "fast", "model.backend=crash-test,rule-test", "fail_fast=true")
    assert fast.returncode == 2, fast.stderr[-3000:]
    assert [c.name[0] for c in cells(tmp_path / "fast")] == ["0"]  # the second cell never started
    assert "RuntimeError: CUDA out of memory" in fast.stderr and "the sweep ended" not in fast.stderr
    status = subprocess.run([sys.executable, "-m", "posixlab", "status", str(tmp_path / "fast")], cwd=work,
                            capture_output=True, text=True, timeout=120)  # the cell never started: pending, listed
    assert "2 cells (jobs of this machine): 0 done, 0 running, 1 failed, 1 pending" in status.stdout, status.stdout
    fast_gate = sweep(work, tmp_path / "fast_gate", "model.backend=rule-test", "gate.min_agreement=1.0,0.0",
                      "fail_fast=true")
    assert fast_gate.returncode == 1 and len(cells(tmp_path / "fast_gate")) == 1, fast_gate.stderr[-3000:]


@pytest.mark.slow
def test_a_comparison_of_two_sweeps_does_not_gate_a_cell_the_new_one_lacks(tmp_path):
    """``posixlab compare BASE NEW --fail-if-worse`` (a CI job's gate on a prompt change): a cell that left no run
    in the new sweep (its prompt file broken since the base ran) is named, and fails the gate, as a cell that did not
    finish does. POSIX runs of the packaged model, two prompt sets a cell."""
    files = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    for n, path in enumerate(files):
        path.write_text("".join(json.dumps({"id": f"q{n}{k}", "prompts": [f"What is {n} + {k}?", f"{n}+{k}=?"]}) + "\n"
                                for k in range(2)), encoding="utf-8")

    def posix_sweep(folder: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", "dataset=prompt_sets",
                               f"dataset.path={files[0]},{files[1]}", "max_new_tokens=2", "logger=none",
                               "report=false", "progress=false", "embedding=none", f"hydra.sweep.dir={folder}",
                               f"score_cache_dir={tmp_path / 'scores'}"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)

    assert posix_sweep(tmp_path / "base").returncode == 0
    files[1].write_text('{"id": "q10", "prompts": "not a list"}\n', encoding="utf-8")
    new = posix_sweep(tmp_path / "new")
    assert new.returncode == 2 and "the sweep ended; 1 of 2 cells failed" in new.stderr, new.stderr[-3000:]
    said = f"{files[1]}, line 1 has no 'prompts' list"  # once as the cell failed, once at the sweep's end
    assert new.stderr.count(said) == 2 and f"\nposixlab error: {said}" not in new.stderr, new.stderr[-3000:]
    compare = subprocess.run([sys.executable, "-m", "posixlab", "compare", str(tmp_path / "base"),
                              str(tmp_path / "new"), "--fail-if-worse"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert compare.returncode == 1, compare.stdout + compare.stderr[-2000:]
    hole = next((tmp_path / "new").glob("1_*"))
    assert f"Not compared: {tmp_path / 'new'}: a cell without results: {hole.name}: failed (posixlab error: " \
        f"{files[1]}, line 1 has no 'prompts' list" in compare.stdout, compare.stdout
    assert "not compared, so not gated" in compare.stderr
    judged = subprocess.run([sys.executable, "-m", "posixlab", "judge", str(tmp_path / "new"), "--judge",
                             "smollm2-135m-instruct"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0 and (next((tmp_path / "new").glob("0_*")) / "judge.json").is_file(), judged.stderr
    assert f"posixlab judge: not judged, no prompt set to read: {hole.name}: failed (posixlab error: " in judged.stderr
