"""Where a model runs, chosen by ``model.backend``, and what it can do there.

Each backend registers under its name with its **capabilities** (``generate``: greedy text for a prompt, what every
model does; ``score``: log P(continuation | prompt) on token ids) and how to open a model and the engine that runs
requests on it. A task says what it needs (``Task.needs``); the runner asks ``check_capabilities`` before any work,
so a model that cannot do what the configuration asks is a config error, not a failure deep inside a run.

- ``transformers``: in this process (``CausalLM``): generate and score.
- ``vllm``: a vLLM server (``ServedModel``; the tokenizer here, token ids over HTTP): generate and score.
- ``chat``: any OpenAI-compatible chat-completions endpoint (``posixlab/chat/``): generate only (text in, text out).

A new backend is one module that calls ``register``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from posixlab.chat import ChatEngine, ChatModel, check_chat, open_chat
from posixlab.errors import ConfigError
from posixlab.models import ModelSpec, TokenizedModel, load_model
from posixlab.models.capabilities import GENERATE, SCORE, STRUCTURED
from posixlab.models.loading import check_spec
from posixlab.scoring import EngineOptions, ScoreCache, ScoringEngine
from posixlab.scoring.engine import SetScorer
from posixlab.serving import ServedModel, ServerEngine, connect


@dataclass(frozen=True)
class Backend:
    name: str
    capabilities: frozenset[str]
    open: Callable  # (spec, cache_dir) -> a loaded or connected model; close() releases it
    engine: Callable  # (model, max_new_tokens, EngineOptions, ScoreCache | None) -> SetScorer
    remote: bool = False  # a server: asked first, before any input is built, so a dead one is reported at once
    check: Callable | None = None  # (spec) -> None: the backend's own settings, before anything is loaded


BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    BACKENDS[backend.name] = backend


def _check_vllm(spec: ModelSpec) -> None:
    server = spec.server
    if server.launch == bool(server.base_url):
        raise ConfigError(f"model.backend=vllm needs either model.server.base_url=http://HOST:PORT/v1 (a running "
                          f"vLLM server) or model.server.launch=true (posixlab starts one), not "
                          f"{'both' if server.launch else 'neither'}")
    for key in ("max_concurrency", "request_batch", "max_attempts"):
        if getattr(server, key) < 1:
            raise ConfigError(f"model.server.{key} must be at least 1, got {getattr(server, key)}")


def _check_in_process(spec: ModelSpec) -> None:
    if spec.server.launch or spec.server.base_url:
        raise ConfigError("model.server.launch and model.server.base_url belong to a server backend; add "
                          "model.backend=vllm")


register(Backend("transformers", frozenset({GENERATE, SCORE, STRUCTURED}), load_model,
                 lambda lm, n, options, cache: ScoringEngine(lm, n, options, cache), check=_check_in_process))
register(Backend("vllm", frozenset({GENERATE, SCORE, STRUCTURED}), connect,
                 lambda lm, n, options, cache: ServerEngine(lm, n, cache), remote=True, check=_check_vllm))


register(Backend("chat", frozenset({GENERATE, STRUCTURED}), open_chat,
                 lambda lm, n, options, cache: ChatEngine(lm, n, cache), remote=True, check=check_chat))


def text_only(lm) -> bool:
    """A model that returns text and nothing else (a chat API): requests carry prompt texts, not token ids."""
    return SCORE not in capabilities_of(lm)


def backend_of(spec: ModelSpec) -> Backend:
    if spec.backend not in BACKENDS:
        raise ConfigError(f"model {spec.name}: unknown backend {spec.backend!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[spec.backend]


def check_model(spec: ModelSpec) -> Backend:
    """The spec's own settings and its backend's, before anything is fetched or loaded; returns the backend."""
    backend = backend_of(spec)
    check_spec(spec)
    if backend.check is not None:
        backend.check(spec)
    return backend


def capabilities_of(lm) -> frozenset[str]:
    """What a loaded model can do (a model object given in Python carries its own)."""
    return getattr(lm, "capabilities", frozenset({GENERATE}))


def check_capabilities(needs: dict[str, str], spec: ModelSpec, lm=None) -> None:
    """A ``ConfigError`` naming what the configuration asks that the model cannot do, and the backends that can."""
    have = capabilities_of(lm) if lm is not None else backend_of(spec).capabilities
    missing = [c for c in needs if c not in have]
    if missing:
        able = [b.name for b in BACKENDS.values() if set(needs) <= b.capabilities]
        raise ConfigError(f"model {spec.name} (backend {spec.backend}) cannot {' or '.join(missing)}, which "
                          f"{'; '.join(needs[c] for c in missing)} needs. Backends that can: "
                          f"{', '.join(f'model.backend={b}' for b in able) or 'none'}; or change the setting")


def load(spec: ModelSpec, cache_dir=None) -> TokenizedModel:
    """The model ``spec`` names, where ``spec.backend`` says it runs (a server is started first with ``launch``)."""
    return check_model(spec).open(spec, cache_dir)


def engine_for(lm, max_new_tokens: int, options: EngineOptions | None = None,
               cache: ScoreCache | None = None, schemas: dict | None = None) -> SetScorer:
    """The engine that runs requests on ``lm``: ``ChatEngine`` for a chat API (``cache`` a ``ResponseCache``),
    ``ServerEngine`` for a vLLM server, ``ScoringEngine`` in process. ``schemas`` (strategy=structured: each prompt's
    ``ClassifierSchema``) hold greedy decoding to the schema: llguidance grammars in process (``ConstrainedEngine``),
    vLLM's ``structured_outputs`` on a server (no score cache either way: a cached answer is a free one)."""
    if schemas and isinstance(lm, ServedModel):
        return ServerEngine(lm, max_new_tokens, None, schemas)
    if schemas:
        from posixlab.structured.constrain import ConstrainedEngine, grammar_for

        built, grammars = {}, {}  # one grammar per schema, however many prompts show it
        for ids, schema in schemas.items():
            if id(schema) not in built:
                built[id(schema)] = grammar_for(schema)
            grammars[ids] = built[id(schema)]
        return ConstrainedEngine(lm, max_new_tokens, options, grammars)
    if isinstance(lm, ChatModel):
        return ChatEngine(lm, max_new_tokens, cache)
    if isinstance(lm, ServedModel):
        return ServerEngine(lm, max_new_tokens, cache)
    return ScoringEngine(lm, max_new_tokens, options, cache)
