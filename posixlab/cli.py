"""The Hydra application: compose the config, turn it into the library's plain dataclasses, run it.

This module and ``posixlab.tracking`` are the only ones that know Hydra and W&B; the library below them takes
dataclasses. The ``posixlab`` console command and the top-level ``run.py`` both call ``main``:

    posixlab                                        # offline default: SmolLM2, MMLU sample, spelling, 20 sets
    posixlab model=gemma3-270m variant=template
    posixlab -m model=smollm2-135m-instruct,gemma3-270m variant=spelling,template
    posixlab variant=paraphrase task.shots=1        # paraphrases by the packaged Qwen rephraser, one exemplar
    posixlab -m task.shots=0,1,2,3 variant=spelling,template,paraphrase   # the paper's Table 2 study
    posixlab dataset=prompt_sets dataset.path=my_sets.jsonl          # your own prompt sets, used as given
    posixlab task=classification strategy=detail    # Errica et al.: sensitivity and consistency (offline MMLU)

The configs ship inside the package (``posixlab/conf``), so the command works from any folder. ``posixlab report``,
``gate``, ``compare``, ``judge``, ``merge``, ``dove`` and ``gguf-path`` are ``posixlab.commands``'s (no Hydra);
``posixlab status`` is ``posixlab.status``'s; ``entry`` dispatches to them (``COMMANDS``).

Results go to the Hydra run folder (printed at the end). A problem with the input or the environment (a model that
cannot be fetched, a prompt too long for the model, ...) prints one clear message and exits with status 2.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import re
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from posixlab.commands import compare_command, dove_command, gate_command, gguf_path_command, judge_command, \
    judge_folder, judge_spec, judged_figures, merge_command, report_command, report_gate, write_run_report
from posixlab.data.questions import answer_length, data_name
from posixlab.errors import ConfigError, GateFailed, PosixlabError, check_flag, check_progress, nearest
from posixlab.gate import GateConfig, check_gate, check_gate_applies, make_gate, metrics
from posixlab.judge import JudgeConfig
from posixlab.models.adapters import adapted_name
from posixlab.models.allocator import prefer_expandable_segments
from posixlab.models.loading import ModelSpec
from posixlab.paths import claim_new_folder, default_cache_dir, sweep_path
from posixlab.plugins import load_recorded_plugins, record_plugins
from posixlab.report.build import sweep_summary
from posixlab.results import SAMPLES_FILE, SETS_FILE, SUMMARY_FILE
from posixlab.runner import run
from posixlab.scoring.options import EngineOptions
from posixlab.shards import shard_label, shard_lines
from posixlab.status import note_done_before, note_error, status_command
from posixlab.tasks import TASK_TYPES, task_named
from posixlab.tracking import Tracker
from posixlab.version import __version__

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


def task_schema(task_type) -> type:
    """The typed node of ``task.*`` for a task: a dataclass generated from the fields of its config dataclass (their
    annotations and defaults: one source), so that Hydra checks every value at compose time (``task.num_sets=abc``
    fails there, naming the key). Its fields: the task's ``task_settings``, ``name`` (the task's), the
    ``moved_settings`` that are not task settings (POSIX's ``num_sets``, whose default conf/task/posix.yaml takes
    from the data set) and ``run_name`` (set by conf/task/<name>.yaml), in the order the YAML composed them before.

    OmegaConf 2.3 types a field as a primitive, an ``Optional`` one, an enum, a list, a dict or a dataclass; an
    annotation it does not take (a union with a container, e.g. classification's ``schema: str | dict | None``) is
    ``Any`` here: that value is not checked at compose time (the task checks it, as before), and the task's own
    dataclass keeps its annotation."""
    import dataclasses
    import typing

    from omegaconf import MISSING

    config = task_type.config_type
    hints = typing.get_type_hints(config)
    own = {f.name: f for f in dataclasses.fields(config)}

    def default_of(name: str):  # a fresh Field each time (make_dataclass takes the Field it is given)
        f = own[name]
        if f.default is not dataclasses.MISSING:
            return dataclasses.field(default=f.default)
        if f.default_factory is not dataclasses.MISSING:
            return dataclasses.field(default_factory=f.default_factory)
        return dataclasses.field(default=MISSING)

    def annotation(name: str):
        try:  # what OmegaConf 2.3 cannot type is Any (see above)
            OmegaConf.structured(dataclasses.make_dataclass("_Probe", [(name, hints[name], default_of(name))]))
        except Exception:  # noqa: BLE001 (OmegaConf's errors for an unsupported annotation vary by kind)
            return typing.Any
        return hints[name]

    settings = list(dict.fromkeys(task_type.task_settings))
    moved = [key for key in task_type.moved_settings if key not in settings]
    fields = [(key, annotation(key), default_of(key)) for key in settings]
    fields.append(("name", str, dataclasses.field(default=task_type.name)))
    fields += [(key, annotation(key), default_of(key)) for key in moved]
    fields.append(("run_name", str, dataclasses.field(default=MISSING)))  # names the job folders
    return dataclasses.make_dataclass(f"{config.__name__}TaskSettings", fields)


def register_defaults() -> None:
    """One source for every default: the library's dataclasses. Config nodes whose content is nothing but defaults
    are registered from them here (``model/_defaults``, which every model config lists first, and ``engine/default``)
    instead of being restated in YAML; the YAML files hold choices (a model, a data set, a rephraser), and
    tests/test_config_defaults.py fails when a value a YAML file restates disagrees with its dataclass. Each task's
    ``task.*`` is a typed (structured) config, ``task_schema``: a value of the wrong type fails at compose time."""
    store = ConfigStore.instance()
    store.store(group="model", name="_defaults", node=_defaults_of(ModelSpec))
    store.store(group="engine", name="default", node=_defaults_of(EngineOptions))
    gate = _defaults_of(GateConfig, skip=("more",))  # every threshold null: no gate
    gate.update({name: None for name in metrics() if name not in gate})  # a plug-in task's (GateConfig.more)
    store.store(group="gate", name="default", node=gate)
    store.store(group="judge", name="_defaults", node=_defaults_of(JudgeConfig))  # judge=none: model null, no judge
    for task_type in TASK_TYPES.values():  # each task's own settings, task.*: conf/task/<name>.yaml lists them first
        store.store(group="task", name=f"_{task_type.name}_defaults", node=task_schema(task_type))
        if not (Path(__file__).resolve().parent / "conf" / "task" / f"{task_type.name}.yaml").is_file():
            # a plug-in's task (posixlab/plugins.py): task=NAME is its settings' defaults, its name and a run name
            store.store(group="task", name=task_type.name, package="_global_", node={
                "defaults": [f"_{task_type.name}_defaults@task"],
                "task": {"name": task_type.name,
                         "run_name": f"${{posixlab.model:${{model.name}},${{model.adapter}}}}_{task_type.name}"}})


register_defaults()  # at import, so that compose() in tests and notebooks finds them too


def cache_folder(cache_dir) -> str:
    """``${posixlab.cache_dir:${cache_dir}}`` in a config: the cache folder a run uses, ``cache_dir`` or its default
    (``$POSIXLAB_CACHE``, else ``~/.cache/posixlab``), so a config can name folders below it (the paper's grids give
    each cell its own score cache folder: conf/experiment/_paper.yaml).

    >>> cache_folder("/shared/posixlab")
    '/shared/posixlab'
    >>> cache_folder(None) == str(default_cache_dir())
    True
    """
    return str(Path(cache_dir).expanduser()) if cache_dir else str(default_cache_dir())


OmegaConf.register_new_resolver("posixlab.cache_dir", cache_folder, replace=True)


def model_label(name, adapter=None) -> str:
    """``${posixlab.model:${model.name},${model.adapter}}`` in a config: the model as its results name it, so that a
    run of an adapter gets job folders and a W&B run name of its own (conf/task/*.yaml's ``run_name``).

    >>> model_label("llama2-7b", None), model_label("llama2-7b", "org/llama2-7b-lora")
    ('llama2-7b', 'llama2-7b+llama2-7b-lora')
    """
    return adapted_name(str(name), str(adapter)) if adapter else str(name)


OmegaConf.register_new_resolver("posixlab.model", model_label, replace=True)


def gguf_name(path) -> str:
    """``${posixlab.gguf_name:${model.path}}`` (conf/model/gguf.yaml's name): a GGUF run named by its file, so that
    two files' runs are told apart in results, tables and W&B without a ``model.name``.

    >>> gguf_name("TheBloke/Llama-2-7B-GGUF:Q4_K_M"), gguf_name(None)
    ('Llama-2-7B-GGUF-Q4_K_M', 'gguf')
    """
    from posixlab.llamacpp.hub import gguf_label

    return gguf_label(str(path)) if path else "gguf"


OmegaConf.register_new_resolver("posixlab.gguf_name", gguf_name, replace=True)


def data_label(name, path=None) -> str:
    """``${posixlab.data:${dataset.name},${dataset.path}}`` (conf/task/*.yaml's ``run_name``): the data as job folders
    and W&B runs name it. Your own prompt sets and classifier files add the file's stem, so that runs of two files
    are told apart by their folders (``dataset=questions`` names its runs by the file already).

    >>> data_label("mmlu"), data_label("prompt_sets", "data/my sets.jsonl"), data_label("classifier", "reviews.yaml")
    ('mmlu', 'prompt_sets-my_sets', 'classifier-reviews')
    """
    if str(name) not in ("prompt_sets", "classifier") or not path:
        return str(name)
    stem = re.sub(r"[^\w.-]+", "_", Path(str(path).rstrip("/")).stem)  # a folder's name: no spaces, no slashes
    return f"{name}-{stem}"


OmegaConf.register_new_resolver("posixlab.data", data_label, replace=True)


OmegaConf.register_new_resolver("posixlab.shard", shard_label, replace=True)
OmegaConf.register_new_resolver("posixlab.new_folder", claim_new_folder, replace=True)  # a single run's folder
# a sweep's folder: cached, since Hydra copies a config's resolver cache into each job's config (the cells of the
# launching process, and, pickled with it, a submitit job's on another machine), so every cell asks nothing again
OmegaConf.register_new_resolver("posixlab.new_sweep_folder", claim_new_folder, replace=True, use_cache=True)
OmegaConf.register_new_resolver("posixlab.sweep_path", sweep_path, replace=True)
OmegaConf.register_new_resolver("posixlab.answer_length", answer_length, replace=True)
OmegaConf.register_new_resolver("posixlab.data_name", data_name, replace=True)

def check_task_groups(task: str, overrides: list[str]) -> None:
    """A ``ConfigError`` naming the first override that chooses a config group only another task reads (a task's
    ``config_groups``: POSIX's variant and embedding). A setting under ``task.*`` the task does not have is refused
    with the task that has it (``check_override_keys``).

    >>> check_task_groups("posix", ["variant=template"])
    >>> check_task_groups("classification", ["task=classification", "variant=template"])
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: variant is a setting of the posix task; task=classification does not use it (task=classification has the task sentence's rephrasings: task.num_rephrasings)
    """
    own = task_named(task).config_groups
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~").split(".", 1)[0].split("@", 1)[0]
        for other in TASK_TYPES.values():
            if other.name != task and key in other.config_groups and key not in own:
                hint = task_named(task).instead_of.get(key)
                raise ConfigError(f"{key} is a setting of the {other.name} task; task={task} does not use it"
                                  + (f" (task={task} has {hint})" if hint else ""))


def to_config(cfg: DictConfig, output_dir: str):
    """The library's configuration of the job's task (``task.name``), from the composed config."""
    return task_named(cfg.task.name).config_from(OmegaConf.to_container(cfg, resolve=True), output_dir)


# the configs ship inside the package; an absolute folder works the same from a checkout and from an installed wheel
CONF_DIR = str(Path(__file__).resolve().parent / "conf")


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's time limit, ``kill``, ``timeout``), raised where Ctrl-C would be: the run stops the same
    way, saying what is kept, instead of vanishing with its status file still saying running."""


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM raises ``Terminated`` inside the block, where nothing else handles it: a handler someone installed
    (submitit's, which requeues a preempted SLURM job) and threads other than the main one are left alone."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float | None:
    with sigterm_as_interrupt():
        return run_main(cfg)


def run_main(cfg: DictConfig) -> float | None:
    """One job of the command: the run, its report and gate, and what its folder says when it fails."""
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
    # a cell of a sweep that fails (an error, a missed gate) fails alone: the grid goes on, and the sweep ends with
    # the worst cell's status (JobStatusCallback.on_multirun_end); fail_fast=true stops it at the first, as one run
    keep_going = group is not None and resolved.get("fail_fast") is not True
    task_type = None
    try:
        task_type = task_named(cfg.task.name)
        check_top_level(resolved)
        check_task_groups(task_type.name, list(hydra_cfg.overrides.task))
        gate = make_gate(resolved.get("gate"))
        check_gate_applies(task_type.name, gate)  # a threshold the task has no metric for stops here, before the run
        judge = judge_of(resolved, task_type.name, gate)  # a judge's bad setting stops here, before the run
        if cfg.dry_run:
            return dry_run_job(cfg, output_dir, judge)
        summary, judge_error = (done_before(cfg, output_dir, judge) if resolved.get("skip_done") else None), None
        if summary is None:
            note_replacing(Path(output_dir))
            record_plugins(output_dir)  # so that posixlab status/gate/report read this folder in any shell
            summary, judge_error = run_job(cfg, resolved, output_dir, group, judge)
        # one the run's data has no metric for (no gold labels): exit 2 too; a judge's shares from its judge.json
        # (a judge that failed: no gate, its error below)
        rows = [] if judge_error else check_gate(task_type.with_files_beside(Path(output_dir), summary), gate)
        if resolved.get("report", True):  # after the gate, so that the page shows its rows
            write_run_report(output_dir, rows)
        if judge_error is not None:  # the run's results, W&B run and page are written: then the judge's error
            raise judge_error
    except PosixlabError as exc:  # said here, but by a sweep's cell that fails alone in its "cell ... failed:" line
        return cell_failed(output_dir, f"posixlab error: {exc}", 2, keep_going, say=not keep_going)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: what is kept and how to go on, not a traceback
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        note_error(output_dir, how if isinstance(exc, Terminated) else "interrupted (Ctrl-C)")
        kept = ("and in the score cache: the same command again computes only the rest" if resolved.get("score_cache")
                else "(score_cache=false: the same command again computes them again)")
        units = f"{task_type.unit_name}s" if task_type is not None else "units"
        records = Path(output_dir) / (task_type.records_file if task_type is not None else "")
        if task_type is not None and (not records.is_file() or records.stat().st_size == 0):
            print(f"\nposixlab: {how} before its first {task_type.unit_name} finished ({output_dir}).",
                  file=sys.stderr)
        else:
            print(f"\nposixlab: {how}. The {units} finished so far are in {output_dir} {kept}.",
                  file=sys.stderr)
        sys.exit(143 if isinstance(exc, Terminated) else 130)  # 128 + the signal, as a shell reports it
    except Exception as exc:  # noqa: BLE001 (unexpected: a CUDA out-of-memory, a bug)
        if group is None:  # one run: Hydra's traceback (HYDRA_FULL_ERROR=1: all of it)
            raise
        traceback.print_exc()  # on stderr, as Hydra prints one run's (a SLURM job's stderr is its log)
        return cell_failed(output_dir, f"{type(exc).__name__}: {exc}".splitlines()[0][:500], 2, keep_going)
    if report_gate(rows):
        missed = ", ".join(row.metric if isinstance(row.value, str) else f"{row.metric} {row.value:.4f}"
                           for row in rows if not row.passed)
        cell_failed(output_dir, f"missed its gate: {missed}", 1, keep_going)
    return task_type.headline(summary)  # None when the run has none (psi=false)


class SweepEndCallback(Callback):
    """A sweep's end, in the process that launched it (its cells may have run on other machines): what its cells
    found, as a grid printed and written to ``grid.md``, and its page (``report.html``; not with report=false),
    before ``JobStatusCallback`` names the cells that failed (``conf/config.yaml`` lists this one after it: Hydra
    calls the callbacks of a sweep's end last to first). Never fails the sweep (``posixlab report SWEEP`` writes
    the page too)."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep = str(config.hydra.sweep.dir)
        try:
            lines = sweep_summary(sweep, page=config.get("report", True) is not False)  # report=false: no pages
        except Exception as exc:  # noqa: BLE001 - the cells' results are written; only the summary of them is lost
            print(f"posixlab: warning: the sweep's grid and page were not written ({type(exc).__name__}: {exc}); "
                  f"posixlab report {sweep} writes the page", file=sys.stderr)
            return
        if lines:
            print("\n" + "\n".join(lines), flush=True)


def cell_failed(output_dir: str, error: str, status: int, keep_going: bool, say: bool = False) -> None:
    """A job that fails (``status`` 2: an error; 1: a missed gate): recorded for ``posixlab status`` and the sweep's
    end (``say``: printed first); the sweep goes on (``keep_going``), else the job's process exits with ``status``
    (a run, ``fail_fast``)."""
    if say:
        print(f"\n{error}", file=sys.stderr)
    note_error(output_dir, error, exit_status=status)
    if not keep_going:
        if status == 1:
            raise GateFailed(1)
        sys.exit(status)


CONFIG_GROUPS = ("model", "variant", "dataset", "rephraser", "engine", "embedding", "logger", "task", "strategy",
                 "judge", "gate")  # the top-level nodes a config group fills (conf/<group>/)


def check_top_level(resolved: dict) -> None:
    """The top-level settings' types, before any work (``task.*``, ``engine.*``, ``model.*`` and ``gate.*`` are
    checked by their own schemas; ``seed`` by the run): a flag given ``yes`` would otherwise count as true.

    >>> check_top_level({"chat_template": False, "score_cache": True, "progress": "lines", "cache_dir": None})
    >>> check_top_level({"chat_template": "yes"})
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: chat_template takes true or false, not 'yes'
    >>> check_top_level({"logger": "none"})
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: logger is 'none', a value, where its config group's settings belong: choose an \
option with logger=none on the command line, or in an experiment's defaults list (- override /logger: none)
    """
    for key in ("chat_template", "score_cache", "report", "dry_run", "fail_fast", "skip_done"):
        check_flag(key, resolved.get(key, False))
    check_progress(resolved.get("progress", True))
    for key in ("cache_dir", "score_cache_dir"):
        if not isinstance(resolved.get(key) or "", str):
            raise ConfigError(f"{key} takes a folder or null, not {resolved[key]!r}")
    for group in CONFIG_GROUPS:  # an experiment's `logger: none` sets the group's settings to a word
        if group in resolved and not isinstance(resolved[group], dict):
            raise ConfigError(f"{group} is {resolved[group]!r}, a value, where its config group's settings belong: "
                              f"choose an option with {group}={resolved[group]} on the command line, or in an "
                              f"experiment's defaults list (- override /{group}: {resolved[group]})")


def note_replacing(folder: Path) -> None:
    """A note where the job's folder holds a finished run (``hydra.run.dir`` given twice, a sweep run again into its
    folder): its files are about to be replaced, which used to happen without a word."""
    from posixlab.tasks.base import model_name

    try:
        old = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
        finished = time.strftime("%Y-%m-%d %H:%M", time.localtime((folder / SUMMARY_FILE).stat().st_mtime))
    except (OSError, ValueError):
        return
    if not isinstance(old, dict):
        return
    about = " · ".join([*filter(None, [model_name(old)]),
                        *(old[k] for k in ("dataset", "variant", "strategy") if isinstance(old.get(k), str))])
    print(f"posixlab: note: {folder} holds a finished run ({about or 'its summary.json'}, {finished}); this run "
          f"replaces its files (a folder of its own: leave hydra.run.dir unset; skip_done=true keeps a finished run "
          f"of this same config)", file=sys.stderr)


def dry_run_job(cfg: DictConfig, output_dir: str, judge: JudgeConfig | None = None) -> None:
    """``dry_run=true``: what the run would send, printed (and the judge that would read it); nothing is sent,
    nothing but config.yaml written."""
    plan = run(to_config(cfg, output_dir), progress=cfg.progress)["dry_run"]
    unit = task_named(cfg.task.name).unit_name

    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    print(f"dry run · {plan['model']} · {plan['task']}: {count(plan['units'], unit)}, "
          f"{count(plan['requests'], 'request')}, {count(plan['prompts'], 'prompt')}")
    if "to_send" in plan:
        cost = plan.get("estimated_cost_at_most")
        print(f"would send {plan['to_send']} requests ({plan['cached']} answered from the cache): about "
              f"{plan['estimated_prompt_tokens']} prompt tokens (characters / 4) and at most "
              f"{plan['max_completion_tokens']} completion tokens"
              + ("" if cost is None else f", at most {cost:.4f} in the prices' currency")
              + (f"; model.server.max_requests={plan['capped_by_max_requests']} will stop it there"
                 if "capped_by_max_requests" in plan else ""))
    if judge is not None:  # its requests depend on which responses differ: known only once the run has answered
        where = f" at {judge.base_url}" if judge.base_url else " in this process"
        print(f"then the judge {judge.model}{where} would read the run: one request a differing variant response "
              f"(two with both_orders) and {judge.decoys} a set for its controls")
    return None


def check_before_tracking(run_cfg) -> None:
    """The run's own checks (settings, capabilities, a hub model's availability) before W&B starts, so that a config
    error or a gated model leaves no W&B run behind (``runner.run`` checks again: cheap)."""
    from posixlab.runner import check
    from posixlab.tasks import make_task

    check(make_task(run_cfg))


def judge_of(resolved: dict, task: str, gate: GateConfig | None = None) -> JudgeConfig | None:
    """The judge a run ends with (``judge=``; None: none), its settings checked before the run starts (and a
    ``gate`` that reads a judge's shares: not without one).

    >>> judge_of({"judge": {"model": None}}, "posix") is None
    True
    >>> judge_of({"judge": {"model": "j"}}, "classification")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: judge= reads a POSIX run's responses; a classification run's answers are labels, \
compared without a judge (judge=none)
    """
    judge = JudgeConfig(**(resolved.get("judge") or {}))
    if judge.model is None:
        if gate is not None and gate.min_judged_share is not None:
            raise ConfigError("gate.min_judged_share reads a judge's share of responses judged the same: end the run "
                              "with a judge (judge=packaged, or judge.model=...), or gate a judged run with "
                              "posixlab gate RUN gate.min_judged_share=...")
        return None
    if task != "posix":
        raise ConfigError(f"judge= reads a POSIX run's responses; a {task} run's answers are labels, compared without "
                          f"a judge (judge=none)")
    if resolved.get("shard"):
        raise ConfigError("a shard's sets are judged with the rest of their cell: run the shards with judge=none, "
                          "join them (posixlab merge OUT SHARD_DIR ...), then posixlab judge OUT")
    judge.instruction_text()
    judge_spec(judge.model, judge.base_url, judge.api_key_env, judge.max_concurrency)  # a name it cannot resolve
    return judge


def done_before(cfg: DictConfig, output_dir: str, judge: JudgeConfig | None = None) -> dict | None:
    """``skip_done=true``: the summary of the run already in ``output_dir`` when it is this one, finished (the same
    settings, shard and posixlab version; not stopped early), its result lines printed (a judge the run ends with
    reads it as ever: the verdicts it has are reused); else None, and the job runs. A sweep run again with it runs
    only the cells that did not finish (no W&B run, no model loaded for the others)."""
    from dataclasses import asdict

    from posixlab.judge import judge_line
    from posixlab.results import SUMMARY_FILE
    from posixlab.shards import config_fingerprint, parse_shard

    try:
        summary = json.loads((Path(output_dir) / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_cfg, task_type = to_config(cfg, output_dir), task_named(cfg.task.name)
    shard = parse_shard(getattr(run_cfg, "shard", None))
    if not isinstance(summary, dict) or summary.get("stopped") or summary.get("posixlab") != __version__ \
            or summary.get("config_fingerprint") != config_fingerprint(asdict(run_cfg)) \
            or [(summary.get("shard") or {}).get(k) for k in ("index", "count")] != list(shard or (None, None)):
        return None
    note_done_before(output_dir)  # for posixlab status: the summary, older than this job, is its result
    print(f"posixlab: {output_dir} holds this run, finished: not run again (skip_done=true)")
    for line in [*task_type.report_lines(summary), *shard_lines(summary, task_type.unit_name)]:
        print(line)
    if judge is not None:
        print(judge_line(judge_folder(judge, output_dir, cache_dir=run_cfg.cache_dir, progress=cfg.progress)))
    return summary


def run_job(cfg: DictConfig, resolved: dict, output_dir: str, group: str | None,
            judge: JudgeConfig | None = None) -> tuple[dict, PosixlabError | None]:
    """One Hydra job of any task: its config, the checks, a W&B run around the work, the judge it ends with (its
    numbers in the same W&B run), the figures, the result lines. (The summary, the judge's error or None.)"""
    from posixlab.judge import judge_line, judge_tracked, judged_rows

    task_type = task_named(cfg.task.name)
    run_cfg = to_config(cfg, output_dir)  # a config error stops the job before W&B starts
    check_before_tracking(run_cfg)
    judged, judge_error = None, None
    with Tracker(resolved["logger"], resolved, output_dir, name=Path(output_dir).name, group=group,
                 job_type=task_type.name) as tracker:
        summary = run(run_cfg, progress=cfg.progress)
        if judge is not None:  # the run's model is closed: the judge loads in its place
            try:
                judged = judge_folder(judge, output_dir, cache_dir=run_cfg.cache_dir, progress=cfg.progress)
            except PosixlabError as exc:  # the verdicts so far are kept; the run's results stand
                judge_error = exc
        figures = task_type.figures(Path(output_dir))
        tracker.log_run(task_type.tracked(summary, Path(output_dir)), figures)
        if judged is not None:
            tracker.log_run(judge_tracked(judged, judged_rows(Path(output_dir), judged)), judged_figures(output_dir),
                            prefix="judge/", folder=False)
    for line in [*task_type.report_lines(summary), *shard_lines(summary, task_type.unit_name)]:
        print(line)
    if judged is not None:
        print(judge_line(judged))
        for warning in judged.get("warnings") or []:
            print(f"posixlab: warning: {warning} (judge.json)", file=sys.stderr)
    print(f"results: {output_dir}")
    if tracker.where:
        print(tracker.where)
    return summary, judge_error


def load_chosen_tasks(argv: list[str]) -> None:
    """Before the config is composed: a task chosen on the command line (``task=NAME``, a sweep's ``task=A,B``) that
    is not built in is looked for among the plug-ins (posixlab/plugins.py), and its config node registered, so that
    Hydra finds ``task/NAME``; a name no plug-in brings is a ``ConfigError`` that says how to bring one.

    >>> load_chosen_tasks(["task=classification", "variant=template"])
    """
    chosen = {value.strip() for arg in argv if arg.partition("=")[0].lstrip("+~") == "task"
              for value in arg.partition("=")[2].split(",")}
    unknown = sorted(name for name in chosen if re.fullmatch(r"[\w.-]+", name) and name not in TASK_TYPES)
    for name in unknown:
        task_named(name)  # imports the plug-ins once; unknown still: the error
    if unknown:
        register_defaults()
    load_chosen_variants(argv)


def load_chosen_variants(argv: list[str]) -> None:
    """A variant type chosen on the command line (``variant=NAME``, a sweep's ``variant=A,B``) that has no config
    in ``conf/variant/``: a plug-in's (``posixlab.variants.register_variant``), its config node registered (its
    name, and as ``options`` its constructor's keywords and defaults, ``variant_options``, so that
    ``variant.options.NAME=VALUE`` sets one); a name no plug-in brings is a ``ConfigError`` naming the types.

    >>> load_chosen_variants(["variant=spelling,template", "model=gemma3-270m"])
    >>> load_chosen_variants(["variant=speling"])
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: unknown variant type 'speling' (did you mean spelling?); the types are spelling, \
template, paraphrase, mixture, format, or one from a plug-in (a backend, task or variant type): name its module in \
POSIXLAB_PLUGINS=MODULE[,MODULE...] (a MODULE.py in this folder or an installed module), or install a package that \
declares it under the entry point group posixlab.plugins
    """
    from posixlab.variants.registry import variant_options, variant_type

    configured = {path.stem for path in (Path(CONF_DIR) / "variant").glob("*.yaml")}
    chosen = {value.strip() for arg in argv if arg.partition("=")[0].lstrip("+~") == "variant"
              for value in arg.partition("=")[2].split(",")}
    for name in sorted(name for name in chosen if re.fullmatch(r"[\w.-]+", name) and name not in configured):
        options = variant_options(variant_type(name))  # imports the plug-ins once; unknown still: the error
        ConfigStore.instance().store(group="variant", name=name, node={"name": name, "options": options})


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


def register_chosen_models(argv: list[str]) -> list[str]:
    """Before the config is composed: ``model=`` takes every form ``posixlab.evaluate``'s ``model`` does besides a
    configured name (``conf/model/``), in a sweep too: a hub id (``model=Qwen/Qwen2.5-0.5B-Instruct``), a GGUF file
    on the hub (``OWNER/REPO:Q4_K_M``), a local folder or ``.gguf`` file. Each such value gets a config node of its
    own, registered where Hydra looks for ``model=VALUE`` (a local path's under ``local:`` and its absolute path),
    named in results as ``posixlab.evaluate`` names it (``posixlab.api.resolve_model``: the repository's, folder's or
    file's name, ``Qwen2.5-0.5B-Instruct``, so that job folders stay flat; ``model.name=`` names it otherwise). A
    value that is none of these is a ``ConfigError`` naming the forms, before anything loads. Returns ``argv`` with
    local paths as their nodes' names; and where ``model.path=`` changes the default model's path without a
    ``model=`` or ``model.name=``, the model is named by that path, not as the packaged default.

    >>> register_chosen_models(["model=gemma3-270m,Qwen/Qwen2.5-0.5B-Instruct", "variant=template"])
    ['model=gemma3-270m,Qwen/Qwen2.5-0.5B-Instruct', 'variant=template']
    >>> register_chosen_models(["model=no-such-model"])
    Traceback (most recent call last):
    posixlab.errors.ConfigError: model 'no-such-model' is not a packaged model (...
    """
    configured = {p.stem for folder in (Path(CONF_DIR), *_config_dirs(argv)) for p in (folder / "model").glob("*.yaml")}
    out = []
    for arg in argv:
        head, eq, value = arg.partition("=")
        # choice(...), range(...): Hydra's own sweeps
        if not eq or arg.startswith("-") or head.lstrip("+~") != "model" or "(" in value:
            out.append(arg)
            continue
        chosen = []
        for name in (v.strip().strip("'\"") for v in value.split(",")):  # Hydra's quotes and spaces: not the name
            if not name or name in configured or name.startswith("local:"):  # ~model= deletes: no name
                chosen.append(name)
                continue
            from posixlab.api import resolve_model  # torch: only for a model named otherwise than by a config

            spec, _ = resolve_model(name, None)
            key = f"local:{spec.path}" if spec.source == "local" else name
            group, _, option = f"model/{key}".rpartition("/")
            ConfigStore.instance().store(group=group, name=option, node={
                "defaults": ["_defaults"], "name": spec.name, "source": spec.source, "path": spec.path,
                "backend": spec.backend})
            chosen.append(key)
        out.append(f"{head}={','.join(chosen)}")
    keys = {arg.partition("=")[0].lstrip("+~") for arg in argv if "=" in arg}
    if "model.path" in keys and not keys & {"model", "model.name"}:  # the default model's name is not this model's
        out.append("model.name='${posixlab.gguf_name:${model.path}}'")  # quoted: Hydra's grammar
    return out


def say_note(notice=None):
    """Where a command-line rewrite says what it did: ``notice`` (a test's), else a line on stderr."""
    return notice or (lambda text: print(text, file=sys.stderr))


def expand_moved_settings(argv: list[str], notice=None) -> list[str]:
    """A task setting's older top-level spelling (``num_sets=50``, ``shots=0,1,2,3``) becomes its place under
    ``task.*``, with one notice for all of them (``notice``: where it goes; None: stderr), so every documented
    command keeps working.

    >>> expand_moved_settings(["variant=template", "num_sets=5", "-m", "+shots=0,1"], notice=lambda text: None)
    ['variant=template', 'task.num_sets=5', '-m', '+task.shots=0,1']
    """
    moved = {key for task_type in TASK_TYPES.values() for key in task_type.moved_settings}
    out, renamed = [], []
    for arg in argv:
        head, eq, value = arg.partition("=")
        prefix = head[:len(head) - len(head.lstrip("+~"))]
        key = head[len(prefix):]
        if eq and key in moved:
            arg = f"{prefix}task.{key}={value}"
            renamed.append(f"{key} is task.{key}")
        out.append(arg)
    if renamed:
        say_note(notice)(
            f"posixlab: note: {', '.join(renamed)} now (a task's own settings live under task.*); the old spelling "
            f"still works")
    return out


def expand_home(argv: list[str]) -> list[str]:
    """``~/`` at the start of a setting's value (or of a sweep's item) is the home folder, as a shell would have made
    it: a shell expands ``model=~/m.gguf`` but not ``dataset.path=~/sets.jsonl`` (not a variable's name), and Hydra's
    override grammar refuses the ``~`` with a lexer error. A ``~key`` (Hydra: delete the key) is left as it is.

    >>> home = str(Path.home())
    >>> expand_home(["dataset.path=~/sets.jsonl", "~logger", "-m", "rephraser.path=~/a.jsonl,~/b.jsonl"]) == [
    ...     f"dataset.path={home}/sets.jsonl", "~logger", "-m", f"rephraser.path={home}/a.jsonl,{home}/b.jsonl"]
    True
    """
    home = str(Path.home())
    out = []
    for arg in argv:
        head, eq, value = arg.partition("=")
        if eq and not arg.startswith("-") and "~" in value:
            arg = head + eq + re.sub(r"(^|,)~(?=/|,|$)", lambda m: m.group(1) + home, value)
        out.append(arg)
    return out


def flags_first(argv: list[str]) -> list[str]:
    """Hydra's flags (``-m``, ``--cfg job``, ``--info defaults``), each with its value, moved before the overrides:
    Hydra's parser takes them only there, and after an override it answered with argparse's "unrecognized
    arguments" naming every override that followed.

    >>> flags_first(["hydra/launcher=local_parallel", "-m", "variant=spelling,template"])
    ['-m', 'hydra/launcher=local_parallel', 'variant=spelling,template']
    >>> flags_first(["+experiment=offline_table1", "--cfg", "job", "seed=3", "-cn", "config"])
    ['--cfg', 'job', '-cn', 'config', '+experiment=offline_table1', 'seed=3']
    >>> flags_first(["variant=template", "-m", "seed=1,2", "--cfg", "job"])
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: --cfg and -m cannot go together (Hydra runs one mode at a time): to see one cell's \
config, drop -m and give each setting one value (posixlab --cfg job ...)
    """
    flags, rest, words = [], [], iter(argv)
    for arg in words:
        if not arg.startswith("-"):
            rest.append(arg)
            continue
        flags.append(arg)
        takes_value = arg in _FLAGS_WITH_VALUE or arg in ("--info", "-i")
        value = next(words, None) if takes_value else None
        if value is None:
            continue
        if arg in _FLAGS_WITH_VALUE or value in _INFO_TOPICS:
            flags.append(value)
        else:  # --info alone, then an override
            rest.append(value)
    modes = {_MODES[flag] for flag in flags if flag in _MODES}
    if len(modes) > 1:  # Hydra's own answer was a ValueError's traceback
        raise ConfigError(f"{' and '.join(sorted(modes))} cannot go together (Hydra runs one mode at a time): to see "
                          f"one cell's config, drop -m and give each setting one value (posixlab --cfg job ...)")
    return flags + rest


def quote_text_values(argv: list[str], notice=None) -> list[str]:
    """A value Hydra's override grammar reads only in quotes (an apostrophe, parentheses, a ``#``, or, in a single
    run, a sentence's comma: ``task.task_sentence=Is it the user's view?``) is quoted for it, as the text it is, with
    one note (``notice``; None: stderr); a value Hydra parses (numbers, lists, a sweep's ``a,b``) is left to it.

    >>> quote_text_values(["task=classification", "task.task_sentence=Is it the user's view?"], lambda text: None)
    ['task=classification', 'task.task_sentence="Is it the user\\'s view?"']
    >>> quote_text_values(["task.task_sentence=Classify the review, please.", "seed=1"], lambda text: None)
    ['task.task_sentence="Classify the review, please."', 'seed=1']
    >>> quote_text_values(["-m", "variant=spelling,template", "dataset.subjects=[a,b]"], lambda text: None)
    ['-m', 'variant=spelling,template', 'dataset.subjects=[a,b]']
    >>> quote_text_values(["dataset.subjects=astronomy, anatomy"], lambda text: None)    # Hydra's error: use [a,b]
    ['dataset.subjects=astronomy, anatomy']
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser, sweep = OverridesParser.create(), any(a in ("-m", "--multirun") for a in argv)
    out, quoted = [], []
    for arg in argv:
        head, eq, value = arg.partition("=")
        if eq and not arg.startswith("-") and value and value[0] not in "[{'\"":
            try:  # in a single run, a comma among words (Hydra: "Ambiguous value"): a sentence; "a, b": a list
                parsed = parser.parse_override(arg)  # or a sweep missing its -m, which Hydra's own error explains
                as_text = not sweep and ", " in value and " " in value.replace(", ", "") and "(" not in value \
                    and parsed.is_sweep_override()
            except HydraException:
                as_text = True
            if as_text:
                mark = '"' if '"' not in value else "'"
                arg = f"{head}={mark}{value.replace(mark, chr(92) + mark)}{mark}"
                quoted.append(head.lstrip("+~"))
        out.append(arg)
    if quoted:
        say_note(notice)(
            f"posixlab: note: {', '.join(quoted)} read as text (Hydra's override grammar takes an apostrophe, "
            f"parentheses, a # or a sentence's comma only in quotes: key=\"...\")")
    return out


# Hydra's flags that take the next word as their value, and those after which no job runs
_FLAGS_WITH_VALUE = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--cfg", "-c", "--package",
                     "-p", "--experimental-rerun"}
_MODES = {"-m": "-m", "--multirun": "-m", "--cfg": "--cfg", "-c": "--cfg", "--info": "--info", "-i": "--info",
          "--shell-completion": "--shell-completion", "-sc": "--shell-completion", "--run": "--run", "-r": "--run"}
_INFO_TOPICS = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}  # --info [TOPIC]
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


def _node(container: dict, dotted: str):
    for part in dotted.split("."):
        container = container[part]
    return container


def _has_key(container: dict, dotted: str) -> bool:
    node = container
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def unknown_key_message(key: str, container: dict, other_tasks: dict[str, dict], hints: dict | None = None) -> str:
    """posixlab's message for an override of a key the config does not have: the closest valid key, or the task that
    has it.

    >>> c = {"task": {"name": "classification", "num_rephrasings": 30}, "num_sets": 20}
    >>> unknown_key_message("task.num_rephrasing", c, {})
    'task.num_rephrasing is not a setting: did you mean task.num_rephrasings?'
    >>> unknown_key_message("task.num_rephrasings", {"task": {"name": "posix"}}, {"classification": c})
    'task.num_rephrasings is a setting of task=classification, not of task=posix: add task=classification'
    >>> unknown_key_message("variant.options.k", {"variant": {"name": "spelling", "options": {}}}, {})
    'variant.options.k is not a setting: variant.options has none for variant=spelling'
    """
    import difflib

    for task, other in other_tasks.items():
        if _has_key(other, key):
            here = (container.get("task") or {}).get("name")
            hint = (hints or {}).get(key)
            return (f"{key} is a setting of task={task}, not of task={here}: add task={task}"
                    + (f" (task={here} has {hint})" if hint else ""))
    keys = _keys_of(container)
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    parent, _, last = key.rpartition(".")
    if _has_key(container, parent) and _node(container, parent) == {}:  # a group's options, none for this choice
        group = parent.split(".")[0]
        chosen = (container.get(group) or {}).get("name") if isinstance(container.get(group), dict) else None
        return f"{key} is not a setting: {parent} has none" + (f" for {group}={chosen}" if chosen else "")
    siblings = [k for k in keys if k.rpartition(".")[0] == parent]
    for among in (siblings, keys):  # the last part alone, among the keys of the same parent, then anywhere
        if close:
            break
        close = [k for k in among if k.rpartition(".")[2] in
                 difflib.get_close_matches(last, [s.rpartition(".")[2] for s in among], n=1, cutoff=0.6)][:1]
    hint = f"did you mean {close[0]}?" if close else "python run.py --cfg job prints every setting"
    return f"{key} is not a setting: {hint}"


_KINDS = {int: ("an integer", "integers"), float: ("a number", "numbers"), bool: ("true or false", "true or false"),
          str: ("a string", "strings")}


def _kind_of(node) -> str | None:
    """What a typed config node takes, in words (``an integer or null``); None when it takes anything."""
    from enum import Enum

    from omegaconf import ListConfig

    meta = node._metadata
    if isinstance(node, ListConfig):
        kind = "a list" + (f" of {_KINDS[meta.element_type][1]}" if meta.element_type in _KINDS else "")
    elif isinstance(node, DictConfig):
        kind = "a mapping"
    elif isinstance(meta.ref_type, type) and issubclass(meta.ref_type, Enum):
        kind = "one of " + ", ".join(meta.ref_type.__members__)
    elif meta.ref_type in _KINDS:
        kind = _KINDS[meta.ref_type][0]
    else:
        return None
    return kind + (" or null" if meta.optional else "")


_WORDS_TOO = {"progress"}  # switches that take a word too (progress=lines), checked with the run's settings


def check_value_type(cfg: DictConfig, key: str, override) -> None:
    """A ``ConfigError`` naming the key and the type it takes when an override (each value of a sweep) gives a typed
    setting (``task.*``: a structured config, ``task_schema``) a value of another type, as Hydra would apply it;
    Hydra's own error would say "could not be converted to Integer" under "Error merging override".

    >>> from hydra.core.override_parser.overrides_parser import OverridesParser
    >>> from posixlab.tasks import task_named
    >>> cfg = OmegaConf.create({"task": OmegaConf.structured(task_schema(task_named("posix")))})
    >>> check_value_type(cfg, "task.shots", OverridesParser.create().parse_override("task.shots=0,1"))
    >>> check_value_type(cfg, "task.num_sets", OverridesParser.create().parse_override("task.num_sets=abc"))
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: task.num_sets takes an integer or null, not 'abc'
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf.errors import ValidationError

    try:
        if override.is_sweep_override():
            texts = list(override.sweep_string_iterator())
            values = [OverridesParser.create().parse_override(f"{key}={text}").value() for text in texts]
        else:
            texts, values = [override.get_value_element_as_str()], [override.value()]
    except Exception:  # noqa: BLE001 (a sweep this cannot list (interval(...)): Hydra checks each job's value)
        return
    try:  # a switch of a free-form node (variant.options.include_original: false) takes it alone: 'yes' ran as 1
        switch = key not in _WORDS_TOO and isinstance(
            OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False), bool)
    except Exception:  # noqa: BLE001 (an interpolation it cannot read: Hydra's to report)
        switch = False
    for text, value in zip(texts, values):
        if switch and value is not None and not isinstance(value, bool):
            raise ConfigError(f"{key} takes true or false, not {text!r}"
                              + (f" (in {override.input_line})" if len(texts) > 1 else ""))
        try:
            OmegaConf.update(cfg, key, value, merge=True)  # as Hydra applies an override
        except ValidationError as exc:
            try:
                node = cfg
                for part in key.split("."):
                    node = node._get_node(part)
                kind = _kind_of(node)
            except Exception:  # noqa: BLE001 (then OmegaConf's own words)
                kind = None
            where = f" (in {override.input_line})" if len(texts) > 1 else ""
            raise ConfigError(f"{key} takes {kind}, not {text!r}{where}" if kind else
                              f"{key}={text}: {str(exc).splitlines()[0]}{where}") from None
        except Exception:  # noqa: BLE001 (anything else is Hydra's to report)
            return


def _sort_overrides(parsed, repository) -> tuple[list[str], list[tuple[str, object]], list[str]]:
    """Parsed overrides in three kinds: group choices (as override lines, a sweep's first value standing for it),
    keys set (name and override) and keys added with ``+``; ``hydra.*`` keys and deletions are left out."""
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
            keys.append((name, override))
    return groups, keys, added


def _added_group_chosen(groups: list[str], composed) -> str | None:
    """posixlab's message for a group choice written with a ``+`` where the group is already chosen
    (``+variant=template``), where Hydra would say "Multiple values for variant. To override a value use 'override
    variant: template'"; None otherwise. Asked only where the config did not compose."""
    for line in (line for line in groups if line.startswith("+")):
        group = line.lstrip("+").partition("=")[0]
        without = composed([other for other in groups if other is not line])
        node = (without or {}).get(group)
        if "." not in group and isinstance(node, dict) and node.get("name") is not None:
            return f"{group} is already chosen ({group}={node['name']}): write {line.lstrip('+')}, without the +"
    return None


def _checked_groups(groups: list[str], composed) -> DictConfig | None:
    """The config the group choices compose (None where they do not: Hydra's message follows), after posixlab's own
    errors for a group only another task reads (``strategy=detail`` in a POSIX run: Hydra would say "Could not
    override 'strategy'. No match in the defaults list" and, given the + it suggests, run without it) and for a
    group chosen twice with a ``+`` (``_added_group_chosen``)."""
    task_groups = {group for task_type in TASK_TYPES.values() for group in task_type.config_groups}
    if any(line.lstrip("+~").partition("=")[0] in task_groups for line in groups):
        chooses_task = [line for line in groups if line.lstrip("+").partition("=")[0] in ("task", "experiment")]
        check_task_groups(((composed(chooses_task) or {}).get("task") or {}).get("name", "posix"), groups)
    typed = composed(groups, typed=True)
    added = _added_group_chosen(groups, composed) if typed is None else None
    if added:
        raise ConfigError(added)
    return typed


def check_group_choices(parsed, repository) -> None:
    """A ``ConfigError`` for a group option that does not exist (``dataset=mmlu_smple``; every value of a sweep),
    naming the options and the nearest, where Hydra would print its config search path, and in a sweep run the cells
    before the bad one first. ``model``, ``variant`` and ``task`` have their own checks (hub ids, plug-ins) before."""
    from hydra.core.object_type import ObjectType

    for override in parsed:
        group = override.key_or_group.replace(".", "/")
        if group in ("model", "variant", "task") or override.is_delete() or not repository.group_exists(group):
            continue
        try:
            values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.value()]
        except Exception:  # noqa: BLE001 - a sweep form this cannot list (range over a group): Hydra's to judge
            continue
        for value in (v for v in values if isinstance(v, str) and not repository.config_exists(f"{group}/{v}")):
            options = [o for o in repository.get_group_options(group, results_filter=ObjectType.CONFIG)
                       if not o.startswith("_")]
            raise ConfigError(f"{override.key_or_group}={value}: no such option{nearest(value, options)}; the options "
                              f"are {', '.join(options)}")


def _config_dirs(argv: list[str]) -> list[Path]:
    """The folders ``--config-dir``/``-cd`` add to Hydra's search path (your own experiments, models, ...).

    >>> _config_dirs(["--config-dir", "/my/conf", "-m", "--config-dir=/other", "seed=1"])
    [PosixPath('/my/conf'), PosixPath('/other')]
    """
    dirs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--config-dir", "-cd")]
    dirs += [a.split("=", 1)[1] for a in argv if a.startswith(("--config-dir=", "-cd="))]
    return [Path(d).expanduser().resolve() for d in dirs]


class _WithConfigDirs:
    """Hydra's config repository of posixlab's configs, with the options of the ``--config-dir`` folders, which a
    run's Hydra searches too: ``+experiment=mine`` from ``--config-dir my_conf`` is an option, not a typo."""

    def __init__(self, repository, dirs: list[Path]):
        self.repository, self.dirs = repository, dirs

    def group_exists(self, group: str) -> bool:
        return self.repository.group_exists(group) or any((d / group).is_dir() for d in self.dirs)

    def config_exists(self, path: str) -> bool:
        return self.repository.config_exists(path) or any((d / f"{path}.yaml").is_file() for d in self.dirs)

    def get_group_options(self, group: str, results_filter=None) -> list[str]:
        own = self.repository.get_group_options(group, results_filter=results_filter) \
            if self.repository.group_exists(group) else []
        return sorted({*own, *(p.stem for d in self.dirs for p in (d / group).glob("*.yaml"))})


def check_override_keys(argv: list[str]) -> None:
    """A ``ConfigError`` for a command-line override that names a key the composed config does not have, with or
    without ``+``, before Hydra sees it: Hydra would answer "use +key=value", and with the ``+`` it would accept the
    key silently (the run then ignores it); and for a value of the wrong type for a typed setting (``task.*``,
    ``check_value_type``). Group choices (``model=...``, ``+experiment=...``), ``hydra.*`` keys,
    deletions and keys under a free-form ``options`` node pass; an override this cannot read is left to Hydra."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a in _NO_JOB or a.startswith("--info") for a in argv):
        return
    if any(a.split("=")[0] in ("--config-path", "-cp", "--config-name", "-cn") for a in argv):
        return  # a primary config of your own: Hydra's to check
    dirs = _config_dirs(argv)
    searchpath = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []
    texts, skip = [], False
    for arg in argv:
        if skip or arg.startswith("-"):
            skip = arg in _FLAGS_WITH_VALUE
            continue
        texts.append(arg)
    for text in texts:  # a word alone is no override (Hydra: "missing EQUAL"): most often a command mistyped
        if "=" not in text and not text.startswith("~"):
            near = difflib.get_close_matches(text, [*COMMANDS, "help"], n=1)
            raise ConfigError(f"{text!r} is neither a command ({', '.join(COMMANDS)}, help) nor a setting (write "
                              f"key=value, e.g. model=gemma3-270m)" + (f"; did you mean posixlab {near[0]}?"
                                                                        if near else ""))
    try:
        parsed = OverridesParser.create().parse_overrides(texts)
    except HydraException:
        return  # Hydra's own message about the syntax follows
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        repository = _WithConfigDirs(GlobalHydra.instance().config_loader().repository, dirs)
        check_group_choices(parsed, repository)
        groups, keys, added = _sort_overrides(parsed, repository)

        def composed(overrides: list[str], typed: bool = False) -> dict | DictConfig | None:
            try:
                cfg = compose(config_name="config", overrides=[*searchpath, *overrides])
            except HydraException:
                return None
            return cfg if typed else OmegaConf.to_container(cfg, resolve=False)

        typed = _checked_groups(groups, composed)
        if typed is None:
            return  # a group choice that does not exist: Hydra's message names the choices
        base = OmegaConf.to_container(typed, resolve=False)
        def unknown(name: str) -> ConfigError:  # the other task's config is composed only for a key not found
            task = (base.get("task") or {}).get("name")
            others = {t: c for t in TASK_TYPES if t != task
                      and (c := composed([*groups, f"task={t}"])) is not None}
            return ConfigError(unknown_key_message(name, base, others, task_named(task).instead_of
                                                   if task in TASK_TYPES else None))

        for name, _ in keys:
            if not _has_key(base, name):
                raise unknown(name)
        for name, override in keys:  # a typed setting (task.*) given a value of another type: every value of a sweep
            check_value_type(typed, name, override)
        for name in added:
            parent = name.rpartition(".")[0]
            if _has_key(base, name):
                raise ConfigError(f"{name} is already a setting: write {name}=VALUE, without the +")
            if parent.split(".")[-1] != "options":
                raise unknown(name)
    GlobalHydra.instance().clear()


# ``posixlab NAME ...``: the commands besides a run, each taking --help (``posixlab --help`` lists them too:
# conf/config.yaml's hydra.help)
COMMANDS = {"report": report_command, "gate": gate_command, "compare": compare_command, "status": status_command,
            "merge": merge_command, "dove": dove_command, "judge": judge_command,
            "gguf-path": gguf_path_command}


def version_line() -> str:
    """``posixlab --version``: posixlab's version and those of what its numbers depend on.

    >>> version_line().startswith(f"posixlab {__version__} (Python ")
    True
    """
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} not installed"

    return (f"posixlab {__version__} (Python {platform.python_version()}, "
            + ", ".join(of(name) for name in ("torch", "transformers", "hydra-core", "wandb")) + ")")


RUN_FILES = (SUMMARY_FILE, "summary.md", SETS_FILE, SAMPLES_FILE, "report.html", "config.yaml", "cli.log")


def run_folders_of_files(command: str, args: list[str]) -> list[str]:
    """A file of a run's folder (``posixlab report RUN/summary.json``, as a shell's tab completion gives it) stands
    for its folder, where a command reads run folders; said on stderr. A flag's value is left as it is.

    >>> import tempfile; run = Path(tempfile.mkdtemp()); _ = (run / "summary.json").write_text("{}")
    >>> given = [str(run / "summary.json"), "--out", str(run / "summary.json")]
    >>> run_folders_of_files("report", given) == [str(run), "--out", str(run / "summary.json")]
    True
    >>> import shutil; shutil.rmtree(run)
    """
    if command not in ("report", "gate", "compare", "status", "judge"):
        return args
    out, after_flag = [], False
    for arg in args:
        path = Path(arg)
        if not after_flag and path.name in RUN_FILES and path.is_file() \
                and any((path.parent / name).is_file() for name in (SUMMARY_FILE, SETS_FILE, SAMPLES_FILE)):
            print(f"posixlab: {arg} is a file of a run: reading its folder, {path.parent}", file=sys.stderr)
            arg = str(path.parent)
        after_flag = arg.startswith("--") and "=" not in arg
        out.append(arg)
    return out


def entry() -> None:
    """The ``posixlab`` console command (through ``posixlab.console.entry``): one of ``COMMANDS`` (``posixlab
    report RUN_DIR ...``, ``gate``, ``compare``, ``status``, ``merge``, ``dove``, ``judge``, ``gguf-path``),
    ``posixlab help``, or else a Hydra job."""
    prefer_expandable_segments()  # before anything touches a GPU
    sys.argv[1:] = expand_moved_settings(expand_model_aliases(sys.argv[1:]))
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        sys.argv[2:] = run_folders_of_files(sys.argv[1], sys.argv[2:])
        # a plug-in run's folder reads without POSIXLAB_PLUGINS: the plug-ins it was made with (posixlab/plugins.py)
        load_recorded_plugins([a for a in sys.argv[2:] if "=" not in a and not a.startswith("-") and Path(a).is_dir()])
        try:
            sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
        except OSError as exc:  # a file or folder it reads or writes where it cannot: no such folder, no permission
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"posixlab error: posixlab {sys.argv[1]}: {where}{exc.strerror or exc}", file=sys.stderr)
            sys.exit(2)
    if sys.argv[1:] == ["help"]:  # a word Hydra would read as an override without a value
        sys.argv[1:] = ["--help"]
    if sys.argv[1:] in (["--version"], ["-V"]):  # Hydra's own --version names Hydra's version alone
        print(version_line())
        sys.exit(0)
    try:
        sys.argv[1:] = quote_text_values(flags_first(expand_home(sys.argv[1:])))  # a Hydra job from here on
        load_chosen_tasks(sys.argv[1:])
        sys.argv[1:] = register_chosen_models(sys.argv[1:])
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

