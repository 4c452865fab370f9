"""Write the paraphrases a configuration needs, without loading the model that would be scored.

    python -m experiments.write_paraphrases +experiment=offline_table1 dataset=mmlu_sample variant=paraphrase
    python -m experiments.write_paraphrases variant=paraphrase num_sets=115 rephraser=openai rephraser.base_url=...

Takes the same overrides as run.py (one job, no sweep). Every question is tried even when some fail; the ones the
rephraser could not paraphrase are listed at the end with the ``dataset.exclude_items`` setting that leaves them out.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from posixlab.errors import PosixlabError
from posixlab.pipeline import build_prompt_sets

ROOT = Path(__file__).resolve().parent.parent


def main(overrides: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from run import to_run_config

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    run_config = to_run_config(cfg, output_dir=".")
    try:
        sets, about = build_prompt_sets(run_config, progress=cfg.progress)
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(sets)} prompt sets have their paraphrases in {about['variant_details'].get('paraphrase_file')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
