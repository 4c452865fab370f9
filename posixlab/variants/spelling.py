"""Spelling-error variants (paper §4): k ∈ {1, 2, 4, 8} words of the question, five seeds each, 20 variants.

Variant ``v`` perturbs ``k = K_VALUES[(v // 5) % 4]`` distinct words of the question (sampled without
replacement), with one of four errors per word chosen at random (Brooks et al., 1993):

- insertion: a random letter is added inside the word (never before its first or after its last letter);
- omission: the letter at a random position is deleted;
- transposition: two adjacent, different letters are swapped;
- substitution: the letter at a random position is replaced by a QWERTY neighbour (case kept).

Choices the paper leaves open, made here:

- A *word* is a whitespace-separated token of the question; it is eligible when, after stripping leading and
  trailing punctuation, it is all ASCII letters and at least 2 long ("base-10" and "x2" are not words here). Numbers, formulas, code and words with inner
  punctuation are never touched, nor are the answer options, the subject line or the template.
- When the question has fewer than k eligible words, all of them are perturbed (``k_applied`` < ``k``); with none,
  the variant equals the original and its record says so.
- An error that cannot apply (transposition in a word such as "aa") is replaced by one drawn from those that can.
"""

from __future__ import annotations

import functools
import re
import string

from posixlab.prompts import PromptItem
from posixlab.seeding import rng_for
from posixlab.variants.base import Edit, VariantGenerator

K_VALUES = (1, 2, 4, 8)
SEEDS_PER_K = 5
OPERATIONS = ("insertion", "omission", "transposition", "substitution")
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _qwerty_neighbours() -> dict[str, str]:
    # Each row sits half a key to the right of the row above: key (r, c) touches (r-1, c), (r-1, c+1),
    # (r+1, c-1) and (r+1, c), plus its left and right neighbours.
    pos = {ch: (r, c) for r, row in enumerate(_ROWS) for c, ch in enumerate(row)}
    out = {}
    for ch, (r, c) in pos.items():
        cells = [(r, c - 1), (r, c + 1), (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c)]
        out[ch] = "".join(
            _ROWS[rr][cc] for rr, cc in cells if 0 <= rr < len(_ROWS) and 0 <= cc < len(_ROWS[rr])
        )
    return out


QWERTY_NEIGHBOURS = _qwerty_neighbours()
_WORD = re.compile(r"\S+")
_CORE = re.compile(r"^([^\w]*)([A-Za-z]+)([^\w]*)$")


@functools.lru_cache(maxsize=256)  # a set's 20 variants edit one question: found once, not 20 times
def eligible_words(question: str) -> tuple[tuple[int, int], ...]:
    """(start, end) character spans of the letters of each eligible word.

    >>> q = "What is 2+2, in base-10? Explain."
    >>> [q[s:e] for s, e in eligible_words(q)]
    ['What', 'is', 'in', 'Explain']
    """
    spans = []
    for m in _WORD.finditer(question):
        core = _CORE.match(m.group())
        if core and len(core.group(2)) >= 2 and core.group(2).isascii():
            start = m.start() + len(core.group(1))
            spans.append((start, start + len(core.group(2))))
    return tuple(spans)


def _match_case(letter: str, like: str) -> str:
    return letter.upper() if like.isupper() else letter.lower()


def perturb_word(word: str, op: str, rng) -> tuple[str, str, int]:
    """Apply one error to ``word``; returns (new word, operation applied, position).

    >>> import random
    >>> perturb_word("Paris", "omission", random.Random(0))
    ('Pars', 'omission', 3)
    """
    applicable = [o for o in OPERATIONS if o != "transposition" or any(a != b for a, b in zip(word, word[1:]))]
    if op not in applicable:
        op = rng.choice(applicable)
    if op == "insertion":
        pos = rng.randrange(1, len(word))
        letter = _match_case(rng.choice(string.ascii_lowercase), word if word.isupper() else "a")
        return word[:pos] + letter + word[pos:], op, pos
    if op == "omission":
        pos = rng.randrange(len(word))
        return word[:pos] + word[pos + 1 :], op, pos
    if op == "transposition":
        pos = rng.choice([i for i in range(len(word) - 1) if word[i] != word[i + 1]])
        return word[:pos] + word[pos + 1] + word[pos] + word[pos + 2 :], op, pos
    pos = rng.randrange(len(word))
    letter = _match_case(rng.choice(QWERTY_NEIGHBOURS[word[pos].lower()]), word[pos])
    return word[:pos] + letter + word[pos + 1 :], op, pos


def misspell(question: str, k: int, rng) -> tuple[str, list[dict]]:
    """Perturb ``k`` distinct eligible words of ``question``; returns the new text and one record per edit."""
    spans = eligible_words(question)
    chosen = sorted(rng.sample(range(len(spans)), min(k, len(spans))))
    edits, pieces, cursor = [], [], 0
    for word_index in chosen:
        start, end = spans[word_index]
        word = question[start:end]
        new, op, pos = perturb_word(word, rng.choice(OPERATIONS), rng)
        edits.append({"word_index": word_index, "char_start": start, "original": word, "perturbed": new,
                      "operation": op, "position": pos})
        pieces += [question[cursor:start], new]
        cursor = end
    pieces.append(question[cursor:])
    return "".join(pieces), edits


class SpellingVariants(VariantGenerator):
    kind = "spelling"

    def edit(self, item: PromptItem, index: int, seed: int) -> Edit:
        k = K_VALUES[(index // SEEDS_PER_K) % len(K_VALUES)]
        repeat = index % SEEDS_PER_K + SEEDS_PER_K * (index // (SEEDS_PER_K * len(K_VALUES)))
        rng = rng_for(seed, item.item_id, self.kind, index)
        question, edits = misspell(item.question, k, rng)
        record = {"k": k, "repeat": repeat, "k_applied": len(edits), "edits": edits}
        if not edits:
            record["note"] = "the question has no eligible word; this variant equals the original"
        return Edit(question=question, record=record)
