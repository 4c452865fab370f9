"""Paraphrase and mixture variants: the hf rephraser on the packaged Qwen, the paraphrase file, the mixture's
composition, few-shot exemplars and chat templates, and run.py end to end with variant=paraphrase shots=1."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from posixlab.data import DatasetSpec, load_items, select_items
from posixlab.data.exemplars import ExemplarPool, exemplar_pool
from posixlab.errors import CacheError, ConfigError, RephraserError
from posixlab.prompts import PromptItem
from posixlab.rephrase import Instruction, ParaphraseFile, RephraserConfig, make_paraphrase_source
from posixlab.rephrase.quality import QualityRules
from posixlab.variants import MixtureVariants, ParaphraseSource, ParaphraseVariants, get_variant_generator
from posixlab.variants.base import PromptVariant
from scripted import ScriptedRephraser

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTION = yaml.safe_load((ROOT / "conf/rephraser/instruction/default.yaml").read_text())
ITEM = PromptItem("mmlu/test/0", "Which planet is known as the Red Planet?", ("Venus", "Mars", "Jupiter", "Saturn"),
                  subject="astronomy", answer="B")
N_QWEN = 3  # paraphrases per question in the Qwen tests: enough to show distinct real rewrites, quick on 2 cores
# the 0.5B cannot rewrite the cloze question "Marx (1844) claimed that capitalism had alienated workers from:" (its
# rewrites drop the year or copy it): left out, as the run's error advises (dataset.exclude_items)
HARD = "mmlu/sociology/105"
QWEN = "qwen2.5-coder-0.5b-instruct"
SUBJECT = "sociology"  # short questions (51-77 characters): quick to paraphrase on 2 cores


def source_with(path, replies, **options):
    return ParaphraseSource(ParaphraseFile(path), ScriptedRephraser(replies), Instruction.from_dict(INSTRUCTION),
                            samples=1, **options)


# --- the hf backend on the packaged Qwen ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qwen_file(tmp_path_factory):
    """Paraphrases by the packaged Qwen rephraser (the default hf rephraser and instruction) of the two questions
    that a 2-set run on SUBJECT selects. Sampling options do not enter the file's key, so run.py finds them."""
    path = tmp_path_factory.mktemp("paraphrases") / "qwen.jsonl"
    # the 0.5B sibling of the default rephraser: the same code path, three times faster on 2 cores
    cfg = RephraserConfig(model=QWEN, instruction=INSTRUCTION, path=str(path), per_request=N_QWEN, samples=2)
    source = make_paraphrase_source(cfg, os.environ.get("POSIXLAB_CACHE") or Path.home() / ".cache/posixlab")
    items = select_items(load_items(DatasetSpec("mmlu", subjects=[SUBJECT])), 2, 0, exclude=[HARD])
    generator = ParaphraseVariants(source)
    generator.prepare(items, N_QWEN, progress=False)
    return path, items, generator


@pytest.mark.slow
def test_hf_rephraser_writes_real_distinct_paraphrases(qwen_file):
    path, items, generator = qwen_file
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["original"] for r in records] == [it.question for it in items]
    for item, record in zip(items, records):
        paraphrases = record["paraphrases"]
        assert len(paraphrases) == N_QWEN
        assert len({p.casefold() for p in paraphrases}) == N_QWEN  # distinct
        assert all(p.strip() and p.strip().casefold() != item.question.strip().casefold() for p in paraphrases)
        assert record["rephraser"]["model"] == "qwen2.5-coder-0.5b-instruct" and record["rephraser_name"]
        print(item.question, "->", paraphrases)
        # only the question changes: the subject line, options and template of the original stay
        prompt = generator.variant(item, 0, seed=0)
        assert paraphrases[0] in prompt.text and item.question not in prompt.text
        assert prompt.text.startswith("The following are multiple choice questions")
        assert all(f"({letter}){option}" in prompt.text for letter, option in zip("ABCD", item.options))


@pytest.mark.slow
def test_run_py_paraphrase_one_shot_end_to_end_reads_the_file_and_loads_no_rephraser(qwen_file, tmp_path):
    path, items, _ = qwen_file
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "variant=paraphrase", "shots=1", "num_sets=2", f"num_variants={N_QWEN}",
         f"dataset.subjects=[{SUBJECT}]", f"dataset.exclude_items=[{HARD}]",
         f"rephraser.path={path}", f"rephraser.model={QWEN}", "progress=false", f"hydra.run.dir={out}", f"score_cache_dir={tmp_path / 'scores'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "loading the rephraser" not in proc.stderr  # every paraphrase came from the file
    summary = json.loads((out / "summary.json").read_text())
    assert summary["shots"] == 1 and summary["variant_details"]["rephraser"] == "hf:qwen2.5-coder-0.5b-instruct"
    assert summary["variant_details"]["instruction"] == INSTRUCTION
    records = [json.loads(line) for line in (out / "sets.jsonl").read_text().splitlines()]
    paraphrases = {json.loads(line)["original"]: json.loads(line)["paraphrases"] for line in path.read_text().splitlines()}
    for record in records:
        item = next(it for it in items if it.item_id == record["item_id"])
        (exemplar_id,) = record["exemplars"]
        assert exemplar_id != item.item_id
        texts = [p["text"] for p in record["prompts"]]
        assert len(texts) == N_QWEN + 1 and len(record["responses"]) == N_QWEN + 1
        for text, paraphrase in zip(texts[1:], paraphrases[item.question]):
            assert paraphrase in text and text.count("A:") == 2  # the exemplar's answer cue and the question's
        assert all(text.split("\n\n")[1] == texts[0].split("\n\n")[1] for text in texts)  # the same exemplar block


@pytest.mark.slow
def test_run_py_paraphrases_with_a_gguf_file_in_llama_cpp_the_same_every_time(tmp_path):
    """rephraser=llamacpp: the packaged 0.5B's GGUF file writes the paraphrases in this process (no server), into a
    file of its own; written again into a new file, by a new process, they are the same paraphrases."""
    def run(name):
        proc = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "variant=paraphrase", "num_sets=1", f"num_variants={N_QWEN}",
             f"dataset.subjects=[{SUBJECT}]", f"dataset.exclude_items=[{HARD}]", "rephraser=llamacpp",
             f"rephraser.model={QWEN}", f"rephraser.path={tmp_path / name}.jsonl", f"rephraser.per_request={N_QWEN}",
             "rephraser.samples=2", "progress=false", "logger=none", "report=false", f"hydra.run.dir={tmp_path / name}",
             f"score_cache_dir={tmp_path / 'scores'}"],
            cwd=ROOT, capture_output=True, text=True, timeout=900, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"{QWEN} in llama.cpp" in proc.stderr  # the rephraser's load line: the GGUF file, in this process
        records = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        return records, summary

    (first,), summary = run("first")
    assert summary["variant_details"]["rephraser"] == f"llamacpp:{QWEN}"
    assert first["rephraser"]["backend"] == "llamacpp" and first["rephraser"]["model"] == QWEN
    paraphrases = first["paraphrases"]
    assert len(paraphrases) == N_QWEN and len({p.casefold() for p in paraphrases}) == N_QWEN
    assert first["original"] not in paraphrases
    (again,), _ = run("again")
    assert again["paraphrases"] == paraphrases and again["key"] == first["key"]  # seeded: the same every time


@pytest.mark.slow
def test_the_rephraser_s_model_is_closed_once_the_sets_are_built_before_the_run_s_model_loads(tmp_path):
    """The rephraser's model (here the 0.5B's GGUF file in llama.cpp) is closed and dropped when the sets are built,
    not left to Python's cycle collector: with the collector off, no llama.cpp model is alive after the sets."""
    import gc

    from posixlab.data import DatasetSpec
    from posixlab.llamacpp.model import LlamaCppModel
    from posixlab.models.loading import ModelSpec
    from posixlab.rephrase import RephraserConfig
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    cfg = PosixConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                      dataset=DatasetSpec("mmlu", source="sample", subjects=[SUBJECT], exclude_items=[HARD]),
                      variant="paraphrase", num_sets=1, num_variants=N_QWEN, output_dir=str(tmp_path / "run"),
                      rephraser=RephraserConfig(backend="llamacpp", model=QWEN, path=str(tmp_path / "p.jsonl"),
                                                per_request=N_QWEN, samples=2))
    gc.collect()
    gc.disable()
    try:
        sets, about = build_prompt_sets(cfg, False)
        alive = [o for o in gc.get_objects() if isinstance(o, LlamaCppModel)]
    finally:
        gc.enable()
    assert about["variant_details"]["rephraser"] == f"llamacpp:{QWEN}" and len(sets[0].prompts) == N_QWEN + 1
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 1  # the model wrote them, in this process
    assert alive == []


# --- the paraphrase file --------------------------------------------------------------------------------------------
def test_the_hf_rephraser_writes_with_the_transformers_backends_model(tmp_path, capsys):
    """hf: the model is the transformers backend's (which declares GENERATE), opened through the registry on the first
    request, and each request's ``Generation`` decides its replies: n of them, one seed the same replies."""
    from tiny_model import build_tiny_lm

    from posixlab import backends
    from posixlab.models.capabilities import GENERATE
    from posixlab.models.causal_lm import CausalLM
    from posixlab.models.loading import ModelSpec
    from posixlab.openai_client import Generation
    from posixlab.rephrase.hf_backend import HFRephraser

    tiny = build_tiny_lm()
    tiny.model.save_pretrained(tmp_path / "tiny")
    tiny.tokenizer.save_pretrained(tmp_path / "tiny")
    rephraser = HFRephraser(ModelSpec("tiny", "local", str(tmp_path / "tiny"), dtype="float32", device="cpu"),
                            temperature=1.0, top_p=0.9)
    assert rephraser._lm is None  # nothing loads until a paraphrase is asked for
    chat = [{"role": "user", "content": "Rewrite: which planet is red?"}]
    replies = rephraser.chat(chat, seed=7, n=3, max_tokens=8)
    assert "loading the rephraser tiny" in capsys.readouterr().err
    assert isinstance(rephraser.lm, CausalLM) and backends.backend_of(rephraser.lm) is backends.named("transformers")
    assert GENERATE in backends.capabilities_of(rephraser.lm)
    assert len(replies) == 3 and rephraser.chat(chat, seed=7, n=3, max_tokens=8) == replies
    assert rephraser.chat(chat, seed=8, n=3, max_tokens=8) != replies
    greedy = [backends.generate(rephraser.lm, chat, Generation(8, temperature=0.0, seed=seed)) for seed in (1, 2)]
    assert greedy[0] == greedy[1] and len(greedy[0]) == 1  # temperature 0: the greedy reply, whatever the seed
    # the request's budget reached the model: one token per character, at most 8 new ones (the prompt not repeated)
    assert all(len(reply) <= 8 for reply in replies + greedy[0])


def test_a_rephraser_closes_the_model_it_opened_when_released_and_opens_it_again_if_asked(tmp_path, capsys):
    import weakref

    from tiny_model import build_tiny_lm

    from posixlab.models.loading import ModelSpec
    from posixlab.rephrase.hf_backend import HFRephraser

    tiny = build_tiny_lm()
    tiny.model.save_pretrained(tmp_path / "tiny")
    tiny.tokenizer.save_pretrained(tmp_path / "tiny")
    rephraser = HFRephraser(ModelSpec("tiny", "local", str(tmp_path / "tiny"), dtype="float32", device="cpu"))
    chat = [{"role": "user", "content": "Rewrite: which planet is red?"}]
    replies = rephraser.chat(chat, seed=7, n=2, max_tokens=6)
    weights = weakref.ref(rephraser.lm.model)
    rephraser.release()
    assert rephraser._lm is None and weights() is None  # gone now, not when the cycle collector runs
    capsys.readouterr()
    assert rephraser.chat(chat, seed=7, n=2, max_tokens=6) == replies  # opened again, the same seeded replies
    assert "loading the rephraser tiny" in capsys.readouterr().err
    rephraser.release()
    rephraser.release()  # nothing open: nothing to do


def test_second_run_reads_the_file_and_calls_no_model(tmp_path):
    path = tmp_path / "p.jsonl"
    first = source_with(path, ["1. What planet is called the Red Planet?\n2. Which planet is nicknamed the Red Planet?"])
    assert first.paraphrases(ITEM.question, 2)[0] == ["What planet is called the Red Planet?",
                                                      "Which planet is nicknamed the Red Planet?"]
    second = source_with(path, [])  # no replies left: a call would fail
    assert second.paraphrases(ITEM.question, 2)[0][1] == "Which planet is nicknamed the Red Planet?"
    assert second.rephraser.calls == 0
    # more paraphrases than stored: the rephraser tops up, keeping the stored ones first
    third = source_with(path, ["1. The Red Planet is which planet?"])
    assert third.paraphrases(ITEM.question, 3)[0][2] == "The Red Planet is which planet?" and third.rephraser.calls == 1
    assert ParaphraseFile(path).get(third.key(ITEM.question))["paraphrases"][:2] == first.paraphrases(ITEM.question, 2)[0]


def test_a_changed_instruction_or_rephraser_does_not_reuse_paraphrases(tmp_path):
    path = tmp_path / "p.jsonl"
    source_with(path, ["1. What planet is called the Red Planet?"]).paraphrases(ITEM.question, 1)
    changed = ParaphraseSource(ParaphraseFile(path), ScriptedRephraser(["1. Name the planet known as the Red Planet."]),
                               Instruction.from_dict({**INSTRUCTION, "system": "Rewrite."}), samples=1)
    assert changed.paraphrases(ITEM.question, 1)[0] == ["Name the planet known as the Red Planet."]


@pytest.mark.parametrize("damage", ["truncate", "edit", "garbage"])
def test_a_corrupted_paraphrase_file_is_reported_not_used(tmp_path, damage):
    path = tmp_path / "p.jsonl"
    source_with(path, ["1. What planet is called the Red Planet?"]).paraphrases(ITEM.question, 1)
    text = path.read_text()
    path.write_text({"truncate": text[: len(text) // 2], "edit": text.replace("called", "named"),
                     "garbage": text + "\x00\x01 not json\n"}[damage])
    with pytest.raises(CacheError, match=r"line \d+.*not used"):
        source_with(path, [])


@pytest.mark.slow  # a user's file is quality-checked: the MiniLM embedder loads
def test_a_users_own_paraphrase_file(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"original": ITEM.question, "paraphrases": ["Which planet is the Red Planet?"]}) + "\n")
    cfg = RephraserConfig(backend="file", path=str(path))
    generator = get_variant_generator("paraphrase", source=make_paraphrase_source(cfg, tmp_path))
    generator.prepare([ITEM], 1, progress=False)
    prompt_set = generator.build_set(ITEM, 1, 0)
    assert "Which planet is the Red Planet?" in prompt_set.prompts[1].text
    assert prompt_set.prompts[1].record["rephraser"] == "user-supplied"
    with pytest.raises(RephraserError, match="has 1 paraphrases .* 2 are needed"):
        generator.prepare([ITEM], 2, progress=False)
    with pytest.raises(CacheError, match="no paraphrase file"):
        make_paraphrase_source(RephraserConfig(backend="file", path=str(tmp_path / "missing.jsonl")), tmp_path)


def test_too_few_valid_paraphrases_fail_with_the_count(tmp_path):
    source = source_with(tmp_path / "p.jsonl", ["1. Which planet is known as the Red Planet?\n2. Mars.\n"
                                                "3. What planet is called the Red Planet?"] * 3, max_requests=3)
    with pytest.raises(RephraserError, match=r"gave 1 of the 5 .* after 3 requests .*copy of the original.*1 obtained "
                                             r"are kept"):
        source.paraphrases(ITEM.question, 5)
    # what was obtained is kept, and a rerun asks only for the rest
    assert ParaphraseFile(tmp_path / "p.jsonl").get(source.key(ITEM.question))["paraphrases"] == [
        "What planet is called the Red Planet?"]
    # with the same budget, a rerun does not ask again: max_requests counts every run's requests of a question
    same = source_with(tmp_path / "p.jsonl", ["1. Name the planet called the Red Planet."], max_requests=3)
    with pytest.raises(RephraserError, match=r"gave 1 of the 3 .* after 3 requests \(0 in this run\)"):
        same.paraphrases(ITEM.question, 3)
    assert same.rephraser.calls == 0
    rerun = source_with(tmp_path / "p.jsonl", ["1. Name the planet called the Red Planet.\n2. The Red Planet is which planet?"],
                        max_requests=4)
    assert rerun.paraphrases(ITEM.question, 3)[0][1:] == ["Name the planet called the Red Planet.",
                                                          "The Red Planet is which planet?"]
    assert rerun.rephraser.calls == 1 and ParaphraseFile(tmp_path / "p.jsonl").get(
        source.key(ITEM.question))["requests"] == 4


def test_a_short_question_s_rewrite_may_add_a_few_words_past_twice_its_length(tmp_path):
    # "What is 2+2?" (12 characters) -> 27 is 2.25 times as long: refused as too long before length_slack, which cost
    # the packaged rephraser 12 requests for 7 of 20 paraphrases; 53 more characters stay too long
    reply = ["1. What is the sum of 2 and 2?\n2. Tell me the sum of 2 and 2, then explain long division in detail."]
    source = source_with(tmp_path / "a.jsonl", reply, max_requests=1)
    assert source.paraphrases("What is 2+2?", 1)[0] == ["What is the sum of 2 and 2?"]
    strict = source_with(tmp_path / "b.jsonl", reply, max_requests=1, length_slack=0)
    with pytest.raises(RephraserError, match=r"gave 0 of the 1 .*\(rejected: 2 too long\)"):
        strict.paraphrases("What is 2+2?", 1)
    # stored measures go through the same rule; measures written before length_added are held to the ratio alone
    clean = {"similarity": 0.9, "numbers_missing": [], "numbers_added": [], "entities_missing": [], "borrowed": []}
    assert QualityRules().verdict({**clean, "length_ratio": 2.25, "length_added": 15}) is None
    assert QualityRules(length_slack=10).verdict({**clean, "length_ratio": 2.25, "length_added": 15}) == "too long"
    assert QualityRules().verdict({**clean, "length_ratio": 2.25}) == "too long"
    with pytest.raises(ConfigError, match="rephraser.length_slack must be 0 or more"):
        RephraserConfig(length_slack=-1)
    # the run's rephraser settings carry it: a paraphrase run's variant details say which rule wrote its paraphrases
    cfg = RephraserConfig(backend="file", path=str(tmp_path / "a.jsonl"))
    assert make_paraphrase_source(cfg, tmp_path).rules.length_slack == 30


def test_prepare_tries_every_question_and_names_the_ones_that_failed(tmp_path):
    hard = PromptItem("mmlu/test/1", "Cultural homogenization.", ("a", "b", "c", "d"), subject="sociology")
    other = PromptItem("mmlu/test/2", "What is the boiling point of water at sea level?", ("a", "b", "c", "d"))
    replies = ["1. Cultural homogenization is the spread of one culture.",  # completes the original: rejected
               "1. Cultural homogenization means loss of diversity.",
               "1. At sea level, water boils at what temperature?\n2. Water boils at which temperature at sea level?"]
    generator = ParaphraseVariants(source_with(tmp_path / "p.jsonl", replies, max_requests=2, per_request=2))
    with pytest.raises(RephraserError, match=r"for 1 of 2 questions \(item ids mmlu/test/1\).*"
                                             r"dataset.exclude_items=\[mmlu/test/1\]"):
        generator.prepare([hard, other], 2, progress=False)
    # the question after the failure was still paraphrased and stored
    stored = ParaphraseFile(tmp_path / "p.jsonl")
    assert stored.get(generator.source.key(other.question))["paraphrases"] == [
        "At sea level, water boils at what temperature?", "Water boils at which temperature at sea level?"]
    # leaving the item out, as the error says, lets the run go on with the next item of the seeded draw
    items = [PromptItem(f"q{i}", f"Question {i}?") for i in range(6)]
    assert [i.item_id for i in select_items(items, 3, 0, exclude=["q2"])] == ["q4", "q1", "q0"]
    with pytest.raises(ConfigError, match="not in the data set: q9"):
        select_items(items, 3, 0, exclude=["q9"])


class InStep(ScriptedRephraser):
    """A rephraser that decodes requests in batches (as ``hf`` does): each reply depends only on its request (the
    question and the seed), and every batch's size is recorded. Its replies to a question holding "hard" are copies
    (rejected); a question holding "slow" gets one rewrite a reply; ``broken`` fails its batch number ``broken``."""

    batches = True

    def __init__(self, concurrency: int, broken: int | None = None):
        super().__init__([])
        self.concurrency, self.broken, self.sizes = concurrency, broken, []

    def chat(self, messages, *, seed, n, max_tokens):
        text = messages[-1]["content"].rsplit("Text: ", 1)[1]
        if "hard" in text:
            return [f"1. {text}"] * n
        count = 1 if "slow" in text else 2
        return ["\n".join(f"{k}. Say {seed % 997}.{j}{k}: {text}" for k in range(1, count + 1))
                for j in range(n)]

    def chat_batch(self, requests):
        self.sizes.append(len(requests))
        if self.broken == len(self.sizes):
            raise RuntimeError("the batch ran out of memory")
        return [self.chat(**request) for request in requests]


QUESTIONS = ["What is a slow reaction?", "Which hard metal is densest?", "Why is the sky blue?",
             "What makes a slow cooker work?", "How do bees make honey?"]


def in_step(path, concurrency, broken=None):
    return ParaphraseSource(ParaphraseFile(path), InStep(concurrency, broken), Instruction.from_dict(INSTRUCTION),
                            samples=1, per_request=2, max_requests=3)


def test_a_rephraser_that_batches_writes_several_questions_in_step(tmp_path):
    """``max_concurrency // samples`` questions go in step, one batch of their next requests a round; a question that
    is done leaves and the next takes its place. Every question gets what it gets one at a time, the failing one
    its error (the others go on), each is reported once, and the same run batches the same way every time."""
    done = []
    source = in_step(tmp_path / "three.jsonl", 3)
    found = source.paraphrases_of(QUESTIONS, 2, done=lambda text, result: done.append(text))
    alone = in_step(tmp_path / "one.jsonl", 1).paraphrases_of(QUESTIONS, 2)
    assert sorted(done) == sorted(QUESTIONS) and list(found) == QUESTIONS
    assert isinstance(found[QUESTIONS[1]], RephraserError) and "after 3 requests" in str(found[QUESTIONS[1]])
    for text in QUESTIONS[:1] + QUESTIONS[2:]:
        assert found[text][0] == alone[text][0] and len(found[text][0]) == 2
        assert found[text][1]["requests"] == (2 if "slow" in text else 1)
    # round 1: questions 0-2; "sky" is done and 3 joins; 0 is done and 4 joins; the hard one runs out of requests
    assert source.rephraser.sizes == [3, 3, 3] and sum(source.rephraser.sizes) == 2 + 3 + 1 + 2 + 1
    again = in_step(tmp_path / "again.jsonl", 3)
    again.paraphrases_of(QUESTIONS, 2)
    assert again.rephraser.sizes == source.rephraser.sizes
    # a question ready in the file takes no place in step
    ready = in_step(tmp_path / "three.jsonl", 3)
    assert ready.paraphrases_of(QUESTIONS[2:3], 2)[QUESTIONS[2]][0] == found[QUESTIONS[2]][0]
    assert ready.rephraser.sizes == []


def test_a_failed_batch_keeps_what_every_question_in_step_obtained(tmp_path):
    """The second batch fails: the error is raised, and the first batch's rewrites of the questions in step are
    stored, so a rerun asks only for the rest (its requests counting on from the first)."""
    path = tmp_path / "p.jsonl"
    with pytest.raises(RuntimeError, match="ran out of memory"):
        in_step(path, 2, broken=2).paraphrases_of(QUESTIONS[3:] + QUESTIONS[:1], 2)
    source = in_step(path, 2)
    kept = {text: ParaphraseFile(path).get(source.key(text)) for text in QUESTIONS[3:]}
    assert len(kept[QUESTIONS[3]]["paraphrases"]) == 1 and kept[QUESTIONS[3]]["requests"] == 1  # slow: 1 of 2
    assert kept[QUESTIONS[4]] is not None and len(kept[QUESTIONS[4]]["paraphrases"]) == 2  # done before it broke
    found = source.paraphrases_of(QUESTIONS[3:] + QUESTIONS[:1], 2)
    assert found[QUESTIONS[3]][0][0] == kept[QUESTIONS[3]]["paraphrases"][0] and found[QUESTIONS[3]][1]["requests"] == 2
    assert found[QUESTIONS[3]][0] == in_step(tmp_path / "fresh.jsonl", 2).paraphrases_of(QUESTIONS[3:4], 2)[
        QUESTIONS[3]][0]


# --- mixture ----------------------------------------------------------------------------------------------------------
def paraphrased_source(tmp_path, items, n=20):
    path = tmp_path / "mix.jsonl"
    path.write_text("".join(json.dumps({"original": it.question, "paraphrases": [f"{it.question} (rephrased {i})"
                                                                                 for i in range(n)]}) + "\n"
                            for it in items))
    # synthetic paraphrases ("... (rephrased 3)") add a number: the quality checks would rightly refuse them
    return make_paraphrase_source(RephraserConfig(backend="file", path=str(path), validate=False), tmp_path)


def test_mixture_is_seven_of_each_kind_seeded_per_item(tmp_path):
    items = select_items(load_items(DatasetSpec("mmlu")), 5, 0)
    mixture = MixtureVariants(paraphrased_source(tmp_path, items))
    mixture.prepare(items, 20, progress=False)
    for item in items:
        prompt_set = mixture.build_set(item, 20, seed=0)
        kinds = [p.kind for p in prompt_set.prompts]
        assert len(kinds) == 21 and kinds.count("spelling") == kinds.count("template") == kinds.count("paraphrase") == 7
        assert "original" not in kinds  # our reading of the paper: 21 = 3 x 7 variants, no original
        assert len({p.index for p in prompt_set.prompts if p.kind == "template"}) == 7
        assert prompt_set.texts() == mixture.build_set(item, 20, seed=0).texts()  # seeded
    draws = [mixture.draw(item, 20, 0) for item in items]
    assert len({tuple(d["template"]) for d in draws}) > 1  # per-item draws differ
    assert mixture.draw(items[0], 20, 0) != mixture.draw(items[0], 20, 1)
    # a mixture's spelling variant is exactly variant=spelling's variant of the same index and seed
    spelling = [p for p in mixture.build_set(items[0], 20, 0).prompts if p.kind == "spelling"]
    assert spelling[0].text == get_variant_generator("spelling").variant(items[0], spelling[0].index, 0).text
    with_original = MixtureVariants(paraphrased_source(tmp_path, items), include_original=True)
    with pytest.raises(ConfigError, match="multiple of 3"):
        with_original.build_set(items[0], 20, 0)
    with_original.prepare(items, 21, progress=False)
    assert [p.kind for p in with_original.build_set(items[0], 21, 0).prompts].count("original") == 1


# --- few-shot exemplars and chat templates --------------------------------------------------------------------------
def test_exemplars_never_include_the_question_and_follow_the_template():
    items = load_items(DatasetSpec("mmlu"))
    pool = exemplar_pool(DatasetSpec("mmlu"), items)
    for item in items[:60]:
        shots = pool.select(item, 3, seed=0)
        assert len(shots) == 3 and item not in shots and all(s.subject == item.subject for s in shots)
        assert shots == pool.select(item, 3, seed=0)
    with pytest.raises(ConfigError, match="only 4 exemplar"):
        pool.select(items[0], 5, seed=0)  # 5 per subject in the sample: 4 others
    item, shots = items[0], pool.select(items[0], 2, seed=0)
    template = get_variant_generator("template").variant(item, 11, 0, shots)
    assert template.text.count("Question: ") == 3 and template.text.count("\nAnswer:") == 3
    for shot in shots:
        assert f"Answer: ({shot.answer}){shot.options['ABCD'.index(shot.answer)]}\n\n" in template.text
    assert template.text.count("The following are multiple choice questions") == 1
    # spelling edits the question only, unless perturb_shots
    spelling = get_variant_generator("spelling")
    plain, perturbed = spelling.variant(item, 19, 0, shots), spelling.variant(item, 19, 0, shots, perturb_shots=True)
    assert all(s.question in plain.text for s in shots)
    assert not any(s.question in perturbed.text for s in shots) and len(perturbed.record["exemplar_edits"]) == 2


def test_perturb_shots_without_shots_runs_with_a_note(capsys):
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    for shots in (0, 1):
        cfg = PosixConfig(model=None, dataset=DatasetSpec("mmlu"), num_sets=1, num_variants=1, shots=shots,
                          perturb_shots=True)
        (prompt_set,), _ = build_prompt_sets(cfg, progress=False)
        note = capsys.readouterr().err.count("task.perturb_shots=true changes nothing with task.shots=0")
        assert note == (1 if shots == 0 else 0) and len(prompt_set.shots) == shots


def test_exemplars_from_a_file_are_the_first_of_the_subject_and_bad_uses_are_refused(tmp_path, capsys):
    """``dataset.exemplar_path``: the exemplars a file holds (MMLU's dev split saved as JSONL), the first k of the
    question's subject in file order, with the file's name in their ids; a missing file, and exemplars for the user's
    own prompt sets, are errors before any work; with shots=0 a note says it changes nothing."""
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    dev = [{"question": f"Dev question {k} about {s}?", "subject": s, "choices": ["w", "x", "y", "z"], "answer": "B"}
           for s in ("anatomy", "virology") for k in range(4)]
    path = tmp_path / "mmlu_dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in dev))
    spec = DatasetSpec("mmlu", subjects=["anatomy", "virology"], exemplar_path=str(path))
    sets, about = build_prompt_sets(PosixConfig(model=None, dataset=spec, num_sets=4, num_variants=1, shots=2,
                                                embedding=None), progress=False)
    for s in sets:
        subject = s.item.subject
        assert [e.item_id for e in s.shots] == [f"mmlu_dev.jsonl:mmlu/{subject}/{k}" for k in (0, 1)]
        assert f"Dev question 0 about {subject}?" in s.prompts[0].text and "Dev question 2" not in s.prompts[0].text
    assert about["exemplar_pool"].startswith(f"{path} (sha256 ")
    missing = DatasetSpec("mmlu", exemplar_path=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ConfigError, match="exemplar_path=.*missing.jsonl: no such file"):
        build_prompt_sets(PosixConfig(model=None, dataset=missing, num_sets=1, shots=1, embedding=None), progress=False)
    mine = tmp_path / "sets.jsonl"
    mine.write_text(json.dumps({"id": "a", "prompts": ["One?", "Two?"]}) + "\n")
    with pytest.raises(ConfigError, match="cannot add exemplars"):
        build_prompt_sets(PosixConfig(model=None, variant="user", embedding=None, dataset=DatasetSpec(
            "prompt_sets", source="path", path=str(mine), exemplar_path=str(path))), progress=False)
    capsys.readouterr()
    build_prompt_sets(PosixConfig(model=None, dataset=spec, num_sets=1, num_variants=1, embedding=None), progress=False)
    assert f"dataset.exemplar_path={path} changes nothing with task.shots=0" in capsys.readouterr().err


def test_ordered_pool_takes_the_first_k_like_a_dev_split():
    dev = [PromptItem(f"dev{i}", f"Q{i}?", ("a", "b", "c", "d"), subject="s", answer="A") for i in range(5)]
    assert [s.item_id for s in ExemplarPool(dev, "dev", ordered=True).select(ITEM.__class__("t", "T?", subject="s"), 3, 9)] \
        == ["dev0", "dev1", "dev2"]


@pytest.mark.slow
def test_chat_template_rendering_puts_exemplars_in_turns(lm):
    items = load_items(DatasetSpec("mmlu"))
    item = items[0]
    shots = exemplar_pool(DatasetSpec("mmlu"), items).select(item, 2, seed=0)
    prompt: PromptVariant = get_variant_generator("template").variant(item, 3, 0, shots)
    messages = prompt.messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"].startswith("The following are multiple choice questions")
    assert messages[1]["content"] == f"({shots[0].answer}){shots[0].options['ABCD'.index(shots[0].answer)]}"
    text = lm.apply_chat_template(messages)
    assert text.count("<|im_start|>user") == 3 and text.count("<|im_start|>assistant") == 3  # the last one is open
    assert text.rstrip().endswith("<|im_start|>assistant")
    zero_shot = get_variant_generator("template").variant(item, 3, 0)
    assert zero_shot.messages() == [{"role": "user", "content": zero_shot.text}]


# --- the other data sets through the pipeline ------------------------------------------------------------------------
@pytest.mark.slow
def test_alpaca_and_bbh_run_open_ended_templates_and_bbh_refuses_other_variants(lm, tmp_path):
    from posixlab.runner import run
    from posixlab.tasks.posix import PosixConfig

    fixtures = ROOT / "tests" / "fixtures"
    alpaca = DatasetSpec("alpaca", source="path", path=str(fixtures / "alpaca_fixture.jsonl"))
    summary = run(PosixConfig(model=None, dataset=alpaca, variant="template", num_sets=1, num_variants=2,
                            max_new_tokens=30, output_dir=str(tmp_path / "alpaca"), score_cache=False),
                  lm=lm, progress=False)
    record = json.loads((tmp_path / "alpaca" / "sets.jsonl").read_text().splitlines()[0])
    assert [p["text"].split("\n")[-1] for p in record["prompts"]] == ["A:", "a:", "A::"]  # Q:{}\nA:, Table 5 0-1
    assert record["prompts"][0]["text"].startswith("Q:") and summary["max_new_tokens"] == 30
    bbh = DatasetSpec("bbh", source="path", path=str(fixtures / "bbh_fixture.jsonl"), variants=["template"])
    with pytest.raises(ConfigError, match="allows variant types template only"):
        run(PosixConfig(model=None, dataset=bbh, variant="spelling", output_dir=str(tmp_path / "bbh")), lm=lm)
    run(PosixConfig(model=None, dataset=bbh, variant="template", num_sets=1, num_variants=2,
                  output_dir=str(tmp_path / "bbh"), score_cache=False), lm=lm, progress=False)
    assert json.loads((tmp_path / "bbh" / "sets.jsonl").read_text().splitlines()[0])["subject"]
