"""Write the paraphrases a configuration needs, without loading the model that would be scored.

    python -m experiments.write_paraphrases +experiment=offline_table1 dataset=mmlu_sample variant=paraphrase
    python -m experiments.write_paraphrases variant=paraphrase task.num_sets=115 rephraser=openai rephraser.base_url=... \\
        rephraser.max_concurrency=64

Takes the same overrides as the posixlab command (one job, no sweep). Every question is tried even when some fail; the ones the
rephraser could not paraphrase are listed at the end with the ``dataset.exclude_items`` setting that leaves them out.
"""

from __future__ import annotations

import sys

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from posixlab.cli import CONF_DIR, check_override_keys, expand_model_aliases, expand_moved_settings, to_config
from posixlab.errors import PosixlabError
from posixlab.tasks.posix import PosixConfig, build_prompt_sets
from posixlab.variants import VARIANT_TYPES


def main(overrides: list[str]) -> int:
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__.strip())
        return 0
    overrides = expand_moved_settings(expand_model_aliases(overrides))
    try:
        check_override_keys(overrides)  # a typo is an error naming the closest key, as for the posixlab command
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides)
        run_config = to_config(cfg, output_dir=".")
        if not isinstance(run_config, PosixConfig):
            raise PosixlabError(f"this writes the paraphrases of a POSIX run (variant=paraphrase or mixture); a "
                                f"task={cfg.task.name} run writes its own rephrasings when it starts")
        generator = VARIANT_TYPES.get(run_config.variant)
        if generator is not None and not generator.uses_paraphrases:
            raise PosixlabError(f"variant={run_config.variant} uses no paraphrases, so there is nothing to write; "
                                f"give variant=paraphrase or variant=mixture")
        sets, about = build_prompt_sets(run_config, progress=cfg.progress)
    except (PosixlabError, HydraException, OmegaConfBaseException) as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(sets)} prompt sets have their paraphrases in {about['variant_details'].get('paraphrase_file')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
