"""'Show me where' (issue 34, item 7): the most sensitive sets of a POSIX run, the prompt pair and response that
moved most in each (``summary.json``'s ``most_sensitive``, a section of ``summary.md``) and the heat map of the
highest-ψ set's terms of ψ (``figures/set_matrix.png``). Hand-made records, no model, except the last test."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from posixlab.analysis.collect import load_rows
from posixlab.analysis.figures import run_figures, set_matrix_figure
from posixlab.metrics import psi
from posixlab.metrics.where import most_moved_pair, normalised_log_ratios, psi_terms
from posixlab.results import (SETS_FILE, SUMMARY_FILE, SUMMARY_MD, build_summary, most_sensitive, read_sets,
                              rebuild_summary, summary_records, write_summary)


def record(index: int, matrix, lengths, psi_value=None, texts=None, responses=None) -> dict:
    """A set record as a POSIX run writes it, with what the summary and the figures read."""
    n = len(matrix)
    texts = texts or [f"Q{index}: prompt {k}\nA:" for k in range(n)]
    responses = responses or [f" answer {k}" for k in range(n)]
    token_ids = [list(range(1, length + 1)) for length in lengths]
    return {
        "set_index": index, "set_id": f"set-{index}", "item_id": f"item-{index}", "subject": None, "answer": None,
        "variant_type": "spelling", "max_new_tokens": 5, "exemplars": [],
        "prompts": [{"text": t, "kind": "original" if k == 0 else "spelling", "index": k - 1, "record": {},
                     "model_text": None, "num_tokens": 4} for k, t in enumerate(texts)],
        "responses": [{"text": r, "token_ids": ids, "length": len(ids), "ends_with_eos": False,
                       "generation_logprobs": None} for r, ids in zip(responses, token_ids)],
        "logprob_matrix": [list(map(float, row)) for row in matrix], "lengths": list(lengths),
        "psi": psi(matrix, lengths) if psi_value is None else psi_value,
        "psi_reference_compat": psi(matrix, lengths, mode="reference_compat", max_new_tokens=5)
        if min(lengths) >= 1 else 0.0,
        "stats": {"forward_tokens": 10, "forward_tokens_naive": 20, "engine_tokens": 10, "cached": False},
    }


# set 0: ψ = 1.0; set 1: the largest ψ; set 2: the same ψ as set 0 (a tie, broken by the lower set index)
M0 = [[-1.0, -2.0], [-2.0, -1.0]]           # |−2 − −1| / 1 both ways: ψ = 1.0
M1 = [[-0.5, -6.0, -2.0],                   # column 1 (y_1, 3 tokens): |−6 − −1.5| / 3 = 1.5 for prompt 0
      [-4.5, -1.5, -2.5],                   # column 0 (y_0, 2 tokens): |−4.5 − −0.5| / 2 = 2.0 for prompt 1: largest
      [-1.5, -3.0, -1.0]]                   # column 2 (y_2, 1 token): |−2.5 − −1.0| = 1.5 for prompt 1
L1 = [2, 3, 1]
M2 = [[-3.0, -4.0], [-4.0, -3.0]]


def test_most_sensitive_pair_value_and_order():
    records = [record(0, M0, [1, 1]), record(1, M1, L1, texts=["Q: a|b\nA:", "Q: x\nA:", "Q: y\nA:"],
                                                responses=[" (B) yes", " (C)", " no"]), record(2, M2, [1, 1])]
    assert records[0]["psi"] == records[2]["psi"] == 1.0 and records[1]["psi"] > 1.0
    top = most_sensitive(records, k=2)
    assert [t["set_index"] for t in top] == [1, 0]  # ψ first; the tie of sets 0 and 2 goes to the lower index
    assert [t["set_index"] for t in most_sensitive(list(reversed(records)))] == [1, 0, 2]  # order given is moot
    best = top[0]
    # by hand: prompt 1 scoring response 0 (2 tokens): (log P(y_0 | x_1) − log P(y_0 | x_0)) / 2 = (−4.5 + 0.5) / 2
    assert (best["i"], best["j"]) == (1, 0)
    assert best["logp_i"] == -4.5 and best["logp_j"] == -0.5 and best["length"] == 2
    assert best["normalised_log_ratio"] == pytest.approx(-2.0) and best["term"] == pytest.approx(2.0)
    assert best["prompt_i"] == "Q: x\nA:" and best["prompt_j"] == "Q: a|b\nA:" and best["response_j"] == " (B) yes"
    assert best["kind_i"] == "spelling" and best["kind_j"] == "original"
    assert best["psi"] == records[1]["psi"] and best["set_id"] == "set-1"
    # set 0: both pairs tie at 1.0: the lower i wins
    assert (top[1]["i"], top[1]["j"], top[1]["normalised_log_ratio"]) == (0, 1, -1.0)
    # ψ is the mean of the terms off the diagonal
    assert psi_terms(M1, L1).sum() / 6 == pytest.approx(records[1]["psi"])


def test_empty_response_has_no_term():
    ratios = normalised_log_ratios([[-1.0, -2.0, -1.0], [-9.0, -1.0, -3.0], [-1.0, -2.5, -2.0]], [0, 1, 2])
    assert np.isnan(ratios[:, 0]).all()  # column 0: an empty response, no term
    pair = most_moved_pair([[-1.0, -2.0, -1.0], [-9.0, -1.0, -3.0], [-1.0, -2.5, -2.0]], [0, 1, 2])
    assert (pair["i"], pair["j"], pair["term"]) == (2, 1, 1.5)  # not (1, 0), whose response is empty
    assert most_moved_pair([[-1.0, -2.0], [-3.0, -1.0]], [0, 0]) is None
    top = most_sensitive([record(0, [[-1.0, -2.0], [-3.0, -1.0]], [0, 0], psi_value=0.0)])
    assert top == [{"set_index": 0, "set_id": "set-0", "psi": 0.0, "i": None, "j": None}]


def test_summary_adds_most_sensitive_and_its_markdown(tmp_path):
    records = [record(0, M0, [1, 1]), record(1, M1, L1, texts=["Q: a|b\nA:", "W" * 150 + " x " + "Z" * 150,
                                                                "Q: y\nA:"])]
    summary = build_summary(records, {"model": {"name": "toy"}, "dataset": "d", "variant": "spelling"})
    assert summary["most_sensitive"] == most_sensitive(records)
    # only added: the summary's other values are those of a summary built without it
    assert summary["psi"]["posix"] == pytest.approx((records[0]["psi"] + records[1]["psi"]) / 2)
    write_summary(tmp_path, summary)
    assert json.loads((tmp_path / SUMMARY_FILE).read_text())["most_sensitive"] == summary["most_sensitive"]
    md = (tmp_path / SUMMARY_MD).read_text()
    assert "Most sensitive sets" in md
    row = next(line for line in md.splitlines() if line.startswith("| set-1 |"))
    assert "Q: a\\|b⏎A:" in row  # pipes escaped, line breaks shown
    cut = row.split(" | ")[3]  # x_i: 303 characters, cut to 200 around an ellipsis
    assert len(cut) == 200 and cut.startswith("WWW") and cut.endswith("ZZZ") and " … " in cut
    assert row.split(" | ")[1:3] == [f"{records[1]['psi']:.4f}", "1, 0"]
    assert row.rstrip(" |").endswith("-2.0000")


def write_run(folder, records) -> None:
    folder.mkdir(parents=True)
    (folder / SETS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = build_summary(records, {"model": {"name": "toy-model"}, "dataset": "mmlu", "variant": "spelling",
                                      "shots": 0})
    write_summary(folder, summary)


def test_run_figures_draws_the_highest_psi_set(tmp_path):
    """A saved run whose sets differ in size, one with an empty response: ``run_figures`` reads the records from
    the run folder and draws the highest-ψ set (set 1) as ``set_matrix``."""
    empty = record(2, [[-1.0, -2.0, -1.0], [-9.0, -1.0, -3.0], [-1.0, -2.5, -2.0]], [0, 1, 2], psi_value=0.5)
    run = tmp_path / "run"
    write_run(run, [record(0, M0, [1, 1]), record(1, M1, L1), empty])
    figures = run_figures(load_rows(run), run / "figures")
    assert figures["set_matrix"] == run / "figures" / "set_matrix.png"
    assert (run / "figures" / "set_matrix.png").stat().st_size > 0 and (run / "figures" / "set_matrix.pdf").exists()
    fig = set_matrix_figure(empty, "an empty response")  # its column is blank, not an error
    (ax, _colorbar) = fig.axes
    assert "prompt $x_i$" in ax.get_ylabel() and "response $y_j$" in ax.get_xlabel()


def test_heat_map_values_are_psis_terms():
    fig = set_matrix_figure(record(1, M1, L1), "toy")
    mesh = fig.axes[0].collections[0]
    values = np.ma.filled(mesh.get_array(), np.nan).reshape(3, 3)
    expected = psi_terms(M1, L1)
    np.fill_diagonal(expected, np.nan)  # the diagonal is masked
    np.testing.assert_allclose(values, expected)
    assert math.isclose(np.nanmean(values), record(1, M1, L1)["psi"])


def test_small_results_runs_list_and_draw_where(small_results, tmp_path):
    """Real runs: the summary's list is the records' own, ψ order, and a rebuild gives every other value back."""
    folder = next(p.parent for p in sorted(small_results.rglob(SUMMARY_FILE)) if (p.parent / SETS_FILE).is_file())
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    records = read_sets(folder)
    assert summary["most_sensitive"] == json.loads(json.dumps(most_sensitive(records)))
    assert summary["most_sensitive"][0]["psi"] == max(r["psi"] for r in records)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (SETS_FILE, SUMMARY_FILE):
        (copy / name).write_text((folder / name).read_text())
    rebuilt = json.loads(json.dumps(rebuild_summary(copy)))
    drop = ("engine",)  # the rebuild notes the engine's processed tokens in its metadata
    assert {k: v for k, v in rebuilt.items() if k not in drop} == {k: v for k, v in summary.items() if k not in drop}
    assert "set_matrix" in run_figures(load_rows(copy), tmp_path / "figures")


def test_the_summary_reads_texts_of_its_most_sensitive_sets_alone(small_results, tmp_path):
    """``summary_records`` (what a run, a merge and a rebuild summarise) keeps the prompts' and responses' texts of
    the ``k`` highest-ψ sets only; every other value of the summary is the one from the whole records, in every
    real run of the sweep (template and format cells choose prompts, every cell has answers)."""
    folders = sorted(p.parent for p in small_results.rglob(SUMMARY_FILE) if (p.parent / SETS_FILE).is_file())
    assert len(folders) >= 5
    for folder in folders:
        meta = {k: v for k, v in json.loads((folder / SUMMARY_FILE).read_text()).items()
                if k not in ("psi", "factors", "accuracy", "prompt_choice", "most_sensitive", "psi_reference_compat")}
        whole, light = read_sets(folder), summary_records(folder, k=1)
        top = most_sensitive(whole, k=1)[0]["set_index"]
        assert [r["set_index"] for r in light] == [r["set_index"] for r in whole]
        for kept, record in zip(light, whole):
            assert (kept == record) == (record["set_index"] == top)
            if kept != record:
                assert "exemplars" not in kept and all(set(p) <= {"kind", "index", "record"} for p in kept["prompts"])
                # a format prompt keeps where it shows the options and the gold (position bias), nothing else
                assert all(set(p["record"]) == {"option_order", "gold_position"} for p in kept["prompts"]
                           if "record" in p)
        assert most_sensitive(light, k=1) == most_sensitive(whole, k=1)
        from_light, from_whole = build_summary(light, meta), build_summary(whole, meta)
        from_light["most_sensitive"], from_whole["most_sensitive"] = (from_light["most_sensitive"][:1],
                                                                      from_whole["most_sensitive"][:1])
        assert from_light == from_whole
    # a psi=false run's records (answers, no ψ): nothing is read again, the same answers summary
    answers_only = [{k: v for k, v in r.items() if k not in ("psi", "logprob_matrix", "psi_per_prompt")}
                    for r in read_sets(folders[1])]
    answers_folder = tmp_path / "answers"
    answers_folder.mkdir()
    (answers_folder / SETS_FILE).write_text("".join(json.dumps(r) + "\n" for r in answers_only))
    meta = {"psi_computed": False, "seed": 0}
    assert build_summary(summary_records(answers_folder), meta) == build_summary(answers_only, meta)
    assert build_summary(answers_only, meta)["accuracy"]["by_options"]["accuracy"] is not None


def test_merge_copies_the_shards_lines_in_the_cell_s_order_and_names_a_damaged_line(tmp_path):
    """``posixlab merge`` indexes each shard's lines (unit, file, offset) without keeping their records and writes
    them in the cell's order as the shards wrote them (each shard's file in the engine's order, not the cell's); a
    line that is not a record with its index is named before anything is written."""
    from posixlab.errors import ConfigError
    from posixlab.merge import merge_shards

    records = [record(i, M1 if i == 2 else M0, L1 if i == 2 else [1, 1]) for i in range(4)]
    records[1]["prompts"][0]["text"] = "a\u2028b"  # written as it is: the lines are copied, not re-encoded
    write = lambda rs: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs)  # noqa: E731
    for k in (1, 2):
        folder = tmp_path / f"s{k}"
        folder.mkdir()
        (folder / SETS_FILE).write_text(write([r for r in records if r["set_index"] % 2 == k - 1][::-1]))
        (folder / SUMMARY_FILE).write_text(json.dumps({
            "task": "posix", "config_fingerprint": "f", "model": {"name": "toy"}, "dataset": "d", "variant": "spelling",
            "shots": 0, "shard": {"index": k, "count": 2, "num_units_total": 4}}))
    summary = merge_shards([tmp_path / "s2", tmp_path / "s1"], tmp_path / "out")
    assert (tmp_path / "out" / SETS_FILE).read_text() == write(records)
    assert summary["psi"]["num_sets"] == 4 and summary["most_sensitive"] == most_sensitive(records)
    assert summary["most_sensitive"][0]["set_index"] == 2 and summary["most_sensitive"][0]["prompt_i"]
    with open(tmp_path / "s1" / SETS_FILE, "a") as file:
        file.write('{"psi": 0.5}\n')
    with pytest.raises(ConfigError, match=r"s1/sets.jsonl, line 3: not a record with its set_index"):
        merge_shards([tmp_path / "s1", tmp_path / "s2"], tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
