"""One source for every default: the library's dataclasses. The nodes that hold only defaults (``model/_defaults``,
``engine/default``) are registered from them (posixlab/cli.py); these tests fail when a value the YAML files still
state for the default run differs from its dataclass's default, so the command line and the Python API never run
with different defaults unnoticed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from posixlab.cli import CONF_DIR, to_config
from posixlab.data import DatasetSpec
from posixlab.embeddings import EmbeddingSpec
from posixlab.models import ModelSpec
from posixlab.rephrase import RephraserConfig
from posixlab.scoring import EngineOptions
from posixlab.tasks.classification import ClassificationConfig, ClassificationData
from posixlab.tasks.posix import PosixConfig

# Where the command line's default run deliberately differs from the library's default, and why. Anything else that
# differs is drift, and fails.
INTENDED = {
    "output_dir": "the command line writes into Hydra's run folder",
    "rephraser.instruction": "the instruction is chosen by a config group (conf/rephraser/instruction/)",
    "data.num_samples": "the offline default classifies 100 of the 285 sample questions; the library takes all",
    "cache_dir": "the command line reads $POSIXLAB_CACHE; the library's None means the same default folder",
}


def disagreements(built, default, prefix: str = "") -> list[str]:
    """The fields (dotted) where ``built`` differs from ``default``, recursing into nested dataclasses."""
    out = []
    for f in dataclasses.fields(default):
        a, b, name = getattr(built, f.name), getattr(default, f.name), prefix + f.name
        if name in INTENDED:
            continue
        if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
            out += disagreements(a, b, name + ".")
        elif a != b:
            out.append(f"{name}: the YAML gives {a!r}, the dataclass {b!r}")
    return out


def composed(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_the_default_posix_run_has_the_dataclass_defaults():
    built = to_config(composed(), "out")
    default = PosixConfig(model=ModelSpec(built.model.name, built.model.source, built.model.path),
                          dataset=DatasetSpec("mmlu", split="test"))
    assert disagreements(built, default) == []


def test_the_default_classification_run_has_the_dataclass_defaults():
    built = to_config(composed("task=classification"), "out")
    default = ClassificationConfig(model=ModelSpec(built.model.name, built.model.source, built.model.path),
                                   data=ClassificationData(split="test"))
    assert disagreements(built, default) == []


@pytest.mark.parametrize("group, cls", [("engine", EngineOptions), ("rephraser", RephraserConfig),
                                        ("embedding", EmbeddingSpec)])
def test_a_group_s_default_option_has_its_dataclass_defaults(group, cls):
    options = getattr(composed(), group)
    from omegaconf import OmegaConf

    values = {k: v for k, v in OmegaConf.to_container(options, resolve=True).items() if k != "instruction"}
    built = cls(**values)
    assert disagreements(built, cls()) == []


def test_every_model_config_restates_no_default_and_takes_the_server_settings_from_the_dataclass():
    import yaml

    defaults = {f.name: f.default for f in dataclasses.fields(ModelSpec) if f.default is not dataclasses.MISSING}
    for path in sorted(Path(CONF_DIR, "model").glob("*.yaml")):
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert config["defaults"][0] == "_defaults", path.name
        restated = {k: v for k, v in config.items() if k in defaults and v == defaults[k]}
        assert restated == {}, f"{path.name} restates ModelSpec's defaults {restated}: leave them to the dataclass"
    server = composed("model=llama2-7b").model.server
    assert dict(server) == {k: list(v) if isinstance(v, tuple) else v
                            for k, v in dataclasses.asdict(ModelSpec("m", "hub", "m").server).items()}


def test_task_schema_on_the_command_line_reads_the_file_into_the_config(tmp_path):
    """task.schema=FILE.json: the run's config holds the schema itself (its fingerprint follows the file)."""
    import json

    schema = {"title": "T", "type": "object", "properties": {"label": {"enum": ["A", "B", "C", "D"]}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    built = to_config(composed("task=classification", "strategy=structured",
                                              f"task.schema={tmp_path / 's.json'}"), "out")
    assert built.schema == schema
