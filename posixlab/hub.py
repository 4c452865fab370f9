"""Reaching the Hugging Face Hub: fail in seconds, with a message, when it cannot be reached."""

from __future__ import annotations

import os

# huggingface_hub.constants.ENV_VARS_TRUE_VALUES: the only values its boolean variables count as true (any case)
TRUE_VALUES = {"1", "ON", "YES", "TRUE"}


def hub_offline_flag(environ=None) -> bool:
    """Offline as huggingface_hub reads it (``constants.HF_HUB_OFFLINE``): HF_HUB_OFFLINE, else TRANSFORMERS_OFFLINE,
    is one of 1, on, yes, true in any case. Anything else ("0", "no", "false", "") is online, as the clients take it:
    reading "no" as offline would refuse a download the clients would make. ``environ``: os.environ by default.

    >>> hub_offline_flag({"HF_HUB_OFFLINE": "no"}), hub_offline_flag({"HF_HUB_OFFLINE": "Yes"})
    (False, True)
    >>> hub_offline_flag({"TRANSFORMERS_OFFLINE": "1"}), hub_offline_flag({"HF_HUB_OFFLINE": "2"})
    (True, False)
    """
    environ = os.environ if environ is None else environ
    value = environ.get("HF_HUB_OFFLINE") or environ.get("TRANSFORMERS_OFFLINE")
    return value is not None and value.upper() in TRUE_VALUES  # no strip: huggingface_hub does not strip


def hub_endpoint() -> str:
    """The hub the clients talk to: HF_ENDPOINT (a mirror, or a test's server), else huggingface.co. Messages name it,
    so that a user of a mirror is not sent to huggingface.co."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def describe_hub_error(exc: BaseException) -> str:
    """One line for a hub client's error: its type and its message's lines joined (the status and the URL are on
    different lines of huggingface_hub's messages), without the status code's documentation link it appends.

    >>> describe_hub_error(OSError("Server error '500' for url 'http://h/f'\\nFor more information check: https://x"))
    "OSError: Server error '500' for url 'http://h/f'"
    """
    text = " ".join(str(exc).split()).split(" For more information check:")[0]
    return f"{type(exc).__name__}: {text[:240]}"


def http_status(exc: BaseException) -> tuple[int | None, str | None]:
    """The HTTP status of a hub client's error and the hub's own message (its ``X-Error-Message``), when it has them."""
    response = getattr(exc, "response", None)
    if response is None:
        return None, None
    return getattr(response, "status_code", None), response.headers.get("X-Error-Message")


def hub_unreachable_reason(repo_id: str, repo_type: str = "dataset", revision: str | None = None) -> str | None:
    """None when the hub answers for ``repo_id``; otherwise a one-line reason."""
    from huggingface_hub import HfApi

    try:  # HF_ENDPOINT is read here, not at import time, so a mirror (or a test's dead port) set later applies
        HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).repo_info(repo_id, repo_type=repo_type, revision=revision, timeout=10)
    except Exception as exc:  # noqa: BLE001 - connection, gating and not-found errors all mean "cannot fetch"
        return describe_hub_error(exc)
    return None


def hub_file_error(repo_id: str, filename: str, repo_type: str = "model", revision: str | None = None):
    """The error the hub gives for a download of ``filename``, or None when it would serve it. It asks as a download
    does (a HEAD of the file, with the token from HF_TOKEN or the saved login), so a gated repository refuses here
    when its files would be refused: its repo info is public and says nothing about access."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(repo_id, filename, repo_type=repo_type, revision=revision, endpoint=hub_endpoint())
    try:
        # HF_HUB_ETAG_TIMEOUT (10 s) as for a download's own HEAD; no retries (huggingface_hub's default here), so
        # a 500 or a dead hub is reported at once
        get_hf_file_metadata(url)
    except Exception as exc:  # noqa: BLE001 - the caller turns each kind into its message
        return exc
    return None
