"""The CUDA allocator setting the CLI asks for (``posixlab/models/allocator.py``): set only where the user has not
configured the allocator, and kept from the model servers this process starts."""

from __future__ import annotations

import os

import pytest

from posixlab.models import allocator
from posixlab.models.allocator import CUDA_ALLOCATOR, prefer_expandable_segments, server_environment


@pytest.fixture
def clean(monkeypatch):
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(allocator, "_set_here", False)
    return monkeypatch


def test_expandable_segments_are_asked_for_where_the_allocator_is_not_configured_and_kept_from_servers(clean):
    assert prefer_expandable_segments() is True
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == CUDA_ALLOCATOR
    assert "PYTORCH_CUDA_ALLOC_CONF" not in server_environment()  # a vLLM server runs its own allocator
    assert server_environment()["PATH"] == os.environ["PATH"]  # and everything else passes
    assert prefer_expandable_segments() is False  # set already: once is enough


@pytest.mark.parametrize("name, value", [("PYTORCH_CUDA_ALLOC_CONF", ""), ("PYTORCH_CUDA_ALLOC_CONF", CUDA_ALLOCATOR),
                                         ("PYTORCH_ALLOC_CONF", "backend:native")])
def test_the_users_own_allocator_setting_wins_and_reaches_servers(clean, name, value):
    clean.setenv(name, value)
    assert prefer_expandable_segments() is False
    assert os.environ[name] == value and server_environment()[name] == value
    if name == "PYTORCH_ALLOC_CONF":
        assert "PYTORCH_CUDA_ALLOC_CONF" not in os.environ
