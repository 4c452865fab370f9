"""The cluster path on a real scheduler: one single-node SLURM cluster for the session (``slurm_cluster``,
tests/slurm_fixtures.py), the packaged SmolLM2-135M, the CI grid (``+experiment=ci_grid``: 2 cells of 3 sets of
N = 4, one set a wave) and ``hydra/launcher=slurm`` as it ships, with only the partition and a job's size set
(``gpus_per_node=0``, 1 CPU, 1 GB).

- the grid runs as SLURM jobs and equals the same grid run here, bit for bit (every ψ, every matrix, POSIX);
- a large cell (12 sets) runs as a job array of 3 shards; one shard is cancelled (``scancel``) mid-run; the same
  command again recomputes no finished set, and ``posixlab merge`` of the shards equals the cell run here;
- a job requeued mid-run (``scontrol requeue``, as on preemption) starts again and recomputes no finished set;
- a job that fails is reported by its cell's name and log, by the sweep's command and by ``posixlab status``;
- six jobs write one score cache folder and one response cache folder at once: no error, no record lost or doubled;
- ``posixlab status`` follows each sweep (SLURM and local) while its jobs run.

Both sides run with one thread (OMP_NUM_THREADS=1): results are compared bit for bit, and a matrix product's sums
depend on how many threads share it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_fixtures import PARTITION

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # jobs load the packaged model; about 4 minutes for the file on 2 cores

THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
SLURM = ["hydra/launcher=slurm", f"hydra.launcher.partition={PARTITION}", "hydra.launcher.gpus_per_node=0",
         "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]
GRID = "+experiment=ci_grid"
LARGE = 18  # sets of the large cell: 6 a shard, so that a cancelled shard is caught with sets still to do (the
# job runs on for about 2 s after scancel: submitit ignores SIGTERM, SLURM kills it KillWait + 2 s later)


def run_py(*args: str, timeout: int = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **THREADS})


def start(log: Path, *args: str) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT, env={**os.environ, **THREADS})


def wait_for(predicate, timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(every)


def lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().split("\n") if line.strip())
    except OSError:
        return 0


def cells(sweep: Path) -> dict[int, Path]:
    """The sweep's cell folders by job number."""
    return {int(p.name.split("_")[0]): p for p in sweep.iterdir() if p.is_dir() and p.name[0].isdigit()}


def job_id(cell: Path) -> str:
    import yaml

    return str(yaml.safe_load((cell / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["id"])


def status(sweep: Path) -> dict[int, dict]:
    """``posixlab status SWEEP --json``, by job number (in this process: the command's own function)."""
    from posixlab.status import sweep_status

    found, _ = sweep_status(sweep)
    return {c.num: {"state": c.state, "detail": c.detail, "units": c.units, "log": c.log, "metrics": c.metrics,
                    "name": c.name} for c in found}


def summary(cell: Path) -> dict:
    return json.loads((cell / "summary.json").read_text())


def assert_same_cell(a: Path, b: Path) -> None:
    """Bit for bit: every set's responses, matrix and ψ, and POSIX."""
    from posixlab.results import read_sets

    one, two = read_sets(a), read_sets(b)
    assert [r["set_index"] for r in one] == [r["set_index"] for r in two]
    for x, y in zip(one, two):
        assert [r["token_ids"] for r in x["responses"]] == [r["token_ids"] for r in y["responses"]]
        assert x["logprob_matrix"] == y["logprob_matrix"], f"set {x['set_index']}"
        assert x["psi"] == y["psi"], f"set {x['set_index']}: {x['psi']!r} != {y['psi']!r}"
    assert summary(a)["psi"]["posix"] == summary(b)["psi"]["posix"]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The grids run here (hydra's basic launcher, one job after the other), watched with ``posixlab status`` while
    they run: the CI grid's 2 cells and the large cells (``num_sets=3,12``); {(variant, num_sets): cell folder}."""
    tmp = tmp_path_factory.mktemp("local")
    sweep = tmp / "sweep"
    started = time.monotonic()
    proc = start(tmp / "log.txt", "-m", GRID, f"num_sets=3,{LARGE}", f"hydra.sweep.dir={sweep}",
                 f"score_cache_dir={tmp / 'cache'}")
    seen = []
    while proc.poll() is None:
        if (sweep / "multirun.yaml").is_file():
            seen.append(status(sweep))
        time.sleep(0.5)
    assert proc.returncode == 0, (tmp / "log.txt").read_text()[-3000:]
    import yaml

    out = {}
    for cell in cells(sweep).values():
        config = yaml.safe_load((cell / "config.yaml").read_text())
        out[(config["variant"]["name"], config["task"]["num_sets"])] = cell
    assert len(out) == 4
    return {"cells": out, "sweep": sweep, "seen": seen, "seconds": time.monotonic() - started}


def test_the_cluster_starts(slurm_cluster):
    assert slurm_cluster.start_seconds < 60
    info = slurm_cluster.run("sinfo", "-h", "-o", "%P %a %T %c").stdout.split()
    assert info == [f"{PARTITION}*", "up", "idle", "8"]
    print(f"\nSLURM cluster (munged, slurmctld, slurmd) up and idle in {slurm_cluster.start_seconds:.2f} s")


def test_posixlab_status_follows_a_local_sweep(local):
    from posixlab.status import status_command

    # while it ran: a cell running with its sets and POSIX so far, the cells not started yet pending
    assert any(any(c["state"] == "running" and c["units"] and "POSIX" in c["metrics"] for c in snap.values())
               for snap in local["seen"]), local["seen"][-3:]
    assert any(sum(c["state"] == "pending" for c in snap.values()) >= 2 for snap in local["seen"])
    final = status(local["sweep"])
    assert [c["state"] for c in final.values()] == ["done"] * 4
    for c in final.values():
        cell = local["sweep"] / c["name"]
        assert c["metrics"]["POSIX"] == summary(cell)["psi"]["posix"] and c["log"].parent == cell
    assert status_command([str(local["sweep"])]) == 0
    print(f"\nlocal grid (4 cells, {2 * (3 + LARGE)} sets): {local['seconds']:.0f} s")


def test_the_grid_runs_as_slurm_jobs_and_equals_the_local_grid(slurm_cluster, local, tmp_path):
    sweep, started = tmp_path / "sweep", time.monotonic()
    proc = start(tmp_path / "log.txt", "-m", GRID, *SLURM, f"hydra.sweep.dir={sweep}",
                 f"score_cache_dir={tmp_path / 'cache'}")
    seen = []
    while proc.poll() is None:
        if (sweep / "multirun.yaml").is_file():
            seen.append(status(sweep))
        time.sleep(0.5)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, (tmp_path / "log.txt").read_text()[-3000:]
    assert any(c["state"] == "running" and c["detail"] == "SLURM: running" for snap in seen for c in snap.values())
    found = cells(sweep)
    assert sorted(found) == [0, 1]
    for num, cell in found.items():
        jid = job_id(cell)  # an array task of SLURM, its log where posixlab status says
        assert jid.split("_")[0].isdigit() and jid.endswith(f"_{num}")
        log = sweep / ".submitit" / jid / f"{jid}_0_log.err"
        assert f"{3}/3 sets" in log.read_text()
        assert status(sweep)[num]["state"] == "done" and status(sweep)[num]["log"] == log
        variant = "spelling" if "spelling" in cell.name else "template"
        assert_same_cell(cell, local["cells"][(variant, 3)])
    # both jobs shared one score cache folder, each writing its own file
    assert len(list((tmp_path / "cache").glob("*.sqlite"))) == 2
    print(f"\nSLURM grid (2 jobs): {seconds:.0f} s, equal bit for bit to the local grid")


def test_a_large_cell_as_a_job_array_of_shards_cancelled_resumed_and_merged(slurm_cluster, local, tmp_path):
    from posixlab.commands import merge_command

    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    args = ["-m", GRID, *SLURM, "variant=template", f"num_sets={LARGE}", "shard=1/3,2/3,3/3",
            f"hydra.sweep.dir={sweep}", f"score_cache_dir={cache}"]
    started = time.monotonic()
    first = start(tmp_path / "first.txt", *args)
    target = wait_for(lambda: cells(sweep).get(0) if sweep.is_dir() else None, 180, "shard 1's folder")
    wait_for(lambda: lines(target / "sets.jsonl") >= 1, 180, "shard 1's first set", every=0.05)
    victim = job_id(target)
    slurm_cluster.run("scancel", victim)
    wait_for(lambda: victim not in slurm_cluster.queue(), 60, "the cancelled task to leave the queue")
    finished = lines(target / "sets.jsonl")
    assert finished < LARGE // 3 and not (target / "summary.json").exists(), "the shard ended before its cancel"
    report = status(sweep)[0]  # while the other shards may still run
    assert report["state"] == "failed" and "CANCELLED" in report["detail"], report
    assert report["log"] == sweep / ".submitit" / victim / f"{victim}_0_log.err" and report["log"].is_file()
    slurm_cluster.wait_empty(180)
    # This cluster has no accounting (no slurmdbd): sacct cannot say that the task ended, squeue can (it left the
    # queue). The sweep's command reads the other shards, then names the cancelled one and exits 2; it waited forever
    assert first.wait(240) == 2, (tmp_path / "first.txt").read_text()[-3000:]
    said = (tmp_path / "first.txt").read_text()
    assert "posixlab: the sweep ended; 1 of 3 cells failed" in said and "Traceback" not in said, said[-3000:]
    assert f"posixlab: cell {target.name} failed: its job ended before the cell was done (" in said, said[-3000:]
    assert "CANCELLED" in said.split(f"cell {target.name} failed")[1].splitlines()[0], said[-3000:]
    again = run_py(*args)  # the same command again
    seconds = time.monotonic() - started
    assert again.returncode == 0, again.stderr[-3000:]
    shards = cells(sweep)
    assert [status(sweep)[k]["state"] for k in sorted(shards)] == ["done"] * 3
    from_cache = [summary(shards[k])["compute"]["sets_from_cache"] for k in sorted(shards)]
    # the cancelled shard: its finished sets from the score cache, the rest computed; the others: all cached
    assert finished <= from_cache[0] < LARGE // 3 and from_cache[1:] == [LARGE // 3] * 2, from_cache
    merged = tmp_path / "merged"
    assert merge_command([str(merged), *(str(shards[k]) for k in sorted(shards))]) == 0
    assert_same_cell(merged, local["cells"][("template", LARGE)])
    segments = sorted(p.name for p in cache.glob("*.sqlite"))
    assert len(segments) == 3, segments  # three jobs at a time: three files, taken over by the jobs run again
    print(f"\nshards: {finished} of {LARGE // 3} sets before the cancel, {from_cache} sets from the cache on the "
          f"rerun; cancel, rerun and merge {seconds:.0f} s; merged = local cell, bit for bit")


def test_a_requeued_job_resumes(slurm_cluster, local, tmp_path):
    sweep = tmp_path / "sweep"
    started = time.monotonic()
    proc = start(tmp_path / "log.txt", "-m", GRID, *SLURM, "variant=spelling", f"num_sets={LARGE}",
                 f"hydra.sweep.dir={sweep}", f"score_cache_dir={tmp_path / 'cache'}")
    cell = wait_for(lambda: cells(sweep).get(0) if sweep.is_dir() else None, 180, "the cell's folder")
    wait_for(lambda: lines(cell / "sets.jsonl") >= 1, 180, "its first set", every=0.05)
    jid = job_id(cell)
    slurm_cluster.run("scontrol", "requeue", jid)  # what preemption does
    wait_for(lambda: slurm_cluster.job_state(jid) == "PENDING", 60, "the job back in the queue")
    finished = lines(cell / "sets.jsonl")
    assert status(sweep)[0]["state"] == "pending" and finished < LARGE
    # SLURM holds a requeued job back for about 2 minutes (its BeginTime); let it start now
    slurm_cluster.run("scontrol", "update", f"JobId={jid}", "StartTime=now")
    assert proc.wait(240) == 0, (tmp_path / "log.txt").read_text()[-3000:]
    assert job_id(cell) == jid  # the same job, started again
    assert "DUE TO JOB REQUEUE" in (sweep / ".submitit" / jid / f"{jid}_0_log.err").read_text()
    done = summary(cell)
    assert finished <= done["compute"]["sets_from_cache"] < LARGE
    assert_same_cell(cell, local["cells"][("spelling", LARGE)])
    print(f"\nrequeue: {finished} sets before, {done['compute']['sets_from_cache']} from the cache after; "
          f"{time.monotonic() - started:.0f} s")


def test_a_failed_job_is_reported_by_its_cell_and_log(slurm_cluster, tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_py("-m", GRID, *SLURM, "variant=template", "shard=3/2", f"hydra.sweep.dir={sweep}",
                  f"score_cache_dir={tmp_path / 'cache'}")
    assert proc.returncode == 2
    cell = cells(sweep)[0]
    jid = job_id(cell)
    log = sweep / ".submitit" / jid / f"{jid}_0_log.err"
    out = proc.stdout + proc.stderr
    assert f"posixlab: cell {cell.name} failed: posixlab error: shard='3/2'" in out and f"its log: {log}" in out
    report = status(sweep)[0]
    assert report["state"] == "failed" and report["log"] == log and "shard='3/2'" in report["detail"]
    from posixlab.status import status_command

    assert status_command([str(sweep)]) == 3


WRITER = r"""
import json, os, sys, time
from pathlib import Path

from posixlab.chat.cache import ResponseCache
from posixlab.chat.client import ChatAnswer
from posixlab.scoring.cache import ScoreCache

folder, tasks = Path(sys.argv[1]), int(sys.argv[2])
task = int(os.environ["SLURM_ARRAY_TASK_ID"])
(folder / "ready").mkdir(exist_ok=True)
(folder / "ready" / str(task)).touch()
deadline = time.time() + 120
while len(list((folder / "ready").iterdir())) < tasks:  # every task writes at the same time
    assert time.time() < deadline, "the other tasks did not start"
    time.sleep(0.02)
identity = {"name": "m", "weights": "w"}
scores = ScoreCache(folder / "scores", identity)
responses = ResponseCache(folder / "responses")
for batch in range(60):
    own = {((task, batch, i), (1, i)): -(task * 1000 + batch * 10 + i) / 7 for i in range(8)}
    shared = {((99, batch, i), (1, i)): -(batch * 10 + i) / 3 for i in range(3)}  # every task writes these
    gens = {(task, batch, i): ([5, i], [-0.5, -(task + batch + i) / 9]) for i in range(4)}
    scores.store(gens, {**own, **shared}, max_new_tokens=2)
    for i in range(2):
        responses.put("http://h/v1", {"task": task, "batch": batch, "i": i}, 0, ChatAnswer(f"{task}-{batch}-{i}"))
    responses.put("http://h/v1", {"shared": batch}, 0, ChatAnswer(f"shared-{batch}"))
json.dump({"task": task, "scores": str(scores.path), "responses": str(responses.path)},
          open(folder / f"done-{task}.json", "w"))
scores.close(); responses.close()
"""


def test_six_jobs_write_one_cache_folder_at_once(slurm_cluster, tmp_path):
    import sqlite3

    from posixlab.chat.cache import ResponseCache
    from posixlab.scoring.cache import ScoreCache

    tasks = 6
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    slurm_cluster.run("sbatch", f"--array=0-{tasks - 1}", "-c", "1", "--mem=300M", "-p", PARTITION,
                      "-o", str(tmp_path / "task_%a.log"),
                      f"--wrap={sys.executable} {script} {tmp_path} {tasks}")
    slurm_cluster.wait_empty(180)
    logs = "".join((tmp_path / f"task_{k}.log").read_text() for k in range(tasks))
    assert "locked" not in logs and "Error" not in logs, logs[-3000:]
    done = [json.loads((tmp_path / f"done-{k}.json").read_text()) for k in range(tasks)]
    assert len({d["scores"] for d in done}) == tasks and len({d["responses"] for d in done}) == tasks
    for d in done:  # each writer's own file holds every row it wrote: nothing lost
        with sqlite3.connect(d["scores"]) as db:
            assert db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 60 * 11
            assert db.execute("SELECT COUNT(*) FROM generations").fetchone()[0] == 60 * 4
        with sqlite3.connect(d["responses"]) as db:
            assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 60 * 3
    # read together: every record once, with its value
    cache = ScoreCache(tmp_path / "scores", {"name": "m", "weights": "w"})  # takes over a writer's slot
    assert cache.path in {Path(d["scores"]) for d in done}
    distinct = cache._db.execute("SELECT COUNT(*) FROM (SELECT key FROM main.scores UNION "
                                 "SELECT key FROM peers.scores)").fetchone()[0]
    assert distinct == tasks * 60 * 8 + 60 * 3
    for task in range(tasks):
        for batch in range(60):
            for i in range(8):
                assert cache.score((task, batch, i), (1, i)) == -(task * 1000 + batch * 10 + i) / 7
            for i in range(4):
                assert cache.generation((task, batch, i), 2) == ([5, i], [-0.5, -(task + batch + i) / 9])
    assert all(cache.score((99, b, i), (1, i)) == -(b * 10 + i) / 3 for b in range(60) for i in range(3))
    cache.close()
    responses = ResponseCache(tmp_path / "responses")
    assert len(responses) == tasks * 60 * 2 + 60
    assert responses.get("http://h/v1", {"task": 5, "batch": 59, "i": 1}, 0).text == "5-59-1"
    responses.close()
