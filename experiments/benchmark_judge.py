"""Benchmark: a judge's requests for one prompt set asked together against one at a time, on the same chats in one
process (``posixlab judge``, ``posixlab.backends.replies_and_first_tokens``).

- In this process (``--judge MODEL``): together, the chats' common prefix (the original's prompt and response) runs
  once and the chats are decoded in one batch over a copy of its keys and values; one at a time, each chat runs
  whole. Median seconds a set, their ratio, and how far apart the two are: replies that differ, the largest gap
  between first-token log-probabilities and between P(yes).
- Behind a server (``--base-url URL --judge NAME``): the set's requests one at a time against ``--concurrency``
  requests in flight (a vLLM server batches them; llama.cpp's Python server answers one at a time).

    python -m experiments.benchmark_judge RUN_DIR --judge qwen2.5-coder-0.5b-instruct --sets 4
    python -m experiments.benchmark_judge RUN_DIR --judge q --base-url http://127.0.0.1:8000/v1 --concurrency 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from posixlab.judge import REPLY_TOKENS, TOP_TOKENS, _what_is_judged, first_token_odds, judge_messages, same_response
from posixlab.results import SETS_FILE, iter_records


def set_chats(folder: str | Path, sets: int) -> list[list[list[dict]]]:
    """The chats the judge sends for the first ``sets`` sets of a run (one order): each differing response beside the
    original's."""
    records = sorted(map(_what_is_judged, iter_records(Path(folder), SETS_FILE)), key=lambda r: r["set_index"])
    out = []
    for record in records[:sets]:
        prompts, responses = record["prompts"], record["responses"]
        first = (prompts[0]["text"], responses[0]["text"])
        out.append([judge_messages(first, (p["text"], r["text"])) for p, r in zip(prompts[1:], responses[1:])
                    if r["text"] is not None and not same_response(r, responses[0])])
    return [chats for chats in out if chats]


def measure(together, alone, chats_by_set: list, repeats: int = 1) -> dict:
    """Seconds a set for ``together(chats)`` and ``[alone(chat) for chat in chats]``, each set timed both ways in
    turn (``repeats`` times), and how far apart their answers are."""
    times = {"alone": [], "together": []}
    replies_differ, logprob_gap, odds_gap, asked = 0, 0.0, 0.0, 0
    for chats in chats_by_set:
        for _ in range(repeats):
            start = time.perf_counter()
            one_by_one = [alone(chat) for chat in chats]
            times["alone"].append(time.perf_counter() - start)
            start = time.perf_counter()
            batched = together(chats)
            times["together"].append(time.perf_counter() - start)
        asked += len(chats)
        for (reply_a, tokens_a), (reply_b, tokens_b) in zip(one_by_one, batched):
            replies_differ += reply_a != reply_b
            if tokens_a and tokens_b:
                a, b = dict(tokens_a), dict(tokens_b)
                logprob_gap = max([logprob_gap] + [abs(a[t] - b[t]) for t in a.keys() & b.keys()])
                pa, pb = first_token_odds(tokens_a), first_token_odds(tokens_b)
                if pa is not None and pb is not None:
                    odds_gap = max(odds_gap, abs(pa - pb))
    alone_s, together_s = statistics.median(times["alone"]), statistics.median(times["together"])
    return {"sets": len(chats_by_set), "requests": asked, "alone_s_median": alone_s,
            "together_s_median": together_s, "ratio": alone_s / together_s, "replies_differ": replies_differ,
            "max_logprob_gap": logprob_gap, "max_p_yes_gap": odds_gap}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark_judge", description=__doc__.splitlines()[0])
    parser.add_argument("run", metavar="RUN_DIR", help="a finished POSIX run's folder")
    parser.add_argument("--judge", default="qwen2.5-coder-0.5b-instruct", help="the judge (default: %(default)s)")
    parser.add_argument("--base-url", help="ask the judge behind this OpenAI-compatible endpoint")
    parser.add_argument("--concurrency", type=int, default=8, help="with --base-url, requests in flight (8)")
    parser.add_argument("--sets", type=int, default=3, help="sets timed (3)")
    parser.add_argument("--repeats", type=int, default=1, help="times each set is timed each way (1)")
    options = parser.parse_args(argv)
    from posixlab.backends import open_to_generate, replies_and_first_tokens
    from posixlab.commands import judge_spec
    from posixlab.openai_client import Generation

    chats_by_set = set_chats(options.run, options.sets)
    if not chats_by_set:
        print(f"{options.run} has no set with a response that differs from its original's", file=sys.stderr)
        return 2
    greedy = Generation(REPLY_TOKENS, temperature=0.0)
    if options.base_url:
        fast = open_to_generate(judge_spec(options.judge, options.base_url, "OPENAI_API_KEY", options.concurrency))
        slow = open_to_generate(judge_spec(options.judge, options.base_url, "OPENAI_API_KEY", 1))
        ways = f"{options.concurrency} in flight against one at a time"
    else:
        fast = slow = open_to_generate(judge_spec(options.judge, None, "OPENAI_API_KEY"))
        ways = "together (a shared prefix, decoded in one batch) against each chat alone"
    result = measure(lambda chats: replies_and_first_tokens(fast, chats, greedy, TOP_TOKENS),
                     lambda chat: replies_and_first_tokens(slow, [chat], greedy, TOP_TOKENS)[0], chats_by_set,
                     options.repeats)
    print(f"judge {options.judge}, {ways}: {result['sets']} sets, {result['requests']} requests")
    print(f"seconds a set (median): one at a time {result['alone_s_median']:.2f}, together "
          f"{result['together_s_median']:.2f}; ratio {result['ratio']:.2f}x")
    print(f"replies that differ: {result['replies_differ']}; largest gap: first-token log-probability "
          f"{result['max_logprob_gap']:.1e}, P(yes) {result['max_p_yes_gap']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
