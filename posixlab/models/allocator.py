"""torch's CUDA allocator as the engine wants it: expandable segments, unless the user chose otherwise.

The engine's passes change shape with every wave (rows, widths and tries follow the prompts), so the default
allocator's fixed segments fragment. Measured on an H100 at 7B (``figures/gpu_check/README.md``, section 7): with the
default allocator a run at the default memory budget ran out of memory with 27.7 GiB reserved but unallocated, and
a 3-shot run freed its cache and retried, 12% slower than with expandable segments. Less fragmentation also keeps
what the card reserves close to what the engine's memory budget counts. Setting it must come before the first CUDA
allocation: the CLI and ``gpu_check`` call :func:`prefer_expandable_segments` first thing. On a CPU it changes
nothing. Only os is imported here, so that calling it costs nothing.
"""

from __future__ import annotations

import os

CUDA_ALLOCATOR = "expandable_segments:True"
_SETTINGS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
_set_here = False  # whether this process set it (and so keeps it from the servers it starts)


def prefer_expandable_segments() -> bool:
    """Ask torch's CUDA allocator for expandable segments unless the allocator is configured already (either
    variable set, even empty: the user's choice). Returns whether it set it."""
    global _set_here
    if any(name in os.environ for name in _SETTINGS):
        return False
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = CUDA_ALLOCATOR
    _set_here = True
    return True


def server_environment() -> dict[str, str]:
    """The environment for a model server this process starts: this one's, less the allocator setting if this
    process made it (a server runs its own allocator, as its documentation says; a user's own setting passes)."""
    env = dict(os.environ)
    if _set_here and env.get("PYTORCH_CUDA_ALLOC_CONF") == CUDA_ALLOCATOR:
        del env["PYTORCH_CUDA_ALLOC_CONF"]
    return env
