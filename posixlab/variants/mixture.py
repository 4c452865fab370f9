"""Mixture variants (paper §4, Table 1): a set drawn in equal parts from spelling, template and paraphrase variants.

The paper says "21 prompt variants sampled uniformly from the three variation categories" and "equal proportion of
the other three variations", and does not say whether the original prompt is one of the 21. We read it as
7 + 7 + 7 variants and NO original (21 = 3 × 7), the default here; ``include_original=true`` puts the original in
and then needs N − 1 divisible by 3. Which 7 of each kind's 20 variants are drawn is seeded per item, so every model
of a sweep gets the same sets. The set has N = num_variants + 1 prompts, like every other variant type.

``kinds`` chooses the kinds mixed (default: spelling, template, paraphrase, the paper's; the default set is exactly
as before); a plug-in's variant type (``register_variant``) may be one of them, its variants drawn like spelling's
(from its first 20, or as many as it has). ``format`` may be one of them (multiple-choice data only): a mixture with
``kinds=[spelling, template, paraphrase, format]`` draws equally from four kinds (num_variants = 19 gives
5 + 5 + 5 + 5). Format variants are already seeded draws per (item, index), so a mixture takes format variants
0..k-1, which show the gold option at the positions as evenly as k allows; the other kinds are sampled from their
first 20 as above.
"""

from __future__ import annotations

from posixlab.errors import ConfigError
from posixlab.prompts import PromptItem
from posixlab.rephrase.source import ParaphraseSource
from posixlab.seeding import rng_for
from posixlab.variants.base import PromptSet, VariantGenerator
from posixlab.variants.format import FormatVariants
from posixlab.variants.paraphrase import ParaphraseVariants
from posixlab.variants.registry import variant_type
from posixlab.variants.spelling import SpellingVariants
from posixlab.variants.template import TemplateVariants

POOL = 20  # each kind's variants are drawn from its first 20, the paper's per-kind set
KINDS = ("spelling", "template", "paraphrase")  # the paper's mixture
MIXABLE = {cls.kind: cls for cls in (SpellingVariants, TemplateVariants, ParaphraseVariants, FormatVariants)}
TAKE_FIRST = ("format",)  # kinds whose first k variants are taken (their variants are already seeded draws)


class MixtureVariants(VariantGenerator):
    kind = "mixture"
    uses_paraphrases = True

    def __init__(self, source: ParaphraseSource | None = None, include_original: bool = False,
                 kinds: list[str] | tuple[str, ...] | None = None):
        kinds = KINDS if kinds is None else (kinds,) if isinstance(kinds, str) else tuple(kinds)  # one: not its letters
        types = {k: _mixable(k) for k in kinds}
        unknown = [k for k, cls in types.items() if cls is None]
        if not kinds or unknown or len(set(kinds)) != len(kinds):
            raise ConfigError(f"variant=mixture kinds={list(kinds)}: choose distinct kinds among "
                              f"{', '.join(MIXABLE)} or a plug-in's variant types"
                              + (f" ({', '.join(map(str, unknown))} is not one)" if unknown else ""))
        self.kinds = kinds
        self.parts = [types[k](source) if types[k].uses_paraphrases else types[k]() for k in kinds]
        self.include_original = include_original

    def per_kind(self, num_variants: int) -> int:
        drawn = num_variants + 1 - int(self.include_original)
        if num_variants < 1 or drawn % len(self.parts):
            k, original = len(self.parts), int(self.include_original)
            each = [e for e in (max(drawn, k) // k, max(drawn, k) // k + 1) if e * k - 1 + original >= 1]  # nearest
            examples = ", ".join(f"num_variants={e * k - 1 + original} gives {' + '.join([str(e)] * k)}" for e in each)
            raise ConfigError(
                f"variant=mixture draws equally from {k} kinds, but a set of N = {num_variants + 1} "
                f"prompts {'with' if self.include_original else 'without'} the original leaves {drawn} to draw; "
                f"choose num_variants so that this is a multiple of {k} ({examples})")
        if drawn // len(self.parts) > min(map(_pool, self.parts)):
            raise ConfigError(f"variant=mixture draws at most {min(map(_pool, self.parts))} variants of each of "
                              f"{', '.join(self.kinds)}")
        return drawn // len(self.parts)

    def prepare(self, items: list[PromptItem], num_variants: int, progress: bool = True) -> None:
        self.per_kind(num_variants)
        for part in self.parts:
            part.prepare(items, _pool(part), progress)

    def draw(self, item: PromptItem, num_variants: int, seed: int) -> dict[str, list[int]]:
        """The variant indices of each kind for ``item``: a seeded sample without replacement, in increasing order
        (format: its first k)."""
        k = self.per_kind(num_variants)
        return {part.kind: list(range(k)) if part.kind in TAKE_FIRST
                else sorted(rng_for(seed, item.item_id, f"mixture/{part.kind}", 0).sample(range(_pool(part)), k))
                for part in self.parts}

    def build_set(self, item: PromptItem, num_variants: int, seed: int, shots=(), perturb_shots: bool = False) -> PromptSet:
        drawn = self.draw(item, num_variants, seed)
        prompts = [self.original(item, shots)] if self.include_original else []
        for part in self.parts:
            prompts += [part.variant(item, v, seed, shots, perturb_shots) for v in drawn[part.kind]]
        return PromptSet(item=item, variant_type=self.kind, prompts=tuple(prompts), shots=tuple(shots))

    def release(self) -> None:
        for part in self.parts:
            part.release()

    def describe(self) -> dict:
        about = {"include_original": self.include_original, "per_kind": "equal"}
        if self.kinds != KINDS:  # the default mixture's description is as it always was
            about["kinds"] = list(self.kinds)
        for part in self.parts:
            about.update(part.describe() if part.uses_paraphrases else {})
        return about


def _mixable(kind: str) -> type[VariantGenerator] | None:
    """The variant type a mixture may draw from: a built-in one of ``MIXABLE``, or a plug-in's that makes its set one
    variant at a time (not a mixture of its own); None for any other name."""
    if kind in MIXABLE:
        return MIXABLE[kind]
    try:
        cls = variant_type(kind)
    except ConfigError:
        return None
    return cls if cls.kind not in ("mixture", "user") and cls.build_set is VariantGenerator.build_set else None


def _pool(part: VariantGenerator) -> int:
    """How many of a kind's variants a mixture draws from: its first ``POOL``, or all it has."""
    return min(POOL, part.max_variants or POOL)
