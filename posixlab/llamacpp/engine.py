"""Prompt sets scored by llama.cpp: the same ``SetScores`` as the in-process engine's, one sequence at a time.

llama.cpp runs one sequence here, so the work is ordered for its cache instead of batched: a wave's distinct
prompts run in sorted order, so that each begins with as much of the previous one as they share (a few-shot
prompt's exemplars, a template's preamble run once a wave). Every prompt's greedy response is decoded first, and the
prompt's keys and values copied out of llama.cpp (``SAVED_BYTES`` in all); then, prompt by prompt again, they are put
back and each response its sets need (its own included) is scored after it, each in one pass of the response's
length. A prompt whose copy did not fit runs again. Responses' log-probabilities come from those passes, the
diagonal's included (``model.py`` says why).
"""

from __future__ import annotations

from collections.abc import Iterator

from posixlab.llamacpp.model import scoring_start
from posixlab.scoring.engine import Ids, SetScorer, SetScores

WAVE_PROMPTS = 64  # distinct prompts a wave: one score-cache transaction, and the work lost to a kill at most
# host memory for prompts' caches copied out between a wave's decoding and its scoring (a 7B model without grouped
# keys: about 0.5 MB a token); a prompt past it runs again for its scores
SAVED_BYTES = 2 << 30


class LlamaCppEngine(SetScorer):
    def _plan_waves(self, sets, indices: list[int], in_order: bool = False) -> list[list[int]]:
        order = indices if in_order else sorted(indices, key=lambda i: (min(map(tuple, sets[i])), i))
        return self._waves_of_prompts(sets, order, WAVE_PROMPTS)

    def _run_wave(self, items: list[tuple[int, list[Ids], list[Ids]]]) -> Iterator[tuple[int, SetScores]]:
        unique: dict[Ids, int] = {}
        slots = [[unique.setdefault(p, len(unique)) for p in prompts] for _, prompts, _ in items]
        prompts = list(unique)
        order = sorted(range(len(prompts)), key=lambda u: prompts[u])  # neighbours share their beginnings
        before = self.lm.forward_tokens
        responses, saved, held = {}, {}, 0
        for u in order:
            responses[u] = self.lm.greedy(list(prompts[u]), self.max_new_tokens)
            self.lm.advance(list(prompts[u][:scoring_start(prompts[u])]))  # the response dropped from the cache
            if held < SAVED_BYTES:  # the cache copied out, to be put back when the prompt's scores run
                saved[u] = self.lm.save()
                held += len(saved[u][1])
        needs = self._responses_needed(slots, [extra for _, _, extra in items], {u: (r,) for u, r in responses.items()})
        generated, scores = {}, {}
        for u in order:
            if u in saved:
                self.lm.restore(saved.pop(u))
            generated[u] = (responses[u], self.lm.logprobs_after(list(prompts[u]), responses[u]))
            for response in needs[u]:
                scores[(u, response)] = sum(self.lm.logprobs_after(list(prompts[u]), list(response)))
        self.processed_tokens += self.lm.forward_tokens - before
        yield from self._finish_wave(items, slots, prompts, generated, needs, scores)
