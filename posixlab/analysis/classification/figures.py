"""The classification figures (matplotlib, saved as PNG and PDF by ``posixlab.analysis.figures.save``): per
(data set, model, probability mode) the sensitivity violin and per-class line across strategies; per run the
consistency matrix, the per-class consistency histograms and the sensitivity-consistency scatter with its baselines.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import matplotlib

matplotlib.use("Agg")  # files only; never opens a window (CI, clusters)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from posixlab.analysis.classification.baselines import NOISE, SEED, baseline, class_mean, mean_consistency  # noqa: E402
from posixlab.analysis.classification.load import STRATEGY_LABELS, ClassificationRun  # noqa: E402
from posixlab.analysis.collect import GridWarning  # noqa: E402
from posixlab.metrics.classification import consistency_matrix  # noqa: E402


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
