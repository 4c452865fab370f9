"""posixlab as a tool: ``posixlab.evaluate`` on the user's own prompt sets, the ``dataset=prompt_sets`` command,
prompt-set file errors, and the ``posixlab`` console command installed into a fresh virtual environment."""

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import posixlab
from tiny_model import tiny_lm  # noqa: F401  (the session fixture: a 2-layer model built in code)
from posixlab.data.prompt_sets import prompt_sets_from_lists, read_prompt_set_file
from posixlab.errors import ConfigError, PosixlabError, PromptSetFileError
from posixlab.metrics import psi
from posixlab.metrics.stats import bootstrap_ci
from posixlab.scoring import bruteforce_matrix

ROOT = Path(__file__).resolve().parent.parent
SETS = [
    {"id": "capital", "prompts": ["What is the capital of France?", "Which city is the capital of France?",
                                  "France's capital city is?"], "answer": "Paris"},
    {"id": "sum", "prompts": ["What is 2+2?", "How much is 2 plus 2?"], "max_new_tokens": 3},
    {"id": "colour", "prompts": ["Name a primary colour.", "Name one primary color.", "Give a primary colour:",
                                 "primary colour, name one"]},
]
CLI_ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled"}


def write_jsonl(path: Path, entries) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def cli(args, cwd=ROOT, executable=None, timeout=600):
    command = [executable] if executable else [sys.executable, str(ROOT / "run.py")]
    return subprocess.run([*command, *args], cwd=cwd, env=CLI_ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sets_file(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("sets") / "my_sets.jsonl", SETS)


@pytest.fixture(scope="module")
def evaluated(lm, sets_file):
    return posixlab.evaluate(sets_file, model=lm, max_new_tokens=5, embedding=None, progress=False)


@pytest.mark.slow
def test_evaluate_equals_the_command_bit_for_bit(evaluated, sets_file, tmp_path):
    out = tmp_path / "cli"
    proc = cli(["dataset=prompt_sets", f"dataset.path={sets_file}", "max_new_tokens=5", "embedding=none",
                "logger=none", "progress=false", "score_cache=false", f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = posixlab.load_result(out)
    assert saved.ids == evaluated.ids == ["capital", "sum", "colour"]
    assert saved.prompts == evaluated.prompts == [s["prompts"] for s in SETS]  # used as given, in order
    assert saved.responses == evaluated.responses
    assert saved.psi == evaluated.psi  # bit for bit
    assert all(np.array_equal(a, b) for a, b in zip(saved.matrices, evaluated.matrices))
    assert saved.posix == evaluated.posix
    assert saved.posix_ci95 == evaluated.posix_ci95 == tuple(bootstrap_ci(evaluated.psi, seed=0, bounds=(0.0, None)))
    # per-set response length: "sum" asked for 3 new tokens, the others take the run's 5
    assert [r["max_new_tokens"] for r in evaluated.records] == [5, 3, 5]
    assert max(len(r["token_ids"]) for r in evaluated.records[1]["responses"]) <= 3
    assert [r["answer"] for r in evaluated.records] == ["Paris", None, None]
    # sets of 3, 2 and 4 prompts: N as its range, in the headline and the summary (it said "N = varies")
    assert f"POSIX = {saved.posix:.4f}" in proc.stdout and "3 sets of N = 2 to 4" in proc.stdout
    assert saved.summary["num_prompts_per_set"] is None and saved.summary["num_prompts_range"] == [2, 4]
    assert "3 × 2 to 4" in (out / "report.html").read_text(encoding="utf-8")  # the page's "sets × N" card


@pytest.mark.slow
def test_evaluate_matches_the_brute_force_reference(evaluated, lm):
    for record in evaluated.records:
        prompt_ids = [lm.encode(p["text"]) for p in record["prompts"]]
        responses = [r["token_ids"] for r in record["responses"]]
        reference = bruteforce_matrix(lm, prompt_ids, responses)
        assert np.abs(np.asarray(record["logprob_matrix"]) - reference).max() < 1e-4
        assert record["psi"] == pytest.approx(psi(reference, [len(r) for r in responses]), abs=1e-4)
    assert evaluated.posix == pytest.approx(np.mean(evaluated.psi), abs=1e-15)
    matrices = evaluated.matrices
    assert [m.shape for m in matrices] == [(3, 3), (2, 2), (4, 4)]


@pytest.mark.slow
def test_evaluate_takes_a_loaded_transformers_model_and_lists(lm):
    lists = [s["prompts"] for s in SETS]
    result = posixlab.evaluate(lists, model=lm.model, tokenizer=lm.tokenizer, max_new_tokens=5, embedding=None,
                               progress=False)
    assert result.ids == ["set-0", "set-1", "set-2"]
    same = posixlab.evaluate(lists, model=lm, max_new_tokens=5, embedding=None, progress=False)
    assert result.responses == same.responses and result.psi == same.psi
    assert all(np.array_equal(a, b) for a, b in zip(result.matrices, same.matrices))
    assert result.summary["model"]["source"] == "loaded"
    assert result.summary["score_cache"] is None  # a model object may differ from any saved copy: no score cache
    frame = result.to_pandas()
    assert list(frame["id"]) == result.ids and list(frame["psi"]) == result.psi
    with pytest.raises(ConfigError, match="pass its tokenizer too"):
        posixlab.evaluate(lists, model=lm.model)


@pytest.mark.slow
def test_save_writes_a_run_folder_that_loads_back(evaluated, tmp_path, capsys):
    from posixlab.status import status_command

    folder = evaluated.save(tmp_path / "saved")
    assert {p.name for p in folder.iterdir()} >= {"sets.jsonl", "summary.json", "summary.md", "config.yaml"}
    again = posixlab.load_result(folder)
    assert again.psi == evaluated.psi and again.responses == evaluated.responses
    assert "POSIX" in (folder / "summary.md").read_text()
    capsys.readouterr()
    assert status_command([str(folder)]) == 0  # a run's folder, though no Hydra job wrote it
    n = len(evaluated.psi)
    assert f"saved  done     {n}/{n} sets  POSIX {evaluated.posix:.4f}" in capsys.readouterr().out


@pytest.mark.slow
def test_status_reads_no_record_of_a_finished_cell_and_counts_without_parsing(evaluated, tmp_path, capsys,
                                                                               monkeypatch):
    """A paper-sized cell's records are 500 MB: a finished cell is read from its summary (a sweep of 224 cells took
    about 20 s a cell), and lines are counted, not parsed, where a count is all that is needed."""
    import posixlab.status
    from posixlab.status import _count_records, status_command

    folder = evaluated.save(tmp_path / "saved")
    n = len(evaluated.psi)

    def never(*_):
        raise AssertionError("a finished cell's records were parsed")

    monkeypatch.setattr(posixlab.status, "_records", never)
    capsys.readouterr()
    assert status_command([str(folder)]) == 0 and f"done     {n}/{n} sets" in capsys.readouterr().out
    with open(folder / "sets.jsonl", "a", encoding="utf-8") as file:
        file.write('\n  \n{"set_index": 99, "psi": 0.')  # a blank line, a line of spaces, a line being written
    assert _count_records(folder, "sets.jsonl") == n and _count_records(folder, None) == 0


BAD_FILES = {  # file name, content, what the message must say
    "not_json": ("bad.jsonl", '{"prompts": ["a", "b"]}\n{"prompts": ["a", "b"\n', "line 2 is not valid JSON"),
    "one_prompt": ("one.jsonl", '{"id": "x", "prompts": ["only one"]}\n', "line 1 has 1 prompt; a prompt set needs at least 2"),
    "empty_prompt": ("empty_prompt.jsonl", '{"prompts": ["a", "b"]}\n{"prompts": ["a", "  "]}\n', "line 2: prompt 1 is empty"),
    "not_a_string": ("number.jsonl", '{"prompts": ["a", 7]}\n', "line 1: prompt 1 is an int, not a string"),
    "nested": ("nested.json", '[[["a", "b"]]]',
               "set 0: prompt 0 is a list, not a string (a set is one list of prompts: one pair of brackets too many"),
    "null_prompt": ("null.jsonl", '{"prompts": ["a", null]}\n', "line 1: prompt 1 is None, not a string"),
    "duplicate_id": ("dup.jsonl", '{"id": "q", "prompts": ["a", "b"]}\n\n{"id": "q", "prompts": ["c", "d"]}\n',
                     "set id 'q' is used twice"),
    "empty_file": ("empty.jsonl", "\n\n", "is empty"),
    "json_not_a_list": ("sets.json", '{"prompts": ["a", "b"]}', "must hold a list of prompt sets"),
    "unknown_key": ("typo.jsonl", '{"promtps": ["a", "b"]}\n', "unknown key(s) 'promtps'"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_prompt_set_file_gets_a_clear_error_from_python(case, tmp_path):
    name, content, message = BAD_FILES[case]
    (tmp_path / name).write_text(content)
    with pytest.raises(PromptSetFileError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        posixlab.evaluate(str(tmp_path / name), model="no-such-model")  # the file is checked before the model
    assert isinstance(error.value, PosixlabError)
    if case == "duplicate_id":
        assert "line 1 and" in str(error.value) and "line 3" in str(error.value)


@pytest.mark.slow
def test_bad_prompt_sets_fail_on_the_command_line_before_the_model_loads(tmp_path):
    for case, (name, content, message) in sorted(BAD_FILES.items()):
        (tmp_path / name).write_text(content)
        out = tmp_path / f"run_{case}"
        proc = cli(["dataset=prompt_sets", f"dataset.path={tmp_path / name}", "logger=none", f"hydra.run.dir={out}"],
                   timeout=120)
        assert proc.returncode == 2, (case, proc.stderr[-2000:])
        assert message in proc.stderr and "Traceback" not in proc.stderr, (case, proc.stderr[-2000:])
        assert "loading" not in proc.stderr  # no model was loaded
        assert not (out / "sets.jsonl").exists()
    proc = cli(["dataset=prompt_sets", "logger=none", f"hydra.run.dir={tmp_path / 'nopath'}"], timeout=120)
    assert proc.returncode == 2 and "needs the file: dataset.path=" in proc.stderr
    proc = cli(["dataset=prompt_sets", f"dataset.path={tmp_path / 'bad.jsonl'}", "variant=template", "logger=none",
                f"hydra.run.dir={tmp_path / 'variant'}"], timeout=120)
    assert proc.returncode == 2 and "used as given" in proc.stderr


def test_a_python_caller_s_wrongly_typed_counts_are_errors_before_any_work():
    """What the command line's typed settings refuse (task.shots=abc), a Python caller may pass as a string: a
    ConfigError naming the setting, not a TypeError from deep inside (shots="2" was one)."""
    for kwargs, said in (({"shots": "2"}, "shots must be a whole number, 0 or more, got '2'"),
                         ({"num_sets": 2.5}, "num_sets must be at least 1 (or null for every set), got 2.5"),
                         ({"num_variants": "3"}, "num_variants must be a whole number of at least 1")):
        with pytest.raises(ConfigError, match=re.escape(said)):
            posixlab.evaluate_dataset("mmlu_sample", "spelling", **kwargs)
    with pytest.raises(ConfigError, match="dataset.num_samples takes a whole number or null, not '5'"):
        posixlab.classify("mmlu_letters", num_samples="5")


def test_python_input_is_validated_too():
    with pytest.raises(PromptSetFileError, match="set 1 has 1 prompt"):
        prompt_sets_from_lists([["a", "b"], ["c"]])
    with pytest.raises(PromptSetFileError, match="not str"):
        prompt_sets_from_lists("What is 2+2?")
    with pytest.raises(PromptSetFileError, match="no prompt sets given"):
        prompt_sets_from_lists([])
    with pytest.raises(PromptSetFileError, match=r"'What is 2\+2\?' is neither. One set: posixlab.evaluate\(\[\["):
        posixlab.evaluate("What is 2+2?")  # a prompt where a file or sets go: not "no prompt-set file at What is..."
    with pytest.raises(PromptSetFileError, match="no prompt-set file at nothere.jsonl"):
        posixlab.evaluate("nothere.jsonl")
    with pytest.raises(ConfigError, match="max_new_tokens must be a whole number of at least 1"):
        posixlab.evaluate([["a", "b"]], model="no-such-model", max_new_tokens=0)
    with pytest.raises(ConfigError, match="not a packaged model"):
        posixlab.evaluate([["a", "b"]], model="no-such-model")
    with pytest.raises(ConfigError, match="did you mean llama2-13b or llama2-13b-chat or llama2-7b or llama2-7b-chat"):
        posixlab.evaluate([["a", "b"]], model="llama2")
    for flag in ("chat_template", "score_cache"):  # "yes" ran as true; no model is loaded before the error
        with pytest.raises(ConfigError, match=f"{flag} takes true or false, not 'yes'"):
            posixlab.evaluate([["a", "b"]], **{flag: "yes"})


def test_a_path_from_the_home_folder_is_read_as_a_shell_would_expand_it(tmp_path, monkeypatch):
    from posixlab.data.files import read_records

    monkeypatch.setenv("HOME", str(tmp_path))
    write_jsonl(tmp_path / "sets.jsonl", SETS)
    assert [s.set_id for s in read_prompt_set_file("~/sets.jsonl")] == ["capital", "sum", "colour"]
    assert len(read_records("~/sets.jsonl")) == 3  # your questions' files and exemplars
    (tmp_path / "run").mkdir()
    with pytest.raises(ConfigError, match=f"{tmp_path / 'run'} has no sets.jsonl"):  # the folder was found
        posixlab.load_result("~/run")


def test_files_saved_with_a_byte_order_mark_and_crlf_lines_are_read(tmp_path):
    """As Windows editors and Excel's "CSV UTF-8" save them: the mark is no text, a CR no part of a line."""
    from posixlab.data.files import read_records

    bom = "\ufeff"
    (tmp_path / "sets.jsonl").write_text(bom + "".join(json.dumps(s) + "\r\n" for s in SETS), encoding="utf-8")
    assert [s.set_id for s in read_prompt_set_file(tmp_path / "sets.jsonl")] == ["capital", "sum", "colour"]
    assert len(read_records(tmp_path / "sets.jsonl")) == 3
    (tmp_path / "quiz.csv").write_text(bom + "question,answer\r\nWhat is 2+2?,B\r\n", encoding="utf-8")
    assert read_records(tmp_path / "quiz.csv") == [{"question": "What is 2+2?", "answer": "B"}]
    (tmp_path / "sets.json").write_text(bom + json.dumps([["a?", "b?"]]), encoding="utf-8")
    assert len(read_prompt_set_file(tmp_path / "sets.json")) == 1 and len(read_records(tmp_path / "sets.json")) == 1
    from posixlab.rephrase.store import ParaphraseFile  # your paraphrases (rephraser=file)

    record = {"original": "What is 2+2?", "paraphrases": ["What's 2+2?"]}
    (tmp_path / "mine.jsonl").write_text(bom + json.dumps(record) + "\r\n", encoding="utf-8")
    assert ParaphraseFile(tmp_path / "mine.jsonl", user_supplied=True).find_original("What is 2+2?") is not None


def test_embedding_and_progress_take_what_the_command_line_takes():
    from posixlab.api import _embedding
    from posixlab.embeddings import EmbeddingSpec

    assert _embedding("gte-large") == EmbeddingSpec("gte-large", "hub", "thenlper/gte-large", batch_size=32)
    assert _embedding("minilm") == _embedding("all-MiniLM-L6-v2") == EmbeddingSpec()
    assert _embedding("BAAI/bge-small-en-v1.5") == EmbeddingSpec("bge-small-en-v1.5", "hub", "BAAI/bge-small-en-v1.5")
    with pytest.raises(ConfigError, match="progress takes true, false or lines, not 'yes'"):
        posixlab.evaluate([["a?", "b?"]], model="no-such-model", progress="yes")  # before the model


def test_one_set_s_posix_is_said_to_have_no_interval(tmp_path, tiny_lm):  # noqa: F811
    """One prompt set: its ψ is POSIX, and a bootstrap over one value is that value, no 95 % interval."""
    from posixlab.report.build import build_report
    from posixlab.tasks.posix import PosixTask

    result = posixlab.evaluate([["What is 2+2?", "What's 2 + 2?"]], model=tiny_lm, max_new_tokens=2, embedding=None,
                               progress=False)
    result.save(tmp_path / "run")
    assert "no interval from one set, sd n/a" in PosixTask.report_lines(result.summary)[0]
    assert "| n/a (one set) |" in (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    assert "no interval from one set" in build_report([tmp_path / "run"], tmp_path / "page.html").read_text()


def test_a_json_file_of_lists_is_read_with_numbered_ids(tmp_path):
    path = tmp_path / "sets.json"
    path.write_text(json.dumps([["a?", "b?"], ["c?", "d?", "e?"]]))
    assert [(s.set_id, s.prompts) for s in read_prompt_set_file(path)] == [("set-0", ("a?", "b?")),
                                                                          ("set-1", ("c?", "d?", "e?"))]


@pytest.mark.slow
def test_the_console_command_runs_outside_the_checkout_after_pip_install(tmp_path, sets_file):
    """``pip install .`` into a fresh virtual environment, then ``posixlab`` from a folder outside the checkout.

    The new environment sees the test environment's packages through a .pth file (so nothing is downloaded) but
    gets its own, non-editable copy of posixlab, built from the checkout.
    """
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                              "--no-cache-dir", "-q", str(ROOT)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(python), "-c", "import posixlab; print(posixlab.__file__)"], cwd=elsewhere,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where  # the installed copy, not the checkout
    command = venv / "bin" / "posixlab"
    assert command.is_file()
    proc = cli(["dataset=prompt_sets", f"dataset.path={sets_file}", "num_sets=2", "max_new_tokens=3",
                "embedding=none", "logger=none", "progress=false", f"score_cache_dir={tmp_path / 'scores'}"],
               cwd=elsewhere, executable=str(command))
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = list((elsewhere / "outputs").glob("*/*_prompt_sets-my_sets_user_0shot"))
    assert len(runs) == 1, list((elsewhere / "outputs").rglob("*"))
    result = posixlab.load_result(runs[0])
    assert result.ids == ["capital", "sum"] and len(result.psi) == 2
    assert "2 sets of N = 2 to 3" in proc.stdout


def test_the_errors_to_catch_are_exported():
    """What a script catches: ``posixlab.PosixlabError`` (and ``posixlab.ConfigError``, a setting), raised before
    any model loads."""
    from posixlab import errors

    assert posixlab.PosixlabError is errors.PosixlabError and posixlab.ConfigError is errors.ConfigError
    with pytest.raises(posixlab.PosixlabError, match="a prompt set needs at least 2 prompts"):
        posixlab.evaluate([["only one prompt"]])
    with pytest.raises(posixlab.ConfigError, match="max_new_tokens must be a whole number"):
        posixlab.evaluate([["What is 2+2?", "2+2?"]], max_new_tokens=0)


@pytest.mark.slow
def test_a_judge_from_python_equals_posixlab_judge_and_travels_with_the_result(evaluated, lm, tmp_path, capsys):
    """``result.judge(model)`` asks what ``posixlab judge RUN`` asks, verdict for verdict; ``evaluate(judge=)`` ends a
    run with it; the verdicts go with ``save`` and come back with ``load_result``, and ``to_pandas`` shows each
    set's shares."""
    import copy
    import warnings

    from posixlab.commands import judge_command
    from posixlab.judge import ROWS_FILE, SUMMARY_FILE

    unjudged = evaluated.save(tmp_path / "cli")
    assert judge_command([str(unjudged), "--judge", "smollm2-135m-instruct", "--json"]) == 0
    capsys.readouterr()
    by_command = [json.loads(line) for line in (unjudged / ROWS_FILE).read_text().splitlines()]

    result = copy.copy(evaluated)  # the module's result stays unjudged for the other tests
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = result.judge(lm, progress=False)
    assert [str(w.message) for w in caught if w.category is posixlab.JudgeWarning] == \
        [f"posixlab judge: {w}" for w in summary["warnings"]]
    assert evaluated.judged is None and result.judged is summary and summary["run"] is None
    drop = lambda rows: [{k: v for k, v in row.items() if k != "key"} for row in rows]  # noqa: E731 (model named apart)
    assert drop(result.verdicts) == drop(by_command)  # same model, same requests: the same replies
    shares = [row["judged_share"] for row in result.verdicts]
    read = [s for s in shares if s is not None]
    assert result.judged_share == (round(sum(read) / len(read), 6) if read else None)
    table = result.to_pandas()
    assert table["judged_share"].tolist() == pytest.approx([np.nan if s is None else s for s in shares], nan_ok=True)
    assert table["identical_share"].tolist() == [row["identical_share"] for row in result.verdicts]

    folder = result.save(tmp_path / "saved")
    assert json.loads((folder / SUMMARY_FILE).read_text())["run"] == str(folder)
    again = posixlab.load_result(folder)
    assert again.verdicts == result.verdicts and again.judged_share == result.judged_share
    assert "judged_share=" in repr(again)

    ended = posixlab.evaluate(SETS, model=lm, max_new_tokens=5, embedding=None, progress=False, judge=lm,
                              output_dir=tmp_path / "ended")
    assert ended.psi == evaluated.psi and drop(ended.verdicts) == drop(result.verdicts)
    assert (tmp_path / "ended" / ROWS_FILE).is_file()  # written beside the run, where posixlab report reads it
    assert (tmp_path / "ended" / "figures" / "psi_vs_judged.png").is_file() == (ended.judged_share is not None)
    assert posixlab.load_result(tmp_path / "ended").judged_share == result.judged_share


def test_a_bad_judge_fails_before_any_model_loads(tmp_path):
    with pytest.raises(posixlab.ConfigError, match="model 'no-such-judge' is not a packaged model"):
        posixlab.evaluate([["What is 2+2?", "2+2?"]], judge="no-such-judge")
    result = posixlab.EvaluationResult(summary={}, records=[])
    with pytest.raises(posixlab.ConfigError, match="sets must be at least 1, got 0"):
        result.judge("smollm2-135m-instruct", sets=0)
    with pytest.raises(posixlab.ConfigError, match="must contain .*it lacks {second}"):
        result.judge("smollm2-135m-instruct", instruction="{first_prompt} {first} {second_prompt}")
    with pytest.raises(posixlab.ConfigError, match="with base_url, the judge is the name"):
        result.judge(object(), base_url="http://127.0.0.1:9/v1")


def test_loading_a_folder_that_is_not_such_a_run_says_what_it_is(tmp_path):
    """load_result and load_classification name what they were given instead of only "no sets.jsonl": the other
    task's run, a sweep (a run below it to load), a run stopped before its summary, or nothing there."""
    posix_run, classification_run, stopped = tmp_path / "p", tmp_path / "sweep" / "0_c", tmp_path / "stopped"
    for folder, records in ((posix_run, "sets.jsonl"), (classification_run, "samples.jsonl"), (stopped, "sets.jsonl")):
        folder.mkdir(parents=True)
        (folder / records).write_text("")
        if folder is not stopped:
            (folder / "summary.json").write_text("{}")
    for load, folder, said in (
            (posixlab.load_result, classification_run, "is a classification run (samples.jsonl): "
                                                       "posixlab.load_classification reads it"),
            (posixlab.load_classification, posix_run, "is a POSIX run (sets.jsonl): posixlab.load_result reads it"),
            (posixlab.load_result, tmp_path / "sweep", f"holds 1 below it (a sweep or a folder of runs): load each, "
                                                       f"e.g. {classification_run}"),
            (posixlab.load_result, stopped, "is a run that stopped before its summary.json"),
            (posixlab.load_result, tmp_path / "none", f"no folder at {tmp_path / 'none'}"),
            (posixlab.load_result, posix_run / "summary.json", f"is a file of a run: give its folder, {posix_run}")):
        with pytest.raises(ConfigError, match=re.escape(said)):
            load(folder)
