"""The second paper (Errica et al.): metrics by hand, parsing, local loaders, an end-to-end run in both modes."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from posixlab.data.classification import (CLASSES, balanced_sample, exemplars, load_samples, read_dbpedia,
                                          read_superglue, read_trec, read_wos, select_samples)
from posixlab.answers import parse_answer
from posixlab.classification_prompts import TASKS, TaskFrame
from posixlab.errors import ConfigError, DatasetUnavailableError
from posixlab.metrics.classification import NA, class_distribution, consistency, consistency_matrix, micro_f1, \
    sensitivity

# ----------------------------------------------------------------------------------------------------------- metrics


def test_sensitivity_by_hand():
    # p = (2/3, 1/3, 0, 0) over 3 classes + N/A: H = -(2/3 ln 2/3 + 1/3 ln 1/3) = 0.636514, / ln 4 = 0.459148
    p = class_distribution(["a", "a", "b"], ["a", "b", "c", NA])
    assert sensitivity(p) == pytest.approx(0.4591479, abs=1e-6)
    assert sensitivity([1.0, 0.0, 0.0]) == 0.0
    assert sensitivity(np.full(7, 1 / 7)) == pytest.approx(1.0)


def test_limit_cases_random_and_constant_predictors():
    classes = ["a", "b", "c", NA]
    rng = np.random.default_rng(1)
    random = [class_distribution(rng.choice(classes, size=3000).tolist(), classes) for _ in range(20)]
    assert min(sensitivity(p) for p in random) > 0.99
    constant = [class_distribution(["b"] * 30, classes) for _ in range(6)]
    assert all(sensitivity(p) == 0.0 for p in constant)
    result = consistency(constant, ["a", "a", "b", "b", "c", "c"])
    assert result["mean"] == 1.0 and set(result["per_class"].values()) == {1.0}


def test_consistency_by_hand_with_and_without_self_pairs():
    # class a: samples 0, 1; TVD((1,0,0),(0.5,0.5,0)) = 0.5 -> C = 0.5. class b: samples 2, 3, 4:
    # C(2,3) = 1 - 0.5*(0.4+0.4) = 0.6, C(2,4) = 1 - 0.5*(1+1) = 0, C(3,4) = 1 - 0.5*(0.6+0.6+0)... computed below
    P = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.8, 0.0], [0.6, 0.4, 0.0], [0.0, 0.0, 1.0]])
    gold = ["a", "a", "b", "b", "b"]
    m = consistency_matrix(P)
    assert m[2, 3] == pytest.approx(0.6) and m[2, 4] == pytest.approx(0.0) and m[3, 4] == pytest.approx(0.0)
    r = consistency(P, gold)
    assert r["per_class"] == {"a": pytest.approx(0.5), "b": pytest.approx(0.2)}  # b: (0.6 + 0 + 0) / 3
    assert r["mean"] == pytest.approx(0.35)
    assert r["pooled"] == pytest.approx((2 * 0.5 + 2 * 0.6) / 8)  # ordered pairs: 2 of a, 6 of b
    s = consistency(P, gold, self_pairs=True)
    assert s["per_class"]["a"] == pytest.approx((2 + 2 * 0.5) / 4)
    assert s["per_class"]["b"] == pytest.approx((3 + 2 * 0.6) / 9)


def test_c_s_interval_against_a_loop_over_each_resample_s_pairs():
    """C's bootstrap interval: each resample's C recomputed by looping over its draws, a pair counted where the two
    draws are different samples of one class (copies of one sample are no pair), then the 2.5 and 97.5 percentiles;
    the estimate lies inside; a data set of one sample a class has no interval."""
    from posixlab.metrics.classification import consistency_interval

    rng = np.random.default_rng(5)
    gold = ["a"] * 4 + ["b"] * 3 + ["c"] * 2 + ["d"]  # d: one sample, no pair
    P = rng.dirichlet([0.5, 0.5, 0.5, 0.5], size=len(gold))
    draws = np.random.default_rng(11).integers(0, len(gold), size=(400, len(gold)))  # what seed 11 draws
    values = []
    for row in draws:
        per_class = []
        for c in "abcd":
            pairs = [1 - 0.5 * np.abs(P[i] - P[j]).sum() for x, i in enumerate(row) for y, j in enumerate(row)
                     if x != y and i != j and gold[i] == gold[j] == c]
            if pairs:
                per_class.append(np.mean(pairs))
        if per_class:
            values.append(np.mean(per_class))
    low, high = consistency_interval(P, gold, seed=11, resamples=400)
    assert (low, high) == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12)
    assert low < consistency(P, gold)["mean"] < high and len(values) > 390
    assert consistency_interval(P[:3], ["a", "b", "c"]) is None
    # three samples: the rarest resample has the chance 3⁻³ = 3.7 %, above a 2.5 % tail, so the percentiles would be
    # the extremes (here a single value: every resample with a's two samples has C = C_a), not a 95 % interval
    assert consistency(P[:3], ["a", "a", "b"])["mean"] is not None
    assert consistency_interval(P[:3], ["a", "a", "b"]) is None
    assert consistency_interval(P[:4], ["a", "a", "b", "b"]) is not None


def test_micro_f1_counts_na_as_wrong():
    assert micro_f1(["x", "y", "y", "x"], ["x", "y", NA, "y"]) == 0.5
    with pytest.raises(ConfigError, match="gold label"):
        micro_f1(["x", None], ["x", "x"])


def test_label_distribution_is_a_softmax():
    from posixlab.tasks.classification import label_distribution

    p = label_distribution([math.log(0.2), math.log(0.2), math.log(0.1)])
    assert p == pytest.approx([0.4, 0.4, 0.2])


# ----------------------------------------------------------------------------------------------------------- parsing

RTE = CLASSES["rte"]
TREC = CLASSES["trec"]
LETTERS = CLASSES["mmlu_letters"]
CB = CLASSES["cb"]


@pytest.mark.parametrize("answer, classes, expected", [
    ("entailment", RTE, "entailment"),
    ("not entailment", RTE, "not entailment"),
    ("Not_entailment.", RTE, "not entailment"),
    ("The answer is: not entailment", RTE, "not entailment"),
    ("There is no entailment here", RTE, "not entailment"),
    ("ENTAILMENT", RTE, "entailment"),
    ("Entailment (the premise supports it)", RTE, "entailment"),
    ("I cannot tell", RTE, NA),
    ("", RTE, NA),
    ("Location", TREC, "Location"),
    ("location.", TREC, "Location"),
    ("Class: Person", TREC, "Person"),
    ("Not a Person, a Location", TREC, "Location"),
    ("Numbers", TREC, "Number"),
    ("Human", TREC, "Person"),
    ("Allocation", TREC, NA),  # a label inside a longer word is no match
    ("Entity or Description", TREC, "Entity"),  # several: the first mentioned
    ("neutral", CB, "neutral"),
    ("contradiction", CB, "contradiction"),
    ("B", LETTERS, "B"),
    ("(c)", LETTERS, "C"),
    ("D. Paris", LETTERS, "D"),
    ("The answer is B", LETTERS, "B"),
    ("A good question.", LETTERS, NA),  # the article "A" is not an answer
    ("Answer: C", LETTERS, "C"),
    ("A\nA. Clockwise rotation; radius of", LETTERS, "A"),  # the answer, then the model goes on
    ("B\nThe answer is: B", LETTERS, "B"),
    ("A, B, C, D.\nA", LETTERS, NA),  # the class list repeated names no one class
    ("A good one\nB", LETTERS, NA),
    # letter classes are read by posixlab.answers.read_choice, the rules POSIX's greedy parse uses
    ("b", LETTERS, "B"),
    ("**B**", LETTERS, "B"),
    ("B.", LETTERS, "B"),
    (" (B)Rome", LETTERS, "B"),
    ("B, because", LETTERS, "B"),
    ("answer: c", LETTERS, "C"),
    ("the answer is (C)", LETTERS, "C"),
    ("A cat", LETTERS, NA),
    ("I think", LETTERS, NA),
])
def test_parsing_table(answer, classes, expected):
    from posixlab.data.classification import ALIASES

    aliases = {"rte": ALIASES["rte"], "trec": ALIASES["trec"]}
    alias = aliases["rte"] if classes is RTE else aliases["trec"] if classes is TREC else None
    assert parse_answer(answer, classes, alias)["label"] == expected


def test_parse_record_is_auditable():
    record = parse_answer("I think: not entailment", RTE)
    assert record["label"] == "not entailment" and record["span"] == [9, 23]
    assert "I think: not entailment"[slice(*record["span"])] == "not entailment"
    assert parse_answer("Paris", LETTERS, options={"A": "London", "B": "Paris"})["label"] == "B"
    # the option text starts the answer (one rule with POSIX's greedy parse), followed by a non-letter
    assert parse_answer("Paris, of course", LETTERS, options={"A": "London", "B": "Paris"}) == \
        {"label": "B", "rule": "option text", "span": [0, 5], "candidates": ["B"]}
    assert parse_answer("Parisian", LETTERS, options={"A": "London", "B": "Paris"})["label"] == NA
    record = parse_answer("B\nThe answer is B", LETTERS)
    assert record == {"label": "B", "rule": "label alone", "span": [0, 1], "candidates": ["B"]}
    assert parse_answer("  ", LETTERS)["rule"] == "empty" and parse_answer("A cat", LETTERS)["rule"] == "no class named"


# ----------------------------------------------------------------------------------------------------------- loaders


def test_trec_file(tmp_path):
    path = tmp_path / "TREC_10.label"
    path.write_bytes(b"NUM:dist How far is it from Denver to Aspen ?\nLOC:city What county is Modesto , California in ?\n"
                     b"HUM:desc Who was Galileo ?\nENTY:other What is an atom ?\n")
    samples = read_trec(path)
    assert [s.gold for s in samples] == ["Number", "Location", "Person", "Entity"]
    assert samples[0].text == "How far is it from Denver to Aspen ?" and samples[0].fields["fine"] == "dist"
    path.write_text("FOO How far ?\n")
    with pytest.raises(DatasetUnavailableError, match="line 1"):
        read_trec(path)


def test_superglue_files(tmp_path):
    rte = tmp_path / "train.jsonl"
    rte.write_text(json.dumps({"premise": "A cat sat.", "hypothesis": "A cat exists.", "label": "entailment",
                               "idx": 0}) + "\n" + json.dumps({"premise": "P.", "hypothesis": "H.",
                                                               "label": "not_entailment", "idx": 1}) + "\n")
    samples = read_superglue(rte, "rte")
    assert [s.gold for s in samples] == ["entailment", "not entailment"]
    assert samples[0].text == "Premise: A cat sat.\nHypothesis: A cat exists."
    cb = tmp_path / "test.jsonl"
    cb.write_text(json.dumps({"premise": "P.", "hypothesis": "H.", "idx": 7}) + "\n")  # unlabelled test split
    (sample,) = read_superglue(cb, "cb")
    assert sample.gold is None and sample.sample_id == "cb/test/7"


def test_dbpedia_files(tmp_path):
    folder = tmp_path / "dbpedia_csv"
    folder.mkdir()
    (folder / "classes.txt").write_text("\n".join(["Company", "EducationalInstitution", "Artist", "Athlete",
                                                   "OfficeHolder", "MeanOfTransportation", "Building",
                                                   "NaturalPlace", "Village", "Animal", "Plant", "Album", "Film",
                                                   "WrittenWork"]) + "\n")
    (folder / "test.csv").write_text('1,"Acme","Acme, Inc. makes anvils."\n6,"HMS Foo","A ship."\n')
    samples = read_dbpedia(folder / "test.csv")
    assert [s.gold for s in samples] == ["Company", "Mean Of Transportation"]
    assert samples[0].text == "Acme: Acme, Inc. makes anvils."


def test_wos_files_and_balanced_draw(tmp_path, capsys):
    folder = tmp_path / "WOS46985"
    folder.mkdir()
    (folder / "X.txt").write_text("\n".join(f"abstract {i}" for i in range(14)) + "\n")
    (folder / "YL1.txt").write_text("\n".join(str(i % 7) for i in range(14)) + "\n")
    samples = read_wos(folder)
    assert samples[3].gold == "Mechanical Engineering" and len(samples) == 14
    picked = balanced_sample(samples, 7, 42, CLASSES["wos46985"])
    assert sorted(s.gold for s in picked) == sorted(CLASSES["wos46985"])
    assert picked == balanced_sample(samples, 7, 42, CLASSES["wos46985"])  # seeded
    assert select_samples(samples, 50, 0, False, CLASSES["wos46985"]) == samples  # more than there are: every one
    assert "num_samples=50 asks for more samples than the data set has: 14, every one" in capsys.readouterr().err
    (folder / "YL1.txt").write_text("0\n")
    with pytest.raises(DatasetUnavailableError, match="X.txt has 14 lines"):
        read_wos(folder)


def test_a_split_s_parquet_file_copied_from_the_hub(tmp_path):
    """The hub's own file for a split (CogComp/trec's test-00000-of-00001.parquet), read as the hub's rows are: the
    coarse label's index through the hub's order, and the ids a hub run gives (the split off the file's name)."""
    import pyarrow
    import pyarrow.parquet

    trec = tmp_path / "test-00000-of-00001.parquet"
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist([
        {"text": "How far is it from Denver to Aspen ?", "coarse_label": 5, "fine_label": 40},
        {"text": "Who was Galileo ?", "coarse_label": 3, "fine_label": 29}]), trec)
    samples = load_samples("trec", "path", str(trec))
    assert [(s.sample_id, s.gold) for s in samples] == [("trec/test/0", "Number"), ("trec/test/1", "Person")]
    rte = tmp_path / "validation.parquet"
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist([
        {"premise": "A cat sat.", "hypothesis": "A cat exists.", "idx": 4, "label": 0}]), rte)
    (sample,) = load_samples("rte", "path", str(rte))
    assert (sample.sample_id, sample.gold, sample.text) == ("rte/validation/4", "entailment",
                                                            "Premise: A cat sat.\nHypothesis: A cat exists.")
    with pytest.raises(DatasetUnavailableError, match=r"test-00000-of-00001.parquet, row 0: no 'premise' field; cb "
                                                      r"is read in the layout of the hub's aps/super_glue \(fields: "):
        load_samples("cb", "path", str(trec))  # another data set's file


def test_missing_local_file_says_what_to_do(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="dataset.path"):
        load_samples("trec", "path", None)
    with pytest.raises(DatasetUnavailableError, match="no file at"):
        load_samples("rte", "path", str(tmp_path / "nope.jsonl"))


def test_one_shot_examples_never_include_evaluated_samples():
    samples = load_samples("mmlu_letters", "sample")
    evaluated = {s.sample_id for s in samples[:200]}
    chosen = exemplars(samples, evaluated, LETTERS, seed=0)
    assert list(chosen) == LETTERS and all(s.gold == c and s.sample_id not in evaluated for c, s in chosen.items())
    with pytest.raises(ConfigError, match="exemplar_path"):
        exemplars(samples, {s.sample_id for s in samples}, LETTERS, seed=0)


def test_prompt_strategies():
    samples = load_samples("mmlu_letters", "sample")
    frame = TaskFrame("mmlu_letters", TASKS["mmlu_letters"], LETTERS, {"A": "first."}, (samples[0],))
    simple = frame.prompt("Pick one.", "Q?", "simple")
    assert simple.startswith("You are a text classifier.\nClasses: A, B, C, D.\n") and simple.endswith(
        "Here is the text: Q?\nPick one. Answer with the letter of the correct option only.\nClass:")
    assert "- A: first." in frame.prompt("Pick one.", "Q?", "detail")
    assert f"Class: {samples[0].gold}" in frame.prompt("Pick one.", "Q?", "1shot")
    with pytest.raises(ConfigError, match="strategy"):
        frame.prompt("Pick one.", "Q?", "3shot")


@pytest.mark.parametrize("setting, message", [
    ({"strategy": "3shot"}, "unknown strategy '3shot'"),
    ({"probability": "x"}, "probability must be one of greedy, label_probs"),
    ({"max_new_tokens": 0}, "max_new_tokens must be a whole number of at least 1"),  # failed inside the engine
    ({"repeats": 0}, "task.repeats (R) must be a whole number of at least 1"),
    ({"num_rephrasings": 0}, "num_rephrasings (Q) must be a whole number of at least 1"),
    ({"variants": "bogus"}, "task.variants must be sentence"),
    ({"seed": "abc"}, "seed takes a whole number"),
    ({"chat_template": "yes"}, "chat_template takes true or false"),
])
def test_classification_settings_are_refused_before_any_work(setting, message):
    """``posixlab.classify`` (and a run) checks its settings before a rephrasing is written or a model loads."""
    import posixlab

    with pytest.raises(ConfigError, match=re.escape(message)):
        posixlab.classify(**setting, progress=False)


# ----------------------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def rephrasings_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("reph") / "rephrasings.jsonl"
    path.write_text(json.dumps({"original": TASKS["mmlu_letters"], "paraphrases": [
        "Pick the right answer to this multiple-choice question.",
        "Select the correct option for the question below."]}) + "\n")
    return path


@pytest.mark.parametrize("probability", ["greedy", "label_probs"])
@pytest.mark.slow
def test_end_to_end_on_the_packaged_model(lm, tmp_path, rephrasings_file, probability):
    from posixlab.analysis.classification import load_run, run_classification_figures
    from posixlab.runner import run as run_classification
    from posixlab.tasks.classification import ClassificationConfig, ClassificationData
    from posixlab.models import ModelSpec
    from posixlab.rephrase import RephraserConfig

    cfg = ClassificationConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                               data=ClassificationData(num_samples=4), strategy="simple", num_rephrasings=3,
                               probability=probability, output_dir=str(tmp_path / "run"), score_cache=False,
                               rephraser=RephraserConfig(backend="file", path=str(rephrasings_file), min_similarity=0.0))
    summary = run_classification(cfg, lm=lm, progress=False)
    out = tmp_path / "run"
    assert json.loads((out / "rephrasings.json").read_text())["rephrasings"][0] == TASKS["mmlu_letters"]
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 4 and summary["num_rephrasings"] == 3 and summary["probability"] == probability
    assert summary["classes"] == [*LETTERS, NA]
    for r in records:
        assert len(r["predictions"]) == 3 and math.isclose(sum(r["distribution"]), 1.0)
        assert r["sensitivity"] == pytest.approx(sensitivity(r["distribution"]))
        assert all(p["parse"]["rule"] for p in r["predictions"])
        if probability == "greedy":
            # the distribution is the share of rephrasings whose parsed label is each class
            assert r["distribution"] == class_distribution([p["label"] for p in r["predictions"]],
                                                            summary["classes"]).tolist()
            assert r["label_logprobs"] is None
        else:
            assert len(r["label_logprobs"]) == 3 and all(len(x) == 4 for x in r["label_logprobs"])
            assert r["distribution"][-1] == 0.0  # label probabilities give N/A no mass
            # each label's log-probability equals one full forward pass of prompt + label
            first = r["predictions"][0]
            assert first["label"] == LETTERS[int(np.argmax(r["label_logprobs"][0]))]
    if probability == "label_probs":
        from posixlab.classification_prompts import DEFINITIONS
        from posixlab.tasks.classification import label_continuations

        frame = TaskFrame("mmlu_letters", TASKS["mmlu_letters"], LETTERS, DEFINITIONS["mmlu_letters"])
        prompt = frame.prompt(TASKS["mmlu_letters"], records[0]["text"], "simple")
        ids = lm.encode(prompt)
        for k, continuation in enumerate(label_continuations(lm, prompt, LETTERS, False)):
            assert records[0]["label_logprobs"][0][k] == pytest.approx(lm.score_full(ids, continuation), abs=1e-4)
    f1 = summary["micro_f1"]
    gold = [r["gold"] for r in records]
    assert f1["per_rephrasing"] == [micro_f1(gold, [r["predictions"][q]["label"] for r in records])
                                    for q in range(3)]
    expected = consistency(np.array([r["distribution"] for r in records]), gold, LETTERS)
    assert summary["consistency"]["mean"] == expected["mean"]
    assert summary["sensitivity"]["mean"] == pytest.approx(np.mean([r["sensitivity"] for r in records]))
    assert "sensitivity S_τ" in (out / "summary.md").read_text()
    run = load_run(out)
    assert run.probability == probability
    figures = run_classification_figures(out, out / "figures")
    assert figures["most_sensitive"].read_text().startswith("# Most sensitive samples")


@pytest.mark.slow
def test_a_run_is_deterministic(lm, tmp_path, rephrasings_file):
    from posixlab.runner import run as run_classification
    from posixlab.tasks.classification import ClassificationConfig, ClassificationData
    from posixlab.models import ModelSpec
    from posixlab.rephrase import RephraserConfig

    def once(name):
        cfg = ClassificationConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                                   data=ClassificationData(num_samples=3), strategy="detail", num_rephrasings=2,
                                   output_dir=str(tmp_path / name), score_cache=False,
                                   rephraser=RephraserConfig(backend="file", path=str(rephrasings_file), min_similarity=0.0))
        run_classification(cfg, lm=lm, progress=False)
        return (tmp_path / name / "samples.jsonl").read_bytes()

    assert once("a") == once("b")
    # posixlab compare pairs the samples of the two runs: the same numbers, nothing changed
    from posixlab.compare import compare_runs

    compared = compare_runs(tmp_path / "a", tmp_path / "b")
    assert compared["unit"] == "sample" and compared["units"] == {"shared": 3, "base_only": 0, "new_only": 0}
    assert compared["changed"] == {} and {m["metric"] for m in compared["metrics"]} == {"sensitivity", "accuracy"}
    assert {m["verdict"] for m in compared["metrics"]} == {"identical"}


@pytest.mark.slow
def test_run_py_classification_job_and_wrong_dataset(tmp_path, rephrasings_file, root):
    import subprocess
    import sys

    base = [sys.executable, str(root / "run.py"), "task=classification", "logger.mode=offline", "progress=false",
            "dataset.num_samples=2", "task.num_rephrasings=2", "rephraser=file", f"rephraser.path={rephrasings_file}",
            f"hydra.run.dir={tmp_path / 'job'}", "score_cache=false"]
    done = subprocess.run(base + ["strategy=1shot"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sensitivity S = " in done.stdout
    summary = json.loads((tmp_path / "job" / "summary.json").read_text())
    assert summary["strategy"] == "1shot" and summary["frame"]["examples"]
    assert (tmp_path / "job" / "figures" / "most_sensitive.md").is_file()
    from posixlab.tracking import offline_run_dirs, read_offline_run

    (run_dir,) = offline_run_dirs(tmp_path / "job")
    text = b"".join(r.SerializeToString() for r in read_offline_run(run_dir))
    assert b"sensitivity" in text and b"classification" in text
    wrong = subprocess.run([sys.executable, str(root / "run.py"), "dataset=trec", "logger=none"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert wrong.returncode == 2 and "add task=classification" in wrong.stderr
    wrong = subprocess.run([sys.executable, str(root / "run.py"), "task=classification", "dataset=mmlu_sample",
                            "logger=none"], capture_output=True, text=True, cwd=tmp_path)
    assert wrong.returncode == 2 and "not a classification data set" in wrong.stderr


def test_one_sample_s_sensitivity_is_said_to_have_no_interval():
    from posixlab.tasks.classification.app import report_lines

    summary = {"sensitivity": {"mean": 0.0, "ci95": [0.0, 0.0]}, "consistency": None, "micro_f1": None,
               "num_samples": 1, "num_rephrasings": 3, "model": {"name": "m"}, "dataset": "d", "strategy": "simple",
               "probability": "greedy"}
    assert report_lines(summary)[0].startswith("sensitivity S = 0.0000 (no interval from one sample) · ")
    assert "(1 sample × Q = 3)" in report_lines(summary)[0]
    assert "(2 samples × Q = 3)" in report_lines({**summary, "num_samples": 2})[0]
