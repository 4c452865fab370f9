"""A backend and a task from outside the package, each one module under tests/ (plugin_backend.py, plugin_task.py),
run end to end through ``posixlab.runner.run``, shards and ``posixlab merge``, the dry run and the gate, with no edit
to posixlab: the claim that a backend and a task are one-module plug-ins. Pure Python: no model is loaded."""

from __future__ import annotations

import json

import importlib

import pytest

from posixlab.backends import BACKENDS
from posixlab.cli import gate_command, merge_command
from posixlab.errors import ConfigError
from posixlab.models.loading import ModelSpec
from posixlab.rephrase import RephraserConfig
from posixlab.runner import run
from posixlab.tasks.classification import ClassificationConfig, ClassificationData
from posixlab.tasks.posix import PosixConfig

from posixlab.tasks import TASK_TYPES

RULE = ModelSpec("rule", "api", "rule", backend="rule-test")
plugin_backend = plugin_task = None  # the plug-in modules, imported (and so registered) for this module's tests


@pytest.fixture(scope="module", autouse=True)
def plugins():
    """Import the two plug-ins, which registers them, as a user's ``import my_backend`` would; unregister them after
    this module, so that no other test sees a task or backend it does not know (conftest.py keeps pytest's doctest
    collection from importing them first)."""
    global plugin_backend, plugin_task
    plugin_backend = importlib.reload(importlib.import_module("plugin_backend"))
    plugin_task = importlib.reload(importlib.import_module("plugin_task"))
    yield
    BACKENDS.pop(plugin_backend.NAME)
    TASK_TYPES.pop(plugin_task.AgreementTask.name)


def test_the_rule_model_is_what_the_module_says():
    assert plugin_backend.rule_answer("What is 2 + 2?") == "D" and plugin_backend.rule_answer("What is 2 + 2 ?") == "B"
QUESTIONS = [["What is 2 + 2?", "What is 2 + 2 ?", "What is 2+2?"],
             ["Name a prime.", "Name a prime number.", "Give a prime."],
             ["Is the sky blue?", "Is the sky blue ?", "The sky: blue?"],
             ["Capital of France?", "France's capital?", "What is the capital of France?"]]


def agreement(tmp_path, name: str, **settings) -> plugin_task.AgreementConfig:
    return plugin_task.AgreementConfig(model=RULE, questions=QUESTIONS, output_dir=str(tmp_path / name),
                                       cache_dir=str(tmp_path / "cache"), **settings)


def expected_agreement(wordings: list[str]) -> float:
    answers = [plugin_backend.rule_answer(w) for w in wordings]
    return max(answers.count(a) for a in answers) / len(answers)


def test_a_task_and_a_backend_from_outside_run_shard_merge_and_gate(tmp_path, capsys):
    whole = run(agreement(tmp_path, "whole"), progress=False)
    assert whole["task"] == "agreement" and whole["engine"]["kind"] == "in-process"
    values = [expected_agreement(q) for q in QUESTIONS]
    assert whole["agreement"]["mean"] == pytest.approx(sum(values) / len(values))
    assert whole["capabilities"] == ["generate"]  # the registration's, declared once
    assert whole["rule"] == {"answered": 12, "from_cache": 0}  # the backend's own report, in the summary
    again = run(agreement(tmp_path, "again"), progress=False)
    assert again["rule"] == {"answered": 0, "from_cache": 12}  # its cache, opened and closed by the runner

    shards = [str(tmp_path / f"shard{k}") for k in (1, 2)]
    for k, folder in enumerate(shards, 1):
        run(agreement(tmp_path, f"shard{k}", shard=f"{k}/2"), progress=False)
    assert merge_command([str(tmp_path / "merged"), *shards]) == 0
    assert capsys.readouterr().out.startswith(f"agreement = {whole['agreement']['mean']:.4f} (4 questions from 2 "
                                              f"shards)")
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert merged["agreement"] == whole["agreement"]

    low, high = whole["agreement"]["mean"] - 0.01, whole["agreement"]["mean"] + 0.01
    assert gate_command([str(tmp_path / "merged"), f"gate.min_agreement={low}"]) == 0
    assert gate_command([str(tmp_path / "merged"), f"gate.min_agreement={high}"]) == 1
    assert "| min_agreement | agreement.mean |" in capsys.readouterr().out
    assert gate_command([str(tmp_path / "merged"), "gate.max_posix=0.5"]) == 2  # not this task's metric
    assert "only task=posix runs have; this is a task=agreement run (its gates: min_agreement)" in \
        capsys.readouterr().err


def test_the_dry_run_asks_the_backend_what_it_would_do(tmp_path):
    run(agreement(tmp_path, "first"), progress=False)
    plan = run(agreement(tmp_path, "dry", dry_run=True), progress=False)["dry_run"]
    assert plan == {"task": "agreement", "model": "rule", "units": 4, "requests": 4, "prompts": 12,
                    "to_answer": 0, "cached": 12}
    assert not (tmp_path / "dry" / plugin_task.RECORDS).exists()


def test_the_outside_backend_runs_the_built_in_tasks(tmp_path, rephrasings_file):
    """Classification (greedy answers: text is enough) and POSIX's answers-only run; ψ is refused, before any work."""
    data = ClassificationData("mmlu_letters", num_samples=4)
    rephraser = RephraserConfig(backend="file", path=str(rephrasings_file), validate=False)
    summary = run(ClassificationConfig(model=RULE, data=data, num_rephrasings=3, rephraser=rephraser,
                                       output_dir=str(tmp_path / "cls"), cache_dir=str(tmp_path / "cache")),
                  progress=False)
    records = [json.loads(line) for line in (tmp_path / "cls" / "samples.jsonl").read_text().splitlines()]
    assert summary["num_samples"] == 4 and len(records) == 4
    for record in records:  # every answer is one of the rule's letters, parsed as the class it names
        assert all(p["answer"] in plugin_backend.LETTERS and p["label"] == p["answer"] for p in record["predictions"])
    assert len({p["answer"] for r in records for p in r["predictions"]}) > 1
    answers = run(PosixConfig(model=RULE, dataset=_mmlu(), num_sets=2, num_variants=2, psi=False, embedding=None,
                              output_dir=str(tmp_path / "posix"), cache_dir=str(tmp_path / "cache")), progress=False)
    assert answers["psi"] is None and answers["num_sets"] == 2
    with pytest.raises(ConfigError, match="cannot score"):
        run(PosixConfig(model=RULE, dataset=_mmlu(), num_sets=2, output_dir=str(tmp_path / "psi")), progress=False)
    assert not (tmp_path / "psi").exists()


def _mmlu():
    from posixlab.data import DatasetSpec

    return DatasetSpec("mmlu", source="sample")
