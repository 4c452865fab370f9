"""Position bias of multiple-choice answers: whether a model's accuracy and its picks depend on where the options are
shown, read off format variants, which show the gold option equally often at every position (``posixlab.variants.
format``: each block of n consecutive variants puts it once at each). The paper is silent; the measures are those
of the selection-bias literature.

Input: one row per answered prompt, ``(n, gold, picked, correct)``: the prompt's number of options, the 0-based
position its gold option is shown at, the position of the option the model picked (None: the response named none)
and whether the answer was right (an unparsed answer is wrong).

- **Accuracy by gold position**: the share answered right among the prompts that show the gold at position p. With
  the gold balanced, a model without position bias has the same accuracy at every position; **RStd** is the
  population standard deviation of these accuracies over positions (Zheng et al., ICLR 2024, "Large Language Models
  Are Not Robust Multiple Choice Selectors": the standard deviation of the recalls of the option IDs).
- **Pick shares**: the share of the parsed picks at each position, beside the share expected of a model without a
  preference (each prompt of n options gives 1/n to each of its positions: uniform, whether the model is right or
  guesses, since the gold is balanced), and Pearson's χ² test of the picks against it (``scipy.stats.chisquare``;
  with items of different n, an approximation).

Two positions, four prompts: the gold is right at position 1 twice (once picked), at 2 twice (both picked):

>>> rows = [(2, 0, 0, True), (2, 0, 1, False), (2, 1, 1, True), (2, 1, 1, True)]
>>> bias = position_bias(rows)
>>> [(p["position"], p["prompts"], p["accuracy"]) for p in bias["by_gold_position"]], bias["rstd"]
([(1, 2, 0.5), (2, 2, 1.0)], 0.25)
>>> [(p["position"], p["share"], p["expected"]) for p in bias["picks"]], bias["picked"]   # 1 of 4 picks at 1
([(1, 0.25, 0.5), (2, 0.75, 0.5)], 4)
>>> round(bias["chi2"], 3), round(bias["p_value"], 3)      # (1-2)²/2 + (3-2)²/2 = 1, one degree of freedom
(1.0, 0.317)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from posixlab.prompts import OPTION_LETTERS

Row = tuple[int, int, "int | None", bool]  # (options shown, gold position, picked position or None, right)


def position_bias(rows: Iterable[Sequence]) -> dict | None:
    """Accuracy by gold position, RStd, pick shares and the χ² test of the picks (the module's docstring); None
    without rows."""
    rows = [(int(n), int(gold), None if picked is None else int(picked), bool(right))
            for n, gold, picked, right in rows]
    if not rows:
        return None
    width = max(n for n, *_ in rows)
    by_gold = []
    for p in range(width):
        at = [right for _, gold, _, right in rows if gold == p]
        by_gold.append({"position": p + 1, "prompts": len(at), "accuracy": sum(at) / len(at) if at else None})
    accuracies = [g["accuracy"] for g in by_gold if g["accuracy"] is not None]
    mean = sum(accuracies) / len(accuracies)
    rstd = math.sqrt(sum((a - mean) ** 2 for a in accuracies) / len(accuracies))
    parsed = [(n, picked) for n, _, picked, _ in rows if picked is not None]
    observed = [sum(picked == p for _, picked in parsed) for p in range(width)]
    expected = [sum(1 / n for n, _ in parsed if p < n) for p in range(width)]
    chi2, p_value = _chisquare(observed, expected)
    total = len(parsed)
    return {"prompts": len(rows), "by_gold_position": by_gold, "rstd": rstd, "picked": total,
            "picks": [{"position": p + 1, "share": observed[p] / total if total else None,
                       "expected": expected[p] / total if total else None} for p in range(width)],
            "chi2": chi2, "p_value": p_value}


def position_row(order: Sequence[int], gold: int, pred: str | None, right) -> tuple[int, int, int | None, bool]:
    """One prompt's row: ``order`` the item options it shows at positions 0, 1, ... (a format variant's
    ``option_order``), ``gold`` the position it shows the gold at, ``pred`` the item letter picked (None: none).

    >>> position_row([2, 0, 1], 2, "C", False)    # item option C is shown first
    (3, 2, 0, False)
    """
    return len(order), gold, None if pred is None else list(order).index(OPTION_LETTERS.index(pred)), bool(right)


def _chisquare(observed: list[int], expected: list[float]) -> tuple[float | None, float | None]:
    keep = [(o, e) for o, e in zip(observed, expected) if e > 0]
    if len(keep) < 2:  # one position (or no pick): nothing to compare
        return None, None
    from scipy.stats import chisquare

    result = chisquare([o for o, _ in keep], [e for _, e in keep])
    return float(result.statistic), float(result.pvalue)
