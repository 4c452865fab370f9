"""The classification summary: S_τ over samples, C_y over pairs of same-class samples, micro-F1 per rephrasing, how
the answers spread over the classes, the accuracy block, the noise floor (task.repeats) and the structured answers'
failures (strategy=structured); and its Markdown, ``summary.md``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from posixlab.answers import accuracy_summary
from posixlab.metrics.classification import NA, consistency, consistency_interval, micro_f1
from posixlab.metrics.stats import bootstrap_ci, interval_method
from posixlab.metrics.noise import noise_floor_from_records
from posixlab.models.capabilities import DETERMINISTIC
from posixlab.results import SUMMARY_FILE, SUMMARY_MD
from posixlab.structured.summary import structured_summary

# what summaries saved before runs recorded meta["capabilities"] (old shards, merged again) tell from the backend's
# name: greedy at temperature 0 repeats itself there
OLD_DETERMINISTIC_BACKENDS = ("transformers", "in_process", "vllm")


def deterministic_stack(meta: dict) -> bool:
    """Whether the run's model repeats its greedy answer to the same prompt (the ``deterministic`` capability, from
    ``meta["capabilities"]``; a summary saved without them is read by its backend's name).

    >>> deterministic_stack({"capabilities": ["deterministic", "generate"]}), deterministic_stack({"model": {}})
    (True, False)
    """
    if "capabilities" in meta:
        return DETERMINISTIC in meta["capabilities"]
    return (meta.get("model") or {}).get("backend") in OLD_DETERMINISTIC_BACKENDS


def _stats(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if len(a) > 1 else None,
            "median": float(np.median(a))}


def build_classification_summary(records: list[dict], classes: list[str], num_rephrasings: int, meta: dict) -> dict:
    """S_τ over samples (its 95% expanded percentile bootstrap interval over samples, seeded by the run's seed as
    POSIX's over sets; and per gold class), C_y (Eq. 7: per class over pairs of distinct samples, then the unweighted
    mean over classes, with its interval over the same resampled samples; also with self-pairs and pooled), micro-F1
    per rephrasing (when every sample has a gold label)."""
    real = [c for c in classes if c != NA]
    s_values = [r["sensitivity"] for r in records]
    gold = [r["gold"] for r in records]
    per_class_s = {c: float(np.mean([r["sensitivity"] for r in records if r["gold"] == c]))
                   for c in real if any(r["gold"] == c for r in records)}
    distributions = np.array([r["distribution"] for r in records])
    has_gold = any(g is not None for g in gold)
    summary = {"task": "classification", **meta, "classes": classes, "num_rephrasings": num_rephrasings,
               "num_samples": len(records),
               "sensitivity": {**_stats(s_values), "ci95": list(bootstrap_ci(s_values, seed=meta.get("seed", 0),
                                                                                     bounds=(0.0, 1.0)))  # S in [0, 1]
                               if s_values else None, "ci_method": interval_method(len(s_values)),
                               "per_class": per_class_s}}
    if has_gold:
        c = consistency(distributions, gold, real)
        with_self = consistency(distributions, gold, real, self_pairs=True)
        ci = consistency_interval(distributions, gold, real, seed=meta.get("seed", 0)) if c["mean"] is not None \
            else None
        summary["consistency"] = {"mean": c["mean"], "ci95": None if ci is None else list(ci),
                                  "ci_method": None if ci is None else "percentile bootstrap",
                                  "per_class": c["per_class"], "self_pairs": False,
                                  "pooled": c["pooled"], "num_pairs": c["num_pairs"],
                                  "mean_with_self_pairs": with_self["mean"],
                                  "per_class_with_self_pairs": with_self["per_class"],
                                  "pooled_with_self_pairs": with_self["pooled"]}
    else:
        summary["consistency"] = None
    if has_gold and all(g is not None for g in gold):
        f1 = [micro_f1(gold, [r["predictions"][q]["label"] for r in records]) for q in range(num_rephrasings)]
        summary["micro_f1"] = {**_stats(f1), "per_rephrasing": f1}
    else:
        summary["micro_f1"] = None
        unlabelled = sum(g is None for g in gold)
        summary["notes"] = [*summary.get("notes", []), (
            "no gold labels: sensitivity S is reported; consistency C and micro-F1 need gold labels and are left out"
            if not has_gold else f"{unlabelled} of {len(gold)} samples have no gold label: micro-F1 needs one on "
                                 f"every sample and is left out (C uses the labelled samples)")]
    summary["na_share"] = float(np.mean([p["label"] == NA for r in records for p in r["predictions"]]))
    if num_rephrasings == 1:
        summary["notes"] = [*summary.get("notes", []), (
            "Q = 1: one prompt per sample, so S is 0 by construction (set task.num_rephrasings=2 or more to measure "
            "sensitivity)")]
    summary["answers"] = answer_spread(records, classes)
    if summary["micro_f1"] is not None:  # what always answering the most frequent gold class would score
        summary["micro_f1"]["majority_baseline"] = summary["answers"]["gold_majority_share"]
    if summary["answers"]["one_class"]:
        a = summary["answers"]
        summary["notes"] = [*summary.get("notes", []), (
            f"{a['majority_share']:.0%} of the {a['num_answers']} answers are {a['majority_class']!r}: the "
            f"classifier (nearly) always gives one class, so a low S and a high C say nothing about its robustness "
            f"(the gate fails such a run: gate.max_answer_share)")]
    summary["accuracy"] = classification_accuracy(records, num_rephrasings, meta.get("seed", 0))
    # task.repeats: S and C of the repeats alone, beside the rephrasings'
    backend = (meta.get("model") or {}).get("backend")
    summary["noise_floor"] = noise_floor_from_records(records, classes, meta.get("seed", 0), backend=backend,
                                                      deterministic_stack=deterministic_stack(meta))
    summary["structured"] = structured_summary(records, classes, meta.get("schema_dimensions"),
                                               meta.get("schema_changes"), meta.get("probability", "greedy"))
    return summary


ONE_CLASS_SHARE = 0.95  # answers this concentrated on one class are reported as a (nearly) constant classifier


def answer_spread(records: list[dict], classes: list[str]) -> dict:
    """How the answers (every sample × rephrasing, repeat 0; N/A counted as a class) spread over the classes: the
    most frequent answer and its share, each class's share, and the gold labels' majority share (the micro-F1 of a
    classifier that always answers the majority class). ``one_class``: the top share is at least 0.95.

    >>> recs = [{"gold": g, "predictions": [{"label": "a"}, {"label": "a"}]} for g in "aab"]
    >>> s = answer_spread(recs, ["a", "b", "N/A"])
    >>> s["majority_class"], s["majority_share"], s["one_class"], round(s["gold_majority_share"], 3)
    ('a', 1.0, True, 0.667)
    """
    labels = [p["label"] for r in records for p in r["predictions"]]
    counts = {c: labels.count(c) for c in classes}
    top = max(counts, key=counts.get)
    gold = [r["gold"] for r in records if r["gold"] is not None]
    # ties go to the class listed first (a set's order would change from run to run)
    gold_top = max((c for c in classes if c in gold), key=gold.count, default=None)
    share = counts[top] / max(1, len(labels))
    return {"majority_class": top, "majority_share": share, "num_answers": len(labels),
            "per_class_share": {c: n / max(1, len(labels)) for c, n in counts.items()},
            "one_class": share >= ONE_CLASS_SHARE, "gold_majority_class": gold_top,
            "gold_majority_share": gold.count(gold_top) / len(gold) if gold else None}


def classification_accuracy(records: list[dict], num_rephrasings: int, seed: int = 0) -> dict | None:
    """The multi-prompt accuracy block (``posixlab/answers.py``) over samples × rephrasings: prompt q is rephrasing
    q of the task sentence; an N/A answer is wrong and counts as unparsed. None without gold labels."""
    scored = [r for r in records if r["gold"] is not None]
    if not scored:
        return None
    as_sets = [{"prompts": [{"kind": "original" if q == 0 else "rephrasing"} for q in range(num_rephrasings)],
                "answers": [{"gold": r["gold"], "by_options": None,
                             "by_greedy": {"pred": None if p["label"] == NA else p["label"],
                                           "parsed": p["label"] != NA, "correct": p["label"] == r["gold"]}}
                            for p in r["predictions"]]} for r in scored]
    block = accuracy_summary(as_sets, seed=seed)
    block["note"] = ("prompt q = rephrasing q of the task sentence (0: the original); the answer is the class "
                     "p(y | x, rephrasing) puts first (greedy: the parsed answer, N/A = unparsed and wrong)")
    return block


def write_classification_summary(folder: str | Path, summary: dict) -> None:
    """A classification run's ``summary.json`` and ``summary.md`` (``tasks.classification.build_classification_summary``)."""
    folder = Path(folder)
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / SUMMARY_MD).write_text(classification_summary_markdown(summary), encoding="utf-8")


def _f(x, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def answer_spread_lines(answers: dict | None) -> list[str]:
    """The most frequent answer and its share (``summary["answers"]``), one line and a blank; none in older runs."""
    if not answers:
        return []
    gold = "" if answers["gold_majority_class"] is None else (
        f" (the most frequent gold class, {answers['gold_majority_class']!r}, is "
        f"{answers['gold_majority_share']:.0%} of the samples)")
    flag = " **One class: a (nearly) constant classifier.**" if answers["one_class"] else ""
    return [f"Most frequent answer: {answers['majority_class']!r}, {answers['majority_share']:.0%} of the "
            f"{answers['num_answers']} answers{gold}.{flag}", ""]


def classification_summary_markdown(summary: dict) -> str:
    s, c, f1 = summary["sensitivity"], summary["consistency"], summary["micro_f1"]
    lines = [f"# Classification: {summary['model'].get('name')} · {summary['dataset']} · {summary['strategy']} · "
             f"{summary['probability']}", "",
             f"{summary['num_samples']} samples × Q = {summary['num_rephrasings']} rephrasings of the task sentence; "
             f"answers naming no class (N/A): {summary['na_share']:.1%}.", "", *answer_spread_lines(summary.get("answers")),
             *[f"Note: {note}." for note in summary.get("notes") or []], *([""] if summary.get("notes") else []),
             "| metric | value |", "|---|---|",
             f"| sensitivity S_τ (mean ± sd over samples) | {_f(s['mean'])} ± {_f(s['sd'])} |",
             *([f"| sensitivity S_τ, 95% interval (bootstrap over samples) | {_f(s['ci95'][0])} to "
                f"{_f(s['ci95'][1])} |"] if s.get("ci95") else []),
             f"| consistency C_y (mean over classes, no self-pairs) | {_f(c['mean']) if c else '—'} |",
             *([f"| consistency C_y, 95% interval (bootstrap over samples) | {_f(c['ci95'][0])} to "
                f"{_f(c['ci95'][1])} |"] if c and c.get("ci95") else []),
             f"| consistency, pooled over pairs / with self-pairs | "
             f"{_f(c['pooled']) if c else '—'} / {_f(c['mean_with_self_pairs']) if c else '—'} |",
             f"| micro-F1 (mean ± sd over rephrasings) | "
             f"{_f(f1['mean']) + ' ± ' + _f(f1['sd']) if f1 else '—'} |",
             *([f"| micro-F1 of always answering the majority gold class | {_f(f1['majority_baseline'])} |"]
               if f1 and f1.get("majority_baseline") is not None else []), "",
             "| class | sensitivity | consistency |", "|---|---|---|"]
    for cls in [x for x in summary["classes"] if x != NA]:
        lines.append(f"| {cls} | {_f(s['per_class'].get(cls))} | "
                     f"{_f((c['per_class'] or {}).get(cls)) if c else '—'} |")
    nf = summary.get("noise_floor")
    if nf:  # task.repeats = R: the same metrics from the repeats alone, on equal counts (docs/choices.md)
        eq, fp, rp, bn = nf["rephrasings_at_equal_count"] or {}, nf["fixed_prompt"], nf["rephrasings"], \
            nf["beyond_noise"] or {}

        def with_ci(d):
            return "—" if not d else _f(d["value"]) + (f" [{_f(d['ci95'][0])}, {_f(d['ci95'][1])}]"
                                                       if d.get("ci95") else "")
        share = bn.get("share_of_changes_from_rephrasing")
        lines += ["", f"## Noise floor (R = {nf['repeats']} repeats)", "",
                  f"Every prompt was sent R = {nf['repeats']} times. S and C compare groups of R answers on both "
                  f"sides: R rephrasings at one repeat, or one prompt's R repeats. Flip rate: the share of pairs of "
                  f"answers that differ (any two of the Q prompts at one repeat; two repeats of one prompt).", "",
                  "| | S | C | flip rate |", "|---|---|---|---|",
                  f"| rephrasings, repeat 0 (the paper's: Q = {nf['num_prompts']} answers a sample) | "
                  f"{_f(rp['sensitivity'])} | {_f(rp['consistency'])} | — |",
                  f"| rephrasings at equal count (blocks of R prompts) | {_f(eq.get('sensitivity'))} | "
                  f"{_f(eq.get('consistency'))} | {_f(eq.get('flip_rate'))} |",
                  f"| repeats alone (the prompt fixed: the floor) | {_f(fp['sensitivity'])} | "
                  f"{_f(fp['consistency'])} | {_f(fp['flip_rate'])} |",
                  f"| beyond the noise, 95% CI (C: floor − rephrasings) | {with_ci(bn.get('sensitivity'))} | "
                  f"{with_ci(bn.get('consistency'))} | {with_ci(bn.get('flip_rate'))} |", "",
                  f"Share of the prediction changes the rephrasings add beyond the noise: "
                  f"{'—' if share is None else f'{share:.1%}'}. {nf['stack_note'][:1].upper()}{nf['stack_note'][1:]}.",
                  *[f"Note: {note}." for note in (eq.get("note"), nf.get("note")) if note]]
    structured = summary.get("structured")
    if structured:
        f = structured["failures"]
        lines += ["", f"## Structured answers ({summary.get('structured_mode')} mode)", "",
                  f"Answers that are no valid object of their schema: {f['rate']:.1%} "
                  f"({', '.join(f'{k} {v}' for k, v in f['counts'].items())}); {f['note']}.", ""]
        if structured["per_dimension"]:
            lines += ["| dimension | variants | S (original + variants) | C | failure rate |", "|---|---|---|---|---|"]
            lines += [f"| {d['dimension']} | {d['num_variants']} | {_f(d['sensitivity'])} | {_f(d['consistency'])} | "
                      f"{d['failure_rate']:.1%} |" for d in structured["per_dimension"]]
            lines += ["", "| prompt | dimension | change | failure rate |", "|---|---|---|---|"]
            lines += [f"| {p['prompt']} | {p['dimension']} | {str(p['change']).replace('|', '/')} | "
                      f"{p['failure_rate']:.1%} |" for p in structured["per_prompt"]]
    return "\n".join(lines) + "\n"
