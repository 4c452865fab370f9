"""A budgeted accuracy run (task.prompt_share < 1, PromptEval's setting): each set answers a seeded sample of a
shared prompt pool; the answers are the full run's at those cells, the rest keep their place unanswered, and the
summary adds each prompt's accuracy estimated over every set. Bad settings fail before any model loads."""

import numpy as np
import pytest

from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError
from posixlab.metrics.accuracy import accuracy_metrics, accuracy_per_prompt, estimated_accuracy_per_prompt
from posixlab.models import ModelSpec
from posixlab.results import read_sets
from posixlab.runner import run
from posixlab.tasks.posix import PosixConfig, asked_prompts, build_prompt_sets

SMOL = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
COMMON = dict(model=SMOL, dataset=DatasetSpec("mmlu"), variant="format", num_sets=8, num_variants=5, embedding=None,
              score_cache=False, psi=False)


def test_the_sample_is_each_sets_own_and_every_prompt_is_equally_likely():
    draws = [asked_prompts(f"mmlu/x/{n}", 6, 0.5, 0) for n in range(3000)]
    assert {len(d) for d in draws} == {3} and all(d == sorted(set(d)) for d in draws)
    counts = np.bincount([j for d in draws for j in d], minlength=6) / 3000
    assert np.abs(counts - 0.5).max() < 0.03  # 1,500 draws of each prompt expected; sd ≈ 0.009
    assert asked_prompts("mmlu/x/1", 6, 0.5, 0) != asked_prompts("mmlu/x/1", 6, 0.5, 1)  # the run's seed counts
    assert asked_prompts("mmlu/x/1", 6, 1.0, 0) == list(range(6))


@pytest.mark.parametrize("change, message", [
    (dict(prompt_share=0), "prompt_share is the share of each set's prompts to answer, above 0 and at most 1"),
    (dict(prompt_share=1.5), "above 0 and at most 1, not 1.5"),
    (dict(prompt_share=0.5, psi=True), "ψ scores every response under every prompt of its set: add task.psi=false"),
    (dict(prompt_share=0.5, variant="spelling"), "variant=template or variant=format, not spelling"),
    (dict(prompt_share=0.05), "prompt_share=0.05 over 8 sets never asks prompt"),
])
def test_bad_settings_fail_before_any_model_loads(change, message):
    with pytest.raises(ConfigError, match=message):
        build_prompt_sets(PosixConfig(**{**COMMON, **change}), progress=False)


@pytest.mark.slow
def test_a_budgeted_run_answers_its_sample_as_the_full_run_does_and_estimates_the_rest(lm, tmp_path):
    full = run(PosixConfig(**COMMON, output_dir=str(tmp_path / "full")), lm=lm, progress=False)
    budget = run(PosixConfig(**COMMON, output_dir=str(tmp_path / "budget"), prompt_share=0.5), lm=lm, progress=False)
    whole, sampled = (sorted(read_sets(tmp_path / name), key=lambda r: r["set_index"]) for name in ("full", "budget"))
    assert [r["set_id"] for r in whole] == [r["set_id"] for r in sampled]
    correct = []
    for w, b in zip(whole, sampled):
        asked = asked_prompts(b["set_id"], 6, 0.5, 0)
        assert b["asked"] == asked and len(b["prompts"]) == len(b["responses"]) == len(b["answers"]) == 6
        assert [p["text"] for p in b["prompts"]] == [p["text"] for p in w["prompts"]]
        for j in range(6):
            if j in asked:  # the same greedy answer and reading as the run that asked every prompt
                assert b["responses"][j]["text"] == w["responses"][j]["text"]
                assert b["answers"][j]["by_greedy"] == w["answers"][j]["by_greedy"]
                # the options' log-likelihoods: the same pick, within the engine's rounding across batch shapes
                options, whole = b["answers"][j]["by_options"], w["answers"][j]["by_options"]
                assert options["pred"] == whole["pred"]
                assert options["logprobs"] == pytest.approx(whole["logprobs"], abs=1e-4)
            else:
                assert b["responses"][j] == {"text": None, "asked": False}
                assert b["answers"][j] == {"gold": w["answer"], "by_options": None, "by_greedy": None}
        correct.append([float(a["by_greedy"]["correct"]) if a["by_greedy"] else None for a in b["answers"]])
    block = budget["accuracy"]["by_greedy"]
    assert budget["accuracy"]["asked"] == {"cells": 24, "of": 48}
    assert block["per_prompt"] == accuracy_per_prompt(correct).tolist()  # each prompt over the sets that asked it
    assert block["estimated"]["scored"] == 0.5
    assert block["estimated"]["per_prompt"] == estimated_accuracy_per_prompt(correct).tolist()
    assert accuracy_metrics(budget["accuracy"])["accuracy/by_greedy/estimated_scored"] == 0.5  # W&B's keys
    assert "estimated" not in full["accuracy"]["by_greedy"] and full["prompt_choice"] and not budget["prompt_choice"]
    assert "| greedy response, parsed | 50% |" in (tmp_path / "budget" / "summary.md").read_text()
    from posixlab.report.build import build_report

    page = build_report([tmp_path / "budget"], tmp_path / "page.html").read_text()
    assert "✓" in page or "✗" in page  # the answered prompts' marks; the others show none
    assert "estimated over every set (PromptEval): mean" in page and "share of cells asked" in page
    # DOVE's records are the prompts answered
    from posixlab.interop.dove import export_dove

    assert export_dove(tmp_path / "budget", tmp_path / "dove.jsonl")[1] == 24
