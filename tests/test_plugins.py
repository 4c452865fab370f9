"""A backend, a task and a variant type from outside the package, each one module under tests/ (plugin_backend.py,
plugin_task.py, plugin_variant.py), run end to end through ``posixlab.runner.run``, shards and ``posixlab merge``, the
dry run and the gate, with no edit to posixlab: the claim that each is a one-module plug-in. No packaged model is
loaded (the variant type's sets are scored by the tiny model built in code, tests/tiny_model.py)."""

from __future__ import annotations

import json
import re
import shutil

import importlib
from pathlib import Path

import pytest

from posixlab.backends import BACKENDS
from posixlab.commands import gate_command, merge_command
from posixlab.errors import ConfigError
from posixlab.models.loading import ModelSpec
from posixlab.rephrase import RephraserConfig
from posixlab.runner import run
from posixlab.tasks.classification import ClassificationConfig, ClassificationData
from posixlab.tasks.posix import PosixConfig

from posixlab.tasks import TASK_TYPES
from posixlab.variants import VARIANT_TYPES
from tiny_model import tiny_lm  # noqa: F401  (the session fixture: a 2-layer model built in code)

RULE = ModelSpec("rule", "api", "rule", backend="rule-test")
plugin_backend = plugin_task = plugin_variant = None  # the plug-in modules, imported (and so registered) for this
# module's tests


@pytest.fixture(scope="module", autouse=True)
def plugins():
    """Import the two plug-ins, which registers them, as a user's ``import my_backend`` would; unregister them after
    this module, so that no other test sees a task or backend it does not know (conftest.py keeps pytest's doctest
    collection from importing them first)."""
    global plugin_backend, plugin_task, plugin_variant
    plugin_backend = importlib.reload(importlib.import_module("plugin_backend"))
    plugin_task = importlib.reload(importlib.import_module("plugin_task"))
    plugin_variant = importlib.reload(importlib.import_module("plugin_variant"))
    yield
    BACKENDS.pop(plugin_backend.NAME)
    TASK_TYPES.pop(plugin_task.AgreementTask.name)
    VARIANT_TYPES.pop(plugin_variant.KIND)


def test_the_rule_model_is_what_the_module_says():
    assert plugin_backend.rule_answer("What is 2 + 2?") == "D" and plugin_backend.rule_answer("What is 2 + 2 ?") == "B"
QUESTIONS = [["What is 2 + 2?", "What is 2 + 2 ?", "What is 2+2?"],
             ["Name a prime.", "Name a prime number.", "Give a prime."],
             ["Is the sky blue?", "Is the sky blue ?", "The sky: blue?"],
             ["Capital of France?", "France's capital?", "What is the capital of France?"]]


def agreement(tmp_path, name: str, **settings) -> plugin_task.AgreementConfig:
    return plugin_task.AgreementConfig(model=RULE, questions=QUESTIONS, output_dir=str(tmp_path / name),
                                       cache_dir=str(tmp_path / "cache"), **settings)


def expected_agreement(wordings: list[str]) -> float:
    answers = [plugin_backend.rule_answer(w) for w in wordings]
    return max(answers.count(a) for a in answers) / len(answers)


def test_a_task_and_a_backend_from_outside_run_shard_merge_and_gate(tmp_path, capsys):
    whole = run(agreement(tmp_path, "whole"), progress=False)
    assert whole["task"] == "agreement" and whole["engine"]["kind"] == "in-process"
    values = [expected_agreement(q) for q in QUESTIONS]
    assert whole["agreement"]["mean"] == pytest.approx(sum(values) / len(values))
    assert whole["capabilities"] == ["generate"]  # the registration's, declared once
    assert whole["rule"] == {"answered": 12, "from_cache": 0}  # the backend's own report, in the summary
    again = run(agreement(tmp_path, "again"), progress=False)
    assert again["rule"] == {"answered": 0, "from_cache": 12}  # its cache, opened and closed by the runner

    shards = [str(tmp_path / f"shard{k}") for k in (1, 2)]
    for k, folder in enumerate(shards, 1):
        run(agreement(tmp_path, f"shard{k}", shard=f"{k}/2"), progress=False)
    assert merge_command([str(tmp_path / "merged"), *shards]) == 0
    assert capsys.readouterr().out.startswith(f"agreement = {whole['agreement']['mean']:.4f} (4 questions from 2 "
                                              f"shards)")
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert merged["agreement"] == whole["agreement"]

    low, high = whole["agreement"]["mean"] - 0.01, whole["agreement"]["mean"] + 0.01
    assert gate_command([str(tmp_path / "merged"), f"gate.min_agreement={low}"]) == 0
    assert gate_command([str(tmp_path / "merged"), f"gate.min_agreement={high}"]) == 1
    assert "| min_agreement | agreement.mean |" in capsys.readouterr().out
    assert gate_command([str(tmp_path / "merged"), "gate.max_posix=0.5"]) == 2  # not this task's metric
    assert "only task=posix runs have; this is a task=agreement run (its gates: min_agreement)" in \
        capsys.readouterr().err


def test_the_dry_run_asks_the_backend_what_it_would_do(tmp_path):
    run(agreement(tmp_path, "first"), progress=False)
    plan = run(agreement(tmp_path, "dry", dry_run=True), progress=False)["dry_run"]
    assert plan == {"task": "agreement", "model": "rule", "units": 4, "requests": 4, "prompts": 12,
                    "to_answer": 0, "cached": 12}
    assert not (tmp_path / "dry" / plugin_task.RECORDS).exists()


def test_the_outside_backend_runs_the_built_in_tasks(tmp_path, rephrasings_file):
    """Classification (greedy answers: text is enough) and POSIX's answers-only run; ψ is refused, before any work."""
    data = ClassificationData("mmlu_letters", num_samples=4)
    rephraser = RephraserConfig(backend="file", path=str(rephrasings_file), validate=False)
    summary = run(ClassificationConfig(model=RULE, data=data, num_rephrasings=3, rephraser=rephraser,
                                       output_dir=str(tmp_path / "cls"), cache_dir=str(tmp_path / "cache")),
                  progress=False)
    records = [json.loads(line) for line in (tmp_path / "cls" / "samples.jsonl").read_text().splitlines()]
    assert summary["num_samples"] == 4 and len(records) == 4
    for record in records:  # every answer is one of the rule's letters, parsed as the class it names
        assert all(p["answer"] in plugin_backend.LETTERS and p["label"] == p["answer"] for p in record["predictions"])
    assert len({p["answer"] for r in records for p in r["predictions"]}) > 1
    answers = run(PosixConfig(model=RULE, dataset=_mmlu(), num_sets=2, num_variants=2, psi=False, embedding=None,
                              output_dir=str(tmp_path / "posix"), cache_dir=str(tmp_path / "cache")), progress=False)
    assert answers["psi"] is None and answers["num_sets"] == 2
    with pytest.raises(ConfigError, match="cannot score"):
        run(PosixConfig(model=RULE, dataset=_mmlu(), num_sets=2, output_dir=str(tmp_path / "psi")), progress=False)
    assert not (tmp_path / "psi").exists()


def _mmlu():
    from posixlab.data import DatasetSpec

    return DatasetSpec("mmlu", source="sample")


def test_an_outside_variant_type_builds_seeded_sets_that_a_run_scores(tmp_path, tiny_lm):  # noqa: F811
    """``variant=casing`` from Python: each set is the original and its variants as the module's ``edit`` makes them
    (their records kept), the same in a second run; the run scores them like any built-in type's."""
    from tiny_model import SPEC

    from posixlab.data import DatasetSpec, load_items, select_items
    from posixlab.tasks.posix import PosixConfig

    def casing_run(name: str) -> tuple[dict, list[dict]]:
        cfg = PosixConfig(model=SPEC, dataset=DatasetSpec("mmlu"), variant="casing", num_sets=3, num_variants=4,
                          max_new_tokens=3, embedding=None, output_dir=str(tmp_path / name), score_cache=False)
        summary = run(cfg, lm=tiny_lm, progress=False)
        lines = (tmp_path / name / "sets.jsonl").read_text(encoding="utf-8").splitlines()
        return summary, sorted((json.loads(line) for line in lines), key=lambda r: r["set_index"])

    summary, records = casing_run("first")
    assert summary["variant"] == "casing" and summary["psi"]["num_sets"] == 3
    casing = plugin_variant.CasingVariants()
    for item, record in zip(select_items(load_items(DatasetSpec("mmlu")), 3, 0), records):
        assert [p["kind"] for p in record["prompts"]] == ["original"] + ["casing"] * 4
        for v, prompt in enumerate(record["prompts"][1:]):
            edit = casing.edit(item, v, 0)
            assert prompt["record"] == edit.record and len(edit.record["upper_cased"]) == 1 + v % 3
            assert edit.question in prompt["text"] and all(w.isupper() for w in edit.record["upper_cased"])
        assert isinstance(record["psi"], float)
    assert casing_run("again")[1] == records  # seeded: the same sets, responses and numbers
    mixed = PosixConfig(model=SPEC, dataset=DatasetSpec("mmlu"), variant="mixture", num_sets=2, num_variants=3,
                        variant_options={"kinds": ["spelling", "casing"]}, max_new_tokens=3, embedding=None,
                        output_dir=str(tmp_path / "mixed"), score_cache=False)
    assert run(mixed, lm=tiny_lm, progress=False)["psi"]["num_sets"] == 2  # a mixture draws from it too: 2 + 2
    first = json.loads((tmp_path / "mixed" / "sets.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert sorted(p["kind"] for p in first["prompts"]) == ["casing", "casing", "spelling", "spelling"]


def test_a_variant_type_s_options_are_its_constructor_s_keywords_on_the_command_line_and_in_python(tmp_path,
                                                                                                tiny_lm):  # noqa: F811
    """``variant.options.most=1`` sets the casing type's keyword (its config node holds the constructor's keywords
    and defaults), a misspelt option is named with the right one, a keyword without a default must be given, and
    ``evaluate_dataset(variant_options=...)`` passes them from Python: each variant then upper-cases one word."""
    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra

    import posixlab
    from posixlab.cli import CONF_DIR, check_override_keys, load_chosen_variants, to_config
    from posixlab.variants import VariantGenerator, get_variant_generator, register_variant

    load_chosen_variants(["variant=casing"])
    check_override_keys(["variant=casing", "variant.options.most=1"])
    with pytest.raises(ConfigError, match=re.escape("variant.options.mots is not a setting: did you mean "
                                                    "variant.options.most?")):
        check_override_keys(["variant=casing", "variant.options.mots=1"])
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["variant=casing", "variant.options.most=1"])
        assert to_config(cfg, str(tmp_path)).variant_options == {"most": 1}
        assert to_config(compose(config_name="config", overrides=["variant=casing"]),
                         str(tmp_path)).variant_options == {"most": 3}
    GlobalHydra.instance().clear()

    register_variant(type("Needy", (VariantGenerator,), {"kind": "needy", "__init__": lambda self, *, mark: None}))
    try:
        load_chosen_variants(["variant=needy"])
        with pytest.raises(ConfigError, match=re.escape("variant=needy needs variant.options.mark=VALUE (")):
            get_variant_generator("needy", mark="???")  # Hydra's "must be given", left so
    finally:
        VARIANT_TYPES.pop("needy")
        ConfigStore.instance().repo["variant"].pop("needy.yaml", None)

    result = posixlab.evaluate_dataset("mmlu_sample", "casing", model=tiny_lm, variant_options={"most": 1},
                                       num_sets=2, num_variants=3, max_new_tokens=2, embedding=None,
                                       score_cache=False, progress=False)
    counts = [len(p["record"]["upper_cased"]) for r in result.records for p in r["prompts"][1:]]
    assert counts == [1] * 6
    with pytest.raises(ConfigError, match=re.escape("variant=casing: bad option(s) ['least']")):
        posixlab.evaluate_dataset("mmlu_sample", "casing", model=tiny_lm, variant_options={"least": 1},
                                  progress=False)


def test_a_variant_type_must_bring_a_kind_of_its_own():
    from posixlab.variants import VariantGenerator, register_variant

    with pytest.raises(ConfigError, match="variant type 'template' is registered already"):
        register_variant(type("Mine", (VariantGenerator,), {"kind": "template"}))
    with pytest.raises(ConfigError, match="variant type 'user' is registered already"):
        register_variant(type("Mine", (VariantGenerator,), {"kind": "user"}))
    with pytest.raises(ConfigError, match="register_variant takes a VariantGenerator subclass with a kind"):
        register_variant(type("Mine", (VariantGenerator,), {}))
    assert register_variant(plugin_variant.CasingVariants) is plugin_variant.CasingVariants  # again: no error


def test_a_variant_type_s_mistakes_are_said_where_they_are(capsys):
    """An ``edit`` that returns no Edit is one error naming the type; one that raises keeps its traceback, with a
    note of the item and variant; one that changes nothing is warned of (ψ 0 by construction), before any model."""
    from posixlab.data import DatasetSpec
    from posixlab.tasks.posix import build_prompt_sets
    from posixlab.variants import Edit, VariantGenerator, register_variant

    kinds = {"as-text": lambda self, item, i, seed: item.question + "!" * (i + 1),
             "listed": lambda self, item, i, seed: Edit(question=[item.question]),
             "raising": lambda self, item, i, seed: Edit(question=item.question.split()[500]),
             "unchanged": lambda self, item, i, seed: Edit(question=item.question, record={"i": i})}
    for kind, edit in kinds.items():
        register_variant(type(f"V{len(kind)}", (VariantGenerator,), {"kind": kind, "edit": edit}))
    try:
        def build(kind):
            return build_prompt_sets(PosixConfig(model=RULE, dataset=DatasetSpec("mmlu"), variant=kind, num_sets=2,
                                                 num_variants=3, embedding=None), progress=False)

        with pytest.raises(ConfigError, match=r"variant=as-text \(.*\.edit\) returned str \('.*'\) for item "
                                              r"'mmlu/.*': return posixlab.variants.Edit\(question="):
            build("as-text")
        with pytest.raises(ConfigError, match="returned an Edit whose question is a list"):
            build("listed")
        with pytest.raises(IndexError) as raised:
            build("raising")
        assert re.fullmatch(r"\(in variant=raising's edit, .*, making variant 0 of item 'mmlu/.*'\)",
                            raised.value.__notes__[0])
        capsys.readouterr()
        sets, _ = build("unchanged")
        assert len(sets) == 2 and all(len(set(s.texts())) == 1 for s in sets)
        assert "warning: 2 of 2 sets (mmlu/" in capsys.readouterr().err
        build("spelling")
        assert "warning" not in capsys.readouterr().err  # real variants: no warning
    finally:
        for kind in kinds:
            VARIANT_TYPES.pop(kind)


# --- from the command line: the plug-ins found by name (posixlab/plugins.py) -------------------------------------
RULE_MODEL = ["model.backend=rule-test", "model.name=rule", "model.source=api", "model.path=rule", "logger=none",
              "report=false", "progress=false"]


def _cli(args: list[str], cwd, env: dict, run_py: bool = True):
    import os
    import subprocess
    import sys
    from pathlib import Path

    command = [sys.executable, str(Path(__file__).resolve().parent.parent / "run.py")] if run_py else \
        [sys.executable, "-m", "posixlab"]
    clean = {k: v for k, v in os.environ.items() if k not in ("POSIXLAB_PLUGINS", "PYTHONPATH")}
    return subprocess.run([*command, *args], cwd=cwd, env={**clean, **env}, capture_output=True, text=True,
                          timeout=300)


def _plugin_files(folder):
    import shutil
    from pathlib import Path

    folder.mkdir(parents=True)
    for name in ("plugin_backend.py", "plugin_task.py"):
        shutil.copy(Path(__file__).resolve().parent / name, folder / name)
    return folder


@pytest.mark.slow
def test_plug_ins_named_in_posixlab_plugins_run_gate_and_refuse_from_the_command_line(tmp_path):
    """A user's two modules beside the experiment, named in POSIXLAB_PLUGINS: ``task=agreement`` with the rule
    backend runs from the command line (task settings and the task's gate threshold on it), the folder's gate is
    read again by ``posixlab gate``; without the variable the folder's own plug-ins are imported by name (a finished
    run's, from its summary; a killed run's, from its plugins.json), and where they are not found, or with a module
    that does not import: one message."""
    work = _plugin_files(tmp_path / "work")
    env = {"POSIXLAB_PLUGINS": "plugin_backend, plugin_task", "POSIXLAB_CACHE": str(tmp_path / "cache")}
    questions = "task.questions=[" + ",".join("[" + ",".join(q) + "]" for q in QUESTIONS[:2]) + "]"
    expected = sum(expected_agreement(q) for q in QUESTIONS[:2]) / 2
    assert expected < 1.0  # the first question's wordings get different answers: a gate of 1.0 fails
    folder = tmp_path / "run"
    proc = _cli(["task=agreement", *RULE_MODEL, questions, f"hydra.run.dir={folder}", "gate.min_agreement=1.0"],
                work, env)
    assert proc.returncode == 1, proc.stderr[-3000:]  # the run's own gate, on the plug-in task's threshold
    assert f"agreement = {expected:.4f}" in proc.stdout and "| min_agreement | agreement.mean |" in proc.stdout
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["task"] == "agreement" and summary["num_questions"] == 2
    assert [(p["module"], p["from"]) for p in summary["plugins"]] == [("plugin_backend", "POSIXLAB_PLUGINS"),
                                                                      ("plugin_task", "POSIXLAB_PLUGINS")]
    assert all(p["file"] == str(work / f"{p['module']}.py") for p in summary["plugins"])
    gate = _cli(["gate", str(folder), f"gate.min_agreement={expected}"], work, env, run_py=False)
    assert gate.returncode == 0 and "pass" in gate.stdout, gate.stderr[-2000:]
    status = _cli(["status", str(folder)], work, env, run_py=False)
    assert status.returncode == 0 and "2/2 questions" in status.stdout, status.stderr[-2000:]

    recorded = json.loads((folder / "plugins.json").read_text())  # written when the run started
    assert [p["module"] for p in recorded] == ["plugin_backend", "plugin_task"]

    # without the variable: the folder's own plug-ins, imported by name from the working folder
    gate = _cli(["gate", str(folder), f"gate.min_agreement={expected}"], work, {}, run_py=False)
    assert gate.returncode == 0 and "pass" in gate.stdout, gate.stderr[-2000:]
    assert f"posixlab: imported the plug-in plugin_task, which {folder} was made with" in gate.stderr
    killed = tmp_path / "killed"  # a run still going (or killed): no summary yet, its plugins.json read instead
    shutil.copytree(folder, killed)
    (killed / "summary.json").unlink()
    status = _cli(["status", str(killed)], work, {}, run_py=False)  # 3: a cell that stopped before its end
    assert status.returncode == 3 and re.search(r"failed +2/\? questions", status.stdout), status.stderr[-2000:]
    report = _cli(["report", str(killed)], work, {}, run_py=False)
    assert report.returncode == 0 and "PARTIAL" in (killed / "report.html").read_text(), report.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"  # where the modules are not: the message names the module and its file
    elsewhere.mkdir()
    unknown = _cli(["gate", str(folder), "gate.min_agreement=0.5"], elsewhere, {}, run_py=False)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "gate has no setting min_agreement" in unknown.stderr
    assert (f"{folder} was made with the plug-in 'plugin_task' (from POSIXLAB_PLUGINS, file {work / 'plugin_task.py'})"
            f", which does not import here: ModuleNotFoundError") in unknown.stderr, unknown.stderr[-2000:]
    assert "name it in POSIXLAB_PLUGINS" in unknown.stderr
    unknown = _cli(["task=agreement", *RULE_MODEL, f"hydra.run.dir={tmp_path / 'none'}"], work, {})
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr, unknown.stderr[-2000:]
    assert "unknown task 'agreement'; the tasks are posix, classification, or one from a plug-in (a backend, task or " \
           "variant type): " \
           "name its module in POSIXLAB_PLUGINS" in unknown.stderr
    broken = _cli(["model.backend=rule-test", f"hydra.run.dir={tmp_path / 'broken'}"], work,
                  {"POSIXLAB_PLUGINS": "plugin_backend,no_such_module"})
    assert broken.returncode == 2 and "Traceback" not in broken.stderr, broken.stderr[-2000:]
    assert "plug-in 'no_such_module' (from POSIXLAB_PLUGINS) could not be imported: ModuleNotFoundError" \
           in broken.stderr
    assert not (tmp_path / "none").exists()  # refused before the job's folder is made


@pytest.mark.slow
def test_an_outside_variant_type_runs_in_a_sweep_from_the_command_line(tmp_path):
    """``variant=casing`` from POSIXLAB_PLUGINS, beside a built-in type in one sweep, on the packaged model: its cell
    has the module's sets and names the plug-in; without the variable, the name is one message that says how."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(Path(__file__).resolve().parent / "plugin_variant.py", work / "plugin_variant.py")
    small = ["num_sets=2", "num_variants=3", "max_new_tokens=2", "logger=none", "report=false", "progress=false",
             "embedding=none", f"score_cache_dir={tmp_path / 'scores'}"]
    sweep = tmp_path / "sweep"
    proc = _cli(["-m", "variant=spelling,casing", *small, f"hydra.sweep.dir={sweep}"], work,
                {"POSIXLAB_PLUGINS": "plugin_variant"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    cell = next(sweep.glob("1_*_casing_0shot"))
    summary = json.loads((cell / "summary.json").read_text())
    assert summary["variant"] == "casing" and [p["module"] for p in summary["plugins"]] == ["plugin_variant"]
    record = json.loads((cell / "sets.jsonl").read_text().splitlines()[0])
    assert [p["kind"] for p in record["prompts"]] == ["original"] + ["casing"] * 3
    assert all(w.isupper() and w in p["text"] for p in record["prompts"][1:] for w in p["record"]["upper_cased"])
    unknown = _cli(["variant=casing", *small, f"hydra.run.dir={tmp_path / 'none'}"], work, {})
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr, unknown.stderr[-2000:]
    assert "unknown variant type 'casing'; the types are spelling, template, paraphrase, mixture, format, or one " \
           "from a plug-in (a backend, task or variant type): name its module in POSIXLAB_PLUGINS" in unknown.stderr
    assert not (tmp_path / "none").exists()  # refused before the job's folder is made


@pytest.mark.slow
def test_a_plug_in_installed_as_a_package_is_found_by_its_entry_point(tmp_path):
    """A package that declares ``posixlab.plugins`` entry points (its dist-info on the path, as pip installs one):
    its backend runs a built-in task from the command line with no variable set, and the summary names it."""
    site = _plugin_files(tmp_path / "site")
    info = site / "posixlab_rule_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: posixlab-rule-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[posixlab.plugins]\nrule = plugin_backend\nagreement = plugin_task\n")
    folder = tmp_path / "run"
    proc = _cli([*RULE_MODEL, "task.num_sets=2", "task.num_variants=2", "task.psi=false", "embedding=none",
                 f"hydra.run.dir={folder}"], tmp_path, {"PYTHONPATH": str(site),
                                                        "POSIXLAB_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["model"]["backend"] == "rule-test" and summary["num_sets"] == 2 and summary["psi"] is None
    assert [(p["module"], p["from"]) for p in summary["plugins"]] == [
        ("plugin_backend", "entry point rule of posixlab-rule-plugins 1.0"),
        ("plugin_task", "entry point agreement of posixlab-rule-plugins 1.0")]
