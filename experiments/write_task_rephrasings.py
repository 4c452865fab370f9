"""Write the rephrasings of the built-in classifiers' task sentences that ship with posixlab.

    python -m llama_cpp.server --model "$(posixlab gguf-path qwen2.5-coder-1.5b-instruct)" \\
        --host 127.0.0.1 --port 8765 --n_ctx 4096 --n_threads 2 &
    python -m experiments.write_task_rephrasings            # 29 a sentence (Q = 30, the paper's)

The packaged Qwen2.5-Coder-1.5B-Instruct, served by llama.cpp, writes them with the task-sentence instruction
(conf/rephraser/instruction/task_sentence.yaml) and the classification task's quality rules (no similarity floor:
conf/task/classification.yaml says why) into posixlab/data/paraphrases/task_sentences.qwen2.5-coder-1.5b-instruct.jsonl.
A classification run whose rephraser is that model (the default in process) then reads them and loads no rephraser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posixlab.classification_prompts import TASKS
from posixlab.rephrase import RephraserConfig, make_paraphrase_source

FILE = Path(__file__).resolve().parents[1] / "posixlab/data/paraphrases/task_sentences.qwen2.5-coder-1.5b-instruct.jsonl"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.write_task_rephrasings",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("count", nargs="?", type=int, default=29,
                        help="rephrasings a task sentence (default 29: Q = 30 with the sentence itself)")
    n = parser.parse_args(argv).count
    cfg = RephraserConfig(backend="openai", model="qwen2.5-coder-1.5b-instruct", base_url="http://127.0.0.1:8765/v1",
                          min_similarity=0.0, max_requests=24, timeout=600, path=str(FILE), shipped=False)
    source = make_paraphrase_source(cfg, FILE.parent, instruction="task_sentence")
    for name, sentence in TASKS.items():
        found, _ = source.paraphrases(sentence, n)
        print(f"{name}: {len(found)} rephrasings of {sentence!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
