"""What a model's (or an adapter's) files say when they cannot be had: the hub's refusals and cut-off downloads as one
message each, with what to do; and a local folder's cheap fingerprint. Shared by ``loading.py`` and ``adapters.py``."""

from __future__ import annotations

import re
from pathlib import Path

from posixlab.hub import describe_hub_error, http_status, hub_endpoint
from posixlab.models.assets import PACKAGED_MODELS


LOCAL_COPY = "model=<folder>"  # how a run takes a copy of a hub model's files (an adapter's, a GGUF file's: others)


def hub_hint(copy: str = LOCAL_COPY) -> str:
    """What to do when the hub cannot be reached; ``copy``: the setting that takes a local copy instead.

    >>> "or give a local copy (model.adapter=<folder>)." in hub_hint("model.adapter=<folder>")
    True
    >>> "or give a local copy (model=<folder>)." in hub_hint()
    True
    """
    return (f"Run on a machine that reaches {hub_endpoint()} (gated models also need HF_TOKEN and an accepted "
            f"licence), or download the model into the Hugging Face cache, or give a local copy ({copy}). Offline, "
            "use a packaged model: " + ", ".join(f"model={m}" for m in PACKAGED_MODELS))


def hub_refusal(spec, exc: BaseException, path_key: str = "model.path", revision_key: str = "model.revision",
                copy: str = LOCAL_COPY) -> str:
    """What to do about the hub's refusal to serve the model's files, in one message that names the hub asked and the
    settings to check (``path_key``, ``revision_key``, ``copy``: an adapter's are others)."""
    from huggingface_hub import get_token
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    where = hub_endpoint()
    head = f"model {spec.name} ({spec.path}) cannot be fetched from the Hugging Face Hub at {where}"
    if isinstance(exc, GatedRepoError):  # before RepositoryNotFoundError, its base class
        # transformers' own message sends the user to huggingface.co whatever HF_ENDPOINT says; this one names the
        # hub asked, the licence page on it and the variable to set
        sent = ("it refused the token sent (HF_TOKEN, or the saved login)" if get_token() else
                "no token was sent (HF_TOKEN is not set)")
        return (f"{head}: it is a gated model and {sent}. Accept its licence at {where}/{spec.path} while logged in, "
                f"then set HF_TOKEN to an access token of that account and run again.")
    if isinstance(exc, RevisionNotFoundError):
        return f"{head}: it has no revision {spec.revision!r}. Set {revision_key} to a branch, tag or commit of it."
    status, said = http_status(exc)
    if isinstance(exc, RepositoryNotFoundError):
        return (f"{head}: it has no repository {spec.path} (HTTP {status}). Check {path_key}; a private repository "
                f"also needs HF_TOKEN.")
    if isinstance(exc, EntryNotFoundError):
        return f"{head}: it has no config.json, so it is not a model transformers can load."
    if status is not None and status >= 500:  # reached, but failing: the hint about reaching it would mislead
        return (f"{head}: it answered HTTP {status}" + (f" ({said})" if said else "") + ". The hub is failing, not "
                f"this setup: run again later, or use a local copy ({copy}).")
    return f"{head} ({describe_hub_error(exc)}). {hub_hint(copy)}"


def said_of(message: str, who: str, model_key: str, revision_key: str | None = None) -> str:
    """A message about a model's files, written for the run's model (``model.path``, ``model.revision``,
    ``model=...``), said of another model and its setting: a rephraser's (``rephraser.model``), a judge's
    (``judge.model``, or ``posixlab judge``'s ``--judge``); ``who`` names it.

    >>> said_of("model m (o/m) cannot be fetched. Check model.path; set model.revision; a copy (model=<folder>).",
    ...         "the rephraser's", "rephraser.model", "rephraser.revision")
    "the rephraser's model m (o/m) cannot be fetched. Check rephraser.model; set rephraser.revision; a copy \
(rephraser.model=<folder>)."
    >>> said_of("Offline, use a packaged model: model=a, model=b", "the judge's", "--judge")
    'Offline, use a packaged model: --judge a, --judge b'
    """
    assign = f"{model_key} " if model_key.startswith("--") else f"{model_key}="
    text = re.sub(r"(?<![\w.-])model\.path\b", model_key, message)
    text = re.sub(r"(?<![\w.-])model\.revision\b", revision_key or model_key, text)
    text = re.sub(r"(?<![\w.-])model=", assign, text)
    return f"{who} {text}" if text.startswith("model ") else text


def hub_cause(exc: BaseException) -> BaseException | None:
    """The hub client's or HTTP library's error behind ``exc`` (transformers wraps them in OSErrors), if any."""
    seen = 0
    while exc is not None and seen < 20:
        if type(exc).__module__.split(".")[0] in ("huggingface_hub", "httpx", "httpx2", "httpcore", "requests"):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def is_download_error(exc: BaseException) -> bool:
    # transformers reports a file it could not fetch as an OSError (the hub's error chained, or not: a 500 on a
    # weights file, retried and given up, reads "does not appear to have a file named ..."); an error of the HTTP
    # library itself can also come through unwrapped
    return isinstance(exc, OSError) or hub_cause(exc) is not None


def download_failed(spec, exc: BaseException) -> str:
    """A download that the hub had agreed to (``check_hub_model``) and that failed part way: a dropped connection, a
    500 on one file. What finished is kept in the cache and the next run finishes the rest (``_complete_snapshot``)."""
    cause = hub_cause(exc) or exc
    return (f"model {spec.name} ({spec.path}) could not be downloaded from the Hugging Face Hub at {hub_endpoint()} "
            f"({describe_hub_error(cause)}). The files that arrived are kept in the Hugging Face cache and the next "
            f"run fetches the rest: run again when the hub answers.")


def folder_signature(folder: str) -> str:
    """A cheap fingerprint of a local model folder (names, sizes, modification times), so cached scores of one copy of
    a model are not served for a changed one. Hashing the weights would be exact but takes minutes for a 7B model."""
    import hashlib

    entries = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(folder).iterdir() if p.is_file())
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:16]
