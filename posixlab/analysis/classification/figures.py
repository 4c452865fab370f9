"""The classification figures, drawn with seaborn in the theme of ``posixlab.analysis.style`` and saved as PNG and
PDF by ``posixlab.analysis.figures.save``: per (data set, model, probability mode) the sensitivity violins
(``sns.violinplot``) and per-class means (``sns.pointplot``) across strategies; per run the consistency matrix
(``sns.heatmap``), the per-class consistency histograms (``sns.histplot``, one panel per class) and the
sensitivity-consistency scatter with its baselines (``sns.scatterplot``). A strategy has one colour in every figure.
Every interval seaborn bootstraps is seeded (``style.SEED``, ``style.N_BOOT`` resamples): same results, same files.
Figures are made by ``style.figure`` (outside pyplot, on their own Agg canvas), so drawing them needs no GUI and
leaves the process's matplotlib backend as it is; seaborn draws on the axes it is given (``ax=``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd
import seaborn as sns

from posixlab.analysis import style
from posixlab.analysis.classification.baselines import NOISE, SEED, baseline, class_mean, mean_consistency
from posixlab.analysis.classification.load import STRATEGIES, STRATEGY_LABELS, ClassificationRun
from posixlab.analysis.collect import GridWarning
from posixlab.metrics.classification import consistency_matrix

SENSITIVITY = "sensitivity $S_\\tau(x)$"
CONSISTENCY = "$C_y(x,x') = 1 - \\mathrm{TVD}$"


def violin_figure(by_strategy: dict[str, ClassificationRun], strategies: list[str], title: str):
    """Per-sample sensitivity, one violin per strategy (``sns.violinplot``, cut at the data's range, quartiles
    inside), its mean marked and printed above it. A missing strategy keeps its slot, empty, with a ``GridWarning``;
    a strategy whose samples all have the same sensitivity (no density to estimate) is a bar at that value."""
    style.apply_theme()
    names = [_strategy(s) for s in strategies]
    colours = _colours(strategies)
    records = []
    for strategy in strategies:
        run = by_strategy.get(strategy)
        if run is None or not len(run.sensitivities):
            warnings.warn(f"{title}: no {strategy} results; its violin is left out", GridWarning, stacklevel=2)
            continue
        records += [{"strategy": _strategy(strategy), "sensitivity": float(v)} for v in run.sensitivities]
    data = pd.DataFrame(records, columns=["strategy", "sensitivity"])
    fig, ax = _figure(max(style.COLUMN, 0.9 * len(strategies) + 0.6), 2.3,
                      f"Sensitivity per prompting strategy\n{title}")
    spread = data.groupby("strategy")["sensitivity"].transform(lambda v: np.ptp(v.to_numpy())) > 1e-12
    if spread.any():
        sns.violinplot(data=data[spread], x="strategy", y="sensitivity", order=names, hue="strategy",
                       hue_order=names, palette=colours, legend=False, cut=0, inner="quart", density_norm="width",
                       linewidth=0.6, ax=ax)
    means = data.groupby("strategy")["sensitivity"].mean()
    for position, name in enumerate(names):
        if name not in means:
            continue
        if not spread[data["strategy"] == name].any():  # constant: a bar at its value
            ax.hlines(means[name], position - 0.3, position + 0.3, color=colours[name], linewidth=2)
        ax.text(position, 1.03, f"{means[name]:.3f}", ha="center", fontsize=style.FONT - 1)
    ax.scatter(range(len(names)), [means.get(n, np.nan) for n in names], marker="o", color="black", s=10, zorder=3)
    ax.set_xticks(range(len(names)), names)
    ax.set(xlim=(-0.5, len(names) - 0.5), ylim=(-0.05, 1.1), xlabel="", ylabel=SENSITIVITY)
    return fig


def per_class_figure(by_strategy: dict[str, ClassificationRun], strategies: list[str], title: str):
    """Mean sensitivity per gold class with its bootstrap 95% interval, one line per strategy (``sns.pointplot``,
    strategies dodged apart). A class without samples is a gap in its line, with a ``GridWarning``."""
    style.apply_theme()
    classes = _group_classes(by_strategy.values())
    colours = _colours(strategies)
    records = []
    for strategy in strategies:
        run = by_strategy.get(strategy)
        if run is None:
            warnings.warn(f"{title}: no {strategy} results; its line is left out", GridWarning, stacklevel=2)
            continue
        golds = np.array(run.gold, dtype=object)
        for c in classes:
            if not np.any(golds == c):
                warnings.warn(f"{title} · {strategy}: no samples of class {c}; its point is left out", GridWarning,
                              stacklevel=2)
        records += [{"strategy": _strategy(strategy), "class": g, "sensitivity": float(v)}
                    for g, v in zip(run.gold, run.sensitivities) if g is not None]
    data = pd.DataFrame(records, columns=["strategy", "class", "sensitivity"])
    width = style.COLUMN if len(classes) <= 5 else style.TWO_COLUMNS
    fig, ax = _figure(width, 2.4, f"Sensitivity per class\n{title}", legend_rows=1)
    present = [n for n in colours if n in set(data["strategy"])]
    if len(data):
        sns.pointplot(data=data, x="class", y="sensitivity", order=classes, hue="strategy", hue_order=present,
                      palette=colours, dodge=0.3 if len(present) > 1 else False, markers="o", markersize=3,
                      linewidth=1, errorbar=("ci", 95), n_boot=style.N_BOOT, seed=style.SEED, capsize=0.1,
                      err_kws={"linewidth": 0.8}, ax=ax)
    if len(classes) > 4 or max(map(len, classes), default=0) > 8:
        ax.set_xticks(range(len(classes)), classes, rotation=30, ha="right", rotation_mode="anchor")
    ax.set(ylim=(-0.05, 1.05), xlabel="gold class", ylabel="mean sensitivity $S_\\tau$")
    style.legend_below(fig, ax, ncols=max(1, len(present)))
    return fig


def matrix_figure(run: ClassificationRun):
    """C_y(x, x') = 1 − TVD for every pair of samples with gold, sorted by gold class (``sns.heatmap``, one cell per
    pair, rasterised in the PDF); white lines mark where one class's block ends. High blocks on the diagonal: the
    classifier treats same-class samples alike."""
    style.apply_theme()
    order, bounds = _by_class(run)
    matrix = _blockwise_matrix(run.distributions[order])
    fig, ax = _figure(style.COLUMN, 2.9, f"Consistency between samples (sorted by gold class)\n{run.title}")
    sns.heatmap(matrix, vmin=0, vmax=1, cmap="viridis", square=True, xticklabels=False, yticklabels=False,
                cbar_kws={"label": CONSISTENCY, "shrink": 0.8}, rasterized=True, ax=ax)
    for b in bounds[1:-1]:
        ax.axhline(b, color="white", linewidth=0.6)
        ax.axvline(b, color="white", linewidth=0.6)
    centres, names = _class_ticks(run, bounds)
    ax.set_xticks(centres, names, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(centres, names, rotation=0)
    ax.tick_params(length=0)
    return fig


def histogram_figure(run: ClassificationRun):
    """C_y(x, x') over the pairs of distinct samples of each gold class, one panel per class (``sns.histplot`` in 20
    bins over [0, 1], in rows of up to four panels sharing the x axis, laid out as ``sns.FacetGrid(col_wrap=4)`` lays
    them out, without its pyplot figure), each class's mean marked. A class with fewer than two samples has no pairs:
    its panel says so, with a ``GridWarning``."""
    style.apply_theme()
    classes = run.real_classes
    golds = np.array(run.gold, dtype=object)
    records, means = [], {}
    for c in classes:
        members = np.flatnonzero(golds == c)
        if len(members) < 2:
            warnings.warn(f"{run.title}: class {c} has {len(members)} sample(s), no pairs; its histogram is empty",
                          GridWarning, stacklevel=2)
            continue
        block = np.asarray(consistency_matrix(run.distributions[members]), dtype=float)
        pairs = block[np.triu_indices(len(members), k=1)]  # each unordered pair once, no self-pairs
        means[c] = float(pairs.mean())
        records += [{"class": c, "consistency": float(v)} for v in pairs]
    data = pd.DataFrame(records, columns=["class", "consistency"])
    cols = min(4, len(classes))
    rows = -(-len(classes) // cols)
    panel = (style.TWO_COLUMNS if cols > 2 else style.COLUMN) / cols
    fig = style.figure(figsize=(cols * panel, rows * 1.45))
    axes = {}
    for number, c in enumerate(classes):  # row by row; the x axis shared, each panel its own y axis
        axes[c] = fig.add_subplot(rows, cols, number + 1, xlim=(0, 1), sharex=axes[classes[0]] if number else None)
    above = len(classes) - cols  # the first ``above`` panels have another panel under them
    for ax in list(axes.values())[:max(0, above)]:  # the shared x axis is labelled under the lowest panels only
        for tick in ax.get_xticklabels():
            tick.set_visible(False)
        ax.xaxis.offsetText.set_visible(False)
        ax.xaxis.label.set_visible(False)
    for c, ax in axes.items():
        subset = data[data["class"] == c]
        if len(subset):
            sns.histplot(data=subset, x="consistency", bins=np.linspace(0, 1, 21), color=style.palette(1)[0],
                         linewidth=0.4, ax=ax)
    for number, (c, ax) in enumerate(axes.items()):
        ax.set_xlabel("$C_y(x,x')$" if number >= above else "")
        ax.set_ylabel("pairs" if number % cols == 0 else "")
        ax.set_title(f"{c} (n = {int(np.sum(golds == c))})")
        if c in means:
            ax.axvline(means[c], color=style.palette(4)[3], linewidth=1)
            ax.text(0.03, 0.95, f"mean {means[c]:.3f}", transform=ax.transAxes, va="top", fontsize=style.FONT - 1)
        else:
            ax.text(0.5, 0.5, "fewer than 2 samples", ha="center", va="center", transform=ax.transAxes)
    title = style.wrap(f"Consistency within each class (pairs of distinct samples)\n{run.title}", fig.get_figwidth())
    fig.set_size_inches(fig.get_figwidth(), 1.45 * rows + 0.2 + 0.16 * (title.count("\n") + 1))
    fig.set_layout_engine("constrained")
    fig.suptitle(title)
    return fig


def scatter_figure(run: ClassificationRun, noise: float = NOISE, seed: int = SEED, include_na: bool = False):
    """Each sample's sensitivity against its mean consistency with the other samples of its gold class
    (``mean_consistency``), for the model and for the random (``noise=1``) and noisy (``noise``) predictors
    simulated on the same samples (``simulate_labels``), as one ``sns.scatterplot`` coloured by series. Large
    crosses: each series' class-averaged means (printed in the legend)."""
    style.apply_theme()
    colours = style.palette(8)
    series = [("model", colours[0], {"sensitivity": run.sensitivities,
                                     "consistency": mean_consistency(run.distributions, run.gold)}),
              (f"noisy predictor ({noise:.0%} random)", colours[1], baseline(run, noise, seed, include_na)),
              ("random predictor", colours[7], baseline(run, 1.0, seed, include_na))]
    points, centres, palette = [], [], {}
    for name, colour, values in series:
        s_mean, c_mean = class_mean(values["sensitivity"], run.gold), class_mean(values["consistency"], run.gold)
        name = f"{name}: $S_\\tau$ {s_mean:.3f}, $C_y$ {c_mean:.3f}"
        palette[name] = colour
        keep = np.isfinite(values["consistency"])
        points += [{"series": name, "consistency": c, "sensitivity": s}
                   for c, s in zip(values["consistency"][keep], values["sensitivity"][keep])]
        centres.append({"series": name, "consistency": c_mean, "sensitivity": s_mean})
    fig, ax = _figure(style.COLUMN, 2.6, f"Sensitivity against consistency\n{run.title}",
                      legend_rows=len(series))
    if points:  # none when no class has two samples: then the legend comes with the (undefined) means
        sns.scatterplot(data=pd.DataFrame(points), x="consistency", y="sensitivity", hue="series",
                        hue_order=list(palette), palette=palette, s=8, alpha=0.5, linewidth=0, ax=ax)
    sns.scatterplot(data=pd.DataFrame(centres), x="consistency", y="sensitivity", hue="series",
                    hue_order=list(palette), palette=palette, marker="X", s=70, edgecolor="black", linewidth=0.6,
                    legend=not points, ax=ax)
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.05, 1.05), xlabel="mean consistency with the samples of its class",
           ylabel=SENSITIVITY)
    style.legend_below(fig, ax, ncols=1, markerscale=1.5)
    return fig


def _figure(width: float, height: float, title: str, legend_rows: int = 0):
    """One axes, ``width`` by ``height`` inches plus room for ``title`` (wrapped to the width) and a legend."""
    title = style.wrap(title, width)
    fig = style.figure(figsize=(width, height + 0.16 * (title.count("\n") + 1) + 0.17 * legend_rows),
                       layout="constrained")
    ax = fig.subplots()
    fig.suptitle(title)  # over the whole figure: a colour bar beside the axes stays clear of it
    return fig, ax


def _strategy(strategy: str) -> str:
    return STRATEGY_LABELS.get(strategy, strategy)


def _colours(strategies: list[str]) -> dict[str, tuple]:
    """Strategy label -> colour: the paper's strategies first, in their order, so that each keeps its colour in
    every figure whatever the figure shows."""
    ordered = list(STRATEGIES) + [s for s in strategies if s not in STRATEGIES]
    return dict(zip([_strategy(s) for s in ordered], style.palette(len(ordered))))


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
    """The middle of each non-empty class block on a heatmap's axes (cell i spans i to i + 1) and the class names."""
    pairs = [((lo + hi) / 2, c) for c, lo, hi in zip(run.real_classes, bounds, bounds[1:]) if hi > lo]
    return [p[0] for p in pairs], [p[1] for p in pairs]
