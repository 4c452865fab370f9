"""GGUF files split in parts (``NAME-00001-of-00003.gguf`` ... ``NAME-00003-of-00003.gguf``), as llama.cpp's
``llama-gguf-split`` and ``convert_hf_to_gguf.py --split-max-size`` write them and as the Hugging Face Hub holds a
file above its 50 GB limit (a 70B model's Q8_0, most files of larger models).

llama.cpp loads such a file from its first part and finds the others beside it by these names; the first part holds
all the metadata, so transformers reads the tokenizer from it alone. A split file therefore goes by its first part,
and every part must lie in that part's folder. ``tests/gguf_parts.py`` splits the packaged SmolLM2 file in three
and ``tests/test_llamacpp.py`` scores it, from a folder and from the hub stand-in, bit for bit as the whole file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PART = re.compile(r"-(\d{5})-of-(?!00000)(\d{5})\.gguf$")  # llama.cpp's llama_split_path: PREFIX-%05d-of-%05d.gguf


def first_part(name: str) -> str:
    """The name a GGUF file goes by: the first part of a file split in parts, any other file's own name.

    >>> first_part("Q4_K_M/m.Q4_K_M-00002-of-00003.gguf"), first_part("m.Q8_0.gguf")
    ('Q4_K_M/m.Q4_K_M-00001-of-00003.gguf', 'm.Q8_0.gguf')
    """
    match = PART.search(name)
    return name if match is None else f"{name[:match.start()]}-00001-of-{match[2]}.gguf"


def all_parts(name: str) -> list[str]:
    """Every part of the file ``name`` is a part of, in order; ``[name]`` for a file in one piece.

    >>> all_parts("m-00002-of-00002.gguf"), all_parts("m.gguf"), all_parts("m-00000-of-00000.gguf")
    (['m-00001-of-00002.gguf', 'm-00002-of-00002.gguf'], ['m.gguf'], ['m-00000-of-00000.gguf'])
    """
    match = PART.search(name)
    if match is None:
        return [name]
    count = int(match[2])
    return [f"{name[:match.start()]}-{number:05d}-of-{count:05d}.gguf" for number in range(1, count + 1)]


def whole_files(names: Iterable[str]) -> list[str]:
    """The GGUF files among ``names``, a file split in parts once, by its first part, sorted.

    >>> whole_files(["README.md", "m.Q8_0.gguf", "m.Q4-00002-of-00002.gguf", "m.Q4-00001-of-00002.gguf"])
    ['m.Q4-00001-of-00002.gguf', 'm.Q8_0.gguf']
    """
    return sorted({first_part(name) for name in names if name.endswith(".gguf")})


def missing_parts(name: str, present: Iterable[str]) -> list[str]:
    """The parts of ``name``'s file that are not among ``present``, in order.

    >>> missing_parts("m-00001-of-00003.gguf", ["m-00001-of-00003.gguf", "m-00003-of-00003.gguf"])
    ['m-00002-of-00003.gguf']
    """
    present = set(present)
    return [part for part in all_parts(name) if part not in present]


def file_stem(name: str) -> str:
    """A GGUF file's name without its folder, its part number or ``.gguf``.

    >>> file_stem("Q4_K_M/llama-70b.Q4_K_M-00001-of-00002.gguf"), file_stem("llama-2-7b.Q4_K_M.gguf")
    ('llama-70b.Q4_K_M', 'llama-2-7b.Q4_K_M')
    """
    name = PART.sub(".gguf", name.rsplit("/", 1)[-1])
    return name[:-len(".gguf")] if name.endswith(".gguf") else name
