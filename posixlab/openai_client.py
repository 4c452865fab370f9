"""One client for every OpenAI-compatible server posixlab talks to: a chat model (``posixlab/chat/``), a vLLM server
(``posixlab/serving/``) and the ``openai`` rephraser (``posixlab/rephrase/``).

What is written once here, for all three:

- **the key**: read from the environment variable the user names (``api_key``), never from config; a local server
  gets a placeholder, OpenAI itself without a key is an error before any request;
- **retries**: the ``openai`` client's own (``max_retries = max_attempts - 1``): connection errors, timeouts, 408,
  409, 429 and 5xx, with exponential backoff and jitter, waiting what a ``Retry-After`` header asks. Everything else
  fails at once: asking again cannot fix a wrong key or model name;
- **the errors**: every failure becomes one ``PosixlabError`` whose message names the server, what went wrong and
  what to do (``OpenAIClient.error``): unreachable, key rejected, model not found, still failing after the retries,
  request refused, a body that is not what was asked for. A server that cannot be reached is reported after one
  request's retries, with its own error class, so the caller stops at once instead of trying every other request;
- **generation settings per request** (``Generation``): what the request body says about decoding;
- **concurrency** (``run_bounded``, ``map_bounded``): at most N requests in flight.

Which error classes a caller gets, and how the messages name its server and settings, is its ``Role``. This module is
a low layer: it imports ``posixlab.errors``, ``posixlab.prompts`` (the system-turn fold) and third-party libraries only.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass

import httpx
import openai

from posixlab.errors import ConfigError, PosixlabError, ServerResponseError, ServerUnreachableError
from posixlab.prompts import fold_system_turn

LOCAL_PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, llama.cpp, Ollama, SGLang) accept any key
OPENAI_URL = "https://api.openai.com/v1"
REJECTED_KEY = (401, 403)
RETRIED = (408, 409, 429)  # and every 5xx: what the openai client retries on its own
MESSAGE_CHARS = 300  # of a server's error message, quoted in ours


# --- who is talking --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Role:
    """The part a server plays for posixlab: how the messages name it and the settings that point at it, and which
    errors its caller raises (the rephraser's stop a paraphrase run; the others, a measurement run)."""

    server: str  # what the messages call it: "chat endpoint", "vLLM server", "rephraser endpoint"
    settings: str  # the config group of its URL, key variable and attempts: "model.server", "rephraser"
    who: str  # what talks to it, for the missing-key message: "model=chat", "the openai rephraser"
    model_setting: str  # where the model name comes from
    kept: str  # what a failure keeps, so that a rerun goes on from it
    remedy: str | None = None  # what to do about a server that does not answer; None: start it or fix the URL
    concurrency: str | None = None  # the setting that lowers the requests in flight, where there is one
    unreachable: type[PosixlabError] = ServerUnreachableError
    refused: type[PosixlabError] = ServerResponseError
    missing_key: type[PosixlabError] = ConfigError


def api_key(api_key_env: str, base_url: str | None, role: Role) -> str:
    """The key in ``$api_key_env``; the placeholder for a local server that needs none. OpenAI itself (no
    ``base_url``) without a key is ``role.missing_key`` before any request.

    >>> api_key("POSIXLAB_DOCTEST_UNSET", "http://127.0.0.1:8000/v1", Role("s", "x", "w", "m", "k"))
    'EMPTY'
    """
    key = os.environ.get(api_key_env, "")
    if key:
        return key
    if base_url is None:
        raise role.missing_key(
            f"{role.who} without {role.settings}.base_url talks to OpenAI ({OPENAI_URL}), which needs an API key in "
            f"${api_key_env} (unset or empty). Export it (export {api_key_env}=sk-...), name another variable with "
            f"{role.settings}.api_key_env=VAR, or point {role.settings}.base_url at a local OpenAI-compatible server.")
    return LOCAL_PLACEHOLDER_KEY


# --- what a request asks for ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Generation:
    """How one request decodes: its budget and sampling. ``fields`` are what the request body says; a setting at the
    API's own default (``top_p`` None, ``n`` 1, ``seed`` None) is left out, so a body, and the response cache's key
    made from it, holds only what was asked for."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    n: int = 1
    seed: int | None = None

    def fields(self) -> dict:
        """The request fields, as sent (values as given: a temperature of ``0`` stays ``0``, not ``0.0``).

        >>> Generation(10, seed=42).fields()
        {'temperature': 0.0, 'max_tokens': 10, 'seed': 42}
        >>> Generation(200, temperature=0.8, top_p=0.95, n=4, seed=7).fields()
        {'temperature': 0.8, 'top_p': 0.95, 'max_tokens': 200, 'n': 4, 'seed': 7}
        """
        fields = {"temperature": self.temperature}
        if self.top_p is not None:
            fields["top_p"] = self.top_p
        fields["max_tokens"] = self.max_tokens
        if self.n != 1:
            fields["n"] = self.n
        if self.seed is not None:
            fields["seed"] = self.seed
        return fields


def chat_body(model: str, generation: Generation, request: dict) -> dict:
    """A chat-completions body: the model, the rest of the request (``messages``; a schema's ``response_format`` or
    ``tools``), then the generation fields.

    >>> chat_body("m", Generation(5), {"messages": [{"role": "user", "content": "Hi"}]})
    {'model': 'm', 'messages': [{'role': 'user', 'content': 'Hi'}], 'temperature': 0.0, 'max_tokens': 5}
    """
    return {"model": model, **request, **generation.fields()}


# --- the client -----------------------------------------------------------------------------------------------------

class OpenAIClient:
    """An ``openai.OpenAI`` client for one server, whose every failure is one ``PosixlabError`` of its ``role``.

    ``hosted_url``: where ``base_url=None`` goes (OpenAI itself; None leaves it to the ``openai`` client, which
    reads ``$OPENAI_BASE_URL`` first). The key stays inside: not in the repr, the messages or ``base_url``."""

    def __init__(self, base_url: str | None, *, role: Role, api_key_env: str, timeout: float, max_attempts: int,
                 hosted_url: str | None = OPENAI_URL, offline: bool = False):
        self.role = role
        self.api_key_env = api_key_env
        self.max_attempts = max_attempts
        # offline: a client that sends nothing (a dry run plans with it), so it needs no key
        key = ((os.environ.get(api_key_env) or LOCAL_PLACEHOLDER_KEY) if offline
               else api_key(api_key_env, base_url, role))
        self._openai = openai.OpenAI(base_url=base_url or hosted_url, api_key=key,
                                     max_retries=max_attempts - 1, timeout=timeout)
        self.base_url = str(self._openai.base_url).rstrip("/")
        self.folds_system = False  # set once the server refused a system turn and took it folded (``chat``)
        self._fold_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIClient(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    @property
    def auth_headers(self) -> dict:
        """The ``Authorization`` header, for the server's own routes beside the OpenAI API (vLLM's ``/tokenize``)."""
        return dict(self._openai.auth_headers)

    # --- the requests -----------------------------------------------------------------------------------------------
    def models(self, *, optional: bool = False) -> list | None:
        """The served models (``GET /models``). ``optional``: None where the endpoint does not list them (some
        providers have no ``/models``); an unreachable server and a rejected key still raise."""
        try:
            return list(self._openai.models.list().data)
        except openai.APIConnectionError as exc:
            raise self.error(exc) from None
        except openai.APIStatusError as exc:
            if optional and exc.status_code not in REJECTED_KEY:
                return None
            raise self.error(exc, expected="model list") from None
        except (openai.APIError, ValueError, AttributeError, TypeError) as exc:
            if optional:
                return None
            raise self.error(exc, expected="model list") from None

    def chat(self, body: dict):
        """One ``/chat/completions`` request of ``body`` (see ``chat_body``); the reply has a ``choices[0].message``.

        A server whose chat template refuses a system turn answers a chat that opens with one with an error: HTTP 400
        from vLLM (serving Gemma 2 or Mistral-7B-Instruct-v0.1, whose templates raise), 500 from llama-cpp-python's
        server. The chat is then asked once more with the system message at the head of the first user turn, as the
        in-process models fold it (``prompts.fold_system_turn``), and, once a folded chat is answered, every later
        chat of this client is sent folded (``folds_system``; said once on stderr). A 5xx may have been the server's
        passing trouble, so there the chat as written is asked once more too, and kept if it is answered now. A
        refusal the fold does not cure is reported with both answers."""
        folded = fold_system_turn(body.get("messages") or [])
        if folded is not None and self.folds_system:
            body = {**body, "messages": folded}
        create = self._openai.chat.completions.create
        try:
            reply = create(**body)
        except openai.APIStatusError as exc:  # raised once the client's retries are spent (5xx)
            if folded is None or self.folds_system or not (exc.status_code in (400, 422) or exc.status_code >= 500):
                raise self.error(exc, expected="chat completion", model=body.get("model")) from None
            reply = self._refused_system_turn(create, body, folded, exc)
        except (openai.APIError, ValueError) as exc:
            raise self.error(exc, expected="chat completion", model=body.get("model")) from None
        choices = getattr(reply, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            raise self.malformed(f"no choices[0].message in {str(reply)[:200]!r}", "chat completion")
        return reply

    def _refused_system_turn(self, create: Callable, body: dict, folded: list[dict], refusal: openai.APIStatusError):
        """``body`` (opening with a system turn) was refused with ``refusal``: its reply asked with ``folded``."""
        model = body.get("model")
        try:
            reply = create(**{**body, "messages": folded})
        except (openai.APIError, ValueError) as again:
            first = self.error(refusal, expected="chat completion", model=model)
            raise type(first)(f"{first} Asked again with the system message at the head of the first user turn, it "
                              f"answered: {self.error(again, expected='chat completion')}") from None
        if refusal.status_code >= 500:  # a refusal, or trouble that has passed? the chat as written once more
            try:
                return create(**body)
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    raise self.error(exc, expected="chat completion", model=model) from None
            except (openai.APIError, ValueError) as exc:
                raise self.error(exc, expected="chat completion", model=model) from None
        self._learn_to_fold(refusal)
        return reply

    def _learn_to_fold(self, refusal: openai.APIStatusError) -> None:
        with self._fold_lock:
            if self.folds_system:
                return
            self.folds_system = True
        print(f"posixlab: the {self.role.server} at {self.base_url} refused a chat that opens with a system turn "
              f"(HTTP {refusal.status_code}: {server_message(refusal.body, refusal.message)}); its chats are sent with "
              f"the system message at the head of the first user turn, as the in-process models do", file=sys.stderr)

    def complete(self, **request):
        """One ``/completions`` request (vLLM: prompts as token ids)."""
        return self._send(lambda: self._openai.completions.create(**request), "completion", request.get("model"))

    def _send(self, create: Callable, expected: str, model: str | None):
        try:
            return create()
        except (openai.APIError, ValueError) as exc:  # raised once the client's retries are spent
            raise self.error(exc, expected=expected, model=model) from None

    # --- the errors -------------------------------------------------------------------------------------------------
    def error(self, exc: Exception, *, expected: str = "answer", model: str | None = None,
              attempts: int | None = None) -> PosixlabError:
        """The one error for what went wrong: ``exc`` from the ``openai`` client (or ``httpx``, on the server's own
        routes); ``expected`` names what a good body is; ``attempts``: the tries made, when not ``max_attempts``."""
        if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):  # timeouts too
            return self.unreachable(exc, attempts or self.max_attempts)
        if isinstance(exc, openai.APIStatusError):
            return self.status_error(exc.status_code, server_message(exc.body, exc.message), model)
        return self.malformed(f"{type(exc).__name__}: {exc}", expected)

    def unreachable(self, exc: Exception, attempts: int) -> PosixlabError:
        cause = exc.__cause__ or exc  # the connection's own error (refused, timed out), not "Connection error."
        r = self.role
        remedy = r.remedy or f"Start the server or fix {r.settings}.base_url"
        return r.unreachable(
            f"cannot reach the {r.server} at {self.base_url} ({type(cause).__name__}: {cause}; {_attempts(attempts)}). "
            f"{remedy}; {r.kept}.")

    def status_error(self, status: int, message: str, model: str | None = None) -> PosixlabError:
        r = self.role
        what = f"the {r.server} at {self.base_url}"
        if status in REJECTED_KEY:
            return r.refused(f"{what} rejected the API key (HTTP {status}: {message}). Check the key in "
                             f"${self.api_key_env} ({r.settings}.api_key_env names the variable).")
        if status in RETRIED or status >= 500:
            lower = f", lower {r.concurrency}" if r.concurrency else ""
            every = f"{'all ' if self.max_attempts > 1 else ''}{_attempts(self.max_attempts)}"
            return r.refused(f"{what} answered HTTP {status} ({message}) to {every}. "
                             f"Wait and run again ({r.kept}){lower}, or raise {r.settings}.max_attempts.")
        if status == 404:
            hint = (f"Check the model name ({model!r}, {r.model_setting}) and {r.settings}.base_url." if model else
                    f"Is {r.settings}.base_url an OpenAI-compatible /v1 root?")
            return r.refused(f"{what} answered HTTP 404: {message}. {hint}")
        return r.refused(f"{what} answered HTTP {status}: {message}. It refused the request as sent; check the "
                         f"{r.settings} settings{f' (model {model!r})' if model else ''}.")

    def malformed(self, what: str, expected: str) -> PosixlabError:
        r = self.role
        return r.refused(f"the {r.server} at {self.base_url} answered with a body that is not a {expected} ({what}). "
                         f"Is {r.settings}.base_url an OpenAI-compatible /v1 root?")


def server_message(body: object, fallback: str) -> str:
    """What a server said in an error body, shortened: OpenAI and vLLM send ``{"error": {"message"}}`` (which the
    ``openai`` client unwraps to ``{"message"}``), FastAPI servers ``{"detail"}``; anything else as JSON or text.

    >>> server_message({"error": {"message": "slow down"}}, "Error code: 429")
    'slow down'
    >>> server_message({"message": "model crashed", "type": "x"}, ""), server_message({"detail": "Not Found"}, "")
    ('model crashed', 'Not Found')
    >>> server_message({"code": 7}, ""), server_message("  busy \\n", ""), server_message(None, "Error code: 502")
    ('{"code": 7}', 'busy', 'Error code: 502')
    """
    if isinstance(body, dict):
        error = body.get("error")
        body = error.get("message") if isinstance(error, dict) else body.get("message") or body.get("detail") or \
            json.dumps(body)
    text = str(body).strip() if body else fallback
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."


def _attempts(n: int) -> str:
    return f"{n} attempt{'s' if n != 1 else ''}"


# --- concurrency ----------------------------------------------------------------------------------------------------

def run_bounded(call: Callable, items: Iterable, limit: int, *, late: Callable | None = None) -> Iterator[tuple]:
    """``(item, call(item))`` for every item, yielded as each call returns, with at most ``limit`` calls in flight,
    started in the order of ``items`` (so a run killed mid-way has at most ``limit`` calls unanswered).

    The first call that raises stops the work: nothing more is started, the calls in flight are let finish, and then
    that exception is raised, once. What the calls in flight return after it goes to ``late(item, result)`` (a cache
    keeps it), not to the caller's loop.

    >>> [item for item, result in run_bounded(lambda x: x * x, [3, 1, 2], limit=1)]
    [3, 1, 2]
    """
    items = list(items)
    if not items:
        return
    queue = iter(items)
    with ThreadPoolExecutor(max_workers=min(limit, len(items))) as pool:
        flying = {}

        def launch() -> None:
            for item in queue:
                flying[pool.submit(call, item)] = item
                if len(flying) >= limit:
                    return

        launch()
        failure = None
        while flying:
            finished, _ = wait(flying, return_when=FIRST_COMPLETED)
            for future in finished:
                item = flying.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - the first failure stops the work, after the rest land
                    failure = failure or exc
                    continue
                if failure is None:
                    yield item, result
                elif late is not None:
                    late(item, result)
            if failure is None:
                launch()
        if failure is not None:
            raise failure


def map_bounded(call: Callable, items: Iterable, limit: int) -> list:
    """``[call(item) for item in items]``, in that order, with at most ``limit`` calls in flight; the first failure
    is raised once the calls in flight are back (``run_bounded``).

    >>> map_bounded(lambda x: x * x, [3, 1, 2], limit=2)
    [9, 1, 4]
    """
    items = list(items)
    results = [None] * len(items)
    for (k, _), result in run_bounded(lambda pair: call(pair[1]), list(enumerate(items)), limit):
        results[k] = result
    return results
