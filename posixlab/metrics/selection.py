"""Choosing a prompt without flattering it: pick on one half of the items, report on the other half.

When every item is asked through the same prompts (the paper's 20 templates, format variants), prompt j is one
template, and a user wants the best one. Picking the prompt with the best score on all items and reporting that
score overstates it (the winner's curse: with 21 prompts and 100 items, the best of 21 noisy means is biased up).
``choose_prompt`` splits the items in two halves by a seeded shuffle, chooses the best and the worst prompt by
their mean on the *selection* half, and reports their means on the *held-out* half, beside the held-out mean of
every prompt and the held-out half's own best and worst (what an oracle would have picked).

Input: ``values[i][j]``, item i under prompt j (1/0 correctness, or a per-prompt ψ share), NaN/None where missing.

>>> values = [[1, 0, 1], [1, 0, 0], [1, 1, 0], [0, 0, 1]]
>>> c = choose_prompt(values, higher_is_better=True, seed=0)
>>> c["selection_items"], c["held_out_items"]
([0, 2], [1, 3])
>>> c["best"], c["worst"]     # items 0, 2: means 1, .5, .5 (ties: the first); items 1, 3: means .5, 0, .5
({'prompt': 0, 'selection': 1.0, 'held_out': 0.5}, {'prompt': 1, 'selection': 0.5, 'held_out': 0.0})
>>> c["held_out_oracle_best"], round(c["held_out_mean"], 4)
({'prompt': 0, 'held_out': 0.5}, 0.3333)
>>> c["selection_tied"], choose_prompt([[1, 1], [0, 1]], seed=0)["selection_tied"]   # every prompt the same there
(False, True)
"""

from __future__ import annotations

import numpy as np

from posixlab.errors import PromptSetError


def choose_prompt(values, higher_is_better: bool = True, seed: int = 0) -> dict:
    """Best and worst prompt chosen on a seeded half of the items, with their scores on the other half.

    Ties go to the lowest prompt index. The halves: a seeded permutation of the items, the first ⌈I/2⌉ select,
    the rest are held out (the sorted item indices of both are returned). Needs at least 2 items and 2 prompts.
    """
    matrix = np.array([[np.nan if v is None else float(v) for v in row] for row in values], dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] < 2 or matrix.shape[1] < 2:
        raise PromptSetError(f"choosing a prompt needs at least 2 items and 2 prompts, got shape {matrix.shape}")
    order = np.random.Generator(np.random.PCG64(seed)).permutation(matrix.shape[0])
    half = (matrix.shape[0] + 1) // 2
    selection, held_out = sorted(order[:half].tolist()), sorted(order[half:].tolist())
    on_selection = _means(matrix[selection])
    on_held_out = _means(matrix[held_out])
    sign = 1.0 if higher_is_better else -1.0
    best = _pick(sign * on_selection)
    worst = _pick(-sign * on_selection)
    oracle_best, oracle_worst = _pick(sign * on_held_out), _pick(-sign * on_held_out)
    return {
        "higher_is_better": higher_is_better,
        "selection_items": selection, "held_out_items": held_out,
        "best": {"prompt": best, "selection": _f(on_selection[best]), "held_out": _f(on_held_out[best])},
        "worst": {"prompt": worst, "selection": _f(on_selection[worst]), "held_out": _f(on_held_out[worst])},
        "held_out_oracle_best": {"prompt": oracle_best, "held_out": _f(on_held_out[oracle_best])},
        "held_out_oracle_worst": {"prompt": oracle_worst, "held_out": _f(on_held_out[oracle_worst])},
        "held_out_mean": _f(np.nanmean(on_held_out)),
        # every prompt scored the same on the selection half (few sets, a constant model): "best" and "worst" are the
        # first prompt by the tie rule, not a choice
        "selection_tied": bool(np.nanmax(on_selection) == np.nanmin(on_selection)),
        "held_out_per_prompt": [_f(v) for v in on_held_out],
    }


def _means(block: np.ndarray) -> np.ndarray:
    counts = np.sum(~np.isnan(block), axis=0)
    sums = np.nansum(block, axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _pick(scores: np.ndarray) -> int:
    if np.all(np.isnan(scores)):
        raise PromptSetError("no prompt has a value on this half of the items")
    return int(np.nanargmax(scores))  # the first on a tie


def _f(value) -> float | None:
    return None if value is None or np.isnan(value) else float(value)
