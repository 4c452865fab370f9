"""Simulated predictors to set a run beside (a random one and a noisy one) and the per-sample consistency
statistics the sensitivity-consistency scatter plots. Numbers only; nothing is drawn here."""

from __future__ import annotations

import numpy as np

from posixlab.analysis.classification.load import ClassificationRun
from posixlab.metrics.classification import class_distribution, consistency_matrix, sensitivity

NOISE = 0.5  # the noisy predictor's share of random predictions
SEED = 0


def simulate_labels(run: ClassificationRun, noise: float, seed: int = SEED, include_na: bool = False) -> list[list]:
    """The run's own per-rephrasing labels with each one replaced, independently with probability ``noise``, by a
    label drawn uniformly at random: the *noisy predictor* (``noise=0.5`` by default). ``noise=1`` is the *random
    predictor*: every prediction uniform, whatever the model said. Both keep the run's layout (its samples, their
    gold labels, Q rephrasings each), so their points sit on the same axes as the model's.

    The random labels are drawn from the task's classes without N/A (``include_na=False``): a random classifier
    still answers with a class, and N/A is the parser's verdict on an answer, not an answer. Its expected
    sensitivity is then just under ln K / ln(K + 1) (K classes; the entropy is normalised by ln of the number of
    classes *with* N/A), e.g. 0.83 for K = 4 and Q = 30, not 1. ``include_na=True`` draws N/A too (sensitivity
    near 1). In ``label_probs`` runs the noisy predictor starts from the recorded labels, not the probabilities.
    """
    rng = np.random.default_rng(seed)  # one generator, drawn from in sample order: the same seed, the same labels
    choices = run.classes if include_na else run.real_classes
    out = []
    for own in run.labels:
        replace = rng.random(len(own)) < noise
        drawn = rng.integers(len(choices), size=len(own))
        out.append([choices[d] if r else o for o, r, d in zip(own, replace, drawn)])
    return out


def baseline(run: ClassificationRun, noise: float, seed: int = SEED, include_na: bool = False) -> dict:
    """Per-sample sensitivity and mean consistency (``mean_consistency``) of a simulated predictor
    (``simulate_labels``)."""
    distributions = np.array([class_distribution(labels, run.classes)
                              for labels in simulate_labels(run, noise, seed, include_na)], dtype=float)
    return {"sensitivity": np.array([sensitivity(d) for d in distributions], dtype=float),
            "consistency": mean_consistency(distributions, run.gold)}


def mean_consistency(distributions: np.ndarray, gold: list[str | None]) -> np.ndarray:
    """Each sample's mean C_y(x, x') over the *other* samples x' of its gold class: the scatter's y-value. A sample
    without gold, or alone in its class, gets NaN. Self-pairs are left out (C_y(x, x) = 1 always, and would lift
    samples of small classes). Averaged over the samples of a class, this is the class's consistency without
    self-pairs, so ``class_mean`` of it is the summary's ``consistency.mean``."""
    out = np.full(len(gold), np.nan)
    golds = np.array(gold, dtype=object)
    for c in sorted({g for g in gold if g is not None}):
        members = np.flatnonzero(golds == c)
        if len(members) < 2:
            continue
        block = np.asarray(consistency_matrix(distributions[members]), dtype=float)
        out[members] = (block.sum(axis=1) - np.diag(block)) / (len(members) - 1)
    return out


def class_mean(values: np.ndarray, gold: list[str | None]) -> float:
    """The unweighted mean over gold classes of each class's mean value (NaNs and samples without gold ignored)."""
    golds = np.array(gold, dtype=object)
    means = [np.nanmean(values[golds == c]) for c in sorted({g for g in gold if g is not None})
             if np.isfinite(values[golds == c]).any()]
    return float(np.mean(means)) if means else float("nan")
