"""The paper's figures, redrawn from per-set rows (``collect.load_rows``); no model is loaded.

Each figure is saved as PNG and PDF. A model, data set or variant type that a figure needs but the results lack
leaves a gap (an empty slot with its label) and a ``GridWarning``, never an error. Figures whose models are the
paper's 7B models fall back to the models present, ordered by size, when none of the paper's are (the offline runs).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never opens a window (CI, clusters)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from posixlab.analysis.collect import GridWarning, cells, data_caption, finite  # noqa: E402
from posixlab.analysis.paper import MAIN_MODELS, dataset_label, label, size  # noqa: E402
from posixlab.analysis.tables import VARIANT_ORDER  # noqa: E402
from posixlab.metrics.stats import bootstrap_ci, spearman  # noqa: E402

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
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None})  # same bytes for the same data
    plt.close(fig)
    return paths


def factor_figure(rows: list[dict], title: str, confidence: str = "logprob_sd"):
    """Fig. 1 / Fig. 7: ψ against the four factors. (a) box plot per number of unique responses; (b)-(d) ψ averaged
    in equal-width bins of the factor, with a least-squares trend fitted to the per-set points. Spearman's ρ on the
    per-set points (not the bins) is printed on each panel; the paper reports none."""
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    headline = title.splitlines()[0]  # warnings name the figure; the data caption below it is for the page
    psi = np.array([r["psi"] for r in rows], dtype=float)
    unique = np.array([r["unique_responses"] for r in rows], dtype=float)
    counts = sorted({int(u) for u in unique})
    axes[0].boxplot([psi[unique == c] for c in counts], positions=counts, widths=0.6, showfliers=True,
                    flierprops={"markersize": 2})
    axes[0].set(xlabel="Number of unique responses", ylabel="ψ", title="(a) Response diversity")
    _rho(axes[0], unique, psi)
    xlabel = {"logprob_sd": "Log-probability s.d. (identical responses)",
              "logprob_variance": "Log-probability variance (identical responses)"}[confidence]
    for ax, key, name, xl, degree in [
        (axes[1], "response_entropy", "(b) Response distribution entropy", "Entropy (nats)", 2),
        (axes[2], "semantic_coherence", "(c) Semantic coherence", "Mean pairwise cosine similarity", 2),
        (axes[3], confidence, "(d) Variance in confidence", xlabel, 1),
    ]:
        pairs = [(r[key], r["psi"]) for r in rows if r.get(key) is not None]
        ax.set(xlabel=xl, ylabel="mean ψ in bin", title=name)
        if len(pairs) < 2:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            warnings.warn(f"{headline}: no sets have {key}; panel {name[:3]} is empty", GridWarning, stacklevel=2)
            continue
        x, y = (np.array(v, dtype=float) for v in zip(*pairs))
        _binned(ax, x, y, degree)
        _rho(ax, x, y)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def box_figure(panels: list[tuple[str, list[str], dict[str, list[float]]]], title: str, ylabel: str = "ψ"):
    """Box plots of per-set ψ, one panel per (title, ordered labels, values by label). A label without values keeps
    its slot, empty. Panels share one ψ axis, so that a box's height compares across panels by eye."""
    fig, axes = plt.subplots(1, len(panels), figsize=(max(5, 1.1 * max(len(p[1]) for p in panels) + 1.5) *
                                                      len(panels), 4.2), squeeze=False, sharey=True)
    headline = title.splitlines()[0]  # warnings name the figure; the data caption below it is for the page
    for ax, (name, labels, values) in zip(axes[0], panels):
        data = [values.get(k, []) for k in labels]
        for k, d in zip(labels, data):
            if not d:
                warnings.warn(f"{headline} / {name}: no results for {k}; its box is left out", GridWarning,
                              stacklevel=2)
        positions = [i for i, d in enumerate(data, 1) if d]
        if positions:
            ax.boxplot([d for d in data if d], positions=positions, widths=0.6, flierprops={"markersize": 2})
        ax.set_xticks(range(1, len(labels) + 1), [label(k) for k in labels], rotation=30, ha="right")
        ax.set_xlim(0.4, len(labels) + 0.6)
        ax.set(title=name, ylabel=ylabel)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def shots_figure(rows: list[dict], dataset: str, title: str):
    """Table 2 as lines: POSIX (with its bootstrap 95% interval) against the number of exemplars, one panel per
    variant type (one shared axis), one line per model."""
    grouped = cells([r for r in rows if r["dataset"] == dataset])
    variants = sorted({c.variant for c in grouped}, key=lambda v: VARIANT_ORDER.index(v) if v in VARIANT_ORDER else 9)
    models = sorted({c.model for c in grouped}, key=lambda m: (size(m), m))
    fig, axes = plt.subplots(1, max(1, len(variants)), figsize=(5 * max(1, len(variants)), 4), squeeze=False,
                             sharey=True)
    for ax, variant in zip(axes[0], variants):
        for model in models:
            points = sorted((c.shots, [r["psi"] for r in members]) for c, members in grouped.items()
                            if c.model == model and c.variant == variant)
            if not points:
                continue
            shots = [s for s, _ in points]
            means = [float(np.mean(p)) for _, p in points]
            intervals = np.array([bootstrap_ci(p) for _, p in points]).T
            errors = np.abs(intervals - np.array(means))
            ax.errorbar(shots, means, yerr=errors, marker="o", capsize=3, label=label(model))
        ax.set(title=variant, xlabel="few-shot exemplars", ylabel="POSIX (mean ψ, 95% CI)")
        ax.set_xticks(sorted({c.shots for c in grouped}))
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
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
            models = ", ".join(label(m) for m in sorted({r["model"] for r in subset}, key=size))
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
            present = sorted({r["variant"] for r in subset}, key=VARIANT_ORDER.index)
            panels = []
            for variant in VARIANT_ORDER:
                values = _values(subset, variant=variant)
                models = _by_size(_values(subset))
                if variant not in present:
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


def run_figures(rows: list[dict], folder: Path) -> dict[str, Path]:
    """The figures of a single run (logged to W&B by run.py): ψ per set, and ψ against the four factors."""
    psi = [r["psi"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.hist(psi, bins=min(30, max(5, len(psi) // 2)))
    ax.set(xlabel="ψ", ylabel="prompt sets", title=f"POSIX = {np.mean(psi):.3f} over {len(psi)} sets")
    fig.tight_layout()
    paths = {"psi_histogram": save(fig, folder, "psi_histogram")[0]}
    first = rows[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridWarning)  # a small run often lacks identical-response sets
        fig = factor_figure(rows, f"{label(first['model'])} · {first['dataset']} · {first['variant']} · "
                                  f"{first['shots']}-shot")
    paths["factors"] = save(fig, folder, "factors")[0]
    return paths


def _values(rows: list[dict], **match) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for r in rows:
        if all(r[k] == v for k, v in match.items()):
            values.setdefault(r["model"], []).append(r["psi"])
    return values


def _by_size(values: dict) -> list[str]:
    return sorted(values, key=lambda m: (size(m), m))


def _binned(ax, x: np.ndarray, y: np.ndarray, degree: int) -> None:
    bins = max(5, min(30, len(x) // 10))
    lo, hi = float(x.min()), float(x.max())
    if hi == lo:
        ax.scatter(x[:1], [y.mean()], s=12)
        return
    edges = np.linspace(lo, hi, bins + 1)
    which = np.clip(np.digitize(x, edges) - 1, 0, bins - 1)
    centres = [(edges[b] + edges[b + 1]) / 2 for b in range(bins) if np.any(which == b)]
    means = [y[which == b].mean() for b in range(bins) if np.any(which == b)]
    ax.scatter(centres, means, s=12)
    if len(set(x.tolist())) > degree:
        coef = np.polyfit(x, y, degree)
        grid = np.linspace(lo, hi, 100)
        ax.plot(grid, np.polyval(coef, grid), color="red", linewidth=1.5)


def _rho(ax, x, y) -> None:
    x, y = finite(x), finite(y)
    result = spearman(x, y) if len(x) == len(y) else {"rho": float("nan"), "pvalue": float("nan"), "n": len(x)}
    text = (f"Spearman ρ = {result['rho']:.2f}\np = {result['pvalue']:.1e}, n = {result['n']}"
            if not np.isnan(result["rho"]) else f"ρ undefined (n = {result['n']})")
    ax.text(0.03, 0.97, text, transform=ax.transAxes, va="top", fontsize=8,
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
