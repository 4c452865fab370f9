"""Racing the prompts: find the best prompt of a shared pool without asking every prompt on every item.

A run asks the sets in rounds of ``round_sets``. After each round it looks at every set answered so far and drops
each prompt that a prompt still racing beats beyond noise (``best_prompt_set``'s exact one-sided McNemar test on the
items both answered); later rounds ask only the prompts still racing. The prompts left at the end are a
``confidence`` set for the best prompt, like ``best_prompt_set``'s on a full grid, and a clear loser costs a round
or two instead of every item.

Why it holds: the best prompt is dropped only when some rival wins a pairwise test it should not win. There are at
most K − 1 rivals and ``looks`` (the rounds planned) looks, and each test is run at (1 − confidence) / ((K − 1) ·
looks), so by the union bound the best prompt survives every look with probability at least ``confidence`` however
the eliminations steered the later rounds (Bonferroni over the looks is the simplest alpha spending: it needs no
independence between looks, and a prompt dropped at one look never returns, because it is asked no more items).
Only prompts still racing may drop one, so the set is never empty: they have answered the same items, and the one
with the highest accuracy among them loses no test.

The price of asking fewer cells is power at each look (the tests run at 1/looks of the level); rounds of a few
dozen sets keep the looks few. Per-prompt accuracies over the sets that asked each prompt are biased for a prompt
dropped early (it stopped on a bad run); the Rasch estimate over every set (``estimated_accuracy_spread``) stays
valid, since which cells were asked depends on answers already seen only (missing at random).

>>> first = [[1, 0, 1], [1, 0, 1], [1, 0, 0], [1, 0, 0]] * 2      # 8 sets: prompt 0 always right, 1 never, 2 half
>>> second = [[1, None, 0]] * 8                                    # prompt 1 no longer asked; 2 wrong
>>> r = race_prompts(first + second, round_sets=8, num_sets=16)
>>> r["looks"], r["alive"]
(2, [0])
>>> [(e["prompt"], e["look"], e["beaten_by"], round(e["adjusted_p"], 4)) for e in r["eliminated"]]
[(1, 1, 0, 0.0156), (2, 2, 0, 0.001)]

Prompt 1 at the first look: 8 sets where 0 is right and 1 wrong, none the other way, p = 2⁻⁸; times 2 rivals and 2
looks: 0.0156 < 0.05. Prompt 2: 4 discordant sets at the first look (p = 2⁻⁴ · 4 = 0.25, stays), 12 at the second
(p = 2⁻¹² · 4 = 0.001, dropped). Before a round is complete nothing is decided (every prompt races, best first):

>>> race_prompts(first[:7], round_sets=8, num_sets=16)["alive"]
[0, 2, 1]
"""

from __future__ import annotations

import math

import numpy as np

from posixlab.errors import PromptSetError
from posixlab.metrics.selection import BEST_SET_CONFIDENCE, best_prompt_set


def race_prompts(correct, round_sets: int, num_sets: int | None = None,
                 confidence: float = BEST_SET_CONFIDENCE) -> dict:
    """Replay a race over ``correct`` (rows: the sets in the order they were asked; ``correct[i][j]`` 1/0, None
    where set i did not ask prompt j): the looks after each complete round of ``round_sets`` sets (and after the
    last set of ``num_sets``, the sets planned: default ``len(correct)``). Its looks (``race_look``) are the ones a
    run takes to decide what it asks next, so what a run asked and what its summary reports agree.

    Returns ``alive`` (the prompts still racing, highest accuracy first over the sets they all answered, ties to
    the lower index), ``eliminated`` (each dropped prompt: the ``look`` and number of ``sets`` when it was dropped,
    the rival that ``beaten_by`` it and the ``adjusted_p``: McNemar's p times (K − 1) · looks), ``looks`` (planned),
    ``round_sets``, ``confidence`` and ``asked`` (cells answered, of sets × prompts)."""
    if isinstance(round_sets, bool) or not isinstance(round_sets, int) or round_sets < 1:
        raise PromptSetError(f"a race looks after rounds of at least 1 set, not {round_sets!r}")
    if not 0 < confidence < 1:
        raise PromptSetError(f"confidence is a probability between 0 and 1, not {confidence}")
    grid = np.array([[np.nan if v is None else float(v) for v in row] for row in correct], dtype=np.float64)
    if grid.size == 0:
        grid = grid.reshape(len(grid), 0)  # no set answered yet: nothing to decide
    planned = len(grid) if num_sets is None else num_sets
    if grid.ndim != 2 or len(grid) > planned:
        raise PromptSetError(f"a race replays at most the {planned} sets planned, as rows of one width; got shape "
                             f"{grid.shape}")
    width = grid.shape[1] if grid.size else 0
    looks = max(1, math.ceil(planned / round_sets))
    alive, eliminated = list(range(width)), []
    for look in range(1, looks + 1):
        seen = min(look * round_sets, planned)
        if seen > len(grid) or len(alive) < 2:
            break
        alive, dropped = race_look(grid[:seen], alive, look, looks, confidence)
        eliminated += dropped
    if len(alive) > 1:  # the order of the final set: accuracy over the sets every prompt still racing answered
        block = grid[:, alive]
        means = np.nansum(block, axis=0) / np.maximum(1, np.sum(~np.isnan(block), axis=0))
        alive = [alive[i] for i in sorted(range(len(alive)), key=lambda i: (-means[i], alive[i]))]
    return {"alive": alive, "eliminated": eliminated, "looks": looks, "round_sets": round_sets,
            "confidence": confidence, "asked": {"cells": int(np.sum(~np.isnan(grid))), "of": int(grid.size)}}


def race_look(seen: np.ndarray, alive: list[int], look: int, looks: int,
              confidence: float = BEST_SET_CONFIDENCE) -> tuple[list[int], list[dict]]:
    """One look of a race: the prompts still racing after it (best first) and those it drops, from ``seen`` (the
    sets answered so far, NaN where not asked: a float grid of the whole pool's width) and ``alive`` (the prompts
    racing before it). ``race_prompts`` replays every look with it; a run (``tasks/race.py``) and ``race_on_grid``
    take one look a round, so a long race costs one test per look, not a replay of every look before it."""
    width = seen.shape[1]
    if len(alive) < 2:
        return list(alive), []
    # rivals are the prompts still racing: best_prompt_set adjusts by their number (A − 1); the race's level is
    # spread over every rival (K − 1) and look, so the threshold on its adjusted p is (1 − c)(A − 1)/((K − 1) L)
    level = (1 - confidence) * (len(alive) - 1) / ((width - 1) * looks)
    kept = best_prompt_set(seen[:, alive], confidence=1 - level)
    dropped = []
    for i in sorted(set(range(len(alive))) - set(kept["prompts"]), key=lambda i: alive[i]):
        p = kept["adjusted_p"][i] / (len(alive) - 1)  # below the threshold, so never capped at 1: McNemar's p
        dropped.append({"prompt": alive[i], "look": look, "sets": len(seen), "beaten_by": alive[kept["beaten_by"][i]],
                        "adjusted_p": min(1.0, p * (width - 1) * looks)})
    return [alive[i] for i in kept["prompts"]], dropped


def race_on_grid(full, round_sets: int, confidence: float = BEST_SET_CONFIDENCE) -> tuple[dict, list[list]]:
    """What a race would have asked of a grid answered in full (a run that asked every prompt: a greedy answer is the
    same whatever else a set asked), and what it would have found: ``race_prompts``'s result and the rows it saw
    (None where a dropped prompt was not asked). ``experiments/race_check.py`` runs it on finished runs.

    >>> full = [[1, 0, 1]] * 8 + [[1, 0, 0]] * 8
    >>> result, rows = race_on_grid(full, round_sets=8)
    >>> result["alive"], result["asked"], rows[8]
    ([0], {'cells': 40, 'of': 48}, [1, None, 0])
    """
    asked = np.array([[np.nan if v is None else float(v) for v in row] for row in full], dtype=np.float64)
    looks = max(1, math.ceil(len(full) / round_sets))
    alive = list(range(asked.shape[1] if asked.ndim == 2 else 0))
    for look in range(1, looks):  # after each round but the last: what the next round asks
        seen = look * round_sets
        alive, _ = race_look(asked[:seen], alive, look, looks, confidence)
        asked[seen:, [j for j in range(asked.shape[1]) if j not in alive]] = np.nan
    rows = [[None if np.isnan(v) else int(v) for v in row] for row in asked]
    return race_prompts(rows, round_sets, len(full), confidence), rows
