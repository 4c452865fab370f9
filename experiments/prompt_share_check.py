"""How well a budgeted accuracy run (``task.prompt_share`` < 1) estimates each prompt's accuracy: a finished run that
answered every prompt of a template or format pool (``task.psi=false`` or a ψ run) is the truth; each share and seed
keeps the cells a budgeted run would have asked (``posixlab.tasks.posix.asked_prompts``: the same draw, and a
budgeted run's answers are the full run's at those cells, tests/test_prompt_share.py) and compares, over the prompts,

- the **estimate** (``estimated_accuracy_per_prompt``: PromptEval's Rasch model, every set) and
- the **observed** accuracy (each prompt over the sets that asked it)

with the full run's per-prompt accuracies: mean absolute error, the error of the 5/50/95 % quantiles over prompts, and
whether the best prompt is found. Medians over ``--seeds`` seeds, per share, with the share of cells asked.

    python run.py variant=format task.num_sets=100 task.psi=false hydra.run.dir=outputs/full   # the truth
    python -m experiments.prompt_share_check outputs/full --shares 0.1,0.25,0.5 --seeds 10
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from posixlab.metrics.accuracy import accuracy_per_prompt, estimated_accuracy_per_prompt
from posixlab.results import read_sets
from posixlab.tasks.posix import asked_prompts


def full_grid(records: list[dict], reading: str) -> np.ndarray:
    rows = [[(a[reading] or {}).get("correct") for a in r["answers"]] for r in records if r.get("answers")]
    return np.array([[np.nan if c is None else float(c) for c in row] for row in rows])


def compare(records: list[dict], grid: np.ndarray, share: float, seed: int) -> dict | None:
    """The errors of one budget: None when the draw left a prompt unasked (a run refuses that draw up front)."""
    asked = np.zeros_like(grid, dtype=bool)
    for n, r in enumerate(r for r in records if r.get("answers")):
        asked[n, asked_prompts(r["set_id"], grid.shape[1], share, seed)] = True
    sample = np.where(asked, grid, np.nan)
    if (~asked).all(axis=0).any():
        return None
    truth = accuracy_per_prompt(grid)
    out = {"asked": float(asked.mean())}
    estimates = {"estimated": estimated_accuracy_per_prompt(sample), "observed": accuracy_per_prompt(sample)}
    for name, values in estimates.items():
        out[f"{name}_mae"] = float(np.abs(values - truth).mean())
        quantiles = np.quantile(values, [0.05, 0.5, 0.95]) - np.quantile(truth, [0.05, 0.5, 0.95])
        out[f"{name}_quantile_error"] = float(np.abs(quantiles).mean())
        out[f"{name}_best_found"] = float(truth[int(np.argmax(values))] == truth.max())
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a finished run of template or format variants that answered every prompt")
    parser.add_argument("--shares", default="0.1,0.25,0.5")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--reading", default="by_greedy", choices=("by_greedy", "by_options"))
    args = parser.parse_args(argv)
    records = read_sets(args.run)
    grid = full_grid(records, args.reading)
    print(f"{args.run}: {grid.shape[0]} sets × {grid.shape[1]} prompts, {args.reading}; full-run accuracy over "
          f"prompts {accuracy_per_prompt(grid).min():.3f} to {accuracy_per_prompt(grid).max():.3f}\n")
    print("| prompt_share | cells asked | draws | per-prompt MAE: estimated / observed | quantile error (5/50/95 %): "
          "estimated / observed | best prompt found: estimated / observed |")
    print("|---|---|---|---|---|---|")
    for share in (float(s) for s in args.shares.split(",")):
        found = [c for c in (compare(records, grid, share, seed) for seed in range(args.seeds)) if c is not None]
        if not found:
            print(f"| {share} | | 0 of {args.seeds} (a prompt never asked) | | | |")
            continue
        med = {key: statistics.median(c[key] for c in found) for key in found[0]}
        mean = {key: statistics.fmean(c[key] for c in found) for key in found[0] if key.endswith("best_found")}
        print(f"| {share} | {med['asked']:.0%} | {len(found)} of {args.seeds} | {med['estimated_mae']:.3f} / "
              f"{med['observed_mae']:.3f} | {med['estimated_quantile_error']:.3f} / "
              f"{med['observed_quantile_error']:.3f} | {mean['estimated_best_found']:.0%} / "
              f"{mean['observed_best_found']:.0%} |")
    print("\nMedians over the draws (best prompt found: the share of draws); a draw that never asks a prompt is left "
          "out, as a run refuses it before it starts.")


if __name__ == "__main__":
    main()
