"""The ``rephraser`` config (``RephraserConfig``): which backend writes the paraphrases, and where they are kept.

Backends (``RephraserConfig.backend``):

- ``auto`` (the default): a chat run's own endpoint and model (``model=chat``: the rephraser is the classifier, as in
  Errica et al.), otherwise ``hf`` with the packaged Qwen2.5-Coder-1.5B-Instruct (``resolve_rephraser``);
- ``hf``: a local transformers chat model; offline default the packaged Qwen2.5-Coder-1.5B-Instruct;
- ``llamacpp``: a GGUF file in llama.cpp, in this process (the packaged Qwen2.5-Coder-1.5B-Instruct's Q4_K_M file by
  default; a file of yours, or a GGUF repository's file on the hub): no server to start, the fast route on a CPU;
- ``openai``: any OpenAI-compatible chat endpoint (OpenAI, as the paper's GPT-3.5-Turbo, or a local vLLM,
  llama.cpp or Ollama server), the key read from an environment variable, never from config;
- ``file``: no model; a user's own paraphrase file supplies every paraphrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from posixlab.errors import ConfigError, check_field_types
from posixlab.rephrase.base import Rephraser
from posixlab.rephrase.quality import LENGTH_SLACK

BACKENDS = ("auto", "hf", "llamacpp", "openai", "file")
DEFAULT_REPHRASER = "qwen2.5-coder-1.5b-instruct"  # the packaged model that writes paraphrases in process
# the instructions ship with the package, beside the Hydra configs that select them (conf/rephraser/instruction/)
INSTRUCTIONS = Path(__file__).resolve().parents[1] / "conf" / "rephraser" / "instruction"


@dataclass
class RephraserConfig:
    backend: str = "auto"  # auto | hf | llamacpp | openai | file (auto: a chat run's own endpoint, else hf)
    # hf: packaged name, hub id or folder; llamacpp: packaged name, .gguf file, or OWNER/REPO:TAG (OWNER/REPO/F.gguf)
    # on the hub; openai: the served model name
    model: str = "qwen2.5-coder-1.5b-instruct"
    source: str | None = "packaged"  # hf and llamacpp: packaged | hub | local (llamacpp: read from the model's form)
    revision: str | None = None  # hf and llamacpp: the hub revision
    dtype: str = "auto"  # hf only
    device: str = "auto"  # hf and llamacpp (cpu: no layer on a GPU)
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
    length_slack: int = LENGTH_SLACK  # characters a rewrite may add past max_length_ratio (room for a short question)
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

    def __post_init__(self):  # where the config is read, not deep in a rephraser once its model has loaded
        check_field_types(self, "rephraser")
        for key in ("max_attempts", "max_concurrency", "per_request", "samples", "max_requests"):
            if getattr(self, key) < 1:
                raise ConfigError(f"rephraser.{key} must be at least 1, got {getattr(self, key)}")
        if self.length_slack < 0:
            raise ConfigError(f"rephraser.length_slack must be 0 or more (characters), got {self.length_slack}")
        if self.timeout <= 0:
            raise ConfigError(f"rephraser.timeout is seconds per request, above 0, got {self.timeout}")


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
        from posixlab.rephrase.hf_backend import HFRephraser

        return HFRephraser(hf_rephraser_spec(cfg), cache_dir, temperature=cfg.temperature, top_p=cfg.top_p,
                           max_concurrency=cfg.max_concurrency)
    if cfg.backend == "llamacpp":
        from posixlab.rephrase.hf_backend import LlamaCppRephraser

        return LlamaCppRephraser(gguf_rephraser_spec(cfg), cache_dir, temperature=cfg.temperature, top_p=cfg.top_p)
    if cfg.backend == "openai":
        from posixlab.rephrase.openai_backend import OpenAIRephraser

        return OpenAIRephraser(model=cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                               temperature=cfg.temperature, top_p=cfg.top_p, timeout=cfg.timeout,
                               max_attempts=cfg.max_attempts, offline=offline, max_concurrency=cfg.max_concurrency)
    if cfg.backend == "file":
        return None
    raise ConfigError(f"unknown rephraser.backend {cfg.backend!r}; choose one of {', '.join(BACKENDS)}")


def hf_rephraser_spec(cfg: RephraserConfig):
    """The ``ModelSpec`` of an ``hf`` rephraser, checked before anything loads: ``rephraser.model`` a packaged model,
    a local folder or a hub id; ``rephraser.source`` is read from that form when left at ``packaged`` for a model
    that is not one (as ``model=`` reads it).

    >>> spec = hf_rephraser_spec(RephraserConfig(backend="hf", model="Qwen/Qwen2.5-7B-Instruct"))
    >>> spec.name, spec.source, spec.path
    ('Qwen2.5-7B-Instruct', 'hub', 'Qwen/Qwen2.5-7B-Instruct')
    >>> hf_rephraser_spec(RephraserConfig(backend="hf", model="qwen2.5-7b")).source
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: rephraser.model 'qwen2.5-7b' is not a packaged model (smollm2-135m-instruct, \
gemma3-270m, qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct), a local folder or a Hugging Face Hub id \
(owner/name); a .gguf file is rephraser=llamacpp's
    """
    from posixlab.models.assets import PACKAGED_MODELS
    from posixlab.models.loading import ModelSpec

    source = cfg.source
    if source == "packaged" and cfg.model not in PACKAGED_MODELS:
        source = "local" if Path(cfg.model).expanduser().is_dir() else "hub"
        if source == "hub" and not re.fullmatch(r"[^/.:\s][^/:\s]*/[^/:\s]+", cfg.model):
            raise ConfigError(f"rephraser.model {cfg.model!r} is not a packaged model ({', '.join(PACKAGED_MODELS)}), "
                              f"a local folder or a Hugging Face Hub id (owner/name); a .gguf file is "
                              f"rephraser=llamacpp's")
    path = str(Path(cfg.model).expanduser()) if source == "local" else cfg.model
    return ModelSpec(name=Path(cfg.model).name, source=source, path=path, revision=cfg.revision, dtype=cfg.dtype,
                     device=cfg.device)


def gguf_rephraser_spec(cfg: RephraserConfig):
    """The ``ModelSpec`` of a ``llamacpp`` rephraser's GGUF file, checked as a run's model is (before anything
    loads): ``rephraser.model`` a packaged model, a ``.gguf`` file (or a folder holding one) or a GGUF repository's
    file on the hub (``OWNER/REPO:TAG``, ``OWNER/REPO/FILE.gguf``); ``rephraser.source`` is read from that form when
    left at ``packaged`` for a model that is not one.

    >>> spec = gguf_rephraser_spec(RephraserConfig(backend="llamacpp", model="Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"))
    >>> spec.name, spec.source, spec.backend
    ('Qwen2.5-7B-Instruct-GGUF-Q4_K_M', 'hub', 'llamacpp')
    >>> gguf_rephraser_spec(RephraserConfig(backend="llamacpp", model="/nowhere/m.gguf"))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: rephraser.model: no GGUF file or folder at /nowhere/m.gguf; give a .gguf file, a packaged model or a GGUF repository's file on the hub (OWNER/REPO:Q4_K_M)
    """
    from posixlab.backends import named
    from posixlab.llamacpp.hub import gguf_label, looks_like_hub_gguf
    from posixlab.models.assets import PACKAGED_MODELS
    from posixlab.models.loading import ModelSpec

    source = cfg.source
    if source == "packaged" and cfg.model not in PACKAGED_MODELS:
        source = "hub" if looks_like_hub_gguf(cfg.model) else "local"
    path = str(Path(cfg.model).expanduser()) if source == "local" else cfg.model
    spec = ModelSpec(name=gguf_label(cfg.model), source=source, path=path, revision=cfg.revision,
                     device=cfg.device, backend="llamacpp")
    named("llamacpp").check(spec)
    if source == "local" and not Path(path).exists():
        raise ConfigError(f"rephraser.model: no GGUF file or folder at {path}; give a .gguf file, a packaged model "
                          f"or a GGUF repository's file on the hub (OWNER/REPO:Q4_K_M)")
    return spec


def default_paraphrase_path(cfg: RephraserConfig, cache_dir: str | Path) -> Path:
    cfg = resolve_rephraser(cfg)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{cfg.backend}-{cfg.model}")
    return Path(cache_dir) / "paraphrases" / f"{slug}.jsonl"
