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
    """An instance of the variant type ``name`` made with ``options``; an option left ``???`` (a plug-in's keyword
    without a default, ``variant_options``) or one the type does not take is a ``ConfigError`` that says so.

    >>> get_variant_generator("template", pool=None)
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: variant=template: bad option(s) ['pool'] (TemplateVariants() takes no \
arguments)
    """
    cls = variant_type(name)
    unset = [key for key, value in options.items() if isinstance(value, str) and value == "???"]
    if unset:
        raise ConfigError(f"variant={name} needs {' '.join(f'variant.options.{key}=VALUE' for key in unset)} "
                          f"({cls.__module__}.{cls.__qualname__} takes {', '.join(unset)} with no default)")
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"variant={name}: bad option(s) {sorted(options)} ({exc})") from None


__all__ = ["Edit", "PromptSet", "PromptVariant", "VariantGenerator", "VARIANT_TYPES", "get_variant_generator",
           "register_variant", "variant_type",
           "rng_for", "FormatVariants", "MixtureVariants", "ParaphraseSource", "ParaphraseVariants",
           "SpellingVariants", "TemplateVariants"]
