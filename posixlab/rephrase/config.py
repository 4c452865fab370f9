"""The ``rephraser`` config (``RephraserConfig``): which backend writes the paraphrases, and where they are kept.

Backends (``RephraserConfig.backend``):

- ``auto`` (the default): a chat run's own endpoint and model (``model=chat``: the rephraser is the classifier, as in
  Errica et al.), otherwise ``hf`` with the packaged Qwen2.5-Coder-1.5B-Instruct (``resolve_rephraser``);
- ``hf``: a local transformers chat model; offline default the packaged Qwen2.5-Coder-1.5B-Instruct;
- ``openai``: any OpenAI-compatible chat endpoint (OpenAI, as the paper's GPT-3.5-Turbo, or a local vLLM,
  llama.cpp or Ollama server), the key read from an environment variable, never from config;
- ``file``: no model; a user's own paraphrase file supplies every paraphrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.rephrase.base import Rephraser

BACKENDS = ("auto", "hf", "openai", "file")
DEFAULT_REPHRASER = "qwen2.5-coder-1.5b-instruct"  # the packaged model that writes paraphrases in process
# the instructions ship with the package, beside the Hydra configs that select them (conf/rephraser/instruction/)
INSTRUCTIONS = Path(__file__).resolve().parents[1] / "conf" / "rephraser" / "instruction"


@dataclass
class RephraserConfig:
    backend: str = "auto"  # auto | hf | openai | file (auto: a chat run's own endpoint, else hf)
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
    # replies in flight at once: openai, requests sent together (a request's sampled replies, and several originals);
    # hf, rows decoded in one batch (max_concurrency // samples originals in step). How fast, never what, it writes:
    # each reply has its own seed
    max_concurrency: int = 8
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
    # {system, request, examples}, or the name of a packaged one (conf/rephraser/instruction/: default,
    # task_sentence, class_description); empty: the one the use asks for (questions: default; a classifier's task
    # sentence: task_sentence; class descriptions: class_description)
    instruction: dict | str = field(default_factory=dict)
    # use the paraphrases that ship with posixlab (posixlab/data/paraphrases/: the bundled MMLU questions and the
    # built-in classifiers' task sentences, written by the packaged Qwen2.5-Coder-1.5B-Instruct and checked) when this
    # rephraser is that model with the same instruction; false: only the paraphrase file and the rephraser
    shipped: bool = True


def packaged_instruction(name: str) -> dict:
    """A packaged rephraser instruction (``conf/rephraser/instruction/NAME.yaml``) as a dict.

    >>> sorted(packaged_instruction("task_sentence"))
    ['examples', 'request', 'system']
    """
    import yaml

    path = INSTRUCTIONS / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in INSTRUCTIONS.glob("*.yaml")))
        raise ConfigError(f"no packaged rephraser instruction {name!r}; choose one of {known}, or give the "
                          f"instruction itself ({{system, request, examples}})")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _behind_chat_endpoint(spec) -> bool:
    """A model answered by a chat API (its backend's engine kind is ``api``): it can write the rephrasings itself."""
    from posixlab.backends import named

    backend = named(getattr(spec, "backend", "") or "")
    return backend is not None and backend.kind == "api"


def resolve_rephraser(cfg: RephraserConfig, model=None, instruction: str = "default") -> RephraserConfig:
    """``cfg`` made concrete for a run of ``model`` (a ``ModelSpec``): ``backend=auto`` becomes the run's own chat
    endpoint (``model=chat``: its base URL, model name, key variable, timeout and concurrency; Errica et al. rephrase
    with the classifier itself) or ``hf`` (the packaged Qwen2.5-Coder-1.5B-Instruct: the small in-process models cannot
    rewrite an instruction), and an empty (or named) instruction becomes the packaged ``instruction`` for the use.

    >>> resolve_rephraser(RephraserConfig()).backend
    'hf'
    >>> resolve_rephraser(RephraserConfig(), instruction="task_sentence").instruction["request"][:30]
    'Rewrite the following instruct'
    """
    if cfg.backend == "auto":
        if model is not None and _behind_chat_endpoint(model):
            server = model.server
            cfg = replace(cfg, backend="openai", model=server.served_name or model.name, base_url=server.base_url,
                          api_key_env=server.api_key_env, timeout=server.request_timeout, source=None,
                          max_concurrency=server.max_concurrency)
        else:
            cfg = replace(cfg, backend="hf")
    if cfg.backend != "file" and (isinstance(cfg.instruction, str) or not cfg.instruction):
        cfg = replace(cfg, instruction=packaged_instruction(cfg.instruction or instruction))
    return cfg


def make_rephraser(cfg: RephraserConfig, cache_dir: str | None = None, offline: bool = False) -> Rephraser | None:
    """The rephraser ``cfg`` names (None for a user's file). ``offline``: one that will not be asked (a dry run), so
    an API's key is not required."""
    cfg = resolve_rephraser(cfg)
    if cfg.backend == "hf":
        from posixlab.models.loading import ModelSpec
        from posixlab.rephrase.hf_backend import HFRephraser

        spec = ModelSpec(name=Path(cfg.model).name, source=cfg.source, path=cfg.model, revision=cfg.revision,
                         dtype=cfg.dtype, device=cfg.device)
        return HFRephraser(spec, cache_dir, temperature=cfg.temperature, top_p=cfg.top_p,
                           max_concurrency=cfg.max_concurrency)
    if cfg.backend == "openai":
        from posixlab.rephrase.openai_backend import OpenAIRephraser

        return OpenAIRephraser(model=cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                               temperature=cfg.temperature, top_p=cfg.top_p, timeout=cfg.timeout,
                               max_attempts=cfg.max_attempts, offline=offline, max_concurrency=cfg.max_concurrency)
    if cfg.backend == "file":
        return None
    raise ConfigError(f"unknown rephraser.backend {cfg.backend!r}; choose one of {', '.join(BACKENDS)}")


def default_paraphrase_path(cfg: RephraserConfig, cache_dir: str | Path) -> Path:
    cfg = resolve_rephraser(cfg)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{cfg.backend}-{cfg.model}")
    return Path(cache_dir) / "paraphrases" / f"{slug}.jsonl"
