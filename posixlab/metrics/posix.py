"""ψ (prompt sensitivity of one intent-aligned prompt set) and POSIX (its mean over prompt sets).

Paper (Chatterjee et al., 2024, Def. 3.3), with ``M[i, j] = log P(y_j | x_i)`` (natural log) and ``L_j`` the
number of tokens of response ``y_j``::

    ψ = 1 / (N (N - 1)) · Σ_i Σ_j |M[i, j] − M[j, j]| / L_j

It compares the *same response* under *different prompts*. The authors' library ``prompt-sensitivity-index``
0.0.1 computes something else: ``|M[j, i] − M[j, j]| / max_new_tokens`` (two different responses under the
same prompt, divided by the generation budget instead of the response's length). ``mode="reference_compat"``
reproduces that, labelled as such, so the two can be compared; it is not the paper's metric.

>>> M = [[-1.0, -3.0],
...      [-2.0, -1.5]]
>>> psi(M, [1, 1])            # (|-3.0 - -1.5| + |-2.0 - -1.0|) / 2
1.25
>>> psi(M, [1, 2])            # y_1 has 2 tokens: (1.5 / 2 + 1.0) / 2
0.875
>>> psi(M, [1, 2], mode="reference_compat", max_new_tokens=5)   # (|-2 - -1| + |-3 - -1.5|) / 5 / 2
0.25

Identical responses whose confidence varies across prompts are sensitive for the paper's ψ, and invisible to the
library's transposed form (each row's off-diagonal entries equal its diagonal there):

>>> same = [[-0.1, -0.1, -0.1],
...         [-2.0, -2.0, -2.0],
...         [-4.0, -4.0, -4.0]]
>>> round(psi(same, [2, 2, 2]), 6)
1.3
>>> psi(same, [2, 2, 2], mode="reference_compat", max_new_tokens=2)
0.0
>>> posix([0.5, 1.0, 1.5])
1.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from posixlab.errors import PromptSetError

PAPER = "paper"
REFERENCE_COMPAT = "reference_compat"
PSI_MODES = (PAPER, REFERENCE_COMPAT)


def psi(logprobs, lengths: Sequence[int], *, mode: str = PAPER, max_new_tokens: int | None = None) -> float:
    """ψ of one prompt set.

    Args:
        logprobs: N×N array-like, ``logprobs[i][j] = log P(y_j | x_i)`` in nats (the sum over y_j's tokens).
        lengths: the token count L_j of each response y_j (an end-of-sequence token that the model generated
            counts: it was generated and it is scored). Used by ``mode="paper"``.
        mode: ``"paper"`` (Def. 3.3) or ``"reference_compat"`` (the authors' library 0.0.1, see module doc).
        max_new_tokens: the generation budget; required by ``"reference_compat"``, which divides by it.
    """
    matrix = np.asarray(logprobs, dtype=np.float64)
    n = _check_matrix(matrix)
    diagonal = np.diag(matrix)
    if mode == PAPER:
        length = np.asarray(lengths, dtype=np.float64)
        if length.shape != (n,):
            raise PromptSetError(f"got {length.size} response lengths for a set of {n} prompts; give one per response")
        if np.any(length < 1) or np.any(length != np.round(length)):
            raise PromptSetError(f"response lengths must be positive token counts, got {list(lengths)}")
        # column j holds y_j under every prompt; subtract y_j's own score M[j, j] and normalise by L_j.
        total = (np.abs(matrix - diagonal[None, :]) / length[None, :]).sum()
    elif mode == REFERENCE_COMPAT:
        if max_new_tokens is None or max_new_tokens < 1:
            raise PromptSetError("mode='reference_compat' divides by max_new_tokens: pass a positive max_new_tokens")
        # the library's |M[j][i] - M[j][j]| summed over i, j is the row-wise deviation from the diagonal.
        total = np.abs(matrix - diagonal[:, None]).sum() / max_new_tokens
    else:
        raise PromptSetError(f"unknown ψ mode {mode!r}; choose one of {', '.join(PSI_MODES)}")
    return float(total / (n * (n - 1)))


def psi_per_prompt(logprobs, lengths: Sequence[int]) -> list[float]:
    """ψ split by prompt: ``ψ_i = 1/(N−1) · Σ_j |M[i, j] − M[j, j]| / L_j``, how far prompt i moves the log-
    probabilities of the set's responses from those of the prompts that wrote them. Their mean is ψ (Def. 3.3),
    so a prompt with a low ψ_i is one the other prompts' answers already agree with (used to choose a prompt).

    >>> M = [[-1.0, -3.0],
    ...      [-2.0, -1.5]]
    >>> psi_per_prompt(M, [1, 1])          # row 0: |-3.0 - -1.5| = 1.5; row 1: |-2.0 - -1.0| = 1.0; mean 1.25 = ψ
    [1.5, 1.0]
    """
    matrix = np.asarray(logprobs, dtype=np.float64)
    n = _check_matrix(matrix)
    if len(lengths) != n or min(lengths) < 1:
        raise PromptSetError(f"need {n} response lengths of at least 1, got {list(lengths)}")
    diagonal = np.diag(matrix)
    scaled = np.abs(matrix - diagonal[None, :]) / np.asarray(lengths, dtype=np.float64)[None, :]
    return [float(row.sum() / (n - 1)) for row in scaled]


def posix(psis: Sequence[float]) -> float:
    """POSIX: the mean of ψ over the prompt sets of a data set (Def. 3.4)."""
    values = [float(v) for v in psis]
    if not values:
        raise PromptSetError("POSIX is the mean of ψ over prompt sets, and there are none: score at least one set")
    return math.fsum(values) / len(values)


def summarize(psis: Sequence[float]) -> dict:
    """POSIX with the spread of ψ across sets: mean, sample standard deviation (ddof=1), median, count.

    >>> summarize([0.5, 1.0, 1.5])
    {'posix': 1.0, 'mean': 1.0, 'sd': 0.5, 'median': 1.0, 'num_sets': 3}
    """
    values = np.asarray([float(v) for v in psis], dtype=np.float64)
    mean = posix(values.tolist())
    sd = float(values.std(ddof=1)) if values.size > 1 else None
    return {"posix": mean, "mean": mean, "sd": sd, "median": float(np.median(values)), "num_sets": int(values.size)}


def _check_matrix(matrix: np.ndarray) -> int:
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise PromptSetError(f"ψ needs a square N×N log-probability matrix, got shape {matrix.shape}")
    n = matrix.shape[0]
    if n == 0:
        raise PromptSetError("the prompt set is empty: ψ needs at least 2 intent-aligned prompts")
    if n == 1:
        raise PromptSetError(
            "the prompt set has a single prompt: ψ compares prompts with each other and needs at least 2 "
            "(the original plus at least one variant)"
        )
    if not np.all(np.isfinite(matrix)):
        raise PromptSetError("the log-probability matrix holds NaN or infinite values; rescore in float32")
    return n
