"""``posixlab status MULTIRUN_DIR``: where a sweep (``-m``) stands, read from the files in its folder while its jobs
run: each cell of the grid as ``done``, ``running``, ``failed`` or ``pending``, with its units so far (prompt sets,
or samples), POSIX so far (or S and C for ``task=classification``) and its log. Works on a shared filesystem from any
machine (a login node), for a SLURM sweep (``hydra/launcher=slurm``), submitit's local executor and a sweep of this
machine (``hydra/launcher=basic`` or ``local_parallel``). ``posixlab status RUN_DIR`` reads one run's folder
(``python run.py``, no ``-m``) as a sweep of one cell.

What it reads:

- ``multirun.yaml`` (written by Hydra when the sweep starts): the grid, so cells not started yet are listed as
  pending (by their overrides: a cell's folder name is known once it starts);
- each cell folder (``<num>_<run name>``): ``.hydra/hydra.yaml`` (written when the job starts: its number, job id
  and start), the records file (``sets.jsonl``/``samples.jsonl``: one line a finished unit), ``summary.json``
  (written when the cell is done; one older than the job's start belongs to an earlier run of the same sweep
  folder) and ``.posixlab_job.json``, which ``JobStatusCallback`` (a Hydra callback, ``conf/config.yaml``) writes
  when a job starts and ends: host, process, job id, log paths, the error of a job that failed;
- for submitit sweeps, ``.submitit/<job id>/``: the job's logs (``*_log.err`` holds posixlab's progress lines and
  errors; SLURM appends ``*** JOB ... CANCELLED ***`` when a job is cancelled, requeued, out of time or memory) and
  ``*_result.pkl`` (submitit's record of a job that ended: its traceback if it raised);
- ``squeue`` where it exists (a SLURM sweep): whether a job without a result is still queued or running.

Exit status: 0 when every cell is done, 1 while cells are pending or running, 3 when a cell failed, 2 on an error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.errors import GateFailed, PosixlabError, usage

try:  # a Hydra callback when Hydra is there (the command line); the status command itself needs only the files
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object

STATE_FILE = ".posixlab_job.json"
RUNS_DEPTH = 3  # how far below a folder status looks for sweeps and runs (outputs/<date>/<time>_<run name>)


def _task_of(folder: Path):
    """The task whose records file the folder holds (one line a finished unit), or None."""
    from posixlab.tasks import task_of_records

    return task_of_records(folder)


# SLURM's line in a job's stderr when it ends it: "slurmstepd: error: *** JOB 12 ON node CANCELLED AT ... ***"
SLURM_END = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ (CANCELLED|DUE TO TIME LIMIT|DUE TO PREEMPTION|"
                       r"DUE TO NODE FAILURE)(.*?)\*\*\*")
SCALAR = re.compile(r"null|true|false|NaN|-?Infinity|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")  # a JSON number or constant
OOM = re.compile(r"oom[-_ ]kill|out of memory|Exceeded job memory limit", re.IGNORECASE)


# --- the callback jobs run ------------------------------------------------------------------------------------------
_open_jobs: dict[str, dict] = {}  # output dir -> {"path": state file, "cell": name, "log": path} of this process's
# jobs not ended yet
_exit_code: list = []  # the code of the last sys.exit() of this process (recorded while a job runs)
_lost_jobs: dict[str, str] = {}  # a sweep's jobs that ended without a result (_jobs_fail_alone): id -> why


def _write_state(path: Path, state: dict) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _read_state(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _record_exit(original):
    def exit(code=None):  # noqa: A001 (the same call, its code kept for the job's status at exit)
        _exit_code[:] = [code]
        original(code)

    exit.posixlab_original = original
    return exit


def _exit_before_end() -> None:
    """At the exit of a job's process that did not return from its job (a posixlab error exits with status 2, a
    missed gate with 1): the cell is failed. For a submitit job, also the result submitit's watcher waits for, so
    that the sweep's command reports the cell by name with its log at once (without it, a job that exits leaves
    the watcher to ask ``sacct``, which a cluster without accounting cannot answer). Not after submitit's own exit
    for a requeue (status -1: the job runs again)."""
    code = _exit_code[0] if _exit_code else None
    for job in list(_open_jobs.values()):
        state = _read_state(job["path"]) or {}
        if state.get("state") != "running" or state.get("pid") != os.getpid():
            continue
        if code == -1:
            continue  # submitit requeued the job (preemption, time limit) and exits: it starts again
        sys.stderr.flush()
        error = job.get("error") or (_last_error_line(Path(job["log"])) if job.get("log") else None)
        error = error or (f"the job exited with status {code}" if code is not None else
                          "the job's process exited before the job ended")
        _write_state(job["path"], {**state, "state": "failed", "ended": time.time(), "error": error,
                                   "exit_status": code if code is not None else job.get("exit_status")})
        if not job["say"]:
            continue
        message = f"posixlab: cell {job['cell']} failed: {error}" + \
            (f"\nits log: {job['log']}" if job.get("log") else "")
        print(message, file=sys.stderr, flush=True)
        if job.get("log"):
            try:
                from submitit.core import utils as submitit_utils

                result = Path(job["log"]).with_name(Path(job["log"]).name.replace("_log.err", "_result.pkl"))
                if not result.exists():
                    with submitit_utils.temporary_save_path(result) as tmp:
                        submitit_utils.cloudpickle_dump(("error", message), tmp)
            except Exception:  # noqa: BLE001 (the status file says it anyway)
                pass
    _open_jobs.clear()


class JobStatusCallback(Callback):
    """Writes ``.posixlab_job.json`` into each cell folder of a sweep (and a single run's folder) when its job starts
    and ends (the jobs of a SLURM sweep run it on their node): what ``posixlab status`` reads besides the results. A
    sweep's job that fails says so by its cell's name, with its log, in the log and (submitit) to the sweep's command.
    Never fails a job."""

    def on_job_start(self, config, **kwargs) -> None:
        try:
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            sweep = HydraConfig.get().mode == RunMode.MULTIRUN  # else one run, whose folder status reads as a cell
            out = Path(str(config.hydra.runtime.output_dir))
            job_id = str(config.hydra.job.get("id"))
            state = {"state": "running", "num": int(config.hydra.job.get("num") or 0), "job_id": job_id,
                     "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
            launcher = config.hydra.get("launcher") or {}
            folder = launcher.get("submitit_folder")
            log = None
            if folder and "submitit" in str(launcher.get("_target_", "")):
                log = _submitit_log(Path(str(folder)).absolute(), job_id)
                state["log"] = str(log) if log is not None else None
            if not _open_jobs:
                import atexit

                if not hasattr(sys.exit, "posixlab_original"):
                    sys.exit = _record_exit(sys.exit)
                atexit.register(_exit_before_end)
            path = out / STATE_FILE
            # a run's own error is its last line already; a sweep's cell says which cell failed
            _open_jobs[str(out)] = {"path": path, "cell": out.name, "log": str(log) if log else None, "say": sweep}
            _exit_code.clear()
            _write_state(path, state)
        except Exception as exc:  # noqa: BLE001 (status files must never stop a job)
            print(f"posixlab: warning: could not write the job's status file ({exc})", file=sys.stderr)

    def on_job_end(self, config, job_return=None, **kwargs) -> None:
        try:
            job = _open_jobs.pop(str(config.hydra.runtime.output_dir), None)
            if job is None:
                return
            state = _read_state(job["path"]) or {}
            from hydra.core.utils import JobStatus

            failed = job_return is not None and job_return.status == JobStatus.FAILED
            if failed:
                error = job_return._return_value
                state.update(state="failed", error=f"{type(error).__name__}: {error}".splitlines()[0][:500])
            elif job.get("exit_status") is not None:  # a sweep's cell that failed and returned: the sweep goes on
                state.update(state="failed", error=job["error"], exit_status=job["exit_status"])
            else:
                state.update(state="done")
            if job.get("done_before"):  # skip_done: its summary is from an earlier job, not run again
                state["done_before"] = True
            if job["say"] and state["state"] == "failed":
                print(_failed_line(job["cell"], state), file=sys.stderr, flush=True)
            state["ended"] = time.time()
            _write_state(job["path"], state)
        except Exception as exc:  # noqa: BLE001
            print(f"posixlab: warning: could not write the job's status file ({exc})", file=sys.stderr)


    def on_multirun_start(self, config, **kwargs) -> None:
        # the cells an earlier sweep into this folder left: a cell of this sweep is one started since (a job's
        # start as its own machine wrote it: no two clocks compared)
        self.earlier = {path.parent.name: (_read_state(path) or {}).get("started")
                        for path in Path(str(config.hydra.sweep.dir)).glob(f"*/{STATE_FILE}")}
        launcher = str((config.hydra.get("launcher") or {}).get("_target_", ""))
        if "submitit" in launcher and config.get("fail_fast") is not True:
            _jobs_fail_alone()
        if "SlurmLauncher" in launcher:
            _queue_when_no_accounting()

    def on_multirun_end(self, config, **kwargs) -> None:
        """The sweep's end, in the process that launched it (its cells may have run on other machines): the cells
        that failed, each by name with its error and log, and the worst one's exit status (2: an error, 1: a missed
        gate). A cell fails alone (``cli.main``), so every cell has run by now."""
        sweep = Path(str(config.hydra.sweep.dir))
        cells, earlier = {}, getattr(self, "earlier", {})
        for path in sorted(sweep.glob(f"*/{STATE_FILE}"), key=lambda p: job_order(p.parent.name)):
            state = _read_state(path) or {}
            if path.parent.name not in earlier or state.get("started") != earlier[path.parent.name]:
                cells[path.parent.name] = _lost(path, state)
        for job_id, why in _lost_jobs.items():  # a job that ended before its cell started: named by its job
            if not any(state.get("job_id") == job_id for state in cells.values()):
                cells[f"of job {job_id}"] = {"state": "failed", "error": f"its job ended before the cell started "
                                             f"({_submitit_state(why)})", "exit_status": 2}
        _lost_jobs.clear()
        failed = {cell: state for cell, state in cells.items() if state.get("state") == "failed"}
        if not failed:
            return
        gates_only = all(state.get("exit_status") == 1 for state in failed.values())
        again = "" if gates_only else \
            "\nposixlab: the same command with skip_done=true runs again only the cells that did not finish"
        print(f"\nposixlab: the sweep ended; {len(failed)} of {len(cells)} cells failed (posixlab status {sweep}):\n"
              + "\n".join(_failed_lines(failed)) + again, file=sys.stderr, flush=True)
        raise GateFailed(1) if gates_only else SystemExit(2)


def _lost(path: Path, state: dict) -> dict:
    """A cell's state at the sweep's end: as its job left it, or, where the job ended without a result (killed),
    failed with SLURM's reason from its log (or submitit's), and so written to its status file."""
    why = _lost_jobs.get(str(state.get("job_id")))
    if why is None or state.get("state") != "running":
        return state
    ending = _slurm_ending(Path(state["log"]), state.get("started", 0.0)) if state.get("log") else None
    state = {**state, "state": "failed", "exit_status": 2, "ended": time.time(),
             "error": f"its job ended before the cell was done ({ending or _submitit_state(why)})"}
    _write_state(path, state)
    return state


def _submitit_state(why: str) -> str:
    """The job state in submitit's "has not produced any output (state: FINISHED)", or its first line."""
    match = re.search(r"\(state: ([^)]+)\)", why)
    return f"submitit: state {match.group(1)}, no result" if match else why.splitlines()[0][:300]


def _jobs_fail_alone() -> None:
    """In the process that launches a submitit sweep (SLURM's, or submitit's local executor): a job that ends
    without a result (SLURM killed it: out of memory or time, cancelled) fails its cell alone, as a cell that fails in
    posixlab does (``cli.main``). hydra-submitit-launcher waits for the jobs in order and raises at the first one
    without a result, ending the sweep's command with a traceback while the others run on; here its wait on each job
    (submitit's ``Job.results``, on jobs the launcher made) notes such a job for the sweep's end, which names its
    cell, and goes on to the next. Once a process; ``fail_fast=true`` leaves submitit's own."""
    from submitit.core import core, utils

    original = core.Job.results
    if getattr(original, "posixlab_wrapped", False):
        return

    def results(job):
        try:
            return original(job)
        except utils.UncompletedJobError as exc:  # FailedJobError is one too: a job that raised outside posixlab
            from hydra.core.utils import JobReturn, JobStatus

            _lost_jobs[str(job.job_id)] = str(exc)
            ret = JobReturn()
            ret.status, ret.return_value = JobStatus.COMPLETED, None  # its cell's failure is said at the end
            return [ret]

    results.posixlab_wrapped = True
    core.Job.results = results


def _queue_when_no_accounting() -> None:
    """In the process that launches a SLURM sweep: where ``sacct`` cannot say how a job ended (a cluster without
    accounting, or ``sacct`` failing), ``squeue``. submitit's watcher learns a job's end from ``sacct`` alone, so
    there a job SLURM killed (out of memory, cancelled: no result, no exit handler) was waited for forever. A job the
    watcher still waits for that ``sacct`` did not answer for and that ``squeue`` no longer lists has ended: its
    result is read (a job that finished writes it before it leaves the queue) or its cell fails (``_lost``). When
    ``squeue`` does not answer either, nothing changes. Added to submitit's own update, whose timing (every few
    seconds at first, then less often) it keeps; once a process."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    original = SlurmInfoWatcher.update
    if getattr(original, "posixlab_wrapped", False):
        return

    def update(watcher):
        original(watcher)
        unknown = sorted(job for job in watcher._registered - watcher._finished if not watcher._info_dict.get(job))
        queue = _squeue(unknown) if unknown else None
        for job in [] if queue is None else unknown:
            if job not in queue:
                watcher._info_dict[job] = {"JobID": job, "State": LEFT_QUEUE, "NodeList": ""}
                watcher._finished.add(job)

    update.posixlab_wrapped = True
    SlurmInfoWatcher.update = update


LEFT_QUEUE = "ENDED, gone from squeue, no sacct to say how"  # submitit's state of such a job (no parentheses)


def job_order(name: str) -> tuple:
    """A cell's place in its sweep, from its folder's name (``<job number>_<run name>``): 2 before 10.

    >>> sorted(["10_gpt2_mmlu", "2_llama2-7b_mmlu", "of job 7"], key=job_order)
    ['2_llama2-7b_mmlu', '10_gpt2_mmlu', 'of job 7']
    """
    head = name.split("_")[0]
    return (int(head), name) if head.isdigit() else (10**9, name)


def _failed_lines(failed: dict[str, dict]) -> list[str]:
    """The sweep's end's lines for its failed cells: a cell alone with its error, and the cells that failed with
    the same error (every cell of one model the hub cannot give) in one line that names them, the error said once.

    >>> _failed_lines({"0_a": {"error": "no hub"}, "1_b": {"error": "bad"}, "2_c": {"error": "no hub"}})
    ['posixlab: 2 cells failed with the same error (0_a, 2_c): no hub', 'posixlab: cell 1_b failed: bad']
    """
    groups: dict[str, list[str]] = {}
    for cell, state in failed.items():
        groups.setdefault(state.get("error") or "no error recorded", []).append(cell)
    lines = []
    for error, cells in groups.items():
        if len(cells) == 1:
            lines.append(_failed_line(cells[0], failed[cells[0]]))
            continue
        logs = [failed[cell]["log"] for cell in cells if failed[cell].get("log")]
        lines.append(f"posixlab: {len(cells)} cells failed with the same error ({', '.join(cells)}): {error}"
                     + (f"\ntheir logs: {', '.join(logs)}" if logs else ""))
    return lines


def _failed_line(cell: str, state: dict) -> str:
    return f"posixlab: cell {cell} failed: {state.get('error') or 'no error recorded'}" + \
        (f"\nits log: {state['log']}" if state.get("log") else "")


def note_done_before(output_dir) -> None:
    """A job of this process that found its run finished in its folder (``skip_done=true``) and ran nothing: its
    status file says so, so that ``posixlab status`` reads the older summary as this job's."""
    job = _open_jobs.get(str(Path(str(output_dir))))
    if job is not None:
        job["done_before"] = True


def note_error(output_dir, error: str, exit_status: int | None = None) -> None:
    """The error a job of this process ends with (``cli.main``: a posixlab error, a missed gate, an interrupt),
    which its status file records: the terminal had it, a local job's log does not. ``exit_status``: the job's,
    where its cell fails and the sweep goes on (the sweep's end reads it)."""
    job = _open_jobs.get(str(Path(str(output_dir))))
    if job is not None:
        job.update(error=error, exit_status=exit_status)


# --- reading a sweep folder -----------------------------------------------------------------------------------------
def _submitit_log(folder: Path, job_id: str) -> Path | None:
    """The stderr log of submitit job ``job_id`` (``12`` or ``12_3`` for a job array's task 3) under the launcher's
    ``submitit_folder`` (``.../.submitit/%j``)."""
    if not job_id or job_id in ("None", "???"):
        return None
    array_id, _, index = job_id.partition("_")
    text = str(folder).replace("%j", job_id).replace("%A", array_id).replace("%a", index)
    return Path(text) / f"{job_id}_0_log.err"


@dataclass
class Cell:
    num: int
    overrides: list[str]
    folder: Path | None = None
    state: str = "pending"
    detail: str = ""
    units: int | None = None
    total: int | None = None
    unit_name: str = "set"
    metrics: dict = field(default_factory=dict)  # posix, or sensitivity and consistency
    log: Path | None = None
    job_id: str | None = None
    resubmitted: bool = False  # a SLURM sweep launched again into its folder, this cell's new job not started yet
    swept: list[str] = field(default_factory=list)  # its overrides whose values differ between the grid's cells

    label: str = ""  # its name where its folder's is not enough (one of the runs below a folder: its path there)

    @property
    def name(self) -> str:
        """Its folder's name; a cell not started yet: its number and the swept values that make it this cell."""
        if self.label:
            return self.label
        return self.folder.name if self.folder is not None else f"#{self.num} " + " ".join(self.swept or
                                                                                            self.overrides)


def _load_yaml(path: Path):
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _grid(sweep: Path) -> tuple[list[list[str]] | None, dict]:
    """The overrides of every job of the sweep in launch order (None when ``multirun.yaml`` cannot be expanded),
    and the launcher's config."""
    path = sweep / "multirun.yaml"
    if not path.is_file():
        return None, {}
    from omegaconf import OmegaConf

    config = OmegaConf.load(path)
    launcher = {}
    try:
        # set, not merged: a merge would resolve the saved ${posixlab.new_sweep_folder:...} and make a new folder
        config.hydra.sweep.dir = str(sweep)
        launcher = OmegaConf.to_container(config.hydra.launcher, resolve=False) or {}
        if config.hydra.launcher.get("submitit_folder") is not None:
            launcher["submitit_folder"] = str(config.hydra.launcher.submitit_folder)
    except Exception:  # noqa: BLE001 (an unresolvable launcher folder leaves the cells' own files)
        pass
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        params = config.hydra.sweeper.get("params")  # null in a sweep of the command line's values alone
        params = (OmegaConf.to_container(params, resolve=False) if params is not None else None) or {}
        arguments = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
        batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments),
                                               config.hydra.sweeper.get("max_batch_size"))
        return [job for batch in batches for job in batch], launcher
    except Exception:  # noqa: BLE001 (another sweeper (optuna, ...): the cells with folders only)
        return None, launcher


def _records(folder: Path, keys: tuple[str, ...] = ()) -> tuple[str | None, list[dict]]:
    """The cell's records file and its complete records (a line being written is left out): each whole, or, given
    ``keys``, as those top-level scalars alone, found in its line without parsing it (a paper-sized POSIX cell's
    500 MB took about 14 s to parse; a line where a key is not a plain value is parsed)."""
    task = _task_of(folder)
    if task is None:
        return None, []
    name = task.records_file
    out = []
    try:  # a line at a time: a login node may allow a user a few GB, and the whole text split took 3.4x the file
        handle = open(folder / name, encoding="utf-8", newline="\n")
    except OSError:
        return name, []
    with handle:
        for line in handle:
            if line.endswith("\n") and line.strip():  # no newline yet: a line being written
                record = _live_record(line, keys)
                if record is not None:
                    out.append(record)
    return name, out


def _live_record(line: str, keys: tuple[str, ...]) -> dict | None:
    """A record's ``keys`` read from its line (or the whole record, parsed); None for a line that is not JSON."""
    found = {}
    for key in keys:  # str.find, then the value: a regular expression's search over a 40 KB line is slower
        at = line.find(f'"{key}": ')
        value = SCALAR.match(line, at + len(key) + 4) if at >= 0 else None
        if value is not None and line[value.end():value.end() + 1] in (",", "}"):
            found[key] = value.group(0)
    try:
        return ({k: json.loads(v) for k, v in found.items()} if keys and len(found) == len(keys)
                else json.loads(line))
    except ValueError:
        return None


def _count_records(folder: Path, name: str | None) -> int:
    """How many complete records the file holds, without parsing them (a paper-sized cell's file is 500 MB; a
    sweep's status read every cell's): its lines that end in a newline and hold more than spaces."""
    if name is None:
        return 0
    count = 0
    try:
        with open(folder / name, "rb") as file:
            for line in file:
                count += line.endswith(b"\n") and bool(line.strip())
    except OSError:
        return 0
    return count


def _expected_units(folder: Path) -> int | None:
    """How many units the cell runs, from its resolved ``config.yaml`` (None: the whole data set)."""
    try:
        config = _load_yaml(folder / "config.yaml") or {}
    except (OSError, ValueError):
        return None
    try:
        from posixlab.shards import shard_indices
        from posixlab.tasks import task_named

        n = task_named((config.get("task") or {}).get("name", "posix")).units_planned(config)
        return None if n is None else len(shard_indices(int(n), config.get("shard")))
    except Exception:  # noqa: BLE001
        return None


def _summary_metrics(summary: dict) -> dict:
    from posixlab.tasks import task_of_summary

    return task_of_summary(summary).final_metrics(summary)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _slurm_ending(log: Path | None, started: float = 0.0) -> str | None:
    """SLURM's last ``*** JOB ... CANCELLED AT <time> ... ***`` line of the log, when it is later than the job's
    start (a requeued job that started again has a later start), or an out-of-memory line."""
    if log is None or not log.is_file():
        return None
    try:
        with open(log, "rb") as f:
            f.seek(max(0, log.stat().st_size - 50000))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line for line in tail.splitlines() if line.strip()]
    for line in reversed(lines):
        match = SLURM_END.search(line)
        if match and "*** JOB" in line:
            when = re.search(r" AT (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", line)
            if when:
                at = time.mktime(time.strptime(when.group(1), "%Y-%m-%dT%H:%M:%S"))
                if at < started - 2:
                    break  # an earlier run of the job (requeued since)
            return "SLURM: " + line.split("***")[1].strip()
    if any(OOM.search(line) for line in lines[-5:]):
        return "out of memory: " + next(line for line in lines[-5:] if OOM.search(line)).strip()
    return None


def _last_error_line(log: Path | None) -> str | None:
    """The log's last ``posixlab error:`` line (alone, or in a sweep's ``cell ... failed:`` line), or the last line
    of a traceback.

    >>> import tempfile; log = Path(tempfile.mkdtemp()) / "cli.log"
    >>> _ = log.write_text("posixlab: cell 3_gpt2 failed: posixlab error: no hub\\nits log: x\\n")
    >>> _last_error_line(log)
    'posixlab error: no hub'
    """
    if log is None or not log.is_file():
        return None
    try:
        with open(log, "rb") as f:
            f.seek(max(0, log.stat().st_size - 50000))
            lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("posixlab error:"):
            return line
        said = re.match(r"posixlab: cell \S+ failed: (posixlab error: .*)", line)  # a sweep's cell says it so
        if said:
            return said.group(1)
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]+(Error|Exception|Exit)\b", line):
            return line
    return None


def _submitit_result(log: Path | None) -> tuple[str, str] | None:
    """submitit's record of the job's end: ``("success", "")`` or ``("error", last traceback line)``."""
    if log is None:
        return None
    path = log.with_name(log.name.replace("_log.err", "_result.pkl"))
    if not path.is_file():
        return None
    try:
        import pickle

        with open(path, "rb") as f:
            kind, value = pickle.load(f)
    except Exception:  # noqa: BLE001 (a result of another Python or being written)
        return None
    if kind == "success":
        return "success", ""
    lines = [line for line in str(value).splitlines() if line.strip()]
    return kind, (lines[-1].strip() if lines else "")


def _squeue(job_ids: list[str]) -> dict[str, str] | None:
    """SLURM's state of the jobs still in its queue (``{"12_3": "RUNNING", ...}``); None where there is no
    ``squeue`` or it does not answer."""
    if not job_ids or shutil.which("squeue") is None:
        return None
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        proc = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(arrays)], capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        # a job id SLURM has forgotten makes squeue fail: ask for the whole queue of this user instead
        try:
            proc = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "--me"], capture_output=True, text=True,
                                  timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
    out = {}
    for line in proc.stdout.splitlines():
        job, _, state = line.strip().partition("|")
        if job:
            out[job] = state
    return out


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError):
        return True
    return True


def _array_of(job_id: str) -> int:
    try:
        return int(str(job_id).split("_")[0])
    except ValueError:
        return -1


def _submitted(launcher: dict) -> dict[int, str]:
    """For a submitit sweep: the job id of each array position submitted (the newest array when the sweep folder
    was launched more than once), from the job folders submitit writes at submission."""
    folder = launcher.get("submitit_folder")
    if not folder or "%j" not in folder:
        return {}
    root = Path(folder.split("%j")[0])
    found: dict[int, tuple[int, str]] = {}
    if not root.is_dir():
        return {}
    for entry in root.iterdir():
        match = re.fullmatch(r"(\d+)_(\d+)", entry.name)
        if match and entry.is_dir():
            array, index = int(match.group(1)), int(match.group(2))
            if index not in found or found[index][0] < array:
                found[index] = (array, entry.name)
    return {index: name for index, (_, name) in found.items()}


def sweep_status(sweep: str | Path) -> tuple[list[Cell], str]:
    """Every cell of the sweep in ``sweep`` with its state; and the launcher's kind (``slurm``, ``submitit-local``
    or ``local``)."""
    sweep = Path(sweep)
    jobs, launcher = _grid(sweep)
    target = str(launcher.get("_target_", ""))
    kind = "slurm" if "SlurmLauncher" in target else "submitit-local" if "submitit" in target else "local"
    cells: dict[int, Cell] = {}
    values: dict[str, set[str]] = {}
    for overrides in jobs or []:
        for override in overrides:
            values.setdefault(override.partition("=")[0], set()).add(override)
    for num, overrides in enumerate(jobs or []):
        cells[num] = Cell(num, list(overrides), swept=[o for o in overrides if len(values[o.partition("=")[0]]) > 1])
    extra = 10**6
    for hydra_file in sorted(sweep.glob("*/.hydra/hydra.yaml")):
        folder = hydra_file.parent.parent
        try:
            job = (_load_yaml(hydra_file) or {}).get("hydra", {}).get("job", {})
            num = int(job.get("num"))
        except (OSError, ValueError, TypeError, AttributeError):
            num, job = extra, {}
            extra += 1
        cell = cells.setdefault(num, Cell(num, []))
        if cell.folder is not None and _mtime(cell.folder / ".hydra" / "hydra.yaml") > _mtime(hydra_file):
            continue  # two folders claim one job number: the newer one is the cell
        cell.folder, cell.job_id = folder, (str(job.get("id")) if job.get("id") not in (None, "???") else None)
    submitted = _submitted(launcher) if kind != "local" else {}
    for cell in cells.values():
        newest = submitted.get(cell.num)
        if newest is not None and (cell.job_id is None or _array_of(newest) > _array_of(cell.job_id)):
            cell.resubmitted = cell.folder is not None  # the sweep launched again: its folder is an earlier job's
            cell.job_id = newest
        if kind != "local" and cell.job_id and launcher.get("submitit_folder"):
            cell.log = _submitit_log(Path(launcher["submitit_folder"]), cell.job_id)
    queue = _squeue([c.job_id for c in cells.values() if c.job_id]) if kind == "slurm" else None
    for cell in cells.values():
        _classify(cell, kind, queue)
    return [cells[k] for k in sorted(cells)], kind


def cells_without_results(sweep: Path, shown: set[Path]) -> list[str]:
    """The cells of the sweep in ``sweep`` (none where it is not one) whose folder is not among ``shown`` (resolved
    paths: the runs a page or a table holds), each as ``posixlab status`` says it: one that failed before its first
    unit, one still running or pending, so that a grid with a hole says why."""
    if not (sweep / "multirun.yaml").is_file():
        return []
    return [f"{cell.name}: {cell.state}" + (f" ({cell.detail})" if cell.detail else "")
            for cell in sweep_status(sweep)[0] if cell.folder is None or cell.folder.resolve() not in shown]


def folders_without_results(folder: Path, shown: set[Path]) -> list[str]:
    """Below a folder of sweeps and runs (``outputs/``, ``multirun/``; ``runs_below``), what has no results among
    ``shown`` (resolved paths): each sweep's cells as ``cells_without_results`` says them, and each single run's
    folder (one that failed before its first unit, a dry run, one still running), named by its path there. Nothing
    for a run's or a sweep's own folder (``cells_without_results`` is the sweep's)."""
    if not folder.is_dir() or (folder / "multirun.yaml").is_file() or _is_run_folder(folder):
        return []
    sweeps, runs = runs_below(folder)
    out = [f"{sweep.relative_to(folder).as_posix()}/{cell}" for sweep in sweeps
           for cell in cells_without_results(sweep, shown)]
    cells, _ = runs_status(folder, [run for run in runs if run.resolve() not in shown])
    return out + [f"{cell.name}: {cell.state}" + (f" ({cell.detail})" if cell.detail else "") for cell in cells]


def run_status(folder: str | Path) -> tuple[list[Cell], str]:
    """The folder of one run (``python run.py``, no ``-m``) as a sweep of one cell: done, running or failed, its units
    so far and what they give (the same files a sweep's cell leaves); its kind is ``run``."""
    cell = Cell(0, [], folder=Path(folder))
    _classify(cell, "local", None)
    return [cell], "run"


def runs_below(folder: Path, depth: int = RUNS_DEPTH) -> tuple[list[Path], list[Path]]:
    """(the sweep folders, the folders of single runs) below ``folder``, down to ``depth`` levels (``outputs/``: its
    runs are ``<date>/<time>_<run name>``), in path order; a sweep's or a run's folder is not looked into."""
    sweeps, runs, level = [], [], [folder]
    for _ in range(depth):
        below = []
        for parent in level:
            for child in sorted(p for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")):
                if (child / "multirun.yaml").is_file():
                    sweeps.append(child)
                elif _is_run_folder(child):
                    runs.append(child)
                else:
                    below.append(child)
        level = below
    return sweeps, runs


def runs_status(folder: Path, runs: list[Path]) -> tuple[list[Cell], str]:
    """Single runs below ``folder`` (``runs_below``) as the cells of one table, each named by its path there; its
    kind is ``runs``."""
    cells = []
    for num, run in enumerate(runs):
        cell = Cell(num, [], folder=run, label=run.relative_to(folder).as_posix())
        _classify(cell, "local", None)
        cells.append(cell)
    return cells, "runs"


def _is_run_folder(folder: Path) -> bool:
    """A run's folder: started by Hydra, or holding results (a merged run, one saved from Python)."""
    return any((folder / name).is_file() for name in (".hydra/hydra.yaml", STATE_FILE, "summary.json")) or \
        _task_of(folder) is not None


def _classify(cell: Cell, kind: str, queue: dict[str, str] | None) -> None:
    queued = queue.get(cell.job_id) if queue is not None and cell.job_id else None
    if cell.folder is None:  # not started
        cell.state = "pending"
        if queued:
            cell.detail = f"SLURM: {queued.lower()}"
        elif queue is not None and cell.job_id and cell.log is not None and cell.log.is_file():
            cell.state, cell.detail = "failed", _slurm_ending(cell.log) or "ended before its cell started"
        return
    if cell.resubmitted and queued:  # launched again; the new job has not started its cell yet
        cell.state = "pending" if queued in ("PENDING", "REQUEUED", "CONFIGURING") else "running"
        cell.detail = f"launched again, SLURM: {queued.lower()}"
        task = _task_of(cell.folder)
        cell.unit_name = task.unit_name if task is not None else "set"
        cell.units = _count_records(cell.folder, task.records_file if task is not None else None)
        cell.total = _expected_units(cell.folder)
        return
    folder = cell.folder
    started = _mtime(folder / ".hydra" / "hydra.yaml") or 0
    task = _task_of(folder)
    cell.unit_name = task.unit_name if task is not None else "set"
    cell.total = _expected_units(folder)
    state = _read_state(folder / STATE_FILE)
    if state is not None and state.get("started", 0) < started - 5:
        state = None  # an earlier run's
    if state is not None and state.get("log") and cell.log is None:
        cell.log = Path(state["log"])
    if cell.log is None:
        logs = sorted(folder.glob("*.log"))
        cell.log = logs[0] if logs else None
    if _classify_finished(cell, task, state, started):
        return
    _, records = _records(folder, task.live_keys if task is not None else ())  # a cell still going: so far
    cell.units = len(records)
    cell.metrics = task.live_metrics(records) if records and task is not None else {}
    if state is not None and state.get("state") == "failed":
        cell.state = "failed"
        cell.detail = _last_error_line(cell.log) or state.get("error", "")
        return
    if state is not None and state.get("state") == "done":
        try:
            dry = bool((_load_yaml(folder / "config.yaml") or {}).get("dry_run"))
        except (OSError, ValueError):
            dry = False
        cell.state, cell.detail = "done", ("a dry run (dry_run=true): it planned, nothing was computed" if dry
                                           else "ended without a summary")
        return
    if kind != "local" and _classify_by_scheduler(cell, queued, queue, started):
        return
    if state is not None and state.get("host") == socket.gethostname() and not _pid_alive(state.get("pid")):
        cell.state, cell.detail = "failed", "its process ended before the cell was done"
        return
    cell.state = "running"


def _classify_finished(cell: Cell, task, state: dict | None, started: float) -> bool:
    """A cell whose folder holds this job's summary (written since the job started, or the one an earlier job wrote
    that ``skip_done`` kept): done, with what its job did after the run. True when it is."""
    folder = cell.folder
    summary_time = _mtime(folder / "summary.json")
    done_before = state is not None and state.get("done_before") and state.get("state") in ("done", "failed")
    if summary_time is None or (summary_time < started and not done_before):
        return False
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        cell.state, cell.metrics = "done", _summary_metrics(summary)
        from posixlab.tasks import task_of_summary

        # a finished cell's records are not read: the summary has their number (a count of lines if not)
        cell.units = task_of_summary(summary).num_units(summary) or _count_records(
            folder, task.records_file if task is not None else None)
    except (OSError, ValueError, KeyError, TypeError, PosixlabError):
        return False
    # done is all there was: no config.yaml (a run saved from Python), or a data set of fewer items than num_sets
    cell.total = cell.units
    if state is not None and state.get("state") == "failed" and state.get("error"):
        # the run finished, its job did not: its judge failed, or (exit status 1) a gate was missed
        cell.detail = f"the run finished; then {state['error']}" if state.get("exit_status") == 1 else \
            f"the run finished; then its job stopped: {state['error']}"
    elif done_before:
        cell.detail = "finished by an earlier job; not run again (skip_done=true)"
    return True


def _classify_by_scheduler(cell: Cell, queued: str | None, queue: dict[str, str] | None, started: float) -> bool:
    """A started cell of a submitit job, from what the job left and what SLURM says (``queued``: its state in the
    queue, if listed; ``queue``: None where SLURM did not answer). True when that settles the cell's state."""
    result = _submitit_result(cell.log)
    if result is not None and _mtime(cell.log.with_name(cell.log.name.replace("_log.err", "_result.pkl"))) \
            >= started:
        if result[0] != "success":
            cell.state, cell.detail = "failed", _last_error_line(cell.log) or result[1]
            return True
    ending = _slurm_ending(cell.log, started)
    if queued in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING") or \
            (queued is None and ending and ("REQUEUE" in ending or "PREEMPTION" in ending) and queue is None):
        cell.state, cell.detail = "pending", f"SLURM: {(queued or ending).lower()}"
        return True
    if queued:
        cell.state, cell.detail = "running", f"SLURM: {queued.lower()}"
        return True
    if ending:
        cell.state, cell.detail = "failed", ending
        return True
    if queue is not None:  # SLURM answered and the job is not in its queue: it ended without a result
        cell.state = "failed"
        cell.detail = _last_error_line(cell.log) or "the job ended without finishing its cell"
        return True
    return False


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _where(path: Path | None) -> str:
    if path is None:
        return "-"
    path = Path(os.path.abspath(path))
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def format_status(sweep: Path, cells: list[Cell], kind: str) -> str:
    counts = {s: sum(c.state == s for c in cells) for s in ("done", "running", "failed", "pending")}
    launcher = {"slurm": "SLURM jobs", "submitit-local": "submitit local jobs", "local": "jobs of this machine",
                "run": "one run, not a sweep", "runs": "single runs, not a sweep"}[kind]
    lines = [f"{sweep}: {len(cells)} cell{'s' if len(cells) != 1 else ''} ({launcher}): " +
             ", ".join(f"{n} {s}" for s, n in counts.items())]
    rows = []
    for c in cells:
        units = "-" if c.folder is None else f"{c.units}/{c.total if c.total is not None else '?'} {c.unit_name}s"
        rows.append((c, units, " ".join(f"{k} {_fmt(v)}" for k, v in c.metrics.items()) or "-"))
    width = max([len(c.name) for c in cells] + [4])
    units_width = max([len(u) for _, u, _ in rows] + [5])
    metrics_width = max([len(m) for _, _, m in rows] + [6])
    lines.append(f"  {'cell':<{width}}  {'state':<8} {'units':>{units_width}}  {'so far':<{metrics_width}}  log")
    for c, units, metrics in rows:
        lines.append(f"  {c.name:<{width}}  {c.state:<8} {units:>{units_width}}  {metrics:<{metrics_width}}  "
                     f"{_where(c.log)}")
        if c.detail:
            lines.append(f"  {'':<{width}}  └ {c.detail}")
    return "\n".join(lines)


def status_command(args: list[str]) -> int:
    """``posixlab status MULTIRUN_DIR [MULTIRUN_DIR ...] [--json]``: the cells of each sweep folder (a run's folder:
    the run; a folder that holds sweeps or runs, as ``multirun/`` and ``outputs/`` do: each sweep, and its single runs
    in one table) as done, running, failed or pending. Exit status: 0 every cell done; 1 some still pending or
    running; 3 a cell failed; 2 an error."""
    as_json = "--json" in args
    folders = [a for a in args if a != "--json"]
    if not folders or any(a in ("-h", "--help") for a in folders):
        return usage("usage: posixlab status MULTIRUN_DIR [MULTIRUN_DIR ...] [--json]\n\nLists the cells of a "
                     "sweep (python run.py -m ...; local or SLURM) as done, running, failed or pending, with POSIX (or "
                     "S and C) so far and each job's log, read from the sweep folder while its jobs run (a run's "
                     "folder, RUN_DIR: the run as one cell; a folder of sweeps or runs, as outputs/: each sweep, and "
                     "its single runs in one table).\nExit status: 0 every cell done, 1 cells pending or "
                     "running, 3 a cell failed, 2 an error.", asked=bool(folders))
    sweeps = []  # (folder, how its cells are read)
    for folder in map(Path, folders):
        if not folder.is_dir():
            print(f"posixlab error: {folder} is not a folder", file=sys.stderr)
            return 2
        if (folder / "multirun.yaml").is_file():
            sweeps.append((folder, sweep_status))
        elif _is_run_folder(folder):
            sweeps.append((folder, run_status))
        else:  # a folder of sweeps or runs (multirun/, outputs/): each sweep, and its single runs in one table
            inner, runs = runs_below(folder)
            if not inner and not runs:
                print(f"posixlab error: {folder} is neither a sweep folder (no multirun.yaml) nor a run's (no "
                      f".hydra/hydra.yaml, summary.json or records), and holds neither {RUNS_DEPTH} levels down; give "
                      f"the folder of a sweep (python run.py -m ...: hydra.sweep.dir) or of a run (hydra.run.dir)",
                      file=sys.stderr)
                return 2
            sweeps.extend((p, sweep_status) for p in inner)
            if runs:
                sweeps.append((folder, lambda where, runs=runs: runs_status(where, runs)))
    worst, report = 0, []
    for sweep, read in sweeps:
        cells, kind = read(sweep)
        if as_json:
            report.append({"sweep": str(sweep), "launcher": kind, "cells": [
                {"num": c.num, "name": c.name, "folder": str(c.folder) if c.folder else None, "state": c.state,
                 "detail": c.detail or None, "units": c.units if c.folder else None, "total": c.total,
                 "unit": c.unit_name, **c.metrics, "log": str(c.log) if c.log else None, "job_id": c.job_id,
                 "overrides": c.overrides} for c in cells]})
        else:
            print(format_status(sweep, cells, kind))
        states = {c.state for c in cells}
        worst = max(worst, 3 if "failed" in states else 1 if states & {"running", "pending"} else 0)
    if as_json:
        print(json.dumps(report if len(report) > 1 else report[0], indent=1))
    return worst


if __name__ == "__main__":
    sys.exit(status_command(sys.argv[1:]))
