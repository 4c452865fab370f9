"""Multiple-choice questions of 2-10 options (ARC's 3 and 5, CommonsenseQA's 5, MMLU-Pro's 10), shown in the paper's
prompts with a run of options of their own length, reordered and enumerated by format variants, few-shot with
exemplars of another count, and read back as answers. The independent check: a 3- or 5-option prompt is the 4-option
prompt of the same template with one option taken out or added, character for character; 4-option prompts are
pinned elsewhere (tests/test_format_variants.py's exact strings)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from posixlab.answers import prompt_choices, read_choice, set_answers
from posixlab.errors import ConfigError
from posixlab.prompts import MCQ_ORIGINAL, MCQ_TEMPLATES, PromptItem, Shot, render
from posixlab.variants import FormatVariants, get_variant_generator
from posixlab.variants.format import MARK_STYLES, format_template, gold_position_of

ROOT = Path(__file__).resolve().parent.parent
FOUR = PromptItem("q/4", "Which planet is closest to the Sun?", ("Venus", "Earth", "Mercury", "Mars"),
                  subject="astronomy", answer="C")
THREE = PromptItem("q/3", "Which planet is closest to the Sun?", ("Venus", "Earth", "Mercury"),
                   subject="astronomy", answer="C")
FIVE = PromptItem("q/5", "Which planet is closest to the Sun?", ("Venus", "Earth", "Mercury", "Mars", "Jupiter"),
                  subject="astronomy", answer="C")
SHOT3 = PromptItem("s/3", "Which animal is a mammal?", ("shark", "whale", "trout"), subject="astronomy", answer="B")


@pytest.mark.parametrize("template", [MCQ_ORIGINAL, *MCQ_TEMPLATES])
def test_a_paper_template_shows_3_and_5_options_as_it_shows_4_with_one_taken_out_or_added(template):
    four = render(FOUR, template=template)
    assert render(THREE, template=template) == four.replace(" (D)Mars", "")
    assert render(FIVE, template=template) == four.replace("(D)Mars", "(D)Mars (E)Jupiter")
    # an exemplar of another count keeps its own options, before the question's
    shot = render(FIVE, template=template, shots=(Shot(SHOT3),))
    body = template.replace("(D){}", "(D){} (E){}").format(FIVE.question, *FIVE.options)
    assert shot.endswith(template.replace(" (D){}", "").format(SHOT3.question, *SHOT3.options) + " (B)whale\n\n" + body)


def test_every_variant_type_of_the_paper_renders_a_10_option_question():
    ten = PromptItem("q/10", "Pick j.", tuple("abcdefghij"), subject="letters", answer="J")
    for kind in ("template", "spelling"):
        prompt_set = get_variant_generator(kind).build_set(ten, 3, seed=0)
        for prompt in prompt_set.prompts:
            assert "(A)a (B)b (C)c (D)d (E)e (F)f (G)g (H)h (I)i (J)j" in prompt.text, prompt.text


def test_a_template_without_a_run_of_options_cannot_show_another_count():
    with pytest.raises(ConfigError, match="shows no run of 4 options"):
        render(THREE, template="Q: {}\nA){} B){} C){} D){}\nA:")
    with pytest.raises(ConfigError, match="a multiple-choice item has 2-10 options, not 11"):
        render(PromptItem("x", "Q?", tuple("abcdefghijk")))


def test_format_variants_of_5_options_balance_the_gold_over_every_block_of_5_and_read_back():
    variants = [FormatVariants().variant(FIVE, v, seed=3) for v in range(10)]
    positions = [v.record["gold_position"] for v in variants]
    assert Counter(positions[:5]) == Counter(positions[5:]) == Counter(range(5))  # each block: every position once
    assert positions == [gold_position_of(3, FIVE.item_id, v, 5) for v in range(10)]
    for v in variants:
        record = v.record
        assert sorted(record["option_order"]) == list(range(5)) and record["option_order"][record["gold_position"]] == 2
        assert record["enumerator"] in ("A-E", "1-5", "a-e", "i-v") and len(record["option_marks"]) == 5
        for mark, k in zip(record["option_marks"], record["option_order"]):
            assert mark + record["mark_gap"] + FIVE.options[k] in v.text
        choices = prompt_choices(FIVE.options, record)
        assert choices.gold_position("C") == record["gold_position"]
        gold_mark = record["option_marks"][record["gold_position"]]
        assert read_choice(" " + gold_mark + record["mark_gap"] + "Mercury", choices.options).index == \
            record["gold_position"]


def test_a_format_variant_shows_an_exemplar_of_another_count_in_its_own_order_and_the_variant_s_marks():
    variant = FormatVariants().variant(FIVE, 2, seed=0, shots=(SHOT3,))
    record = variant.record
    pattern = MARK_STYLES[record["mark_style"]][0]
    marks = [pattern.format(label) for label in record["option_labels"][:3]]
    exemplar = format_template([0, 1, 2], marks, record["mark_gap"], record["separator"], tuple(record["fields"]))
    answer = " " + marks[1] + record["mark_gap"] + "whale"
    assert variant.turns[0][0].endswith(exemplar.format(SHOT3.question, *SHOT3.options)) and \
        variant.turns[0][1] == answer
    assert variant.turns[1][0] == record["template"].format(FIVE.question, *FIVE.options)
    same = FormatVariants().variant(FIVE, 2, seed=0, shots=(FIVE,))  # an exemplar of the same count: the same order
    assert same.turns[0][0].endswith(same.turns[1][0])


def test_both_readings_of_a_5_option_answer():
    records = [{}, FormatVariants().variant(FIVE, 0, seed=0).record]
    continuations = [" (A)", " (B)", " (C)", " (D)", " (E)"] + [f" {m}" for m in records[1]["option_marks"]]
    logprobs = [[-5.0, -4.0, -3.0, -2.0, -1.0] + [0.0] * 5,  # the original prompt: (E) most likely
                [-9.0] * 5 + [-1.0 if k == records[1]["gold_position"] else -2.0 for k in range(5)]]
    answers = set_answers(FIVE.options, "C", records, [" (E)Jupiter", "I pick Mercury"], continuations, logprobs)
    assert [(a["by_options"]["pred"], a["by_greedy"]["pred"]) for a in answers] == [("E", "E"), ("C", None)]
    assert [a["by_options"]["correct"] for a in answers] == [False, True]


def test_a_run_of_questions_with_3_4_and_5_options_few_shot_under_format_variants(lm):
    import posixlab

    fields = {"choices": "choices", "answer": "answerKey", "subject": "topic", "id": "id"}
    fixture = ROOT / "tests" / "fixtures" / "questions_fixture.jsonl"
    result = posixlab.evaluate_dataset(str(fixture), "format", model=lm, fields=fields, num_sets=None,
                                       num_variants=5, shots=1, embedding=None, score_cache=False, progress=False)
    by_item = {r["item_id"]: r for r in result.records}
    assert sorted(by_item) == [f"sci-{n}" for n in range(1, 8)] and math.isfinite(result.posix)
    for item_id, count in (("sci-3", 3), ("sci-6", 5), ("sci-1", 4)):
        record = by_item[item_id]
        assert len(record["logprob_matrix"]) == 6 and record["psi"] >= 0
        assert [len(a["by_options"]["logprobs"]) for a in record["answers"]] == [count] * 6
        assert {a["by_options"]["pred"] for a in record["answers"]} <= set("ABCDE"[:count])
    assert "(E)Jupiter" in by_item["sci-6"]["prompts"][0]["text"]  # the original prompt: the paper's, with 5
    frame = result.to_pandas().set_index("id")  # each set's accuracy in both readings, beside its subject
    for item_id, record in by_item.items():
        correct = [a["by_options"]["correct"] for a in record["answers"]]
        assert frame.loc[item_id, "accuracy_options"] == sum(correct) / len(correct)
        assert frame.loc[item_id, "subject"] == record["subject"]
    bias = result.summary["accuracy"]["position_bias"]["by_options"]  # position bias over the three counts
    shown = [(len(p["record"]["option_order"]), p["record"]["gold_position"], a["by_options"]["correct"])
             for r in result.records for p, a in zip(r["prompts"], r["answers"]) if p["kind"] == "format"]
    assert bias["prompts"] == len(shown) == 7 * 5 and len(bias["by_gold_position"]) == 5
    assert [g["prompts"] for g in bias["by_gold_position"]] == [sum(g == p for _, g, _ in shown) for p in range(5)]
    assert bias["by_gold_position"][4]["prompts"] == 1  # only sci-6 has a fifth position, once in 5 variants


def test_a_template_that_places_options_by_index_must_place_every_option():
    with pytest.raises(ConfigError, match=r"places options \{1\}-\{4\}; this item has 5"):
        render(FIVE, template="Q: {0}\n1. {1} 2. {2} 3. {3} 4. {4}\nA:")
    with pytest.raises(ConfigError, match=r"places options \{1\}-\{4\}; this item has 3"):
        render(THREE, template="Q: {0}\n1. {1} 2. {2} 3. {3} 4. {4}\nA:")
    assert render(THREE, template="Q: {0}\n1. {3} 2. {1} 3. {2}\nA:").endswith("1. Mercury 2. Venus 3. Earth\nA:")
