"""The paper's figures, redrawn from per-set rows (``collect.load_rows``) with seaborn; no model is loaded.

Every figure takes the theme of ``posixlab.analysis.style`` (seaborn's paper context, white grid, colour-blind
palette, fonts sized for an ACL column), is made by ``style.figure`` (outside pyplot, on its own Agg canvas: no GUI
needed, the process's backend left as it is) and is saved as PNG and PDF by ``save``. Every interval seaborn
bootstraps is seeded (``style.SEED``, ``style.N_BOOT`` resamples), so the same results give the same files. A model,
data set or variant type that a figure needs but the results lack leaves a gap (an empty slot with its label) and a
``GridWarning``, never an error. Figures whose models are the paper's 7B models fall back to the models present,
ordered by size, when none of the paper's are (the offline runs).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from posixlab.analysis import style
from posixlab.analysis.accuracy import accuracy_rows, position_rows
from posixlab.analysis.collect import GridWarning, data_caption, decode_correct, finite
from posixlab.analysis.paper import MAIN_MODELS, dataset_label, label, size
from posixlab.analysis.tables import VARIANT_ORDER
from posixlab.metrics import accuracy as acc
from posixlab.metrics.position import position_bias
from posixlab.metrics.stats import spearman
from posixlab.metrics.where import most_moved_pair, psi_terms
from posixlab.results import SETS_FILE, iter_records, most_sensitive

# variant types where prompt j is the same format for every item, so "the accuracy of prompt j" means something
FIXED_FORMAT_VARIANTS = ("template", "format")

# figure -> what it shows, after the paper (posix-paper notes, "Figures")
PAPER_FIGURES = {
    "figure1": ("factors", "mmlu"),
    "figure2": ("mixture_by_model", ("mmlu", "alpaca")),
    "figure3": ("scale", ["olmo-1b", "olmo-7b"]),
    "figure4": ("scale", ["llama2-7b", "llama2-7b-chat", "llama2-13b", "llama2-13b-chat"]),
    "figure5": ("bbh_by_model", MAIN_MODELS),
    "figure6": ("bbh_scale", ["olmo-1b", "olmo-7b", "llama2-7b", "llama2-7b-chat", "llama2-13b", "llama2-13b-chat"]),
    "figure7": ("factors", "alpaca"),
    "figure8": ("variants_by_model", "mmlu"),
    "figure9": ("variants_by_model", "alpaca"),
    "figure_shots": ("shots", "mmlu"),
}


def save(fig, folder: Path, name: str) -> list[Path]:
    """``fig`` as ``name``.png (``style.DPI``) and ``name``.pdf under ``folder``, then closed (a no-op for the
    figures made here, which pyplot never holds; a figure made with pyplot is released). The PDF carries no creation
    date, so the same figure gives the same bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=style.DPI, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None})  # same bytes for the same data
    plt.close(fig)
    return paths


def factor_figure(rows: list[dict], title: str, confidence: str = "logprob_sd"):
    """Fig. 1 / Fig. 7: ψ against the four factors, four panels across the page. (a) ``sns.boxplot`` of ψ per number
    of unique responses (on its numeric axis: an absent count leaves a gap); (b)-(d) ``sns.regplot``: ψ averaged in
    equal-width bins of the factor (between 5 and 30 bins, about 10 sets a bin; their centres are passed as
    ``x_bins``, seaborn puts each set in the nearest one and draws the bin's mean with a bootstrap 95% interval) and a
    least-squares polynomial fitted to the per-set points, not the bins, with its bootstrap 95% band (``_trend``):
    quadratic for entropy and coherence, linear for confidence. Spearman's ρ on the per-set points is printed on each
    panel; the paper reports none."""
    style.apply_theme()
    headline = title.splitlines()[0]  # warnings name the figure; the data caption below it is for the page
    fig, axes = _grid(style.TWO_COLUMNS, style.PANEL_HEIGHT, title, 4)
    colour, trend = style.palette(4)[0], style.palette(4)[3]
    psi = np.array([r["psi"] for r in rows], dtype=float)
    unique = np.array([r["unique_responses"] for r in rows], dtype=int)
    _boxplot(x=unique, y=psi, native_scale=True, color=colour, width=0.7, linewidth=0.5, fliersize=1, ax=axes[0])
    axes[0].xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    axes[0].set_ylabel("ψ")
    _xlabel(axes[0], "Number of unique responses")
    _title(axes[0], "(a) Response diversity")
    _rho(axes[0], unique, psi)
    xlabel = {"logprob_sd": "Log-probability s.d. (identical responses)",
              "logprob_variance": "Log-probability variance (identical responses)"}[confidence]
    for ax, key, name, xl, degree in [
        (axes[1], "response_entropy", "(b) Response distribution entropy", "Entropy (nats)", 2),
        (axes[2], "semantic_coherence", "(c) Semantic coherence", "Mean pairwise cosine similarity", 2),
        (axes[3], confidence, "(d) Variance in confidence", xlabel, 1),
    ]:
        pairs = [(r[key], r["psi"]) for r in rows if r.get(key) is not None]
        ax.set_ylabel("mean ψ in bin")
        _xlabel(ax, xl)
        _title(ax, name)
        if len(pairs) < 2:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            warnings.warn(f"{headline}: no sets have {key}; panel {name[:3]} is empty", GridWarning, stacklevel=2)
            continue
        x, y = (np.array(v, dtype=float) for v in zip(*pairs))
        sns.regplot(x=x, y=y, x_bins=_bin_centres(x), fit_reg=False, ci=95, n_boot=style.N_BOOT, seed=style.SEED,
                    color=colour, scatter_kws={"s": 7, "zorder": 3}, ax=ax)
        for line in ax.lines:  # the bins' intervals: thinner than seaborn's default, under the means
            line.set(linewidth=0.7, alpha=0.8)
        if len(set(x.tolist())) > degree:
            _trend(ax, x, y, degree, trend)
        _rho(ax, x, y)
    return fig


def box_figure(panels: list[tuple[str, list[str], dict[str, list[float]]]], title: str, ylabel: str = "ψ"):
    """Box plots of per-set ψ, one panel per (title, ordered labels, values by label): ``sns.boxplot`` on a long-form
    table, ``order`` = the panel's labels (a label without values keeps its slot, empty, with a ``GridWarning``) and
    ``hue`` = the label, so that a model has one colour in every panel. Panels share one ψ axis, so that a box's
    height compares across panels by eye, and are as wide as their number of slots."""
    style.apply_theme()
    headline = title.splitlines()[0]  # warnings name the figure; the data caption below it is for the page
    names = list(dict.fromkeys(k for _, labels, _ in panels for k in labels))
    colours = dict(zip([label(k) for k in names], style.palette(len(names))))
    records = []
    for number, (name, labels, values) in enumerate(panels):
        for k in labels:
            if not values.get(k):
                warnings.warn(f"{headline} / {name}: no results for {k}; its box is left out", GridWarning,
                              stacklevel=2)
            records += [{"panel": number, "model": label(k), "psi": float(v)} for v in values.get(k, [])]
    data = pd.DataFrame(records, columns=["panel", "model", "psi"])
    slots = sum(len(labels) for _, labels, _ in panels)
    fig, axes = _grid(style.width(len(panels), slots), style.PANEL_HEIGHT + 0.5, title, len(panels), sharey=True,
                      width_ratios=[max(1, len(labels)) for _, labels, _ in panels])
    for number, (ax, (name, labels, _)) in enumerate(zip(axes, panels)):
        order = [label(k) for k in labels]
        subset = data[data["panel"] == number]
        if len(subset):
            _boxplot(data=subset, x="model", y="psi", order=order, hue="model", hue_order=list(colours),
                     palette=colours, legend=False, width=0.6, linewidth=0.6, fliersize=1.2, ax=ax)
        else:  # no box at all: seaborn draws nothing, so lay out the empty slots by hand
            ax.set_xlim(-0.5, len(order) - 0.5)
        _slot_labels(ax, order)
        ax.set(xlabel="", ylabel=ylabel if number == 0 else "")
        _title(ax, name)
    return fig


def shots_figure(rows: list[dict], dataset: str, title: str):
    """Table 2 as lines: POSIX against the number of exemplars, one panel per variant type (one shared axis), one
    line per model (``sns.pointplot``: the mean ψ with its bootstrap 95% interval, seeded, models dodged apart so
    that their intervals do not hide each other). A shot count a model lacks is a missing point."""
    style.apply_theme()
    subset = [r for r in rows if r["dataset"] == dataset]
    variants = sorted({r["variant"] for r in subset},
                      key=lambda v: VARIANT_ORDER.index(v) if v in VARIANT_ORDER else 9)
    models = [label(m) for m in sorted({r["model"] for r in subset}, key=lambda m: (size(m), m))]
    colours = dict(zip(models, style.palette(len(models))))
    data = pd.DataFrame([{"variant": r["variant"], "model": label(r["model"]), "shots": int(r["shots"]),
                          "psi": float(r["psi"])} for r in subset], columns=["variant", "model", "shots", "psi"])
    shots = sorted(set(data["shots"]))
    fig, axes = _grid(style.TWO_COLUMNS if len(variants) > 2 else style.COLUMN, style.PANEL_HEIGHT, title,
                      max(1, len(variants)), sharey=True, legend_rows=-(-len(models) // 4))
    for number, (ax, variant) in enumerate(zip(axes, variants)):
        sns.pointplot(data=data[data["variant"] == variant], x="shots", y="psi", order=shots, hue="model",
                      hue_order=models, palette=colours, dodge=0.3 if len(models) > 1 else False, markers="o",
                      markersize=3, linewidth=1, errorbar=("ci", 95), n_boot=style.N_BOOT, seed=style.SEED,
                      capsize=0.12, err_kws={"linewidth": 0.8}, legend=False, ax=ax)
        ax.set(xlabel="few-shot exemplars", ylabel="POSIX (mean ψ, 95% CI)" if number == 0 else "")
        _title(ax, variant)
    handles = [Line2D([], [], color=colours[m], marker="o", markersize=3, linewidth=1, label=m) for m in models]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(models)), frameon=False)
    return fig


def paper_figures(rows: list[dict], folder: Path) -> list[Path]:
    """Every figure the results allow, under the paper's numbering, each captioned with where its data came from.
    Returns the files written."""
    written = []
    zero = [r for r in rows if int(r["shots"]) == 0]
    for name, (kind, arg) in PAPER_FIGURES.items():
        datasets = {"factors": [arg], "variants_by_model": [arg], "shots": [arg], "mixture_by_model": arg,
                    "scale": ["mmlu", "alpaca"]}.get(kind, ["bbh"])
        used = [r for r in rows if r["dataset"] in datasets]
        suffix = f"\n{data_caption(used)}" if used else ""
        if kind == "factors":
            subset = [r for r in zero if r["dataset"] == arg]
            if not subset:
                warnings.warn(f"{name}: no 0-shot {arg} results; skipped", GridWarning, stacklevel=2)
                continue
            models = ", ".join(label(m) for m in sorted({r["model"] for r in subset}, key=lambda m: (size(m), m)))
            for confidence, tag in (("logprob_sd", ""), ("logprob_variance", "_variance")):
                fig = factor_figure(subset, f"{dataset_label(arg)}: ψ against the four factors "
                                            f"({len(subset)} sets; {models}; every variant type){suffix}", confidence)
                written += save(fig, folder, name + tag)
        elif kind == "mixture_by_model":
            panels = []
            for dataset in arg:
                values = _values(zero, dataset=dataset, variant="mixture")
                if values:
                    panels.append((dataset_label(dataset), _by_size(values), values))
            if panels:
                written += save(box_figure(panels, f"Mixture variants: ψ per model{suffix}"), folder, name)
        elif kind in ("scale", "bbh_by_model", "bbh_scale"):
            datasets = ("bbh",) if kind != "scale" else ("mmlu", "alpaca")
            variant = "template" if kind != "scale" else "mixture"
            panels = []
            for dataset in datasets:
                values = _values(zero, dataset=dataset, variant=variant)
                if not values:
                    continue
                wanted = [m for m in arg]
                if not set(wanted) & set(values):
                    wanted = _by_size(values)  # offline: the packaged models, smallest first
                panels.append((f"{dataset_label(dataset)} · {variant}", wanted, values))
            if panels:
                written += save(box_figure(panels, f"ψ by model ({'scale' if 'scale' in kind else 'BBH'}){suffix}"),
                                folder, name)
        elif kind == "variants_by_model":
            subset = [r for r in zero if r["dataset"] == arg]
            if not subset:
                continue
            panels = []
            for variant in VARIANT_ORDER:
                values = _values(subset, variant=variant)
                models = _by_size(_values(subset))
                if not values:
                    warnings.warn(f"{name}: no {variant} results for {arg}; panel empty", GridWarning, stacklevel=2)
                panels.append((variant, models, values))
            written += save(box_figure(panels, f"{dataset_label(arg)}: ψ per model and variant type"
                                               f"{suffix}"), folder, name)
        elif kind == "shots":
            subset = [r for r in rows if r["dataset"] == arg]
            if len({int(r["shots"]) for r in subset}) < 2:
                warnings.warn(f"{name}: results for fewer than two shot counts; skipped", GridWarning, stacklevel=2)
                continue
            written += save(shots_figure(rows, arg, f"Table 2 as a plot: POSIX by number of exemplars "
                                                    f"({dataset_label(arg)}){suffix}"), folder, name)
    return written


def accuracy_figures(rows: list[dict], folder: Path, accuracy: list[dict] | None = None) -> list[Path]:
    """The figures of accuracy beside ψ, where the results hold correctness per prompt (0-shot cells only, as
    Table 1): ``figure_accuracy_prompts`` (``accuracy_by_prompt_figure``) and ``figure_psi_accuracy_spread``
    (``psi_spread_figure``). ``accuracy``: ``accuracy_rows(rows)`` where the caller has it (its bootstrap intervals
    take seconds a cell). Returns the files written; none without gold answers."""
    zero = [r for r in rows if int(r["shots"]) == 0 and (r.get("correct_options") or r.get("correct_greedy"))]
    if not zero:
        return []
    written = []
    suffix = f"\n{data_caption(zero)}"
    fixed = [r for r in zero if r["variant"] in FIXED_FORMAT_VARIANTS]
    if fixed:
        written += save(accuracy_by_prompt_figure(fixed, f"Accuracy of each prompt format, per model{suffix}"),
                        folder, "figure_accuracy_prompts")
    # a cell's accuracy is drawn from the options' log-likelihoods where any of its sets has them, else from greedy
    with_options = {(r["model"], r["dataset"], r["variant"]) for r in zero if r.get("correct_options")}
    records = [r for r in (accuracy_rows(zero) if accuracy is None else accuracy) if int(r["shots"]) == 0 and
               r["reading"] == ("options" if (r["model"], r["dataset"], r["variant"]) in with_options else "greedy")]
    written += save(psi_spread_figure(records, f"ψ against the spread of accuracy over prompts{suffix}"), folder,
                    "figure_psi_accuracy_spread")
    return written


def accuracy_by_prompt_figure(rows: list[dict], title: str):
    """Accuracy of each prompt over the items of a cell, for the variant types where prompt j is one format for
    every item (``FIXED_FORMAT_VARIANTS``): one panel per (data set, variant type), one box per model over its
    prompts' accuracies with each prompt a point on it (``sns.boxplot`` + ``sns.swarmplot``), the original prompt
    (j = 0) a black diamond. Accuracy comes from the options' log-likelihoods where they were scored, else from the
    parsed greedy responses; the y label says which."""
    style.apply_theme()
    records = []
    for (dataset, variant, model), members in _groups(rows, ("dataset", "variant", "model")).items():
        reading = "options" if any(r.get("correct_options") for r in members) else "greedy"
        matrix = [decode_correct(r.get(f"correct_{reading}")) for r in members]
        matrix = [m for m in matrix if m]
        if not matrix:
            continue
        width = max(map(len, matrix))
        per_prompt = acc.accuracy_per_prompt([m + [None] * (width - len(m)) for m in matrix])
        records += [{"panel": f"{dataset_label(dataset)} · {variant}", "model": label(model), "prompt": j,
                     "accuracy": float(a), "reading": reading} for j, a in enumerate(per_prompt)]
    data = pd.DataFrame(records, columns=["panel", "model", "prompt", "accuracy", "reading"])
    panels = sorted(set(data["panel"]), key=lambda p: (p.split(" · ")[0], _variant_rank(p.split(" · ")[1])))
    models = [label(m) for m in sorted({r["model"] for r in rows}, key=lambda m: (size(m), m))]
    colours = dict(zip(models, style.palette(len(models))))
    fig, axes = _grid(style.width(len(panels), len(models) * len(panels)), style.PANEL_HEIGHT + 0.4, title,
                      max(1, len(panels)), sharey=True)
    for number, (ax, panel) in enumerate(zip(axes, panels)):
        subset = data[data["panel"] == panel]
        _boxplot(data=subset, x="model", y="accuracy", order=models, hue="model", hue_order=models, palette=colours,
                 legend=False, width=0.55, linewidth=0.6, showfliers=False, boxprops={"alpha": 0.35}, ax=ax)
        # a swarm, not a jittered strip: no random offsets, so the same results give the same file
        sns.swarmplot(data=subset[subset["prompt"] > 0], x="model", y="accuracy", order=models, hue="model",
                      hue_order=models, palette=colours, legend=False, size=2.5, ax=ax)
        original = subset[subset["prompt"] == 0]
        ax.scatter([models.index(m) for m in original["model"]], original["accuracy"], marker="D", s=12,
                   color="black", zorder=4, label="original prompt")
        readings = sorted(set(subset["reading"]))
        ax.set(xlabel="", ylabel=f"accuracy of a prompt ({'/'.join(readings)})" if number == 0 else "")
        _slot_labels(ax, models)
        _title(ax, panel)
    if panels:
        axes[0].legend(loc="lower left", frameon=False, handletextpad=0.2)
    return fig


def psi_spread_figure(records: list[dict], title: str):
    """Each cell (model, data set, variant type) as one point: POSIX against the range of its per-prompt accuracies
    (max − min over prompts, from ``analysis.accuracy.accuracy_rows``), colour = model, marker = variant type, one
    panel per data set (``sns.scatterplot``). Does the variant type that moves ψ most also move accuracy most?"""
    style.apply_theme()
    data = pd.DataFrame([{"dataset": dataset_label(r["dataset"]), "model": label(r["model"]),
                          "variant": r["variant"], "posix": r["posix"], "range": r["range"]} for r in records],
                        columns=["dataset", "model", "variant", "posix", "range"])
    datasets = list(dict.fromkeys(data["dataset"]))
    models = [label(m) for m in sorted({r["model"] for r in records}, key=lambda m: (size(m), m))]
    variants = sorted(set(data["variant"]), key=_variant_rank)
    markers = dict(zip(variants, ["o", "s", "^", "D", "P", "X", "v"]))
    columns = 2 if len(datasets) <= 2 else 4  # legend columns: the figure is one column wide up to two panels
    fig, axes = _grid(style.width(len(datasets)), style.PANEL_HEIGHT + 0.3, title, max(1, len(datasets)),
                      legend_rows=-(-(len(models) + len(variants) + 2) // columns))
    for number, (ax, dataset) in enumerate(zip(axes, datasets)):
        sns.scatterplot(data=data[data["dataset"] == dataset], x="posix", y="range", hue="model", hue_order=models,
                        palette=dict(zip(models, style.palette(len(models)))), style="variant",
                        style_order=variants, markers=markers, s=28, edgecolor="black", linewidth=0.3,
                        legend=number == 0, ax=ax)
        ax.set(xlabel="POSIX (mean ψ)", ylabel="accuracy range over prompts" if number == 0 else "")
        _title(ax, dataset)
    if datasets:
        style.legend_below(fig, axes[0], ncols=columns)
    return fig


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


def _variant_rank(variant: str) -> tuple[int, str]:
    order = VARIANT_ORDER + ["format"]
    return (order.index(variant) if variant in order else len(order), variant)


def _highest_psi(folder: Path) -> list[dict]:
    """The record of the set with the highest ψ (ties to the lower set index), read as a stream: all that
    ``most_sensitive(records, 1)`` looks at, without holding a large run's records."""
    best, best_key = [], None
    for n, record in enumerate(iter_records(folder, SETS_FILE)):
        key = (-record["psi"], record.get("set_index", n))
        if best_key is None or key < best_key:
            best, best_key = [{**record, "set_index": key[1]}], key
    return best


def run_figures(rows: list[dict], folder: Path, records: list[dict] | None = None) -> dict[str, Path]:
    """The figures of a single run (logged to W&B by run.py): a histogram of ψ per set (``sns.histplot``), ψ
    against the four factors (``factor_figure``), the accuracy of each prompt where there are gold answers, and the
    N×N terms of ψ of the highest-ψ set (``set_matrix_figure``, ``set_matrix``; the set ``summary.json`` lists first
    under ``most_sensitive``). ``records``: the run's set records; by default read from the run folder the rows
    came from (their ``source``), and that figure is left out when the rows name no single run folder."""
    style.apply_theme()
    psi = [r["psi"] for r in rows]
    fig = style.figure(figsize=(style.COLUMN, style.PANEL_HEIGHT + 0.2), layout="constrained")
    ax = fig.subplots()
    sns.histplot(x=psi, bins=min(30, max(5, len(psi) // 2)), ax=ax)
    ax.set(xlabel="ψ", ylabel="prompt sets")
    _title(ax, f"POSIX = {np.mean(psi):.3f} over {len(psi)} sets")
    paths = {"psi_histogram": save(fig, folder, "psi_histogram")[0]}
    first = rows[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)  # a small run often lacks identical-response sets
        fig = factor_figure(rows, f"{label(first['model'])} · {first['dataset']} · {first['variant']} · "
                                  f"{first['shots']}-shot")
    paths["factors"] = save(fig, folder, "factors")[0]
    if any(r.get("correct_options") or r.get("correct_greedy") for r in rows):
        paths["accuracy_per_prompt"] = save(run_accuracy_figure(rows), folder, "accuracy_per_prompt")[0]
    if any(r.get("positions") for r in rows):  # format variants
        paths["position_bias"] = save(position_bias_figure(rows), folder, "position_bias")[0]
    if records is None:
        sources = {r.get("source") for r in rows}
        source = Path(sources.pop()) if len(sources) == 1 and None not in sources else None
        records = _highest_psi(source) if source is not None and (source / SETS_FILE).is_file() else []
    top = most_sensitive(records, 1)
    if top and top[0]["i"] is not None:
        record = next(r for n, r in enumerate(records) if r.get("set_index", n) == top[0]["set_index"])
        fig = set_matrix_figure(record, f"{label(first['model'])} · {first['dataset']} · {first['variant']} · "
                                        f"{first['shots']}-shot: the set with the highest ψ")
        paths["set_matrix"] = save(fig, folder, "set_matrix")[0]
    return paths


def set_matrix_figure(record: dict, title: str):
    """Where one prompt set's ψ comes from: its N×N terms of ψ as a heat map (``sns.heatmap``). Row i is the
    prompt x_i scoring, column j the response y_j (the greedy response of prompt x_j), the value
    ``|log P(y_j | x_i) − log P(y_j | x_j)| / |y_j|`` in nats per token (``metrics.where.psi_terms``): ψ is the mean
    of the off-diagonal cells. The diagonal (0 by definition) and the column of an empty response (no term) are
    grey; the cell with the largest term (``most_moved_pair``, the pair ``summary.json`` names) is outlined and its
    value given under the title. Prompt 0 is the set's first prompt (the original where the set has one)."""
    style.apply_theme()
    terms = psi_terms(record["logprob_matrix"], record["lengths"])
    n = terms.shape[0]
    pair = most_moved_pair(record["logprob_matrix"], record["lengths"])
    width = style.COLUMN if n <= 24 else style.TWO_COLUMNS
    name = record.get("set_id") or record.get("item_id") or f"set {record.get('set_index', '?')}"
    text = f"{title}\n{name}: ψ = {record['psi']:.3f}, N = {n}"
    if pair is not None:
        text += (f"; outlined: prompt {pair['i']} scoring response {pair['j']}, {pair['term']:.3f} (log-ratio "
                 f"{pair['log_ratio']:+.3f} per token, {pair['length']} token{'s' if pair['length'] != 1 else ''})")
    fig, axes = _grid(width, width * 0.8, text, 1)
    ax = axes[0]
    ax.set_facecolor("0.7")  # the masked cells: the diagonal, empty responses
    ticks = max(1, -(-n // 12))  # at most about 12 labels an axis
    mask = np.eye(n, dtype=bool) | np.isnan(terms)
    vmax = None if np.any(~mask) and np.nanmax(np.where(mask, np.nan, terms)) > 0 else 1.0  # a scale when none
    sns.heatmap(terms, mask=mask, cmap="rocket_r", vmin=0, vmax=vmax, square=True,
                linewidths=0, xticklabels=ticks, yticklabels=ticks, ax=ax,
                cbar_kws={"label": r"$|\log P(y_j \mid x_i) - \log P(y_j \mid x_j)|\,/\,|y_j|$ (nats per token)",
                          "shrink": 0.9})
    if pair is not None:
        # light blue (the colour-blind palette's): seen on the map's light and its dark end
        ax.add_patch(Rectangle((pair["j"], pair["i"]), 1, 1, fill=False, edgecolor=style.palette(10)[9],
                               linewidth=1.3, clip_on=False))
    ax.grid(False)
    ax.set_xlabel(r"response $y_j$: the greedy response of prompt $x_j$")
    ax.set_ylabel(r"prompt $x_i$ scoring it")
    ax.tick_params(axis="x", labelrotation=0)
    ax.tick_params(axis="y", labelrotation=0)
    return fig


def run_accuracy_figure(rows: list[dict]):
    """One run's accuracy of each prompt j (the j-th prompt of every set, 0: the original), from each reading it
    has (``sns.pointplot``, hue = reading: the options' log-likelihoods, the parsed greedy response), with the mean
    over prompts as a dashed line per reading."""
    style.apply_theme()
    records = []
    for reading, name in (("options", "options' log-likelihoods"), ("greedy", "greedy response, parsed")):
        matrix = [m for m in (decode_correct(r.get(f"correct_{reading}")) for r in rows) if m]
        if not matrix:
            continue
        width = max(map(len, matrix))
        per_prompt = acc.accuracy_per_prompt([m + [None] * (width - len(m)) for m in matrix])
        records += [{"reading": name, "prompt": j, "accuracy": float(a)} for j, a in enumerate(per_prompt)]
    data = pd.DataFrame(records, columns=["reading", "prompt", "accuracy"])
    readings, colours = _hues(data["reading"])
    fig, axes = _grid(style.COLUMN, style.PANEL_HEIGHT, _run_title("Accuracy of each prompt", rows), 1,
                      legend_rows=len(readings))
    ax = axes[0]
    sns.pointplot(data=data, x="prompt", y="accuracy", hue="reading", hue_order=readings, palette=colours,
                  markers="o", markersize=2.5, linewidth=0.9, errorbar=None, ax=ax)
    for reading in readings:
        ax.axhline(data.loc[data["reading"] == reading, "accuracy"].mean(), color=colours[reading], linewidth=0.7,
                   linestyle="--")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    ax.set(xlabel="prompt j (0: the original)", ylabel="accuracy", ylim=(-0.03, 1.03))
    style.legend_below(fig, ax, ncols=6)
    return fig


def position_bias_figure(rows: list[dict]):
    """Position bias of one run's format prompts (``metrics.position``, from the rows' ``positions``): per reading,
    the accuracy with the gold shown at each position, and the share of picks at each position, the share with no
    preference marked in black (``sns.barplot``, hue = reading; RStd and the χ² p in the legend)."""
    style.apply_theme()
    records = []
    for reading, name in (("options", "options' log-likelihoods"), ("greedy", "greedy response, parsed")):
        bias = position_bias(position_rows(rows, reading))
        if bias is None:
            continue
        p_value = "n/a" if bias["p_value"] is None else f"{bias['p_value']:.2g}"
        records += [{"reading": f"{name}: RStd {bias['rstd']:.3f}, χ² p {p_value}", "position": g["position"],
                     "accuracy": g["accuracy"], "picks": p["share"], "expected": p["expected"]}
                    for g, p in zip(bias["by_gold_position"], bias["picks"])]
    data = pd.DataFrame(records, columns=["reading", "position", "accuracy", "picks", "expected"])
    readings, colours = _hues(data["reading"])
    fig, axes = _grid(style.TWO_COLUMNS, style.PANEL_HEIGHT, _run_title("Position bias", rows), 2,
                      legend_rows=len(readings))
    for ax, column, ylabel, xlabel in (
            (axes[0], "accuracy", "accuracy, the gold shown there", "position the gold is shown at"),
            (axes[1], "picks", "share of the picks", "position picked (black: with no preference)")):
        sns.barplot(data=data, x="position", y=column, hue="reading", hue_order=readings, palette=colours,
                    errorbar=None, ax=ax, legend=ax is axes[0])
        ax.set(xlabel=xlabel, ylabel=ylabel, ylim=(0, 1.03))
    width = 0.8 / len(readings)  # seaborn's dodged bars: each reading's no-preference share on its own bar
    for k, reading in enumerate(readings):
        shares = data.loc[data["reading"] == reading, "expected"].to_numpy()
        axes[1].scatter(np.arange(len(shares)) - 0.4 + (k + 0.5) * width, shares, marker="_", s=120 * width,
                        color="black", zorder=3)
    style.legend_below(fig, axes[0], ncols=1)
    return fig


def _hues(values) -> tuple[list[str], dict]:
    """The distinct ``values`` in their order, and a colour each (a hue's order and palette)."""
    hues = list(dict.fromkeys(values))
    return hues, dict(zip(hues, style.palette(len(hues))))


def _run_title(what: str, rows: list[dict]) -> str:
    """``what``, then the run the rows are of: model, data set, variant type, shots and sets."""
    first = rows[0]
    return (f"{what}: {label(first['model'])} · {first['dataset']} · {first['variant']} · {first['shots']}-shot "
            f"({len(rows)} sets)")


def _values(rows: list[dict], **match) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for r in rows:
        if all(r[k] == v for k, v in match.items()):
            values.setdefault(r["model"], []).append(r["psi"])
    return values


def _by_size(values: dict) -> list[str]:
    return sorted(values, key=lambda m: (size(m), m))


def _grid(width: float, height: float, title: str, panels: int, sharey: bool = False, legend_rows: int = 0,
          width_ratios: list[int] | None = None):
    """A row of ``panels`` axes, ``width`` inches across and ``height`` inches tall for the panels, plus room for
    ``title`` (wrapped to the width, set as the figure's title) and for ``legend_rows`` of a legend below."""
    title = style.wrap(title, width)
    lines = title.count("\n") + 1
    fig = style.figure(figsize=(width, height + 0.16 * lines + 0.17 * legend_rows), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False, sharey=sharey, width_ratios=width_ratios)
    fig.suptitle(title)
    return fig, list(axes[0])


def _trend(ax, x: np.ndarray, y: np.ndarray, degree: int, colour) -> None:
    """``sns.regplot``'s least-squares polynomial of ``degree`` through the points, with its bootstrap 95% band
    (``trend_band``: seaborn's own resamples, fitted together rather than one ``np.polyfit`` each); no band where a
    resample cannot be fitted (every x of a resample at 0, likely when few sets have most x at 0, e.g. the entropy
    of a small run whose responses mostly agree): more than one run of a hundred expected to draw one (3 sets with
    one at 0: about 37 resamples of 1,000)."""
    kwargs = {"x": x, "y": y, "order": degree, "scatter": False, "color": colour, "line_kws": {"linewidth": 1.2},
              "ax": ax}
    # a few sets may hold fewer distinct x than the degree needs (RankWarning), or only zeros (0 / 0)
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        sns.regplot(ci=None, **kwargs)
    zeros = float(np.mean(np.asarray(x) == 0)) if len(x) else 0.0
    if zeros ** len(x) * style.N_BOOT < 0.01:
        grid = np.linspace(float(np.min(x)), float(np.max(x)), 100)  # regplot's grid (truncate=True)
        ax.fill_between(grid, *trend_band(x, y, degree, grid), facecolor=colour, alpha=.15)  # as regplot draws it


def trend_band(x, y, degree: int, grid, ci: float = 95, n_boot: int = style.N_BOOT,
               seed: int = style.SEED) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap ``ci``% band of a least-squares polynomial of ``degree`` at ``grid``, as ``sns.regplot(order=
    degree, ci=ci, n_boot=n_boot, seed=seed)`` draws it (within rounding): the same ``n_boot`` resamples of the
    points (seaborn's: ``default_rng(seed).integers(0, n, n)`` each), the polynomial fitted to each, the percentiles of
    the fits at each grid point.

    seaborn fits each resample with ``np.polyfit`` on a copy of the points, about 0.1 s at 450,000 sets, 1,000 times
    a panel; a resample is the points weighted by how often it drew each, so here each fit is the weighted normal
    equations of x centred and scaled, whose sums over the points are one product of the draw counts with the
    points' powers: 8 times faster at 20,000 points (``experiments.benchmark_analysis``), the same band within
    1e-14. A resample whose fit is not unique (too few distinct x)
    takes the least-norm fit (``np.linalg.pinv``), as ``np.polyfit``'s least squares does.

    >>> x = np.array([0.0, 1.0, 2.0, 3.0, 4.0]); y = 2 * x + 1
    >>> [np.round(v, 6).tolist() for v in trend_band(x, y, 1, np.array([0.0, 4.0]), n_boot=50)]
    [[1.0, 9.0], [1.0, 9.0]]
    """
    x, y, grid = (np.asarray(v, dtype=np.float64) for v in (x, y, grid))
    centre, scale = float(x.mean()), float(np.ptp(x)) or 1.0
    u, g = (x - centre) / scale, (grid - centre) / scale
    powers = np.stack([u ** k for k in range(2 * degree + 1)] + [u ** k * y for k in range(degree + 1)])
    terms = np.arange(degree + 1)
    rng = np.random.default_rng(seed)
    n, fits = len(x), np.empty((n_boot, len(grid)))
    vander = g[:, None] ** terms  # grid x powers 0..degree
    for b in range(n_boot):
        counts = np.bincount(rng.integers(0, n, n, dtype=np.intp), minlength=n).astype(np.float64)
        sums = powers @ counts
        normal = sums[terms[:, None] + terms[None, :]]  # sum of w u^(j+k)
        coefficients = np.linalg.pinv(normal) @ sums[2 * degree + 1:]
        fits[b] = vander @ coefficients
    low, high = np.nanpercentile(fits, [50 - ci / 2, 50 + ci / 2], axis=0)
    return low, high


def _boxplot(**kwargs) -> None:
    """``sns.boxplot``, quiet about seaborn 0.13's use of a matplotlib argument that matplotlib 3.11 deprecates."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="vert: bool was deprecated", category=DeprecationWarning)
        sns.boxplot(**kwargs)


def _pitch(ax) -> float:
    """The inches across that ``ax`` has in its row of panels (its share of the figure's width)."""
    spec = ax.get_subplotspec()
    ratios = spec.get_gridspec().get_width_ratios() or [1] * spec.get_gridspec().ncols
    return ax.get_figure().get_figwidth() * ratios[spec.colspan.start] / sum(ratios)


def _title(ax, text: str) -> None:
    """A panel title, wrapped to the panel's width."""
    ax.set_title(style.wrap(text, _pitch(ax) - 0.3))


def _xlabel(ax, text: str) -> None:
    """An x-axis label, wrapped to the panel's width."""
    ax.set_xlabel(style.wrap(text, _pitch(ax) - 0.2, style.FONT))


def _slot_labels(ax, labels: list[str]) -> None:
    """Category labels under their slots: level, broken after hyphens, where they fit the slot's width; else at
    45 degrees, anchored at their slot."""
    slot = (_pitch(ax) - 0.4) / max(1, len(labels))
    broken = [style.wrap(t, slot - 0.04, style.FONT - 1, hyphens=True) for t in labels]
    if all(style.text_width(t, style.FONT - 1) <= slot - 0.04 for t in broken) and max(
            t.count("\n") for t in broken) < 3:
        ax.set_xticks(range(len(labels)), broken)
    else:
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", rotation_mode="anchor")


def _bin_centres(x: np.ndarray) -> list[float]:
    """The centres of equal-width bins over the range of ``x``: one bin per 10 points, between 5 and 30 bins (one
    centre when every value is the same). ``sns.regplot(x_bins=...)`` puts each point in the nearest centre, which
    for equal widths is the bin it lies in."""
    bins = max(5, min(30, len(x) // 10))
    lo, hi = float(x.min()), float(x.max())
    if hi == lo:
        return [lo]
    edges = np.linspace(lo, hi, bins + 1)
    return ((edges[:-1] + edges[1:]) / 2).tolist()


def _rho(ax, x, y) -> None:
    """Spearman's ρ (``posixlab.metrics.stats.spearman``) of the per-set points, in an upper corner of the panel
    (left for a rising trend, right for a falling one), above the data: the y axis is extended to make room."""
    x, y = finite(x), finite(y)
    result = spearman(x, y) if len(x) == len(y) else {"rho": float("nan"), "pvalue": float("nan"), "n": len(x)}
    text = (f"Spearman ρ = {result['rho']:.2f}\np = {result['pvalue']:.1e}, n = {result['n']}"
            if not np.isnan(result["rho"]) else f"ρ undefined (n = {result['n']})")
    right = not np.isnan(result["rho"]) and result["rho"] < 0
    ax.text(0.97 if right else 0.03, 0.97, text, transform=ax.transAxes, va="top", ha="right" if right else "left",
            fontsize=style.FONT - 1.5, bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.3 * (high - low))  # headroom: the text sits above the data, not on it
