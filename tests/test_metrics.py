"""ψ and POSIX against hand-computed values and a brute-force double loop."""

import itertools
import math

import numpy as np
import pytest

from posixlab.errors import PromptSetError
from posixlab.metrics import posix, psi, summarize


def psi_by_hand_loop(m, lengths):
    """Def. 3.3 written as the paper's double sum, term by term."""
    n = len(m)
    total = 0.0
    for i, j in itertools.product(range(n), range(n)):
        total += abs(math.log(math.exp(m[i][j]) / math.exp(m[j][j]))) / lengths[j]
    return total / (n * (n - 1))


def library_loop(m, max_new_tokens):
    """prompt-sensitivity-index 0.0.1's loop (posix.py), transcribed: abs(M[j][i] - M[j][j]) / max_new_tokens."""
    n = len(m)
    s = sum(abs(m[j][i] - m[j][j]) / max_new_tokens for i in range(n) for j in range(n))
    return s / (n * (n - 1))


def test_two_by_two_by_hand():
    m = [[-1.0, -3.0], [-2.0, -1.5]]
    # i=0,j=1: |M01 - M11| / L1 = |-3 + 1.5| / 3 = 0.5 ; i=1,j=0: |M10 - M00| / L0 = |-2 + 1| / 2 = 0.5
    assert psi(m, [2, 3]) == pytest.approx((0.5 + 0.5) / 2)


def test_three_by_three_by_hand():
    m = [[-1.0, -4.0, -2.0],
         [-3.0, -2.0, -2.5],
         [-1.5, -6.0, -0.5]]
    lengths = [1, 2, 4]
    # column 0 (L=1): |-3+1| + |-1.5+1| = 2.5 ; column 1 (L=2): (|-4+2| + |-6+2|)/2 = 3 ;
    # column 2 (L=4): (|-2+0.5| + |-2.5+0.5|)/4 = 0.875 ; sum 6.375 over 6 ordered pairs
    assert psi(m, lengths) == pytest.approx(6.375 / 6)


def test_identical_responses_with_different_confidence_are_sensitive():
    # Three prompts, the same 2-token response, log-probs -0.1 / -2 / -4: the paper's §3.3.4 case.
    m = [[-0.1] * 3, [-2.0] * 3, [-4.0] * 3]
    # |r_i - r_j| summed over ordered pairs = 2 * (1.9 + 3.9 + 2.0) = 15.6 ; / L=2 / 6 pairs = 1.3
    assert psi(m, [2, 2, 2]) == pytest.approx(1.3)
    assert psi(m, [2, 2, 2], mode="reference_compat", max_new_tokens=2) == 0.0  # the library's blind spot
    assert library_loop(m, 2) == 0.0


def test_reference_compat_matches_the_library_loop_and_differs_from_the_paper():
    rng = np.random.default_rng(0)
    m = -rng.gamma(2.0, 2.0, size=(5, 5))
    lengths = [5, 3, 5, 1, 4]
    assert psi(m, lengths, mode="reference_compat", max_new_tokens=5) == pytest.approx(library_loop(m.tolist(), 5))
    assert abs(psi(m, lengths) - library_loop(m.tolist(), 5)) > 1e-3


@pytest.mark.parametrize("n", [2, 3, 7, 21])
def test_vectorised_psi_equals_the_double_sum(n):
    rng = np.random.default_rng(n)
    m = -rng.gamma(1.5, 3.0, size=(n, n))
    lengths = rng.integers(1, 31, size=n).tolist()
    assert psi(m, lengths) == pytest.approx(psi_by_hand_loop(m.tolist(), lengths), rel=1e-12)


def test_psi_is_zero_when_every_response_is_scored_the_same_everywhere():
    m = np.tile(np.array([-1.0, -2.0, -3.0]), (3, 1))  # each column constant: no prompt changes any response's score
    assert psi(m, [1, 2, 3]) == 0.0


def test_posix_is_the_mean_over_sets_and_summary_reports_spread():
    assert posix([0.2, 0.4, 0.9]) == pytest.approx(0.5)
    s = summarize([0.2, 0.4, 0.9])
    assert s["sd"] == pytest.approx(np.std([0.2, 0.4, 0.9], ddof=1))
    assert s["median"] == 0.4 and s["num_sets"] == 3
    assert summarize([0.3])["sd"] is None


@pytest.mark.parametrize("matrix, message", [
    (np.zeros((0, 0)), "empty"),
    ([[-1.0]], "single prompt"),
    ([[-1.0, -2.0]], "square"),
    ([[-1.0, float("nan")], [-1.0, -1.0]], "NaN"),
])
def test_bad_sets_raise_a_clear_error(matrix, message):
    with pytest.raises(PromptSetError, match=message):
        psi(matrix, [1] * max(1, len(matrix)))


def test_bad_lengths_and_modes_raise():
    m = [[-1.0, -2.0], [-2.0, -1.0]]
    with pytest.raises(PromptSetError, match="one per response"):
        psi(m, [1])
    with pytest.raises(PromptSetError, match="positive"):
        psi(m, [0, 1])
    with pytest.raises(PromptSetError, match="max_new_tokens"):
        psi(m, [1, 1], mode="reference_compat")
    with pytest.raises(PromptSetError, match="unknown"):
        psi(m, [1, 1], mode="library")
    with pytest.raises(PromptSetError, match="none"):
        posix([])
