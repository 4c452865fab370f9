"""The bundled MMLU sample and the local-file loaders."""

import json

import pytest

from posixlab.data import DatasetSpec, load_items, select_items
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


def test_selection_is_seeded():
    items = load_mmlu("sample")
    assert [i.item_id for i in select_items(items, 20, 0)] == [i.item_id for i in select_items(items, 20, 0)]
    assert [i.item_id for i in select_items(items, 20, 0)] != [i.item_id for i in select_items(items, 20, 1)]
    assert len(select_items(items, None, 0)) == 285
    with pytest.raises(ConfigError):
        select_items(items, 0, 0)


@pytest.mark.parametrize("suffix", ["jsonl", "json", "csv"])
def test_local_files_in_the_hub_layout(tmp_path, suffix):
    rows = [{"question": "2+2?", "subject": "elementary_mathematics", "A": "3", "B": "4", "C": "5", "D": "6", "answer": 1},
            {"question": "Sky colour?", "subject": "misc", "A": "red", "B": "blue", "C": "green", "D": "grey", "answer": "B"}]
    path = tmp_path / f"mmlu.{suffix}"
    if suffix == "jsonl":
        path.write_text("\n".join(json.dumps({**r, "choices": [r["A"], r["B"], r["C"], r["D"]]}) for r in rows))
    elif suffix == "json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("question,subject,A,B,C,D,answer\n" + "\n".join(
            ",".join(str(r[k]) for k in ("question", "subject", "A", "B", "C", "D", "answer")) for r in rows))
    items = load_items(DatasetSpec("mmlu", source="path", path=str(path)))
    assert [(i.subject, i.options[1], i.answer) for i in items] == [("elementary mathematics", "4", "B"), ("misc", "blue", "B")]
    assert items[0].item_id == "mmlu/elementary_mathematics/0"


def test_bad_local_files_and_names(tmp_path):
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
    with pytest.raises(ConfigError, match="unknown dataset 'mmlu2'"):
        load_items(DatasetSpec("mmlu2"))
