"""Figures, tables and the "most sensitive samples" report for classification runs (Errica et al., NAACL 2025).

Reads only saved results (a run's ``summary.json``, ``samples.jsonl`` and ``rephrasings.json``); loads no model. The
metrics come from ``posixlab.metrics.classification``: sensitivity S_τ(x) is the normalised entropy of a sample's
label distribution over the Q rephrasings (N/A counted as a class), and consistency C_y(x, x') = 1 − TVD(p_x, p_x')
compares two samples of the same gold class y.

Per (data set, model, probability mode), across prompting strategies:
  - ``sensitivity_violin``: per-sample S_τ, one violin per strategy (the paper's Simple / Detail / 1-shot);
  - ``sensitivity_per_class``: mean S_τ per gold class, one line per strategy.
Per run (one strategy):
  - ``consistency_matrix``: C_y(x, x') for every pair of samples, sorted by gold class, class boundaries marked;
  - ``consistency_histogram``: C_y(x, x') over the pairs of distinct samples of each class, one panel per class;
  - ``sensitivity_vs_consistency``: each sample's S_τ against its mean consistency with the other samples of its
    gold class, beside two simulated baselines (``simulate_labels``): a random predictor and a noisy one;
  - ``most_sensitive.md``: the top-k samples by S_τ with every rephrasing's raw answer and parsed label.
And a Table-1-style table (micro-F1 over rephrasings, S_τ, C_y; ``table1``) with its per-class companion
(``per_class``), as Markdown and CSV, copied from the runs' summaries.

A strategy or class that a figure expects but the results lack leaves a gap (an empty slot, a missing point) and a
``GridWarning``, never an error.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never opens a window (CI, clusters)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from posixlab.analysis.collect import GridWarning  # noqa: E402
from posixlab.analysis.figures import save  # noqa: E402
from posixlab.analysis.paper import label  # noqa: E402
from posixlab.analysis.tables import fmt, write_table  # noqa: E402
from posixlab.errors import ConfigError  # noqa: E402
from posixlab.metrics.classification import NA, class_distribution, consistency_matrix, sensitivity  # noqa: E402
from posixlab.results import REPHRASINGS_FILE, SAMPLES_FILE, SUMMARY_FILE  # noqa: E402

STRATEGIES = ("simple", "detail", "1shot")  # the paper's order: Simple, Detail, 1-shot
STRATEGY_LABELS = {"simple": "Simple", "detail": "Detail", "1shot": "1-shot"}
NOISE = 0.5  # the noisy predictor's share of random predictions
SEED = 0
TOP_K = 10


@dataclass
class ClassificationRun:
    """One classification run, as saved: its summary, its samples (in file order) and its rephrasings."""

    folder: Path
    summary: dict
    samples: list[dict]
    rephrasings: list[str]

    @property
    def model(self) -> str:
        return self.summary["model"]["name"]

    @property
    def dataset(self) -> str:
        return self.summary["dataset"]

    @property
    def strategy(self) -> str:
        return self.summary["strategy"]

    @property
    def probability(self) -> str:
        return self.summary.get("probability", "greedy")

    @property
    def classes(self) -> list[str]:
        """Every class of the distributions, N/A last (the order of ``distribution``)."""
        return list(self.summary["classes"])

    @property
    def real_classes(self) -> list[str]:
        """The task's classes without N/A: what a gold label can be."""
        return [c for c in self.classes if c != NA]

    @property
    def group(self) -> tuple[str, str, str]:
        """What the cross-strategy figures compare within: (data set, model, probability mode)."""
        return (self.dataset, self.model, self.probability)

    @property
    def cell(self) -> tuple[str, str, str, str]:
        return (*self.group, self.strategy)

    @property
    def title(self) -> str:
        return f"{self.dataset} · {label(self.model)} · {STRATEGY_LABELS.get(self.strategy, self.strategy)} · " \
               f"{self.probability}"

    @cached_property
    def distributions(self) -> np.ndarray:
        return np.array([s["distribution"] for s in self.samples], dtype=float).reshape(len(self.samples), -1)

    @cached_property
    def sensitivities(self) -> np.ndarray:
        return np.array([s["sensitivity"] for s in self.samples], dtype=float)

    @property
    def gold(self) -> list[str | None]:
        # a gold label outside the task's classes (or N/A) cannot belong to a class block: treated as unknown
        return [s.get("gold") if s.get("gold") in self.real_classes else None for s in self.samples]

    @property
    def labels(self) -> list[list[str]]:
        """Each sample's parsed label per rephrasing (rephrasing order)."""
        return [[p["label"] for p in sorted(s["predictions"], key=lambda p: p["rephrasing"])] for s in self.samples]


# --------------------------------------------------------------------------------------------------- loading


def find_classification_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders under ``paths`` (each a run folder or a folder of runs, searched recursively) whose summary says
    ``"task": "classification"``. Files (a POSIX ``per_set.csv``) hold no classification results and are skipped."""
    folders = []
    for source in _as_list(paths):
        source = Path(source)
        if not source.exists():
            raise ConfigError(f"no results at {source}: give a run folder, a sweep folder or a per_set.csv file")
        if source.is_file():
            continue
        for summary in sorted(source.rglob(SUMMARY_FILE)):
            if (summary.parent / SAMPLES_FILE).is_file() and _is_classification(summary):
                folders.append(summary.parent)
    return folders


def load_run(folder: str | Path) -> ClassificationRun:
    folder = Path(folder)
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    text = (folder / SAMPLES_FILE).read_text(encoding="utf-8")
    samples = [json.loads(line) for line in text.split("\n") if line.strip()]
    rephrasings_file = folder / REPHRASINGS_FILE
    rephrasings = (json.loads(rephrasings_file.read_text(encoding="utf-8"))["rephrasings"]
                   if rephrasings_file.is_file() else [])
    return ClassificationRun(folder, summary, samples, rephrasings)


def load_classification_runs(paths: Iterable[str | Path] | str | Path) -> list[ClassificationRun]:
    """Every classification run under ``paths`` (POSIX runs are skipped), ordered by data set, model, probability
    mode and strategy. When two runs cover the same cell, the one whose folder sorts last (the newest, for Hydra's
    dated folders) is kept and a ``GridWarning`` names both, as ``collect.load_rows`` does for POSIX runs."""
    by_cell: dict[tuple, ClassificationRun] = {}
    for folder in find_classification_runs(paths):
        run = load_run(folder)
        if run.cell in by_cell:
            warnings.warn(f"{run.title} has results in {by_cell[run.cell].folder} and {folder}; keeping the latter",
                          GridWarning, stacklevel=2)
        by_cell[run.cell] = run
    return sorted(by_cell.values(), key=lambda r: (r.dataset, r.model, r.probability, _strategy_order(r.strategy)))


def _is_classification(summary: Path) -> bool:
    try:
        return json.loads(summary.read_text(encoding="utf-8")).get("task") == "classification"
    except (OSError, ValueError):
        return False  # not ours to judge: collect.load_rows reports broken POSIX summaries


def _as_list(paths) -> list:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


# --------------------------------------------------------------------------------------------------- baselines


def simulate_labels(run: ClassificationRun, noise: float, seed: int = SEED, include_na: bool = False) -> list[list]:
    """The run's own per-rephrasing labels with each one replaced, independently with probability ``noise``, by a
    label drawn uniformly at random: the *noisy predictor* (``noise=0.5`` by default). ``noise=1`` is the *random
    predictor*: every prediction uniform, whatever the model said. Both keep the run's layout (its samples, their
    gold labels, Q rephrasings each), so their points sit on the same axes as the model's.

    The random labels are drawn from the task's classes without N/A (``include_na=False``): a random classifier
    still answers with a class, and N/A is the parser's verdict on an answer, not an answer. Its expected
    sensitivity is then just under ln K / ln(K + 1) (K classes; the entropy is normalised by ln of the number of
    classes *with* N/A), e.g. 0.83 for K = 4 and Q = 30, not 1. ``include_na=True`` draws N/A too (sensitivity
    near 1). In ``label_probs`` runs the noisy predictor starts from the recorded labels, not the probabilities.
    """
    rng = np.random.default_rng(seed)  # one generator, drawn from in sample order: the same seed, the same labels
    choices = run.classes if include_na else run.real_classes
    out = []
    for own in run.labels:
        replace = rng.random(len(own)) < noise
        drawn = rng.integers(len(choices), size=len(own))
        out.append([choices[d] if r else o for o, r, d in zip(own, replace, drawn)])
    return out


def baseline(run: ClassificationRun, noise: float, seed: int = SEED, include_na: bool = False) -> dict:
    """Per-sample sensitivity and mean consistency (``mean_consistency``) of a simulated predictor
    (``simulate_labels``)."""
    distributions = np.array([class_distribution(labels, run.classes)
                              for labels in simulate_labels(run, noise, seed, include_na)], dtype=float)
    return {"sensitivity": np.array([sensitivity(d) for d in distributions], dtype=float),
            "consistency": mean_consistency(distributions, run.gold)}


def mean_consistency(distributions: np.ndarray, gold: list[str | None]) -> np.ndarray:
    """Each sample's mean C_y(x, x') over the *other* samples x' of its gold class: the scatter's y-value. A sample
    without gold, or alone in its class, gets NaN. Self-pairs are left out (C_y(x, x) = 1 always, and would lift
    samples of small classes). Averaged over the samples of a class, this is the class's consistency without
    self-pairs, so ``class_mean`` of it is the summary's ``consistency.mean``."""
    out = np.full(len(gold), np.nan)
    golds = np.array(gold, dtype=object)
    for c in sorted({g for g in gold if g is not None}):
        members = np.flatnonzero(golds == c)
        if len(members) < 2:
            continue
        block = np.asarray(consistency_matrix(distributions[members]), dtype=float)
        out[members] = (block.sum(axis=1) - np.diag(block)) / (len(members) - 1)
    return out


def class_mean(values: np.ndarray, gold: list[str | None]) -> float:
    """The unweighted mean over gold classes of each class's mean value (NaNs and samples without gold ignored)."""
    golds = np.array(gold, dtype=object)
    means = [np.nanmean(values[golds == c]) for c in sorted({g for g in gold if g is not None})
             if np.isfinite(values[golds == c]).any()]
    return float(np.mean(means)) if means else float("nan")


# --------------------------------------------------------------------------------------------------- figures


def violin_figure(by_strategy: dict[str, ClassificationRun], strategies: list[str], title: str):
    """Per-sample sensitivity, one violin per strategy (mean marked); a missing strategy keeps its slot, empty."""
    fig, ax = plt.subplots(figsize=(1.6 * len(strategies) + 2, 4))
    for position, strategy in enumerate(strategies, 1):
        run = by_strategy.get(strategy)
        if run is None or not len(run.sensitivities):
            warnings.warn(f"{title}: no {strategy} results; its violin is left out", GridWarning, stacklevel=2)
            continue
        _violin(ax, run.sensitivities, position)
    ax.set_xticks(range(1, len(strategies) + 1), [STRATEGY_LABELS.get(s, s) for s in strategies])
    ax.set(xlim=(0.4, len(strategies) + 0.6), ylim=(-0.05, 1.05), ylabel="sensitivity $S_\\tau(x)$",
           title=f"Sensitivity per prompting strategy\n{title}")
    fig.tight_layout()
    return fig


def per_class_figure(by_strategy: dict[str, ClassificationRun], strategies: list[str], title: str):
    """Mean sensitivity per gold class, one line per strategy. A class without samples is a gap in its line."""
    classes = _group_classes(by_strategy.values())
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(classes) + 2), 4))
    x = np.arange(len(classes))
    for strategy in strategies:
        run = by_strategy.get(strategy)
        if run is None:
            warnings.warn(f"{title}: no {strategy} results; its line is left out", GridWarning, stacklevel=2)
            continue
        golds = np.array(run.gold, dtype=object)
        means = []
        for c in classes:
            values = run.sensitivities[golds == c]
            if not len(values):
                warnings.warn(f"{title} · {strategy}: no samples of class {c}; its point is left out", GridWarning,
                              stacklevel=2)
            means.append(float(values.mean()) if len(values) else np.nan)  # NaN: matplotlib breaks the line
        ax.plot(x, means, marker="o", label=STRATEGY_LABELS.get(strategy, strategy))
    ax.set_xticks(x, classes, rotation=30, ha="right")
    ax.set(ylim=(-0.05, 1.05), xlabel="gold class", ylabel="mean sensitivity $S_\\tau$",
           title=f"Sensitivity per class\n{title}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def matrix_figure(run: ClassificationRun):
    """C_y(x, x') = 1 − TVD for every pair of samples with gold, sorted by gold class; white lines mark where one
    class's block ends. High blocks on the diagonal: the classifier treats same-class samples alike."""
    order, bounds = _by_class(run)
    matrix = _blockwise_matrix(run.distributions[order])
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis", interpolation="nearest")
    for b in bounds[1:-1]:
        ax.axhline(b - 0.5, color="white", linewidth=0.8)
        ax.axvline(b - 0.5, color="white", linewidth=0.8)
    centres, names = _class_ticks(run, bounds)
    ax.set_xticks(centres, names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(centres, names, fontsize=8)
    fig.colorbar(image, ax=ax, label="$C_y(x,x') = 1 - \\mathrm{TVD}$")
    ax.set_title(f"Consistency between samples (sorted by gold class)\n{run.title}")
    fig.tight_layout()
    return fig


def histogram_figure(run: ClassificationRun):
    """C_y(x, x') over the pairs of distinct samples of each gold class, one panel per class. A class with fewer
    than two samples has no pairs: its panel says so."""
    classes = run.real_classes
    cols = min(4, len(classes))
    rows = -(-len(classes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    golds = np.array(run.gold, dtype=object)
    for ax, c in zip(axes.flat, classes):
        members = np.flatnonzero(golds == c)
        ax.set(title=f"{c} (n = {len(members)})", xlim=(0, 1), xlabel="$C_y(x,x')$")
        if len(members) < 2:
            warnings.warn(f"{run.title}: class {c} has {len(members)} sample(s), no pairs; its histogram is empty",
                          GridWarning, stacklevel=2)
            ax.text(0.5, 0.5, "fewer than 2 samples", ha="center", va="center", transform=ax.transAxes)
            continue
        block = np.asarray(consistency_matrix(run.distributions[members]), dtype=float)
        pairs = block[np.triu_indices(len(members), k=1)]  # each unordered pair once, no self-pairs
        ax.hist(pairs, bins=np.linspace(0, 1, 21))
        ax.axvline(pairs.mean(), color="red", linewidth=1)
        ax.text(0.03, 0.95, f"mean {pairs.mean():.3f}", transform=ax.transAxes, va="top", fontsize=8)
    for ax in list(axes.flat)[len(classes):]:
        ax.axis("off")
    fig.suptitle(f"Consistency within each class (pairs of distinct samples)\n{run.title}")
    fig.tight_layout()
    return fig


def scatter_figure(run: ClassificationRun, noise: float = NOISE, seed: int = SEED, include_na: bool = False):
    """Each sample's sensitivity against its mean consistency with the other samples of its gold class
    (``mean_consistency``), for the model and for the random (``noise=1``) and noisy (``noise``) predictors
    simulated on the same samples (``simulate_labels``). Large markers: each series' class-averaged means."""
    series = [("model", "C0", {"sensitivity": run.sensitivities,
                               "consistency": mean_consistency(run.distributions, run.gold)}),
              (f"noisy predictor ({noise:.0%} random)", "C1", baseline(run, noise, seed, include_na)),
              ("random predictor", "C7", baseline(run, 1.0, seed, include_na))]
    fig, ax = plt.subplots(figsize=(6, 5))
    for name, color, points in series:
        keep = np.isfinite(points["consistency"])
        s_mean, c_mean = class_mean(points["sensitivity"], run.gold), class_mean(points["consistency"], run.gold)
        ax.scatter(points["consistency"][keep], points["sensitivity"][keep], s=10, alpha=0.5, color=color,
                   label=f"{name}: $S_\\tau$ {s_mean:.3f}, $C_y$ {c_mean:.3f}")
        ax.scatter([c_mean], [s_mean], s=120, marker="X", color=color, edgecolor="black")
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.05, 1.05), xlabel="mean consistency with the samples of its class",
           ylabel="sensitivity $S_\\tau(x)$", title=f"Sensitivity against consistency\n{run.title}")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def _blockwise_matrix(distributions: np.ndarray, block: int = 256) -> np.ndarray:
    """``consistency_matrix`` of every pair of rows, computed a block of rows against a block at a time: done at once
    it holds an n×n×C array (480 MB for 2,000 samples of 15 classes)."""
    n = len(distributions)
    out = np.empty((n, n))
    for i in range(0, n, block):
        for j in range(i, n, block):
            a, b = distributions[i:i + block], distributions[j:j + block]
            m = np.asarray(consistency_matrix(np.vstack([a, b])), dtype=float)[:len(a), len(a):]
            out[i:i + len(a), j:j + len(b)], out[j:j + len(b), i:i + len(a)] = m, m.T
    return out


def _violin(ax, values: np.ndarray, position: int) -> None:
    if np.ptp(values) < 1e-12:  # a constant sample has no density estimate: draw it as a bar at its value
        ax.hlines(values[0], position - 0.3, position + 0.3, color="C0", linewidth=2)
    else:
        ax.violinplot([values], positions=[position], showextrema=True, widths=0.8)
    ax.scatter([position], [values.mean()], marker="o", color="black", zorder=3, s=18)
    ax.text(position, 1.02, f"{values.mean():.3f}", ha="center", fontsize=8)


def _group_classes(runs: Iterable[ClassificationRun]) -> list[str]:
    return list(dict.fromkeys(c for run in runs for c in run.real_classes))


def _by_class(run: ClassificationRun) -> tuple[np.ndarray, list[int]]:
    """Indices of the samples with gold, grouped by class in the task's class order (file order within a class),
    and the block boundaries (cumulative counts, starting at 0)."""
    gold = run.gold
    order, bounds = [], [0]
    for c in run.real_classes:
        order += [i for i, g in enumerate(gold) if g == c]
        bounds.append(len(order))
    return np.array(order, dtype=int), bounds


def _class_ticks(run: ClassificationRun, bounds: list[int]) -> tuple[list[float], list[str]]:
    pairs = [((lo + hi - 1) / 2, c) for c, lo, hi in zip(run.real_classes, bounds, bounds[1:]) if hi > lo]
    return [p[0] for p in pairs], [p[1] for p in pairs]


# --------------------------------------------------------------------------------------------------- tables


def table1(runs: list[ClassificationRun]) -> tuple[str, list[dict]]:
    """The paper's Table 1 layout: one row per run with micro-F1 (mean ± sd over the Q rephrasings), sensitivity
    (mean ± sd over samples) and consistency (mean over classes, no self-pairs), all copied from ``summary.json``."""
    records = [_record(run) for run in runs]
    lines = ["## Classification: micro-F1, sensitivity and consistency (Errica et al., Table 1)", "",
             "| data set | model | strategy | probability | samples | Q | micro-F1 (mean ± sd over rephrasings) | "
             "sensitivity S_τ (mean ± sd over samples) | consistency C_y (mean over classes) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {label(r['model'])} | {STRATEGY_LABELS.get(r['strategy'], r['strategy'])} | "
                     f"{r['probability']} | {r['samples']} | {r['rephrasings']} | "
                     f"{fmt(r['micro_f1_mean'], r['micro_f1_sd'])} | "
                     f"{fmt(r['sensitivity_mean'], r['sensitivity_sd'])} | {fmt(r['consistency_mean'], None)} |")
    lines += ["", "Consistency: C_y(x, x') = 1 − TVD over the pairs of distinct samples of a gold class, averaged per "
                  "class, then over classes (the CSV also has the pooled mean and the mean with self-pairs). Blank: "
                  "the run has no gold labels."]
    return "\n".join(lines), records


def per_class_table(runs: list[ClassificationRun]) -> tuple[str, list[dict]]:
    """Sensitivity and consistency per gold class, one row per (run, class), from ``summary.json``."""
    records = []
    for run in runs:
        s, c = run.summary["sensitivity"].get("per_class") or {}, run.summary["consistency"].get("per_class") or {}
        golds = Counter(run.gold)
        for cls in run.real_classes:
            records.append({"dataset": run.dataset, "model": run.model, "strategy": run.strategy,
                            "probability": run.probability, "class": cls, "samples": golds.get(cls, 0),
                            "sensitivity": s.get(cls), "consistency": c.get(cls)})
    lines = ["## Classification: sensitivity and consistency per gold class", "",
             "| data set | model | strategy | probability | class | samples | sensitivity S_τ | consistency C_y |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {label(r['model'])} | {STRATEGY_LABELS.get(r['strategy'], r['strategy'])} | "
                     f"{r['probability']} | {r['class']} | {r['samples']} | {fmt(r['sensitivity'], None)} | "
                     f"{fmt(r['consistency'], None)} |")
    return "\n".join(lines), records


def _record(run: ClassificationRun) -> dict:
    s, c, f1 = run.summary["sensitivity"], run.summary.get("consistency") or {}, run.summary.get("micro_f1") or {}
    return {"dataset": run.dataset, "model": run.model, "strategy": run.strategy, "probability": run.probability,
            "samples": run.summary.get("num_samples", len(run.samples)),
            "rephrasings": run.summary.get("num_rephrasings"),
            "micro_f1_mean": f1.get("mean"), "micro_f1_sd": f1.get("sd"),
            "sensitivity_mean": s.get("mean"), "sensitivity_sd": s.get("sd"), "sensitivity_median": s.get("median"),
            "consistency_mean": c.get("mean"), "consistency_pooled": c.get("pooled"),
            "consistency_with_self_pairs": c.get("mean_with_self_pairs"), "source": str(run.folder)}


# --------------------------------------------------------------------------------------------------- report


def most_sensitive_report(run: ClassificationRun, k: int = TOP_K) -> str:
    """The paper's Appendix B workflow as Markdown: the k samples with the highest sensitivity (ties by sample id),
    each with its gold label, distribution and every rephrasing's raw answer and parsed label. A label that differs
    from the sample's most frequent one is in bold; the rephrasings table counts, per rephrasing, how many of these
    samples it pulls away from their most frequent label, so the prompts that flip answers stand out."""
    top = sorted(run.samples, key=lambda s: (-s["sensitivity"], str(s["sample_id"])))[:k]
    flips = Counter(p["rephrasing"] for s in top for p in s["predictions"] if p["label"] != _majority(s, run))
    lines = [f"# Most sensitive samples: {run.title}", "",
             f"The {len(top)} samples (of {len(run.samples)}) with the highest sensitivity S_τ, ties broken by "
             f"sample id. **Bold** labels differ from the sample's most frequent label; ✓/✗ compare with gold. "
             f"*flips* counts, per rephrasing, the samples below whose label it moves away from their most "
             f"frequent one: rephrasings with many flips are the ones to look at.", "",
             "## Rephrasings", "", "| # | rephrasing | flips |", "|---|---|---|"]
    for q in range(max(len(run.rephrasings), max((len(s["predictions"]) for s in top), default=0))):
        text = run.rephrasings[q] if q < len(run.rephrasings) else "?"
        lines.append(f"| {q}{' (original)' if q == 0 else ''} | {_cell(text, 300)} | {flips.get(q, 0)} |")
    for rank, s in enumerate(top, 1):
        lines += ["", f"## {rank}. `{s['sample_id']}`: S_τ = {s['sensitivity']:.3f}, gold = {s.get('gold') or '—'}",
                  "", f"> {_cell(s.get('text') or '', 400)}", "",
                  f"Distribution: {_distribution_text(s['distribution'], run.classes)}", "",
                  "| # | rephrasing | answer | label |", "|---|---|---|---|"]
        majority = _majority(s, run)
        for p in sorted(s["predictions"], key=lambda p: p["rephrasing"]):
            q = p["rephrasing"]
            text = run.rephrasings[q] if q < len(run.rephrasings) else "?"
            answer = "—" if p.get("answer") is None else _cell(p["answer"], 80)
            shown = p["label"] if p["label"] == majority else f"**{p['label']}**"
            mark = "" if not s.get("gold") else (" ✓" if p["label"] == s["gold"] else " ✗")
            lines.append(f"| {q} | {_cell(text, 60)} | {answer} | {shown}{mark} |")
    return "\n".join(lines) + "\n"


def _majority(sample: dict, run: ClassificationRun) -> str:
    """The most frequent label; a tie goes to the class listed first."""
    counts = Counter(p["label"] for p in sample["predictions"])
    order = {c: i for i, c in enumerate(run.classes)}
    return min(counts, key=lambda c: (-counts[c], order.get(c, len(order)), str(c)))


def _distribution_text(distribution: list[float], classes: list[str]) -> str:
    return " · ".join(f"{c} {p:.2f}" for c, p in zip(classes, distribution) if p > 0) or "—"


def _cell(text: str, limit: int) -> str:
    """Text fit for one Markdown table cell: one line, pipes escaped, cut at ``limit`` characters."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    if len(text) > limit:
        text = text[:limit - 1].rstrip() + "…"
    return text.replace("|", "\\|")


# --------------------------------------------------------------------------------------------------- entry points


def run_classification_figures(run_dir: str | Path, out_dir: str | Path, noise: float = NOISE,
                               seed: int = SEED, k: int = TOP_K) -> dict[str, Path]:
    """The figures and report of a single run (run.py calls this after each job and logs them): the sensitivity
    violin and per-class line (one strategy), the consistency matrix and histograms, the sensitivity-consistency
    scatter with its baselines, ``most_sensitive.md`` and ``table1.md/csv``. Returns name -> file (the PNG for a
    figure)."""
    run, out = load_run(run_dir), Path(out_dir)
    paths: dict[str, Path] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)  # a small run often lacks a class; regeneration warns
        for name, fig in _run_figures(run, noise, seed, [run.strategy]):
            paths[name] = save(fig, out, name)[0]
    paths["most_sensitive"] = _write(out / "most_sensitive.md", most_sensitive_report(run, k))
    paths["table1"] = write_table(*table1([run]), out, "table1")[0]
    return paths


def regenerate_classification(sources: Iterable[str | Path], out: str | Path, noise: float = NOISE,
                              seed: int = SEED, k: int = TOP_K) -> list[Path]:
    """Every classification figure, table and report the runs under ``sources`` allow, into ``out`` (``python -m
    posixlab.analysis`` passes ``<out>/classification``). Returns the files written. Names carry the data set, model
    and probability mode (and strategy, for a run's own figures), e.g. ``sensitivity_violin_trec_llama3_greedy``."""
    runs = load_classification_runs(sources)
    if not runs:
        raise ConfigError(f"found no classification results (summary.json with \"task\": \"classification\" beside "
                          f"samples.jsonl) in {', '.join(map(str, _as_list(sources)))}")
    out = Path(out)
    written = write_table(*table1(runs), out, "table1") + write_table(*per_class_table(runs), out, "per_class")
    groups: dict[tuple, dict[str, ClassificationRun]] = {}
    for run in runs:
        groups.setdefault(run.group, {})[run.strategy] = run
    for group, by_strategy in groups.items():
        strategies = list(STRATEGIES) + sorted(s for s in by_strategy if s not in STRATEGIES)
        title = f"{group[0]} · {label(group[1])} · {group[2]}"
        written += save(violin_figure(by_strategy, strategies, title), out, f"sensitivity_violin_{_slug(*group)}")
        if _has_gold(by_strategy.values(), title):
            written += save(per_class_figure(by_strategy, strategies, title), out,
                            f"sensitivity_per_class_{_slug(*group)}")
    for run in runs:
        tag = _slug(run.dataset, run.model, run.strategy, run.probability)
        for name, fig in _run_figures(run, noise, seed, None):
            written += save(fig, out, f"{name}_{tag}")
        written.append(_write(out / f"most_sensitive_{tag}.md", most_sensitive_report(run, k)))
    return written


def _run_figures(run: ClassificationRun, noise: float, seed: int, strategies: list[str] | None):
    """(name, figure) pairs for one run; the cross-strategy ones only when ``strategies`` is given (single runs).
    Figures that need gold labels are skipped, with a warning, for a run without them."""
    if strategies is not None:
        yield "sensitivity_violin", violin_figure({run.strategy: run}, strategies, run.title)
    if not _has_gold([run], run.title):
        return
    if strategies is not None:
        yield "sensitivity_per_class", per_class_figure({run.strategy: run}, strategies, run.title)
    yield "consistency_matrix", matrix_figure(run)
    yield "consistency_histogram", histogram_figure(run)
    yield "sensitivity_vs_consistency", scatter_figure(run, noise, seed)


def _has_gold(runs: Iterable[ClassificationRun], title: str) -> bool:
    if any(g is not None for run in runs for g in run.gold):
        return True
    warnings.warn(f"{title}: no gold labels; the per-class and consistency figures are skipped", GridWarning,
                  stacklevel=3)
    return False


def _slug(*parts: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)).strip("-") for p in parts)


def _strategy_order(strategy: str):
    return (STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES), strategy)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
