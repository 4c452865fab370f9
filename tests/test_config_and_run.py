"""Every config composes; run.py end to end on the packaged model; clear errors for bad input."""

import json
import signal
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError
from posixlab.metrics import psi
from posixlab.runner import run
from posixlab.tasks.posix import PosixConfig
from posixlab.results import read_sets

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "posixlab" / "conf"
GROUPS = {g: sorted(p.stem for p in (CONF / g).glob("*.yaml") if not p.stem.startswith("_")) for g in ("model", "dataset", "variant", "rephraser", "embedding",
                                                                                 "logger")}


def test_every_config_composes_into_a_run_config():
    from posixlab.cli import to_config

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        default = compose(config_name="config")
        assert (default.model.name, default.dataset.source, default.variant.name) == ("smollm2-135m-instruct", "sample", "spelling")
        assert (default.task.num_sets, default.task.num_variants, default.max_new_tokens, default.chat_template) == \
            (20, 20, 5, False)
        for group, options in GROUPS.items():
            for option in options:
                cfg = compose(config_name="config", overrides=[f"{group}={option}"])
                if cfg.dataset.get("task") == "classification":  # classification data sets need task=classification
                    with pytest.raises(ConfigError, match="add task=classification"):
                        to_config(cfg, "out")
                    cfg = compose(config_name="config", overrides=[f"{group}={option}", "task=classification"])
                    rc = to_config(cfg, "out")
                    assert rc.data.name == option and rc.num_rephrasings == 30
                    continue
                rc = to_config(cfg, "out")
                assert rc.max_new_tokens >= 1 and rc.model.source in ("packaged", "hub", "local", "api")
                assert (rc.model.source == "api") == (rc.model.backend == "chat")
        for strategy in ("simple", "detail", "1shot"):
            cfg = compose(config_name="config", overrides=["task=classification", f"strategy={strategy}"])
            assert to_config(cfg, "out").strategy == strategy
    assert len(GROUPS["model"]) >= 15


def test_w_and_b_s_own_wandb_mode_sets_the_mode_the_command_line_wins(monkeypatch):
    """``WANDB_MODE`` in the environment, as any W&B program reads it (a cluster script's ``WANDB_MODE=disabled``),
    sets ``logger.mode`` where the command line does not; it was ignored, so such a script still wrote offline runs.
    W&B's older names (dryrun, run) read as offline and online; an unknown one is named with where it came from."""
    import posixlab.cli  # noqa: F401  (the resolvers and the defaults' config nodes)
    from posixlab.tracking import Tracker

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        monkeypatch.delenv("WANDB_MODE", raising=False)
        assert compose(config_name="config").logger.mode == "offline"
        monkeypatch.setenv("WANDB_MODE", "disabled")
        assert compose(config_name="config").logger.mode == "disabled"
        assert compose(config_name="config", overrides=["logger.mode=offline"]).logger.mode == "offline"
    assert Tracker({"backend": "wandb", "mode": "disabled"}, {}, ".", name="r", group=None).run is None  # nothing
    monkeypatch.setenv("WANDB_MODE", "loud")
    with pytest.raises(ConfigError, match=re.escape("logger.mode must be one of offline, online, disabled, got 'loud' "
                                                    "(where logger.mode is not given, the environment's WANDB_MODE "
                                                    "sets it: WANDB_MODE='loud' here)")):
        Tracker({"backend": "wandb", "mode": "loud"}, {}, ".", name="r", group=None)


def test_runs_of_two_of_your_own_files_get_folders_named_by_their_files():
    import posixlab.cli  # noqa: F401  (registers the resolvers that run_name uses)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        names = [compose(config_name="config", overrides=overrides).task.run_name for overrides in (
            ["dataset=prompt_sets", "dataset.path=data/my sets.jsonl"], ["dataset=prompt_sets", "dataset.path=b.json"],
            ["task=classification", "dataset=classifier", "dataset.path=reviews.yaml"],
            ["dataset=questions", "dataset.path=quiz.csv"], ["dataset=mmlu"])]
    assert names == ["smollm2-135m-instruct_prompt_sets-my_sets_user_0shot",
                     "smollm2-135m-instruct_prompt_sets-b_user_0shot",
                     "smollm2-135m-instruct_classification_classifier-reviews_simple_greedy",
                     "smollm2-135m-instruct_quiz_spelling_0shot", "smollm2-135m-instruct_mmlu_spelling_0shot"]


def test_the_options_of_your_own_config_dir_are_options_not_typos(tmp_path):
    """``--config-dir my_conf +experiment=mine model=mysmol``: Hydra searches the folder, so posixlab's checks of
    group options and model names do too (they refused both as typos)."""
    from posixlab.cli import check_override_keys, register_chosen_models

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /variant: template\ntask:\n  num_sets: 2\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mysmol.yaml").write_text(
        "defaults:\n  - _defaults\nname: mysmol\nsource: packaged\npath: smollm2-135m-instruct\n")
    argv = ["--config-dir", str(tmp_path), "+experiment=mine", "model=mysmol", "task.num_sets=3"]
    assert register_chosen_models(argv) == argv
    check_override_keys(argv)  # no error: both are options
    with pytest.raises(ConfigError, match=r"experiment=mien: no such option \(did you mean mine\?\)"):
        check_override_keys(["--config-dir", str(tmp_path), "+experiment=mien"])
    with pytest.raises(ConfigError, match="experiment=mine: no such option"):
        check_override_keys(["+experiment=mine"])  # without the folder, a typo still
    with pytest.raises(ConfigError, match="model 'mysmol' is not a packaged model"):
        register_chosen_models(["model=mysmol"])


@pytest.mark.slow
def test_a_home_path_and_a_sentence_s_punctuation_are_read_not_hydra_lexer_errors():
    """``dataset.path=~/sets.jsonl``: the shell leaves the ``~`` (the key is no variable's name) and Hydra's grammar
    refuses it; posixlab expands it as the shell would have (printed with --cfg job: no run)."""
    proc = _run_py(["dataset=prompt_sets", "dataset.path=~/sets.jsonl", "--cfg", "job"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"path: {Path.home() / 'sets.jsonl'}" in proc.stdout and "Lexer" not in proc.stderr
    # a sentence with an apostrophe, parentheses or commas: read as the text it is, not a grammar error
    proc = _run_py(["task=classification", "task.task_sentence=Is it the user's view (yes, no, or unsure)?",
                    "--cfg", "job"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "task_sentence: Is it the user's view (yes, no, or unsure)?" in proc.stdout
    assert "posixlab: note: task.task_sentence read as text" in proc.stderr


def _run_py(args, env_extra=None, timeout=600):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env_extra or {})}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_run_py_end_to_end_writes_the_results(tmp_path):
    out = tmp_path / "run"
    proc = _run_py(["num_sets=2", "progress=false", f"hydra.run.dir={out}", f"score_cache_dir={tmp_path / 'scores'}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "POSIX = " in proc.stdout
    for name in ("config.yaml", "sets.jsonl", "summary.json", "summary.md"):
        assert (out / name).is_file(), name
    records = read_sets(out)
    assert len(records) == 2
    for r in records:
        assert len(r["prompts"]) == 21 and r["prompts"][0]["kind"] == "original"
        assert all(p["kind"] == "spelling" and p["record"]["edits"] for p in r["prompts"][1:])
        assert len(r["responses"]) == 21 and all(resp["length"] == len(resp["token_ids"]) for resp in r["responses"])
        m = np.array(r["logprob_matrix"])
        assert m.shape == (21, 21)
        assert r["psi"] == psi(m, r["lengths"])  # the stored ψ is the stored matrix's ψ
    summary = json.loads((out / "summary.json").read_text())
    assert summary["psi"]["num_sets"] == 2
    assert summary["psi"]["posix"] == pytest.approx(np.mean([r["psi"] for r in records]))
    assert summary["model"]["gguf_sha256"].startswith("b179c952")
    assert f"{summary['psi']['posix']:.4f}" in proc.stdout


@pytest.mark.slow
def test_run_py_answers_only_with_psi_false(tmp_path):
    out = tmp_path / "run"
    proc = _run_py(["num_sets=1", "num_variants=2", "psi=false", "progress=false", f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["psi"] is None and summary["psi_computed"] is False
    assert len(read_sets(out)[0]["answers"]) == 3


@pytest.mark.slow
def test_sweep_runs_every_job(tmp_path):
    # -m after an override, as people type it: posixlab moves it first (Hydra's parser refused it there)
    proc = _run_py(["variant=spelling,template", "-m", "num_sets=1", "num_variants=2", "progress=lines",
                    f"hydra.sweep.dir={tmp_path}", "score_cache=false"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert jobs == ["0_smollm2-135m-instruct_mmlu_spelling_0shot", "1_smollm2-135m-instruct_mmlu_template_0shot"]
    for job in jobs:
        assert len(read_sets(tmp_path / job)[0]["prompts"]) == 3
    # no bars with progress=lines, not the libraries' either ("Loading weights"), but one plain line per finished set
    assert "posixlab: smollm2-135m-instruct · template: 1/1 sets" in proc.stderr
    assert "\r" not in proc.stderr and "it/s]" not in proc.stderr, proc.stderr[-2000:]
    # its end (SweepEndCallback): the grid of its cells printed and in grid.md, and its page
    assert f"posixlab: the sweep's grid (2 runs; {tmp_path / 'grid.md'}):\nPOSIX by variant" in proc.stdout
    assert "| spelling | " in (tmp_path / "grid.md").read_text() and (tmp_path / "report.html").is_file()


@pytest.mark.slow
def test_the_python_api_and_run_py_give_the_same_numbers_bit_for_bit(lm, tmp_path):
    """The same cell from Python and from run.py in a process of its own, so no state one process shares with itself
    (a loaded model, a warm kernel, an import-time setting) can hide a difference; recomputed both times: no score
    cache, or the second would read the first's scores."""
    from posixlab.models import ModelSpec

    model = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")  # run.py's default model
    run(PosixConfig(model=model, dataset=DatasetSpec("mmlu"), variant="template", num_sets=2, num_variants=3,
                    score_cache=False, output_dir=str(tmp_path / "api")), lm=lm, progress=False)
    proc = _run_py(["dataset=mmlu_sample", "variant=template", "num_sets=2", "num_variants=3", "score_cache=false",
                    "logger=none", "progress=false", f"hydra.run.dir={tmp_path / 'cli'}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    api, cli = read_sets(tmp_path / "api"), read_sets(tmp_path / "cli")
    assert len(api) == 2 and all(len(r["prompts"]) == 4 for r in api)
    assert cli == api  # every record: prompts, responses and their token ids, the matrices, ψ, the factors
    assert (tmp_path / "cli" / "sets.jsonl").read_bytes() == (tmp_path / "api" / "sets.jsonl").read_bytes()
    summaries = [json.loads((tmp_path / side / "summary.json").read_text()) for side in ("api", "cli")]
    assert summaries[0]["psi"] == summaries[1]["psi"]  # POSIX, its sd and its bootstrap interval


@pytest.mark.slow
def test_killed_run_resumes_from_the_score_cache_with_identical_numbers(tmp_path):
    """A run killed (SIGKILL) after its first sets restarts, recomputes none of them, and ends with the numbers an
    uninterrupted run gives."""
    common = ["num_sets=5", "num_variants=10", "progress=false", "engine.max_wave_rows=1",  # one set per wave
              f"score_cache_dir={tmp_path / 'scores'}"]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    killed = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *common, f"hydra.run.dir={tmp_path / 'killed'}"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sets_file = tmp_path / "killed" / "sets.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and killed.poll() is None:
        if sets_file.exists() and sets_file.read_text().count("\n") >= 1:
            killed.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    assert killed.wait(60) == -signal.SIGKILL, "the run ended before it could be killed"
    finished_before_kill = sets_file.read_text().count("\n")
    assert 1 <= finished_before_kill < 5

    resumed = _run_py([*common, f"hydra.run.dir={tmp_path / 'resumed'}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    compute = json.loads((tmp_path / "resumed" / "summary.json").read_text())["compute"]
    assert compute["sets_from_cache"] >= finished_before_kill and compute["saved_by_cache"] > 0
    assert compute["forward_tokens"] < compute["saved_by_reuse"]

    clean = _run_py([*common, "score_cache=false", f"hydra.run.dir={tmp_path / 'clean'}"])
    assert clean.returncode == 0, clean.stderr[-2000:]
    for a, b in zip(read_sets(tmp_path / "resumed"), read_sets(tmp_path / "clean"), strict=True):
        assert a["logprob_matrix"] == b["logprob_matrix"] and a["psi"] == b["psi"]
        assert [r["token_ids"] for r in a["responses"]] == [r["token_ids"] for r in b["responses"]]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


def test_model_takes_a_hub_id_a_gguf_file_or_a_folder_in_a_sweep_too(tmp_path):
    """``model=`` takes what ``posixlab.evaluate``'s ``model`` takes: each value composes into a model named as a
    GGUF file is (the repository's or the file's name: folder names stay flat), its source, path and backend."""
    from posixlab.cli import register_chosen_models

    gguf = tmp_path / "my-model.Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    given = ["meta-llama/Llama-3.2-1B", str(gguf), str(folder), "TheBloke/Llama-2-7B-GGUF:Q4_K_M", "gemma3-270m"]
    argv = register_chosen_models(["-m", f"model={given[0]}, '{given[1]}',{','.join(given[2:])}", "variant=template"])
    values = argv[1].removeprefix("model=").split(",")
    assert argv[0] == "-m" and argv[2:] == ["variant=template"]
    assert values == [given[0], f"local:{gguf}", f"local:{folder}", *given[3:]]  # a path: its node's name
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        models = [compose(config_name="config", overrides=[f"model={v}"]).model for v in values]
        renamed = compose(config_name="config", overrides=register_chosen_models(["model.source=hub",
                                                                                  "model.path=org/its-model"])).model
        kept = compose(config_name="config", overrides=register_chosen_models(["model=llama2-7b",
                                                                               "model.path=org/llama-copy"])).model
    assert [(m.name, m.source, m.path, m.backend) for m in models] == [
        ("Llama-3.2-1B", "hub", "meta-llama/Llama-3.2-1B", "transformers"),
        ("my-model.Q4_K_M", "local", str(gguf), "llamacpp"),
        ("my-finetune", "local", str(folder), "transformers"),
        ("Llama-2-7B-GGUF-Q4_K_M", "hub", "TheBloke/Llama-2-7B-GGUF:Q4_K_M", "llamacpp"),
        ("gemma3-270m", "packaged", "gemma3-270m", "transformers")]
    # model.path= on the default model: named by its path, not as the packaged default; model=NAME keeps NAME's
    assert (renamed.name, renamed.path, kept.name) == ("its-model", "org/its-model", "llama2-7b")
    with pytest.raises(ConfigError, match="did you mean gemma3-270m"):
        register_chosen_models(["model=gemma3-270M"])


@pytest.mark.slow
def test_hub_model_offline_fails_fast_with_a_clear_message(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    proc = _run_py(["model=llama2-7b", "variant=template", f"hydra.run.dir={tmp_path / 'run'}"], env, timeout=120)
    assert proc.returncode == 2
    assert "model llama2-7b (meta-llama/Llama-2-7b-hf) cannot be fetched from the Hugging Face Hub" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _run_py(["model=gpt2", f"hydra.run.dir={tmp_path / 'run2'}"], {**env, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert proc.returncode == 2 and "HF_HUB_OFFLINE is set" in proc.stderr


def _signal_after_the_first_set(args: list[str], folder: Path, sig: int):
    """``run.py ARGS`` sent ``sig`` once its first set is written: the process and its stderr."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT,
                            env={**os.environ, "HYDRA_FULL_ERROR": "0"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sets = folder / "sets.jsonl"
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not (sets.is_file() and sets.read_text().strip()):
        time.sleep(0.2)
    proc.send_signal(sig)
    return proc, proc.communicate(timeout=120)[1]


@pytest.mark.slow
def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path, capsys):
    """SIGTERM (a SLURM time limit on a plain sbatch script, ``timeout``, ``kill``) once a set is written: the same
    line as Ctrl-C, exit status 143, and the folder's status says terminated. Before, the process vanished without a
    word and its status file said running."""
    from posixlab.status import status_command

    folder = tmp_path / "run"
    proc, stderr = _signal_after_the_first_set(
        ["num_sets=6", "engine.max_wave_rows=21", "progress=false", "logger=none", "report=false",
         f"score_cache_dir={tmp_path / 'scores'}", f"hydra.run.dir={folder}"], folder, signal.SIGTERM)
    assert proc.returncode == 143, stderr[-2000:]
    assert f"posixlab: terminated (SIGTERM). The sets finished so far are in {folder} and in the score cache" in stderr
    assert "Traceback" not in stderr
    assert json.loads((folder / ".posixlab_job.json").read_text())["error"] == "terminated (SIGTERM)"
    assert status_command([str(folder)]) == 3 and "terminated (SIGTERM)" in capsys.readouterr().out


@pytest.mark.slow
def test_ctrl_c_says_what_is_kept_and_the_same_command_goes_on(tmp_path, capsys):
    """Ctrl-C (SIGINT) once a set is written: posixlab's own line, not a traceback from inside the model, exit status
    130; the same command again takes the finished set from the score cache (the same record) and does the rest.
    ``posixlab status`` reads each run's folder: the first failed (interrupted) after its finished set, the second
    done."""
    from posixlab.status import status_command

    args = ["num_sets=6", "engine.max_wave_rows=21", "progress=false", "logger=none", "report=false",
            f"score_cache_dir={tmp_path / 'scores'}"]
    # 6 sets, so that the run is still going when the signal comes on a busy machine (with 3 it once ended first)
    first = tmp_path / "first"
    proc, stderr = _signal_after_the_first_set([*args, f"hydra.run.dir={first}"], first, signal.SIGINT)
    sets = first / "sets.jsonl"
    assert proc.returncode == 130, stderr[-2000:]
    assert f"posixlab: interrupted. The sets finished so far are in {first} and in the score cache" in stderr
    assert "Traceback" not in stderr
    done = [json.loads(line) for line in sets.read_text().splitlines()]
    assert 1 <= len(done) < 6
    capsys.readouterr()
    assert status_command([str(first)]) == 3
    table = capsys.readouterr().out
    assert re.search(rf"first +failed +{len(done)}/6 sets +POSIX 0\.\d{{4}}", table) and "interrupted (Ctrl-C)" in table
    assert "1 cell (one run, not a sweep): 0 done, 0 running, 1 failed" in table
    again = _run_py([*args, f"hydra.run.dir={tmp_path / 'again'}"])
    assert again.returncode == 0, again.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "again" / "sets.jsonl").read_text().splitlines()]
    assert len(records) == 6 and records[0]["logprob_matrix"] == done[0]["logprob_matrix"]
    assert status_command([str(tmp_path / "again")]) == 0
    assert re.search(r"again +done +6/6 sets +POSIX 0\.\d{4}", capsys.readouterr().out)


CTRL_C_WHILE_STARTING = """
import importlib.abc, sys
class CtrlC(importlib.abc.MetaPathFinder):  # Ctrl-C arriving while the application's modules import
    def find_spec(self, name, path, target=None):
        if name == "posixlab.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
from posixlab.console import entry
entry()
"""
CTRL_C_BEFORE_THE_JOB = """
import posixlab.cli
def ctrl_c():  # Ctrl-C arriving before a run's job began (Hydra composing the config, a command's own work)
    raise KeyboardInterrupt
posixlab.cli.entry = ctrl_c
from posixlab.console import entry
entry()
"""


@pytest.mark.slow
@pytest.mark.parametrize("script, line", [(CTRL_C_WHILE_STARTING, "posixlab: interrupted (Ctrl-C) while starting; "
                                                                   "nothing was run.\n"),
                                          (CTRL_C_BEFORE_THE_JOB, "\nposixlab: interrupted (Ctrl-C).\n")])
def test_ctrl_c_before_a_run_begins_is_one_line(script, line):
    """Importing the application takes seconds; Ctrl-C then (a setting seen wrong just after Enter) printed forty
    lines of import machinery from whatever module was loading. Now one line and exit status 130, as a run says."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert (proc.returncode, proc.stderr) == (130, line)


@pytest.mark.slow
def test_posixlab_status_says_why_a_run_stopped(tmp_path, capsys):
    """A run stopped by a posixlab error: its folder's status is failed, with the error the terminal showed (a local
    run's log does not hold it)."""
    from posixlab.status import status_command

    proc = _run_py(["num_variants=0", "logger=none", f"hydra.run.dir={tmp_path}"], timeout=120)
    assert proc.returncode == 2
    assert status_command([str(tmp_path)]) == 3
    assert "posixlab error: num_variants must be a whole number of at least 1" in capsys.readouterr().out
    # a dry run ends done, and says it computed nothing (its folder has no summary); the judge it would end with
    proc = _run_py(["dry_run=true", "num_sets=2", "logger=none", "judge=packaged", f"hydra.run.dir={tmp_path / 'dry'}"],
                   timeout=120)
    assert proc.returncode == 0 and "dry run · smollm2-135m-instruct · posix: 2 sets, 2 requests" in proc.stdout
    assert "then the judge qwen2.5-coder-1.5b-instruct in this process would read the run" in proc.stdout
    assert status_command([str(tmp_path / "dry")]) == 0
    assert "└ a dry run (dry_run=true): it planned, nothing was computed" in capsys.readouterr().out


def test_posixlab_status_of_a_folder_of_runs_tables_them_with_their_paths_there(tmp_path, capsys):
    """``outputs/`` (``python run.py`` writes ``outputs/<date>/<time>_<run name>``): its single runs in one table,
    each by its path there; a finished run's units are what it ran, though num_sets asked more of a smaller data
    set; a sweep below it, as a sweep; a folder with neither, an error."""
    from posixlab.status import status_command

    day = tmp_path / "outputs" / "2026-12-07"
    for name, sets, finished in (("09-00-00_smollm2_mmlu_spelling_0shot", 3, True), ("09-10-00_killed", 1, False)):
        (day / name).mkdir(parents=True)
        (day / name / "sets.jsonl").write_text("".join(json.dumps({"set_index": n, "psi": 0.25}) + "\n"
                                                       for n in range(sets)))
        (day / name / "config.yaml").write_text("task:\n  name: posix\n  num_sets: 20\n")
        if finished:
            (day / name / "summary.json").write_text(json.dumps({"task": "posix", "psi": {"posix": 0.25,
                                                                                        "num_sets": sets}}))
    assert status_command([str(tmp_path / "outputs")]) == 1  # the killed one reads as running (no state file)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"{tmp_path / 'outputs'}: 2 cells (single runs, not a sweep): 1 done, 1 running, 0 failed, "
                        "0 pending")
    assert re.match(r" +2026-12-07/09-00-00_smollm2_mmlu_spelling_0shot +done +3/3 sets +POSIX 0.2500", lines[2])
    assert re.match(r" +2026-12-07/09-10-00_killed +running +1/20 sets +POSIX 0.2500", lines[3])
    (tmp_path / "empty" / "a" / "b").mkdir(parents=True)
    assert status_command([str(tmp_path / "empty")]) == 2
    assert "holds neither 3 levels down" in capsys.readouterr().err


@pytest.mark.parametrize("override, message", [
    ("model=llama9-1b", "model 'llama9-1b' is not a packaged model"),  # and the forms model= takes
    ("model=llama2-7B", "did you mean llama2-7b?"),
    ("model=smollm2", "did you mean smollm2-135m-instruct?"),  # a name's beginning
    ("model=/nonexistent/folder", "model=/nonexistent/folder: no folder at /nonexistent/folder; give a model folder"),
    ("variant=typos", "unknown variant type 'typos'; the types are spelling, template, paraphrase, mixture, format"),
    ("variant=speling", "unknown variant type 'speling' (did you mean spelling?)"),
    ("num_variants=0", "num_variants must be a whole number of at least 1"),
    ("seed=abc", "seed takes a whole number of at least 0, not 'abc'"),  # it failed once every set was done
    ("chat_template=yes", "chat_template takes true or false, not 'yes'"),  # it ran, as true
    ("variant=template num_variants=25", "20 distinct variants"),
    ("dataset.source=path dataset.path=/nonexistent/mmlu.jsonl", "no file at /nonexistent/mmlu.jsonl"),
    ("task=classification judge=packaged", "judge= reads a POSIX run's responses"),  # before the run, not after it
    ("judge=packaged judge.decoys=0", "decoys are the judge's controls, at least 1 a set"),
    ("judge=packaged shard=1/2", "run the shards with judge=none, join them"),
    ("gate.min_judged_share=0.5", "end the run with a judge (judge=packaged"),  # no judge: refused before the run
])
@pytest.mark.slow
def test_bad_input_gives_a_clear_error(tmp_path, override, message):
    proc = _run_py([*override.split(), f"hydra.run.dir={tmp_path}"], timeout=120)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_prompt_too_long_for_the_model_is_named(lm, tmp_path):
    from posixlab.errors import ContextLengthError

    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps({"question": "why " * 9000, "subject": "x", "choices": ["a", "b", "c", "d"],
                                "answer": 0}) + "\n")
    cfg = PosixConfig(model=None, dataset=DatasetSpec("mmlu", source="path", path=str(data)), num_sets=1,
                    num_variants=2, output_dir=str(tmp_path / "out"))
    with pytest.raises(ContextLengthError, match=r"prompt 0 of set mmlu/x/0/spelling has 90\d\d tokens"):
        run(cfg, lm=lm, progress=False)


@pytest.mark.slow
def test_two_runs_of_one_name_in_one_second_get_two_folders(tmp_path):
    """A single run's folder is made when it starts (conf/config.yaml: ``${posixlab.new_folder:...}``); where another
    process made it first (two runs of one name started in the same second, e.g. seed=1 and seed=2 side by side: they
    wrote one folder, mixed their sets and crashed), the run takes ``<folder>_2``."""
    config = (ROOT / "posixlab" / "conf" / "config.yaml").read_text(encoding="utf-8")
    assert "dir: ${posixlab.new_folder:outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}_${task.run_name}" in config
    (tmp_path / "run").mkdir()  # the other process's folder
    proc = _run_py(["dry_run=true", "num_sets=1", "logger=none",
                    "hydra.run.dir=${posixlab.new_folder:" + str(tmp_path / "run") + "}"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run_2" / "config.yaml").is_file() and list((tmp_path / "run").iterdir()) == []


def test_a_run_into_a_folder_holding_a_finished_run_says_it_replaces_it(tmp_path, capsys):
    from posixlab.cli import note_replacing

    note_replacing(tmp_path)  # an empty folder: nothing to say
    assert capsys.readouterr().err == ""
    (tmp_path / "summary.json").write_text(json.dumps({"model": {"name": "gemma3-270m"}, "dataset": "mmlu",
                                                       "variant": "template"}))
    note_replacing(tmp_path)
    said = capsys.readouterr().err
    assert f"posixlab: note: {tmp_path} holds a finished run (gemma3-270m · mmlu · template, " in said
    assert "this run replaces its files" in said and "skip_done=true keeps" in said
