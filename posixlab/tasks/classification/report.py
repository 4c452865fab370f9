"""What a classification run's page in ``posixlab report`` shows (``ClassificationTask.report_sections``): S, C and
micro-F1 (and the noise floor with task.repeats ≥ 2), S and C per class, per schema dimension for schema variants,
the prompts (the task sentence's rephrasings, or the schema variants), and a table of every sample whose row opens
its answers under each prompt, those that differ from the sample's majority answer highlighted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from posixlab.metrics.classification import NA
from posixlab.rephrase.source import provenance_rows
from posixlab.report import html as h
from posixlab.tasks.base import model_name, unrecorded_words
from posixlab.results import REPHRASINGS_FILE

FIGURES = (("sensitivity_vs_consistency.png", "sensitivity against consistency"),)
TEXT_CHARS = 600  # of a sample's text in its detail


def sections(folder: Path, summary: dict, records: list[dict], prefix: str = "") -> str:
    document = _rephrasings(folder)
    prompts = prompt_texts(document)
    about = document.get("rephraser") or {}
    return "".join([_headline(summary), _noise_floor(summary), _per_class(summary), _structured(summary),
                    _writer(about), _prompts(prompts), _samples(records, prompts, prefix), _figures(folder)])


def values(records: list[dict]) -> list[float]:
    """S per sample."""
    return [float(r["sensitivity"]) for r in records if isinstance(r.get("sensitivity"), (int, float))]


def gate_detail(records: list[dict], summary: dict, row, unit_name: str, prefix: str) -> str | None:
    """The samples behind a failed consistency or micro-F1 threshold (those answered wrong most often), and the
    class behind a failed answer share; None: the task's default (the most sensitive samples, the worst prompts)."""
    if row.metric == "max_answer_share":
        a = summary.get("answers") or {}
        return f"{h.fmt(a.get('majority_share'), 3)} of the answers are {h.esc(a.get('majority_class'))}"
    if row.key not in ("consistency.mean", "micro_f1.mean"):
        return None
    wrong = [(r.get("sample_index", n), _wrong_share(r)) for n, r in enumerate(records) if r.get("gold") is not None]
    wrong.sort(key=lambda p: -p[1])
    return "answered wrong most often: " + ", ".join(
        f"{h.unit_link(prefix, n, f'{unit_name} {n}')} ({h.fmt(share, 2)})" for n, share in wrong[:5])


def _wrong_share(record: dict) -> float:
    labels = [p.get("label") for p in record.get("predictions") or []]
    return sum(label != record["gold"] for label in labels) / max(1, len(labels))


def partial_meta(meta: dict, config: dict, records: list[dict], classes: list[str] | None) -> dict:
    """The classification keys of a summary rebuilt from a killed run's ``config.yaml`` and records: the classes
    (the data set's, ``classes``; else those the records name, sorted), Q from the records."""
    task = config.get("task") or {}
    if classes is None:
        named = {r.get("gold") for r in records} | {p.get("label") for r in records for p in r.get("predictions", [])}
        classes = sorted(c for c in named if c is not None and c != NA)
    return {**meta, "dataset": (config.get("dataset") or {}).get("name"),
            "strategy": (config.get("strategy") or {}).get("name"), "probability": task.get("probability"),
            "classes": [*classes, NA], "num_rephrasings": len(records[0]["predictions"]) if records else 0,
            "repeats": task.get("repeats", 1), "variants": task.get("variants")}


# --- the run's blocks ----------------------------------------------------------------------------------------------
def _headline(summary: dict) -> str:
    s, c, f1 = summary.get("sensitivity") or {}, summary.get("consistency"), summary.get("micro_f1")
    model = model_name(summary)
    ci = "no interval from one sample, " if summary.get("num_samples") == 1 else \
        (f"95% CI {h.fmt(s['ci95'][0])} to {h.fmt(s['ci95'][1])}"
         + unrecorded_words(summary, "sensitivity.ci95")
         + ", " if s.get("ci95") else "")
    items = [("sensitivity S", h.fmt(s.get("mean")), f"{ci}sd {h.fmt(s.get('sd'))}, median {h.fmt(s.get('median'))}"),
             ("consistency C", h.fmt((c or {}).get("mean")), "no gold labels" if c is None else
              (f"95% CI {h.fmt(c['ci95'][0])} to {h.fmt(c['ci95'][1])}, " if c.get("ci95") else "")
              + f"pooled {h.fmt(c.get('pooled'))}"),
             ("micro-F1", h.fmt((f1 or {}).get("mean")), "" if not f1 else
              f"sd {h.fmt(f1.get('sd'))}; majority class alone {h.fmt(f1.get('majority_baseline'))}"),
             ("samples × Q", f"{summary.get('num_samples')} × {summary.get('num_rephrasings')}"),
             ("N/A answers", h.fmt(summary.get("na_share"), 3)), ("model", str(model)),
             ("data set", str(summary.get("dataset"))),
             ("strategy", f"{summary.get('strategy')} · {summary.get('probability')}")]
    notes = "".join(f'<p class="small">Note: {h.esc(n)}.</p>' for n in summary.get("notes") or [])
    return h.section("Headline", h.cards(items) + notes)


def _noise_floor(summary: dict) -> str:
    nf = summary.get("noise_floor")
    if not nf:
        return ""
    fixed, beyond = nf.get("fixed_prompt") or {}, nf.get("beyond_noise") or {}

    def with_ci(d):
        d = d or {}
        return h.fmt(d.get("value")) + (f" [{h.fmt(d['ci95'][0])}, {h.fmt(d['ci95'][1])}]" if d.get("ci95") else "")
    return h.section(f"Noise floor (R = {nf.get('repeats')} repeats of every prompt)", h.cards([
        ("S, prompt fixed (the floor)", h.fmt(fixed.get("sensitivity"))),
        ("C, prompt fixed", h.fmt(fixed.get("consistency"))),
        ("S beyond the noise", with_ci(beyond.get("sensitivity")), "95% CI"),
        ("C beyond the noise", with_ci(beyond.get("consistency")), "floor − rephrasings, 95% CI")])
        + f'<p class="small">{h.esc(nf.get("stack_note", ""))}</p>')


def _per_class(summary: dict) -> str:
    s, c = summary.get("sensitivity") or {}, summary.get("consistency") or {}
    classes = [x for x in summary.get("classes") or [] if x != NA]
    if not classes:
        return ""
    rows = [[h.cell(None, h.esc(x)), (s.get("per_class") or {}).get(x), (c.get("per_class") or {}).get(x)]
            for x in classes]
    return h.section("Per class", h.table([("class", "class"), ("s", "S"), ("c", "C")], rows))


def _structured(summary: dict) -> str:
    st = summary.get("structured")
    if not st:
        return ""
    f = st.get("failures") or {}
    note = f.get("note") or "an answer that is no valid object of its schema is N/A in S and C"
    body = (f"<p>Answers that are no valid object of their schema: {h.fmt(f.get('rate'), 3)} "
            f"({h.esc(', '.join(f'{k} {v}' for k, v in (f.get('counts') or {}).items()))}); {h.esc(note)}.</p>")
    dims = st.get("per_dimension") or []
    if dims:
        body += h.table([("dimension", "dimension"), ("variants", "variants"), ("s", "S (original + variants)"),
                         ("c", "C"), ("failure", "failure rate")],
                        [[h.cell(None, h.esc(d["dimension"])), d.get("num_variants"), d.get("sensitivity"),
                          d.get("consistency"), d.get("failure_rate")] for d in dims])
    return h.section(f"Schema variants: S and C per dimension ({summary.get('structured_mode')} mode)", body)


def _rephrasings(folder: Path) -> dict:
    """The run's ``rephrasings.json`` (its prompts and who wrote them); empty when the folder has none."""
    try:
        document = json.loads((Path(folder) / REPHRASINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _writer(about: dict) -> str:
    """Who wrote the task sentence's rephrasings (or the schema variants' texts), and how they measured."""
    rows = provenance_rows(about, about.get("rephrasing_quality"))
    return h.section("Who wrote the rephrasings", h.facts(rows)) if rows else ""


def prompt_texts(document: dict) -> list[dict]:
    """Each prompt q of the run: ``{"q", "kind", "text", "html"}`` from its ``rephrasings.json`` (``document``; a
    schema variant: its dimension and change, the schema's differing spans highlighted); empty without one."""
    schemas = document.get("schemas") or []
    if schemas:
        first = json.dumps(schemas[0].get("schema"), ensure_ascii=False)
        return [{"q": q, "kind": s.get("dimension"), "text": f"{s.get('dimension')}: {s.get('change')}",
                 "html": h.highlight_edit(first, json.dumps(s.get("schema"), ensure_ascii=False), 30) if q else
                 h.esc(first)} for q, s in enumerate(schemas)]
    return [{"q": q, "kind": "original" if q == 0 else "rephrasing", "text": text, "html": h.esc(text)}
            for q, text in enumerate(document.get("rephrasings") or [])]


def _prompts(prompts: list[dict]) -> str:
    if not prompts:
        return ""
    rows = [[p["q"], h.cell(None, h.esc(p["kind"])), h.cell(None, h.esc(p["text"]))] for p in prompts]
    schemas = "".join(f'<div class="prompt"><span class="tag">{p["q"]} · {h.esc(p["kind"])}</span> {p["html"]}</div>'
                      for p in prompts if p["kind"] not in ("original", "rephrasing"))
    body = h.table([("q", "q"), ("kind", "kind"), ("text", "task sentence / change")], rows)
    if schemas:
        body += h.section("each schema against the original (changed spans highlighted)",
                          f'<div class="prompt">{prompts[0]["html"]}</div>' + schemas, collapsed=True)
    return h.section(f"Prompts (Q = {len(prompts)})", body, collapsed=True)


def _figures(folder: Path) -> str:
    found = [(Path(folder) / "figures" / name, caption) for name, caption in FIGURES
             if (Path(folder) / "figures" / name).is_file()]
    return h.section("Figures", "".join(h.figure(p, c) for p, c in found), collapsed=True) if found else ""


# --- the samples ---------------------------------------------------------------------------------------------------
def majority(labels: list[str]) -> str | None:
    """The most common answer (ties: the one given first).

    >>> majority(["B", "A", "A", "B", "C"]), majority([])
    ('B', None)
    """
    counts = Counter(labels)
    return max(labels, key=lambda x: (counts[x], -labels.index(x))) if labels else None


def _samples(records: list[dict], prompts: list[dict], prefix: str) -> str:
    if not records:
        return h.section("Samples", "<p>No sample record in this folder.</p>")
    texts = {f"{prefix}q{p['q']}": p["text"] for p in prompts}

    def row_of(r: dict, index: int) -> list:
        labels = [p.get("label") for p in r.get("predictions") or []]
        top, gold = majority(labels), r.get("gold")
        return [index, h.cell(None, h.esc(r.get("sample_id"))), h.cell(None, h.esc(gold)), r.get("sensitivity"),
                h.cell(None, h.esc(top)), labels.count(top) / max(1, len(labels)),
                None if gold is None else sum(x == gold for x in labels) / max(1, len(labels)), labels.count(NA)]

    def detail_of(r: dict, index: int) -> tuple[str, str]:
        top = majority([p.get("label") for p in r.get("predictions") or []])
        return f"sample {index}: {r.get('sample_id')}", _sample_detail(r, top, prefix)

    rows, row_attrs, details, counts = h.unit_rows(
        records, [r.get("sensitivity") for r in records], "sample_index", prefix, row_of, detail_of)
    table = h.table([("sample", "sample"), ("sample_id", "sample id"), ("gold", "gold"), ("s", "S"),
                     ("majority", "majority answer"), ("agree", "share of the majority"), ("correct", "accuracy"),
                     ("na", "N/A")], rows, id=f"{prefix}units", row_attrs=row_attrs)
    note = ('<p class="small">Click a column to sort, a row to open the sample: its answer under every prompt, '
            "those that differ from its majority answer highlighted.</p>")
    note += h.details_note(counts, "sample", "S", "samples.jsonl")
    return h.section(f"Samples ({len(records)})", note + table + "".join(details) + h.refs_script(texts))


def _sample_detail(record: dict, top: str | None, prefix: str) -> str:
    text = record.get("text") or ""
    head = h.key_values([("gold", record.get("gold")), ("S", record.get("sensitivity")), ("majority answer", top)])
    head += f'<p class="response">{h.esc(text[:TEXT_CHARS])}{"…" if len(text) > TEXT_CHARS else ""}</p>'
    rows = []
    for p in record.get("predictions") or []:
        q = p.get("rephrasing")
        differs = " differs" if p.get("label") != top else ""
        repeats = p.get("repeat_labels")
        rows.append(f'<tr><td>{q}</td><td class="small" data-ref="{prefix}q{q}"></td>'
                    f'<td class="response">{h.esc(p.get("answer"))}</td>'
                    f'<td class="answer{differs}">{h.esc(p.get("label"))}</td>'
                    + (f'<td>{h.esc(" ".join(map(str, repeats)))}</td>' if repeats else "") + "</tr>")
    repeat_head = "<th>repeats</th>" if any(p.get("repeat_labels") for p in record.get("predictions") or []) else ""
    return (head + '<table class="answers"><thead><tr><th>q</th><th>prompt</th><th>answer</th><th>class</th>'
            f"{repeat_head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
