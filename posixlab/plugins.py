"""Plug-ins: a backend or a task from outside the package, found by name from the command line as from Python.

A plug-in is one module that registers what it brings when imported (``posixlab.backends.register``,
``posixlab.tasks.register_task``; ``tests/plugin_backend.py`` and ``tests/plugin_task.py`` are both). From Python,
``import my_backend`` is enough. From the command line (``posixlab model.backend=rule``, ``posixlab task=agreement``,
``posixlab merge``/``gate``/``report`` on such a run's folder, a SLURM job) nothing imports it, so the first time a
backend or task name is not known, the plug-ins are imported and the name asked again:

- ``POSIXLAB_PLUGINS=my_backend,my_pkg.my_task``: modules by name, comma-separated; the working folder is searched
  first (a module file beside your experiment), then the installed packages;
- entry points of the group ``posixlab.plugins`` (a package's ``[project.entry-points."posixlab.plugins"]``,
  ``rule = "my_pkg.rule_backend"``): every installed package that declares one, as inspect_ai finds model providers.

They are imported once a process, and only on such a miss: a run of built-in names never pays for the look-up. A
module that does not import is one ``ConfigError`` naming it and why. What was loaded goes into the run's summary
(``plugins``), so a result names the code outside posixlab it depends on.
"""

from __future__ import annotations

import importlib
import os
import sys
from importlib.metadata import entry_points

from posixlab.errors import ConfigError

GROUP = "posixlab.plugins"
ENV = "POSIXLAB_PLUGINS"
HOW = (f"a backend or task from a plug-in: name its module in {ENV}=MODULE[,MODULE...] (a MODULE.py in this folder "
       f"or an installed module), or install a package that declares it under the entry point group {GROUP}")
LOADED: list[dict] | None = None  # the plug-ins this process imported, once it has looked


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
