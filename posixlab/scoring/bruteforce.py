"""The reference the engine is checked against: one full forward pass per (prompt, response) pair, no cache."""

from __future__ import annotations

import numpy as np

from posixlab.models.causal_lm import CausalLM


def bruteforce_matrix(lm: CausalLM, prompt_ids: list[list[int]], responses: list[list[int]]) -> np.ndarray:
    return np.array([[lm.score_full(p, r) for r in responses] for p in prompt_ids], dtype=np.float64)
