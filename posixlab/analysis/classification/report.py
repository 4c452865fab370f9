"""The "most sensitive samples" report (the paper's Appendix B workflow) of one classification run, as Markdown."""

from __future__ import annotations

import re
from collections import Counter

from posixlab.analysis.classification.load import ClassificationRun

TOP_K = 10


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
