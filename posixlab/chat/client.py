"""One chat-completions request to an OpenAI-compatible endpoint, and what came back.

Any server that speaks ``/v1/chat/completions`` works: OpenAI, Azure, the OpenAI-compatible endpoints of other
providers, Ollama, llama.cpp's server, vLLM, SGLang. The request body is built by ``ChatModel.body`` and sent as it
is; the answer keeps what the server said about itself (the model that answered, ``system_fingerprint``) and the
token usage it reported.

Retrying, the key and the errors are the shared OpenAI-compatible client's (``posixlab/openai_client.py``): the
``openai`` client's own retries (``max_retries = max_attempts - 1``) on connection errors, timeouts, 408, 409, 429 and
5xx, and one ``PosixlabError`` per failure with one message that says what to do: the run stops there
(``ChatEngine``), keeping every answer it already has. The API key is read from the environment variable
``api_key_env`` names and never leaves the client (not in the identity, the results, the logs or the repr).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from posixlab import openai_client
from posixlab.openai_client import OPENAI_URL, OpenAIClient, Role

# how the shared client's messages name a chat endpoint and its settings
CHAT = Role(server="chat endpoint", settings="model.server", who="model=chat",
            model_setting="model.name or model.server.served_name",
            kept="every answer so far is kept in the response cache, so a rerun sends only the rest",
            concurrency="model.server.max_concurrency")


@dataclass(frozen=True)
class ChatAnswer:
    """One response: its text and what the server reported with it."""

    text: str  # the message's content; in tools mode, the first tool call's arguments (JSON text)
    finish_reason: str | None = None
    tool: str | None = None  # the function the model called (tools mode)
    served_model: str | None = None  # the response's ``model`` field: what actually answered
    system_fingerprint: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = field(default=False, compare=False)  # read from the response cache, not sent this run

    def to_dict(self) -> dict:
        return {"text": self.text, "tool": self.tool, "finish_reason": self.finish_reason,
                "served_model": self.served_model,
                "system_fingerprint": self.system_fingerprint, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}

    @classmethod
    def from_dict(cls, d: dict, cached: bool = False) -> ChatAnswer:
        return cls(**{"tool": None, **d}, cached=cached)


def api_key(api_key_env: str, base_url: str | None) -> str:
    """The key from the environment; a placeholder for a local server that needs none. A hosted endpoint (no
    ``base_url``: OpenAI itself) without a key is a config error before any request."""
    return openai_client.api_key(api_key_env, base_url, CHAT)


class ChatClient:
    """``role``: whose errors a failure raises and how its messages name the settings (a run's chat model; the
    rephraser's endpoint, ``posixlab/rephrase/openai_backend.py``); ``hosted_url``: where ``base_url=None`` goes."""

    def __init__(self, base_url: str | None, *, api_key_env: str, timeout: float, max_attempts: int,
                 role: Role = CHAT, hosted_url: str | None = OPENAI_URL, offline: bool = False):
        self.api_key_env = api_key_env
        self.max_attempts = max_attempts
        self._api = OpenAIClient(base_url, role=role, api_key_env=api_key_env, timeout=timeout,
                                 max_attempts=max_attempts, hosted_url=hosted_url, offline=offline)
        self.base_url = self._api.base_url  # part of every response cache key: keep it as it has always been

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    @property
    def folds_system(self) -> bool:
        """Whether the server refused a chat opening with a system turn and its chats now go folded
        (``OpenAIClient.chat``)."""
        return self._api.folds_system

    def models(self) -> list[str] | None:
        """The served model ids (``GET /models``), or None where an endpoint does not list them. Asked once before
        any work: a dead endpoint or a rejected key stops the run here, before anything is built."""
        listed = self._api.models(optional=True)
        try:
            return None if listed is None else [m.id for m in listed]
        except AttributeError:
            return None

    def complete(self, body: dict) -> ChatAnswer:
        """One chat completion of ``body`` (``ChatModel.body``: sent as it is, the cache keyed on it)."""
        return _answer(self._api.chat(body))

    def complete_with_first_tokens(self, body: dict) -> tuple[ChatAnswer, list[tuple[str, float]] | None]:
        """One chat completion of ``body`` (which asks ``logprobs`` and ``top_logprobs``), and the first token's
        alternatives the server sent as (token, log-probability); None where it sent none (not every server does)."""
        reply = self._api.chat(body)
        logprobs = getattr(reply.choices[0], "logprobs", None)
        content = getattr(logprobs, "content", None) or []
        top = getattr(content[0], "top_logprobs", None) if content else None
        tokens = [(t.token, float(t.logprob)) for t in top or [] if getattr(t, "token", None) is not None]
        return _answer(reply), tokens or None


def _answer(reply) -> ChatAnswer:
    usage = getattr(reply, "usage", None)
    choice = reply.choices[0]  # the shared client checked that there is one, with a message
    message = choice.message
    text, tool = message.content or "", None
    calls = getattr(message, "tool_calls", None) or []
    if calls and getattr(calls[0], "function", None) is not None:  # tools mode: the call's arguments are the answer
        text, tool = calls[0].function.arguments or "", calls[0].function.name
    return ChatAnswer(text=text, tool=tool, finish_reason=choice.finish_reason,
                      served_model=getattr(reply, "model", None),
                      system_fingerprint=getattr(reply, "system_fingerprint", None),
                      prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                      completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0))
