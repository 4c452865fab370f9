"""Your own prompt sets: a JSONL or JSON file, or lists of strings in Python, used exactly as given.

A JSONL file holds one set per line::

    {"id": "capital-fr", "prompts": ["What is the capital of France?", "France's capital is?"], "answer": "Paris"}

``id`` (optional: ``set-<line>`` when missing), ``prompts`` (two or more non-empty strings), ``answer`` (optional:
the gold answer, kept in the results) and ``max_new_tokens`` (optional: this set's response length, overriding
the run's). A JSON file holds a list of such objects, or a list of lists of strings (the authors' library's input
shape; ids ``set-0``, ``set-1``, ...). The first prompt of a set is recorded as its original.

Everything is checked before any model is loaded; every problem is a ``PromptSetFileError`` that names the line
(or the set) and says what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.errors import PromptSetFileError

KEYS = ("id", "prompts", "answer", "max_new_tokens")


@dataclass(frozen=True)
class UserPromptSet:
    """One intent-aligned set of prompts written by the user."""

    set_id: str
    prompts: tuple[str, ...]
    answer: str | None = None
    max_new_tokens: int | None = None  # None: the run's
    where: str = field(default="", compare=False)  # where it was read: "FILE, line 3", "set 0"


def read_prompt_set_file(path: str | Path) -> list[UserPromptSet]:
    """The prompt sets of a ``.jsonl`` or ``.json`` file, validated.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "sets.jsonl"
    >>> _ = p.write_text('{"id": "a", "prompts": ["Hi?", "Hello?"]}\\n\\n{"prompts": ["x", "y", "z"], "answer": "B"}\\n')
    >>> [(s.set_id, len(s.prompts), s.answer) for s in read_prompt_set_file(p)]
    [('a', 2, None), ('set-3', 3, 'B')]
    >>> import shutil; shutil.rmtree(p.parent)
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise PromptSetFileError(f"no prompt-set file at {path}; give an existing .jsonl or .json file "
                                 f"(dataset.path=FILE, or posixlab.evaluate('FILE', ...))")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors write one) is no text
    except UnicodeDecodeError as exc:
        raise PromptSetFileError(f"{path} is not UTF-8 text ({exc}); save it as UTF-8") from None
    if not text.strip():
        raise PromptSetFileError(f"{path} is empty; write one prompt set per line, e.g. "
                                 f'{{"id": "q1", "prompts": ["first prompt", "second prompt"]}}')
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        entries = []
        for number, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                entries.append((f"{path}, line {number}", json.loads(line), f"set-{number}"))
            except json.JSONDecodeError as exc:
                raise PromptSetFileError(f"{path}, line {number} is not valid JSON ({exc.msg} at column "
                                         f"{exc.colno}); each line must be one JSON object such as "
                                         f'{{"id": "q1", "prompts": ["...", "..."]}}') from None
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PromptSetFileError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column "
                                     f"{exc.colno}); it must hold a list of prompt sets") from None
        if not isinstance(data, list):
            raise PromptSetFileError(f"{path} holds a JSON {type(data).__name__}; it must hold a list of prompt sets "
                                     f"(lists of strings, or objects with a 'prompts' list)")
        if not data:
            raise PromptSetFileError(f"{path} holds an empty list; give at least one prompt set")
        entries = [(f"{path}, set {k}", entry, f"set-{k}") for k, entry in enumerate(data)]
    else:
        raise PromptSetFileError(f"{path}: a prompt-set file must end in .jsonl (one set per line) or .json "
                                 f"(a list of sets), not {suffix or 'no suffix'!r}")
    return _validated([_parse(where, entry, default_id) for where, entry, default_id in entries])


def prompt_sets_from_lists(sets) -> list[UserPromptSet]:
    """Prompt sets given in Python: a list of lists of strings (ids ``set-0``, ``set-1``, ...), or of dicts with
    the keys of a file line, or of ``UserPromptSet``.

    >>> [s.set_id for s in prompt_sets_from_lists([["a?", "b?"], {"id": "x", "prompts": ["c", "d"]}])]
    ['set-0', 'x']
    >>> prompt_sets_from_lists([["only one prompt"]])
    Traceback (most recent call last):
    ...
    posixlab.errors.PromptSetFileError: set 0 has 1 prompt; a prompt set needs at least 2 prompts (the original and one variant)
    """
    if isinstance(sets, (str, bytes)) or not hasattr(sets, "__iter__"):
        raise PromptSetFileError(f"prompt sets must be a list of lists of strings or a path to a prompt-set file, "
                                 f"not {type(sets).__name__}")
    sets = list(sets)
    if not sets:
        raise PromptSetFileError("no prompt sets given; give at least one list of two or more prompts")
    parsed = [s if isinstance(s, UserPromptSet) else _parse(f"set {k}", s, f"set-{k}") for k, s in enumerate(sets)]
    return _validated(parsed)


def _parse(where: str, entry, default_id: str) -> UserPromptSet:
    if isinstance(entry, (list, tuple)):
        entry = {"prompts": list(entry)}
    if not isinstance(entry, dict):
        raise PromptSetFileError(f"{where} is a {type(entry).__name__}; a prompt set is an object with a 'prompts' "
                                 f"list (or, in a .json file or in Python, a list of strings)")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise PromptSetFileError(f"{where} has unknown key(s) {', '.join(map(repr, unknown))}; a prompt set takes "
                                 f"{', '.join(KEYS)}")
    prompts = entry.get("prompts")
    if not isinstance(prompts, list):
        raise PromptSetFileError(f"{where} has no 'prompts' list; write the set's prompts as a JSON list of strings")
    for k, prompt in enumerate(prompts):
        if not isinstance(prompt, str):
            kind = "None" if prompt is None else f"{'an' if type(prompt).__name__[0] in 'aeiou' else 'a'} " \
                                                 f"{type(prompt).__name__}"
            nested = " (a set is one list of prompts: one pair of brackets too many?)" if isinstance(
                prompt, (list, tuple)) else ""
            raise PromptSetFileError(f"{where}: prompt {k} is {kind}, not a string{nested}; write every prompt as a "
                                     f"JSON string")
        if not prompt.strip():
            raise PromptSetFileError(f"{where}: prompt {k} is empty; remove it or write the prompt")
    if len(prompts) < 2:
        raise PromptSetFileError(f"{where} has {len(prompts)} prompt{'' if len(prompts) == 1 else 's'}; a prompt set "
                                 f"needs at least 2 prompts (the original and one variant)")
    set_id = entry.get("id", default_id)
    if isinstance(set_id, bool) or not isinstance(set_id, (str, int)) or not str(set_id).strip():
        raise PromptSetFileError(f"{where}: 'id' must be a non-empty string or an integer, got {set_id!r}")
    answer = entry.get("answer")
    if answer is not None and (isinstance(answer, bool) or not isinstance(answer, (str, int, float))):
        raise PromptSetFileError(f"{where}: 'answer' must be a string (or a number), got {type(answer).__name__}")
    length = entry.get("max_new_tokens")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
        raise PromptSetFileError(f"{where}: 'max_new_tokens' must be a whole number of at least 1, got {length!r}")
    return UserPromptSet(str(set_id), tuple(prompts), None if answer is None else str(answer), length, where)


def _validated(sets: list[UserPromptSet]) -> list[UserPromptSet]:
    seen: dict[str, UserPromptSet] = {}
    for s in sets:
        if s.set_id in seen:
            raise PromptSetFileError(f"set id {s.set_id!r} is used twice ({seen[s.set_id].where} and {s.where}); give "
                                     f"every set its own id")
        seen[s.set_id] = s
    return sets
