"""The shared record types of prompt variation, and the interface every variant type implements.

A variant is a deterministic function of (seed, item id, variant index): ``rng_for`` derives a private random
stream from those three, so adding sets, reordering them or running them in parallel never changes a variant.
Every variant carries a JSON-serialisable ``record`` of what was done to the original.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, field

from posixlab.prompts import PromptItem, render


@dataclass(frozen=True)
class PromptVariant:
    """One prompt of an intent-aligned set: its text and how it was made from the original."""

    text: str
    kind: str  # "original", "spelling", "template", ...
    index: int  # position among the variants of its kind; -1 for the original
    record: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PromptSet:
    """An intent-aligned prompt set: the item it came from and its prompts, the original first when included."""

    item: PromptItem
    variant_type: str
    prompts: tuple[PromptVariant, ...]

    @property
    def set_id(self) -> str:
        return f"{self.item.item_id}/{self.variant_type}"

    def texts(self) -> list[str]:
        return [p.text for p in self.prompts]


def rng_for(seed: int, item_id: str, kind: str, index: int) -> random.Random:
    """A random stream private to one variant: the same arguments give the same stream on every machine."""
    digest = hashlib.sha256(f"{seed}\x1f{item_id}\x1f{kind}\x1f{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class VariantGenerator:
    """Makes the variants of one kind. Subclasses set ``kind`` and implement ``variant``.

    ``build_set`` gives the paper's set: the original prompt followed by ``num_variants`` variants. A variant type
    that composes its set differently (the mixture) overrides ``build_set``.
    """

    kind: str = ""
    max_variants: int | None = None  # None: unbounded

    def variant(self, item: PromptItem, index: int, seed: int) -> PromptVariant:
        raise NotImplementedError

    def original(self, item: PromptItem) -> PromptVariant:
        return PromptVariant(text=render(item), kind="original", index=-1, record={})

    def build_set(self, item: PromptItem, num_variants: int, seed: int) -> PromptSet:
        from posixlab.errors import ConfigError

        if num_variants < 1:
            raise ConfigError(f"num_variants must be at least 1 (a set needs 2 prompts), got {num_variants}")
        if self.max_variants is not None and num_variants > self.max_variants:
            raise ConfigError(
                f"variant={self.kind} has {self.max_variants} distinct variants, but num_variants={num_variants}"
            )
        prompts = [self.original(item)] + [self.variant(item, v, seed) for v in range(num_variants)]
        return PromptSet(item=item, variant_type=self.kind, prompts=tuple(prompts))
