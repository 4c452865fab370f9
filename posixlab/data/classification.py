"""Classification data sets (Errica et al. §4): TREC, CB, RTE, DBPedia-14, WoS-46985 level 1, and, offline, the
answer letter of the bundled MMLU sample as a 4-class task.

Each comes from the Hugging Face Hub (``source: hub``) or from a local copy in its original distribution format
(``source: path``):

- TREC: ``TREC_10.label`` / ``train_5500.label`` lines ``COARSE:fine question`` (``NUM:dist How far is ...``);
- CB, RTE: SuperGLUE's ``{split}.jsonl`` (``premise``, ``hypothesis``, ``label``; RTE's ``not_entailment``);
- DBPedia-14: ``dbpedia_csv/{test,train}.csv`` without a header (class 1-14, title, content) and ``classes.txt``;
- WoS-46985: the folder ``WOS46985/`` with ``X.txt`` (one abstract a line) and ``YL1.txt`` (level-1 labels 0-6).

Labels become the class names the prompt shows. What the prompts say of each data set (task sentence, classes, their
definitions and the aliases the parser accepts) is data: ``posixlab/data/classifiers/<name>.yaml``, classifier files
without samples (``BUILTIN``); this module reads the samples. DBPedia and WoS are large, so the paper draws 2,000
class-balanced samples with seed 42 (``balanced_sample``); TREC uses its 500 test questions.
"""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path

from posixlab.data.classifier_file import ClassifierDefinition, Sample, read_definition
from posixlab.data.files import hub_file_split, hub_rows, parquet_rows
from posixlab.paths import shown
from posixlab.errors import ConfigError, DatasetUnavailableError, is_whole

BUILTIN_DIR = Path(__file__).with_name("classifiers")
# the built-in data sets, each a classifier file without samples (read once, at import); the readers below know them
BUILTIN: dict[str, ClassifierDefinition] = {
    name: read_definition(BUILTIN_DIR / f"{name}.yaml")
    for name in ("trec", "cb", "rte", "dbpedia14", "wos46985", "mmlu_letters")}
CLASSES = {name: d.classes for name, d in BUILTIN.items()}  # the class names the prompts show, in the files' order
# other phrasings of a class that the parser accepts (the label itself always counts)
ALIASES = {name: d.aliases for name, d in BUILTIN.items()}

# TREC's coarse codes (its files' and the hub's) and the classes the prompts name
TREC_CODES = {"NUM": "Number", "DESC": "Description", "ENTY": "Entity", "ABBR": "Abbreviation", "LOC": "Location",
              "HUM": "Person"}
TREC_CLASSES = CLASSES["trec"]
CB_CLASSES = CLASSES["cb"]
RTE_CLASSES = CLASSES["rte"]
DBPEDIA_CLASSES = CLASSES["dbpedia14"]  # the data set's classes 1-14, in its order
WOS_CLASSES = CLASSES["wos46985"]  # YL1 = 0..6, in the data set's order
LETTER_CLASSES = CLASSES["mmlu_letters"]

# hub id, config, label field, and how a hub row becomes (text, fields)
HUB = {"trec": ("CogComp/trec", None, "coarse_label"), "cb": ("aps/super_glue", "cb", "label"),
       "rte": ("aps/super_glue", "rte", "label"), "dbpedia14": ("fancyzhx/dbpedia_14", None, "label"),
       "wos46985": ("HDLTex/web_of_science", "WOS46985", "label_level_1")}
HUB_LABEL_ORDER = {"trec": ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"], "cb": CB_CLASSES,
                   "rte": ["entailment", "not_entailment"], "dbpedia14": DBPEDIA_CLASSES, "wos46985": WOS_CLASSES}
LOCAL_HINT = {
    "trec": "Download TREC_10.label (and train_5500.label) from https://cogcomp.seas.upenn.edu/Data/QA/QC/ and run "
            "with dataset.source=path dataset.path=TREC_10.label",
    "cb": "Unzip SuperGLUE's CB.zip and run with dataset.source=path dataset.path=CB/val.jsonl",
    "rte": "Unzip SuperGLUE's RTE.zip and run with dataset.source=path dataset.path=RTE/train.jsonl",
    "dbpedia14": "Unpack dbpedia_csv.tar.gz and run with dataset.source=path dataset.path=dbpedia_csv/test.csv "
                 "(classes.txt beside it)",
    "wos46985": "Unzip WebOfScience.zip and run with dataset.source=path dataset.path=WebOfScience/WOS46985 (the "
                "folder holding X.txt and YL1.txt)",
}


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise DatasetUnavailableError(f"no file at {shown(path)}; give the data set's file as dataset.path")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # the original TREC files are Latin-1 (one question holds a byte 0xF0)
        text = data.decode("latin-1")
    return [line.rstrip("\r") for line in text.split("\n") if line.strip()]


def read_trec(path: str | Path) -> list[Sample]:
    """TREC's ``COARSE:fine question`` lines; the coarse code becomes one of ``TREC_CLASSES``."""
    path = Path(path).expanduser()
    out = []
    for n, line in enumerate(_lines(path)):
        m = re.match(r"^([A-Z]+):(\S+)\s+(.*)$", line)
        if not m or m.group(1) not in TREC_CODES:
            raise DatasetUnavailableError(f"{path}, line {n + 1}: expected 'COARSE:fine question' with COARSE one of "
                                          f"{', '.join(TREC_CODES)}, got {line[:80]!r}")
        out.append(Sample(f"trec/{path.stem}/{n}", m.group(3).strip(), TREC_CODES[m.group(1)],
                          {"fine": m.group(2)}))
    return out


def _entailment_text(premise: str, hypothesis: str) -> str:
    return f"Premise: {premise}\nHypothesis: {hypothesis}"


def read_superglue(path: str | Path, name: str) -> list[Sample]:
    """SuperGLUE CB or RTE JSONL (``premise``, ``hypothesis``, ``label``, ``idx``); a test file without labels gives
    samples with gold None."""
    path = Path(path).expanduser()
    classes = CLASSES[name]
    out = []
    for n, line in enumerate(_lines(path)):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetUnavailableError(f"{path}, line {n + 1} is not valid JSON: {exc}") from None
        if "premise" not in row or "hypothesis" not in row:
            raise DatasetUnavailableError(f"{path}, line {n + 1}: needs 'premise' and 'hypothesis'")
        label = row.get("label")
        gold = None if label is None else str(label).replace("_", " ")
        if gold is not None and gold not in classes:
            raise DatasetUnavailableError(f"{path}, line {n + 1}: label {label!r} is not one of {', '.join(classes)}")
        out.append(Sample(f"{name}/{path.stem}/{row.get('idx', n)}", _entailment_text(row["premise"], row["hypothesis"]),
                          gold, {"premise": row["premise"], "hypothesis": row["hypothesis"]}))
    return out


def _spaced(name: str) -> str:
    """``EducationalInstitution`` -> ``Educational Institution`` (the paper writes DBPedia labels with spaces)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name.strip())


def read_dbpedia(path: str | Path, classes_path: str | Path | None = None) -> list[Sample]:
    """dbpedia_csv's ``test.csv``/``train.csv`` (no header: class 1-14, title, content) and ``classes.txt``."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetUnavailableError(f"no file at {shown(path)}; give dbpedia_csv/test.csv as dataset.path")
    names_file = Path(classes_path).expanduser() if classes_path else path.with_name("classes.txt")
    names = [_spaced(c) for c in _lines(names_file)] if names_file.is_file() else DBPEDIA_CLASSES
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.reader(f)):
            if len(row) != 3 or not row[0].strip().isdigit() or not 1 <= int(row[0]) <= len(names):
                raise DatasetUnavailableError(f"{path}, row {n + 1}: expected class (1-{len(names)}), title, content; "
                                              f"got {row[:3]!r}")
            title, content = row[1].strip(), row[2].strip()
            out.append(Sample(f"dbpedia14/{path.stem}/{n}", f"{title}: {content}" if title else content,
                              names[int(row[0]) - 1], {"title": title, "content": content}))
    return out


def read_wos(path: str | Path) -> list[Sample]:
    """WoS-46985: ``X.txt`` (abstracts) and ``YL1.txt`` (level-1 labels 0-6) in the folder ``path`` (or beside the
    file ``path``)."""
    path = Path(path).expanduser()
    folder = path if path.is_dir() else path.parent
    texts, labels = _lines(folder / "X.txt"), _lines(folder / "YL1.txt")
    if len(texts) != len(labels):
        raise DatasetUnavailableError(f"{folder}: X.txt has {len(texts)} lines but YL1.txt {len(labels)}")
    out = []
    for n, (text, label) in enumerate(zip(texts, labels)):
        if not label.strip().isdigit() or int(label) >= len(WOS_CLASSES):
            raise DatasetUnavailableError(f"{folder / 'YL1.txt'}, line {n + 1}: expected 0-6, got {label!r}")
        out.append(Sample(f"wos46985/{n}", text.strip(), WOS_CLASSES[int(label)]))
    return out


def mmlu_letter_samples(source: str = "sample", path: str | None = None, split: str = "test") -> list[Sample]:
    """MMLU as a 4-class task: the question and its options A-D; the class is the answer letter."""
    from posixlab.data.mmlu import load_mmlu

    out = []
    for item in load_mmlu(source=source, path=path, split=split):
        options = "\n".join(f"{letter}. {text}" for letter, text in zip(LETTER_CLASSES, item.options))
        out.append(Sample(item.item_id, f"{item.question}\n{options}", item.answer,
                          {"options": dict(zip(LETTER_CLASSES, item.options)), "subject": item.subject}))
    return out


def _hub_samples(name: str, split: str) -> list[Sample]:
    hub_id, config, label_field = HUB[name]
    rows = hub_rows(hub_id, [config], split, name, LOCAL_HINT[name])[config]
    names = getattr(rows.features.get(label_field), "names", None) if hasattr(rows, "features") else None
    return _hub_layout_samples(name, rows, split, names, hub_id)


def _hub_parquet_samples(name: str, path: Path) -> list[Sample]:
    """A split's Parquet file copied from the hub (``CogComp/trec``'s ``test-00000-of-00001.parquet``): the hub's
    rows, with the ids a hub run gives them (the split read off the file's name), so that the two runs pair."""
    return _hub_layout_samples(name, parquet_rows(path), hub_file_split(path) or path.stem, None, str(path))


def _hub_layout_samples(name: str, rows, split: str, names: list[str] | None, source: str) -> list[Sample]:
    """Samples of ``rows`` in the hub's layout for ``name`` (``source``: the hub id or the file, for errors)."""
    out = []
    for n, row in enumerate(rows):
        try:
            out.append(_hub_row_sample(name, row, n, split, names, source))
        except KeyError as exc:  # another data set's file, or not the hub's layout
            raise DatasetUnavailableError(f"{source}, row {n}: no {exc.args[0]!r} field; {name} is read in the "
                                          f"layout of the hub's {HUB[name][0]} (fields: {', '.join(row)})") from None
    return out


def _hub_row_sample(name: str, row: dict, n: int, split: str, names: list[str] | None, source: str) -> Sample:
    label_field, order = HUB[name][2], names or HUB_LABEL_ORDER[name]
    label = row.get(label_field)  # a split without labels (a test split) may hold none
    gold = None if label is None or label == -1 else str(order[label] if isinstance(label, int) else label)
    if name == "trec":
        gold = TREC_CODES.get(gold, gold) if gold else None
        text, fields = row["text"], {}
    elif name in ("cb", "rte"):
        gold = gold.replace("_", " ") if gold else None
        text, fields = _entailment_text(row["premise"], row["hypothesis"]), {}
    elif name == "dbpedia14":
        gold = _spaced(gold) if gold else None
        text, fields = f"{row['title'].strip()}: {row['content'].strip()}", {"title": row["title"]}
    else:
        gold = WOS_CLASSES[int(label)] if label is not None else None
        text, fields = row["input_data"], {}
    if gold is not None and gold not in CLASSES[name]:
        raise DatasetUnavailableError(f"{source}: label {label!r} maps to {gold!r}, not one of {CLASSES[name]}")
    return Sample(f"{name}/{split}/{row.get('idx', n)}", text.strip(), gold, fields)


def load_samples(name: str, source: str, path: str | None = None, split: str | None = None,
                 options: dict | None = None) -> list[Sample]:
    """Every sample of a classification data set, in the data set's order."""
    if name not in CLASSES:
        raise ConfigError(f"unknown classification dataset {name!r}; choose one of {', '.join(CLASSES)}")
    options = dict(options or {})
    if name == "mmlu_letters":
        return mmlu_letter_samples(source, path, split or "test")
    if source == "hub":
        return _hub_samples(name, split or "test")
    if source != "path":
        raise ConfigError(f"dataset.source for {name} is hub or path, got {source!r}")
    if not path:
        raise DatasetUnavailableError(f"dataset.source=path needs dataset.path. {LOCAL_HINT[name]}")
    if Path(path).suffix.lower() == ".parquet":
        return _hub_parquet_samples(name, Path(path).expanduser())
    if name == "trec":
        return read_trec(path)
    if name in ("cb", "rte"):
        return read_superglue(path, name)
    if name == "dbpedia14":
        return read_dbpedia(path, options.get("classes_path"))
    return read_wos(path)


def balanced_sample(samples: list[Sample], num: int, seed: int, classes: list[str]) -> list[Sample]:
    """``num`` samples, ``num // C`` drawn at random from each class (all of a smaller class), the rest filled at
    random from what is left; then in the data set's order. Deterministic in ``seed``.

    >>> pool = [Sample(str(i), "t", "ab"[i % 2] if i < 8 else "a") for i in range(12)]
    >>> picked = balanced_sample(pool, 6, 42, ["a", "b"])
    >>> sorted(s.gold for s in picked)
    ['a', 'a', 'a', 'b', 'b', 'b']
    """
    rng = random.Random(seed)
    position = {id(s): k for k, s in enumerate(samples)}
    chosen, rest = [], []
    for c in classes:
        members = [s for s in samples if s.gold == c]
        rng.shuffle(members)
        chosen += members[: num // len(classes)]
        rest += members[num // len(classes):]
    rest += [s for s in samples if s.gold not in classes]
    rng.shuffle(rest)
    chosen += rest[: max(0, num - len(chosen))]
    return sorted(chosen, key=lambda s: position[id(s)])


def select_samples(samples: list[Sample], num: int | None, seed: int, balanced: bool,
                   classes: list[str]) -> list[Sample]:
    """All samples (``num`` None or at least their number), a class-balanced draw (``balanced``), or the first
    ``num`` of a seeded shuffle; always in the data set's order."""
    if num is not None and not is_whole(num, 1):
        raise ConfigError(f"num_samples must be a whole number of at least 1 (or null for every sample), got {num!r}")
    if num is not None and num > len(samples):  # a note: every sample is used, as null would
        print(f"posixlab: num_samples={num} asks for more samples than the data set has: {len(samples)}, every one",
              file=sys.stderr)
    if num is None or num >= len(samples):
        return list(samples)
    if balanced:
        return balanced_sample(samples, num, seed, classes)
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    return [samples[k] for k in sorted(order[:num])]


def exemplars(pool: list[Sample], exclude: set[str], classes: list[str], seed: int) -> dict[str, Sample]:
    """One example per class for the 1-shot prompt: a seeded draw from ``pool`` minus the evaluated samples."""
    rng = random.Random(seed)
    out = {}
    for c in classes:
        members = [s for s in pool if s.gold == c and s.sample_id not in exclude]
        if not members:
            raise ConfigError(f"no example of class {c!r} is left for the 1-shot prompt (every one is evaluated); "
                              f"give other labelled data as dataset.exemplar_path (or dataset.exemplar_split for "
                              f"the hub), or evaluate fewer samples (num_samples)")
        out[c] = members[rng.randrange(len(members))]
    return out
