"""Print paraphrase sets from a paraphrase file as Markdown, to read what a rephraser wrote before trusting it.

    python -m experiments.show_paraphrases ~/.cache/posixlab/paraphrases/hf-qwen2.5-coder-0.5b-instruct.jsonl \
        --sets 3 --paraphrases 5
"""

from __future__ import annotations

import argparse

from experiments import paraphrase_file, run_main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a paraphrase JSONL file")
    parser.add_argument("--sets", type=int, default=3, help="how many originals to show (the first in the file)")
    parser.add_argument("--paraphrases", type=int, default=5, help="paraphrases shown per original")
    args = parser.parse_args(argv)
    store = paraphrase_file(args.file)
    for record in list(store.by_original.values())[: args.sets]:
        writer = record.get("rephraser_name", "user-supplied")
        print(f"**Original:** {record['original']}  \n*{len(record['paraphrases'])} paraphrases by {writer}, "
              f"{record.get('requests', '?')} requests, rejected: {record.get('rejected') or {}}*\n")
        for n, paraphrase in enumerate(record["paraphrases"][: args.paraphrases], 1):
            print(f"{n}. {paraphrase}")
        print()


if __name__ == "__main__":
    run_main(main)
