"""Reaching the Hugging Face Hub: fail in seconds, with a message, when it cannot be reached."""

from __future__ import annotations

import os


def hub_offline_flag() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def hub_unreachable_reason(repo_id: str, repo_type: str = "dataset", revision: str | None = None) -> str | None:
    """None when the hub answers for ``repo_id``; otherwise a one-line reason."""
    from huggingface_hub import HfApi

    try:  # HF_ENDPOINT is read here, not at import time, so a mirror (or a test's dead port) set later applies
        HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).repo_info(repo_id, repo_type=repo_type, revision=revision, timeout=10)
    except Exception as exc:  # noqa: BLE001 - connection, gating and not-found errors all mean "cannot fetch"
        return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
    return None
