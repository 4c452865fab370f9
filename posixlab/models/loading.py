"""Load a model by its spec: a packaged GGUF model, a local folder, or a Hugging Face Hub name.

A hub model that is neither cached locally nor reachable fails within seconds with a message that says so (the
hub client would otherwise retry for about a minute before raising).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

from posixlab.errors import ConfigError, DeviceMemoryError, ModelUnavailableError
from posixlab.hub import hub_file_error, hub_offline_flag
from posixlab.models.adapters import adapted_name, apply_adapter, check_adapter_spec, peft_version, resolve_adapter
from posixlab.models.assets import PACKAGED_MODELS, prepare_packaged_model
from posixlab.models.fetch_errors import download_failed, folder_signature, hub_hint, hub_refusal, is_download_error
from posixlab.paths import default_cache_dir

SOURCES = ("packaged", "hub", "local")
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class ServerSettings:
    """How a model behind a server is reached (``model.server.*``): a backend that runs models in this process
    ignores them. ``posixlab/backends.py`` checks them for the backends that use them."""

    base_url: str | None = None  # the server's OpenAI-compatible root, e.g. http://gpu-node:8000/v1
    served_name: str | None = None  # the name the server serves the model under; None: its only model
    launch: bool = False  # vllm: start a local server for the run (on a free loopback port) and stop it afterwards
    launch_python: str | None = None  # vllm launch: a Python with vLLM; None: $POSIXLAB_VLLM_PYTHON or the cache's venv
    launch_args: tuple[str, ...] = ()  # vllm launch: more server flags, e.g. ["--tensor-parallel-size", "4"]
    max_model_len: int | None = None  # vllm launch: the server's context length; None: 2048 on CPU, the model's on GPU
    max_concurrency: int = 8  # requests in flight at once
    request_batch: int = 16  # vllm: sequences scored per request
    api_key_env: str = "VLLM_API_KEY"  # the variable holding the server's key (unset: none is needed)
    request_timeout: float = 600  # seconds one request may take
    max_attempts: int = 3  # tries per request (the openai client's retries); then the server is reported dead
    # chat (model=chat): what every request sends, sent explicitly (the paper's GPT runs: temperature 0, seed 42)
    temperature: float = 0.0
    seed: int | None = 42  # None: not sent
    max_requests: int | None = None  # chat: stop cleanly after sending this many (cached answers are free); None: no cap
    price_input_per_million: float | None = None  # chat: price per million prompt tokens, for the summary's cost
    price_output_per_million: float | None = None  # chat: price per million completion tokens


# how a served model is reached, not what it computes: shards of one cell may differ in these (shards.py)
TRANSPORT_KEYS = ("base_url", "launch", "launch_python", "launch_args", "max_concurrency", "request_batch",
                  "api_key_env", "request_timeout", "max_attempts", "max_requests", "price_input_per_million",
                  "price_output_per_million")


@dataclass(frozen=True)
class ModelSpec:
    """What to load. ``path`` is the packaged model's name, a hub repository id, or a local folder."""

    name: str
    source: str
    path: str
    revision: str | None = None  # hub revision (branch, tag or commit); pin a commit to reproduce exactly
    dtype: str = "auto"  # auto: bfloat16 on a GPU that supports it, float32 otherwise
    device: str = "auto"  # auto: cuda when available, else cpu
    trust_remote_code: bool = False
    # a PEFT adapter (LoRA ...) merged into the weights as they load: a folder or a hub id (posixlab/models/adapters.py)
    adapter: str | None = None
    adapter_revision: str | None = None  # the adapter's hub revision; pin a commit to reproduce exactly
    # where it runs: transformers (this process) | vllm | chat | llamacpp (a GGUF file; posixlab/backends.py)
    backend: str = "transformers"
    server: ServerSettings = field(default_factory=ServerSettings)  # server backends only


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"model.device={device} but no CUDA device is visible; use model.device=auto or cpu")
    return device


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype not in DTYPES:
        raise ConfigError(f"unknown model.dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, dtype)


# The files that make a cached snapshot loadable: the config, a tokenizer, and every weight file (an index's shards)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")
WEIGHTS = (("model.safetensors.index.json", "model.safetensors"), ("pytorch_model.bin.index.json", "pytorch_model.bin"))


def _complete_snapshot(spec: ModelSpec) -> str | None:
    """The model's snapshot in the local Hugging Face cache when it holds everything a load reads, else None.

    A download that stopped part way (a dropped connection, a 500, Ctrl-C) leaves a snapshot folder with the files
    that finished (the config and tokenizer, say) and not the weights: huggingface_hub's ``local_files_only`` lookup
    returns that folder all the same. Counted as cached, it would make every later run fail to load; counted as
    missing, the next run goes back to the hub and finishes the download (the finished files are not fetched again;
    huggingface_hub 2 deletes the part of a file that was cut off, so that one is fetched whole).
    """
    import json

    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(spec.path, revision=spec.revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure here only means "not cached"
        return None
    if not (folder / "config.json").is_file() or not any((folder / f).is_file() for f in TOKENIZER_FILES):
        return None
    for index, single in WEIGHTS:
        if (folder / index).is_file():
            try:
                shards = set(json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"].values())
            except (OSError, ValueError, KeyError, AttributeError):
                return None
            return str(folder) if all((folder / shard).is_file() for shard in shards) else None
        if (folder / single).is_file():
            return str(folder)
    return None


def check_hub_model(spec: ModelSpec) -> str | None:
    """For a hub model, before any other work: the complete local snapshot (no network), or None once the hub has
    said it will serve the model's files to this user; else a ``ModelUnavailableError`` that says what to do."""
    folder = _complete_snapshot(spec)
    if folder:
        return folder
    if hub_offline_flag():
        raise ModelUnavailableError(f"model {spec.name} ({spec.path}) is not in the local cache (or only part of "
                                    f"it is) and HF_HUB_OFFLINE is set. {hub_hint()}")
    error = hub_file_error(spec.path, "config.json", "model", spec.revision)
    if error is not None:
        raise ModelUnavailableError(hub_refusal(spec, error))
    return None


def _hub_folder_or_error(spec: ModelSpec) -> str:
    """A complete local snapshot, or the hub id when the hub will serve it; otherwise a clear ModelUnavailableError."""
    return check_hub_model(spec) or spec.path


def load_model(spec: ModelSpec, cache_dir: str | Path | None = None) -> "CausalLM":  # noqa: F821
    """The model ``spec`` names, loaded in this process with ``transformers``. (A model on a vLLM server,
    ``backend=vllm``, is opened by ``posixlab.backends.load``, which the runs use.)"""
    check_spec(spec)
    if spec.source not in SOURCES:
        raise ConfigError(f"model {spec.name}: a {spec.source!r} model cannot be loaded by name; choose a source of "
                          f"{', '.join(SOURCES)}")
    if spec.backend != "transformers":
        raise ConfigError(f"model {spec.name} runs on a {spec.backend} server: open it with posixlab.backends.load")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posixlab.models.causal_lm import CausalLM

    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device)
    folder, identity, kwargs = model_folder(spec, cache_dir)
    adapter, name = _adapter(spec, identity, download=True)
    identity.update({"dtype": str(dtype).removeprefix("torch."), "device": device,
                     "transformers": transformers.__version__, "torch": torch.__version__})
    print(f"posixlab: loading {spec.name} ({spec.path}) on {device} in {identity['dtype']}"
          + (f", with the adapter {spec.adapter} merged" if adapter else ""), file=sys.stderr)
    tokenizer = _pretrained(AutoTokenizer, spec, folder, kwargs)
    model = _pretrained(AutoModelForCausalLM, spec, folder, kwargs, dtype=dtype)
    if adapter is not None:
        model = apply_adapter(model, adapter, spec)
    card = torch.cuda.mem_get_info(device) if device.startswith("cuda") else None  # (free, total) before the weights
    refused = None
    try:
        model = model.to(device)
    except torch.OutOfMemoryError:
        refused = sum(p.numel() * p.element_size() for p in model.parameters())
    if refused is not None:
        del model  # the weights moved so far are freed before the error is raised
        free, total = card
        raise DeviceMemoryError(weights_do_not_fit(spec.name, identity["dtype"], refused, total, free))
    if folder == spec.path:  # downloaded just now: record the commit, as a load from the cached snapshot does
        snapshot = _complete_snapshot(spec)
        if snapshot:
            identity["commit"] = Path(snapshot).name
    return CausalLM(model, tokenizer, name=name, identity=identity)


def _adapter(spec: ModelSpec, identity: dict, download: bool):
    """(the adapter's folder or None, the model's name in results), the adapter's identity added to ``identity``."""
    if spec.adapter is None:
        return None, spec.name
    folder, adapter_identity = resolve_adapter(spec, download=download)
    identity["adapter"] = {**adapter_identity, "peft": peft_version()}
    identity["name"] = adapted_name(spec.name, spec.adapter)
    return folder, identity["name"]


def open_tokenizer(spec: ModelSpec, cache_dir: str | Path | None = None):
    """The model's tokenizer alone, from where its weights load (a packaged model is prepared first, as a load
    would), so that what depends on it is checked before any weights load or a server starts."""
    from transformers import AutoTokenizer

    folder, _, kwargs = model_folder(spec, cache_dir)
    return _pretrained(AutoTokenizer, spec, folder, kwargs)


def open_for_plan(spec: ModelSpec, cache_dir: str | Path | None = None):
    """The model as a dry run plans with it: the tokenizer (requests are token ids) and the context length from the
    config, without the weights (a 7B model's take minutes to load) or a server (minutes to start)."""
    from transformers import AutoConfig, AutoTokenizer

    from posixlab.models.causal_lm import TokenizedModel, context_length, eos_ids_of

    folder, identity, kwargs = model_folder(spec, cache_dir)
    _, name = _adapter(spec, identity, download=False)  # checked, not fetched
    tokenizer = _pretrained(AutoTokenizer, spec, folder, kwargs)
    model = TokenizedModel(tokenizer, name=name, identity=identity, eos_ids=eos_ids_of(None, tokenizer),
                           max_context=context_length(_pretrained(AutoConfig, spec, folder, kwargs)))
    model.backend = spec.backend  # what backend_of(model) reads: the plan is its backend's
    return model


def _pretrained(auto_class, spec: ModelSpec, folder: str, kwargs: dict, **more):
    """``auto_class.from_pretrained`` of the folder (or hub id) ``model_folder`` chose; a failed download is a clear
    ``ModelUnavailableError``."""
    try:
        return auto_class.from_pretrained(folder, trust_remote_code=spec.trust_remote_code, **kwargs, **more)
    except Exception as exc:
        downloading = spec.source == "hub" and folder == spec.path  # a local folder is its path too, downloads nothing
        if not downloading or not is_download_error(exc):  # not a download: transformers' own error stands
            raise
        raise ModelUnavailableError(download_failed(spec, exc)) from None


def weights_do_not_fit(name: str, dtype: str, weights: int, total: int, free: int) -> str:
    """What to do when a model's weights do not fit on its GPU.

    >>> print(weights_do_not_fit("llama2-13b", "bfloat16", 26 * 2**30, 24 * 2**30, 23 * 2**30))
    model llama2-13b's weights (26.0 GB in bfloat16) do not fit on this GPU (24.0 GB, of which 23.0 GB was free \
before loading them): use a card with more memory, or run the model on a vLLM server, which can spread it over \
several GPUs (model.backend=vllm; README, "vLLM servers")
    """
    return (f"model {name}'s weights ({weights / 2**30:.1f} GB in {dtype}) do not fit on this GPU "
            f"({total / 2**30:.1f} GB, of which {free / 2**30:.1f} GB was free before loading them): use a card with "
            f"more memory, or run the model on a vLLM server, which can spread it over several GPUs "
            f"(model.backend=vllm; README, \"vLLM servers\")")


def check_spec(spec: ModelSpec) -> None:
    """Model settings that are wrong whatever the data: caught before anything is fetched or loaded."""
    # loaded: a model object given in Python (posixlab.evaluate); api: a model behind a chat API (model=chat)
    if spec.source not in (*SOURCES, "loaded", "api"):
        raise ConfigError(f"model {spec.name}: unknown source {spec.source!r}; choose one of {', '.join(SOURCES)}")
    if spec.dtype not in DTYPES:
        raise ConfigError(f"unknown model.dtype {spec.dtype!r}; choose one of {', '.join(DTYPES)}")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", str(spec.device)):  # the devices the engine is built and tested on
        raise ConfigError(f"unknown model.device {spec.device!r}; choose auto (a GPU when one is visible), cpu, cuda "
                          f"or cuda:N")
    check_adapter_spec(spec)


def model_folder(spec: ModelSpec, cache_dir: str | Path | None = None) -> tuple[str, dict, dict]:
    """(folder or hub id to load from, the identity of the weights, extra ``from_pretrained`` arguments)."""
    identity = {"name": spec.name, "source": spec.source, "path": spec.path, "revision": spec.revision}
    if spec.source == "packaged":
        if spec.path not in PACKAGED_MODELS:
            raise ConfigError(f"no packaged model {spec.path!r}; packaged models: {', '.join(PACKAGED_MODELS)}")
        folder = str(prepare_packaged_model(spec.path, Path(cache_dir) if cache_dir else default_cache_dir()))
        identity["gguf_sha256"] = PACKAGED_MODELS[spec.path].sha256
        identity["packages"] = PACKAGED_MODELS[spec.path].pip_specs
    elif spec.source == "local":
        if not Path(spec.path).is_dir():
            raise ModelUnavailableError(f"model {spec.name}: local folder {spec.path} does not exist")
        if not (Path(spec.path) / "config.json").is_file():  # else transformers' error, about a tokenizer
            raise ModelUnavailableError(f"model {spec.name}: local folder {spec.path} holds no model (no config.json): "
                                        f"give a folder a transformers model was saved to (save_pretrained: config, "
                                        f"weights, tokenizer files), or a .gguf file")
        folder = spec.path
        identity["files"] = folder_signature(folder)
    else:
        folder = _hub_folder_or_error(spec)
        if Path(folder).parent.name == "snapshots":  # a hub snapshot: its folder name is the resolved commit
            identity["commit"] = Path(folder).name
    kwargs = {"revision": spec.revision} if spec.source == "hub" and folder == spec.path else {}
    return folder, identity, kwargs


def spec_from_dict(d: dict) -> ModelSpec:
    """A ``ModelSpec`` from the ``model`` config group (``server`` a nested dict); unknown keys are an error.

    >>> spec_from_dict({"name": "m", "source": "hub", "path": "o/m", "server": {"base_url": "http://h/v1"}}).server.base_url
    'http://h/v1'
    """
    d = dict(d)
    known = {f.name for f in fields(ModelSpec)}
    unknown = set(d) - known
    if unknown:
        moved = sorted(unknown & {f.name for f in fields(ServerSettings)})
        hint = f" (server settings live under model.server: model.server.{moved[0]}=...)" if moved else ""
        raise ConfigError(f"unknown model option(s) {', '.join(sorted(unknown))}{hint}; known: {', '.join(sorted(known))}")
    server = dict(d.get("server") or {})
    unknown = set(server) - {f.name for f in fields(ServerSettings)}
    if unknown:
        raise ConfigError(f"unknown model.server option(s) {', '.join(sorted(unknown))}; known: "
                          f"{', '.join(f.name for f in fields(ServerSettings))}")
    if server.get("launch_args") is not None:
        server["launch_args"] = tuple(str(a) for a in server["launch_args"])
    d["server"] = ServerSettings(**server)
    return ModelSpec(**d)


__all__ = ["ModelSpec", "ServerSettings", "check_spec", "load_model", "model_folder", "spec_from_dict"]
