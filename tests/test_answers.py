"""Correctness per prompt: option marks and their order, the greedy parse, the per-set answer records, the run's
accuracy block, and option log-likelihoods against one full forward pass per (prompt, option)."""

import json

import numpy as np
import pytest

from posixlab.answers import (ChoiceRead, accuracy_summary, candidate_strings, matches_gold, parse_choice,
                              prompt_choices, read_choice, set_answers)
from posixlab.data import DatasetSpec, load_items
from posixlab.models import ModelSpec
from posixlab.runner import run
from posixlab.tasks.posix import PosixConfig

OPTIONS = ("Paris", "Rome", "Oslo", "Bern")
SHUFFLED = {"option_order": [2, 0, 3, 1], "option_labels": ["1", "2", "3", "4"], "option_marks": ["1.", "2.", "3.", "4."]}


def test_choices_follow_the_order_and_the_gold_moves_with_its_option():
    paper = prompt_choices(OPTIONS, {})
    assert paper.continuations == (" (A)", " (B)", " (C)", " (D)") and paper.gold_position("B") == 1
    moved = prompt_choices(OPTIONS, SHUFFLED)
    assert moved.texts == ("Oslo", "Paris", "Bern", "Rome")
    assert moved.gold_position("B") == 3  # Rome is shown fourth, as "4."
    assert moved.gold_position(None) is None
    assert prompt_choices((), {}) is None
    with pytest.raises(ValueError, match="inconsistent option record"):
        prompt_choices(OPTIONS, {"option_order": [0, 0, 1, 2]})


@pytest.mark.parametrize("response, expected", [
    (" (B)Rome", 1), ("B", 1), (" B.", 1), ("b)", 1), ("Answer: (D)", 3), ("the answer is C", 2),
    ("Rome", 1), (" rome, of course", 1), ("A cat sat", None), ("(E)", None), ("", None), ("   ", None),
    ("I don't know", None), (" B\n\nQuestion:", 1), ("B \nmore", 1),
    ("b", 1), ("(b)", 1), ("**B**", 1), ("B. Rome", 1), ("B Rome", 1), ("B, because", 1), ("answer: c", 2),
    ("the answer is (C)", 2), ("I think the answer is B.", 1), ("The answer is A because", 0),
    ("a good question", None),
    ("A, B, C, D.", None), ("(A) or (B)", None), ("B.Rome", None), ("Romeo", None), ("Parisian", None),
])
def test_greedy_responses_parse_into_positions(response, expected):
    assert parse_choice(response, prompt_choices(OPTIONS, {})) == expected


def test_the_rule_and_the_span_are_recorded():
    options = prompt_choices(OPTIONS, {}).options
    assert options[1] == ("B", "(B)", "Rome")
    assert read_choice(" (B)Rome", options) == ChoiceRead(1, "leading label", (2, 3))
    assert read_choice("B\nThe answer is B", options) == ChoiceRead(1, "label alone", (0, 1))
    assert read_choice("So the answer is: **C**", options) == ChoiceRead(2, "answer phrase", (20, 21))
    assert read_choice("  oslo, I think", options) == ChoiceRead(2, "option text", (2, 6))
    assert read_choice("A cat", options) == ChoiceRead(None, "none")
    assert read_choice(" ", options) == ChoiceRead(None, "empty") and read_choice(None, options).index is None
    # a mark that is not a label form is read as written
    odd = [("A", "#1", "Paris"), ("B", "#2", "Rome")]
    assert read_choice("#2 Rome", odd) == ChoiceRead(1, "mark", (0, 2)) and read_choice("#23", odd).index is None
    # two options with the same text: the text names no one option
    assert read_choice("Rome", [("A", None, "Rome"), ("B", None, "rome")]).index is None
    # the longest text that starts the response wins
    assert read_choice("True and False", [("A", None, "True"), ("B", None, "True and False")]).index == 1


AGREEMENT = [
    "b", "B", "(b)", "**B**", "__B__", "`B`", "'B'", "B.", "B)", "B:", " (B)Rome", "(B) Rome", "B. Rome", "B Rome",
    "b) rome", "B, because", "B: Rome", "the answer is (C)", "The answer is C.", "answer: c", "Answer: (D)",
    "**Answer:** D", "Option B is correct", "I think the answer is B", "The answer is A because", "B\nThe answer is B",
    "A\nA. Clockwise", " B\n\nQuestion:", " Oslo is", "Oslo", "oslo.", " rome, of course", "a)", "(a)", "A cat",
    "a good question", "I think", "I don't know", "A, B, C, D.\nA", "A good one\nB", "(A) or (B)", "B or C",
    "the answer is a bit long", "Parisian", "(E)", "E", "", "   ",
]


@pytest.mark.parametrize("response", AGREEMENT)
def test_posix_and_classification_read_a_response_alike(response):
    from posixlab.answers import parse_answer
    from posixlab.metrics.classification import NA

    position = parse_choice(response, prompt_choices(OPTIONS, {}))  # marks (A)-(D)
    record = parse_answer(response, ["A", "B", "C", "D"], options=dict(zip("ABCD", OPTIONS)))
    assert ("ABCD"[position] if position is not None else NA) == record["label"]
    read = read_choice(response, prompt_choices(OPTIONS, {}).options)
    assert record["span"] == (list(read.span) if read.span else None)


def test_the_parse_uses_the_prompts_own_marks():
    moved = prompt_choices(OPTIONS, SHUFFLED)
    assert parse_choice(" 4. Rome", moved) == 3
    assert parse_choice("2", moved) == 1
    assert parse_choice(" (B)", moved) is None  # not a mark this prompt shows
    roman = prompt_choices(OPTIONS, {"option_labels": ["i", "ii", "iii", "iv"],
                                     "option_marks": ["i)", "ii)", "iii)", "iv)"]})
    assert [parse_choice(r, roman) for r in ("iii) Oslo", "ii", "iv.", "i")] == [2, 1, 3, 0]
    assert [parse_choice(r, roman) for r in ("I think", "I", "(iv)", "The answer is iii", "ii, as")] == \
        [None, 0, 3, 2, 1]
    lower = prompt_choices(OPTIONS, {"option_labels": list("abcd"), "option_marks": ["a)", "b)", "c)", "d)"]})
    assert [parse_choice(r, lower) for r in ("a)", "(a)", "a) Paris", "a cat", "a good question", "d")] == \
        [0, 0, 0, None, None, 3]
    assert [parse_choice(r, moved) for r in ("1.5 kg", "2 apples", "(3)")] == [None, None, 2]


def test_open_ended_answers_match_the_gold_prefix():
    assert matches_gold(" Paris is the capital", "Paris") and matches_gold("PARIS.", "paris")
    assert not matches_gold("The capital is Paris", "Paris") and not matches_gold("anything", "")


def test_set_answers_by_hand():
    records = [{}, SHUFFLED]
    continuations = candidate_strings(OPTIONS, records)
    assert continuations == [" (A)", " (B)", " (C)", " (D)", " 1.", " 2.", " 3.", " 4."]
    # log P(continuation | prompt i): prompt 0 prefers (B) = Rome; prompt 1 prefers "1." = Oslo (item option C)
    logprobs = np.array([[-3, -1, -2, -4, -9, -9, -9, -9],
                         [-9, -9, -9, -9, -0.5, -2, -3, -1]], dtype=float)
    answers = set_answers(OPTIONS, "B", records, [" (B)", " maybe 4."], continuations, logprobs)
    assert answers[0] == {"gold": "B", "by_options": {"logprobs": [-3.0, -1.0, -2.0, -4.0], "pred": "B", "correct": True},
                          "by_greedy": {"pred": "B", "parsed": True, "correct": True}}
    assert answers[1]["by_options"] == {"logprobs": [-0.5, -2.0, -3.0, -1.0], "pred": "C", "correct": False}
    assert answers[1]["by_greedy"] == {"pred": None, "parsed": False, "correct": False}
    assert set_answers(OPTIONS, None, records, ["", ""], continuations, logprobs) is None
    open_ended = set_answers((), "Paris", [{}, {}], ["Paris.", "Rome"], [], None)
    assert [a["by_greedy"]["correct"] for a in open_ended] == [True, False] and open_ended[0]["by_options"] is None


def _record(preds, gold="A", kinds=None):
    kinds = kinds or ["original"] + ["spelling"] * (len(preds) - 1)
    return {"prompts": [{"kind": k} for k in kinds],
            "answers": [{"gold": gold, "by_options": {"pred": p, "correct": p == gold, "logprobs": []},
                         "by_greedy": {"pred": g, "parsed": g is not None, "correct": g == gold}}
                        for p, g in preds]}


def test_the_accuracy_block_by_hand():
    # two sets of three prompts; options: set 1 right, right, wrong; set 2 right, wrong, wrong
    records = [_record([("A", "A"), ("A", None), ("B", "B")]), _record([("A", "A"), ("C", "C"), ("C", None)]),
               {"prompts": [{}, {}], "answers": None}]  # no gold: left out
    block = accuracy_summary(records)
    assert block["num_sets"] == 2 and block["num_prompts"] == 3
    options = block["by_options"]
    assert options["per_prompt"] == [1.0, 0.5, 0.0]
    assert options["accuracy"] == pytest.approx(0.5) and options["max_p"] == 1.0
    assert options["worst_case"] == 0.0 and options["best_case"] == 1.0
    assert options["cps"] == pytest.approx(1.0 * (1 - (1.0 - 0.5)))
    # consistency: set 1 answers A, A, B: 1 of 3 pairs agree; set 2 A, C, C: 1 of 3 → 1/3
    assert options["consistency_rate"] == pytest.approx(1 / 3)
    # PSS: per set k(n−k)/C(n,2) with k right of n = 3: 2·1/3 and 1·2/3 → 2/3
    assert options["pss"] == pytest.approx(2 / 3)
    greedy = block["by_greedy"]
    assert greedy["per_prompt"] == [1.0, 0.0, 0.0]  # unparsed counts as wrong
    assert greedy["parse_rate"]["overall"] == pytest.approx(4 / 6)
    assert greedy["parse_rate"]["per_prompt"] == [1.0, 0.5, 0.5]
    assert greedy["parse_rate"]["per_variant_type"] == {"original": 1.0, "spelling": 0.5}
    # two unparsed answers never agree: set 1 A, None, B (0 of 3) and set 2 A, C, None (0 of 3)
    assert greedy["consistency_rate"] == 0.0
    assert accuracy_summary([{"answers": None}]) is None


@pytest.mark.slow
def test_a_run_scores_the_options_as_a_full_forward_pass_would(lm, tmp_path):
    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
    cfg = PosixConfig(model=spec, dataset=DatasetSpec("mmlu"), variant="template", num_sets=3, num_variants=3,
                    max_new_tokens=5, output_dir=str(tmp_path / "run"), score_cache=False, embedding=None)
    summary = run(cfg, lm=lm, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "sets.jsonl").read_text().splitlines()]
    assert len(records) == 3
    for record in records:
        assert len(record["answers"]) == 4
        for prompt, answer in zip(record["prompts"], record["answers"]):
            ids = lm.encode(prompt["text"])
            full = [lm.score_full(ids, lm.encode(" " + mark, add_special_tokens=False))
                    for mark in ("(A)", "(B)", "(C)", "(D)")]
            assert np.abs(np.array(answer["by_options"]["logprobs"]) - full).max() < 1e-4
            assert answer["by_options"]["pred"] == "ABCD"[int(np.argmax(full))]
            assert answer["gold"] == record["answer"]
    block = summary["accuracy"]
    assert block["num_sets"] == 3 and block["by_options"]["per_prompt"] and block["by_greedy"]["parse_rate"]
    text = (tmp_path / "run" / "summary.md").read_text()
    assert "options' log-likelihoods" in text and "greedy response, parsed" in text
    assert "every prompt gave the same response (the paper's confidence factor)" in text  # under the factors
    # ψ is unchanged by the extra continuations: the diagonal and every M[i, j] still match a full pass
    for record in records:
        prompt_ids = [lm.encode(p["text"]) for p in record["prompts"]]
        for i, p in enumerate(prompt_ids):
            for j, response in enumerate(record["responses"]):
                assert record["logprob_matrix"][i][j] == pytest.approx(lm.score_full(p, response["token_ids"]),
                                                                        abs=1e-4)


@pytest.mark.slow
def test_option_text_scores_mark_and_text_as_a_full_forward_pass_would(lm, tmp_path):
    """option_text=True: each option is scored as its mark followed by its text, under the format variant's own
    order and marks, and the prediction follows the option (not the position) when the order changes."""
    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
    cfg = PosixConfig(model=spec, dataset=DatasetSpec("mmlu"), variant="format", num_sets=2, num_variants=2,
                    max_new_tokens=3, output_dir=str(tmp_path / "run"), score_cache=False, embedding=None,
                    option_text=True)
    run(cfg, lm=lm, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "sets.jsonl").read_text().splitlines()]
    items = {i.item_id: i for i in load_items(DatasetSpec("mmlu"))}
    for record in records:
        options = items[record["item_id"]].options
        for prompt, answer in zip(record["prompts"], record["answers"]):
            choices = prompt_choices(options, prompt["record"])
            ids = lm.encode(prompt["text"])
            expected = [" " + mark + text for mark, text in zip(choices.marks, choices.texts)]
            full = [lm.score_full(ids, lm.encode(c, add_special_tokens=False)) for c in expected]
            assert np.abs(np.array(answer["by_options"]["logprobs"]) - full).max() < 1e-4
            assert answer["by_options"]["pred"] == "ABCD"[choices.order[int(np.argmax(full))]]


@pytest.mark.slow
def test_prompt_choice_and_a_rebuilt_summary(lm, tmp_path):
    from posixlab.results import prompt_choice, rebuild_summary

    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
    out = tmp_path / "tmpl"
    cfg = PosixConfig(model=spec, dataset=DatasetSpec("mmlu"), variant="template", num_sets=4, num_variants=2,
                    max_new_tokens=3, output_dir=str(out), score_cache=False, embedding=None)
    summary = run(cfg, lm=lm, progress=False)
    choice = summary["prompt_choice"]
    assert [p["kind"] for p in choice["prompts"]] == ["original", "template", "template"]
    records = [json.loads(line) for line in (out / "sets.jsonl").read_text().splitlines()]
    records.sort(key=lambda r: r["set_index"])
    # by hand: the selection half is a seeded half of the 4 sets; ψ_i per prompt averaged over it, lowest wins
    by_psi = choice["by_psi"]
    selection = by_psi["selection_items"]
    means = np.mean([records[i]["psi_per_prompt"] for i in selection], axis=0)
    assert by_psi["best"]["prompt"] == int(np.argmin(means)) and by_psi["best"]["selection"] == pytest.approx(means.min())
    for record in records:  # ψ is the mean of its per-prompt parts
        assert np.mean(record["psi_per_prompt"]) == pytest.approx(record["psi"], abs=1e-12)
    correct = [[float(a["by_options"]["correct"]) for a in r["answers"]] for r in records]
    held = by_psi["held_out_items"]
    assert choice["accuracy_by_options"]["held_out_per_prompt"] == pytest.approx(
        np.mean([correct[i] for i in held], axis=0).tolist())
    assert "chosen by" in (out / "summary.md").read_text()
    assert prompt_choice([{**r, "prompts": [{"kind": "spelling", "index": 0}] * 3} for r in records]) is None
    # a summary rebuilt from sets.jsonl (no model) equals the one the run wrote
    before = json.loads((out / "summary.json").read_text())
    after = rebuild_summary(out)
    assert after["accuracy"] == before["accuracy"] and after["prompt_choice"] == before["prompt_choice"]
    assert after["psi"] == before["psi"] and after["compute"] == before["compute"]


@pytest.mark.slow
def test_the_accuracy_table_from_saved_rows_equals_the_run_summary(lm, tmp_path):
    """The analysis path (per_set.csv strings -> accuracy table) and the run's own summary agree."""
    from posixlab.analysis.accuracy import accuracy_table
    from posixlab.analysis.collect import load_rows, write_rows

    spec = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
    out = tmp_path / "spell"
    summary = run(PosixConfig(model=spec, dataset=DatasetSpec("mmlu"), variant="spelling", num_sets=4, num_variants=3,
                            max_new_tokens=3, output_dir=str(out), score_cache=False, embedding=None),
                  lm=lm, progress=False)
    csv_path = write_rows(load_rows(out), tmp_path / "per_set.csv")
    markdown, records = accuracy_table(load_rows(csv_path))
    by_reading = {r["reading"]: r for r in records}
    for reading in ("options", "greedy"):
        block, row = summary["accuracy"][f"by_{reading}"], by_reading[reading]
        assert row["accuracy"] == pytest.approx(block["accuracy"]) and row["cps"] == pytest.approx(block["cps"])
        assert row["worst_case"] == pytest.approx(block["worst_case"])
        assert [row["min"], row["max"]] == pytest.approx([block["spread"]["min"], block["spread"]["max"]])
        assert row["consistency_rate"] == pytest.approx(block["consistency_rate"])
        assert [row["ci95_low"], row["ci95_high"]] == pytest.approx(block["ci95"])
    assert by_reading["greedy"]["parse_rate"] == pytest.approx(summary["accuracy"]["by_greedy"]["parse_rate"]["overall"])
    assert "| greedy |" in markdown and "| options |" in markdown


def test_classification_runs_get_the_same_accuracy_block():
    from posixlab.tasks.classification import classification_accuracy

    def sample(gold, labels):
        return {"gold": gold, "predictions": [{"label": label} for label in labels]}

    # two samples, three rephrasings; N/A is unparsed and wrong
    records = [sample("A", ["A", "A", "N/A"]), sample("B", ["B", "A", "B"]), sample(None, ["A", "B", "C"])]
    block = classification_accuracy(records, 3)
    greedy = block["by_greedy"]
    assert block["num_sets"] == 2 and block["by_options"] is None
    assert greedy["per_prompt"] == [1.0, 0.5, 0.5]
    assert greedy["worst_case"] == 0.0 and greedy["best_case"] == 1.0
    assert greedy["consistency_rate"] == pytest.approx((1 / 3 + 1 / 3) / 2)  # A,A,N/A: 1 of 3; B,A,B: 1 of 3
    assert greedy["parse_rate"]["overall"] == pytest.approx(5 / 6)
    assert classification_accuracy([sample(None, ["A"])], 1) is None
