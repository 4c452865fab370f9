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
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from posixlab.analysis.classification import run_classification_figures
from posixlab.analysis.collect import load_rows
from posixlab.analysis.figures import run_figures
from posixlab.classify.run import ClassificationConfig, ClassificationData, run_classification
from posixlab.data import DatasetSpec
from posixlab.embeddings import EmbeddingSpec
from posixlab.errors import ConfigError, PosixlabError
from posixlab.models import spec_from_dict
from posixlab.pipeline import RunConfig, run
from posixlab.rephrase import RephraserConfig
from posixlab.rephrase.quality import describe_summary
from posixlab.results import read_sets
from posixlab.scoring import EngineOptions
from posixlab.tracking import Tracker


def _shared_settings(c: dict, output_dir: str) -> dict:
    """The settings a POSIX run and a classification run take alike."""
    return {"max_new_tokens": c["max_new_tokens"], "seed": c["seed"], "chat_template": c["chat_template"],
            "output_dir": output_dir, "cache_dir": c["cache_dir"], "score_cache": c["score_cache"],
            "score_cache_dir": c["score_cache_dir"], "engine": EngineOptions(**c["engine"]),
            "rephraser": RephraserConfig(**c["rephraser"])}


def to_classification_config(cfg: DictConfig, output_dir: str) -> ClassificationConfig:
    c = OmegaConf.to_container(cfg, resolve=True)
    dataset = dict(c["dataset"])
    if dataset.pop("task", "posix") != "classification":
        raise ConfigError(f"dataset {dataset['name']} is not a classification data set; with task=classification "
                          f"choose dataset=mmlu_letters (offline), trec, cb, rte, dbpedia14 or wos46985")
    dataset.pop("max_new_tokens", None)
    task = c["task"]
    return ClassificationConfig(
        model=spec_from_dict(c["model"]),
        data=ClassificationData(**dataset),
        strategy=c["strategy"]["name"],
        num_rephrasings=task["num_rephrasings"],
        task_sentence=task["task_sentence"],
        probability=task["probability"],
        **_shared_settings(c, output_dir),
    )


def to_run_config(cfg: DictConfig, output_dir: str) -> RunConfig:
    c = OmegaConf.to_container(cfg, resolve=True)
    dataset = dict(c["dataset"])
    if dataset.pop("task", "posix") != "posix":
        raise ConfigError(f"dataset {dataset['name']} is a classification data set: add task=classification")
    for key in ("max_new_tokens", "experiment_sets", "num_sets"):  # defaults of top-level settings, not of the loader
        dataset.pop(key, None)
    return RunConfig(
        model=spec_from_dict(c["model"]),
        dataset=DatasetSpec(**dataset),
        variant=c["variant"]["name"],
        variant_options=c["variant"].get("options") or {},
        num_sets=c["num_sets"],
        num_variants=c["num_variants"],
        shots=c["shots"],
        perturb_shots=c["perturb_shots"],
        **_shared_settings(c, output_dir),
        embedding=EmbeddingSpec(**c["embedding"]) if c["embedding"].get("name") else None,
        score_options=c["score_options"],
        option_text=bool(c.get("option_text", False)),
        shard=None if c.get("shard") is None else str(c["shard"]),
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
    resolved = OmegaConf.to_container(cfg, resolve=True)  # holds no secret: keys are read from the environment
    (Path(output_dir) / "config.yaml").write_text(OmegaConf.to_yaml(resolved))
    # one W&B run per job; the jobs of a sweep share its folder's name as their group
    group = Path(hydra_cfg.sweep.dir).name if hydra_cfg.mode == RunMode.MULTIRUN else None
    try:
        if cfg.task.name == "classification":
            return run_classification_job(cfg, resolved, output_dir, group)
        return run_posix_job(cfg, resolved, output_dir, group)
    except PosixlabError as exc:
        print(f"\nposixlab error: {exc}", file=sys.stderr)
        sys.exit(2)


def run_posix_job(cfg: DictConfig, resolved: dict, output_dir: str, group: str | None) -> float:
    run_cfg = to_run_config(cfg, output_dir)  # a config error stops the job before W&B starts
    with Tracker(resolved["logger"], resolved, output_dir, name=Path(output_dir).name, group=group) as tracker:
        summary = run(run_cfg, progress=cfg.progress)
        figures = run_figures(load_rows(output_dir), Path(output_dir) / "figures")
        tracker.log_results(summary, read_sets(output_dir), figures)
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
    return p["posix"]


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


def run_classification_job(cfg: DictConfig, resolved: dict, output_dir: str, group: str | None) -> float:
    run_cfg = to_classification_config(cfg, output_dir)
    with Tracker(resolved["logger"], resolved, output_dir, name=Path(output_dir).name, group=group,
                 job_type="classification") as tracker:
        summary = run_classification(run_cfg, progress=cfg.progress)
        figures = run_classification_figures(output_dir, Path(output_dir) / "figures")
        tracker.log_classification(summary, output_dir, figures)
    s, c, f1 = summary["sensitivity"], summary["consistency"], summary["micro_f1"]
    consistency = "n/a (no gold labels)" if c is None else "n/a (no class has two samples)" \
        if c["mean"] is None else f"{c['mean']:.4f}"
    f1_text = "n/a" if f1 is None else f"{f1['mean']:.4f} ± {f1['sd'] or 0:.4f}"
    print(f"sensitivity S = {s['mean']:.4f} · consistency C = {consistency} · micro-F1 = {f1_text} "
          f"({summary['num_samples']} samples × Q = {summary['num_rephrasings']}) · {cfg.model.name} · "
          f"{cfg.dataset.name} · {cfg.strategy.name} · {cfg.task.probability}")
    print(f"results: {output_dir}")
    return s["mean"]


def merge_command(args: list[str]) -> int:
    """``posixlab merge OUT SHARD_FOLDER...``: join the folders of a ``shard=K/N`` sweep into OUT."""
    from posixlab.shards import merge_shards

    if len(args) < 2 or args[0] in ("-h", "--help"):
        print("usage: posixlab merge OUT SHARD_FOLDER [SHARD_FOLDER ...]\n\nJoins the result folders of the shards "
              "of one cell (shard=1/N ... shard=N/N) into OUT, as one run of the whole cell.", file=sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    try:
        summary = merge_shards(args[1:], args[0])
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    p = summary["psi"]
    print(f"POSIX = {p['posix']:.4f} ({p['num_sets']} sets from {len(args) - 1} shards) · results: {args[0]}")
    return 0


def entry() -> None:
    """The ``posixlab`` console command: ``posixlab merge ...`` joins shards; anything else is a Hydra job."""
    if len(sys.argv) > 1 and sys.argv[1] == "merge":
        sys.exit(merge_command(sys.argv[2:]))
    main()

