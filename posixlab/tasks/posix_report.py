"""What a POSIX run's page in ``posixlab report`` shows (``PosixTask.report_sections``): the headline (POSIX with
its interval, model, data set, variant, shots, N), the four factors, the accuracy block, who wrote the paraphrases
(a paraphrase or mixture run), where ψ comes from (the summary's most sensitive sets), and a table of every set whose
row opens the set: its N prompts with each variant's edit against the original highlighted, the responses and
answers, the N×N log-probability matrix as a heat map, and the prompt pairs that contribute most to ψ. Where a judge
read the run (``judge.json`` and ``judge.jsonl`` beside its records, for this run), its section, each set's judged
share in the table, and each variant's verdict (and the set's control) beside its response."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from posixlab.metrics.factors import LOGPROB_FACTOR_NOTE
from posixlab.metrics.selection import best_set_words
from posixlab.metrics.where import normalised_log_ratios
from posixlab.rephrase.source import provenance_rows
from posixlab.report import html as h
from posixlab.results import prompts_per_set, race_words
from posixlab.tasks.base import model_name, unrecorded_words

TOP_PAIRS = 5  # per set: the pairs whose terms of ψ are largest
CONTEXT = 40  # characters kept on each side of a variant's edit (the rest of the shared prompt is an ellipsis)
# the page shows the rest itself (the matrices, the accuracy block); a figure the run did not draw is left out
FIGURES = (("psi_histogram.png", "ψ per set"), ("position_bias.png", "position bias (format variants)"))
JUDGED_FIGURE = ("psi_vs_judged.png", "ψ against judged inconsistency (1 − judged share), a point a set")


def sections(folder: Path, summary: dict, records: list[dict], prefix: str = "", whole=None) -> str:
    """Every section of a POSIX run's page. ``whole``: reads the records of the sets whose details the page opens
    (by set index) when ``records`` are kept without texts (``results.without_texts``)."""
    from posixlab.judge import read_judged, verdicts_by_set

    judged, stale = read_judged(folder, summary)  # a judge of this run (judge.json), or why an earlier one is not
    verdicts = verdicts_by_set(folder, judged) or None  # its rows by set (none: no judged column)
    return "".join([
        _headline(summary), _factors(summary), _judged(judged, stale), _accuracy(summary), _paraphrases(summary),
        _where(summary, prefix), _sets(records, prefix, whole, verdicts),
        _figures(folder, FIGURES + (JUDGED_FIGURE,) * bool(verdicts))])  # an earlier run's judge: not its figure


def values(records: list[dict]) -> list[float]:
    """ψ per set (none in a psi=false run)."""
    return [float(r["psi"]) for r in records if isinstance(r.get("psi"), (int, float))]


def partial_meta(meta: dict, config: dict, records: list[dict]) -> dict:
    """The POSIX keys of a summary rebuilt from a killed run's ``config.yaml`` and records."""
    task = config.get("task") or {}
    return {**meta, "dataset": (config.get("dataset") or {}).get("name"),
            "dataset_source": (config.get("dataset") or {}).get("source"),
            "variant": (config.get("variant") or {}).get("name"), "shots": task.get("shots", config.get("shots", 0)),
            "max_new_tokens": config.get("max_new_tokens"),
            "psi_computed": bool(records) and all("psi" in r for r in records)}


# --- the headline and the run's blocks ---------------------------------------------------------------------------
def _headline(summary: dict) -> str:
    p = summary.get("psi")
    model = model_name(summary)
    about = [("model", str(model)), ("data set", f"{summary.get('dataset')}"
                                     + (f" ({summary['dataset_source']})" if summary.get("dataset_source") else "")),
             ("variant", str(summary.get("variant"))), ("shots", str(summary.get("shots", "—")))]
    if not p:
        return h.section("Headline", h.cards([("POSIX", "n/a", "psi=false: answers only"),
                                               ("sets", str(summary.get("num_sets"))), *about]))
    ci = p.get("ci95") or [None, None]
    n = prompts_per_set(summary)
    return h.section("Headline", h.cards([
        ("POSIX", h.fmt(p.get("posix")), "no interval from one set" if p.get("num_sets") == 1
         else f"95% CI {h.fmt(ci[0])} to {h.fmt(ci[1])}"
         + unrecorded_words(summary, "psi.ci95")),
        ("sets × N", f"{p.get('num_sets')} × {n}", f"sd {h.fmt(p.get('sd'))}, median {h.fmt(p.get('median'))}"),
        *about]))


FACTOR_NAMES = {"unique_responses": "unique responses", "response_entropy": "response entropy",
                "semantic_coherence": "semantic coherence", "logprob_variance": "log-prob variance",
                "logprob_sd": "log-prob sd"}


def _factors(summary: dict) -> str:
    factors = summary.get("factors") or {}
    if not factors:
        return ""
    rows = [[h.cell(None, h.esc(FACTOR_NAMES.get(k, k))), (v or {}).get("mean"), (v or {}).get("num_sets")]
            for k, v in factors.items()]
    return h.section("The four factors (paper §3.3), mean over sets",
                     h.table([("factor", "factor"), ("mean", "mean"), ("sets", "sets with a value")], rows,
                             sortable=False)
                     + f'<p class="small">{h.esc(LOGPROB_FACTOR_NOTE)}</p>')


ACCURACY_ROWS = (("accuracy", "accuracy (mean over prompts)"), ("spread.range", "spread (max − min over prompts)"),
                 ("worst_case", "worst case (right under every prompt)"), ("best_case", "best case"),
                 ("consistency_rate", "consistency rate"), ("max_p", "MaxP"), ("cps", "CPS"), ("pss", "PSS"))
ESTIMATED_ROWS = (("estimated.mean", "estimated over every set (PromptEval): mean"),  # task.prompt_share < 1
                  ("estimated.range", "estimated: spread (max − min)"), ("estimated.argmax", "estimated: best prompt"),
                  ("estimated.scored", "share of cells asked"))


POSITION_ROWS = (  # position bias (format variants: the gold shown equally often at every position)
    ("accuracy with the gold shown at 1, 2, ... (format prompts)",
     lambda b: " / ".join(h.fmt(g["accuracy"], 3) for g in b["by_gold_position"])),
    ("position bias: RStd of those accuracies", lambda b: h.fmt(b["rstd"])),
    ("share of picks at 1, 2, ...", lambda b: " / ".join(h.fmt(p["share"], 3) for p in b["picks"])),
    ("... with no preference", lambda b: " / ".join(h.fmt(p["expected"], 3) for p in b["picks"])),
    ("picks against no preference: χ² p", lambda b: h.fmt(None) if b["p_value"] is None else f"{b['p_value']:.3g}"))


def _judged(summary: dict | None, stale: str | None) -> str:
    """What ``posixlab judge`` found, where the run's folder holds its summary (judge.json) for this run
    (``judge.read_judged``: ``summary``, or why the one there is not shown, ``stale``)."""
    from posixlab.judge import judge_rows, judge_words

    if stale:
        return h.banner(h.esc(stale), kind="warn")
    try:
        rows, words = judge_rows(summary), judge_words(summary)
    except (KeyError, TypeError, AttributeError):  # none, or not a judge's summary: no section
        return ""
    return h.section("Judged by a model: which differing responses say the same", h.table(
        [("measure", "measure"), ("value", "value")], [[h.cell(None, h.esc(a)), h.cell(None, h.esc(b))]
                                                       for a, b in rows], sortable=False)
        + f'<p id="judged" class="small">{h.esc(words)} (posixlab judge; its verdicts: judge.jsonl)</p>'
        + "".join(h.banner(h.esc(f"the judge: {w}"), kind="warn") for w in summary.get("warnings") or []))


def _accuracy(summary: dict) -> str:
    block = summary.get("accuracy") or {}
    readings = [r for r in ("by_options", "by_greedy") if block.get(r)]
    if not readings:
        return ""
    rows = []
    estimated = any(block[r].get("estimated") for r in readings)
    for key, label in ACCURACY_ROWS + (ESTIMATED_ROWS if estimated else ()):
        rows.append([h.cell(None, h.esc(label)), *[_dig(block[r], key) for r in readings]])
    rows.append([h.cell(None, "95% interval"), *[h.cell(None, h.esc(" to ".join(h.fmt(v) for v in block[r]["ci95"])))
                                                 if block[r].get("ci95") else None for r in readings]])
    if any(block[r].get("best_prompts") for r in readings):  # template and format pools
        rows.append([h.cell(None, "within noise of the best (95%, paired exact tests)"),
                     *[h.cell(None, h.esc(best_set_words(block[r].get("best_prompts"), True))) for r in readings]])
    bias = block.get("position_bias") or {}
    for label, value in POSITION_ROWS if any(bias.get(r) for r in readings) else ():  # format variants
        rows.append([h.cell(None, h.esc(label)), *[h.cell(None, h.esc(value(bias[r]))) if bias.get(r) else None
                                                   for r in readings]])
    race = race_words(summary.get("race"))  # task.race_sets: what the race left and asked
    return h.section("Accuracy across prompts", h.table(
        [("measure", "measure"), *[(r, r.replace("by_", "")) for r in readings]], rows, sortable=False)
        + (f'<p id="race">{h.esc(race)}</p>' if race else "")
        + f'<p class="small">{h.esc(block.get("note", ""))}</p>')


def _paraphrases(summary: dict) -> str:
    """Who wrote a paraphrase or mixture run's paraphrases, told what, and how they measured (``variant_details``)."""
    details = summary.get("variant_details") or {}
    rows = provenance_rows(details, details.get("paraphrase_quality"))
    return h.section("Who wrote the paraphrases", h.facts(rows)) if rows else ""


def _dig(node: dict, dotted: str):
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _where(summary: dict, prefix: str) -> str:
    top = summary.get("most_sensitive") or []
    if not top:
        return ""
    rows = []
    for t in top:
        link = h.unit_link(prefix, t["set_index"], t.get("set_id"))
        rows.append([t["set_index"], h.cell(None, link), t["psi"], t.get("i"), t.get("j"), t.get("logp_i"),
                     t.get("logp_j"), t.get("length"), t.get("term"),
                     h.cell(None, h.response_text(t.get("response_j")), cls="response")])
    return h.section("Where ψ comes from: the most sensitive sets", h.table(
        [("set", "set"), ("set_id", "set id"), ("psi", "ψ"), ("i", "prompt i"), ("j", "response j"),
         ("logp_i", "log P(y_j | x_i)"), ("logp_j", "log P(y_j | x_j)"), ("length", "L_j"), ("term", "term"),
         ("response", "response j")], rows)
        + '<p class="small">The pair (i, j) whose term |log P(y_j | x_i) − log P(y_j | x_j)| / L_j of ψ is largest '
          "in each of the highest-ψ sets (posixlab/metrics/where.py).</p>")


def _figures(folder: Path, figures: tuple[tuple[str, str], ...] = FIGURES) -> str:
    found = [(Path(folder) / "figures" / name, caption) for name, caption in figures
             if (Path(folder) / "figures" / name).is_file()]
    if not found:
        return ""
    return h.section("Figures", "".join(h.figure(path, caption) for path, caption in found), collapsed=True)


# --- the sets ------------------------------------------------------------------------------------------------------
def _reading(record: dict) -> str:
    answers = record.get("answers") or []
    return "by_options" if any(a.get("by_options") for a in answers) else "by_greedy"


def set_accuracy(record: dict) -> tuple[float | None, float | None]:
    """A set's accuracy (share of its prompts answered right) and consistency (share of its prompts whose answer is
    the set's most common one), read by options when the run scored them, else by the greedy answer.

    >>> rec = {"answers": [{"gold": "A", "by_options": None, "by_greedy": {"pred": p, "correct": p == "A"}}
    ...                    for p in "AAB"]}
    >>> [round(x, 3) for x in set_accuracy(rec)]
    [0.667, 0.667]
    """
    reading = _reading(record)
    answers = [a[reading] for a in record.get("answers") or [] if a.get(reading)]  # none: a prompt not asked
    if not answers:
        return None, None
    correct = [a.get("correct") for a in answers if a.get("correct") is not None]
    preds = [a.get("pred") for a in answers]
    top = Counter(preds).most_common(1)[0][1]
    return (sum(map(bool, correct)) / len(correct) if correct else None), top / len(preds)


def _sets(records: list[dict], prefix: str, whole=None, verdicts: dict[str, dict] | None = None) -> str:
    """The sets table, each row opening its set; ``verdicts``: a judge's rows by set id (``verdicts_by_set``), which add
    each set's judged share to its row and each variant's verdict to its prompts."""
    if not records:
        return h.section("Sets", "<p>No set record in this folder.</p>")
    judged = verdicts or {}

    def row_of(r: dict, index: int) -> list:
        accuracy, consistency = set_accuracy(r)
        unique = (r.get("factors") or {}).get("unique_responses")
        share = [(judged.get(r.get("set_id")) or {}).get("judged_share")] if verdicts is not None else []
        return [index, h.cell(None, h.esc(r.get("set_id"))), h.cell(None, h.esc(r.get("subject") or "")),
                r.get("psi"), accuracy, consistency, *share, unique, len(r.get("prompts") or [])]

    rows, row_attrs, details, counts = h.unit_rows(
        records, [r.get("psi") for r in records], "set_index", prefix, row_of,
        lambda r, index: (f"set {index}: {r.get('set_id')}", _set_detail(r, judged.get(r.get("set_id")))), whole)
    table = h.table([("set", "set"), ("set_id", "set id"), ("subject", "subject"), ("psi", "ψ"),
                     ("accuracy", "accuracy"), ("consistency", "consistency"),
                     *[("judged", "judged the same")] * (verdicts is not None), ("unique", "unique responses"),
                     ("n", "N")], rows, id=f"{prefix}units", row_attrs=row_attrs)
    note = ('<p class="small">Click a column to sort, a row to open its set. Accuracy: the share of the set\'s '
            "prompts answered right; consistency: the share whose answer is the set's most common one (options "
            "reading when the run scored the options, else the greedy answer)"
            + ("; judged the same: the share of its variants the judge called the same as the original's response "
               "(identical ones included), each variant's verdict beside its response" if verdicts is not None
               else "") + ".</p>")
    note += h.details_note(counts, "set", "ψ", "sets.jsonl")
    return h.section(f"Sets ({len(records)})", note + table + "".join(details))


def _set_detail(record: dict, judged: dict | None = None) -> str:
    answer = ("reference output (not graded)", record["reference_output"]) if record.get("reference_output") \
        else ("gold answer", record.get("answer"))
    about = h.key_values([("ψ", record.get("psi")), answer, ("variant type", record.get("variant_type")),
                          ("item", record.get("item_id"))])
    return about + _prompts(record, judged) + _matrix(record) + _pairs(record)


def _prompts(record: dict, judged: dict | None = None) -> str:
    """The set's prompts, responses and answers; ``judged``: the judge's row for the set, whose verdicts add a
    column (and its control a line under the table)."""
    prompts = record.get("prompts") or []
    responses = record.get("responses") or []
    answers = record.get("answers") or []
    reading = _reading(record)
    original = prompts[0]["text"] if prompts else ""
    by_prompt = {v.get("prompt"): v for v in (judged or {}).get("verdicts") or []}
    rows = []
    for k, p in enumerate(prompts):
        text = h.esc(p.get("text")) if k == 0 else h.highlight_edit(original, p.get("text") or "", CONTEXT)
        response = responses[k].get("text") if k < len(responses) else None
        answer = (answers[k].get(reading) or {}) if k < len(answers) else {}
        mark = "" if answer.get("correct") is None else ("✓" if answer["correct"] else "✗")
        verdict = f'<td class="small">{h.esc(verdict_words(by_prompt.get(k), k))}</td>' if judged else ""
        rows.append(f'<tr><td>{k}</td><td class="small">{h.esc(p.get("kind"))}</td>'
                    f'<td class="prompt">{text}</td><td class="response">{h.response_text(response)}</td>'
                    f'<td>{h.esc(answer.get("pred"))} {mark}</td>{verdict}</tr>')
    control = (judged or {}).get("control")
    return ('<h4>Prompts (each variant\'s edit against the original: <mark>added</mark>, <del>removed</del>), '
            'responses and answers</h4><table class="prompts"><thead><tr><th>#</th><th>kind</th><th>prompt</th>'
            f'<th>response</th><th>answer ({reading.replace("by_", "")})</th>'
            + ("<th>judge: the same as response 0?</th>" if judged else "") + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>"
            + (f'<p class="small">The judge\'s control: another question\'s response, shown as a response to this '
               f"prompt: {h.esc(verdict_words(control, None))} (a judge worth reading says different).</p>"
               if control else ""))


def verdict_words(verdict: dict | None, prompt: int | None) -> str:
    """A variant's verdict as the page shows it: identical (never asked), the same or different with the judge's
    P(yes) where it gave one, or its reply where it was neither yes nor no.

    >>> verdict_words({"identical": True, "equivalent": True}, 2), verdict_words(None, 0), verdict_words(None, 3)
    ('identical (not asked)', 'the original', 'not judged')
    >>> verdict_words({"identical": False, "equivalent": False, "p_same": 0.125, "replies": ["No"]}, 1)
    'different (P(yes) 0.125)'
    >>> verdict_words({"identical": False, "equivalent": None, "p_same": None, "replies": ["Maybe"]}, 1)
    "unparsed: 'Maybe'"
    """
    if verdict is None:
        return "the original" if prompt == 0 else "not judged"
    if verdict.get("identical"):
        return "identical (not asked)"
    if verdict.get("equivalent") is None:
        return f"unparsed: {' / '.join(map(repr, verdict.get('replies') or []))}"
    score = f" (P(yes) {verdict['p_same']:.3g})" if verdict.get("p_same") is not None else ""
    return ("the same" if verdict["equivalent"] else "different") + score


def _matrix(record: dict) -> str:
    matrix = record.get("logprob_matrix")
    if not matrix:
        return ""
    return ("<h4>Log-probability matrix M[i, j] = log P(response j | prompt i)</h4>"
            + h.heatmap(matrix, row_label="prompt", col_label="response",
                        caption="hover a cell for its value; the diagonal (outlined) is each prompt's own response"))


def top_pairs(matrix, lengths, k: int = TOP_PAIRS) -> list[dict]:
    """The ``k`` ordered pairs (i ≠ j) with the largest terms of ψ, |M[i, j] − M[j, j]| / L_j, largest first (ties
    to the lowest i, then j), as ``metrics.where.most_moved_pair`` picks the first.

    >>> [(p["i"], p["j"], p["term"]) for p in top_pairs([[-1.0, -2.0], [-3.0, -1.0]], [2, 2])]
    [(1, 0, 1.0), (0, 1, 0.5)]
    """
    ratios = normalised_log_ratios(matrix, lengths)
    terms = np.abs(ratios)
    np.fill_diagonal(terms, np.nan)
    m = np.asarray(matrix, dtype=np.float64)
    order = [(i, j) for i in range(len(m)) for j in range(len(m)) if not np.isnan(terms[i, j])]
    order.sort(key=lambda ij: -terms[ij])  # a stable sort keeps row-major order among ties
    return [{"i": i, "j": j, "logp_i": float(m[i, j]), "logp_j": float(m[j, j]), "length": int(lengths[j]),
             "log_ratio": float(ratios[i, j]), "term": float(terms[i, j])} for i, j in order[:k]]


def _pairs(record: dict) -> str:
    if not record.get("logprob_matrix") or not record.get("lengths"):
        return ""
    responses = record.get("responses") or []
    rows = [[p["i"], p["j"], p["logp_i"], p["logp_j"], p["length"], p["log_ratio"], p["term"],
             h.cell(None, h.response_text(responses[p["j"]].get("text") if p["j"] < len(responses) else None),
                    cls="response")]
            for p in top_pairs(record["logprob_matrix"], record["lengths"])]
    return ("<h4>The pairs that contribute most to ψ</h4>" + h.table(
        [("i", "prompt i"), ("j", "response j"), ("logp_i", "log P(y_j | x_i)"), ("logp_j", "log P(y_j | x_j)"),
         ("length", "L_j"), ("ratio", "(log P(y_j|x_i) − log P(y_j|x_j)) / L_j"), ("term", "term of ψ"),
         ("response", "response j")], rows, sortable=False))
