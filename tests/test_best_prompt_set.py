"""Which prompts are within noise of the best (``posixlab.metrics.selection.best_prompt_set``) and of the least
sensitive (``lowest_prompt_set``, ψ per prompt): hand-computed cases, the exact tests against brute-force
enumerations (and scipy's ``binomtest``), coverage and power on simulated grids, and where a run's summary, printed
lines and W&B keys show them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from posixlab.errors import PromptSetError
from posixlab.metrics import best_prompt_set, lowest_prompt_set
from posixlab.metrics.accuracy import accuracy_metrics


def brute_force_p(a: list, b: list) -> float:
    """P(prompt a is at least this far ahead of b) under the null: every item where exactly one of the two is right
    is equally likely to favour either; enumerate all 2^d assignments of those items (the conditional exact test)."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None and x != y]
    observed = sum(x > y for x, y in pairs)
    hits = sum(sum(flip) >= observed for flip in itertools.product((0, 1), repeat=len(pairs)))
    return hits / 2 ** len(pairs) if pairs else 1.0


def brute_force_set(grid: list, confidence: float = 0.95) -> tuple[list, list]:
    width = len(grid[0])
    column = [[row[j] for row in grid] for j in range(width)]
    adjusted = [min(1.0, (width - 1) * min(brute_force_p(column[k], column[j]) for k in range(width) if k != j))
                for j in range(width)]
    return [j for j in range(width) if adjusted[j] >= 1 - confidence], adjusted


def test_a_grid_by_hand_with_unscored_cells():
    # prompt 0 right on items 0-5, prompt 1 on items 0-1, prompt 2 on none; item 5 unscored for prompt 1
    grid = [[1, 1, 0], [1, 1, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0], [1, None, 0]]
    s = best_prompt_set(grid)
    # 0 vs 1 on items 0-4: 3 discordant, all 0's: p = 1/8; 0 vs 2: 6 discordant: 1/64; 1 vs 2 on items 0-4: 2: 1/4
    assert s["best"] == 0
    assert s["adjusted_p"] == pytest.approx([1.0, 2 / 8, 2 / 64])
    assert s["beaten_by"] == [None, 0, 0]
    assert s["prompts"] == [0, 1]  # 2 · 1/64 < 0.05 drops prompt 2; 2 · 1/8 does not drop prompt 1
    assert best_prompt_set(grid, confidence=0.7)["prompts"] == [0]  # 0.25 < 0.3


def test_the_exact_test_against_enumeration_and_scipy():
    rng = np.random.default_rng(3)
    for trial in range(25):
        items, width = int(rng.integers(2, 9)), int(rng.integers(2, 5))
        grid = rng.integers(0, 2, size=(items, width)).astype(object)
        grid[rng.random((items, width)) < 0.15] = None
        grid = grid.tolist()
        expected_set, expected_p = brute_force_set(grid)
        got = best_prompt_set(grid)
        assert got["adjusted_p"] == pytest.approx(expected_p, abs=1e-12), trial
        assert sorted(got["prompts"]) == expected_set, trial
    # one pair, against scipy's binomial test: 7 of 9 discordant items favour prompt 0
    grid = [[1, 0]] * 7 + [[0, 1]] * 2 + [[1, 1]] * 5
    assert best_prompt_set(grid)["adjusted_p"][1] == pytest.approx(binomtest(7, 9, 0.5, alternative="greater").pvalue)
    by_hand = sum(math.comb(9, k) for k in (7, 8, 9)) / 2 ** 9
    assert binomtest(7, 9, 0.5, alternative="greater").pvalue == pytest.approx(by_hand)


def rasch_grid(rng, strengths, items: int) -> np.ndarray:
    """Item difficulties shared by every prompt (correlated cells, as real grids have), prompt strengths fixed."""
    ease = rng.normal(0.0, 1.5, size=(items, 1))
    return (rng.random((items, len(strengths))) < 1 / (1 + np.exp(-(ease + np.asarray(strengths))))).astype(float)


def test_the_true_best_stays_in_the_set_and_clear_losers_leave():
    rng = np.random.default_rng(0)
    close = [0.3, 0.2, 0.1, 0.0, -0.3]  # prompt 0 best by a little
    kept = [0 in best_prompt_set(rasch_grid(rng, close, 150))["prompts"] for _ in range(300)]
    assert np.mean(kept) >= 0.95
    equal = [best_prompt_set(rasch_grid(rng, [0.0] * 5, 150))["prompts"] for _ in range(300)]
    assert min(np.mean([j in s for s in equal]) for j in range(5)) >= 0.95  # every prompt is a best one: each stays
    apart = [best_prompt_set(rasch_grid(rng, [2.0, 0.0, -0.5, -1.0], 150))["prompts"] for _ in range(100)]
    assert np.mean([s == [0] for s in apart]) >= 0.95  # a clear winner is found alone


def signed_rank_p(lower: list, higher: list) -> float:
    """The exact one-sided p that ``lower``'s values are below ``higher``'s: the share of the 2^d sign patterns of
    the d nonzero differences' midranks whose positive rank sum is at most the one observed."""
    from scipy.stats import rankdata

    diff = np.array([a - b for a, b in zip(lower, higher) if a is not None and b is not None and a != b])
    if diff.size == 0:
        return 1.0
    ranks = rankdata(np.abs(diff))
    observed = ranks[diff > 0].sum()
    hits = sum((ranks * np.array(signs)).sum() <= observed + 1e-9
               for signs in itertools.product((0, 1), repeat=diff.size))
    return hits / 2 ** diff.size


def test_the_lowest_set_against_enumeration_and_simulated_grids():
    rng = np.random.default_rng(5)
    for trial in range(20):
        items, width = int(rng.integers(3, 9)), int(rng.integers(2, 5))
        grid = np.round(rng.gamma(2.0, 0.3, (items, width)), 1).astype(object)  # rounded: ties and zeros
        grid[rng.random((items, width)) < 0.1] = None
        grid = grid.tolist()
        column = [[row[j] for row in grid] for j in range(width)]
        expected = [min(1.0, (width - 1) * min(signed_rank_p(column[k], column[j]) for k in range(width) if k != j))
                    for j in range(width)]
        got = lowest_prompt_set(grid)
        assert got["adjusted_p"] == pytest.approx(expected, abs=1e-12), trial
        assert sorted(got["prompts"]) == [j for j in range(width) if expected[j] >= 0.05], trial
    # ψ-like values: each set's own level, prompts shifted; prompt 0 lowest by a little, then a clear gap
    shifts = np.array([0.0, 0.02, 0.04, 0.5])
    kept, alone = [], []
    for _ in range(200):
        grid = rng.gamma(2.0, 0.3, (100, 1)) + shifts + rng.normal(0, 0.1, (100, 4))
        found = lowest_prompt_set(grid.tolist())["prompts"]
        kept.append(0 in found)
        alone.append(3 not in found)
    assert np.mean(kept) >= 0.95 and np.mean(alone) >= 0.95


def test_bad_grids_are_refused():
    with pytest.raises(PromptSetError, match="at least 2 prompts"):
        best_prompt_set([[1], [0]])
    with pytest.raises(PromptSetError, match="1 or 0"):
        best_prompt_set([[1, 0.5], [0, 1]])
    with pytest.raises(PromptSetError, match="between 0 and 1"):
        best_prompt_set([[1, 0], [0, 1]], confidence=95)
    with pytest.raises(PromptSetError, match="at least 2 prompts"):
        lowest_prompt_set([[0.1], [0.2]])


def format_records(correct: list[list[int]], kind: str = "format") -> list[dict]:
    """Set records as a run writes them (answers only), prompt 0 the original."""
    def answer(c):
        return {"gold": "A", "by_options": None, "by_greedy": {"correct": c, "pred": "A" if c else "B", "parsed": 1}}
    return [{"set_index": n, "set_id": f"s/{n}", "answers": [answer(c) for c in row],
             "prompts": [{"kind": "original" if j == 0 else kind, "index": j, "text": "x"} for j in range(len(row))]}
            for n, row in enumerate(correct)]


def test_a_runs_summary_names_the_set_for_shared_prompts_only():
    from posixlab.answers import accuracy_summary
    from posixlab.results import accuracy_lines, accuracy_table_lines

    grid = [[1, 1, 0]] * 2 + [[1, 0, 0]] * 8 + [[0, 0, 0]] * 2
    block = accuracy_summary(format_records(grid), seed=0)["by_greedy"]
    # 0 against 1: 8 of 8 discordant items, adjusted 2 · 2⁻⁸; 0 against 2: 10 of 10, 2 · 2⁻¹⁰
    assert block["best_prompts"]["prompts"] == [0]
    assert block["best_prompts"] == best_prompt_set(grid)
    assert "  within noise of the best (95%): prompt 0 (1 of 3)" in accuracy_lines({"by_greedy": block})
    table = "\n".join(accuracy_table_lines({"by_greedy": block, "num_sets": 12, "note": "n"}, str))
    assert "Within noise of the best prompt (95%; exact paired McNemar tests" in table
    assert accuracy_metrics({"by_greedy": block})["accuracy/by_greedy/best_prompts_count"] == 1
    spelling = accuracy_summary(format_records(grid, kind="spelling"), seed=0)["by_greedy"]
    assert spelling["best_prompts"] is None  # prompt j is a different misspelling of each item: nothing to choose


def test_the_prompt_choice_names_the_prompts_within_noise_of_the_least_sensitive():
    from posixlab.results import prompt_choice, prompt_choice_lines

    records = format_records([[1, 0, 1]] * 8)
    for n, r in enumerate(records):  # prompt 1 always the most sensitive, 0 and 2 alike
        r["psi_per_prompt"], r["logprob_matrix"], r["lengths"] = [0.2 + n / 100, 0.9, 0.2 + (n % 3) / 50], [], []
    near = prompt_choice(records)["by_psi"]["within_noise"]
    assert near == lowest_prompt_set([r["psi_per_prompt"] for r in records])
    assert near["prompts"] == [2, 0]  # 1 is above both on all 8 sets: p = 2⁻⁸, adjusted 2 · 2⁻⁸
    assert "least sensitive prompt by ψ per prompt (95%" in "\n".join(prompt_choice_lines(prompt_choice(records), str))
