"""The comparison scripts behind figures/rephrasers.md and figures/rephraser_effect.md, on hand-made inputs with
hand-computed results (no model is loaded)."""

import doctest

import pytest

from experiments import compare_cells, compare_rephrasers
from posixlab.analysis.collect import load_rows, write_rows
from posixlab.rephrase.store import ParaphraseFile


def _row(model, variant, item, psi, correct=None, shots=0):
    return {"model": model, "dataset": "mmlu", "variant": variant, "shots": shots, "item_id": item, "psi": psi,
            "correct_options": correct, "source": "hand"}


@pytest.fixture
def before_after(tmp_path):
    before = [_row("m", "paraphrase", f"i{k}", psi, c) for k, (psi, c) in
              enumerate(zip([0.1, 0.2, 0.3, 0.4], ["10", "00", "11", "01"]))]
    before += [_row("m", "spelling", f"i{k}", 0.5) for k in range(3)]          # a cell redone under no rephraser
    before += [_row("gone", "paraphrase", "i0", 0.1), _row("gone", "paraphrase", "i1", 0.2)]  # not redone
    after = [_row("m", "paraphrase", f"i{k}", psi, c) for k, (psi, c) in
             enumerate(zip([0.2, 0.4, 0.6, 0.9, 5.0], ["11", "11", "11", "10", "00"]))]  # i4: only after
    after += [_row("m", "spelling", f"i{k}", 0.5) for k in range(3)]
    return write_rows(before, tmp_path / "before.csv"), write_rows(after, tmp_path / "after.csv")


def test_compare_cells_by_hand(before_after):
    before, after = before_after
    records = compare_cells.compare(load_rows(before), load_rows(after), {"paraphrase"})
    assert len(records) == 1  # "gone" has no redone cell, spelling is filtered out
    r = records[0]
    assert (r["model"], r["variant"], r["sets"]) == ("m", "paraphrase", 4)  # i4 is not in both
    assert r["before"] == pytest.approx(0.25) and r["after"] == pytest.approx(0.525)
    assert r["median_difference"] == pytest.approx(0.25)        # differences 0.1, 0.2, 0.3, 0.5
    assert r["p_value"] == pytest.approx(0.125)                 # exact: all 4 positive, 2 · (1/2)^4
    assert r["p_holm"] == pytest.approx(0.125)                  # one test in the family
    assert r["accuracy_before"] == pytest.approx(4 / 8) and r["accuracy_after"] == pytest.approx(7 / 8)


def test_compare_cells_command(before_after, tmp_path, capsys):
    before, after = before_after
    out = tmp_path / "effect.md"
    assert compare_cells.main([str(before), str(after), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| MMLU | m | paraphrase | 0 | 4 | 0.250 ± 0.129 | 0.525 ± 0.299 | +0.250 | 0.12 | 0.12 | 0.500 | 0.875 |" \
        in text  # Holm over one test: the unchanged spelling cell has no p
    assert "spelling" not in text  # the same ψ on both sides: a cell that was not redone is not listed
    assert compare_cells.main([str(before), str(after), "--variants", "mixture"]) == 2
    assert "no cell is in both" in capsys.readouterr().err


def test_compare_cells_pairs_two_models_on_their_shared_sets(tmp_path, capsys):
    """A fine-tune against its base (``--models A,B``), both in one results file: the base's ψ before, the tuned
    model's after, set by set."""
    rows = [_row("base", "template", f"i{k}", psi) for k, psi in enumerate([0.5, 0.6, 0.7])]
    rows += [_row("base+lora", "template", f"i{k}", psi) for k, psi in enumerate([0.2, 0.4, 0.3, 9.0])]
    rows += [_row("other", "template", f"i{k}", 0.1) for k in range(3)]
    grid = write_rows(rows, tmp_path / "grid.csv")
    (record,) = compare_cells.compare(load_rows(grid), load_rows(grid), models=("base", "base+lora"))
    assert (record["model"], record["sets"]) == ("base → base+lora", 3)  # i3: the tuned model's alone
    assert record["before"] == pytest.approx(0.6) and record["after"] == pytest.approx(0.3)
    assert record["median_difference"] == pytest.approx(-0.3)  # differences -0.3, -0.2, -0.4
    assert record["p_value"] == pytest.approx(0.25)  # exact: all 3 negative, 2 · (1/2)^3
    assert compare_cells.main([str(grid), str(grid), "--models", "base,base+lora"]) == 0
    assert "| MMLU | base → base+lora | template | 0 | 3 | 0.600 ± 0.100 | 0.300 ± 0.100 | -0.300 |" in \
        capsys.readouterr().out
    assert compare_cells.main([str(grid), str(grid), "--models", "base,typo"]) == 2
    assert "the models BEFORE has are base, base+lora, other" in capsys.readouterr().err
    assert compare_cells.main([str(grid), str(grid), "--models", "base"]) == 2
    assert "--models takes two model names" in capsys.readouterr().err


def _record(original, paraphrases, candidates, requests, rejected=None, dropped=None, similarity=0.9):
    score = {"similarity": similarity, "length_ratio": 1.0, "numbers_missing": [], "numbers_added": [],
             "entities_missing": [], "borrowed": []}
    return {"key": original, "original": original, "paraphrases": paraphrases, "candidates": candidates,
            "requests": requests, "rejected": rejected or {}, "dropped": dropped or {},
            "quality": {"scores": [dict(score) for _ in paraphrases]}}


def test_compare_rephrasers_by_hand(tmp_path, capsys):
    a = [_record("Q1?", ["a", "b"], 10, 3, {"similarity": 3}, {"number changed": 1}),
         _record("Q2?", ["c"], 6, 1, {"borrowed": 2}, similarity=0.7)]
    d = compare_rephrasers.describe(a, n=2)
    assert d["candidates"] == 16 and d["short"] == 1               # Q2 has 1 of 2 paraphrases
    assert d["accepted_share"] == pytest.approx(10 / 16)           # 6 of 16 rejected or dropped
    assert d["requests_per_paraphrase"] == pytest.approx(4 / 4)     # 4 requests for 2 questions × 2 paraphrases
    assert d["paraphrases"] == 3 and d["similarity_q05_q50_q95"][1] == pytest.approx(0.9)
    files = []
    for name, records in {"small": a, "large": [_record("Q1?", ["x", "y"], 2, 1)]}.items():
        store = ParaphraseFile(tmp_path / f"{name}.jsonl")
        for record in records:
            store.put(record)
        files.append(str(store.path))
    assert compare_rephrasers.main([*files, "--n", "2", "--sample", "1"]) == 0
    out = capsys.readouterr().out
    assert "\n1 questions that every file paraphrased" in out   # only Q1 is in both files
    assert "| large | 1 | 2 | 100% | 0.50 |" in out


def test_compare_rephrasers_keeps_the_reading(tmp_path, capsys):
    """A file that grows keeps its hand-read sample (--sample-questions) and a rerun keeps the verdicts written into
    --out: a reader's work is never thrown away by adding questions."""
    files = []
    for name in ("small", "large"):
        store = ParaphraseFile(tmp_path / f"{name}.jsonl")
        store.put(_record("Q2?", [f"{name} two"], 1, 1))
        store.put(_record("Q1?", [f"{name} one"], 1, 1))
        files.append(str(store.path))
    out = tmp_path / "compared.md"
    assert compare_rephrasers.main([*files, "--n", "1", "--sample", "5", "--sample-questions", "1",
                                    "--out", str(out)]) == 0
    text = out.read_text()
    assert "| 1 | Q2? | large two | 0.90 |  |" in text and "Q1?" not in text.split("Hand-read")[1]  # the first written
    out.write_text(text.replace("| large two | 0.90 |  |", "| large two | 0.90 | yes |")
                   .replace("| small two | 0.90 |  |", "| small two | 0.90 | no: answers it |"))
    for name in ("small", "large"):  # a third question arrives in both files
        ParaphraseFile(tmp_path / f"{name}.jsonl").put(_record("Q0?", [f"{name} zero"], 1, 1))
    assert compare_rephrasers.main([*files, "--n", "1", "--sample", "5", "--sample-questions", "1",
                                    "--out", str(out)]) == 0
    text = out.read_text()
    assert "\n3 questions that every file paraphrased" in text
    assert "| 1 | Q2? | large two | 0.90 | yes |" in text and "| 1 | Q2? | small two | 0.90 | no: answers it |" in text
    assert "Hand-read, meaning kept: small 0 of 1 read; large 1 of 1 read." in text


def test_script_doctests():
    for module in (compare_cells, compare_rephrasers):
        assert doctest.testmod(module).failed == 0


def test_reparse_answers_reads_saved_responses_again_and_counts_what_changed(small_results, tmp_path):
    import json
    import shutil

    from experiments.reparse_answers import reparse
    from posixlab.results import read_sets

    folder = shutil.copytree(small_results / "1_mmlu_template_0shot", tmp_path / "cell")
    records = read_sets(folder)
    right = json.loads(json.dumps(records))
    # a reading the parser never gives: every prompt of the first set unparsed
    for answer in records[0]["answers"]:
        answer["by_greedy"] = {"pred": None, "parsed": False, "correct": False}
    (folder / "sets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    changes, old, new = reparse(folder)
    parsed = sum(bool(a["by_greedy"]["parsed"]) for a in right[0]["answers"])
    assert changes == ({"unparsed -> parsed": parsed} if parsed else {})
    assert [r["answers"] for r in read_sets(folder)] == [r["answers"] for r in right]
    assert new["psi"] == old["psi"] and new["accuracy"]["by_options"] == old["accuracy"]["by_options"]
    assert reparse(folder)[0] == {}, "a second reading changes nothing"


def test_structured_figure_regenerates_the_committed_table(tmp_path):
    """figures/structured/table.json is what experiments.structured_figure makes of the committed run folders: the
    schema runs give a row per dimension, the task-sentence runs one "task sentence" row each."""
    import json
    from pathlib import Path

    from experiments import structured_figure

    committed = Path(__file__).resolve().parent.parent / "figures" / "structured"
    table = json.loads((committed / "table.json").read_text(encoding="utf-8"))
    runs = sorted(p for p in committed.iterdir() if (p / "summary.json").is_file())
    assert structured_figure.main([*map(str, runs), "--out", str(tmp_path)]) == 0
    made = json.loads((tmp_path / "table.json").read_text(encoding="utf-8"))
    key = lambda r: (r["model"], r["dimension"])  # noqa: E731
    assert sorted(made["per_dimension"], key=key) == sorted(table["per_dimension"], key=key)
    sentence = [r for r in made["per_dimension"] if r["dimension"] == "task sentence"]
    assert len(sentence) == 2 and all(r["variants"] == 12 for r in sentence)
    for run in runs:  # the sentence rows are the runs' own S
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        if summary["variants"] == "sentence":
            assert any(r["S"] == summary["sensitivity"]["mean"] for r in sentence)
    assert (tmp_path / "s_per_dimension.png").stat().st_size > 10_000


@pytest.mark.slow  # five scripts in subprocesses
def test_the_scripts_say_what_is_wrong_with_their_input_in_one_line(tmp_path):
    """A missing paraphrase file, a file of another kind, a folder that is not a finished POSIX run, an unknown
    model: ``posixlab error: ...`` and exit status 2 (were tracebacks, an empty page, or "no original in common")."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "sets.jsonl").write_text('{"set_id": "x", "prompts": []}\n')
    for script, args, said in (
            ("compare_rephrasers", ["/nonexistent/a.jsonl", "/nonexistent/b.jsonl"], "no paraphrase file at"),
            ("show_paraphrases", ["/nonexistent/a.jsonl"], "no paraphrase file at"),
            ("show_paraphrases", [str(tmp_path / "sets.jsonl")], "lacks a text 'original'"),
            ("reparse_answers", [str(tmp_path)], "is not a finished POSIX run folder"),
            ("verify_models", ["--models", "nosuch"], "model 'nosuch' is not a packaged model")):
        done = subprocess.run([sys.executable, "-m", f"experiments.{script}", *args], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1], timeout=120)
        assert done.returncode == 2 and done.stderr.startswith("posixlab error: ") and said in done.stderr, \
            (script, done.stderr[-500:])
