"""Paraphrase quality: what a paraphrase keeps of its original, measured, and the validators that reject clear failures.

Four measures per paraphrase (``measure``), each cheap enough to run on every candidate a rephraser writes:

- ``similarity``: cosine similarity of the two texts' sentence embeddings (the packaged all-MiniLM-L6-v2 by default);
- ``numbers_missing`` / ``numbers_added``: numbers of the original absent from the paraphrase, and new ones in it
  ("three" and "3" are the same number; "1,000" and "1000" too; the word "one" is not read as a number);
- ``entities_missing``: names of the original (capitalised words inside a sentence, acronyms, words with digits or
  inner capitals such as "CO2" or "iPhone") absent from the paraphrase, compared case-insensitively;
- ``borrowed``: distinctive words of the rephraser instruction's worked examples that the paraphrase uses and the
  original lacks: the sign of a small model drifting to its examples' topic ("How does dark energy explain
  photosynthesis?");
- ``length_ratio``: the paraphrase's length over the original's, in characters; ``length_added``: the characters it
  adds (negative: drops), which let a short original's rewrite grow past the ratio (``too_long``).

The entity and borrowing tests are heuristics without a tagger (none installs offline here): a sentence-initial
name ("Marx claimed ...") is not recognised as one, and a paraphrase that writes "U.S." for "United States" counts
as dropping it. Their errors cost requests (a good paraphrase rejected), rarely a bad one kept.

``QualityRules`` turns the measures into a verdict (``QualityRules.verdict``): the reason a paraphrase is rejected,
or None. The thresholds are config (``rephraser.min_similarity`` ...); the defaults and how they were chosen are in
docs/choices.md.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

# "one" is left out: "which one", "no one", "one of" are not numbers, and a rewrite adds them freely
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero - two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split()) if w != "-"}
_NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "thousand": "1000",
                      "million": "1000000", "billion": "1000000000", "twice": "2", "half": "0.5"})
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?|\b[a-z]+\b", re.IGNORECASE)


def numbers(text: str) -> set[str]:
    """The numbers a text states, normalised: digits without thousands separators, number words as digits.

    >>> sorted(numbers("Give three tips; 1,000 people and 2.5% of 40"))
    ['1000', '2.5', '3', '40']
    """
    found = set()
    for token in _NUMBER.findall(text):
        if token[0].isalpha():
            if token.lower() in _NUMBER_WORDS:
                found.add(_NUMBER_WORDS[token.lower()])
        else:
            value = token.replace(",", "")
            found.add(value.rstrip("0").rstrip(".") if "." in value else value)
    return found


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’-]*|\d+[A-Za-z][A-Za-z0-9]*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|[\"“(\[]\s*)$")
_NOT_NAMES = {"I", "A", "OK"}
# words written in capitals for emphasis, as MMLU does ("All of the following EXCEPT"): not names
_EMPHASIS = set("except not no true false least most all none best worst only never always correct incorrect "
                "both neither either cannot".split())


def entities(text: str) -> list[str]:
    """The names a text mentions, as written (runs of capitalised words joined), in order.

    A capitalised word counts when it is not the first word of a sentence; an acronym, a word with a digit or with a
    capital inside counts anywhere.

    >>> entities("Which of the following did Karl Marx say about the USA and CO2 in Das Kapital?")
    ['Karl Marx', 'USA', 'CO2', 'Das Kapital']
    >>> entities("Explain what photosynthesis is.")
    []
    >>> entities("All of the following are waves EXCEPT")
    []
    """
    names: list[str] = []
    run: list[str] = []
    previous_end = None
    for match in _WORD.finditer(text):
        word = re.sub(r"['’]s$", "", match.group())
        start_of_sentence = bool(_SENTENCE_START.search(text[:match.start()]))
        distinctive = ((word.isupper() and len(word) > 1) or any(c.isupper() for c in word[1:])
                       or (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)))
        is_name = (word not in _NOT_NAMES and word.lower() not in _EMPHASIS
                   and (distinctive or (word[0].isupper() and not start_of_sentence)))
        adjacent = previous_end is not None and text[previous_end:match.start()] == " "
        roman = re.fullmatch(r"[IVX]+", word) is not None or (run and re.fullmatch(r"[IVX]+", run[-1]))
        if is_name and run and adjacent and not roman:  # "GATT II. IMF": list numerals stand alone
            run.append(word)
        else:
            if run:
                names.append(" ".join(run))
            run = [word] if is_name else []
        previous_end = match.end()
    if run:
        names.append(" ".join(run))
    return list(dict.fromkeys(names))


_LIST_ITEM = re.compile(r"^\s*(?:[IVX]+|\d{1,2}|[a-h])[.)]\s+\S")


def split_statement_list(text: str) -> tuple[str, str]:
    r"""A question before a list of numbered statements that its options refer to ("I and III only"), and that list
    as written; ``(text, "")`` when there is none. The rephraser rewrites the question only; the list stays.

    >>> split_statement_list("Which were institutions of the order?\nI. GATT\nII. IMF")
    ('Which were institutions of the order?', 'I. GATT\nII. IMF')
    >>> split_statement_list("Which statement is correct?\n")
    ('Which statement is correct?\n', '')
    """
    lines = text.split("\n")
    for i in range(1, len(lines)):
        rest = [line for line in lines[i:] if line.strip()]
        if rest and all(_LIST_ITEM.match(line) for line in rest):
            return "\n".join(lines[:i]).rstrip(), "\n".join(lines[i:])
    return text, ""


def _mentions(text: str, name: str) -> bool:
    return re.search(r"(?<![A-Za-z0-9])" + re.escape(name) + r"(?![A-Za-z0-9])", text, re.IGNORECASE) is not None


# Function words and the generic vocabulary of rewriting requests: words any paraphrase may use whatever its topic
_COMMON = set("""
a about above after again against all also an and any are around as at be because been before being below between
both but by can could did do does doing down during each either else ever every few for from further had has have
having he her here hers him his how however if in into is it its itself just least less like main mainly many may
me might more most much must my neither no nor not now of off often on once one only or other others our out over
own part per perhaps rather same several shall she should since so some such than that the their them then there
these they this those though through thus to too under until up upon us very was we were what when where whether
which while who whom whose why will with within without would yet you your
answer ask asked asks carry carried certain chief chiefly different describe described detail details discuss
example explain explained express find following form forms give given gives happen happens identify kind list
make makes mean means name named offer place principal process provide provided question rewrite say share show
state suggest take takes taken tell term thing things type way ways word words write
""".split())


def _stem(word: str) -> str:
    word = word.lower().strip("'’-")
    for suffix in ("ations", "ation", "ings", "ing", "ies", "es", "ed", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> set[str]:
    """Stems of a text's content words (four letters or more, not function words or generic request words)."""
    return {_stem(w) for w in re.findall(r"[A-Za-z][A-Za-z'’-]+", text)
            if len(w) >= 4 and w.lower() not in _COMMON and w.lower() not in _NUMBER_WORDS}


def distinctive_words(examples) -> set[str]:
    """The content-word stems of the texts an instruction's worked examples rewrite: their topic.

    Only the example texts count, not their rewrites: the rewrites add the generic vocabulary of rewording
    ("suggestions", "keeping"), which any paraphrase may use.

    >>> sorted(distinctive_words([{"text": "Which gas do plants absorb?", "rewrites": ["What gas is taken up?"]}]))
    ['absorb', 'plant']
    """
    stems: set[str] = set()
    for example in examples:
        stems |= content_stems(example["text"])
    return stems


def borrowed_words(candidate: str, original: str, distinctive: set[str]) -> list[str]:
    """Words of ``candidate`` whose stem is a distinctive example stem that ``original`` does not have.

    >>> borrowed_words("How does dark energy explain photosynthesis?", "How does dark energy work?",
    ...                {"photosynthesi", "plant"})
    ['photosynthesis']
    """
    have = content_stems(original)
    words = re.findall(r"[A-Za-z][A-Za-z'’-]+", candidate)
    return list(dict.fromkeys(w for w in words if _stem(w) in distinctive and _stem(w) not in have
                              and len(w) >= 4 and w.lower() not in _COMMON))


def measure(candidate: str, original: str, similarity: float, distinctive: set[str]) -> dict:
    """The quality measures of one paraphrase (``similarity`` computed by the caller, in a batch).

    >>> m = measure("Name 4 ways plants stay healthy.", "Name three ways to stay healthy in Paris.", 0.8, {"plant"})
    >>> m["numbers_missing"], m["numbers_added"], m["entities_missing"], m["borrowed"]
    (['3'], ['4'], ['Paris'], ['plants'])
    """
    have, get = numbers(original), numbers(candidate)
    return {
        "similarity": round(float(similarity), 6),
        "length_ratio": round(len(candidate) / max(1, len(original)), 4),
        "length_added": len(candidate) - len(original),
        "numbers_missing": sorted(have - get),
        "numbers_added": sorted(get - have),
        "entities_missing": [name for name in entities(original) if not _mentions(candidate, name)],
        "borrowed": borrowed_words(candidate, original, distinctive),
    }


# Characters a rewrite may add whatever the ratio: what a 2x ceiling allows a 30-character original. Without it a
# short question's faithful rewrites were "too long" ("What is 2+2?" -> "What is the sum of 2 and 2?", 2.25x): the
# packaged 1.5B rephraser had 215 of 240 candidates for "What is 2+2?" refused so, and 12 requests gave 7 of 20.
LENGTH_SLACK = 30


def too_long(ratio: float, added: float, max_ratio: float, slack: int = LENGTH_SLACK) -> bool:
    """Whether a rewrite ``ratio`` times its original's length, ``added`` characters longer, is too long: past both
    the ratio and the slack.

    >>> too_long(27 / 12, 15, 2.0), too_long(65 / 12, 53, 2.0), too_long(90 / 40, 50, 2.0), too_long(3.0, 20, 2.0, 0)
    (False, True, True, True)
    """
    return ratio > max_ratio and added > slack


@dataclass(frozen=True)
class QualityRules:
    """Which measured failures reject a paraphrase. ``verdict`` returns the reason, or None for a keeper."""

    min_similarity: float = 0.0
    min_length_ratio: float = 0.5
    max_length_ratio: float = 2.0
    length_slack: int = LENGTH_SLACK
    keep_numbers: bool = True
    keep_entities: bool = True
    reject_borrowed: bool = True

    def verdict(self, scores: dict) -> str | None:
        """
        >>> rules = QualityRules(min_similarity=0.7)
        >>> rules.verdict({"similarity": 0.9, "length_ratio": 1.0, "numbers_missing": [], "numbers_added": ["4"],
        ...                "entities_missing": [], "borrowed": []})
        'number changed'
        >>> rules.verdict({"similarity": 0.5, "length_ratio": 1.0, "numbers_missing": [], "numbers_added": [],
        ...                "entities_missing": [], "borrowed": []})
        'low similarity'
        """
        if self.keep_numbers and (scores["numbers_missing"] or scores["numbers_added"]):
            return "number changed"
        if self.keep_entities and scores["entities_missing"]:
            return "name dropped"
        if self.reject_borrowed and scores["borrowed"]:
            return "borrows an example's words"
        if scores["length_ratio"] < self.min_length_ratio:
            return "too short"
        # measures written before length_added existed are held to the ratio alone, as they were
        if too_long(scores["length_ratio"], scores.get("length_added", float("inf")), self.max_length_ratio,
                    self.length_slack):
            return "too long"
        if scores["similarity"] < self.min_similarity:
            return "low similarity"
        return None


class QualityScorer:
    """Measures paraphrases against their original: embeds both (one batch per call) and runs ``measure``."""

    def __init__(self, embedder, examples=()):
        self.embedder = embedder  # anything with embed(texts) -> rows and an identity dict (posixlab.embeddings)
        self.distinctive = distinctive_words(examples)
        self.identity = {"embedding": dict(embedder.identity), "measures": 1}
        self._lock = threading.Lock()  # one embedding call at a time: a tokenizer shared by threads can refuse

    def score(self, original: str, candidates: list[str]) -> list[dict]:
        if not candidates:
            return []
        with self._lock:
            return self._score(original, candidates)

    def _score(self, original: str, candidates: list[str]) -> list[dict]:
        stem, tail = split_statement_list(original)
        if tail:  # a kept statement list would flatter every measure: the rewritten question is what is measured
            original = stem
            candidates = [c[: -len(tail)].rstrip() if c.endswith(tail) else c for c in candidates]
        rows = self.embedder.embed([original, *candidates]).astype(np.float64)
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        similarities = rows[1:] @ rows[0]
        return [measure(c, original, s, self.distinctive) for c, s in zip(candidates, similarities)]


def summarize(scores: list[dict]) -> dict:
    """The distribution of a run's paraphrase measures: quantiles of similarity and length ratio, failure shares.

    >>> summarize([{"similarity": 0.9, "length_ratio": 1.0, "numbers_missing": [], "numbers_added": [],
    ...             "entities_missing": ["Paris"], "borrowed": []}])["entities_kept"]
    0.0
    """
    if not scores:
        return {"paraphrases": 0}
    similarity = np.array([s["similarity"] for s in scores])
    ratio = np.array([s["length_ratio"] for s in scores])

    def share(test) -> float:
        return round(float(np.mean([bool(test(s)) for s in scores])), 4)

    return {
        "paraphrases": len(scores),
        "similarity_q05_q50_q95": [round(float(q), 4) for q in np.quantile(similarity, [0.05, 0.5, 0.95])],
        "similarity_min": round(float(similarity.min()), 4),
        "length_ratio_q05_q50_q95": [round(float(q), 4) for q in np.quantile(ratio, [0.05, 0.5, 0.95])],
        "numbers_kept": share(lambda s: not s["numbers_missing"] and not s["numbers_added"]),
        "entities_kept": share(lambda s: not s["entities_missing"]),
        "borrowing": share(lambda s: s["borrowed"]),
    }


def describe_summary(summary: dict | None) -> str | None:
    """One line for a run's summary: the distribution of its paraphrases' measures (None when none were checked).

    >>> describe_summary({"checked": True, "paraphrases": 40, "similarity_q05_q50_q95": [0.71, 0.86, 0.95],
    ...                   "length_ratio_q05_q50_q95": [0.8, 1.0, 1.3], "numbers_kept": 1.0, "entities_kept": 0.975,
    ...                   "borrowing": 0.0})
    'paraphrases: 40 checked · similarity to the original 0.71 / 0.86 / 0.95 (5/50/95%) · length ratio 0.80 / 1.00 / 1.30 · numbers kept 100% · names kept 98% · example words borrowed 0%'
    """
    if not summary or not summary.get("checked") or not summary.get("paraphrases"):
        return None
    sim, ratio = summary["similarity_q05_q50_q95"], summary["length_ratio_q05_q50_q95"]
    return (f"paraphrases: {summary['paraphrases']} checked · similarity to the original "
            f"{sim[0]:.2f} / {sim[1]:.2f} / {sim[2]:.2f} (5/50/95%) · length ratio {ratio[0]:.2f} / {ratio[1]:.2f} / "
            f"{ratio[2]:.2f} · numbers kept {summary['numbers_kept']:.0%} · names kept {summary['entities_kept']:.0%} · "
            f"example words borrowed {summary['borrowing']:.0%}")
