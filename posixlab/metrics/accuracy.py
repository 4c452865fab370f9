"""Accuracy over many prompts: what multi-prompt evaluation tools report beside the POSIX index.

Input: a correctness matrix ``correct`` of shape (items, prompts), ``correct[i, j]`` = 1 when item i was answered
right under prompt j, 0 when wrong (bools, ints or floats 0.0/1.0), and NaN or None when the cell is not scored.

- **Prompt j** is the j-th prompt of each item's prompt set. Where every item shares one set of templates, column j
  is template j; where each item has its own variants (spelling variants, paraphrases of its own text), column j
  holds each item's j-th variant, and index 0 is the original prompt. Per-prompt statistics (accuracy per prompt,
  MaxP, the spread) then compare "the j-th variant" across items.
- **An item with no gold answer** is a row of NaN/None: it is dropped before anything is computed. A matrix whose
  rows are all dropped raises ``PromptSetError`` (a ``ValueError``), as does a prompt column with no scored cell.
- **A single missing cell** (NaN in a row that has other values) means "this prediction does not count"; it is
  left out of that prompt's accuracy and of that item's pairs. An *unparsed* answer is a wrong answer: encode it
  as 0, not NaN, or a model is rewarded for answering nothing.
- Values other than 0, 1 and NaN (scores, probabilities, percentages) are refused: pass correctness.

Three items, three prompts; item 2 has no gold answer and is dropped:

>>> correct = [[1, 1, 0],
...            [1, 0, 0],
...            [None, None, None],
...            [1, 1, 1]]
>>> accuracy_per_prompt(correct).tolist()          # column means over items 0, 1, 3: 3/3, 2/3, 1/3
[1.0, 0.6666666666666666, 0.3333333333333333]
>>> worst_case_accuracy(correct), best_case_accuracy(correct)   # only item 3 is right everywhere; all at least once
(0.3333333333333333, 1.0)
>>> max_performance(correct), round(average_performance(correct), 4)
(1.0, 0.6667)
>>> round(combined_performance_score(correct), 4)    # 1 · (1 − (1 − 2/3))
0.6667
>>> round(prompt_sensitivity_score(correct), 4)      # per item k(n−k)/C(n,2): 2/3, 2/3, 0 → mean 4/9
0.4444
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from scipy import stats as _stats

from posixlab.errors import PromptSetError

BOOTSTRAP_RESAMPLES = 10_000  # as posixlab.metrics.stats.bootstrap_ci
_CELLS_PER_BATCH = 2_000_000  # bounds the memory of one bootstrap batch (resamples × (items + prompts) draw counts)
_TOLERANCE = 1e-12  # rounding slack when comparing a subset mean with the all-prompt mean


def _correctness(correct) -> np.ndarray:
    """The validated float matrix (items × prompts, NaN = not scored), rows without any scored cell dropped."""
    if isinstance(correct, str):
        raise PromptSetError("correct must be an items × prompts matrix of 1/0/NaN, got a string")
    try:
        matrix = np.array(correct, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PromptSetError(f"correct must be an items × prompts matrix of 1/0 (NaN/None = not scored), with the "
                             f"same number of prompts for every item (prompt j is the j-th prompt of each set; pad "
                             f"a shorter set with None): {exc}") from None
    if matrix.ndim != 2:
        raise PromptSetError(f"correct must be 2-D, items × prompts, got shape {matrix.shape}; for a single prompt "
                             f"give one column, shape (items, 1)")
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise PromptSetError(f"correct needs at least one item and one prompt, got shape {matrix.shape}")
    bad = ~np.isnan(matrix) & (matrix != 0) & (matrix != 1)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise PromptSetError(f"correct[{i}, {j}] = {matrix[i, j]!r} is not 1, 0 or NaN/None; pass correctness "
                             f"(1 right, 0 wrong, NaN not scored), not scores or probabilities")
    scored = ~np.isnan(matrix)
    matrix = matrix[scored.any(axis=1)]  # items without a gold answer
    if matrix.shape[0] == 0:
        raise PromptSetError("no item has a scored answer: rows that are all NaN/None (no gold answer) are dropped, "
                             "and every row was; check that gold answers were loaded")
    empty = np.flatnonzero(np.isnan(matrix).all(axis=0))
    if empty.size:
        raise PromptSetError(f"prompt {int(empty[0])} has no scored item (its column is all NaN/None); drop that "
                             f"column or score it")
    return matrix


def _column_means(matrix: np.ndarray) -> np.ndarray:
    scored = ~np.isnan(matrix)
    return np.where(scored, matrix, 0.0).sum(axis=0) / scored.sum(axis=0)


def accuracy_per_prompt(correct) -> np.ndarray:
    """Accuracy of each prompt column: the share of its scored items answered right (NaN cells left out, rows
    without gold dropped).

    >>> accuracy_per_prompt([[1, 0], [1, 1], [0, None]]).tolist()   # column 1: one of two scored cells
    [0.6666666666666666, 0.5]
    """
    return _column_means(_correctness(correct))


def accuracy_spread(correct) -> dict:
    """How far the per-prompt accuracies spread.

    Keys: ``num_prompts``; ``mean`` (= AvgP), ``min``, ``max`` (= MaxP), ``range`` (max − min, 0 for one prompt);
    ``sd`` (sample standard deviation, ddof=1; None for one prompt); ``q05``, ``q50``, ``q95`` (quantiles of the
    per-prompt accuracies, numpy's default linear interpolation); ``argmin``, ``argmax`` (index of the worst and
    best prompt; the first one on a tie).

    >>> s = accuracy_spread([[1, 1, 0, 1], [1, 0, 0, 1]])           # accuracies 1, 0.5, 0, 1
    >>> s["range"], s["mean"], s["argmin"], s["argmax"], round(s["sd"], 4)
    (1.0, 0.625, 2, 0, 0.4787)
    >>> round(s["q05"], 6), s["q50"], s["q95"]     # sorted 0, .5, 1, 1: position .05·3 = .15 → .075
    (0.075, 0.75, 1.0)
    >>> accuracy_spread([[1], [0]])["sd"] is None
    True
    """
    return _spread(accuracy_per_prompt(correct))


def _spread(acc: np.ndarray) -> dict:
    q05, q50, q95 = (float(q) for q in np.quantile(acc, [0.05, 0.5, 0.95]))
    return {"num_prompts": int(acc.size),
            "mean": float(acc.mean()),
            "min": float(acc.min()),
            "max": float(acc.max()),
            "range": float(acc.max() - acc.min()),
            "sd": float(acc.std(ddof=1)) if acc.size > 1 else None,
            "q05": q05, "q50": q50, "q95": q95,
            "argmin": int(np.argmin(acc)),
            "argmax": int(np.argmax(acc))}


RASCH_L2 = 0.01  # PromptEval's fit: logistic regression with C = 100, i.e. a penalty of ||w||² / (2C)


def estimated_accuracy_per_prompt(correct, l2: float = RASCH_L2) -> np.ndarray:
    """Each prompt's accuracy over *every* item, where not every (item, prompt) cell was scored: PromptEval's
    estimate (Maia Polo et al., NeurIPS 2024, "Efficient multi-prompt evaluation of LLMs", its Rasch model).

    Where prompts were scored on different items (DOVE's sampled grids, a budgeted run), a prompt's observed accuracy
    is also a measure of the items it happened to get: a prompt shown the hard questions looks worse than it is. The
    Rasch model ``P(right | item i, prompt j) = σ(β_i + θ_j)`` borrows strength across both: an easiness per item and
    a strength per prompt, fitted to the scored cells by maximum likelihood with an L2 penalty
    ``l2/2 · (Σθ² + Σβ²)`` (PromptEval's logistic regression with C = 1/l2 = 100, no intercept), solved exactly by
    L-BFGS on the convex objective. Prompt j's estimate is the mean over all items of the scored cell where there is
    one and ``σ(β_i + θ_j)`` where not, so a full grid gives the observed accuracies exactly (and is not fitted).
    Rows without a scored cell are dropped first (``_correctness``).

    >>> estimated_accuracy_per_prompt([[1, 0], [1, 1]]).tolist()   # every cell scored: the observed accuracies
    [1.0, 0.5]
    >>> grid = [[1, 1], [0, 0], [0, None], [None, 1]]   # the prompts agree on the items both were scored on
    >>> accuracy_per_prompt(grid).round(3).tolist()    # observed: prompt 0 got the hard item, prompt 1 the easy one
    [0.333, 0.667]
    >>> estimated_accuracy_per_prompt(grid).round(3).tolist()   # the unscored cells filled in: the gap mostly goes
    [0.476, 0.524]
    """
    from scipy.optimize import minimize

    matrix = _correctness(correct)
    scored = ~np.isnan(matrix)
    if scored.all():
        return _column_means(matrix)
    if not (isinstance(l2, (int, float)) and l2 > 0):
        raise PromptSetError(f"l2 must be a positive penalty (PromptEval's 1/C, default {RASCH_L2}), got {l2!r}")
    items, prompts = matrix.shape
    row, col = np.nonzero(scored)
    y = matrix[row, col]

    def objective(w):
        beta, theta = w[:items], w[items:]
        z = beta[row] + theta[col]
        loss = np.logaddexp(0.0, z).sum() - y @ z + 0.5 * l2 * (w @ w)
        residual = 1.0 / (1.0 + np.exp(-z)) - y  # d loss / d z
        grad = np.concatenate([np.bincount(row, residual, items), np.bincount(col, residual, prompts)]) + l2 * w
        return loss, grad

    fit = minimize(objective, np.zeros(items + prompts), jac=True, method="L-BFGS-B",
                   options={"maxiter": 10_000, "gtol": 1e-9, "ftol": 0.0})
    beta, theta = fit.x[:items], fit.x[items:]
    predicted = 1.0 / (1.0 + np.exp(-(beta[:, None] + theta[None, :])))
    return np.where(scored, np.nan_to_num(matrix), predicted).mean(axis=0)


def estimated_accuracy_spread(correct, l2: float = RASCH_L2) -> dict:
    """``accuracy_spread``'s keys for ``estimated_accuracy_per_prompt``, plus ``per_prompt`` (the estimates),
    ``scored`` (the share of cells scored) and the fit's ``l2``.

    >>> s = estimated_accuracy_spread([[1, 1], [0, 0], [0, None], [None, 1]])
    >>> s["scored"], round(s["range"], 3), s["argmax"]
    (0.75, 0.048, 1)
    """
    matrix = _correctness(correct)
    estimates = estimated_accuracy_per_prompt(matrix, l2)
    return {**_spread(estimates), "per_prompt": [float(a) for a in estimates],
            "scored": float((~np.isnan(matrix)).mean()), "l2": l2}


def worst_case_accuracy(correct) -> float:
    """HELM's robustness accuracy: an item counts as right only if it is right under every prompt of its set
    (every *scored* prompt, when cells are missing); the share of such items.

    >>> worst_case_accuracy([[1, 1], [1, 0], [0, 0]])
    0.3333333333333333
    """
    matrix = _correctness(correct)
    return float(np.fmin.reduce(matrix, axis=1).mean())  # fmin skips NaN; each row has a value


def best_case_accuracy(correct) -> float:
    """The share of items answered right under at least one (scored) prompt of their set: an oracle that picks
    the prompt per item after seeing the answers, an upper bound on any prompt choice.

    >>> best_case_accuracy([[1, 1], [1, 0], [0, 0]])
    0.6666666666666666
    """
    matrix = _correctness(correct)
    return float(np.fmax.reduce(matrix, axis=1).mean())


def max_performance(correct) -> float:
    """MaxP (Mizrahi et al., 2024): the accuracy of the best prompt, max_j acc_j.

    >>> max_performance([[1, 0], [1, 1], [0, 0]])
    0.6666666666666666
    """
    return float(accuracy_per_prompt(correct).max())


def average_performance(correct) -> float:
    """AvgP (Mizrahi et al., 2024): the mean accuracy over prompts, (1/P) Σ_j acc_j (every prompt weighs the same,
    even where missing cells give prompts different numbers of scored items).

    >>> average_performance([[1, 0], [1, 1], [0, 0]])
    0.5
    """
    return float(accuracy_per_prompt(correct).mean())


def combined_performance_score(correct) -> float:
    """CPS (Mizrahi et al., 2024, "State of What Art? A Call for Multi-Prompt LLM Evaluation")::

        saturation = 1 − (MaxP − AvgP)
        CPS        = saturation · MaxP = MaxP · (1 − (MaxP − AvgP))

    A model that is good under its best prompt *and* loses little under the others scores high. This is the
    definition as we recall it from the paper (performance in [0, 1]); it was not checked against a copy of the
    paper while writing this module.

    >>> combined_performance_score([[1, 0], [1, 1], [0, 0]])     # MaxP 2/3, AvgP 1/2: 2/3 · (1 − 1/6) = 5/9
    0.5555555555555556
    >>> combined_performance_score([[1, 1], [0, 0]])             # no prompt spread: CPS = MaxP
    0.5
    """
    acc = accuracy_per_prompt(correct)
    maxp, avgp = float(acc.max()), float(acc.mean())
    return maxp * (1.0 - (maxp - avgp))


def _is_missing(answer) -> bool:
    return answer is None or (isinstance(answer, float) and math.isnan(answer))


def consistency_rate(answers: Sequence[Sequence[Hashable | None]]) -> float | None:
    """SCORE's consistency rate (the lm-evaluation-harness SCORE tasks): for each item, the share of unordered
    pairs of its prompts whose *predicted answers* are equal; the rate is the mean over items.

    ``answers[i]`` lists item i's predicted answers, one per prompt of its set (any hashable labels; the sets may
    differ in length). ``None`` (or a float NaN) is "no answer / unparsed": it agrees with nothing, **not even
    another None**, so two unparsed answers are not counted as consistent. An item with fewer than two answers has
    no pair and is left out; with no pair at all (one prompt) the rate is undefined and None is returned.

    Per item with m answers of which c_y equal label y: Σ_y C(c_y, 2) / C(m, 2).

    Differences from the harness's ``calculate_consistency_rate``: it compares the raw extracted strings (so two
    identical unparsed outputs agree), pools pairs over items (the same as the mean over items when every item has
    the same number of prompts) and returns 0.0 when there is no pair.

    >>> consistency_rate([["A", "A", "B"], ["C", "C", "C"]])      # (1/3 + 3/3) / 2
    0.6666666666666666
    >>> consistency_rate([[None, None], ["A", "A"]])              # unparsed pairs do not agree: (0 + 1) / 2
    0.5
    >>> consistency_rate([["A"], ["B"]]) is None                  # one prompt: no pair
    True
    """
    if isinstance(answers, (str, bytes)) or not hasattr(answers, "__len__"):
        raise PromptSetError("answers must be a list with one list of predicted answers per item")
    if len(answers) == 0:
        raise PromptSetError("consistency needs at least one item; answers is empty")
    rates = []
    for i, item in enumerate(answers):
        if isinstance(item, (str, bytes)) or not hasattr(item, "__iter__"):
            raise PromptSetError(f"answers[{i}] must be the list of item {i}'s answers (one per prompt), got "
                                 f"{type(item).__name__} {item!r}")
        item = list(item)
        m = len(item)
        if m < 2:
            continue
        try:
            counts = Counter(a for a in item if not _is_missing(a))
        except TypeError as exc:
            raise PromptSetError(f"answers[{i}] holds an unhashable answer ({exc}); give labels such as strings "
                                 f"or ints") from None
        rates.append(sum(c * (c - 1) for c in counts.values()) / (m * (m - 1)))
    return float(np.mean(rates)) if rates else None


def prompt_sensitivity_score(correct) -> float | None:
    """PSS, ProSA's PromptSensiScore (Zhuo et al., 2024), on correctness::

        PSS = (1/|I|) Σ_i  (1 / C(n_i, 2)) Σ_{j<k} |c_ij − c_ik|

    the mean over items of the mean absolute difference of correctness over unordered prompt pairs. 0 when every
    item is right under all its prompts or wrong under all; high when items flip between prompts. For 0/1 values an
    item with k right answers out of n has k(n − k) differing pairs, so its term is k(n − k) / C(n, 2).
    Missing cells are left out of their item's pairs; an item with fewer than two scored prompts is left out, and
    with no such item (one prompt) PSS is undefined and None is returned.

    >>> prompt_sensitivity_score([[1, 1, 0, 0], [1, 1, 1, 1]])    # 2·2/6 and 0 → mean 1/3
    0.3333333333333333
    >>> prompt_sensitivity_score([[1], [0]]) is None
    True
    """
    matrix = _correctness(correct)
    scored = ~np.isnan(matrix)
    n = scored.sum(axis=1)
    k = np.where(scored, matrix, 0.0).sum(axis=1)
    keep = n >= 2
    if not keep.any():
        return None
    n, k = n[keep], k[keep]
    return float(np.mean(k * (n - k) / (n * (n - 1) / 2)))


def variants_needed(correct, epsilon: float = 0.01, delta: float = 0.1, *, resamples: int = 1000,
                    seed: int = 0) -> int:
    """ReliableEval-style n*: the smallest number n of prompt variants such that the mean accuracy over n prompts
    drawn at random (without replacement) lies within ``epsilon`` of the all-prompt mean accuracy (AvgP) with
    probability at least 1 − ``delta``.

    Method: ``resamples`` random orderings of the P prompts are drawn from a seeded numpy Generator; the first n
    prompts of each ordering are a uniform random n-subset, so for every n = 1..P the share of orderings whose first-n
    mean misses AvgP by more than epsilon estimates the failure probability. n* is the first n whose share is at
    most delta. With n = P the subset is every prompt and the error is 0, so 1 ≤ n* ≤ P always (an int, never None):
    n* = P says that no smaller subset is reliable enough. The same orderings serve every epsilon and delta, so for a
    fixed seed n* never grows when epsilon or delta grows. (The ReliableEval paper estimates this with the method of
    moments; this is a plain resampling estimate of the same quantity.)

    >>> variants_needed([[1, 1, 1, 1], [0, 0, 0, 0]])              # all prompts equally accurate: one suffices
    1
    >>> variants_needed([[1, 0, 1, 0], [1, 0, 1, 0]], epsilon=0.01) # accuracies 1, 0, 1, 0: only all four hit 0.5
    4
    >>> variants_needed([[1, 0, 1, 0], [1, 0, 1, 0]], epsilon=0.5)  # any single prompt is within 0.5
    1
    """
    acc = accuracy_per_prompt(correct)
    if not (isinstance(epsilon, (int, float)) and epsilon >= 0):
        raise PromptSetError(f"epsilon is a tolerance on accuracy and must be ≥ 0, got {epsilon!r}")
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise PromptSetError(f"delta is a failure probability and must lie in [0, 1), got {delta!r}")
    if not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise PromptSetError(f"resamples must be a positive integer, got {resamples!r}")
    p = acc.size
    target = acc.mean()
    rng = np.random.Generator(np.random.PCG64(seed))
    orders = rng.permuted(np.tile(np.arange(p), (int(resamples), 1)), axis=1)
    subset_means = np.cumsum(acc[orders], axis=1) / np.arange(1, p + 1)  # [r, n-1]: mean of the first n prompts
    failure = (np.abs(subset_means - target) > epsilon + _TOLERANCE).mean(axis=0)
    failure[-1] = 0.0  # n = P: the mean of every prompt is the target (rounding aside)
    return int(np.flatnonzero(failure <= delta)[0]) + 1


def _draw_counts(indices: np.ndarray, size: int) -> np.ndarray:
    """How often each of 0..size−1 occurs in each row of a (batch, n) index array: a (batch, size) float array."""
    offsets = indices + size * np.arange(indices.shape[0])[:, None]
    return np.bincount(offsets.ravel(), minlength=indices.shape[0] * size).reshape(-1, size).astype(np.float64)


def two_way_bootstrap_ci(correct, statistic: Callable[[np.ndarray], float] | None = None,
                         confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                         seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval that resamples items AND prompts: each resample draws rows (items) and columns
    (prompts) independently, with replacement, and evaluates ``statistic`` on the resampled matrix, so the interval
    carries both the uncertainty from the finite item sample and from the choice of prompts.

    ``statistic`` takes the items × prompts float matrix (NaN = not scored, rows without gold already dropped) and
    returns a float; default: the mean accuracy over scored cells (= AvgP when every cell is scored). Any function
    of this module that takes ``correct`` fits, e.g. ``statistic=max_performance``. With missing cells a resample
    can hold a prompt with no scored item; the default copes, other statistics may raise. A resample whose value is
    undefined (NaN: the default's when it drew no scored cell at all, as a small budgeted run's can) is left out of
    the interval, with a warning that counts them.

    The interval is ``scipy.stats.bootstrap``'s (``method="percentile"``) with the row indices 0..I−1 and the column
    indices 0..P−1 as two unpaired samples, for which scipy draws each sample's resample with its own independent
    indices, which is exactly the two-way design; with one prompt only the items are resampled (a one-way bootstrap,
    as scipy refuses a sample of one); at least two items are needed. It is computed here with scipy's draws (a
    batch of row resamples, then a batch of column resamples, from the seeded generator) and scipy's quantiles, but
    without scipy's copies of the index arrays: the same interval to the last bit (a test checks it), twice as fast
    on a cell of 14,042 items (``experiments.benchmark_analysis``), which a paper grid's 128 such cells notice.
    Deterministic for a given seed.

    >>> M = [[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 0], [1, 1, 0]]
    >>> lo, hi = two_way_bootstrap_ci(M, resamples=2000, seed=0)
    >>> bool(lo < 0.6 < hi)                                     # the point estimate: 9 right of 15 cells
    True
    >>> two_way_bootstrap_ci([[1, 1], [1, 1]], resamples=100)    # no spread, no uncertainty
    (1.0, 1.0)
    """
    matrix = _correctness(correct)
    if not 0 < confidence < 1:
        raise PromptSetError(f"confidence must lie between 0 and 1, got {confidence}")
    if not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise PromptSetError(f"resamples must be a positive integer, got {resamples!r}")
    items, prompts = matrix.shape
    if items < 2:
        raise PromptSetError(f"a bootstrap interval needs at least 2 items with a gold answer, got {items}")
    scored = (~np.isnan(matrix)).astype(np.float64)
    values = np.nan_to_num(matrix, nan=0.0)
    every_scored = bool(scored.all())
    rng = np.random.Generator(np.random.PCG64(seed))
    batch = max(1, _CELLS_PER_BATCH // (items + prompts))  # the draw counts of one batch: batch × (items + prompts)
    estimates = []
    for start in range(0, int(resamples), batch):
        size = min(batch, int(resamples) - start)
        rows = rng.integers(0, items, (size, items))
        cols = rng.integers(0, prompts, (size, prompts)) if prompts >= 2 else np.zeros((size, 1), dtype=np.int64)
        if statistic is None:
            # mean over scored cells of each resampled matrix, vectorised over the batch without building it: with
            # w[b] and u[b] how often each row and column was drawn, the resample's sum is w[b]ᵀ · values · u[b]
            w, u = _draw_counts(rows, items), _draw_counts(cols, prompts)
            # every cell scored: each resample counts items × prompts cells (sums of whole numbers, exact either way)
            count = ((w @ scored) * u).sum(axis=1) if not every_scored else float(items * prompts)
            with np.errstate(invalid="ignore", divide="ignore"):
                estimates.append(((w @ values) * u).sum(axis=1) / count)
        else:
            estimates.append([float(statistic(matrix[np.ix_(r, c)])) for r, c in zip(rows, cols)])
    return _percentile_interval(np.concatenate(estimates), confidence)


def _percentile_interval(estimates: np.ndarray, confidence: float) -> tuple[float, float]:
    """scipy's percentile interval of the resamples' values, those without one (NaN) left out with a warning that
    counts them; NaN when none has one."""
    undefined = np.isnan(estimates)
    if undefined.all():
        warnings.warn("every resample's statistic is undefined (NaN), so the interval is too", RuntimeWarning,
                      stacklevel=3)
        return math.nan, math.nan
    if undefined.any():  # a sparse grid's resample that drew no scored cell: no mean to take
        warnings.warn(f"{int(undefined.sum())} of {undefined.size} resamples have no value (NaN: with missing cells, "
                      f"a resample that drew no scored cell) and are left out of the interval", RuntimeWarning,
                      stacklevel=3)
    tail = (1 - confidence) / 2
    low, high = _stats.quantile(estimates[~undefined], np.asarray([tail, 1 - tail]), axis=-1)
    return float(low), float(high)


def accuracy_metrics(accuracy: dict | None) -> dict:
    """The accuracy block as flat W&B summary keys: ``accuracy/by_options/avg_p``, ``.../spread_range``, ..."""
    out = {}
    for reading in ("by_options", "by_greedy"):
        block = (accuracy or {}).get(reading)
        if not block:
            continue
        for key in ("accuracy", "worst_case", "best_case", "max_p", "avg_p", "cps", "pss", "consistency_rate"):
            out[f"accuracy/{reading}/{key}"] = block[key]
        for key in ("range", "sd", "min", "max", "q05", "q50", "q95"):
            out[f"accuracy/{reading}/spread_{key}"] = block["spread"][key]
        out[f"accuracy/{reading}/variants_needed"] = block["variants_needed"]["n"]
        if block.get("parse_rate"):
            out[f"accuracy/{reading}/parse_rate"] = block["parse_rate"]["overall"]
        if block.get("best_prompts"):  # template and format pools: how many prompts are within noise of the best
            out[f"accuracy/{reading}/best_prompts_count"] = len(block["best_prompts"]["prompts"])
        for key in ("mean", "min", "max", "q05", "q50", "q95", "scored"):  # prompt_share < 1
            if block.get("estimated"):
                out[f"accuracy/{reading}/estimated_{key}"] = block["estimated"][key]
        bias = ((accuracy or {}).get("position_bias") or {}).get(reading)
        if bias:  # format variants: position bias (posixlab.metrics.position)
            out[f"accuracy/{reading}/position_rstd"] = bias["rstd"]
            out[f"accuracy/{reading}/position_p_value"] = bias["p_value"]
    return out
