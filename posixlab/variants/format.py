"""Format variants (DOVE, Habba et al. 2025; FormatSpread, Sclar et al. 2024): the same multiple-choice question
shown with its options in another order, enumerated, marked, joined and introduced differently. The question text,
the option texts, the subject line and the paper's header line stay as they are; the paper's 20 templates are not
used (the format is built from the dimensions below). Multiple-choice items only.

Variant ``v`` of an item draws one value per dimension from its own stream ``rng_for(seed, item_id, "format", v)``,
in this order:

- **option order**: where the gold option is shown is balanced, as SCORE (Nalbandyan et al. 2025) puts the correct
  answer at every position: with n options (4 in MMLU), the variants are taken in blocks of n (``v // n``), each
  block has its own seeded permutation of the n positions (``rng_for(seed, item_id, "format/gold", v // n)``) and
  variant ``v`` puts the gold option at position ``permutation[v % n]``. So every n consecutive variants show the
  gold at each position once, and a set of 20 variants of a 4-option item shows it 5 times at each (nm variants:
  m times; otherwise as evenly as the count allows, at most one apart). The other options fill the other positions
  in a seeded random order. An item without a gold answer balances its first option the same way (``gold_position``
  is then None).
- **enumerator**: ``A B C D``, ``1 2 3 4``, ``a b c d`` or ``i ii iii iv`` (uniform; as far as the item's options
  go: ``A-C``, ``1-5``, ``i-x``).
- **mark style**: how a label is written before its option: ``(A)text`` (the paper's), ``A. text``, ``A) text`` or
  ``A: text`` (uniform).
- **separator**: what joins the options: ``" "`` (the paper's), ``"\\n"`` (one per line), ``"; "`` or ``" | "``.
- **casing**: of the field words that open the question line and cue the answer: ``Question:``/``Answer:``,
  ``QUESTION:``/``ANSWER:`` or ``question:``/``answer:``. (Not the original's ``Q:``/``A:``: ``A:`` would read as the
  mark of option A under the ``A: text`` style, and one-letter words have no title case.)

The prompt is ``<header>{Field}: <question>\\n<option><sep><option><sep>...\\n{Answer}:``, built as a template whose
indexed placeholders put option ``option_order[p]`` at position p (``posixlab.prompts``). The model's pick of
position p is scored as the continuation ``" " + option_marks[p]`` after the answer cue (``posixlab.answers``).

The record holds every choice, and the keys ``posixlab.answers`` reads: ``option_order`` (``option_order[p]``: the
index in the item's options of the option shown at position p), ``option_labels``, ``option_marks`` (the label as
written before its option: ``(A)``, ``1.``, ``a)``, ``iv:``) and ``gold_position``.

Few-shot exemplars are shown in the variant's format (every variant type's exemplars take its template): their
options in the same order (``option_order`` applied to the exemplar's options) and their answer written with the
variant's mark: `` 2. text`` instead of the paper's `` (B)text``. An exemplar with another number of options than
the question (your questions may mix 3, 4 and 5) is shown in the variant's enumerator, marks, separator and casing,
its options in their own order. Format variants never change a question's text, so ``perturb_shots`` changes
nothing for them. The original prompt (index -1) keeps the paper's format.
"""

from __future__ import annotations

from posixlab.errors import ConfigError
from posixlab.prompts import MIN_OPTIONS, OPTION_LETTERS, PromptItem, Shot, gold_answer, join_turns, render_turns
from posixlab.seeding import rng_for
from posixlab.variants.base import Edit, PromptVariant, VariantGenerator

NUM_OPTIONS = 4  # MMLU's; your questions' items have 2-10 (``posixlab.data.questions``)
LETTERS = OPTION_LETTERS
ENUMERATORS = {  # name (as it reads for 4 options) -> the labels of positions 0-9
    "A-D": tuple(OPTION_LETTERS),
    "1-4": tuple(str(k) for k in range(1, 11)),
    "a-d": tuple(OPTION_LETTERS.lower()),
    "i-iv": ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x"),
}
MARK_STYLES = {  # name (as it reads with label A) -> (mark pattern, gap between mark and option text)
    "(A)text": ("({})", ""),
    "A. text": ("{}.", " "),
    "A) text": ("{})", " "),
    "A: text": ("{}:", " "),
}
SEPARATORS = (" ", "\n", "; ", " | ")
CASINGS = {  # name -> (question field, answer cue)
    "title": ("Question", "Answer"),
    "upper": ("QUESTION", "ANSWER"),
    "lower": ("question", "answer"),
}


def _literal(text: str) -> str:
    """``text`` as literal template text: braces doubled, so ``str.format`` writes them as they are."""
    return text.replace("{", "{{").replace("}", "}}")


def format_template(order: list[int], marks: list[str], gap: str, separator: str, fields: tuple[str, str]) -> str:
    """The template that shows option ``order[p]`` at position p behind ``marks[p]``; ``{0}`` is the question.

    >>> t = format_template([2, 0, 3, 1], ["1.", "2.", "3.", "4."], " ", "; ", ("Question", "Answer"))
    >>> t
    'Question: {0}\\n1. {3}; 2. {1}; 3. {4}; 4. {2}\\nAnswer:'
    >>> t.format("What is 2+2?", "3", "4", "5", "6")
    'Question: What is 2+2?\\n1. 5; 2. 3; 3. 6; 4. 4\\nAnswer:'
    """
    options = _literal(separator).join(f"{_literal(mark + gap)}{{{k + 1}}}" for mark, k in zip(marks, order))
    return f"{_literal(fields[0])}: {{0}}\n{options}\n{_literal(fields[1])}:"


def enumerator_name(name: str, n: int) -> str:
    """An enumerator's name for ``n`` options, from its first and n-th label.

    >>> enumerator_name("A-D", 4), enumerator_name("i-iv", 5), enumerator_name("1-4", 10)
    ('A-D', 'i-v', '1-10')
    """
    labels = ENUMERATORS[name]
    return f"{labels[0]}-{labels[n - 1]}"


def gold_position_of(seed: int, item_id: str, index: int, n: int = NUM_OPTIONS) -> int:
    """Where variant ``index`` of an item with ``n`` options shows the gold option: position
    ``permutation[index % n]`` of its block's seeded permutation, so each block of n consecutive variants uses every
    position once."""
    return rng_for(seed, item_id, "format/gold", index // n).sample(range(n), n)[index % n]


def layout_for(record: dict, n: int) -> tuple[list[int], list[str]]:
    """The option order and marks a variant shows ``n`` options in: its own for its item's number of options; for an
    exemplar with another number, the options in their own order behind the variant's enumerator and mark style."""
    if n == len(record["option_order"]):
        return record["option_order"], record["option_marks"]
    labels = next(ENUMERATORS[name] for name in ENUMERATORS if enumerator_name(name, len(record["option_labels"]))
                  == record["enumerator"])
    return list(range(n)), [MARK_STYLES[record["mark_style"]][0].format(label) for label in labels[:n]]


def exemplar_template(record: dict, exemplar: PromptItem) -> str:
    """The template an exemplar is shown in: the variant's own, or for another number of options ``layout_for``'s."""
    if len(exemplar.options) == len(record["option_order"]):
        return record["template"]
    order, marks = layout_for(record, len(exemplar.options))
    return format_template(order, marks, record["mark_gap"], record["separator"], tuple(record["fields"]))


def exemplar_answer(record: dict, exemplar: PromptItem) -> str:
    """An exemplar's answer in a format variant: a space, the mark of the position its gold option is shown at, the
    gap and the option (`` 2. text``; the paper's `` (B)text`` is the same rule with its own marks)."""
    if exemplar.answer is None or exemplar.answer not in LETTERS[: len(exemplar.options)]:
        return gold_answer(exemplar)  # raises the same error as every other variant type (or writes open answers)
    gold = LETTERS.index(exemplar.answer)
    order, marks = layout_for(record, len(exemplar.options))
    return " " + marks[order.index(gold)] + record["mark_gap"] + exemplar.options[gold]


def open_ended_refused(dataset: str, item_id: str | None = None) -> ConfigError:
    """The error for format variants on open-ended items (an item's, or a data set's whose items all are: Alpaca's,
    refused before it is read)."""
    which = f" (item {item_id!r} has no options)" if item_id else ""
    return ConfigError(f"variant=format reorders and relabels answer options, so it needs multiple-choice items; data "
                       f"set {dataset!r} has open-ended items{which}. Use variant=spelling, template or paraphrase "
                       f"for it, or a multiple-choice data set (mmlu)")


def require_options(item: PromptItem) -> None:
    """Format variants reorder and relabel answer options: an open-ended item, or one with fewer than 2 or more than
    10 options, is refused."""
    dataset = item.item_id.split("/")[0]
    if not item.is_mcq:
        raise open_ended_refused(dataset, item.item_id)
    if not MIN_OPTIONS <= len(item.options) <= len(LETTERS):
        raise ConfigError(f"variant=format takes items with {MIN_OPTIONS}-{len(LETTERS)} options; item "
                          f"{item.item_id!r} of data set {dataset!r} has {len(item.options)}")


class FormatVariants(VariantGenerator):
    kind = "format"

    def prepare(self, items: list[PromptItem], num_variants: int, progress: bool = True) -> None:
        for item in items:  # refuse open-ended data before any set is built or any model loaded
            require_options(item)

    def edit(self, item: PromptItem, index: int, seed: int) -> Edit:
        require_options(item)
        n = len(item.options)
        has_gold = item.answer in tuple(LETTERS[:n])
        anchor = LETTERS.index(item.answer) if has_gold else 0  # the option to balance
        gold_position = gold_position_of(seed, item.item_id, index, n)
        rng = rng_for(seed, item.item_id, self.kind, index)
        others = [k for k in range(n) if k != anchor]
        rng.shuffle(others)
        order = others[:gold_position] + [anchor] + others[gold_position:]
        enumerator = rng.choice(list(ENUMERATORS))
        mark_style = rng.choice(list(MARK_STYLES))
        separator = rng.choice(SEPARATORS)
        casing = rng.choice(list(CASINGS))
        labels = list(ENUMERATORS[enumerator][:n])
        pattern, gap = MARK_STYLES[mark_style]
        marks = [pattern.format(label) for label in labels]
        fields = CASINGS[casing]
        template = format_template(order, marks, gap, separator, fields)
        record = {
            "option_order": order, "option_labels": labels, "option_marks": marks,
            "gold_position": gold_position if has_gold else None,
            "enumerator": enumerator_name(enumerator, n), "mark_style": mark_style, "mark_gap": gap,
            "separator": separator, "casing": casing, "fields": list(fields), "template": template,
        }
        return Edit(template=template, record=record)

    def variant(self, item: PromptItem, index: int, seed: int, shots=(), perturb_shots: bool = False) -> PromptVariant:
        # like base.make_prompt, but the exemplars' answers are written in the variant's marks and order
        edit = self.checked_edit(item, index, seed)
        turns = render_turns(item, template=edit.template, shots=tuple(Shot(ex) for ex in shots),
                             answer_text=lambda exemplar: exemplar_answer(edit.record, exemplar),
                             shot_template=lambda exemplar: exemplar_template(edit.record, exemplar))
        return PromptVariant(text=join_turns(turns), kind=self.kind, index=index, record=dict(edit.record),
                             turns=tuple(turns) if shots else ())

    def describe(self) -> dict:
        return {"enumerators": list(ENUMERATORS), "mark_styles": list(MARK_STYLES), "separators": list(SEPARATORS),
                "casings": list(CASINGS),
                "gold_positions": "balanced: each block of n consecutive variants (n: the item's options, 4 in "
                                  "MMLU) shows the gold option at every position once (a seeded permutation per "
                                  "block)"}
