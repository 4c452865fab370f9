"""Statistics over per-set ψ: bootstrap confidence intervals for POSIX, paired tests, rank correlations.

>>> bootstrap_ci([0.5, 0.5, 0.5])                  # no spread, no uncertainty
(0.5, 0.5)
>>> lo, hi = bootstrap_ci([0.1, 0.4, 0.2, 0.9, 0.3, 0.5], seed=0)
>>> lo < 0.4 < hi
True

Two models (or shot counts, or variant types) compared on the same prompt sets: the Wilcoxon signed-rank test on the
per-set differences. Five sets, all lower for ``b``: the exact two-sided p is 2 · (1/2)^5 = 0.0625.

>>> result = paired_wilcoxon([0.9, 0.8, 0.7, 0.6, 0.5], [0.1, 0.2, 0.15, 0.25, 0.05])
>>> result["n"], result["statistic"], round(result["pvalue"], 4)
(5, 0.0, 0.0625)
>>> spearman([1, 2, 3, 4], [10, 20, 30, 40])["rho"]
1.0

A table holds many paired tests, so it also prints Holm's adjusted p-values over them. Sorted, 0.01, 0.03, 0.04, 0.2
are multiplied by 4, 3, 2, 1 (0.04, 0.09, 0.08, 0.2) and made non-decreasing (0.08 becomes 0.09):

>>> [round(p, 12) for p in holm_adjust([0.01, 0.04, 0.03, 0.2])]
[0.04, 0.09, 0.09, 0.2]
>>> holm_adjust([0.5, None, 0.5])                 # a test without a p-value (no non-zero difference) is not counted
[1.0, None, 1.0]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats as _stats

from posixlab.errors import PromptSetError

BOOTSTRAP_RESAMPLES = 10_000


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0, expanded: bool = True,
                 bounds: tuple[float | None, float | None] = (None, None)) -> tuple[float, float]:
    """Bootstrap interval for the mean (POSIX) of ``values``: resample the sets with replacement ``resamples`` times
    from a seeded generator, take the mean of each resample, read the middle ``confidence`` share of those means.
    Deterministic for a given seed.

    ``expanded`` (the default): Hesterberg's expanded percentile interval ("What teachers should know about the
    bootstrap", The American Statistician 69, 2015): the resampled means read at the tail Φ(−√(n/(n−1))·t₍₁₋α/2,
    n−1₎) instead of α/2. It corrects the plain percentile interval's narrowness on few values (a resample's spread
    divides by n, not n − 1, and has normal, not t, tails): on normal values it is the t interval, and on many values
    the plain one (tails of 0.10 % at 5 values, 1.6 % at 20, 2.3 % at 100, 2.499 % at 14,042). One-sided misses for
    a nominal 2.5 % (2,000 seeded draws of normal values, tests/test_factors_and_stats.py): plain 8.1 % at 5 values,
    4.5 % at 10, 3.5 % at 20; expanded 4.3 %, 2.5 %, 2.3 %; so a run's "95% CI" of 5 sets held POSIX 84 % of the
    time, and now holds it about 91 % (every interval over sets and samples, since 2026-12-07; ``compare`` since
    2026-11-29). ``expanded=False``: the plain interval.

    Where the tail lies beyond the resampled means' reach (below n⁻ⁿ, the chance of a resample of n copies of the
    smallest value: 2 to 4 values expanded, 2 and 3 plain, at 95 %), their quantile would stop at the values' own
    extremes: the values' range, which holds the mean of 2 values drawn about it half the time (1 − 2·2⁻²) and of 3
    three times in four, for a "95 %" interval. The interval is then the t interval the expanded one stands for,
    mean ± t₍₁₋α/2, n−1₎·s/√n. One value has no interval: (v, v). ``bounds``: the values' own range (ψ ≥ 0, S in
    [0, 1]), which a t interval may leave; the interval is held within it.

    >>> lo, hi = bootstrap_ci([0.1, 0.4, 0.2, 0.9, 0.3, 0.5], seed=0)
    >>> lo < bootstrap_ci([0.1, 0.4, 0.2, 0.9, 0.3, 0.5], seed=0, expanded=False)[0]     # the same draws, further out
    True
    """
    data = np.asarray([float(v) for v in values], dtype=np.float64)
    if data.size == 0:
        raise PromptSetError("a bootstrap interval needs at least one value")
    if not 0 < confidence < 1:
        raise PromptSetError(f"confidence must lie between 0 and 1, got {confidence}")
    n = data.size
    if n == 1:
        return float(data[0]), float(data[0])
    tail = _tail(n, confidence, expanded)
    if beyond_resampling_reach(n, tail):  # the t interval, which the expanded one stands for
        return t_interval(data, confidence, bounds)
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // data.size)  # bounded memory on the full MMLU (14,042 sets)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = data[rng.integers(0, data.size, size=(stop - start, data.size))].mean(axis=1)
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return float(lo), float(hi)  # means of resampled values: within the values' range, so within any bounds


def _tail(n: int, confidence: float, expanded: bool) -> float:
    """The share of resampled means ``bootstrap_ci`` leaves out on each side, for ``n`` values (n ≥ 2)."""
    tail = (1 - confidence) / 2
    return float(_stats.norm.cdf(-math.sqrt(n / (n - 1)) * _stats.t.ppf(1 - tail, n - 1))) if expanded else tail


def interval_method(n: int, confidence: float = 0.95, expanded: bool = True) -> str | None:
    """What ``bootstrap_ci`` computes on ``n`` values, in words: a run's summary records it beside each interval
    (``ci_method``), so that runs written under another method (the plain percentile interval, before 2026-12-07)
    can be told apart. None for one value (no interval).

    >>> [interval_method(n) for n in (1, 2, 4, 5, 14042)]
    [None, 't interval', 't interval', 'expanded percentile bootstrap', 'expanded percentile bootstrap']
    >>> interval_method(3, expanded=False), interval_method(4, expanded=False)
    ('t interval', 'percentile bootstrap')
    """
    if n < 2:
        return None
    if beyond_resampling_reach(n, _tail(n, confidence, expanded)):
        return "t interval"
    return "expanded percentile bootstrap" if expanded else "percentile bootstrap"


def beyond_resampling_reach(n: int, tail: float) -> bool:
    """Whether a bootstrap of ``n`` values cannot read a ``tail`` this rare: the rarest resample, n copies of the
    smallest value, has the chance n⁻ⁿ (25 % at 2 values, 3.7 % at 3, 0.39 % at 4), so a quantile below it is the
    values' own extreme and a "95 %" interval is their range. One value has no tail to read.

    >>> [beyond_resampling_reach(n, 0.025) for n in (1, 2, 3, 4)]
    [False, True, True, False]
    """
    return n > 1 and tail < float(n) ** -n


def t_interval(values: Sequence[float], confidence: float = 0.95,
               bounds: tuple[float | None, float | None] = (None, None)) -> tuple[float, float]:
    """Student's t interval for the mean, mean ± t₍₁₋α/2, n−1₎·s/√n, held within ``bounds`` (the values' own range,
    which the interval may leave). By hand, 1 and 2: mean 1.5, s = 1/√2, t₍0.975, 1₎ = 12.706205, half 6.353102.

    >>> [round(v, 6) for v in t_interval([1.0, 2.0])]
    [-4.853102, 7.853102]
    >>> t_interval([0.0, 0.1], bounds=(0.0, None))[0]
    0.0
    """
    data = np.asarray([float(v) for v in values], dtype=np.float64)
    if data.size < 2:
        raise PromptSetError(f"a t interval needs at least two values, got {data.size}")
    half = float(_stats.t.ppf(1 - (1 - confidence) / 2, data.size - 1)) * float(data.std(ddof=1)) / math.sqrt(data.size)
    return _within(float(data.mean()) - half, bounds), _within(float(data.mean()) + half, bounds)


def _within(value: float, bounds: tuple[float | None, float | None]) -> float:
    low, high = bounds
    if low is not None:
        value = max(low, value)
    if high is not None:
        value = min(high, value)
    return value


def paired_wilcoxon(a: Sequence[float], b: Sequence[float]) -> dict:
    """Wilcoxon signed-rank test of ψ on the same prompt sets under two conditions (two-sided; zero differences
    dropped, as Wilcoxon's original test does; exact p for small samples without ties, normal approximation
    otherwise). Returns n (non-zero pairs), the statistic, the p-value and the median of ``a - b``."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise PromptSetError(f"a paired test needs two equally long lists of ψ on the same sets, got {x.shape} and "
                             f"{y.shape}")
    diff = x - y
    nonzero = int(np.count_nonzero(diff))
    result = {"n": nonzero, "statistic": None, "pvalue": None,
              "median_difference": float(np.median(diff)) if diff.size else None}
    if nonzero == 0:
        return result
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns about small samples; n is reported alongside
        test = _stats.wilcoxon(x, y, zero_method="wilcox", alternative="two-sided")
    result["statistic"], result["pvalue"] = float(test.statistic), float(test.pvalue)
    return result


def holm_adjust(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values of a family of tests, in the order given: the i-th smallest of m p-values
    is multiplied by m − i + 1, capped at 1, and raised to the largest adjusted value before it, so that "adjusted
    p ≤ α" is exactly Holm's step-down rejection at family-wise error rate α. ``None`` (a test with no p-value)
    stays ``None`` and does not count in m."""
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    for p, _ in present:
        if not 0 <= p <= 1:  # NaN fails this too
            raise PromptSetError(f"a p-value must lie between 0 and 1, got {p}")
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def spearman(x: Sequence[float], y: Sequence[float]) -> dict:
    """Spearman's rank correlation and its two-sided p-value, with the number of pairs."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise PromptSetError(f"spearman needs two equally long lists, got {a.shape} and {b.shape}")
    if a.size < 3 or np.all(a == a[0]) or np.all(b == b[0]):
        return {"rho": math.nan, "pvalue": math.nan, "n": int(a.size)}
    test = _stats.spearmanr(a, b)
    return {"rho": float(test.statistic), "pvalue": float(test.pvalue), "n": int(a.size)}
