"""Tasks: what a run measures. Each is one module with a config dataclass and a ``Task`` subclass; the one run
skeleton (``posixlab/runner.py``) runs any of them.

- ``posix``: POSIX of prompt sets (Chatterjee et al., 2024);
- ``classification``: sensitivity and consistency of a classifier under rephrased instructions (Errica et al., 2025).
"""

from __future__ import annotations

from posixlab.tasks.base import Request, Task
from posixlab.tasks.classification import ClassificationConfig, ClassificationTask
from posixlab.tasks.posix import PosixConfig, PosixTask

# config type -> task type: a third task adds its line here
TASKS = {PosixConfig: PosixTask, ClassificationConfig: ClassificationTask}


def make_task(cfg, given=None) -> Task:
    """The task that runs ``cfg``; ``given``: the user's own POSIX prompt sets."""
    task_type = TASKS.get(type(cfg))
    if task_type is None:
        raise TypeError(f"no task runs a {type(cfg).__name__}; give one of {', '.join(t.__name__ for t in TASKS)}")
    return task_type(cfg, given=given) if task_type is PosixTask else task_type(cfg)


__all__ = ["ClassificationConfig", "ClassificationTask", "PosixConfig", "PosixTask", "Request", "TASKS", "Task",
           "make_task"]
