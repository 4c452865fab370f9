"""The cluster path, run here: a sharded cell launched as a submitit job array through Hydra's submitit launcher
(``hydra/launcher=submitit_local``: submitit's local executor, each shard a process of its own), then ``posixlab
merge``. ``hydra/launcher=slurm`` goes through the same launcher class and the same submitit calls; only the
executor (sbatch on a SLURM cluster) differs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posixlab.results import read_sets

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # each job is a process loading the packaged model (~1 min for the array on 2 cores)

# the smallest cell that still gives one shard two sets (3 sets cut in 2): 3 prompts a set, 2 new tokens
CELL = ["num_sets=3", "num_variants=2", "max_new_tokens=2", "embedding=none", "logger=none", "variant=spelling",
        "score_cache=false", "progress=false"]


def posixlab(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def test_a_sharded_cell_as_a_submitit_job_array_merges_into_the_single_run(tmp_path):
    sweep = tmp_path / "sweep"
    posixlab("-m", "hydra/launcher=submitit_local", "shard=1/2,2/2", *CELL, f"hydra.sweep.dir={sweep}")
    # submitit ran the jobs: one job folder each, with its log and pickled result
    assert len(list((sweep / ".submitit").glob("*/*_result.pkl"))) == 2
    shards = sorted(p.parent for p in sweep.glob("*/summary.json"))
    assert [json.loads((s / "summary.json").read_text())["shard"]["index"] for s in shards] == [1, 2]
    # a shard's folder (and W&B run) says which shard it is: a cell's shards are not mistaken for whole runs
    assert [s.name.rsplit("_", 1)[1] for s in shards] == ["shard1of2", "shard2of2"]

    merged = tmp_path / "merged"
    proc = posixlab("merge", str(merged), *map(str, shards))
    assert "3 sets from 2 shards" in proc.stdout

    whole = tmp_path / "whole"
    posixlab(*CELL, f"hydra.run.dir={whole}")
    one, joined = json.loads((whole / "summary.json").read_text()), json.loads((merged / "summary.json").read_text())
    assert joined["config_fingerprint"] == one["config_fingerprint"]
    assert joined["psi"]["num_sets"] == 3
    assert joined["psi"]["posix"] == pytest.approx(one["psi"]["posix"], abs=1e-4)
    for a, b in zip(read_sets(whole), read_sets(merged), strict=True):
        assert a["item_id"] == b["item_id"]
        assert [r["token_ids"] for r in a["responses"]] == [r["token_ids"] for r in b["responses"]]
        # each shard batches its own sets: scores within float32 rounding (tests/test_shards.py)
        assert np.abs(np.array(a["logprob_matrix"]) - np.array(b["logprob_matrix"])).max() < 1e-4
        assert a["psi"] == pytest.approx(b["psi"], abs=1e-4)


def test_a_killed_job_fails_its_cell_alone_and_the_sweep_waits_for_the_others(tmp_path):
    """A job killed as SLURM's out-of-memory killer would (SIGKILL: no result, no exit handler) fails its cell; the
    sweep's command waits for the other jobs, then names the cell and its log and exits 2. Before, it ended at the
    first such job with submitit's traceback while the others ran on."""
    import os
    import signal
    import time

    sweep = tmp_path / "sweep"
    command = [sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=submitit_local", "variant=spelling,template",
               "num_sets=6", "max_new_tokens=2", "embedding=none", "logger=none", "report=false", "progress=lines",
               "score_cache=false", f"hydra.sweep.dir={sweep}"]
    with open(tmp_path / "out.txt", "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the first cell's job has started: its process, by its status file
            states = list(sweep.glob("0_*/.posixlab_job.json"))
            state = json.loads(states[0].read_text()) if states else {}
            if state.get("pid"):
                break
            time.sleep(0.2)
        os.kill(state["pid"], signal.SIGKILL)
        assert proc.wait(300) == 2
    said = (tmp_path / "out.txt").read_text()
    killed, other = sorted(p for p in sweep.iterdir() if p.name[0].isdigit())
    assert "posixlab: the sweep ended; 1 of 2 cells failed" in said and "Traceback" not in said, said[-3000:]
    assert f"posixlab: cell {killed.name} failed: its job ended before the cell was done (submitit: state " in said
    assert f"its log: {sweep / '.submitit'}" in said
    assert not (killed / "summary.json").exists() and json.loads((other / "summary.json").read_text())["psi"]
    from posixlab.status import sweep_status

    states = {cell.name: (cell.state, cell.detail) for cell in sweep_status(sweep)[0]}
    assert states[killed.name][0] == "failed" and "its job ended before the cell was done" in states[killed.name][1]
    assert states[other.name][0] == "done"


def test_a_sweep_started_in_a_taken_second_gets_a_folder_of_its_own(tmp_path):
    """Two sweeps started in one second (``posixlab -m ... &`` twice from a script) wrote one folder: one
    ``multirun.yaml``, one grid of both, and a cell of the second with the first's number and name ran into the first's
    cell. Every second of the next two minutes is taken here, as another sweep would have taken it: the sweep goes to
    ``<second>_2``, with its submitit jobs (other processes) in that one folder, and nothing is made in the taken
    folders or beside them (the sweep's end once resolved the saved folder name again, and made a new one)."""
    import datetime

    day = tmp_path / "multirun" / datetime.datetime.now().strftime("%Y-%m-%d")
    start = datetime.datetime.now()
    taken = {(start + datetime.timedelta(seconds=s)).strftime("%H-%M-%S") for s in range(120)}
    for name in taken:
        (day / name).mkdir(parents=True)
        (day / name / "other_sweep.txt").write_text("")
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=submitit_local", "seed=1,2",
                           *CELL], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    made = sorted(p.name for p in day.iterdir() if p.name not in taken)
    assert len(made) == 1 and made[0].endswith("_2") and made[0][:-2] in taken, made
    sweep = day / made[0]
    assert len(list(sweep.glob("*/summary.json"))) == 2 and (sweep / "grid.md").is_file()
    assert all(sorted(p.name for p in (day / name).iterdir()) == ["other_sweep.txt"] for name in taken)
