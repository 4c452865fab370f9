"""``posixlab judge``: a judge model reads a run's responses; which differing ones say the same (posixlab/judge.py)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from posixlab.commands import judge_command
from posixlab.errors import ConfigError
from posixlab.judge import ROWS_FILE, SUMMARY_FILE, conformal_threshold, judge_rows, judge_run, judge_scores, \
    judge_set, judge_summary, judge_warnings, judge_words, parse_verdict, share_interval


def record(responses, psi=1.0, index=0, ids=None):
    """A sets.jsonl record with these responses (texts, None: not asked), token ids where given; prompt i is
    "Task <index>, form i: name a colour."."""
    made = [{"text": None, "asked": False} if t is None else {"text": t} for t in responses]
    for response, token_ids in zip(made, ids or []):
        response["token_ids"] = token_ids
    return {"set_id": f"s{index}", "set_index": index, "variant_type": "template", "psi": psi,
            "prompts": [{"text": f"Task {index}, form {i}: name a colour."} for i in range(len(responses))],
            "responses": made}


def each(one):
    """A judge that answers the chats it is asked together one by one with ``one(messages)``."""
    return lambda chats: [one(messages) for messages in chats]


def scripted_judge(replies: dict):
    """A judge that answers by the second response shown to it (``replies``), and records what it was asked."""
    asked = []

    def ask(messages):
        content = messages[-1]["content"]
        asked.append(content)
        second = content.split("Response B:\n", 1)[1].split("\n\nThe two prompts", 1)[0]
        return replies[second]

    return each(ask), asked


def test_verdicts_and_shares_by_hand():
    """Five variants: one identical (not asked), two judged the same, one not, one unparsed, one not asked by the
    run. identical 1/5, judged (1 + 2) / 4 (the unparsed left out), 4 asked, and the control: a decoy response
    under the original prompt, judged different. Each response is shown beside the prompt it answers."""
    ask, asked = scripted_judge({"Blue.": "Yes", "It is blue": "yes, the same", "Red": "No", "Hmm": "Maybe",
                                 "Paris": "No"})
    row = judge_set(record(["blue", " blue\n", "Blue.", "It is blue", "Red", "Hmm", None]), ask, decoy="Paris")
    assert [(v["prompt"], v["identical"], v["equivalent"]) for v in row["verdicts"]] == [
        (1, True, True), (2, False, True), (3, False, True), (4, False, False), (5, False, None)]
    assert row["identical_share"] == 0.2 and row["judged_share"] == 0.75 and row["unparsed"] == 1
    assert row["asked"] == len(asked) == 5 and row["control"] == {"replies": ["No"], "equivalent": False,
                                                                  "p_same": None}
    assert all(a.startswith("Prompt A:\nTask 0, form 0: name a colour.\n\nResponse A:\nblue\n\n") for a in asked)
    assert "Prompt B:\nTask 0, form 3: name a colour.\n\nResponse B:\nIt is blue\n\n" in asked[1]
    assert "Prompt B:\nTask 0, form 0: name a colour.\n\nResponse B:\nParis\n\n" in asked[-1]
    assert row["verdicts"][2]["replies"] == ["yes, the same"] and row["verdicts"][0]["replies"] == []


def test_token_ids_decide_identity_where_the_run_kept_them():
    """The same text from different token ids is two responses to ψ, so the judge is asked about it."""
    ask, asked = scripted_judge({"ab": "Yes"})
    row = judge_set(record(["ab", "ab"], ids=[[1, 2], [3]]), ask)
    assert row["verdicts"][0]["identical"] is False and row["judged_share"] == 1.0 and len(asked) == 1


def test_both_orders_needs_two_yeses():
    """The pair asked both ways: a judge that says yes only with the original first does not make it the same."""
    def first_only(messages):
        return "Yes" if "Response A:\nblue" in messages[-1]["content"] else "No"

    assert judge_set(record(["blue", "cyan"]), each(first_only))["judged_share"] == 1.0
    both = judge_set(record(["blue", "cyan"]), each(first_only), both_orders=True)
    assert both["judged_share"] == 0.0 and both["asked"] == 2
    assert both["verdicts"][0]["replies"] == ["Yes", "No"]


def test_a_sets_requests_are_asked_together():
    """The judge gets a set's chats in one call, the variants' then the control's, each showing the original first
    (so a backend can share that prefix, or send them at once); with both orders, a second call turns them all."""
    calls = []

    def ask(chats):
        calls.append([m[-1]["content"].split("Response B:\n", 1)[1].split("\n", 1)[0] for m in chats])
        return ["Yes"] * len(chats)

    judge_set(record(["a", "a", "b", "c"]), ask, decoy="d")
    assert calls == [["b", "c", "d"]]
    calls.clear()
    row = judge_set(record(["a", "a", "b", "c"]), ask, decoy="d", both_orders=True)
    assert calls == [["b", "c", "d"], ["a", "a", "a"]] and row["asked"] == 6
    calls.clear()
    assert judge_set(record(["a", "a"]), ask)["asked"] == 0 and calls == []  # nothing to ask: the judge is not called


def test_a_judge_behind_a_server_gets_its_requests_concurrently(tmp_path, capsys):
    """``--base-url``: a server that holds each request until its pool is in sees ``--max-concurrency`` in flight, never
    more: 4, and 16, more than one set's 10 requests (the sets are asked together); every verdict lands in its set.
    The same judge at another concurrency is the same judge: a rerun reuses every verdict and sends nothing."""
    from chat_server import ChatServer, InFlight, completion

    in_flight = InFlight()

    def answer(body, n):
        with in_flight:
            in_flight.hold(most)
        second = body["messages"][-1]["content"].split("Response B:\n", 1)[1].split("\n", 1)[0]
        return 200, {}, completion("Yes" if second.startswith("same") else "No")

    sets = [record([f"x{i}"] + [f"same {k}" for k in range(5 + i)] + [f"other {k}" for k in range(4 - i)], index=i)
            for i in range(2)]  # set i: 5 + i variants the judge calls the same
    (tmp_path / "sets.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sets))
    with ChatServer(answer) as server:
        command = [str(tmp_path), "--judge", "judge-model", "--base-url", server.base_url,
                   "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json"]
        for most, out in ((4, "four"), (16, "sixteen")):
            in_flight.most = 0
            assert judge_command(command + ["--max-concurrency", str(most), "--out", str(tmp_path / out)]) == 0
            assert in_flight.most == most  # 9 variants and a decoy a set
            summary = json.loads(capsys.readouterr().out)
            assert summary["judged_share"] == pytest.approx(11 / 18, abs=2e-6) and summary["control_judged_same"] == 0
            rows = [json.loads(line) for line in (tmp_path / out / ROWS_FILE).read_text().splitlines()]
            assert [r["set_index"] for r in rows] == [0, 1] and all(r["asked"] == 10 for r in rows)
            assert [[v["equivalent"] for v in r["verdicts"]] for r in rows] == [[True] * (5 + i) + [False] * (4 - i)
                                                                               for i in range(2)]
        assert server.requests == 2 * 2 * 10
        assert judge_command(command + ["--max-concurrency", "2", "--out", str(tmp_path / "four")]) == 0
        assert server.requests == 40
    assert json.loads(capsys.readouterr().out)["judged_share"] == pytest.approx(11 / 18, abs=2e-6)


def test_more_decoys_a_set_and_the_key_of_one(tmp_path, capsys):
    """``decoy`` as a list: each distinct decoy other than the set's own response is a control (the first's verdict
    ``control``, the others ``more_controls``), and all count, as controls and as decoy scores. ``--decoys 3`` on
    four sets: the next three sets' originals (wrapping round), 12 controls. One decoy a set keeps the key every
    judge had before the setting; three is another judge on that file."""
    import hashlib

    from chat_server import ChatServer, completion

    from posixlab.commands import judge_spec
    from posixlab.judge import INSTRUCTION, REPLY_TOKENS, JudgeSettings, _judge_fields

    ask, asked = scripted_judge({"b": ("Yes", 0.9), "P": ("No", 0.1), "Q": ("Yes", 0.6)})
    row = judge_set(record(["a", "b"]), ask, decoy=["P", "a", "Q", "P", None])
    assert row["control"]["equivalent"] is False and [c["equivalent"] for c in row["more_controls"]] == [True]
    assert row["asked"] == 3 and judge_summary([row])["controls"] == 2
    assert judge_summary([row])["control_judged_same"] == 0.5
    # both decoys calibrate: at α = 0.5 the ⌈3 × 0.5⌉ = 2nd smallest of (0.1, 0.6) is the threshold
    assert judge_scores([row], alpha=0.5)["decoys"] == 2 and judge_scores([row], alpha=0.5)["threshold"] == 0.6

    def answer(body, n):
        return 200, {}, completion("No")

    sets = [record([f"x{i}", f"y{i}"], index=i) for i in range(4)]
    (tmp_path / "sets.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sets))
    with ChatServer(answer) as server:
        command = [str(tmp_path), "--judge", "judge-model", "--base-url", server.base_url,
                   "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json", "--max-concurrency", "1"]
        assert judge_command(command + ["--decoys", "3"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["controls"] == 12 and summary["asked"] == 4 * 4 and summary["judge"]["decoys"] == 3
        assert summary["scores"] is None  # the scripted server sends no log-probabilities
        rows = [json.loads(line) for line in (tmp_path / ROWS_FILE).read_text().splitlines()]
        shown = [[c.split("Response B:\n", 1)[1].split("\n", 1)[0] for c in (b["messages"][-1]["content"]
                                                                         for b in server.bodies[k * 4 + 1:k * 4 + 4])]
                 for k in range(4)]
        assert shown[3] == ["x0", "x1", "x2"] and all(len(r["more_controls"]) == 2 for r in rows)
        assert judge_command(command + ["--decoys", "0"]) == 2 and "at least 1 a set" in capsys.readouterr().err
        (tmp_path / "a_file").write_text("")  # --out where a file is: said before any request
        asked = server.requests
        assert judge_command(command + ["--out", str(tmp_path / "a_file")]) == 2 and server.requests == asked
        assert f"{tmp_path / 'a_file'} is a file, not a folder: the judge's verdicts cannot go in" in \
            capsys.readouterr().err
        assert judge_command(command) == 2 and "another judge's verdicts" in capsys.readouterr().err
    model = _judge_fields(judge_spec("judge-model", server.base_url, "POSIXLAB_TEST_NO_KEY"))
    before = {"model": model, "instruction": INSTRUCTION, "both_orders": False, "reply_tokens": REPLY_TOKENS}
    assert JudgeSettings(model).key == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    assert JudgeSettings(model, decoys=3).key != JudgeSettings(model).key


def test_verdicts_on_file_are_reused_only_for_the_responses_they_judged(tmp_path, capsys):
    """The run is run again in its folder and one set's response changes (sets.jsonl is rewritten; judge.jsonl is
    not): that set is judged again, on its new response, and the other's verdicts are reused; a row written before
    rows had a digest is taken as it is."""
    from chat_server import ChatServer, completion

    def answer(body, n):
        second = body["messages"][-1]["content"].split("Response B:\n", 1)[1].split("\n", 1)[0]
        return 200, {}, completion("Yes" if second.startswith("same") else "No")

    def write(sets):
        (tmp_path / "sets.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sets))

    write([record(["x0", "same 0", "other 0"], index=0), record(["x1", "same 1", "other 1"], index=1)])
    with ChatServer(answer) as server:
        command = [str(tmp_path), "--judge", "judge-model", "--base-url", server.base_url,
                   "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json", "--max-concurrency", "1"]
        assert judge_command(command) == 0 and server.requests == 2 * 3  # two variants and a decoy a set
        assert json.loads(capsys.readouterr().out)["judged_share"] == 0.5
        assert judge_command(command) == 0 and server.requests == 6  # nothing changed: nothing asked
        write([record(["x0", "same 0", "other 0"], index=0), record(["x1", "same 1", "same again"], index=1)])
        capsys.readouterr()
        assert judge_command(command) == 0 and server.requests == 9  # set 1 again; set 0's decoy (x1) is the same
        out = capsys.readouterr()
        assert "1 set(s)" in out.err and "judged again" in out.err
        rows = [json.loads(line) for line in (tmp_path / ROWS_FILE).read_text().splitlines()]
        assert [r["set_index"] for r in rows] == [0, 1, 1]
        assert [v["equivalent"] for v in rows[-1]["verdicts"]] == [True, True]
        assert json.loads(out.out)["judged_share"] == 0.75
        del rows[0]["judged"]  # a row from before digests: reused, not asked again
        (tmp_path / ROWS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert judge_command(command) == 0 and server.requests == 9


def test_a_sweep_folder_is_judged_cell_by_cell_with_the_judge_opened_once(tmp_path, capsys):
    """``posixlab judge SWEEP_DIR``: each POSIX cell (in the sweep's order: 2 before 10) judged into its own folder,
    the judge opened once for all; ``--json`` prints a list; ``--out`` with several cells is refused."""
    from chat_server import ChatServer, completion

    def answer(body, n):
        return 200, {}, completion("Yes")

    sweep = tmp_path / "sweep"
    for name, responses in (("10_b", ["x", "y"]), ("2_a", ["x", "x", "z"])):
        (sweep / name).mkdir(parents=True)
        (sweep / name / "sets.jsonl").write_text(json.dumps(record(responses)) + "\n")
    with ChatServer(answer) as server:
        command = [str(sweep), "--judge", "judge-model", "--base-url", server.base_url,
                   "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json"]
        assert judge_command(command) == 0
        out = capsys.readouterr()
        summaries = json.loads(out.out)
        assert [s["run"] for s in summaries] == [str(sweep / "2_a"), str(sweep / "10_b")]
        assert [s["judged_share"] for s in summaries] == [1.0, 1.0] and server.requests == 2  # one set: no decoy
        assert out.err.count("posixlab: opening the judge") == 1
        assert all((sweep / name / SUMMARY_FILE).is_file() for name in ("2_a", "10_b"))
        assert judge_command(command + ["--out", str(tmp_path / "elsewhere")]) == 2
        assert "--out with a sweep (2 POSIX runs" in capsys.readouterr().err


def test_a_sweep_s_run_that_cannot_be_judged_fails_alone_and_a_dead_judge_stops_at_once(tmp_path, capsys):
    """Of a sweep, a run whose folder cannot be judged (here no finished set) is named, the others are judged, and
    the command exits 2 at the end, as a sweep's failed cell fails alone; a judge that cannot be reached stops the
    command at its first cell (every cell would fail the same way), said once."""
    import socket

    from chat_server import ChatServer, completion

    sweep = tmp_path / "sweep"
    for name, lines in (("0_a", [record(["x", "y"])]), ("1_b", []), ("2_c", [record(["x", "x", "z"])])):
        (sweep / name).mkdir(parents=True)
        (sweep / name / "sets.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ChatServer(lambda body, n: (200, {}, completion("Yes"))) as server:
        command = [str(sweep), "--judge", "judge-model", "--base-url", server.base_url,
                   "--api-key-env", "POSIXLAB_TEST_NO_KEY"]
        assert judge_command(command) == 2
    said = capsys.readouterr()
    assert "posixlab judge: 1_b not judged:" in said.err and "holds no finished prompt set" in said.err
    assert "posixlab error: 1 of 3 runs not judged: 1_b" in said.err
    assert all((sweep / name / SUMMARY_FILE).is_file() for name in ("0_a", "2_c"))
    assert not (sweep / "1_b" / SUMMARY_FILE).exists() and said.out.count("judge judge-model: ") == 2
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    (sweep / "0_a" / SUMMARY_FILE).unlink()
    (sweep / "0_a" / ROWS_FILE).unlink()
    assert judge_command([*command[:4], dead, *command[5:]]) == 2
    said = capsys.readouterr().err
    assert said.count("posixlab error:") == 1 and "not judged" not in said, said
    assert not (sweep / "0_a" / SUMMARY_FILE).exists()


def test_progress_lines_print_a_plain_line_a_wave_and_no_bar(tmp_path, capsys):
    """``progress="lines"`` (a run's ``progress=lines``: sweeps, cluster logs): no bar, a plain line after each wave
    of sets, the last one counting them all; ``progress=False``: quiet."""
    import re

    from chat_server import ChatServer, completion

    from posixlab.commands import judge_spec

    (tmp_path / "sets.jsonl").write_text("".join(json.dumps(record(["x", f"y{i}"], index=i)) + "\n"
                                                 for i in range(3)))
    with ChatServer(lambda body, n: (200, {}, completion("No"))) as server:
        spec = judge_spec("judge-model", server.base_url, "POSIXLAB_TEST_NO_KEY", max_concurrency=1)
        judge_run(tmp_path, spec, out=tmp_path / "lines", progress="lines")
        err = capsys.readouterr().err
        judge_run(tmp_path, spec, out=tmp_path / "quiet", progress=False)
        assert "judging" not in capsys.readouterr().err
    shown = [line for line in err.splitlines() if "judging with" in line]
    assert shown and all(re.fullmatch(r"posixlab: judging with judge-model: \d/3 sets, \d+ s", line) for line in shown)
    assert shown[-1].startswith("posixlab: judging with judge-model: 3/3 sets") and "\r" not in err


def test_summary_by_hand_and_spearman_against_scipy():
    from scipy.stats import spearmanr

    ask, _ = scripted_judge({"b": "Yes", "c": "No"})
    rows = [judge_set(record(r, psi=p, index=i), ask) for i, (r, p) in enumerate(
        [(["a", "a", "a"], 0.1), (["a", "b", "a"], 0.4), (["a", "b", "c"], 0.9), (["a", "c", "c"], 1.5)])]
    # per set: identical 1, 1/2, 0, 0; judged 1, 1, 1/2, 0; judged away 0, 1/2, 1/2, 0; of the five differing
    # responses (b; b, c; c, c) two judged the same
    summary = judge_summary(rows)
    assert summary["identical_share"] == 0.375 and summary["judged_share"] == 0.625
    assert summary["judged_away"] == 0.25 and summary["differing_judged_same"] == 0.4
    assert summary["asked"] == 5 and summary["variants"] == 8 and summary["psi"] == 0.725
    assert summary["controls"] == 0 and summary["control_judged_same"] is None
    expected = spearmanr([0.1, 0.4, 0.9, 1.5], [0.0, 0.0, 0.5, 1.0])
    assert summary["spearman"] == {"rho": round(expected.statistic, 6), "p_value": round(expected.pvalue, 6),
                                   "sets": 4}
    assert summary["spearman"]["rho"] == pytest.approx(0.948683, abs=1e-6)  # ranks 1.5,1.5,3,4 against 1,2,3,4
    assert summary["differing"] == 5
    # the judged share's interval: the expanded bootstrap over the 4 sets' shares (1, 1, 1/2, 0), against the exact
    # bootstrap distribution (all 4⁴ resamples, equally likely) read at the expanded interval's tails
    import itertools

    from scipy.stats import norm, t

    assert summary["judged_share_ci95"] == share_interval([1.0, 1.0, 0.5, 0.0])
    # four sets: the t interval (the expanded tail lies beyond the resamples' reach), 0.625 ± 3.182446 · 0.478714 /
    # √4 = -0.136740 to 1.386740 by hand, held to the share's range
    assert share_interval([1.0, 1.0, 0.5, 0.0]) == [0.0, 1.0]
    for shares in ([1.0, 1.0, 0.5, 0.0, 0.75], [1.0, 1.0, 0.5, 0.0, 0.75, 0.25, 1.0]):
        n = len(shares)
        tail = norm.cdf(-np.sqrt(n / (n - 1)) * t.ppf(0.975, n - 1))
        exact = [np.mean(draw) for draw in itertools.product(shares, repeat=n)]
        lo, hi = share_interval(shares)
        assert lo <= np.mean(shares) <= hi
        assert (lo, hi) == pytest.approx((np.quantile(exact, tail), np.quantile(exact, 1 - tail)), abs=0.02)


def test_the_judge_checked_against_the_runs_answer_parser():
    """Where the run read options from the responses, the judge's verdicts are checked against it: the original
    reads B; variants read B, B, C and one unread. The judge says yes to "b" only: agreement 2 of 3 (b: same and
    judged same; C: different and judged different; "(B) Paris": same but judged different)."""
    ask, _ = scripted_judge({"b": "Yes", "(B) Paris": "No", "C": "No", "???": "No"})
    made = record(["B", "b", "(B) Paris", "C", "???"])
    made["answers"] = [{"by_greedy": {"pred": p}} for p in ("B", "B", "B", "C", None)]
    row = judge_set(made, ask)
    assert [v["parser_same"] for v in row["verdicts"]] == [True, True, False, None]
    summary = judge_summary([row])
    assert summary["parser_checked"] == 3 and summary["parser_agreement"] == 0.666667
    assert summary["parser_same_judged_same"] == 0.5 and summary["parser_different_judged_different"] == 1.0
    assert judge_warnings(summary) == []


def test_a_judge_that_says_yes_to_everything_is_called_out():
    """A yes-sayer: every decoy judged the same, every pair the parser reads as different options judged the same.
    Its judged consistency is 1.0, and the warnings say why that means nothing."""
    rows = []
    for index in range(4):
        made = record(["B", "b", "C", "D"], index=index)
        made["answers"] = [{"by_greedy": {"pred": p}} for p in ("B", "B", "C", "D")]
        rows.append(judge_set(made, each(lambda messages: "Yes"), decoy=f"decoy {index}"))
    summary = judge_summary(rows)
    assert summary["judged_share"] == 1.0 and summary["control_judged_same"] == 1.0
    assert summary["parser_different_judged_different"] == 0.0 and summary["parser_same_judged_same"] == 1.0
    assert judge_warnings(summary) == [
        "the judge calls another question's response the same in 4 of 4 controls: it says yes regardless",
        "different options, by the parser, judged different in 0 of 8 pairs: the judge misreads them"]


def brute_auc(higher, lower):
    return sum((h > w) + 0.5 * (h == w) for h in higher for w in lower) / (len(higher) * len(lower))


def test_scores_calibrated_on_the_decoys_by_hand():
    """A judge that says yes to everything, but whose P(yes) ranks the pairs: 19 sets, each one differing response
    scored i/18 and a decoy scored (i + 1)/20. The threshold is the 19th smallest of the 19 decoys, 0.95; only the
    pair scored 18/18 is above it, so the calibrated judged share is 1/19 where the words say 1. The AUCs against a
    brute-force count; the scores of both orders: the lower one."""
    rows = []
    for i in range(19):
        def ask(messages, i=i):
            decoy = f"decoy {i}" in messages[-1]["content"]
            return "Yes", (i + 1) / 20 if decoy else i / 18

        rows.append(judge_set(record([f"answer {i}", f"other {i}"], index=i), each(ask), decoy=f"decoy {i}"))
    assert judge_summary(rows)["judged_share"] == 1.0 and judge_summary(rows)["control_judged_same"] == 1.0
    scores = judge_scores(rows)
    assert scores["threshold"] == 0.95 and scores["decoys"] == 19 and scores["scored"] == 19
    assert scores["decoy_auc"] == round(brute_auc([i / 18 for i in range(19)], [(i + 1) / 20 for i in range(19)]), 6)
    assert scores["calibrated"]["judged_share"] == scores["calibrated"]["differing_judged_same"] == round(1 / 19, 6)
    assert scores["parser_auc"] is None and scores["calibrated"]["parser_same_judged_same"] is None
    assert ("calibration: P(yes) above", "0.95 (19 decoys, α = 0.05)") in judge_rows(
        {**judge_summary(rows), "scores": scores})

    # 18 decoys cannot promise 5 %: no calibrated verdicts, and the table says how many it needs
    short = judge_scores(rows[:18])
    assert short["threshold"] is None and short["calibrated"] is None and short["decoy_auc"] is not None
    assert judge_rows({**judge_summary(rows[:18]), "scores": short})[-1] == \
        ("calibrated verdicts", "n/a: 18 decoys, 19 needed at α = 0.05 (more sets, or --decoys)")

    # both orders: the pair's score is the lower of its two; a reply without a score leaves the pair unscored
    answers = iter([("Yes", 0.9), ("Yes", 0.4), ("No", None)])
    row = judge_set(record(["a", "b", "c"]), each(lambda m: next(answers)), both_orders=False, decoy=None)
    assert [v["p_same"] for v in row["verdicts"]] == [0.9, 0.4]
    answers = iter([("Yes", 0.9), ("Yes", 0.7), ("Yes", 0.4), ("No", None)])  # b and c, then both turned
    row = judge_set(record(["a", "b", "c"]), each(lambda m: next(answers)), both_orders=True)
    assert [v["p_same"] for v in row["verdicts"]] == [0.4, None]
    assert judge_scores([row])["unscored"] == 1 and judge_scores([record_row_unscored()]) is None


def record_row_unscored():
    return judge_set(record(["a", "b"]), each(lambda m: "Yes"))


def test_the_parser_auc_and_calibrated_parser_check_by_hand():
    """Pairs the parser reads as one option scored 0.9, 0.8 and 0.3; as different options, 0.3 and 0.1: AUC
    (2 + 2 + 1.5) / 6 (0.3 ties one and beats the other). Calibrated at α = 0.25 on three decoys (0.2, 0.5, 0.6:
    threshold 0.6): the same-option pairs judged the same 2/3, the different-option ones judged different 2/2."""
    verdicts = [{"identical": False, "equivalent": True, "p_same": p, "parser_same": same}
                for p, same in ((0.9, True), (0.8, True), (0.3, True), (0.3, False), (0.1, False))]
    rows = [{"psi": 0.5, "identical_share": 0.0, "judged_share": 1.0, "unparsed": 0, "asked": 6,
             "verdicts": verdicts[:3], "control": {"equivalent": True, "p_same": 0.2}},
            {"psi": 0.7, "identical_share": 0.0, "judged_share": 1.0, "unparsed": 0, "asked": 6,
             "verdicts": verdicts[3:], "control": {"equivalent": True, "p_same": 0.5}},
            {"psi": 0.1, "identical_share": 1.0, "judged_share": 1.0, "unparsed": 0, "asked": 1,
             "verdicts": [{"identical": True, "equivalent": True}], "control": {"equivalent": True, "p_same": 0.6}}]
    scores = judge_scores(rows, alpha=0.25)
    assert scores["parser_auc"] == round(5.5 / 6, 6) == round(brute_auc([0.9, 0.8, 0.3], [0.3, 0.1]), 6)
    assert scores["threshold"] == 0.6 and scores["calibrated"]["parser_same_judged_same"] == round(2 / 3, 6)
    assert scores["calibrated"]["parser_different_judged_different"] == 1.0
    # judged shares per set (2/3, 0/2, identical 1/1), their mean; judged away: 2/3, 0, 0
    assert scores["calibrated"]["judged_share"] == round((2 / 3 + 0 + 1) / 3, 6)
    assert scores["calibrated"]["judged_away"] == round((2 / 3) / 3, 6)


def test_the_conformal_threshold_keeps_its_promise():
    """Scores of unrelated responses, exchangeable with the decoys': the share called the same is α's promise,
    (n + 1 − k)/(n + 1) = 1/20 for 19 decoys and 2/40 for 39, measured over 4,000 draws each (sd 0.0034); an
    off-by-one (the k-1-th decoy) would give 2/20 and 3/40."""
    import random

    draw = random.Random(0)
    for n in (19, 39):
        above = 0
        for _ in range(4000):
            decoys = [draw.random() for _ in range(n)]
            above += draw.random() > conformal_threshold(decoys, 0.05)
        assert 0.038 < above / 4000 < 0.062, (n, above)


def test_parse_verdict_reads_the_first_word_only():
    assert [parse_verdict(r) for r in ("YES", "no.", "'Yes'", "Yesterday", "", "The answer is yes")] == \
        [True, False, True, None, None, None]


def test_bad_input_fails_before_any_model_loads(tmp_path, capsys):
    """No sets.jsonl, an instruction without its placeholders, --sets 0, a judge without a chat template (read from
    its tokenizer): exit 2 with what to do, nothing loaded."""
    started = time.monotonic()
    assert judge_command([str(tmp_path)]) == 2
    assert "posixlab judge reads a POSIX run's folder" in capsys.readouterr().err
    (tmp_path / "sets.jsonl").write_text(json.dumps(record(["a", "b"])) + "\n")
    instruction = tmp_path / "instruction.txt"
    instruction.write_text("Same? {first} {second}")
    assert judge_command([str(tmp_path), "--instruction", str(instruction)]) == 2
    assert "it lacks {first_prompt}, {second_prompt}" in capsys.readouterr().err
    assert judge_command([str(tmp_path), "--sets", "0"]) == 2
    assert "--sets must be at least 1" in capsys.readouterr().err
    assert judge_command([str(tmp_path), "--max-concurrency", "0"]) == 2
    assert "--max-concurrency must be at least 1" in capsys.readouterr().err
    assert judge_command([str(tmp_path), "--alpha", "1.5"]) == 2
    assert "alpha is the calibrated verdicts' rate" in capsys.readouterr().err
    assert judge_command([str(tmp_path), "--judge", "no-such-model"]) == 2
    named = capsys.readouterr().err  # and an API's model needs its endpoint's address
    assert "is not a packaged model" in named and named.endswith("--judge MODEL --base-url URL, or "
                                                                 "result.judge(MODEL, base_url=URL)\n")
    from hub_fixtures import build_model_repo

    build_model_repo(tmp_path / "base", ["a base model's tokenizer has no chat template"] * 20)
    assert judge_command([str(tmp_path), "--judge", str(tmp_path / "base")]) == 2
    assert "has no chat template (a base model, say), and it is asked chats here" in capsys.readouterr().err
    assert time.monotonic() - started < 30 and not (tmp_path / ROWS_FILE).exists()


def test_another_judges_verdicts_are_never_mixed(tmp_path):
    from posixlab.models import ModelSpec

    (tmp_path / "sets.jsonl").write_text(json.dumps(record(["a", "a"])) + "\n")
    (tmp_path / ROWS_FILE).write_text(json.dumps({"key": "0123456789abcdef", "set_id": "s0"}) + "\n")
    with pytest.raises(ConfigError, match="holds another judge's verdicts"):
        judge_run(tmp_path, ModelSpec("m", "packaged", "m"), progress=False)


@pytest.mark.slow
def test_judge_a_real_run_with_the_packaged_model_then_resume(lm, small_results, tmp_path):
    """The Alpaca template cell of a real run, judged in this process into the run's folder; the rerun asks nothing
    and opens no model. Every number comes back from the verdicts on file, ψ from the run's records, and the run's
    report page shows the judge's section."""
    import shutil

    from conftest import lm_spec

    from posixlab.report.build import build_report
    from posixlab.results import read_sets

    run = shutil.copytree(next(small_results.glob("*_alpaca_template_0shot")), tmp_path / "run")
    first = judge_run(run, lm_spec(), lm=lm, progress=False)
    rows = [json.loads(line) for line in (run / ROWS_FILE).read_text().splitlines()]
    records = read_sets(run)
    assert [r["set_id"] for r in rows] == [r["set_id"] for r in records] and first["sets"] == first["sets_in_run"] == 4
    assert [r["psi"] for r in rows] == [r["psi"] for r in records]
    assert first["variants"] == sum(len(r["responses"]) - 1 for r in records) == 12
    differing = [v for r in rows for v in r["verdicts"] if not v["identical"]]
    assert first["asked"] == len(differing) + sum(r["control"] is not None for r in rows)
    assert differing and all(len(v["replies"]) == 1 for v in differing)
    controls = [r["control"] for r in rows]  # each set's decoy: the next set's original response
    assert first["controls"] == sum(c is not None and c["equivalent"] is not None for c in controls)
    assert first["judge"]["identity"]["name"] == "smollm2-135m-instruct"
    scored = differing + [c for c in controls if c is not None]  # in this process every pair has its P(yes)
    assert all(0 <= v["p_same"] <= 1 for v in scored) and first["scores"]["scored"] == len(differing)
    assert first["scores"]["decoys"] == len(scored) - len(differing) and first["scores"]["threshold"] is None
    assert first == json.loads((run / SUMMARY_FILE).read_text())

    again = judge_run(run, lm_spec(), progress=False)  # no lm: it would load one if it asked
    assert again["judge"]["identity"] is None and {k: v for k, v in again.items() if k != "judge"} == \
        {k: v for k, v in first.items() if k != "judge"}
    assert len((run / ROWS_FILE).read_text().splitlines()) == 4

    page = build_report([run], tmp_path / "report.html").read_text()
    assert 'id="judged"' in page and "judge smollm2-135m-instruct: 4 of 4 sets, 12 variant responses" in page
    identical = "n/a" if again["identical_share"] is None else f"{again['identical_share']:.3f}"
    assert f"identical to the original&#x27;s response</td><td>{identical}</td>" in page.replace("'", "&#x27;")


@pytest.mark.slow
def test_a_run_that_ends_with_a_judge(llama_server, tmp_path):
    """``judge.model=... judge.base_url=...`` on the command line: the run, then the judge (llama.cpp's real server)
    on its folder in the same job: the judge's line under the run's, judge.jsonl and judge.json beside sets.jsonl,
    the page's judge section, the judge's numbers in the run's own W&B run (``judge/``), and the verdicts are
    ``posixlab judge``'s: the command on the folder afterwards asks nothing and gives the same numbers."""
    import os
    import subprocess
    import sys

    from conftest import LLAMA_MODEL, ROOT

    from posixlab.tracking import offline_run_dirs, read_offline_run

    out = tmp_path / "run"
    judge = [f"judge.model={LLAMA_MODEL}", f"judge.base_url={llama_server}", "judge.api_key_env=POSIXLAB_TEST_NO_KEY"]
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "task.num_sets=2", "task.num_variants=3",
                           "embedding=none", "progress=false", *judge, f"hydra.run.dir={out}",
                           f"score_cache_dir={tmp_path / 'scores'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    lines = proc.stdout.splitlines()
    assert lines[lines.index(next(line for line in lines if line.startswith("judged the same"))) - 1].startswith(
        "accuracy (greedy)")  # under the run's result lines
    assert summary["sets"] == 2 and summary["judge"]["identity"]["base_url"] == llama_server
    assert f"judged the same {summary['judged_share']:.3f}" in proc.stdout
    assert 'id="judged"' in (out / "report.html").read_text(encoding="utf-8")
    (run_dir,) = offline_run_dirs(out)
    logged = {}
    for record in read_offline_run(run_dir):
        if record.WhichOneof("record_type") == "summary":
            logged.update({item.key: json.loads(item.value_json) for item in record.summary.update if item.key})
    assert logged["judge/judged_share"] == summary["judged_share"] and "posix" in logged
    rows = (out / ROWS_FILE).read_text()
    assert judge_command([str(out), "--judge", LLAMA_MODEL, "--base-url", llama_server,
                          "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json"]) == 0
    assert (out / ROWS_FILE).read_text() == rows  # nothing asked again
    assert json.loads((out / SUMMARY_FILE).read_text())["judged_share"] == summary["judged_share"]


@pytest.mark.slow
def test_a_run_whose_judge_is_down_keeps_the_run_and_says_so_once(tmp_path, capsys):
    """``judge.base_url`` where nothing listens: the run's results, result lines and page are written, then one
    error naming the judge's endpoint and the setting to fix, exit 2; ``posixlab status`` shows the run done and
    why its job then stopped."""
    import os
    import subprocess
    import sys

    from chat_server import free_port
    from conftest import ROOT

    out, url = tmp_path / "run", f"http://127.0.0.1:{free_port()}/v1"
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "task.num_sets=2", "task.num_variants=3",
                           "embedding=none", "progress=false", "logger=none", "judge.model=judge-model",
                           f"judge.base_url={url}", "judge.api_key_env=POSIXLAB_TEST_NO_KEY", f"hydra.run.dir={out}",
                           f"score_cache_dir={tmp_path / 'scores'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "POSIX = " in proc.stdout and (out / "summary.json").is_file() and (out / "report.html").is_file()
    assert proc.stderr.count("posixlab error:") == 1 and "judge" in proc.stderr.split("posixlab error:")[1]
    assert url.removesuffix("/v1") in proc.stderr and not (out / SUMMARY_FILE).exists()
    assert "fix judge.base_url" in proc.stderr and "posixlab judge RUN_DIR" in proc.stderr
    assert "Traceback" not in proc.stderr
    from posixlab.status import status_command

    status_command([str(out)])
    assert "judge" in capsys.readouterr().out.split("posixlab error:")[1]


@pytest.mark.slow
def test_the_judges_first_tokens_are_the_models_next_token_distribution(lm):
    """In this process P(yes) comes from ``generate``'s first-step logits. A set's chats go together: their common
    prefix (the original's prompt and response) runs once and each chat continues from its keys and values. Each
    chat's 20 likeliest tokens and log-probabilities are a plain forward pass's over that chat alone (to 1e-4), its
    reply is ``sample_chat``'s greedy one, and the same batch gives the same numbers again, bit for bit."""
    import torch

    from posixlab.judge import TOP_TOKENS, first_token_odds, judge_messages
    from posixlab.models.sampling import SHARED_AT_LEAST, _chat_ids, _shared_length, replies_and_first_tokens, \
        sample_chat
    from posixlab.openai_client import Generation

    original = ("What is 2+2? Answer with the number alone, then explain it in one short sentence.", "4")
    chats = [judge_messages(original, other) for other in (("What is two plus two?", "Four."),
                                                           ("Compute 2 + 2.", "5"), ("What's 2+2?", "4, of course"))]
    assert _shared_length([_chat_ids(lm, m)[0] for m in chats]) >= SHARED_AT_LEAST  # the shared prefix is used
    answers = replies_and_first_tokens(lm, chats, Generation(4), TOP_TOKENS)
    assert answers == replies_and_first_tokens(lm, chats, Generation(4), TOP_TOKENS)
    for messages, (reply, tokens) in zip(chats, answers):
        assert reply == sample_chat(lm, messages, Generation(4))[0]
        text = lm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        with torch.inference_mode():
            logits = lm.model(torch.tensor([lm.encode(text, add_special_tokens=False)], device=lm.device)).logits
        values, indices = torch.log_softmax(logits[0, -1].float(), dim=-1).topk(TOP_TOKENS)
        assert [t for t, _ in tokens] == [lm.tokenizer.decode([i]) for i in indices.tolist()]
        assert max(abs(a - b) for (_, a), b in zip(tokens, values.tolist())) < 1e-4
        assert 0 < first_token_odds(tokens) < 1


@pytest.mark.slow
def test_judge_through_a_chat_api_on_loopback(llama_server, small_results, tmp_path, capsys):
    """``posixlab judge --base-url``: llama.cpp's real server answers as the judge; the MMLU template cell's first
    set, both orders. Its replies are read (Qwen2.5-Coder-0.5B answers Yes or No)."""
    from conftest import LLAMA_MODEL

    run = next(small_results.glob("*_mmlu_template_0shot"))
    assert judge_command([str(run), "--judge", LLAMA_MODEL, "--base-url", llama_server, "--sets", "1",
                          "--both-orders", "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in (tmp_path / ROWS_FILE).read_text().splitlines()]
    assert summary["sets"] == 1 and summary["sets_in_run"] == 4 and summary["judge"]["both_orders"] is True
    replies = [r for row in rows for v in row["verdicts"] for r in v["replies"]]
    replies += [r for row in rows for r in row["control"]["replies"]]
    assert summary["asked"] == len(replies) and all(parse_verdict(r) is not None for r in replies)
    assert summary["controls"] == 1 and all(len(v["replies"]) == 2 for v in rows[0]["verdicts"] if not v["identical"])
    assert summary["judge"]["identity"]["base_url"] == llama_server
    # llama.cpp's server returns top_logprobs: each pair has a score, the lower of its two orders, and it agrees
    # with the words (yes in both orders exactly where the lower P(yes) is at least a half: greedy takes the top)
    pairs = [v for v in rows[0]["verdicts"] if not v["identical"]] + [rows[0]["control"]]
    assert all(0 <= v["p_same"] <= 1 for v in pairs) and summary["scores"]["scored"] == len(pairs) - 1
    assert all((v["p_same"] >= 0.5) == v["equivalent"] for v in pairs)


@pytest.mark.slow
def test_a_judge_behind_llama_cpp_whose_template_refuses_a_system_turn(small_results, tmp_path, capsys):
    """llama-cpp-python's server running SmolLM2 with a chat template that fails on a system turn (given as a
    tokenizer config, as the server takes a model's) answers the judge's first request with HTTP 500, after the
    client's retries; the folded chat is answered and the chat as written refused again, so the rest go folded: the
    judge finishes with every reply read."""
    from conftest import llama_cpp_server

    from posixlab.models.assets import PACKAGED_MODELS, assemble_gguf

    refusing = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
                "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": refusing, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}))
    run = next(small_results.glob("*_mmlu_template_0shot"))
    with llama_cpp_server(assemble_gguf(PACKAGED_MODELS["smollm2-135m-instruct"]), "smollm2", tmp_path,
                          "--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(config)) as url:
        assert judge_command([str(run), "--judge", "smollm2", "--base-url", url, "--sets", "1",
                              "--out", str(tmp_path / "judged"), "--json"]) == 0
    said = capsys.readouterr()
    summary = json.loads(said.out)
    assert said.err.count("refused a chat that opens with a system turn (HTTP 500: ") == 1, said.err[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "judged" / ROWS_FILE).read_text().splitlines()]
    replies = [r for row in rows for v in row["verdicts"] for r in v["replies"]] + rows[0]["control"]["replies"]
    assert summary["sets"] == 1 and summary["asked"] == len(replies) > 0 and summary["judge"]["system_folded"] is True
    assert "its system message read in the first user turn" in judge_words(summary)


def test_a_dead_endpoint_is_one_error_and_keeps_what_was_judged(tmp_path, capsys):
    """The judge's endpoint does not answer: exit 2 at the first set that needs it, one message; the sets already on
    file stay, and nothing else is written."""
    from dataclasses import asdict

    from chat_server import free_port

    from posixlab.commands import judge_spec
    from posixlab.judge import JudgeSettings

    url = f"http://127.0.0.1:{free_port()}/v1"
    lines = [json.dumps(record(["a", "a"], index=0)), json.dumps(record(["a", "b"], index=1))]
    (tmp_path / "sets.jsonl").write_text("\n".join(lines) + "\n")
    key = JudgeSettings(asdict(judge_spec("judge-model", url, "POSIXLAB_TEST_NO_KEY"))).key
    ask, _ = scripted_judge({})
    kept = {"key": key, **judge_set(record(["a", "a"], index=0), ask)}
    (tmp_path / ROWS_FILE).write_text(json.dumps(kept) + "\n")
    started = time.monotonic()
    assert judge_command([str(tmp_path), "--judge", "judge-model", "--base-url", url,
                          "--api-key-env", "POSIXLAB_TEST_NO_KEY"]) == 2
    err = capsys.readouterr().err
    assert err.count("posixlab error:") == 1 and url.removesuffix("/v1") in err
    assert time.monotonic() - started < 60
    assert (tmp_path / ROWS_FILE).read_text().splitlines() == [json.dumps(kept)]


def test_two_judges_of_one_run_agree_as_cohen_s_kappa_counts(tmp_path, capsys):
    """``posixlab judge RUN --judge B --out DIR --agree-with RUN``: B's verdicts beside A's (judged first, in the run's
    folder) on the differing responses both read: the share equal, Cohen's κ (checked against scikit-learn's), the
    two-by-two counts; a reply neither yes nor no, and the identical responses (never asked), left out."""
    import random

    from chat_server import ChatServer, completion
    from sklearn.metrics import cohen_kappa_score

    rng = random.Random(0)
    sets = [record(["orig"] + [f"r{i}-{k}" for k in range(6)] + ["orig"], index=i) for i in range(5)]
    run, other = tmp_path / "run", tmp_path / "judge-b"
    run.mkdir()
    (run / "sets.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sets))
    says = {judge: {f"r{i}-{k}": rng.choice(["Yes", "No"]) for i in range(5) for k in range(6)}
            for judge in ("judge-a", "judge-b")}
    says["judge-b"]["r0-0"] = "Maybe"  # unparsed: not a verdict to agree on

    def answer(body, n):
        second = body["messages"][-1]["content"].split("Response B:\n", 1)[1].split("\n\nThe two prompts", 1)[0]
        return 200, {}, completion(says[body["model"]].get(second, "No"))  # a decoy: no

    with ChatServer(answer) as server:
        flags = ["--base-url", server.base_url, "--api-key-env", "POSIXLAB_TEST_NO_KEY"]
        assert judge_command([str(run), "--judge", "judge-a", *flags, "--json"]) == 0
        capsys.readouterr()
        assert judge_command([str(run), "--judge", "judge-b", "--out", str(other), "--agree-with", str(run),
                              *flags, "--json"]) == 0
        agreement = json.loads(capsys.readouterr().out)["agreement"]
        assert judge_command([str(run), "--judge", "judge-b", "--out", str(other), "--agree-with", str(other),
                              *flags]) == 2
        assert "this same judge's verdicts" in capsys.readouterr().err
        assert judge_command([str(run), "--judge", "judge-b", "--out", str(other), "--agree-with", str(tmp_path),
                              *flags]) == 2
        assert "holds no judge's summary" in capsys.readouterr().err
        asked = len(server.bodies)
        assert judge_command([str(run), "--judge", "judge-b", "--out", str(other), "--agree-with", str(run),
                              *flags]) == 0  # the verdicts on file: nothing asked again, the table printed
        assert "Cohen's κ with judge-a" in capsys.readouterr().out and len(server.bodies) == asked

    verdicts = {}
    for folder in (run, other):
        for line in (folder / ROWS_FILE).read_text().splitlines():
            row = json.loads(line)
            for v in row["verdicts"]:
                if not v["identical"]:
                    verdicts.setdefault((row["set_id"], v["prompt"]), []).append(v["equivalent"])
    both = [pair for pair in verdicts.values() if None not in pair]
    assert len(both) == 5 * 6 - 1 == agreement["pairs"] and agreement["with"] == "judge-a"
    assert agreement["kappa"] == pytest.approx(cohen_kappa_score([b for b, _ in both], [a for _, a in both]),
                                               abs=1e-6)
    assert agreement["agreement"] == round(sum(a == b for a, b in both) / len(both), 6)
    assert agreement["only_this"] == sum(b and not a for a, b in both)  # this judge: b, the one with --agree-with
    assert json.loads((other / SUMMARY_FILE).read_text())["agreement"] == agreement  # kept with its summary


def test_a_hub_model_that_cannot_be_had_names_the_judge_s_or_the_rephraser_s_setting(tmp_path, monkeypatch):
    """The hub's "cannot be fetched" hints, written for the run's model (model=<folder>, model.path), name the
    setting of the model that failed: a judge's (--judge, or a run's judge.model), a rephraser's (rephraser.model)."""
    from posixlab.errors import ModelUnavailableError
    from posixlab.judge import open_judge
    from posixlab.models.loading import ModelSpec
    from posixlab.rephrase.hf_backend import HFRephraser

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # an empty cache, offline: refused before any request
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    spec = ModelSpec("Some-7B", "hub", "org/Some-7B")
    said = {}
    for name, opener in (("flags", lambda: open_judge(spec, flags=True)),
                         ("run", lambda: open_judge(spec, flags=False)),
                         ("rephraser", lambda: HFRephraser(spec)._load())):
        with pytest.raises(ModelUnavailableError) as caught:
            opener()
        said[name] = str(caught.value)
    assert said["flags"].startswith("the judge's model Some-7B (org/Some-7B) is not in the local cache")
    assert "give a local copy (--judge <folder>)" in said["flags"] and "--judge smollm2-135m-instruct" in said["flags"]
    assert "(judge.model=<folder>)" in said["run"] and "model=<folder>" not in said["run"].replace(".model=", "")
    assert said["rephraser"].startswith("the rephraser's model Some-7B")
    assert "(rephraser.model=<folder>)" in said["rephraser"] and " model=" not in said["rephraser"]
