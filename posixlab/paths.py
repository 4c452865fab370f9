"""Where posixlab keeps what it downloads and computes: one cache folder for models, paraphrases and scores."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$POSIXLAB_CACHE`` if set, else ``~/.cache/posixlab``: converted models, paraphrase files, score caches."""
    return Path(os.environ.get("POSIXLAB_CACHE", Path.home() / ".cache" / "posixlab"))


def shown(path: str | Path) -> str:
    """A path for a message: a relative one also as it resolved, since it is read from the folder the command ran in.

    >>> shown("/data/x.jsonl")
    '/data/x.jsonl'
    >>> shown("../x.jsonl") == f"../x.jsonl (from {Path.cwd()}: {Path.cwd().parent / 'x.jsonl'})"
    True
    """
    path = Path(path)
    return str(path) if path.is_absolute() else f"{path} (from {Path.cwd()}: {os.path.abspath(path)})"


def check_folder_to_write(folder: str | Path, what: str) -> None:
    """A ``ConfigError``, before any work, where ``folder`` (to be made or written into) or a folder above it is a
    file: ``what`` could not go there, and the OS would say only "File exists" or "Not a directory".

    >>> import tempfile; f = Path(tempfile.mkdtemp()) / "a_file"; _ = f.write_text("")
    >>> check_folder_to_write(f / "figures", "the tables")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: ... is a file, not a folder: the tables cannot go in .../a_file/figures; name a folder
    """
    from posixlab.errors import ConfigError

    folder = Path(folder)
    blocking = next((p for p in (folder, *folder.parents) if p.is_file()), None)
    if blocking is not None:
        raise ConfigError(f"{blocking} is a file, not a folder: {what} cannot go in {folder}; name a folder")


def file_to_write(out: str | Path, name: str) -> Path:
    """``out`` as the file to write: a folder given (one that exists, or a path ending in /) holds ``name``.

    >>> file_to_write("pages/", "report.html"), file_to_write("page.html", "report.html")
    (PosixPath('pages/report.html'), PosixPath('page.html'))
    """
    return Path(out) / name if Path(out).is_dir() or str(out).endswith(("/", os.sep)) else Path(out)


def sweep_path(experiment_name: str | None, date: str, time: str) -> str:
    """Where a sweep writes (conf/config.yaml's ``hydra.sweep.dir``, then claimed by ``claim_new_folder``):
    ``multirun/<date>/<time>``, or for an experiment file's sweep ``multirun/<experiment_name>/<date>_<time>``. One
    definition that the experiment files steer with ``experiment_name``: an experiment that set ``hydra.sweep.dir``
    itself had the base value resolved as the configs merged (OmegaConf dereferences a value it merges over), which
    claimed, and so made, an empty ``multirun/<date>/<time>`` beside every such run or sweep.

    >>> sweep_path(None, "2026-12-07", "20-16-08"), sweep_path("offline_table1", "2026-12-07", "20-16-08")
    ('multirun/2026-12-07/20-16-08', 'multirun/offline_table1/2026-12-07_20-16-08')
    """
    return f"multirun/{date}/{time}" if experiment_name is None else f"multirun/{experiment_name}/{date}_{time}"


_CLAIMED: dict[str, str] = {}  # folder asked for -> folder this process made (one answer however often asked)


def claim_new_folder(path: str) -> str:
    """A folder no other run writes: ``path`` created here, or, where another process made it first (two runs of one
    name started in the same second: they wrote one folder and mixed their results), ``path_2``, ``path_3``, ... The
    creation is atomic (``mkdir``), and one process gets one answer for one ``path``, however often it is asked
    (conf/config.yaml's ``hydra.run.dir``, ``${posixlab.new_folder:...}``; a sweep's ``hydra.sweep.dir``,
    ``${posixlab.new_sweep_folder:...}``: two sweeps started in one second wrote one folder, one ``multirun.yaml`` and
    one grid, and a cell of the second with the first's number and name ran into the first's cell).

    >>> import tempfile; root = tempfile.mkdtemp()
    >>> first = claim_new_folder(f"{root}/run"); first == f"{root}/run", claim_new_folder(f"{root}/run") == first
    (True, True)
    >>> _ = _CLAIMED.pop(f"{root}/run")  # another process asking: the folder exists, it gets the next
    >>> claim_new_folder(f"{root}/run") == f"{root}/run_2"
    True
    >>> import shutil; shutil.rmtree(root)
    """
    if path in _CLAIMED:
        return _CLAIMED[path]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        candidate = path if n == 1 else f"{path}_{n}"
        try:
            os.mkdir(candidate)
        except FileExistsError:
            continue
        _CLAIMED[path] = candidate
        return candidate
    raise FileExistsError(f"{path}: a thousand runs of this name started in this second")
