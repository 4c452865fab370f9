"""Your own questions (``dataset=questions``, posixlab/data/questions.py): records with their own field names, from a
file or a hub data set, made into prompt sets by any variant type. The independent check: the same questions written
in MMLU's layout and read by the MMLU loader give the same prompt sets, and on the packaged model the same ψ, bit for
bit."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from posixlab.data import DatasetSpec, load_items
from posixlab.data.files import read_records
from posixlab.data.questions import data_name, items_from_records, load_questions
from posixlab.errors import ConfigError, DatasetUnavailableError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "questions_fixture.jsonl"  # ARC's layout: choices {text, label}, answerKey
ARC = {"choices": "choices", "answer": "answerKey", "subject": "topic", "id": "id"}


def four_option_copy(path: Path) -> Path:
    """The fixture's 4-option questions, in its own layout: what MMLU's loader can read too (``mmlu_copy``)."""
    rows = [row for row in read_records(FIXTURE) if len(row["choices"]["text"]) == 4]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def mmlu_copy(path: Path) -> Path:
    """The fixture's 4-option questions in MMLU's own layout (id, question, subject, choices, answer letter): the
    same ids, so that variants seeded per item are the same."""
    rows = []
    for row in read_records(FIXTURE):
        options, labels = row["choices"]["text"], row["choices"]["label"]
        if len(options) == 4:
            rows.append({"id": row["id"], "question": row["question"], "subject": row["topic"], "choices": options,
                         "answer": "ABCD"[labels.index(row["answerKey"])]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_arc_shaped_records_give_multiple_choice_items_of_3_4_and_5_options(capsys):
    items = load_questions(path=str(FIXTURE), **ARC)
    assert capsys.readouterr().err == ""
    assert [i.item_id for i in items] == [f"sci-{n}" for n in range(1, 8)]
    first, second, third = items[:3]
    assert first.options == ("oxygen", "carbon dioxide", "nitrogen", "helium") and first.answer == "B"
    assert second.answer == "B"  # answerKey "2" among the labels 1-4: the second option, not index 2
    assert first.subject == "biology" and items[1].subject == "earth science" and all(i.graded for i in items)
    assert (third.options, third.answer) == (("shark", "whale", "trout"), "B")
    assert (len(items[5].options), items[5].answer) == (5, "C")  # Mercury, the third of five
    kept = load_questions(path=str(FIXTURE), subjects=["earth_science"], **ARC)
    assert [i.item_id for i in kept] == ["sci-2", "sci-6"]


def test_questions_with_fewer_than_2_or_more_than_10_options_are_left_out_and_counted(capsys):
    rows = [{"q": f"Q{n}?", "o": [f"o{k}" for k in range(size)], "g": 0} for n, size in enumerate((1, 2, 10, 11, 4))]
    items = items_from_records(rows, "doc", "mine", question="q", choices="o", answer="g")
    assert [(i.item_id, len(i.options)) for i in items] == [("mine/1", 2), ("mine/2", 10), ("mine/4", 4)]
    said = capsys.readouterr().err
    assert "doc: 2 of 5 multiple-choice questions left out (1 with 1, 1 with 11 options; a question has 2-10)" in said
    ten = items_from_records([{"q": "Q?", "o": list("abcdefghij"), "g": "J"}], "d", "m", question="q", choices="o",
                             answer="g")
    assert ten[0].answer == "J" and ten[0].options[9] == "j"


def test_a_csv_with_option_columns_and_answers_in_every_form(tmp_path):
    path = tmp_path / "quiz.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, ["q", "w", "x", "y", "z", "gold"])
        writer.writeheader()
        for gold in ("2", "C", "c", "blue", ""):  # an index as CSV text, a letter, a letter, the option's text, none
            writer.writerow({"q": "Colour of the sky?", "w": "red", "x": "green", "y": "blue", "z": "grey",
                             "gold": gold})
    items = load_questions(path=str(path), question="q", choices=["w", "x", "y", "z"], answer="gold")
    assert [i.answer for i in items] == ["C", "C", "C", "C", None]
    assert [i.item_id for i in items] == [f"quiz/{n}" for n in range(5)]
    assert items[0].options == ("red", "green", "blue", "grey") and items[0].subject is None


def test_option_columns_left_empty_at_the_end_give_a_question_of_fewer_options(tmp_path):
    """ARC's 3-5 options in columns A-E: a blank cell (CSV), null or a missing value at the end is no option (it was
    shown as an empty "(D)", and null as "None"); a blank before a filled one is an error naming the record."""
    path = tmp_path / "quiz.csv"
    path.write_text("q,A,B,C,D,E,gold\nSky?,red,blue,green,grey,,B\nSun?,hot,cold,wet,,,A\n", encoding="utf-8")
    items = load_questions(path=str(path), question="q", choices=["A", "B", "C", "D", "E"], answer="gold")
    assert [i.options for i in items] == [("red", "blue", "green", "grey"), ("hot", "cold", "wet")]
    assert [i.answer for i in items] == ["B", "A"]
    rows = tmp_path / "quiz.jsonl"
    rows.write_text(json.dumps({"q": "Sky?", "A": "red", "B": "blue", "C": None, "gold": 1}) + "\n", encoding="utf-8")
    assert load_questions(path=str(rows), question="q", choices=["A", "B", "C"], answer="gold")[0].options == \
        ("red", "blue")
    path.write_text("q,A,B,C,D,gold\nSky?,red,,green,grey,A\n", encoding="utf-8")
    with pytest.raises(DatasetUnavailableError, match=re.escape("quiz.csv, record 0: option B is empty, but D after "
                                                                "it is not; a question with fewer options leaves")):
        load_questions(path=str(path), question="q", choices=["A", "B", "C", "D"], answer="gold")
    path.write_text("q,A,B,C,D,gold\nSky?,red,blue,green,,D\n", encoding="utf-8")
    with pytest.raises(DatasetUnavailableError, match=re.escape("answer 'D' is none of the 3 options")):
        load_questions(path=str(path), question="q", choices=["A", "B", "C", "D"], answer="gold")


@pytest.mark.parametrize("separator", [",", ";", "\t"])
def test_a_spreadsheet_s_csv_reads_with_its_own_separator_and_lists_as_pandas_writes_them(tmp_path, separator):
    """A "CSV" saved where the decimal mark is a comma is separated by semicolons (Excel in most of Europe), and a
    TSV by tabs: the header line says which (a question's own semicolons do not); a column of lists, as pandas'
    ``to_csv`` writes it (Python's quotes), or as JSON, is the options' list. Read alike, byte-order mark or not."""
    path = tmp_path / "quiz.csv"
    with open(path, "w", newline="", encoding="utf-8-sig") as f:
        writer = csv.writer(f, delimiter=separator)
        writer.writerow(["question", "options", "gold"])
        writer.writerow(["What is 2+2; or 4+0?", "['3', '4', '5', '6']", "B"])
        writer.writerow(["Red planet?", '["Venus", "Mars, the red one", "Jupiter"]', "1"])
    items = load_questions(path=str(path), choices="options", answer="gold")
    assert [(i.question, i.options, i.answer) for i in items] == [
        ("What is 2+2; or 4+0?", ("3", "4", "5", "6"), "B"), ("Red planet?", ("Venus", "Mars, the red one", "Jupiter"),
                                                              "B")]


def test_options_and_an_answer_the_settings_do_not_name_are_pointed_out_not_silently_dropped(tmp_path, capsys):
    path = tmp_path / "quiz.csv"
    path.write_text("question,A,B,C,answer\nWhat is 2+2?,3,4,5,B\nRed planet?,Venus,Mars,Jupiter,B\n")
    items = load_questions(path=str(path))  # the defaults: choices and answer null, so open-ended and ungraded
    assert all(i.options == () and i.answer is None for i in items)
    assert capsys.readouterr().err == (
        f"posixlab: note: {path}: dataset.options.choices is null, so the questions are open-ended, their options "
        "never shown; dataset.options.choices=[A,B,C] dataset.options.answer=answer reads the fields the records "
        "seem to have for them\n")
    items = load_questions(path=str(path), choices=["A", "B", "C"])
    assert items[0].options == ("3", "4", "5") and items[0].answer is None
    note = capsys.readouterr().err
    assert "dataset.options.answer is null, so no answer is graded; dataset.options.answer=answer" in note
    items = load_questions(path=str(path), choices=["A", "B", "C"], answer="answer")
    assert [i.answer for i in items] == ["B", "B"] and capsys.readouterr().err == ""  # everything read: no note


def test_open_ended_questions_carry_their_answer_as_a_reference_unless_graded():
    rows = [{"prompt": {"text": "Name a primary colour."}, "reference": " Red "}, {"prompt": {"text": "Say hi."}}]
    items = items_from_records(rows, "doc", "mine", question="prompt.text", answer="reference")
    assert [(i.item_id, i.question, i.options, i.answer, i.graded) for i in items] == [
        ("mine/0", "Name a primary colour.", (), "Red", False), ("mine/1", "Say hi.", (), None, False)]
    graded = items_from_records(rows[:1], "doc", "mine", question="prompt.text", answer="reference", graded=True)
    assert graded[0].graded and graded[0].gold == "Red"


@pytest.mark.parametrize("rows, fields, message", [
    ([{"q": "x"}], {}, "doc, record 0: no field 'question' (its fields: q); name yours with dataset.options"),
    ([{"question": {"text": "x"}}], {"question": "question.stem"}, "no field 'stem' in question (its fields: text)"),
    ([{"question": "x", "o": ["a", "b", "c", "d"], "g": "E"}], {"choices": "o", "answer": "g"},
     "answer 'E' is none of the 4 options (an index 0-3, a letter A-D, a label or an option's text)"),
    ([{"question": "x", "o": ["a", "b", "c", "d"], "g": 7}], {"choices": "o", "answer": "g"},
     "answer 7 is none of the 4 options"),
    ([{"question": "x", "o": ["a", "b", "c", "d", "e"], "g": "F"}], {"choices": "o", "answer": "g"},
     "answer 'F' is none of the 5 options (an index 0-4, a letter A-E"),
    ([{"question": "x", "o": ["a"]}], {"choices": "o"},
     "no question with 2-10 options in doc (1 with 1); give choices=null for open-ended questions"),
    ([{"question": "x", "o": "a|b|c|d"}], {"choices": "o"}, "o holds the text 'a|b|c|d', not a list of options; write "
     'them as a JSON list (["3", "4", "5", "6"]; in a CSV cell too), or each in a column of its own, named in order: '
     "dataset.options.choices=[A,B,C,D]"),
    ([{"question": "x", "o": 4}], {"choices": "o"}, "o holds int, not a list of options"),
    ([{"question": "x", "o": {"texts": []}}], {"choices": "o"}, "o is an object without a 'text' list"),
    ([{"question": "  "}], {}, "doc, record 0: the question (question) is empty"),
    (["a question"], {}, "doc, record 0 is a str, not an object with fields"),
])
def test_a_record_that_does_not_fit_names_the_record_and_the_fix(rows, fields, message):
    with pytest.raises(DatasetUnavailableError) as caught:
        items_from_records(rows, "doc", "mine", **fields)
    assert message in str(caught.value)


def test_settings_that_cannot_work_are_refused_before_any_reading(tmp_path):
    with pytest.raises(ConfigError, match="dataset=questions needs dataset.path"):
        load_questions()
    with pytest.raises(ConfigError, match="a file has no splits"):
        load_questions(path=str(FIXTURE), split="test")
    with pytest.raises(ConfigError, match="choose path or hub"):
        load_questions(source="sample", path=str(FIXTURE))
    with pytest.raises(ConfigError, match="graded must be true or false"):
        load_questions(path=str(FIXTURE), graded="yes")
    with pytest.raises(ConfigError, match="unknown dataset.options for questions: choice; it takes config, question"):
        load_items(DatasetSpec("arc", loader="questions", path=str(FIXTURE), options={"choice": "choices"}))
    with pytest.raises(DatasetUnavailableError, match="name the subject's field: dataset.options.subject=FIELD"):
        load_questions(path=str(FIXTURE), subjects=["biology"], choices="choices")


def test_the_command_line_names_results_by_the_file_and_sets_the_answer_length(tmp_path):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from posixlab.cli import CONF_DIR, to_config

    def config(*overrides):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return to_config(compose(config_name="config", overrides=["dataset=questions", *overrides]), str(tmp_path))

    mcq = config(f"dataset.path={FIXTURE}", "dataset.options.choices=choices")
    assert (mcq.dataset.name, mcq.dataset.loader, mcq.max_new_tokens) == ("questions_fixture", "questions", 5)
    hub = config("dataset.source=hub", "dataset.path=allenai/ai2_arc", "dataset.options.config=ARC-Challenge")
    assert (hub.dataset.name, hub.max_new_tokens) == ("ai2_arc-ARC-Challenge", 30)  # open-ended: Alpaca's 30
    named = config(f"dataset.path={FIXTURE}", "dataset.name=science", "max_new_tokens=8")
    assert (named.dataset.name, named.max_new_tokens) == ("science", 8)
    GlobalHydra.instance().clear()
    assert data_name(None) == "questions"


@pytest.mark.parametrize("variant", ["template", "format", "spelling"])
def test_the_same_questions_in_mmlu_s_layout_give_the_same_prompt_sets(tmp_path, variant, capsys):
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    def prompts(spec: DatasetSpec):
        built, _ = build_prompt_sets(PosixConfig(model=None, dataset=spec, variant=variant, num_sets=None,
                                                 num_variants=4, shots=0, embedding=None), progress=False)
        return [[p.text for p in s.prompts] for s in built], [s.item.answer for s in built]

    ours = prompts(DatasetSpec("science", loader="questions", source="path",
                               path=str(four_option_copy(tmp_path / "science.jsonl")), options=ARC))
    mmlu = prompts(DatasetSpec("mmlu", source="path", path=str(mmlu_copy(tmp_path / "mmlu.jsonl"))))
    assert ours == mmlu and len(ours[0]) == 5 and len(ours[0][0]) == 5
    assert ours[0][0][0].startswith("The following are multiple choice questions (with answers) about ")


@pytest.mark.slow  # two runs of the packaged model in subprocesses
def test_a_run_of_your_questions_equals_the_mmlu_loader_s_run_bit_for_bit(tmp_path):
    common = ["variant=template", "task.num_sets=2", "task.num_variants=4", "embedding=none", "logger=none",
              "report=false", "progress=false", "score_cache=false"]
    four = four_option_copy(tmp_path / "questions_fixture.jsonl")  # MMLU's loader reads 4 options only
    ours = ["dataset=questions", f"dataset.path={four}", "dataset.options.choices=choices",
            "dataset.options.answer=answerKey", "dataset.options.subject=topic"]
    mmlu = ["dataset=mmlu", "dataset.source=path", f"dataset.path={mmlu_copy(tmp_path / 'mmlu.jsonl')}"]
    records = []
    for name, overrides in (("ours", ours), ("mmlu", mmlu)):
        out = tmp_path / name
        proc = subprocess.run([sys.executable, str(ROOT / "run.py"), *overrides, *common, f"hydra.run.dir={out}"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records.append([json.loads(line) for line in (out / "sets.jsonl").read_text().splitlines()])
    import posixlab  # from Python: the same run, the same numbers

    fields = {"choices": "choices", "answer": "answerKey", "subject": "topic"}
    result = posixlab.evaluate_dataset(str(four), "template", fields=fields, num_sets=2, num_variants=4,
                                       embedding=None, score_cache=False, progress=False)
    for a, b in zip(result.records, records[0], strict=True):
        assert a["logprob_matrix"] == b["logprob_matrix"] and a["psi"] == b["psi"] and a["set_id"] == b["set_id"]
    summary = json.loads((tmp_path / "ours" / "summary.json").read_text())
    config = (tmp_path / "ours" / "config.yaml").read_text()
    assert summary["dataset"] == "questions_fixture" and "run_name: smollm2-135m-instruct_questions_fixture_" in config
    for a, b in zip(*records, strict=True):
        assert [p["text"] for p in a["prompts"]] == [p["text"] for p in b["prompts"]]
        assert a["logprob_matrix"] == b["logprob_matrix"] and a["psi"] == b["psi"] and a["answer"] == b["answer"]


HUB_QUESTIONS = """
import json, sys
from posixlab.data.questions import load_questions
items = load_questions(**json.loads(sys.argv[1]))
print(json.dumps([[i.item_id, i.question, list(i.options), i.answer, i.subject] for i in items]))
"""


EXEMPLARS_FROM_A_SPLIT = """
import json, sys
from posixlab.data import DatasetSpec
from posixlab.tasks.posix import PosixConfig, build_prompt_sets
fields = {"config": sys.argv[2], "choices": "choices", "answer": "answerKey", "subject": "topic", "id": "id"}
spec = DatasetSpec("arc", loader="questions", source="hub", path=sys.argv[1], options=fields, exemplar_split="train",
                   subjects=["biology", "physics"])
built, about = build_prompt_sets(PosixConfig(model=None, dataset=spec, variant="template", num_sets=None,
                                             num_variants=2, shots=1, embedding=None), progress=False)
print(json.dumps([{s.item.item_id: [e.item_id for e in s.shots] for s in built}, about["exemplar_pool"]]))
"""


@pytest.mark.slow  # the hub stand-in, datasets in subprocesses
def test_a_hub_data_set_gives_the_items_of_its_local_copy_and_is_read_from_the_cache_offline(healthy_hub, tmp_path):
    from hub_fixtures import ARC_CONFIG, ARC_ID, arc_train_rows, closed_port, hub_env

    def items(env: dict, **where):
        proc = subprocess.run([sys.executable, "-c", HUB_QUESTIONS, json.dumps({**where, **ARC})], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
        return proc.returncode, (json.loads(proc.stdout.splitlines()[-1]) if proc.returncode == 0 else proc.stderr)

    env = hub_env(tmp_path / "hf", healthy_hub.url)
    code, local = items(env, path=str(FIXTURE))
    code_hub, hub = items(env, source="hub", path=ARC_ID, config=ARC_CONFIG)
    assert code == code_hub == 0 and hub == local and len(hub) == 7, hub
    offline = hub_env(tmp_path / "hf", f"http://127.0.0.1:{closed_port()}", HF_HUB_OFFLINE="1")
    assert items(offline, source="hub", path=ARC_ID, config=ARC_CONFIG) == (0, hub)  # datasets' cache answers
    code, said = items(env, source="hub", path=ARC_ID, config="ARC-Easy")  # a configuration it does not have
    assert code == 1 and f"DatasetUnavailableError: dataset {ARC_ID} ({ARC_ID}, config ARC-Easy, split 'test') " \
                          "cannot be loaded" in said and "dataset.source=path dataset.path=FILE" in said, said[-2000:]
    # few-shot exemplars from the train split: the first of the question's subject, in the split's order
    proc = subprocess.run([sys.executable, "-c", EXEMPLARS_FROM_A_SPLIT, ARC_ID, ARC_CONFIG], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    exemplars, pool = json.loads(proc.stdout.splitlines()[-1])
    train = arc_train_rows(read_records(FIXTURE))
    first_of = {topic: next(f"train:{r['id']}" for r in train if r["topic"] == topic) for topic in ("biology",
                                                                                                   "physics")}
    by_topic = {r["id"]: r["topic"] for r in read_records(FIXTURE)}
    assert exemplars == {i: [first_of[by_topic[i]]] for i in exemplars} and len(exemplars) == 5, exemplars
    assert pool == f"the train split of {ARC_ID}: the first task.shots questions of the question's subject, in " \
                   f"split order"


@pytest.mark.parametrize("dataset, env", [("mmlu_sample", None), ("mmlu", None), ("alpaca", None), ("bbh", None),
                                          ("alpaca_selfinstruct", None), ("alpaca_selfinstruct", "seeds.jsonl")])
def test_evaluate_dataset_reads_a_named_data_set_as_the_command_line_composes_it(dataset, env, tmp_path,
                                                                                  monkeypatch):
    """``posixlab.evaluate_dataset``'s reading of ``posixlab/conf`` without Hydra equals Hydra's composition, for
    every variant type the data set allows: the data set, the variant type's options and the response length."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from posixlab.cli import CONF_DIR, to_config
    from posixlab.dataset_api import dataset_spec, named_datasets

    monkeypatch.delenv("POSIXLAB_SELFINSTRUCT", raising=False)  # its file: the variable's, or the default path
    if env:
        monkeypatch.setenv("POSIXLAB_SELFINSTRUCT", str(tmp_path / env))
    assert dataset in named_datasets()
    for variant in ("spelling", "template", "paraphrase", "mixture", "format"):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            composed = to_config(compose(config_name="config", overrides=[f"dataset={dataset}",
                                                                          f"variant={variant}"]), str(tmp_path))
        assert dataset_spec(dataset, variant) == (composed.dataset, composed.variant_options,
                                                  composed.max_new_tokens), (dataset, variant)
    GlobalHydra.instance().clear()


def test_evaluate_dataset_refuses_what_it_cannot_read_before_any_model_loads():
    import posixlab

    for dataset, message in (("mmlu_smaple", "did you mean mmlu_sample?"),
                             ("prompt_sets", "go to posixlab.evaluate(FILE_OR_LISTS)"),
                             ("trec", "a classification data set: posixlab.classify('trec', ...)"),
                             ("no_such.jsonl", "no file at no_such.jsonl")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            posixlab.evaluate_dataset(dataset, model="no-such-model")  # the data set is read first
    with pytest.raises(ConfigError, match="leave fields out"):
        posixlab.evaluate_dataset("mmlu_sample", fields={"question": "q"})
    with pytest.raises(DatasetUnavailableError, match="no field 'q'"):
        posixlab.evaluate_dataset(str(FIXTURE), fields={"question": "q"}, progress=False)  # before the model loads


@pytest.mark.parametrize("spec, shots, message", [
    (DatasetSpec("science", loader="questions", source="path", path=str(FIXTURE), options=ARC, exemplar_split="train"),
     1, "dataset.exemplar_split=train names a split of a hub data set; science is read from path (dataset.source), "
        "which has no splits: give the exemplars' file as dataset.exemplar_path=FILE"),
    (DatasetSpec("mmlu", exemplar_split="dev", exemplar_path="dev.jsonl"), 1,
     "few-shot exemplars come from one place: dataset.exemplar_path=dev.jsonl or dataset.exemplar_split=dev"),
    (DatasetSpec("prompt_sets", source="path", path="sets.jsonl", exemplar_split="train"), 0,
     "your prompt sets are used as given, so dataset.exemplar_split=train cannot add exemplars"),
])
def test_exemplars_from_a_split_need_a_hub_data_set_and_one_source_before_anything_loads(spec, shots, message):
    from posixlab.tasks.posix import USER_VARIANT, PosixConfig, build_prompt_sets

    variant = USER_VARIANT if spec.name == "prompt_sets" else "template"
    cfg = PosixConfig(model=None, dataset=spec, variant=variant, shots=shots, embedding=None)
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_prompt_sets(cfg, progress=False)  # nothing read: the files named do not exist


def test_two_option_questions_whose_answer_names_a_field_by_its_label_from_the_command_line(tmp_path):
    """Winogrande's layout: the options in two fields, the answer "1" or "2" naming them (not an index 0-1), read
    through the mapping ``{option1: 1, option2: 2}`` of fields to labels, as the command line writes it."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from posixlab.cli import CONF_DIR, to_config

    path = tmp_path / "wino.jsonl"
    rows = [{"sentence": "The trophy did not fit in the case because _ was too big.", "option1": "the trophy",
             "option2": "the case", "answer": "1"},
            {"sentence": "The trophy did not fit in the case because _ was too small.", "option1": "the trophy",
             "option2": "the case", "answer": "2"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = to_config(compose(config_name="config", overrides=[
            "dataset=questions", f"dataset.path={path}", "dataset.options.question=sentence",
            "dataset.options.choices={option1:1,option2:2}", "dataset.options.answer=answer"]), str(tmp_path))
    GlobalHydra.instance().clear()
    assert (cfg.dataset.name, cfg.max_new_tokens) == ("wino", 5)
    items = load_items(cfg.dataset)
    assert [(i.options, i.answer) for i in items] == [(("the trophy", "the case"), "A"), (("the trophy", "the case"),
                                                                                          "B")]
    from posixlab.prompts import render
    assert render(items[0]).endswith("_ was too big.\n(A)the trophy (B)the case\nA:")


def test_few_shot_open_ended_questions_without_answers_say_what_would_give_exemplars(tmp_path):
    """Exemplars show their gold answer after their question: open-ended questions without one cannot be exemplars,
    and "use fewer shots" would not help at any count; the error names the answer's field, an exemplar file and
    0-shot. Questions with answers but too few of them for k shots: the count, and no "subject None" where the data
    set has no subjects."""
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    path = tmp_path / "open.jsonl"
    path.write_text('{"instruction": "Write a haiku about rain.", "ref": "Rain on the roof"}\n'
                    '{"instruction": "List three prime numbers.", "ref": "2, 3, 5"}\n', encoding="utf-8")

    def build(shots: int, **options):
        spec = DatasetSpec("open", loader="questions", source="path", path=str(path),
                           options={"question": "instruction", **options})
        return build_prompt_sets(PosixConfig(model=None, dataset=spec, variant="template", shots=shots, num_sets=2,
                                             embedding=None), progress=False)

    with pytest.raises(ConfigError) as caught:
        build(1)
    assert str(caught.value).startswith("shots=1, but no exemplar from the other items of the same data set in open "
                                        "(path) has a gold answer to show after its question: name the answer's "
                                        "field (dataset.options.answer=FIELD), give exemplars with answers in a file "
                                        "of their own (dataset.exemplar_path=FILE), or run 0-shot")
    with pytest.raises(ConfigError) as caught:
        build(2, answer="ref")  # each question has one other to draw from
    assert str(caught.value) == ("shots=2, but only 1 exemplar(s) with a gold answer exist for open/0 in the other "
                                 "items of the same data set in open (path); use fewer shots")
    assert len(build(1, answer="ref")[0]) == 2
