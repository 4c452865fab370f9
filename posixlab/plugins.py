"""Plug-ins: a backend, a task or a variant type from outside the package, found by name from the command line as
from Python.

A plug-in is one module that registers what it brings when imported (``posixlab.backends.register``,
``posixlab.tasks.register_task``, ``posixlab.variants.register_variant``; ``tests/plugin_backend.py``,
``tests/plugin_task.py`` and ``tests/plugin_variant.py`` are such modules). From Python, ``import my_backend`` is
enough. From the command line (``posixlab model.backend=rule``, ``posixlab task=agreement``, ``posixlab
variant=casing``, ``posixlab merge``/``gate``/``report`` on such a run's folder, a SLURM job) nothing imports it, so
the first time a backend, task or variant type's name is not known, the plug-ins are imported and the name asked
again:

- ``POSIXLAB_PLUGINS=my_backend,my_pkg.my_task``: modules by name, comma-separated; the working folder is searched
  first (a module file beside your experiment), then the installed packages;
- entry points of the group ``posixlab.plugins`` (a package's ``[project.entry-points."posixlab.plugins"]``,
  ``rule = "my_pkg.rule_backend"``): every installed package that declares one, as inspect_ai finds model providers.

They are imported once a process, and only on such a miss: a run of built-in names never pays for the look-up. A
module that does not import is one ``ConfigError`` naming it and why. What was loaded goes into the run's summary
(``plugins``) and, from the command line, into ``plugins.json`` beside its ``config.yaml`` when it starts, so a
result names the code outside posixlab it depends on.

A command that reads run folders (``posixlab report``/``gate``/``status``/``merge``/``compare``/``dove``/``judge``)
first imports the plug-ins those runs were made with (``load_recorded_plugins``), so that a plug-in run's folder reads
in a shell, a login node or a CI job that has not set ``POSIXLAB_PLUGINS``. Only module names are imported, from the
working folder or the installed packages as ``POSIXLAB_PLUGINS`` would: the file path a folder records is shown,
never run. A recorded module that does not import is no error until a name it would bring is asked for; the message
then says which module, from where, and why.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

from posixlab.errors import ConfigError

GROUP = "posixlab.plugins"
ENV = "POSIXLAB_PLUGINS"
RECORD_FILE = "plugins.json"  # a run folder's plug-ins, written when it starts (the summary's ``plugins`` at its end)
HOW = (f"one from a plug-in (a backend, task or variant type): name its module in {ENV}=MODULE[,MODULE...] (a "
       f"MODULE.py in this folder or an installed module), or install a package that declares it under the entry point "
       f"group {GROUP}")
LOADED: list[dict] | None = None  # the plug-ins this process imported, once it has looked
NOT_IMPORTED: dict[str, str] = {}  # module -> where a run folder named it and why it did not import here


def load_plugins() -> list[dict]:
    """Import every plug-in (``POSIXLAB_PLUGINS``, then the ``posixlab.plugins`` entry points) once a process; what
    was imported: ``[{"module", "from", "file"}]``."""
    global LOADED
    if LOADED is not None:
        return LOADED
    wanted = [(name.strip(), ENV) for name in os.environ.get(ENV, "").split(",") if name.strip()]
    for point in entry_points(group=GROUP):
        source = f"entry point {point.name}" + (f" of {point.dist.name} {point.dist.version}" if point.dist else "")
        wanted.append((point.value.split(":")[0], source))
    loaded = []
    if wanted and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module file beside the experiment, as `python -m` would find it
    for module_name, source in wanted:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any failure of a user's module: one message that names it
            raise ConfigError(f"plug-in {module_name!r} (from {source}) could not be imported: "
                              f"{type(exc).__name__}: {exc}") from None
        loaded.append({"module": module_name, "from": source, "file": getattr(module, "__file__", None)})
    LOADED = loaded
    return loaded


def loaded_plugins() -> list[dict]:
    """The plug-ins this process imported through ``load_plugins`` (none if it never had to look)."""
    return list(LOADED or [])


def record_plugins(folder: str | Path) -> None:
    """Write the plug-ins this process imported to ``folder/plugins.json`` (nothing when there are none)."""
    if loaded_plugins():
        (Path(folder) / RECORD_FILE).write_text(json.dumps(loaded_plugins(), indent=1) + "\n", encoding="utf-8")


def recorded_plugins(folder: str | Path) -> list[dict]:
    """The plug-ins a run folder was made with: its summary's ``plugins``, else its ``plugins.json`` (a run still
    going, or killed); none where it records none or cannot be read."""
    for name, key in (("summary.json", "plugins"), (RECORD_FILE, None)):
        try:
            data = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        entries = data if key is None else data.get(key) if isinstance(data, dict) else None
        if isinstance(entries, list):
            return [e for e in entries if isinstance(e, dict) and isinstance(e.get("module"), str)]
    return []


def load_recorded_plugins(folders) -> list[str]:
    """Import the plug-ins that the run folders ``folders`` (and a sweep folder's runs, one level down) were made
    with, by module name; returns the modules imported now. One that does not import is remembered
    (``not_imported_note``), not raised: a run of a built-in task made with a plug-in backend reads without it."""
    imported = []
    for folder in map(Path, folders):
        runs = [folder, *sorted(p for p in folder.iterdir() if p.is_dir())] if folder.is_dir() else []
        for run in runs:
            for entry in recorded_plugins(run):
                module_name = entry["module"]
                if module_name in sys.modules or module_name in NOT_IMPORTED:
                    continue
                if os.getcwd() not in sys.path:
                    sys.path.insert(0, os.getcwd())
                try:
                    importlib.import_module(module_name)
                except Exception as exc:  # noqa: BLE001 - said when a name it would bring is asked for
                    NOT_IMPORTED[module_name] = (f"{run} was made with the plug-in {module_name!r} (from "
                                                 f"{entry.get('from')}, file {entry.get('file')}), which does not "
                                                 f"import here: {type(exc).__name__}: {exc}")
                    continue
                imported.append(module_name)
                print(f"posixlab: imported the plug-in {module_name}, which {run} was made with", file=sys.stderr)
    return imported


def not_imported_note() -> str:
    """What an unknown name's message adds when a run folder's plug-ins did not import here ("" when none)."""
    if not NOT_IMPORTED:
        return ""
    return ("; " + "; ".join(NOT_IMPORTED.values()) + " (put the module in this folder, install its package, or "
            f"name it in {ENV})")
