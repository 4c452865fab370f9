"""Your own classifier from one file: the task sentence, the classes and the samples, for ``task=classification``
(``dataset=classifier dataset.path=my_task.yaml``, or ``posixlab.classify("my_task.yaml", ...)``).

The file is a YAML (``.yaml``, ``.yml``) or JSON (``.json``) object with these keys::

    name: sentiment                    # optional: the file's stem; the results' "dataset" and the sample ids
    task: Classify the sentiment of the review.       # the task sentence (the part the rephrasings rewrite)
    classes:                           # at least 2: a name, or {name, definition, aliases}
      - positive
      - name: negative
        definition: the reviewer did not like it.      # shown by strategy=detail (which needs one for every class)
        aliases: [bad, unfavourable]   # other phrasings of the class the answer parser accepts
    samples:                           # a list, or a .jsonl / .csv file beside this one
      - {text: "A joy from start to finish.", label: positive, id: r1}
      - text: Two hours I will not get back.
        label: negative
      - An unlabelled sample is just its text.

``samples`` as a file name is read relative to the classifier file's folder: ``.jsonl`` (one object a line with
``text``, optional ``label`` and ``id``) or ``.csv`` (a header row with a ``text`` column, optional ``label`` and
``id`` columns; an empty ``label`` cell is no label). Sample ids default to ``<name>/<k>`` (k = the position, from 0).

The built-in data sets (TREC, CB, RTE, DBPedia-14, WoS-46985, MMLU letters) are files of this format without
``samples`` (``posixlab/data/classifiers/``, read by ``read_definition``): their samples come from their loaders.

Rules (each break is a ``ConfigError`` naming the file, the place and the fix, raised before any model loads):
only the keys above; a non-empty task sentence; at least 2 classes, distinct ignoring case, ``_`` and ``-``;
no class "N/A" (the parser's class for an answer naming none); an alias may not be another class's name or alias;
every text non-empty; a label is a class name or one of its aliases, in any case, and is stored as the class name;
label every sample (S, C and micro-F1) or none (S only); ids unique; at least one sample. Unquoted YAML ``yes``,
``no``, ``on``, ``off``, ``true``, ``false`` are booleans: quote them to use them as class names or labels.

>>> import tempfile; folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "task.yaml").write_text(
...     "task: Is the review positive or negative?\\n"
...     "classes: [positive, {name: negative, aliases: [bad]}]\\n"
...     "samples: reviews.jsonl\\n")
>>> _ = (folder / "reviews.jsonl").write_text('{"text": "Loved it.", "label": "Positive"}\\n'
...                                           '{"text": "Dull.", "label": "bad", "id": "r2"}\\n')
>>> d = load_classifier(folder / "task.yaml")
>>> d.name, d.classes, d.aliases, [(s.sample_id, s.gold) for s in d.samples]
('task', ['positive', 'negative'], {'negative': ['bad']}, [('task/0', 'positive'), ('r2', 'negative')])
>>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.data.files import csv_delimiter
from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA

KEYS = ("name", "task", "classes", "samples")
CLASS_KEYS = ("name", "definition", "aliases")
SAMPLE_KEYS = ("text", "label", "id")
FILE_SUFFIXES = (".yaml", ".yml", ".json")
SAMPLE_SUFFIXES = (".jsonl", ".csv")
EXAMPLE = ("task: Classify the sentiment of the review.\nclasses: [positive, negative]\n"
           "samples: reviews.jsonl   # or a list: [{text: ..., label: positive}, ...]")


@dataclass(frozen=True)
class Sample:
    sample_id: str
    text: str  # what the prompt shows after "Here is the text:"
    gold: str | None  # a class name, or None (unlabelled: sensitivity still works)
    fields: dict = field(default_factory=dict, hash=False, compare=False)  # premise/hypothesis, title, options ...


@dataclass(frozen=True)
class ClassifierDefinition:
    """A classifier read from one file: what the prompts show and the samples they classify."""

    name: str
    task_sentence: str
    classes: list[str]
    definitions: dict[str, str] = field(default_factory=dict)  # class -> definition (only the classes given one)
    aliases: dict[str, list[str]] = field(default_factory=dict)  # class -> other phrasings (parse_answer's shape)
    samples: list[Sample] = field(default_factory=list)
    path: str = ""  # the classifier file, absolute
    sha256: str = ""  # of its bytes
    samples_path: str | None = None  # the samples file, absolute (None: samples inline)
    samples_sha256: str | None = None

    @property
    def labelled(self) -> bool:
        return bool(self.samples) and self.samples[0].gold is not None

    def describe(self) -> dict:
        """What a run records about the file (``meta``): where it is and a hash of what it held."""
        return {"name": self.name, "path": self.path, "sha256": self.sha256, "samples_path": self.samples_path,
                "samples_sha256": self.samples_sha256, "num_samples": len(self.samples), "labelled": self.labelled}


def _fold(text: str) -> str:
    """How names are compared: case-folded, ``_`` and ``-`` as spaces, runs of spaces as one (as the parser reads)."""
    return " ".join(re.sub(r"[_\-]", " ", text.casefold()).split())


def _read(path: Path, what: str, hint: str) -> tuple[bytes, str]:
    if not path.is_file():
        raise ConfigError(f"no {what} at {path}" + (" (it is a folder)" if path.exists() else "") + f"; {hint}")
    data = path.read_bytes()
    try:
        return data, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None


def _scalar(value, where: str, what: str) -> str:
    """A string (numbers are read as their text); booleans and anything else are an error."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: {what} is the boolean {str(value).lower()}; YAML reads unquoted yes/no/true/"
                          f"false/on/off as booleans: quote it ('{'yes' if value else 'no'}')")
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {what} must be a string, got a {type(value).__name__} ({value!r})")
    return value.strip()


def load_classifier(path: str | Path) -> ClassifierDefinition:
    """The classifier of a ``.yaml``/``.yml``/``.json`` file (format: the module docstring), validated."""
    path, data, doc, header = _read_header(path)
    samples, samples_path, samples_data = _samples(path, header["name"], doc, header["classes"], header["aliases"])
    return ClassifierDefinition(
        **header, samples=samples, path=str(path), sha256=hashlib.sha256(data).hexdigest(),
        samples_path=None if samples_path is None else str(samples_path),
        samples_sha256=None if samples_data is None else hashlib.sha256(samples_data).hexdigest())


def read_definition(path: str | Path) -> ClassifierDefinition:
    """A classifier file without samples: a built-in data set's (``posixlab/data/classifiers/``), whose samples its
    loader reads (``posixlab/data/classification.py``). The same format and checks, with no ``samples`` key."""
    path, data, doc, header = _read_header(path)
    if "samples" in doc:
        raise ConfigError(f"{path}: a built-in data set's file holds no samples (its loader reads them); remove "
                          f"the samples key")
    return ClassifierDefinition(**header, path=str(path), sha256=hashlib.sha256(data).hexdigest())


def _read_header(path: str | Path) -> tuple[Path, bytes, dict, dict]:
    """The file's path, bytes and document, and what it says besides its samples: name, task sentence, classes,
    definitions and aliases, checked."""
    path = Path(path).expanduser().resolve()
    if path.suffix.lower() not in FILE_SUFFIXES:
        raise ConfigError(f"{path}: a classifier file ends in .yaml, .yml or .json, not "
                          f"{path.suffix or 'no suffix'!r}; its samples may be a .jsonl or .csv file it names")
    data, text = _read(path, "classifier file", "give the path of an existing .yaml, .yml or .json file "
                       "(dataset.path=FILE, or posixlab.classify('FILE', ...))")
    doc = _parse_document(path, text)
    where = str(path)
    unknown = sorted(set(doc) - set(KEYS), key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a classifier file takes "
                          f"{', '.join(KEYS)} (name optional)")
    name = path.stem if doc.get("name") is None else _scalar(doc["name"], f"{where}, name", "the name") or path.stem
    task = "" if doc.get("task") is None else _scalar(doc["task"], f"{where}, task", "the task sentence")
    if not task:
        raise ConfigError(f"{where}: no task sentence; add e.g. `task: Classify the sentiment of the review.` (the "
                          f"sentence the rephrasings rewrite)")
    classes, definitions, aliases = _classes(where, doc.get("classes"))
    return path, data, doc, {"name": name, "task_sentence": task, "classes": classes, "definitions": definitions,
                             "aliases": aliases}


def _parse_document(path: Path, text: str) -> dict:
    if not text.strip():
        raise ConfigError(f"{path} is empty; write a classifier, e.g.\n{EXAMPLE}")
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                              f"fix that line") from None
    else:
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"{path} is not valid YAML ({problem}{at}); fix that line (a text holding ': ' or "
                              f"starting with a quote needs quotes around it)") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} holds a {type(doc).__name__}, not a mapping; a classifier file is an object with "
                          f"the keys {', '.join(KEYS)}, e.g.\n{EXAMPLE}")
    return doc


def _classes(where: str, entries) -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    if entries is None:
        raise ConfigError(f"{where}: no classes; add e.g. `classes: [positive, negative]` (at least 2)")
    if not isinstance(entries, list):
        raise ConfigError(f"{where}, classes: must be a list of class names or of {{name, definition, aliases}} "
                          f"objects, got a {type(entries).__name__}")
    if len(entries) < 2:
        raise ConfigError(f"{where}, classes: {len(entries)} class{'' if len(entries) == 1 else 'es'}; a classifier "
                          f"needs at least 2 (add the other classes)")
    classes, definitions, aliases = [], {}, {}
    owner = {}  # folded name or alias -> (class, place): shared by names and aliases, so each text names one class
    for k, entry in enumerate(entries):
        place = f"{where}, classes[{k}]"
        name, name_place, entry = _class_name(place, entry)
        if _fold(name) in owner:
            other, other_place = owner[_fold(name)]
            if ".aliases[" in other_place:
                raise ConfigError(f"{name_place}: {name!r} is already an alias of {other!r} ({other_place}); an "
                                  f"answer must name one class: remove the alias or rename the class")
            raise ConfigError(f"{name_place}: {name!r} is the same as {other_place} ({other!r}; names are compared "
                              f"ignoring case, '_' and '-'); give each class a distinct name")
        owner[_fold(name)] = (name, name_place)
        classes.append(name)
        definition = entry.get("definition")
        if definition is not None:
            definition = _scalar(definition, f"{place}.definition", "the definition")
            if definition:
                definitions[name] = definition
        kept = _class_aliases(place, name, entry.get("aliases"), owner)
        if kept:
            aliases[name] = kept
    return classes, definitions, aliases


def _class_name(place: str, entry) -> tuple[str, str, dict]:
    """A class entry's name, where the name stands, and its mapping (empty for a bare name)."""
    if isinstance(entry, dict):
        unknown = sorted(set(entry) - set(CLASS_KEYS), key=str)
        if unknown:
            raise ConfigError(f"{place}: unknown key(s) {', '.join(map(repr, unknown))}; a class takes "
                              f"{', '.join(CLASS_KEYS)}")
        if entry.get("name") is None:
            raise ConfigError(f"{place}: no name; write `- name: ...` (definition and aliases are optional)")
        name, name_place = _scalar(entry["name"], f"{place}.name", "the class name"), f"{place}.name"
    else:
        name, name_place, entry = _scalar(entry, place, "the class name"), place, {}
    if not name:
        raise ConfigError(f"{name_place}: empty class name; write the class's name")
    if _fold(name) == _fold(NA):
        raise ConfigError(f"{name_place}: the class name {NA!r} is reserved (an answer naming no class is "
                          f"counted as {NA}); give the class another name")
    return name, name_place, entry


def _class_aliases(place: str, name: str, given, owner: dict) -> list[str]:
    """The aliases of class ``name`` (``given``: a list, one text or None), each claimed in ``owner``; its own name
    is dropped (it always counts)."""
    if given is None:
        return []
    given = [given] if isinstance(given, (str, int, float)) and not isinstance(given, bool) else given
    if not isinstance(given, list):
        raise ConfigError(f"{place}.aliases: must be a list of strings, got a {type(given).__name__}")
    kept = []
    for j, alias in enumerate(given):
        alias_place = f"{place}.aliases[{j}]"
        alias = _scalar(alias, alias_place, "the alias")
        if not alias:
            raise ConfigError(f"{alias_place}: empty alias; remove it")
        if _fold(alias) == _fold(NA):
            raise ConfigError(f"{alias_place}: {NA!r} is reserved for answers naming no class; remove it")
        if _fold(alias) == _fold(name):
            continue
        if _fold(alias) in owner:
            other, other_place = owner[_fold(alias)]
            raise ConfigError(f"{alias_place}: {alias!r} already names {other!r} ({other_place}); an answer "
                              f"must name one class: remove the alias from one of them")
        owner[_fold(alias)] = (name, alias_place)
        kept.append(alias)
    return kept


def _label_map(classes: list[str], aliases: dict[str, list[str]]) -> dict[str, str]:
    out = {_fold(c): c for c in classes}
    out.update({_fold(a): c for c, names in aliases.items() for a in names})
    return out


def _samples(path: Path, name: str, doc: dict, classes: list[str],
             aliases: dict[str, list[str]]) -> tuple[list[Sample], Path | None, bytes | None]:
    where = str(path)
    given = doc.get("samples")
    if given is None:
        raise ConfigError(f"{where}: no samples; add `samples:` with a list of texts (or {{text, label}} objects), "
                          f"or the name of a .jsonl or .csv file beside {path.name}")
    if isinstance(given, str):
        samples_path = (path.parent / Path(given).expanduser()).resolve()
        if not given.strip() or samples_path.suffix.lower() not in SAMPLE_SUFFIXES:
            raise ConfigError(f"{where}, samples: {given!r} is no samples file; give a .jsonl file (one "
                              f'{{"text": ..., "label": ...}} a line) or a .csv file (header text,label[,id])')
        data, text = _read(samples_path, f"samples file (named by {where}, samples)",
                           f"a relative name is read from the folder of {path.name}: fix the name or move the file")
        rows = _jsonl_rows(samples_path, text) if samples_path.suffix.lower() == ".jsonl" else \
            _csv_rows(samples_path, text)
        if not rows:
            raise ConfigError(f"{samples_path} holds no samples; write one sample per line (the samples of {where})")
        return check_samples(rows, name, classes, aliases, f"{samples_path} (the samples of {where})"), \
            samples_path, data
    if not isinstance(given, list):
        raise ConfigError(f"{where}, samples: must be a list of samples or a .jsonl/.csv file name, got a "
                          f"{type(given).__name__}")
    if not given:
        raise ConfigError(f"{where}, samples: the list is empty; give at least one sample")
    rows = []
    for k, entry in enumerate(given):
        place = f"{where}, samples[{k}]"
        if isinstance(entry, dict):
            rows.append((place, entry))
        elif isinstance(entry, (str, int, float)) and not isinstance(entry, bool):
            rows.append((place, {"text": entry}))
        else:
            raise ConfigError(f"{place}: a sample is a text or an object {{text, label, id}}, got a "
                              f"{type(entry).__name__}")
    return check_samples(rows, name, classes, aliases, where), None, None


def read_samples_file(path: str | Path, name: str, classes: list[str],
                      aliases: dict[str, list[str]] | None = None) -> list[Sample]:
    """The samples of a ``.jsonl`` or ``.csv`` file in the classifier format, checked against ``classes`` (for
    ``dataset.exemplar_path``: the 1-shot examples from other labelled data)."""
    path = Path(path).expanduser().resolve()
    if path.suffix.lower() not in SAMPLE_SUFFIXES:
        raise ConfigError(f"{path}: a samples file ends in .jsonl or .csv, not {path.suffix or 'no suffix'!r}")
    _, text = _read(path, "samples file", "give an existing .jsonl or .csv file")
    rows = _jsonl_rows(path, text) if path.suffix.lower() == ".jsonl" else _csv_rows(path, text)
    if not rows:
        raise ConfigError(f"{path} holds no samples; write one sample per line")
    return check_samples(rows, name, classes, aliases or {}, str(path))


def _jsonl_rows(path: Path, text: str) -> list[tuple[str, dict]]:
    rows = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        place = f"{path}, line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{place} is not valid JSON ({exc.msg} at column {exc.colno}); each line must be one "
                              f'object such as {{"text": "...", "label": "..."}}') from None
        if isinstance(row, str):
            row = {"text": row}
        if not isinstance(row, dict):
            raise ConfigError(f"{place} holds a JSON {type(row).__name__}; each line must be one object such as "
                              f'{{"text": "...", "label": "..."}}')
        rows.append((place, row))
    return rows


def _csv_rows(path: Path, text: str) -> list[tuple[str, dict]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=csv_delimiter(text))
    try:
        header = next(reader)
    except StopIteration:
        header = []
    except csv.Error as exc:
        raise ConfigError(f"{path}, line 1 is not valid CSV ({exc}); fix the header row") from None
    header = [h.strip().lower() for h in header]
    if "text" not in header:
        raise ConfigError(f"{path}: no 'text' column; the first row must be a header naming the columns: text and, "
                          f"optionally, label and id (e.g. `text,label`), got {','.join(header) or 'an empty row'}")
    unknown = [h for h in header if h not in SAMPLE_KEYS]
    if unknown or len(set(header)) < len(header):
        fix = ", ".join(map(repr, unknown)) or "the repeated one"
        raise ConfigError(f"{path}, header: columns {', '.join(map(repr, header))}; the columns are text, label "
                          f"and id, each at most once (remove or rename {fix})")
    rows = []
    row_number = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise ConfigError(f"{path}, line {reader.line_num} is not valid CSV ({exc}); fix its quotes") from None
        if not any(c.strip() for c in cells):
            continue
        row_number += 1
        place = f"{path}, row {row_number} (line {reader.line_num})"
        if len(cells) != len(header):
            raise ConfigError(f"{place}: {len(cells)} cells but the header names {len(header)} columns "
                              f"({','.join(header)}); quote a text holding a comma (\"like, this\")")
        row = dict(zip(header, cells))
        if "label" in row and not row["label"].strip():
            row["label"] = None  # an empty cell: no label
        if "id" in row and not row["id"].strip():
            del row["id"]
        rows.append((place, row))
    return rows


def check_samples(rows: list[tuple[str, dict]], name: str, classes: list[str], aliases: dict[str, list[str]],
                  source: str) -> list[Sample]:
    """``(place, {text, label?, id?})`` rows as samples: texts non-empty, labels mapped to their class (aliases and
    case allowed), all labelled or none, ids unique."""
    by_label = _label_map(classes, aliases)
    samples, seen = [], {}
    for k, (place, row) in enumerate(rows):
        unknown = sorted(set(row) - set(SAMPLE_KEYS), key=str)
        if unknown:
            hint = "; a text holding ': ' needs quotes in YAML" if "text" not in row and len(row) == 1 else ""
            raise ConfigError(f"{place}: unknown key(s) {', '.join(map(repr, unknown))}; a sample takes "
                              f"{', '.join(SAMPLE_KEYS)} (label and id optional){hint}")
        text = "" if row.get("text") is None else _scalar(row["text"], place, "the text")
        if not text:
            raise ConfigError(f"{place}: empty text; write the sample's text (or remove the sample)")
        gold = None
        if row.get("label") is not None:
            label = _scalar(row["label"], place, "the label")
            gold = by_label.get(_fold(label)) if label else None
            if gold is None:
                raise ConfigError(f"{place}: label {label!r} is not a class; the classes are {', '.join(classes)} "
                                  f"(any case, or a class's alias): fix the label, add the class or an alias, or "
                                  f"leave the label out")
        sample_id = _scalar(row["id"], place, "the id") if row.get("id") is not None else f"{name}/{k}"
        if not sample_id:
            raise ConfigError(f"{place}: empty id; give a non-empty id or leave it out")
        if sample_id in seen:
            raise ConfigError(f"{place}: id {sample_id!r} is also the id of {seen[sample_id]}; ids must be unique")
        seen[sample_id] = place
        samples.append(Sample(sample_id, text, gold))
    labelled = [place for (place, _), s in zip(rows, samples) if s.gold is not None]
    if labelled and len(labelled) < len(samples):
        unlabelled = [place for (place, _), s in zip(rows, samples) if s.gold is None]
        raise ConfigError(f"{source}: {len(labelled)} of {len(samples)} samples have a label and {len(unlabelled)} "
                          f"{'has' if len(unlabelled) == 1 else 'have'} none (first: {unlabelled[0]}); label all samples (sensitivity S, consistency C and "
                          f"micro-F1) or none (S only)")
    return samples


__all__ = ["ClassifierDefinition", "Sample", "check_samples", "load_classifier", "read_definition", "read_samples_file"]
