"""The registry of variant types by name: the built-in ones (registered by ``posixlab.variants``) and a plug-in's
(``register_variant``). A module of its own so that a variant type that draws on others (the mixture) can look them
up without importing the package that imports it."""

from __future__ import annotations

import difflib
import inspect

from posixlab.errors import ConfigError
from posixlab.variants.base import VariantGenerator

VARIANT_TYPES: dict[str, type[VariantGenerator]] = {}  # filled by posixlab.variants, then by plug-ins
RESERVED = ("original", "user")  # a set's unedited prompt; the user's own sets (no variant is generated)


def register_variant(cls: type[VariantGenerator]) -> type[VariantGenerator]:
    """Register a variant type under its ``kind`` (usable as a class decorator); returns it. A kind taken by another
    type, or reserved, is a ``ConfigError``.

    >>> from posixlab.variants import Edit, get_variant_generator
    >>> @register_variant
    ... class Shouted(VariantGenerator):
    ...     kind = "shouted_doc"
    ...     def edit(self, item, index, seed):
    ...         return Edit(question=item.question.upper(), record={"upper": True})
    >>> get_variant_generator("shouted_doc").kind
    'shouted_doc'
    >>> register_variant(type("Other", (VariantGenerator,), {"kind": "spelling"}))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: variant type 'spelling' is registered already \
(by posixlab.variants.spelling.SpellingVariants): give yours another kind
    >>> _ = VARIANT_TYPES.pop("shouted_doc")
    """
    kind = getattr(cls, "kind", "")
    if not (isinstance(cls, type) and issubclass(cls, VariantGenerator)) or not kind:
        raise ConfigError(f"register_variant takes a VariantGenerator subclass with a kind, not {cls!r}")
    taken = VARIANT_TYPES.get(kind)
    if kind in RESERVED or (taken is not None and (taken.__module__, taken.__qualname__)
                            != (cls.__module__, cls.__qualname__)):  # the same class again: its module reloaded
        by = f"by {taken.__module__}.{taken.__qualname__}" if taken else "by posixlab"
        raise ConfigError(f"variant type {kind!r} is registered already ({by}): give yours another kind")
    VARIANT_TYPES[kind] = cls
    return cls


def variant_type(name: str) -> type[VariantGenerator]:
    """The variant type registered as ``name``; a plug-in's is imported on its first use."""
    if name not in VARIANT_TYPES:
        from posixlab.plugins import HOW, load_plugins, not_imported_note

        load_plugins()
        if name not in VARIANT_TYPES:
            close = difflib.get_close_matches(name, list(VARIANT_TYPES), n=1)
            raise ConfigError(f"unknown variant type {name!r}" + (f" (did you mean {close[0]}?)" if close else "")
                              + f"; the types are {', '.join(VARIANT_TYPES)}, or {HOW}{not_imported_note()}")
    return VARIANT_TYPES[name]


_SETTABLE = (bool, int, float, str, type(None))


def variant_options(cls: type[VariantGenerator]) -> dict:
    """The options a variant type's constructor takes from a config (``variant.options.NAME=VALUE`` on the command
    line): its keyword parameters with their defaults, ``"???"`` (Hydra's "must be given") for one without. A
    parameter whose default is no plain value (an object, a callable), ``source`` (the paraphrase types' rephraser,
    given by the run) and ``*args``/``**kwargs`` are left out: a config cannot write them.

    >>> class Spaced(VariantGenerator):
    ...     kind = "spaced_doc"
    ...     def __init__(self, max_spaces: int = 3, words=("a", "b"), *, mark: str, hook=print, **extra):
    ...         pass
    >>> variant_options(Spaced)
    {'max_spaces': 3, 'words': ['a', 'b'], 'mark': '???'}
    >>> variant_options(VariantGenerator)
    {}
    """
    if cls.__init__ is object.__init__:
        return {}
    out = {}
    for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        default = p.default
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name == "source":
            continue
        if default is p.empty:
            out[name] = "???"
        elif isinstance(default, _SETTABLE):
            out[name] = default
        elif isinstance(default, (list, tuple)) and all(isinstance(v, _SETTABLE) for v in default):
            out[name] = list(default)
    return out
