"""Format variants (DOVE, Habba et al. 2025; FormatSpread, Sclar et al. 2024): the same multiple-choice question
shown with its options in another order, enumerated, marked, joined and introduced differently. The question text,
the option texts, the subject line and the paper's header line stay as they are; the paper's 20 templates are not
used (the format is built from the dimensions below). Multiple-choice items only.

Variant ``v`` of an item draws one value per dimension from its own stream ``rng_for(seed, item_id, "format", v)``,
in this order:

- **option order**: where the gold option is shown is balanced, as SCORE (Nalbandyan et al. 2025) puts the correct
  answer at every position: the variants are taken in blocks of four (``v // 4``), each block has its own seeded
  permutation of the four positions (``rng_for(seed, item_id, "format/gold", v // 4)``) and variant ``v`` puts the
  gold option at position ``permutation[v % 4]``. So every 4 consecutive variants show the gold at each position
  once, and a set of 20 variants shows it 5 times at each (4m variants: m times; otherwise as evenly as the count
  allows, at most one apart). The other three options fill the other positions in a seeded random order. An item
  without a gold answer balances its first option the same way (``gold_position`` is then None).
- **enumerator**: ``A B C D``, ``1 2 3 4``, ``a b c d`` or ``i ii iii iv`` (uniform).
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
variant's mark: `` 2. text`` instead of the paper's `` (B)text``. Format variants never change a question's text,
so ``perturb_shots`` changes nothing for them. The original prompt (index -1) keeps the paper's format.
"""

from __future__ import annotations

from posixlab.errors import ConfigError
from posixlab.prompts import PromptItem, Shot, gold_answer, join_turns, render_turns
from posixlab.seeding import rng_for
from posixlab.variants.base import Edit, PromptVariant, VariantGenerator

NUM_OPTIONS = 4
LETTERS = "ABCD"
ENUMERATORS = {  # name -> the labels of positions 0-3
    "A-D": ("A", "B", "C", "D"),
    "1-4": ("1", "2", "3", "4"),
    "a-d": ("a", "b", "c", "d"),
    "i-iv": ("i", "ii", "iii", "iv"),
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


def gold_position_of(seed: int, item_id: str, index: int) -> int:
    """Where variant ``index`` shows the gold option: position ``permutation[index % 4]`` of its block's seeded
    permutation, so each block of 4 consecutive variants uses every position once."""
    permutation = rng_for(seed, item_id, "format/gold", index // NUM_OPTIONS).sample(range(NUM_OPTIONS), NUM_OPTIONS)
    return permutation[index % NUM_OPTIONS]


def exemplar_answer(record: dict, exemplar: PromptItem) -> str:
    """An exemplar's answer in a format variant: a space, the mark of the position its gold option is shown at, the
    gap and the option (`` 2. text``; the paper's `` (B)text`` is the same rule with its own marks)."""
    if exemplar.answer is None or exemplar.answer not in LETTERS[: len(exemplar.options)]:
        return gold_answer(exemplar)  # raises the same error as every other variant type (or writes open answers)
    gold = LETTERS.index(exemplar.answer)
    position = record["option_order"].index(gold)
    return " " + record["option_marks"][position] + record["mark_gap"] + exemplar.options[gold]


def require_options(item: PromptItem) -> None:
    """Format variants reorder and relabel answer options: an item without exactly four is refused."""
    dataset = item.item_id.split("/")[0]
    if not item.is_mcq:
        raise ConfigError(f"variant=format reorders and relabels answer options, so it needs multiple-choice items; "
                          f"data set {dataset!r} has open-ended items (item {item.item_id!r} has no options). Use "
                          f"variant=spelling, template or paraphrase for it, or a multiple-choice data set (mmlu)")
    if len(item.options) != NUM_OPTIONS:
        raise ConfigError(f"variant=format takes items with {NUM_OPTIONS} options; item {item.item_id!r} of data set "
                          f"{dataset!r} has {len(item.options)}")


class FormatVariants(VariantGenerator):
    kind = "format"

    def prepare(self, items: list[PromptItem], num_variants: int, progress: bool = True) -> None:
        for item in items:  # refuse open-ended data before any set is built or any model loaded
            require_options(item)

    def edit(self, item: PromptItem, index: int, seed: int) -> Edit:
        require_options(item)
        anchor = LETTERS.index(item.answer) if item.answer in tuple(LETTERS) else 0  # the option to balance
        gold_position = gold_position_of(seed, item.item_id, index)
        rng = rng_for(seed, item.item_id, self.kind, index)
        others = [k for k in range(NUM_OPTIONS) if k != anchor]
        rng.shuffle(others)
        order = others[:gold_position] + [anchor] + others[gold_position:]
        enumerator = rng.choice(list(ENUMERATORS))
        mark_style = rng.choice(list(MARK_STYLES))
        separator = rng.choice(SEPARATORS)
        casing = rng.choice(list(CASINGS))
        labels = list(ENUMERATORS[enumerator])
        pattern, gap = MARK_STYLES[mark_style]
        marks = [pattern.format(label) for label in labels]
        fields = CASINGS[casing]
        template = format_template(order, marks, gap, separator, fields)
        record = {
            "option_order": order, "option_labels": labels, "option_marks": marks,
            "gold_position": gold_position if item.answer in tuple(LETTERS) else None,
            "enumerator": enumerator, "mark_style": mark_style, "mark_gap": gap, "separator": separator,
            "casing": casing, "fields": list(fields), "template": template,
        }
        return Edit(template=template, record=record)

    def variant(self, item: PromptItem, index: int, seed: int, shots=(), perturb_shots: bool = False) -> PromptVariant:
        # like base.make_prompt, but the exemplars' answers are written in the variant's marks and order
        edit = self.edit(item, index, seed)
        turns = render_turns(item, template=edit.template, shots=tuple(Shot(ex) for ex in shots),
                             answer_text=lambda exemplar: exemplar_answer(edit.record, exemplar))
        return PromptVariant(text=join_turns(turns), kind=self.kind, index=index, record=dict(edit.record),
                             turns=tuple(turns) if shots else ())

    def describe(self) -> dict:
        return {"enumerators": list(ENUMERATORS), "mark_styles": list(MARK_STYLES), "separators": list(SEPARATORS),
                "casings": list(CASINGS),
                "gold_positions": "balanced: each block of 4 consecutive variants shows the gold option at every "
                                  "position once (a seeded permutation per block)"}
