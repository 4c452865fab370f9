"""Prompt variation: each variant type is a ``VariantGenerator`` registered here by name.

A new variant type plugs in by subclassing ``VariantGenerator`` (implementing ``edit``) and adding itself to
``VARIANT_TYPES``.
"""

from __future__ import annotations

from posixlab.errors import ConfigError
from posixlab.rephrase.source import ParaphraseSource
from posixlab.seeding import rng_for
from posixlab.variants.base import Edit, PromptSet, PromptVariant, VariantGenerator
from posixlab.variants.format import FormatVariants
from posixlab.variants.mixture import MixtureVariants
from posixlab.variants.paraphrase import ParaphraseVariants
from posixlab.variants.spelling import SpellingVariants
from posixlab.variants.template import TemplateVariants

VARIANT_TYPES: dict[str, type[VariantGenerator]] = {
    cls.kind: cls for cls in (SpellingVariants, TemplateVariants, ParaphraseVariants, MixtureVariants,
                              FormatVariants)
}


def get_variant_generator(name: str, **options) -> VariantGenerator:
    try:
        cls = VARIANT_TYPES[name]
    except KeyError:
        raise ConfigError(f"unknown variant type {name!r}; choose one of: {', '.join(sorted(VARIANT_TYPES))}") from None
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"variant={name}: bad option(s) {sorted(options)} ({exc})") from None


__all__ = ["Edit", "PromptSet", "PromptVariant", "VariantGenerator", "VARIANT_TYPES", "get_variant_generator",
           "rng_for", "FormatVariants", "MixtureVariants", "ParaphraseSource", "ParaphraseVariants",
           "SpellingVariants", "TemplateVariants"]
