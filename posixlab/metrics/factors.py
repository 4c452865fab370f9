"""The four factors the paper wants ψ to reflect (§1, §3.3; analysed in §5.1, Figs. 1 and 7), per prompt set.

Responses are compared as exact sequences: the pipeline passes each response's token ids, so two responses are the
same response exactly when the model generated the same tokens (the paper says "unique responses" and does not
define uniqueness further).

>>> responses = ["Paris", "Paris", "Lyon", "Paris"]
>>> unique_responses(responses)
2
>>> round(response_entropy(responses), 4)          # -(3/4 ln 3/4 + 1/4 ln 1/4)
0.5623
>>> semantic_coherence([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])   # cosines 1, 0, 0 over the three pairs
0.3333333333333333

Variance in confidence applies to sets whose responses are all identical: the same response y, scored under every
prompt, gives log P(y | x_i) for i = 1..N, the diagonal of the set's log-probability matrix.

>>> M = [[-1.0, -1.0, -1.0],
...      [-2.0, -2.0, -2.0],
...      [-3.0, -3.0, -3.0]]
>>> confidence_dispersion(["B", "B", "B"], M)        # population variance and sd of (-1, -2, -3)
{'logprob_variance': 0.6666666666666666, 'logprob_sd': 0.816496580927726}
>>> confidence_dispersion(["B", "C", "B"], M) is None
True
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np

from posixlab.errors import PromptSetError

FACTOR_NAMES = ("unique_responses", "response_entropy", "semantic_coherence", "logprob_variance", "logprob_sd")
# why a set may have no log-prob factor: said under the factors' table (summary.md, report.html)
LOGPROB_FACTOR_NOTE = ("Log-prob variance and sd: of the log-likelihoods of a set's responses when every prompt gave "
                       "the same response (the paper's confidence factor); a set whose responses differ has none.")


def unique_responses(responses: Sequence[Hashable]) -> int:
    """Response diversity: the number of distinct responses in the set."""
    _check_responses(responses)
    return len(set(responses))


def response_entropy(responses: Sequence[Hashable]) -> float:
    """Response-distribution entropy: Shannon entropy, in nats, of how often each distinct response occurs.

    0 when every prompt gives the same response; ln N when all N responses differ (ln 21 ≈ 3.04, the right end of
    the paper's Fig. 1b axis, which is how we know the paper uses the natural log).

    >>> response_entropy(["a"] * 21)
    0.0
    >>> round(response_entropy([str(i) for i in range(21)]), 4) == round(math.log(21), 4)
    True
    """
    _check_responses(responses)
    n = len(responses)
    return math.fsum(-c / n * math.log(c / n) for c in Counter(responses).values()) + 0.0  # +0.0: no -0.0


def semantic_coherence(embeddings) -> float:
    """Semantic coherence: the mean cosine similarity over all pairs of response embeddings (one row each).

    Responses with identical text have identical embeddings and count as similarity 1.
    """
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] < 2:
        raise PromptSetError(f"semantic coherence needs at least 2 embeddings as rows of a matrix, got shape "
                             f"{matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1)
    if np.any(norms == 0):
        raise PromptSetError("an embedding is all zeros, so its cosine similarity is undefined")
    unit = matrix / norms[:, None]
    cosine = unit @ unit.T
    upper = np.triu_indices(matrix.shape[0], k=1)
    return float(cosine[upper].mean())


def confidence_dispersion(responses: Sequence[Hashable], logprobs) -> dict | None:
    """Variance in confidence: for a set whose responses are all identical, the spread of log P(y | x_i) over its
    prompts, as the population variance and standard deviation (ddof 0) of the summed log-probability, in nats².

    The paper plots a "log probability variance" (Fig. 1d) without a formula; its near-linear MMLU slope (ψ ≈ 0.225·x)
    matches a standard deviation, not a variance (posix-paper notes §1.7: for Gaussian log-probabilities of sd σ and
    L = 5, ψ = 2σ/(√π·5) ≈ 0.226σ). We record both and the figures can use either. ``None`` when responses differ.
    """
    _check_responses(responses)
    if len(set(responses)) != 1:
        return None
    matrix = np.asarray(logprobs, dtype=np.float64)
    if matrix.shape != (len(responses), len(responses)):
        raise PromptSetError(f"expected a {len(responses)}×{len(responses)} log-probability matrix, got "
                             f"{matrix.shape}")
    own = np.diag(matrix)  # log P(y | x_i): with one response, every column holds the same scores
    return {"logprob_variance": float(own.var()), "logprob_sd": float(own.std())}


def set_factors(responses: Sequence[Hashable], logprobs, embeddings=None) -> dict:
    """All four factors of one prompt set, as stored with the set (``semantic_coherence`` is None without
    embeddings; ``logprob_variance`` and ``logprob_sd`` are None unless every response is the same).

    >>> set_factors(["x", "x"], [[-1.0, -1.0], [-3.0, -3.0]])
    {'unique_responses': 1, 'response_entropy': 0.0, 'semantic_coherence': None, 'logprob_variance': 1.0, 'logprob_sd': 1.0}
    """
    dispersion = confidence_dispersion(responses, logprobs) or {"logprob_variance": None, "logprob_sd": None}
    return {
        "unique_responses": unique_responses(responses),
        "response_entropy": response_entropy(responses),
        "semantic_coherence": None if embeddings is None else semantic_coherence(embeddings),
        **dispersion,
    }


def _check_responses(responses: Sequence[Hashable]) -> None:
    if len(responses) == 0:
        raise PromptSetError("the set has no responses: factors need at least one")
