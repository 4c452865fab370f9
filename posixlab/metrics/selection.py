"""Choosing a prompt without flattering it: pick on one half of the items, report on the other half; and say which
prompts the items cannot tell apart from the best (``best_prompt_set``).

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

import warnings

import numpy as np
from scipy.stats import binom, wilcoxon

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


BEST_SET_CONFIDENCE = 0.95


def best_prompt_set(correct, confidence: float = BEST_SET_CONFIDENCE) -> dict:
    """The prompts the items cannot tell apart from the best: a ``confidence`` set for the prompt with the highest
    accuracy over the population the items were drawn from.

    ``correct[i][j]``: 1/0, item i under prompt j (None/NaN where not scored). Each ordered pair (k, j) is compared
    on the items both scored, by an exact one-sided McNemar test: of the ``d`` items where exactly one of the two is
    right, ``b`` are k's, and p = P(X ≥ b), X ~ Binomial(d, 1/2) (1 when d = 0). Prompt j leaves the set when some
    prompt k is better at ``(K − 1) · p < 1 − confidence`` (Bonferroni over j's K − 1 rivals, which for "is any
    rejected" is also Holm's). The best prompt leaves only when a prompt no better than it wins its test, so it is in
    the set with probability at least ``confidence`` (items drawn independently; prompts are fixed, not sampled).

    Returns ``prompts`` (the set, highest accuracy first, ties to the lower index), ``best`` (the highest observed
    accuracy), ``adjusted_p`` per prompt (the Bonferroni-adjusted p-value that it is not the best; 1.0 for ``best``)
    with ``beaten_by`` (the rival of that p-value, None where no rival is ahead), and ``confidence``.

    >>> ten = [[1, 0, 1]] * 2 + [[1, 0, 0]] * 6 + [[1, 1, 1]] * 2   # prompt 0: 10/10, prompt 1: 2/10, prompt 2: 4/10
    >>> s = best_prompt_set(ten)   # 0 against 1: 8 discordant items, all 0's: p = 2⁻⁸, adjusted 2 · 2⁻⁸ < 0.05
    >>> s["prompts"], s["best"], s["beaten_by"], [round(p, 4) for p in s["adjusted_p"]]  # 0 vs 2: 2 · 2⁻⁶
    ([0], 0, [None, 0, 0], [1.0, 0.0078, 0.0312])
    >>> best_prompt_set(ten, confidence=0.99)["prompts"]     # 0.03125 is not below 0.01: prompt 2 stays
    [0, 2]
    """
    matrix = _prompt_grid(correct, confidence, "a best-prompt set")
    scored = ~np.isnan(matrix)
    if not np.isin(matrix[scored], (0.0, 1.0)).all():
        raise PromptSetError("a best-prompt set compares right and wrong answers: every scored cell must be 1 or 0")
    right = (scored & (matrix == 1)).astype(np.float64)
    wrong = (scored & (matrix == 0)).astype(np.float64)
    ahead = right.T @ wrong  # ahead[k, j]: items both scored where k is right and j is wrong (exact small integers)
    discordant = ahead + ahead.T
    # P(X >= b) for X ~ Binomial(d, 1/2): binom.sf(b - 1, d, 1/2); no discordant item, no evidence (p = 1)
    p = np.where(discordant > 0, binom.sf(ahead - 1, discordant, 0.5), 1.0)
    np.fill_diagonal(p, 1.0)
    rival, adjusted, order = _bonferroni(p, -_means(matrix))
    return {
        "prompts": [j for j in order if adjusted[j] >= 1.0 - confidence],
        "best": order[0],
        "adjusted_p": [float(a) for a in adjusted],
        "beaten_by": [int(k) if ahead[k, j] > ahead[j, k] else None for j, k in enumerate(rival)],
        "confidence": confidence,
        "test": "exact one-sided McNemar per pair of prompts on the items both scored, Bonferroni over K - 1 rivals",
    }


def lowest_prompt_set(values, confidence: float = BEST_SET_CONFIDENCE) -> dict:
    """The prompts the items cannot tell apart from the one with the lowest mean value (ψ per prompt: the least
    sensitive prompt): ``best_prompt_set`` for continuous values, lower is better.

    ``values[i][j]``: item i under prompt j (None/NaN where missing). Each ordered pair (k, j) is compared on the
    items both have by the one-sided Wilcoxon signed-rank test that k's values are lower than j's (zero differences
    dropped; exact for small samples without ties, scipy's normal approximation otherwise; p = 1 without a nonzero
    difference); j leaves the set when some k is lower at ``(K − 1) · p < 1 − confidence``.

    >>> five = [[0.1, 0.5, 0.2], [0.2, 0.9, 0.1], [0.3, 0.4, 0.6], [0.1, 0.8, 0.3], [0.2, 0.3, 0.4]]
    >>> s = lowest_prompt_set(five)   # 0 lower than 1 on all five items: exact p = 2⁻⁵, adjusted 2 · 2⁻⁵ = 0.0625
    >>> s["prompts"], s["lowest"], [round(p, 4) for p in s["adjusted_p"]]   # 2: 0 lower on 4 of 5 (next line)
    ([0, 2, 1], 0, [1.0, 0.0625, 0.1875])

    Prompt 2 against 0: differences −0.1, +0.1, −0.3, −0.2, −0.2, signed ranks 1.5 (twice), 5, 3.5 (twice); the one
    positive rank sums to 1.5, and 3 of the 2⁵ sign patterns sum to 1.5 or less (none, either 1.5): p = 3/32,
    adjusted 2 · 3/32 = 0.1875.
    >>> lowest_prompt_set(five, confidence=0.9)["prompts"]   # 0.0625 < 0.1
    [0, 2]
    """
    matrix = _prompt_grid(values, confidence, "a lowest-prompt set")
    width = matrix.shape[1]
    p = np.ones((width, width))  # p[k, j]: that prompt k's values are lower than prompt j's
    for k in range(width):
        for j in range(width):
            both = ~np.isnan(matrix[:, k]) & ~np.isnan(matrix[:, j])
            diff = matrix[both, k] - matrix[both, j]
            if k != j and np.count_nonzero(diff):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # scipy's note on small samples: the p-value is still its own
                    p[k, j] = wilcoxon(diff, zero_method="wilcox", alternative="less").pvalue
    _, adjusted, order = _bonferroni(p, _means(matrix))
    return {
        "prompts": [j for j in order if adjusted[j] >= 1.0 - confidence],
        "lowest": order[0],
        "adjusted_p": [float(a) for a in adjusted],
        "confidence": confidence,
        "test": "one-sided Wilcoxon signed-rank per pair of prompts on the items both have, Bonferroni over K - 1 "
                "rivals",
    }


def _prompt_grid(values, confidence: float, what: str) -> np.ndarray:
    """``values`` as an items × prompts float matrix (NaN where missing), checked: at least 2 prompts, a confidence
    between 0 and 1."""
    matrix = np.array([[np.nan if v is None else float(v) for v in row] for row in values], dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise PromptSetError(f"{what} needs a grid of items × at least 2 prompts, got shape {matrix.shape}")
    if not 0 < confidence < 1:
        raise PromptSetError(f"confidence is a probability between 0 and 1, not {confidence}")
    return matrix


def _bonferroni(p: np.ndarray, rank_by: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """From ``p[k, j]`` (that rival k beats prompt j): each prompt's rival of smallest p (ties: the lowest k), its
    p-value times the K − 1 rivals (capped at 1), and the prompts in order of ``rank_by`` (lowest first; NaN last;
    ties: the lower index)."""
    width = p.shape[1]
    rival = np.argmin(p, axis=0)
    adjusted = np.minimum(1.0, (width - 1) * p[rival, np.arange(width)])
    order = sorted(range(width), key=lambda j: (np.nan_to_num(rank_by[j], nan=np.inf), j))
    return rival, adjusted, order


def best_set_words(best: dict | None, named: bool = False) -> str:
    """A best-prompt set (``best_prompt_set``) in words: "3 of 12", or with ``named`` "prompts 11,
    1, 8 (3 of 12)"; "n/a" for none.

    >>> best_set_words({"prompts": [2, 0], "adjusted_p": [0.5, 0.01, 1.0]}, named=True)
    'prompts 2, 0 (2 of 3)'
    >>> best_set_words({"prompts": [1, 0, 2], "adjusted_p": [1.0, 1.0, 1.0]}, named=True)
    'every prompt (3 of 3)'
    """
    if not best:
        return "n/a"
    count = f"{len(best['prompts'])} of {len(best['adjusted_p'])}"
    if not named:
        return count
    if len(best["prompts"]) == len(best["adjusted_p"]) > 1:  # a list of every prompt, in no useful order, says less
        return f"every prompt ({count})"
    return f"prompt{'s' if len(best['prompts']) > 1 else ''} {', '.join(map(str, best['prompts']))} ({count})"
