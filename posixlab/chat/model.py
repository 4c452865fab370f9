"""A model behind a chat API (``model=chat``): it reads messages and returns text, nothing more.

It can **generate** (the greedy answer at temperature 0, seed 42 by default, both sent explicitly) but not
**score**: a chat endpoint gives no log-probabilities of a given continuation, so ψ and ``probability=label_probs``
are config errors before any request (``posixlab/backends.py``). Each prompt is sent as one user message; the server
applies its own chat template (``chat_template`` does not apply).

``open_chat`` asks the endpoint for its models once before any work, so a dead endpoint or a rejected key is one
message at the start, not a failure per request.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from posixlab.chat.client import ChatClient, api_key
from posixlab.errors import ConfigError
from posixlab.models.loading import ModelSpec
from posixlab.openai_client import OPENAI_URL, Generation, Role, chat_body, map_bounded


class ChatModel:
    backend = "chat"  # its capabilities: posixlab/chat/backend.py

    def __init__(self, spec: ModelSpec, client: ChatClient, listed: list[str] | None):
        self.spec = spec
        self.client = client
        self.name = spec.name
        self.model = spec.server.served_name or spec.name  # what the request's "model" field says
        self.listed = listed
        # what the answers depend on, as far as the caller can know; the server's own report (the served model,
        # system_fingerprint) comes with every answer and goes into the records and the summary
        self.identity = {"backend": "chat", "name": spec.name, "model": self.model, "base_url": client.base_url,
                         "temperature": spec.server.temperature, "seed": spec.server.seed}
        self.forward_tokens = 0  # nothing runs here; the summary counts the endpoint's tokens instead
        self.requests_sent = 0  # by every engine of the run (model.server.max_requests caps the sum)
        self.eos_ids = frozenset()
        self.max_context = None

    def __repr__(self) -> str:
        return f"ChatModel(model={self.model!r}, base_url={self.client.base_url!r})"

    def body(self, text: str, max_new_tokens: int, structured=None) -> dict:
        """The request body for one prompt: every parameter that matters is in it, so the cache key holds them.
        ``structured`` (a ``ClassifierSchema``): the messages, ``response_format`` or ``tools`` that ``instructor``
        sends for it, in its mode."""
        messages = [{"role": "user", "content": text}]
        extra = structured.request_kwargs(messages) if structured is not None else {"messages": messages}
        generation = Generation(max_new_tokens, temperature=self.spec.server.temperature, seed=self.spec.server.seed)
        return chat_body(self.model, generation, extra)

    def generate(self, messages: list[dict], generation: Generation) -> list[str]:
        """``generation.n`` reply texts to ``messages``, decoded as ``generation`` says: one request per reply, reply
        ``i`` seeded ``seed + i`` (local servers ignore the API's ``n``; separate requests make every seed explicit),
        at most ``max_concurrency`` in flight; the replies come back in seed order. Not cached: a caller of its own
        (a rephraser) keeps what it needs."""
        one = [replace(generation, n=1, seed=None if generation.seed is None else generation.seed + i)
               for i in range(generation.n)]
        return map_bounded(lambda g: self.client.complete(chat_body(self.model, g, {"messages": messages})).text, one,
                           self.spec.server.max_concurrency)

    def reply_and_first_tokens(self, messages: list[dict], generation: Generation, top: int) -> tuple[str, list | None]:
        """The reply to ``messages`` (one request, not cached) and its first token's ``top`` likeliest alternatives as
        (token, log-probability), as the server reports them (``top_logprobs``; None where it reports none)."""
        body = chat_body(self.model, replace(generation, n=1), {"messages": messages, "logprobs": True,
                                                               "top_logprobs": top})
        answer, tokens = self.client.complete_with_first_tokens(body)
        return answer.text, tokens

    def close(self) -> None:
        pass


def chat_model(name: str, base_url: str | None = None, **server) -> ModelSpec:
    """A model behind a chat API, for the Python API (``posixlab.classify(..., model=chat_model(...))``): ``name``
    the API's model name; ``base_url`` None for OpenAI itself; ``server``: any other ``model.server`` setting
    (``api_key_env``, ``max_concurrency``, ``temperature``, ``seed``, ``max_requests``, the prices).

    >>> spec = chat_model("gpt-4o-2024-08-06", max_concurrency=4)
    >>> spec.backend, spec.server.api_key_env, spec.server.max_concurrency, spec.server.seed
    ('chat', 'OPENAI_API_KEY', 4, 42)
    """
    from posixlab.models.loading import ServerSettings

    settings = {"api_key_env": "OPENAI_API_KEY", "request_timeout": 120, "max_attempts": 4, **server}
    return ModelSpec(name, "api", name, backend="chat", server=ServerSettings(base_url=base_url, **settings))


def check_chat(spec: ModelSpec) -> None:
    """The chat backend's settings, before anything is built or sent."""
    s = spec.server
    if not spec.name:
        raise ConfigError("model=chat needs the API's model name: model.name=NAME (e.g. model.name=gpt-4o-2024-08-06; "
                          "for a local server, the name it serves, or any name with model.server.served_name)")
    if s.launch:
        raise ConfigError("model.server.launch starts a vLLM server (model.backend=vllm); for a chat endpoint give "
                          "model.server.base_url of a running server")
    for key in ("max_concurrency", "max_attempts"):
        if getattr(s, key) < 1:
            raise ConfigError(f"model.server.{key} must be at least 1, got {getattr(s, key)}")
    if s.max_requests is not None and s.max_requests < 0:
        raise ConfigError(f"model.server.max_requests must be 0 or more (or null: no cap), got {s.max_requests}")
    if s.temperature < 0:
        raise ConfigError(f"model.server.temperature must be 0 or more, got {s.temperature}")
    for key in ("price_input_per_million", "price_output_per_million"):
        if getattr(s, key) is not None and getattr(s, key) < 0:
            raise ConfigError(f"model.server.{key} must be 0 or more, got {getattr(s, key)}")
    if s.base_url is not None and not str(s.base_url).startswith(("http://", "https://")):
        raise ConfigError(f"model.server.base_url must be an http(s) URL ending in /v1, got {s.base_url!r}")


def check_key(spec: ModelSpec) -> None:
    """OpenAI itself without a key: a config error before any work, not a 401 later (a dry run needs none)."""
    api_key(spec.server.api_key_env, spec.server.base_url)


def open_chat(spec: ModelSpec, cache_dir=None, *, role: Role | None = None,
              hosted_url: str | None = OPENAI_URL, offline: bool = False) -> ChatModel:
    """The model of a run (checked, and the endpoint asked for its models before any work), or, with a ``role``, the
    model of a caller of its own (the rephraser): its settings checked by the caller, its failures the role's errors,
    nothing sent before its first request (a rerun whose paraphrases are all on file never reaches the endpoint).
    ``offline``: the model a dry run plans with: checked, but no key asked for and nothing sent, not even the model
    list (the plan's cache keys hold the base URL and the request bodies, which need no endpoint)."""
    if role is not None:
        client = ChatClient(spec.server.base_url, api_key_env=spec.server.api_key_env, role=role,
                            timeout=spec.server.request_timeout, max_attempts=spec.server.max_attempts,
                            hosted_url=hosted_url, offline=offline)
        return ChatModel(spec, client, None)
    check_chat(spec)
    client = ChatClient(spec.server.base_url, api_key_env=spec.server.api_key_env,
                        timeout=spec.server.request_timeout, max_attempts=spec.server.max_attempts, offline=offline)
    if offline:
        print(f"posixlab: dry run: nothing is sent to the chat API at {client.base_url}", file=sys.stderr)
        return ChatModel(spec, client, None)
    listed = client.models()  # the endpoint answers and accepts the key, or the run stops here
    model = spec.server.served_name or spec.name
    if listed is not None and model not in listed:
        # a warning, not an error: providers route aliases and snapshots that /models does not list
        print(f"posixlab: warning: {client.base_url} does not list {model!r} among its models "
              f"({', '.join(listed[:8])}{' ...' if len(listed) > 8 else ''}); sending it anyway", file=sys.stderr)
    print(f"posixlab: {spec.name} behind the chat API at {client.base_url} (temperature {spec.server.temperature}, "
          f"seed {spec.server.seed})", file=sys.stderr)
    return ChatModel(spec, client, listed)
