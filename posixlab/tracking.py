"""Weights & Biases for the posixlab command (``posixlab/cli.py``): one W&B run per Hydra job, grouped by sweep;
offline by default (``logger.mode``, which the environment's ``WANDB_MODE`` sets where the command line does not).

The results folder stays the source of truth: W&B gets a copy of what the job wrote (the resolved config, the
per-set table, the summary, the figures, and the folder itself as an artifact). The library never imports W&B;
only this module does.

Offline runs are written under the job's results folder (``<job>/wandb/offline-run-*``) and upload later with
``wandb sync <that folder>``. Online mode reads the API key from the environment (``WANDB_API_KEY`` or a prior
``wandb login``); no key is ever put into the config, and nothing that holds one is logged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from posixlab.errors import ConfigError

WANDB_MODES = ("offline", "online", "disabled")  # wandb.init's modes, as logger.mode takes them
LEGACY_MODES = {"dryrun": "offline", "run": "online"}  # W&B's older names, still read from WANDB_MODE by W&B


def wandb_mode(value: str) -> str:
    """``logger.mode`` as ``wandb.init`` takes it: W&B's older names read as theirs now; anything else is an error
    that says where the value may have come from (the environment's ``WANDB_MODE``, where the command line gives none).

    >>> wandb_mode("offline"), wandb_mode("dryrun"), wandb_mode("run")
    ('offline', 'offline', 'online')
    """
    mode = LEGACY_MODES.get(value, value)
    if mode not in WANDB_MODES:
        raise ConfigError(f"logger.mode must be one of {', '.join(WANDB_MODES)}, got {value!r} (where logger.mode is "
                          f"not given, the environment's WANDB_MODE sets it: WANDB_MODE="
                          f"{os.environ.get('WANDB_MODE', '')!r} here)")
    return mode


class Tracker:
    """A W&B run for one job, or nothing (``backend: none`` or ``mode: disabled``). Use as a context manager: the
    run is finished with exit code 1 if the job raises, 0 otherwise, so a failed job still leaves a closed run."""

    def __init__(self, settings: dict, config: dict, output_dir: str, name: str, group: str | None,
                 job_type: str = "posix"):  # the task's name
        self.run = None
        self.where: str | None = None  # where the run went, once it is finished (``_where``)
        self.job_type = job_type
        backend = settings.get("backend", "wandb")
        if backend == "none":
            return
        if backend != "wandb":
            raise ConfigError(f"unknown logger backend {backend!r}; choose wandb or none (logger=none)")
        mode = wandb_mode(settings.get("mode", "offline"))
        if mode == "disabled":
            return
        # W&B's own console lines (its Weave advertisement when openai is imported, sync hints) would bury the run's;
        # set by default only, so that a user's own WANDB_SILENT=false or WANDB_DISABLE_WEAVE=false still wins
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
        import wandb

        self.wandb = wandb
        self.output_dir = Path(output_dir)
        self.log_artifact = bool(settings.get("log_artifact", True))
        timeout = settings.get("init_timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigError(f"logger.init_timeout takes seconds (a number above 0) or null, got {timeout!r}")
        if mode == "online":  # W&B waits for its server silently (90 s by default): say what the wait is
            server = os.environ.get("WANDB_BASE_URL") or "W&B's server"
            wait = "W&B's own limit, 90 s" if timeout is None else f"{timeout} s"
            print(f"posixlab: W&B: connecting to {server} (online mode; at most {wait}: logger.init_timeout)",
                  file=sys.stderr)
        try:
            self.run = self._init(wandb, settings, config, name, group, mode)
        except Exception as exc:  # noqa: BLE001 - a login or network problem: say what to do, compute nothing yet
            cause = "Online mode needs WANDB_API_KEY in the environment (or wandb login)" \
                if mode == "online" and not os.environ.get("WANDB_API_KEY") else \
                "Its server could not be reached or refused the key" if mode == "online" else "It failed here"
            raise ConfigError(f"Weights & Biases could not start in {mode} mode ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}). {cause}; logger.mode=offline needs "
                              f"no account or network (the run goes to its folder; `wandb sync` uploads it later); "
                              f"logger=none turns W&B off") from None

    def _init(self, wandb, settings: dict, config: dict, name: str, group: str | None, mode: str):
        return wandb.init(
            project=settings.get("project", "posixlab"),
            entity=settings.get("entity"),
            group=settings.get("group") or group,
            job_type=settings.get("job_type") or self.job_type,
            name=name,
            tags=list(settings.get("tags") or []),
            config=config,
            dir=str(self.output_dir),
            mode=mode,
            reinit="finish_previous",
            settings=wandb.Settings(save_code=False, console="off", silent=True,
                                    **({} if settings.get("init_timeout") is None
                                       else {"init_timeout": float(settings["init_timeout"])})),  # checked above
        )

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.run is not None:
            self.where = self._where()  # read before the run is finished, as W&B lets a live run be read
            self.run.finish(exit_code=0 if exc_type is None else 1)
        return False

    def _where(self) -> str:
        """Where the run went, as a job's last lines say it (W&B itself is kept quiet): its page online; offline,
        its folder and the command that uploads it."""
        if self.run.settings.mode == "offline":
            folder = Path(self.run.dir).parent  # .../wandb/offline-run-<time>-<id>/files
            return f"W&B: offline run {folder} (`wandb sync` of that folder uploads it)"
        return f"W&B: {self.run.url}"

    def log_run(self, tracked, figures: dict[str, Path], prefix: str = "", folder: bool = True) -> None:
        """A finished run, as its task describes it (``Task.tracked``: summary numbers, a table with a row per unit,
        the folder's artifact type), with its figures; ``prefix`` before each number's and the table's name, and
        ``folder=False`` to log no artifact (a judge's numbers in its run's W&B run: ``judge/judged_share``)."""
        if self.run is None:
            return
        wandb = self.wandb
        self.run.summary.update({f"{prefix}{k}": v for k, v in tracked.scalars.items()})
        logged = {f"figures/{k}": wandb.Image(str(v)) for k, v in figures.items()}
        if tracked.table_name:
            logged[prefix + tracked.table_name] = wandb.Table(columns=list(tracked.columns),
                                                              data=[list(r) for r in tracked.rows])
        if logged:
            self.run.log(logged)
        if folder:
            self._log_folder(tracked.artifact_type, tracked.artifact_metadata)

    def _log_folder(self, kind: str, metadata: dict) -> None:
        if not self.log_artifact:
            return
        artifact = self.wandb.Artifact(_artifact_name(self.run.name or "results"), type=kind, metadata=metadata)
        for path in sorted(self.output_dir.rglob("*")):
            # the wandb folder is W&B's own bookkeeping (and would contain this artifact); .hydra is logged as
            # config already, but it is small and shows the overrides, so it goes in
            if path.is_file() and "wandb" not in path.relative_to(self.output_dir).parts:
                # immutable: W&B reads the file where it is when it uploads (the results folder is never changed
                # after this), instead of copying it into ~/.local/share/wandb first, where an offline run's copies
                # stayed: a paper-sized grid's records are gigabytes
                artifact.add_file(str(path), name=str(path.relative_to(self.output_dir)), policy="immutable")
        self.run.log_artifact(artifact)


def _artifact_name(name: str) -> str:
    # artifact names allow letters, digits, dashes, underscores and dots
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def offline_run_dirs(output_dir: str | os.PathLike) -> list[Path]:
    """The offline W&B runs written under a job's results folder (for ``wandb sync``)."""
    return sorted((Path(output_dir) / "wandb").glob("offline-run-*"))


def read_offline_run(run_dir: str | os.PathLike) -> list:
    """The records of an offline W&B run (``run-*.wandb``), as ``wandb_internal_pb2.Record`` messages: a way to see
    exactly what ``wandb sync`` would upload (the tests use it to check what a job logged).

    The file is W&B's transaction log: a 7-byte header (":W&B", magic 0xBEE1, version 0), then 32 KiB blocks of
    chunks, each with a 7-byte header (CRC-32C, little-endian length, type: 1 full, 2 first, 3 middle, 4 last).
    """
    from wandb.proto import wandb_internal_pb2

    (path,) = Path(run_dir).glob("run-*.wandb")
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file")
    records, pending, block = [], b"", 32 * 1024
    offset = 7
    while offset + 7 <= len(data):
        room = block - offset % block
        if room < 7:  # a block's tail too short for a header is padding
            offset += room
            continue
        length = int.from_bytes(data[offset + 4:offset + 6], "little")
        kind = data[offset + 6]
        if kind == 0 and length == 0:
            offset += room
            continue
        chunk = data[offset + 7:offset + 7 + length]
        offset += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records
