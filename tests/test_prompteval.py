"""PromptEval's published MMLU correctness (posixlab/interop/prompteval.py) read into posixlab's accuracy metrics:
files in the hub's layout, written here, give hand-computed grids, keyed by the question as DOVE keys it."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from posixlab.data.mmlu import TEST_SPLIT_SIZES
from posixlab.errors import ConfigError
from posixlab.interop.dove import dove_summary, read_dove, summary_table
from posixlab.interop.prompteval import read_prompteval


def write(folder, subject: str, model: str, cells) -> str:
    """A PromptEval file as the hub keeps it: a row per template, a column example_<j> per question."""
    cells = np.asarray(cells)
    path = folder / subject / f"{model}-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(cells, columns=[f"example_{j}" for j in range(cells.shape[1])]).to_parquet(path)
    return str(path)


def three_templates(n: int) -> np.ndarray:
    """Template 0 right on every question, template 1 on the even ones, template 2 on none."""
    return np.array([[True] * n, [j % 2 == 0 for j in range(n)], [False] * n])


def test_a_file_reads_into_a_hand_computed_grid(tmp_path):
    path = write(tmp_path, "abstract_algebra", "meta_llama_llama_3_8b", three_templates(100))
    (summary,) = dove_summary(read_dove([path]))
    assert (summary["model"], summary["shots"], summary["items"], summary["prompts"], summary["cells"]) == \
        ("meta_llama_llama_3_8b", 0, 100, 3, 300)
    assert summary["per_prompt"] == [1.0, 0.5, 0.0]
    assert summary["accuracy"] == 0.5 and summary["spread"]["min"] == 0.0 and summary["spread"]["max"] == 1.0
    assert summary["worst_case"] == 0.0 and summary["best_case"] == 1.0  # template 2 gets none; template 0 all
    assert summary["cps"] == pytest.approx(1.0 * (1 - (1.0 - 0.5)))   # MaxP · (1 − (MaxP − AvgP))
    assert summary["pss"] == pytest.approx(2 / 3)  # every question: right under 1 or 2 of 3 → 2 differing pairs of 3
    assert summary["consistency_rate"] is None  # the files say whether a model was right, not what it answered
    # templates are shared by every question: 0 is ahead of 1 on 50 questions and of 2 on 100, none back
    assert summary["best_prompts"]["prompts"] == [0] and summary["best_prompts"]["beaten_by"] == [None, 0, 0]
    assert "| 1 of 3 |" in summary_table([summary])


def test_questions_are_keyed_as_doves_and_join_a_run_on_them(tmp_path):
    """example_j is question j of the subject's test split, at its place in the hub's all split (logical_fallacies
    starts at 6672); --shared keeps the questions a DOVE row (or an export) also has."""
    n = TEST_SPLIT_SIZES["logical_fallacies"]
    path = write(tmp_path, "logical_fallacies", "google_gemma_7b_it", three_templates(n))
    rows = read_prompteval(path)
    assert [r["sample_index"] for r in rows[:2]] == [6672, 6673] and rows[0]["dataset"] == "mmlu.logical_fallacies"
    assert rows[n]["dimensions_4: instruction_phrasing_text"] == "prompteval.1"
    mine = {"dataset": "mmlu.logical_fallacies", "sample_index": 6673, "model": "mine", "score": 1.0,
            "dimensions_4: instruction_phrasing_text": "p0", "closest_answer": "A. x"}
    theirs, ours = dove_summary(rows + [mine], shared=True)
    assert (theirs["items"], theirs["per_prompt"], ours["items"]) == (1, [1.0, 0.0, 0.0], 1)  # question 1 is odd


def test_missing_cells_are_left_out(tmp_path):
    cells = three_templates(100).astype(float)
    cells[2, :50] = np.nan
    (summary,) = dove_summary(read_dove([write(tmp_path, "abstract_algebra", "m", cells)]))
    assert summary["cells"] == 250 and summary["per_prompt"] == [1.0, 0.5, 0.0]


def test_files_that_cannot_be_placed_are_refused_saying_what_to_do(tmp_path):
    short = write(tmp_path, "abstract_algebra", "m", three_templates(99))
    with pytest.raises(ConfigError, match="99 questions, but abstract_algebra's test split has 100"):
        read_dove([short])
    unnamed = write(tmp_path, "downloads", "m", three_templates(100))
    with pytest.raises(ConfigError, match="hf download PromptEval.*no MMLU subject"):
        read_dove([unnamed])
    assert len(read_prompteval(unnamed, subject="abstract_algebra", model="m")) == 300  # named by hand instead
    graded = write(tmp_path, "anatomy", "m", np.full((2, 135), 0.5))
    with pytest.raises(ConfigError, match="template 0 scores 0.5"):
        read_dove([graded])


def test_the_command_sets_promptevals_models_side_by_side(tmp_path, root):
    files = [write(tmp_path, "abstract_algebra", model, three_templates(100)[rows])
             for model, rows in (("meta_llama_llama_3_8b", [0, 1]), ("google_flan_t5_xl", [1, 2]))]
    done = subprocess.run([sys.executable, "-m", "posixlab", "dove", "summary", *files, "--dimensions"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "| meta_llama_llama_3_8b | 0 | 100 | 2 | 100% | 0.750 | 0.500 to 1.000 | as observed | 1 of 2 | 0.500 |" \
        in done.stdout
    assert "| google_flan_t5_xl | 0 | 100 | 2 | 100% | 0.250 | 0.000 to 0.500 | as observed | 1 of 2 | 0.000 |" \
        in done.stdout
    assert "| google_flan_t5_xl | 0 | instruction_phrasing (0.500) | prompteval.0 | 100 | 0.500 |" in done.stdout
