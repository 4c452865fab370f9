"""Paraphrase quality: the measures and verdicts on hand-made pairs (the packaged MiniLM embeds them), the paraphrase
file's new fields written and read back, and an old file's paraphrases re-scored instead of trusted."""

import json
from pathlib import Path

import pytest
import yaml

from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder
from posixlab.errors import RephraserError
from posixlab.rephrase import Instruction, ParaphraseFile, RephraserConfig, make_paraphrase_source
from posixlab.rephrase.quality import QualityRules, QualityScorer, entities, numbers
from posixlab.rephrase.source import ParaphraseSource
from scripted import ScriptedRephraser

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTION = Instruction.from_dict(yaml.safe_load((ROOT / "conf/rephraser/instruction/default.yaml").read_text()))
RULES = QualityRules(min_similarity=0.7)
pytestmark = pytest.mark.slow  # every test embeds with the packaged MiniLM (the scorer, or a user file's checks)


@pytest.fixture(scope="module")
def scorer():
    return QualityScorer(SentenceEmbedder(EmbeddingSpec()), INSTRUCTION.examples)


# (original, paraphrase, expected verdict): a number changed, a name dropped, an example's word borrowed, meaning
# lost, and faithful rewrites (one writes "three" as "3", one keeps a sentence-initial word the examples also use)
PAIRS = [
    ("How many moons does Mars have, two or three?", "How many moons does Mars have, two or four?",
     "number changed"),
    ("A car travels 60 miles in 1.5 hours. What is its average speed?",
     "If a car covers 60 miles in 2 hours, what is its average speed?", "number changed"),
    ("What did Karl Marx claim about the alienation of workers?",
     "What was claimed about the alienation of workers?", "name dropped"),
    ("How does dark energy affect the expansion of the universe?", "How does dark energy explain photosynthesis?",
     "borrows an example's words"),
    ("Which enzyme breaks down starch in the mouth?", "What is the capital city of a large country?",
     "low similarity"),
    ("How does dark energy affect the expansion of the universe?",
     "In what way does dark energy influence the universe's expansion?", None),
    ("Give three reasons why the Roman Empire fell.", "List 3 reasons for the fall of the Roman Empire.", None),
    ("Give three tips for staying healthy in winter.", "Offer three suggestions for keeping healthy in winter.", None),
]


@pytest.mark.parametrize("original, paraphrase, verdict", PAIRS)
def test_quality_verdicts_on_hand_made_pairs(scorer, original, paraphrase, verdict):
    (scores,) = scorer.score(original, [paraphrase])
    assert RULES.verdict(scores) == verdict, scores


def test_the_measures_themselves(scorer):
    assert numbers("one hundred and 1,500 or 2.50 dollars, twice") == {"100", "1500", "2.5", "2"}
    assert numbers("Which one of the following is true?") == set()  # "which one" is not a number
    assert entities("According to the WHO, did Louis Pasteur work in Paris? iPhone sales rose.") == [
        "WHO", "Louis Pasteur", "Paris", "iPhone"]
    faithful, drifted = scorer.score("How does dark energy affect the expansion of the universe?", [
        "In what way does dark energy influence the universe's expansion?",
        "How does dark energy explain photosynthesis?"])
    assert faithful["borrowed"] == [] and drifted["borrowed"] == ["photosynthesis"]
    assert faithful["similarity"] > drifted["similarity"]
    assert faithful["length_ratio"] == round(len("In what way does dark energy influence the universe's expansion?")
                                             / len("How does dark energy affect the expansion of the universe?"), 4)
    # the same text is similarity 1 (the embedder's rows are normalised before the dot product)
    assert scorer.score("Name the Red Planet.", ["Name the Red Planet."])[0]["similarity"] == pytest.approx(1, abs=1e-5)


QUESTION = "Which planet did Galileo observe in 1610?"


def test_new_fields_are_written_and_read_back(tmp_path, scorer):
    path = tmp_path / "p.jsonl"
    reply = ("1. In 1610, which planet did Galileo observe?\n2. Which planet was observed by Galileo in 1611?\n"
             "3. Which planet did Galileo look at in 1610?")
    source = ParaphraseSource(ParaphraseFile(path), ScriptedRephraser([reply]), INSTRUCTION, scorer=scorer,
                              rules=RULES, samples=1)
    paraphrases, record = source.paraphrases(QUESTION, 2)
    assert paraphrases == ["In 1610, which planet did Galileo observe?", "Which planet did Galileo look at in 1610?"]
    stored = json.loads(path.read_text().splitlines()[-1])
    assert stored["candidates"] == 3 and stored["rejected"] == {"number changed": 1} and stored["requests"] == 1
    assert stored["quality"]["scorer"] == scorer.identity
    assert [s["numbers_missing"] for s in stored["quality"]["scores"]] == [[], []]
    assert all(s["similarity"] > 0.7 for s in stored["quality"]["scores"])
    # read back by a second source: nothing re-scored, nothing asked, the measures as written
    again = ParaphraseSource(ParaphraseFile(path), ScriptedRephraser([]), INSTRUCTION, scorer=scorer, rules=RULES)
    assert again.paraphrases(QUESTION, 2) == (paraphrases, stored)
    summary = again.quality_summary([(2, stored)])
    assert summary["paraphrases"] == 2 and summary["numbers_kept"] == 1.0 and summary["rules"]["min_similarity"] == 0.7


def old_record(source: ParaphraseSource, paraphrases: list[str]) -> dict:
    """A record as posixlab wrote it before the quality measures existed (no quality, candidates or dropped)."""
    from posixlab.rephrase.store import _checksum

    record = {"key": source.key(QUESTION), "original": QUESTION, "paraphrases": paraphrases,
              "rephraser": {"backend": "scripted"}, "rephraser_name": "scripted",
              "instruction_sha256": INSTRUCTION.sha256, "requests": 2, "rejected": {"duplicate": 1}}
    return {**record, "checksum": _checksum({**record, "checksum": None})}


def test_an_old_paraphrase_file_is_rescored_and_its_failures_replaced(tmp_path, scorer):
    path = tmp_path / "old.jsonl"
    rephraser = ScriptedRephraser(["1. Which planet did Galileo study in 1610?"])
    source = ParaphraseSource(ParaphraseFile(path), rephraser, INSTRUCTION, scorer=scorer, rules=RULES, samples=1)
    path.write_text(json.dumps(old_record(source, ["In 1610, which planet did Galileo observe?",
                                                   "Which planet did he observe in 1610?"])) + "\n")
    source = ParaphraseSource(ParaphraseFile(path), rephraser, INSTRUCTION, scorer=scorer, rules=RULES, samples=1)
    paraphrases, record = source.paraphrases(QUESTION, 2)
    # the one that drops "Galileo" is dropped and a new one asked for, with a request seed after the old two
    assert paraphrases == ["In 1610, which planet did Galileo observe?", "Which planet did Galileo study in 1610?"]
    assert rephraser.calls == 1 and record["requests"] == 3 and record["dropped"] == {"name dropped": 1}
    assert len(record["quality"]["scores"]) == 2
    assert ParaphraseFile(path).get(record["key"]) == record  # the checked record was written back


def test_a_users_old_file_is_checked_and_a_failure_refused_with_what_to_do(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"original": QUESTION, "paraphrases": [
        "In 1610, which planet did Galileo observe?", "Which planet did Galileo observe in 1620?"]}) + "\n")
    before = path.read_text()
    source = make_paraphrase_source(RephraserConfig(backend="file", path=str(path)), tmp_path)
    assert source.paraphrases(QUESTION, 1)[0] == ["In 1610, which planet did Galileo observe?"]
    with pytest.raises(RephraserError, match=r"has 1 paraphrases .* that pass the quality checks \(1 number changed "
                                             r"dropped; .*rephraser.validate=false\), 2 are needed"):
        source.paraphrases(QUESTION, 2)
    assert path.read_text() == before  # a user's file is never rewritten
    unchecked = make_paraphrase_source(RephraserConfig(backend="file", path=str(path), validate=False), tmp_path)
    assert len(unchecked.paraphrases(QUESTION, 2)[0]) == 2


def test_a_numbered_statement_list_is_kept_and_only_the_question_rewritten(tmp_path, scorer):
    question = "Which of these are institutions of the liberal economic order?\nI. GATT\nII. IMF\nIII. World Bank"
    rephraser = ScriptedRephraser(["1. Which of these belong to the liberal economic order's institutions?\n"
                                   "2. Which of these are institutions of the liberal economic order? I. GATT"])
    source = ParaphraseSource(ParaphraseFile(tmp_path / "p.jsonl"), rephraser, INSTRUCTION, scorer=scorer,
                              rules=RULES, samples=1)
    (paraphrase,), record = source.paraphrases(question, 1)
    assert paraphrase == ("Which of these belong to the liberal economic order's institutions?\n"
                          "I. GATT\nII. IMF\nIII. World Bank")
    # the request held the question alone; the measures compare the rewritten question with it
    assert rephraser.sent.endswith("Text: Which of these are institutions of the liberal economic order?")
    assert record["quality"]["scores"][0]["length_ratio"] == round(
        len("Which of these belong to the liberal economic order's institutions?")
        / len("Which of these are institutions of the liberal economic order?"), 4)
    assert source.scorer.score(question, [paraphrase]) == record["quality"]["scores"]  # re-scoring agrees
