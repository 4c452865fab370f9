"""Sensitivity and consistency of a classifier under prompt rephrasings (Errica et al., arXiv 2406.12334).

A sample x is classified once under each of Q rephrasings ρ of the task instruction. Its class distribution
p(y | x) is the mean over rephrasings of p(y | x, ρ): with greedy answers (the paper's way) the share of
rephrasings whose answer is y; with label probabilities, the mean of per-rephrasing distributions. The classes
always include ``NA`` (an answer that names no class), last.

>>> classes = ["yes", "no", NA]
>>> p = class_distribution(["yes", "yes", "no", "yes"], classes)
>>> p.tolist()
[0.75, 0.25, 0.0]
>>> round(sensitivity(p), 4)                       # -(3/4 ln 3/4 + 1/4 ln 1/4) / ln 3
0.5119

The paper's limit cases. A constant predictor (the same class under every rephrasing, for every sample of a class)
has sensitivity 0 and consistency 1; a predictor that answers uniformly at random has sensitivity close to 1.

>>> sensitivity(class_distribution(["no"] * 30, classes))
0.0
>>> constant = np.array([class_distribution(["no"] * 30, classes)] * 4)
>>> consistency(constant, ["yes", "yes", "no", "no"])["mean"]
1.0
>>> rng = np.random.default_rng(0)
>>> random_answers = rng.choice(classes, size=30_000).tolist()
>>> sensitivity(class_distribution(random_answers, classes)) > 0.999
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from posixlab.errors import ConfigError
from posixlab.metrics.stats import beyond_resampling_reach

NA = "N/A"  # the class of an answer that names no class; counted in C (the paper's code divides by ln C with it)


def class_distribution(labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    """The share of ``labels`` (one per rephrasing) that falls in each class of ``classes`` (which holds ``NA``).

    >>> class_distribution(["a", NA], ["a", "b", NA]).tolist()
    [0.5, 0.0, 0.5]
    >>> class_distribution(["c"], ["a", "b", NA])
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: label 'c' is not one of the classes a, b, N/A; parse answers into a class or N/A first
    """
    if len(labels) == 0:
        raise ConfigError("a class distribution needs at least one prediction")
    index = {c: k for k, c in enumerate(classes)}
    counts = np.zeros(len(classes))
    for label in labels:
        if label not in index:
            raise ConfigError(f"label {label!r} is not one of the classes {', '.join(classes)}; parse answers into "
                              f"a class or {NA} first")
        counts[index[label]] += 1
    return counts / len(labels)


def sensitivity(distribution) -> float:
    """S_τ(x): the Shannon entropy (nats) of a sample's class distribution divided by ln C, C = its length (N/A
    included), so 0 when every rephrasing gives the same class and 1 when they spread evenly over all C classes.
    0·ln 0 counts as 0.

    >>> sensitivity([0.5, 0.5, 0.0, 0.0])              # ln 2 / ln 4
    0.5
    >>> sensitivity([0.25, 0.25, 0.25, 0.25])
    1.0
    """
    p = np.asarray(distribution, dtype=np.float64)
    if p.ndim != 1 or len(p) < 2:
        raise ConfigError(f"sensitivity needs a distribution over at least 2 classes, got shape {p.shape}")
    if np.any(p < 0) or not math.isclose(p.sum(), 1.0, abs_tol=1e-6):
        raise ConfigError(f"not a probability distribution (negative entries or sum {p.sum():.6f} != 1)")
    nonzero = p[p > 0]
    value = float(-np.sum(nonzero * np.log(nonzero)) / math.log(len(p)))
    return min(1.0, max(0.0, value)) + 0.0  # rounding can step a hair outside [0, 1]; +0.0: no -0.0


def consistency_matrix(distributions) -> np.ndarray:
    """C(x, x') = 1 − TVD(p_x, p_x') = 1 − ½‖p_x − p_x'‖₁ for every pair of rows (samples) of an n×C matrix.

    >>> consistency_matrix([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]).tolist()
    [[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    p = np.asarray(distributions, dtype=np.float64)
    if p.ndim != 2:
        raise ConfigError(f"consistency needs an n×C matrix of class distributions, got shape {p.shape}")
    return 1.0 - 0.5 * np.abs(p[:, None, :] - p[None, :, :]).sum(axis=-1)


def consistency(distributions, gold: Sequence[str | None], classes: Sequence[str] | None = None,
                self_pairs: bool = False) -> dict:
    """Consistency per gold class, C_y = the mean of C(x, x') over pairs of samples whose gold label is y, and its
    average over classes (our reading of the paper's Eq. 7).

    - ``self_pairs=False`` (default): pairs x ≠ x' only, the n_y(n_y − 1) ordered pairs, since a sample always
      agrees with itself; a class with a single sample then has no pair and gets None.
      ``self_pairs=True`` includes the diagonal (n_y² pairs, each self-pair worth 1), as the authors' released
      code does; it inflates the consistency of small classes.
    - ``mean``: the unweighted mean of C_y over the classes that have a value (every class counts once).
    - ``pooled``: the mean over all pairs of all classes together, so a class weighs by its number of pairs; with
      ``self_pairs=True`` this is the "average consistency" the authors' code prints.

    ``classes`` lists the gold classes to report (default: those in ``gold``, sorted); samples without a gold label
    (None) or with gold ``NA`` are left out. ``num_pairs`` says how many pairs each class had.

    >>> P = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    >>> r = consistency(P, ["a", "a", "b", "b", "c"])
    >>> r["per_class"], r["mean"], r["pooled"]
    ({'a': 0.5, 'b': 1.0, 'c': None}, 0.75, 0.75)
    >>> r = consistency(P, ["a", "a", "b", "b", "c"], self_pairs=True)  # a: (1 + 1 + 0.5 + 0.5) / 4
    >>> r["per_class"], r["mean"], r["pooled"]
    ({'a': 0.75, 'b': 1.0, 'c': 1.0}, 0.9166666666666666, 0.8888888888888888)
    >>> consistency(P, ["a", "a", "a", "b", "b"])["pooled"]     # a: 6 ordered pairs summing to 2; b: 2 pairs, 0
    0.25
    """
    p = np.asarray(distributions, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != len(gold):
        raise ConfigError(f"consistency needs one gold label per row of distributions: {len(gold)} labels for a "
                          f"matrix of shape {p.shape}")
    if classes is None:
        classes = sorted({g for g in gold if g is not None and g != NA})
    per_class, num_pairs, total, count = {}, {}, 0.0, 0
    for c in classes:
        rows = [k for k, g in enumerate(gold) if g == c]
        m = consistency_matrix(p[rows]) if rows else np.zeros((0, 0))
        n = len(rows)
        pairs = n * n if self_pairs else n * (n - 1)
        num_pairs[c] = pairs
        if pairs == 0:
            per_class[c] = None
            continue
        s = float(m.sum()) if self_pairs else float(m.sum() - np.trace(m))
        per_class[c] = s / pairs
        total, count = total + s, count + pairs
    values = [v for v in per_class.values() if v is not None]
    return {"per_class": per_class,
            "mean": float(np.mean(values)) if values else None,
            "pooled": total / count if count else None,
            "self_pairs": self_pairs,
            "num_pairs": num_pairs}


def resampled_pair_means(pair_values: dict[str, np.ndarray], gold: Sequence[str | None],
                         samples: np.ndarray) -> np.ndarray:
    """For each bootstrap resample (a row of ``samples``: sample indices drawn with replacement), the mean over
    classes of the mean of ``pair_values[y]`` (an n_y×n_y matrix over class y's samples, in their order in ``gold``,
    its diagonal 0) over the pairs of copies of two different samples of class y.

    A resample holds sample i w_i times, so a class's mean is wᵀMw / ((Σw)² − Σw²): every pair of copies of two
    different samples, none of a sample with itself or its own copy (two draws of one sample would agree perfectly
    and lift C with every duplicate: a U-statistic's bootstrap without ties). A class with fewer than two different
    samples in a resample sits that resample out, as a class of one sample sits out C; a resample where no class
    has a pair is NaN.

    >>> M = {"a": np.array([[0.0, 0.5], [0.5, 0.0]])}
    >>> resampled_pair_means(M, ["a", "a"], np.array([[0, 1], [1, 1]])).tolist()
    [0.5, nan]
    """
    num, den = np.zeros((len(samples), len(pair_values))), np.zeros((len(samples), len(pair_values)))
    for k, (c, m) in enumerate(pair_values.items()):
        rows = [i for i, g in enumerate(gold) if g == c]
        position = np.full(len(gold), -1)
        position[rows] = np.arange(len(rows))
        picked = position[samples]  # each draw's place among the class's samples, -1 for another class's
        slots = (np.arange(len(samples))[:, None] * len(rows) + picked)[picked >= 0]
        w = np.bincount(slots, minlength=len(samples) * len(rows)).reshape(len(samples), len(rows)).astype(float)
        num[:, k] = ((w @ m) * w).sum(axis=1)
        den[:, k] = w.sum(axis=1) ** 2 - (w ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    counts = (~np.isnan(per_class)).sum(axis=1)
    return np.where(counts > 0, np.nansum(per_class, axis=1) / np.maximum(counts, 1), np.nan)


def consistency_interval(distributions, gold: Sequence[str | None], classes: Sequence[str] | None = None,
                         seed: int = 0, resamples: int = 10_000) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of C, the unweighted mean of C_y over classes (``consistency``'s ``mean``,
    no self-pairs): the samples resampled with replacement (seeded, as S's interval over samples), each resample's C
    over pairs of different samples (``resampled_pair_means``). None where C is None, and on 2 or 3 samples, whose
    resamples cannot reach a 2.5 % tail (``stats.beyond_resampling_reach``) while C, a mean over pairs, has no
    per-sample values for the t interval that S takes there.

    By hand: class a's two samples agree 0.5, class b's two agree 1. A resample with both of a's samples and not both
    of b's has C 0.5; with both of each, 0.75; with b's alone, 1; each happens in more than 2.5% of resamples.

    >>> P = [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [0.0, 1.0]]
    >>> consistency(P, ["a", "a", "b", "b"])["mean"], consistency_interval(P, ["a", "a", "b", "b"])
    (0.75, (0.5, 1.0))
    """
    p = np.asarray(distributions, dtype=np.float64)
    if classes is None:
        classes = sorted({g for g in gold if g is not None and g != NA})
    pair_values = {}
    for c in classes:
        rows = [k for k, g in enumerate(gold) if g == c]
        if len(rows) >= 2:  # a class of one sample has no pair, in C as here
            pair_values[c] = consistency_matrix(p[rows])
            np.fill_diagonal(pair_values[c], 0.0)
    if not pair_values or beyond_resampling_reach(len(gold), 0.025):
        return None  # on 2 or 3 samples no resample is rare enough for a 2.5 % tail: no interval, not their range
    rng, n = np.random.default_rng(seed), len(gold)
    chunk = max(1, 2_000_000 // n)  # resamples at a time: bounded memory on a large data set
    values = np.concatenate([resampled_pair_means(pair_values, gold,
                                                  rng.integers(0, n, size=(min(chunk, resamples - start), n)))
                             for start in range(0, resamples, chunk)])
    lo, hi = np.percentile(values[np.isfinite(values)], [2.5, 97.5])
    return float(lo), float(hi)


def micro_f1(gold: Sequence[str], pred: Sequence[str]) -> float:
    """Micro-averaged F1 of single-label predictions, N/A counted as a (wrong) predicted class.

    With one gold class and one predicted class per sample, every wrong prediction is one false positive (of the
    predicted class) and one false negative (of the gold class), so micro precision = micro recall = micro-F1 =
    accuracy. An N/A answer is therefore simply wrong; leaving N/A out of the averaged labels (scikit-learn's
    ``labels=``) would instead reward unparseable answers with a higher precision.

    >>> micro_f1(["a", "b", "b", "c"], ["a", "b", NA, "b"])
    0.5
    """
    if len(gold) != len(pred) or not gold:
        raise ConfigError(f"micro-F1 needs as many predictions as gold labels (at least one): {len(gold)} gold, "
                          f"{len(pred)} predicted")
    if any(g is None for g in gold):
        raise ConfigError("micro-F1 needs a gold label for every sample")
    return sum(g == p for g, p in zip(gold, pred)) / len(gold)
