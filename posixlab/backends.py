"""Where a model runs, chosen by ``model.backend``, and what it can do there: the registry of backends.

A backend is one module that calls ``register`` with a ``Backend``: its **capabilities**, declared once
(``posixlab/models/capabilities.py``: ``generate``, ``score``, ``structured``, ...), how to open a model, and the
**engine** that runs a task's requests on it, with the engine's cache, its report and its dry-run plan. A task says
what it needs (``Task.needs``); the runner asks ``check_capabilities`` before any work, so a model that cannot do
what the configuration asks is a config error, not a failure deep inside a run. The runner knows capabilities and
this protocol, never a backend's name.

The built-in backends register when first asked for (``BUILT_IN``: a chat run imports neither torch nor
transformers):

- ``transformers``: in this process (``posixlab/scoring/backend.py``): generate, score, structured decoding;
- ``vllm``: a vLLM server (``posixlab/serving/backend.py``; the tokenizer here, token ids over HTTP);
- ``chat``: any OpenAI-compatible chat-completions endpoint (``posixlab/chat/backend.py``): text in, text out;
- ``llamacpp``: a GGUF file in llama.cpp, in this process, quantized as shipped (``posixlab/llamacpp/backend.py``).

Another backend (an Anthropic-style API, SGLang) is one module that calls ``register`` when imported; a test-only
one lives in ``tests/``.

Besides a task's requests, a model that can generate writes free replies to a chat of messages, each request
carrying its own decoding settings (``posixlab.openai_client.Generation``: budget, temperature, top-p, seed, n): the
rephraser's paraphrases (``posixlab/rephrase/``) are such replies. ``open_to_generate`` opens the model through its
backend for that, and ``generate`` asks it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from posixlab.errors import ConfigError
from posixlab.models.capabilities import GENERATE, SCORE
from posixlab.models.loading import ModelSpec, check_spec


class Engine(Protocol):
    """What the runner asks of every engine: run requests (``posixlab.tasks.base.Request``) and count the work."""

    processed_tokens: int  # tokens the engine's model (or endpoint) processed for this run

    def run(self, requests: list, in_order: bool = False) -> Iterator[tuple[int, object]]:
        """Yield ``(index into requests, result)`` as each request finishes, in any order (``in_order``: the given
        order, so neighbours share long prefixes); a result is a ``SetScores`` or anything with ``texts``."""


@dataclass(frozen=True)
class Backend:
    name: str
    capabilities: frozenset[str]
    # (spec, cache_dir, **options) -> a loaded or connected model; close() releases it (options: what a caller of
    # its own asks, ``open_to_generate``)
    open: Callable
    # (model, max_new_tokens, EngineOptions, cache or None, requests) -> an ``Engine`` for those requests (requests
    # that carry a schema get decoding held to it: the backend picks the engine)
    engine: Callable
    kind: str = "in-process"  # in-process | server | api: what the run's engine record calls it
    remote: bool = False  # a server: asked first, before any input is built, so a dead one is reported at once
    check: Callable | None = None  # (spec) -> None: the backend's own settings, before anything is loaded
    # (spec) -> None: a hub model's files asked of the hub (or found in the local cache) before any work, a refusal
    # said at once; None: ``check_hub_model`` (a transformers checkpoint: its config.json)
    hub_check: Callable | None = None
    cache: Callable | None = None  # (model, folder or None, cache_dir or None) -> the run's answer cache, opened
    # True: the cache keys on the repeat itself (a chat API), so one engine serves every repeat of a response length;
    # False: each repeat runs again past the cache (a repeat must be a measurement of the stack, not a cache hit)
    repeats_in_cache_key: bool = False
    report: Callable | None = None  # (engines, spec) -> what the run's metadata adds (usage, cost, a stop)
    plan: Callable | None = None  # (model, requests, EngineOptions, cache) -> what a dry run would send
    # (model, messages, Generation) -> the reply texts to a chat of messages, decoded as that one request says (a
    # rephraser's sampling); None: its models cannot
    generate: Callable | None = None
    # (model, [(messages, Generation), ...]) -> each request's reply texts, decoded in one batch (an in-process
    # model's rows side by side); None: ``generate`` one request at a time
    generate_many: Callable | None = None
    # (model, chats, Generation, top) -> for each chat (a list of messages), (the greedy reply's text, the ``top``
    # likeliest first tokens of a reply as (token text, log-probability), or None where the endpoint sent none): what
    # a judge reads P(yes) from. The chats come together so the backend can share their common prefix (in process)
    # or send them concurrently (a server). None: its models give no probabilities of a reply (the judge reads the
    # reply's words alone)
    first_tokens: Callable | None = None
    # (spec, cache_dir) -> the model's tokenizer, without its weights: what depends on it (a chat template) is checked
    # before inputs are built, weights load or a server starts; None: the backend tokenises elsewhere (a chat API)
    tokenizer: Callable | None = None
    # (spec, cache_dir) -> the model a dry run plans with, opened without loading weights, starting a server, sending
    # anything or asking for credentials (its tokenizer; a chat API: no key, no model list); None: ``open``
    open_for_plan: Callable | None = None
    # (spec) -> None: what a run that sends requests needs besides its settings (a hosted API's key), checked before
    # any work; a dry run sends nothing and skips it
    credentials: Callable | None = None


BACKENDS: dict[str, Backend] = {}
# name -> the module that registers it, imported the first time the name is asked for
BUILT_IN = {"transformers": "posixlab.scoring.backend", "vllm": "posixlab.serving.backend",
            "chat": "posixlab.chat.backend", "llamacpp": "posixlab.llamacpp.backend"}


def register(backend: Backend) -> None:
    BACKENDS[backend.name] = backend


def named(name: str) -> Backend | None:
    """The backend registered as ``name`` (a built-in one imported on first use), or None."""
    if name not in BACKENDS and name in BUILT_IN:
        importlib.import_module(BUILT_IN[name])
    if name not in BACKENDS:  # a plug-in's, not imported yet (posixlab/plugins.py)
        from posixlab.plugins import load_plugins

        load_plugins()
    return BACKENDS.get(name)


def all_backends() -> list[Backend]:
    """Every backend, the built-in ones imported (for messages that list who can do what)."""
    built_in = [named(name) for name in BUILT_IN]
    return built_in + [b for name, b in BACKENDS.items() if name not in BUILT_IN]  # in one order, however imported


def backend_of(spec_or_model) -> Backend:
    """The backend of a ``ModelSpec`` (its ``backend`` setting) or of a loaded model (its class's ``backend``)."""
    name = spec_or_model.backend if isinstance(spec_or_model, ModelSpec) else getattr(spec_or_model, "backend", None)
    backend = named(name) if name else None
    if backend is None:
        where = f"model {spec_or_model.name}" if hasattr(spec_or_model, "name") else "the model"
        from posixlab.plugins import HOW

        raise ConfigError(f"{where}: unknown backend {name!r}; choose one of "
                          f"{', '.join(b.name for b in all_backends())}, or {HOW}")
    return backend


def check_model(spec: ModelSpec) -> Backend:
    """The spec's own settings and its backend's, before anything is fetched or loaded; returns the backend."""
    backend = backend_of(spec)
    check_spec(spec)
    if backend.check is not None:
        backend.check(spec)
    return backend


def capabilities_of(lm) -> frozenset[str]:
    """What a loaded model can do: its backend's capabilities (a model object of no backend, given in Python, may
    carry its own ``capabilities``; else it can generate)."""
    name = getattr(lm, "backend", None)
    backend = named(name) if isinstance(name, str) else None
    return backend.capabilities if backend is not None else getattr(lm, "capabilities", frozenset({GENERATE}))


def text_only(lm) -> bool:
    """A model that returns text and nothing else (a chat API): requests carry prompt texts, not token ids."""
    return SCORE not in capabilities_of(lm)


def check_capabilities(needs: dict[str, str], spec: ModelSpec, lm=None) -> None:
    """A ``ConfigError`` naming what the configuration asks that the model cannot do, and the backends that can."""
    have = capabilities_of(lm) if lm is not None else backend_of(spec).capabilities
    missing = [c for c in needs if c not in have]
    if missing:
        able = [b.name for b in all_backends() if set(needs) <= b.capabilities]
        raise ConfigError(f"model {spec.name} (backend {spec.backend}) cannot {' or '.join(missing)}, which "
                          f"{'; '.join(needs[c] for c in missing)} needs. Backends that can: "
                          f"{', '.join(f'model.backend={b}' for b in able) or 'none'}; or drop the setting that "
                          f"needs it")


def load(spec: ModelSpec, cache_dir=None):
    """The model ``spec`` names, where ``spec.backend`` says it runs (a server is started first with ``launch``)."""
    return check_model(spec).open(spec, cache_dir)


def open_for_plan(spec: ModelSpec, cache_dir=None):
    """The model a dry run plans with: its backend's ``open_for_plan`` (the tokenizer without weights or a server; a
    chat API that is asked nothing), else the model itself."""
    backend = check_model(spec)
    return (backend.open_for_plan or backend.open)(spec, cache_dir)


def open_cache(lm, folder: str | Path | None, cache_dir: str | Path | None):
    """The run's answer cache for ``lm`` (scores, or a chat API's responses), or None where its backend keeps none."""
    backend = backend_of(lm) if getattr(lm, "backend", None) else None
    return backend.cache(lm, folder, cache_dir) if backend is not None and backend.cache is not None else None


def engine_for(lm, max_new_tokens: int, options=None, cache=None, requests: list | None = None) -> Engine:
    """The engine that runs ``requests`` (all of one response length) on ``lm``, as its backend supplies it."""
    return backend_of(lm).engine(lm, max_new_tokens, options, cache, requests or [])


def _generator(backend: Backend) -> Callable | None:
    """How ``backend``'s models write replies to a chat: its own ``generate`` (None where it has none)."""
    return backend.generate if GENERATE in backend.capabilities else None


def open_to_generate(spec: ModelSpec, cache_dir=None, **options):
    """``spec``'s model, opened through its backend to write replies to chats (``generate``) for a caller of its own
    (a rephraser); ``options`` go to the backend's ``open`` (a chat API's: the ``role`` whose errors its requests
    raise). A backend that cannot, or a model without a chat template (read from its tokenizer alone), is a
    ``ConfigError`` before anything is opened."""
    backend = backend_of(spec)
    if _generator(backend) is None:
        able = [b.name for b in all_backends() if _generator(b) is not None]
        raise ConfigError(f"model {spec.name} (backend {spec.backend}) cannot write replies to a chat of messages; "
                          f"backends that can: {', '.join(able)}")
    if backend.tokenizer is not None:  # its chats go through the model's own template: checked before weights load
        tokenizer = backend.tokenizer(spec, cache_dir)
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"model {spec.name} has no chat template (a base model, say), and it is asked chats "
                              f"here (a judge's requests, a rephraser's): choose an instruction-tuned model")
    return backend.open(spec, cache_dir, **options)


def generate(lm, messages: list[dict], generation) -> list[str]:
    """The reply texts (``generation.n`` of them) to the chat ``messages`` from ``lm``, a model opened with
    ``open_to_generate``, decoded as ``generation`` (``posixlab.openai_client.Generation``) says for this request."""
    write = _generator(backend_of(lm))
    if write is None:
        raise ConfigError(f"model {getattr(lm, 'name', lm)} (backend {lm.backend}) cannot write replies to a chat")
    return write(lm, messages, generation)


def generate_many(lm, requests: list[tuple[list[dict], object]]) -> list[list[str]]:
    """Each request's reply texts, for ``requests`` of (messages, ``Generation``) to ``lm`` (opened with
    ``open_to_generate``): decoded together where its backend can (``Backend.generate_many``), else one at a time."""
    backend = backend_of(lm)
    if backend.generate_many is not None and GENERATE in backend.capabilities:
        return backend.generate_many(lm, requests)
    return [generate(lm, messages, generation) for messages, generation in requests]


def replies_and_first_tokens(lm, chats: list[list[dict]], generation, top: int = 20) -> list[tuple[str, list | None]]:
    """For each chat of ``chats`` (asked together: a backend shares their common prefix, or sends them concurrently),
    the greedy reply from ``lm`` (opened with ``open_to_generate``) and the ``top`` likeliest first tokens of a reply
    with their log-probabilities, where its backend gives them (``Backend.first_tokens``); else the reply alone
    (``generate``; a server's at most ``model.server.max_concurrency`` at once) and None. 20 is what OpenAI's
    ``top_logprobs`` allows at most."""
    backend = backend_of(lm)
    if backend.first_tokens is not None:
        return backend.first_tokens(lm, chats, generation, top)

    def reply(messages: list[dict]) -> tuple[str, None]:
        return generate(lm, messages, generation)[0], None

    if backend.remote:
        from posixlab.openai_client import map_bounded

        return map_bounded(reply, chats, lm.spec.server.max_concurrency)
    return [reply(messages) for messages in chats]


def system_folded(lm) -> bool | None:
    """Whether ``lm`` (opened with ``open_to_generate``) reads a chat's system message at the head of the first user
    turn, its chat template refusing one (in process: ``causal_lm.chat_text``; behind a server: ``OpenAIClient.chat``,
    which learns it at the server's first refusal); None where no template is known. A judge's summary and a
    rephraser's paraphrase records say it, since the model read a different prompt than the chat as written."""
    client = getattr(lm, "client", None)
    if client is not None and hasattr(client, "folds_system"):
        return client.folds_system
    tokenizer = getattr(lm, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    from posixlab.models.causal_lm import refuses_system_turn

    return refuses_system_turn(tokenizer)
