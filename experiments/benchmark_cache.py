"""Benchmark: what opening a score cache costs when its folder holds another job's file of ``--rows`` scores (a
paper-sized MMLU cell writes 3-7 million): seconds to open, peak memory above the level before, and look-ups a
second, hits and misses. The other job's file is written first by a cache this process keeps open (a live job holds
its slot), then a second cache opens beside it and reads that file as its peer.

    python -m experiments.benchmark_cache                  # 3 million scores (a 412 MB file; about 2 minutes)
    python -m experiments.benchmark_cache --rows 200000
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time

from posixlab.scoring import ScoreCache

IDENTITY = {"name": "benchmark", "model": "none"}
BATCH = 100_000


def pair(rng: random.Random, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(rng.randrange(50_000) for _ in range(8)), (n,)


def measure(rows: int, lookups: int = 100_000) -> dict:
    folder = tempfile.mkdtemp(prefix="posixlab-cache-benchmark-")
    live = ScoreCache(folder, IDENTITY)  # the other job: it writes, and holds its file's slot
    rng = random.Random(0)
    written = []
    for start in range(0, rows, BATCH):
        scores = {pair(rng, n): -rng.random() * 20 for n in range(start, min(rows, start + BATCH))}
        live.store({}, scores, 5)
        written += list(scores)[:lookups // max(1, rows // BATCH)]
    size = live.path.stat().st_size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    cache = ScoreCache(folder, IDENTITY)  # reads the live job's file as its peer
    opened = time.perf_counter() - start
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024  # ru_maxrss is in KiB on Linux
    start = time.perf_counter()
    hits = sum(cache.score(p, r) is not None for p, r in written)
    hit_rate = len(written) / (time.perf_counter() - start)
    start = time.perf_counter()
    misses = sum(cache.score((1, 2, n), (3,)) is None for n in range(lookups))
    miss_rate = lookups / (time.perf_counter() - start)
    cache.close()
    live.close()
    if hits != len(written) or misses != lookups:
        raise AssertionError(f"{hits} of {len(written)} written scores found, {misses} of {lookups} misses")
    return {"rows": rows, "file_bytes": size, "open_s": opened, "peak_memory_growth_bytes": max(0, grown),
            "hits_per_s": hit_rate, "misses_per_s": miss_rate}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark_cache", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000, help="scores in the other job's file (3,000,000)")
    args = parser.parse_args(argv)
    r = measure(args.rows)
    print(f"another job's file of {r['rows']:,} scores ({r['file_bytes'] / 1e6:.0f} MB): opening beside it took "
          f"{r['open_s']:.1f} s and {r['peak_memory_growth_bytes'] / 2**30:.2f} GB of memory above the level before; "
          f"{r['hits_per_s']:,.0f} hits and {r['misses_per_s']:,.0f} misses a second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
