"""One model behind a chat API and the same model in process: S, C, micro-F1 and the noise floor side by side, and
how often the two answer a prompt alike (issue 34's replication, figures/classification/api/).

    python -m experiments.api_comparison multirun/offline_errica_api/<time> \\
        multirun/offline_errica_api_inprocess/<time> --out figures/classification/api/

Copies each run's summary.json, summary.md, rephrasings.json and samples.jsonl into ``--out``/<backend>_<strategy>/
and writes ``comparison.md`` (the table) and ``comparison.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

KEPT = ("summary.json", "summary.md", "rephrasings.json", "samples.jsonl")


def runs(sweep: Path) -> dict[str, Path]:
    """strategy -> run folder, for every run of a sweep folder."""
    out = {}
    for folder in sorted(p for p in sweep.iterdir() if (p / "summary.json").is_file()):
        out[json.loads((folder / "summary.json").read_text(encoding="utf-8"))["strategy"]] = folder
    return out


def labels(folder: Path) -> dict[tuple[int, int], str]:
    """(sample index, prompt) -> the label at repeat 0."""
    out = {}
    for line in (folder / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for q, p in enumerate(record["predictions"]):
            out[record["sample_index"], q] = p["label"]
    return out


def row(summary: dict) -> dict:
    floor = summary.get("noise_floor") or {}
    beyond = floor.get("beyond_noise") or {}
    return {"S": summary["sensitivity"]["mean"], "C": summary["consistency"]["mean"],
            "F1": summary["micro_f1"]["mean"], "F1_sd": summary["micro_f1"]["sd"], "na_share": summary.get("na_share"),
            "floor_S": floor.get("fixed_prompt", {}).get("sensitivity"),
            "floor_flip": floor.get("fixed_prompt", {}).get("flip_rate"),
            "equal_S": floor.get("rephrasings_at_equal_count", {}).get("sensitivity"),
            "equal_flip": floor.get("rephrasings_at_equal_count", {}).get("flip_rate"),
            "beyond_S": beyond.get("sensitivity"), "beyond_flip": beyond.get("flip_rate")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chat", type=Path, help="the chat-API sweep folder")
    parser.add_argument("inprocess", type=Path, help="the in-process sweep folder")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sides = {"chat": runs(args.chat), "inprocess": runs(args.inprocess)}
    report = {}
    for strategy in sides["chat"]:
        entry = {}
        for side, found in sides.items():
            folder = found[strategy]
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            entry[side] = row(summary)
            keep = args.out / f"{side}_{strategy}"
            keep.mkdir(parents=True, exist_ok=True)
            for name in KEPT:
                shutil.copyfile(folder / name, keep / name)
        a, b = labels(sides["chat"][strategy]), labels(sides["inprocess"][strategy])
        entry["same_answer"] = sum(a[k] == b[k] for k in a) / len(a)
        report[strategy] = entry
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    ci = lambda d: "n/a" if not d else f"{d['value']:.3f} [{d['ci95'][0]:.3f}, {d['ci95'][1]:.3f}]"  # noqa: E731
    lines = ["| strategy | backend | S | C | micro-F1 (± sd over prompts) | floor: S · flip rate (repeats) | "
             "rephrasings at equal count: S · flip rate | beyond the floor: S [95% CI] | beyond: flip rate [95% CI] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for strategy, entry in report.items():
        for side, name in (("chat", "llama.cpp server, GGUF Q4_K_M"), ("inprocess", "transformers, float32")):
            r = entry[side]
            lines.append(f"| {strategy} | {name} | {fmt(r['S'])} | {fmt(r['C'])} | {fmt(r['F1'])} ± {fmt(r['F1_sd'])} | "
                         f"{fmt(r['floor_S'])} · {fmt(r['floor_flip'])} | {fmt(r['equal_S'])} · {fmt(r['equal_flip'])} "
                         f"| {ci(r['beyond_S'])} | {ci(r['beyond_flip'])} |")
    lines += ["", "Same answer, chat and in process, per (sample, prompt) at repeat 0: " +
              ", ".join(f"{s} {e['same_answer']:.1%}" for s, e in report.items())]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "comparison.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (args.out / "comparison.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
