"""Benchmark: a rephraser writing paraphrases with several requests in flight against one at a time, on the same
questions in one process (``ParaphraseSource.paraphrases_of``, ``rephraser.max_concurrency``): a rephraser behind a
server (``--base-url``, ``--model``), or a model in this process (``--hf MODEL``: the ``hf`` rephraser, whose
requests in step are decoded in one batch; one at a time is then one request's replies in a batch).

Each way writes the first ``--questions`` bundled MMLU questions' paraphrases (of at most ``--max-chars``
characters, 130 as in the offline cells' paraphrase runs) into a paraphrase file of its own (the shipped ones are not
read), with the quality checks a run makes (the packaged sentence-embedding model, loaded before the clock starts).
Prints median seconds, questions a minute, the ratio, and how many questions got the same paraphrases both ways: each
request carries its own seed, so a server that samples a request the same whatever else it batches with gives the
same paraphrases at any concurrency (vLLM's CPU build did, for 5 of 5 questions; llama.cpp's Python server answers
one request at a time, so it gains nothing). An ``hf`` reply draws from its own seeded generator, so it is the same
in any batch, to float rounding.

    python -m experiments.benchmark_rephraser --base-url http://127.0.0.1:8000/v1 --model q --questions 5 \\
        --paraphrases 2 --concurrency 16
    python -m experiments.benchmark_rephraser --hf qwen2.5-coder-0.5b-instruct --questions 6 --paraphrases 3 \\
        --concurrency 12
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from posixlab.data.mmlu import load_mmlu
from posixlab.errors import RephraserError
from posixlab.paths import default_cache_dir
from posixlab.rephrase.config import RephraserConfig
from posixlab.rephrase.source import make_paraphrase_source


def write_once(base_url: str | None, model: str, questions: list[str], n: int, concurrency: int, folder: Path,
               validate: bool = True, local: str = "hf") -> tuple[float, dict]:
    """Seconds ``questions``' ``n`` paraphrases take with ``concurrency`` requests in flight, written into a new file
    in ``folder``, and what each question got (its paraphrases, or the error's text). ``base_url`` None: ``model``
    is the ``local`` rephraser's (``hf`` or ``llamacpp``), in this process (loaded before the clock starts, from the
    usual cache)."""
    backend = {"backend": "openai", "base_url": base_url} if base_url else {"backend": local}
    cfg = RephraserConfig(model=model, max_concurrency=concurrency, path=str(folder / f"at{concurrency}.jsonl"),
                          shipped=False, validate=validate, **backend)
    source = make_paraphrase_source(cfg, folder if base_url else default_cache_dir())
    source.progress = False
    source.scorer  # the embedding model loads before the clock starts
    source.rephraser.lm  # and the rephraser's, for one in this process
    start = time.perf_counter()
    found = source.paraphrases_of(questions, n)
    seconds = time.perf_counter() - start
    return seconds, {text: str(r) if isinstance(r, RephraserError) else r[0] for text, r in found.items()}


def measure(base_url: str | None, model: str, questions: list[str], n: int, concurrency: int, repeats: int = 1,
            validate: bool = True) -> dict:
    """Both ways, in turn, ``repeats`` times (a new file each time, so every request is sent)."""
    times = {1: [], concurrency: []}
    found = {}
    for _ in range(repeats):
        for way in times:
            with tempfile.TemporaryDirectory() as folder:
                seconds, found[way] = write_once(base_url, model, questions, n, way, Path(folder), validate)
            times[way].append(seconds)
    medians = {way: statistics.median(t) for way, t in times.items()}
    return {"questions": len(questions), "paraphrases": n, "seconds": medians,
            "ratio": medians[1] / medians[concurrency],
            "same": sum(found[1][q] == found[concurrency][q] for q in questions),
            "failed": {way: sum(isinstance(r, str) for r in f.values()) for way, f in found.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="the server's OpenAI-compatible URL, ending in /v1")
    parser.add_argument("--model", help="the name the server serves the rephraser under")
    parser.add_argument("--hf", metavar="MODEL", help="a model in this process instead (the hf rephraser's model)")
    parser.add_argument("--questions", type=int, default=8, help="the first K bundled MMLU questions (8)")
    parser.add_argument("--max-chars", type=int, default=130, help="the longest question taken, in characters (130)")
    parser.add_argument("--paraphrases", type=int, default=5, help="paraphrases a question (5)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight, against 1 (8)")
    parser.add_argument("--repeats", type=int, default=1, help="times each way is timed (1)")
    parser.add_argument("--no-validate", action="store_true", help="no quality checks (no embedding model)")
    args = parser.parse_args(argv)
    if args.concurrency < 2 or args.questions < 1 or args.paraphrases < 1 or args.repeats < 1:
        print("--concurrency must be 2 or more; --questions, --paraphrases and --repeats 1 or more", file=sys.stderr)
        return 2
    if bool(args.hf) == bool(args.base_url and args.model):
        print("give either --base-url and --model (a server) or --hf MODEL (in this process)", file=sys.stderr)
        return 2
    questions = list(dict.fromkeys(item.question for item in load_mmlu()
                                   if len(item.question) <= args.max_chars))[:args.questions]
    result = measure(args.base_url if not args.hf else None, args.hf or args.model, questions, args.paraphrases,
                     args.concurrency, args.repeats, not args.no_validate)
    where = f"{args.model} at {args.base_url}" if not args.hf else f"{args.hf} in this process (hf)"
    print(f"{result['questions']} questions, {result['paraphrases']} paraphrases each, {where}, median of "
          f"{args.repeats}:\n")
    print("| in flight | seconds | questions a minute | questions failed |\n|---|---|---|---|")
    for way, seconds in result["seconds"].items():
        print(f"| {way} | {seconds:.1f} | {60 * result['questions'] / seconds:.1f} | {result['failed'][way]} |")
    print(f"\n{result['ratio']:.2f}x with {args.concurrency} in flight; the same paraphrases for {result['same']} of "
          f"{result['questions']} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
