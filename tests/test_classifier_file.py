"""Your own classifier from one file (posixlab/data/classifier_file.py): the format, every bad file's error (before
any model loads), the task built from it, and runs on the packaged model with and without gold labels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from posixlab.data.classifier_file import load_classifier
from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA
from posixlab.models import ModelSpec
from posixlab.tasks.classification import (ClassificationConfig, ClassificationData, ClassificationTask,
                                           build_classification_summary, check, load_data)

ROOT = Path(__file__).resolve().parent.parent
SPEC = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")

GOOD = """\
name: sentiment
task: Classify the sentiment of the review.
classes:
  - name: positive
    definition: the reviewer liked it.
    aliases: [good, favourable]
  - name: negative
    definition: the reviewer did not like it.
    aliases: bad
samples:
  - {text: "A joy from start to finish.", label: positive, id: r1}
  - text: "Two hours I will not get back."
    label: Negative
  - {text: "Best film of the year.", label: good}
  - {text: "Dull, slow and far too long.", label: BAD}
"""

UNLABELLED = """\
task: Classify the sentiment of the review.
classes: [positive, negative]
samples:
  - A joy from start to finish.
  - Two hours I will not get back.
  - Best film of the year.
"""


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder / next(iter(files))


def config(path, tmp_path, **kw) -> ClassificationConfig:
    data = {k: kw.pop(k) for k in list(kw) if k in ("num_samples", "exemplar_path", "split", "balanced")}
    return ClassificationConfig(model=SPEC, data=ClassificationData(name="classifier", source="path",
                                                                    path=str(path) if path else None, **data),
                                num_rephrasings=1, output_dir=str(tmp_path / "out"), score_cache=False, **kw)


# ------------------------------------------------------------------------------------------------------ good files


def test_inline_samples_with_definitions_aliases_and_labels_in_any_case(tmp_path):
    d = load_classifier(write(tmp_path, {"t.yaml": GOOD}))
    assert (d.name, d.task_sentence, d.classes) == ("sentiment", "Classify the sentiment of the review.",
                                                    ["positive", "negative"])
    assert d.definitions == {"positive": "the reviewer liked it.", "negative": "the reviewer did not like it."}
    assert d.aliases == {"positive": ["good", "favourable"], "negative": ["bad"]}
    assert [(s.sample_id, s.gold) for s in d.samples] == [("r1", "positive"), ("sentiment/1", "negative"),
                                                          ("sentiment/2", "positive"), ("sentiment/3", "negative")]
    assert d.labelled and d.samples_path is None and len(d.sha256) == 64
    assert d.describe()["path"] == str((tmp_path / "t.yaml").resolve())


def test_jsonl_samples_file_beside_the_yaml(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "reviews.jsonl").write_text(
        '{"text": "Loved it.", "label": "positive"}\n\n"Just a text string line."\n', encoding="utf-8")
    path = write(tmp_path, {"t.yml": "task: Is it good?\nclasses: [positive, negative]\nsamples: data/reviews.jsonl\n"})
    with pytest.raises(ConfigError, match=r"1 of 2 samples have a label .*first: .*reviews.jsonl, line 3"):
        load_classifier(path)
    (tmp_path / "data" / "reviews.jsonl").write_text(
        '{"text": "Loved it.", "label": "positive", "id": 7}\n{"text": "Hated it.", "label": "negative"}\n')
    d = load_classifier(path)
    assert d.name == "t" and [(s.sample_id, s.text, s.gold) for s in d.samples] == [
        ("7", "Loved it.", "positive"), ("t/1", "Hated it.", "negative")]
    assert d.samples_path == str((tmp_path / "data" / "reviews.jsonl").resolve()) and len(d.samples_sha256) == 64


def test_csv_samples_file_with_bom_quotes_and_no_labels(tmp_path):
    (tmp_path / "s.csv").write_bytes('\ufefftext,label\n"Great, really great",\n\nAwful,\n'.encode("utf-8"))
    d = load_classifier(write(tmp_path, {"t.json": json.dumps(
        {"task": "Classify the review.", "classes": ["positive", {"name": "negative"}], "samples": "s.csv"})}))
    assert [(s.text, s.gold) for s in d.samples] == [("Great, really great", None), ("Awful", None)]
    assert not d.labelled and d.definitions == {} and d.aliases == {}


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_samples_file_a_spreadsheet_saved_with_semicolons_or_tabs_reads_as_with_commas(tmp_path, separator):
    """The header line says the separator (``posixlab.data.files.csv_delimiter``): a comma inside a text, or a
    semicolon there, stays in the text."""
    (tmp_path / "s.csv").write_text(f'text{separator}label\n"Great, really; great"{separator}positive\n'
                                    f"Awful{separator}negative\n", encoding="utf-8")
    d = load_classifier(write(tmp_path, {"t.json": json.dumps(
        {"task": "Classify the review.", "classes": ["positive", "negative"], "samples": "s.csv"})}))
    assert [(s.text, s.gold) for s in d.samples] == [("Great, really; great", "positive"), ("Awful", "negative")]


def test_task_from_the_file_classes_definitions_aliases_frame(tmp_path):
    path = write(tmp_path, {"t.yaml": GOOD})
    task = ClassificationTask(config(path, tmp_path, strategy="detail"))
    task.check()
    units = task.build_units(progress=False)
    assert task.classes == ["positive", "negative"] and task.aliases["negative"] == ["bad"]
    assert [u.sample_id for u in units][0] == "r1" and task.rephrasings == ["Classify the sentiment of the review."]
    prompt = task.frame.prompt(task.rephrasings[0], units[0].text, "detail")
    assert "Classes: positive, negative." in prompt and "- negative: the reviewer did not like it." in prompt
    assert prompt.endswith("Classify the sentiment of the review. Answer with the class name only.\nClass:")
    meta = task.meta(lm=None)
    assert meta["dataset"] == "sentiment" and meta["classes"] == ["positive", "negative", NA]
    assert meta["classifier_file"]["sha256"] == load_classifier(path).sha256
    # the run's task sentence still overrides the file's; num_samples draws as for any data set
    task = ClassificationTask(config(path, tmp_path, task_sentence="Say how the reviewer felt.", num_samples=2))
    assert len(task.build_units(progress=False)) == 2 and task.frame.task == "Say how the reviewer felt."


def test_one_shot_examples_come_from_the_files_other_samples(tmp_path):
    path = write(tmp_path, {"t.yaml": GOOD})
    samples, examples = load_data(config(path, tmp_path, strategy="1shot", num_samples=2))
    assert [e.gold for e in examples] == ["positive", "negative"]
    assert not {e.sample_id for e in examples} & {s.sample_id for s in samples}
    with pytest.raises(ConfigError, match="no example of class"):  # every sample evaluated: none left
        check(config(path, tmp_path, strategy="1shot"))
    (tmp_path / "shots.jsonl").write_text('{"text": "Fine.", "label": "good"}\n{"text": "No.", "label": "bad"}\n')
    _, examples = load_data(config(path, tmp_path, strategy="1shot", exemplar_path=str(tmp_path / "shots.jsonl")))
    assert [e.text for e in examples] == ["Fine.", "No."]


def test_summary_without_gold_labels_has_a_note(tmp_path):
    from posixlab.tasks.classification import classification_summary_markdown

    records = [{"sample_id": str(k), "gold": None, "sensitivity": 0.0, "distribution": [1.0, 0.0, 0.0],
                "predictions": [{"label": "positive"}]} for k in range(3)]
    meta = {"model": {"name": "m"}, "dataset": "sentiment", "strategy": "simple", "probability": "greedy"}
    summary = build_classification_summary(records, ["positive", "negative", NA], 1, meta)
    assert summary["consistency"] is None and summary["micro_f1"] is None and summary["accuracy"] is None
    assert any("no gold labels" in note for note in summary["notes"])
    assert "Note: no gold labels" in classification_summary_markdown(summary)
    labelled = [{**r, "gold": "positive"} for r in records]
    notes = build_classification_summary(labelled, ["positive", "negative", NA], 1, meta).get("notes", [])
    assert not any("gold label" in note for note in notes)  # (Q = 1 has a note of its own)


# ------------------------------------------------------------------------------------------------------- bad files

BAD = [
    # (files, the first being the classifier file; the error's words)
    ({"t.txt": UNLABELLED}, r"t.txt: a classifier file ends in .yaml, .yml or .json"),
    ({"t.yaml": ""}, r"t.yaml is empty; write a classifier"),
    ({"t.yaml": "task: x\nclasses: [a, b\nsamples: [c]\n"}, r"t.yaml is not valid YAML \(.* at line 3, column"),
    ({"t.json": '{"task": "x",\n "classes": ["a", "b"],}'}, r"t.json is not valid JSON \(.* at line 2, column"),
    ({"t.yaml": "- a\n- b\n"}, r"t.yaml holds a list, not a mapping"),
    ({"t.yaml": "tasks: x\nclasses: [a, b]\nsamples: [c]\n"},
     r"t.yaml: unknown key\(s\) 'tasks'; a classifier file takes name, task, classes, samples"),
    ({"t.yaml": "task: '  '\nclasses: [a, b]\nsamples: [c]\n"}, r"t.yaml: no task sentence; add e.g. `task: "),
    ({"t.yaml": "task: x\nsamples: [c]\n"}, r"t.yaml: no classes; add e.g. `classes: \[positive, negative\]`"),
    ({"t.yaml": "task: x\nclasses: [only]\nsamples: [c]\n"}, r"t.yaml, classes: 1 class; .* at least 2"),
    ({"t.yaml": "task: x\nclasses: a\nsamples: [c]\n"}, r"t.yaml, classes: must be a list"),
    ({"t.yaml": "task: x\nclasses: [Positive, negative, positive]\nsamples: [c]\n"},
     r"t.yaml, classes\[2\]: 'positive' is the same as .*classes\[0\] \('Positive'"),
    ({"t.yaml": "task: x\nclasses: [a, b, {name: N/A}]\nsamples: [c]\n"},
     r"t.yaml, classes\[2\].name: the class name 'N/A' is reserved .* give the class another name"),
    ({"t.yaml": "task: x\nclasses: [a, {definition: d}]\nsamples: [c]\n"}, r"classes\[1\]: no name; write `- name: "),
    ({"t.yaml": "task: x\nclasses: [a, {name: b, defintion: d}]\nsamples: [c]\n"},
     r"classes\[1\]: unknown key\(s\) 'defintion'; a class takes name, definition, aliases"),
    ({"t.yaml": "task: x\nclasses: [{name: a, aliases: [b]}, b]\nsamples: [c]\n"},
     r"classes\[1\]: 'b' is already an alias of 'a' \(.*classes\[0\].aliases\[0\]\); .* remove the alias"),
    ({"t.yaml": "task: x\nclasses: [a, {name: b, aliases: [A]}]\nsamples: [c]\n"},
     r"classes\[1\].aliases\[0\]: 'A' already names 'a'"),
    ({"t.yaml": "task: Agree?\nclasses: [yes, no]\nsamples: [c]\n"},
     r"classes\[0\]: the class name is the boolean true; YAML reads unquoted yes/no.* quote it \('yes'\)"),
    ({"t.yaml": "task: x\nclasses: [a, b]\n"}, r"t.yaml: no samples; add `samples:`"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: []\n"}, r"t.yaml, samples: the list is empty"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: [ok, '  ']\n"}, r"t.yaml, samples\[1\]: empty text"),
    ({"t.yaml": "task: x\nclasses: [pos, neg]\nsamples: [{text: t, label: postive}]\n"},
     r"t.yaml, samples\[0\]: label 'postive' is not a class; the classes are pos, neg \(any case, or a class's alias"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: [{text: t, label: a}, u, {text: v, label: b}]\n"},
     r"t.yaml: 2 of 3 samples have a label and 1 has none \(first: .*samples\[1\]\); label all samples .* or none"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: [{text: t, lable: a}]\n"},
     r"samples\[0\]: unknown key\(s\) 'lable'; a sample takes text, label, id"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples:\n  - Note: a colon\n"},
     r"samples\[0\]: unknown key\(s\) 'Note'; .* a text holding ': ' needs quotes in YAML"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: [{text: t, id: 1}, {text: u, id: '1'}]\n"},
     r"samples\[1\]: id '1' is also the id of .*samples\[0\]; ids must be unique"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: missing.jsonl\n"},
     r"no samples file \(named by .*t.yaml, samples\) at .*missing.jsonl; a relative name is read from the folder"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.txt\n", "s.txt": "t\n"}, r"samples: 's.txt' is no samples file"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.jsonl\n", "s.jsonl": '{"text": "t"}\n{"text": "u"\n'},
     r"s.jsonl, line 2 is not valid JSON \(.*\); each line must be one object"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.jsonl\n", "s.jsonl": "\n\n"}, r"s.jsonl holds no samples"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.jsonl\n", "s.jsonl": '{"text": "t", "label": "c"}\n'},
     r"s.jsonl, line 1: label 'c' is not a class; the classes are a, b"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.csv\n", "s.csv": "sentence,label\nt,a\n"},
     r"s.csv: no 'text' column; the first row must be a header .*got sentence,label"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.csv\n", "s.csv": "text,label,source\nt,a,web\n"},
     r"s.csv, header: .*remove or rename 'source'"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.csv\n", "s.csv": "text,label\nt,a\nu, v,b\n"},
     r"s.csv, row 2 \(line 3\): 3 cells but the header names 2 columns .* quote a text holding a comma"),
    ({"t.yaml": "task: x\nclasses: [a, b]\nsamples: s.csv\n", "s.csv": "text,label\nt,a\n,b\n"},
     r"s.csv, row 2 \(line 3\): empty text"),
]


@pytest.mark.parametrize("files, message", BAD, ids=[m[:40] for _, m in BAD])
def test_every_bad_file_gives_a_clear_error(tmp_path, files, message):
    path = write(tmp_path, files)
    with pytest.raises(ConfigError, match=message):
        load_classifier(path)


def test_a_missing_classifier_file(tmp_path):
    with pytest.raises(ConfigError, match=r"no classifier file at .*nope.yaml; give the path of an existing"):
        load_classifier(tmp_path / "nope.yaml")


@pytest.mark.parametrize("settings, message", [
    ({}, None),
    ({"strategy": "detail"}, r"strategy=detail shows a definition of every class, but 'positive', 'negative' have "
                             r"none; .* or use strategy=simple"),
    ({"strategy": "1shot"}, r"strategy=1shot shows one labelled example per class, but its samples have no labels"),
    ({"split": "train"}, r"dataset.split=train: a classifier file has no splits"),
    ({"num_samples": 0}, r"num_samples must be a whole number of at least 1"),
])
def test_run_settings_are_checked_against_the_file(tmp_path, settings, message):
    path = write(tmp_path, {"t.yaml": UNLABELLED})
    cfg = config(path, tmp_path, **settings)
    if message is None:
        check(cfg)
    else:
        with pytest.raises(ConfigError, match=message):
            check(cfg)


def test_errors_come_before_any_model_is_loaded(tmp_path):
    from posixlab.runner import run

    cfg = config(None, tmp_path)
    cfg.model = ModelSpec("no-such-model", "hub", "nobody/no-such-model")  # never reached
    with pytest.raises(ConfigError, match=r"dataset=classifier needs its file: dataset.path=my_task.yaml"):
        run(cfg, progress=False)
    cfg.data.path = str(write(tmp_path, {"t.yaml": "task: x\nclasses: [a]\nsamples: [t]\n"}))
    with pytest.raises(ConfigError, match=r"t.yaml, classes: 1 class"):
        run(cfg, progress=False)
    assert not (tmp_path / "out" / "samples.jsonl").exists()


def test_classify_takes_a_file_path_or_classification_data(tmp_path):
    import posixlab

    with pytest.raises(ConfigError, match=r"no classifier file at .*nope.yml"):
        posixlab.classify(str(tmp_path / "nope.yml"), progress=False)
    with pytest.raises(ConfigError, match=r"no classifier file at .*nope.json"):
        posixlab.classify(tmp_path / "nope.json", progress=False)  # a Path is a file too
    with pytest.raises(ConfigError, match=r"dataset=classifier needs its file"):
        posixlab.classify(ClassificationData(name="classifier"), progress=False)


# --------------------------------------------------------------------------------------------- runs on the model


def test_a_run_without_labels_reports_sensitivity_only(lm, tmp_path):
    import posixlab
    from posixlab.analysis.classification import run_classification_figures

    path = write(tmp_path, {"t.yaml": UNLABELLED})
    result = posixlab.classify(str(path), model=lm, num_rephrasings=1, max_new_tokens=4, progress=False,
                               output_dir=tmp_path / "run")
    assert len(result.records) == 3 and 0.0 <= result.sensitivity <= 1.0
    assert result.consistency is None and result.micro_f1 is None
    assert any("no gold labels" in note for note in result.summary["notes"])
    assert result.summary["dataset"] == "t" and result.summary["classifier_file"]["path"] == str(path.resolve())
    assert list(result.to_pandas()["gold"]) == [None, None, None]
    assert "Note: no gold labels" in (tmp_path / "run" / "summary.md").read_text()
    run_classification_figures(tmp_path / "run", tmp_path / "run" / "figures")  # draws without gold labels too


def test_a_run_with_labels_reports_consistency_and_f1(lm, tmp_path):
    from posixlab.runner import run

    path = write(tmp_path, {"t.yaml": GOOD})
    summary = run(config(path, tmp_path, num_samples=3, strategy="detail", max_new_tokens=4), lm=lm, progress=False)
    assert summary["num_samples"] == 3 and summary["consistency"] is not None
    assert summary["micro_f1"]["per_rephrasing"]
    assert not any("gold label" in note for note in summary.get("notes", []))  # (Q = 1 and one class have their own)
    records = [json.loads(line) for line in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert {r["gold"] for r in records} <= {"positive", "negative"}
    assert all(p["label"] in ("positive", "negative", NA) for r in records for p in r["predictions"])


@pytest.mark.slow
def test_the_command_stops_on_a_bad_file_with_exit_status_2(tmp_path):
    path = write(tmp_path, {"t.yaml": "task: x\nclasses: [a, b]\nsamples: [{text: t, label: c}]\n"})
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "task=classification", "dataset=classifier",
                           f"dataset.path={path}", "logger=none", f"hydra.run.dir={tmp_path / 'job'}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "samples[0]: label 'c' is not a class; the classes are a, b" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------ the built-in data sets

def test_the_built_in_data_sets_are_classifier_files_without_samples(tmp_path):
    """Each built-in data set's task sentence, classes, definitions and aliases are a classifier file in the package
    (posixlab/data/classifiers/), read by the classifier format's own checks; the wheel ships them."""
    import fnmatch
    import tomllib

    from posixlab.classification_prompts import DEFINITIONS, TASK_SENTENCES
    from posixlab.data.classification import ALIASES, BUILTIN, BUILTIN_DIR, CLASSES
    from posixlab.data.classifier_file import read_definition

    files = sorted(BUILTIN_DIR.glob("*.yaml"))
    assert {f.stem for f in files} == set(BUILTIN) == set(CLASSES)
    for name, d in BUILTIN.items():
        assert d.name == name and d.samples == [] and d.classes == CLASSES[name]
        assert d.task_sentence == TASK_SENTENCES[name] and d.definitions == DEFINITIONS[name]
        assert d.aliases == ALIASES[name] and set(d.definitions) == set(d.classes)  # strategy=detail works for all
    assert CLASSES["trec"] == ["Number", "Description", "Entity", "Abbreviation", "Location", "Person"]
    assert ALIASES["trec"]["Person"] == ["human", "people", "HUM"]
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for f in files:
        inside = f.relative_to(ROOT / "posixlab").as_posix()
        assert any(fnmatch.fnmatch(inside, pattern) for pattern in package_data["posixlab"]), inside
    with_samples = tmp_path / "with_samples.yaml"
    with_samples.write_text(GOOD, encoding="utf-8")
    with pytest.raises(ConfigError, match="holds no samples"):
        read_definition(with_samples)
