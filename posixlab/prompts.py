"""Prompt text: the paper's original formats and its 20 templates (App. B, Tables 4 and 5), exactly as printed.

A prompt is rendered from a ``PromptItem`` (the structured question) and a template. ``{}`` placeholders take the
question, then the options A, B, ... for multiple-choice items (or, indexed, ``{0}`` the question and ``{1}``-``{n}``
the options: format variants reorder them so). Multiple-choice items are preceded by the paper's
instruction line naming the subject.

The paper's multiple-choice prompts show MMLU's 4 options. An item with another number (2-10: ARC's 3 and 5,
CommonsenseQA's 5, MMLU-Pro's 10) is shown in the same prompts with its own run of options, ``(A){} (B){} (C){}``
or ``(A){} ... (J){}`` in place of ``(A){} (B){} (C){} (D){}``: nothing else of a template changes (``with_options``).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

from posixlab.errors import ConfigError

OPTION_LETTERS = "ABCDEFGHIJ"  # the labels of options 0-9: up to 10 options (MMLU-Pro's)
MIN_OPTIONS = 2
MCQ_HEADER = "The following are multiple choice questions (with answers) about {subject}.\n\n"
MCQ_ORIGINAL = "Q:{}\n(A){} (B){} (C){} (D){}\nA:"
OPEN_ORIGINAL = "Q:{}\nA:"

# Table 4 (MMLU), indexed by the paper's "Seed" column. "\n" and "\t" are real newline and tab characters.
MCQ_TEMPLATES = (
    "q:{}\n(A){} (B){} (C){} (D){}\na:",
    "Q::{}\n(A){} (B){} (C){} (D){}\nA::",
    "Q: {}\n(A){} (B){} (C){} (D){}\nA:",
    "q:: {}\n(A){} (B){} (C){} (D){}\na::",
    "Q::: {}\n(A){} (B){} (C){} (D){}\nA:::",
    "Q: {} || (A){} (B){} (C){} (D){} || A:",
    "q:::{}\n(A){} (B){} (C){} (D){}\na:::",
    "Q: {}\n(A){} (B){} (C){} (D){}\nAnswer:",
    "QUESTION:{}\n(A){} (B){} (C){} (D){}\nA:",
    "Question:{}\n(A){} (B){} (C){} (D){}\nAnswer:",
    "QUESTION:{}\n(A){} (B){} (C){} (D){}\nANSWER:",
    "Question: {}\n(A){} (B){} (C){} (D){}\nAnswer:",
    "Question::: {}\n(A){} (B){} (C){} (D){}\nAnswer:::",
    "QUESTION: {}\n(A){} (B){} (C){} (D){}\nAnswer:",
    "Question - {}\n(A){} (B){} (C){} (D){}\nAnswer -",
    "question::{}\n(A){} (B){} (C){} (D){}\nanswer::",
    "question: {}\n(A){} (B){} (C){} (D){}\nanswer:",
    "Question: {} || (A){} (B){} (C){} (D){} || Answer:",
    "QUESTION\t{}\n(A){} (B){} (C){} (D){}\nANSWER\t",
    "Question: {} , (A){} (B){} (C){} (D){} , Answer:",
)

# Table 5 (Alpaca and other open-ended prompts): the same 20 patterns without the options.
OPEN_TEMPLATES = (
    "q:{}\na:",
    "Q::{}\nA::",
    "Q: {}\nA:",
    "q:: {}\na::",
    "Q::: {}\nA:::",
    "Q: {} || A:",
    "q:::{}\na:::",
    "Q: {}\nAnswer:",
    "QUESTION:{}\nA:",
    "Question:{}\nAnswer:",
    "QUESTION:{}\nANSWER:",
    "Question: {}\nAnswer:",
    "Question::: {}\nAnswer:::",
    "QUESTION: {}\nAnswer:",
    "Question - {}\nAnswer -",
    "question::{}\nanswer::",
    "question: {}\nanswer:",
    "Question: {} || Answer:",
    "QUESTION\t{}\nANSWER\t",
    "Question: {} , Answer:",
)


@dataclass(frozen=True)
class PromptItem:
    """One question of a data set, before any prompt variation.

    ``options`` is empty for open-ended items and holds the answer texts (A, B, ...) of multiple-choice items: 4 in
    MMLU, 2-10 in your questions.
    ``subject`` fills the multiple-choice instruction line; ``answer`` is the gold label when the data has one.
    ``graded``: whether ``answer`` grades a response (a gold label: MMLU, BBH, your sets' ``"answer"``) or is only a
    reference output that few-shot exemplars show (Alpaca's: a 30-token greedy response is not graded against a
    paragraph, so such a run reports no accuracy).
    """

    item_id: str
    question: str
    options: tuple[str, ...] = ()
    subject: str | None = None
    answer: str | None = None
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    graded: bool = True

    @property
    def gold(self) -> str | None:
        """The answer a response is graded against; None when there is none (or it is a reference output only)."""
        return self.answer if self.graded else None

    @property
    def is_mcq(self) -> bool:
        return bool(self.options)


def original_template(item: PromptItem) -> str:
    return MCQ_ORIGINAL if item.is_mcq else OPEN_ORIGINAL


def templates_for(item: PromptItem) -> tuple[str, ...]:
    return MCQ_TEMPLATES if item.is_mcq else OPEN_TEMPLATES


def options_run(n: int) -> str:
    """The options of a paper template for ``n`` options: ``(A){} (B){} ...``."""
    return " ".join(f"({letter}){{}}" for letter in OPTION_LETTERS[:n])


def with_options(template: str, n: int) -> str:
    """A paper template (4 options) made to show ``n``: its run of options replaced, nothing else changed. A
    template that places its options by index (``{1}``-``{n}``: format variants build one per item) is returned as
    it is.

    >>> with_options(MCQ_TEMPLATES[5], 3)
    'Q: {} || (A){} (B){} (C){} || A:'
    >>> with_options(MCQ_ORIGINAL, 5).format("Which?", "a", "b", "c", "d", "e")
    'Q:Which?\\n(A)a (B)b (C)c (D)d (E)e\\nA:'
    """
    if not MIN_OPTIONS <= n <= len(OPTION_LETTERS):
        raise ConfigError(f"a multiple-choice item has {MIN_OPTIONS}-{len(OPTION_LETTERS)} options, not {n}")
    if "{0}" in template:
        shown = max((int(f) for _, f, _, _ in string.Formatter().parse(template) if f and f.isdigit()), default=0)
        if shown != n:  # str.format would leave the item's other options out, or fail on the missing ones
            raise ConfigError(f"template {template!r} places options {{1}}-{{{shown}}}; this item has {n}")
        return template
    if n == 4:
        return template
    if options_run(4) not in template:
        raise ConfigError(f"template {template!r} shows no run of 4 options '{options_run(4)}' to fit {n} options "
                          f"into; write its options by index ({{1}}-{{{n}}}) instead")
    return template.replace(options_run(4), options_run(n))


def _body(item: PromptItem, template: str | None, question: str | None) -> str:
    template = original_template(item) if template is None else template
    text = item.question if question is None else question
    if item.is_mcq:
        return with_options(template, len(item.options)).format(text, *item.options)
    return template.format(text)


def gold_answer(item: PromptItem) -> str:
    """An exemplar's answer as it follows its prompt: ``" (B)4"`` (letter and option, as the prompt lists them)."""
    if item.answer is None:
        raise ConfigError(f"item {item.item_id!r} has no gold answer, so it cannot serve as a few-shot exemplar")
    if item.is_mcq:
        return f" ({item.answer}){item.options[OPTION_LETTERS.index(item.answer)]}"
    return " " + item.answer.strip()


@dataclass(frozen=True)
class Shot:
    """A few-shot exemplar: an item with a gold answer, and its question text when a variant rewrote it."""

    item: PromptItem
    question: str | None = None


def render_turns(item: PromptItem, *, template: str | None = None, question: str | None = None,
                 shots: tuple[Shot, ...] = (), answer_text=None, shot_template=None) -> list[tuple[str, str | None]]:
    """The prompt as (user text, assistant answer) turns: one per exemplar, then the question (answer None).

    Exemplars use the same template as the question they precede and carry their gold answer, written by
    ``answer_text(exemplar item)`` (default ``gold_answer``; a format variant writes it with its own marks and
    option order), in ``shot_template(exemplar item)`` (default ``template``: a format variant's exemplar with
    another number of options than the question has its own). The multiple-choice header opens the first turn, once.

    A template may place the options by index: ``{0}`` the question, ``{1}``-``{n}`` the options in the item's order.

    >>> item = PromptItem("x", "What is 2+2?", ("3", "4", "5", "6"))
    >>> render_turns(item, template="Q: {0}\\n1. {3}\\n2. {1}\\n3. {4}\\n4. {2}\\nA:")
    [('Q: What is 2+2?\\n1. 5\\n2. 3\\n3. 6\\n4. 4\\nA:', None)]
    """
    header = MCQ_HEADER.format(subject=item.subject) if item.is_mcq and item.subject else ""
    answer_text = gold_answer if answer_text is None else answer_text
    shot_template = (lambda exemplar: template) if shot_template is None else shot_template
    turns = [(_body(s.item, shot_template(s.item), s.question), answer_text(s.item)) for s in shots]
    turns.append((_body(item, template, question), None))
    return [(header + turns[0][0], turns[0][1])] + turns[1:]


def render(item: PromptItem, *, template: str | None = None, question: str | None = None,
           shots: tuple[Shot, ...] = ()) -> str:
    """The prompt text for ``item``: header (multiple-choice only), exemplars, then the template filled with the
    question (and options).

    ``question`` replaces the item's question (spelling errors, paraphrases); ``template`` replaces the original
    format (template variants). Nothing else of the prompt changes. Each exemplar is its prompt, its gold answer and
    a blank line.

    >>> item = PromptItem("x", "What is 2+2?", ("3", "4", "5", "6"), subject="elementary mathematics")
    >>> print(render(item))
    The following are multiple choice questions (with answers) about elementary mathematics.
    <BLANKLINE>
    Q:What is 2+2?
    (A)3 (B)4 (C)5 (D)6
    A:
    >>> render(PromptItem("y", "Name a color."), template=OPEN_TEMPLATES[5])
    'Q: Name a color. || A:'
    >>> shot = Shot(PromptItem("z", "What is 1+1?", ("1", "2", "3", "4"), answer="B"))
    >>> print(render(item, template=MCQ_TEMPLATES[11], shots=(shot,)))
    The following are multiple choice questions (with answers) about elementary mathematics.
    <BLANKLINE>
    Question: What is 1+1?
    (A)1 (B)2 (C)3 (D)4
    Answer: (B)2
    <BLANKLINE>
    Question: What is 2+2?
    (A)3 (B)4 (C)5 (D)6
    Answer:
    """
    return join_turns(render_turns(item, template=template, question=question, shots=shots))


def join_turns(turns: list[tuple[str, str | None]]) -> str:
    """The plain prompt text of some turns: each exemplar's prompt, its answer and a blank line, then the question."""
    return "".join(user + (answer + "\n\n" if answer is not None else "") for user, answer in turns)


def chat_messages(turns: list[tuple[str, str | None]]) -> list[dict]:
    """Turns as chat messages: each exemplar a user turn and an assistant turn, then the question's user turn."""
    messages = []
    for user, answer in turns:
        messages.append({"role": "user", "content": user})
        if answer is not None:
            messages.append({"role": "assistant", "content": answer.strip()})
    return messages


def fold_system_turn(messages: list[dict]) -> list[dict] | None:
    """``messages`` with an opening system turn moved to the head of the first user turn (a blank line between), for
    chat templates that refuse a system turn (Gemma 2's raises "System role not supported"; Mistral-7B-Instruct-v0.1's
    wants user and assistant turns alternating); None where the chat opens with no system turn. The in-process
    models (``causal_lm.chat_text``) and the OpenAI-compatible client (a server whose template refuses it) fold the
    same way, so a judge or a rephraser asks the same text on either.

    >>> fold_system_turn([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}])
    [{'role': 'user', 'content': 'Be brief.\\n\\nHi?'}]
    >>> fold_system_turn([{"role": "system", "content": "Be brief."}])
    [{'role': 'user', 'content': 'Be brief.'}]
    >>> fold_system_turn([{"role": "user", "content": "Hi?"}]) is None
    True
    """
    if not messages or messages[0].get("role") != "system":
        return None
    system, rest = messages[0]["content"], list(messages[1:])
    if rest and rest[0].get("role") == "user":
        rest[0] = {**rest[0], "content": f"{system}\n\n{rest[0]['content']}"}
    else:
        rest.insert(0, {"role": "user", "content": system})
    return rest
