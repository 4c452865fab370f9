"""The ``openai`` rephraser backend: any OpenAI-compatible chat endpoint (OpenAI itself, vLLM, llama.cpp, Ollama).

The paper wrote its paraphrases with GPT-3.5-Turbo through this API; pointing ``base_url`` at a local server gives
the same code path offline. One reply is one ``chat.completions`` call with its own seed: local servers ignore the
API's ``n`` parameter, and separate calls make the seeds explicit.

Retrying is the ``openai`` client's own (``max_retries = max_attempts - 1``): it retries connection errors,
timeouts, 408, 409, 429 and 5xx with exponential backoff and jitter (0.5 s doubling to 8 s), honouring the server's
``Retry-After``. Other 4xx answers fail at once: asking again cannot fix a wrong key or model name. A request whose
retries are all spent on a connection error raises ``EndpointUnreachableError``, which stops the whole run at once
(``variants/paraphrase.py``): a dead server is reported once, not retried question by question. The API key is read
from the environment variable named by ``api_key_env`` and is kept out of the identity, the name and the repr.
"""

from __future__ import annotations

import json
import os
import openai

from posixlab.errors import EndpointUnreachableError, RephraserError
from posixlab.rephrase.base import Rephraser

LOCAL_PLACEHOLDER_KEY = "EMPTY"  # vLLM, llama.cpp and Ollama accept any key


class OpenAIRephraser(Rephraser):
    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float = 0.8, top_p: float = 0.95, timeout: float = 60, max_attempts: int = 6,
                 name: str | None = None):
        if max_attempts < 1:
            raise RephraserError(f"rephraser.max_attempts must be at least 1, got {max_attempts}")
        key = os.environ.get(api_key_env, "")
        if not key:
            if base_url is None:
                raise RephraserError(
                    f"the openai rephraser needs an API key in ${api_key_env}, which is unset or empty. "
                    f"Export it (export {api_key_env}=sk-...), or set rephraser.base_url to a local "
                    f"OpenAI-compatible server."
                )
            key = LOCAL_PLACEHOLDER_KEY
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.top_p = top_p
        self.max_attempts = max_attempts
        self.name = name or f"openai:{model}"
        self.identity = {"backend": "openai", "model": model, "base_url": base_url,
                         "temperature": temperature, "top_p": top_p}
        self._client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=max_attempts - 1, timeout=timeout)

    def __repr__(self) -> str:
        return (f"OpenAIRephraser(model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key_env={self.api_key_env!r}, temperature={self.temperature}, top_p={self.top_p})")

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def chat(self, messages: list[dict], *, seed: int, n: int, max_tokens: int) -> list[str]:
        return [self._complete(messages, seed=seed + i, max_tokens=max_tokens) for i in range(n)]

    def _complete(self, messages: list[dict], *, seed: int, max_tokens: int) -> str:
        try:
            reply = self._client.chat.completions.create(
                model=self.model, messages=messages, seed=seed, temperature=self.temperature, top_p=self.top_p,
                max_tokens=max_tokens)
        except openai.APIConnectionError as exc:  # includes APITimeoutError; raised once the retries are spent
            raise EndpointUnreachableError(
                f"cannot reach the rephraser endpoint {self.endpoint} ({_describe(exc)}, {self.max_attempts} "
                f"attempts). Start the server or fix rephraser.base_url; the paraphrases written so far are kept."
            ) from None
        except openai.APIStatusError as exc:
            if _retried(exc.status_code):  # the client tried it max_attempts times
                raise RephraserError(
                    f"the rephraser endpoint {self.endpoint} answered HTTP {exc.status_code} "
                    f"({_server_message(exc)}) to all {self.max_attempts} attempts. Wait and run again, or raise "
                    f"rephraser.max_attempts."
                ) from None
            raise RephraserError(self._fatal_status_message(exc)) from None
        return reply.choices[0].message.content or ""

    def _fatal_status_message(self, exc: openai.APIStatusError) -> str:
        what = f"the rephraser endpoint {self.endpoint} answered HTTP {exc.status_code}: {_server_message(exc)}."
        if exc.status_code in (401, 403):
            return f"{what} Check the API key in ${self.api_key_env}."
        if exc.status_code == 404:
            return f"{what} Check rephraser.model ({self.model!r}) and rephraser.base_url."
        return f"{what} The request was refused; check the rephraser settings (model {self.model!r})."


def _retried(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body  # OpenAI and vLLM send {"message": ...}; FastAPI-based servers {"detail": ...}
    if isinstance(body, dict):
        return str(body.get("message") or body.get("detail") or json.dumps(body))[:300]
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return exc.message


def _describe(exc: openai.APIError) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return exc.message.rstrip(".").lower()
