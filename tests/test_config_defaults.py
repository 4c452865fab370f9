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
from posixlab.judge import JudgeConfig
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


def test_every_setting_of_a_config_group_can_be_set_on_the_command_line():
    """A dataclass field missing from its group's YAML keeps its default but cannot be overridden: `rephraser.shipped`
    was documented (docs/replication.md) and refused as "not a setting"."""
    cfg = composed()
    for group, cls in (("rephraser", RephraserConfig), ("engine", EngineOptions), ("dataset", DatasetSpec),
                       ("embedding", EmbeddingSpec), ("judge", JudgeConfig)):
        assert {f.name for f in dataclasses.fields(cls)} - set(cfg[group]) == set(), group
    assert to_config(composed("rephraser.shipped=false"), "out").rephraser.shipped is False


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
                                        ("embedding", EmbeddingSpec), ("judge", JudgeConfig)])
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


# --- task.* is a typed (structured) config, generated from the task's dataclass -----------------------------------

@pytest.mark.parametrize("task, cls", [("posix", PosixConfig), ("classification", ClassificationConfig)])
def test_a_task_s_settings_compose_to_its_dataclass_defaults(task, cls):
    from omegaconf import OmegaConf

    from posixlab.tasks import task_named

    task_type = task_named(task)
    node = OmegaConf.to_container(composed(f"task={task}").task, resolve=True)
    keys = {*task_type.task_settings, *task_type.moved_settings}
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(cls) if f.name in keys}
    assert {key: node[key] for key in keys} == defaults
    assert node["name"] == task


@pytest.mark.parametrize("overrides, key", [
    (["task.num_sets=abc"], "task.num_sets"), (["task.shots=[1,x]"], "task.shots"), (["task.psi=maybe"], "task.psi"),
    (["task=classification", "task.repeats=two"], "task.repeats"),
    (["task=classification", "task.schema_dimensions=abc"], "task.schema_dimensions"),
])
def test_a_task_setting_of_the_wrong_type_fails_at_compose_naming_the_key(overrides, key):
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ValidationError

    with pytest.raises(ConfigCompositionException) as caught:
        composed(*overrides)
    assert isinstance(caught.value.__cause__, ValidationError) and caught.value.__cause__.full_key == key


@pytest.mark.parametrize("argv, message", [
    (["task.num_sets=abc"], "task.num_sets takes an integer or null, not 'abc'"),
    (["num_sets=abc"], "task.num_sets takes an integer or null, not 'abc'"),  # the old spelling, moved
    (["task.shots=[1,x]"], "task.shots takes an integer, not '[1,x]'"),
    (["-m", "task.shots=0,1,x"], "task.shots takes an integer, not 'x' (in task.shots=0,1,x)"),
    (["task=classification", "task.repeats=two"], "task.repeats takes an integer, not 'two'"),
    (["task=classification", "task.schema_dimensions=abc"], "task.schema_dimensions takes a list of strings or null"),
    (["task=classification", "task.num_sets=abc"], "task.num_sets is a setting of task=posix"),  # instead_of first
])
def test_the_command_line_names_the_key_and_the_type_it_takes(argv, message):
    from posixlab.cli import check_override_keys, expand_moved_settings
    from posixlab.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        check_override_keys(expand_moved_settings(argv, notice=lambda text: None))
    assert message in str(caught.value)


@pytest.mark.parametrize("override, message", [
    ("engine.max_wave_rows=abc", "engine.max_wave_rows takes a whole number of at least 1 or null, not 'abc'"),
    ("engine.batch_tokens=0", "engine.batch_tokens takes a whole number of at least 1 or null, not 0"),
    ("engine.batch_tokens=12.5", "engine.batch_tokens takes a whole number of at least 1 or null, not 12.5"),
    ("engine.memory_gb=-1", "engine.memory_gb takes a number of GB above 0 or null, not -1"),
    ("engine.gpu_memory_gb=lots", "engine.gpu_memory_gb takes a number of GB above 0, auto or null, not 'lots'"),
])
def test_an_engine_setting_out_of_range_is_an_error_naming_it_before_a_model_loads(override, message):
    from posixlab.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        to_config(composed(override), "out")  # the run's configuration: nothing is loaded yet
    assert message in str(caught.value)
    to_config(composed("engine.max_wave_rows=64", "engine.memory_gb=0.5", "engine.gpu_memory_gb=null"), "out")


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "tpu", "gpu", "cuda:x"])
def test_the_model_device_is_checked_before_anything_loads(device):
    """A device the engine is not built for (``tpu``) failed inside torch's ``.to`` once the weights had loaded."""
    from posixlab.errors import ConfigError
    from posixlab.models.loading import check_spec

    spec = ModelSpec("m", "packaged", "smollm2-135m-instruct", device=device)
    if device in ("auto", "cpu", "cuda", "cuda:1"):
        check_spec(spec)
    else:
        with pytest.raises(ConfigError, match=f"unknown model.device '{device}'; choose auto"):
            check_spec(spec)


@pytest.mark.parametrize("argv", [
    ["task.num_sets=null", "task.shots=1", "task.psi=false", "task.option_text=true"], ["-m", "task.shots=0,1,2,3"],
    ["+experiment=offline_table2"], ["+experiment=offline_structured_mmlu"],
    ["task=classification", "strategy=structured", "task.variants=schema", "task.schema_dimensions=[rewording,order]",
     "task.schema={title: T}", "task.task_sentence=Pick one.", "task.probability=label_probs"],
])
def test_well_typed_task_settings_pass(argv):
    from posixlab.cli import check_override_keys

    check_override_keys(argv)


def test_an_annotation_omegaconf_cannot_type_is_any_and_the_rest_are_typed():
    """A task whose settings include a union with a container (OmegaConf 2.3 types none): that field takes anything,
    the others keep their types, and every default is the dataclass's."""
    import typing

    from omegaconf import OmegaConf
    from omegaconf.errors import ValidationError

    from posixlab.cli import task_schema
    from posixlab.tasks.base import Task

    @dataclasses.dataclass
    class ToyConfig:
        count: int = 3
        either: str | dict | None = None
        names: list[str] = dataclasses.field(default_factory=lambda: ["a"])

    class Toy(Task):
        name = "toy"
        config_type = ToyConfig
        task_settings = ("count", "either", "names")

    schema = task_schema(Toy)
    assert {f.name: f.type for f in dataclasses.fields(schema)} == {
        "count": int, "either": typing.Any, "names": list[str], "name": str, "run_name": str}
    node = OmegaConf.structured(schema)
    assert OmegaConf.to_container(node) == {"count": 3, "either": None, "names": ["a"], "name": "toy",
                                            "run_name": "???"}
    node.either = {"a": 1}
    node.either = "text"
    with pytest.raises(ValidationError):
        node.count = "many"


def test_help_lists_every_command_and_each_answers_its_own_help(capsys):
    """``posixlab help`` (Hydra's ``--help``, its header from conf/config.yaml) names every command besides a run, and
    the configuration groups; each command prints its own usage for ``--help`` on stdout and exits 0 (misused, on
    stderr with 2)."""
    import subprocess
    import sys

    from posixlab.cli import COMMANDS

    shown = subprocess.run([sys.executable, "-m", "posixlab", "help"], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    for name in COMMANDS:
        assert f"\nposixlab {name} " in shown.stdout
    assert "\n== Configuration groups ==" in shown.stdout and "\nvariant: format, mixture" in shown.stdout
    assert "\nposixlab --version " in shown.stdout
    version = subprocess.run([sys.executable, "-m", "posixlab", "--version"], capture_output=True, text=True,
                             timeout=300)  # posixlab's, not Hydra's alone ("Hydra 1.3.8")
    assert version.returncode == 0 and version.stdout.startswith("posixlab 0.") and "torch " in version.stdout
    def status_of(command, args):
        try:
            return command(args)
        except SystemExit as ended:  # argparse's
            return ended.code

    capsys.readouterr()
    for name, command in COMMANDS.items():
        status, shown = status_of(command, ["--help"]), capsys.readouterr()
        assert status in (0, None) and shown.out.startswith(f"usage: posixlab {name}") and not shown.err
        status, shown = status_of(command, []), capsys.readouterr()
        assert status == 2 and shown.err.startswith(f"usage: posixlab {name}") and not shown.out
    status, shown = status_of(COMMANDS["gguf-path"], ["llama2-7b"]), capsys.readouterr()
    assert status == 2 and shown.err.startswith("posixlab error: 'llama2-7b' is not a packaged model") and not shown.out
