"""Your own questions, from a file or a hub data set, as ``PromptItem``s: posixlab builds their prompt sets with any
variant type, as it does MMLU's (multiple choice) or Alpaca's (open-ended). ``dataset=questions`` (conf/dataset/).

Your records keep their own field names; ``dataset.options`` names them:

- ``question`` (required): the question's text;
- ``choices``: the options of a multiple-choice question: a field holding a list of strings, or an object with the
  list under ``text`` and optionally its labels under ``label`` (the hub's common layout: ARC, OpenBookQA,
  CommonsenseQA), or a list of ``{label, text}`` objects, or a list of fields (CSV columns ``[A, B, C, D]``; a
  question of fewer options leaves the last empty), or a mapping of fields to the labels the answer uses
  (Winogrande: ``{option1: 1, option2: 2}``); null: open-ended questions;
- ``answer``: the gold answer: an index from 0, a letter A, B, ..., one of the choices' labels, or the right option's
  text;
- ``subject``: a field naming the subject, which opens the paper's multiple-choice prompt ("... about {subject}.");
- ``id``: a field holding the record's id.

A dotted name reaches inside a record (``question.stem``, OpenBookQA's nesting). Sources: ``path`` (a JSON, JSONL or
CSV file) or ``hub`` (a Hugging Face data set: ``dataset.path`` its id, ``dataset.options.config`` its configuration,
``dataset.split`` its split, test by default).

Decisions.
- A question has 2 to 10 options (MMLU's 4, ARC's 3-5, CommonsenseQA's 5, MMLU-Pro's up to 10), shown as the
  paper's templates show MMLU's 4, with a run of options of its own length (``posixlab.prompts``) and labelled
  A, B, ...; format variants enumerate, reorder and balance them alike. A record with fewer or more is left out and
  counted in a note; if none is left, an error.
- An open-ended question's answer is a reference output (few-shot exemplars show it; not graded) unless
  ``graded=true``: short answers compared exactly, as BBH's targets are.
- An item's id is its ``id`` field, else ``<name>/<record index>``, counted before anything is left out, so an item
  keeps its id whatever the filter; ``<name>`` is the file's or data set's (``data_name``).
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import sys
from pathlib import Path

from posixlab.data.files import FILE_SUFFIXES, hub_file_split, hub_rows, read_records
from posixlab.data.mmlu import keep_subjects
from posixlab.errors import ConfigError, DatasetUnavailableError
from posixlab.prompts import MIN_OPTIONS, OPTION_LETTERS, PromptItem

LETTERS = OPTION_LETTERS
DEFAULT_NAME = "questions"  # the name of a run of your questions before dataset.path names them
# the data sets posixlab reads itself, whose names tables and figures compare with the paper's numbers and group cells
# by: a file of your questions named so gets another name, so its numbers are not taken for the paper's setting
OWN_NAMES = ("mmlu", "mmlu_sample", "alpaca", "bbh")
USUAL_CHOICES = ("choices", "options", "endings")  # where records often keep their options (a note names them)
USUAL_ANSWERS = ("answer", "answerKey", "label", "gold", "correct_answer", "target")  # ... and their gold answer


def data_name(path=None, config=None) -> str:
    """The name results give your questions (``${posixlab.data_name:${dataset.path},${dataset.options.config}}``):
    the file's stem or the hub data set's name, with its configuration, so that a sweep over several files or hub
    data sets gets cells, job folders and tables of their own without a ``dataset.name``.

    >>> data_name("~/data/arc_easy.jsonl"), data_name("allenai/ai2_arc", "ARC-Challenge"), data_name(None)
    ('arc_easy', 'ai2_arc-ARC-Challenge', 'questions')
    >>> data_name("my data (v2).csv"), data_name("exports/mmlu.jsonl")    # not the paper's MMLU
    ('my_data_v2_', 'mmlu-questions')
    >>> data_name("arc/ARC-Challenge/test-00000-of-00001.parquet")    # a hub file, copied: its folder and split
    'ARC-Challenge-test'
    """
    if not path:
        return DEFAULT_NAME
    text = str(path).rstrip("/")
    name = Path(text).stem if Path(text).suffix.lower() in FILE_SUFFIXES else text.rpartition("/")[2]
    split = hub_file_split(text) if Path(text).suffix.lower() == ".parquet" else None
    if split:
        name = "-".join(filter(None, (Path(text).parent.name, split)))
    name = f"{name}-{config}" if config else name
    name = re.sub(r"[^\w.-]+", "_", name) or DEFAULT_NAME  # a job folder's name: no spaces, no slashes
    return f"{name}-{DEFAULT_NAME}" if name in OWN_NAMES else name


def answer_length(choices) -> int:
    """The paper's response length for your questions (``${posixlab.answer_length:${dataset.options.choices}}``,
    conf/dataset/questions.yaml's ``max_new_tokens``; ``evaluate_dataset``'s default): 5 tokens for multiple choice
    (MMLU's) and 30 for open-ended ones (Alpaca's).

    >>> answer_length("choices"), answer_length(None)
    (5, 30)
    """
    return 5 if choices else 30


_ABSENT = object()


def field(record: dict, name: str, where: str, default=_ABSENT):
    """The value under ``name`` in ``record``, a dotted name reaching inside nested objects; where it is missing,
    ``default`` if one is given, else an error naming the fields there.

    >>> field({"question": {"stem": "Why?"}}, "question.stem", "r")
    'Why?'
    >>> field({"q": 1, "id": 2}, "question", "file, record 0")
    Traceback (most recent call last):
    posixlab.errors.DatasetUnavailableError: file, record 0: no field 'question' (its fields: q, id); name yours with \
dataset.options (question=..., choices=..., answer=...)
    """
    value, walked = record, []
    for part in name.split("."):
        if (not isinstance(value, dict) or part not in value) and default is not _ABSENT:
            return default
        if not isinstance(value, dict) or part not in value:
            fields = ", ".join(value) if isinstance(value, dict) else type(value).__name__
            at = f" in {'.'.join(walked)}" if walked else ""
            raise DatasetUnavailableError(f"{where}: no field {part!r}{at} (its fields: {fields}); name yours with "
                                          f"dataset.options (question=..., choices=..., answer=...)")
        value, walked = value[part], [*walked, part]
    return value


def _json_text(value):
    """A list or object a CSV cell holds as JSON text, or as Python writes it (pandas' ``to_csv`` of a column of
    lists: single quotes), parsed; anything else as it is.

    >>> _json_text('["3", "4"]'), _json_text("['3', 'four']"), _json_text("[(A) 3]"), _json_text("[1, f(2)]")
    (['3', '4'], ['3', 'four'], '[(A) 3]', '[1, f(2)]')
    """
    if isinstance(value, str) and value.strip()[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
        try:  # literals only: a cell is never run
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return value
        return parsed if isinstance(parsed, (list, dict)) else value
    return value


def options_of(record: dict, choices, where: str) -> tuple[list[str], list[str] | None]:
    """The options of a multiple-choice record and their labels (None where the data gives none).

    >>> options_of({"choices": {"text": ["a", "b", "c", "d"], "label": ["1", "2", "3", "4"]}}, "choices", "r")
    (['a', 'b', 'c', 'd'], ['1', '2', '3', '4'])
    >>> options_of({"A": "w", "B": "x", "C": "y", "D": "z"}, ["A", "B", "C", "D"], "r")
    (['w', 'x', 'y', 'z'], None)
    >>> options_of({"o": [{"label": "a", "text": "w"}, {"label": "b", "text": "x"}]}, "o", "r")
    (['w', 'x'], ['a', 'b'])
    >>> options_of({"option1": "the cat", "option2": "the dog"}, {"option1": 1, "option2": 2}, "r")   # Winogrande
    (['the cat', 'the dog'], ['1', '2'])
    >>> options_of({"A": "w", "B": "x", "C": "y", "D": ""}, ["A", "B", "C", "D"], "r")   # 3 options: D left empty
    (['w', 'x', 'y'], None)
    """
    if isinstance(choices, (dict, list, tuple)):  # fields (and, in a mapping, the labels the answer names them by)
        options = _filled_fields(record, list(choices), where)
        labels = [str(label) for label in choices.values()][:len(options)] if isinstance(choices, dict) else None
        return options, labels
    value = _json_text(field(record, choices, where))
    labels = None
    if isinstance(value, dict):
        if "text" not in value:
            raise DatasetUnavailableError(f"{where}: {choices} is an object without a 'text' list (its fields: "
                                          f"{', '.join(value)}); name the list itself, e.g. {choices}.FIELD")
        labels = [str(label) for label in value.get("label") or []] or None
        value = value["text"]
    if isinstance(value, str):  # a CSV cell, most often: the options joined, or a list written as Python prints it
        raise DatasetUnavailableError(
            f"{where}: {choices} holds the text {value[:60]!r}, not a list of options; write them as a JSON list "
            f'(["3", "4", "5", "6"]; in a CSV cell too), or each in a column of its own, named in order: '
            f"dataset.options.choices=[A,B,C,D]")
    if not isinstance(value, (list, tuple)):
        raise DatasetUnavailableError(f"{where}: {choices} holds {type(value).__name__}, not a list of options")
    if value and all(isinstance(option, dict) and "text" in option for option in value):  # [{label, text}, ...]
        labels = [str(option.get("label")) for option in value] if all("label" in o for o in value) else None
        value = [option["text"] for option in value]
    return [str(option) for option in value], labels


def _filled_fields(record: dict, names: list[str], where: str) -> list[str]:
    """The options in the fields ``names``, the empty ones at the end left out: a question with fewer options than
    the columns (ARC's 3-5 in columns A-E) leaves the last ones empty (a blank CSV cell, null, NaN). An empty one
    before a filled one is an error: the options after it would move up a letter, and the answer with them."""
    values = [field(record, name, where) for name in names]
    blank = [v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip()) for v in values]
    count = len(values) - next((k for k, b in enumerate(reversed(blank)) if not b), len(values))
    inner = [name for name, b in zip(names[:count], blank) if b]
    if inner:
        raise DatasetUnavailableError(f"{where}: option {inner[0]} is empty, but {names[count - 1]} after it is not; "
                                      f"a question with fewer options leaves the last ones empty (the answer's letter "
                                      f"counts the options in order)")
    return [str(v) for v in values[:count]]


def gold_letter(value, options: list[str], labels: list[str] | None, where: str) -> str | None:
    """The gold answer as a letter (A for the first option); None where the record has none. A number is an index
    from 0; a text is, in this order, one of the choices' labels, a letter A, B, ..., the right option's text, or an
    index written as text (a CSV cell).

    >>> opts = ["red", "green", "blue", "grey"]
    >>> [gold_letter(v, opts, None, "r") for v in (2, "2", "c", "blue", None)]
    ['C', 'C', 'C', 'C', None]
    >>> gold_letter("1", opts, ["1", "2", "3", "4"], "r"), gold_letter("4", ["3", "4", "5", "6"], None, "r")
    ('A', 'B')
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    stripped = [option.strip() for option in options]
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(options):
            return LETTERS[value]
    else:
        text = str(value).strip()
        if labels and text in labels:
            return LETTERS[labels.index(text)]
        if len(text) == 1 and text.upper() in LETTERS[:len(options)]:
            return text.upper()
        if text in stripped:
            return LETTERS[stripped.index(text)]
        if text.isdigit() and int(text) < len(options):
            return LETTERS[int(text)]
    raise DatasetUnavailableError(f"{where}: answer {value!r} is none of the {len(options)} options (an index "
                                  f"0-{len(options) - 1}, a letter A-{LETTERS[len(options) - 1]}, a label"
                                  f"{' ' + '/'.join(labels) if labels else ''} or an option's text)")


def unnamed_fields(record: dict, choices, answer) -> dict[str, str]:
    """The settings that would read fields a record seems to have but ``dataset.options`` does not name: options in
    letter columns (``A``, ``B``, ...) or a list under a usual name, while ``choices`` is null (the questions are then
    read as open-ended, their options never shown); an answer under a usual name while ``answer`` is null (nothing is
    graded). Empty where nothing is left unread.

    >>> unnamed_fields({"question": "q", "A": "3", "B": "4", "C": "5", "answer": "B"}, None, None)
    {'choices': '[A,B,C]', 'answer': 'answer'}
    >>> unnamed_fields({"question": "q", "choices": {"text": ["x", "y"]}, "answerKey": "A"}, "choices", None)
    {'answer': 'answerKey'}
    >>> unnamed_fields({"instruction": "write a poem", "output": "..."}, None, None)
    {}
    """
    found = {}
    if not choices:
        letters = list(itertools.takewhile(lambda c: c in record, OPTION_LETTERS))
        listed = [key for key in USUAL_CHOICES if isinstance(record.get(key), (list, dict))]
        if len(letters) >= MIN_OPTIONS:
            found["choices"] = f"[{','.join(letters)}]"
        elif listed:
            found["choices"] = listed[0]
    if answer is None and (found or choices):  # an open-ended data set's "output" is a reference, not a gold label
        named = next((key for key in USUAL_ANSWERS if key in record), None)
        if named is not None:
            found["answer"] = named
    return found


def items_from_records(records, source: str, name: str, *, question: str = "question", choices=None, answer=None,
                       subject=None, id=None, graded: bool | None = None) -> list[PromptItem]:  # noqa: A002
    """Your records as items (see the module's docstring); a note on stderr counts the multiple-choice records left
    out for having fewer than 2 or more than 10 options.

    >>> rows = [{"q": "Sky?", "opts": ["red", "blue", "green", "grey"], "gold": "blue"},
    ...         {"q": "Three?", "opts": ["a", "b", "c"], "gold": 2}]
    >>> [(i.item_id, i.options[1], i.answer) for i in items_from_records(rows, "doc", "mine", question="q",
    ...                                                                 choices="opts", answer="gold")]
    [('mine/0', 'blue', 'B'), ('mine/1', 'b', 'C')]
    """
    if graded is not None and not isinstance(graded, bool):
        raise ConfigError(f"dataset.options.graded must be true or false, got {graded!r}")
    items, other_sizes, found = [], {}, {"answer": 0, "subject": 0}
    for n, record in enumerate(records):
        where = f"{source}, record {n}"
        if not isinstance(record, dict):
            raise DatasetUnavailableError(f"{where} is a {type(record).__name__}, not an object with fields")
        text = str(field(record, question, where) or "").strip()
        if not text:
            raise DatasetUnavailableError(f"{where}: the question ({question}) is empty")
        options, labels = options_of(record, choices, where) if choices else ([], None)
        if choices and not MIN_OPTIONS <= len(options) <= len(LETTERS):
            other_sizes[len(options)] = other_sizes.get(len(options), 0) + 1
            continue
        # a record without an answer or a subject has none (JSONL records may leave it out); no record with the
        # field at all is an error at the end (a misspelt name)
        gold = field(record, answer, where, None) if answer else None
        topic = field(record, subject, where, None) if subject else None
        found["answer"] += gold is not None
        found["subject"] += topic is not None
        if options:
            gold = gold_letter(gold, options, labels, where)
        elif gold is not None:
            gold = str(gold).strip() or None
        topic = None if topic is None else str(topic).replace("_", " ").strip() or None
        item_id = str(field(record, id, where)) if id else f"{name}/{n}"
        items.append(PromptItem(item_id=item_id, question=text, options=tuple(options), subject=topic, answer=gold,
                                meta={"source": source}, graded=bool(options) if graded is None else graded))
    if other_sizes:
        counts = ", ".join(f"{count} with {size}" for size, count in sorted(other_sizes.items()))
        if not items:
            raise DatasetUnavailableError(f"no question with {MIN_OPTIONS}-{len(LETTERS)} options in {source} "
                                          f"({counts}); give choices=null for open-ended questions")
        print(f"posixlab: {source}: {sum(other_sizes.values())} of {len(items) + sum(other_sizes.values())} "
              f"multiple-choice questions left out ({counts} options; a question has {MIN_OPTIONS}-{len(LETTERS)})",
              file=sys.stderr)
    if not items:
        raise DatasetUnavailableError(f"no question in {source}")
    for key, name in (("answer", answer), ("subject", subject)):
        if name and not found[key]:
            field(records[0], name, f"{source}: no record has the {key} field {name!r}; record 0")  # names its fields
    unread = unnamed_fields(records[0], choices, answer)
    if unread:
        print(f"posixlab: note: {source}: " + ("dataset.options.choices is null, so the questions are open-ended, "
                                              "their options never shown" if "choices" in unread else
                                              "dataset.options.answer is null, so no answer is graded")
              + "; " + " ".join(f"dataset.options.{key}={value}" for key, value in unread.items())
              + " reads the fields the records seem to have for them", file=sys.stderr)
    return items


def load_questions(source: str = "path", path: str | None = None, split: str | None = None,
                   subjects: list[str] | None = None, config: str | None = None, question: str = "question",
                   choices=None, answer=None, subject=None, id=None,  # noqa: A002
                   graded: bool | None = None) -> list[PromptItem]:
    """Your questions from a local file (``source="path"``) or a hub data set (``source="hub"``, ``path`` its id,
    ``config`` its configuration, ``split`` its split: test by default), their fields named by the other keywords
    (the module's docstring); ``subjects``: keep only the questions of these subjects."""
    fields = {"question": question, "choices": choices, "answer": answer, "subject": subject, "id": id,
              "graded": graded}
    if not path:
        raise ConfigError("dataset=questions needs dataset.path: a JSON, JSONL, CSV or Parquet file of your questions, "
                          "or a hub data set's id with dataset.source=hub")
    if source == "path":
        if split is not None:
            raise ConfigError(f"a file has no splits (dataset.split={split}); give the split's own file")
        items = items_from_records(read_records(Path(path).expanduser()), str(path), data_name(path), **fields)
    elif source == "hub":
        split = split or "test"
        hint = ("To run offline, save the split as a JSON, JSONL, CSV or Parquet file and run with dataset.source=path "
                "dataset.path=FILE (the same dataset.options)")
        rows = hub_rows(path, [config], split, path, hint)[config]
        items = items_from_records(rows, f"{path}{':' + config if config else ''}:{split}", data_name(path, config),
                                   **fields)
    else:
        raise ConfigError(f"unknown dataset.source {source!r} for your questions; choose path or hub")
    return keep_subjects(items, subjects, "question",
                         "" if subject else " (name the subject's field: dataset.options.subject=FIELD)")
