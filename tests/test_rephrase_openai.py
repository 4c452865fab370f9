"""The ``openai`` rephraser backend against real HTTP servers on loopback (no mocks of the client).

* llama-cpp-python's OpenAI-compatible server with the packaged Qwen2.5-Coder-0.5B-Instruct GGUF: real paraphrases;
* a stdlib ``ThreadingHTTPServer`` answering scripted statuses: retries, Retry-After, error messages, request counts;
* a port with nothing listening: the endpoint-down message, and a run that stops after one request's retries.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from posixlab.errors import EndpointUnreachableError, RephraserError
from posixlab.rephrase.base import Instruction, collect_paraphrases, normalized, request_seed
from posixlab.rephrase.openai_backend import OpenAIRephraser

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Which planet is known as the Red Planet?"
# the project's own instruction, as a run would use it
INSTRUCTION = Instruction.from_dict(yaml.safe_load(
    (ROOT / "conf/rephraser/instruction/default.yaml").read_text()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def completion(content: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


# --- llama-cpp-python's server --------------------------------------------------------------------------------------

# the llama_server fixture (one llama-cpp-python server for the session) is in tests/conftest.py


@pytest.mark.slow
def test_real_server_gives_paraphrases(llama_server):
    rephraser = OpenAIRephraser(model="qwen2.5-coder-0.5b-instruct", base_url=llama_server)
    found = collect_paraphrases(rephraser, INSTRUCTION, QUESTION, n=3, per_request=3, samples=1, max_requests=4)
    keys = [normalized(p) for p in found.paraphrases]
    assert len(found.paraphrases) == 3 and len(set(keys)) == 3
    assert normalized(QUESTION) not in keys


# --- a scripted stdlib server ---------------------------------------------------------------------------------------

class Scripted:
    """A loopback server answering ``/v1/chat/completions`` with (status, headers, body) triples, the last repeated."""

    def __init__(self):
        self.script: list[tuple[int, dict, dict]] = []
        self.requests: list[dict] = []  # {"body": parsed JSON, "auth": Authorization header}
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                scripted.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                i = min(len(scripted.requests), len(scripted.script)) - 1
                status, headers, payload = scripted.script[i] if self.path == "/v1/chat/completions" else \
                    (404, {}, {"error": {"message": f"no route {self.path}"}})
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep the test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def scripted():
    s = Scripted()
    thread = threading.Thread(target=s.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def local(base_url: str, **kw) -> OpenAIRephraser:
    return OpenAIRephraser(model="m", base_url=base_url, timeout=10, **kw)


def test_one_call_per_reply_with_its_own_seed_and_placeholder_key(scripted, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scripted.script = [(200, {}, completion("1. A rewrite.")), (200, {}, completion(None))]
    # one in flight: the script answers in arrival order (test_a_request_s_replies_and_several_questions_at_once)
    replies = local(scripted.base_url, max_concurrency=1).chat([{"role": "user", "content": "hi"}], seed=41, n=2,
                                                               max_tokens=20)
    assert replies == ["1. A rewrite.", ""]
    bodies = [r["body"] for r in scripted.requests]
    assert [b["seed"] for b in bodies] == [41, 42]
    assert all(b["max_tokens"] == 20 and b["temperature"] == 0.8 and b["top_p"] == 0.95 for b in bodies)
    assert {r["auth"] for r in scripted.requests} == {"Bearer EMPTY"}


def test_the_model_comes_through_the_backend_registry_and_each_request_carries_its_generation(scripted):
    """The openai rephraser writes with the chat backend's model, opened through the registry (a backend that
    declares GENERATE); every request sends what its own ``Generation`` says, reply i of a request seeded seed + i."""
    from posixlab import backends
    from posixlab.chat.model import ChatModel
    from posixlab.models.capabilities import GENERATE
    from posixlab.openai_client import Generation

    rephraser = local(scripted.base_url, temperature=0.3, top_p=0.5)
    assert isinstance(rephraser.lm, ChatModel) and backends.backend_of(rephraser.lm) is backends.named("chat")
    assert GENERATE in backends.capabilities_of(rephraser.lm)
    assert scripted.requests == []  # opening it sent nothing
    scripted.script = [(200, {}, completion("1. A rewrite."))]
    chat = [{"role": "user", "content": "hi"}]
    assert backends.generate(rephraser.lm, chat, Generation(7, temperature=1.2, n=2, seed=5)) == ["1. A rewrite."] * 2
    assert sorted((r["body"] for r in scripted.requests), key=lambda b: b["seed"]) == [
        {"model": "m", "messages": chat, "temperature": 1.2, "max_tokens": 7, "seed": seed} for seed in (5, 6)]
    scripted.requests.clear()
    scripted.script = [(200, {}, completion("1. Which planet is called the Red Planet?\n"
                                            "2. What planet is named the Red Planet?"))]
    found = collect_paraphrases(rephraser, INSTRUCTION, QUESTION, n=2, per_request=2, samples=2, seed=3)
    assert len(found.paraphrases) == 2 and found.requests == 1
    bodies = sorted((r["body"] for r in scripted.requests), key=lambda b: b["seed"])  # sent together
    first = request_seed(3, QUESTION, 0)
    assert [b["seed"] for b in bodies] == [first, first + 1]  # one request of 2 samples: two calls, their own seeds
    assert all(b["temperature"] == 0.3 and b["top_p"] == 0.5 and "n" not in b for b in bodies)
    assert len({b["max_tokens"] for b in bodies}) == 1 and bodies[0]["messages"][-1]["content"].count(QUESTION) == 1


def test_a_request_s_replies_and_several_questions_at_once(tmp_path):
    """``max_concurrency`` 8 and 2 replies a request (each held 1 s): the first question to write goes alone, then
    four questions at once, 8 requests in flight, never more; each reply comes back to its own seed, and every
    question gets the paraphrases (and the record) it gets one request at a time, the records in any order."""
    from chat_server import ChatServer, InFlight

    from posixlab.prompts import PromptItem
    from posixlab.rephrase import ParaphraseFile
    from posixlab.variants import ParaphraseSource, ParaphraseVariants

    in_flight = InFlight()

    def answer(body, n):
        with in_flight:
            in_flight.hold(most)
        text = body["messages"][-1]["content"].rsplit("Text: ", 1)[1]
        tag = body["seed"] % 997
        return 200, {}, completion(f"1. Rewrite {tag}a: {text}\n2. Rewrite {tag}b: {text}")

    items = [PromptItem(f"q{i}", f"Question number {i}: which planet is red?") for i in range(5)]
    found = {}
    with ChatServer(answer) as server:
        for most in (1, 8):
            in_flight.most = 0
            store = ParaphraseFile(tmp_path / f"at{most}.jsonl")
            variants = ParaphraseVariants(ParaphraseSource(store, local(server.base_url, max_concurrency=most),
                                                           INSTRUCTION, samples=2, per_request=2))
            variants.prepare(items, 3, progress=False)
            assert in_flight.most == most
            found[most] = {item.question: variants._ready[item.question][0] for item in items}
            assert server.requests == 10 * (1 + (most > 1))  # one request of 2 replies a question
            first = [b["messages"][-1]["content"] for b in server.bodies[-10:][:2]]
            assert all(f.endswith(items[0].question) for f in first)  # the first went alone (8: then four at once)
            records = sorted(json.loads(line)["original"] for line in store.path.read_text().splitlines())
            assert records == sorted(item.question for item in items)
    assert found[8] == found[1]
    seed = request_seed(0, items[0].question, 0)
    assert found[1][items[0].question] == [f"Rewrite {s % 997}{x}: {items[0].question}"
                                           for s, x in ((seed, "a"), (seed, "b"), (seed + 1, "a"))]


def test_paraphrases_written_through_a_template_that_refuses_a_system_turn_say_so(tmp_path, capsys):
    """A server whose template refuses the instruction's system turn (vLLM's HTTP 400 for Gemma 2 or
    Mistral-7B-Instruct-v0.1): the first request is asked again folded and the rest go folded; every paraphrase
    record, and the run's variant details, say ``system_folded`` (the prompt the model read differs from the chat as
    written), and a server that takes a system turn leaves it false. Four in flight: the first question goes alone,
    so the fold is learnt before the others are asked."""
    from chat_server import ChatServer

    from posixlab.prompts import PromptItem
    from posixlab.rephrase import ParaphraseFile
    from posixlab.variants import ParaphraseSource, ParaphraseVariants

    def answer(body, n):
        if refuses and body["messages"][0]["role"] == "system":
            return 400, {}, {"error": {"message": "System role not supported", "type": "BadRequestError"}}
        text = body["messages"][-1]["content"].rsplit("Text: ", 1)[1]
        return 200, {}, completion(f"1. Rewrite {body['seed'] % 997}: {text}")

    items = [PromptItem(f"q{i}", f"Question number {i}: which planet is red?") for i in range(3)]
    assert INSTRUCTION.system  # the project's instruction opens with a system message
    for refuses in (True, False):
        with ChatServer(answer) as server:
            store = ParaphraseFile(tmp_path / f"refuses_{refuses}.jsonl")
            variants = ParaphraseVariants(ParaphraseSource(store, local(server.base_url, max_concurrency=4),
                                                           INSTRUCTION, samples=1, per_request=1))
            variants.prepare(items, 2, progress=False)
            asked = [b["messages"][0]["role"] for b in server.bodies]
        records = [json.loads(line) for line in store.path.read_text().splitlines()]
        assert len(records) == 3 and all(r["system_folded"] is refuses for r in records)
        assert variants.describe()["system_folded"] is refuses
        assert asked == (["system"] + ["user"] * 6 if refuses else ["system"] * 6)
        assert capsys.readouterr().err.count("refused a chat that opens with a system turn") == refuses


def test_server_down_names_the_endpoint():
    base_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    start = time.monotonic()
    with pytest.raises(EndpointUnreachableError, match="cannot reach the rephraser endpoint") as err:
        local(base_url, max_attempts=2).chat([{"role": "user", "content": "hi"}], seed=0, n=1, max_tokens=5)
    assert base_url in str(err.value) and "rephraser.base_url" in str(err.value) and "2 attempts" in str(err.value)
    assert time.monotonic() - start < 10


def test_a_dead_endpoint_stops_the_paraphrases_after_one_requests_retries(tmp_path):
    """Three questions against a closed port: the first request's retries are spent (the client's backoff: about
    0.5 + 1 + 2 s for 4 attempts), then the run stops; the other questions are never tried (before, each was tried
    in turn, 31 s each)."""
    from posixlab.prompts import PromptItem
    from posixlab.rephrase import ParaphraseFile
    from posixlab.variants import ParaphraseSource, ParaphraseVariants

    rephraser = local(f"http://127.0.0.1:{free_port()}/v1", max_attempts=4)
    asked = []
    chat = rephraser.chat
    rephraser.chat = lambda messages, **kw: asked.append(messages) or chat(messages, **kw)
    source = ParaphraseSource(ParaphraseFile(tmp_path / "p.jsonl"), rephraser, INSTRUCTION, samples=2)
    items = [PromptItem(f"q{i}", f"Question number {i}: which planet is red?") for i in range(3)]
    start = time.monotonic()
    with pytest.raises(EndpointUnreachableError, match="4 attempts"):
        ParaphraseVariants(source).prepare(items, 3, progress=False)
    elapsed = time.monotonic() - start
    assert len(asked) == 1  # one request, never the second question's
    assert 0.5 * (0.5 + 1 + 2) <= elapsed < 10, elapsed  # the client's retries ran (jitter takes off up to 25%)


def test_persistent_500_fails_after_max_attempts(scripted):
    scripted.script = [(500, {}, {"error": {"message": "model crashed"}})]
    with pytest.raises(RephraserError, match="HTTP 500") as err:
        local(scripted.base_url, max_attempts=3).chat([{"role": "user", "content": "hi"}], seed=0, n=1, max_tokens=5)
    assert not isinstance(err.value, EndpointUnreachableError)  # the server answers: not a dead endpoint
    assert len(scripted.requests) == 3
    assert "3 attempts" in str(err.value) and "model crashed" in str(err.value)


def test_rate_limit_is_retried_honouring_retry_after(scripted):
    scripted.script = [(429, {"Retry-After": "1.5"}, {"error": {"message": "slow down"}}),
                       (429, {}, {"error": {"message": "slow down"}}),
                       (200, {}, completion("1. Fine."))]
    start = time.monotonic()
    replies = local(scripted.base_url).chat([{"role": "user", "content": "hi"}], seed=0, n=1, max_tokens=5)
    assert replies == ["1. Fine."]
    assert len(scripted.requests) == 3
    assert time.monotonic() - start >= 1.5  # the server's Retry-After, then the client's own backoff


def test_401_fails_at_once_naming_the_key_variable(scripted, monkeypatch):
    monkeypatch.setenv("POSIXLAB_TEST_KEY", "sk-wrong-123")
    scripted.script = [(401, {}, {"error": {"message": "Incorrect API key provided"}})]
    with pytest.raises(RephraserError, match="HTTP 401") as err:
        local(scripted.base_url, api_key_env="POSIXLAB_TEST_KEY").chat([{"role": "user", "content": "hi"}],
                                                                       seed=0, n=1, max_tokens=5)
    assert "$POSIXLAB_TEST_KEY" in str(err.value) and "Incorrect API key provided" in str(err.value)
    assert "sk-wrong-123" not in str(err.value)
    assert len(scripted.requests) == 1


def test_a_wrong_model_name_and_a_malformed_body_are_rephraser_errors(scripted):
    scripted.script = [(404, {}, {"error": {"message": "model 'gpt-9' not found"}})]
    with pytest.raises(RephraserError, match="HTTP 404") as err:
        local(scripted.base_url).chat([{"role": "user", "content": "hi"}], seed=0, n=1, max_tokens=5)
    assert "model 'gpt-9' not found" in str(err.value) and "rephraser.model" in str(err.value)
    assert len(scripted.requests) == 1  # a 404 is not retried
    scripted.script = [(200, {}, {"object": "chat.completion", "choices": []})]
    with pytest.raises(RephraserError, match="not a chat completion") as err:
        local(scripted.base_url).chat([{"role": "user", "content": "hi"}], seed=0, n=1, max_tokens=5)
    assert not isinstance(err.value, EndpointUnreachableError) and "rephraser.base_url" in str(err.value)


def test_too_few_valid_paraphrases_says_how_many_and_why(scripted):
    reply = "\n".join(["1. Which planet is known as the Red Planet?", "2. What planet is called the Red Planet?",
                       "3. What planet is called the Red Planet?", "4. which planet is known as the red planet"])
    scripted.script = [(200, {}, completion(reply))]
    with pytest.raises(RephraserError, match="gave 1 of the 3") as err:
        collect_paraphrases(local(scripted.base_url), INSTRUCTION, QUESTION, n=3, samples=1, max_requests=2)
    # two requests of 4 lines: 1 accepted, 4 copies of the original, 3 duplicates
    assert "4 copy of the original, 3 duplicate" in str(err.value)
    assert len(scripted.requests) == 2


def test_missing_key_for_openai_itself(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(RephraserError, match=r"\$OPENAI_API_KEY.*export OPENAI_API_KEY"):
        OpenAIRephraser(model="gpt-3.5-turbo")


@pytest.mark.parametrize("base_url", [None, "http://127.0.0.1:9/v1"])
def test_key_never_shown(monkeypatch, base_url):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-abc123")
    rephraser = OpenAIRephraser(model="gpt-3.5-turbo", base_url=base_url)
    assert rephraser.name == "openai:gpt-3.5-turbo"
    assert rephraser.identity == {"backend": "openai", "model": "gpt-3.5-turbo", "base_url": base_url,
                                  "temperature": 0.8, "top_p": 0.95}
    for shown in (json.dumps(rephraser.identity), rephraser.name, repr(rephraser), str(rephraser)):
        assert "sk-secret-abc123" not in shown
