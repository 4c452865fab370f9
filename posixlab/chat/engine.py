"""The runner's engine for models behind a chat API: every prompt of every request sent (or read from the cache),
at most ``model.server.max_concurrency`` in flight, each answer cached the moment it arrives.

Order of work: the cached answers are read first; the rest go out in request order, a new one each time one comes
back, so that a run killed with ``kill -9`` has at most ``max_concurrency`` requests unanswered and a restart sends
only those (the answers before them are on disk). ``model.server.max_requests`` caps what one run sends: at the cap it
stops sending, lets what is in flight finish, and ends cleanly; the units whose answers are all in are recorded and
the summary says the run stopped (a rerun with a higher cap goes on from the cache).

Any failure (a dead endpoint, a rejected key, a 429 whose retries are spent, a malformed body) stops the whole run
once, with one message, after saving what had already come back.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from posixlab.chat.cache import ResponseCache
from posixlab.chat.client import ChatAnswer
from posixlab.chat.model import ChatModel
from posixlab.openai_client import run_bounded

CHARS_PER_TOKEN = 4  # dry runs estimate prompt tokens as characters / 4 (OpenAI's rule of thumb for English)


@dataclass
class TextAnswers:
    """A request's answers, one per prompt, in the order of its ``texts`` (what ``SetScores`` is for token ids)."""

    answers: list[ChatAnswer]

    @property
    def texts(self) -> list[str]:
        return [a.text for a in self.answers]


class ChatEngine:
    def __init__(self, lm: ChatModel, max_new_tokens: int, cache: ResponseCache | None = None):
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.cache = cache
        self.processed_tokens = 0  # prompt + completion tokens the endpoint reported for what this run sent
        self.sent = 0
        self.from_cache = 0
        self.usage_sent = {"prompt_tokens": 0, "completion_tokens": 0}
        self.usage_all = {"prompt_tokens": 0, "completion_tokens": 0}  # every answer used, cached ones too
        self.served: dict[tuple, int] = {}  # (served model, system_fingerprint) -> answers
        self.stopped: str | None = None
        # requests this engine may send: model.server.max_requests is one budget for the whole run, shared by its
        # engines (one per response length) through the model's count of what was sent
        cap = lm.spec.server.max_requests
        self.cap = None if cap is None else max(0, cap - lm.requests_sent)

    # --- what a run would send ---------------------------------------------------------------------------------------
    def jobs(self, requests) -> list[tuple[int, int, dict, int]]:
        """(request index, prompt index, body, repeat) for every prompt of every request."""
        return [(i, k, self.lm.body(text, self.max_new_tokens, request.structured), request.repeat)
                for i, request in enumerate(requests) for k, text in enumerate(request.texts)]

    def plan(self, requests) -> dict:
        """What ``answer_sets`` would send, after cache hits, with an estimate of the tokens (``dry_run``)."""
        todo = [(body, repeat) for _, _, body, repeat in self.jobs(requests)
                if self.cache is None or self.cache.get(self.lm.client.base_url, body, repeat) is None]
        chars = sum(len(json.dumps({k: v for k, v in body.items() if k != "model"})) for body, _ in todo)
        return {"requests": len(self.jobs(requests)), "to_send": len(todo),
                "cached": len(self.jobs(requests)) - len(todo),
                "estimated_prompt_tokens": -(-chars // CHARS_PER_TOKEN),
                "max_completion_tokens": len(todo) * self.max_new_tokens}

    # --- the work ----------------------------------------------------------------------------------------------------
    def run(self, requests, in_order: bool = False) -> Iterator[tuple[int, TextAnswers]]:
        """The runner's protocol (``posixlab.backends.Engine``): ``answer_sets``, counting what was sent on the model
        (the run's one request budget)."""
        before = self.sent
        try:
            yield from self.answer_sets(requests, in_order=in_order)
        finally:
            self.lm.requests_sent += self.sent - before

    def answer_sets(self, requests, in_order: bool = False) -> Iterator[tuple[int, TextAnswers]]:
        """Yield ``(index, TextAnswers)`` for every request whose prompts are all answered."""
        jobs = self.jobs(requests)
        answers: list[list[ChatAnswer | None]] = [[None] * len(r.texts) for r in requests]
        missing = [len(r.texts) for r in requests]
        url = self.lm.client.base_url

        def done(i: int, k: int, answer: ChatAnswer) -> TextAnswers | None:
            answers[i][k] = answer
            self._count(answer)
            missing[i] -= 1
            return TextAnswers(answers[i]) if missing[i] == 0 else None

        to_send = []
        for i, k, body, repeat in jobs:
            hit = self.cache.get(url, body, repeat) if self.cache is not None else None
            if hit is None:
                to_send.append((i, k, body, repeat))
            elif (ready := done(i, k, hit)) is not None:
                yield i, ready
        cap = self.cap
        if cap is not None and len(to_send) > cap:
            self.stopped = (f"model.server.max_requests={self.lm.spec.server.max_requests} reached: {len(to_send) - cap} of {len(to_send)} "
                            f"requests not sent; rerun with a higher cap to go on (every answer so far is cached)")
            to_send = to_send[:cap]
        yield from self._send(to_send, done)

    def _send(self, to_send: list, done) -> Iterator[tuple[int, TextAnswers]]:
        url, client = self.lm.client.base_url, self.lm.client

        def keep(job: tuple, answer: ChatAnswer) -> TextAnswers | None:
            # every answer that comes back is cached and counted, also those landing after a failure
            i, k, body, repeat = job
            self.sent += 1
            if self.cache is not None:
                self.cache.put(url, body, repeat, answer)
            return done(i, k, answer)

        for job, answer in run_bounded(lambda job: client.complete(job[2]), to_send,
                                       self.lm.spec.server.max_concurrency, late=keep):
            if (ready := keep(job, answer)) is not None:
                yield job[0], ready

    def _count(self, answer: ChatAnswer) -> None:
        for key in self.usage_all:
            self.usage_all[key] += getattr(answer, key)
        if answer.cached:
            self.from_cache += 1
        else:
            for key in self.usage_sent:
                self.usage_sent[key] += getattr(answer, key)
            self.processed_tokens += answer.prompt_tokens + answer.completion_tokens
        served = (answer.served_model, answer.system_fingerprint)
        if served not in self.served and self.served:
            print(f"posixlab: warning: the endpoint's answers now come from {served[0]!r} with system_fingerprint "
                  f"{served[1]!r}, earlier from {', '.join(map(repr, self.served))}: the model or its backend changed "
                  f"within the run (the summary lists each with its count)", file=sys.stderr)
        self.served[served] = self.served.get(served, 0) + 1


def api_report(engines: list[ChatEngine], spec) -> dict:
    """What a chat run sent and what it cost: the summary's ``api`` block."""
    sent = sum(e.sent for e in engines)
    usage_sent = {k: sum(e.usage_sent[k] for e in engines) for k in ("prompt_tokens", "completion_tokens")}
    usage_all = {k: sum(e.usage_all[k] for e in engines) for k in ("prompt_tokens", "completion_tokens")}
    served: dict[tuple, int] = {}
    for e in engines:
        for key, n in e.served.items():
            served[key] = served.get(key, 0) + n
    s = spec.server
    priced = s.price_input_per_million is not None and s.price_output_per_million is not None

    def cost(usage: dict) -> float | None:
        return (usage["prompt_tokens"] * s.price_input_per_million + usage["completion_tokens"]
                * s.price_output_per_million) / 1e6 if priced else None

    return {"requests_sent": sent, "answers_from_cache": sum(e.from_cache for e in engines),
            "usage_sent": usage_sent, "usage_all_answers": usage_all,
            "prices_per_million": {"input": s.price_input_per_million, "output": s.price_output_per_million},
            "cost_sent": cost(usage_sent), "cost_all_answers": cost(usage_all),
            "served": [{"model": m, "system_fingerprint": f, "answers": n} for (m, f), n in served.items()],
            "served_changed": len(served) > 1,
            "temperature": s.temperature, "seed": s.seed, "max_concurrency": s.max_concurrency,
            "stopped": next((e.stopped for e in engines if e.stopped), None)}
