"""Few-shot exemplars: which items precede a question, with their gold answers (paper Table 2).

The paper does not say where its exemplars come from. We take MMLU's ``dev`` split when MMLU comes from the hub:
five questions per subject, the first ``k`` of the question's subject, as the MMLU harnesses do. Offline, the same
split saved as a file does the same (``dataset.exemplar_path``: the first ``k`` of the subject, in file order).
Another hub data set's split of its own does the same (``dataset.exemplar_split``: ARC's or CommonsenseQA's train,
MMLU-Pro's validation). The bundled sample and local files without one have no dev split, so exemplars are drawn
there from the other questions of the same subject (or, for data without subjects, the other items): a seeded draw
per question, never the question itself. That is a deviation from the hub setting (exemplars may be questions that
are also evaluated in other sets); results record each set's exemplar ids and the pool they came from.

Exemplars from a split or file of their own carry its name in their ids (``dev:mmlu/anatomy/0``): the loaders number
every split's questions alike, so without it the dev split's first anatomy question would share its id with the test
split's, be taken for the question itself and skipped, and a record's exemplar ids would name test questions.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.prompts import PromptItem
from posixlab.seeding import rng_for


class ExemplarPool:
    """Exemplar candidates grouped by subject. ``ordered``: take the first k (a dev split); else a seeded draw."""

    def __init__(self, items: list[PromptItem], description: str, ordered: bool):
        self.description = description
        self.ordered = ordered
        self.by_subject: dict[str | None, list[PromptItem]] = defaultdict(list)
        for item in items:
            if item.answer is not None:
                self.by_subject[item.subject].append(item)

    def select(self, item: PromptItem, k: int, seed: int) -> tuple[PromptItem, ...]:
        """``k`` exemplars for ``item``: same subject, gold answer known, never ``item`` itself (by id or text).

        >>> items = [PromptItem(f"q{i}", f"Question {i}?", subject="s", answer="x") for i in range(5)]
        >>> pool = ExemplarPool(items, "test", ordered=False)
        >>> picked = pool.select(items[0], 3, seed=0)
        >>> len(picked), items[0] in picked, picked == pool.select(items[0], 3, seed=0)
        (3, False, True)
        """
        if k == 0:
            return ()
        candidates = [c for c in self.by_subject.get(item.subject, [])
                      if c.item_id != item.item_id and c.question.strip() != item.question.strip()]
        if not any(self.by_subject.values()):  # no answer anywhere: fewer shots would not help
            raise ConfigError(f"shots={k}, but no exemplar from {self.description} has a gold answer to show after "
                              f"its question: name the answer's field (dataset.options.answer=FIELD), give "
                              f"exemplars with answers in a file of their own (dataset.exemplar_path=FILE), or run "
                              f"0-shot")
        if len(candidates) < k:
            subject = f" (subject {item.subject!r})" if item.subject is not None else ""
            raise ConfigError(f"shots={k}, but only {len(candidates)} exemplar(s) with a gold answer exist for "
                              f"{item.item_id}{subject} in {self.description}; use fewer shots")
        if self.ordered:
            return tuple(candidates[:k])
        return tuple(rng_for(seed, item.item_id, "exemplars", 0).sample(candidates, k))


def split_items(items: list[PromptItem], split: str) -> list[PromptItem]:
    """Items of a split of their own, with its name in their ids, so that none shares an evaluated question's id.

    >>> [i.item_id for i in split_items([PromptItem("mmlu/anatomy/0", "Q?")], "dev")]
    ['dev:mmlu/anatomy/0']
    """
    return [replace(item, item_id=f"{split}:{item.item_id}") for item in items]


def exemplar_pool(dataset, items: list[PromptItem]) -> ExemplarPool:
    """The pool for ``dataset`` (a ``DatasetSpec``): its ``exemplar_path`` file, MMLU's dev split from the hub,
    otherwise the data's own items."""
    from posixlab.data import load_items

    if dataset.exemplar_path:
        path = Path(dataset.exemplar_path).expanduser()
        if not path.exists():
            raise ConfigError(f"dataset.exemplar_path={dataset.exemplar_path}: no such file (the exemplars, in the "
                              f"data set's own format: for MMLU, the dev split saved as JSONL)")
        shots = load_items(replace(dataset, source="path", path=str(path), max_question_chars=None, split=None))
        digest = f" (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})" if path.is_file() else ""
        return ExemplarPool(split_items(shots, path.name), f"{dataset.exemplar_path}{digest}: the first task.shots "
                            f"questions of the question's subject, in file order", ordered=True)
    if dataset.exemplar_split:
        split = load_items(replace(dataset, split=dataset.exemplar_split, max_question_chars=None))
        return ExemplarPool(split_items(split, dataset.exemplar_split), f"the {dataset.exemplar_split} split of "
                            f"{dataset.path or dataset.name}: the first task.shots questions of the question's "
                            f"subject, in split order", ordered=True)
    if dataset.name == "mmlu" and dataset.source == "hub":
        dev = load_items(replace(dataset, split="dev", max_question_chars=None))
        return ExemplarPool(split_items(dev, "dev"), "the MMLU dev split (cais/mmlu)", ordered=True)
    what = "subject" if any(item.subject for item in items) else "data set"
    return ExemplarPool(items, f"the other items of the same {what} in {dataset.name} ({dataset.source})",
                        ordered=False)
