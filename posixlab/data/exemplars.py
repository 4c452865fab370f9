"""Few-shot exemplars: which items precede a question, with their gold answers (paper Table 2).

The paper does not say where its exemplars come from. We take MMLU's ``dev`` split when MMLU comes from the hub:
five questions per subject, the first ``k`` of the question's subject, as the MMLU harnesses do. The bundled sample
and local files have no dev split, so exemplars are drawn there from the other questions of the same subject (or,
for data without subjects, the other items): a seeded draw per question, never the question itself. That is a
deviation from the hub setting (exemplars may be questions that are also evaluated in other sets); results record
each set's exemplar ids and the pool they came from.
"""

from __future__ import annotations

from collections import defaultdict

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
        if len(candidates) < k:
            raise ConfigError(f"shots={k}, but only {len(candidates)} exemplar(s) with a gold answer exist for "
                              f"{item.item_id} (subject {item.subject!r}) in {self.description}; use fewer shots")
        if self.ordered:
            return tuple(candidates[:k])
        return tuple(rng_for(seed, item.item_id, "exemplars", 0).sample(candidates, k))


def exemplar_pool(dataset, items: list[PromptItem]) -> ExemplarPool:
    """The pool for ``dataset`` (a ``DatasetSpec``): MMLU's dev split from the hub, otherwise the data's own items."""
    if dataset.name == "mmlu" and dataset.source == "hub":
        from posixlab.data.mmlu import load_mmlu

        dev = load_mmlu(source="hub", split="dev", subjects=dataset.subjects)
        return ExemplarPool(dev, "the MMLU dev split (cais/mmlu)", ordered=True)
    what = "subject" if any(item.subject for item in items) else "data set"
    return ExemplarPool(items, f"the other items of the same {what} in {dataset.name} ({dataset.source})",
                        ordered=False)
