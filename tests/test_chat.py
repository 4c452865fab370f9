"""Models behind a chat API (``model=chat``, posixlab/chat/): scripted servers on loopback for the faults a real server
cannot produce on cue, the response cache (what a rerun and a resumed run send), usage and cost, dry runs, the
request budget, and the noise floor against servers with known behaviour. The real server (llama.cpp's) is in
tests/test_chat_llama.py."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from chat_server import ChatServer, completion, free_port, prompt_of
from posixlab.classification_prompts import TASKS
from posixlab.errors import ConfigError, ServerResponseError, ServerUnreachableError
from posixlab.models import ModelSpec
from posixlab.models.loading import ServerSettings
from posixlab.rephrase import RephraserConfig
from posixlab.runner import run
from posixlab.tasks.classification import ClassificationConfig, ClassificationData, load_data

ROOT = Path(__file__).resolve().parents[1]
PARAPHRASES = ["Pick the right answer to this multiple-choice question.",
               "Select the correct option for the question below.",
               "Which option answers the question correctly?",
               "Give the letter of the correct answer.",
               "Find the right choice for this question."]


@pytest.fixture(scope="module")
def rephrasings(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reph") / "rephrasings.jsonl"
    path.write_text(json.dumps({"original": TASKS["mmlu_letters"], "paraphrases": PARAPHRASES}) + "\n",
                    encoding="utf-8")
    return path


def chat_config(base_url: str | None, tmp_path: Path, rephrasings: Path, *, samples: int = 4, q: int = 3,
                out: str = "run", **server) -> ClassificationConfig:
    settings = replace(ServerSettings(base_url=base_url, api_key_env="POSIXLAB_TEST_KEY", max_attempts=3,
                                      request_timeout=30), **server)
    return ClassificationConfig(
        model=ModelSpec("scripted", "api", "scripted", backend="chat", server=settings),
        data=ClassificationData(num_samples=samples), num_rephrasings=q, output_dir=str(tmp_path / out),
        cache_dir=str(tmp_path / "cache"),
        # no quality checks: they load the MiniLM embedder, and the fast lane loads no model (test_paraphrase_quality.py
        # has them)
        rephraser=RephraserConfig(backend="file", path=str(rephrasings), validate=False))


def gold_of(cfg: ClassificationConfig) -> dict[str, str]:
    """The sample text -> gold letter map a scripted server uses to answer like an oracle."""
    samples, _ = load_data(cfg)
    return {s.text: s.gold for s in samples}


def oracle(gold: dict[str, str]):
    def answer(body, n):
        prompt = prompt_of(body)
        return 200, {}, completion(next(g for text, g in gold.items() if text in prompt))
    return answer


def constant(letter: str = "B", **kw):
    return lambda body, n: (200, {}, completion(letter, **kw))


# --- the requests: what is sent, what comes back -----------------------------------------------------------------

def test_a_run_sends_temperature_and_seed_and_records_what_answered(tmp_path, rephrasings, monkeypatch):
    monkeypatch.setenv("POSIXLAB_TEST_KEY", "sk-secret-never-written")
    with ChatServer(constant("B", usage=(30, 2))) as server:
        cfg = chat_config(server.base_url, tmp_path, rephrasings, price_input_per_million=2.0,
                          price_output_per_million=10.0)
        summary = run(cfg, progress=False)
    assert server.requests == 4 * 3
    body = server.bodies[0]
    assert body["temperature"] == 0 and body["seed"] == 42 and body["max_tokens"] == 10
    assert body["model"] == "scripted" and len(body["messages"]) == 1 and "Here is the text:" in prompt_of(body)
    api = summary["api"]
    assert api["requests_sent"] == 12 and api["answers_from_cache"] == 0
    assert api["usage_sent"] == {"prompt_tokens": 360, "completion_tokens": 24}
    assert api["cost_sent"] == pytest.approx((360 * 2.0 + 24 * 10.0) / 1e6)
    assert api["served"] == [{"model": "scripted", "system_fingerprint": "fp_1", "answers": 12}]
    assert summary["sensitivity"]["mean"] == 0.0 and summary["engine"]["kind"] == "api"
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(p["label"] == "B" and p["served"] == ["scripted", "fp_1"] for r in records for p in r["predictions"])
    # the key reaches no file: results, config, cache
    for path in [*(tmp_path / "run").rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if path.is_file():
            assert b"sk-secret-never-written" not in path.read_bytes(), path


def test_a_changed_fingerprint_is_warned_about_and_listed(tmp_path, rephrasings, capsys):
    with ChatServer(lambda body, n: (200, {}, completion("A", fingerprint="fp_1" if n <= 3 else "fp_2"))) as server:
        summary = run(chat_config(server.base_url, tmp_path, rephrasings, max_concurrency=1), progress=False)
    assert "system_fingerprint 'fp_2'" in capsys.readouterr().err
    assert summary["api"]["served_changed"] and {s["system_fingerprint"]: s["answers"]
                                                 for s in summary["api"]["served"]} == {"fp_1": 3, "fp_2": 9}


def test_rate_limit_waits_what_retry_after_says(tmp_path, rephrasings):
    def answer(body, n):
        return (429, {"Retry-After": "2"}, {"error": {"message": "slow down"}}) if n == 1 else \
            (200, {}, completion("C"))
    with ChatServer(answer) as server:
        summary = run(chat_config(server.base_url, tmp_path, rephrasings, samples=1, q=1, max_concurrency=1),
                      progress=False)
    assert server.requests == 2 and server.times[1] - server.times[0] >= 2.0
    assert summary["api"]["requests_sent"] == 1  # the retry is the client's; one answer


def test_a_500_then_success_is_retried(tmp_path, rephrasings):
    answer = lambda body, n: (500, {}, {"error": {"message": "boom"}}) if n == 1 else (200, {}, completion("D"))
    with ChatServer(answer) as server:
        summary = run(chat_config(server.base_url, tmp_path, rephrasings, samples=1, q=1), progress=False)
    assert server.requests == 2 and summary["num_samples"] == 1


def test_a_rejected_key_stops_at_once_naming_the_variable(tmp_path, rephrasings):
    with ChatServer(constant(), models_status=401) as server:
        with pytest.raises(ServerResponseError, match=r"rejected the API key .*\$POSIXLAB_TEST_KEY"):
            run(chat_config(server.base_url, tmp_path, rephrasings), progress=False)
    assert server.requests == 0  # no chat request was sent: the check before any work said it
    unauthorized = lambda body, n: (401, {}, {"error": {"message": "Incorrect API key"}})
    with ChatServer(unauthorized) as server:  # an endpoint whose /models does not check keys
        with pytest.raises(ServerResponseError, match="rejected the API key"):
            run(chat_config(server.base_url, tmp_path, rephrasings, max_concurrency=1), progress=False)
    assert server.requests == 1  # no retries of a 401, no other request after it


def test_a_closed_port_fails_in_seconds(tmp_path, rephrasings):
    started = time.monotonic()
    with pytest.raises(ServerUnreachableError, match="cannot reach the chat endpoint"):
        run(chat_config(f"http://127.0.0.1:{free_port()}/v1", tmp_path, rephrasings), progress=False)
    assert time.monotonic() - started < 15
    assert not (tmp_path / "run" / "samples.jsonl").exists()  # stopped before any input was built


def test_a_malformed_body_is_one_clear_error(tmp_path, rephrasings):
    with ChatServer(lambda body, n: (200, {}, b"{this is not json")) as server:
        with pytest.raises(ServerResponseError, match="not a chat completion"):
            run(chat_config(server.base_url, tmp_path, rephrasings, max_concurrency=1), progress=False)
    with ChatServer(lambda body, n: (200, {}, {"object": "chat.completion", "choices": []})) as server:
        with pytest.raises(ServerResponseError, match="not a chat completion"):
            run(chat_config(server.base_url, tmp_path, rephrasings, max_concurrency=1), progress=False)


def test_openai_itself_without_a_key_is_a_config_error(tmp_path, rephrasings, monkeypatch):
    monkeypatch.delenv("POSIXLAB_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"needs an API key in \$POSIXLAB_TEST_KEY"):
        run(chat_config(None, tmp_path, rephrasings), progress=False)


def test_psi_and_label_probs_need_log_probabilities(tmp_path, rephrasings):
    cfg = replace(chat_config("http://127.0.0.1:9/v1", tmp_path, rephrasings), probability="label_probs")
    with pytest.raises(ConfigError, match="cannot score.*model.backend=vllm"):
        run(cfg, progress=False)


# --- the cache ---------------------------------------------------------------------------------------------------

def test_a_rerun_sends_nothing_and_any_parameter_or_repeat_misses(tmp_path, rephrasings):
    with ChatServer(constant("A")) as server:
        first = run(chat_config(server.base_url, tmp_path, rephrasings), progress=False)
        assert server.requests == 12
        again = run(chat_config(server.base_url, tmp_path, rephrasings, out="again"), progress=False)
        assert server.requests == 12 and again["api"]["answers_from_cache"] == 12
        assert again["sensitivity"] == first["sensitivity"]
        for change in ({"seed": 7}, {"temperature": 0.5}):
            before = server.requests
            run(chat_config(server.base_url, tmp_path, rephrasings, out=f"c{len(change)}{before}", **change),
                progress=False)
            assert server.requests == before + 12, change
        before = server.requests
        run(replace(chat_config(server.base_url, tmp_path, rephrasings, out="tokens"), max_new_tokens=11),
            progress=False)
        assert server.requests == before + 12
        before = server.requests  # repeats: repeat 0 is cached, repeat 1 is new
        run(replace(chat_config(server.base_url, tmp_path, rephrasings, out="repeats"), repeats=2), progress=False)
        assert server.requests == before + 12


def test_cache_keys_of_earlier_versions_still_hit(monkeypatch):
    """The key (base URL + whole body + repeat) of a body built through the shared client's ``Generation`` is the
    key the earlier code made: the digests below were computed by it (posixlab before openai_client.py), so answers
    users have cached are read, not bought again."""
    from posixlab.chat.cache import request_key
    from posixlab.chat.client import ChatClient
    from posixlab.chat.model import ChatModel, chat_model

    monkeypatch.delenv("POSIXLAB_TEST_KEY", raising=False)
    spec = chat_model("gpt-4o-2024-08-06", base_url="http://localhost:8765/v1/", api_key_env="POSIXLAB_TEST_KEY")
    client = ChatClient(spec.server.base_url, api_key_env="POSIXLAB_TEST_KEY", timeout=5, max_attempts=2)
    body = ChatModel(spec, client, None).body("What is 2+2?", 10)
    assert client.base_url == "http://localhost:8765/v1"
    assert body == {"model": "gpt-4o-2024-08-06", "messages": [{"role": "user", "content": "What is 2+2?"}],
                    "temperature": 0.0, "max_tokens": 10, "seed": 42}
    assert request_key(client.base_url, body, 0) == "4833bf8e160417fef7bfb1933e2b13fe1199367aa7855ce8a3c4e72d78e71cf3"
    assert request_key(client.base_url, body, 1) == "6d6873fe9e34a3310496bbb8f46341aeed358aa980a024ad1b3b813b429a1d3e"
    unseeded = chat_model("m", base_url="http://127.0.0.1:9/v1", seed=None, temperature=0.5)
    body = ChatModel(unseeded, client, None).body("Hi", 5)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0.5, "max_tokens": 5}
    assert request_key(client.base_url, body, 0) == "525ecd43e92e28d7fd9515b80468232727a28578a1c919205cfc7c1f76fe1ad3"


def test_a_server_that_refuses_a_system_turn_gets_it_folded_once_learned(capsys):
    """A template that refuses a system turn (vLLM's HTTP 400 for Gemma 2 or Mistral-7B-Instruct-v0.1; the real
    server is in test_vllm.py): the chat is asked again folded (``prompts.fold_system_turn``), later chats go folded
    at once, said once on stderr; a chat without a system turn is not retried, and a refusal the fold does not cure
    is reported with both answers. The scripted server refuses what a raising template would."""
    from posixlab.chat.client import ChatClient

    def template(body, n):
        roles = [m["role"] for m in body["messages"]]
        if "system" in roles:
            return 400, {}, {"error": {"message": "System role not supported", "type": "BadRequestError"}}
        if "too long" in body["messages"][0]["content"]:
            return 400, {}, {"error": {"message": "maximum context length is 2048 tokens"}}
        return 200, {}, completion(body["messages"][0]["content"][:9])

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    with ChatServer(template) as server:
        client = ChatClient(server.base_url, api_key_env="POSIXLAB_TEST_KEY", timeout=5, max_attempts=3)
        assert client.complete({"model": "scripted", "messages": chat}).text == "Be brief."
        assert client.complete({"model": "scripted", "messages": chat[1:]}).text == "Hi?"
        assert client.complete({"model": "scripted", "messages": chat}).text == "Be brief."
        assert [b["messages"] for b in server.bodies] == [chat, [{"role": "user", "content": "Be brief.\n\nHi?"}],
                                                           chat[1:], [{"role": "user", "content": "Be brief.\n\nHi?"}]]
        assert capsys.readouterr().err.count("refused a chat that opens with a system turn (HTTP 400: System role") == 1
        with pytest.raises(ServerResponseError, match="HTTP 400: maximum context length"):  # not a system turn's fault
            client.complete({"model": "scripted", "messages": [{"role": "user", "content": "too long"}]})
        assert server.requests == 5

        fresh = ChatClient(server.base_url, api_key_env="POSIXLAB_TEST_KEY", timeout=5, max_attempts=3)
        long_chat = [chat[0], {"role": "user", "content": "too long"}]
        with pytest.raises(ServerResponseError, match="HTTP 400: System role not supported.*Asked again with the "
                                                      "system message.*HTTP 400: maximum context length"):
            fresh.complete({"model": "scripted", "messages": long_chat})
        assert server.requests == 7 and not fresh.folds_system


def test_a_server_error_to_a_system_turn_is_told_from_passing_trouble():
    """llama-cpp-python's server answers a template's refusal with HTTP 500 (the real one: test_judge.py), which the
    ``openai`` client retries first. Then the folded chat is asked, and the chat as written once more: refused
    again, the fold is learnt; answered now (the server's trouble had passed), its answer is kept and nothing is
    learnt. Two attempts a request here."""
    from posixlab.chat.client import ChatClient

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    folded = [{"role": "user", "content": "Be brief.\n\nHi?"}]

    def refusing(body, n):
        if body["messages"][0]["role"] == "system":
            return 500, {}, {"error": {"message": "System role not supported", "type": "internal_server_error"}}
        return 200, {}, completion("folded")

    def troubled(body, n):  # the first two requests fail, whatever they ask
        if n <= 2:
            return 500, {}, {"error": {"message": "busy", "type": "internal_server_error"}}
        return 200, {}, completion("folded" if body["messages"][0]["role"] == "user" else "as written")

    for answer, reply, learnt in ((refusing, "folded", True), (troubled, "as written", False)):
        with ChatServer(answer) as server:
            client = ChatClient(server.base_url, api_key_env="POSIXLAB_TEST_KEY", timeout=5, max_attempts=2)
            assert client.complete({"model": "scripted", "messages": chat}).text == reply
            assert client.folds_system is learnt
            sent = [chat, chat, folded] + ([chat, chat] if learnt else [chat])
            assert [b["messages"] for b in server.bodies] == sent
            client.complete({"model": "scripted", "messages": chat})
            assert server.bodies[-1]["messages"] == (folded if learnt else chat)


@pytest.mark.slow
def test_a_killed_run_resumes_sending_only_what_was_missing(tmp_path, rephrasings):
    """``kill -9`` mid-run (a real process, the real CLI), then the same command again: the answers that came back
    before the kill are not sent again; at most max_concurrency were in flight."""
    samples, q, concurrency = 12, 3, 2
    with ChatServer(constant("A"), delay=0.15) as server:
        command = [sys.executable, str(ROOT / "run.py"), "task=classification", "model=chat", "model.name=scripted",
                   f"model.base_url={server.base_url}", f"model.max_concurrency={concurrency}",
                   f"dataset.num_samples={samples}", f"task.num_rephrasings={q}", "rephraser=file",
                   f"rephraser.path={rephrasings}", f"cache_dir={tmp_path / 'cache'}", "logger=none",
                   "progress=false"]
        env = dict(os.environ)
        proc = subprocess.Popen(command + [f"hydra.run.dir={tmp_path / 'killed'}"], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while server.answered < 10 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        sent_before = server.requests
        assert 10 <= sent_before < samples * q, "the run ended before it could be killed mid-way"
        done = subprocess.run(command + [f"hydra.run.dir={tmp_path / 'resumed'}"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        resent = server.requests - sent_before
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    print(f"killed after {sent_before} of {samples * q} requests had arrived; the resumed run sent {resent} and read "
          f"{summary['api']['answers_from_cache']} from the cache")
    assert summary["num_samples"] == samples
    assert summary["api"]["requests_sent"] == resent
    # everything answered before the kill came from the cache; only what was in flight went out again
    assert resent <= samples * q - sent_before + concurrency
    assert summary["api"]["answers_from_cache"] >= sent_before - concurrency


# --- cost before and after, the budget ---------------------------------------------------------------------------

def test_dry_run_counts_what_would_be_sent_and_sends_nothing(tmp_path, rephrasings):
    with ChatServer(constant("A")) as server:
        cfg = chat_config(server.base_url, tmp_path, rephrasings, price_input_per_million=1.0,
                          price_output_per_million=1.0)
        plan = run(replace(cfg, dry_run=True), progress=False)["dry_run"]
        assert server.requests == 0 and plan["to_send"] == 12 and plan["cached"] == 0
        assert plan["max_completion_tokens"] == 12 * 10 and plan["estimated_prompt_tokens"] > 12 * 20
        assert plan["estimated_cost_at_most"] == pytest.approx(
            (plan["estimated_prompt_tokens"] + plan["max_completion_tokens"]) / 1e6)
        run(replace(cfg, num_rephrasings=2), progress=False)  # 8 of the 12 answered now
        plan = run(replace(cfg, dry_run=True), progress=False)["dry_run"]
        assert plan["to_send"] == 4 and plan["cached"] == 8 and server.requests == 8


def test_a_dry_run_needs_no_key_and_no_live_endpoint(tmp_path, rephrasings, monkeypatch):
    """A dry run sends nothing, not even the model list, so neither OpenAI's key nor a live server is needed (the
    cache is keyed by base URL and request): the run's own endpoint as rephraser, too. A real run still asks for the
    key before any work."""
    monkeypatch.delenv("POSIXLAB_TEST_KEY", raising=False)
    hosted = chat_config(None, tmp_path, rephrasings)
    assert run(replace(hosted, dry_run=True), progress=False)["dry_run"]["to_send"] == 12
    assert not any((tmp_path / "run").iterdir())  # nothing written (rephrasings.json was)
    auto = replace(hosted, dry_run=True, rephraser=RephraserConfig(backend="auto", validate=False))
    assert run(auto, progress=False)["dry_run"]["to_send"] == 12  # its paraphrases placeholders, none asked for
    with pytest.raises(ConfigError, match=r"needs an API key in \$POSIXLAB_TEST_KEY"):
        run(hosted, progress=False)
    with ChatServer(constant("A")) as server:
        cfg = chat_config(server.base_url, tmp_path, rephrasings)
        run(replace(cfg, num_rephrasings=2), progress=False)
    plan = run(replace(cfg, dry_run=True), progress=False)["dry_run"]  # the server is gone now
    assert plan["to_send"] == 4 and plan["cached"] == 8 and server.requests == 8


def test_max_requests_stops_cleanly_keeping_every_answer(tmp_path, rephrasings):
    with ChatServer(constant("A")) as server:
        capped = run(chat_config(server.base_url, tmp_path, rephrasings, max_requests=7), progress=False)
        assert server.requests == 7 and capped["stopped"] and "max_requests=7" in capped["stopped"]
        assert capped["num_samples"] == 2  # the samples whose three answers are all in
        full = run(chat_config(server.base_url, tmp_path, rephrasings, out="full"), progress=False)
        assert server.requests == 12 and full["stopped"] is None and full["num_samples"] == 4


# --- the noise floor, against servers with known behaviour ---------------------------------------------------------

def test_an_oracle_endpoint_has_no_sensitivity_and_no_floor(tmp_path, rephrasings):
    cfg = chat_config("http://x/v1", tmp_path, rephrasings, samples=10, q=6)
    with ChatServer(oracle(gold_of(cfg))) as server:
        summary = run(replace(cfg, model=replace(cfg.model, server=replace(cfg.model.server,
                                                                          base_url=server.base_url)), repeats=2),
                      progress=False)
    assert server.requests == 10 * 6 * 2
    floor = summary["noise_floor"]
    assert summary["sensitivity"]["mean"] == 0.0 and summary["micro_f1"]["mean"] == 1.0
    assert floor["fixed_prompt"]["sensitivity"] == 0.0 and floor["rephrasings_at_equal_count"]["sensitivity"] == 0.0
    assert floor["deterministic"]


def test_an_endpoint_moved_by_wording_only_has_sensitivity_and_no_floor(tmp_path, rephrasings):
    import hashlib

    def by_wording(body, n):
        digest = hashlib.sha256(prompt_of(body).encode()).digest()
        return 200, {}, completion("ABCD"[digest[0] % 4])
    with ChatServer(by_wording) as server:
        summary = run(replace(chat_config(server.base_url, tmp_path, rephrasings, samples=10, q=6), repeats=2),
                      progress=False)
    floor = summary["noise_floor"]
    assert floor["fixed_prompt"]["sensitivity"] == 0.0 and floor["fixed_prompt"]["flip_rate"] == 0.0
    assert summary["sensitivity"]["mean"] > 0.3 and floor["rephrasings_at_equal_count"]["sensitivity"] > 0.1
    assert floor["beyond_noise"]["flip_rate"]["value"] > 0.3


@pytest.mark.slow  # 720 requests, one at a time
def test_a_random_endpoint_has_a_floor_as_high_as_its_sensitivity(tmp_path, rephrasings):
    seen: dict[str, int] = {}

    def at_random(body, n):  # the k-th time a prompt comes, a draw seeded by (prompt, k): the same run every time
        prompt = prompt_of(body)
        seen[prompt] = seen.get(prompt, 0) + 1
        return 200, {}, completion(random.Random(f"{prompt}/{seen[prompt]}").choice("ABCD"))
    with ChatServer(at_random) as server:  # one request at a time: repeat 0 is the first to arrive
        summary = run(replace(chat_config(server.base_url, tmp_path, rephrasings, samples=60, q=6,
                                          max_concurrency=1), repeats=2), progress=False)
    floor = summary["noise_floor"]
    assert floor["fixed_prompt"]["flip_rate"] > 0.5 and not floor["deterministic"]
    low, high = floor["beyond_noise"]["sensitivity"]["ci95"]
    assert low <= 0.0 <= high  # the rephrasings add nothing the noise does not explain
    assert abs(floor["beyond_noise"]["flip_rate"]["value"]) < 0.1


def test_answers_parse_with_the_one_parser(tmp_path, rephrasings):
    answers = iter(["The answer is (C", "B.", "Answer: D", "I cannot tell"] * 3)
    with ChatServer(lambda body, n: (200, {}, completion(next(answers)))) as server:
        run(chat_config(server.base_url, tmp_path, rephrasings, max_concurrency=1), progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert [p["label"] for r in records for p in r["predictions"]] == ["C", "B", "D", "N/A"] * 3


@pytest.mark.parametrize("probability", ["greedy", "label_probs"])
def test_in_process_the_floor_is_exactly_zero(lm, tmp_path, rephrasings, probability):
    """transformers in this process at temperature 0, every repeat computed again (no score cache): the same
    answers, so the floor is 0 exactly; anything else would be nondeterminism of the stack."""
    cfg = ClassificationConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                               data=ClassificationData(num_samples=2), num_rephrasings=2, repeats=2,
                               probability=probability, output_dir=str(tmp_path / "run"), score_cache=False,
                               rephraser=RephraserConfig(backend="file", path=str(rephrasings), min_similarity=0.0))
    summary = run(cfg, lm=lm, progress=False)
    floor = summary["noise_floor"]
    assert floor["deterministic"] and floor["fixed_prompt"]["sensitivity"] == 0.0
    assert floor["fixed_prompt"]["flip_rate"] == 0.0
    # a measurement, not a copy: the repeat ran through the model again, as much work as the first answers
    once = run(replace(cfg, repeats=1, output_dir=str(tmp_path / "once")), lm=lm, progress=False)
    assert summary["engine"]["forward_tokens"] == 2 * once["engine"]["forward_tokens"] > 0


# --- the POSIX side without ψ (psi=false) ----------------------------------------------------------------------------

def posix_config(base_url: str, tmp_path: Path, **kw):
    from posixlab.data import DatasetSpec
    from posixlab.tasks.posix import PosixConfig

    return PosixConfig(model=chat_config(base_url, tmp_path, Path("unused")).model, dataset=DatasetSpec("mmlu"),
                       variant="template", num_sets=4, num_variants=3, output_dir=str(tmp_path / "posix"),
                       cache_dir=str(tmp_path / "cache"), embedding=None, **kw)


def test_a_budgeted_run_sends_a_chat_api_only_the_prompts_it_asks(tmp_path):
    """task.prompt_share=0.5: half of each set's prompts go to the API (the set's own draw), the rest stay unasked;
    the accuracy block adds each prompt's estimate over every set."""
    from dataclasses import replace

    from posixlab.tasks.posix import asked_prompts

    def by_template(body, n):
        return 200, {}, completion("(A)" if "Answer:" in prompt_of(body) else "I am not sure")
    with ChatServer(by_template) as server:
        summary = run(replace(posix_config(server.base_url, tmp_path, psi=False, prompt_share=0.5), num_sets=8),
                      progress=False)
    assert server.requests == 8 * 2 and summary["accuracy"]["asked"] == {"cells": 16, "of": 32}
    records = [json.loads(line) for line in (tmp_path / "posix" / "sets.jsonl").read_text().splitlines()]
    for r in records:
        assert r["asked"] == asked_prompts(r["set_id"], 4, 0.5, 0)
        assert [x["text"] is not None for x in r["responses"]] == [j in r["asked"] for j in range(4)]
    assert summary["accuracy"]["by_greedy"]["estimated"]["scored"] == 0.5 and summary["prompt_choice"] is None


def test_posix_needs_psi_false_on_a_chat_model(tmp_path):
    with pytest.raises(ConfigError, match="cannot score.*psi=false"):
        run(posix_config("http://127.0.0.1:9/v1", tmp_path), progress=False)


def test_posix_answers_across_templates_from_a_chat_api(tmp_path):
    """Every prompt of every template set answered once, read by the one parser: accuracy per prompt, its spread,
    worst case, consistency and the held-out prompt choice; no ψ."""
    def by_template(body, n):  # a model that answers right under some templates only
        prompt = prompt_of(body)
        return 200, {}, completion("(A)" if "Answer:" in prompt else "I am not sure")
    with ChatServer(by_template) as server:
        summary = run(posix_config(server.base_url, tmp_path, psi=False), progress=False)
    assert server.requests == 4 * 4 and summary["psi"] is None and summary["engine"]["kind"] == "api"
    greedy = summary["accuracy"]["by_greedy"]
    assert summary["accuracy"]["by_options"] is None
    records = [json.loads(line) for line in (tmp_path / "posix" / "sets.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(len(r["responses"]) == 4 and "psi" not in r for r in records)
    correct = [[a["by_greedy"]["correct"] for a in r["answers"]] for r in records]
    assert greedy["accuracy"] == pytest.approx(sum(map(sum, correct)) / 16)
    assert greedy["spread"]["min"] <= greedy["accuracy"] <= greedy["spread"]["max"]
    assert summary["prompt_choice"] is not None and summary["prompt_choice"]["by_psi"] is None
    assert (tmp_path / "posix" / "summary.md").read_text().startswith("# Answers across prompts")


def test_psi_false_answers_are_the_greedy_answers_of_a_psi_run(lm, tmp_path):
    """In process, psi=false runs each prompt alone and scores nothing; its greedy answers, and so its greedy
    accuracy, are those of the full ψ run."""
    from posixlab.data import DatasetSpec
    from posixlab.tasks.posix import PosixConfig

    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
    common = dict(model=spec, dataset=DatasetSpec("mmlu"), variant="template", num_sets=3, num_variants=2,
                  embedding=None, score_cache=False)
    full = run(PosixConfig(**common, output_dir=str(tmp_path / "full")), lm=lm, progress=False)
    answers = run(PosixConfig(**common, output_dir=str(tmp_path / "answers"), psi=False), lm=lm, progress=False)
    texts = lambda folder: [[x["text"] for x in json.loads(line)["responses"]]  # noqa: E731
                            for line in (tmp_path / folder / "sets.jsonl").read_text().splitlines()]
    assert texts("answers") == texts("full")
    assert answers["accuracy"]["by_greedy"] == full["accuracy"]["by_greedy"]
    assert answers["psi"] is None and full["psi"]["posix"] > 0
    # the analysis takes the psi=false run as a refresh of the ψ cell's greedy answers, ψ kept
    from posixlab.analysis.collect import load_rows, write_rows

    rows = load_rows(tmp_path / "full")
    for row in rows:  # stale greedy answers (as an older parser's would be)
        row["correct_greedy"], row["pred_greedy"] = "-" * len(row["correct_greedy"]), "-" * len(row["pred_greedy"])
    write_rows(rows, tmp_path / "per_set.csv")
    refreshed = load_rows(tmp_path / "per_set.csv", tmp_path / "answers")
    assert [r["psi"] for r in refreshed] == pytest.approx([r["psi"] for r in load_rows(tmp_path / "full")])
    assert [r["pred_greedy"] for r in refreshed] == [r["pred_greedy"] for r in load_rows(tmp_path / "full")]
    assert any(c != "-" for r in refreshed for c in r["pred_greedy"])  # some answers were read: the refresh shows
    assert all(r["source"].endswith(f"; greedy: {tmp_path / 'answers'}") for r in refreshed)
    with pytest.raises(ConfigError, match="give the per_set.csv .* first"):
        load_rows(tmp_path / "answers")


def test_the_python_api_measures_a_chat_model(tmp_path, rephrasings):
    import posixlab

    with ChatServer(constant("C")) as server:
        result = posixlab.classify("mmlu_letters", model=posixlab.chat_model("scripted", base_url=server.base_url),
                                   num_samples=3, num_rephrasings=2, repeats=2, cache_dir=str(tmp_path / "cache"),
                                   rephraser=RephraserConfig(backend="file", path=str(rephrasings),
                                                             validate=False), progress=False)
    assert server.requests == 3 * 2 * 2 and result.sensitivity == 0.0 and result.sensitivity_ci95 == (0.0, 0.0)
    # 3 samples: C has no interval (no resample rare enough for a 2.5 % tail; metrics.classification)
    assert result.consistency == (1.0 if len(set(result.to_pandas()["gold"])) < 3 else None)
    assert result.consistency_ci95 is None
    assert result.summary["api"]["requests_sent"] == 12 and result.summary["noise_floor"]["deterministic"]
    assert len(result.to_pandas()) == 3
