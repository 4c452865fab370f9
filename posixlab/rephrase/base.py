"""Asking a rephraser model for paraphrases: the instruction, parsing the reply, validating, asking again.

A rephraser (``Rephraser``) is a model that can generate, opened through the backend registry
(``posixlab.backends.open_to_generate``: the ``transformers`` backend's model in this process for ``hf``, the
``chat`` backend's for ``openai``), with the sampling settings its requests carry, and an ``identity`` dict that says
exactly who writes the paraphrases. ``chat(messages, *, seed, n, max_tokens) -> list[str]`` is one request: ``n``
replies to one chat, decoded as one ``Generation`` says. ``collect_paraphrases`` drives it:

1. the chat is the instruction's system message, its worked examples as user/assistant turns, then the request;
2. each reply is split into candidate lines (numbering, bullets and quotes removed);
3. a candidate is rejected when it is empty, a copy of the original, a duplicate of one already accepted, the
   original with an answer appended (a fill-in-the-blank question completed), or far from the original's length (a
   sign the model answered, or wrote a preamble, instead of rewriting);
4. the candidates left are measured (``posixlab.rephrase.quality``: embedding similarity, numbers and names kept,
   words borrowed from the worked examples) and the quality rules reject the clear failures;
5. it asks again, with a new seed, until it has ``n`` distinct valid paraphrases or its request budget runs out, and
   then fails with a message that says how many it got and what was rejected.

The paper does not publish its GPT-3.5 instruction; ours is config (``conf/rephraser/instruction/``) and goes into
every result that uses it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field

from posixlab.backends import generate, generate_many, system_folded
from posixlab.errors import ConfigError, RephraserError
from posixlab.rephrase.quality import LENGTH_SLACK, split_statement_list, too_long


@dataclass(frozen=True)
class Instruction:
    """What the rephraser is told: a system message, a request (``{k}`` and ``{text}`` placeholders), examples."""

    system: str
    request: str
    examples: tuple[dict, ...] = ()  # each {"text": original, "rewrites": [paraphrase, ...]}

    @classmethod
    def from_dict(cls, d: dict) -> "Instruction":
        unknown = set(d) - {"system", "request", "examples"}
        if unknown or "request" not in d:
            raise ConfigError(f"a rephraser instruction has keys system, request, examples; got {sorted(d)}")
        for placeholder in ("{k}", "{text}"):
            if placeholder not in d["request"]:
                raise ConfigError(f"the rephraser request must contain {placeholder}: {d['request']!r}")
        examples = tuple({"text": e["text"], "rewrites": list(e["rewrites"])} for e in d.get("examples") or ())
        return cls(system=d.get("system") or "", request=d["request"], examples=examples)

    def to_dict(self) -> dict:
        return {"system": self.system, "request": self.request, "examples": [dict(e) for e in self.examples]}

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def messages(self, text: str, k: int) -> list[dict]:
        chat = [{"role": "system", "content": self.system}] if self.system else []
        for example in self.examples:
            rewrites = example["rewrites"]
            chat.append({"role": "user", "content": self.request.format(k=len(rewrites), text=example["text"])})
            chat.append({"role": "assistant", "content": "\n".join(f"{i}. {r}" for i, r in enumerate(rewrites, 1))})
        chat.append({"role": "user", "content": self.request.format(k=k, text=text)})
        return chat


class Rephraser:
    """Who writes the paraphrases: a model whose backend can generate (``lm``, or ``open_lm`` to open it on first use:
    a model in this process loads only when a paraphrase is missing) and the sampling every request carries. The
    ``openai`` and ``hf`` rephrasers are this class, configured (``openai_backend``, ``hf_backend``); a test double may
    override ``chat`` instead."""

    name: str = ""
    identity: dict = {}  # what determines its output: backend, model (and revision), sampling parameters
    temperature: float = 0.8
    top_p: float | None = 0.95
    # requests it may have in flight at once: a server's ``max_concurrency``; 1 for a model in this process, which
    # already samples a request's replies in one batch
    concurrency: int = 1
    # True: ``chat_batch`` decodes its requests in one batch (a model in this process), so a source writes several
    # texts in step (``ParaphraseSource.paraphrases_of``); False: requests go one per thread, ``concurrency`` at once
    batches: bool = False
    _lm = None
    _open_lm = None

    def __init__(self, name: str, identity: dict, *, lm=None, open_lm=None, temperature: float = 0.8,
                 top_p: float | None = 0.95):
        self.name, self.identity = name, identity
        self.temperature, self.top_p = temperature, top_p
        self._lm, self._open_lm = lm, open_lm

    @property
    def lm(self):
        """The model that writes the paraphrases, opened (through the backend registry) the first time it is asked."""
        if self._lm is None:
            if self._open_lm is None:
                raise RephraserError(f"rephraser {self.name or type(self).__name__} has no model to write with")
            self._lm = self._open_lm()
        return self._lm

    def release(self) -> None:
        """Close the model this rephraser opened (a model in this process: gigabytes, on a GPU too), once the
        paraphrases are written, so that the run's model does not load beside it; asked again, it opens again. A
        model it was given (``lm=``) is its owner's to close. Without this the model lived on until Python's cycle
        collector ran (the rephraser refers to itself through ``open_lm``; llama.cpp's model to itself too)."""
        lm, self._lm = self._lm, None
        if lm is not None and self._open_lm is not None:
            import gc
            import sys

            lm.close()
            del lm
            gc.collect()  # what only the cycle collector frees (a transformers model's, a llama.cpp model's)
            torch = sys.modules.get("torch")  # imported only if a model in this process was
            if torch is not None and torch.cuda.is_available():
                torch.cuda.empty_cache()  # the card's free memory, as the run's model and its budget read it

    def system_folded(self) -> bool | None:
        """Whether the model read the instruction's system message at the head of the first user turn, its chat
        template refusing one (``posixlab.backends.system_folded``); None until the model has opened."""
        return None if self._lm is None else system_folded(self._lm)

    def generation(self, max_tokens: int, *, n: int, seed: int):
        """One request's decoding: this rephraser's sampling, the request's budget, replies and seed."""
        from posixlab.openai_client import Generation  # here: the openai client is imported only when one is sent

        return Generation(max_tokens, temperature=self.temperature, top_p=self.top_p, n=n, seed=seed)

    def chat(self, messages: list[dict], *, seed: int, n: int, max_tokens: int) -> list[str]:
        """``n`` replies to ``messages``: one request, its settings carried in its ``Generation``."""
        return generate(self.lm, messages, self.generation(max_tokens, n=n, seed=seed))

    def chat_batch(self, requests: list[dict]) -> list[list[str]]:
        """Each request's replies (``requests`` are ``chat``'s keyword arguments): decoded in one batch where the
        model's backend can (``posixlab.backends.generate_many``), one request at a time otherwise."""
        if type(self).chat is not Rephraser.chat:  # a rephraser with a ``chat`` of its own (a test's script)
            return [self.chat(**request) for request in requests]
        return generate_many(self.lm, [(r["messages"], self.generation(r["max_tokens"], n=r["n"], seed=r["seed"]))
                                       for r in requests])


_NUMBERED = re.compile(r"^\s*(?:\(?\d{1,2}\s*[.):\]]|(?:paraphrase|rewrite|version|variant)\s*\d{0,2}\s*[:.)-])\s*",
                       re.IGNORECASE)
_BULLET = re.compile(r"^\s*[-*•]\s+")
_QUOTES = "\"'`“”‘’«»"


def parse_reply(reply: str) -> list[str]:
    """Candidate paraphrases in a reply: its numbered items (or, with no numbering, its bullet or plain lines).

    >>> parse_reply('Sure! Here are two:\\n1. "What is two plus two?"\\n2) Two plus two equals\\nwhat?\\n')
    ['What is two plus two?', 'Two plus two equals what?']
    >>> parse_reply('- Explain cognitive biases.\\n* Describe what cognitive biases are.')
    ['Explain cognitive biases.', 'Describe what cognitive biases are.']
    """
    lines = [line.strip() for line in reply.replace("\r", "\n").split("\n")]
    lines = [line for line in lines if line and not line.startswith("```")]
    if any(_NUMBERED.match(line) for line in lines):
        # a numbered item runs until the next number: a long rewrite wrapped over several lines stays one
        picked = []
        for line in lines:
            if _NUMBERED.match(line):
                picked.append(_NUMBERED.sub("", line, count=1))
            elif picked:
                picked[-1] += " " + line
    else:
        picked = [_BULLET.sub("", line, count=1) for line in lines]
    return [line.strip().strip(_QUOTES).strip() for line in picked]


def normalized(text: str) -> str:
    """Case, whitespace and final punctuation folded: what counts as "the same text" for copies and duplicates."""
    return re.sub(r"\s+", " ", text).strip().rstrip(".?!:;").strip().casefold()


def rejection(candidate: str, original: str, accepted: list[str], length_ratio: tuple[float, float],
              length_slack: int = LENGTH_SLACK) -> str | None:
    """Why ``candidate`` is not a valid new paraphrase of ``original`` (None when it is). Too long means past
    ``length_ratio[1]`` times the original's characters and ``length_slack`` characters more (``quality.too_long``).

    >>> rejection("What is 2+2?", "what is 2+2", [], (0.5, 2.0))
    'copy of the original'
    >>> rejection("Tell me the sum of 2 and 2, then explain long division in detail.", "What is 2+2?", [], (0.5, 2.0))
    'too long'
    >>> rejection("What is the sum of 2 and 2?", "What is 2+2?", [], (0.5, 2.0)) is None  # 2.25x, 15 more
    True
    >>> rejection("How much is 2+2?", "What is 2+2?", ["how much is 2+2"], (0.5, 2.0))
    'duplicate'
    >>> rejection("Marx claimed workers were alienated from their work.", "Marx claimed workers were alienated from:",
    ...           [], (0.5, 2.0))
    'completes the original'
    """
    if not candidate.strip():
        return "empty"
    key = normalized(candidate)
    if key == normalized(original):
        return "copy of the original"
    if key in {normalized(a) for a in accepted}:
        return "duplicate"
    if key.startswith(normalized(original)):
        return "completes the original"  # the original, then an answer: a cloze question filled in, not rewritten
    if candidate.rstrip().endswith(":") and not original.rstrip().endswith(":"):
        return "preamble"  # "Here are five rewrites:"; an original that ends in a colon may be rewritten so
    ratio = len(candidate) / max(1, len(original))
    if ratio < length_ratio[0]:
        return "too short"
    if too_long(ratio, len(candidate) - len(original), length_ratio[1], length_slack):
        return "too long"
    return None


REPLY_TOKENS = 480  # a reply's budget for its rewrites


@dataclass
class Collected:
    paraphrases: list[str]
    requests: int = 0
    rejected: Counter = field(default_factory=Counter)
    candidates: int = 0  # candidate lines parsed from the replies (accepted, rejected, or valid beyond the n needed)
    quality: list[dict] = field(default_factory=list)  # the measures of each accepted paraphrase (with a scorer)


def request_seed(seed: int, text: str, attempt: int) -> int:
    digest = hashlib.sha256(f"{seed}\x1f{text}\x1f{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1  # a 31-bit seed every backend accepts


class ParaphraseCollector:
    """One original's paraphrases, a request at a time: ``request()`` is the next request to send (None once ``n``
    are found or the budget is spent), ``take(replies)`` reads its replies, ``result()`` is the ``Collected`` or
    the ``RephraserError`` that says what was missing. ``collect_paraphrases`` sends each request as it comes; a
    source that writes several originals at once (``ParaphraseSource.paraphrases_of``) sends theirs together. Its
    arguments are ``collect_paraphrases``'."""

    def __init__(self, name: str, instruction: Instruction, original: str, n: int, *, seed: int = 0,
                 per_request: int = 5, samples: int = 4, max_requests: int = 6,
                 length_ratio: tuple[float, float] = (0.5, 2.0), length_slack: int = LENGTH_SLACK,
                 existing: list[str] = (),
                 existing_quality: list[dict] = (), first_request: int = 0, scorer=None, rules=None):
        self.name, self.instruction, self.original, self.n = name, instruction, original, n
        self.seed, self.samples, self.first_request = seed, samples, first_request
        self.length_ratio, self.length_slack, self.scorer, self.rules = length_ratio, length_slack, scorer, rules
        self.stem, self.statements = split_statement_list(original)  # a numbered statement list is kept as written
        self.text = re.sub(r"\s*\n\s*", " ", self.stem).strip()
        self.found = Collected(paraphrases=list(existing)[:n], quality=list(existing_quality)[:n])
        statements = self.statements
        self.rewrites = [p[: -len(statements)].rstrip() if statements and p.endswith(statements) else p
                         for p in self.found.paraphrases]  # the rewritten questions, without the list
        # room for k rewrites of about the original's length (~3.5 characters a token), numbering and slack; a long
        # original (an MMLU passage) gets fewer rewrites per reply, so that one reply stays within REPLY_TOKENS
        per_rewrite = len(self.text) / 3.5 + 8
        self.k = max(1, min(per_request, int(REPLY_TOKENS / (1.5 * per_rewrite))))
        self.max_tokens = 32 + int(self.k * per_rewrite * 1.5)
        # the budget counts requests of per_request rewrites: a long original asked for fewer per reply gets more
        self.budget = max_requests * max(1, per_request // self.k)

    @property
    def done(self) -> bool:
        return len(self.found.paraphrases) >= self.n or self.first_request + self.found.requests >= self.budget

    def request(self) -> dict | None:
        """The next request's ``Rephraser.chat`` arguments (messages, seed, n, max_tokens), or None when done."""
        if self.done:
            return None
        return {"messages": self.instruction.messages(self.text, self.k), "n": self.samples,
                "max_tokens": self.max_tokens,
                "seed": request_seed(self.seed, self.text, self.first_request + self.found.requests)}

    def take(self, replies: list[str]) -> None:
        """The replies to the request ``request()`` gave: their valid new paraphrases are kept."""
        found, statements = self.found, self.statements
        found.requests += 1
        for reply in replies:
            survivors: list[str] = []
            for candidate in parse_reply(reply):
                found.candidates += 1
                reason = rejection(candidate, self.text, self.rewrites + survivors, self.length_ratio,
                                   self.length_slack)
                if reason:
                    found.rejected[reason] += 1
                else:
                    survivors.append(candidate)
            measures = self.scorer.score(self.text, survivors) if self.scorer is not None else [None] * len(survivors)
            for candidate, scores in zip(survivors, measures):
                reason = self.rules.verdict(scores) if scores is not None and self.rules is not None else None
                if reason:
                    found.rejected[reason] += 1
                elif len(found.paraphrases) < self.n:
                    self.rewrites.append(candidate)
                    found.paraphrases.append(f"{candidate}\n{statements}" if statements else candidate)
                    if scores is not None:
                        found.quality.append(scores)

    def result(self) -> Collected:
        """What was collected, or (fewer than ``n``) a ``RephraserError`` carrying it as ``collected``."""
        found = self.found
        if len(found.paraphrases) >= self.n:
            return found
        rejected = ", ".join(f"{count} {reason}" for reason, count in found.rejected.most_common()) or "none"
        error = RephraserError(
            f"rephraser {self.name} gave {len(found.paraphrases)} of the {self.n} valid paraphrases needed for "
            f"{self.original[:80]!r} after {self.first_request + found.requests} requests"
            f"{f' ({found.requests} in this run)' if self.first_request else ''} (rejected: {rejected}). Raise "
            f"rephraser.max_requests (it counts every run's requests of a question), use a stronger rephraser, or "
            f"supply your own paraphrase file "
            f"(rephraser=file rephraser.path=FILE)."
        )
        error.collected = found  # the caller keeps what was obtained; asking again starts from it
        return error


def collect_paraphrases(rephraser: Rephraser, instruction: Instruction, original: str, n: int, *,
                        on_request=None, **options) -> Collected:
    """``n`` distinct valid paraphrases of ``original`` (``existing`` ones first), or a ``RephraserError``.

    Each request asks for ``per_request`` rewrites in ``samples`` independent replies. Line breaks in the original
    are sent as spaces (the reply is parsed line by line), so paraphrases are single lines; a list of numbered
    statements after the question ("I. GATT\\nII. IMF", which options such as "I and II only" refer to) is not sent:
    each paraphrase of the question gets it back as written. With a ``scorer``
    (``QualityScorer``), every candidate that passes the basic checks is measured and ``rules`` (``QualityRules``)
    reject the clear failures; ``existing_quality`` holds the measures of ``existing``. Request seeds count on from
    ``first_request`` (the requests an earlier call made), so a top-up never asks the same question twice, and
    ``max_requests`` bounds the requests of every call together: a question given up on is not asked again (each
    resumed run would otherwise spend a whole budget on it) until ``max_requests`` is raised. ``on_request``, when
    given, is called with the ``Collected`` so far after each request (a progress bar). A failed request's error
    carries what was collected before it (``collected``), as running out of requests does.
    """
    collector = ParaphraseCollector(rephraser.name, instruction, original, n, **options)
    while (request := collector.request()) is not None:
        try:
            replies = rephraser.chat(**request)
        except RephraserError as error:
            error.collected = collector.found
            raise
        collector.take(replies)
        if on_request is not None:
            on_request(collector.found)
    result = collector.result()
    if isinstance(result, RephraserError):
        raise result
    return result
