"""Schema variants, per dimension and per model (issue 35's replication, figures/structured/): the figure (S per
dimension per model), the table (S, C and failure rate per dimension; S, C and micro-F1 over all the schemas) and
each run's files.

    python -m experiments.structured_figure multirun/offline_structured/<time>/* \\
        multirun/offline_structured_chat/<time> --out figures/structured/

Each argument is a run folder of ``strategy=structured`` (a sweep's subfolders, or one run): ``task.variants=schema``
runs give a bar per schema dimension; ``task.variants=sentence`` runs (the schema held, the task sentence rephrased:
offline_structured_sentence) give the "task sentence" bar beside them, the paper's own kind of rephrasing.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

KEPT = ("summary.json", "summary.md", "rephrasings.json", "samples.jsonl")
SENTENCE = "task sentence"
ORDER = ("description", "rewording", "order", "names", "key_order", "mode", SENTENCE)


def run_kind(summary: dict) -> str:
    """What the run's Q prompts vary: "schema", "schema: rewording" (dimensions asked for by name) or "task sentence"."""
    if summary["variants"] == "sentence":
        return SENTENCE
    asked = summary["config"].get("schema_dimensions")
    return "schema" + (f": {', '.join(asked)}" if asked else "")


def label(summary: dict) -> str:
    """The model and how it was run: in process (llguidance), on vLLM, or behind a chat API (instructor's mode)."""
    backend = summary["config"]["model"].get("backend", "transformers")
    how = {"transformers": "in process", "vllm": "vLLM", "chat": f"chat API, {summary['structured_mode']} mode"}
    return f"{summary['model']['name']} ({how.get(backend, backend)})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    rows, overall = [], []
    args.out.mkdir(parents=True, exist_ok=True)
    for folder in args.runs:
        if not (folder / "summary.json").is_file():
            continue
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        name, kind = label(summary), run_kind(summary)
        asked = summary["config"].get("schema_dimensions")  # a run of named dimensions keeps a folder of its own
        suffix = "_task_sentence" if kind == SENTENCE else ("_" + "-".join(asked) if asked else "")
        keep = args.out / f"{summary['model']['name']}_{summary['config']['model'].get('backend', 'transformers')}{suffix}"
        keep.mkdir(parents=True, exist_ok=True)
        for file in KEPT:
            if (folder / file).resolve() != (keep / file).resolve():  # the committed folders can be read again
                shutil.copyfile(folder / file, keep / file)
        structured = summary["structured"]
        overall.append({"model": name, "kind": kind, "dataset": summary["dataset"], "Q": summary["num_rephrasings"],
                        "samples": summary["num_samples"], "S": summary["sensitivity"]["mean"],
                        "C": (summary.get("consistency") or {}).get("mean"),
                        "F1": (summary.get("micro_f1") or {}).get("mean"),
                        "F1_sd": (summary.get("micro_f1") or {}).get("sd"),
                        "failure_rate": structured["failures"]["rate"], "failures": structured["failures"]["counts"]})
        if kind == SENTENCE:  # one schema: S over the task sentence's rephrasings is the run's S
            rows.append({"model": name, "dimension": SENTENCE, "variants": summary["num_rephrasings"] - 1,
                         "S": summary["sensitivity"]["mean"], "C": (summary.get("consistency") or {}).get("mean"),
                         "failure_rate": structured["failures"]["rate"], "failures": structured["failures"]["counts"]})
            continue
        for d in structured["per_dimension"]:
            rows.append({"model": name, "dimension": d["dimension"], "variants": d["num_variants"],
                         "S": d["sensitivity"], "C": d.get("consistency"), "failure_rate": d["failure_rate"],
                         "failures": d["failures"]})
    models = list(dict.fromkeys(r["model"] for r in rows))  # in the order given
    rows.sort(key=lambda r: (models.index(r["model"]),
                             ORDER.index(r["dimension"]) if r["dimension"] in ORDER else len(ORDER)))
    frame = pd.DataFrame(rows)
    order = [d for d in ORDER if d in set(frame["dimension"])]
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(11, 4))
    sns.barplot(frame, x="dimension", y="S", hue="model", order=order, ax=ax)
    ax.set_ylabel("sensitivity S")
    ax.set_xticks(range(len(order)), [d.replace("_", " ").replace(" ", "\n") for d in order])
    ax.set_xlabel("what the prompts vary: a schema dimension, or the task sentence (schema held)")
    ax.set_title("S over the original prompt and one dimension's variants", fontsize=10)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title=None, frameon=False)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(args.out / f"s_per_dimension.{ext}", dpi=150)
    plt.close(fig)
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    lines = ["| model | dimension | variants | S | C | failure rate (invalid JSON / missing field / out of enum) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        f = r["failures"]
        lines.append(f"| {r['model']} | {r['dimension']} | {r['variants']} | {fmt(r['S'])} | {fmt(r['C'])} | "
                     f"{r['failure_rate']:.3f} ({f['invalid_json']} / {f['missing_field']} / {f['out_of_enum']}) |")
    lines += ["", "| model | prompts vary | data | samples × Q | S (all Q) | C | micro-F1 (± sd over prompts) | "
                  "failure rate |", "|---|---|---|---|---|---|---|---|"]
    for o in overall:
        lines.append(f"| {o['model']} | {o['kind']} | {o['dataset']} | {o['samples']} × {o['Q']} | {fmt(o['S'])} | "
                     f"{fmt(o['C'])} | "
                     f"{fmt(o['F1'])} ± {fmt(o['F1_sd'])} | {o['failure_rate']:.3f} |")
    (args.out / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "table.json").write_text(json.dumps({"per_dimension": rows, "overall": overall}, indent=1) + "\n",
                                         encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
