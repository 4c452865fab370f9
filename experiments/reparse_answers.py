"""Read every greedy response of saved POSIX run folders again with the current answer parser, and rebuild their
summaries; no model is loaded (the responses are in ``sets.jsonl``).

    python -m experiments.reparse_answers multirun/offline_table1/2026-11-26_08-17-43/0_smollm2-135m-instruct_mmlu_template_0shot

For each folder it prints how many prompts' readings changed (parsed -> unparsed, unparsed -> parsed, another
option) and the old and new greedy accuracy. Only the ``by_greedy`` reading changes: ψ and the options' reading do
not depend on the parser.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from posixlab.answers import LETTERS, matches_gold, parse_choice, prompt_choices
from posixlab.data import DatasetSpec, load_items
from experiments import run_main
from posixlab.errors import ConfigError
from posixlab.results import SETS_FILE, SUMMARY_FILE, SetWriter, read_sets, rebuild_summary


def greedy_reading(options: tuple[str, ...], answer: str, record: dict, response: str) -> dict:
    """A prompt's ``by_greedy`` reading, as a run records it (``posixlab.answers.set_answers``)."""
    if not options:
        return {"pred": None, "parsed": None, "correct": matches_gold(response, answer)}
    choices = prompt_choices(options, record)
    position = parse_choice(response, choices)
    pred = None if position is None else LETTERS[choices.order[position]]
    return {"pred": pred, "parsed": pred is not None, "correct": pred == answer}


def reparse(folder: Path) -> tuple[Counter, dict, dict]:
    if not (folder / SUMMARY_FILE).is_file() or not (folder / SETS_FILE).is_file():
        raise ConfigError(f"{folder} is not a finished POSIX run folder (it needs {SUMMARY_FILE} and {SETS_FILE})")
    old_summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    dataset = dict(old_summary["config"]["dataset"])
    items = {item.item_id: item for item in load_items(DatasetSpec(**dataset))}
    changes, records = Counter(), read_sets(folder)
    for record in records:
        if not record.get("answers"):
            continue
        item = items[record["item_id"]]
        for prompt, response, answer in zip(record["prompts"], record["responses"], record["answers"]):
            new = greedy_reading(item.options, answer["gold"], prompt, response["text"])
            old = answer["by_greedy"]
            if new["pred"] != old["pred"] or new["correct"] != old["correct"]:
                changes["parsed -> unparsed" if new["parsed"] is False and old["parsed"] else
                        "unparsed -> parsed" if new["parsed"] and old["parsed"] is False else "another option"] += 1
            answer["by_greedy"] = new
    with SetWriter(folder, SETS_FILE) as writer:
        for record in records:
            writer.write(record)
    return changes, old_summary, rebuild_summary(folder)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for folder in args.folders:
        changes, old, new = reparse(folder)
        before = (old.get("accuracy") or {}).get("by_greedy") or {}
        after = (new.get("accuracy") or {}).get("by_greedy") or {}
        print(f"{folder}: {dict(changes) or 'no reading changed'}; greedy accuracy {before.get('accuracy')} -> "
              f"{after.get('accuracy')}, parsed {before.get('parse_rate', {}).get('overall')} -> "
              f"{after.get('parse_rate', {}).get('overall')}")


if __name__ == "__main__":
    run_main(main)
