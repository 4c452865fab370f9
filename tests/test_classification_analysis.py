"""Classification figures, tables and the most-sensitive-samples report, from small synthetic results folders written
as a classification run writes them (distributions and summaries computed with the metric functions)."""

import csv
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from posixlab.analysis import GridWarning, regenerate
from posixlab.analysis.classification import (baseline, class_mean, load_classification_runs, load_run,
                                              mean_consistency, regenerate_classification,
                                              run_classification_figures, simulate_labels)
from posixlab.metrics.classification import NA, class_distribution, consistency, consistency_interval, micro_f1, \
    sensitivity
from posixlab.metrics.stats import bootstrap_ci

ROOT = Path(__file__).resolve().parent.parent
CLASSES = ["sports", "world", "business", "science"]
Q = 30
RUN_FIGURES = ["consistency_matrix", "consistency_histogram", "sensitivity_vs_consistency"]


def write_run(folder: Path, strategy: str = "simple", *, model: str = "tiny-clf", dataset: str = "synth",
              probability: str = "greedy", n: int = 16, seed: int = 0, constant: bool = False,
              with_gold: bool = True) -> Path:
    """A classification run folder following the results contract: each sample's answers are its gold class with
    a sample-specific probability, otherwise any class or N/A; ``constant``: every answer is the first class."""
    rng = np.random.default_rng(seed)
    classes = CLASSES + [NA]
    rephrasings = [f"Which of the classes fits this text best? (wording {q})" for q in range(Q)]
    samples = []
    for i in range(n):
        gold = CLASSES[i % len(CLASSES)]
        right = rng.uniform(0.3, 1.0)
        labels = [CLASSES[0] if constant else gold if rng.random() < right else str(rng.choice(classes))
                  for _ in range(Q)]
        predictions = [{"rephrasing": q, "answer": None if lab == NA else f"The class is {lab} | sure.",
                        "label": lab, "parse": None} for q, lab in enumerate(labels)]
        distribution = class_distribution(labels, classes)
        samples.append({"sample_id": f"s{i:03d}", "text": f"Text number {i}\nabout {gold}.",
                        "gold": gold if with_gold else None, "predictions": predictions, "label_logprobs": None,
                        "distribution": distribution.tolist(), "sensitivity": sensitivity(distribution)})
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(f"strategy: {strategy}\n")
    (folder / "rephrasings.json").write_text(json.dumps({"original": rephrasings[0], "rephrasings": rephrasings,
                                                         "rephraser": {"name": "synthetic"}}))
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (folder / "summary.json").write_text(json.dumps(summarize(samples, classes, dataset, model, strategy,
                                                              probability, with_gold)))
    return folder


def summarize(samples, classes, dataset, model, strategy, probability, with_gold) -> dict:
    s = np.array([x["sensitivity"] for x in samples])
    gold = [x["gold"] for x in samples]
    dists = [x["distribution"] for x in samples]
    summary = {"task": "classification", "model": {"name": model}, "dataset": dataset, "strategy": strategy,
               "probability": probability, "classes": classes, "num_rephrasings": Q, "num_samples": len(samples),
               "sensitivity": {"mean": float(s.mean()), "sd": float(s.std(ddof=1)), "median": float(np.median(s)),
                               "ci95": list(bootstrap_ci(s)), "per_class": {}},
               "consistency": {"mean": None, "per_class": {c: None for c in CLASSES}, "self_pairs": False,
                               "mean_with_self_pairs": None, "pooled": None},
               "micro_f1": None}
    if with_gold:
        c = consistency(dists, gold, CLASSES)
        summary["sensitivity"]["per_class"] = {k: float(s[[g == k for g in gold]].mean()) for k in CLASSES}
        summary["consistency"] = {"mean": c["mean"], "per_class": c["per_class"], "self_pairs": False,
                                  "mean_with_self_pairs": consistency(dists, gold, CLASSES, self_pairs=True)["mean"],
                                  "pooled": c["pooled"], "ci95": consistency_interval(dists, gold, CLASSES)}
        f1 = [micro_f1(gold, [x["predictions"][q]["label"] for x in samples]) for q in range(Q)]
        summary["micro_f1"] = {"mean": float(np.mean(f1)), "sd": float(np.std(f1, ddof=1)), "per_rephrasing": f1}
    return summary


def write_posix_run(folder: Path) -> Path:
    """A minimal POSIX run folder (summary.json beside sets.jsonl), as collect.load_rows reads it: no model runs."""
    folder.mkdir(parents=True)
    summary = {"model": {"name": "smollm2-135m-instruct"}, "dataset": "mmlu", "variant": "spelling", "shots": 0}
    (folder / "summary.json").write_text(json.dumps(summary))
    records = []
    for i in range(8):
        unique = 1 + i % 3
        records.append({"set_index": i, "item_id": f"q{i}", "subject": "astronomy", "psi": 0.2 + 0.1 * i,
                        "psi_reference_compat": 0.1 * i,
                        "factors": {"unique_responses": unique, "response_entropy": 0.3 * (unique - 1),
                                    "semantic_coherence": 0.9 - 0.05 * i,
                                    "logprob_variance": 0.01 * i if unique == 1 else None,
                                    "logprob_sd": 0.1 * i if unique == 1 else None}})
    (folder / "sets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.fixture
def sweep(tmp_path) -> Path:
    """Three strategies of one (data set, model, probability mode), in Hydra-like job folders."""
    for number, strategy in enumerate(("simple", "detail", "1shot")):
        write_run(tmp_path / "sweep" / f"{number}_{strategy}", strategy, seed=number)
    return tmp_path / "sweep"


@pytest.mark.slow  # draws every figure of a three-strategy sweep (PNG and PDF): the slowest tests here
def test_every_figure_table_and_report_is_written(sweep, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GridWarning)  # every strategy and class is there: nothing to warn about
        written = regenerate_classification([sweep], tmp_path / "out")
    names = {p.name for p in written}
    assert {"table1.md", "table1.csv", "per_class.md", "per_class.csv"} <= names
    for figure in ("sensitivity_violin", "sensitivity_per_class"):
        assert {f"{figure}_synth_tiny-clf_greedy.{ext}" for ext in ("png", "pdf")} <= names
    for strategy in ("simple", "detail", "1shot"):
        for figure in RUN_FIGURES:
            assert {f"{figure}_synth_tiny-clf_{strategy}_greedy.{ext}" for ext in ("png", "pdf")} <= names
        assert f"most_sensitive_synth_tiny-clf_{strategy}_greedy.md" in names
    for path in written:
        assert path.is_file() and path.stat().st_size > 200, path


@pytest.mark.slow  # draws every figure of a three-strategy sweep (PNG and PDF): the slowest tests here
def test_the_report_lists_the_most_sensitive_samples_first(sweep, tmp_path):
    regenerate_classification([sweep], tmp_path)
    run = load_run(sweep / "0_simple")
    report = (tmp_path / "most_sensitive_synth_tiny-clf_simple_greedy.md").read_text()
    ranked = re.findall(r"^## \d+\. `(s\d+)`: S_τ = ([0-9.]+)", report, flags=re.M)
    expected = sorted(run.samples, key=lambda s: (-s["sensitivity"], s["sample_id"]))[:10]
    assert [r[0] for r in ranked] == [s["sample_id"] for s in expected]
    values = [float(r[1]) for r in ranked]
    assert values == sorted(values, reverse=True)
    first = report.split("## 1. ")[1].split("\n## ")[0]
    assert len(re.findall(r"^\| \d+ \| Which of the", first, flags=re.M)) == Q  # every rephrasing's prediction
    assert "The class is" in first and "\\|" in first  # raw answers, pipes escaped for Markdown
    assert "**" in first and "✗" in first  # labels that flip away from the majority, wrong answers
    assert "| 0 (original) | Which of the classes fits this text best? (wording 0) |" in report


@pytest.mark.slow  # draws every figure of a three-strategy sweep (PNG and PDF): the slowest tests here
def test_the_table_copies_the_summaries(sweep, tmp_path):
    regenerate_classification([sweep], tmp_path)
    with open(tmp_path / "table1.csv", newline="") as handle:
        rows = {r["strategy"]: r for r in csv.DictReader(handle)}
    assert list(rows) == ["simple", "detail", "1shot"]  # the paper's order
    markdown = (tmp_path / "table1.md").read_text()
    for run in load_classification_runs(sweep):
        row, summary = rows[run.strategy], run.summary
        assert float(row["micro_f1_mean"]) == pytest.approx(summary["micro_f1"]["mean"], abs=1e-12)
        assert float(row["micro_f1_sd"]) == pytest.approx(summary["micro_f1"]["sd"], abs=1e-12)
        assert float(row["sensitivity_mean"]) == pytest.approx(summary["sensitivity"]["mean"], abs=1e-12)
        assert float(row["sensitivity_sd"]) == pytest.approx(summary["sensitivity"]["sd"], abs=1e-12)
        assert [float(row["sensitivity_ci95_low"]), float(row["sensitivity_ci95_high"])] == pytest.approx(
            summary["sensitivity"]["ci95"], abs=1e-12)
        assert float(row["consistency_mean"]) == pytest.approx(summary["consistency"]["mean"], abs=1e-12)
        (s_low, s_high), (c_low, c_high) = summary["sensitivity"]["ci95"], summary["consistency"]["ci95"]
        assert [float(row["consistency_ci95_low"]), float(row["consistency_ci95_high"])] == [c_low, c_high]
        assert (f"{summary['sensitivity']['mean']:.3f} ± {summary['sensitivity']['sd']:.3f} [{s_low:.3f}, "
                f"{s_high:.3f}] | {summary['consistency']['mean']:.3f} [{c_low:.3f}, {c_high:.3f}] |") in markdown
    per_class = (tmp_path / "per_class.csv").read_text()
    assert per_class.count("\n") == 1 + 3 * len(CLASSES)


def test_baselines_random_noisy_and_constant(tmp_path):
    run = load_run(write_run(tmp_path / "run", n=40))
    random = baseline(run, noise=1.0, seed=1)
    assert random["sensitivity"].mean() > 0.8  # Q = 30, 4 classes: ln 4 / ln 5 = 0.86 at most
    assert random["sensitivity"].mean() < np.log(4) / np.log(5)  # drawn without N/A
    with_na = baseline(run, noise=1.0, seed=1, include_na=True)
    assert with_na["sensitivity"].mean() > 0.9
    own = baseline(run, noise=0.0)  # no noise: the model itself
    np.testing.assert_allclose(own["sensitivity"], run.sensitivities, atol=1e-12)
    noisy = baseline(run, noise=0.5)
    assert run.sensitivities.mean() < noisy["sensitivity"].mean() < random["sensitivity"].mean()
    assert simulate_labels(run, 0.5, seed=3) == simulate_labels(run, 0.5, seed=3)  # seeded
    assert simulate_labels(run, 0.5, seed=3) != simulate_labels(run, 0.5, seed=4)
    # averaged per class, then over classes, the scatter's per-sample consistency is the summary's
    assert class_mean(mean_consistency(run.distributions, run.gold), run.gold) == pytest.approx(
        run.summary["consistency"]["mean"], abs=1e-12)

    constant = load_run(write_run(tmp_path / "constant", constant=True))
    assert constant.sensitivities.max() == 0.0
    assert baseline(constant, noise=0.0)["sensitivity"].max() == 0.0
    assert baseline(constant, noise=1.0)["sensitivity"].mean() > 0.8
    regenerate_classification([tmp_path / "constant"], tmp_path / "out")  # a constant violin draws too
    assert (tmp_path / "out" / "sensitivity_violin_synth_tiny-clf_greedy.png").is_file()


def test_a_missing_strategy_or_class_warns_and_leaves_a_gap(tmp_path):
    write_run(tmp_path / "runs" / "a", "simple")
    write_run(tmp_path / "runs" / "b", "1shot", n=3)  # 3 samples: the 4th class has none, two have one each
    with pytest.warns(GridWarning) as caught:
        written = regenerate_classification([tmp_path / "runs"], tmp_path / "out")
    messages = " ".join(str(w.message) for w in caught)
    assert "no detail results" in messages
    assert "no samples of class science" in messages
    assert "class world has 1 sample(s), no pairs" in messages
    names = {p.name for p in written}
    assert "sensitivity_violin_synth_tiny-clf_greedy.png" in names
    assert "consistency_histogram_synth_tiny-clf_1shot_greedy.png" in names


def test_runs_without_gold_still_get_violin_table_and_report(tmp_path):
    write_run(tmp_path / "run", with_gold=False)
    with pytest.warns(GridWarning, match="no gold labels"):
        written = regenerate_classification([tmp_path / "run"], tmp_path / "out")
    names = {p.name for p in written}
    assert "most_sensitive_synth_tiny-clf_simple_greedy.md" in names and "table1.md" in names
    assert not any(n.startswith("consistency_matrix") for n in names)
    assert "| synth | tiny-clf | Simple | greedy | 16 | 30 |  |" in (tmp_path / "out" / "table1.md").read_text()


def test_a_single_run_s_figures(tmp_path):
    folder = write_run(tmp_path / "run", "detail", probability="label_probs")
    paths = run_classification_figures(folder, folder / "figures")
    assert set(paths) == {"sensitivity_violin", "sensitivity_per_class", *RUN_FIGURES, "most_sensitive", "table1"}
    assert all(p.is_file() for p in paths.values())
    assert paths["sensitivity_violin"].suffix == ".png"
    assert "| synth | tiny-clf | Detail | label_probs |" in paths["table1"].read_text()


def test_loading_skips_posix_runs_and_keeps_the_latter_duplicate(tmp_path):
    write_posix_run(tmp_path / "all" / "0_posix")
    write_run(tmp_path / "all" / "1_clf", "simple")
    runs = load_classification_runs(tmp_path / "all")
    assert [r.folder.name for r in runs] == ["1_clf"]
    write_run(tmp_path / "all" / "2_clf", "simple", seed=5)
    with pytest.warns(GridWarning, match="keeping the latter"):
        runs = load_classification_runs([tmp_path / "all"])
    assert [r.folder.name for r in runs] == ["2_clf"]


@pytest.mark.slow
def test_the_command_line_regenerates_both_kinds(tmp_path):
    write_posix_run(tmp_path / "results" / "0_posix")
    write_run(tmp_path / "results" / "1_clf", "simple")
    out = tmp_path / "figures"
    proc = subprocess.run([sys.executable, "-m", "posixlab.analysis", str(tmp_path / "results"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "table1.md").is_file() and (out / "per_set.csv").is_file() and (out / "figure1.png").is_file()
    assert (out / "classification" / "table1.md").is_file()
    assert (out / "classification" / "sensitivity_vs_consistency_synth_tiny-clf_simple_greedy.png").is_file()
    assert "classification/most_sensitive_synth_tiny-clf_simple_greedy.md" in proc.stdout


@pytest.mark.slow  # draws every figure of both kinds, twice
def test_either_kind_alone_regenerates(tmp_path):
    write_posix_run(tmp_path / "posix" / "run")
    write_run(tmp_path / "clf" / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)
        posix_only = regenerate([tmp_path / "posix"], tmp_path / "a")
        clf_only = regenerate([tmp_path / "clf"], tmp_path / "b")
    assert not (tmp_path / "a" / "classification").exists() and (tmp_path / "a" / "table1.md") in posix_only
    assert not (tmp_path / "b" / "per_set.csv").exists()
    assert all(p.parent == tmp_path / "b" / "classification" for p in clf_only)
    # a per_set.csv written before regenerates beside a classification folder
    both = regenerate([tmp_path / "a" / "per_set.csv", tmp_path / "clf"], tmp_path / "c")
    assert (tmp_path / "c" / "table1.md") in both and (tmp_path / "c" / "classification" / "table1.md") in both
