"""The N×N log-probability matrix of one prompt set: ``matrix[i, j] = log P(y_j | x_i)``.

For each distinct prompt: one forward pass (prefill), greedy generation continued from its cache, and then every
distinct response of the set scored on that same cache, all responses in one right-padded batch. Identical
prompts (a spelling variant that coincides with another prompt) and identical responses (common for multiple-choice
answers) are computed once and copied. The numbers equal one full forward pass per (prompt, response) pair within
float32 rounding (``scoring/bruteforce.py`` is that reference; the tests hold the two within 1e-4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from posixlab.models.causal_lm import CausalLM


@dataclass
class SetScores:
    responses: list[list[int]]  # greedy response token ids, one per prompt
    generation_logprobs: list[list[float]]  # per-token log-probabilities recorded while generating
    matrix: np.ndarray  # matrix[i, j] = log P(y_j | x_i), float64 holding float32-computed sums
    stats: dict = field(default_factory=dict)

    @property
    def lengths(self) -> list[int]:
        return [len(r) for r in self.responses]


def score_prompt_set(lm: CausalLM, prompt_ids: list[list[int]], max_new_tokens: int) -> SetScores:
    n = len(prompt_ids)
    unique_prompts: dict[tuple[int, ...], int] = {}
    prompt_slot = [unique_prompts.setdefault(tuple(p), len(unique_prompts)) for p in prompt_ids]
    tokens_before = lm.forward_tokens

    prefixes, generated = [], []
    for ids in unique_prompts:
        prefix = lm.prefill(ids)
        prefixes.append(prefix)
        generated.append(lm.greedy(prefix, max_new_tokens))
    responses = [list(generated[prompt_slot[i]][0]) for i in range(n)]
    generation_logprobs = [list(generated[prompt_slot[i]][1]) for i in range(n)]

    unique_responses: dict[tuple[int, ...], int] = {}
    response_slot = [unique_responses.setdefault(tuple(r), len(unique_responses)) for r in responses]
    continuations = [list(r) for r in unique_responses]
    unique_matrix = np.array([lm.score(prefix, continuations) for prefix in prefixes], dtype=np.float64)
    matrix = unique_matrix[np.ix_(prompt_slot, response_slot)]

    naive = sum(len(p) for p in prompt_ids) * (n + 1) + sum(len(r) for r in responses) * (n + 1)
    stats = {"prompts": n, "unique_prompts": len(unique_prompts), "unique_responses": len(unique_responses),
             "forward_tokens": lm.forward_tokens - tokens_before,
             # one full forward per (prompt, response) pair plus one generation pass per prompt, as the authors' library
             "forward_tokens_naive": naive}
    return SetScores(responses, generation_logprobs, matrix, stats)
