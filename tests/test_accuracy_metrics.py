"""Accuracy over many prompts (posixlab.metrics.accuracy): hand-computed values, edge cases, brute-force checks."""

import itertools
import math

import numpy as np
import pytest

from posixlab.errors import PromptSetError
from posixlab.metrics import (accuracy_per_prompt, accuracy_spread, average_performance, best_case_accuracy,
                              combined_performance_score, consistency_rate, max_performance,
                              prompt_sensitivity_score, two_way_bootstrap_ci, variants_needed, worst_case_accuracy,
                              estimated_accuracy_per_prompt, estimated_accuracy_spread)

# 5 items × 4 prompts. Column sums 4, 2, 3, 1 → accuracies 0.8, 0.4, 0.6, 0.2.
# Row sums (k of n = 4): 4, 2, 2, 1, 1.
M = [[1, 1, 1, 1],
     [1, 0, 1, 0],
     [1, 1, 0, 0],
     [1, 0, 0, 0],
     [0, 0, 1, 0]]


def test_accuracy_per_prompt_by_hand():
    assert accuracy_per_prompt(M).tolist() == pytest.approx([0.8, 0.4, 0.6, 0.2])
    # bools and ints alike; numpy input alike
    assert accuracy_per_prompt(np.array(M, dtype=bool)).tolist() == pytest.approx([0.8, 0.4, 0.6, 0.2])


def test_missing_cells_and_rows_without_gold():
    # row 1 has no gold and is dropped; cell (0, 1) is not scored: column 1 = 1/2 (rows 2, 3), column 0 = 2/3
    correct = [[1, None, 0],
               [None, None, None],
               [1, 1, 0],
               [0, 0, float("nan")]]
    assert accuracy_per_prompt(correct).tolist() == pytest.approx([2 / 3, 1 / 2, 0.0])
    # worst case over scored cells: row 0 min(1, 0) = 0, row 2 0, row 3 0 → 0; best: 1, 1, 0 → 2/3
    assert worst_case_accuracy(correct) == 0.0
    assert best_case_accuracy(correct) == pytest.approx(2 / 3)
    # PSS: row 0 has n = 2, k = 1 → 1/1; row 2 n = 3, k = 2 → 2/3; row 3 n = 2, k = 0 → 0. Mean 5/9
    assert prompt_sensitivity_score(correct) == pytest.approx(5 / 9)


def test_spread_by_hand():
    s = accuracy_spread(M)
    # accuracies 0.8, 0.4, 0.6, 0.2: mean 0.5, range 0.6, sd = sqrt((.09 + .01 + .01 + .09) / 3) = sqrt(0.2 / 3)
    assert s["num_prompts"] == 4
    assert s["mean"] == pytest.approx(0.5)
    assert (s["min"], s["max"]) == pytest.approx((0.2, 0.8))
    assert s["range"] == pytest.approx(0.6)
    assert s["sd"] == pytest.approx(math.sqrt(0.2 / 3))
    # sorted .2 .4 .6 .8; linear quantile at position q·3: q05 → 0.15 → .2 + .15·.2 = .23; q50 → 1.5 → .5;
    # q95 → 2.85 → .6 + .85·.2 = .77
    assert (s["q05"], s["q50"], s["q95"]) == pytest.approx((0.23, 0.5, 0.77))
    assert (s["argmax"], s["argmin"]) == (0, 3)


def test_spread_with_one_prompt():
    s = accuracy_spread([[1], [0], [1], [1]])
    assert s["sd"] is None
    assert s["range"] == 0.0
    assert s["mean"] == s["min"] == s["max"] == s["q05"] == s["q95"] == 0.75
    assert s["argmin"] == s["argmax"] == 0


def test_worst_and_best_case_by_hand():
    # only row 0 is right under all 4 prompts → 1/5; every row is right at least once → 5/5
    assert worst_case_accuracy(M) == pytest.approx(0.2)
    assert best_case_accuracy(M) == 1.0
    assert worst_case_accuracy([[0, 1], [0, 0]]) == 0.0
    assert best_case_accuracy([[0, 1], [0, 0]]) == 0.5


def test_mizrahi_metrics_by_hand():
    # MaxP = 0.8, AvgP = 0.5, CPS = 0.8 · (1 − (0.8 − 0.5)) = 0.8 · 0.7 = 0.56
    assert max_performance(M) == pytest.approx(0.8)
    assert average_performance(M) == pytest.approx(0.5)
    assert combined_performance_score(M) == pytest.approx(0.56)
    # one prompt: MaxP = AvgP, CPS = MaxP
    assert combined_performance_score([[1], [0]]) == 0.5
    # CPS ≤ MaxP always, with equality iff no spread
    rng = np.random.default_rng(1)
    for _ in range(20):
        c = rng.integers(0, 2, size=(7, 5))
        assert combined_performance_score(c) <= max_performance(c) + 1e-15


def test_pss_by_hand():
    # per row k(n − k) / C(4, 2) = k(4 − k) / 6 with k = 4, 2, 2, 1, 1: 0, 4/6, 4/6, 3/6, 3/6
    # → sum 14/6, mean over 5 items 14/30
    assert prompt_sensitivity_score(M) == pytest.approx(14 / 30)
    assert prompt_sensitivity_score([[1, 1, 1], [0, 0, 0]]) == 0.0  # all identical
    assert prompt_sensitivity_score([[1, 0]]) == 1.0
    assert prompt_sensitivity_score([[1], [0]]) is None  # one prompt: no pair


def test_consistency_by_hand():
    answers = [["A", "A", "B", "B"],   # pairs 6: AA, BB agree → 2/6
               ["C", "C", "C", "C"],   # 6/6
               ["A", None, None, "A"],  # only the AA pair agrees; None never agrees → 1/6
               [1, 2, 3, 4]]           # 0/6
    assert consistency_rate(answers) == pytest.approx((2 / 6 + 1 + 1 / 6 + 0) / 4)
    assert consistency_rate([["x"] * 5, ["y"] * 5]) == 1.0  # all identical
    assert consistency_rate([[None, None, None]]) == 0.0     # two unparsed answers do not agree
    assert consistency_rate([[float("nan"), float("nan")]]) == 0.0
    # ragged sets: item 0 has 3 answers (1/3), item 1 has 2 (1/1); item 2 has one answer, no pair, left out
    assert consistency_rate([["a", "a", "b"], ["c", "c"], ["d"]]) == pytest.approx((1 / 3 + 1) / 2)
    assert consistency_rate([["a"], ["b"]]) is None           # one prompt: undefined
    assert consistency_rate(np.array([["a", "a"], ["a", "b"]], dtype=object)) == 0.5


def test_consistency_bad_input():
    with pytest.raises(PromptSetError, match="at least one item"):
        consistency_rate([])
    with pytest.raises(PromptSetError, match="answers\\[1\\]"):
        consistency_rate([["a", "b"], "ab"])
    with pytest.raises(PromptSetError, match="unhashable"):
        consistency_rate([[["a"], ["a"]]])


def _pss_brute(matrix):
    terms = []
    for row in matrix:
        values = [v for v in row if not math.isnan(v)]
        pairs = list(itertools.combinations(values, 2))
        if pairs:
            terms.append(sum(abs(a - b) for a, b in pairs) / len(pairs))
    return sum(terms) / len(terms) if terms else None


def _consistency_brute(answers):
    terms = []
    for row in answers:
        pairs = list(itertools.combinations(row, 2))
        if pairs:
            terms.append(sum(a is not None and b is not None and a == b for a, b in pairs) / len(pairs))
    return sum(terms) / len(terms) if terms else None


def test_pss_and_consistency_against_double_loops():
    rng = np.random.default_rng(0)
    for trial in range(30):
        items, prompts = rng.integers(1, 12), rng.integers(2, 9)
        c = rng.integers(0, 2, size=(items, prompts)).astype(float)
        if trial % 2:
            c[rng.random(c.shape) < 0.2] = np.nan
            c[0] = rng.integers(0, 2, size=prompts)  # row 0 fully scored: every column keeps a scored cell
        expected = _pss_brute(c)
        got = prompt_sensitivity_score(c)
        assert (got is None and expected is None) or got == pytest.approx(expected, abs=1e-12)

        labels = np.array(["A", "B", "C", None], dtype=object)
        answers = [list(labels[rng.integers(0, 4, size=rng.integers(1, 8))]) for _ in range(items)]
        expected = _consistency_brute(answers)
        got = consistency_rate(answers)
        assert (got is None and expected is None) or got == pytest.approx(expected, abs=1e-12)


def test_variants_needed_by_hand_and_monotone():
    assert variants_needed([[1, 1, 1], [0, 0, 0]]) == 1            # every prompt has accuracy 1/2
    assert variants_needed([[1], [0]]) == 1                        # one prompt: n* ≤ P = 1
    # accuracies 1, 0, 1, 0 (AvgP 0.5). n = 2: the mean is 0.5 only when the pair holds one 1 and one 0,
    # 4 of the C(4, 2) = 6 pairs, so P(miss) = 1/3 > 0.1; n = 3: the mean is 1/3 or 2/3, always a miss; n = 4: exact
    alternating = [[1, 0, 1, 0]] * 3
    assert variants_needed(alternating, epsilon=0.01, delta=0.1) == 4
    assert variants_needed(alternating, epsilon=0.01, delta=0.5) == 2   # 1/3 ≤ 0.5, up to resampling noise
    assert variants_needed(alternating, epsilon=0.2, delta=0.1) == 3    # n = 3 misses by 1/6 < 0.2
    # monotone: a looser epsilon (or delta) never needs more variants, for a fixed seed
    rng = np.random.default_rng(3)
    c = (rng.random((40, 12)) < np.linspace(0.2, 0.9, 12)).astype(int)
    needed = [variants_needed(c, epsilon=e, delta=0.1, seed=5) for e in (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.3, 0.6)]
    assert needed == sorted(needed, reverse=True)
    assert needed[0] == 12 and needed[-1] == 1   # ε = 0: every prompt (accuracies differ); ε = 0.6: one
    by_delta = [variants_needed(c, epsilon=0.05, delta=d, seed=5) for d in (0.0, 0.05, 0.1, 0.3, 0.6)]
    assert by_delta == sorted(by_delta, reverse=True)
    # reproducible
    assert variants_needed(c, epsilon=0.03, seed=7) == variants_needed(c, epsilon=0.03, seed=7)


def test_variants_needed_bad_arguments():
    with pytest.raises(PromptSetError, match="epsilon"):
        variants_needed(M, epsilon=-0.1)
    with pytest.raises(PromptSetError, match="delta"):
        variants_needed(M, delta=1.0)
    with pytest.raises(PromptSetError, match="resamples"):
        variants_needed(M, resamples=0)


def test_two_way_bootstrap():
    rng = np.random.default_rng(2)
    c = (rng.random((30, 8)) < 0.6).astype(int)
    point = c.mean()
    lo, hi = two_way_bootstrap_ci(c, resamples=2000, seed=11)
    assert lo < point < hi
    assert (lo, hi) == two_way_bootstrap_ci(c, resamples=2000, seed=11)      # reproducible
    assert (lo, hi) != two_way_bootstrap_ci(c, resamples=2000, seed=12)
    # resampling prompts as well widens the interval when prompts differ a lot
    strong = np.concatenate([np.ones((30, 4), int), np.zeros((30, 4), int)], axis=1)
    strong[:, :4] = rng.random((30, 4)) < 0.9
    lo2, hi2 = two_way_bootstrap_ci(strong, resamples=2000, seed=0)
    lo1, hi1 = two_way_bootstrap_ci(strong[:, :1], resamples=2000, seed=0)      # one prompt: items only
    assert hi2 - lo2 > 0.3 > hi1 - lo1
    # another statistic of the matrix, e.g. MaxP
    lo_max, hi_max = two_way_bootstrap_ci(c, statistic=max_performance, resamples=300, seed=0)
    assert lo_max <= max_performance(c) <= hi_max + 1e-12
    # a wider confidence gives a wider interval
    lo90, hi90 = two_way_bootstrap_ci(c, confidence=0.9, resamples=2000, seed=11)
    assert lo <= lo90 and hi90 <= hi


def test_two_way_bootstrap_matches_an_explicit_loop():
    # scipy draws rows and columns independently with its generator: the same draws by hand give the same interval
    c = np.array(M, dtype=float)
    lo, hi = two_way_bootstrap_ci(c, resamples=500, seed=4)
    rng = np.random.Generator(np.random.PCG64(4))
    means = []
    # one scipy batch (2e6 // (5 + 4) > 500 resamples): first all row resamples, then all column resamples. This
    # follows scipy 1.17's order of draws; it checks that the two index samples are resampled independently
    rows = rng.integers(0, 5, size=(500, 5))
    cols = rng.integers(0, 4, size=(500, 4))
    for r, k in zip(rows, cols):
        means.append(c[np.ix_(r, k)].mean())
    assert (lo, hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])), abs=1e-12)


@pytest.mark.parametrize("shape, missing", [((300, 21), 0.1), ((40, 1), 0.0), ((17, 7), 0.0)])
def test_two_way_bootstrap_is_scipy_s_to_the_last_bit(shape, missing, monkeypatch):
    """The interval scipy.stats.bootstrap gives with the row and column indices as two unpaired samples and the
    matrix indexed by them (the design the docstring states), over several batches of resamples, with unscored
    cells, one prompt (items only), and another statistic: the same floats."""
    from scipy import stats

    from posixlab.metrics import accuracy

    monkeypatch.setattr(accuracy, "_CELLS_PER_BATCH", 3000)  # several batches of resamples
    rng = np.random.default_rng(9)
    c = (rng.random(shape) < 0.6).astype(float)
    c[rng.random(shape) < missing] = np.nan
    c[:, 0] = np.where(np.isnan(c[:, 0]), 1.0, c[:, 0])  # every item keeps a scored prompt
    batch = max(1, 3000 // sum(shape))

    def reference(statistic, resamples):
        def on_indices(*indices, axis=-1):
            rows = np.moveaxis(indices[0], axis, -1)
            cols = np.moveaxis(indices[1], axis, -1) if len(indices) > 1 else np.zeros(rows.shape[:-1] + (1,), int)
            return np.array([statistic(c[np.ix_(r, k)]) for r, k in zip(rows.reshape(-1, rows.shape[-1]),
                                                                       cols.reshape(-1, cols.shape[-1]))])
        samples = (np.arange(shape[0]), np.arange(shape[1])) if shape[1] > 1 else (np.arange(shape[0]),)
        result = stats.bootstrap(samples, on_indices, n_resamples=resamples, batch=batch, vectorized=True,
                                 paired=False, method="percentile", rng=np.random.Generator(np.random.PCG64(4)))
        return tuple(map(float, result.confidence_interval))

    assert two_way_bootstrap_ci(c, resamples=400, seed=4) == reference(np.nanmean, 400)
    if not missing:
        assert two_way_bootstrap_ci(c, statistic=max_performance, resamples=60, seed=4) == \
            reference(max_performance, 60)


def test_two_way_bootstrap_bad_input():
    with pytest.raises(PromptSetError, match="at least 2 items"):
        two_way_bootstrap_ci([[1, 0, 1]])
    with pytest.raises(PromptSetError, match="confidence"):
        two_way_bootstrap_ci(M, confidence=1.5)
    with pytest.raises(PromptSetError, match="resamples"):
        two_way_bootstrap_ci(M, resamples=0)


@pytest.mark.parametrize("function", [accuracy_per_prompt, accuracy_spread, worst_case_accuracy, best_case_accuracy,
                                      max_performance, average_performance, combined_performance_score,
                                      prompt_sensitivity_score, variants_needed, two_way_bootstrap_ci])
def test_bad_matrices(function):
    with pytest.raises(PromptSetError, match="no item has a scored answer"):
        function([[None, None], [np.nan, np.nan]])          # no gold anywhere: every item dropped
    with pytest.raises(PromptSetError, match="2-D"):
        function([1, 0, 1])
    with pytest.raises(PromptSetError, match="same number of prompts"):
        function([[1, 0], [1]])
    with pytest.raises(PromptSetError, match="not 1, 0 or NaN"):
        function([[1, 0.7]])
    with pytest.raises(PromptSetError, match="not 1, 0 or NaN"):
        function([[1, 2], [0, 1]])
    with pytest.raises(PromptSetError, match="at least one item"):
        function(np.zeros((0, 3)))
    with pytest.raises(PromptSetError, match="prompt 1 has no scored item"):
        function([[1, None], [0, None]])
    with pytest.raises(ValueError):  # PromptSetError is a ValueError
        function("11")


def test_a_tied_selection_half_chooses_no_prompt_and_says_so():
    """Every prompt right on the selection half (two sets, one each half): "best 0, worst 0" was printed as a choice."""
    from posixlab.metrics.selection import choose_prompt
    from posixlab.results import choice_lines, prompt_choice_lines

    tied = choose_prompt([[1, 1, 1], [0, 1, 0]], seed=0)
    assert tied["selection_tied"] and tied["selection_items"] == [0] and tied["held_out_mean"] == pytest.approx(1 / 3)
    (line,) = choice_lines({"accuracy_by_options": tied})
    assert line == ("prompt chosen by accuracy (options) on half the sets: none, every prompt scored 1.000 there "
                    "(mean of all prompts on the other half 0.333)")
    row = prompt_choice_lines({"accuracy_by_options": tied}, lambda v: f"{v:.3f}")[2]
    assert row == "| accuracy (options) | none: all 1.000 | | none | | 1.000 | 0.333 |"
    chosen = choose_prompt([[1, 0, 1], [0, 1, 0]], seed=0)
    assert not chosen["selection_tied"] and choice_lines({"accuracy_by_options": chosen})[0].startswith(
        "prompt chosen by accuracy (options) on half the sets: best 0, worst 1;")


# --- PromptEval's Rasch estimate of each prompt's accuracy over every item (estimated_accuracy_per_prompt) ----------
def test_a_full_grid_estimates_its_observed_accuracies_exactly():
    assert estimated_accuracy_per_prompt(M).tolist() == accuracy_per_prompt(M).tolist() == [0.8, 0.4, 0.6, 0.2]


def test_the_estimate_solves_a_one_parameter_case_by_hand():
    """Item 0 right under prompt 0, item 1 right under prompt 1, the other two cells not scored. Each parameter is
    in one scored cell and the penalty, and the grid is symmetric, so β0 = β1 = θ0 = θ1 = t where
    d/dβ0 [log(1 + e^(−(β0 + θ0))) + l2/2 · β0²] = 0, i.e. σ(−2t) = l2·t; each prompt's estimate is its scored 1 and
    σ(2t) for the other item, halved."""
    from scipy.optimize import brentq

    for l2 in (0.01, 0.5, 2.0):
        t = brentq(lambda t: 1 / (1 + math.exp(2 * t)) - l2 * t, 0.0, 1 / l2)
        got = estimated_accuracy_per_prompt([[1, None], [None, 1]], l2=l2)
        assert got.tolist() == pytest.approx([(1 + 1 / (1 + math.exp(-2 * t))) / 2] * 2, abs=1e-7)


def test_the_estimate_equals_promptevals_logistic_regression():
    """scikit-learn's LogisticRegression (C = 1/l2, no intercept) on one-hot item and prompt columns, PromptEval's
    own fit, written independently of ours: the same probabilities for the unscored cells."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    truth = rng.random((30, 6)) < rng.uniform(0.2, 0.9, 30)[:, None]
    grid = np.where(rng.random((30, 6)) < 0.5, truth.astype(float), np.nan)
    grid[:, 0] = truth[:, 0]  # every item scored at least once
    rows, cols = np.nonzero(~np.isnan(grid))
    features = np.zeros((rows.size, 36))
    features[np.arange(rows.size), rows] = 1
    features[np.arange(rows.size), 30 + cols] = 1
    fit = LogisticRegression(C=100.0, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(features, grid[rows, cols])
    beta, theta = fit.coef_[0][:30], fit.coef_[0][30:]
    filled = np.where(np.isnan(grid), 1 / (1 + np.exp(-(beta[:, None] + theta[None, :]))), grid)
    np.testing.assert_allclose(estimated_accuracy_per_prompt(grid), filled.mean(axis=0), atol=1e-5)


def test_the_estimate_undoes_the_bias_of_prompts_scored_on_different_items():
    """Rasch data, every cell drawn; then each even prompt is scored mostly on easy items and each odd one on hard
    ones, 31% of cells in all. Against the full grid's accuracies the estimate is off by a third of what the observed
    accuracies are (0.026 against 0.093 in mean absolute error)."""
    rng = np.random.default_rng(1)
    easiness, strength = rng.normal(0, 1.5, 300), rng.normal(0, 0.7, 40)
    full = (rng.random((300, 40)) < 1 / (1 + np.exp(-(easiness[:, None] + strength)))).astype(float)
    rank = np.argsort(np.argsort(easiness))[:, None] / 300
    seen = rng.random((300, 40)) < np.where(np.arange(40) % 2 == 0, 0.1 + 0.4 * rank, 0.5 - 0.4 * rank)
    grid = np.where(seen, full, np.nan)
    estimated = np.abs(estimated_accuracy_per_prompt(grid) - full.mean(axis=0)).mean()
    observed = np.abs(accuracy_per_prompt(grid) - full.mean(axis=0)).mean()
    assert estimated < 0.035 and observed > 0.08


def test_the_estimated_spread_and_bad_penalties():
    spread = estimated_accuracy_spread([[1, 1], [0, 0], [0, None], [None, 1]])
    assert spread["scored"] == 0.75 and spread["l2"] == 0.01 and spread["argmax"] == 1
    assert spread["mean"] == pytest.approx(0.5)
    assert spread["per_prompt"][0] == pytest.approx(1 - spread["per_prompt"][1])
    with pytest.raises(PromptSetError, match="l2 must be a positive penalty"):
        estimated_accuracy_per_prompt([[1, None], [0, 1]], l2=0)


def test_resamples_that_draw_no_scored_cell_are_left_out_of_the_interval():
    """Items 0 and 1 scored under different prompts: a resample of rows {0} with columns {1}, or rows {1} with
    columns {0}, has no cell and no mean (1/8 of them); the others give 1, 0 or between, so the interval is finite
    and covers the whole range."""
    with pytest.warns(RuntimeWarning, match=r"resamples have no value .* left out of the interval"):
        low, high = two_way_bootstrap_ci([[1, None], [None, 0]], resamples=2000, seed=0)
    assert (low, high) == (0.0, 1.0)
