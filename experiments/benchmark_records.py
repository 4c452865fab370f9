"""Benchmark: reading a sweep's records into the per-set rows every table and figure is drawn from
(``python -m posixlab.analysis``, and each run's own figures), as posixlab does it (each cell's ``sets.jsonl``
streamed a line at a time, run folders read by a process a core above 256 MB) against the whole-file read it
replaced (the file's text split into lines and every record parsed and held, then the rows drawn). A synthetic sweep
of ``--cells`` cells of ``--sets`` sets of N = 21 prompts, records shaped like a 0-shot MMLU cell's (about 39 KB a
set, as a paper-sized cell's), is written first. Each method runs in a fresh process of its own, one after the
other, ``--repeats`` times; medians of seconds and of peak memory (the process's own, and its readers' where it
starts any) are printed with their ratios, after a check that both give the same rows.

    python -m experiments.benchmark_records                      # 4 cells of 2,000 sets (271 MB; about 45 s)
    python -m experiments.benchmark_records --cells 2 --sets 200
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from posixlab.analysis import collect
from posixlab.results import SETS_FILE, SUMMARY_FILE

N = 21


def write_sweep(root: Path, cells: int, sets: int) -> list[Path]:
    """``cells`` run folders of ``sets`` synthetic records each (seeded: the same bytes every time)."""
    rng = random.Random(0)
    folders = []
    for c in range(cells):
        folder = root / f"cell{c}"
        folder.mkdir(parents=True)
        summary = {"model": {"name": "benchmark"}, "dataset": "mmlu", "variant": f"variant{c}", "shots": 0,
                   "dataset_source": "sample"}
        (folder / SUMMARY_FILE).write_text(json.dumps(summary), encoding="utf-8")
        order = list(range(sets))
        rng.shuffle(order)  # the engine writes sets as they finish, not in the data set's order
        with open(folder / SETS_FILE, "w", encoding="utf-8") as handle:
            for index in order:
                handle.write(json.dumps(record(rng, index)) + "\n")
        folders.append(folder)
    return folders


def record(rng: random.Random, index: int) -> dict:
    words = lambda n: " ".join(f"w{rng.randrange(5000)}" for _ in range(n))  # noqa: E731
    answers = [{"by_options": {"pred": "ABCD"[rng.randrange(4)], "correct": rng.random() < 0.5},
                "by_greedy": {"pred": "ABCD"[rng.randrange(4)], "correct": rng.random() < 0.5}} for _ in range(N)]
    return {"set_index": index, "set_id": f"mmlu/s/{index}", "item_id": f"mmlu/s/{index}", "subject": "s",
            "answer": "A", "variant_type": "spelling", "max_new_tokens": 5, "exemplars": [],
            "prompts": [{"kind": "original" if j == 0 else "spelling", "text": words(170)} for j in range(N)],
            "responses": [{"text": words(3), "token_ids": [rng.randrange(50000) for _ in range(5)],
                           "ends_with_eos": False} for _ in range(N)],
            "logprob_matrix": [[-rng.random() * 30 for _ in range(N)] for _ in range(N)],
            "lengths": [5] * N, "psi": rng.random(), "psi_per_prompt": [rng.random() for _ in range(N)],
            "psi_reference_compat": rng.random(), "answers": answers,
            "factors": {"unique_responses": rng.randrange(1, N + 1), "response_entropy": rng.random(),
                        "semantic_coherence": rng.random(), "logprob_variance": rng.random(),
                        "logprob_sd": rng.random()}}


def whole_file_rows(folders: list[Path]) -> list[list[dict]]:
    """The method replaced: each file's text read whole, split into lines, every record parsed and held."""
    out = []
    for folder in folders:
        text = (folder / SETS_FILE).read_text(encoding="utf-8")
        records = sorted((json.loads(line) for line in text.split("\n") if line.strip()),
                         key=lambda r: r.get("set_index", 0))
        out.append(collect._rows_from_run(folder, records))
    return out


def _child(method: str, folders: list[Path], parallel_above: int, queue) -> None:
    collect.PARALLEL_READ_BYTES = parallel_above
    start = time.perf_counter()
    rows = whole_file_rows(folders) if method == "whole-file" else collect._rows_from_runs(folders)
    seconds = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    readers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the largest reader process
    queue.put((seconds, max(own, readers), rows))


def measure(folders: list[Path], method: str, parallel_above: int) -> tuple[float, int, list]:
    """Seconds and peak memory of one method, in a fresh process (spawned: nothing read before counts)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(method, folders, parallel_above, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark_records",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=4, help="run folders in the sweep (4)")
    parser.add_argument("--sets", type=int, default=2000, help="sets a cell (2,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each method (3); medians are printed")
    parser.add_argument("--parallel-above", type=float, default=collect.PARALLEL_READ_BYTES / 2**20,
                        help="MB of records above which posixlab reads run folders in parallel (its setting: 256)")
    args = parser.parse_args(argv)
    parallel_above = int(args.parallel_above * 2**20)
    with tempfile.TemporaryDirectory(prefix="posixlab-records-benchmark-") as root:
        folders = write_sweep(Path(root), args.cells, args.sets)
        size = sum((f / SETS_FILE).stat().st_size for f in folders)
        print(f"{args.cells} cells of {args.sets} sets of N = {N}: {size / 2**20:.0f} MB of records; "
              f"{collect._cores()} cores, readers in parallel above {args.parallel_above:g} MB")
        results = {}
        for method in ("whole-file", "posixlab"):
            runs = [measure(folders, method, parallel_above) for _ in range(args.repeats)]
            results[method] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                               runs[0][2])
        if results["whole-file"][2] != results["posixlab"][2]:
            print("the two methods gave different rows", file=sys.stderr)
            return 1
        for method, (seconds, peak, _) in results.items():
            print(f"{method:>10}: {seconds:6.2f} s, peak memory {peak / 2**20:7.0f} MB")
        (t0, m0, _), (t1, m1, _) = results["whole-file"], results["posixlab"]
        print(f"posixlab against the whole-file read: {t0 / t1:.2f}x faster, {m0 / m1:.1f}x less memory at its peak "
              f"(medians of {args.repeats}); the same rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
