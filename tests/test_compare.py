"""Two POSIX runs compared set by set (``posixlab compare``): the paired statistics against scipy and the bootstrap
recomputed, per-set accuracy by hand, what changed, the refusals, the command's exit codes, and real runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import wilcoxon

from posixlab.compare import compare_runs, compare_table, sample_values, set_values
from posixlab.errors import ConfigError
from posixlab.metrics.stats import bootstrap_ci


def answer(options, greedy):
    reading = lambda c: None if c is None else {"correct": c, "pred": "A"}  # noqa: E731
    return {"gold": "A", "by_options": reading(options), "by_greedy": reading(greedy)}


def write_run(folder, psis, correct=None, config=None, task="posix", ids=None, items=None):
    """A finished run's folder as a run writes it: summary.json and one set record a line."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model": {"name": "m"}, "variant": "template", "output_dir": str(folder), **(config or {})}
    (folder / "summary.json").write_text(json.dumps({"task": task, "config": config}))
    with open(folder / "sets.jsonl", "w") as handle:
        for n, psi in enumerate(psis):
            record = {"set_index": n, "set_id": (ids or [f"mmlu/q{k}" for k in range(len(psis))])[n], "psi": psi}
            if items is not None:
                record["item_id"] = items[n]
            if correct is not None:
                record["answers"] = [answer(c, c) for c in correct[n]]
            handle.write(json.dumps(record) + "\n")
    return folder


def write_sample(sample_id, sensitivity, gold, labels):
    return {"sample_id": sample_id, "sensitivity": sensitivity, "gold": gold,
            "predictions": [{"label": label} for label in labels]}


def write_samples(folder, samples, config=None):
    """A finished classification run's folder: summary.json and one sample record a line."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"task": "classification", "config": config or {}}))
    (folder / "samples.jsonl").write_text("".join(json.dumps({"sample_index": n, **s}) + "\n"
                                                  for n, s in enumerate(samples)))
    return folder


def test_a_sets_accuracy_is_over_the_prompts_it_answered():
    record = {"set_id": "x", "psi": 0.5, "answers": [answer(1, None), answer(0, 1), answer(1, 1), None]}
    assert set_values(record) == {"id": "x", "item": None, "psi": 0.5, "accuracy_options": 2 / 3,
                                  "accuracy_greedy": 1.0}
    assert set_values({"set_index": 4, "psi": None})["id"] == "#4"  # an older record without an id


def test_paired_differences_against_scipy_and_the_bootstrap(tmp_path):
    rng = np.random.default_rng(1)
    base_psi = rng.gamma(2.0, 0.2, 30)
    new_psi = base_psi + rng.normal(0.05, 0.05, 30)
    base_correct = rng.integers(0, 2, (30, 4)).tolist()
    new_correct = rng.integers(0, 2, (30, 4)).tolist()
    # the new run lacks the base run's last 2 sets and has 3 of its own
    ids = [f"mmlu/q{k}" for k in range(30)]
    base = write_run(tmp_path / "base", base_psi.tolist(), base_correct, ids=ids)
    new = write_run(tmp_path / "new", new_psi[:28].tolist() + [9.0, 9.0, 9.0], new_correct[:28] + [[1] * 4] * 3,
                    config={"model": {"name": "other"}}, ids=ids[:28] + ["x1", "x2", "x3"])
    result = compare_runs(base, new, seed=3)
    assert result["units"] == {"shared": 28, "base_only": 2, "new_only": 3}
    assert result["changed"] == {"model.name": ["m", "other"]}  # output_dir differs too, and is not a change
    psi = next(m for m in result["metrics"] if m["metric"] == "psi")
    diff = new_psi[:28] - base_psi[:28]
    assert psi["units"] == 28 and psi["difference"] == pytest.approx(diff.mean())
    assert psi["base"] == pytest.approx(base_psi[:28].mean()) and psi["new"] == pytest.approx(new_psi[:28].mean())
    assert psi["interval"] == list(bootstrap_ci(diff, seed=3, expanded=True))
    assert psi["wilcoxon_p"] == pytest.approx(wilcoxon(new_psi[:28], base_psi[:28]).pvalue)
    assert psi["interval"][0] > 0 and psi["verdict"] == "worse"  # ψ up by 0.05 ± 0.05 a set: lower is better
    accuracy = next(m for m in result["metrics"] if m["metric"] == "accuracy_options")
    per_set = np.array(new_correct[:28]).mean(axis=1) - np.array(base_correct[:28]).mean(axis=1)
    assert accuracy["difference"] == pytest.approx(per_set.mean())
    assert accuracy["verdict"] == ("better" if accuracy["interval"][0] > 0 else "worse"
                                   if accuracy["interval"][1] < 0 else "within noise")
    table = compare_table(result)
    assert "Changed: model.name: m → other." in table and "| psi | lower | 28 |" in table and "| worse |" in table


def test_a_rerun_is_identical_and_a_change_that_moves_nothing_is_within_noise(tmp_path):
    rng = np.random.default_rng(2)
    psis = rng.gamma(2.0, 0.2, 40).tolist()
    base = write_run(tmp_path / "a", psis)
    assert [m["verdict"] for m in compare_runs(base, write_run(tmp_path / "b", psis))["metrics"]] == ["identical"]
    shuffled = write_run(tmp_path / "c", list(rng.permutation(psis)))  # the same values, paired at random
    (psi,) = compare_runs(base, shuffled)["metrics"]
    assert psi["interval"][0] < 0 < psi["interval"][1] and psi["verdict"] == "within noise"


def test_what_differed_outside_the_configs_is_named(tmp_path):
    """Two runs of one config at two torch thread counts differ in their last bits (docs/choices.md): the table says
    why, where before it said only "nothing in the configs". A value one run lacks (an older run) is no change."""
    import torch

    from posixlab.runner import run_environment

    here = run_environment()
    assert here["torch_threads"] == torch.get_num_threads() and here["machine"]
    folders = [write_run(tmp_path / name, [0.1, 0.2, 0.3]) for name in ("a", "b", "c")]
    for folder, threads, transformers in zip(folders, (1, 2, None), ("5.23.0", "5.23.0", "5.24.0")):
        summary = json.loads((folder / "summary.json").read_text())
        summary.update(environment={**here, "torch_threads": threads}, model={"transformers": transformers})
        (folder / "summary.json").write_text(json.dumps(summary))
    result = compare_runs(folders[0], folders[1])
    assert result["environment_changed"] == {"torch threads": [1, 2]}
    table = compare_table(result)
    assert "Changed: nothing in the configs.\nRan differently: torch threads 1 → 2 (another thread count moves a " \
           "CPU run's numbers in their last bits).\n" in table
    assert compare_runs(folders[0], folders[2])["environment_changed"] == {"transformers": ["5.23.0", "5.24.0"]}
    assert "Ran differently" not in compare_table(compare_runs(folders[0], write_run(tmp_path / "d", [0.1, 0.2, 0.3])))


def test_the_order_a_run_wrote_its_sets_in_changes_nothing(tmp_path):
    """A run writes each set as it finishes, so two runs of one cell (or a run and its merged shards) hold their
    sets in different orders: the comparison reads them in set order, and its interval is the same."""
    rng = np.random.default_rng(4)
    base = write_run(tmp_path / "base", rng.gamma(2.0, 0.2, 40).tolist())
    new = write_run(tmp_path / "new", rng.gamma(2.0, 0.25, 40).tolist())
    written = tmp_path / "written" / "sets.jsonl"
    shutil.copytree(new, written.parent)
    lines = (new / "sets.jsonl").read_text().splitlines()
    written.write_text("".join(lines[k] + "\n" for k in rng.permutation(len(lines))))
    assert written.read_text() != (new / "sets.jsonl").read_text()
    assert compare_runs(base, written.parent)["metrics"] == compare_runs(base, new)["metrics"]
    assert compare_runs(written.parent, base)["metrics"] == compare_runs(new, base)["metrics"]


def test_one_shared_set_has_no_interval_and_no_verdict_but_noise(tmp_path):
    base = write_run(tmp_path / "a", [0.2, 0.3], ids=["q1", "q2"])
    new = write_run(tmp_path / "b", [0.9, 0.5], ids=["q1", "q9"])
    result = compare_runs(base, new)
    (psi,) = result["metrics"]
    assert psi["units"] == 1 and psi["interval"] == [None, None] and psi["verdict"] == "within noise"
    assert "| +0.7000 | n/a (one unit) |" in compare_table(result)
    json.dumps(result, allow_nan=False)   # what --json prints: valid JSON


def test_classification_runs_are_paired_by_sample(tmp_path):
    assert sample_values(write_sample("s", 0.25, "B", ["B", "N/A", "A", "B"])) == \
        {"id": "s", "sensitivity": 0.25, "accuracy": 0.5}          # N/A is wrong
    assert sample_values(write_sample("s", 0.0, None, ["B"]))["accuracy"] is None  # no gold label, no accuracy
    base = write_samples(tmp_path / "base", [write_sample(f"t{k}", 0.1 * k, "A", ["A", "B"]) for k in range(6)],
                         config={"strategy": "simple"})
    new = write_samples(tmp_path / "new", [write_sample(f"t{k}", 0.1 * k + 0.05, "A", ["A", "A"]) for k in range(1, 7)],
                        config={"strategy": "detail"})
    result = compare_runs(base, new)
    assert result["unit"] == "sample" and result["units"] == {"shared": 5, "base_only": 1, "new_only": 1}
    assert result["changed"] == {"strategy": ["simple", "detail"]}
    by_metric = {m["metric"]: m for m in result["metrics"]}
    assert by_metric["sensitivity"]["difference"] == pytest.approx(0.05) and by_metric["sensitivity"]["verdict"] == \
        "worse"                                                     # S up on every shared sample: lower is better
    assert by_metric["accuracy"]["base"] == 0.5 and by_metric["accuracy"]["new"] == 1.0
    assert by_metric["accuracy"]["verdict"] == "better"
    assert "on 5 shared samples" in compare_table(result) and "| sensitivity | lower | 5 |" in compare_table(result)
    with pytest.raises(ConfigError, match="unknown metric.*psi.*for samples"):
        compare_runs(base, new, metrics=["psi"])


def test_runs_of_two_variant_types_are_paired_by_question(tmp_path):
    """A spelling run and a template run share no set (``set_id`` names the variant type) but ask the same
    questions: each question's set in one is paired with its set in the other (by hand: ψ 0.2, 0.4, 0.3 against 0.5,
    0.6, 0.9 on q0, q1, q2, listed in another order; the differences 0.3, 0.2, 0.6, mean 1.1 / 3); a question
    asked twice in one run, or no question in common, is refused."""
    spelling = write_run(tmp_path / "spelling", [0.2, 0.4, 0.3], ids=["q0/spelling", "q1/spelling", "q2/spelling"],
                         items=["q0", "q1", "q2"])
    template = write_run(tmp_path / "template", [0.6, 0.9, 0.5, 0.7], items=["q1", "q2", "q0", "q3"],
                         ids=["q1/template", "q2/template", "q0/template", "q3/template"])
    result = compare_runs(spelling, template)
    psi = result["metrics"][0]
    assert result["paired_by"] == "item" and result["units"] == {"shared": 3, "base_only": 0, "new_only": 1}
    assert psi["units"] == 3 and psi["base"] == pytest.approx(0.3) and psi["new"] == pytest.approx(2.0 / 3)
    assert psi["difference"] == pytest.approx(1.1 / 3)
    # three differences, all positive, are no evidence at 95 % (the exact Wilcoxon p is 0.25): the interval is the t
    # interval, by hand 0.366667 ± t(0.975, 2) · 0.208167 / √3 = 0.366667 ± 4.302653 · 0.120185 = -0.150447 to 0.883781
    assert psi["interval"] == pytest.approx([-0.150447, 0.883781], abs=1e-5) and psi["verdict"] == "within noise"
    assert "on the sets of 3 shared items (0 only in the base run, 1 only in the new one; the runs share no set, so " \
        "each item's set in one is paired with its set in the other)." in compare_table(result)
    assert "Paired by item: each set's value" in compare_table(result)
    assert compare_runs(spelling, spelling)["paired_by"] == "set"  # sets in common: by set, as ever
    twice = write_run(tmp_path / "twice", [0.1, 0.2], ids=["q0/a", "q0/b"], items=["q0", "q0"])
    other = write_run(tmp_path / "other", [0.1], ids=["q9/template"], items=["q9"])
    for folder in (twice, other):
        with pytest.raises(ConfigError, match="share no set \\(by set_id or item_id\\)"):
            compare_runs(spelling, folder)


def test_two_sweeps_are_compared_cell_by_cell_at_the_bonferroni_level(tmp_path, capsys):
    """A prompt change gated over a grid: each cell of the new sweep (here: shots 0, 1 and 2, the prompt changed) is
    paired with the base sweep's cell of the same shots (not by the prompt, which the change moved in every cell),
    each at 1 − 0.05/2 for the 2 cells paired, so each equals ``compare_runs`` at 97.5%; the cell no base run has
    is named; the command fails on the worse cell only with --fail-if-worse, naming it, and on a metric it names
    that no cell holds; two base runs of one cell are named as such, and a sweep that matches nothing is refused."""
    from posixlab.commands import compare_command
    from posixlab.compare_sweeps import compare_sweeps, sweeps_table

    psis = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    base = [write_run(tmp_path / "base" / f"{k}_cell", psis, config={"shots": k, "prompt": "a"}) for k in (0, 1)]
    new = [write_run(tmp_path / "new" / "0_cell", psis, config={"shots": 0, "prompt": "b"}),  # unchanged
           write_run(tmp_path / "new" / "1_cell", [p + 0.2 for p in psis], config={"shots": 1, "prompt": "b"}),
           write_run(tmp_path / "new" / "2_cell", psis, config={"shots": 2, "prompt": "b"})]
    result = compare_sweeps(tmp_path / "base", tmp_path / "new")
    assert result["cell_settings"] == ["shots"] and result["pairs"] == 2
    assert result["per_pair_confidence"] == pytest.approx(0.975)
    for cell, (b, n) in zip(result["cells"], ((base[0], new[0]), (base[1], new[1]))):
        assert cell["result"] == compare_runs(b, n, confidence=0.975) and cell["cell"] == f"shots={b.name[0]}"
    verdicts = [[m["verdict"] for m in cell["result"]["metrics"]] for cell in result["cells"]]
    assert verdicts == [["identical"], ["worse"]]  # psi only: no answers in these runs
    assert result["unmatched"] == [{"new": str(new[2]), "why": "no base run with shots=2"}] and not result["base_only"]
    table = sweeps_table(result)
    assert "Changed (in the first cell): prompt: a → b." in table and "| shots=1 | psi | lower | 8 sets |" in table
    assert "97.50% interval" in table and "Not compared: " + str(new[2]) + ": no base run with shots=2." in table
    assert compare_command([str(tmp_path / "base"), str(tmp_path / "new")]) == 0
    assert compare_command([str(tmp_path / "base"), str(tmp_path / "new"), "--fail-if-worse"]) == 1
    err = capsys.readouterr().err  # the worse cell, and the cell no base run has: a gate passes only on what it checked
    assert "worse beyond noise: shots=1: psi" in err and f"not compared, so not gated: {new[2]}" in err
    shutil.rmtree(new[2])
    killed = shutil.copytree(new[0], tmp_path / "new" / "3_killed")
    (killed / "summary.json").unlink()  # its sets are written, its summary never was
    assert compare_sweeps(tmp_path / "base", tmp_path / "new")["unmatched"] == [
        {"new": str(killed), "why": "not finished (no summary.json)"}]
    assert compare_command([str(tmp_path / "base"), str(tmp_path / "new"), "--fail-if-worse", "--metrics", "psi"]) == 1
    assert capsys.readouterr().err.count("posixlab compare: ") == 2
    shutil.rmtree(killed)
    new[1].joinpath("sets.jsonl").write_text(new[0].joinpath("sets.jsonl").read_text())  # the change undone
    assert compare_command([str(tmp_path / "base"), str(tmp_path / "new"), "--fail-if-worse"]) == 0
    # a metric the gate names that no cell holds (no judge read these runs) is not passed unchecked
    assert compare_command([str(tmp_path / "base"), str(tmp_path / "new"), "--fail-if-worse", "--metrics",
                            "psi,judged_share"]) == 1
    out = capsys.readouterr()
    assert "not compared, so not gated: shots=0: judged_share, shots=1: judged_share" in out.err
    assert "shots=1: Named but not compared (a run lacks it): judged_share." in out.out
    assert compare_sweeps(base[1], tmp_path / "new")["cells"][0]["cell"] == "shots=1"  # a run against a sweep's cell
    write_run(tmp_path / "base" / "2_again", psis, config={"shots": 1, "prompt": "a"})
    again = compare_sweeps(tmp_path / "base", tmp_path / "new")
    assert again["unmatched"][0]["why"] == "2 base runs with shots=1: give the base sweep one run a cell"
    with pytest.raises(ConfigError, match="no run of .* has a run of the same cell"):
        compare_sweeps(tmp_path / "base", write_run(tmp_path / "lone", psis, config={"shots": 2, "prompt": "b"}))


def test_the_bonferroni_level_calls_fewer_null_sweeps_worse():
    """experiments/sweep_gate_check.py: on the same simulated null sweeps of 4 cells, intervals at 1 − 0.05/4 call ψ
    worse in some cell less often than at 95% a cell (its doctest runs too)."""
    import doctest

    from experiments import sweep_gate_check

    assert doctest.testmod(sweep_gate_check).attempted > 0 and doctest.testmod(sweep_gate_check).failed == 0
    shares = sweep_gate_check.false_alarms(150, 4, 10, [0.95, 0.9875], seed=2)
    assert shares[0.9875] < shares[0.95] and shares[0.95] > 0.05  # 4 cells at 95%: about 1 − 0.975⁴ ≈ 10%


def test_runs_that_cannot_be_compared_are_refused(tmp_path):
    base = write_run(tmp_path / "base", [0.1, 0.2])
    with pytest.raises(ConfigError, match="holds no summary.json"):
        compare_runs(base, tmp_path / "missing")
    with pytest.raises(ConfigError, match="is a classification run without its records"):
        compare_runs(base, write_run(tmp_path / "cls", [0.1], task="classification"))
    with pytest.raises(ConfigError, match="different tasks"):
        compare_runs(base, write_samples(tmp_path / "samples", [write_sample("a", 0.1, "x", ["x"])]))
    with pytest.raises(ConfigError, match="share no set"):
        compare_runs(base, write_run(tmp_path / "other", [0.1, 0.2], ids=["a", "b"]))
    longer = write_run(tmp_path / "longer", [0.1, 0.2], ids=["a", "b"], config={"dataset": {"max_question_chars": 130},
                                                                                "seed": 1, "shots": 1})
    with pytest.raises(ConfigError, match="share no set .* the settings that choose the items differ: "
                                          "dataset.max_question_chars null → 130, seed null → 1$"):
        compare_runs(base, longer)  # the shots choose exemplars, not the items
    with pytest.raises(ConfigError, match="the same set_id"):
        compare_runs(base, write_run(tmp_path / "twice", [0.1, 0.2], ids=["mmlu/q0", "mmlu/q0"]))
    with pytest.raises(ConfigError, match="unknown metric"):
        compare_runs(base, base, metrics=["psy"])


def write_judge(folder, shares, key="k1", fingerprint=None):
    """A judge's files as ``posixlab judge`` writes them into a run's folder: judge.jsonl (a row a set, its judged
    share) and judge.json (its key, the sets judged, the run it judged)."""
    rows = [{"key": key, "set_id": f"mmlu/q{n}", "set_index": n, "judged_share": share} for n, share in enumerate(shares)]
    (folder / "judge.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"judge": {"model": "j", "key": key}, "sets": len(shares), "run_fingerprint": fingerprint}
    (folder / "judge.json").write_text(json.dumps(summary))


def test_judged_shares_are_paired_where_one_judge_read_both_runs(tmp_path):
    """Each set's judged share (the variants a judge called the same as the original's response), paired like ψ;
    never across two judges, nor from a judge written for an earlier run in the folder; a metric named but not
    compared is listed, and fails the command's gate."""
    base = write_run(tmp_path / "base", [0.4, 0.3, 0.6, 0.2, 0.5])
    new = write_run(tmp_path / "new", [0.3, 0.3, 0.5, 0.2, 0.4])
    assert "judged_share" not in {m["metric"] for m in compare_runs(base, new)["metrics"]}   # no judge: not a metric
    write_judge(base, [0.5, 1.0, 0.0, 0.5, 0.25])
    one_judged = compare_runs(base, new, metrics=["psi", "judged_share"])
    assert one_judged["not_compared"] == ["judged_share"]
    assert one_judged["notes"] == [f"judged_share not compared: only the base run was judged (posixlab judge {new} "
                                   f"--judge j, with its options)"]
    assert "Named but not compared (a run lacks it): judged_share." in compare_table(one_judged)
    write_judge(new, [1.0, 1.0, 0.5, 0.5])   # its first 4 sets: the 5th has no share to pair
    (judged,) = [m for m in compare_runs(base, new)["metrics"] if m["metric"] == "judged_share"]
    assert judged["units"] == 4 and judged["better"] == "higher"
    assert judged["base"] == pytest.approx(0.5) and judged["new"] == pytest.approx(0.75)
    assert judged["difference"] == pytest.approx((0.5 + 0 + 0.5 + 0) / 4)
    assert judged["wilcoxon_p"] == pytest.approx(wilcoxon([1.0, 1.0, 0.5, 0.5], [0.5, 1.0, 0.0, 0.5]).pvalue)
    write_judge(new, [1.0, 1.0, 0.5, 0.5], key="k2")   # another judge (model, instruction, options)
    other = compare_runs(base, new)
    assert "judged_share" not in {m["metric"] for m in other["metrics"]}
    assert other["notes"][0].startswith("judged_share not compared: the runs were judged by different judges")
    (base / "summary.json").write_text(json.dumps({"task": "posix", "config": {}, "config_fingerprint": "now"}))
    write_judge(base, [0.5, 1.0, 0.0, 0.5, 0.25], key="k2", fingerprint="before")   # an earlier run's judge
    assert compare_runs(base, new)["notes"][0].startswith("judged_share not compared: only the new run was judged")


def test_a_gate_on_a_metric_the_runs_lack_fails(tmp_path, capsys):
    from posixlab.commands import compare_command

    base = write_run(tmp_path / "base", [0.4, 0.3, 0.6])
    new = write_run(tmp_path / "new", [0.4, 0.3, 0.6])
    assert compare_command([str(base), str(new), "--fail-if-worse", "--metrics", "psi"]) == 0
    assert compare_command([str(base), str(new), "--fail-if-worse", "--metrics", "psi,accuracy_options"]) == 1
    assert "not compared, so not gated: accuracy_options" in capsys.readouterr().err
    assert compare_command([str(base), str(new), "--metrics", "judged_share"]) == 0   # no gate: shown, not failed
    assert "Named but not compared (a run lacks it): judged_share." in capsys.readouterr().out


def test_the_command_exits_1_on_a_worse_metric_only_when_asked(tmp_path, root):
    base = write_run(tmp_path / "base", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [[1, 1]] * 8)
    new = write_run(tmp_path / "new", [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], [[1, 1]] * 8)

    def command(*args):
        return subprocess.run([sys.executable, "-m", "posixlab", "compare", *map(str, args)], cwd=root,
                              capture_output=True, text=True, timeout=300)

    shown = command(base, new)
    assert shown.returncode == 0 and "| psi | lower | 8 | 0.4500 | 0.6500 | +0.2000 |" in shown.stdout
    assert "| accuracy_options | higher | 8 | 1.0000 | 1.0000 | +0.0000 |" in shown.stdout
    gated = command(base, new, "--fail-if-worse")
    assert gated.returncode == 1 and "worse beyond noise: psi" in gated.stderr
    assert command(base, new, "--fail-if-worse", "--metrics", "accuracy_greedy").returncode == 0
    assert json.loads(command(new, base, "--json").stdout)["metrics"][0]["verdict"] == "better"
    missing = command(base, tmp_path / "nothing")
    assert missing.returncode == 2 and "holds no summary.json" in missing.stderr


@pytest.mark.slow
def test_real_runs_one_shot_against_zero_shots(small_results):
    """The packaged model's spelling sets at 0 and 1 shot: the same items, so every set pairs."""
    from posixlab.results import read_sets

    zero, one = small_results / "0_mmlu_spelling_0shot", small_results / "5_mmlu_spelling_1shot"
    result = compare_runs(zero, one)
    assert result["changed"]["shots"] == [0, 1] or result["changed"].get("task.shots") == [0, 1]
    psi = {m["metric"]: m for m in result["metrics"]}["psi"]
    by_id = {r["set_id"]: r["psi"] for r in read_sets(one)}
    expected = [by_id[r["set_id"]] - r["psi"] for r in read_sets(zero)]
    assert result["units"]["shared"] == len(expected) == 4
    assert psi["difference"] == pytest.approx(np.mean(expected))
    assert {"accuracy_options", "accuracy_greedy"} <= {m["metric"] for m in result["metrics"]}


@pytest.mark.slow
def test_two_real_runs_judged_by_one_judge_compare_their_judged_shares(lm, small_results, tmp_path):
    """The packaged model's spelling sets at 0 and 1 shot, each judged in this process by the same model: the
    comparison and the page's pair table pair each set's judged share with the judge's own rows; with one run's
    judge gone, the page says why its judged shares are not paired."""
    from conftest import lm_spec

    from posixlab.judge import ROWS_FILE, judge_run
    from posixlab.report.build import build_report

    zero = shutil.copytree(small_results / "0_mmlu_spelling_0shot", tmp_path / "zero")
    one = shutil.copytree(small_results / "5_mmlu_spelling_1shot", tmp_path / "one")
    shares = {}
    for run in (zero, one):
        judge_run(run, lm_spec(), lm=lm, progress=False)
        rows = [json.loads(line) for line in (run / ROWS_FILE).read_text().splitlines()]
        shares[run] = {r["set_id"]: r["judged_share"] for r in rows}
    result = compare_runs(zero, one, metrics=["judged_share"])
    (judged,) = result["metrics"]
    expected = [shares[one][s] - shares[zero][s] for s in shares[zero]]
    assert judged["units"] == len(expected) == 4 and result["not_compared"] == [] and result["notes"] == []
    assert judged["difference"] == pytest.approx(np.mean(expected))
    page = build_report([zero, one], tmp_path / "page.html").read_text()
    assert "<td>judged_share</td>" in page   # a row of the page's pair table
    (one / "judge.json").unlink()
    page = build_report([zero, one], tmp_path / "page.html").read_text()
    assert "<td>judged_share</td>" not in page and "judged_share not compared: only the base run was judged" in page
