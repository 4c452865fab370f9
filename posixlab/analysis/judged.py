"""ψ against what a judge read (``posixlab judge``; a run's ``judge=``): one point a judged set, its ψ across and its
judged inconsistency (1 − the share of its variants the judge called the same as the original's response) up,
coloured by variant type where a run has several, with the judge's Spearman ρ in the title. Points low on the right
are sets whose responses ψ counts as changed and the judge reads as the same answer: where tokens overstate the
change ("Flaw or Artifact?"; arXiv 2605.02038). Drawn into the judged folder's ``figures/`` beside the run's own
figures, and shown on the run's page.

``judged_table`` and ``judged_grid_figure``: the grid's cells that were judged, from per-set rows
(``collect.load_rows``: run folders or a ``per_set.csv``), each with its mean judged share and interval beside POSIX
over the same sets, and Spearman's ρ between them (``judged.md`` of ``python -m posixlab.analysis``), and each cell's
sets as a panel of the figure (``figure_psi_judged``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from posixlab.analysis import style
from posixlab.analysis.collect import cells
from posixlab.analysis.figures import save
from posixlab.analysis.paper import label
from posixlab.judge import share_interval
from posixlab.metrics.stats import spearman

FIGURE = "psi_vs_judged"  # figures/psi_vs_judged.png and .pdf
JUDGED_GRID_FIGURE = "figure_psi_judged"  # python -m posixlab.analysis: a panel a judged cell


def judged_points(rows: list[dict]) -> pd.DataFrame:
    """A judge's rows (``judge.jsonl``) as the figure's points: ψ, judged inconsistency and variant type, for the
    sets that have both ψ and a judged share (every reply unparsed: none).

    >>> judged_points([{"psi": 0.5, "judged_share": 0.75, "variant_type": "spelling"},
    ...                {"psi": 0.1, "judged_share": None}]).values.tolist()
    [[0.5, 0.25, 'spelling']]
    """
    points = [(float(r["psi"]), 1 - float(r["judged_share"]), r.get("variant_type") or "prompt set") for r in rows
              if r.get("psi") is not None and r.get("judged_share") is not None]
    return pd.DataFrame(points, columns=["psi", "judged inconsistency", "variant type"])


def judged_figure(rows: list[dict], summary: dict):
    """The figure for a judge's ``rows`` and its ``summary`` (``judge.json``: the judge's name, Spearman's ρ); None
    where no set has both numbers."""
    points = judged_points(rows)
    if points.empty:
        return None
    style.apply_theme()
    fig = style.figure(figsize=(style.COLUMN, style.PANEL_HEIGHT + 0.5), layout="constrained")
    ax = fig.subplots()
    several = points["variant type"].nunique() > 1
    sns.scatterplot(points, x="psi", y="judged inconsistency", hue="variant type" if several else None,
                    palette=style.palette(points["variant type"].nunique()) if several else None,
                    color=None if several else style.palette(1)[0], alpha=0.7, linewidth=0, ax=ax)
    ax.set(xlabel="ψ of the set", ylabel="judged inconsistency", ylim=(-0.05, 1.05))
    rho = summary.get("spearman")
    rho_words = "ρ n/a" if not rho else f"Spearman ρ = {rho['rho']:+.2f} (p {rho['p_value']:.2g})"
    judge = (summary.get("judge") or {}).get("model", "?")
    ax.set_title(style.wrap(f"judge {judge}, {len(points)} sets: {rho_words}", style.COLUMN - 0.3))
    return fig


def draw_judged(folder: str | Path, summary: dict) -> Path | None:
    """``figures/psi_vs_judged.png`` (and .pdf) in the judged ``folder`` from its ``judge.jsonl``, of the judge
    ``summary`` names; None where there is nothing to draw (an earlier judge's figure is then removed: not this
    one's)."""
    from posixlab.judge import judged_rows

    fig = judged_figure(judged_rows(folder, summary), summary)
    if fig is None:
        for suffix in (".png", ".pdf"):
            (Path(folder) / "figures" / f"{FIGURE}{suffix}").unlink(missing_ok=True)
        return None
    return save(fig, Path(folder) / "figures", FIGURE)[0]


def judged_grid_figure(rows: list[dict], title: str):
    """The grid's judged cells (per-set rows, ``collect.load_rows``), one panel a cell, in rows of at most four: each
    set's ψ across, its judged inconsistency up, the cell's judge and Spearman ρ in the panel's title; None where no
    cell was judged. ``figure_psi_judged`` of ``python -m posixlab.analysis``."""
    panels = []
    for cell, members in cells(rows).items():
        points = judged_points([r for r in members if r.get("judge")])
        if not points.empty:
            judge = "; ".join(sorted({label(r["judge"]) for r in members if r.get("judge")}))
            panels.append((cell, judge, points))
    if not panels:
        return None
    judges = {judge for _, judge, _ in panels}
    if len(judges) == 1:  # one judge for every cell: named once, in the figure's title
        first, newline, rest = title.partition("\n")
        title = f"{first} (judge {judges.pop()}){newline}{rest}"
        panels = [(cell, None, points) for cell, _, points in panels]
    style.apply_theme()
    across = min(len(panels), 4)
    down = -(-len(panels) // across)
    width = style.COLUMN if across == 1 else style.TWO_COLUMNS
    title = style.wrap(title, width)
    fig = style.figure(figsize=(width, down * (style.PANEL_HEIGHT + 0.3) + 0.16 * (title.count("\n") + 1)),
                       layout="constrained")
    axes = fig.subplots(down, across, squeeze=False, sharey=True).ravel()
    for ax, (cell, judge, points) in zip(axes, panels):
        sns.scatterplot(points, x="psi", y="judged inconsistency", color=style.palette(1)[0], alpha=0.7,
                        linewidth=0, ax=ax)
        rho = spearman(points["psi"].tolist(), points["judged inconsistency"].tolist())["rho"]
        rho_words = "ρ n/a" if rho != rho else f"ρ = {rho:+.2f}"
        ax.set(xlabel="ψ of the set", ylabel="judged inconsistency", ylim=(-0.05, 1.05))
        judged_by = "" if judge is None else f"; judge {judge}"
        ax.set_title(style.wrap(f"{label(cell.model)}, {cell.variant}, {cell.shots}-shot{judged_by}; "
                                f"{len(points)} sets, {rho_words}", width / across - 0.1), fontsize=style.FONT - 1)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig


def judged_table(rows: list[dict]) -> tuple[str, list[dict]] | None:
    """Each judged cell of the grid: its judge, the sets judged, POSIX over them, the mean judged share (the judged
    consistency) with its 95% interval (``judge.share_interval``), and Spearman's ρ between a set's ψ and its judged
    inconsistency; None where no cell was judged. As Markdown and as records (``tables.write_table``).

    >>> rows = [{"model": "m", "dataset": "mmlu", "variant": "spelling", "shots": 0, "psi": p, "judged_share": j,
    ...          "judge": "J"} for p, j in ((0.1, 1.0), (0.2, 0.5), (0.4, 0.25))]
    >>> markdown, records = judged_table(rows)
    >>> records[0]["judged_share"], records[0]["posix"], records[0]["spearman"]   # higher ψ, less judged the same
    (0.583333, 0.233333, 1.0)
    """
    out = []
    for cell, members in cells(rows).items():
        judged = [r for r in members if r.get("judged_share") is not None and r.get("psi") is not None]
        if not judged:
            continue
        psi, shares = [r["psi"] for r in judged], [r["judged_share"] for r in judged]
        rho = spearman(psi, [1 - s for s in shares])["rho"]
        out.append({"model": cell.model, "dataset": cell.dataset, "variant": cell.variant, "shots": cell.shots,
                    "judge": "; ".join(sorted({r.get("judge") or "?" for r in judged})), "sets": len(judged),
                    "posix": round(sum(psi) / len(psi), 6), "judged_share": round(sum(shares) / len(shares), 6),
                    "judged_share_ci95": share_interval(shares), "spearman": None if rho != rho else round(rho, 6)})
    if not out:
        return None
    lines = ["## Judged consistency beside POSIX (the cells a judge read)", "",
             "| model | data set | variant | shots | judge | sets | POSIX | judged the same | 95% CI | "
             "Spearman ρ (ψ, judged inconsistency) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in out:
        interval = "" if r["judged_share_ci95"] is None else \
            f"{r['judged_share_ci95'][0]:.3f} to {r['judged_share_ci95'][1]:.3f}"
        rho = "" if r["spearman"] is None else f"{r['spearman']:+.3f}"
        lines.append(f"| {label(r['model'])} | {r['dataset']} | {r['variant']} | {r['shots']} | {r['judge']} | "
                     f"{r['sets']} | {r['posix']:.3f} | {r['judged_share']:.3f} | {interval} | {rho} |")
    lines += ["", "Judged the same: the share of a set's variants the judge called the same as the original's "
                  "response (identical ones included), its mean over the sets judged; the interval is the expanded "
                  "bootstrap over them. A low ρ or one below 0: ψ ranks the sets otherwise than the judge reads "
                  "them."]
    return "\n".join(lines), out
