"""A backend that lives outside the package, as a contributor's would: one module that registers itself when imported
(``posixlab.backends.register``), with no edit to posixlab. The tests (tests/test_plugins.py) run it through
``posixlab.runner.run``, ``posixlab merge`` and the gate, for the built-in tasks and for a task that is not built in.

The model is a rule in pure Python: it answers every prompt with one of the letters A-D, chosen by the characters of
the prompt, so a rephrased prompt may get another letter (a classifier with some sensitivity). It can only generate
text. Its engine keeps an answer cache (one JSON line per prompt, in ``<cache_dir>/rule-answers``), reports what it
answered and what came from the cache, and plans a dry run: everything the runner asks of a backend.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from posixlab.backends import Backend, register
from posixlab.models.capabilities import GENERATE

NAME = "rule-test"
LETTERS = "ABCD"


def rule_answer(text: str) -> str:
    """The model: a letter chosen by the prompt's characters."""
    return LETTERS[int(hashlib.sha256(text.encode()).hexdigest(), 16) % len(LETTERS)]


class RuleModel:
    backend = NAME  # what the runner asks the registry about: capabilities, engine, cache, report

    def __init__(self, spec):
        self.spec = spec
        self.name = spec.name
        self.identity = {"backend": NAME, "name": spec.name, "rule": "sha256 of the prompt, mod 4"}
        self.forward_tokens = 0
        self.eos_ids = frozenset()
        self.max_context = None

    def close(self) -> None:
        pass


class AnswerCache:
    """Each prompt's answer, one JSON line per answer; read whole when opened."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "answers.jsonl"
        self.answers = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                self.answers[row["prompt"]] = row["answer"]
        self._file = open(self.path, "a", encoding="utf-8")

    def put(self, prompt: str, answer: str) -> None:
        self.answers[prompt] = answer
        self._file.write(json.dumps({"prompt": prompt, "answer": answer}) + "\n")

    def close(self) -> None:
        self._file.close()


@dataclass
class Answers:
    texts: list[str]  # what the runner reads of a text-only result


class RuleEngine:
    def __init__(self, lm: RuleModel, max_new_tokens: int, cache: AnswerCache | None):
        self.lm, self.cache = lm, cache
        self.processed_tokens = 0
        self.answered = self.from_cache = 0

    def run(self, requests: list, in_order: bool = False):
        for i, request in enumerate(requests):
            texts = []
            for text in request.texts:
                if self.cache is not None and text in self.cache.answers:
                    self.from_cache += 1
                    texts.append(self.cache.answers[text])
                    continue
                answer = rule_answer(text)
                self.answered += 1
                self.processed_tokens += len(text.split())
                if self.cache is not None:
                    self.cache.put(text, answer)
                texts.append(answer)
            yield i, Answers(texts)


def open_model(spec, cache_dir=None) -> RuleModel:
    return RuleModel(spec)


def engine(lm, max_new_tokens, options, cache, requests) -> RuleEngine:
    return RuleEngine(lm, max_new_tokens, cache)


def answer_cache(lm, folder, cache_dir) -> AnswerCache:
    return AnswerCache(Path(folder or Path(cache_dir or ".") / "rule-answers"))


def report(engines: list, spec) -> dict:
    return {"rule": {"answered": sum(e.answered for e in engines), "from_cache": sum(e.from_cache for e in engines)}}


def plan(lm, requests: list, options, cache) -> dict:
    prompts = [text for request in requests for text in request.texts]
    cached = sum(cache is not None and text in cache.answers for text in prompts)
    return {"to_answer": len(prompts) - cached, "cached": cached}


register(Backend(NAME, frozenset({GENERATE}), open_model, engine, kind="in-process", cache=answer_cache, report=report,
                 plan=plan))
