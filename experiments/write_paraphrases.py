"""Write the paraphrases a configuration needs, without loading the model that would be scored.

    python -m experiments.write_paraphrases +experiment=offline_table1 dataset=mmlu_sample variant=paraphrase
    python -m experiments.write_paraphrases variant=paraphrase task.num_sets=115 rephraser=openai rephraser.base_url=...

Takes the same overrides as the posixlab command (one job, no sweep). Every question is tried even when some fail; the ones the
rephraser could not paraphrase are listed at the end with the ``dataset.exclude_items`` setting that leaves them out.
"""

from __future__ import annotations

import sys

from hydra import compose, initialize_config_dir

from posixlab.cli import CONF_DIR, expand_moved_settings, to_config
from posixlab.errors import PosixlabError
from posixlab.tasks.posix import build_prompt_sets


def main(overrides: list[str]) -> int:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=expand_moved_settings(overrides))
    run_config = to_config(cfg, output_dir=".")
    try:
        sets, about = build_prompt_sets(run_config, progress=cfg.progress)
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(sets)} prompt sets have their paraphrases in {about['variant_details'].get('paraphrase_file')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
