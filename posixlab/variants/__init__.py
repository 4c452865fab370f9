"""Prompt variation: each variant type is a ``VariantGenerator`` registered here by name.

A later variant type (paraphrase, mixture) plugs in by subclassing ``VariantGenerator`` and adding itself to
``VARIANT_TYPES``.
"""

from __future__ import annotations

from posixlab.errors import ConfigError
from posixlab.variants.base import PromptSet, PromptVariant, VariantGenerator, rng_for
from posixlab.variants.spelling import SpellingVariants
from posixlab.variants.template import TemplateVariants

VARIANT_TYPES: dict[str, type[VariantGenerator]] = {
    SpellingVariants.kind: SpellingVariants,
    TemplateVariants.kind: TemplateVariants,
}


def get_variant_generator(name: str, **options) -> VariantGenerator:
    try:
        cls = VARIANT_TYPES[name]
    except KeyError:
        raise ConfigError(f"unknown variant type {name!r}; choose one of: {', '.join(sorted(VARIANT_TYPES))}") from None
    return cls(**options)


__all__ = ["PromptSet", "PromptVariant", "VariantGenerator", "VARIANT_TYPES", "get_variant_generator", "rng_for",
           "SpellingVariants", "TemplateVariants"]
