"""The CI gate (posixlab/gate.py, ``posixlab gate``, ``gate.*`` thresholds on a run): exit 0 when every threshold is
met, 1 with a table when one is missed, 2 for a threshold the task or the data has no metric for.

The summaries are built by the functions a run builds them with (classification: ``build_classification_summary``;
POSIX: ``summarize`` and ``accuracy_summary``, the parts of ``build_summary`` the gate reads), so a renamed key
fails here; one slow test runs the real command end to end."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posixlab.answers import accuracy_summary
from posixlab.commands import gate_command
from posixlab.errors import ConfigError
from posixlab.gate import METRICS, GateConfig, check_gate, check_gate_applies, gate_table, make_gate
from posixlab.metrics import summarize
from posixlab.metrics.classification import NA, class_distribution, sensitivity
from posixlab.tasks.classification import build_classification_summary

ROOT = Path(__file__).resolve().parent.parent
CLASSES = ["pos", "neg", NA]


def classification_summary(labels_per_sample, gold) -> dict:
    records = []
    for labels, g in zip(labels_per_sample, gold):
        distribution = class_distribution(labels, CLASSES)
        records.append({"gold": g, "distribution": distribution.tolist(), "sensitivity": sensitivity(distribution),
                        "predictions": [{"label": label} for label in labels]})
    return build_classification_summary(records, CLASSES, len(labels_per_sample[0]), {"seed": 0})


LABELS = [["pos", "pos", "neg"], ["pos", "pos", "pos"], ["neg", "neg", NA], ["neg", "pos", "neg"]]
GOLD = ["pos", "pos", "neg", "neg"]


def _record(options, greedy, gold="A"):
    return {"prompts": [{"kind": "original"}] + [{"kind": "spelling"}] * (len(options) - 1),
            "answers": [{"gold": gold, "by_options": None if o is None else {"pred": o, "correct": o == gold},
                         "by_greedy": {"pred": g, "parsed": g is not None, "correct": g == gold}}
                        for o, g in zip(options, greedy)]}


def posix_summary(options=True) -> dict:
    # three sets of three prompts; options right on 2/3, 3/3, 1/3 of each set's prompts; greedy unparsed twice
    o = lambda *p: p if options else (None,) * len(p)  # noqa: E731
    records = [_record(o("A", "A", "B"), ("A", None, "B")), _record(o("A", "A", "A"), ("A", "A", "C")),
               _record(o("C", "A", "D"), ("A", "A", None))]
    return {"task": "posix", "psi": summarize([0.12, 0.30, 0.21]), "accuracy": accuracy_summary(records)}


def judged_folder(folder: Path, says: str = "Yes", fingerprint: str | None = "f0",
                  decoy_says: str | None = None) -> Path:
    """A POSIX run's folder with the judge's summary beside its own, written by the functions ``judge_run`` writes
    it with: two sets of three responses (one identical to the original's, one not) and a decoy each; the judge
    answers ``says`` to every pair (its control included, unless ``decoy_says``)."""
    from posixlab.judge import SUMMARY_FILE, judge_set, judge_summary

    def record(index):
        return {"set_id": f"s{index}", "set_index": index, "psi": 0.2,
                "prompts": [{"text": f"Q{index}, form {k}"} for k in range(3)],
                "responses": [{"text": "A"}, {"text": "A"}, {"text": "the answer is A"}]}

    def ask(chats):  # the decoy "B" is the only response B that begins with B
        return [decoy_says if decoy_says and "Response B:\nB" in chat[-1]["content"] else says for chat in chats]

    rows = [judge_set(record(i), ask, decoy="B") for i in range(2)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SUMMARY_FILE).write_text(json.dumps({**judge_summary(rows), "run_fingerprint": fingerprint}))
    (folder / "summary.json").write_text(json.dumps({**posix_summary(), "config_fingerprint": "f0"}))
    return folder


def test_min_judged_share_reads_the_judge_beside_the_run_and_its_controls_guard_it(tmp_path, capsys):
    """``gate.min_judged_share`` reads judge.json's judged share (``posixlab gate`` on a saved run; a run's own gate
    reads it the same way), and only then the judge's controls: a judge that calls another question's response the
    same (yes to everything) fails ``max_judge_control_same`` (0.5 by default) whatever its judged share, and so does
    one whose controls were never read (no reply yes or no). A run no judge read, or only an earlier run in its
    folder, is an error naming what to do."""
    from posixlab.tasks.posix import PosixTask

    yes, no = judged_folder(tmp_path / "yes"), judged_folder(tmp_path / "no", says="No")
    summary = PosixTask.with_files_beside(yes, posix_summary())
    rows = check_gate(summary, GateConfig(min_judged_share=0.9))
    assert [(r.metric, r.value, r.passed) for r in rows] == [("min_judged_share", 1.0, True),
                                                            ("max_judge_control_same", 1.0, False)]
    assert [r.metric for r in check_gate(summary, GateConfig(max_posix=1.0))] == ["max_posix"]  # not its guard
    assert [r.metric for r in check_gate(summary, GateConfig(min_judged_share=0.9, max_judge_control_same=None))] \
        == ["min_judged_share"]
    assert gate_command([str(no), "gate.min_judged_share=0.5"]) == 0  # a judge saying no: the identical half
    out = capsys.readouterr().out
    assert "| min_judged_share | judged.judged_share | ≥ 0.5 | 0.5000 | pass |" in out
    assert "| max_judge_control_same | judged.control_judged_same | ≤ 0.5 | 0.0000 | pass |" in out
    assert gate_command([str(no), "gate.min_judged_share=0.6"]) == 1 and "| FAIL |" in capsys.readouterr().out
    assert gate_command([str(no), "gate.min_judged_share=0.6", "--json"]) == 1  # the same rows, for a CI script
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["folder"] == str(no) and verdict["passed"] is False
    assert [(r["metric"], r["value"], r["passed"]) for r in verdict["rows"]] == [
        ("min_judged_share", 0.5, False), ("max_judge_control_same", 0.0, True)]
    assert gate_command([str(no), "gate.min_judged_share=0.6", "--jsno"]) == 2
    assert "posixlab gate takes no --jsno (its one flag is --json)" in capsys.readouterr().err
    assert gate_command([str(yes), "gate.min_judged_share=0.6"]) == 1  # the guard
    capsys.readouterr()
    unread = judged_folder(tmp_path / "unread", decoy_says="It depends")  # no control read: nothing vouches
    assert gate_command([str(unread), "gate.min_judged_share=0.6"]) == 1
    out = capsys.readouterr().out
    assert "| min_judged_share | judged.judged_share | ≥ 0.6 | 1.0000 | pass |" in out
    assert "| max_judge_control_same | judged.control_judged_same | ≤ 0.5 | none read | FAIL |" in out
    unjudged = tmp_path / "unjudged"
    unjudged.mkdir()
    (unjudged / "summary.json").write_text(json.dumps(posix_summary()))
    earlier = judged_folder(tmp_path / "earlier", fingerprint="an earlier run's")
    for folder in (unjudged, earlier):
        assert gate_command([str(folder), "gate.min_judged_share=0.5"]) == 2
        assert "no judge read this run: end the run with one (judge=packaged" in capsys.readouterr().err


def write_run(folder: Path, summary: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder


def read_at(summary: dict, key: str) -> float:
    for part in key.split("."):
        summary = summary[part]
    return summary


def test_every_threshold_reads_a_number_of_a_real_summary(tmp_path):
    from posixlab.tasks.posix import PosixTask

    cls, posix = classification_summary(LABELS, GOLD), posix_summary()
    judged = PosixTask.with_files_beside(judged_folder(tmp_path / "judged", says="No"), posix)
    for name, metric in METRICS.items():
        summary = cls if metric.task == "classification" else judged if name == "min_judged_share" else posix
        rows = check_gate(summary, make_gate({name: 0.5}))
        # a classification run's gate also checks the constant-classifier guard, last; a judge's share, its controls
        guard = {"min_judged_share": ["max_judge_control_same"]}.get(name, ["max_answer_share"] if summary is cls
                                                                       else [])
        assert [r.metric for r in rows] == [name] + guard
        assert rows[0].value == read_at(summary, rows[0].key)
        assert isinstance(rows[0].value, float)
    # the accuracy reading: options when the run scored them, else greedy; classification runs have greedy only
    assert check_gate(posix, GateConfig(min_accuracy=0.5))[0].key == "accuracy.by_options.accuracy"
    assert check_gate(posix_summary(options=False), GateConfig(min_accuracy=0.5))[0].key == \
        "accuracy.by_greedy.accuracy"
    assert check_gate(posix, GateConfig(min_accuracy=0.5, accuracy_reading="greedy"))[0].key == \
        "accuracy.by_greedy.accuracy"
    assert check_gate(cls, GateConfig(max_accuracy_spread=0.5))[0].key == "accuracy.by_greedy.spread.range"


def test_max_and_min_thresholds_pass_and_fail_on_either_side_of_the_value():
    summary = posix_summary()
    spread = summary["accuracy"]["by_options"]["spread"]
    assert spread["max"] - spread["min"] == pytest.approx(spread["range"]) and spread["range"] > 0
    for name, key in (("max_posix", "psi.posix"), ("max_accuracy_spread", "accuracy.by_options.spread.range"),
                      ("min_accuracy", "accuracy.by_options.accuracy"),
                      ("min_worst_case_accuracy", "accuracy.by_options.worst_case")):
        value, sign = read_at(summary, key), 1 if name.startswith("max_") else -1
        assert check_gate(summary, make_gate({name: value + sign * 0.01}))[0].passed, name
        assert not check_gate(summary, make_gate({name: value - sign * 0.01}))[0].passed, name
        assert check_gate(summary, make_gate({name: value}))[0].passed, name  # the bound itself passes


def test_a_threshold_the_task_has_no_metric_for_is_an_error_before_the_run():
    with pytest.raises(ConfigError, match=r"gate.min_consistency reads consistency.mean, which only "
                                          r"task=classification runs have; this is a task=posix run"):
        check_gate_applies("posix", GateConfig(min_consistency=0.8))
    with pytest.raises(ConfigError, match=r"gate.max_posix reads psi.posix, which only task=posix runs have"):
        check_gate_applies("classification", GateConfig(max_posix=0.1))
    with pytest.raises(ConfigError, match="classification runs score no options"):
        check_gate_applies("classification", GateConfig(accuracy_reading="options"))
    check_gate_applies("classification", GateConfig(max_sensitivity=0.2, min_consistency=0.8, min_accuracy=0.1))
    with pytest.raises(ConfigError, match=r"gate.max_sensitivity must be a number, got 'high'"):
        make_gate({"max_sensitivity": "high"})
    with pytest.raises(ConfigError, match="gate.accuracy_reading must be options or greedy"):
        make_gate({"accuracy_reading": "best"})


def test_a_metric_the_data_leaves_out_is_an_error_naming_key_and_why():
    unlabelled = classification_summary(LABELS, [None] * 4)
    assert unlabelled["consistency"] is None and unlabelled["accuracy"] is None
    check_gate(unlabelled, GateConfig(max_sensitivity=0.9))  # S needs no gold label
    for name, why in (("min_consistency", "consistency.mean, which this run's summary does not have: the run has no "
                                          "gold labels"),
                      ("min_micro_f1", "micro_f1.mean, which this run's summary does not have: not every sample"),
                      ("min_accuracy", "accuracy.by_greedy.accuracy, which this run's summary does not have: no "
                                       "item has a gold answer")):
        with pytest.raises(ConfigError, match=f"gate.{name} reads {why}"):
            check_gate(unlabelled, make_gate({name: 0.5}))
    partly = classification_summary(LABELS, ["pos", None, "neg", "neg"])
    assert check_gate(partly, GateConfig(min_consistency=0.0))[0].passed
    with pytest.raises(ConfigError, match="not every sample has a gold label"):
        check_gate(partly, GateConfig(min_micro_f1=0.5))
    with pytest.raises(ConfigError, match=r"did not score the options .*gate.accuracy_reading=greedy"):
        check_gate(posix_summary(options=False), GateConfig(min_accuracy=0.5, accuracy_reading="options"))


def test_a_run_that_stopped_early_fails_even_when_its_numbers_pass():
    summary = {**classification_summary(LABELS, GOLD), "stopped": "budget reached after 40 of 100 samples"}
    rows = check_gate(summary, GateConfig(max_sensitivity=1.0))
    assert [(r.metric, r.passed) for r in rows] == [("complete", False), ("max_sensitivity", True),
                                                    ("max_answer_share", True)]
    table = gate_table(rows)
    assert "| complete | stopped | the run finished | stopped early: budget reached after 40 of 100 samples | FAIL |" \
        in table
    assert check_gate({**summary, "stopped": None}, GateConfig(max_sensitivity=1.0))[0].metric == "max_sensitivity"


def test_a_value_that_rounds_to_its_threshold_shows_every_digit():
    rows = check_gate({"task": "posix", "psi": {"posix": 0.20001}}, GateConfig(max_posix=0.2))
    assert "| max_posix | psi.posix | ≤ 0.2 | 0.20001 | FAIL |" in gate_table(rows)


def test_gate_command_exit_status_and_table(tmp_path, capsys):
    summary = classification_summary(LABELS, GOLD)
    run = write_run(tmp_path / "run", summary)
    s, c = summary["sensitivity"]["mean"], summary["consistency"]["mean"]
    assert 0 < s < 1 and 0 < c < 1
    met = [f"gate.max_sensitivity={s + 0.05}", f"gate.min_consistency={c - 0.05}"]
    assert gate_command([str(run), *met]) == 0
    out = capsys.readouterr().out
    assert f"{run}: gate passed" in out and out.count("| pass |") == 3 and "FAIL" not in out  # + max_answer_share

    assert gate_command([str(run), f"gate.max_sensitivity={s - 0.05}", f"gate.min_consistency={c - 0.05}"]) == 1
    out = capsys.readouterr().out
    assert f"{run}: gate FAILED" in out
    assert f"| max_sensitivity | sensitivity.mean | ≤ {s - 0.05:g} | {s:.4f} | FAIL |" in out
    assert f"| min_consistency | consistency.mean | ≥ {c - 0.05:g} | {c:.4f} | pass |" in out

    # a sweep folder: every job under it; one job failing fails the whole
    sweep = tmp_path / "sweep"
    write_run(sweep / "0_a", summary)
    write_run(sweep / "1_b", classification_summary([["pos", "neg", NA]] * 4, GOLD))  # S = 1: every class once
    assert gate_command([str(sweep), "gate.max_sensitivity=0.9"]) == 1
    out = capsys.readouterr().out
    assert f"{sweep / '0_a'}: gate passed" in out and f"{sweep / '1_b'}: gate FAILED" in out


def test_gate_command_errors_exit_2(tmp_path, capsys):
    posix = write_run(tmp_path / "posix", posix_summary())
    assert gate_command([str(posix), "gate.min_consistency=0.8"]) == 2
    assert "gate.min_consistency reads consistency.mean, which only task=classification runs have" in \
        capsys.readouterr().err
    assert gate_command([str(posix), "gate.max_posx=0.8"]) == 2
    assert "gate has no setting max_posx" in capsys.readouterr().err
    assert gate_command([str(posix)]) == 2
    assert "give at least one threshold" in capsys.readouterr().err
    assert gate_command([str(tmp_path / "nothing"), "gate.max_posix=1"]) == 2
    assert "no summary.json in" in capsys.readouterr().err
    stopped = tmp_path / "stopped"  # a run killed after two sets: said as such, with what to do
    stopped.mkdir()
    (stopped / "sets.jsonl").write_text('{"set_index": 0}\n{"set_index": 1}\n')
    assert gate_command([str(stopped), "gate.max_posix=1"]) == 2
    assert "holds a run with no summary yet: it stopped (or is still running) after 2 sets. Run its command " \
        "again" in capsys.readouterr().err
    assert gate_command([str(posix), "max_posix=1"]) == 2
    assert "write thresholds as gate.KEY=VALUE" in capsys.readouterr().err
    assert gate_command(["--help"]) == 0


def test_a_threshold_its_metric_can_never_reach_is_refused_saying_whether_it_could_never_pass_or_never_fail(
        tmp_path, capsys):
    from posixlab.gate import guards, ranges

    bounds = ranges()
    assert set(bounds) == {*METRICS, *guards()}  # every threshold of the package's tasks has its range
    assert bounds["max_posix"] == (0, math.inf) and {bounds[name] for name in bounds if name != "max_posix"} == {(0, 1)}
    for name, (low, high) in bounds.items():
        make_gate({name: low})  # the bounds themselves are thresholds a run can meet
        if not math.isinf(high):
            make_gate({name: high})
        never_below = "pass" if name.startswith("max_") else "fail"
        with pytest.raises(ConfigError, match=rf"gate.{name}=-0.5 is outside .* could never {never_below}"):
            make_gate({name: -0.5})
        if not math.isinf(high):
            never_above = "fail" if name.startswith("max_") else "pass"
            with pytest.raises(ConfigError, match=rf"gate.{name}=1.5 is outside .* could never {never_above}"):
                make_gate({name: 1.5})
    with pytest.raises(ConfigError, match=r"never pass; a fraction is meant \(0.8 for 80%\)"):
        make_gate({"min_accuracy": 80})
    posix = write_run(tmp_path / "posix", posix_summary())  # the gate command refuses it too (exit status 2)
    assert gate_command([str(posix), "gate.min_worst_case_accuracy=95"]) == 2
    assert "a fraction is meant (0.95 for 95%)" in capsys.readouterr().err


def test_the_config_s_gate_node_is_gateconfig_s_defaults_and_takes_thresholds():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from posixlab.cli import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        default = compose(config_name="config")
        assert make_gate(OmegaConf.to_container(default.gate)) == GateConfig()
        # every field but ``more`` (thresholds of tasks registered outside the package: gate.KEY=VALUE adds them)
        assert set(default.gate) == {f.name for f in dataclasses.fields(GateConfig)} - {"more"}
        set_ = compose(config_name="config", overrides=["task=classification", "gate.max_sensitivity=0.2",
                                                        "gate.min_consistency=0.8"])
        assert make_gate(OmegaConf.to_container(set_.gate)) == GateConfig(max_sensitivity=0.2, min_consistency=0.8)


def _cli(*args, timeout=120):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-c", "from posixlab.cli import entry; entry()", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_console_command_gate_exit_status(tmp_path):
    summary = classification_summary(LABELS, GOLD)
    run = write_run(tmp_path / "run", summary)
    s = summary["sensitivity"]["mean"]
    # one subprocess (importing the command takes seconds); gate_command's other statuses are tested in process
    failed = _cli("gate", str(run), f"gate.max_sensitivity={s - 0.05}", "gate.min_accuracy=0")
    assert failed.returncode == 1, failed.stderr
    assert f"| max_sensitivity | sensitivity.mean | ≤ {s - 0.05:g} | {s:.4f} | FAIL |" in failed.stdout
    assert "| min_accuracy | accuracy.by_greedy.accuracy | ≥ 0 |" in failed.stdout


@pytest.mark.slow
def test_a_run_with_a_threshold_its_task_has_no_metric_for_stops_before_it_starts(tmp_path):
    # no model is loaded: the check runs before the job (the folder holds only config.yaml)
    proc = _cli("task=classification", "gate.max_posix=0.1", "logger=none", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "gate.max_posix reads psi.posix, which only task=posix runs have; this is a task=classification run" in \
        proc.stderr
    written = {p.name for p in (tmp_path / "run").iterdir()}
    assert "config.yaml" in written and not written & {"summary.json", "samples.jsonl", "rephrasings.json"}, written
    typo = _cli("gate.max_posx=0.1", "logger=none", f"hydra.run.dir={tmp_path / 'typo'}")
    assert typo.returncode == 2 and "gate.max_posx is not a setting: did you mean gate.max_posix?" in typo.stderr


@pytest.mark.slow
def test_a_real_run_that_misses_its_gate_exits_1_with_the_table(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "num_sets=2", "num_variants=2", "max_new_tokens=2", "progress=false",
         "logger=none", "embedding=none", f"hydra.run.dir={out}", f"score_cache_dir={tmp_path / 'scores'}",
         "gate.max_posix=0.0001", "gate.min_accuracy=0"],
        cwd=ROOT, env={**os.environ, "HYDRA_FULL_ERROR": "0"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())  # the run finished and wrote its results first
    posix = summary["psi"]["posix"]
    assert posix > 0.0001
    assert "POSIX = " in proc.stdout and "gate FAILED:" in proc.stdout
    assert f"| max_posix | psi.posix | ≤ 0.0001 | {posix:.4f} | FAIL |" in proc.stdout
    accuracy = summary["accuracy"]["by_options"]["accuracy"]
    assert f"| min_accuracy | accuracy.by_options.accuracy | ≥ 0 | {accuracy:.4f} | pass |" in proc.stdout
    state = json.loads((out / ".posixlab_job.json").read_text())  # what posixlab status says of the run
    assert (state["state"], state["error"], state["exit_status"]) == ("failed", f"missed its gate: max_posix "
                                                                      f"{posix:.4f}", 1)
