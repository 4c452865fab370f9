"""The shared OpenAI-compatible client (posixlab/openai_client.py), by hand: the key, the error each failure becomes,
the generation fields a request sends, and the concurrency limiter's bound and order. No server: the ``openai``
client's exceptions are built here as it builds them; the servers are in test_chat.py, test_rephrase_openai.py and
test_vllm.py."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from posixlab.chat.client import CHAT
from posixlab.errors import (ConfigError, EndpointUnreachableError, RephraserError, ServerResponseError,
                             ServerUnreachableError)
from posixlab.openai_client import (LOCAL_PLACEHOLDER_KEY, Generation, OpenAIClient, api_key, chat_body, map_bounded,
                                    run_bounded)
from posixlab.rephrase.openai_backend import REPHRASER
from posixlab.serving.client import VLLM

try:
    import httpx2 as transport  # the HTTP library of the openai client 3.x
except ImportError:  # pragma: no cover - earlier openai clients use httpx
    transport = httpx

URL = "http://127.0.0.1:8000/v1"
SECRET = "sk-secret-never-shown-42"


# --- the key ---------------------------------------------------------------------------------------------------------

def test_the_key_is_read_from_the_variable_named(monkeypatch):
    monkeypatch.setenv("POSIXLAB_TEST_KEY", SECRET)
    assert api_key("POSIXLAB_TEST_KEY", None, CHAT) == SECRET
    monkeypatch.setenv("POSIXLAB_TEST_KEY", "")  # empty counts as unset
    assert api_key("POSIXLAB_TEST_KEY", URL, CHAT) == LOCAL_PLACEHOLDER_KEY == "EMPTY"


@pytest.mark.parametrize("role, error, setting", [(CHAT, ConfigError, "model.server"),
                                                  (REPHRASER, RephraserError, "rephraser")])
def test_openai_itself_without_a_key_is_the_roles_error(monkeypatch, role, error, setting):
    monkeypatch.delenv("POSIXLAB_TEST_KEY", raising=False)
    with pytest.raises(error) as raised:
        api_key("POSIXLAB_TEST_KEY", None, role)
    message = str(raised.value)
    assert "needs an API key in $POSIXLAB_TEST_KEY" in message and "export POSIXLAB_TEST_KEY=sk-..." in message
    assert f"{setting}.base_url" in message and f"{setting}.api_key_env=VAR" in message


# --- the errors ------------------------------------------------------------------------------------------------------

def client(role=CHAT, max_attempts: int = 3) -> OpenAIClient:
    return OpenAIClient(URL, role=role, api_key_env="POSIXLAB_TEST_KEY", timeout=5, max_attempts=max_attempts)


def status(code: int, body: object) -> openai.APIStatusError:
    """The error the openai client raises for an HTTP status (``_make_status_error``: the body's "error" unwrapped)."""
    response = transport.Response(code, request=transport.Request("POST", f"{URL}/chat/completions"))
    return openai.APIStatusError(f"Error code: {code}", response=response, body=body)


def refused_connection() -> openai.APIConnectionError:
    exc = openai.APIConnectionError(request=transport.Request("POST", f"{URL}/chat/completions"))
    exc.__cause__ = ConnectionRefusedError(111, "Connection refused")  # as the client chains the transport's error
    return exc


def test_an_unreachable_server_names_the_cause_the_attempts_and_the_setting():
    error = client(max_attempts=4).error(refused_connection())
    assert isinstance(error, ServerUnreachableError)
    assert str(error) == (f"cannot reach the chat endpoint at {URL} (ConnectionRefusedError: [Errno 111] Connection "
                          f"refused; 4 attempts). Start the server or fix model.server.base_url; every answer so far "
                          f"is kept in the response cache, so a rerun sends only the rest.")
    # vLLM's own routes (httpx, one attempt, no retries)
    error = client(VLLM).error(httpx.ConnectError("[Errno 111] Connection refused"), attempts=1)
    assert isinstance(error, ServerUnreachableError)
    assert str(error).startswith(f"cannot reach the vLLM server at {URL} (ConnectError: [Errno 111] Connection "
                                 f"refused; 1 attempt). Start it (README, \"vLLM servers\")")
    assert "model.server.launch=true" in str(error)


def test_a_rejected_key_names_the_variable_never_the_key(monkeypatch):
    monkeypatch.setenv("POSIXLAB_TEST_KEY", SECRET)
    for code in (401, 403):
        error = client().error(status(code, {"message": "Incorrect API key provided"}))
        assert isinstance(error, ServerResponseError)
        assert str(error) == (f"the chat endpoint at {URL} rejected the API key (HTTP {code}: Incorrect API key "
                              f"provided). Check the key in $POSIXLAB_TEST_KEY (model.server.api_key_env names the "
                              f"variable).")
        assert SECRET not in str(error) and SECRET not in repr(client())


def test_a_status_still_failing_after_the_retries_says_wait_or_raise_the_attempts():
    for code in (408, 409, 429, 500, 503):
        error = client().error(status(code, {"message": "slow down"}))
        assert str(error) == (f"the chat endpoint at {URL} answered HTTP {code} (slow down) to all 3 attempts. Wait "
                              f"and run again (every answer so far is kept in the response cache, so a rerun sends "
                              f"only the rest), lower model.server.max_concurrency, or raise "
                              f"model.server.max_attempts.")
    # the rephraser has no concurrency to lower; one attempt is said as one
    error = client(REPHRASER, max_attempts=1).error(status(429, {"message": "slow down"}))
    assert str(error) == (f"the rephraser endpoint at {URL} answered HTTP 429 (slow down) to 1 attempt. Wait and run "
                          f"again (the paraphrases written so far are kept), or raise rephraser.max_attempts.")


def test_a_model_not_found_and_a_refused_request():
    error = client().error(status(404, {"message": "The model `gpt-5x` does not exist"}), model="gpt-5x")
    assert str(error) == (f"the chat endpoint at {URL} answered HTTP 404: The model `gpt-5x` does not exist. Check "
                          f"the model name ('gpt-5x', model.name or model.server.served_name) and "
                          f"model.server.base_url.")
    error = client(VLLM).error(status(404, {"detail": "Not Found"}))  # /models of a wrong URL: no model asked for
    assert str(error) == (f"the vLLM server at {URL} answered HTTP 404: Not Found. Is model.server.base_url an "
                          f"OpenAI-compatible /v1 root?")
    error = client(REPHRASER).error(status(400, {"message": "max_tokens too large"}), model="m")
    assert isinstance(error, RephraserError) and not isinstance(error, EndpointUnreachableError)
    assert str(error) == (f"the rephraser endpoint at {URL} answered HTTP 400: max_tokens too large. It refused the "
                          f"request as sent; check the rephraser settings (model 'm').")


def test_a_body_that_is_not_what_was_asked_for():
    error = client().error(ValueError("Expecting value: line 1 column 2 (char 1)"), expected="chat completion")
    assert isinstance(error, ServerResponseError)
    assert str(error) == (f"the chat endpoint at {URL} answered with a body that is not a chat completion "
                          f"(ValueError: Expecting value: line 1 column 2 (char 1)). Is model.server.base_url an "
                          f"OpenAI-compatible /v1 root?")


def test_each_role_raises_its_own_classes():
    """The rephraser's dead endpoint stops a paraphrase run (``EndpointUnreachableError``); the model servers' stop a
    measurement (``ServerUnreachableError``, a ``ModelUnavailableError``)."""
    for role, unreachable, refused in [(CHAT, ServerUnreachableError, ServerResponseError),
                                       (VLLM, ServerUnreachableError, ServerResponseError),
                                       (REPHRASER, EndpointUnreachableError, RephraserError)]:
        assert type(client(role).error(refused_connection())) is unreachable
        for code in (401, 404, 429, 500):
            assert type(client(role).error(status(code, {"message": "x"}))) is refused
        assert type(client(role).malformed("no choices", "chat completion")) is refused


def test_a_long_server_message_is_cut():
    error = client().error(status(500, {"message": "x" * 1000}))
    assert "x" * 300 + "..." in str(error) and "x" * 301 not in str(error)


# --- what a request asks for -----------------------------------------------------------------------------------------

def test_generation_fields_hold_only_what_was_asked_for():
    assert Generation(10).fields() == {"temperature": 0.0, "max_tokens": 10}
    assert Generation(10, temperature=0, seed=42).fields() == {"temperature": 0, "max_tokens": 10, "seed": 42}
    assert Generation(480, temperature=0.8, top_p=0.95, n=4, seed=3).fields() == {
        "temperature": 0.8, "top_p": 0.95, "max_tokens": 480, "n": 4, "seed": 3}
    assert "n" not in Generation(5, n=1).fields() and "top_p" not in Generation(5).fields()
    with pytest.raises(AttributeError):  # frozen: one request's settings cannot change under another's
        Generation(5).max_tokens = 6


def test_a_chat_body_keeps_the_request_and_puts_the_generation_last():
    body = chat_body("m", Generation(5, seed=1), {"messages": [{"role": "user", "content": "Hi"}],
                                                  "response_format": {"type": "json_object"}})
    assert list(body) == ["model", "messages", "response_format", "temperature", "max_tokens", "seed"]
    assert body["response_format"] == {"type": "json_object"} and body["seed"] == 1


# --- concurrency -----------------------------------------------------------------------------------------------------

def test_at_most_limit_calls_are_in_flight():
    from chat_server import InFlight

    in_flight = InFlight()

    def call(x):
        with in_flight:
            time.sleep(0.02)
        return x

    assert sorted(x for x, _ in run_bounded(call, range(12), limit=3)) == list(range(12))
    assert in_flight.most == 3
    in_flight.most = 0
    assert map_bounded(call, range(5), limit=1) == list(range(5)) and in_flight.most == 1


def test_results_come_as_they_finish_and_map_keeps_the_order():
    delays = {"slow": 0.3, "fast": 0.0, "middle": 0.1}

    def call(name):
        time.sleep(delays[name])
        return name.upper()

    assert [item for item, _ in run_bounded(call, list(delays), limit=3)] == ["fast", "middle", "slow"]
    assert [item for item, _ in run_bounded(call, list(delays), limit=1)] == ["slow", "fast", "middle"]
    assert map_bounded(call, list(delays), limit=3) == ["SLOW", "FAST", "MIDDLE"]
    assert list(run_bounded(call, [], limit=3)) == [] and map_bounded(call, [], limit=3) == []


def test_the_first_failure_stops_the_work_once_the_calls_in_flight_land():
    """Item 1 fails at once while item 0 is in flight: nothing more starts, item 0's answer goes to ``late`` (a cache
    keeps it), not to the loop, and the failure is raised once."""
    started, late = [], []

    def call(x):
        started.append(x)
        if x == 1:
            raise ValueError("boom")
        time.sleep(0.2)
        return x * 10

    yielded = []
    with pytest.raises(ValueError, match="boom"):
        for pair in run_bounded(call, range(6), limit=2, late=lambda item, result: late.append((item, result))):
            yielded.append(pair)
    assert yielded == [] and late == [(0, 0)] and sorted(started) == [0, 1]
    with pytest.raises(ValueError, match="boom"):
        map_bounded(call, range(6), limit=2)
