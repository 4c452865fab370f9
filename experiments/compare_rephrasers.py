"""Compare rephrasers on the paraphrases they wrote of the same questions: one Markdown table, and a seeded sample of
paraphrases per rephraser to read by hand.

    python -m experiments.compare_rephrasers figures/paraphrases/qwen2.5-coder-0.5b-instruct.jsonl \\
        posixlab/data/paraphrases/mmlu_sample.qwen2.5-coder-1.5b-instruct.jsonl --sample 20 --out figures/rephrasers.md

Only the originals every file has are compared, so the rows describe the same questions. Per rephraser: how many
candidate lines its replies held and the share that passed every check (the basic ones and the quality rules the
file was written with), requests per accepted paraphrase (each request is ``samples`` sampled replies), the quality
measures of the accepted paraphrases (``posixlab.rephrase.quality``), and the rejections by reason. The hand-read
sample draws ``--sample`` (original, paraphrase) pairs per rephraser with a fixed seed (from the first
``--sample-questions`` questions of the first file, so a file that grows keeps its sample); the verdict column is
filled in by the reader, and a rerun that writes to the same ``--out`` carries the verdicts of unchanged rows over
and counts them, so adding questions never throws a reading away.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter
from pathlib import Path

from posixlab.rephrase.quality import summarize
from experiments import paraphrase_file, run_main


def latest_records(path: str) -> dict[str, dict]:
    """The last record of each original in a paraphrase file (a top-up or a re-check appends a newer one)."""
    return {original: record for original, record in paraphrase_file(path).by_original.items()}


def describe(records: list[dict], n: int) -> dict:
    candidates = sum(r.get("candidates", 0) for r in records)
    rejected = Counter()
    for r in records:  # a paraphrase accepted once and dropped by a later, stricter rule counts as rejected
        rejected.update(r.get("rejected") or {})
        rejected.update(r.get("dropped") or {})
    scores = [s for r in records for s in (r.get("quality") or {}).get("scores", [])[:n]]
    return {"questions": len(records), "candidates": candidates, "short": sum(len(r["paraphrases"]) < n for r in records),
            "accepted_share": (candidates - sum(rejected.values())) / candidates if candidates else float("nan"),
            "requests_per_paraphrase": sum(r.get("requests", 0) for r in records) / (n * len(records)),
            "rejected": rejected, **summarize(scores)}


def table(rows: dict[str, dict]) -> str:
    lines = ["| rephraser | questions | candidates | passed every check | requests per accepted paraphrase | "
             "similarity 5/50/95% | length ratio 5/50/95% | numbers kept | names kept | example words borrowed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, d in rows.items():
        sim, ratio = d["similarity_q05_q50_q95"], d["length_ratio_q05_q50_q95"]
        lines.append(f"| {name} | {d['questions']} | {d['candidates']} | {d['accepted_share']:.0%} | "
                     f"{d['requests_per_paraphrase']:.2f} | {sim[0]:.2f} / {sim[1]:.2f} / {sim[2]:.2f} | "
                     f"{ratio[0]:.2f} / {ratio[1]:.2f} / {ratio[2]:.2f} | {d['numbers_kept']:.0%} | "
                     f"{d['entities_kept']:.0%} | {d['borrowing']:.0%} |")
    lines += ["", "Rejections by reason (candidates):", ""]
    for name, d in rows.items():
        lines.append(f"- {name}: " + ", ".join(f"{reason} {count}" for reason, count in d["rejected"].most_common()))
    return "\n".join(lines)


def sample(records: list[dict], n: int, k: int, seed: int) -> list[tuple[str, str, float]]:
    pairs = [(r["original"], p, s["similarity"]) for r in records
             for p, s in zip(r["paraphrases"][:n], (r.get("quality") or {}).get("scores", [])[:n])]
    return random.Random(seed).sample(pairs, min(k, len(pairs)))


def read_verdicts(path: Path) -> dict[tuple[str, str, str], str]:
    r"""The filled-in verdicts of an earlier output: (rephraser, original cell, paraphrase cell) -> verdict.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     out = Path(d) / "r.md"
    ...     _ = out.write_text("Hand-read sample, big (seed 0):\n\n| 1 | A \\| B? | A or B? | 0.90 | yes |\n")
    ...     read_verdicts(out)
    {('big', 'A \\| B?', 'A or B?'): 'yes'}
    """
    verdicts, name = {}, None
    if not path.exists():
        return verdicts
    for line in path.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"Hand-read sample, (.+) \(seed \d+[^)]*\):$", line):
            name = heading.group(1).lower()  # a reader may have capitalised the file's name in the heading
        elif name and line.startswith("| ") and not line.startswith("| #"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]  # a pipe escaped as \| stays in its cell
            if len(cells) == 5 and cells[4]:
                verdicts[(name, cells[1], cells[2])] = cells[4]
    return verdicts


def cell(text: str) -> str:
    """A text as one Markdown table cell: line breaks as " / ", pipes escaped (MMLU writes "Statement 1 | ...")."""
    return text.replace("|", "\\|").replace("\n", " / ")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.compare_rephrasers", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", help="paraphrase files, one per rephraser")
    parser.add_argument("--n", type=int, default=20, help="paraphrases per question a run uses (default 20)")
    parser.add_argument("--sample", type=int, default=20, help="pairs per rephraser to read by hand (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-questions", type=int, help="draw the sample from the first K questions of the "
                        "first file that every file has (default: all of them)")
    parser.add_argument("--out", help="write the Markdown here too")
    args = parser.parse_args(argv)
    files = {Path(f).stem: latest_records(f) for f in args.files}
    shared = sorted(set.intersection(*(set(r) for r in files.values())))
    if not shared:
        print("the files have no original in common", file=sys.stderr)
        return 2
    rows = {name: describe([records[o] for o in shared], args.n) for name, records in files.items()}
    short = ", ".join(f"{name} {d['short']}" for name, d in rows.items() if d["short"])
    common = set(shared)
    in_order = [o for o in files[next(iter(files))] if o in common]  # the first file's order: its writing order
    sampled = sorted(in_order[:args.sample_questions] if args.sample_questions else shared)
    verdicts = read_verdicts(Path(args.out)) if args.out else {}
    parts = ["# Rephrasers compared", "",
             "Written by `python -m experiments.compare_rephrasers " + " ".join(argv) + "`; the last column of the "
             "hand-read samples is a person's reading: would the paraphrase have the same answer as the original?",
             "", f"{len(shared)} questions that every file paraphrased ({args.n} paraphrases a question; questions the "
             f"rephraser could not finish: {short or 'none'}).", "", table(rows)]
    counts = []
    for name, records in files.items():
        parts += ["", f"Hand-read sample, {name} (seed {args.seed}; from {len(sampled)} questions):", "",
                  "| # | original | paraphrase | similarity | meaning kept? |", "|---|---|---|---|---|"]
        rows = sample([records[o] for o in sampled], args.n, args.sample, args.seed)
        read = [verdicts.get((name.lower(), cell(o), cell(p)), "") for o, p, _ in rows]
        for i, ((original, paraphrase, similarity), verdict) in enumerate(zip(rows, read), 1):
            parts.append(f"| {i} | {cell(original)} | {cell(paraphrase)} | {similarity:.2f} | {verdict} |")
        if any(read):
            counts.append(f"{name} {sum(v.startswith('yes') for v in read)} of {sum(map(bool, read))} read")
    if counts:  # the reading, counted: a verdict that begins with "yes" keeps the meaning
        parts += ["", "Hand-read, meaning kept: " + "; ".join(counts) + "."]
    text = "\n".join(parts) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:]))
