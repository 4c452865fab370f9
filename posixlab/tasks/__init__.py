"""Tasks: what a run measures. Each is one module with a config dataclass and a ``Task`` subclass that registers
itself here; the one run skeleton (``posixlab/runner.py``), ``posixlab merge``, the gate and the command line serve
any registered task.

- ``posix``: POSIX of prompt sets (Chatterjee et al., 2024);
- ``classification``: sensitivity and consistency of a classifier under rephrased instructions (Errica et al., 2025).
"""

from __future__ import annotations

from posixlab.errors import ConfigError, nearest
from posixlab.tasks.base import Request, Task

TASK_TYPES: dict[str, type[Task]] = {}  # task name -> task type


def register_task(task_type: type[Task]) -> type[Task]:
    """Make a task known to ``make_task``, ``posixlab merge``, the gate and the command line (usable as a class
    decorator)."""
    TASK_TYPES[task_type.name] = task_type
    return task_type


def task_named(name: str) -> type[Task]:
    """The task type registered as ``name`` (a run's ``task.name``, a summary's ``task``)."""
    if name not in TASK_TYPES:  # a plug-in's, not imported yet
        from posixlab.plugins import HOW, load_plugins, not_imported_note

        load_plugins()
        if name not in TASK_TYPES:
            raise ConfigError(f"unknown task {name!r}{nearest(name, TASK_TYPES)}; the tasks are "
                              f"{', '.join(TASK_TYPES)}, or {HOW}{not_imported_note()}")
    return TASK_TYPES[name]


def task_of_summary(summary: dict) -> type[Task]:
    """The task type of a saved run (summaries written before ``task`` existed are POSIX's)."""
    return task_named(summary.get("task", "posix"))


def task_of_records(folder) -> type[Task] | None:
    """The task whose records file (one line a finished unit) the folder holds, or None."""
    from pathlib import Path

    from posixlab.plugins import load_plugins

    def holding() -> type[Task] | None:
        return next((t for t in TASK_TYPES.values() if (Path(folder) / t.records_file).is_file()), None)

    task = holding()
    if task is None:  # a plug-in's task, its module not imported yet (they are looked for once a process)
        load_plugins()
        task = holding()
    return task


def make_task(cfg, given=None) -> Task:
    """The task that runs ``cfg`` (a task's config dataclass); ``given``: the user's own POSIX prompt sets."""
    for task_type in TASK_TYPES.values():
        if isinstance(cfg, task_type.config_type):
            return task_type(cfg) if given is None else task_type(cfg, given=given)
    raise TypeError(f"no task runs a {type(cfg).__name__}; give one of "
                    f"{', '.join(t.config_type.__name__ for t in TASK_TYPES.values())}")


from posixlab.tasks.classification import ClassificationConfig, ClassificationTask  # noqa: E402
from posixlab.tasks.posix import PosixConfig, PosixTask  # noqa: E402

register_task(PosixTask)
register_task(ClassificationTask)
TASKS = {t.config_type: t for t in TASK_TYPES.values()}  # config type -> task type (the older spelling)

__all__ = ["ClassificationConfig", "ClassificationTask", "PosixConfig", "PosixTask", "Request", "TASKS", "TASK_TYPES",
           "Task", "make_task", "register_task", "task_named", "task_of_summary"]
