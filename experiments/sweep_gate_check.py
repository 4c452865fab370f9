"""How often a gate over a sweep calls a metric worse where nothing changed: simulated sweeps of ``--cells`` cells,
each cell two runs of ``--sets`` sets whose per-set ψ are independent normal draws (no change), compared as
``posixlab compare`` compares two sweeps (``posixlab.compare_sweeps``: each interval at the Bonferroni level over
the cells) and as a loop of one-run comparisons at 95% each would. A single comparison calls "worse" about 2.5% of
the time by design (one side of a 95% interval).

    python -m experiments.sweep_gate_check --sweeps 2000 --cells 8 --sets 20
"""

from __future__ import annotations

import argparse

import numpy as np

from experiments import run_main
from posixlab.compare import CONFIDENCE, paired_metrics


def false_alarms(sweeps: int, cells: int, sets: int, levels: list[float], seed: int = 0) -> dict[float, float]:
    """The share of null sweeps in which some cell's ψ is called worse, at each per-cell interval level.

    >>> shares = false_alarms(40, 2, 10, [0.95], seed=1)
    >>> list(shares) == [0.95] and 0 <= shares[0.95] <= 1
    True
    """
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(levels, 0)
    for sweep in range(sweeps):
        pairs = [[[{"id": i, "psi": float(v)} for i, v in enumerate(rng.normal(size=sets))] for _ in "ab"]
                 for _ in range(cells)]
        for level in levels:
            hits[level] += any(paired_metrics(base, new, seed=sweep, confidence=level, metrics=["psi"])[0]["verdict"]
                               == "worse" for base, new in pairs)
    return {level: count / sweeps for level, count in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=2000, help="null sweeps simulated (default: %(default)s)")
    parser.add_argument("--cells", type=int, default=8, help="cells a sweep (default: %(default)s)")
    parser.add_argument("--sets", type=int, default=20, help="sets a cell (default: %(default)s)")
    args = parser.parse_args()
    bonferroni = 1 - (1 - CONFIDENCE) / args.cells
    shares = false_alarms(args.sweeps, args.cells, args.sets, [CONFIDENCE, bonferroni])
    print(f"{args.sweeps} null sweeps of {args.cells} cells × {args.sets} sets: ψ called worse in some cell")
    print(f"  each cell at {CONFIDENCE:.0%} (a loop of posixlab compare): {shares[CONFIDENCE]:.1%}")
    print(f"  each cell at {bonferroni:.3%} (posixlab compare of two sweeps): {shares[bonferroni]:.1%}")
    print(f"  one comparison at {CONFIDENCE:.0%}, for reference: 2.5% by design")


if __name__ == "__main__":
    run_main(main)
