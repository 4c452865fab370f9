"""Where a prompt set is sensitive: the terms ψ averages, and the prompt pair and response that moved most.

ψ (``posixlab.metrics.posix``, paper Def. 3.3) is the mean over the ordered pairs i ≠ j of a set of

    term[i, j] = |M[i, j] − M[j, j]| / L_j,    M[i, j] = log P(y_j | x_i),

how far prompt x_i moves the log-probability of response y_j (written by prompt x_j) per token of y_j. Its signed
form, ``(M[i, j] − M[j, j]) / L_j``, is the length-normalised log-ratio log(P(y_j | x_i) / P(y_j | x_j)) / L_j:
negative when x_i makes y_j less likely than the prompt that wrote it (the usual case: y_j is x_j's greedy answer).

A column whose response has no tokens (L_j < 1: posixlab never records one, a response holds at least one generated
token, but hand-made or foreign records may) has no term, nor has a non-finite entry: both are NaN here, left out of
the pair chosen, never an error.

>>> M = [[-1.0, -3.0, -2.0],
...      [-2.0, -1.5, -4.0],
...      [-1.5, -2.5, -1.0]]
>>> psi_terms(M, [1, 2, 3]).round(4).tolist()     # column 1 divided by 2 tokens, column 2 by 3
[[0.0, 0.75, 0.3333], [1.0, 0.0, 1.0], [0.5, 0.5, 0.0]]
>>> most_moved_pair(M, [1, 2, 3])                 # the largest term off the diagonal; ties to the lowest i, then j
{'i': 1, 'j': 0, 'logp_i': -2.0, 'logp_j': -1.0, 'length': 1, 'log_ratio': -1.0, 'term': 1.0}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normalised_log_ratios(logprobs, lengths: Sequence[int]) -> np.ndarray:
    """The N×N signed terms ``(M[i, j] − M[j, j]) / L_j`` (nats per token of y_j); NaN in a column whose response
    is empty (L_j < 1) and where an entry of M is not finite. The diagonal is 0."""
    matrix = np.asarray(logprobs, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"need a square N×N log-probability matrix, got shape {matrix.shape}")
    n = matrix.shape[0]
    length = np.asarray(list(lengths), dtype=np.float64)
    if length.shape != (n,):
        raise ValueError(f"got {length.size} response lengths for a set of {n} prompts")
    diagonal = np.diag(matrix)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = (matrix - diagonal[None, :]) / np.where(length >= 1, length, np.nan)[None, :]
    ratios[~np.isfinite(ratios)] = np.nan
    return ratios


def psi_terms(logprobs, lengths: Sequence[int]) -> np.ndarray:
    """The terms ψ averages, ``|M[i, j] − M[j, j]| / L_j``; NaN as in ``normalised_log_ratios``. With every
    response non-empty, ψ is their sum over N (N − 1):

    >>> from posixlab.metrics.posix import psi
    >>> M = [[-1.0, -3.0], [-2.0, -1.5]]
    >>> float(psi_terms(M, [1, 2]).sum() / 2) == psi(M, [1, 2])
    True
    """
    return np.abs(normalised_log_ratios(logprobs, lengths))


def most_moved_pair(logprobs, lengths: Sequence[int]) -> dict | None:
    """The ordered pair (i, j), i ≠ j, with the largest term of ψ, ``|M[i, j] − M[j, j]| / L_j``: prompt ``i``
    scoring response ``j``. Ties go to the lowest i, then the lowest j. Returns ``{"i", "j", "logp_i" (M[i, j] =
    log P(y_j | x_i)), "logp_j" (M[j, j] = log P(y_j | x_j)), "length" (L_j), "log_ratio" ((logp_i − logp_j) / L_j,
    signed), "term" (its absolute value, the term ψ averages)}``, or None when no pair has a term (fewer than two
    prompts, every response empty).

    >>> most_moved_pair([[-1.0, -2.0], [-3.0, -1.0]], [2, 2])    # |-3 - -1| / 2 = 1.0 beats |-2 - -1| / 2 = 0.5
    {'i': 1, 'j': 0, 'logp_i': -3.0, 'logp_j': -1.0, 'length': 2, 'log_ratio': -1.0, 'term': 1.0}
    >>> most_moved_pair([[-1.0, -1.0], [-1.0, -1.0]], [1, 1])    # nothing moved: the tie goes to (0, 1)
    {'i': 0, 'j': 1, 'logp_i': -1.0, 'logp_j': -1.0, 'length': 1, 'log_ratio': 0.0, 'term': 0.0}
    >>> pair = most_moved_pair([[-1.0, -2.0], [-3.0, -1.0]], [0, 1])   # response 0 is empty: only (0, 1) is left
    >>> pair["i"], pair["j"], pair["term"]
    (0, 1, 1.0)
    >>> most_moved_pair([[-1.0]], [1]) is None
    True
    """
    ratios = normalised_log_ratios(logprobs, lengths)
    terms = np.abs(ratios)
    np.fill_diagonal(terms, np.nan)
    if terms.size == 0 or np.all(np.isnan(terms)):
        return None
    # nanargmax returns the first maximum in row-major order: the lowest i, then the lowest j
    i, j = (int(v) for v in np.unravel_index(np.nanargmax(terms), terms.shape))
    matrix = np.asarray(logprobs, dtype=np.float64)
    return {"i": i, "j": j, "logp_i": float(matrix[i, j]), "logp_j": float(matrix[j, j]),
            "length": int(list(lengths)[j]), "log_ratio": float(ratios[i, j]), "term": float(terms[i, j])}
