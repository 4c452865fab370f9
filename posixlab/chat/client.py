"""One chat-completions request to an OpenAI-compatible endpoint, and what came back.

Any server that speaks ``/v1/chat/completions`` works: OpenAI, Azure, the OpenAI-compatible endpoints of other
providers, Ollama, llama.cpp's server, vLLM, SGLang. The request body is built by ``ChatModel.body`` and sent as it
is; the answer keeps what the server said about itself (the model that answered, ``system_fingerprint``) and the
token usage it reported.

Retrying is the ``openai`` client's own (``max_retries = max_attempts - 1``): connection errors, timeouts, 408, 409,
429 and 5xx, with exponential backoff and jitter, waiting what a ``Retry-After`` header asks (up to 60 s). Everything
else fails at once, and every failure is a ``PosixlabError`` with one message that says what to do: the run stops
there (``ChatEngine``), keeping every answer it already has. The API key is read from the environment variable
``api_key_env`` names and never leaves this client (not in the identity, the results, the logs or the repr).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import openai

from posixlab.errors import ConfigError, ServerResponseError, ServerUnreachableError

LOCAL_PLACEHOLDER_KEY = "EMPTY"  # local servers (llama.cpp, vLLM, Ollama) accept any key
OPENAI_URL = "https://api.openai.com/v1"


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
    key = os.environ.get(api_key_env, "")
    if key:
        return key
    if base_url is None:
        raise ConfigError(f"model=chat without model.server.base_url talks to OpenAI ({OPENAI_URL}), which needs an "
                          f"API key in ${api_key_env} (unset or empty). Export it, name another variable with "
                          f"model.server.api_key_env=VAR, or point model.server.base_url at a local server.")
    return LOCAL_PLACEHOLDER_KEY


class ChatClient:
    def __init__(self, base_url: str | None, *, api_key_env: str, timeout: float, max_attempts: int):
        self.api_key_env = api_key_env
        self.max_attempts = max_attempts
        self._client = openai.OpenAI(base_url=base_url or OPENAI_URL, api_key=api_key(api_key_env, base_url),
                                     max_retries=max_attempts - 1, timeout=timeout)
        self.base_url = str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    def models(self) -> list[str] | None:
        """The served model ids (``GET /models``), or None where an endpoint does not list them. Asked once before
        any work: a dead endpoint or a rejected key stops the run here, before anything is built."""
        try:
            return [m.id for m in self._client.models.list().data]
        except openai.APIConnectionError as exc:
            raise self._unreachable(exc) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise self._rejected(exc) from None
            return None  # some providers have no /models; the first request will tell
        except (openai.APIError, ValueError, AttributeError, TypeError):
            return None

    def complete(self, body: dict) -> ChatAnswer:
        try:
            reply = self._client.chat.completions.create(**body)
        except openai.APIConnectionError as exc:  # includes timeouts; raised once the retries are spent
            raise self._unreachable(exc) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise self._rejected(exc) from None
            if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                raise ServerResponseError(
                    f"the endpoint {self.base_url} answered HTTP {exc.status_code} ({_message(exc)}) to all "
                    f"{self.max_attempts} attempts. Wait and run again (every answer so far is cached), lower "
                    f"model.server.max_concurrency, or raise model.server.max_attempts.") from None
            hint = (f" Check the model name ({body.get('model')!r}) and model.server.base_url."
                    if exc.status_code == 404 else " The endpoint refused the request as sent.")
            raise ServerResponseError(f"the endpoint {self.base_url} answered HTTP {exc.status_code}: "
                                      f"{_message(exc)}.{hint}") from None
        except (openai.APIError, ValueError) as exc:  # a body that is not a chat completion
            raise self._malformed(f"{type(exc).__name__}: {exc}") from None
        return self._answer(reply)

    def _answer(self, reply) -> ChatAnswer:
        choices = getattr(reply, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            raise self._malformed(f"no choices[0].message in {str(reply)[:200]!r}")
        usage = getattr(reply, "usage", None)
        message = choices[0].message
        text, tool = message.content or "", None
        calls = getattr(message, "tool_calls", None) or []
        if calls and getattr(calls[0], "function", None) is not None:  # tools mode: the call's arguments are the answer
            text, tool = calls[0].function.arguments or "", calls[0].function.name
        return ChatAnswer(text=text, tool=tool, finish_reason=choices[0].finish_reason,
                          served_model=getattr(reply, "model", None),
                          system_fingerprint=getattr(reply, "system_fingerprint", None),
                          prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                          completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0))

    def _malformed(self, what: str) -> ServerResponseError:
        return ServerResponseError(f"the endpoint {self.base_url} answered with a body that is not a chat completion "
                                   f"({what}). Is model.server.base_url an OpenAI-compatible /v1 root?")

    def _rejected(self, exc: openai.APIStatusError) -> ServerResponseError:
        return ServerResponseError(f"the endpoint {self.base_url} rejected the API key (HTTP {exc.status_code}: "
                                   f"{_message(exc)}). Check the key in ${self.api_key_env} (model.server.api_key_env "
                                   f"names the variable).")

    def _unreachable(self, exc: Exception) -> ServerUnreachableError:
        cause = exc.__cause__ or exc
        return ServerUnreachableError(
            f"cannot reach the chat endpoint {self.base_url} ({type(cause).__name__}: {cause}; {self.max_attempts} "
            f"attempts). Start the server or fix model.server.base_url; every answer so far is kept in the response "
            f"cache, so a rerun sends only the rest.")


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body  # OpenAI and vLLM: {"error": {"message"}} or {"message"}; FastAPI servers: {"detail"}
    if isinstance(body, dict):
        error = body.get("error")
        body = error.get("message") if isinstance(error, dict) else body.get("message") or body.get("detail") or \
            json.dumps(body)
    text = str(body or exc.message)
    return text if len(text) < 300 else text[:300] + "..."
