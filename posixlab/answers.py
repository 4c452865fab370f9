"""Is a prompt's answer right? The options a prompt shows, the continuations that choose them, and the parse of a
greedy response into an option, for every prompt of a set.

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
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

LETTERS = "ABCD"


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

    def gold_position(self, answer: str | None) -> int | None:
        """Where the gold option (an item letter A-D) is shown; None without a gold answer."""
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


def parse_choice(response: str, choices: Choices) -> int | None:
    """The position a greedy response picks, or None (unparsed). Accepted, after leading spaces: the position's
    mark (``(B)``), its label alone on its line or followed by ``)``, ``.``, ``:`` or ``,`` (``B``, ``B)``, ``B.``), the
    same after "answer is", or the option's own text. A label followed by a word (the article in "A cat") is not an
    answer.

    >>> c = prompt_choices(("Paris", "Rome", "Oslo", "Bern"), {})
    >>> [parse_choice(r, c) for r in [" (B)Rome", " B", "B. Rome", "The answer is (C)", " Oslo is", "A cat", ""]]
    [1, 1, 1, 2, 2, None, None]
    """
    text = response.strip()
    if not text:
        return None
    by_length = sorted(range(len(choices.marks)), key=lambda p: -len(choices.marks[p]))
    for p in by_length:
        if text.startswith(choices.marks[p]):
            return p
    match = re.match(r"^(?:the\s+)?(?:correct\s+)?answer(?:\s+is)?\s*:?\s*", text, re.IGNORECASE)
    rest = text[match.end():] if match else text
    if match:
        for p in by_length:
            if rest.startswith(choices.marks[p]):
                return p
    for p in sorted(range(len(choices.labels)), key=lambda p: -len(choices.labels[p])):
        label = re.escape(choices.labels[p])
        if re.match(rf"^\(?{label}(?:[).:,]|[ \t]*(?:\n|$))", rest):  # "B", "B)", "B.", "B" ending its line
            return p
    folded = _fold(text)
    named = [p for p, option in enumerate(choices.texts) if _fold(option) and folded.startswith(_fold(option))]
    return named[0] if len(named) == 1 else None


def matches_gold(response: str, answer: str) -> bool:
    """Open-ended items: the response, folded (case, surrounding punctuation and spaces), starts with the folded
    gold answer.

    >>> matches_gold(" True. The statement", "True"), matches_gold("(A) blue", "(A)"), matches_gold("Tru", "True")
    (True, True, False)
    """
    gold = _fold(answer)
    return bool(gold) and _fold(response).startswith(gold)


def _fold(text: str) -> str:
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
    item's own option letters (A-D as in the data), so prompts that reorder the options are compared on the option,
    not on its position.
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
def accuracy_summary(records: list[dict], seed: int = 0) -> dict | None:
    """Accuracy over the run's prompts, from both readings, for the sets that have a gold answer; None when none
    does. Prompt j is the j-th prompt of each set (0: the original); sets of different sizes are padded."""
    from posixlab.metrics import accuracy as acc

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
    for reading in ("by_options", "by_greedy"):
        if all(a[reading] is None for r in scored for a in r["answers"]):
            out[reading] = None
            continue
        correct = [[None if c is None else float(c) for c in row] for row in matrix(reading, "correct")]
        preds = matrix(reading, "pred")
        block = _metrics(acc, correct, preds if any(p is not None for row in preds for p in row) else None, seed)
        if reading == "by_greedy" and any(a["by_greedy"]["parsed"] is not None for r in scored for a in r["answers"]):
            block["parse_rate"] = _parse_rates(scored, width)
        out[reading] = block
    return out


def _metrics(acc, correct, preds, seed: int) -> dict:
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
    }


def _parse_rates(records: list[dict], width: int) -> dict:
    per_prompt, per_kind = [[] for _ in range(width)], {}
    for r in records:
        for j, (a, prompt) in enumerate(zip(r["answers"], r["prompts"])):
            parsed = a["by_greedy"]["parsed"]
            if parsed is None:
                continue
            per_prompt[j].append(parsed)
            per_kind.setdefault(prompt.get("kind", "?"), []).append(parsed)
    everything = [p for column in per_prompt for p in column]
    mean = lambda values: sum(values) / len(values) if values else None  # noqa: E731
    return {"overall": mean(everything), "per_prompt": [mean(c) for c in per_prompt],
            "per_variant_type": {kind: mean(v) for kind, v in per_kind.items()}}
