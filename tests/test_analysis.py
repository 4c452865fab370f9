"""Tables, figures and the notebook, regenerated from a small saved sweep without loading a model."""

import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from posixlab.analysis import GridWarning, load_rows, regenerate, write_rows
from posixlab.analysis.paper import PAPER, paper_value
from posixlab.analysis.tables import paired_tests, summary_rows, table1, table2
from posixlab.errors import ConfigError
from posixlab.metrics.stats import paired_wilcoxon
from posixlab.results import read_sets
from tiny_model import tiny_lm  # noqa: F401  (the session fixture: a 2-layer model built in code)

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ["figure1", "figure1_variance", "figure2", "figure3", "figure4", "figure5", "figure6", "figure7",
           "figure7_variance", "figure8", "figure9", "figure_shots", "figure_accuracy_prompts",
           "figure_psi_accuracy_spread"]
TABLES = ["per_set.csv", "cells.md", "cells.csv", "table1.md", "table1.csv", "table2.md", "table2.csv", "factors.md",
          "factors.csv"]


@pytest.mark.slow
def test_rows_carry_psi_and_factors_of_every_set(small_results):
    rows = load_rows(small_results)
    assert len(rows) == 9 * 4
    assert {(r["dataset"], r["variant"], r["shots"]) for r in rows} == {
        ("mmlu", v, 0) for v in ("spelling", "template", "paraphrase", "mixture", "format")} | {
        ("mmlu", "spelling", 1), ("alpaca", "template", 0), ("alpaca", "mixture", 0), ("bbh", "template", 0)}
    folder = next(small_results.glob("0_*"))
    for row, record in zip([r for r in rows if r["source"] == str(folder)], read_sets(folder)):
        assert row["psi"] == record["psi"] and row["unique_responses"] == record["factors"]["unique_responses"]
        assert 0 < row["semantic_coherence"] <= 1 + 1e-6
        assert (row["logprob_sd"] is None) == (row["unique_responses"] > 1)
    assert {r["data"] for r in rows if r["dataset"] == "alpaca"} == {"path:alpaca_fixture.jsonl"}


@pytest.mark.slow
def test_regeneration_writes_every_table_and_figure(small_results, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)
        written = regenerate([small_results], tmp_path)
    names = {p.name for p in written}
    assert set(TABLES) <= names
    for figure in FIGURES:
        assert {f"{figure}.png", f"{figure}.pdf"} <= names, figure
        assert (tmp_path / f"{figure}.png").stat().st_size > 10_000
    table = (tmp_path / "table1.md").read_text()
    assert "| SmolLM2-135M-Instruct |" in table and "MMLU template" in table and "BBH template" in table
    assert "Alpaca template" in table  # data set names as the paper writes them
    assert "MMLU format" not in table and "Not in the paper, so not in this table: format" in table
    assert "| SmolLM2-135M-Instruct | mmlu | format | 0 |" in (tmp_path / "cells.md").read_text()
    accuracy = (tmp_path / "accuracy.md").read_text()
    assert "| SmolLM2-135M-Instruct | mmlu | format | 0 | 4 |" in accuracy and "| options |" in accuracy
    assert "| bbh |" in accuracy and "| alpaca |" not in accuracy  # Alpaca's outputs are references, never graded
    assert "Paired tests" in table and "Data: alpaca = path:alpaca_fixture.jsonl" in table
    few_shot = (tmp_path / "table2.md").read_text()
    assert "vs 0-shot p = " in few_shot
    assert "Data: mmlu = sample" in few_shot and "alpaca" not in few_shot  # Alpaca has no few-shot cell here
    # per_set.csv alone regenerates the same tables
    again = tmp_path / "again"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)
        regenerate([tmp_path / "per_set.csv"], again)
    assert (again / "table1.md").read_text() == table
    assert (again / "cells.csv").read_text() == (tmp_path / "cells.csv").read_text()


@pytest.mark.slow
def test_alpaca_runs_grade_nothing_and_older_results_that_did_are_read_without_it(small_results, tmp_path):
    """An Alpaca item's answer is a reference output (a paragraph), not a gold answer: a run keeps it as
    ``reference_output`` and reports no accuracy. Results written before that graded every response wrong against
    it; the analysis reads them without those columns."""
    import csv
    import json

    folder = next(small_results.glob("*_alpaca_template_0shot"))
    record = read_sets(folder)[0]
    assert record["answer"] is None and record["reference_output"] and record["answers"] is None
    assert json.loads((folder / "summary.json").read_text())["accuracy"] is None
    from posixlab.report.build import build_report

    page = build_report([folder], tmp_path / "alpaca.html").read_text(encoding="utf-8")
    assert "reference output (not graded)" in page and "gold answer" not in page
    rows = load_rows(small_results)
    assert all(r["correct_greedy"] is None for r in rows if r["dataset"] == "alpaca")
    assert any(r["correct_greedy"] for r in rows if r["dataset"] == "bbh")
    older = tmp_path / "per_set.csv"  # as an older run wrote it: Alpaca's responses graded against the paragraphs
    write_rows([{**r, "correct_greedy": "0" * 3, "pred_greedy": "-" * 3} if r["dataset"] == "alpaca" else r
                for r in rows], older)
    with open(older, encoding="utf-8") as handle:
        assert "000" in {row["correct_greedy"] for row in csv.DictReader(handle) if row["dataset"] == "alpaca"}
    assert all(r["correct_greedy"] is None and r["pred_greedy"] is None
               for r in load_rows(older) if r["dataset"] == "alpaca")


@pytest.mark.slow
def test_the_command_line_and_its_errors(small_results, tmp_path):
    """The figures and tables, each gap or duplicate a one-line warning (no library line beside it), and errors."""
    shutil.copytree(next(small_results.glob("0_*")), tmp_path / "again" / "a_copy")  # one cell run twice
    proc = subprocess.run([sys.executable, "-m", "posixlab.analysis", str(small_results), str(tmp_path / "again"),
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "figure1.png" in proc.stdout and "files in" in proc.stderr
    assert re.search(r"^warning: .* has results in .*a_copy; keeping the latter$", proc.stderr, re.M)
    assert "load_rows(" not in proc.stderr and "GridWarning" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "posixlab.analysis", str(tmp_path / "nothing")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no results at" in proc.stderr


@pytest.mark.slow
def test_a_missing_cell_leaves_a_gap_and_a_warning(small_results, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(small_results, partial)
    for folder in partial.glob("*_mixture_*"):
        shutil.rmtree(folder)
    other = load_rows(partial)
    # a second model with results for MMLU spelling only: its other cells are missing
    write_rows([{**r, "model": "gemma3-270m"} for r in other if r["variant"] == "spelling" and r["shots"] == 0],
               tmp_path / "gemma.csv")
    with pytest.warns(GridWarning) as caught:
        written = regenerate([partial, tmp_path / "gemma.csv"], tmp_path / "out")
    messages = " ".join(str(w.message) for w in caught)
    assert "gemma3-270m · mmlu · template: no results" in messages  # a blank table cell
    assert "left out" in messages and not any("\n" in str(w.message) for w in caught)  # one line each, no caption
    assert "figure2" not in {p.stem for p in written}  # no mixture at all: Figure 2 has nothing to show
    assert "| Gemma-3-270M |" in (tmp_path / "out" / "table1.md").read_text()


def test_a_sweep_s_cells_without_a_finished_run_are_each_a_warning(tmp_path):
    """A hole in a sweep's grid says why, as posixlab status would: a cell that failed before its summary, one that
    never started; a finished cell is not named."""
    import json
    import time

    from posixlab.analysis.__main__ import warn_of_holes

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra:\n  sweeper: {max_batch_size: null}\n  launcher: {}\n"
                                         "  overrides: {task: ['variant=spelling,template,format']}\n")
    for num, variant in enumerate(("spelling", "template")):
        (sweep / f"{num}_m_mmlu_{variant}_0shot" / ".hydra").mkdir(parents=True)
        (sweep / f"{num}_m_mmlu_{variant}_0shot" / ".hydra" / "hydra.yaml").write_text(
            f"hydra:\n  job:\n    num: {num}\n    id: '{num}'\n")
    (sweep / "0_m_mmlu_spelling_0shot" / "summary.json").write_text("{}")
    (sweep / "1_m_mmlu_template_0shot" / ".posixlab_job.json").write_text(json.dumps(
        {"state": "failed", "error": "posixlab error: no such file", "host": "elsewhere", "pid": 1,
         "started": time.time()}))
    with pytest.warns(GridWarning) as caught:
        warn_of_holes([str(sweep)])
    assert [str(w.message) for w in caught] == [
        f"{sweep}: not in the tables, no finished run: 1_m_mmlu_template_0shot: failed (posixlab error: no such file)",
        f"{sweep}: not in the tables, no finished run: #2 variant=format: pending"]


@pytest.mark.slow
def test_duplicate_runs_of_a_cell_keep_the_latter_with_a_warning(small_results, tmp_path):
    first = next(small_results.glob("0_*"))
    shutil.copytree(first, tmp_path / "a_copy")
    with pytest.warns(GridWarning, match="keeping the latter"):
        rows = load_rows(small_results, tmp_path)
    assert len(rows) == 9 * 4


def test_psi_false_runs_refresh_their_psi_cell_and_one_without_is_left_out(tmp_path, tiny_lm):  # noqa: F811
    """``outputs/`` of a chat model's accuracy run beside in-process ψ runs: the accuracy-only run of a cell no ψ
    run holds is left out with a warning, not the whole analysis refused; one whose folder sorts before its cell's
    ψ run still refreshes that cell's greedy answers."""
    from tiny_model import SPEC

    from posixlab.data import DatasetSpec
    from posixlab.runner import run
    from posixlab.tasks.posix import PosixConfig

    common = dict(model=SPEC, dataset=DatasetSpec("mmlu"), num_sets=2, num_variants=2, max_new_tokens=2,
                  embedding=None, score_cache=False)
    for name, variant, psi in (("a_answers", "spelling", False), ("b_full", "spelling", True),
                               ("c_answers_alone", "template", False)):
        run(PosixConfig(**common, variant=variant, psi=psi, output_dir=str(tmp_path / "outputs" / name)),
            lm=tiny_lm, progress=False)
    with pytest.warns(GridWarning, match=r"c_answers_alone is a psi=false run .* of .*template.*: left out"):
        rows = load_rows(tmp_path / "outputs")
    assert len(rows) == 2 and {r["variant"] for r in rows} == {"spelling"}
    assert all(r["psi"] is not None and r["source"].endswith(f"b_full; greedy: {tmp_path / 'outputs' / 'a_answers'}")
               for r in rows)
    with pytest.warns(GridWarning), pytest.raises(ConfigError, match="only psi=false runs .*c_answers_alone"):
        load_rows(tmp_path / "outputs" / "c_answers_alone")


def test_box_panels_share_one_psi_axis():
    from posixlab.analysis.figures import box_figure
    fig = box_figure([("small", ["a"], {"a": [0.1, 0.2, 0.3]}), ("large", ["a", "b"], {"a": [1.0, 2.0]})], "t")
    low, high = fig.axes[0].get_ylim()
    assert fig.axes[1].get_ylim() == (low, high) and low < 0.1 and high > 2.0  # the small panel is not stretched


BACKEND_CHECK = r"""
import importlib.util, sys
from pathlib import Path

import matplotlib

if importlib.util.find_spec("matplotlib_inline") is None:  # else MPLBACKEND names its inline backend
    matplotlib.use("svg")
before = matplotlib.get_backend()
import posixlab.analysis
import posixlab.analysis.classification
import posixlab.analysis.figures
import posixlab.analysis.style
assert matplotlib.get_backend() == before, f"importing posixlab.analysis switched {before} to {matplotlib.get_backend()}"

import matplotlib.pyplot as plt
from posixlab.analysis.classification import ClassificationRun, histogram_figure
from posixlab.analysis.figures import box_figure, save

out = Path(sys.argv[1])
box = box_figure([("panel", ["a", "b"], {"a": [0.1, 0.2, 0.3], "b": [0.5, 0.7, 0.9]})], "t")
run = ClassificationRun(Path("."), {"model": {"name": "m"}, "dataset": "d", "strategy": "simple",
                                    "classes": ["x", "y", "N/A"]},
                        [{"gold": g, "distribution": d, "sensitivity": 0.5} for g, d in
                         [("x", [1, 0, 0]), ("x", [0.5, 0.5, 0]), ("y", [0, 1, 0]), ("y", [0, 0.5, 0.5])]], [])
histogram = histogram_figure(run)
assert plt.get_fignums() == [], "a figure was made through pyplot, under the process's backend"
for fig, name in ((box, "box"), (histogram, "histogram")):
    png, pdf = save(fig, out, name)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-", name
assert matplotlib.get_backend() == before, f"drawing switched {before} to {matplotlib.get_backend()}"
print(before)
"""


@pytest.mark.slow  # a Python subprocess
def test_the_analysis_leaves_matplotlib_s_backend_alone(tmp_path):
    """A notebook that imports posixlab.analysis keeps its (inline) backend, and the figures still draw and save:
    they are made outside pyplot, on their own Agg canvas, so they need no GUI whatever the backend."""
    import importlib.util
    import os

    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    if importlib.util.find_spec("matplotlib_inline") is not None:
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    proc = subprocess.run([sys.executable, "-c", BACKEND_CHECK, str(tmp_path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() in (env.get("MPLBACKEND"), "svg")
    assert (tmp_path / "box.png").stat().st_size > 1000 and (tmp_path / "histogram.png").stat().st_size > 1000


def test_paired_tests_use_shared_sets_only():
    rows = [{"model": m, "dataset": "mmlu", "variant": "spelling", "shots": 0, "item_id": f"q{i}", "psi": p}
            for m, values in (("a", [0.9, 0.8, 0.7, 0.6, 0.5, 9.9]), ("b", [0.1, 0.2, 0.15, 0.25, 0.05]))
            for i, p in enumerate(values)]
    (test,) = paired_tests(rows, "model")
    assert test["shared_sets"] == 5 and test["p_value"] == pytest.approx(0.0625)  # q5 exists only for model a
    assert test["p_value"] == paired_wilcoxon([0.9, 0.8, 0.7, 0.6, 0.5], [0.1, 0.2, 0.15, 0.25, 0.05])["pvalue"]
    (cell_a, cell_b) = sorted(summary_rows(rows), key=lambda s: s["model"])
    assert cell_a["num_sets"] == 6 and cell_a["posix"] == pytest.approx(np.mean([0.9, 0.8, 0.7, 0.6, 0.5, 9.9]))


def test_table2_holds_the_few_shot_study_and_tests_each_shot_against_zero_and_the_one_before():
    def cell(dataset, variant, shots, values):
        return [{"model": "smollm2-135m-instruct", "dataset": dataset, "variant": variant, "shots": shots,
                 "item_id": f"q{i}", "psi": p} for i, p in enumerate(values)]

    rows = (cell("mmlu", "spelling", 0, [0.9, 0.8, 0.7, 0.6, 0.5]) + cell("mmlu", "spelling", 1, [0.5, 0.4, 0.6, 0.3, 0.2])
            + cell("mmlu", "spelling", 2, [0.4, 0.5, 0.1, 0.2, 0.1]) + cell("mmlu", "template", 0, [1.0, 2.0])
            + cell("alpaca", "spelling", 0, [0.3, 0.4]))
    markdown, records = table2(rows)
    # no few-shot cell for MMLU templates or Alpaca: those 0-shot cells are Table 1's, not Table 2's
    assert "template" not in markdown and "Alpaca" not in markdown
    assert "| MMLU | 0 | spelling | 0.700 ± 0.158 |" in markdown
    # 1-shot differences 0.4, 0.4, 0.1, 0.3, 0.3 are all positive: exact two-sided p = 2 / 2**5
    assert "| MMLU | 1 | spelling | 0.400 ± 0.158; vs 0-shot p = 0.062 |" in markdown
    tested = {(r["a"], r["b"]) for r in records if r.get("compared") == "shots"}
    assert tested == {(0, 1), (0, 2), (1, 2)}
    one_two = next(r for r in records if (r.get("a"), r.get("b")) == (1, 2))
    assert one_two["p_value"] == paired_wilcoxon([0.5, 0.4, 0.6, 0.3, 0.2], [0.4, 0.5, 0.1, 0.2, 0.1])["pvalue"]
    # Holm over the table's three tests: 0-shot vs 1 and vs 2 both have exact p = 1/16 (all five differences positive),
    # the smallest two of three, so both are adjusted to max(3/16, 2/16) = 0.1875; 1 vs 2 (p > 1/16) to at least that
    zero_one, zero_two = (next(r for r in records if (r.get("a"), r.get("b")) == (0, b)) for b in (1, 2))
    assert zero_one["p_holm"] == zero_two["p_holm"] == pytest.approx(0.1875)
    assert one_two["p_holm"] == max(one_two["p_value"], 0.1875)
    assert "over the 3 tests of this table" in markdown and "| 0.062 | 0.19 |" in markdown
    # the regeneration passes every cell's summary, computed once (a bootstrap each): the same tables
    cell_rows = summary_rows(rows)
    assert table2(rows, cell_rows=cell_rows) == (markdown, records)
    assert table1(rows, cell_rows=cell_rows) == table1(rows) and table1(rows, 1, cell_rows) == table1(rows, 1)
    assert "| MMLU spelling | MMLU template | Alpaca spelling |" in table1(rows, cell_rows=cell_rows)[0].replace(
        "| model ", "")


def test_paper_values_sit_beside_ours_where_the_setting_matches():
    assert paper_value("llama2-7b", "mmlu", "template", 0) == (1.12, 0.377)
    assert paper_value("mistral-7b-instruct", "mmlu", "template", 0) == (1.464, 0.528)  # printed "0.0.528"
    assert paper_value("mistral-7b", "mmlu", "template", 1) == (0.2, 0.244)
    assert paper_value("olmo-1b", "bbh", "template", 0) == (1.021, 0.292)
    assert paper_value("smollm2-135m-instruct", "mmlu", "template", 0) is None
    assert len(PAPER) == 11 * 8 + 4 * 3 * 3 + 11
    rows = [{"model": "llama2-7b", "dataset": "mmlu", "variant": "template", "shots": 0, "item_id": f"q{i}",
             "psi": p} for i, p in enumerate([1.0, 1.2])]
    markdown, _ = table1(rows)
    assert "| Llama-2-7b | 1.100 ± 0.141 (paper 1.120 ± 0.377) |" in markdown


def test_bad_results_input_is_explained(tmp_path):
    with pytest.raises(ConfigError, match="no results at"):
        load_rows(tmp_path / "missing")
    with pytest.raises(ConfigError, match="found no results"):
        load_rows(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="is not a per_set.csv"):
        load_rows(bad)
    with pytest.raises(ConfigError, match="bad.csv is a file, not a folder: the tables and figures cannot go in"):
        regenerate([str(bad)], bad / "figures")  # --out inside a file: said before anything is read


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom(small_results, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import os
        os.environ["POSIXLAB_RESULTS"] = str(small_results)
        os.environ["POSIXLAB_NOTEBOOK_OUT"] = str(tmp_path)
        try:
            client.execute()
        finally:
            os.environ.pop("POSIXLAB_RESULTS")
            os.environ.pop("POSIXLAB_NOTEBOOK_OUT")
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs) >= 4
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "POSIX" in text and "36 prompt sets" in text
    assert (tmp_path / "table1.md").is_file()


def test_a_small_run_s_factor_figure_prints_no_lapack_error(capfd):
    """Three sets, one with every response alike (entropy 0): a bootstrap resample of nothing but that set made
    ``np.polyfit`` divide 0 by 0, and LAPACK printed ``** On entry to DLASCL ...`` to the terminal of a
    ``task.num_sets=3`` run. The band is left out where such a resample is likely; the fitted line stays."""
    from posixlab.analysis.figures import factor_figure

    rows = [{"psi": psi, "unique_responses": unique, "response_entropy": entropy, "semantic_coherence": coherence,
             "logprob_sd": sd}
            for psi, unique, entropy, coherence, sd in [(0.05, 1, 0.0, 1.0, 0.17), (0.12, 4, 1.05, 0.68, None),
                                                        (0.25, 6, 1.34, 0.71, None)]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)
        fig = factor_figure(rows, "three sets")
    assert "DLASCL" not in "".join(capfd.readouterr())
    entropy_panel = fig.axes[1]
    bands = [c for c in entropy_panel.collections if "Poly" in type(c).__name__]  # fill_between's (20 sets: one)
    assert entropy_panel.get_lines() and not bands  # the bins' points and the line, no band


@pytest.mark.slow
def test_a_large_sweep_is_read_a_process_a_core_into_the_same_rows(small_results, monkeypatch):
    from posixlab.analysis import collect
    from posixlab.analysis.figures import _highest_psi
    from posixlab.results import most_sensitive

    serial = load_rows(small_results)
    pools = []
    real_pool = collect.ProcessPoolExecutor
    monkeypatch.setattr(collect, "PARALLEL_READ_BYTES", 0)  # the fixture's few kilobytes count as a large sweep
    monkeypatch.setattr(collect, "_cores", lambda: 2)
    monkeypatch.setattr(collect, "ProcessPoolExecutor",
                        lambda *args, **kw: pools.append(args) or real_pool(*args, **kw))
    assert load_rows(small_results) == serial and pools == [(2,)]
    # a run's figures find its highest-ψ set from the records streamed, as most_sensitive does from all of them
    for folder in sorted(p.parent for p in small_results.rglob("sets.jsonl")):
        assert most_sensitive(_highest_psi(folder), 1) == most_sensitive(read_sets(folder), 1)


@pytest.mark.parametrize("degree", [1, 2])
def test_the_trend_band_is_seaborn_s_own_bootstrap_of_np_polyfit(degree):
    """``trend_band`` fits the resamples together; seaborn's regplot fits each with ``np.polyfit`` on a copy of the
    points. Reference: seaborn's bootstrap loop (the same seeded draws) with ``np.polyfit`` and the same percentiles,
    on noisy points with ties, at a grid that runs past the points' range."""
    from seaborn.algorithms import bootstrap

    from posixlab.analysis.figures import trend_band

    rng = np.random.default_rng(7)
    x = np.round(rng.gamma(2.0, 0.4, 300), 2)  # ties, as entropies and s.d.s have
    y = 0.3 * x ** 2 - 0.5 * x + rng.normal(0, 0.4, 300)
    grid = np.linspace(-0.5, x.max() + 0.5, 25)
    fits = bootstrap(x, y, func=lambda a, b: np.polyval(np.polyfit(a, b, degree), grid), n_boot=200, seed=3)
    expected = np.nanpercentile(fits, [2.5, 97.5], axis=0)
    low, high = trend_band(x, y, degree, grid, n_boot=200, seed=3)
    np.testing.assert_allclose(low, expected[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(high, expected[1], rtol=1e-9, atol=1e-12)
    assert np.all(high - low > 0.01)  # a real band, not a line


def test_a_grid_s_cell_statistics_are_the_same_from_a_process_a_core(monkeypatch):
    """A paper grid's cells are bootstrapped a process a core (``collect.cell_workers``); each cell's intervals are
    seeded by themselves, so the cell table and the accuracy records are the same, in the same order."""
    from posixlab.analysis import collect
    from posixlab.analysis.accuracy import accuracy_rows

    rng = np.random.default_rng(0)
    rows = [{"model": model, "dataset": "mmlu", "variant": variant, "shots": 0, "item_id": f"q{i}",
             "psi": float(rng.gamma(2, 0.2)), "correct_options": "".join(rng.choice(["0", "1"], 5)),
             "pred_options": "".join(rng.choice(list("ABCD"), 5)),
             "correct_greedy": "".join(rng.choice(["0", "1", "-"], 5)), "pred_greedy": None}
            for model in ("gemma3-270m", "smollm2-135m-instruct") for variant in ("spelling", "template")
            for i in range(40)]
    serial = summary_rows(rows, workers=1), accuracy_rows(rows, workers=1)
    pools = []
    real_pool = collect.ProcessPoolExecutor
    monkeypatch.setattr(collect, "ProcessPoolExecutor",
                        lambda *args, **kw: pools.append(args) or real_pool(*args, **kw))
    assert (summary_rows(rows, workers=2), accuracy_rows(rows, workers=2)) == serial
    assert pools == [(2,), (2,)] and len(serial[0]) == 4 and len(serial[1]) == 8
    # template cells say how many prompts are within noise of the best; a spelling cell's prompts are each item's own
    from posixlab.analysis.collect import decode_correct
    from posixlab.metrics import best_prompt_set

    for record in serial[1]:
        grid = [decode_correct(r[f"correct_{record['reading']}"]) for r in rows
                if (r["model"], r["variant"]) == (record["model"], record["variant"])]
        expected = len(best_prompt_set(grid)["prompts"]) if record["variant"] == "template" else None
        assert record["near_best"] == expected
    monkeypatch.setattr(collect, "_cores", lambda: 16)
    assert collect.cell_workers(len(rows), 4) == 1  # 160 sets: one process
    assert collect.cell_workers(collect.PARALLEL_SETS, 160) == collect.MAX_READERS


@pytest.mark.slow
def test_the_same_rows_draw_the_same_figure_files_under_any_string_hash_seed(tmp_path):
    """Models of one size were listed in a factor figure's title in the order of a set of strings, which Python's
    per-process string hashing reorders: two regenerations of the same results drew different files."""
    script = ("import sys, warnings; from pathlib import Path; import numpy as np\n"
              "from posixlab.analysis import figures\n"
              "figures.PAPER_FIGURES = {'figure1': ('factors', 'mmlu')}\n"
              "rng = np.random.default_rng(0)\n"
              "rows = [{'model': m, 'dataset': 'mmlu', 'variant': 'spelling', 'shots': 0, 'item_id': f'q{i}', "
              "'psi': float(rng.gamma(2, .2)), 'unique_responses': int(rng.integers(1, 6)), "
              "'response_entropy': float(rng.random()), 'semantic_coherence': float(rng.random()), "
              "'logprob_sd': None, 'logprob_variance': None, 'data': 'sample'} "
              "for m in ('olmo-7b', 'olmo-7b-instruct', 'mistral-7b', 'llama2-7b') for i in range(30)]\n"
              "warnings.simplefilter('ignore')\n"
              "figures.paper_figures(rows, Path(sys.argv[1]))\n")
    drawn = {}
    for seed in ("1", "2"):
        subprocess.run([sys.executable, "-c", script, str(tmp_path / seed)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        drawn[seed] = (tmp_path / seed / "figure1.png").read_bytes()
    assert drawn["1"] == drawn["2"]


def same_drawing(drawn: Path, committed: Path, most: float = 2e-4) -> bool:
    """The same bytes, or for PNG images of one size, at most a share ``most`` of their pixels other."""
    if drawn.read_bytes() == committed.read_bytes():
        return True
    if drawn.suffix != ".png":
        return False
    from PIL import Image

    a, b = (np.asarray(Image.open(p).convert("RGBA")) for p in (drawn, committed))
    return a.shape == b.shape and np.any(a != b, axis=-1).mean() <= most


@pytest.mark.slow
def test_the_committed_tables_and_figures_are_what_the_code_draws_from_the_committed_rows(tmp_path):
    """figures/ is what figures/README.md's command writes from figures/per_set.csv: the tables to the byte, each
    figure to all but a few pixels. A change to a table, a statistic or a figure's drawing that is not followed by a
    regeneration of the committed files fails here (run the command in the message and commit what it writes).

    Why a figure may differ by a few pixels: its bootstrap bands fit 1,000 resamples with BLAS and LAPACK, whose
    kernels (chosen by the CPU: AVX2 or AVX-512, Intel or AMD) round differently, and a resample whose fit is nearly
    singular can land on either side of the least-norm cutoff. Measured: one machine drew figure1_variance.png with 27
    of its 711,321 pixels other than the committed file's; a changed label, point or line moves thousands."""
    command = [sys.executable, "-m", "posixlab.analysis", "figures/per_set.csv", "--out", str(tmp_path)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    written = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert len(written) >= len(TABLES) + 2 * len(FIGURES) - 4  # the offline grid has no figures 5 and 6 (hub only)
    stale = [name for name in written if not same_drawing(tmp_path / name, ROOT / "figures" / name)]
    assert not stale, (f"figures/ differs from what the code draws from figures/per_set.csv: {stale}; regenerate "
                       f"with `python -m posixlab.analysis figures/per_set.csv --out figures/` and commit")
