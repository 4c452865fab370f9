"""Prompt variation: each variant type is a ``VariantGenerator`` registered by name (``posixlab.variants.registry``).

A new variant type plugs in by subclassing ``VariantGenerator`` (a ``kind`` and ``edit``) and registering itself
with ``register_variant``: in a module of its own (a plug-in, posixlab/plugins.py; ``tests/plugin_variant.py`` is one)
it is then ``variant=KIND`` on the command line, in a sweep and on a cluster, with no edit to posixlab.
"""

from __future__ import annotations

from posixlab.errors import ConfigError
from posixlab.rephrase.source import ParaphraseSource
from posixlab.seeding import rng_for
from posixlab.variants.base import Edit, PromptSet, PromptVariant, VariantGenerator
from posixlab.variants.format import FormatVariants
from posixlab.variants.mixture import MixtureVariants
from posixlab.variants.paraphrase import ParaphraseVariants
from posixlab.variants.registry import VARIANT_TYPES, register_variant, variant_type
from posixlab.variants.spelling import SpellingVariants
from posixlab.variants.template import TemplateVariants

for _builtin in (SpellingVariants, TemplateVariants, ParaphraseVariants, MixtureVariants, FormatVariants):
    register_variant(_builtin)


def get_variant_generator(name: str, **options) -> VariantGenerator:
    cls = variant_type(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"variant={name}: bad option(s) {sorted(options)} ({exc})") from None


__all__ = ["Edit", "PromptSet", "PromptVariant", "VariantGenerator", "VARIANT_TYPES", "get_variant_generator",
           "register_variant", "variant_type",
           "rng_for", "FormatVariants", "MixtureVariants", "ParaphraseSource", "ParaphraseVariants",
           "SpellingVariants", "TemplateVariants"]
