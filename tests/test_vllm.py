"""The vLLM backend against a real vLLM server (vLLM's CPU build) on loopback, serving the packaged SmolLM2's
converted folder in float32: the same responses, log-probabilities and ψ as the in-process engine, the classification
task, the score cache, ``model.server.launch=true`` from the command line, and the failure paths.

The server runs from its own virtual environment (``python -m posixlab.serving.install``; built by the first test
session, about 5 minutes) and starts once for the whole module (about a minute on 2 cores)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from posixlab.backends import load
from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError, ServerUnreachableError, TokenizerMismatchError
from posixlab.models import ModelSpec, ServerSettings
from posixlab.models.assets import prepare_packaged_model
from posixlab.paths import default_cache_dir
from posixlab.runner import run
from posixlab.tasks.posix import PosixConfig
from posixlab.results import read_sets
from posixlab.scoring import ScoreCache, ScoringEngine
from posixlab.serving import ServerEngine
from posixlab.serving.launch import LocalServer

ROOT = Path(__file__).resolve().parent.parent
SERVED = "smollm2"
# a small key/value cache (the default is 2 GiB), so two servers sit beside the test process
TEST_SERVER_ARGS = ("--kv-cache-memory-bytes", str(2**30))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture(scope="module")
def vllm_python() -> str:
    from posixlab.serving.install import install

    return str(install())


@pytest.fixture(scope="module")
def server(vllm_python):
    folder = prepare_packaged_model("smollm2-135m-instruct", default_cache_dir())
    with LocalServer(vllm_python, str(folder), SERVED, "float32", 2048, TEST_SERVER_ARGS) as started:
        yield started


def served_spec(started, **changes) -> ModelSpec:
    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct", dtype="float32",
                     backend="vllm", server=ServerSettings(base_url=started.base_url))
    return replace(spec, **changes)


@pytest.fixture(scope="module")
def served(server):
    model = load(served_spec(server))
    yield model
    model.close()


def run_config(out: Path, model: ModelSpec, **changes) -> PosixConfig:
    base = PosixConfig(model=model, dataset=DatasetSpec("mmlu"), variant="spelling", num_sets=3, num_variants=5,
                     max_new_tokens=5, output_dir=str(out), score_cache=False, embedding=None)
    return replace(base, **changes)


# ------------------------------------------------------------------------------------------------------ parity


def per_token_gap(ours, theirs, lengths) -> float:
    """The largest |Δ log P| of a matrix entry divided by its response's length (vLLM computes log-probabilities
    with float32 ``torch.log_softmax``, off by 1-3e-5 a token on CPU, always upwards: over a 30-token response that
    adds up to about 5e-4, where the in-process engine stays within 1e-5 of float64)."""
    return float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs)) / np.asarray(lengths)[None, :]))


@pytest.mark.slow
def test_engine_parity_with_the_in_process_engine(lm, served):
    """Greedy responses identical; every token's log-probability within 1e-4, and every summed one within 1e-4 per
    token (matrix and candidates)."""
    prompts = ["Question: What is the capital of France?\nA:", "Question: What is the capitl of France?\nA:",
               "Q: Name the largest planet.\nAnswer:", "Tell me a short joke about cats.",
               "Question: What is the capital of France?\nA:"]  # a repeated prompt is sent once
    sets = [[lm.encode(p) for p in prompts[:3]], [lm.encode(p) for p in prompts[2:]]]
    candidates = [[lm.encode(" (A)", add_special_tokens=False), lm.encode(" Paris", add_special_tokens=False)]] * 2
    ours = dict(ScoringEngine(lm, 8).score_sets(sets, candidates))
    theirs = dict(ServerEngine(served, 8).score_sets(sets, candidates))
    worst_token, worst_sum = 0.0, 0.0
    for k in range(len(sets)):
        assert theirs[k].responses == ours[k].responses
        for a, b in zip(theirs[k].generation_logprobs, ours[k].generation_logprobs):
            worst_token = max(worst_token, float(np.max(np.abs(np.subtract(a, b)))))
        worst_sum = max(worst_sum, float(np.max(np.abs(theirs[k].matrix - ours[k].matrix))))
        worst_token = max(worst_token, per_token_gap(ours[k].matrix, theirs[k].matrix, ours[k].lengths),
                          per_token_gap(ours[k].candidates, theirs[k].candidates, [len(c) for c in candidates[k]]))
    print(f"vLLM server against the in-process engine: max |Δ log P| per token {worst_token:.2e}, "
          f"per response {worst_sum:.2e}")
    assert worst_token < 1e-4


@pytest.mark.slow
def test_a_run_through_the_server_matches_the_in_process_run(lm, served, tmp_path):
    """ψ within 1e-4 on real prompt sets (3 MMLU sets, spelling variants), and the options' picks the same."""
    here_spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
    here = run(run_config(tmp_path / "here", here_spec), lm=lm, progress=False)
    there = run(run_config(tmp_path / "vllm", served.spec), lm=served, progress=False)
    records = list(zip(read_sets(tmp_path / "here"), read_sets(tmp_path / "vllm")))
    assert len(records) == 3
    worst_psi = 0.0
    for a, b in records:
        assert [r["token_ids"] for r in a["responses"]] == [r["token_ids"] for r in b["responses"]]
        assert per_token_gap(a["logprob_matrix"], b["logprob_matrix"], a["lengths"]) < 1e-4
        worst_psi = max(worst_psi, abs(a["psi"] - b["psi"]))
        assert [p["by_options"]["pred"] for p in a["answers"]] == [p["by_options"]["pred"] for p in b["answers"]]
    print(f"max |Δψ| per set between the vLLM server and the in-process engine: {worst_psi:.2e}")
    assert worst_psi < 1e-4
    assert abs(here["psi"]["posix"] - there["psi"]["posix"]) < 1e-4
    assert there["model"]["backend"] == "vllm" and there["model"]["served_model"] == SERVED


@pytest.mark.slow
def test_the_classification_task_through_the_server(lm, served, tmp_path):
    """Errica et al.'s setting: the same greedy labels and label log-probabilities (within 1e-4) as in-process."""
    from posixlab.runner import run as run_classification
    from posixlab.tasks.classification import ClassificationConfig, ClassificationData
    from posixlab.rephrase import RephraserConfig

    rephrasings = tmp_path / "rephrasings.jsonl"
    from posixlab.classification_prompts import TASKS

    rephrasings.write_text(json.dumps({"original": TASKS["mmlu_letters"], "paraphrases": [
        "Pick the right answer to this multiple-choice question."]}) + "\n")
    records = {}
    for name, model in (("here", lm), ("vllm", served)):
        cfg = ClassificationConfig(model=served.spec if name == "vllm" else ModelSpec(
            "smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"), data=ClassificationData(num_samples=3),
            strategy="simple", num_rephrasings=2, probability="label_probs", output_dir=str(tmp_path / name),
            score_cache=False, rephraser=RephraserConfig(backend="file", path=str(rephrasings)))
        run_classification(cfg, lm=model, progress=False)
        records[name] = [json.loads(line) for line in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
    for a, b in zip(records["here"], records["vllm"]):
        assert [p["answer"] for p in a["predictions"]] == [p["answer"] for p in b["predictions"]]
        assert np.max(np.abs(np.array(a["label_logprobs"]) - np.array(b["label_logprobs"]))) < 1e-4  # 1-2 tokens


@pytest.mark.slow
def test_structured_answers_through_the_server_honour_every_schema(lm, served, tmp_path):
    """strategy=structured on vLLM: each prompt's generation held to its schema variant by the server's
    structured_outputs; every answer is a valid object of its own schema (its field name, its enum), checked here
    rather than trusted from a 200. The in-process run (llguidance) on the same prompts is reported beside it."""
    from posixlab.runner import run as run_classification
    from posixlab.tasks.classification import ClassificationConfig, ClassificationData

    records, saved = {}, None
    for name, model in (("vllm", served), ("here", lm)):
        cfg = ClassificationConfig(model=served.spec if name == "vllm" else ModelSpec(
            "smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"), data=ClassificationData(num_samples=3),
            strategy="structured", variants="schema", num_rephrasings=4, schema_dimensions=("order", "names"),
            chat_template=True, output_dir=str(tmp_path / name), score_cache=False)
        summary = run_classification(cfg, lm=model, progress=False)
        records[name] = [json.loads(line) for line in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
        saved = json.loads((tmp_path / name / "rephrasings.json").read_text())["schemas"]
        if name == "vllm":
            assert summary["structured"]["failures"]["rate"] == 0.0
    assert {v["dimension"] for v in saved} == {"original", "order", "names"}
    for record in records["vllm"]:
        for p, variant in zip(record["predictions"], saved):
            answer = json.loads(p["answer"])
            field = variant["schema"]["field_name"]
            assert set(answer) == {field} and answer[field] in variant["schema"]["classes"], p["answer"]
    same = [a["label"] == b["label"] for ra, rb in zip(records["vllm"], records["here"])
            for a, b in zip(ra["predictions"], rb["predictions"])]
    print(f"vLLM (xgrammar) and in-process (llguidance) structured labels agree on {sum(same)} of {len(same)}")


# --------------------------------------------------------------------------------------------- cache and identity


@pytest.mark.slow
def test_the_score_cache_is_keyed_by_the_server(lm, served, tmp_path):
    identity = served.identity
    assert identity["backend"] == "vllm" and identity["served_model"] == SERVED
    assert identity["max_model_len"] == 2048 and identity["vllm"] and identity["dtype"] == "float32"
    folder = tmp_path / "scores"
    # never the in-process engine's file, nor another server's (here: another served name of the same weights)
    assert ScoreCache(folder, identity).path != ScoreCache(folder, lm.identity).path
    assert ScoreCache(folder, identity).path != ScoreCache(folder, {**identity, "served_model": "other"}).path
    first = run(run_config(tmp_path / "a", served.spec, num_sets=2, score_cache=True, score_cache_dir=str(folder)),
                lm=served, progress=False)
    again = run(run_config(tmp_path / "b", served.spec, num_sets=2, score_cache=True, score_cache_dir=str(folder)),
                lm=served, progress=False)
    assert first["compute"]["sets_from_cache"] == 0 and again["compute"]["sets_from_cache"] == 2
    assert read_sets(tmp_path / "a")[0]["logprob_matrix"] == read_sets(tmp_path / "b")[0]["logprob_matrix"]
    # the summary counts what the server was sent (it runs every request's prompt whole), not the in-process
    # engine's cost model of the same sets, which runs shared prefixes once
    cost_model = sum(r["stats"]["forward_tokens"] for r in read_sets(tmp_path / "a"))
    assert first["compute"]["engine"] == "server" and first["compute"]["forward_tokens"] > cost_model
    assert first["compute"]["forward_tokens"] == first["engine"]["forward_tokens"] and again["engine"]["forward_tokens"] == 0
    assert "Forward tokens computed (server)" in (tmp_path / "a" / "summary.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------------- failures


@pytest.mark.slow  # loads the packaged SmolLM2 (its tokenizer; a cold cache converts it) before it asks the port
def test_a_closed_port_fails_at_once_with_one_message(tmp_path):
    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct", backend="vllm",
                     server=ServerSettings(base_url=f"http://127.0.0.1:{closed_port()}/v1", max_attempts=2))
    started = time.monotonic()
    with pytest.raises(ServerUnreachableError, match="cannot reach the vLLM server .* 2 attempts"):
        run(run_config(tmp_path / "run", spec, num_sets=100), progress=False)
    elapsed = time.monotonic() - started
    print(f"a run against a closed port failed after {elapsed:.1f} s")
    assert elapsed < 30  # the server is asked before any prompt set is built
    assert not (tmp_path / "run" / "sets.jsonl").exists()


def test_a_rejected_key_and_a_failing_server_are_one_message_each(monkeypatch):
    """The shared client's errors, against a scripted OpenAI-compatible server (no vLLM needed): a 401 on /models
    names the key's variable; a 500 on every attempt says how many were made and what to change."""
    from chat_server import ChatServer

    from posixlab.errors import ServerResponseError
    from posixlab.serving.client import VLLMClient

    monkeypatch.setenv("POSIXLAB_TEST_KEY", "sk-never-shown")
    with ChatServer(lambda body, n: (200, {}, {}), models_status=401) as scripted:
        with pytest.raises(ServerResponseError, match=r"rejected the API key .*\$POSIXLAB_TEST_KEY") as err:
            VLLMClient(scripted.base_url, api_key_env="POSIXLAB_TEST_KEY", max_attempts=2).models()
    assert "sk-never-shown" not in str(err.value)
    with ChatServer(lambda body, n: (500, {}, {"error": {"message": "engine died"}})) as scripted:
        with pytest.raises(ServerResponseError, match=r"HTTP 500 \(engine died\) to all 2 attempts"):
            VLLMClient(scripted.base_url, max_attempts=2).generate("m", [1, 2, 3], 5, [0])
    assert scripted.requests == 2
    assert scripted.bodies[0]["temperature"] == 0 and scripted.bodies[0]["max_tokens"] == 5


@pytest.mark.slow
def test_a_model_the_server_does_not_serve_is_named(server):
    with pytest.raises(ConfigError, match=f"does not serve 'llama'; it serves '{SERVED}'"):
        load(served_spec(server, server=ServerSettings(base_url=server.base_url, served_name="llama")))


@pytest.mark.slow
def test_a_tokenizer_that_disagrees_with_the_server_is_an_error(server):
    # the packaged Qwen2.5-Coder's tokenizer against the server's SmolLM2
    with pytest.raises(TokenizerMismatchError, match="disagree"):
        load(served_spec(server, path="qwen2.5-coder-0.5b-instruct",
                         server=ServerSettings(base_url=server.base_url, served_name=SERVED)))


@pytest.mark.parametrize("backend, server, message", [
    ("vllm", {}, "needs either model.server.base_url"),
    ("vllm", {"launch": True, "base_url": "http://x/v1"}, "not both"),
    ("transformers", {"base_url": "http://x/v1"}, "add model.backend=vllm"),
    ("tgi", {}, "unknown backend"),
    ("vllm", {"base_url": "http://x/v1", "max_concurrency": 0}, "model.server.max_concurrency must be at least 1"),
])
def test_server_settings_are_checked_before_any_work(backend, server, message, tmp_path):
    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct", backend=backend,
                     server=ServerSettings(**server))
    with pytest.raises(ConfigError, match=message):
        run(run_config(tmp_path / "run", spec), progress=False)


# ------------------------------------------------------------------------------------------------------- launch


@pytest.mark.slow
def test_launch_true_starts_a_server_for_the_run_and_stops_it(server, vllm_python, tmp_path):
    """The command line with model.server.launch=true: a second server on its own port, gone when the run ends."""
    out = tmp_path / "run"
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "POSIXLAB_VLLM_PYTHON": vllm_python}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "model.backend=vllm", "model.server.launch=true",
         f"model.server.launch_args=[--kv-cache-memory-bytes,'{2**30}']", "model.dtype=float32", "num_sets=2", "num_variants=3",
         "embedding=none", "logger=none", "progress=false", f"hydra.run.dir={out}", "score_cache=false"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["backend"] == "vllm" and summary["psi"]["num_sets"] == 2
    port = int(proc.stderr.split("starting a vLLM server for smollm2-135m-instruct on port ")[1].split()[0])
    with socket.socket() as probe:  # nothing listens there any more: the server was stopped
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    assert not [line for line in processes if f"--port {port} " in line + " "]


# a chat template that refuses a system turn, as Gemma 2's and Mistral-7B-Instruct-v0.1's do, in SmolLM2's format
REFUSES_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
                  "{% endif %}{% for m in messages %}"
                  "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
                  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.mark.slow
def test_a_judge_behind_a_server_whose_template_refuses_a_system_turn(lm, small_results, vllm_python, tmp_path,
                                                                      capsys, monkeypatch):
    """vLLM serving SmolLM2 with a template that raises on a system turn answers the judge's first request (which
    opens with one) with HTTP 400; the client asks it again folded and sends the rest folded. The verdicts, replies
    and P(yes) are then the in-process judge's over the same template (``chat_text`` folds the same way), P(yes)
    within 1e-4."""
    import shutil

    from conftest import lm_spec

    from posixlab.commands import judge_command
    from posixlab.judge import ROWS_FILE, SUMMARY_FILE, judge_run

    template = tmp_path / "refuses_system.jinja"
    template.write_text(REFUSES_SYSTEM)
    run = shutil.copytree(next(small_results.glob("*_mmlu_template_0shot")), tmp_path / "run")
    folder = prepare_packaged_model("smollm2-135m-instruct", default_cache_dir())
    args = TEST_SERVER_ARGS + ("--chat-template", str(template))
    with LocalServer(vllm_python, str(folder), SERVED, "float32", 2048, args) as refusing:
        assert judge_command([str(run), "--judge", SERVED, "--base-url", refusing.base_url, "--sets", "2",
                              "--out", str(tmp_path / "served")]) == 0
    err = capsys.readouterr().err
    assert err.count("refused a chat that opens with a system turn (HTTP 400") == 1, err[-2000:]

    monkeypatch.setattr(lm.tokenizer, "chat_template", REFUSES_SYSTEM)
    here_summary = judge_run(run, lm_spec(), lm=lm, sets=2, out=tmp_path / "here", progress=False)
    served_summary = json.loads((tmp_path / "served" / SUMMARY_FILE).read_text())
    assert served_summary["judge"]["system_folded"] is here_summary["judge"]["system_folded"] is True
    served, here = ([json.loads(line) for line in (tmp_path / where / ROWS_FILE).read_text().splitlines()]
                    for where in ("served", "here"))
    pairs = [(a, b) for x, y in zip(served, here) for a, b in zip(x["verdicts"] + [x["control"]],
                                                                  y["verdicts"] + [y["control"]]) if a and b]
    asked = [(a, b) for a, b in pairs if a.get("replies")]
    assert asked and all(a["replies"] == b["replies"] and a["equivalent"] == b["equivalent"] for a, b in asked)
    gap = max(abs(a["p_same"] - b["p_same"]) for a, b in asked)
    print(f"judge behind vLLM with a template refusing system turns: {len(asked)} pairs as in process, "
          f"max |Δ P(yes)| {gap:.1e}")
    assert gap < 1e-4
