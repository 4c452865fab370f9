"""The report page's building blocks: HTML escaping, the page shell with its inline CSS and JS, and helpers (a
sortable table, a heat map, an edit highlighted against the original, stat cards, inline SVG distributions, a PNG
as a data URI). Pure functions of their arguments that return HTML text; nothing here knows a task (tasks import
this module, ``posixlab.report.build`` puts the page together).

The page opens from disk with no server and no network: every style, script and figure is inline, and the script
is plain JavaScript. What the script does, by markup (the DOM contract ``tests/test_report*.py`` read):

- ``<table class="sortable">``: a click on a ``<th data-sort="KEY">`` sorts the rows by that column (by each
  cell's ``data-v`` when it has one, numerically when every value is a number), a second click reverses;
- ``<tr class="unit" data-detail="ID">`` and ``<a class="unit-link" data-detail="ID">``: a click shows the hidden
  ``<section class="detail" id="ID">`` (and hides the one shown before); a click on the same row hides it again;
- ``<div class="heatmap" data-matrix="[[...]]">``: drawn as a table (a colour per value, the value on hover) the
  first time its section is shown, so a page of many matrices stays small;
- ``<td data-ref="KEY">``: filled with the text ``KEY`` names in a ``<script class="refs">`` JSON object of the
  page (a text many rows repeat, written once).
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import difflib
import html
import json
import math
import re
from pathlib import Path


def esc(text) -> str:
    """``text`` as HTML text (quotes too, so that it is safe in an attribute).

    >>> esc('<b> & "x"')
    '&lt;b&gt; &amp; &quot;x&quot;'
    """
    return html.escape("" if text is None else str(text), quote=True)


WHITESPACE_SHOWN = {"\n": "⏎", "\t": "⇥", " ": "␣", "\r": "␍"}


def response_text(text) -> str:
    """A model's response as HTML: as written (its cell keeps the line breaks), or, where a cell would show nothing,
    what it is: empty (the model's first token ended it) or whitespace only, each character named.

    >>> response_text("a < b"), response_text(None)
    ('a &lt; b', '')
    >>> response_text("")
    '<span class="blank">(empty: the first token ended it)</span>'
    >>> response_text("\\n\\n ")
    '<span class="blank">(whitespace only: ⏎⏎␣)</span>'

    Three or more line breaks in a row are one line break and their count, so that a cell stays a few lines tall:

    >>> response_text("Sure,\\n\\n\\n\\n\\nThe")
    'Sure,\\n<span class="blank">(⏎ × 5)</span>\\nThe'
    """
    if text is None or str(text).strip():
        return re.sub(r"\n{3,}", lambda m: f'\n<span class="blank">(⏎ × {len(m.group(0))})</span>\n', esc(text))
    if not text:
        return '<span class="blank">(empty: the first token ended it)</span>'
    shown = "".join(WHITESPACE_SHOWN.get(c, f"U+{ord(c):04X} ") for c in str(text))
    return f'<span class="blank">(whitespace only: {esc(shown.strip())})</span>'


def fmt(value, digits: int = 4) -> str:
    """A number as the report writes it: ``digits`` decimals for a float, as is for an int, "—" for a missing one.

    >>> fmt(0.29207693), fmt(3), fmt(None), fmt(float("nan")), fmt(True)
    ('0.2921', '3', '—', '—', 'True')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def attrs(**values) -> str:
    """HTML attributes from keywords (``data_sort`` is ``data-sort``, ``cls`` is ``class``); None and False are
    left out, True is a bare attribute.

    >>> attrs(cls="unit", data_index=3, hidden=True, title=None)
    ' class="unit" data-index="3" hidden'
    """
    out = []
    for key, value in values.items():
        name = "class" if key == "cls" else key.replace("_", "-")
        if value is None or value is False:
            continue
        out.append(f" {name}" if value is True else f' {name}="{esc(value)}"')
    return "".join(out)


# --- blocks ----------------------------------------------------------------------------------------------------------
def section(title: str, body: str, *, id: str | None = None, cls: str | None = None, collapsed: bool = False) -> str:
    """A titled section; ``collapsed``: a ``<details>`` the reader opens (no script needed)."""
    if collapsed:
        return f"<details{attrs(id=id, cls=cls)}><summary>{esc(title)}</summary>{body}</details>"
    return f"<section{attrs(id=id, cls=cls)}><h2>{esc(title)}</h2>{body}</section>"


# What one page carries of its runs' units, shared by the runs it shows (a run's own page: all of it): a paper-sized
# cell (14,042 MMLU sets) with every set's details would be a 200 MB page, and a grid's page of 64 such cells, each
# with its whole table of sets and 500 details, 700 MB. A run with fewer units than its share shows them all.
DETAIL_UNITS = 500  # units whose details (prompts, responses, matrix) a page carries
TABLE_UNITS = 20_000  # rows of the units' tables (about 300 bytes each)
MIN_DETAIL_UNITS, MIN_TABLE_UNITS = 10, 200  # a run's share, however many runs a page shows
_runs_on_page = contextvars.ContextVar("runs_on_page", default=1)
_linked = contextvars.ContextVar("linked_units", default=None)  # (prefix, unit index) a link on the page opens


@contextlib.contextmanager
def page_of_runs(count: int):
    """While a page of ``count`` runs is drawn, each run's table and details get their share of the page's, and
    the units its links open (``unit_link``) keep their rows and details."""
    tokens = _runs_on_page.set(max(1, count)), _linked.set(set())
    try:
        yield
    finally:
        _runs_on_page.reset(tokens[0])
        _linked.reset(tokens[1])


def unit_link(prefix: str, index, label: str) -> str:
    """A link that opens a unit's detail (``<a class="unit-link">``), e.g. from a failed gate; on a page being drawn
    the unit keeps its row and its detail whatever its rank, when its run's units are drawn after the link."""
    linked = _linked.get()
    if linked is not None:
        linked.add((prefix, index))
    return (f'<a href="#{esc(prefix)}unit-{esc(index)}" class="unit-link" data-detail="{esc(prefix)}unit-{esc(index)}">'
            f"{esc(label)}</a>")


def _share(total: int, least: int) -> int:
    """A run's share of a page's ``total``: an even split, but never below ``least`` (nor above ``total``)."""
    return max(min(least, total), total // _runs_on_page.get())


def _highest(values: list, limit: int) -> set[int]:
    """The positions of the ``limit`` highest values (ties and units without a value after, in order); all when
    there are at most ``limit``.

    >>> sorted(_highest([0.1, 0.9, None, 0.5], 2)), len(_highest([None] * 3, 5))
    ([1, 3], 3)
    """
    if len(values) <= limit:
        return set(range(len(values)))
    ranked = sorted(range(len(values)), key=lambda n: (values[n] is None, -(values[n] or 0.0), n))
    return set(ranked[:limit])


def unit_rows(records: list[dict], values: list, index_key: str, prefix: str, row_of, detail_of, whole=None):
    """A run's units as the page shows them: the rows of its table and the details that open from them, for the
    units with the highest values (ψ, S: where a reader looks first) when the run's share of the page
    (``DETAIL_UNITS``, ``TABLE_UNITS``) holds fewer than all, and those a link opens (``unit_link``); in the
    records' order. ``row_of(record, index)``: the
    row's cells; ``detail_of(record, index)``: the detail's title and body, given the record whole: ``whole(indices)``
    reads those of the detailed units (by index) where ``records`` leave out what only a detail reads. Returns the
    rows, their attributes, the details, and the counts ``details_note`` takes (units in the table, with details, in
    the run)."""
    linked = _linked.get() or set()
    kept = {n for n, record in enumerate(records) if (prefix, record.get(index_key, n)) in linked}
    shown = _highest(values, _share(TABLE_UNITS, MIN_TABLE_UNITS)) | kept
    detailed = _highest(values, _share(DETAIL_UNITS, MIN_DETAIL_UNITS)) | kept  # the first of ``shown``, and kept
    rows, row_attrs, details = [], [], []
    full = whole({records[n].get(index_key, n) for n in detailed}) if whole is not None else {}
    for n, record in enumerate(records):
        if n not in shown:
            continue
        index = record.get(index_key, n)
        rows.append(row_of(record, index))
        if n in detailed:
            row_attrs.append({"cls": "unit", "data_index": index, "data_detail": f"{prefix}unit-{index}"})
            details.append(detail(f"{prefix}unit-{index}", *detail_of(full.get(index, record), index)))
        else:
            row_attrs.append({"data_index": index})
    return rows, row_attrs, details, (len(shown), len(detailed), len(records))


def details_note(counts: tuple[int, int, int], unit: str, key: str, records_file: str) -> str:
    """What a capped page says above a run's table (nothing when every unit and its details are on it).
    ``counts``: units in the table, with details, in the run (``unit_rows``)."""
    shown, detailed, total = counts
    if detailed >= total:
        return ""
    runs = _runs_on_page.get()
    if shown >= total:
        table = f"all {total} are in the table"
    elif runs > 1:
        table = (f"the table holds the {shown} highest of its {total} (a page of {runs} runs shares its room among "
                 f"them: <code>posixlab report</code> on this run's folder alone shows more)")
    else:
        table = f"the table holds the {shown} highest of its {total} (a page holds at most {TABLE_UNITS:,} rows)"
    return (f'<p class="small">This page carries the details of the {detailed} {esc(unit)}s with the highest '
            f"{esc(key)} (their rows open); {table}, and every {esc(unit)}'s record is in {esc(records_file)}.</p>")


def detail(detail_id: str, title: str, body: str) -> str:
    """A unit's detail, hidden until its row is clicked (``<tr data-detail=...>``)."""
    return (f'<section class="detail" id="{esc(detail_id)}" hidden><h3>{esc(title)} '
            f'<button type="button" class="close" aria-label="close">×</button></h3>{body}</section>')


def banner(text: str, *, id: str | None = None, kind: str = "note") -> str:
    """A strip across the page: ``kind`` warn (partial run, old results) or note."""
    return f'<div{attrs(id=id, cls=f"banner {kind}")}>{text}</div>'


def cards(items: list[tuple[str, str] | tuple[str, str, str]]) -> str:
    """Stat cards: (label, value) or (label, value, small print), each value already formatted.

    >>> cards([("POSIX", "0.2921", "95% CI 0.19 to 0.41")]).count('class="card"')
    1
    """
    out = []
    for item in items:
        label, value, note = (*item, "")[:3]
        out.append(f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div>'
                   + (f'<div class="small">{esc(note)}</div>' if note else "") + "</div>")
    return f'<div class="cards">{"".join(out)}</div>'


def key_values(rows: list[tuple[str, object]]) -> str:
    """A two-column table of names and values (numbers formatted by ``fmt``)."""
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(fmt(v))}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def cell(value, html_text: str | None = None, *, cls: str | None = None, title: str | None = None) -> dict:
    """A table cell: ``value`` sorts it; ``html_text`` (already HTML) shows instead of the formatted value."""
    return {"v": value, "html": html_text, "cls": cls, "title": title}


def _td(item) -> str:
    c = item if isinstance(item, dict) else cell(item)
    value = c["v"]
    shown = c["html"] if c["html"] is not None else esc(fmt(value))
    sort = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(sort, float) and not math.isfinite(sort):
        sort = None
    return f"<td{attrs(cls=c['cls'], title=c['title'], data_v=None if sort is None else repr(sort))}>{shown}</td>"


def facts(rows: list[tuple[str, str]]) -> str:
    """A two-column table of (label, text) rows, in their order."""
    return table([("what", "what"), ("value", "value")], [[cell(None, esc(a)), cell(None, esc(b))] for a, b in rows],
                 sortable=False)


def table(columns: list[tuple[str, str]], rows: list[list], *, id: str | None = None, sortable: bool = True,
          row_attrs: list[dict] | None = None, cls: str = "") -> str:
    """A table: ``columns`` (key, heading); each row a list of values or ``cell``s; ``row_attrs``: per row, the
    keywords of ``attrs`` (a unit row: ``cls="unit", data_index=I, data_detail=ID``).

    >>> t = table([("psi", "ψ")], [[0.5], [0.25]], id="units", row_attrs=[{"cls": "unit", "data_index": 0}, {}])
    >>> '<th data-sort="psi"' in t, '<tr class="unit" data-index="0">' in t, 'data-v="0.25"' in t
    (True, True, True)
    """
    classes = " ".join(c for c in ("sortable" if sortable else "", cls) if c) or None
    head = "".join(f"<th{attrs(data_sort=key if sortable else None)}>{esc(label)}</th>" for key, label in columns)
    body = []
    for n, row in enumerate(rows):
        extra = attrs(**(row_attrs[n] if row_attrs else {}))
        body.append(f"<tr{extra}>{''.join(_td(item) for item in row)}</tr>")
    return f"<table{attrs(id=id, cls=classes)}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def heatmap(matrix: list[list[float]], *, row_label: str = "row", col_label: str = "column",
            caption: str = "") -> str:
    """A matrix as a heat map, drawn by the page's script when its section is first shown (a colour per value on one
    scale from the matrix's lowest to its highest finite value, the value on hover, the diagonal outlined); the
    legend is drawn here. Non-finite values are blank.

    >>> h = heatmap([[-1.0, -2.5], [-3.0, -0.5]], row_label="prompt", col_label="response")
    >>> 'class="heatmap"' in h, 'data-matrix="[[-1.0, -2.5], [-3.0, -0.5]]"' in h, "-3.000" in h
    (True, True, True)
    """
    values = [[round(v, 3) if isinstance(v, (int, float)) and math.isfinite(v) else None for v in row]
              for row in matrix]
    finite = [v for row in values for v in row if v is not None]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    legend = (f'<div class="legend"><span>{low:.3f}</span><span class="scale"></span><span>{high:.3f}</span>'
              f'<span class="small">{esc(caption)}</span></div>')
    return (f'<div{attrs(cls="heatmap", data_matrix=json.dumps(values), data_low=low, data_high=high, data_rows=row_label, data_cols=col_label)}>'
            f"</div>{legend}")


def highlight_edit(original: str, variant: str, context: int | None = None) -> str:
    """``variant`` as HTML with what differs from ``original`` marked, character by character (difflib): inserted
    or replaced characters in ``<mark>``, removed ones as ``<del>``. ``context``: unchanged stretches longer than
    twice that keep ``context`` characters on each side of an edit, the rest an ellipsis (a long prompt's one edit
    stays readable).

    >>> highlight_edit("the cat sat", "teh cat sat")
    't<mark>e</mark>h<del>e</del> cat sat'
    >>> highlight_edit("the cat sat", "the ct sat")
    'the c<del>a</del>t sat'
    >>> highlight_edit("a long sentence with one typo in it", "a long sentence with one tpyo in it", context=4)
    '<span class="gap">…</span>ne t<mark>p</mark>y<del>p</del>o in it'
    >>> highlight_edit("same", "same")
    'same'
    """
    opcodes = _edit_opcodes(original, variant)
    out = []
    for n, (op, i1, i2, j1, j2) in enumerate(opcodes):
        if op == "equal":
            out.append(_trimmed(variant[j1:j2], context, first=n == 0, last=n == len(opcodes) - 1))
            continue
        if j2 > j1:
            out.append(f"<mark>{esc(variant[j1:j2])}</mark>")
        if i2 > i1:
            out.append(f"<del>{esc(original[i1:i2])}</del>")
    return "".join(out)


def _edit_opcodes(original: str, variant: str) -> list[tuple[str, int, int, int, int]]:
    """Opcodes (as difflib's) turning ``original`` into ``variant``, matched on the stretch between their common
    prefix and suffix only: a spelling variant's edits are few and close together. Character by character where
    that stretch is short; word by word where it is long (a paraphrase, a template: difflib's character matching
    grows with the square of the length, 10 ms for two unrelated 1,000-character texts and 55 ms at 2,000, and a page
    of 500 sets of 21 prompts runs it 10,000 times), then character by character within each short replaced run of
    words (a misspelt word keeps its letters marked).

    >>> _edit_opcodes("the cat sat", "teh cat sat")
    [('equal', 0, 1, 0, 1), ('insert', 1, 1, 1, 2), ('equal', 1, 2, 2, 3), ('delete', 2, 3, 3, 3), ('equal', 3, 11, 3, 11)]
    """
    prefix = 0
    while prefix < min(len(original), len(variant)) and original[prefix] == variant[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(original), len(variant)) - prefix
           and original[len(original) - 1 - suffix] == variant[len(variant) - 1 - suffix]):
        suffix += 1
    a, b = original[prefix:len(original) - suffix], variant[prefix:len(variant) - suffix]
    middle = _char_opcodes(a, b) if len(a) + len(b) <= CHARACTER_MATCHED else _word_opcodes(a, b)
    ops = [("equal", 0, prefix, 0, prefix)] if prefix else []
    ops += [(op, i1 + prefix, i2 + prefix, j1 + prefix, j2 + prefix) for op, i1, i2, j1, j2 in middle]
    if suffix:
        ops.append(("equal", len(original) - suffix, len(original), len(variant) - suffix, len(variant)))
    merged = []  # neighbouring equal stretches as one (as difflib gives them)
    for op in ops:
        if merged and op[0] == merged[-1][0] == "equal":
            merged[-1] = ("equal", merged[-1][1], op[2], merged[-1][3], op[4])
        else:
            merged.append(op)
    return merged


CHARACTER_MATCHED = 400  # characters (both sides together) a differing stretch has at most to be matched by character
WORD = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")  # a word or one other character, with the white space after it


def _char_opcodes(a: str, b: str) -> list[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if a or b else []


def _word_opcodes(a: str, b: str) -> list[tuple[str, int, int, int, int]]:
    """``a`` into ``b`` matched word by word; a replaced run of words short enough, character by character.

    >>> [op for op in _word_opcodes("the quick brown fox", "the quikc brown cat") if op[0] != "equal"]
    [('insert', 7, 7, 7, 8), ('delete', 8, 9, 9, 9), ('replace', 16, 19, 16, 19)]
    """
    words_a, words_b = WORD.findall(a), WORD.findall(b)
    at_a, at_b = _starts(words_a), _starts(words_b)
    out = []
    for op, w1, w2, v1, v2 in difflib.SequenceMatcher(None, words_a, words_b, autojunk=False).get_opcodes():
        i1, i2, j1, j2 = at_a[w1], at_a[w2], at_b[v1], at_b[v2]
        if op == "replace" and (i2 - i1) + (j2 - j1) <= CHARACTER_MATCHED // 4:
            out += [(o, x1 + i1, x2 + i1, y1 + j1, y2 + j1) for o, x1, x2, y1, y2 in _char_opcodes(a[i1:i2], b[j1:j2])]
        else:
            out.append((op, i1, i2, j1, j2))
    return out


def _starts(words: list[str]) -> list[int]:
    """Where each word starts in their text, and the text's length last."""
    starts = [0]
    for word in words:
        starts.append(starts[-1] + len(word))
    return starts


def _trimmed(text: str, context: int | None, first: bool, last: bool) -> str:
    gap = '<span class="gap">…</span>'
    if context is None or len(text) <= 2 * context + 1:
        return esc(text)
    if first and last:
        return esc(text)  # nothing changed: the whole text
    if first:
        return gap + esc(text[-context:])
    if last:
        return esc(text[:context]) + gap
    return esc(text[:context]) + gap + esc(text[-context:])


def png_data_uri(path: str | Path) -> str:
    """A PNG file as a ``data:`` URI (an image in the page itself)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def figure(path: str | Path, caption: str = "") -> str:
    return (f'<figure><img alt="{esc(caption or Path(path).stem)}" src="{png_data_uri(path)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


DOTS_PER_ROW = 400  # above this many units a run's row draws a dot per pixel its units fall on


def distributions(named: list[tuple[str, list[float]]], *, label: str = "value") -> str:
    """Several runs' per-unit values on one axis, as inline SVG: a row per run, a dot per unit (its value on hover),
    the median as a bar and the mean as a diamond. A row of more than ``DOTS_PER_ROW`` units draws a dot per pixel
    of the axis that units fall on (how many, and their range, on hover): a paper-sized cell's 14,042 dots, most of
    them on top of each other, were 1 MB of page and slow to draw.

    >>> svg = distributions([("run a", [0.1, 0.3]), ("run b", [0.2])], label="ψ")
    >>> svg.startswith("<svg") and svg.count("<circle") == 3
    True
    >>> many = distributions([("run", [n / 9999 for n in range(10000)])])
    >>> many.count("<circle") == 521 and "<title>20 units: 0.4990 to 0.5010</title>" in many
    True
    """
    finite = [v for _, values in named for v in values if math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    shown = [name if len(name) <= 44 else name[:43] + "…" for name, _ in named]  # the whole name on hover
    left = min(330, 16 + 7 * max(map(len, shown), default=0))  # room for the longest label (11 px: under 7 px a letter)
    width, row_h = 520, 34
    height = row_h * len(named) + 30

    def x(v: float) -> float:
        return left + (v - low) / (high - low) * width

    parts = [f'<svg class="dist" width="{left + width + 20}" height="{height}" '
             f'role="img" aria-label="{esc(label)} per unit">']
    for n, (name, values) in enumerate(named):
        y = 20 + n * row_h
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end"><title>{esc(name)}</title>'
                     f'{esc(shown[n])}</text>'
                     f'<line x1="{left}" x2="{left + width}" y1="{y}" y2="{y}" class="axis"/>')
        kept = sorted(v for v in values if math.isfinite(v))
        if len(kept) <= DOTS_PER_ROW:
            for v in kept:
                parts.append(f'<circle cx="{x(v):.1f}" cy="{y}" r="3.5"><title>{esc(fmt(v))}</title></circle>')
        else:
            pixels: dict[int, list[float]] = {}
            for v in kept:
                pixels.setdefault(round(x(v)), []).append(v)
            for px, on in pixels.items():
                about = fmt(on[0]) if len(on) == 1 else f"{len(on)} units: {fmt(on[0])} to {fmt(on[-1])}"
                parts.append(f'<circle cx="{px}" cy="{y}" r="3.5"><title>{esc(about)}</title></circle>')
        if kept:
            median, mean = kept[len(kept) // 2] if len(kept) % 2 else (kept[len(kept) // 2 - 1]
                                                                       + kept[len(kept) // 2]) / 2, sum(kept) / len(kept)
            parts.append(f'<line class="median" x1="{x(median):.1f}" x2="{x(median):.1f}" y1="{y - 10}" '
                         f'y2="{y + 10}"><title>median {esc(fmt(median))}</title></line>'
                         f'<path class="mean" d="M{x(mean):.1f} {y - 7}l5 7l-5 7l-5 -7z">'
                         f"<title>mean {esc(fmt(mean))}</title></path>")
    base = height - 8
    parts.append(f'<text x="{left}" y="{base}">{esc(fmt(low))}</text>'
                 f'<text x="{left + width}" y="{base}" text-anchor="end">{esc(fmt(high))}</text>'
                 f'<text x="{left + width / 2}" y="{base}" text-anchor="middle">{esc(label)}</text></svg>')
    return "".join(parts)


def refs_script(texts: dict[str, str]) -> str:
    """The texts ``<td data-ref="KEY">`` cells show, written once (``</`` escaped so no text ends the script).

    >>> refs_script({"q1": "</script>"})
    '<script type="application/json" class="refs">{"q1": "<\\\\/script>"}</script>'
    """
    data = json.dumps(texts, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/json" class="refs">{data}</script>'


def page(title: str, headline: str, body: str, *, subtitle: str = "") -> str:
    """The whole document: ``<body data-report="posixlab">``, ``<h1 id="headline">``, the body, the inline style
    and script. No external resource of any kind."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>"
            f'<body data-report="posixlab"><header><h1 id="headline">{esc(headline)}</h1>'
            + (f'<p class="subtitle">{esc(subtitle)}</p>' if subtitle else "")
            + f"</header><main>{body}</main><script>{JS}</script></body></html>\n")


CSS = """
:root{--ink:#1d2330;--muted:#5d6678;--line:#d9dee7;--bg:#f7f8fa;--accent:#2b5fb4;--warn:#b3261e;--ok:#1e7a3a}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--ink);background:var(--bg)}header{padding:18px 28px 8px;background:#fff;border-bottom:1px solid var(--line)}
h1{margin:0;font-size:24px}h2{font-size:18px;margin:0 0 10px}h3{font-size:15px;margin:0 0 8px}
.subtitle{color:var(--muted);margin:4px 0 0}main{padding:16px 28px 60px;max-width:1400px}
section,details{background:#fff;border:1px solid var(--line);border-radius:6px;padding:14px 16px;margin:0 0 16px}
details.measure{margin:10px 0;padding:8px 12px}
details>summary{cursor:pointer;font-weight:600}.small{color:var(--muted);font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:0 0 12px}.card{border:1px solid var(--line);border-radius:6px;
padding:8px 12px;min-width:140px;background:#fbfcfe}.card .label{color:var(--muted);font-size:12px}
.card .value{font-size:20px;font-weight:600}table{border-collapse:collapse;margin:6px 0 10px}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
table.sortable th[data-sort]{cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
tr.unit{cursor:pointer}tr.unit:hover{background:#eef3fb}tr.unit.open{background:#dde8f8}
td[data-v]{font-variant-numeric:tabular-nums}.kv th{font-weight:500;color:var(--muted)}
.detail{border-left:4px solid var(--accent)}.detail .close{float:right;border:0;background:none;font-size:18px;
cursor:pointer}.prompt{white-space:pre-wrap;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;
border-bottom:1px dashed var(--line);padding:3px 0}.prompt .tag{color:var(--muted);font-family:system-ui}
mark{background:#ffd76a;padding:0 1px}del{background:#f6c3c0;color:#7a1c16}.gap{color:var(--muted)}
.response{font:12px ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;color:#234}
.blank{color:#8a8f98;font-style:italic}
.answer.differs{background:#ffe3c2;font-weight:600}.fail{color:var(--warn);font-weight:600}.pass{color:var(--ok)}
tr.fail td{background:#fdecea}.banner{padding:10px 14px;border-radius:6px;margin:0 0 16px;border:1px solid}
.banner.warn{background:#fff4e5;border-color:#f0b45a}.banner.note{background:#eef3fb;border-color:#b9cbe9}
.heatmap table{border-collapse:collapse;font-size:10px}.heatmap td{width:16px;height:16px;padding:0;border:0}
.heatmap td.diag{outline:1px solid #000;outline-offset:-1px}.heatmap th{font-weight:400;color:var(--muted);
padding:0 3px;border:0;font-size:10px}.legend{display:flex;align-items:center;gap:6px;margin:4px 0 10px;font-size:12px}
.legend .scale{display:inline-block;width:160px;height:10px;background:linear-gradient(90deg,#fff7ec,#fc8d59,#7f0000)}
svg.dist{font-size:11px;fill:var(--ink)}svg.dist circle{fill:var(--accent);fill-opacity:.45}
svg.dist .axis{stroke:var(--line)}svg.dist .median{stroke:var(--warn);stroke-width:2}svg.dist .mean{fill:var(--ok)}
figure{display:inline-block;margin:6px 10px 6px 0}figure img{max-width:560px;border:1px solid var(--line)}
figcaption{color:var(--muted);font-size:12px}code{font-size:12px}
"""

JS = r"""
(function(){
"use strict";
function sortValue(td){
  if(!td){return "";}
  var v=td.getAttribute("data-v");
  return v!==null?v:td.textContent.trim();
}
function sortTable(th){
  var table=th.closest("table"),body=table.tBodies[0];
  var index=Array.prototype.indexOf.call(th.parentNode.children,th);
  var dir=th.getAttribute("aria-sort")==="ascending"?"descending":"ascending";
  Array.prototype.forEach.call(th.parentNode.children,function(h){h.removeAttribute("aria-sort");});
  th.setAttribute("aria-sort",dir);
  var rows=Array.prototype.slice.call(body.rows);
  var values=rows.map(function(r){return sortValue(r.cells[index]);});
  var numeric=values.every(function(v){return v===""||v==="—"||!isNaN(parseFloat(v))&&isFinite(v);});
  var keyed=rows.map(function(r,n){return {row:r,v:values[n],n:n};});
  keyed.sort(function(a,b){
    var x=a.v,y=b.v,c;
    if(numeric){
      var ex=(x===""||x==="—"),ey=(y===""||y==="—");
      if(ex||ey){return ex===ey?a.n-b.n:(ex?1:-1);}
      c=parseFloat(x)-parseFloat(y);
    }else{c=String(x).localeCompare(String(y));}
    if(c===0){return a.n-b.n;}
    return dir==="ascending"?c:-c;
  });
  keyed.forEach(function(k){body.appendChild(k.row);});
}
function colour(t){
  var stops=[[255,247,236],[252,141,89],[127,0,0]];
  t=Math.max(0,Math.min(1,t));
  var s=t<0.5?0:1,u=t<0.5?t*2:(t-0.5)*2,a=stops[s],b=stops[s+1];
  return "rgb("+a.map(function(x,i){return Math.round(x+(b[i]-x)*u);}).join(",")+")";
}
function drawHeatmap(div){
  if(div.getAttribute("data-drawn")){return;}
  div.setAttribute("data-drawn","1");
  var m=JSON.parse(div.getAttribute("data-matrix")||"[]");
  var low=parseFloat(div.getAttribute("data-low")),high=parseFloat(div.getAttribute("data-high"));
  var rows=div.getAttribute("data-rows")||"row",cols=div.getAttribute("data-cols")||"column";
  var table=document.createElement("table"),head=table.insertRow();
  head.appendChild(document.createElement("th"));
  m.forEach(function(_,j){var th=document.createElement("th");th.textContent=j;head.appendChild(th);});
  m.forEach(function(row,i){
    var tr=table.insertRow(),th=document.createElement("th");
    th.textContent=i;tr.appendChild(th);
    row.forEach(function(v,j){
      var td=tr.insertCell();
      if(i===j){td.className="diag";}
      if(v===null){td.title=rows+" "+i+", "+cols+" "+j+": n/a";return;}
      td.style.background=colour(high>low?(v-low)/(high-low):0.5);
      td.title=rows+" "+i+", "+cols+" "+j+": "+v.toFixed(3);
    });
  });
  div.appendChild(table);
}
var shown=null;
function show(id,row){
  var section=document.getElementById(id);
  if(!section){return;}
  var opened=document.querySelectorAll("tr.unit.open");
  Array.prototype.forEach.call(opened,function(r){r.classList.remove("open");});
  if(shown&&shown!==section){shown.hidden=true;}
  if(shown===section&&!section.hidden){section.hidden=true;shown=null;return;}
  section.hidden=false;shown=section;
  if(row){row.classList.add("open");}
  Array.prototype.forEach.call(section.querySelectorAll(".heatmap"),drawHeatmap);
  if(section.scrollIntoView){section.scrollIntoView({block:"nearest"});}
}
document.addEventListener("click",function(e){
  var t=e.target;
  if(!(t instanceof Element)){return;}
  var th=t.closest("table.sortable th[data-sort]");
  if(th){sortTable(th);return;}
  var close=t.closest(".detail .close");
  if(close){var s=close.closest(".detail");s.hidden=true;if(shown===s){shown=null;}return;}
  var link=t.closest(".unit-link");
  if(link){e.preventDefault();show(link.getAttribute("data-detail"),null);return;}
  var row=t.closest("tr.unit");
  if(row){show(row.getAttribute("data-detail")||("unit-"+row.getAttribute("data-index")),row);}
});
var texts={};
Array.prototype.forEach.call(document.querySelectorAll("script.refs"),function(s){
  var more=JSON.parse(s.textContent||"{}");
  Object.keys(more).forEach(function(k){texts[k]=more[k];});
});
Array.prototype.forEach.call(document.querySelectorAll("[data-ref]"),function(el){
  var k=el.getAttribute("data-ref");
  if(Object.prototype.hasOwnProperty.call(texts,k)){el.textContent=texts[k];}
});
})();
"""
