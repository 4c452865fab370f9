"""What a prompt race (``task.race_sets``) would have saved and found on a run that asked every prompt: a finished
template or format run (``task.psi=false``, or a ψ run) is the truth; each round size replays the race on its grid
(``posixlab.metrics.race.race_on_grid``: a race asks the full run's cells, tests/test_prompt_race.py) on the options'
log-likelihoods where the run has them (as a race on that model compares), else the greedy answers, and prints the
share of answers asked, the prompts left racing, and whether the prompt with the highest accuracy over every set is
among them, beside the prompts the full grid cannot tell from the best (``best_prompt_set``).

    python run.py variant=template task.num_sets=100 task.psi=false hydra.run.dir=outputs/full   # the truth
    python -m experiments.race_check outputs/full --round-sets 10,25,50
"""

from __future__ import annotations

import argparse

import numpy as np

from experiments import run_main
from posixlab.errors import ConfigError
from posixlab.metrics.race import race_on_grid
from posixlab.metrics.selection import best_prompt_set
from posixlab.results import race_row, read_sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a finished run that asked every prompt of a template or format pool")
    parser.add_argument("--round-sets", default="10,25,50", help="round sizes to replay, comma-separated")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--reading", choices=("options", "greedy"), help="what the race compares (default: the "
                        "options' log-likelihoods where the run has them, as a race on that model would, else greedy)")
    args = parser.parse_args()
    records = read_sets(args.run)
    reading = args.reading or ("options" if any(a.get("by_options") for r in records for a in r.get("answers") or [])
                               else "greedy")
    full = [race_row(r, reading) for r in records]
    if not full or any(c is None for row in full for c in row):
        raise ConfigError(f"{args.run} did not answer every prompt of every set with a gold answer: race_check needs "
                          f"the full grid (a run without task.prompt_share or task.race_sets, multiple-choice data)")
    grid = np.array(full, dtype=float)
    means = grid.mean(axis=0)
    best = best_prompt_set(full, args.confidence)
    print(f"{args.run}: {len(full)} sets × {len(full[0])} prompts; {reading} accuracy over prompts "
          f"{means.min():.3f} to {means.max():.3f} (best: prompt {best['best']}); within noise of the best on the full "
          f"grid: {len(best['prompts'])} of {len(full[0])}")
    print("| sets a round | looks | answers asked | prompts left | best kept | dropped (prompt after sets) |")
    print("|---|---|---|---|---|---|")
    for round_sets in (int(n) for n in args.round_sets.split(",")):
        race, _ = race_on_grid(full, round_sets, args.confidence)
        asked = race["asked"]["cells"] / race["asked"]["of"]
        dropped = ", ".join(f"{e['prompt']}@{e['sets']}" for e in race["eliminated"]) or "none"
        print(f"| {round_sets} | {race['looks']} | {asked:.0%} | {len(race['alive'])} | "
              f"{'yes' if best['best'] in race['alive'] else 'no'} | {dropped} |")


if __name__ == "__main__":
    run_main(main)
