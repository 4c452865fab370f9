"""Benchmark: the three steps that made regenerating a paper grid's tables and figures slow (``python -m
posixlab.analysis``), each against the way it was done before, in this process, with a check that both give the
same numbers:

1. the two-way bootstrap interval of a cell's accuracy (``metrics.accuracy.two_way_bootstrap_ci``) against the
   same statistic through ``scipy.stats.bootstrap`` (the method it replaced), on an items × prompts matrix of
   correctness (a 14,042-set MMLU cell of N = 21 prompts by default);
2. a factor figure's trend band (``analysis.figures.trend_band``) against seaborn's bootstrap of ``np.polyfit``
   (what ``sns.regplot(order=2, ci=95)`` computes), on ``--points`` points;
3. a grid's per-cell statistics (``summary_rows`` and ``accuracy_rows``) in one process against one a core.

Each is timed ``--repeats`` times; medians and their ratios are printed.

    python -m experiments.benchmark_analysis                    # about a minute on 2 cores
    python -m experiments.benchmark_analysis --items 500 --points 2000 --cells 2 --sets 300 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from scipy import stats

from posixlab.analysis import collect
from posixlab.analysis.accuracy import accuracy_rows
from posixlab.analysis.figures import trend_band
from posixlab.analysis.tables import summary_rows
from posixlab.metrics import accuracy


def scipy_two_way(matrix: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The interval as computed before: ``scipy.stats.bootstrap`` over the row and column indices, the mean over
    scored cells of each resample from its draw counts."""
    items, prompts = matrix.shape
    scored = (~np.isnan(matrix)).astype(np.float64)
    values = np.nan_to_num(matrix, nan=0.0)

    def mean_of_resample(rows, cols, axis=-1):
        r = np.moveaxis(np.asarray(rows), axis, -1).astype(np.intp)
        c = np.moveaxis(np.asarray(cols), axis, -1).astype(np.intp)
        w, u = accuracy._draw_counts(r, items), accuracy._draw_counts(c, prompts)
        return ((w @ values) * u).sum(axis=1) / ((w @ scored) * u).sum(axis=1)

    batch = max(1, accuracy._CELLS_PER_BATCH // (items + prompts))
    result = stats.bootstrap((np.arange(items), np.arange(prompts)), mean_of_resample, n_resamples=10_000,
                             batch=batch, vectorized=True, paired=False, method="percentile",
                             rng=np.random.Generator(np.random.PCG64(seed)))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def seaborn_band(x: np.ndarray, y: np.ndarray, degree: int, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The band as seaborn computes it: 1,000 seeded resamples, ``np.polyfit`` on each, percentiles at the grid."""
    from seaborn.algorithms import bootstrap

    fits = bootstrap(x, y, func=lambda a, b: np.polyval(np.polyfit(a, b, degree), grid), n_boot=1000, seed=0)
    low, high = np.nanpercentile(fits, [2.5, 97.5], axis=0)
    return low, high


def grid_rows(cells: int, sets: int) -> list[dict]:
    """Per-set rows of ``cells`` synthetic 0-shot MMLU cells (seeded), with ψ and answers for both readings."""
    rng = np.random.default_rng(0)
    return [{"model": f"model{c}", "dataset": "mmlu", "variant": "template", "shots": 0, "item_id": f"q{i}",
             "psi": float(rng.gamma(2, 0.2)), "correct_options": "".join(rng.choice(["0", "1"], 21)),
             "pred_options": "".join(rng.choice(list("ABCD"), 21)),
             "correct_greedy": "".join(rng.choice(["0", "1", "-"], 21)),
             "pred_greedy": "".join(rng.choice(list("ABCD-"), 21))}
            for c in range(cells) for i in range(sets)]


def timed(function, repeats: int):
    """The function's result and the median of its seconds over ``repeats`` calls."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    return result, statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=14_042, help="items of the accuracy matrix (a cell's sets)")
    parser.add_argument("--points", type=int, default=20_000, help="points under the trend band (sets)")
    parser.add_argument("--cells", type=int, default=4, help="cells of the synthetic grid")
    parser.add_argument("--sets", type=int, default=3_000, help="sets a cell of the synthetic grid")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    matrix = (rng.random((args.items, 21)) < 0.6).astype(float)

    new, new_s = timed(lambda: accuracy.two_way_bootstrap_ci(matrix), args.repeats)
    old, old_s = timed(lambda: scipy_two_way(matrix), args.repeats)
    print(f"two-way bootstrap, {args.items} x 21: {new_s:.2f} s against scipy.stats.bootstrap's {old_s:.2f} s "
          f"({old_s / new_s:.1f}x); the same interval: {new == old} {new}")
    if new != old:
        return 1

    x = np.round(rng.gamma(2.0, 0.4, args.points), 3)
    y = 0.3 * x ** 2 - 0.5 * x + rng.normal(0, 0.4, args.points)
    grid = np.linspace(x.min(), x.max(), 100)
    band, new_s = timed(lambda: trend_band(x, y, 2, grid), args.repeats)
    reference, old_s = timed(lambda: seaborn_band(x, y, 2, grid), args.repeats)
    gap = max(float(np.max(np.abs(band[0] - reference[0]))), float(np.max(np.abs(band[1] - reference[1]))))
    print(f"trend band, {args.points} points: {new_s:.2f} s against seaborn's np.polyfit a resample {old_s:.2f} s "
          f"({old_s / new_s:.1f}x); largest difference {gap:.1e}")
    if gap > 1e-9:
        return 1

    rows = grid_rows(args.cells, args.sets)
    workers = min(args.cells, collect._cores(), collect.MAX_READERS)
    one, one_s = timed(lambda: (summary_rows(rows, workers=1), accuracy_rows(rows, workers=1)), args.repeats)
    many, many_s = timed(lambda: (summary_rows(rows, workers=workers), accuracy_rows(rows, workers=workers)),
                         args.repeats)
    print(f"per-cell statistics, {args.cells} cells of {args.sets} sets: {many_s:.2f} s in {workers} processes "
          f"against {one_s:.2f} s in one ({one_s / many_s:.1f}x); the same records: {one == many}")
    return 0 if one == many else 1


if __name__ == "__main__":
    sys.exit(main())
