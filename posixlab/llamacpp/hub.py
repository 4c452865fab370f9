"""GGUF files from the Hugging Face Hub: ``model.source=hub model.path=OWNER/REPO[:TAG | /FILE.gguf]``.

A GGUF repository holds one file per quantization (``llama-2-7b.Q4_K_M.gguf``, ``llama-2-7b.Q8_0.gguf``, ...), so
the path says which: ``OWNER/REPO/FILE.gguf`` by its name in the repository, ``OWNER/REPO:Q4_K_M`` the one .gguf file
whose name holds the tag (in any case, as llama.cpp's ``-hf OWNER/REPO:TAG`` reads it), ``OWNER/REPO`` the
repository's only one. The file is downloaded once into the Hugging Face cache (huggingface_hub's own download, its
progress bar, HF_TOKEN for a gated repository, ``model.revision`` to pin a commit) and later runs read it from there
without asking the network, as a cached ``transformers`` model is read. A file split in parts
(``...-00001-of-00003.gguf``, ``posixlab/llamacpp/parts.py``) is one file here: a tag or any part's name picks it, and
every part is downloaded into the same snapshot folder (several at a time), where llama.cpp finds them from the
first.
"""

from __future__ import annotations

import dataclasses
import glob
import re
import sys
from pathlib import Path

from posixlab.errors import ConfigError, ModelUnavailableError
from posixlab.hub import hub_endpoint, hub_file_error, hub_offline_flag
from posixlab.llamacpp.parts import all_parts, file_stem, first_part, missing_parts, whole_files
from posixlab.models.fetch_errors import download_failed, hub_hint, hub_refusal

FORMS = "OWNER/REPO:TAG (e.g. :Q4_K_M), OWNER/REPO/FILE.gguf or OWNER/REPO"
GGUF_COPY = "model=<file.gguf>"  # a local copy of a hub GGUF file
# (path, revision) -> the file the hub said it would serve, in this process: a run's checks before any work (twice:
# before W&B starts, and in the runner) and its download ask the hub once
SERVABLE: dict[tuple[str, str | None], str] = {}
PARALLEL_PARTS = 4  # a split file's parts downloaded at a time


def gguf_label(path: str) -> str:
    """The name a GGUF model goes by in results when none is given: a packaged model's own, a file's stem, a hub
    path's repository and tag.

    >>> gguf_label("TheBloke/Llama-2-7B-GGUF:Q4_K_M"), gguf_label("~/models/llama-2-7b.Q4_K_M.gguf")
    ('Llama-2-7B-GGUF-Q4_K_M', 'llama-2-7b.Q4_K_M')
    >>> gguf_label("qwen2.5-coder-1.5b-instruct"), gguf_label("me/gguf-models")
    ('qwen2.5-coder-1.5b-instruct', 'gguf-models')
    >>> gguf_label("me/Llama-70B-GGUF/Q8_0/llama-70b.Q8_0-00001-of-00002.gguf")  # a file split in parts
    'llama-70b.Q8_0'
    """
    repo, _, tag = str(path).partition(":")
    if tag:
        return f"{repo.rstrip('/').split('/')[-1]}-{tag}"
    return file_stem(str(path)) if str(path).endswith(".gguf") else Path(path).name


def looks_like_hub_gguf(path: str) -> bool:
    """Whether ``path`` names a GGUF repository's file on the hub (``OWNER/REPO``, ``OWNER/REPO:TAG``,
    ``OWNER/REPO/FILE.gguf``) rather than a file or folder here: nothing of that name exists here, and it is not a
    ``FOLDER/FILE.gguf`` (a local file, missing).

    >>> looks_like_hub_gguf("TheBloke/Llama-2-7B-GGUF:Q4_K_M"), looks_like_hub_gguf("models/llama.gguf")
    (True, False)
    """
    path = str(path)
    if Path(path).expanduser().exists() or (path.count("/") == 1 and path.endswith(".gguf")):
        return False
    return re.fullmatch(r"[^/.:~][^/:]*/[^/:]+(:[^/:]+|(/[^/:]+)+\.gguf)?", path) is not None


def parse_hub_path(path: str) -> tuple[str, str | None, str | None]:
    """(repository id, file in it or None, tag or None) of a hub GGUF path; a path of no such form is a ConfigError.

    >>> parse_hub_path("TheBloke/Llama-2-7B-GGUF:q4_k_m")
    ('TheBloke/Llama-2-7B-GGUF', None, 'q4_k_m')
    >>> parse_hub_path("TheBloke/Llama-2-7B-GGUF/llama-2-7b.Q4_K_M.gguf")
    ('TheBloke/Llama-2-7B-GGUF', 'llama-2-7b.Q4_K_M.gguf', None)
    >>> parse_hub_path("me/gguf-models")
    ('me/gguf-models', None, None)
    """
    repo, _, tag = str(path or "").partition(":")
    parts = repo.split("/")
    file = "/".join(parts[2:]) or None
    if len(parts) < 2 or not all(parts) or (file and not file.endswith(".gguf")) or (file and tag) or ":" in tag:
        raise ConfigError(f"model.path={path!r} is not a GGUF file on the Hugging Face Hub; give {FORMS}")
    return "/".join(parts[:2]), file, tag or None


def pick_file(files: list[str], path: str) -> str:
    """The repository's file that ``path`` names, among ``files`` (the repository's): a file split in parts by its
    first part, once every part is there; a clear error when there is none or more than one.

    >>> pick_file(["README.md", "m.Q4_K_M.gguf", "m.Q8_0.gguf"], "o/m:q8_0")
    'm.Q8_0.gguf'
    >>> pick_file(["m.Q8_0-00002-of-00002.gguf", "m.Q8_0-00001-of-00002.gguf", "m.Q4_0.gguf"], "o/m:Q8_0")
    'm.Q8_0-00001-of-00002.gguf'
    >>> pick_file(["m.Q4_K_M.gguf", "m.Q4_K_S.gguf"], "o/m:Q4_K")
    Traceback (most recent call last):
    ...
    posixlab.errors.ModelUnavailableError: o/m holds 2 .gguf files whose names hold 'Q4_K': m.Q4_K_M.gguf, \
m.Q4_K_S.gguf. Name one: model.path=o/m/FILE.gguf
    """
    repo, file, tag = parse_hub_path(path)
    ggufs = whole_files(files)
    if file is not None:
        found = [first_part(file)] if file in files else []
    else:
        found = [f for f in ggufs if tag is None or tag.lower() in Path(f).name.lower()]
    which = f" named {file}" if file else (f" whose names hold {tag!r}" if tag else "")
    if not ggufs:
        raise ModelUnavailableError(f"{repo} holds no .gguf file: give a repository of GGUF files ({FORMS}), or run "
                                    f"this model with model.backend=transformers")
    if not found:
        listed = ", ".join(ggufs[:12]) + (", ..." if len(ggufs) > 12 else "")
        raise ModelUnavailableError(f"{repo} holds no .gguf file{which}. Its .gguf files: {listed}")
    if len(found) > 1:
        raise ModelUnavailableError(f"{repo} holds {len(found)} .gguf files{which}: {', '.join(found)}. Name one: "
                                    f"model.path={repo}/FILE.gguf")
    missing = missing_parts(found[0], files)
    if missing:
        raise ModelUnavailableError(f"{repo} holds {found[0]}, the first of {len(all_parts(found[0]))} parts of a "
                                    f"GGUF file, but not {', '.join(missing)}: llama.cpp needs every part. Pick "
                                    f"another file, or another revision (model.revision)")
    return found[0]


def _cached(spec) -> Path | None:
    """The spec's file in the local Hugging Face cache, found without the network, or None."""
    from huggingface_hub import snapshot_download, try_to_load_from_cache

    repo, file, _ = parse_hub_path(spec.path)
    if file is not None:  # every part of it, if it is one of a file split in parts
        found = [try_to_load_from_cache(repo, part, revision=spec.revision) for part in all_parts(first_part(file))]
        return Path(found[0]) if all(isinstance(part, str) for part in found) else None
    try:
        folder = Path(snapshot_download(repo, revision=spec.revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure here only means "not cached"
        return None
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*.gguf")]
    try:
        return folder / pick_file(files, spec.path)
    except ModelUnavailableError:  # not the one file asked for (yet): the hub decides
        return None


def check_hub_gguf(spec) -> str | None:
    """Before any other work: the spec's file in the local cache (no network), or its name in the repository once
    the hub has said it will serve it to this user; else a ``ModelUnavailableError`` that says what to do."""
    if (spec.path, spec.revision) in SERVABLE:  # asked already (a run checks before W&B starts, and again)
        return SERVABLE[(spec.path, spec.revision)]
    if _cached(spec) is not None:
        return None
    if hub_offline_flag():
        raise ModelUnavailableError(f"model {spec.name} ({spec.path}) is not in the local cache and HF_HUB_OFFLINE "
                                    f"is set. {hub_hint(GGUF_COPY)}")
    from huggingface_hub import HfApi

    repo, _, _ = parse_hub_path(spec.path)
    asked = dataclasses.replace(spec, path=repo)  # messages name the repository
    try:
        # the repository's info, whose siblings are its files: one request (list_repo_files pages through the tree
        # with huggingface_hub's backoff, five retries over 23 s when the hub does not answer)
        info = HfApi(endpoint=hub_endpoint()).model_info(repo, revision=spec.revision)
        files = [sibling.rfilename for sibling in info.siblings or []]
    except Exception as exc:  # noqa: BLE001 - a refusal, a failing hub or no hub: each its own message
        raise ModelUnavailableError(hub_refusal(asked, exc, copy=GGUF_COPY)) from None
    file = pick_file(files, spec.path)
    error = hub_file_error(repo, file, "model", spec.revision)  # a gated repository refuses here
    if error is not None:
        raise ModelUnavailableError(hub_refusal(asked, error, copy=GGUF_COPY))
    SERVABLE[(spec.path, spec.revision)] = file
    return file


def _download(repo: str, file: str, revision: str | None) -> Path:
    """``file`` downloaded into the Hugging Face cache; a file split in parts: every part, up to ``PARALLEL_PARTS``
    at a time (huggingface_hub's own parallel snapshot download: a 70B model's parts are tens of GB), its first part
    returned."""
    from huggingface_hub import hf_hub_download, snapshot_download

    parts = all_parts(file)
    if len(parts) == 1:
        return Path(hf_hub_download(repo, file, revision=revision))
    folder = snapshot_download(repo, revision=revision, allow_patterns=[glob.escape(part) for part in parts],
                               max_workers=min(PARALLEL_PARTS, len(parts)))
    return Path(folder) / file


def hub_gguf(spec) -> tuple[Path, dict]:
    """(the GGUF file in the local Hugging Face cache, downloaded first if it is not there, its identity); a file
    split in parts: its first part, every part downloaded beside it."""
    path = _cached(spec)
    if path is None:
        repo, file = parse_hub_path(spec.path)[0], check_hub_gguf(spec)
        try:  # parts already in the cache are not fetched again
            path = _download(repo, file, spec.revision)
        except Exception as exc:  # noqa: BLE001 - a download the hub agreed to, cut off part way
            raise ModelUnavailableError(download_failed(spec, exc)) from None
        others = len(all_parts(file)) - 1
        print(f"posixlab: {file}{f' and its other {others} parts' if others else ''} downloaded from "
              f"{hub_endpoint()}/{repo}", file=sys.stderr)
    snapshots = next(p for p in path.parents if p.parent.name == "snapshots")  # .../snapshots/<commit>/...
    parts = [path.with_name(Path(part).name) for part in all_parts(path.name)]
    blobs = [part.resolve().name for part in parts]  # a file's sha256 on the Hub (every GGUF file is in Git LFS)
    identity = {"name": spec.name, "source": "hub", "path": spec.path, "revision": spec.revision,
                "commit": snapshots.name, "file": path.relative_to(snapshots).as_posix(),
                "size": sum(part.stat().st_size for part in parts)}
    if all(re.fullmatch(r"[0-9a-f]{64}", blob) for blob in blobs):
        identity["gguf_sha256"] = blobs[0] if len(blobs) == 1 else blobs  # a split file's: its parts', in order
    if len(parts) > 1:
        identity["parts"] = len(parts)
    return path, identity
