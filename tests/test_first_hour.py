"""What a new user hits in the first hour (issue 47): the documented ``posixlab.classify`` call, where rephrasings come
from and what they cost (no hidden local model, dry runs that write nothing), typos that get posixlab's own "did you
mean", a constant classifier made visible and gated, the shipped paraphrases that make the offline paraphrase runs
fast, and the smaller points (progress modes, the running mean S, one endpoint under two spellings)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from chat_server import ChatServer, completion
from posixlab.classification_prompts import TASKS
from posixlab.errors import CacheError, ConfigError
from posixlab.gate import GateConfig, check_gate, gate_passed
from posixlab.models import ModelSpec
from posixlab.models.loading import ServerSettings
from posixlab.rephrase import ParaphraseFile, RephraserConfig, make_paraphrase_source
from posixlab.rephrase.config import make_rephraser, resolve_rephraser
from posixlab.rephrase.source import SHIPPED, shipped_files
from posixlab.tasks.classification import ClassificationConfig, ClassificationData, build_classification_summary

QWEN15 = "qwen2.5-coder-1.5b-instruct"
MMLU_SHIPPED = SHIPPED / f"mmlu_sample.{QWEN15}.jsonl"
TASKS_SHIPPED = SHIPPED / f"task_sentences.{QWEN15}.jsonl"


def chat_spec(base_url: str, name: str = "scripted") -> ModelSpec:
    return ModelSpec(name, "api", name, backend="chat",
                     server=ServerSettings(base_url=base_url, api_key_env="POSIXLAB_TEST_KEY", max_attempts=1,
                                           request_timeout=30))


# --- 1. where rephrasings come from --------------------------------------------------------------------------------

def test_the_default_rephraser_is_the_chat_endpoint_for_a_chat_run_and_the_packaged_model_otherwise():
    spec = chat_spec("http://127.0.0.1:8765/v1", "my-model")
    spec = replace(spec, server=replace(spec.server, max_concurrency=3))
    chat = resolve_rephraser(RephraserConfig(), spec, "task_sentence")
    assert (chat.backend, chat.model, chat.base_url, chat.api_key_env, chat.max_concurrency) == \
        ("openai", "my-model", "http://127.0.0.1:8765/v1", "POSIXLAB_TEST_KEY", 3)  # the run's server, all of it
    assert make_rephraser(chat).concurrency == 3
    assert "instruction" in chat.instruction["request"]  # the task-sentence instruction, filled in
    local = resolve_rephraser(RephraserConfig(), ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"))
    assert (local.backend, local.model, local.source) == ("hf", QWEN15, "packaged")
    assert "questions" in local.instruction["system"]  # the question instruction (default.yaml)
    chosen = resolve_rephraser(RephraserConfig(backend="hf"), chat_spec("http://h/v1"))
    assert chosen.backend == "hf"  # a rephraser chosen explicitly is kept
    with pytest.raises(ConfigError, match="no packaged rephraser instruction 'nope'"):
        resolve_rephraser(RephraserConfig(instruction="nope"))


def test_the_classify_default_has_an_instruction_for_every_use(tmp_path):
    """The documented Python call used RephraserConfig() with an empty instruction and crashed once Q > 1."""
    for use in ("default", "task_sentence", "class_description"):
        source = make_paraphrase_source(RephraserConfig(min_similarity=0.0, validate=False), tmp_path, instruction=use)
        assert source.instruction.request and "{text}" in source.instruction.request
        assert source.rephraser.name == f"hf:{QWEN15}" and source.rephraser._lm is None  # nothing loaded


def test_the_built_in_task_sentences_and_the_offline_questions_ship_with_the_package():
    files = {f.path.name: f for f in shipped_files()}
    assert set(files) >= {MMLU_SHIPPED.name, TASKS_SHIPPED.name}
    for sentence in TASKS.values():
        record = files[TASKS_SHIPPED.name].find_original(sentence)
        assert record is not None and len(record["paraphrases"]) >= 29, sentence
        assert record["rephraser"]["model"] == QWEN15
    assert len(files[MMLU_SHIPPED.name].by_original) == 100
    with pytest.raises(CacheError, match="ships with posixlab and is never written"):
        files[MMLU_SHIPPED.name].put({"key": "k", "original": "x", "paraphrases": []})


@pytest.mark.parametrize("backend", ["hf", "llamacpp"])  # the same model in either backend wrote them
def test_shipped_rephrasings_are_read_with_no_model_and_the_plan_says_so(tmp_path, capsys, backend):
    source = make_paraphrase_source(RephraserConfig(backend=backend, min_similarity=0.0, validate=False), tmp_path,
                                    instruction="task_sentence")
    assert source.rephraser.name == f"{backend}:{QWEN15}"
    sentence = TASKS["mmlu_letters"]
    plan = source.plan([sentence], 29)
    assert (plan["ready"], plan["shipped"], plan["to_write"], plan["estimated_requests"]) == (1, 1, 0, 0)
    assert source.announce(plan, "task sentence") == \
        "posixlab: 1 of 1 task sentences' paraphrases ready (1 shipped with posixlab); nothing to write"
    rephrasings, record = source.paraphrases(sentence, 29)
    assert len(rephrasings) == 29 and source.rephraser._lm is None
    assert source.describe()["shipped_paraphrases"]["texts"] == 1
    assert not (tmp_path / "paraphrases").exists(), "a shipped record is not copied into the cache"


def test_a_missing_text_is_announced_with_its_cost_and_a_dry_run_writes_nothing(tmp_path):
    source = make_paraphrase_source(RephraserConfig(min_similarity=0.0, validate=False), tmp_path,
                                    instruction="task_sentence")
    mine = "Sort the support ticket into the team that should handle it."
    plan = source.plan([mine], 29)
    assert (plan["ready"], plan["to_write"], plan["paraphrases_to_write"], plan["local"]) == (0, 1, 29, True)
    # one text: its 6 requests one after another, 112 s each in float32 on 2 cores, and 22 s to open the model
    assert plan["estimated_requests"] == 6 and plan["estimated_minutes"] == 11.6 == round((6 * 112 + 22) / 60, 1)
    assert source.plan([mine, mine + " Now.", mine + " Please."], 29)["estimated_minutes"] == round(
        (9 * 112 + 22) / 60, 1)  # 3 texts, 18 requests: 2 texts in step
    line = source.announce(plan, "task sentence")
    assert f"hf:{QWEN15} writes 29 paraphrases of 1 task sentence(s): about 6 requests, ~11.6 min of local" in line
    source.dry_run = True
    rephrasings, record = source.paraphrases(mine, 3)
    assert rephrasings == [f"{mine} [paraphrase {i}, not yet written]" for i in (1, 2, 3)] and record["dry_run"]
    assert source.rephraser._lm is None and not source.store.path.exists()
    gguf = make_paraphrase_source(RephraserConfig(backend="llamacpp", min_similarity=0.0, validate=False), tmp_path,
                                  instruction="task_sentence")
    plan = gguf.plan([mine], 29)
    assert (plan["estimated_requests"], plan["estimated_minutes"]) == (6, 2.7)  # 24 s a request in llama.cpp, 16 s
    # to open it
    assert gguf.announce(plan, "task sentence").endswith(
        f"llamacpp:{QWEN15} writes 29 paraphrases of 1 task sentence(s): about 6 requests, ~2.7 min of local "
        f"generation on 2 CPU cores (rephraser=openai or rephraser=file avoid it; docs/replication.md)")  # one at a time
    assert "rephraser=llamacpp shortens it" in line and gguf.store.path.name == f"llamacpp-{QWEN15}.jsonl"


def test_a_gguf_rephraser_is_named_by_its_file_and_a_missing_file_stops_before_anything_loads(tmp_path):
    from posixlab.rephrase.config import gguf_rephraser_spec

    hub = gguf_rephraser_spec(RephraserConfig(backend="llamacpp", model="Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"))
    assert (hub.name, hub.source, hub.path) == ("Qwen2.5-7B-Instruct-GGUF-Q4_K_M", "hub",
                                                "Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    mine = gguf_rephraser_spec(RephraserConfig(backend="llamacpp", model=str(tmp_path / "m.gguf")))
    assert (mine.name, mine.source) == ("m", "local")
    with pytest.raises(ConfigError, match="no GGUF file or folder at .*missing.gguf"):
        make_rephraser(RephraserConfig(backend="llamacpp", model=str(tmp_path / "missing.gguf")))
    with pytest.raises(ConfigError, match="OWNER/REPO:TAG"):
        make_rephraser(RephraserConfig(backend="llamacpp", model="a/b:c:d", source="hub"))


def test_a_gguf_model_without_llama_cpp_python_is_refused_before_anything_loads(monkeypatch):
    from posixlab.backends import named

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"needs llama-cpp-python: pip install llama-cpp-python==0\.3\.36"):
        make_rephraser(RephraserConfig(backend="llamacpp"))
    with pytest.raises(ConfigError, match="needs llama-cpp-python"):
        named("llamacpp").check(ModelSpec("gguf", "local", "m.gguf", backend="llamacpp"))


@pytest.mark.slow  # the default rephraser's quality checks load the MiniLM embedder
def test_a_chat_dry_run_sends_nothing_and_says_what_the_endpoint_would_write(tmp_path, capsys):
    from posixlab.runner import run

    server = ChatServer(lambda body, n: (200, {}, completion("A")))
    with server:
        cfg = ClassificationConfig(model=chat_spec(server.base_url), data=ClassificationData(num_samples=4),
                                   num_rephrasings=5, task_sentence="Pick the letter of the right answer.",
                                   output_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"),
                                   dry_run=True)
        plan = run(cfg, progress=False)["dry_run"]
    assert server.bodies == [], "a dry run sends no chat request, rephrasings included"
    assert plan["requests"] == 20 and plan["to_send"] == 20
    err = capsys.readouterr().err
    assert (f"openai:scripted would write 4 paraphrases of 1 task sentence(s): about 1 request(s) of 4 replies to "
            f"{server.base_url}") in err
    assert not (tmp_path / "cache" / "paraphrases").exists()


def test_a_chat_run_rephrases_with_its_own_endpoint(tmp_path):
    from posixlab.runner import run

    rewrites = "\n".join(f"{i}. {text}" for i, text in enumerate(
        ["Choose the letter of the right answer.", "Select the correct letter for the question.",
         "Give the letter of the answer that is right.", "Which letter answers the question correctly?"], 1))

    def answer(body, n):
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        return 200, {}, completion(rewrites if "rewrite the task instruction" in system else "A")

    server = ChatServer(answer)
    with server:
        cfg = ClassificationConfig(model=chat_spec(server.base_url), data=ClassificationData(num_samples=3),
                                   num_rephrasings=3, task_sentence="Pick the letter of the right answer.",
                                   output_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"),
                                   rephraser=RephraserConfig(min_similarity=0.0, validate=False, samples=1))
        summary = run(cfg, progress=False)
    about = json.loads((tmp_path / "out" / "rephrasings.json").read_text())
    assert about["rephraser"]["rephraser"] == "openai:scripted"
    assert about["rephraser"]["rephraser_identity"]["base_url"] == server.base_url
    assert about["rephrasings"][1:] == ["Choose the letter of the right answer.",
                                        "Select the correct letter for the question."]
    assert summary["num_rephrasings"] == 3


# --- 2. typos --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["task=classification", "task.num_rephrasing=5"], "task.num_rephrasing is not a setting: did you mean "
                                                        "task.num_rephrasings?"),
    (["task=classification", "+task.num_rephrasing=5"], "did you mean task.num_rephrasings?"),
    (["+num_set=3"], "num_set is not a setting: did you mean task.num_sets?"),
    (["-m", "variant=spelling,template", "shot=1"], "did you mean task.shots?"),
    (["task.num_rephrasings=5"], "task.num_rephrasings is a setting of task=classification, not of task=posix: add "
                                 "task=classification"),
    (["task=classification", "+task.repeats=2"], "task.repeats is already a setting: write task.repeats=VALUE, "
                                                 "without the +"),
    (["+experiment=offline_table1", "dataset.max_question_char=3"], "did you mean dataset.max_question_chars?"),
    (["model=chat", "model.server.base_ur=http://h/v1"], "did you mean model.server.base_url?"),
    (["variant=template", "variant.options.k=2"], "variant.options.k is not a setting: variant.options has none for "
                                                   "variant=template"),  # was: "did you mean variant.options?"
    # a group only the other task has: Hydra said "Could not override 'strategy'. No match in the defaults list" and,
    # given the + it suggested, ran without it
    (["strategy=detail"], "strategy is a setting of the classification task; task=posix does not use it"),
    (["-m", "strategy=simple,detail"], "strategy is a setting of the classification task"),
    (["+strategy=detail"], "strategy is a setting of the classification task; task=posix does not use it"),
    (["task=classification", "embedding=none"], "embedding is a setting of the posix task"),
    (["task=classification", "+strategy=detail"], "strategy is already chosen (strategy=simple): write "
                                                  "strategy=detail, without the +"),  # Hydra: "Multiple values"
    (["+variant=template"], "variant is already chosen (variant=spelling): write variant=template, without the +"),
    # a word alone: a command mistyped, or a value without its key (Hydra: "missing EQUAL at '<EOF>'")
    (["reprot", "outputs/run"], "'reprot' is neither a command (report, gate, compare, status, merge, dove, judge, gguf-path, help) "
                                "nor a setting (write key=value, e.g. model=gemma3-270m); did you mean posixlab "
                                "report?"),
    (["model=gemma3-270m", "template"], "'template' is neither a command"),
    # a switch of a free-form node given a word: 'yes' ran as int('yes') deep in the mixture, a traceback
    (["variant=mixture", "variant.options.include_original=yes"], "variant.options.include_original takes true or "
                                                                  "false, not 'yes'"),
    (["report=no"], "report takes true or false, not 'no'"),
    # a group option that does not exist: Hydra printed its config search path; in a sweep, after the cells before it
    (["dataset=mmlu_smple"], "dataset=mmlu_smple: no such option (did you mean mmlu_sample?); the options are alpaca,"),
    (["-m", "dataset=mmlu_sample,mmlu_smple"], "dataset=mmlu_smple: no such option (did you mean mmlu_sample?)"),
    (["hydra/launcher=slurmm"], "hydra/launcher=slurmm: no such option (did you mean slurm?)"),
    (["+experiment=offline_tabel1"], "experiment=offline_tabel1: no such option (did you mean offline_table1?)"),
])
def test_a_typo_is_posixlab_s_own_error_naming_the_closest_key(argv, message):
    from posixlab.cli import check_override_keys

    with pytest.raises(ConfigError) as caught:
        check_override_keys(argv)
    assert message in str(caught.value)


def test_a_task_mistyped_is_named_with_the_nearest():
    from posixlab.cli import load_chosen_tasks

    with pytest.raises(ConfigError, match=r"unknown task 'clasification' \(did you mean classification\?\); the tasks"):
        load_chosen_tasks(["task=clasification"])


@pytest.mark.parametrize("argv", [
    [], ["model=gemma3-270m", "variant=template", "num_sets=3"], ["-m", "shots=0,1", "variant=spelling,template"],
    ["+experiment=offline_table1", "hydra/launcher=local_parallel"], ["task=classification", "task.num_rephrasings=5"],
    ["variant=mixture", "variant.options.kinds=[spelling,template]"], ["hydra.run.dir=/tmp/x", "~logger"],
    ["--cfg", "job", "seed=3"], ["model=chat", "model.name=m", "model.server.base_url=http://h/v1"],
    ["task=classification", "strategy=detail"], ["-m", "task=classification", "strategy=simple,1shot"],
    ["+experiment=offline_table1", "variant=template"], ["+experiment=offline_errica_table1", "strategy=detail"],
    ["progress=lines"], ["-m", "progress=lines", "variant=mixture", "variant.options.include_original=true"],
])
def test_valid_overrides_pass_the_key_check(argv):
    from posixlab.cli import check_override_keys, expand_moved_settings

    check_override_keys(expand_moved_settings(argv, notice=lambda text: None))  # as the command runs them


@pytest.mark.slow  # run.py in a subprocess
def test_a_typo_exits_2_before_any_work(root, tmp_path):
    result = subprocess.run([sys.executable, "run.py", "task=classification", "+task.num_rephrasing=5",
                             f"hydra.run.dir={tmp_path / 'out'}"], cwd=root, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "posixlab error: task.num_rephrasing is not a setting: did you mean task.num_rephrasings?" in result.stderr
    assert "To append to your config" not in result.stderr and not (tmp_path / "out").exists()


# --- 3. a constant classifier ---------------------------------------------------------------------------------------

def _records(labels_per_sample: list[list[str]], gold: list[str]) -> list[dict]:
    return [{"sample_id": f"s{i}", "gold": g, "sensitivity": 0.0, "distribution": [1.0, 0.0, 0.0],
             "predictions": [{"label": label} for label in labels]}
            for i, (labels, g) in enumerate(zip(labels_per_sample, gold))]


def test_a_constant_classifier_is_reported_and_fails_the_documented_gate():
    gold = ["a", "a", "b", "b", "b"]
    summary = build_classification_summary(_records([["a", "a"]] * 5, gold), ["a", "b", "N/A"], 2, {})
    answers = summary["answers"]
    assert (answers["majority_class"], answers["majority_share"], answers["one_class"]) == ("a", 1.0, True)
    assert summary["micro_f1"]["mean"] == pytest.approx(0.4) and summary["micro_f1"]["majority_baseline"] == 0.6
    assert any("100% of the 10 answers are 'a'" in note for note in summary["notes"])
    rows = check_gate({**summary, "consistency": {"mean": 1.0}}, GateConfig(max_sensitivity=0.2, min_consistency=0.8))
    assert [(r.metric, r.passed) for r in rows] == [("max_sensitivity", True), ("min_consistency", True),
                                                    ("max_answer_share", False)]
    assert not gate_passed(rows)
    off = check_gate(summary, GateConfig(max_sensitivity=0.2, max_answer_share=None))
    assert gate_passed(off), "gate.max_answer_share=null turns the guard off"
    spread = build_classification_summary(_records([["a", "b"], ["b", "b"], ["a", "a"]], ["a", "b", "a"]),
                                          ["a", "b", "N/A"], 2, {})
    assert not spread["answers"]["one_class"] and "notes" not in spread


def test_the_summary_markdown_names_the_majority_answer_and_baseline(tmp_path):
    from posixlab.tasks.classification import classification_summary_markdown

    summary = build_classification_summary(_records([["a", "a"]] * 4, ["a", "b", "a", "b"]), ["a", "b", "N/A"], 2,
                                           {"model": {"name": "m"}, "dataset": "d", "strategy": "simple",
                                            "probability": "greedy"})
    text = classification_summary_markdown(summary)
    assert "Most frequent answer: 'a', 100% of the 8 answers (the most frequent gold class, 'a', is 50% of the " \
           "samples). **One class: a (nearly) constant classifier.**" in text
    assert "| micro-F1 of always answering the majority gold class | 0.500 |" in text


def test_a_chat_run_of_a_constant_classifier_fails_the_gate_the_docs_show(tmp_path, rephrasings_file, capsys):
    from posixlab.runner import run

    server = ChatServer(lambda body, n: (200, {}, completion("B")))
    with server:
        cfg = ClassificationConfig(model=chat_spec(server.base_url), data=ClassificationData(num_samples=10),
                                   num_rephrasings=3, output_dir=str(tmp_path / "out"),
                                   cache_dir=str(tmp_path / "cache"),
                                   rephraser=RephraserConfig(backend="file", path=str(rephrasings_file), validate=False))
        summary = run(cfg, progress=False)
    assert summary["sensitivity"]["mean"] == 0.0 and summary["answers"]["one_class"]
    rows = check_gate(summary, GateConfig(max_sensitivity=0.2, min_consistency=0.8))
    assert not gate_passed(rows) and rows[-1].metric == "max_answer_share"




# --- 4. the offline paraphrase runs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["paraphrase", "mixture"])
def test_the_default_paraphrase_and_mixture_runs_need_no_rephraser(variant, tmp_path):
    """Their 20 sets are the offline cells' first 20 questions, whose paraphrases ship with the package."""
    from hydra import compose, initialize_config_dir

    from posixlab.cli import CONF_DIR, to_config
    from posixlab.data import load_items, select_items

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = to_config(compose(config_name="config", overrides=[f"variant={variant}"]), str(tmp_path))
    assert (cfg.dataset.max_question_chars, cfg.dataset.exclude_items) == (130, None)
    items = select_items(load_items(cfg.dataset), cfg.num_sets, cfg.seed, cfg.dataset.exclude_items)
    source = make_paraphrase_source(RephraserConfig(**{**cfg.rephraser.__dict__, "validate": False}), tmp_path,
                                    cfg.model)
    plan = source.plan([item.question for item in items], cfg.num_variants)
    assert (plan["texts"], plan["shipped"], plan["to_write"]) == (20, 20, 0)
    shipped = ParaphraseFile(MMLU_SHIPPED)
    cell = select_items(load_items(cfg.dataset), 100, 0, ["mmlu/business_ethics/70"])  # the offline cells' draw
    assert [i.item_id for i in cell[:20]] == [i.item_id for i in items]
    assert all(shipped.find_original(i.question) for i in cell)


def test_a_spelling_run_keeps_every_question():
    from hydra import compose, initialize_config_dir

    from posixlab.cli import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["variant=spelling"])
    assert cfg.dataset.max_question_chars is None and cfg.dataset.exclude_items is None


# --- 5. the smaller points ------------------------------------------------------------------------------------------

def test_one_local_endpoint_under_two_spellings_shares_its_cached_answers(tmp_path):
    from posixlab.chat.cache import ResponseCache
    from posixlab.chat.client import ChatAnswer

    cache = ResponseCache(tmp_path)
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
    cache.put("http://localhost:8765/v1/", body, 0, ChatAnswer("Hello"))
    assert cache.get("http://127.0.0.1:8765/v1", body, 0).text == "Hello"
    assert cache.get("http://127.0.0.1:8766/v1", body, 0) is None  # another port: another server
    assert cache.get("http://example.org:8765/v1", body, 0) is None
    cache.close()


def test_progress_false_is_quiet_and_lines_prints_one_line_per_sample(tmp_path, rephrasings_file, capsys):
    from posixlab.runner import run

    server = ChatServer(lambda body, n: (200, {}, completion("A")))
    with server:
        for progress, out in ((False, "quiet"), ("lines", "lines")):
            cfg = ClassificationConfig(model=chat_spec(server.base_url), data=ClassificationData(num_samples=3),
                                       num_rephrasings=2, output_dir=str(tmp_path / out),
                                       cache_dir=str(tmp_path / "cache"),
                                       rephraser=RephraserConfig(backend="file", path=str(rephrasings_file), validate=False))
            capsys.readouterr()
            run(cfg, progress=progress)
            err = capsys.readouterr().err
            per_sample = [line for line in err.splitlines() if "/3 samples" in line]
            assert len(per_sample) == (0 if progress is False else 3), err
    assert "mean S = 0.000 over 3" in per_sample[-1]


def test_q_1_says_s_is_zero_by_construction():
    summary = build_classification_summary(_records([["a"], ["b"]], ["a", "b"]), ["a", "b", "N/A"], 1, {})
    assert any("S is 0 by construction" in note for note in summary["notes"])


@pytest.mark.slow  # loads SmolLM2
def test_the_documented_classify_call_runs_with_its_defaults(capfd):
    """README's Python call, as written there but smaller: no rephraser given, Q > 1."""
    import posixlab

    result = posixlab.classify("mmlu_letters", model="smollm2-135m-instruct", num_samples=2, num_rephrasings=2,
                               progress=False)
    assert len(result.records) == 2 and result.summary["num_rephrasings"] == 2
    assert result.rephrasings["rephrasings"][0] == TASKS["mmlu_letters"]
    about = result.rephrasings["rephraser"]
    assert about["rephraser"] == f"hf:{QWEN15}" and about["shipped_paraphrases"]["texts"] == 1
    err = capfd.readouterr().err
    assert "loading the rephraser" not in err and "(1 shipped with posixlab); nothing to write" in err


@pytest.mark.slow  # run.py in a subprocess, SmolLM2
def test_the_default_paraphrase_run_gives_the_committed_cell_s_psi(root, tmp_path):
    """Its sets are the committed SmolLM2 paraphrase cell's first ones, read from the shipped paraphrases."""
    import csv

    result = subprocess.run([sys.executable, "run.py", "variant=paraphrase", "num_sets=2", "logger=none",
                             "embedding=none", "score_options=false", f"hydra.run.dir={tmp_path / 'run'}",
                             f"score_cache_dir={tmp_path / 'scores'}"], cwd=root, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 of 2 questions' paraphrases ready (2 shipped with posixlab); nothing to write" in result.stderr
    with open(root / "figures" / "per_set.csv", encoding="utf-8") as f:
        committed = {row["item_id"]: float(row["psi"]) for row in csv.DictReader(f)
                     if (row["model"], row["dataset"], row["variant"], row["shots"]) ==
                     ("smollm2-135m-instruct", "mmlu", "paraphrase", "0")}
    sets = [json.loads(line) for line in (tmp_path / "run" / "sets.jsonl").read_text().splitlines()]
    assert len(sets) == 2
    for record in sets:
        assert record["psi"] == pytest.approx(committed[record["item_id"]], rel=1e-4), record["item_id"]  # waves differ


def test_a_rephraser_setting_of_the_wrong_kind_is_named_where_the_config_is_read():
    """rephraser.* is a free-form node: ``rephraser.max_concurrency=abc`` failed as a TypeError inside the rephraser
    (a traceback), ``max_attempts=0`` never asked at all."""
    from posixlab.rephrase import RephraserConfig

    for kwargs, said in (({"max_concurrency": "abc"}, "rephraser.max_concurrency takes a whole number, not 'abc'"),
                         ({"temperature": "hot"}, "rephraser.temperature takes a number, not 'hot'"),
                         ({"validate": "maybe"}, "rephraser.validate takes true or false, not 'maybe'"),
                         ({"max_attempts": 0}, "rephraser.max_attempts must be at least 1, got 0"),
                         ({"timeout": -1}, "rephraser.timeout is seconds per request, above 0, got -1")):
        with pytest.raises(ConfigError, match=re.escape(said)):
            RephraserConfig(**kwargs)
    assert RephraserConfig(source=None, timeout=600, revision=None).timeout == 600  # an int where a float goes
