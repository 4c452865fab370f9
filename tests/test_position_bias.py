"""Position bias (posixlab/metrics/position.py): accuracy by where the gold option is shown, RStd, and the picks
against no preference, read off format variants. Checked by hand, against a brute-force count with χ²'s own
distribution, and on format variants with a model that always picks the first option."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import chi2 as chi2_distribution

from posixlab.answers import accuracy_summary, set_answers
from posixlab.metrics.position import position_bias
from posixlab.prompts import PromptItem
from posixlab.results import accuracy_table_lines, position_bias_line
from posixlab.variants import FormatVariants


def test_by_hand_with_items_of_3_and_5_options_and_an_unparsed_answer():
    rows = [(3, 0, 0, True), (3, 1, 0, False), (3, 2, 2, True), (5, 4, None, False)]
    bias = position_bias(rows)
    assert [g["accuracy"] for g in bias["by_gold_position"]] == [1.0, 0.0, 1.0, None, 0.0]  # none shown at 4
    assert bias["rstd"] == 0.5  # positions 1, 2, 3, 5: 1, 0, 1, 0 about their mean 0.5
    assert bias["picked"] == 3 and [p["share"] for p in bias["picks"]] == [2 / 3, 0.0, 1 / 3, 0.0, 0.0]
    assert [p["expected"] for p in bias["picks"]] == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0, 0])
    assert bias["chi2"] == pytest.approx(2.0)  # (2-1)² + (0-1)² + (1-1)², expected 1 each
    assert bias["p_value"] == pytest.approx(math.exp(-1))  # χ² with 2 degrees of freedom: P(X > 2) = e^-1
    assert position_bias([]) is None
    assert position_bias([(4, 1, None, False)])["p_value"] is None  # no pick to test


def test_against_a_brute_force_count():
    rng = random.Random(0)
    rows = []
    for _ in range(500):
        n = rng.choice([3, 4, 5])
        gold = rng.randrange(n)
        picked = rng.choice([None, 0, 0, *range(n)])  # a preference for the first position
        rows.append((n, gold, picked, picked == gold))
    bias = position_bias(rows)
    array = np.array([(n, g, -1 if p is None else p, r) for n, g, p, r in rows])
    accuracies = [array[array[:, 1] == p, 3].mean() for p in range(5)]
    assert [g["accuracy"] for g in bias["by_gold_position"]] == pytest.approx(accuracies)
    assert bias["rstd"] == pytest.approx(np.std(accuracies))
    parsed = array[array[:, 2] >= 0]
    observed = np.array([(parsed[:, 2] == p).sum() for p in range(5)])
    expected = np.array([(1 / parsed[:, 0] * (parsed[:, 0] > p)).sum() for p in range(5)])
    statistic = ((observed - expected) ** 2 / expected).sum()
    assert bias["chi2"] == pytest.approx(statistic)
    assert bias["p_value"] == pytest.approx(chi2_distribution.sf(statistic, 4)) and bias["p_value"] < 1e-6


def test_format_variants_of_a_model_that_always_picks_the_first_option():
    items = [PromptItem(f"q/{k}", f"Question {k}?", ("w", "x", "y", "z"), subject="s", answer="ABCD"[k % 4])
             for k in range(6)]
    generator = FormatVariants()
    records = []
    for item in items:
        prompt_set = generator.build_set(item, 8, seed=0)
        variant_records = [p.record for p in prompt_set.prompts]
        first = [" " + (r["option_marks"][0] if r else "(A)") + (r.get("mark_gap", "") if r else "") for r in
                 variant_records]
        answers = set_answers(item.options, item.answer, variant_records, first, [], None)
        records.append({"prompts": [{"kind": p.kind, "record": p.record} for p in prompt_set.prompts],
                        "answers": answers})
    summary = accuracy_summary(records)
    bias = summary["position_bias"]["by_greedy"]
    assert summary["position_bias"]["by_options"] is None
    assert bias["prompts"] == 6 * 8  # the format prompts; the original says nothing of positions
    assert [g["prompts"] for g in bias["by_gold_position"]] == [12] * 4  # balanced: 2 blocks of 4 per item
    assert [g["accuracy"] for g in bias["by_gold_position"]] == [1.0, 0.0, 0.0, 0.0]
    assert bias["rstd"] == pytest.approx(math.sqrt(0.1875))  # (0.75² + 3 · 0.25²) / 4
    assert [p["share"] for p in bias["picks"]] == [1.0, 0.0, 0.0, 0.0] and bias["p_value"] < 1e-20
    assert "at 1, 2, 3, 4 · RStd 0.433 · picks 1.00 0.00 0.00 0.00 (no preference: 0.25 0.25 0.25 0.25)" in \
        position_bias_line(bias)
    table = "\n".join(accuracy_table_lines(summary, lambda v: "n/a" if v is None else f"{v:.3f}"))
    assert "| greedy response, parsed | 48 (12 / 12 / 12 / 12) | 1.000 / 0.000 / 0.000 / 0.000 | 0.433 | 1.000 / " \
           f"0.000 / 0.000 / 0.000 | 0.250 / 0.250 / 0.250 / 0.250 | {chi2_distribution.sf(144, 3):.3g} |" in table
    # χ² = (48 − 12)² / 12 + 3 · 12² / 12 = 144, three degrees of freedom
    from posixlab.tasks.posix_report import _accuracy  # the report page's accuracy table: its rows

    page = _accuracy({"accuracy": summary})
    assert "position bias: RStd of those accuracies</td><td>0.4330" in page.replace("\n", "")
    assert "1.000 / 0.000 / 0.000 / 0.000" in page and "0.250 / 0.250 / 0.250 / 0.250" in page
    from posixlab.metrics.accuracy import accuracy_metrics  # W&B's summary keys

    keys = accuracy_metrics(summary)
    assert keys["accuracy/by_greedy/position_rstd"] == pytest.approx(math.sqrt(0.1875))
    assert keys["accuracy/by_greedy/position_p_value"] == bias["p_value"] and "accuracy/by_options/position_rstd" \
        not in keys


def test_a_sweep_s_accuracy_table_reads_the_run_s_position_bias_from_per_set_csv(lm, tmp_path):
    """The analysis path (per_set.csv's ``positions`` strings -> accuracy table) and the run's own summary agree, on
    the fixture's questions of 3, 4 and 5 options."""
    from pathlib import Path

    from posixlab.analysis.accuracy import accuracy_table
    from posixlab.analysis.collect import load_rows, write_rows
    from posixlab.data import DatasetSpec
    from posixlab.models import ModelSpec
    from posixlab.runner import run
    from posixlab.tasks.posix import PosixConfig

    fixture = Path(__file__).resolve().parent / "fixtures" / "questions_fixture.jsonl"
    spec = DatasetSpec("science", loader="questions", source="path", path=str(fixture),
                       options={"choices": "choices", "answer": "answerKey", "subject": "topic", "id": "id"})
    out = tmp_path / "format"
    summary = run(PosixConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                              dataset=spec, variant="format", num_sets=None, num_variants=4, max_new_tokens=3,
                              output_dir=str(out), score_cache=False, embedding=None), lm=lm, progress=False)
    markdown, records = accuracy_table(load_rows(write_rows(load_rows(out), tmp_path / "per_set.csv")))
    for row in records:
        bias = summary["accuracy"]["position_bias"][f"by_{row['reading']}"]
        assert row["position_rstd"] == pytest.approx(bias["rstd"]) and row["position_p"] == pytest.approx(
            bias["p_value"])
    assert {r["reading"] for r in records} == {"options", "greedy"} and "| position RStd | picks χ² p |" in markdown
    from posixlab.analysis.figures import run_figures

    paths = run_figures(load_rows(out), tmp_path / "figures")  # the run's figures: position bias among them
    assert paths["position_bias"].is_file() and paths["position_bias"].stat().st_size > 10_000
    rows = [{k: v for k, v in r.items() if k != "positions"} for r in load_rows(out)]  # no format prompts: none
    assert "position_bias" not in run_figures(rows, tmp_path / "figures_without")
