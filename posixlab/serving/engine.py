"""The scoring engine's work done by a vLLM server: the same ``SetScores``, from HTTP requests.

A wave of sets runs in two steps, each a pool of concurrent requests (at most ``max_concurrency`` in flight):

1. one greedy generation per distinct prompt of the wave (identical prompts are sent once); its token
   log-probabilities are the diagonal ``M[j, j]``;
2. one score per distinct (prompt, other response) pair the wave needs, ``request_batch`` sequences per request
   (pairs shared by two sets of the wave are sent once).

The wave is then written to the score cache in one transaction and its sets assembled, by the same ``SetScorer``
code as the in-process engine's waves. The server decides its own batching; the numbers do not depend on it
beyond float rounding (the tests hold them within 1e-4 of the in-process engine).

vLLM does not use its prefix cache for requests that ask for prompt log-probabilities (vLLM PR #17251), so every
scoring request runs its whole prompt again: on one machine the in-process engine, which runs each shared prefix once
and reads every response of a prompt in one pass, does far less work. The server earns its place when the model
needs GPUs this process does not have, or many of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from posixlab.openai_client import map_bounded
from posixlab.scoring.engine import Ids, SetScorer, SetScores
from posixlab.serving.model import ServedModel

WAVE_PROMPTS = 256  # distinct prompts per wave: the unit of concurrency and of one cache transaction


class ServerEngine(SetScorer):
    def __init__(self, lm: ServedModel, max_new_tokens: int, cache=None, schemas: dict | None = None):
        super().__init__(lm, max_new_tokens, cache)
        # strategy=structured: prompt ids -> ClassifierSchema; its generation is held to the schema by vLLM
        self.schemas = {ids: s.decoding_schema() for ids, s in (schemas or {}).items()}
        self.client = lm.client
        self.model = lm.served_name
        self.stop_ids = sorted(lm.eos_ids)
        self.concurrency = lm.spec.server.max_concurrency
        self.request_batch = lm.spec.server.request_batch

    def _plan_waves(self, sets, indices: list[int], in_order: bool = False) -> list[list[int]]:
        order = indices if in_order else sorted(indices, key=lambda i: (max(len(p) for p in sets[i]), i))
        return self._waves_of_prompts(sets, order, WAVE_PROMPTS)

    def _run_wave(self, items: list[tuple[int, list[Ids], list[Ids]]]) -> Iterator[tuple[int, SetScores]]:
        unique: dict[Ids, int] = {}
        slots = [[unique.setdefault(p, len(unique)) for p in prompts] for _, prompts, _ in items]
        prompts = list(unique)

        outputs = self._parallel(lambda p: self.client.generate(self.model, list(p), self.max_new_tokens,
                                                                 self.stop_ids, self.schemas.get(p)), prompts)
        generated = dict(enumerate(outputs))
        needs = self._responses_needed(slots, [extra for _, _, extra in items], generated)
        pairs = [(u, r) for u, need in needs.items() for r in need]
        chunks = [pairs[k:k + self.request_batch] for k in range(0, len(pairs), self.request_batch)]
        values = self._parallel(lambda chunk: self.client.score(self.model, [(prompts[u], r) for u, r in chunk]),
                                chunks)
        scores = {pair: value for chunk, chunk_values in zip(chunks, values) for pair, value in zip(chunk, chunk_values)}
        work = sum(len(p) + len(g[0]) - 1 for p, g in zip(prompts, outputs)) + sum(len(prompts[u]) + len(r)
                                                                                  for u, r in pairs)
        self.processed_tokens += work
        self.lm.forward_tokens += work

        yield from self._finish_wave(items, slots, prompts, generated, needs, scores)

    def _parallel(self, request: Callable, jobs: list) -> list:
        """``[request(job) for job in jobs]`` with at most ``concurrency`` requests in flight. The first failure
        (a dead server, an error answer) stops every request not yet sent and is raised: one message, at once."""
        return map_bounded(request, jobs, self.concurrency)
