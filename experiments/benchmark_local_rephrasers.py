"""Benchmark: the two in-process rephrasers, ``hf`` (transformers, float32) against ``llamacpp`` (the same model's
GGUF file, as quantized), writing the paraphrases of the same bundled MMLU questions (the offline cells' first, whose
paraphrases ship with posixlab) with the quality checks a run makes.

Each backend runs in a process of its own (so that its peak memory is its own), loads the rephraser and the
sentence-embedding model before the clock starts, and writes into a new paraphrase file under ``--out`` (the shipped
paraphrases are not read). Prints, per backend, the load time, the seconds to write, the requests that took, seconds
a request, questions a minute and the process's peak resident memory; then the ratio. The two files are kept:
``python -m experiments.compare_rephrasers OUT/hf.jsonl OUT/llamacpp.jsonl`` compares what each wrote.

    python -m experiments.benchmark_local_rephrasers --questions 2 --paraphrases 20 --out /tmp/rephrasers
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from posixlab.data.mmlu import load_mmlu

BACKENDS = ("hf", "llamacpp")


def questions_of(k: int) -> list[str]:
    """The first ``k`` questions of the offline cells' paraphrase runs, in their order: the shipped paraphrases'
    (posixlab/data/paraphrases/), which the packaged 1.5B wrote in 3.8 requests a question on average."""
    from posixlab.rephrase.source import shipped_files

    mmlu = {item.question for item in load_mmlu()}
    shipped = [text for f in shipped_files() for text in f.by_original if text in mmlu]
    return shipped[:k]


def write(backend: str, model: str, questions: list[str], n: int, out: Path, samples: int = 4) -> dict:
    """One backend's measures, in this process: its paraphrases of ``questions`` written into ``out/BACKEND.jsonl``."""
    from posixlab.paths import default_cache_dir
    from posixlab.rephrase.config import RephraserConfig
    from posixlab.rephrase.source import make_paraphrase_source

    path = out / f"{backend}.jsonl"
    path.unlink(missing_ok=True)
    source = make_paraphrase_source(RephraserConfig(backend=backend, model=model, path=str(path), shipped=False,
                                                    samples=samples),
                                    default_cache_dir())
    source.progress = False
    start = time.perf_counter()
    source.scorer, source.rephraser.lm  # the embedding model and the rephraser load before the clock starts
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    found = source.paraphrases_of(questions, n)
    seconds = time.perf_counter() - start
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return {"backend": backend, "load_s": loaded, "seconds": seconds, "requests": sum(r["requests"] for r in records),
            "failed": sum(not isinstance(r, tuple) for r in found.values()),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="a packaged model (%(default)s)")
    parser.add_argument("--questions", type=int, default=2, help="the offline cells' first K questions (2)")
    parser.add_argument("--paraphrases", type=int, default=20, help="paraphrases a question (20, as a run asks)")
    parser.add_argument("--samples", type=int, default=4, help="replies sampled a request (4, as a run asks)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the two paraphrase files")
    parser.add_argument("--only", choices=BACKENDS, help=argparse.SUPPRESS)  # the child process's one backend
    args = parser.parse_args(argv)
    questions = questions_of(args.questions)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only:
        print(json.dumps(write(args.only, args.model, questions, args.paraphrases, args.out, args.samples)))
        return 0
    rows = {}
    for backend in BACKENDS:
        child = subprocess.run([sys.executable, "-m", "experiments.benchmark_local_rephrasers", *(argv or sys.argv[1:]),
                                "--only", backend], capture_output=True, text=True)
        if child.returncode != 0:
            print(child.stderr[-3000:], file=sys.stderr)
            return child.returncode
        rows[backend] = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"{len(questions)} questions, {args.paraphrases} paraphrases each, {args.model}, 2 CPU cores:\n")
    print("| rephraser | load s | write s | requests | s a request | questions a minute | peak memory GB | failed |\n"
          "|---|---|---|---|---|---|---|---|")
    for r in rows.values():
        print(f"| {r['backend']} | {r['load_s']:.1f} | {r['seconds']:.1f} | {r['requests']} | "
              f"{r['seconds'] / max(r['requests'], 1):.1f} | {60 * len(questions) / r['seconds']:.2f} | "
              f"{r['peak_rss_gb']:.2f} | {r['failed']} |")
    print(f"\nllamacpp {rows['hf']['seconds'] / rows['llamacpp']['seconds']:.2f}x as fast as hf to write them, "
          f"{rows['hf']['peak_rss_gb'] / rows['llamacpp']['peak_rss_gb']:.1f}x less peak memory; compare what they "
          f"wrote: python -m experiments.compare_rephrasers {args.out / 'hf.jsonl'} {args.out / 'llamacpp.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
