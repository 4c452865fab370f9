"""ψ against what a judge read (``posixlab judge``; a run's ``judge=``): one point a judged set, its ψ across and its
judged inconsistency (1 − the share of its variants the judge called the same as the original's response) up,
coloured by variant type where a run has several, with the judge's Spearman ρ in the title. Points low on the right
are sets whose responses ψ counts as changed and the judge reads as the same answer: where tokens overstate the
change ("Flaw or Artifact?"; arXiv 2605.02038). Drawn into the judged folder's ``figures/`` beside the run's own
figures, and shown on the run's page.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from posixlab.analysis import style
from posixlab.analysis.figures import save

FIGURE = "psi_vs_judged"  # figures/psi_vs_judged.png and .pdf


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
    ``summary`` names; None where there is nothing to draw."""
    from posixlab.judge import judged_rows

    fig = judged_figure(judged_rows(folder, summary), summary)
    return None if fig is None else save(fig, Path(folder) / "figures", FIGURE)[0]
