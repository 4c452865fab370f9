"""Errors a user can act on.

Every error the library raises on bad input is a ``PosixlabError``: ``run.py`` prints its message (no traceback)
and exits with status 2. The message names the problem and says what to do about it.
"""


class PosixlabError(Exception):
    """Base class: a problem with the user's input or environment, explained in the message."""


class ConfigError(PosixlabError, ValueError):
    """A configuration value is unknown or out of range."""


class PromptSetError(PosixlabError, ValueError):
    """A prompt set cannot be scored (empty, singleton, malformed)."""


class ModelUnavailableError(PosixlabError, OSError):
    """A model cannot be loaded here (offline, gated, missing package, corrupted cache)."""


class ContextLengthError(PosixlabError, ValueError):
    """A prompt plus its response does not fit in the model's context window."""


class DatasetUnavailableError(PosixlabError, OSError):
    """A dataset cannot be loaded here (offline, missing local file)."""


class CacheError(PosixlabError, OSError):
    """An on-disk cache file is corrupted or belongs to something else; it is reported, never used."""


class RephraserError(PosixlabError, RuntimeError):
    """A rephraser cannot produce the paraphrases asked for (no key, endpoint down, too few valid paraphrases)."""


class EndpointUnreachableError(RephraserError):
    """A server cannot be reached after one request's retries: the run stops at once instead of trying every other
    request against the same dead endpoint."""


class PromptSetFileError(PosixlabError, ValueError):
    """A user's prompt sets (a file, or lists given in Python) are malformed; the message names the line or set."""


class ServerUnreachableError(ModelUnavailableError):
    """A model server does not answer after one request's retries: the run stops at once, keeping what it wrote."""


class ServerResponseError(PosixlabError, RuntimeError):
    """A model server answered, but not with what posixlab asked for (an error status, a missing field)."""


class TokenizerMismatchError(ConfigError):
    """The tokenizer loaded here tokenises differently from the server's: scores would silently drift."""


class DeviceMemoryError(PosixlabError, MemoryError):
    """The device ran out of memory during a run (another process on the card, or a budget too large for the
    machine): the message says what held the memory and which budget to set; what finished is kept."""


class GateFailed(SystemExit):
    """Exit status 1: a gate threshold was missed (the only cause of status 1; ``cli.entry`` turns Hydra's own 1
    into 2): one run's, or a cell's of a sweep at the sweep's end."""


def usage(text: str, asked: bool) -> int:
    """A command's usage ``text``: asked for (``--help``), on stdout with exit status 0; else (the command misused)
    on stderr with 2, as every error. Returns the status."""
    import sys

    print(text, file=sys.stdout if asked else sys.stderr)
    return 0 if asked else 2


def check_flag(name: str, value) -> None:
    """A ``ConfigError`` unless ``value`` is True or False (``yes`` or ``1`` would otherwise count as true).

    >>> check_flag("chat_template", "yes")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: chat_template takes true or false, not 'yes'
    """
    if not isinstance(value, bool):
        raise ConfigError(f"{name} takes true or false, not {value!r}")


def check_progress(value) -> None:
    """A ``ConfigError`` unless ``value`` is a setting of ``progress``: true (bars), false (quiet) or ``lines``.

    >>> check_progress("lines"), check_progress(False)
    (None, None)
    >>> check_progress("yes")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: progress takes true, false or lines, not 'yes'
    """
    if not (isinstance(value, bool) or isinstance(value, str) and value.lower() in ("true", "false", "lines")):
        raise ConfigError(f"progress takes true, false or lines, not {value!r}")


_TYPE_WORDS = {"int": ((int,), "a whole number"), "float": ((int, float), "a number"),
               "bool": ((bool,), "true or false"), "str": ((str,), "a string")}


def check_field_types(config, prefix: str) -> None:
    """A ``ConfigError`` for a field of a dataclass config whose value is not of its plain annotated type (``int``,
    ``float``, ``bool``, ``str``, each ``| None``): a Python caller's ``max_concurrency="8"``, or a free-form YAML
    node's ``rephraser.max_concurrency=abc``, failed later as a TypeError deep inside.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Settings:
    ...     batch: int = 8
    ...     name: str | None = None
    >>> check_field_types(Settings(batch=8, name=None), "engine")
    >>> check_field_types(Settings(batch="8"), "engine")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: engine.batch takes a whole number, not '8'
    """
    from dataclasses import fields

    for f in fields(config):
        # the annotation's text (a module with postponed annotations), or the type's name
        annotation = (f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))).replace(" ", "")
        optional = annotation.endswith("|None")
        kinds, words = _TYPE_WORDS.get(annotation.removesuffix("|None"), (None, ""))
        value = getattr(config, f.name)
        if kinds is None or (value is None and optional):
            continue
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise ConfigError(f"{prefix}.{f.name} takes {words}{' or null' if optional else ''}, not {value!r}")


def is_whole(value, least: int) -> bool:
    """Whether a setting is a whole number (not a bool, a float or a string, as Python callers may pass) >= least.

    >>> is_whole(3, 1), is_whole("3", 1), is_whole(True, 0), is_whole(0, 1)
    (True, False, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


def nearest(name, names) -> str:
    """" (did you mean X?)" for the closest of ``names`` to a mistyped ``name``, or "".

    >>> nearest("detial", ["simple", "detail"]), nearest("zzz", ["simple"])
    (' (did you mean detail?)', '')
    """
    import difflib

    near = difflib.get_close_matches(str(name), list(names), n=1)
    return f" (did you mean {near[0]}?)" if near else ""
