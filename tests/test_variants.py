"""Spelling and template variants: exact strings for fixed seeds, untouched options and templates, determinism."""

import random

import pytest

from posixlab.errors import ConfigError
from posixlab.prompts import MCQ_HEADER, MCQ_TEMPLATES, OPEN_TEMPLATES, PromptItem, render
from posixlab.variants import get_variant_generator
from posixlab.variants.spelling import QWERTY_NEIGHBOURS, eligible_words, perturb_word

ITEM = PromptItem("test/0", "Which planet is known as the Red Planet in our solar system?",
                  ("Venus", "Mars", "Jupiter", "Saturn"), subject="astronomy")
HEAD = "The following are multiple choice questions (with answers) about astronomy.\n\nQ:"
TAIL = "\n(A)Venus (B)Mars (C)Jupiter (D)Saturn\nA:"


@pytest.mark.parametrize("index, seed, question", [
    (0, 0, "Which planet is known as the Red Planet in our solpar system?"),
    (7, 0, "Which planet is known as th Rde Planet in our solar system?"),
    (17, 0, "hich planet is knosn sa th Red Poanet ion uor solar sqystem?"),
    (0, 1, "Which planet is known as tyhe Red Planet in our solar system?"),
])
def test_spelling_exact_strings(index, seed, question):
    variant = get_variant_generator("spelling").variant(ITEM, index, seed)
    assert variant.text == HEAD + question + TAIL
    assert variant.kind == "spelling" and variant.index == index


def test_spelling_k_schedule_and_records():
    gen = get_variant_generator("spelling")
    ks = [gen.variant(ITEM, v, 0).record["k"] for v in range(20)]
    assert ks == [1] * 5 + [2] * 5 + [4] * 5 + [8] * 5
    for v in range(20):
        record = gen.variant(ITEM, v, 0).record
        assert record["k_applied"] == record["k"] == len(record["edits"])
        assert len({e["word_index"] for e in record["edits"]}) == record["k"]  # distinct words
        for e in record["edits"]:
            assert e["operation"] in ("insertion", "omission", "transposition", "substitution")
            assert e["perturbed"] != e["original"]
            assert ITEM.question[e["char_start"]:e["char_start"] + len(e["original"])] == e["original"]


def test_spelling_never_touches_options_subject_or_template():
    gen = get_variant_generator("spelling")
    prompt_set = gen.build_set(ITEM, 20, seed=3)
    assert prompt_set.prompts[0].text == render(ITEM) and prompt_set.prompts[0].kind == "original"
    assert len(prompt_set.prompts) == 21
    for variant in prompt_set.prompts[1:]:
        assert variant.text.startswith(HEAD) and variant.text.endswith(TAIL)
        assert variant.text != prompt_set.prompts[0].text


def test_variants_are_deterministic_and_independent_of_order():
    gen = get_variant_generator("spelling")
    forward = [gen.variant(ITEM, v, 5).text for v in range(20)]
    backward = [gen.variant(ITEM, v, 5).text for v in reversed(range(20))][::-1]
    assert forward == backward
    assert forward != [gen.variant(ITEM, v, 6).text for v in range(20)]


def test_spelling_with_few_or_no_eligible_words():
    gen = get_variant_generator("spelling")
    few = PromptItem("t/1", "Compute 3+4 = ?", ("5", "6", "7", "8"), subject="math")
    v = gen.variant(few, 19, 0)  # k = 8 but only "Compute" is a word
    assert v.record["k"] == 8 and v.record["k_applied"] == 1
    none = PromptItem("t/2", "3+4 = ?", ("5", "6", "7", "8"), subject="math")
    v = gen.variant(none, 0, 0)
    assert v.text == render(none) and v.record["k_applied"] == 0 and "no eligible word" in v.record["note"]


def test_eligible_words_and_error_operations():
    q = "Is (x2) a base-10 'number', or isn't it?"
    assert [q[s:e] for s, e in eligible_words(q)] == ["Is", "number", "or", "it"]
    rng = random.Random(1)
    assert perturb_word("Paris", "transposition", rng)[0] in {"aPris", "Pairs", "Prais", "Parsi"}
    new, op, pos = perturb_word("aa", "transposition", random.Random(0))  # nothing to swap: another error applies
    assert op != "transposition" and new != "aa"
    new, op, pos = perturb_word("KEY", "substitution", random.Random(2))
    assert new.isupper() and new[:pos] + new[pos + 1:] == "KEY"[:pos] + "KEY"[pos + 1:]
    assert new[pos].lower() in QWERTY_NEIGHBOURS["KEY"[pos].lower()]


def test_qwerty_neighbours():
    assert sorted(QWERTY_NEIGHBOURS["s"]) == sorted("awedxz")
    assert sorted(QWERTY_NEIGHBOURS["g"]) == sorted("fhtyvb")
    assert sorted(QWERTY_NEIGHBOURS["p"]) == sorted("ol")
    assert all(ch not in QWERTY_NEIGHBOURS[ch] for ch in QWERTY_NEIGHBOURS)
    assert all(ch in QWERTY_NEIGHBOURS[n] for ch in QWERTY_NEIGHBOURS for n in QWERTY_NEIGHBOURS[ch])  # symmetric


def test_templates_exactly_as_printed():
    assert len(MCQ_TEMPLATES) == len(OPEN_TEMPLATES) == 20
    assert MCQ_TEMPLATES[5] == "Q: {} || (A){} (B){} (C){} (D){} || A:"
    assert MCQ_TEMPLATES[14] == "Question - {}\n(A){} (B){} (C){} (D){}\nAnswer -"
    assert MCQ_TEMPLATES[18] == "QUESTION\t{}\n(A){} (B){} (C){} (D){}\nANSWER\t"
    assert OPEN_TEMPLATES[19] == "Question: {} , Answer:"
    # Table 5 is Table 4 without the options line
    assert [t.replace("\n(A){} (B){} (C){} (D){}", "").replace(" || (A){} (B){} (C){} (D){}", "")
            .replace(" , (A){} (B){} (C){} (D){}", "") for t in MCQ_TEMPLATES] == list(OPEN_TEMPLATES)


def test_template_variants_keep_question_options_and_subject():
    prompt_set = get_variant_generator("template").build_set(ITEM, 20, seed=0)
    assert len(prompt_set.prompts) == 21
    assert prompt_set.prompts[19].text == (MCQ_HEADER.format(subject="astronomy") + "QUESTION\t" + ITEM.question
                                           + "\n(A)Venus (B)Mars (C)Jupiter (D)Saturn\nANSWER\t")
    assert prompt_set.prompts[6].text.endswith("Q: " + ITEM.question + " || (A)Venus (B)Mars (C)Jupiter (D)Saturn || A:")
    assert all(p.record["template_id"] == p.index for p in prompt_set.prompts[1:])
    open_item = PromptItem("o/1", "Name three primary colors.")
    assert get_variant_generator("template").variant(open_item, 0, 0).text == "q:Name three primary colors.\na:"
    assert render(open_item) == "Q:Name three primary colors.\nA:"


def test_unknown_variant_and_bad_counts():
    with pytest.raises(ConfigError, match="unknown variant type 'typo'.*spelling, template"):
        get_variant_generator("typo")
    with pytest.raises(ConfigError, match="20 distinct variants"):
        get_variant_generator("template").build_set(ITEM, 21, 0)
    with pytest.raises(ConfigError, match="at least 1"):
        get_variant_generator("spelling").build_set(ITEM, 0, 0)
