r"""Is a prompt's answer right? The options a prompt shows, the continuations that choose them, the parse of a
response into an option or a class, for every prompt of a set.

Two readings of "the model's answer under prompt i", both recorded, never mixed:

- **options** (multiple-choice items), the way lm-evaluation-harness scores multiple choice: each option's mark as
  the prompt writes it (`` (A)`` after ``A:``) is a continuation scored under the prompt, in the same engine pass
  as the responses; the prediction is the option with the highest log-likelihood. Always defined.
- **greedy**: the greedy response parsed into an option (multiple choice) or compared with the gold answer
  (open-ended items, user prompt sets): ``None`` when the response names no option ("unparsed"). The parse rate
  tells answer-format failures apart from changes of mind.

A prompt shows its options in an order and with marks that a variant may change (format variants). Its record says
how, under these keys (absent: the paper's format, marks ``(A)``-``(D)`` in the data set's order):

- ``option_order``: ``option_order[p]`` is the index, in the item's options, of the option shown at position p;
- ``option_labels``: the label of each position (``A``, ``1``, ``a``, ``i``, ...);
- ``option_marks``: how each position's label is written before its option (``(A)``, ``1.``, ``a)``, ...).

Positions are what the model sees; the gold answer is moved with its option, so "correct" compares the option the
model picked with the gold option wherever it is shown.

**Reading a response against options** (``read_choice``). One parser for both tasks: POSIX's greedy response after a
multiple-choice prompt (``parse_choice``: options = the prompt's labels, marks and option texts) and the classifier's
answer for letter classes (``parse_answer`` with classes A-D: label = the letter, no mark, the option text from the
sample). An option is (label, mark or None, text or None); labels are ``A``-``D``, ``1``-``4``, ``a``-``d`` or
``i``-``iv`` (the enumerators of ``posixlab.variants.format``). Labels compare case-insensitively; spaces, markdown
(``*``, ``_``, backticks) and quotes around a label are skipped. The first rule that applies decides (its name is
the record's ``rule``):

1. ``empty``: nothing but spaces: unparsed.
2. ``label alone``: a label, bare or in brackets, with at most ``.``, ``:`` or ``)`` after it, is the whole response
   or its whole first line (``b``, ``(b)``, ``**B**``, ``B.``, ``B\nThe answer is B``). A bracket the response's end
   cut off counts as closed (``The answer is (C`` from a 5-token response names C).
3. ``leading label``: the response starts with a label in brackets, whatever follows (`` (B)Rome``); or with a
   label followed by ``,`` ``.`` ``:`` and a space (or the end), or by ``)`` (``B, because``, ``B. Rome``,
   ``a) Paris``); or with a label, a space and that option's own text (``B Rome``). A label followed by a space and
   any other word is prose, not an answer: the article in ``A cat`` or ``a good question``, the pronoun in
   ``I think`` (label ``i`` of the roman enumerator). Nor is a list of labels (``A, B, C, D``; ``(A) or (B)``).
4. ``mark``: the response starts with an option's mark as the prompt writes it (case-insensitive), followed by a
   space or the end, or by anything when the mark ends with a bracket; for marks that rules 2-3 do not already read
   (every mark ``posixlab`` writes, ``(A)`` ``A.`` ``A)`` ``A:``, is a label form).
5. ``answer phrase``: "answer", "option" or "choice", with an optional "is" and ``:`` or ``-``, anywhere in the
   response, followed by a label read as in rules 2-4 (``the answer is (C)``, ``answer: c``,
   ``I think the answer is B.``), or by the label written in its own case and a space (``The answer is B because``;
   never the lower-case article ``a`` or the pronoun ``I``). The first phrase that is followed by a label decides.
6. ``option text``: the response starts with an option's own text (case-folded, spaces collapsed, surrounding
   ``.,;:!?"'`` of the text ignored), followed by the end or a character that is not a letter or digit
   (`` Oslo is``, ``Paris``, ``rome, of course``). One rule for both tasks: the classifier's former "equals the
   option text" is its special case. The longest matching text wins; two options with that same text: unparsed.
7. otherwise unparsed: ``parse_choice`` returns None, ``parse_answer`` N/A (rule ``no class named``).

Labels come before option texts: with labels ``1``-``4`` the response ``4`` is label 4, whatever option reads "4".

Every string of the rule set, read by both tasks (POSIX: marks ``(A)``-``(D)``; classification: classes A-D with
the same option texts), agrees:

>>> posix = prompt_choices(("Paris", "Rome", "Oslo", "Bern"), {})
>>> texts = {"A": "Paris", "B": "Rome", "C": "Oslo", "D": "Bern"}
>>> def both(response):
...     position = parse_choice(response, posix)
...     record = parse_answer(response, ["A", "B", "C", "D"], options=texts)
...     return "ABCD"[position] if position is not None else None, record["label"], record["rule"]
>>> for r in ["b", "B", "(b)", "**B**", "B.", " (B)Rome", "B. Rome", "B Rome", "B, because", "the answer is (C)",
...           "answer: c", "B\nThe answer is B", " Oslo is", "Oslo", "a)", "(a)", "A cat", "a good question",
...           "I think", "A, B, C, D.\nA", ""]:
...     print(f"{r!r:22} {both(r)}")
'b'                    ('B', 'B', 'label alone')
'B'                    ('B', 'B', 'label alone')
'(b)'                  ('B', 'B', 'label alone')
'**B**'                ('B', 'B', 'label alone')
'B.'                   ('B', 'B', 'label alone')
' (B)Rome'             ('B', 'B', 'leading label')
'B. Rome'              ('B', 'B', 'leading label')
'B Rome'               ('B', 'B', 'leading label')
'B, because'           ('B', 'B', 'leading label')
'the answer is (C)'    ('C', 'C', 'answer phrase')
'answer: c'            ('C', 'C', 'answer phrase')
'B\nThe answer is B'   ('B', 'B', 'label alone')
' Oslo is'             ('C', 'C', 'option text')
'Oslo'                 ('C', 'C', 'option text')
'a)'                   ('A', 'A', 'label alone')
'(a)'                  ('A', 'A', 'label alone')
'A cat'                (None, 'N/A', 'no class named')
'a good question'      (None, 'N/A', 'no class named')
'I think'              (None, 'N/A', 'no class named')
'A, B, C, D.\nA'       (None, 'N/A', 'no class named')
''                     (None, 'N/A', 'empty')

The other enumerators: lower-case letters still read ``a)`` and ``(a)``, never the article; roman numerals never the
pronoun:

>>> lower = prompt_choices(("Paris", "Rome", "Oslo", "Bern"), {"option_labels": list("abcd"),
...                                                           "option_marks": ["a)", "b)", "c)", "d)"]})
>>> [parse_choice(r, lower) for r in ["a)", "(a)", "a) Paris", "A", "a cat", "the answer is a bit long", "d."]]
[0, 0, 0, 0, None, None, 3]
>>> roman = prompt_choices(("Paris", "Rome", "Oslo", "Bern"), {"option_labels": ["i", "ii", "iii", "iv"],
...                                                           "option_marks": ["i.", "ii.", "iii.", "iv."]})
>>> [parse_choice(r, roman) for r in ["I think", "i", "I.", "iii. Oslo", "(iv)", "The answer is ii"]]
[None, 0, 0, 2, 3, 1]

**Reading an answer against named classes** (``parse_answer`` for classes that are not single letters: RTE's
"not entailment", TREC's "Location", ...). The authors' parser takes the first class label found anywhere in the
answer as a substring, so for RTE the answer "not entailment" counts as *entailment*. Ours:

1. compares case-insensitively, with ``_`` and ``-`` read as spaces, on word boundaries (a label inside a longer
   word is no match; a plural ``s`` is allowed); an answer that is exactly one label (or alias) is that class
   (rule ``exact``);
2. tries longer labels (and aliases) first and blanks each match out, so "not entailment" is claimed by the class
   whose label it is, and the "entailment" inside it is never seen again;
3. ignores a label that a negation ("not", "no", "isn't", ...) directly precedes when no class owns the negated
   phrase ("not a Person, a Location" is a Location; rule ``only negated`` when nothing else is left);
4. when several classes remain, takes the first one mentioned (rule ``first of several``, every candidate kept).

The record, kept with every classifier answer in ``samples.jsonl``: ``{"label", "rule", "span", "candidates"}``;
N/A is ``posixlab.metrics.classification.NA``.

>>> parse_answer("Not entailment.", ["entailment", "not entailment"])["label"]
'not entailment'
>>> parse_answer("The answer is B", ["A", "B", "C", "D"])
{'label': 'B', 'rule': 'answer phrase', 'span': [14, 15], 'candidates': ['B']}
>>> parse_answer("A good question about cells.", ["A", "B", "C", "D"])["label"]
'N/A'
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from posixlab.metrics.classification import NA
from posixlab.metrics.position import position_bias, position_row
from posixlab.prompts import OPTION_LETTERS as LETTERS  # an item's option letters: A, B, ... (up to J)


@dataclass(frozen=True)
class Choices:
    """The options one prompt shows: per position, its label, its mark and the item option it holds."""

    labels: tuple[str, ...]
    marks: tuple[str, ...]
    order: tuple[int, ...]
    texts: tuple[str, ...]  # the option texts, by position

    @property
    def continuations(self) -> tuple[str, ...]:
        """What follows the prompt when the model picks each position: a space and the position's mark."""
        return self.continuations_with()

    def continuations_with(self, lead: str = " ", option_text: bool = False) -> tuple[str, ...]:
        """Each position's continuation: ``lead`` and its mark, then (``option_text``) the option's text, as a
        few-shot exemplar writes its gold answer (`` (B)Paris``).

        >>> prompt_choices(("Paris", "Rome"), {}).continuations_with(option_text=True)
        (' (A)Paris', ' (B)Rome')
        """
        return tuple(lead + mark + (text if option_text else "") for mark, text in zip(self.marks, self.texts))

    @property
    def options(self) -> tuple[tuple[str, str, str], ...]:
        """Per position, the option ``read_choice`` reads: (label, mark, option text)."""
        return tuple(zip(self.labels, self.marks, self.texts))

    def gold_position(self, answer: str | None) -> int | None:
        """Where the gold option (an item letter A, B, ...) is shown; None without a gold answer."""
        if answer is None or answer not in LETTERS[: len(self.order)]:
            return None
        return self.order.index(LETTERS.index(answer))


def prompt_choices(options: tuple[str, ...], record: dict) -> Choices | None:
    """The choices a prompt shows, from its item's options and its variant record; None for open-ended items.

    >>> prompt_choices(("3", "4", "5", "6"), {}).continuations
    (' (A)', ' (B)', ' (C)', ' (D)')
    >>> c = prompt_choices(("3", "4", "5", "6"), {"option_order": [1, 0, 3, 2], "option_labels": ["1", "2", "3", "4"],
    ...                                          "option_marks": ["1.", "2.", "3.", "4."]})
    >>> c.continuations, c.texts, c.gold_position("B")    # the gold option "4" is shown first
    ((' 1.', ' 2.', ' 3.', ' 4.'), ('4', '3', '6', '5'), 0)
    """
    if not options:
        return None
    n = len(options)
    order = tuple(record.get("option_order") or range(n))
    labels = tuple(record.get("option_labels") or LETTERS[:n])
    marks = tuple(record.get("option_marks") or (f"({label})" for label in labels))
    if not (len(order) == len(labels) == len(marks) == n) or sorted(order) != list(range(n)):
        raise ValueError(f"inconsistent option record {record!r} for {n} options")
    return Choices(labels, marks, order, tuple(options[k] for k in order))


# --- reading a response: one parser for POSIX's options and the classifier's letter classes -----------------------
Option = tuple[str, str | None, str | None]  # (label, mark or None, option text or None)

_SKIP = r"[\s*_`'\"]*"  # spaces, markdown emphasis and quotes before a label
_CLOSE = re.compile(r"[*_`'\"]*")  # markdown or quotes closing a label
_ALONE = re.compile(r"[.:)\]]?[ \t*_`'\".]*(?:\r?\n|\Z)")  # nothing else on the label's line
_DELIMITER = re.compile(r"[,.:](?=[\s*_`'\"]|\Z)|\)")
_SEPARATOR = re.compile(r"\s*(?:[,/;&]\s*)?(?:(?:or|and)(?![^\W_])\s*)?", re.IGNORECASE)  # between listed labels
_LISTED = re.compile(r"[*_`'\"]*(?:[,/;:.)&]|\s+(?:or|and)(?![^\W_])|[.:)\]]?[ \t*_`'\".]*(?:\r?\n|\Z))",
                     re.IGNORECASE)  # what follows a label in a list
_PHRASE = re.compile(r"(?<![^\W_])(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*(?:option\s+)?", re.IGNORECASE)
PROSE_WORDS = ("a", "I")  # a label written as one of these words and followed by a word is prose


@dataclass(frozen=True)
class ChoiceRead:
    """What a response chose: the option's index (None: unparsed), the rule that decided (the module docstring's
    list) and the span in the raw response of what decided it (the label, the mark or the option text)."""

    index: int | None
    rule: str
    span: tuple[int, int] | None = None


def read_choice(response: str | None, options: Sequence[Option]) -> ChoiceRead:
    """The option ``response`` chooses among ``options``, each ``(label, mark or None, text or None)``, by the rules
    of the module docstring.

    >>> options = [("A", "(A)", "Paris"), ("B", "(B)", "Rome"), ("C", "(C)", "Oslo"), ("D", "(D)", "Bern")]
    >>> read_choice(" (B)Rome", options)
    ChoiceRead(index=1, rule='leading label', span=(2, 3))
    >>> read_choice("I think the answer is **C**.", options)
    ChoiceRead(index=2, rule='answer phrase', span=(24, 25))
    >>> read_choice("The answer is (C", options)    # cut off by max_new_tokens
    ChoiceRead(index=2, rule='answer phrase', span=(15, 16))
    >>> read_choice("rome, of course", options), read_choice("A cat", options)
    (ChoiceRead(index=1, rule='option text', span=(0, 4)), ChoiceRead(index=None, rule='none', span=None))
    """
    if response is None or not response.strip():
        return ChoiceRead(None, "empty")
    options = [(label, mark or None, text or None) for label, mark, text in options]
    found = _at_answer_position(response, 0, options, after_phrase=False)
    if found is not None:
        return found
    for phrase in _PHRASE.finditer(response):
        found = _at_answer_position(response, phrase.end(), options, after_phrase=True)
        if found is not None:
            return ChoiceRead(found.index, "answer phrase", found.span)
    return _option_text(response, options) or ChoiceRead(None, "none")


@lru_cache(maxsize=256)
def _label_pattern(label: str) -> re.Pattern:
    # an opened bracket must close, unless the response ends right after the label: a response cut off by
    # max_new_tokens ("The answer is (C") still names its option
    return re.compile(_SKIP + r"(?:(?P<open>[(\[])\s*)?(?P<label>" + re.escape(label) + r")(?(open)(?:\s*[)\]]|\s*\Z))",
                      re.IGNORECASE)


@lru_cache(maxsize=4096)
def _text_pattern(text: str | None) -> tuple[str, re.Pattern] | None:
    core = (text or "").strip(string.whitespace + ".,;:!?\"'")
    if not core:
        return None
    pattern = r"\s+".join(re.escape(word) for word in core.split())
    if core[-1].isalnum():
        pattern += r"(?![^\W_])"
    return " ".join(core.casefold().split()), re.compile(pattern, re.IGNORECASE)


def _by_length(options, key: int) -> list[int]:
    return sorted((k for k in range(len(options)) if options[k][key]), key=lambda k: -len(options[k][key]))


def _at_answer_position(response: str, start: int, options, after_phrase: bool) -> ChoiceRead | None:
    """Rules 2-4 at ``start`` (the response's start, or just after an answer phrase)."""
    for k in _by_length(options, 0):
        label, _, text = options[k]
        m = _label_pattern(label).match(response, start)
        if m is None:
            continue
        end = _CLOSE.match(response, m.end()).end()
        span = m.span("label")
        if _ALONE.match(response, end):
            return ChoiceRead(k, "label alone", span)
        if _is_list(response, end, options, k):
            return None  # "A, B, C, D": no one label
        if m.group("open") or _DELIMITER.match(response, end):
            return ChoiceRead(k, "leading label", span)
        own = _text_pattern(text)
        gap = re.compile(r"\s+").match(response, end)
        if own and gap and own[1].match(response, gap.end()):
            return ChoiceRead(k, "leading label", span)
        written = m.group("label")
        if after_phrase and written == label and written not in PROSE_WORDS and gap:
            return ChoiceRead(k, "leading label", span)
        break  # a label followed by a word: prose ("A cat", "I think")
    at = re.compile(_SKIP).match(response, start).end()
    for k in _by_length(options, 1):
        label, mark, _ = options[k]
        if mark.casefold() == label.casefold() or response[at:at + len(mark)].casefold() != mark.casefold():
            continue
        end = at + len(mark)
        if mark[-1] in ")]" or end == len(response) or response[end].isspace():
            return ChoiceRead(k, "mark", (at, end))
    return None


def _is_list(response: str, end: int, options, k: int) -> bool:
    """Whether the label that ends at ``end`` is followed by another option's label, as in "A, B, C, D"."""
    sep = _SEPARATOR.match(response, end)
    if not sep.group().strip():
        return False
    for j in range(len(options)):
        m = _label_pattern(options[j][0]).match(response, sep.end()) if j != k else None
        if m and (m.group("open") or _LISTED.match(response, m.end())):
            return True
    return False


def _option_text(response: str, options) -> ChoiceRead | None:
    """Rule 6: the longest option text that starts the response; None when there is none or two options share it."""
    at = re.compile(_SKIP).match(response).end()
    hits = []  # (length of the folded text, index, span)
    for k, (_, _, text) in enumerate(options):
        own = _text_pattern(text)
        m = own[1].match(response, at) if own else None
        if m:
            hits.append((len(own[0]), k, m.span()))
    if not hits:
        return None
    longest = max(h[0] for h in hits)
    best = [h for h in hits if h[0] == longest]
    if len(best) > 1:
        return ChoiceRead(None, "none")  # two options with the same text: no one option named
    return ChoiceRead(best[0][1], "option text", best[0][2])


def parse_choice(response: str, choices: Choices) -> int | None:
    """The position a greedy response picks, or None (unparsed): ``read_choice`` against the prompt's own labels,
    marks and option texts.

    >>> c = prompt_choices(("Paris", "Rome", "Oslo", "Bern"), {})
    >>> [parse_choice(r, c) for r in [" (B)Rome", " B", "B. Rome", "The answer is (C)", " Oslo is", "A cat", ""]]
    [1, 1, 1, 2, 2, None, None]
    """
    return read_choice(response, choices.options).index


# --- the classifier's answer: letter classes through read_choice, named classes by their labels --------------------
NEGATIONS = ("not", "no", "non", "isn't", "is not", "never", "neither", "nor", "not a", "not an", "not the",
             "isn't a", "isn't an", "is not a", "is not an")


def parse_answer(answer: str | None, classes: Sequence[str], aliases: dict[str, Sequence[str]] | None = None,
                 options: dict[str, str] | None = None) -> dict:
    """The class ``answer`` names among ``classes`` (N/A excluded), as a record ``{"label", "rule", "span",
    "candidates"}``. Single-letter classes (A-D) are options read by ``read_choice`` (label = the letter, no mark,
    text = ``options[letter]``); other classes by their names. ``aliases`` gives other phrasings of a class
    ({"not entailment": ["not_entailment", "no entailment"]}); ``options`` the option texts of letter classes
    ({"A": "Paris", ...}).

    >>> parse_answer("Paris is the capital", ["A", "B"], options={"A": "London", "B": "Paris"})
    {'label': 'B', 'rule': 'option text', 'span': [0, 5], 'candidates': ['B']}
    """
    if answer is None or not answer.strip():
        return _record(NA, "empty")
    classes = [c for c in classes if c != NA]
    if classes and all(len(c) == 1 and c.isalpha() for c in classes):
        return _parse_letters(answer, classes, options or {})
    return _parse_names(answer, classes, aliases or {})


def _record(label: str, rule: str, span=None, candidates=None) -> dict:
    return {"label": label, "rule": rule, "span": list(span) if span else None,
            "candidates": candidates if candidates is not None else ([label] if label != NA else [])}


def _parse_letters(answer: str, classes: list[str], options: dict[str, str]) -> dict:
    read = read_choice(answer, [(c, None, options.get(c)) for c in classes])
    if read.index is None:
        return _record(NA, "empty" if read.rule == "empty" else "no class named")
    return _record(classes[read.index], read.rule, read.span)


def _fold_names(text: str) -> str:
    # same length as the input, so spans index the raw answer
    return re.sub(r"[_\-]", " ", text.casefold())


def _parse_names(answer: str, classes: list[str], aliases: dict[str, Sequence[str]]) -> dict:
    folded = _fold_names(answer)
    phrases = sorted({(_fold_names(p).strip(), c) for c in classes for p in (c, *aliases.get(c, ()))},
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


def matches_gold(response: str, answer: str) -> bool:
    """Open-ended items: the response, folded (case, surrounding punctuation and spaces), starts with the folded
    gold answer.

    >>> matches_gold(" True. The statement", "True"), matches_gold("(A) blue", "(A)"), matches_gold("Tru", "True")
    (True, True, False)
    """
    gold = _fold_answer(answer)
    return bool(gold) and _fold_answer(response).startswith(gold)


def _fold_answer(text: str) -> str:
    return " ".join(text.casefold().split()).strip(string.whitespace + ".,;:!?\"'")


# --- per set: what each prompt answered ---------------------------------------------------------------------------
def set_answers(options: tuple[str, ...], answer: str | None, records: list[dict], responses: list[str],
                continuations: list[str], candidate_logprobs, lead: str = " ",
                option_text: bool = False) -> list[dict] | None:
    """Per prompt of a set: the gold answer, the option the log-likelihoods pick (``by_options``; multiple choice
    only) and the greedy response's reading (``by_greedy``). None when the item has no gold answer.

    ``records`` are the prompts' variant records (they say how each prompt shows its options), ``continuations``
    the candidate strings the engine scored, ``candidate_logprobs[i, k]`` = log P(continuations[k] | prompt i),
    each the option's mark, followed by its text with ``option_text`` (``candidate_strings``). Predictions are the
    item's own option letters (A, B, ... as in the data), so prompts that reorder the options are compared on the
    option, not on its position.
    """
    if answer is None:
        return None
    out = []
    for i, (record, response) in enumerate(zip(records, responses)):
        choices = prompt_choices(options, record) if options else None
        if choices is None:  # open-ended: the response is right when it starts with the gold answer
            out.append({"gold": answer, "by_options": None,
                        "by_greedy": {"pred": None, "parsed": None, "correct": matches_gold(response, answer)}})
            continue
        by_options = None
        if candidate_logprobs is not None and continuations:
            logprobs = [float(candidate_logprobs[i][continuations.index(c)])
                        for c in choices.continuations_with(lead, option_text)]
            pick = int(max(range(len(logprobs)), key=lambda p: (logprobs[p], -p)))  # ties: the first position
            by_options = {"logprobs": logprobs, "pred": LETTERS[choices.order[pick]],
                          "correct": LETTERS[choices.order[pick]] == answer}
        position = parse_choice(response, choices)
        pred = None if position is None else LETTERS[choices.order[position]]
        out.append({"gold": answer, "by_options": by_options,
                    "by_greedy": {"pred": pred, "parsed": pred is not None, "correct": pred == answer}})
    return out


def candidate_strings(options: tuple[str, ...], records: list[dict], lead: str = " ",
                      option_text: bool = False) -> list[str]:
    """The continuations to score for a set: every prompt's option marks (followed by the option's text with
    ``option_text``), once each, in first-seen order.

    >>> candidate_strings(("3", "4"), [{}, {"option_order": [1, 0]}], option_text=True)
    [' (A)3', ' (B)4', ' (A)4', ' (B)3']
    """
    if not options:
        return []
    every = (c for record in records for c in prompt_choices(options, record).continuations_with(lead, option_text))
    return list(dict.fromkeys(every))


# --- per run: the accuracy block of the summary --------------------------------------------------------------------
# variant types whose prompt j is the same prompt for every item: POSIX's templates and formats, and a
# classification run's rephrasings of the task sentence
SHARED_PROMPT_KINDS = ("template", "format", "rephrasing")


def shares_prompts(records: list[dict]) -> bool:
    """Whether prompt j is one prompt for every set (template and format variants, beside the original), so that
    prompts can be compared and chosen; other variants perturb each item its own way."""
    kinds = {p["kind"] for r in records for p in r["prompts"]} - {"original"}
    return len({len(r["prompts"]) for r in records}) == 1 and bool(kinds) and kinds <= set(SHARED_PROMPT_KINDS)


def accuracy_summary(records: list[dict], seed: int = 0) -> dict | None:
    """Accuracy over the run's prompts, from both readings, for the sets that have a gold answer; None when none
    does. Prompt j is the j-th prompt of each set (0: the original); sets of different sizes are padded."""
    scored = [r for r in records if r.get("answers")]
    if not scored:
        return None
    width = max(len(r["answers"]) for r in scored)

    def matrix(reading: str, key: str):
        return [[(a[reading] or {}).get(key) for a in r["answers"]] + [None] * (width - len(r["answers"]))
                for r in scored]

    out = {"num_sets": len(scored), "num_prompts": width,
           "note": "prompt j = the j-th prompt of each set (0: the original); by_options: the option with the "
                   "highest log-likelihood (multiple choice only); by_greedy: the greedy response parsed"}
    budgeted = any("asked" in r for r in scored)  # prompt_share < 1: a sample of each set's prompts was answered
    if budgeted:
        asked = sum(len(r["asked"]) if "asked" in r else len(r["answers"]) for r in scored)
        out["asked"] = {"cells": asked, "of": sum(len(r["answers"]) for r in scored)}
        out["note"] += ("; a sample of each set's prompts was answered (prompt_share): per-prompt accuracies are over "
                        "the sets that asked each prompt, 'estimated' over every set (PromptEval's Rasch model)")
    for reading in ("by_options", "by_greedy"):
        if all(a[reading] is None for r in scored for a in r["answers"]):
            out[reading] = None
            continue
        correct = [[None if c is None else float(c) for c in row] for row in matrix(reading, "correct")]
        if budgeted:
            never = [j for j in range(width) if all(row[j] is None for row in correct)]
            if never:  # a shard of a budgeted run: the merged run asks every prompt (checked before it starts)
                out[reading] = None
                out["note"] += f"; prompt(s) {', '.join(map(str, never))} never asked in these sets: no accuracy"
                continue
        # a prompt not asked is left out of the consistency pairs (an unparsed answer is not)
        preds = [[a[reading]["pred"] for a in r["answers"] if a[reading] is not None] for r in scored] if budgeted \
            else matrix(reading, "pred")
        block = accuracy_block(correct, preds if any(p is not None for row in preds for p in row) else None, seed,
                               shared_prompts=shares_prompts(scored))
        if budgeted:  # each prompt over every set, not only those that asked it (PromptEval)
            from posixlab.metrics.accuracy import estimated_accuracy_spread

            block["estimated"] = estimated_accuracy_spread(correct)
        if reading == "by_greedy" and any((a["by_greedy"] or {}).get("parsed") is not None
                                          for r in scored for a in r["answers"]):
            block["parse_rate"] = _parse_rates(scored, width)
        out[reading] = block
    bias = {reading: position_bias(position_rows(scored, reading)) for reading in ("by_options", "by_greedy")}
    if any(bias.values()):  # format variants: the gold shown equally often at every position
        out["position_bias"] = bias
    return out


def position_rows(records: list[dict], reading: str) -> list[tuple[int, int, int | None, bool]]:
    """Per answered prompt that says where it shows the gold option (a format variant's ``gold_position``): its
    number of options, that position, the position of the option ``reading`` picked (None: none) and whether it was
    right, as ``posixlab.metrics.position.position_bias`` takes them.

    >>> record = {"option_order": [2, 0, 1], "gold_position": 2}   # the gold, item option B, shown third
    >>> sets = [{"prompts": [{"record": {}}, {"record": record}],
    ...          "answers": [{"by_greedy": {"pred": "B", "correct": True}},
    ...                      {"by_greedy": {"pred": "C", "correct": False}}]}]
    >>> position_rows(sets, "by_greedy")    # the original prompt says nothing of positions; C is shown first
    [(3, 2, 0, False)]
    """
    rows = []
    for r in records:
        for prompt, answer in zip(r["prompts"], r.get("answers") or []):
            shown, read = prompt.get("record") or {}, answer.get(reading)
            if shown.get("gold_position") is None or not read or read.get("correct") is None:
                continue
            rows.append(position_row(shown["option_order"], shown["gold_position"], read.get("pred"), read["correct"]))
    return rows


def accuracy_block(correct, preds, seed: int, shared_prompts: bool = False) -> dict:
    """Every accuracy metric of one grid: ``correct[i][j]`` (1/0, None where item i has no prompt j) and the
    answers read (``preds``, for the consistency rate; None to leave it out). A run's summary and a DOVE file's
    (``posixlab.interop.dove``) are this same block. ``shared_prompts``: prompt j is one prompt for every item (a
    template or format pool, DOVE's and PromptEval's grids), so which prompts are within noise of the best
    (``best_prompts``, ``metrics.selection.best_prompt_set``) is a question the grid answers."""
    from posixlab.metrics import accuracy as acc
    from posixlab.metrics.selection import best_prompt_set

    spread = acc.accuracy_spread(correct)
    return {
        "accuracy": spread["mean"],  # AvgP: the mean over prompts of each prompt's accuracy
        "per_prompt": [float(a) for a in acc.accuracy_per_prompt(correct)],
        "spread": spread,
        "worst_case": acc.worst_case_accuracy(correct),
        "best_case": acc.best_case_accuracy(correct),
        "max_p": acc.max_performance(correct),
        "avg_p": acc.average_performance(correct),
        "cps": acc.combined_performance_score(correct),
        "pss": acc.prompt_sensitivity_score(correct),
        "consistency_rate": acc.consistency_rate(preds) if preds is not None else None,
        "variants_needed": {"n": acc.variants_needed(correct, 0.01, 0.1, seed=seed), "epsilon": 0.01, "delta": 0.1},
        "ci95": list(acc.two_way_bootstrap_ci(correct, seed=seed)) if len(correct) > 1 else None,
        "best_prompts": best_prompt_set(correct) if shared_prompts and len(correct[0]) > 1 else None,
    }


def _parse_rates(records: list[dict], width: int) -> dict:
    per_prompt, per_kind = [[] for _ in range(width)], {}
    for r in records:
        for j, (a, prompt) in enumerate(zip(r["answers"], r["prompts"])):
            parsed = (a["by_greedy"] or {}).get("parsed")  # None: open-ended, or a prompt not asked
            if parsed is None:
                continue
            per_prompt[j].append(parsed)
            per_kind.setdefault(prompt.get("kind", "?"), []).append(parsed)
    everything = [p for column in per_prompt for p in column]
    mean = lambda values: sum(values) / len(values) if values else None  # noqa: E731
    return {"overall": mean(everything), "per_prompt": [mean(c) for c in per_prompt],
            "per_variant_type": {kind: mean(v) for kind, v in per_kind.items()}}
