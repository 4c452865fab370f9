"""Every experiment file composes (with each value of its sweep), and the launchers run real jobs."""

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from posixlab.analysis.figures import PAPER_FIGURES
from posixlab.results import read_sets
from posixlab.variants import VARIANT_TYPES

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "posixlab" / "conf"


def _is_classifier(name: str) -> bool:
    """An experiment of task=classification: it says so, or it extends one that does (``- offline_structured``)."""
    text = (CONF / "experiment" / f"{name}.yaml").read_text(encoding="utf-8")
    parents = [line.strip()[2:] for line in text.splitlines()
               if line.strip().startswith("- ") and (CONF / "experiment" / f"{line.strip()[2:]}.yaml").is_file()]
    return "override /task: classification" in text or any(_is_classifier(p) for p in parents)


CLASSIFIERS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml") if _is_classifier(p.stem))
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")  # ci_grid: tests/test_slurm.py's
                     if not p.stem.startswith(("_", "ci_")) and p.stem not in CLASSIFIERS)
ERRICA = ["offline_errica_table1", "paper_errica_table1"]  # the classification task's Table 1
OTHER_CLASSIFIERS = [n for n in CLASSIFIERS if n not in ERRICA]  # API models, structured outputs
OFFLINE_ONLY = {"offline_scale": 50}  # claims the paper makes from its grid, tested offline: name -> sets a cell
PAPER_FAST = "paper_figure5"  # the smallest paper grid (BBH) keeps the paper branch below in the fast lane


def slow_paper_grids(names):
    """The paper's grids (Table 1: 8 models x 4 variant types x 2 data sets, each combination composed) in the slow lane;
    their offline twins compose the same way in the fast lane."""
    return [pytest.param(n, marks=pytest.mark.slow) if n.startswith("paper_") and n != PAPER_FAST else n
            for n in names]


def test_one_experiment_per_paper_table_and_figure_and_an_offline_twin_for_each():
    wanted = [f"table{n}" for n in (1, 2, 6, 7, 8, 9)] + [f"figure{n}" for n in range(1, 10)]
    assert sorted(EXPERIMENTS) == sorted([f"{kind}_{name}" for kind in ("paper", "offline") for name in wanted]
                                         + list(OFFLINE_ONLY))
    assert {f"figure{n}" for n in range(1, 10)} <= set(PAPER_FIGURES)


@pytest.mark.parametrize("name", slow_paper_grids(EXPERIMENTS))
def test_every_experiment_composes_with_every_swept_value(name):
    from posixlab.cli import cache_folder, to_config

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"+experiment={name}"], return_hydra_config=True)
        params = dict(cfg.hydra.sweeper.params)
        assert {"model", "variant", "dataset"} <= set(params) and cfg.experiment_name == name
        assert cfg.logger.tags == [name.split("_")[0]]
        values = {key: str(value).split(",") for key, value in params.items()}
        score_caches = set()
        for combination in itertools.product(*values.values()):
            overrides = [f"+experiment={name}", *(f"{k}={v}" for k, v in zip(values, combination))]
            job = compose(config_name="config", overrides=overrides)
            run_config = to_config(job, "out")
            assert run_config.variant in VARIANT_TYPES  # a variant type posixlab generates
            if job.dataset.variants:  # the data set allows only some variant types (BBH: template only)
                assert run_config.variant in job.dataset.variants
            else:  # no restriction (null), not an empty list that would allow nothing
                assert job.dataset.variants is None
            if name.startswith("paper_"):  # the paper's models, from the hub, with its data sets' sizes
                assert run_config.model.source == "hub" and job.rephraser.model == "gpt-3.5-turbo"
                assert job.embedding.model == "thenlper/gte-large"
                assert run_config.num_sets == {"mmlu": None, "alpaca": 5000, "bbh": 2700}[job.dataset.name]
                # a score cache folder per cell (a grid's jobs read every other file of their folder when they open)
                cell = f"{job.model.name}_{job.dataset.name}_{job.variant.name}_{job.task.shots}shot"
                assert run_config.score_cache_dir == str(Path(cache_folder(job.cache_dir)) / "scores" / cell)
                score_caches.add(run_config.score_cache_dir)
            else:  # packaged models only
                assert run_config.model.source == "packaged" and run_config.embedding.source == "package"
                assert run_config.num_sets == OFFLINE_ONLY.get(name, run_config.num_sets)
                assert run_config.num_sets in (20, 100) or name in OFFLINE_ONLY
                assert run_config.score_cache_dir is None  # one folder for all: offline cells reuse each other's rows
        if name.startswith("paper_"):
            assert len(score_caches) == len(list(itertools.product(*values.values())))


@pytest.mark.parametrize("name", slow_paper_grids(ERRICA))
def test_every_classification_experiment_composes_with_every_swept_value(name):
    from posixlab.cli import to_config

    assert (CONF / "experiment" / f"{name}.yaml").is_file()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"+experiment={name}"], return_hydra_config=True)
        values = {key: str(value).split(",") for key, value in dict(cfg.hydra.sweeper.params).items()}
        assert values["strategy"] == ["simple", "detail", "1shot"]
        for combination in itertools.product(*values.values()):
            overrides = [f"+experiment={name}", *(f"{k}={v}" for k, v in zip(values, combination))]
            job = compose(config_name="config", overrides=overrides)
            run_config = to_config(job, "out")
            assert run_config.num_rephrasings == 30 and job.task.name == "classification"
            if name.startswith("paper_"):  # the paper's data sets and models; the classifier rephrases itself
                assert run_config.model.source == "hub" and run_config.rephraser.model == run_config.model.path
                assert run_config.data.name in ("trec", "cb", "rte", "dbpedia14", "wos46985")
            else:
                assert run_config.model.source == "packaged" and run_config.data.name == "mmlu_letters"


@pytest.mark.parametrize("name", OTHER_CLASSIFIERS)
def test_the_other_classification_experiments_compose(name):
    """The classification experiments beyond Table 1 (chat models, structured outputs): each swept value composes
    into a classification run of packaged models, or of the packaged model behind a local chat server."""
    from posixlab.cli import to_config

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"+experiment={name}"], return_hydra_config=True)
        assert cfg.experiment_name == name and cfg.logger.tags == ["offline"]
        params = dict(cfg.hydra.sweeper.params or {})
        values = {key: str(value).split(",") for key, value in params.items()}
        for combination in itertools.product(*values.values()):
            overrides = [f"+experiment={name}", *(f"{k}={v}" for k, v in zip(values, combination))]
            run_config = to_config(compose(config_name="config", overrides=overrides), "out")
            if run_config.model.backend == "chat":
                assert run_config.model.server.base_url.startswith("http://127.0.0.1:")
            else:
                assert run_config.model.source == "packaged"
            if run_config.data.path:
                assert (ROOT / run_config.data.path).is_file()


def test_paper_table2_is_the_papers_grid():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        params = compose(config_name="config", overrides=["+experiment=paper_table2"],
                         return_hydra_config=True).hydra.sweeper.params
    assert params["task.shots"] == "0,1,2,3" and params.variant == "spelling,template,paraphrase"
    assert params.model == "llama2-7b,llama2-7b-chat,mistral-7b,mistral-7b-instruct"


def test_composing_an_experiment_makes_no_folder_and_its_sweep_goes_under_its_name(tmp_path, monkeypatch):
    """An experiment file names its sweep folder through ``experiment_name`` alone (conf/config.yaml's one
    ``hydra.sweep.dir``): when experiments set ``hydra.sweep.dir`` themselves, merging theirs over the base value
    resolved the base one, which claimed, and so made, an empty ``multirun/<date>/<time>`` beside every experiment's
    run or sweep (and in the working folder of whatever composed one: these tests made a hundred a run). Composing
    makes nothing; resolving gives the folder, made then."""
    import re

    import posixlab.cli  # noqa: F401  (the resolvers and the defaults' config nodes)

    monkeypatch.chdir(tmp_path)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for name in sorted(p.stem for p in (CONF / "experiment").glob("*.yaml") if not p.stem.startswith("_")):
            cfg = compose(config_name="config", overrides=[f"+experiment={name}"], return_hydra_config=True)
            assert list(tmp_path.iterdir()) == [], name
        assert re.fullmatch(rf"multirun/{name}/\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d(_\d+)?", cfg.hydra.sweep.dir)
        assert (tmp_path / cfg.hydra.sweep.dir).is_dir()
        plain = compose(config_name="config", overrides=[], return_hydra_config=True)
        assert re.fullmatch(r"multirun/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d(_\d+)?", plain.hydra.sweep.dir)


@pytest.mark.parametrize("launcher", ["local_parallel", "slurm"])
def test_launcher_configs_compose(launcher):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    target = cfg.hydra.launcher._target_
    assert target.endswith({"local_parallel": "JoblibLauncher", "slurm": "SlurmLauncher"}[launcher])


@pytest.mark.slow
def test_a_two_job_multirun_with_the_joblib_launcher(tmp_path):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=local_parallel",
                           "variant=spelling,template", "num_sets=2", "num_variants=2", "progress=false",
                           f"hydra.sweep.dir={tmp_path}", "score_cache=false"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Joblib.Parallel" in proc.stdout + proc.stderr  # the joblib launcher ran the jobs
    jobs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert jobs == ["0_smollm2-135m-instruct_mmlu_spelling_0shot", "1_smollm2-135m-instruct_mmlu_template_0shot"]
    for job in jobs:
        records = read_sets(tmp_path / job)
        assert len(records) == 2 and all(len(r["prompts"]) == 3 for r in records)
        assert (tmp_path / job / "summary.json").is_file() and list((tmp_path / job / "wandb").glob("offline-run-*"))


def test_the_benchmark_refuses_a_folder_for_its_report_before_measuring(tmp_path, capsys):
    from experiments import benchmark_scoring

    with pytest.raises(SystemExit) as exit_:
        benchmark_scoring.main(["--no-vllm", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert f"--out {tmp_path / 'benchmark.json'}" in capsys.readouterr().err


def test_the_cache_benchmark_opens_beside_another_jobs_file_and_finds_its_rows(capsys):
    from experiments import benchmark_cache

    assert benchmark_cache.main(["--rows", "2500"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("another job's file of 2,500 scores (") and " hits and " in out
    result = benchmark_cache.measure(1200, lookups=300)
    assert result["rows"] == 1200 and result["open_s"] > 0 and result["hits_per_s"] > 0


def test_the_records_benchmark_reads_a_sweep_both_ways_into_the_same_rows(capsys):
    from experiments import benchmark_records

    assert benchmark_records.main(["--cells", "2", "--sets", "20", "--repeats", "1", "--parallel-above", "0"]) == 0
    out = capsys.readouterr().out  # above 0 MB: the readers in parallel, on a machine of two cores or more
    assert out.startswith("2 cells of 20 sets of N = 21: ") and out.rstrip().endswith("; the same rows")


def test_the_highlight_benchmark_times_both_matchings_on_the_same_pairs(capsys):
    from experiments import benchmark_highlight

    assert benchmark_highlight.main(["--sets", "2", "--repeats", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "x |" in line]
    assert len(lines) == len(benchmark_highlight.WORKLOADS) and all("| 40 |" in line for line in lines)  # 2 × 20
    import posixlab.report.html as page

    assert page.CHARACTER_MATCHED == 400  # the baseline's setting put back


def test_the_analysis_benchmark_checks_each_step_against_the_method_it_replaced(capsys):
    from experiments import benchmark_analysis

    assert benchmark_analysis.main(["--items", "300", "--points", "500", "--cells", "2", "--sets", "60",
                                    "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("two-way bootstrap, 300 x 21:") and "the same interval: True" in lines[0]
    assert lines[1].startswith("trend band, 500 points:") and "largest difference" in lines[1]
    assert lines[2].startswith("per-cell statistics, 2 cells of 60 sets:")
    assert lines[2].endswith("the same records: True")


@pytest.mark.slow  # the packaged SmolLM2
def test_the_adapter_benchmark_times_merged_against_unmerged_on_the_same_batch(capsys):
    from experiments import benchmark_adapter

    assert benchmark_adapter.main(["--prompts", "2", "--tokens", "16", "--rank", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 prompts of 16 tokens, LoRA rank 4 on every projection")
    assert "| merged (model.adapter) |" in out and "| peft, unmerged |" in out
    greedy = float(out.split("log-probabilities within ", 1)[1].split(" ", 1)[0])
    assert greedy < 1e-4  # merging changes rounding only (and the test fails if the adapter were not merged)


@pytest.mark.slow  # the packaged SmolLM2 as the judge, on a real run's responses
def test_the_judge_benchmark_times_both_ways_on_the_same_chats(lm, small_results):
    """A set's judge requests together (a shared prefix, one batch) and one at a time: the same replies, first-token
    log-probabilities within 1e-4 (the test fails if batching moved a row's positions), and both times measured."""
    from experiments import benchmark_judge

    from posixlab.judge import TOP_TOKENS
    from posixlab.models.sampling import replies_and_first_tokens
    from posixlab.openai_client import Generation

    chats = benchmark_judge.set_chats(next(small_results.glob("*_mmlu_template_0shot")), 1)
    greedy = Generation(4, temperature=0.0)
    result = benchmark_judge.measure(lambda batch: replies_and_first_tokens(lm, batch, greedy, TOP_TOKENS),
                                     lambda chat: replies_and_first_tokens(lm, [chat], greedy, TOP_TOKENS)[0], chats)
    assert result["sets"] == 1 and result["requests"] == len(chats[0]) > 1
    assert result["replies_differ"] == 0 and result["max_logprob_gap"] < 1e-4 and result["ratio"] > 0


@pytest.mark.slow  # the packaged SmolLM2's tokenizer
def test_the_inputs_benchmark_times_both_methods_on_the_same_ids(capsys, tmp_path):
    from experiments import benchmark_inputs

    assert benchmark_inputs.main(["--sets", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 sets, 42 prompts,") and "(3-shot), median of 1:" in out
    assert "| one at a time |" in out and "| one call a set |" in out and "(the same ids: checked)" in out
    result = benchmark_inputs.measure(2, 0, 1)
    assert result["prompts"] == 42 and result["speedup"] > 0
    assert result["bytes_per_token"]["one call a set"] < result["bytes_per_token"]["one at a time"]
    assert benchmark_inputs.main(["--data", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_the_rephraser_benchmark_writes_the_same_questions_both_ways(capsys):
    """Against a scripted server holding each request until its pool is in (0.5 s at most after the last arrival):
    one at a time, then 8 in flight (a question's 4 replies, two questions at once after the first); the same
    paraphrases both ways, a table of both, and a bad option is one line and status 2."""
    from chat_server import ChatServer, InFlight, completion
    from experiments import benchmark_rephraser

    in_flight = InFlight()

    def answer(body, n):
        with in_flight:
            in_flight.hold(8, patience=0.5)
        text = body["messages"][-1]["content"].rsplit("Text: ", 1)[1]
        return 200, {}, completion("\n".join(f"{k}. Variant {body['seed'] % 997}-{k}: {text}" for k in (1, 2)))

    command = ["--model", "m", "--questions", "3", "--paraphrases", "2", "--no-validate"]
    with ChatServer(answer) as server:
        assert benchmark_rephraser.main(["--base-url", server.base_url, *command]) == 0
        assert in_flight.most == 8 and server.requests == 2 * 3 * 4  # one request of 4 replies a question, twice
        assert benchmark_rephraser.main(["--base-url", server.base_url, *command, "--concurrency", "1"]) == 2
        assert benchmark_rephraser.main(["--base-url", server.base_url, *command, "--hf", "m"]) == 2  # one or other
    captured = capsys.readouterr()
    assert "either --base-url and --model (a server) or --hf MODEL" in captured.err
    out = captured.out
    assert "3 questions, 2 paraphrases each, m at" in out and "| 1 |" in out and "| 8 |" in out
    assert "x with 8 in flight; the same paraphrases for 3 of 3 questions" in out


def test_write_paraphrases_answers_help_and_refuses_what_it_cannot_write(capsys):
    """Its usage for --help; a typo, a classification run and a variant without paraphrases: one line each, status 2,
    before anything is built (was a Hydra traceback, or "paraphrases in None")."""
    from experiments import write_paraphrases

    assert write_paraphrases.main(["--help"]) == 0 and "python -m experiments.write_paraphrases" in capsys.readouterr().out
    for overrides, said in ((["task.num_set=3"], "did you mean task.num_sets?"),
                            (["task=classification"], "a task=classification run writes its own rephrasings"),
                            (["variant=spelling"], "variant=spelling uses no paraphrases")):
        assert write_paraphrases.main(overrides) == 2
        err = capsys.readouterr().err
        assert err.startswith("posixlab error: ") and said in err and "Traceback" not in err


@pytest.mark.slow
def test_the_local_rephrasers_benchmark_writes_the_same_questions_with_both_backends(tmp_path, capsys):
    """hf and llamacpp, each in a process of its own, on the packaged 0.5B (the default 1.5B's sibling, quicker):
    a row each, the ratio, and both paraphrase files kept for compare_rephrasers."""
    import json

    from experiments import benchmark_local_rephrasers

    command = ["--model", "qwen2.5-coder-0.5b-instruct", "--questions", "1", "--paraphrases", "2", "--samples", "1",
               "--out", str(tmp_path)]
    assert benchmark_local_rephrasers.main(command) == 0
    out = capsys.readouterr().out
    assert "1 questions, 2 paraphrases each, qwen2.5-coder-0.5b-instruct" in out
    assert "| hf |" in out and "| llamacpp |" in out and "x as fast as hf to write them" in out
    for backend in ("hf", "llamacpp"):
        (record,) = [json.loads(line) for line in (tmp_path / f"{backend}.jsonl").read_text().splitlines()]
        assert record["rephraser"]["backend"] == backend and len(record["paraphrases"]) == 2


@pytest.mark.slow  # one subprocess imports every script's dependencies
def test_every_experiments_script_answers_help_and_does_nothing_else(tmp_path):
    """``python -m experiments.NAME --help`` prints its usage with status 0 for every script (one read ``--help`` as
    a count and failed), and writes nothing: run here in one process, each script as ``__main__``."""
    names = sorted(p.stem for p in (ROOT / "experiments").glob("*.py") if p.stem != "__init__")
    code = ("import runpy, sys\n"
            "for name in sys.argv[1:]:\n"
            "    sys.argv = [name, '--help']\n"
            "    try:\n"
            "        runpy.run_module(f'experiments.{name}', run_name='__main__')\n"
            "        status = 0\n"
            "    except SystemExit as exc:\n"
            "        status = exc.code or 0\n"
            "    print(f'STATUS {name} {status}', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code, *names], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    said = {line.split()[1]: line.split()[2] for line in proc.stdout.splitlines() if line.startswith("STATUS ")}
    assert said == {name: "0" for name in names}, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "usage:" in proc.stdout and list(tmp_path.iterdir()) == []
