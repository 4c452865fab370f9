"""Format variants: exact strings for fixed seeds, the gold answer moving with its option and balanced over the
positions, the records posixlab.answers reads, exemplars in the variant's format, the open-ended refusal, and the
mixture's ``kinds`` option (the default mixture exactly as before)."""

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from posixlab.answers import candidate_strings, prompt_choices
from posixlab.data import DatasetSpec, load_items
from posixlab.data.exemplars import exemplar_pool
from posixlab.errors import ConfigError
from posixlab.prompts import MCQ_HEADER, PromptItem, render
from posixlab.rephrase import ParaphraseFile, RephraserConfig, make_paraphrase_source
from posixlab.rephrase.quality import QualityRules
from posixlab.rephrase.source import ParaphraseSource
from posixlab.variants import VARIANT_TYPES, FormatVariants, MixtureVariants, get_variant_generator
from posixlab.variants.paraphrase import ParaphraseVariants
from posixlab.variants.format import CASINGS, ENUMERATORS, MARK_STYLES, SEPARATORS

ROOT = Path(__file__).resolve().parent.parent
ITEMS = load_items(DatasetSpec("mmlu"))
NUMBER_LINE, PYTHON_SUM, DIPLOID = ITEMS[75], ITEMS[102], ITEMS[204]  # short questions of the bundled sample
LETTERS = "ABCD"


def gold_option(item):
    return item.options[LETTERS.index(item.answer)]


# --- exact strings ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("item, index, seed, body, record", [
    (NUMBER_LINE, 0, 0,
     "Question: Use a number line to find the sum of −9 + (−8).\n1) −17 | 2) 17 | 3) −1 | 4) 1\nAnswer:",
     {"option_order": [0, 3, 2, 1], "option_labels": ["1", "2", "3", "4"], "option_marks": ["1)", "2)", "3)", "4)"],
      "gold_position": 0, "enumerator": "1-4", "mark_style": "A) text", "separator": " | ", "casing": "title"}),
    (NUMBER_LINE, 1, 0,
     "QUESTION: Use a number line to find the sum of −9 + (−8).\n1) −1 | 2) 1 | 3) 17 | 4) −17\nANSWER:",
     {"option_order": [2, 1, 3, 0], "gold_position": 3, "casing": "upper"}),
    (PYTHON_SUM, 5, 0,
     "QUESTION: Let l = [1,2,3,4]. What is sum(l) in Python3?\nA: 8; B: 10; C: 1; D: 4\nANSWER:",
     {"option_order": [3, 2, 1, 0], "option_labels": ["A", "B", "C", "D"], "option_marks": ["A:", "B:", "C:", "D:"],
      "gold_position": 1, "enumerator": "A-D", "mark_style": "A: text", "mark_gap": " ", "separator": "; "}),
    (DIPLOID, 3, 1,
     "QUESTION: The normal human chromosome diploid number is:\n1. 48 2. 23 3. 46 4. 24\nANSWER:",
     {"option_order": [3, 0, 2, 1], "option_marks": ["1.", "2.", "3.", "4."], "gold_position": 2,
      "mark_style": "A. text", "separator": " ", "fields": ["QUESTION", "ANSWER"]}),
])
def test_exact_strings(item, index, seed, body, record):
    variant = FormatVariants().variant(item, index, seed)
    assert variant.text == MCQ_HEADER.format(subject=item.subject) + body
    assert variant.kind == "format" and variant.index == index
    assert {k: variant.record[k] for k in record} == record
    json.dumps(variant.record)  # JSON-serialisable


def test_original_keeps_the_papers_format_and_questions_are_untouched():
    prompt_set = get_variant_generator("format").build_set(DIPLOID, 20, seed=0)
    assert len(prompt_set.prompts) == 21
    original = prompt_set.prompts[0]
    assert original.text == render(DIPLOID) and original.kind == "original" and original.record == {}
    header = MCQ_HEADER.format(subject=DIPLOID.subject)
    for variant in prompt_set.prompts[1:]:
        fields = variant.record["fields"]
        assert variant.text.startswith(f"{header}{fields[0]}: {DIPLOID.question}\n")
        assert variant.text.endswith(f"\n{fields[1]}:")


def test_braces_in_questions_and_options_are_written_as_they_are():
    item = PromptItem("mmlu/t/1", "What does {x} print in f\"{x}\"?", ("{}", "{x}", "}{", "{{0}}"), subject="code",
                      answer="B")
    for v in range(8):
        variant = FormatVariants().variant(item, v, 0)
        choices = prompt_choices(item.options, variant.record)
        assert item.question in variant.text
        assert all(mark + variant.record["mark_gap"] + text in variant.text
                   for mark, text in zip(choices.marks, choices.texts))


# --- the gold answer follows its option, and sits at every position ------------------------------------------------
def test_gold_letter_follows_its_option():
    for item in (NUMBER_LINE, PYTHON_SUM, DIPLOID):
        for v in range(20):
            record = FormatVariants().variant(item, v, 0).record
            p = record["gold_position"]
            assert item.options[record["option_order"][p]] == gold_option(item)
            assert sorted(record["option_order"]) == [0, 1, 2, 3]
    # the diploid item's gold (C, "46") is shown third under variant 3, seed 1: its label there is "3"
    record = FormatVariants().variant(DIPLOID, 3, 1).record
    assert record["option_labels"][record["gold_position"]] == "3"


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_a_set_of_20_shows_the_gold_at_every_position_equally_often(seed):
    generator = FormatVariants()
    for item in (NUMBER_LINE, PYTHON_SUM, DIPLOID, ITEMS[0]):
        positions = [p.record["gold_position"] for p in generator.build_set(item, 20, seed).prompts[1:]]
        assert Counter(positions) == {0: 5, 1: 5, 2: 5, 3: 5}
        assert all(sorted(positions[b:b + 4]) == [0, 1, 2, 3] for b in range(0, 20, 4))  # every block of 4
        four = [p.record["gold_position"] for p in generator.build_set(item, 4, seed).prompts[1:]]
        assert sorted(four) == [0, 1, 2, 3]


def test_every_value_of_every_dimension_is_drawn():
    records = [FormatVariants().variant(item, v, 0).record for item in (NUMBER_LINE, PYTHON_SUM, DIPLOID)
               for v in range(20)]
    assert {r["enumerator"] for r in records} == set(ENUMERATORS)
    assert {r["mark_style"] for r in records} == set(MARK_STYLES)
    assert {r["separator"] for r in records} == set(SEPARATORS)
    assert {r["casing"] for r in records} == set(CASINGS)
    assert len({tuple(r["option_order"]) for r in records}) > 12  # the non-gold options are shuffled too


# --- determinism ------------------------------------------------------------------------------------------------------
def test_same_seed_same_strings_and_draws_are_per_item():
    generator = FormatVariants()
    forward = [generator.variant(DIPLOID, v, 3).text for v in range(20)]
    backward = [generator.variant(DIPLOID, v, 3).text for v in reversed(range(20))][::-1]
    assert forward == backward == FormatVariants().build_set(DIPLOID, 20, 3).texts()[1:]
    assert forward != [generator.variant(DIPLOID, v, 4).text for v in range(20)]
    draws = lambda item: [{k: v for k, v in generator.variant(item, i, 3).record.items() if k != "template"}  # noqa
                          for i in range(20)]
    assert draws(NUMBER_LINE) != draws(PYTHON_SUM)  # a different item gets a different draw, same seed and index


# --- the records posixlab.answers reads ------------------------------------------------------------------------------
@pytest.mark.parametrize("item", [NUMBER_LINE, PYTHON_SUM, DIPLOID])
def test_prompt_choices_match_the_prompt_text(item):
    prompt_set = FormatVariants().build_set(item, 20, seed=0)
    header = MCQ_HEADER.format(subject=item.subject)
    for variant in prompt_set.prompts[1:]:
        record = variant.record
        assert {"option_order", "option_labels", "option_marks", "gold_position"} <= set(record)
        choices = prompt_choices(item.options, record)
        question, answer = record["fields"]
        shown = record["separator"].join(mark + record["mark_gap"] + text
                                         for mark, text in zip(choices.marks, choices.texts))
        assert variant.text == f"{header}{question}: {item.question}\n{shown}\n{answer}:"  # options as shown
        assert choices.continuations == tuple(" " + mark for mark in record["option_marks"])
        assert choices.gold_position(item.answer) == record["gold_position"]
        assert choices.texts[record["gold_position"]] == gold_option(item)
        assert record["option_marks"] == [MARK_STYLES[record["mark_style"]][0].format(label)
                                          for label in record["option_labels"]]
    candidates = candidate_strings(item.options, [p.record for p in prompt_set.prompts])
    assert candidates[:4] == [" (A)", " (B)", " (C)", " (D)"]  # the original's, then each format's marks once
    assert len(candidates) == len(set(candidates))


# --- few-shot exemplars -----------------------------------------------------------------------------------------------
def test_exemplars_take_the_variants_order_and_marks():
    shots = exemplar_pool(DatasetSpec("mmlu"), ITEMS).select(DIPLOID, 1, seed=0)
    assert shots[0].item_id == "mmlu/medical_genetics/38" and shots[0].answer == "D"
    variant = FormatVariants().variant(DIPLOID, 3, 1, shots)
    assert variant.text == (
        "The following are multiple choice questions (with answers) about medical genetics.\n\n"
        "QUESTION: Which of the following is not a familial cancer syndrome\n"
        "1. Waardenburg syndrome 2. Familial adenomatous polyposis 3. Von Hippel-Lindau syndrome "
        "4. Li-Fraumeni syndrome\nANSWER: 1. Waardenburg syndrome\n\n"
        "QUESTION: The normal human chromosome diploid number is:\n1. 48 2. 23 3. 46 4. 24\nANSWER:")
    assert variant.messages()[1] == {"role": "assistant", "content": "1. Waardenburg syndrome"}
    # the exemplar answer is the mark of the position its gold option is shown at, for every variant
    for v in range(8):
        variant = FormatVariants().variant(DIPLOID, v, 0, shots)
        choices = prompt_choices(shots[0].options, variant.record)
        p = choices.gold_position(shots[0].answer)
        assert variant.turns[0][1] == " " + choices.marks[p] + variant.record["mark_gap"] + gold_option(shots[0])
    # the original keeps the paper's " (D)text"
    assert FormatVariants().original(DIPLOID, shots).turns[0][1] == " (D)Waardenburg syndrome"


# --- registration and refusals ----------------------------------------------------------------------------------------
def test_registered_with_a_config_file():
    assert VARIANT_TYPES["format"] is FormatVariants and isinstance(get_variant_generator("format"), FormatVariants)
    conf = yaml.safe_load((ROOT / "posixlab/conf/variant/format.yaml").read_text())
    assert conf == {"name": "format", "options": {}}


def test_open_ended_items_are_refused_naming_the_data_set(tmp_path):
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    open_item = PromptItem("alpaca/3", "Name three primary colors.", answer="red, yellow, blue")
    with pytest.raises(ConfigError, match=r"variant=format .*needs multiple-choice items; data set 'alpaca'"):
        FormatVariants().variant(open_item, 0, 0)
    alpaca = DatasetSpec("alpaca", source="path", path=str(ROOT / "tests/fixtures/alpaca_fixture.jsonl"))
    cfg = PosixConfig(model=None, dataset=alpaca, variant="format", num_sets=1, num_variants=2,
                    output_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"needs multiple-choice items; data set 'alpaca'"):
        build_prompt_sets(cfg, progress=False)  # before any model is loaded
    # Alpaca's items never have options: refused with the settings, before the hub is asked for it (offline, the hub's
    # error came first, and after a local copy was made, this one)
    from posixlab.tasks.posix import check_settings

    hub = PosixConfig(model=None, dataset=DatasetSpec("alpaca", source="hub"), variant="format", embedding=None)
    with pytest.raises(ConfigError, match=r"needs multiple-choice items; data set 'alpaca' has open-ended items\. "):
        check_settings(hub)
    check_settings(PosixConfig(model=None, dataset=DatasetSpec("alpaca", source="hub"), variant="template",
                               embedding=None))


# --- the mixture ------------------------------------------------------------------------------------------------------
def paraphrase_source(tmp_path, items):
    path = tmp_path / "mix.jsonl"
    path.write_text("".join(json.dumps({"original": it.question, "paraphrases": [f"{it.question} (rephrased {i})"
                                                                                 for i in range(20)]}) + "\n"
                            for it in items))
    # synthetic paraphrases ("... (rephrased 3)") add a number: the quality checks would rightly refuse them
    return make_paraphrase_source(RephraserConfig(backend="file", path=str(path), validate=False), tmp_path)


def digest(texts):
    return hashlib.sha256("\x1e".join(texts).encode()).hexdigest()


def test_default_mixture_is_unchanged(tmp_path):
    """Strings and hashes written by the mixture before ``kinds`` existed (the committed results depend on them)."""
    items = [ITEMS[0], ITEMS[100]]
    mixture = MixtureVariants(paraphrase_source(tmp_path, items))
    mixture.prepare(items, 20, progress=False)
    first = mixture.build_set(items[0], 20, 0)
    assert [(p.kind, p.index) for p in first.prompts] == (
        [("spelling", i) for i in (0, 3, 7, 12, 13, 15, 19)] + [("template", i) for i in (0, 3, 7, 9, 11, 16, 19)]
        + [("paraphrase", i) for i in (4, 5, 10, 11, 13, 16, 18)])
    head = "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
    options = "\n(A)True, True (B)False, False (C)True, False (D)False, True\n"
    assert first.prompts[0].text == (head + "Q:Statement 1 | Every permutation is a cycle. Statement 2 | Every cycle "
                                     "is a permutafion." + options + "A:")
    assert first.prompts[7].text == (head + "q:Statement 1 | Every permutation is a cycle. Statement 2 | Every cycle "
                                     "is a permutation." + options + "a:")
    assert first.prompts[14].text == (head + "Q:Statement 1 | Every permutation is a cycle. Statement 2 | Every "
                                      "cycle is a permutation. (rephrased 4)" + options + "A:")
    assert digest(first.texts()) == "15cbd7f6e9d7accb5ea1456889b6328e4d8c4b321bfa4493822d3b4f6a7740d5"
    records = json.dumps([p.record for p in first.prompts], sort_keys=True)
    assert hashlib.sha256(records.encode()).hexdigest() == (
        "a535db8fa36e62e161b9a2c4baf95561f1bf18613c009dceab4121cfe0aa2e87")
    second = mixture.build_set(items[1], 20, 0)
    assert [p.index for p in second.prompts] == [0, 1, 3, 5, 17, 18, 19, 3, 9, 12, 14, 15, 17, 19,
                                                 1, 2, 3, 8, 10, 16, 19]
    assert digest(second.texts()) == "376641d1f1883bbfd02d9530c576f1a66474bae682fe44da222b0bfa52b703c9"
    shots = exemplar_pool(DatasetSpec("mmlu"), ITEMS).select(items[0], 2, 0)
    assert digest(mixture.build_set(items[0], 20, 0, shots).texts()) == (
        "74868dfbda942a4cd152d880fd19f8112f2be0187158af5ec371da1174c16900")
    with_original = MixtureVariants(paraphrase_source(tmp_path, items), include_original=True)
    with_original.prepare(items, 21, progress=False)
    assert digest(with_original.build_set(items[0], 21, 1).texts()) == (
        "48671e60a78ece95ecd82656fac9b9057b0d7c21021c9d95829c5b4e714299dd")
    explicit = MixtureVariants(paraphrase_source(tmp_path, items), kinds=["spelling", "template", "paraphrase"])
    explicit.prepare(items, 20, progress=False)
    assert explicit.build_set(items[0], 20, 0).texts() == first.texts()
    assert MixtureVariants(kinds="format").kinds == ("format",)  # one kind written alone: not its letters
    # the description as it was, plus the quality of the paraphrases (added with the quality checks)
    assert set(mixture.describe()) == {"include_original", "per_kind", "rephraser", "paraphrase_file",
                                       "paraphrase_quality"}
    assert mixture.describe()["paraphrase_quality"] == {"checked": False}


def test_mixture_can_include_format_variants(tmp_path):
    items = [NUMBER_LINE, DIPLOID]
    kinds = ["spelling", "template", "paraphrase", "format"]
    mixture = MixtureVariants(paraphrase_source(tmp_path, items), kinds=kinds)
    mixture.prepare(items, 19, progress=False)
    for item in items:
        prompt_set = mixture.build_set(item, 19, seed=0)
        assert Counter(p.kind for p in prompt_set.prompts) == {k: 5 for k in kinds}
        formats = [p for p in prompt_set.prompts if p.kind == "format"]
        assert [p.index for p in formats] == [0, 1, 2, 3, 4]  # the first k: gold at every position (5 = 4 + 1)
        assert [p.text for p in formats] == [FormatVariants().variant(item, v, 0).text for v in range(5)]
        assert sorted(p.record["gold_position"] for p in formats[:4]) == [0, 1, 2, 3]
    assert mixture.describe()["kinds"] == kinds
    with pytest.raises(ConfigError, match=r"multiple of 4 \(num_variants=19 gives 5 \+ 5 \+ 5 \+ 5, "
                                          r"num_variants=23 gives 6 \+ 6 \+ 6 \+ 6\)"):  # the nearest on each side
        mixture.build_set(items[0], 20, 0)
    # no paraphrases needed without the paraphrase kind
    small = MixtureVariants(kinds=["template", "format"])
    small.prepare(items, 3, progress=False)
    assert [p.kind for p in small.build_set(DIPLOID, 3, 0).prompts] == ["template", "template", "format", "format"]
    with pytest.raises(ConfigError, match="needs multiple-choice items"):
        small.prepare([PromptItem("alpaca/1", "Name a color.")], 3, progress=False)
    with pytest.raises(ConfigError, match="distinct kinds among spelling, template, paraphrase, format"):
        MixtureVariants(kinds=["template", "typo"])
    with pytest.raises(ConfigError, match="distinct kinds"):
        MixtureVariants(kinds=["template", "template"])


class IndexScorer:
    """Measures a synthetic paraphrase "... (rephrased i)" as similarity 0.5 + i/100, so a summary shows which of a
    question's paraphrases it counted (the real measures: test_paraphrase_quality.py)."""
    identity = "index-scorer"

    def score(self, original, paraphrases):
        return [{"similarity": 0.5 + int(p.rsplit(" ", 1)[1].rstrip(")")) / 100, "length_ratio": 1.0,
                 "numbers_missing": [], "numbers_added": [], "entities_missing": [], "borrowed": []}
                for p in paraphrases]


def test_a_mixture_reports_the_quality_of_the_paraphrases_it_drew_not_of_all_20(tmp_path):
    items = [ITEMS[0], ITEMS[100]]
    path = paraphrase_source(tmp_path, items).store.path
    source = ParaphraseSource(ParaphraseFile(path, user_supplied=True), scorer=IndexScorer(), rules=QualityRules(min_similarity=0))
    mixture = MixtureVariants(source)
    mixture.prepare(items, 5, progress=False)  # N = 6: 2 of each kind
    sets = [mixture.build_set(item, 5, 0) for item in items]
    drawn = [p.index for s in sets for p in s.prompts if p.kind == "paraphrase"]
    quality = mixture.describe()["paraphrase_quality"]
    assert len(drawn) == 4 and quality["paraphrases"] == 4  # was 40: every prepared paraphrase
    assert quality["similarity_min"] == 0.5 + min(drawn) / 100
    # a paraphrase run takes all it prepared
    plain = ParaphraseVariants(source)
    plain.prepare(items, 3, progress=False)
    for item in items:
        plain.build_set(item, 3, 0)
    assert plain.describe()["paraphrase_quality"]["paraphrases"] == 6
    assert plain.describe()["paraphrase_quality"]["similarity_q05_q50_q95"][1] == 0.51
