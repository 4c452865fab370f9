"""DOVE interop (posixlab/interop/dove.py): a run exported as DOVE's records, valid under DOVE's schema and read back
to the run's own accuracy numbers; DOVE's records, nested or DOVE_Lite's flat rows, read into hand-computed grids."""

import json
import subprocess
import sys

import jsonschema
import pandas as pd
import pytest

from dove_schema import DOVE_RECORD
from posixlab.data.mmlu import TEST_SPLIT_SIZES, hub_index
from posixlab.errors import ConfigError
from posixlab.interop.dove import dove_grids, dove_summary, export_dove, read_dove, summary_table
from posixlab.metrics.accuracy import estimated_accuracy_per_prompt

OPTIONS = ["Paris", "Rome", "Oslo", "Bern"]
LABELS = {"capitals": "ABCD", "numbers": "1234"}


def dove_row(index: int, enumerator: str, picked: int, score: float, model: str = "m", shots: int = 0) -> dict:
    """A record as DOVE publishes them: dimensions without the schema's mc_ prefix, the answer as closest_answer."""
    labels = LABELS[enumerator]
    return {
        "evaluation_id": f"{index}-{enumerator}",
        "model": {"model_info": {"name": model}},
        "prompt_config": {"prompt_class": "MultipleChoice", "dimensions": {
            "instruction_phrasing": {"name": "Plain", "text": "Q: {question}\n{choices}\nA:"}, "shots": shots,
            "enumerator": enumerator, "separator": "\\s",
            "choices_order": {"method": "none", "description": "as given"}}},
        "instance": {"task_type": "classification", "raw_input": "...", "language": "en",
                     "sample_identifier": {"dataset_name": "mmlu.geography", "hf_repo": "cais/mmlu",
                                           "hf_split": "test", "hf_index": index},
                     "classification_fields": {"question": "Capital of France?",
                                               "choices": [{"id": l, "text": t} for l, t in zip(labels, OPTIONS)],
                                               "ground_truth": {"id": labels[0], "text": "Paris"}}},
        "output": {"response": "..."},
        "evaluation": {"evaluation_method": {"method_name": "content_similarity", "description": "...",
                                             "closest_answer": f"{labels[picked]}. {OPTIONS[picked]}"},
                       "ground_truth": f"{labels[0]}. Paris", "score": score},
    }


def lite_row(index: int, enumerator: str, picked: int, score: float) -> dict:
    """The same record as a DOVE_Lite row (its hub files' flat columns)."""
    return {"evaluation_id": f"{index}-{enumerator}", "dataset": "mmlu.geography", "sample_index": index, "model": "m",
            "quantization": "float16", "dimensions_1: enumerator": enumerator, "dimensions_2: separator": "\\s",
            "dimensions_3: choices_order": "none", "dimensions_4: instruction_phrasing_text": "Q: {question}",
            "dimensions_5: shots": 0, "raw_input": "...", "generated_text": "...", "cumulative_logprob": -1.0,
            "closest_answer": f"{LABELS[enumerator][picked]}. {OPTIONS[picked]}",
            "ground_truth": f"{LABELS[enumerator][0]}. Paris", "score": score}


# question 1 is answered Paris (right) under both enumerators: the same option under labels A and 1; question 2 is
# answered Rome (B) under capitals and Oslo (3) under numbers, both wrong
CELLS = [(1, "capitals", 0, 1.0), (1, "numbers", 0, 1.0), (2, "capitals", 1, 0.0), (2, "numbers", 2, 0.0)]


def test_hub_index_is_the_place_doves_own_rows_give():
    # DOVE's published MMLU rows: logical_fallacies question 0 ("A valid disjunctive syllogism ...") is hf_index 6672,
    # sociology question 0 ("Mass-society theory suggests that:") 13404
    assert hub_index("mmlu/logical_fallacies/0") == ("logical_fallacies", 6672)
    assert hub_index("mmlu/sociology/0") == ("sociology", 13404)
    assert sum(TEST_SPLIT_SIZES.values()) == 14042 and list(TEST_SPLIT_SIZES) == sorted(TEST_SPLIT_SIZES)


def test_doves_records_read_into_a_hand_computed_grid():
    grids = dove_grids([dove_row(*cell) for cell in CELLS])
    grid = grids["m", 0]
    assert grid["items"] == [("mmlu.geography", "test", 1), ("mmlu.geography", "test", 2)]
    assert grid["correct"] == [[1.0, 1.0], [0.0, 0.0]]
    assert grid["preds"] == [["Paris", "Paris"], ["Rome", "Oslo"]]  # by option text, whatever the label
    (s,) = dove_summary([dove_row(*cell) for cell in CELLS])
    assert (s["items"], s["prompts"], s["cells"]) == (2, 2, 4)
    assert s["per_prompt"] == [0.5, 0.5] and s["accuracy"] == 0.5
    assert s["worst_case"] == 0.5 and s["best_case"] == 0.5  # question 1 right under every prompt, 2 under none
    assert s["consistency_rate"] == 0.5  # question 1's one pair agrees, question 2's does not
    assert s["pss"] == 0.0  # each question is right under both prompts or under neither


def test_dove_lite_rows_read_as_the_nested_records_do(tmp_path):
    nested = dove_summary([dove_row(*cell) for cell in CELLS])
    lite = [lite_row(*cell) for cell in CELLS]
    pd.DataFrame(lite).to_parquet(tmp_path / "mmlu.geography.parquet")
    from_parquet = dove_summary(read_dove(tmp_path / "mmlu.geography.parquet"))
    assert from_parquet == nested
    (tmp_path / "rows.json").write_text(json.dumps([dove_row(*cell) for cell in CELLS]))
    with open(tmp_path / "rows.jsonl", "w") as handle:
        handle.writelines(json.dumps(dove_row(*cell)) + "\n" for cell in CELLS)
    assert read_dove(tmp_path / "rows.json") == read_dove(tmp_path / "rows.jsonl")


def test_models_and_shot_counts_are_separate_grids_and_missing_cells_stay_missing():
    rows = [dove_row(*cell) for cell in CELLS] + [dove_row(1, "capitals", 0, 1.0, shots=5),
                                                  dove_row(3, "numbers", 1, 0.0, model="other")]
    grids = dove_grids(rows)
    assert set(grids) == {("m", 0), ("m", 5), ("other", 0)}
    by_enumerator = dove_grids([dove_row(*c) for c in CELLS[:3]], by=("enumerator",))["m", 0]
    assert by_enumerator["correct"] == [[1.0, 1.0], [0.0, None]]  # question 2 never asked with numbers


def test_a_sampled_grid_adds_each_prompts_accuracy_over_every_question(tmp_path, root):
    """Both enumerators right on question 1 and wrong on 2; capitals alone asked 3 (wrong), numbers alone 4 (right):
    observed 1/3 and 2/3, but the questions explain the gap (PromptEval's estimate, 0.476 and 0.524)."""
    cells = [(1, "capitals", 0, 1.0), (1, "numbers", 0, 1.0), (2, "capitals", 1, 0.0), (2, "numbers", 1, 0.0),
             (3, "capitals", 1, 0.0), (4, "numbers", 0, 1.0)]
    (summary,) = dove_summary([lite_row(*c) for c in cells])
    assert summary["cells"] == 6 and summary["per_prompt"] == pytest.approx([1 / 3, 2 / 3])
    grid = [[1, 1], [0, 0], [0, None], [None, 1]]
    assert summary["estimated"]["per_prompt"] == estimated_accuracy_per_prompt(grid).tolist()
    assert [round(a, 3) for a in summary["estimated"]["per_prompt"]] == [0.476, 0.524]
    assert "| 0.500 | 0.333 to 0.667 | 0.500: 0.476 to 0.524 |" in summary_table([summary])
    full = dove_summary([lite_row(*c) for c in cells[:4]])[0]
    assert full["estimated"] is None and "| as observed |" in summary_table([full])


def test_shared_keeps_the_questions_every_grid_has():
    rows = [dove_row(*cell) for cell in CELLS] + [dove_row(2, "capitals", 0, 1.0, model="other"),
                                                  dove_row(3, "capitals", 0, 1.0, model="other")]
    alone = {s["model"]: s for s in dove_summary(rows)}
    assert (alone["m"]["items"], alone["other"]["items"], alone["other"]["accuracy"]) == (2, 2, 1.0)
    shared = {s["model"]: s for s in dove_summary(rows, shared=True)}  # question 2 alone is in both
    assert (shared["m"]["items"], shared["m"]["prompts"], shared["m"]["accuracy"]) == (1, 2, 0.0)
    assert (shared["other"]["items"], shared["other"]["accuracy"]) == (1, 1.0)
    with pytest.raises(ConfigError, match="share no question"):
        dove_summary([dove_row(1, "capitals", 0, 1.0), dove_row(3, "capitals", 0, 1.0, model="other")], shared=True)


def test_bad_input_is_refused_saying_what_to_do(tmp_path):
    rows = [dove_row(*cell) for cell in CELLS]
    with pytest.raises(ConfigError, match="asked twice.*by= adding one of instruction_phrasing, enumerator"):
        dove_grids(rows, by=("separator",))
    with pytest.raises(ConfigError, match="by=colour: name one or more of instruction_phrasing"):
        dove_grids(rows, by=("colour",))
    with pytest.raises(ConfigError, match="record 0 is neither a DOVE evaluation record nor a DOVE_Lite row"):
        dove_grids([{"question": "x"}])
    rouge = dove_row(1, "capitals", 0, 0.5)
    with pytest.raises(ConfigError, match="scores 0.5: only correctness"):
        dove_grids([rouge])
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\nnot json\n')
    with pytest.raises(ConfigError, match="bad.jsonl, line 2: not JSON"):
        read_dove(tmp_path / "bad.jsonl")
    with pytest.raises(ConfigError, match="no such file"):
        read_dove(tmp_path / "missing.parquet")
    (tmp_path / "quiz.csv").write_text("question,answer\n")
    with pytest.raises(ConfigError, match=r"quiz.csv: DOVE's records are a .json, .jsonl or .parquet file"):
        read_dove(tmp_path / "quiz.csv")


def test_the_command_prints_the_table(tmp_path, root):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(dove_row(*cell)) + "\n" for cell in CELLS))
    done = subprocess.run([sys.executable, "-m", "posixlab", "dove", "summary", str(path)], capture_output=True,
                          text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "| m | 0 | 2 | 2 | 100% | 0.500 | 0.500 to 0.500 | as observed | 2 of 2 | 0.500 |" in done.stdout
    done = subprocess.run([sys.executable, "-m", "posixlab", "dove", "summary", str(path), "--dimensions"],
                          capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    # question 1 is right under both enumerators and question 2 under neither: no value of either dimension differs
    assert "| m | 0 | enumerator (0.000) | capitals | 2 | 0.500 |" in done.stdout
    assert "| m | 0 | separator (0.000) | \\s | 4 | 0.500 |" in done.stdout
    done = subprocess.run([sys.executable, "-m", "posixlab", "dove", "summary", str(path), "--by", "shots"],
                          capture_output=True, text=True, cwd=root)
    assert done.returncode == 2 and "asked twice" in done.stderr


# --- a real run exported (the session's small sweep: the packaged model on MMLU) -------------------------------------
MMLU_CELLS = ["0_mmlu_spelling_0shot", "1_mmlu_template_0shot", "2_mmlu_paraphrase_0shot", "3_mmlu_mixture_0shot",
              "4_mmlu_format_0shot", "5_mmlu_spelling_1shot"]


@pytest.mark.parametrize("cell", MMLU_CELLS)
def test_an_exported_run_is_valid_dove_and_reads_back_to_its_own_accuracy(small_results, tmp_path, cell):
    from posixlab.data import DatasetSpec, load_items
    from posixlab.results import read_sets

    folder = small_results / cell
    out, count = export_dove(folder, tmp_path / "dove.jsonl")
    records = read_sets(folder)
    assert count == sum(len(r["prompts"]) for r in records)
    rows = read_dove(out)
    for row in rows:
        jsonschema.validate(row, DOVE_RECORD)
    summary = json.loads((folder / "summary.json").read_text())
    assert {row["model"]["configuration"]["context_window"] for row in rows} == {8192}  # SmolLM2's config
    assert {row["prompt_config"]["dimensions"]["shots"] for row in rows} == {summary["shots"]}

    # every prompt's options as it shows them, and the gold's label there (hand-read from the prompt's record)
    items = {i.item_id: i for i in load_items(DatasetSpec("mmlu"))}
    for row, (record, j) in zip(rows, [(r, j) for r in records for j in range(len(r["prompts"]))]):
        prompt, item = record["prompts"][j], items[record["item_id"]]
        fields = row["instance"]["classification_fields"]
        order = prompt["record"].get("option_order", [0, 1, 2, 3])
        labels = prompt["record"].get("option_labels", list("ABCD"))
        assert fields["choices"] == [{"id": label, "text": item.options[k]} for label, k in zip(labels, order)]
        gold = order.index("ABCD".index(record["answer"]))
        assert fields["ground_truth"] == {"id": labels[gold], "text": item.options[order[gold]]}
        assert row["instance"]["sample_identifier"]["hf_index"] == hub_index(record["item_id"])[1]
        assert row["instance"]["raw_input"] == prompt["text"]
        assert row["output"]["response"] == record["responses"][j]["text"]
        assert row["evaluation"]["score"] == float(record["answers"][j]["by_greedy"]["correct"])

    if cell.startswith("3_"):  # a mixture's j-th prompt is not one prompt across its sets
        return
    (read,) = dove_summary(rows, by=("instruction_phrasing",))
    own = {k: v for k, v in summary["accuracy"]["by_greedy"].items() if k != "parse_rate"}
    assert {k: read[k] for k in own} == own  # the run's own grid, read back from the file
    (tmp_path / "exports").mkdir()  # a folder as out: the file in it, and no .part left anywhere
    assert export_dove(folder, tmp_path / "exports") == (tmp_path / "exports" / "dove.jsonl", count)
    assert export_dove(folder, str(tmp_path / "new") + "/")[0] == tmp_path / "new" / "dove.jsonl"
    assert not list(tmp_path.rglob("*.part"))
    _, _ = export_dove(folder, tmp_path / "options.jsonl", score="options", context_window=2048)
    (read,) = dove_summary(read_dove(tmp_path / "options.jsonl"), by=("instruction_phrasing",))
    assert {k: read[k] for k in summary["accuracy"]["by_options"]} == summary["accuracy"]["by_options"]


def test_only_graded_mmlu_runs_are_exported(small_results, tmp_path):
    with pytest.raises(ConfigError, match="only MMLU runs are exported"):
        export_dove(small_results / "6_alpaca_template_0shot", tmp_path / "x.jsonl")
    with pytest.raises(ConfigError, match="holds no sets.jsonl"):
        export_dove(tmp_path, tmp_path / "x.jsonl")
    with pytest.raises(ConfigError, match="score='best'"):
        export_dove(small_results / "4_mmlu_format_0shot", tmp_path / "x.jsonl", score="best")
    assert not (tmp_path / "x.jsonl").exists()
    # a reading missing from the last set: found after other sets' lines were written, and no file is left
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(small_results / "4_mmlu_format_0shot", copy)
    lines = (copy / "sets.jsonl").read_text().splitlines()
    last = max(range(len(lines)), key=lambda n: json.loads(lines[n])["set_index"])
    record = json.loads(lines[last])
    record["answers"][-1]["by_options"] = None
    lines[last] = json.dumps(record)
    (copy / "sets.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="prompt 3 has no options reading: export with --score greedy"):
        export_dove(copy, tmp_path / "x.jsonl", score="options")
    assert not list(tmp_path.glob("x.jsonl*"))
    summary = json.loads((copy / "summary.json").read_text())
    summary["config"]["dataset"]["split"] = "validation"
    (copy / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match="MMLU's 'validation' split: DOVE's MMLU records are the test split's"):
        export_dove(copy, tmp_path / "x.jsonl")
