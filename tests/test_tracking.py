"""W&B through real run.py jobs: the offline run holds config, summary, per-set table and artifact; a failed job
still closes its run; secrets in the environment reach nothing the job wrote; jobs of a sweep share a group."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from posixlab.tracking import offline_run_dirs, read_offline_run
from posixlab.results import read_sets

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # every test runs run.py in a subprocess


def run_py(args, env_extra=None):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env_extra or {})}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def records_by_kind(run_dir):
    kinds = {}
    for record in read_offline_run(run_dir):
        kinds.setdefault(record.WhichOneof("record_type"), []).append(record)
    return kinds


def summary_of(kinds) -> dict:
    values = {}
    for record in kinds["summary"]:
        for item in record.summary.update:
            if item.key:
                values[item.key] = json.loads(item.value_json)
    return values


def test_offline_run_holds_config_summary_table_figures_and_artifact(tmp_path):
    out = tmp_path / "job"
    proc = run_py(["num_sets=3", "num_variants=3", "progress=false", f"hydra.run.dir={out}", "score_cache=false"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the figures are saved quietly: Hydra's INFO logging does not relay fontTools' font subsetting, line by line
    assert "fontTools" not in proc.stdout + proc.stderr and "categorical units" not in proc.stdout + proc.stderr
    (run_dir,) = offline_run_dirs(out)
    kinds = records_by_kind(run_dir)
    # W&B's own lines are kept quiet: the job's last lines say where its run is, and how to upload it
    assert f"\nW&B: offline run {run_dir} (`wandb sync` of that folder uploads it)\n" in proc.stdout

    config = {item.key: json.loads(item.value_json) for item in kinds["run"][0].run.config.update}
    assert config["model"]["name"] == "smollm2-135m-instruct" and config["task"]["num_sets"] == 3
    assert config["logger"]["mode"] == "offline" and config["embedding"]["name"] == "all-MiniLM-L6-v2"
    assert kinds["run"][0].run.display_name == "job" and kinds["run"][0].run.run_group == ""  # one job: no group

    summary = json.loads((out / "summary.json").read_text())
    logged = summary_of(kinds)
    assert logged["posix"] == summary["psi"]["posix"] and logged["num_sets"] == 3
    assert [logged["psi_ci95_low"], logged["psi_ci95_high"]] == summary["psi"]["ci95"]
    assert logged["factor/unique_responses"] == summary["factors"]["unique_responses"]["mean"]

    (table_file,) = (run_dir / "files" / "media" / "table").glob("sets_*.table.json")
    table = json.loads(table_file.read_text())
    records = read_sets(out)
    assert len(table["data"]) == 3
    column = {name: i for i, name in enumerate(table["columns"])}
    for row, record in zip(table["data"], records):
        assert row[column["psi"]] == record["psi"] and row[column["item_id"]] == record["item_id"]
        assert row[column["unique_responses"]] == record["factors"]["unique_responses"]
        assert json.loads(row[column["responses"]]) == [r["text"] for r in record["responses"]]
    images = {p.name.split("_")[0] for p in (run_dir / "files" / "media" / "images" / "figures").glob("*.png")}
    # MMLU has gold answers: the run's accuracy per prompt too; and the highest-ψ set's matrix (set_matrix)
    assert images == {"psi", "factors", "accuracy", "set"}
    assert (out / "figures" / "accuracy_per_prompt.png").stat().st_size > 10_000
    assert summary["accuracy"]["num_sets"] == 3 and len(summary["accuracy"]["by_options"]["per_prompt"]) == 4
    assert logged["accuracy/by_options/accuracy"] == summary["accuracy"]["by_options"]["accuracy"]

    artifacts = {a.artifact.type: a.artifact for a in kinds["artifact"]}
    files = {entry.path for entry in artifacts["posix-results"].manifest.contents}
    assert {"sets.jsonl", "summary.json", "summary.md", "config.yaml", "figures/factors.png"} <= files
    assert not any(f.startswith("wandb") for f in files)
    # the results are read where they are at upload, not copied into W&B's staging folder first (they stayed there)
    entries = {e.path: e for e in artifacts["posix-results"].manifest.contents}
    assert entries["sets.jsonl"].local_path == str(out / "sets.jsonl")
    assert kinds["exit"][0].exit.exit_code == 0


def test_a_failing_job_closes_its_run_with_exit_code_1(tmp_path):
    out = tmp_path / "job"
    # BBH keeps only template variants: the job stops with a clear error after W&B has started
    proc = run_py(["dataset=bbh", "dataset.source=path", f"dataset.path={ROOT / 'tests/fixtures/bbh_fixture.jsonl'}",
                   "variant=spelling", "progress=false", f"hydra.run.dir={out}"])
    assert proc.returncode == 2 and "allows variant types template only" in proc.stderr
    assert "not variant=spelling: run with variant=template, or set dataset.variants=null" in proc.stderr
    (run_dir,) = offline_run_dirs(out)
    kinds = records_by_kind(run_dir)
    assert kinds["exit"][0].exit.exit_code == 1


def test_logger_none_writes_no_wandb_folder(tmp_path):
    out = tmp_path / "job"
    proc = run_py(["num_sets=1", "num_variants=2", "progress=false", "logger=none", f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "summary.json").is_file() and not (out / "wandb").exists()


class Rephraser:
    """A loopback OpenAI-compatible endpoint that demands one API key and rewrites the text it is sent."""

    def __init__(self, key: str):
        self.auth: list[str] = []
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                state.auth.append(self.headers.get("Authorization"))
                if self.headers.get("Authorization") != f"Bearer {key}":
                    self.send_response(401)
                    self.end_headers()
                    return
                request = body["messages"][-1]["content"]
                k = int(re.search(r"in (\d+) different ways", request).group(1))
                text = request.split("Text: ", 1)[1].strip()
                # distinct rewrites without digits: a rewrite that adds a number fails the quality checks
                tag = "".join(chr(ord("a") + int(d)) for d in str(len(state.auth)))
                reply = "\n".join(f"{i}. Put another way ({tag}{chr(ord('a') + i)}): {text}" for i in range(1, k + 1))
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def test_secrets_from_the_environment_leave_no_trace(tmp_path):
    rephraser_key, wandb_key = "sk-posixlab-test-7f3a9c1e55d2", "b7e2c4a19d3f6e8a0c5b2d4f6a8c0e2b4d6f8a0c"
    server = Rephraser(rephraser_key)
    thread = threading.Thread(target=server.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    sweep = tmp_path / "sweep"
    paraphrases = tmp_path / "paraphrases.jsonl"
    try:
        proc = run_py(["-m", "variant=paraphrase,spelling", "num_sets=1", "num_variants=2", "progress=false",
                       "rephraser=openai", f"rephraser.base_url={server.base_url}", "rephraser.model=m",
                       "rephraser.api_key_env=POSIXLAB_TEST_REPHRASER_KEY", f"rephraser.path={paraphrases}",
                       f"hydra.sweep.dir={sweep}", "score_cache=false"],
                      env_extra={"POSIXLAB_TEST_REPHRASER_KEY": rephraser_key, "WANDB_API_KEY": wandb_key})
    finally:
        server.server.shutdown()
        server.server.server_close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert server.auth and set(server.auth) == {f"Bearer {rephraser_key}"}  # the key was used ...
    written = [p for p in [*sweep.rglob("*"), paraphrases] if p.is_file()]
    assert len(written) > 20 and any(p.suffix == ".wandb" for p in written)
    for path in written:  # ... and appears in nothing the jobs wrote: results, Hydra files, W&B runs, paraphrases
        data = path.read_bytes()
        for secret in (rephraser_key, wandb_key):
            assert secret.encode() not in data, f"{secret[:6]}... found in {path}"
    assert rephraser_key not in proc.stdout + proc.stderr and wandb_key not in proc.stdout + proc.stderr
    # the two jobs are two W&B runs in one group named after the sweep folder
    groups = {records_by_kind(run)["run"][0].run.run_group for job in sweep.iterdir() if job.is_dir()
              for run in offline_run_dirs(job)}
    assert groups == {"sweep"}
    assert read_sets(next(sweep.glob("0_*")))[0]["prompts"][1]["kind"] == "paraphrase"


def test_online_mode_without_a_key_stops_before_any_work(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "WANDB_MODE")}
    out = tmp_path / "job"
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "logger.mode=online", "num_sets=1",
                           "progress=false", f"hydra.run.dir={out}"], cwd=ROOT, env={**env, "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "could not start in online mode" in proc.stderr and "logger=none turns W&B off" in proc.stderr
    assert not (out / "sets.jsonl").exists()
    proc = run_py(["logger.mode=loud", "num_sets=1", f"hydra.run.dir={tmp_path / 'bad'}"])
    assert proc.returncode == 2 and "logger.mode must be one of offline, online, disabled" in proc.stderr
    # a key but no server (port 9 on loopback refuses): the wait is announced, bounded, and its cause named
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening: refused
        proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "logger.mode=online", "logger.init_timeout=3",
                               "num_sets=1", "progress=false", f"hydra.run.dir={out}"], cwd=ROOT, capture_output=True,
                              env={**env, "HOME": str(tmp_path), "WANDB_API_KEY": "k" * 40, "WANDB_BASE_URL": url},
                              text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"W&B: connecting to {url} (online mode; at most 3 s" in proc.stderr
    assert "could not be reached or refused the key" in proc.stderr and "`wandb sync` uploads it later" in proc.stderr
    assert not (out / "sets.jsonl").exists()
    proc = run_py(["logger.init_timeout=0", "num_sets=1", f"hydra.run.dir={tmp_path / 'bad'}"])
    assert proc.returncode == 2 and "logger.init_timeout takes seconds (a number above 0) or null, got 0" in proc.stderr


def test_a_judge_logs_its_numbers_and_a_table_of_sets_to_its_own_run(tmp_path, capsys, monkeypatch):
    """``posixlab judge --wandb offline``: a W&B run of job type 'judge', named judge-RUN and grouped under RUN, whose
    summary holds judge.json's numbers (nested ones by path) and whose table has a row per judged set with each
    variant's verdict; the judge's files stay in the run's folder (no artifact). The judge is a scripted chat server
    (yes to every response but the one that names another colour)."""
    sys.path.insert(0, str(ROOT / "tests"))
    monkeypatch.setenv("POSIXLAB_TEST_NO_KEY", "x")
    from chat_server import ChatServer, completion
    from test_judge import record

    from posixlab.commands import judge_command

    def answer(body, n):
        second = body["messages"][-1]["content"].split("Response B:\n", 1)[1].split("\n", 1)[0]
        return 200, {}, completion("No" if second == "green" else "Yes")

    run = tmp_path / "my-run"
    run.mkdir()
    sets = [record(["red", "red", "crimson", "green"], psi=0.5), record(["blue", "navy", "blue"], psi=0.2, index=1)]
    (run / "sets.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sets))
    with ChatServer(answer) as server:
        assert judge_command([str(run), "--judge", "j", "--base-url", server.base_url, "--api-key-env",
                              "POSIXLAB_TEST_NO_KEY", "--json", "--wandb", "offline"]) == 0
    summary = json.loads(capsys.readouterr().out)
    (run_dir,) = offline_run_dirs(run)
    kinds = records_by_kind(run_dir)
    meta = kinds["run"][0].run
    assert (meta.display_name, meta.run_group, meta.job_type) == ("judge-my-run", "my-run", "judge")
    logged = summary_of(kinds)
    assert logged["judged_share"] == summary["judged_share"] and logged["sets"] == 2
    assert logged["control_judged_same"] == summary["control_judged_same"]
    (table_file,) = (run_dir / "files" / "media" / "table").glob("judge_sets_*.table.json")
    table = json.loads(table_file.read_text())
    column = {name: i for i, name in enumerate(table["columns"])}
    assert [row[column["set_id"]] for row in table["data"]] == ["s0", "s1"]
    assert [json.loads(row[column["verdicts"]]) for row in table["data"]] == [[True, True, False], [True, True]]
    assert [row[column["psi"]] for row in table["data"]] == [0.5, 0.2]
    # its figure (ψ against judged inconsistency), drawn into the run's figures/ and logged as an image
    assert [p.name.split("_")[0] for p in (run_dir / "files" / "media" / "images" / "figures").glob("*.png")] \
        == ["psi"] and (run / "figures" / "psi_vs_judged.png").is_file()
    assert {a.artifact.type for a in kinds.get("artifact", [])} <= {"run_table"}  # the table's own; no folder
    assert kinds["exit"][0].exit.exit_code == 0
