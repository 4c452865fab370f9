"""An answer's class: the class it names, or ``N/A`` when it names none, with a record of how it was decided.

The authors' parser takes the first class label found anywhere in the answer as a substring, so for RTE the answer
"not entailment" counts as *entailment*. Ours:

- compares case-insensitively, with ``_`` and ``-`` read as spaces, on word boundaries (a label inside a longer
  word is no match; a plural ``s`` is allowed);
- tries longer labels first and blanks each match out, so "not entailment" is claimed by the class whose label it
  is, and the "entailment" inside it is never seen again;
- ignores a label that a negation ("not", "no", "isn't", ...) directly precedes when no class owns the negated
  phrase ("not a Person, a Location" is a Location);
- when several classes remain, takes the first one mentioned (rule ``first of several``, every candidate kept);
- for letter classes (A-D), reads only letters in answer position: the whole answer or its first line ("B", "(B)",
  "B.", "B\nThe answer is B"), a leading "B." or "(B)", or after "answer"/"option"/"choice" ("The answer is B"), so
  the article "A" in prose never counts;
  failing that, an answer that is exactly one option's text names that option.

The record, kept with every answer in ``samples.jsonl``: ``{"label", "rule", "span", "candidates"}``.

>>> parse_answer("Not entailment.", ["entailment", "not entailment"])["label"]
'not entailment'
>>> parse_answer("The answer is B", ["A", "B", "C", "D"])
{'label': 'B', 'rule': 'answer phrase', 'span': [14, 15], 'candidates': ['B']}
>>> parse_answer("A good question about cells.", ["A", "B", "C", "D"])["label"]
'N/A'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from posixlab.metrics.classification import NA

NEGATIONS = ("not", "no", "non", "isn't", "is not", "never", "neither", "nor", "not a", "not an", "not the",
             "isn't a", "isn't an", "is not a", "is not an")
_LETTER_ALONE = re.compile(r"^[\s*_`'\"]*[(\[]?\s*([A-Za-z])\s*[)\].:]?[\s*_`'\".]*$")
_LETTER_LEADING = re.compile(r"^[\s*_`'\"]*(?:[(\[]\s*([A-Z])\s*[)\]]|([A-Z])\s*[.):])(?=\s|$)")
_LETTER_PHRASE = re.compile(r"\b(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*(?:option\s+)?[(\[]?([A-Z])[)\]]?"
                            r"(?![A-Za-z0-9'])", re.IGNORECASE)


def _fold(text: str) -> str:
    # same length as the input, so spans index the raw answer
    return re.sub(r"[_\-]", " ", text.casefold())


def _record(label: str, rule: str, span=None, candidates=None) -> dict:
    return {"label": label, "rule": rule, "span": list(span) if span else None,
            "candidates": candidates if candidates is not None else ([label] if label != NA else [])}


def parse_answer(answer: str | None, classes: Sequence[str], aliases: dict[str, Sequence[str]] | None = None,
                 options: dict[str, str] | None = None) -> dict:
    """The class ``answer`` names among ``classes`` (N/A excluded), as a record. ``aliases`` gives other phrasings
    of a class ({"not entailment": ["not_entailment", "no entailment"]}); ``options`` the option texts of letter
    classes ({"A": "Paris", ...})."""
    if answer is None or not answer.strip():
        return _record(NA, "empty")
    classes = [c for c in classes if c != NA]
    if classes and all(len(c) == 1 and c.isalpha() for c in classes):
        return _parse_letter(answer, classes, options)
    return _parse_names(answer, classes, aliases or {})


def _parse_letter(answer: str, classes: list[str], options: dict[str, str] | None) -> dict:
    allowed = {c.upper() for c in classes}
    m = _LETTER_ALONE.match(answer)
    if m and m.group(1).upper() in allowed:  # a lone letter is an answer letter whatever its case
        return _record(m.group(1).upper(), "letter alone", m.span(1))
    first = answer.lstrip().split("\n", 1)[0]
    m = _LETTER_ALONE.match(first) if "\n" in answer.strip() else None
    if m and m.group(1).upper() in allowed:  # "B" on the first line, then the model goes on ("B\nThe answer is")
        start = answer.index(first)
        return _record(m.group(1).upper(), "letter alone on the first line", (start + m.start(1), start + m.end(1)))
    m = _LETTER_LEADING.match(answer)
    if m:
        group = 1 if m.group(1) else 2
        if m.group(group) in allowed:
            return _record(m.group(group), "leading letter", m.span(group))
    for m in _LETTER_PHRASE.finditer(answer):
        letter = m.group(1)
        # a lower-case letter counts only right after a colon or "is" ("answer: b"), never "the answer is a bit"
        if letter.isupper() and letter in allowed:
            return _record(letter, "answer phrase", m.span(1))
    if options:
        said = _fold(answer).strip().strip(".!\"' ")
        hits = [c for c, text in options.items() if c in allowed and _fold(text).strip().strip(".") == said]
        if len(hits) == 1:
            return _record(hits[0], "option text", (0, len(answer)))
    return _record(NA, "no class named")


def _parse_names(answer: str, classes: list[str], aliases: dict[str, Sequence[str]]) -> dict:
    folded = _fold(answer)
    phrases = sorted({(_fold(p).strip(), c) for c in classes for p in (c, *aliases.get(c, ()))},
                     key=lambda pc: (-len(pc[0]), pc[0]))
    whole = folded.strip().strip(".!\"'*` :")
    for phrase, c in phrases:
        if whole == phrase or whole == phrase + "s":
            start = folded.index(whole)
            return _record(c, "exact", (start, start + len(whole)))
    masked = folded
    found = []  # (start, end, class, negated)
    for phrase, c in phrases:
        pattern = re.compile(r"(?<![a-z0-9])" + re.escape(phrase) + r"s?(?![a-z0-9])")
        for m in pattern.finditer(masked):
            before = masked[: m.start()].rstrip()
            negated = any(re.search(r"(?<![a-z0-9'])" + re.escape(n) + r"$", before) for n in NEGATIONS)
            found.append((m.start(), m.end(), c, negated))
            masked = masked[: m.start()] + "\0" * (m.end() - m.start()) + masked[m.end():]
    kept = sorted((f for f in found if not f[3]), key=lambda f: f[0])
    if not kept:
        return _record(NA, "only negated" if found else "no class named",
                       candidates=[])
    candidates = list(dict.fromkeys(f[2] for f in kept))
    start, end, label, _ = kept[0]
    return _record(label, "label" if len(candidates) == 1 else "first of several", (start, end), candidates)
