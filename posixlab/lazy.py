"""Names a package exports but imports on first use (PEP 562), so that importing the package stays cheap: no torch
until a model or the engine is needed (a chat run needs neither torch nor transformers)."""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, where: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package``: each name of ``where`` is read from its module when first asked.

    >>> getattr_, dir_ = lazy_exports("posixlab.scoring", {"EngineOptions": "posixlab.scoring.options"})
    >>> getattr_("EngineOptions").__name__
    'EngineOptions'
    >>> getattr_("Missing")
    Traceback (most recent call last):
    ...
    AttributeError: module 'posixlab.scoring' has no attribute 'Missing'
    """

    def __getattr__(name: str):
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
