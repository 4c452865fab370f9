"""The hub path run for real: ``model=llama2-7b`` (gated ``meta-llama/Llama-2-7b-hf``) and ``dataset=mmlu``
(``cais/mmlu``), Alpaca's and BBH's hub data sets, fetched by the real huggingface_hub, transformers and datasets
from the session's hub stand-in (tests/hub_server.py, repositories built by tests/hub_fixtures.py) in subprocesses
that read HF_ENDPOINT at start, as a user's run does. Nothing here reaches the internet: a refusing proxy catches any
request that is not for loopback.

Each fault gives one posixlab message, exit status 2, no traceback, and leaves a cache the next run completes from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub_fixtures import ADAPTER_ID, BBH_TASKS, MODEL_ID, ROOT, closed_port, hub_env, mmlu_dev_rows

DESIGN_CARD = ["model=llama2-7b", "variant=template", "num_sets=3", "logger=none", "embedding=none"]


def run_py(tmp: Path, env: dict, *overrides: str, name: str = "run", timeout: int = 180, card=DESIGN_CARD):
    """``python run.py`` with the design card's command (3 sets) and ``overrides``, its results under ``tmp/name``."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "run.py", *card, *overrides, f"hydra.run.dir={tmp / name}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    proc.seconds = time.monotonic() - started
    return proc


def env_for(tmp: Path, endpoint: str, **kw) -> dict:
    # the score cache too lives in the test's folder: a run must not be answered from another test's (or the user's)
    return hub_env(tmp / "hf", endpoint, POSIXLAB_CACHE=str(tmp / "posixlab"), **kw)


def one_error(proc) -> str:
    """The run's one posixlab message, checked to be the only one and to come without a traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("posixlab error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    print(errors[0])  # what the user sees (pytest -s shows it)
    return errors[0]


def snapshot(tmp: Path) -> Path:
    snapshots = list((tmp / "hf" / "hub" / "models--meta-llama--Llama-2-7b-hf" / "snapshots").iterdir())
    assert len(snapshots) == 1
    return snapshots[0]


def summary(tmp: Path, name: str) -> dict:
    return json.loads((tmp / name / "summary.json").read_text())


def test_hf_hub_offline_is_read_as_huggingface_hub_reads_it(monkeypatch):
    from huggingface_hub.constants import ENV_VARS_TRUE_VALUES

    from posixlab.hub import TRUE_VALUES, hub_offline_flag

    assert TRUE_VALUES == ENV_VARS_TRUE_VALUES
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    for value, offline in [("no", False), ("0", False), ("false", False), ("", False), ("off", False),
                           ("1", True), ("YES", True), ("on", True), ("True", True)]:
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
        assert hub_offline_flag() is offline, value
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")  # huggingface_hub's fallback variable
    assert hub_offline_flag()


def test_the_stand_in_answers_as_huggingface_hub_expects(tmp_path, monkeypatch):
    """The server alone, through huggingface_hub's own calls (its endpoint passed explicitly: no HF_ENDPOINT here)."""
    from huggingface_hub import HfApi, constants, hf_hub_download
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, RemoteEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    from hub_server import HubServer

    (tmp_path / "repo" / "sub").mkdir(parents=True)
    (tmp_path / "repo" / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "repo" / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 40)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # in case the environment set it: this test is on loopback
    server = HubServer(token="hf_t")
    try:
        server.add("model", "org/gated", tmp_path / "repo", gated=True)
        api, cache = HfApi(endpoint=server.url), tmp_path / "cache"
        info = api.model_info("org/gated")  # public, as on the Hub, and says it is gated
        assert info.sha == server.repos[("model", "org/gated")].sha and info.gated == "manual"
        assert sorted(api.list_repo_files("org/gated")) == ["config.json", "sub/weights.bin"]
        assert [e.path for e in api.get_paths_info("org/gated", ["sub", "nope"])] == ["sub"]
        with pytest.raises(GatedRepoError):
            hf_hub_download("org/gated", "config.json", endpoint=server.url, cache_dir=cache, token=False)
        path = hf_hub_download("org/gated", "sub/weights.bin", endpoint=server.url, cache_dir=cache, token="hf_t")
        assert Path(path).read_bytes() == (tmp_path / "repo" / "sub" / "weights.bin").read_bytes()
        assert Path(path).parent.parent.name == info.sha  # the snapshot is named by X-Repo-Commit
        with pytest.raises(RemoteEntryNotFoundError):
            hf_hub_download("org/gated", "nope.json", endpoint=server.url, cache_dir=cache, token="hf_t")
        with pytest.raises(RevisionNotFoundError):
            api.model_info("org/gated", revision="v9")
        with pytest.raises(RepositoryNotFoundError):
            api.model_info("org/missing")
        server.fault("500")
        with pytest.raises(HfHubHTTPError) as err:
            api.model_info("org/gated")
        assert err.value.response.status_code == 500
    finally:
        server.close()


@pytest.mark.slow
def test_the_design_card_command_downloads_the_gated_model_then_runs_from_the_cache(healthy_hub, tmp_path):
    server = healthy_hub.server
    server.requests.clear()
    first = run_py(tmp_path, env_for(tmp_path, healthy_hub.url), name="first")
    assert first.returncode == 0, first.stderr[-3000:]
    posix = [line for line in first.stdout.splitlines() if line.startswith("POSIX = ")]
    assert len(posix) == 1 and "3 sets of N = 21" in posix[0] and "llama2-7b · mmlu · template" in posix[0]
    got = {(method, path.rsplit("/", 1)[-1]): status for method, path, status in server.requests}
    assert got[("GET", "model.safetensors")] == 200 and got[("GET", "tokenizer.json")] == 200
    commit = server.repos[("model", MODEL_ID)].sha
    assert snapshot(tmp_path).name == commit and summary(tmp_path, "first")["model"]["commit"] == commit

    # the server stopped (nothing listens there), no token, HF_HUB_OFFLINE unset: the complete snapshot is used
    second = run_py(tmp_path, env_for(tmp_path, f"http://127.0.0.1:{closed_port()}", token=None), name="second")
    assert second.returncode == 0, second.stderr[-3000:]
    assert [line for line in second.stdout.splitlines() if line.startswith("POSIX = ")] == posix
    assert summary(tmp_path, "second")["model"] == summary(tmp_path, "first")["model"]  # the same weights, by commit
    assert summary(tmp_path, "second")["compute"]["sets_from_cache"] == 3  # so the score cache answers every set
    print(f"download run {first.seconds:.1f} s, cached run {second.seconds:.1f} s")

    # the hub id itself (no config in conf/model/): the same weights, named by the repository
    by_id = run_py(tmp_path, env_for(tmp_path, f"http://127.0.0.1:{closed_port()}", token=None), name="by_id",
                   card=[f"model={MODEL_ID}", *DESIGN_CARD[1:]])
    assert by_id.returncode == 0, by_id.stderr[-3000:]
    assert [line for line in by_id.stdout.splitlines() if line.startswith("POSIX = ")] == \
        [posix[0].replace("llama2-7b · ", f"{MODEL_ID.split('/')[1]} · ")]
    assert summary(tmp_path, "by_id")["model"]["commit"] == commit


@pytest.mark.slow
@pytest.mark.parametrize("token, said", [(None, "no token was sent (HF_TOKEN is not set)"),
                                         ("hf_not_the_right_one", "it refused the token sent")])
def test_a_gated_model_without_access_stops_first_with_one_message(healthy_hub, tmp_path, token, said):
    server = healthy_hub.server
    server.requests.clear()
    proc = run_py(tmp_path, env_for(tmp_path, healthy_hub.url, token=token))
    message = one_error(proc)
    assert said in message and "HF_TOKEN" in message
    assert f"Accept its licence at {healthy_hub.url}/{MODEL_ID}" in message  # the licence page, on the hub asked
    assert "huggingface.co" not in proc.stderr + proc.stdout  # HF_ENDPOINT points elsewhere: never sent there
    # before any other work: one HEAD of config.json, refused; no data built, nothing loaded, nothing written
    assert server.requests == [("HEAD", f"/{MODEL_ID}/resolve/main/config.json", 401)]
    assert "posixlab: loading" not in proc.stderr and not (tmp_path / "run" / "sets.jsonl").exists()
    assert not (tmp_path / "hf" / "hub" / "models--meta-llama--Llama-2-7b-hf" / "blobs").exists()


@pytest.mark.slow
def test_a_wrong_id_or_a_hub_answering_500_is_one_message_and_the_next_run_completes(healthy_hub, tmp_path):
    server, env = healthy_hub.server, env_for(tmp_path, healthy_hub.url)  # one cache for every run below
    message = one_error(run_py(tmp_path, env, "model.path=meta-llama/Llama-2-7b-typo", name="typo"))
    assert "has no repository meta-llama/Llama-2-7b-typo (HTTP 404). Check model.path" in message
    assert f"Hugging Face Hub at {healthy_hub.url}" in message
    server.fault("500")  # everything: the run stops at its first question
    message = one_error(run_py(tmp_path, env, name="all500"))
    assert "answered HTTP 500 (Internal Error" in message and "run again later" in message
    server.fault("500", match="model.safetensors", method="GET")  # only the weights' download, after the tokenizer's
    message = one_error(run_py(tmp_path, env, name="weights500"))
    assert "could not be downloaded from the Hugging Face Hub" in message and "500 Internal Server Error" in message
    assert (snapshot(tmp_path) / "tokenizer.json").is_file() and not (snapshot(tmp_path) / "model.safetensors").exists()
    server.clear()
    again = run_py(tmp_path, env, name="again")  # the partial snapshot is not taken for a cached model
    assert again.returncode == 0 and "POSIX = " in again.stdout, again.stderr[-3000:]


@pytest.mark.slow
def test_a_hub_embedding_model_the_hub_will_not_serve_stops_the_run_first_in_one_message(healthy_hub, tmp_path,
                                                                                         monkeypatch):
    """embedding=gte-large offline retried each of its files five times (over a minute of warnings, after the run's
    model had loaded); now the hub is asked once, before any work."""
    card = ["num_sets=1", "logger=none", "embedding=gte-large"]  # the packaged model: only the embedder is asked
    env = env_for(tmp_path, healthy_hub.url)
    proc = run_py(tmp_path, env, name="absent", card=card)
    message = one_error(proc)  # the stand-in has no thenlper/gte-large
    assert f"the embedding model gte-large (thenlper/gte-large) is not in the Hugging Face cache and cannot be " \
           f"fetched from {healthy_hub.url} (RepositoryNotFoundError" in message and "embedding=minilm" in message
    assert "loading smollm2" not in proc.stderr and proc.seconds < 60
    message = one_error(run_py(tmp_path, {**env, "HF_HUB_OFFLINE": "1"}, name="offline", card=card))
    assert "(HF_HUB_OFFLINE is set)" in message
    from hub_fixtures import TOKEN

    from posixlab.embeddings import EmbeddingSpec, check_embedding_available

    monkeypatch.setenv("HF_ENDPOINT", healthy_hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    check_embedding_available(EmbeddingSpec(name="served", source="hub", model=MODEL_ID))  # the hub serves it: no error


@pytest.mark.slow
def test_a_server_that_stops_mid_download_is_one_message_and_the_next_run_completes(healthy_hub, tmp_path):
    server, env = healthy_hub.server, env_for(tmp_path, healthy_hub.url)
    size = (healthy_hub.folders[MODEL_ID] / "model.safetensors").stat().st_size
    server.fault("stop", match="model.safetensors", after_bytes=size // 3)  # a third of the weights, then down
    proc = run_py(tmp_path, env, name="stopped")
    message = one_error(proc)
    assert "could not be downloaded from the Hugging Face Hub" in message and "RemoteProtocolError" in message
    assert "the next run fetches the rest" in message
    assert not (snapshot(tmp_path) / "model.safetensors").exists()  # no half file where a whole one is read
    assert server.down
    server.clear()
    again = run_py(tmp_path, env, name="again")
    assert again.returncode == 0 and "POSIX = " in again.stdout, again.stderr[-3000:]
    assert (snapshot(tmp_path) / "model.safetensors").stat().st_size == size


@pytest.mark.slow
def test_a_hub_slower_than_the_timeout_is_one_message_in_seconds(healthy_hub, tmp_path):
    healthy_hub.server.fault("slow", delay=3)
    proc = run_py(tmp_path, env_for(tmp_path, healthy_hub.url, HF_HUB_ETAG_TIMEOUT="1"))
    message = one_error(proc)
    assert "ReadTimeout" in message and f"Run on a machine that reaches {healthy_hub.url}" in message
    assert proc.seconds < 30


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["500", "stop"])
def test_a_data_set_download_that_fails_is_one_message_and_the_next_run_completes(healthy_hub, tmp_path, fault):
    server, env = healthy_hub.server, env_for(tmp_path, healthy_hub.url)
    server.fault(fault, match="all/test-", method="GET", after_bytes=2000)
    message = one_error(run_py(tmp_path, env, "dataset=mmlu", name="failed"))
    assert "dataset MMLU (cais/mmlu, config all, split 'test') cannot be loaded" in message
    assert ("500 Internal Server Error" if fault == "500" else "RemoteProtocolError") in message
    server.clear()
    again = run_py(tmp_path, env, "dataset=mmlu", name="again")
    assert again.returncode == 0 and "llama2-7b · mmlu · template" in again.stdout, again.stderr[-3000:]


PROMPT_SETS = """
import json, sys
from posixlab.data import DatasetSpec, load_items
from posixlab.tasks.posix import PosixConfig, build_prompt_sets

def sets(spec):
    built, _ = build_prompt_sets(PosixConfig(model=None, dataset=spec, variant="template", num_sets=None,
                                             num_variants=20, embedding=None), progress=False)
    return {s.item.question: [s.item.subject, s.item.options, s.item.answer, [p.text for p in s.prompts]]
            for s in built}

def items(spec):
    return [[i.item_id, i.question, i.options, i.subject, i.answer] for i in load_items(spec)]

source = sys.argv[1]
out = {"mmlu": sets(DatasetSpec("mmlu", source=source)) if source == "hub" else sets(DatasetSpec("mmlu"))}
for name, path in (("alpaca", "alpaca_fixture.jsonl"), ("bbh", "bbh_fixture.jsonl")):
    local = {"source": "path", "path": f"tests/fixtures/{path}"} if source == "path" else {"source": "hub"}
    out[name] = items(DatasetSpec(name, subjects=json.loads(sys.argv[2]) if name == "bbh" else None, **local))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_hub_data_sets_give_the_prompt_sets_of_the_bundled_copies_and_are_cached(healthy_hub, tmp_path):
    def prompt_sets(source: str, env: dict) -> dict:
        proc = subprocess.run([sys.executable, "-c", PROMPT_SETS, source, json.dumps(list(BBH_TASKS))], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.splitlines()[-1])

    env = env_for(tmp_path, healthy_hub.url)
    local = prompt_sets("path", env)  # the bundled MMLU sample, the Alpaca and BBH fixtures
    hub = prompt_sets("hub", env)  # cais/mmlu (all, test), tatsu-lab/alpaca (train), lukaemon/bbh (two tasks)
    assert len(local["mmlu"]) == len(hub["mmlu"]) == 285
    assert hub["mmlu"] == local["mmlu"]  # per question: subject, options, gold answer and the 21 template prompts
    assert hub["alpaca"] == local["alpaca"] and len(hub["alpaca"]) >= 2  # ids, instructions, reference outputs
    assert hub["bbh"] == local["bbh"] and {row[3] for row in hub["bbh"]} == set(BBH_TASKS)
    # the server stopped: with HF_HUB_OFFLINE set, as posixlab's data loaders expect, datasets' cache answers
    offline = prompt_sets("hub", env_for(tmp_path, f"http://127.0.0.1:{closed_port()}", HF_HUB_OFFLINE="1"))
    assert offline == hub


FEW_SHOT_SETS = """
import json, sys
from posixlab.data import DatasetSpec
from posixlab.tasks.posix import PosixConfig, build_prompt_sets

spec = DatasetSpec("mmlu", **json.loads(sys.argv[1]))
built, about = build_prompt_sets(PosixConfig(model=None, dataset=spec, variant="template", num_sets=None,
                                             num_variants=2, shots=3, embedding=None), progress=False)
print(json.dumps({"pool": about["exemplar_pool"],
                  "sets": {s.item.item_id: [[e.item_id for e in s.shots], [p.text for p in s.prompts]]
                           for s in built}}))
"""


@pytest.mark.slow
def test_few_shot_exemplars_are_the_first_of_the_dev_split_from_the_hub_or_from_its_file(healthy_hub, tmp_path):
    """The hub's dev split gives every question of a subject its first k dev questions (the MMLU harnesses' rule),
    the first question too, whose id the loaders number like the first dev question's; the same split saved as a
    file (``dataset.exemplar_path``, for a replication without the hub) gives the very same prompts."""
    from posixlab.data.files import read_records

    def few_shot(env: dict, **spec) -> dict:
        proc = subprocess.run([sys.executable, "-c", FEW_SHOT_SETS, json.dumps(spec)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.splitlines()[-1])

    env = env_for(tmp_path, healthy_hub.url)
    hub = few_shot(env, source="hub", subjects=["abstract_algebra"])
    assert hub["pool"] == "the MMLU dev split (cais/mmlu)" and len(hub["sets"]) == 5
    for item_id, (shots, prompts) in hub["sets"].items():
        assert shots == [f"dev:mmlu/abstract_algebra/{k}" for k in range(3)], item_id
        assert all(p.count("(dev ") == 3 and "(dev 3)" not in p for p in prompts)
    # offline: the test questions and the dev split as files
    rows = [{"question": r["question"], "subject": r["subject"].replace(" ", "_"), "choices": r["choices"],
             "answer": r["answer"]} for r in read_records(ROOT / "posixlab" / "data" / "mmlu_sample.jsonl")]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:5]))
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mmlu_dev_rows(rows)))
    files = few_shot(env, source="path", path=str(tmp_path / "test.jsonl"), exemplar_path=str(tmp_path / "dev.jsonl"))
    assert files["pool"].startswith(f"{tmp_path / 'dev.jsonl'} (sha256 ")
    assert {i: prompts for i, (_, prompts) in files["sets"].items()} == {i: p for i, (_, p) in hub["sets"].items()}
    expected = [f"dev.jsonl:mmlu/abstract_algebra/{k}" for k in range(3)]
    assert all(shots == expected for shots, _ in files["sets"].values())


@pytest.mark.slow
def test_a_lora_adapter_from_the_hub_is_merged_named_cached_apart_and_read_offline_later(healthy_hub, tmp_path):
    server, env = healthy_hub.server, env_for(tmp_path, healthy_hub.url)  # one cache for every run below
    base = run_py(tmp_path, env, name="base")
    adapted = run_py(tmp_path, env, f"model.adapter={ADAPTER_ID}", name="adapted")
    assert base.returncode == 0 and adapted.returncode == 0, (base.stderr[-2000:], adapted.stderr[-2000:])
    lines = {name: [line for line in run.stdout.splitlines() if line.startswith("POSIX = ")]
             for name, run in (("base", base), ("adapted", adapted))}
    assert "· llama2-7b+llama2-7b-lora · mmlu · template" in lines["adapted"][0]
    assert lines["adapted"][0].split(" (")[0] != lines["base"][0].split(" (")[0]  # another model, another POSIX
    model = summary(tmp_path, "adapted")["model"]
    assert model["name"] == "llama2-7b+llama2-7b-lora" and model["commit"] == summary(tmp_path, "base")["model"]["commit"]
    assert model["adapter"]["commit"] == server.repos[("model", ADAPTER_ID)].sha
    assert model["adapter"]["peft_type"] == "LORA" and model["adapter"]["path"] == ADAPTER_ID
    assert summary(tmp_path, "adapted")["compute"]["sets_from_cache"] == 0  # the base model's scores not served

    # the hub gone, no token: the base model and the adapter from their cached snapshots, the scores from the cache
    offline = env_for(tmp_path, f"http://127.0.0.1:{closed_port()}", token=None)
    again = run_py(tmp_path, offline, f"model.adapter={ADAPTER_ID}", name="again")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [line for line in again.stdout.splitlines() if line.startswith("POSIX = ")] == lines["adapted"]
    assert summary(tmp_path, "again")["compute"]["sets_from_cache"] == 3

    # an adapter the hub does not have: one message, before the base model's weights download (a fresh cache)
    server.requests.clear()
    wrong = run_py(tmp_path, env_for(tmp_path / "fresh", healthy_hub.url), "model.adapter=posixlab-test/no-such-lora",
                   name="wrong")
    assert "has no repository posixlab-test/no-such-lora (HTTP 404). Check model.adapter" in one_error(wrong)
    assert not any(path.endswith("model.safetensors") and method == "GET" for method, path, _ in server.requests)
    assert any(path.endswith("config.json") for _, path, _ in server.requests)  # the base model was asked for
