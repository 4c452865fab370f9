"""Classification prompts (Errica et al. §4): a fixed frame around one task sentence, the only part rephrased.

Three strategies, as in the paper: ``simple`` (class list, the text, task sentence and answer format), ``detail``
(adds a one-line definition of every class; the paper's "Detail") and ``1shot`` (adds one labelled example per
class). The paper's exact sentences are not published in its text; ours, with the class definitions, are each data
set's file (``posixlab/data/classifiers/<name>.yaml``) and go into every result.

>>> frame = TaskFrame("trec", TREC_TASK, CLASSES["trec"], DEFINITIONS["trec"])
>>> print(frame.prompt("Classify the question.", "How far is it from Denver to Aspen ?", "simple"))
You are a text classifier.
Classes: Number, Description, Entity, Abbreviation, Location, Person.
<BLANKLINE>
Here is the text: How far is it from Denver to Aspen ?
Classify the question. Answer with the class name only.
Class:
"""

from __future__ import annotations

from dataclasses import dataclass, field

from posixlab.data.classification import BUILTIN, CLASSES, Sample  # noqa: F401 (CLASSES: the doctests use it)
from posixlab.errors import ConfigError

STRATEGIES = ("simple", "detail", "1shot", "structured")  # structured: a JSON object of a schema (posixlab/structured/)
SYSTEM = "You are a text classifier."

# The task sentence of each data set: the sentence the rephraser rewrites (Q - 1 times)
TASK_SENTENCES = {name: d.task_sentence for name, d in BUILTIN.items()}
TASKS = TASK_SENTENCES  # the older name (posixlab.tasks.TASKS is something else: the task types)
TREC_TASK = TASK_SENTENCES["trec"]
# one line per class, shown by the detail strategy (and in the schema's descriptions, strategy=structured)
DEFINITIONS = {name: d.definitions for name, d in BUILTIN.items()}


@dataclass(frozen=True)
class TaskFrame:
    """Everything of a prompt but the task sentence and the text: what a run's prompts share."""

    dataset: str
    task: str  # the original task sentence
    classes: list[str]
    definitions: dict[str, str] = field(default_factory=dict)
    examples: tuple[Sample, ...] = ()  # one per class, for ``1shot``

    @property
    def letters(self) -> bool:
        return all(len(c) == 1 and c.isalpha() for c in self.classes)

    @property
    def answer_format(self) -> str:
        return "Answer with the letter of the correct option only." if self.letters else \
            "Answer with the class name only."

    def prompt(self, task_sentence: str, text: str, strategy: str) -> str:
        """The prompt for one (rephrased) task sentence and one text. It ends with ``Class:``; the answer follows."""
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        # What every prompt shares comes first, then the text, then the task sentence (what the rephrasings change):
        # the scoring engine then runs the shared part (definitions, examples) once per wave and each text once
        # for all its rephrasings.
        if strategy == "structured":  # the classes and their descriptions are in the schema, as instructor sends them
            return "\n".join([SYSTEM, "", f"Here is the text: {text}", task_sentence.strip()])
        lines = [SYSTEM, f"Classes: {', '.join(self.classes)}."]
        if strategy == "detail":
            lines += ["Class definitions:"] + [f"- {c}: {self.definitions.get(c, '')}".rstrip(": ")
                                               for c in self.classes]
        if strategy == "1shot":
            if not self.examples:
                raise ConfigError("strategy=1shot needs one labelled example per class (none were drawn)")
            lines += ["", "Examples:"]
            for example in self.examples:
                lines += [f"Text: {example.text}", f"Class: {example.gold}", ""]
            lines.pop()
        lines += ["", f"Here is the text: {text}", f"{task_sentence.strip()} {self.answer_format}", "Class:"]
        return "\n".join(lines)

    def describe(self) -> dict:
        return {"system": SYSTEM, "task": self.task, "answer_format": self.answer_format,
                "definitions": self.definitions, "examples": [e.sample_id for e in self.examples]}
