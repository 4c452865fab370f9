"""A real single-node SLURM cluster for the tests (``slurm_cluster`` fixture, registered by conftest.py): Debian's
``slurm-wlm`` (22.05) and munge, started as root once per test session and stopped at its end.

Everything lives in a temporary folder: a munge key and socket, ``slurm.conf`` (loopback, this host's name, free
ports, one partition ``ci``, cgroup-free plugins: ``proctrack/linuxproc``, ``task/none``, no accounting), the
controller's state and the node's spool and logs. Nothing in /etc or /run is touched, no system service is used, and
only the daemons started here are stopped (by the process ids in their pid files). Clients (``sbatch``, ``squeue``,
submitit, ``posixlab status``) find the cluster through ``SLURM_CONF``, set for the session.

The node declares 8 CPUs whatever the machine has (``SlurmdParameters=config_overrides``), so that four or more
1-CPU jobs run at once on a 2-core machine; ``KillWait=0``: a cancelled job (submitit ignores SIGTERM) is killed
about 2 s after it is signalled (srun waits KillWait + 2 s), as a cluster's KillWait (often 30 s) would, only sooner.

Where ``slurm-wlm`` is not installed, or the tests do not run as root, the tests that use the cluster are skipped
with the reason (``-ra`` lists it); .ci/run installs the packages before the tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "squeue", "scancel", "scontrol")
INSTALL = "apt-get install -y slurm-wlm munge (as .ci/run does)"
PARTITION = "ci"


def _which(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    host: str
    partition: str = PARTITION
    start_seconds: float = 0.0  # from the first daemon's start to the node idle in sinfo
    env: dict = field(default_factory=dict)  # the environment clients need (SLURM_CONF)

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env})
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}\n"
                                 f"{self.logs()}")
        return proc

    def queue(self) -> dict[str, str]:
        """Every job (array tasks one by one) in the queue: id -> state."""
        out = self.run("squeue", "-h", "-r", "-o", "%i|%T").stdout
        return dict(line.split("|", 1) for line in out.split() if "|" in line)

    def wait_empty(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.queue():
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs still queued after {timeout} s: {self.queue()}\n{self.logs()}")
            time.sleep(0.5)

    def job_state(self, job_id: str) -> str | None:
        return self.queue().get(job_id)

    def logs(self, lines: int = 15) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(out)


def _conf(root: Path, host: str, munge_socket: Path) -> str:
    return f"""# a one-node cluster for posixlab's tests (tests/slurm_fixtures.py)
ClusterName=posixlabci
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=0
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 RealMemory=16000 State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _stop(pid_file: Path, grace: float = 10) -> None:
    """Stop the daemon whose id is in ``pid_file`` (one this fixture started), politely, then not."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    missing = [name for name in DAEMONS + CLIENTS if _which(name) is None]
    if missing:
        pytest.skip(f"slurm-wlm is not installed here (no {', '.join(missing)}): the SLURM tests need a real "
                    f"scheduler; install it with {INSTALL}")
    if os.geteuid() != 0:
        pytest.skip("the SLURM test cluster runs munged, slurmctld and slurmd as root (SlurmUser=root); run the "
                    "tests as root, as CI does")
    root = tmp_path_factory.mktemp("slurm")
    root.chmod(0o711)  # munged wants its socket's folder closed to writers other than root
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = root / "munge.sock"
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, host, munge_socket), encoding="utf-8")
    cluster = SlurmCluster(root=root, conf=conf, host=host, env={"SLURM_CONF": str(conf)})
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)  # for submitit's sbatch in the run.py subprocesses and posixlab status
    started = time.monotonic()
    try:
        subprocess.run([_which("munged"), "--force", f"--key-file={key}", f"--socket={munge_socket}",
                        f"--pid-file={root / 'munged.pid'}", f"--log-file={root / 'log' / 'munged.log'}",
                        f"--seed-file={root / 'munged.seed'}"], check=True, capture_output=True, timeout=30)
        subprocess.run([_which("slurmctld"), "-i", "-f", str(conf)], check=True, capture_output=True, timeout=30,
                       env={**os.environ})
        subprocess.run([_which("slurmd"), "-f", str(conf), "-N", host], check=True, capture_output=True, timeout=30,
                       env={**os.environ})
        deadline = time.monotonic() + 60
        while True:
            state = subprocess.run(["sinfo", "-h", "-n", host, "-o", "%T"], capture_output=True, text=True,
                                   timeout=30).stdout.strip()
            if state == "idle":
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the SLURM node is {state or 'not answering'} after 60 s\n{cluster.logs()}")
            time.sleep(0.2)
        cluster.start_seconds = time.monotonic() - started
        (root / "start_seconds").write_text(f"{cluster.start_seconds:.2f}\n")
        yield cluster
    finally:
        if _which("scancel"):  # this cluster's jobs only (SLURM_CONF), then its daemons
            subprocess.run(["scancel", "--full", "--partition", PARTITION], capture_output=True, timeout=30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                queue = subprocess.run(["squeue", "-h"], capture_output=True, text=True, timeout=30)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            _stop(root / f"{name}.pid")
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
