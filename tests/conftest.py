"""Shared fixtures. One packaged model (SmolLM2) is loaded once per test session and shared by every test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def lm():
    from posixlab.models import ModelSpec, load_model

    return load_model(ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def pytest_collection_modifyitems(config, items):
    # Guard: the project's tests never read the ../shared folder that sits beside the developers' checkout.
    for item in items:
        assert "shared" not in Path(str(item.fspath)).relative_to(ROOT).parts[:1]
