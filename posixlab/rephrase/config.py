"""The ``rephraser`` config (``RephraserConfig``): which backend writes the paraphrases, and where they are kept.

Backends (``RephraserConfig.backend``):

- ``hf``: a local transformers chat model; offline default the packaged Qwen2.5-Coder-1.5B-Instruct;
- ``openai``: any OpenAI-compatible chat endpoint (OpenAI, as the paper's GPT-3.5-Turbo, or a local vLLM,
  llama.cpp or Ollama server), the key read from an environment variable, never from config;
- ``file``: no model; a user's own paraphrase file supplies every paraphrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.rephrase.base import Rephraser

BACKENDS = ("hf", "openai", "file")


@dataclass
class RephraserConfig:
    backend: str = "hf"  # hf | openai | file
    model: str = "qwen2.5-coder-1.5b-instruct"  # hf: packaged name, hub id or folder; openai: the served model name
    source: str = "packaged"  # hf only: packaged | hub | local
    revision: str | None = None  # hf only
    dtype: str = "auto"  # hf only
    device: str = "auto"  # hf only
    base_url: str | None = None  # openai only; None: api.openai.com
    api_key_env: str = "OPENAI_API_KEY"  # openai only: the NAME of the variable holding the key
    timeout: float = 60  # openai only: seconds per request
    # openai only: tries per request on rate limits, 5xx and connection errors (the openai client's own retries:
    # exponential backoff with jitter from 0.5 s to 8 s, or the server's Retry-After)
    max_attempts: int = 6
    temperature: float = 0.8
    top_p: float = 0.95
    path: str | None = None  # the paraphrase file; None: <cache_dir>/paraphrases/<backend>-<model>.jsonl
    seed: int = 0  # paraphrases depend on this seed, not the run's: every run of a sweep sees the same ones
    per_request: int = 5  # rewrites asked for in one reply
    samples: int = 4  # replies sampled per request
    max_requests: int = 12  # requests per original before giving up, over every run (resumes do not retry)
    min_length_ratio: float = 0.5  # a paraphrase's length (characters) relative to the original's
    max_length_ratio: float = 2.0
    # quality checks (posixlab.rephrase.quality): measured on every candidate, recorded with every paraphrase
    validate: bool = True  # False: no measures, no quality rules (the length limits above still apply)
    quality_embedding: str = "all-MiniLM-L6-v2"  # a packaged sentence-embedding model (posixlab.embeddings)
    min_similarity: float = 0.70  # embedding cosine similarity to the original; docs/choices.md says how it was chosen
    keep_numbers: bool = True  # reject a paraphrase whose numbers differ from the original's
    keep_entities: bool = True  # reject a paraphrase that drops a name of the original
    reject_borrowed: bool = True  # reject a paraphrase that uses the worked examples' words the original lacks
    instruction: dict = field(default_factory=dict)  # {system, request, examples}: conf/rephraser/instruction/


def make_rephraser(cfg: RephraserConfig, cache_dir: str | None = None) -> Rephraser | None:
    if cfg.backend == "hf":
        from posixlab.models.loading import ModelSpec
        from posixlab.rephrase.hf_backend import HFRephraser

        spec = ModelSpec(name=Path(cfg.model).name, source=cfg.source, path=cfg.model, revision=cfg.revision,
                         dtype=cfg.dtype, device=cfg.device)
        return HFRephraser(spec, cache_dir, temperature=cfg.temperature, top_p=cfg.top_p)
    if cfg.backend == "openai":
        from posixlab.rephrase.openai_backend import OpenAIRephraser

        return OpenAIRephraser(model=cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                               temperature=cfg.temperature, top_p=cfg.top_p, timeout=cfg.timeout,
                               max_attempts=cfg.max_attempts)
    if cfg.backend == "file":
        return None
    raise ConfigError(f"unknown rephraser.backend {cfg.backend!r}; choose one of {', '.join(BACKENDS)}")


def default_paraphrase_path(cfg: RephraserConfig, cache_dir: str | Path) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{cfg.backend}-{cfg.model}")
    return Path(cache_dir) / "paraphrases" / f"{slug}.jsonl"
