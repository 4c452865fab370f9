"""The bundled MMLU sample, the local-file loaders of MMLU, Alpaca and BBH, and their hub errors."""

import csv
import json
import re
import time
from pathlib import Path

import pytest

from posixlab.data import BBH_TASKS, DatasetSpec, load_items, select_items
from posixlab.data.mmlu import SAMPLE_PATH, load_mmlu
from posixlab.errors import ConfigError, DatasetUnavailableError


def test_bundled_sample_is_stratified_over_the_57_subjects():
    items = load_mmlu("sample")
    assert len(items) == 285
    subjects = {it.subject for it in items}
    assert len(subjects) == 57 and all(sum(it.subject == s for it in items) == 5 for s in subjects)
    assert all(len(it.options) == 4 and it.answer in "ABCD" for it in items)
    assert len({it.item_id for it in items}) == 285
    provenance = json.loads(SAMPLE_PATH.with_name("mmlu_sample.provenance.json").read_text())
    assert "MIT" in provenance["licence"] and provenance["questions"] == 285


def test_subjects_match_as_written_with_underscores_or_any_case_and_a_typo_among_them_is_an_error_not_a_drop():
    kept = load_mmlu("sample", subjects=["High_School_Physics", "astronomy"])
    assert sorted({it.subject for it in kept}) == ["astronomy", "high school physics"] and len(kept) == 10
    with pytest.raises(DatasetUnavailableError) as error:  # before, the run went on with astronomy's 5 alone
        load_mmlu("sample", subjects=["astronomy", "high_school_physcis"])
    message = str(error.value)
    assert "'high school physcis', which no MMLU question has (did you mean 'high school physics'?)" in message
    assert "the data's 57 subjects: abstract algebra, anatomy," in message and message.endswith(", ...")


def test_selection_is_seeded():
    items = load_mmlu("sample")
    assert [i.item_id for i in select_items(items, 20, 0)] == [i.item_id for i in select_items(items, 20, 0)]
    assert [i.item_id for i in select_items(items, 20, 0)] != [i.item_id for i in select_items(items, 20, 1)]
    assert len(select_items(items, None, 0)) == 285
    with pytest.raises(ConfigError):
        select_items(items, 0, 0)


@pytest.mark.parametrize("suffix", ["jsonl", "json", "csv", "parquet"])
def test_local_files_in_the_hub_layout(tmp_path, suffix):
    rows = [{"question": "2+2?", "subject": "elementary_mathematics", "A": "3", "B": "4", "C": "5", "D": "6", "answer": 1},
            {"question": "Sky colour?", "subject": "misc", "A": "red", "B": "blue", "C": "green", "D": "grey", "answer": "B"}]
    path = tmp_path / f"mmlu.{suffix}"
    if suffix == "jsonl":
        path.write_text("\n".join(json.dumps({**r, "choices": [r["A"], r["B"], r["C"], r["D"]]}) for r in rows))
    elif suffix == "json":
        path.write_text(json.dumps(rows))
    elif suffix == "parquet":  # the hub's own file, copied: choices a list column, answer an integer (ClassLabel)
        import pyarrow
        import pyarrow.parquet

        pyarrow.parquet.write_table(pyarrow.Table.from_pylist(
            [{"question": r["question"], "subject": r["subject"], "choices": [r["A"], r["B"], r["C"], r["D"]],
              "answer": 1} for r in rows]), path)
    else:
        path.write_text("question,subject,A,B,C,D,answer\n" + "\n".join(
            ",".join(str(r[k]) for k in ("question", "subject", "A", "B", "C", "D", "answer")) for r in rows))
    items = load_items(DatasetSpec("mmlu", source="path", path=str(path)))
    assert [(i.subject, i.options[1], i.answer) for i in items] == [("elementary mathematics", "4", "B"), ("misc", "blue", "B")]
    assert items[0].item_id == "mmlu/elementary_mathematics/0"


def test_bad_local_files_and_names(tmp_path, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "choices": ["a", "b"]}\n')
    with pytest.raises(DatasetUnavailableError, match="4 options"):
        load_mmlu("path", str(bad))
    text = tmp_path / "bad.txt"
    text.write_text("question")
    with pytest.raises(DatasetUnavailableError, match="unsupported file type"):
        load_mmlu("path", str(text))
    with pytest.raises(DatasetUnavailableError, match="no file at"):
        load_mmlu("path", str(tmp_path / "missing.csv"))
    torn = tmp_path / "torn.parquet"  # a download cut short: one line, not pyarrow's traceback
    torn.write_bytes(b"PAR1\x00\x01")
    with pytest.raises(DatasetUnavailableError, match=r"torn.parquet could not be read as Parquet: "):
        load_mmlu("path", str(torn))
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")  # a relative path is read from the folder the command ran in: said so
    said = f"no file at ../missing.csv (from {tmp_path / 'run'}: {tmp_path / 'missing.csv'})"
    with pytest.raises(DatasetUnavailableError, match=re.escape(said)):
        load_mmlu("path", "../missing.csv")
    with pytest.raises(DatasetUnavailableError, match=re.escape(  # a hub id as a file: the setting that reads it
            "dataset.path; a data set on the Hugging Face Hub: dataset.source=hub dataset.path=cais/mmlu")):
        load_mmlu("path", "cais/mmlu")
    with pytest.raises(DatasetUnavailableError, match=r"as dataset.path$"):  # a file's name: no hub hint
        load_mmlu("path", "data/mmlu.csv")
    with pytest.raises(ConfigError, match="unknown dataset 'mmlu2'"):
        load_items(DatasetSpec("mmlu2"))


# ---- Alpaca and BBH: hand-written fixtures in the hub layouts (tests/fixtures), never the real data sets ----

FIXTURES = Path(__file__).with_name("fixtures")
ALPACA = FIXTURES / "alpaca_fixture.jsonl"
BBH = FIXTURES / "bbh_fixture.jsonl"


def _alpaca(path, **options):
    return load_items(DatasetSpec("alpaca", source="path", path=str(path), options=options))


def _bbh(path, subjects=None):
    return load_items(DatasetSpec("bbh", source="path", path=str(path), subjects=subjects))


def test_alpaca_keeps_instructions_without_input_by_default():
    items = _alpaca(ALPACA)
    assert [i.item_id for i in items] == ["alpaca/0", "alpaca/2", "alpaca/4", "alpaca/5", "alpaca/7"]  # source rows
    assert items[1].question == "Name the largest planet in the solar system."  # stripped
    assert items[1].answer == "Jupiter." and items[1].options == () and items[1].subject is None
    assert items[1].meta == {"source": str(ALPACA), "input": ""}


def test_alpaca_include_inputs_appends_the_input_after_a_blank_line():
    items = _alpaca(ALPACA, include_inputs=True)
    assert len(items) == 8 and items[1].item_id == "alpaca/1"
    assert items[1].question == "Translate the sentence into French.\n\nThe library opens at nine."
    assert items[1].meta["input"] == "The library opens at nine."
    assert [i.question for i in items if not i.meta["input"]] == [i.question for i in _alpaca(ALPACA)]
    with pytest.raises(ConfigError, match="include_inputs must be true or false"):
        _alpaca(ALPACA, include_inputs="false")
    with pytest.raises(ConfigError, match="unknown dataset.options for alpaca: include_input; it takes include_inputs"):
        _alpaca(ALPACA, include_input=True)


@pytest.mark.parametrize("suffix", ["json", "wrapped.json", "csv"])
def test_alpaca_json_and_csv_files(tmp_path, suffix):
    rows = [json.loads(line) for line in ALPACA.read_text().splitlines()]
    path = tmp_path / f"alpaca.{suffix}"
    if suffix == "json":
        path.write_text(json.dumps(rows))
    elif suffix == "wrapped.json":
        path.write_text(json.dumps({"data": rows}))
    else:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["instruction", "input", "output"])
            writer.writeheader()
            writer.writerows(rows)
    assert _alpaca(path) == _alpaca(ALPACA)
    assert [i.answer for i in _alpaca(path)] == [i.answer for i in _alpaca(ALPACA)]


def test_alpaca_reads_the_self_instruct_seed_task_layout(tmp_path):
    path = tmp_path / "seed_tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "t0", "instruction": "List two uses of a paperclip.", "is_classification": False,
         "instances": [{"input": "", "output": "Holding paper; resetting a router."}]},
        {"id": "t1", "instruction": "Is the review positive?", "is_classification": True,
         "instances": [{"input": "Loved every minute.", "output": "Yes"}, {"input": "Dull.", "output": "No"}]},
    ]))
    assert [(i.item_id, i.question, i.answer) for i in _alpaca(path)] == [
        ("alpaca/0", "List two uses of a paperclip.", "Holding paper; resetting a router.")]
    # the output is a reference for few-shot exemplars, not a gold answer: no response is graded against it
    assert [(i.graded, i.gold) for i in _alpaca(path)] == [(False, None)]
    assert _alpaca(path, include_inputs=True)[1].question == "Is the review positive?\n\nLoved every minute."


def test_alpaca_errors_say_what_to_do(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "Say hi.", "input": "", "output": "hi"}\n{"prompt": "Say bye.", "output": "bye"}\n')
    with pytest.raises(DatasetUnavailableError, match=r"record 1: no 'instruction' field \(fields: prompt, output\)"):
        _alpaca(bad)
    all_inputs = tmp_path / "inputs.jsonl"
    all_inputs.write_text('{"instruction": "Reverse it.", "input": "abc", "output": "cba"}\n')
    with pytest.raises(DatasetUnavailableError, match=r"1 of 1 rows have a non-empty input.*include_inputs=true"):
        _alpaca(all_inputs)
    with pytest.raises(ConfigError, match="no subjects"):
        load_items(DatasetSpec("alpaca", source="path", path=str(ALPACA), subjects=["x"]))
    with pytest.raises(DatasetUnavailableError, match="no bundled sample"):
        load_items(DatasetSpec("alpaca"))  # DatasetSpec's default source, "sample", is MMLU's
    missing = tmp_path / "nowhere" / "selfinstruct_seed_tasks.jsonl"  # dataset=alpaca_selfinstruct, no file here
    with pytest.raises(DatasetUnavailableError, match="which posixlab does not ship; point POSIXLAB_SELFINSTRUCT"):
        load_items(DatasetSpec("alpaca", source="path", path=str(missing)))


def test_bbh_file_with_a_task_column_and_task_filter():
    items = _bbh(BBH)
    ids = [i.item_id for i in items]
    assert ids[:3] == ["bbh/boolean_expressions/0", "bbh/boolean_expressions/1", "bbh/navigate/0"]
    assert all(i.options == () and i.subject in BBH_TASKS for i in items) and len(items) == 6
    assert items[2].question.endswith("Options:\n- Yes\n- No") and items[2].answer == "Yes"
    kept = _bbh(BBH, subjects=["word sorting", "navigate"])
    assert [i.item_id for i in kept] == ["bbh/navigate/0", "bbh/navigate/1", "bbh/word_sorting/0", "bbh/word_sorting/1"]
    with pytest.raises(ConfigError, match="unknown BBH task.*navigation.*valid tasks: boolean_expressions"):
        _bbh(BBH, subjects=["navigation"])
    with pytest.raises(DatasetUnavailableError, match="no BBH example of task.*snarks.*it holds boolean_expressions"):
        _bbh(BBH, subjects=["snarks"])


def test_bbh_original_repository_layout(tmp_path):
    rows = [json.loads(line) for line in BBH.read_text().splitlines()]
    folder = tmp_path / "bbh"
    folder.mkdir()
    for task in ("boolean_expressions", "navigate", "word_sorting"):
        examples = [{"input": r["input"], "target": r["target"]} for r in rows if r["task"] == task]
        (folder / f"{task}.json").write_text(json.dumps({"canary": "x", "examples": examples}))
    assert _bbh(folder) == _bbh(BBH)
    assert [i.answer for i in _bbh(folder)] == [i.answer for i in _bbh(BBH)]
    assert [i.item_id for i in _bbh(folder / "navigate.json")] == ["bbh/navigate/0", "bbh/navigate/1"]
    csv_path = tmp_path / "bbh.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["subject", "input", "target"])  # "subject" stands in for "task"
        writer.writeheader()
        writer.writerows({"subject": r["task"], "input": r["input"], "target": r["target"]} for r in rows)
    assert _bbh(csv_path) == _bbh(BBH)


def test_bbh_errors_say_what_to_do(tmp_path):
    untitled = tmp_path / "examples.json"
    untitled.write_text(json.dumps({"examples": [{"input": "True and False is", "target": "False"}]}))
    with pytest.raises(DatasetUnavailableError, match="record 0: no 'task' field; add a task column"):
        _bbh(untitled)
    no_input = tmp_path / "navigate.json"
    no_input.write_text(json.dumps({"examples": [{"question": "Go?", "target": "No"}]}))
    with pytest.raises(DatasetUnavailableError, match=r"no 'input' field \(fields: question, target\)"):
        _bbh(no_input)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetUnavailableError, match="holds no .json, .jsonl, .csv or .parquet file"):
        _bbh(tmp_path / "empty")
    with pytest.raises(DatasetUnavailableError, match="no file or folder at"):
        _bbh(tmp_path / "missing")
    assert len(BBH_TASKS) == len(set(BBH_TASKS)) == 27


@pytest.mark.parametrize("name, label", [("alpaca", "Alpaca (tatsu-lab/alpaca)"), ("bbh", "BBH (lukaemon/bbh)")])
def test_unreachable_hub_fails_fast_and_names_the_local_way(monkeypatch, name, label):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port: refused at once
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError) as err:
        load_items(DatasetSpec(name, source="hub"))
    assert time.monotonic() - start < 15
    message = str(err.value)
    assert f"dataset {label} cannot be fetched" in message and "dataset.source=path dataset.path=" in message


@pytest.mark.parametrize("name", ["alpaca", "bbh"])
def test_hub_offline_flag_turns_a_datasets_failure_into_the_same_message(monkeypatch, name):
    import datasets

    def fail(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hub (OfflineModeIsEnabled)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets, "load_dataset", fail)  # as datasets fails with no cached copy
    with pytest.raises(DatasetUnavailableError, match="HF_HUB_OFFLINE is set and it is not in the local cache") as err:
        load_items(DatasetSpec(name, source="hub", subjects=["navigate"] if name == "bbh" else None))
    assert "dataset.source=path dataset.path=" in str(err.value)


def test_exemplars_come_from_every_item_even_those_a_length_limit_leaves_out():
    # formal logic has one question of at most 130 characters in the sample: its exemplar is a longer question
    from posixlab.models import ModelSpec
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    spec = DatasetSpec("mmlu", subjects=["formal_logic"], max_question_chars=130)
    assert len(load_items(spec)) == 1
    cfg = PosixConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"), dataset=spec,
                    num_sets=None, num_variants=2, shots=1, embedding=None)
    (prompt_set,), about = build_prompt_sets(cfg, progress=False)
    (exemplar,) = prompt_set.shots
    assert len(exemplar.question) > 130 and exemplar.item_id != prompt_set.item.item_id


def test_more_sets_asked_than_items_is_said(capsys):
    from posixlab.models import ModelSpec
    from posixlab.tasks.posix import PosixConfig, build_prompt_sets

    spec = DatasetSpec("mmlu", subjects=["formal_logic"], max_question_chars=130)  # one item
    cfg = PosixConfig(model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"), dataset=spec,
                      num_sets=20, num_variants=2, embedding=None)
    assert len(build_prompt_sets(cfg, progress=False)[0]) == 1
    assert "num_sets=20 asks for more sets than mmlu has items of the length limit: 1 set," in capsys.readouterr().err


def test_a_dataset_setting_of_the_wrong_kind_is_named_and_one_name_is_a_list_of_one():
    """dataset.subjects=astronomy was read letter by letter ("names 'a', 'm', 'n', ... which no MMLU question has");
    dataset.max_question_chars=abc was a TypeError's traceback."""
    assert DatasetSpec("mmlu", subjects="astronomy").subjects == ["astronomy"]
    assert DatasetSpec("mmlu", exclude_items="mmlu/x").exclude_items == ["mmlu/x"]
    assert {i.subject for i in load_items(DatasetSpec("mmlu", subjects="astronomy"))} == {"astronomy"}
    for kwargs, said in (({"max_question_chars": "abc"}, "dataset.max_question_chars takes a whole number or null"),
                         ({"max_question_chars": 0}, "dataset.max_question_chars must be at least 1"),
                         ({"subjects": 3}, "dataset.subjects takes a list of names ([a,b]) or null, not 3"),
                         ({"split": 5}, "dataset.split takes a string or null, not 5")):
        with pytest.raises(ConfigError, match=re.escape(said)):
            DatasetSpec("mmlu", **kwargs)

