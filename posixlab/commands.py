"""The ``posixlab`` commands that read saved runs (``posixlab report``, ``gate``, ``compare``, ``judge``, ``merge``,
``dove``, ``gguf-path``; ``posixlab status`` is ``posixlab.status``'s): each parses its own arguments with argparse,
calls the library and returns its exit status (0: done; 1: a gate or a comparison failed; 2: an error, one message).
No Hydra here: ``posixlab.cli`` dispatches to them (its ``COMMANDS``), and a run's job uses ``write_run_report``,
``report_gate`` and ``judge_folder`` from here.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from posixlab.errors import ConfigError, EndpointUnreachableError, ModelUnavailableError, PosixlabError, \
    ServerResponseError, usage
from posixlab.gate import GateRow, check_gate, gate_passed, gate_table, metrics, parse_gate_overrides, \
    read_summaries, thresholds_of
from posixlab.paths import check_folder_to_write
from posixlab.status import cells_without_results
from posixlab.tasks import task_of_summary
from posixlab.tracking import Tracker


def report_gate(rows: list, where: str = "") -> int:
    """Print a checked gate (nothing when no threshold is set); 1 when a threshold was missed, else 0."""
    if not rows:
        return 0
    print(f"{where}gate {'passed' if gate_passed(rows) else 'FAILED'}:\n{gate_table(rows)}")
    return 0 if gate_passed(rows) else 1


def write_run_report(folder: str, gate_rows: list | None = None) -> None:
    """``report.html`` in a finished run's folder (``report=false``: none). A page that cannot be written is a
    warning, never the run's failure: the results are already saved."""
    from posixlab.report.build import REPORT_FILE, build_report

    try:
        path = build_report([folder], Path(folder) / REPORT_FILE, gate_rows)
    except Exception as exc:  # noqa: BLE001 (the run's results stand without the page)
        print(f"posixlab: warning: no report page ({type(exc).__name__}: {exc}); "
              f"posixlab report {folder} writes it", file=sys.stderr)
        return
    print(f"report: {path}")


def report_command(args: list[str]) -> int:
    """``posixlab report RUN_DIR [RUN_DIR ...] [--out report.html] [gate.KEY=VALUE ...]``: one HTML page about
    saved runs, which opens from disk (no server, no network). 0: written; 2: an error (nothing written)."""
    import argparse

    from posixlab.report.build import REPORT_FILE, build_report

    parser = argparse.ArgumentParser(
        prog="posixlab report", description="Writes one self-contained HTML page about run folders (several: "
        "compared side by side): the headline, the task's metrics, a sortable table of every unit (a POSIX prompt "
        "set, a classification sample) whose row opens its prompts, responses and matrix or answers, and with "
        "gate.KEY=VALUE thresholds the gate. A folder without summary.json (a killed run) gives a PARTIAL page. "
        "It opens from disk: no server, no network. Exit status 0: written; 2: an error.")
    parser.add_argument("items", nargs="+", metavar="RUN_DIR | gate.KEY=VALUE",
                        help="run folders (a sweep's folder: each of its runs), and thresholds as the gate command "
                             "takes them")
    parser.add_argument("--out", help=f"the page to write, or a folder to write {REPORT_FILE} in (default: "
                                      f"RUN_DIR/{REPORT_FILE} for one folder, ./{REPORT_FILE} for several)")
    options = parser.parse_intermixed_args(args)  # --help: exit 0; a usage error: exit 2
    folders = [a for a in options.items if "=" not in a]
    try:
        if not folders:
            raise ConfigError("give the run folders to report on")
        thresholds = [a for a in options.items if "=" in a]
        gate = parse_gate_overrides(thresholds) if thresholds else None
        out = options.out or (Path(folders[0]) / REPORT_FILE if len(folders) == 1 else Path(REPORT_FILE))
        path = build_report(folders, out, gate=gate)
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path} ({path.stat().st_size / 1024:.0f} KB)")
    return 0


def dove_command(args: list[str]) -> int:
    """``posixlab dove export RUN_DIR`` / ``posixlab dove summary FILE...``: a run as DOVE's records, and DOVE's
    records (yours or its published ones) in posixlab's accuracy metrics (``posixlab.interop.dove``)."""
    import argparse

    from posixlab.interop.dove import DEFAULT_BY, DIMENSIONS, OUT_FILE, SCORES, dimension_accuracy, dimension_table, \
        dove_summary, export_dove, read_dove, summary_table

    parser = argparse.ArgumentParser(
        prog="posixlab dove", description="DOVE (Habba et al., 2025): export writes an MMLU run's prompts, responses "
        "and scores as DOVE evaluation records (JSON Lines, DOVE's schema), keyed by the question's index in "
        "cais/mmlu; summary reads DOVE records (JSON, JSON Lines or Parquet: DOVE's hub files, or an export), and "
        "PromptEval's MMLU correctness files (<subject>/<model>-00000-of-00001.parquet, as the hub keeps them), and "
        "prints posixlab's accuracy metrics per model and shot count. Exit status 0: done; 2: an error.")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="an MMLU run folder as DOVE records")
    export.add_argument("run", metavar="RUN_DIR")
    export.add_argument("--out", help=f"the file to write, or a folder to write {OUT_FILE} in (default: "
                                      f"RUN_DIR/{OUT_FILE})")
    export.add_argument("--score", choices=SCORES, default="greedy",
                        help="the record's score: the greedy response read as an answer (default, as DOVE's are), or "
                             "the option of highest log-likelihood")
    export.add_argument("--context-window", type=int, help="the model's context length (default: from its config)")
    summary = commands.add_parser("summary", help="accuracy metrics of DOVE records and PromptEval's correctness")
    summary.add_argument("files", nargs="+", metavar="FILE")
    summary.add_argument("--by", default=",".join(DEFAULT_BY),
                         help=f"the dimensions that make a prompt, comma-separated, from {', '.join(DIMENSIONS)} "
                              f"(default: %(default)s; an export read by instruction_phrasing alone is the run's "
                              f"own grid)")
    summary.add_argument("--shared", action="store_true",
                         help="only the questions every model and shot count has: numbers on the same questions")
    summary.add_argument("--dimensions", action="store_true",
                         help="also the accuracy under each value of each format dimension (enumerator, separator, "
                              "option order, instruction), best first: which dimension moves the score")
    summary.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    options = parser.parse_args(args)  # --help: exit 0; a usage error: exit 2
    try:
        if options.command == "export":
            path, count = export_dove(options.run, options.out, score=options.score,
                                      context_window=options.context_window)
            print(f"{count} DOVE records: {path}")
            return 0
        rows = read_dove(options.files)
        summaries = dove_summary(rows, tuple(b for b in options.by.split(",") if b), shared=options.shared)
        effects = dimension_accuracy(rows) if options.dimensions else None
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps({"summaries": summaries, "dimensions": effects} if effects is not None else summaries,
                         indent=1))
    else:
        print(summary_table(summaries) + ("\n\n" + dimension_table(effects) if effects is not None else ""))
    return 0


def compare_command(args: list[str]) -> int:
    """``posixlab compare BASE_DIR NEW_DIR``: two runs on the same items, paired by set or sample
    (``posixlab.compare``); two sweeps, cell by cell (``posixlab.compare_sweeps``).
    0: compared (and, with ``--fail-if-worse``, no metric worse); 1: a metric worse with ``--fail-if-worse``; 2: an
    error."""
    import argparse

    from posixlab.compare import compare_runs, compare_table
    from posixlab.compare_sweeps import compare_sweeps, sweeps_table
    from posixlab.report.build import run_folders

    parser = argparse.ArgumentParser(
        prog="posixlab compare", description="Compares two runs item by item: POSIX runs by set (set_id: ψ and "
        "accuracy in each reading; runs of two variant types, which share no set, by question), classification runs "
        "by sample (sample_id: sensitivity and accuracy). For each metric: the means over the shared items, the "
        "mean difference with its 95% bootstrap interval, the "
        "Wilcoxon signed-rank p-value, and a verdict (worse, better, identical, within noise). What a CI job runs "
        "after a prompt or model change, against the run of the main branch. Two sweeps (or a run and a sweep): "
        "each run of the new one against the base's run of the same cell (the settings that vary within either "
        "sweep), every interval at the Bonferroni level over the cells. Exit status 0: compared; 1: a metric "
        "worse with --fail-if-worse; 2: an error.")
    parser.add_argument("base", metavar="BASE_DIR", help="the run (or sweep) to compare against")
    parser.add_argument("new", metavar="NEW_DIR", help="the run (or sweep) of the change")
    parser.add_argument("--fail-if-worse", action="store_true",
                        help="exit 1 when a metric is worse beyond noise (its interval excludes 0), or, for sweeps, "
                             "when a cell of the new one could not be compared (unfinished, or no base cell)")
    parser.add_argument("--metrics", help="the metrics to compare (and gate), comma-separated: psi, "
                        "accuracy_options, accuracy_greedy, judged_share (POSIX; judged_share where one judge read "
                        "both runs: judge= or posixlab judge); sensitivity, accuracy (classification) "
                        "(default: every one both runs have); each verdict is at "
                        "95%% on its own, so a gate names the metric it guards; with --fail-if-worse, a metric "
                        "named that a run lacks fails the gate")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default: 0)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of a table")
    options = parser.parse_args(args)  # --help: exit 0; a usage error: exit 2
    metrics = None if options.metrics is None else [m.strip() for m in options.metrics.split(",") if m.strip()]
    sweeps = any(run_folders(folder) != [Path(folder)] for folder in (options.base, options.new))
    try:
        result = (compare_sweeps if sweeps else compare_runs)(options.base, options.new, seed=options.seed,
                                                              metrics=metrics)
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    table = sweeps_table if sweeps else compare_table
    print(json.dumps(result, indent=1, ensure_ascii=False) if options.json else table(result))
    compared = [(f"{cell['cell']}: ", cell["result"]) for cell in result["cells"]] if sweeps else [("", result)]
    worse = [f"{cell}{m['metric']}" for cell, one in compared for m in one["metrics"] if m["verdict"] == "worse"]
    # a gate passes only on what it checked: a cell not compared, or a metric named that a run lacks, fails it
    unchecked = [u["new"] for u in result.get("unmatched", [])] if sweeps else []
    unchecked += [f"{cell}{m}" for cell, one in compared for m in one.get("not_compared", [])]
    failed = [f"worse beyond noise: {', '.join(worse)}"] * bool(worse) + \
        [f"not compared, so not gated: {', '.join(unchecked)}"] * bool(unchecked)
    for why in failed if options.fail_if_worse else []:
        print(f"posixlab compare: {why}", file=sys.stderr)
    return 1 if options.fail_if_worse and failed else 0


def _judge_parser():
    """``posixlab judge``'s options (``posixlab judge --help``)."""
    import argparse

    from posixlab.judge import ALPHA, DEFAULT_JUDGE, ROWS_FILE, SUMMARY_FILE

    parser = argparse.ArgumentParser(
        prog="posixlab judge", description="Asks a judge model, for each prompt set of a POSIX run, whether each "
        "variant's response gives the same answer as the original prompt's, and reports the share identical (what "
        "ψ counts as the same), the share judged the same, Spearman's ρ between ψ and judged inconsistency, and "
        "the judge's own controls: a decoy (another question's response) and, where the run read options, its "
        "agreement with the answer parser. Where the judge gives probabilities (a model in this process, an endpoint "
        "that returns top_logprobs), also its P(yes) per pair, how well it ranks the pairs (AUCs), and verdicts "
        "calibrated on the decoys. "
        f"Writes {ROWS_FILE} (every verdict and reply) and {SUMMARY_FILE}; a rerun asks only what is missing. "
        "Exit status 0: judged; 2: an error.")
    parser.add_argument("run", metavar="RUN_DIR", help="a finished (or stopped) POSIX run's folder, or a sweep's "
                                                        "(each POSIX cell judged in turn, the judge opened once)")
    parser.add_argument("--judge", default=DEFAULT_JUDGE, metavar="MODEL",
                        help="a packaged or configured model, a local folder or a hub id, in this process; with "
                             "--base-url, the model name a chat API serves (default: %(default)s)")
    parser.add_argument("--base-url", help="an OpenAI-compatible chat endpoint to ask (vLLM, llama.cpp, a hosted "
                                           "API); its key from --api-key-env")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="the variable holding the endpoint's key "
                                                                        "(default: %(default)s)")
    parser.add_argument("--max-concurrency", type=int, default=8, metavar="N",
                        help="with --base-url, requests in flight at once (a set's requests go together; a vLLM "
                             "server batches them; default: %(default)s). Speed only: verdicts on file are reused")
    parser.add_argument("--sets", type=int, help="judge the first SETS sets only (default: all)")
    parser.add_argument("--both-orders", action="store_true",
                        help="ask each pair twice, the original's response first and second; the same only if both "
                             "say yes (judges favour a position)")
    parser.add_argument("--instruction", metavar="FILE",
                        help="the judge's request, with {first_prompt}, {first}, {second_prompt} and {second} "
                             "(default: posixlab.judge's)")
    parser.add_argument("--alpha", type=float, default=ALPHA,
                        help="the calibrated verdicts: a pair is the same when its P(yes) is above the decoys' "
                             "conformal 1-ALPHA quantile, so a response as unrelated as a decoy is called the same "
                             "with probability at most ALPHA (default: %(default)s; needs 1/ALPHA - 1 decoys, one a "
                             "set)")
    parser.add_argument("--decoys", type=int, default=1, metavar="K",
                        help="controls a set: the next K sets' original responses, each shown as a response to this "
                             "set's prompt (K requests a set; calibration at ALPHA needs 1/ALPHA - 1 decoys in all, "
                             "so K > 1 calibrates on fewer sets; default: %(default)s)")
    parser.add_argument("--out", help="the folder to write to (default: RUN_DIR)")
    parser.add_argument("--agree-with", metavar="FOLDER",
                        help="another judge's folder for the same run (posixlab judge RUN --judge OTHER --out "
                             "FOLDER): how often the two give the same verdict, Cohen's kappa, and their sets' "
                             "shares side by side, added to this judge's summary")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    parser.add_argument("--wandb", choices=("offline", "online"),
                        help="log the judge to Weights & Biases too: a run of job type 'judge', named judge-RUN and "
                             "grouped under RUN's folder name, with the summary's numbers and a table of the sets "
                             "(offline: under the output folder's wandb/, for wandb sync; online: WANDB_API_KEY)")
    parser.add_argument("--wandb-project", default="posixlab", help="the W&B project (default: %(default)s)")
    return parser


def judge_command(args: list[str]) -> int:
    """``posixlab judge RUN_DIR | SWEEP_DIR [--judge MODEL]``: a judge model reads POSIX runs' responses
    (``posixlab.judge``). 0: judged; 2: an error (the verdicts written so far are kept). Of a sweep, a run that
    cannot be judged (its folder) is named and the others are judged, then 2; the judge's own failure (its model,
    its server) stops at once."""
    from posixlab.judge import JudgeConfig, judge_table, open_judge, other_judge
    from posixlab.report.build import run_folders

    parser = _judge_parser()
    options = parser.parse_args(args)  # --help: exit 0; a usage error: exit 2
    summaries = []
    try:
        judge = JudgeConfig(options.judge, options.base_url, options.api_key_env, options.max_concurrency,
                            options.sets, options.both_orders, options.instruction, options.alpha, options.decoys)
        cells = judged_cells(Path(options.run))
        runs = {run.resolve() for run in run_folders(Path(options.run))}  # a classification cell's too: not a hole
        for hole in cells_without_results(Path(options.run), runs):
            print(f"posixlab judge: not judged, no prompt set to read: {hole}", file=sys.stderr)
        for flag, given in (("--out", options.out), ("--agree-with", options.agree_with)):
            if len(cells) > 1 and given:
                raise ConfigError(f"{flag} with a sweep ({len(cells)} POSIX runs in {options.run}): each run's "
                                  f"verdicts go to its own folder; give one run's folder")
        if options.out:
            check_folder_to_write(options.out, "the judge's verdicts")
        if options.agree_with:
            other_judge(options.agree_with)  # a folder without a judge: an error before any judging
        opened = []  # the judge's model, opened by the first cell that needs it, for the next ones too

        def opener():
            if not opened:
                opened.append(open_judge(judge_spec(judge.model, judge.base_url, judge.api_key_env,
                                                    judge.max_concurrency)))
            return opened[0]

        failed = []
        for cell in cells:
            try:
                summary = judge_folder(judge, cell, out=options.out, flags=True, opener=opener)
            except (ModelUnavailableError, EndpointUnreachableError, ServerResponseError):
                raise  # the judge itself: no other cell would fare better
            except (PosixlabError, OSError) as exc:
                if len(cells) == 1:
                    raise
                failed.append(cell)  # this cell's folder: the sweep's other cells are judged, as a sweep runs them
                print(f"posixlab judge: {cell.name} not judged: {exc}", file=sys.stderr)
                continue
            if options.agree_with:
                summary = add_agreement(summary, Path(options.out or cell), options.agree_with)
            summaries.append(summary)
            if options.wandb:  # after the judging, whose files are written whatever W&B does
                track_judge(summary, Path(options.out or cell), cell.resolve().name,
                            {"mode": options.wandb, "project": options.wandb_project, "log_artifact": False})
            if not options.json:
                print(judge_table(summary) + ("\n" if len(cells) > 1 else ""))
    except (PosixlabError, OSError) as exc:  # OSError: a folder that cannot be written
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=1, ensure_ascii=False))
    if failed:
        print(f"posixlab error: {len(failed)} of {len(cells)} runs not judged: {', '.join(c.name for c in failed)} "
              f"(each said why above; the others are judged)", file=sys.stderr)
        return 2
    return 0


def add_agreement(summary: dict, out: Path, other: str) -> dict:
    """The judge's summary with its agreement with the judge in ``other`` (``posixlab.judge.agreement_with``),
    written back to its ``judge.json``."""
    from posixlab.judge import SUMMARY_FILE, agreement_with

    summary = {**summary, "agreement": agreement_with(out, other, summary)}
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def judged_cells(folder: Path) -> list[Path]:
    """The POSIX runs ``posixlab judge`` reads: the folder, or a sweep's cells that hold prompt sets (in the sweep's
    order; a classification cell has none); the folder itself where it has neither (its error says why)."""
    from posixlab.report.build import run_folders
    from posixlab.results import SETS_FILE

    if (folder / SETS_FILE).is_file():
        return [folder]
    return [cell for cell in run_folders(folder) if (cell / SETS_FILE).is_file()] or [folder]


def track_judge(summary: dict, out: Path, run_name: str, settings: dict) -> None:
    """A W&B run of the judge of the run ``run_name``, its files in ``out`` (``posixlab.judge.judge_tracked``)."""
    from posixlab.judge import judge_tracked, judged_rows

    config = {"judge": summary["judge"], "run": summary["run"], "sets_in_run": summary["sets_in_run"],
              "alpha": (summary.get("scores") or {}).get("alpha")}
    with Tracker(settings, config, str(out), name=f"judge-{run_name}", group=run_name, job_type="judge") as tracker:
        tracker.log_run(judge_tracked(summary, judged_rows(out, summary)), judged_figures(out))
    if tracker.where:  # stderr: the command's stdout may be its --json
        print(tracker.where, file=sys.stderr)


def judge_folder(judge, folder, out=None, cache_dir=None, progress: bool | str = True, flags: bool = False,
                 opener=None) -> dict:
    """``posixlab.judge.judge_run`` of the POSIX run in ``folder`` by the judge a ``JudgeConfig`` names (``posixlab
    judge`` and a run's ``judge=``), then its figure (``posixlab.analysis.judged``); its summary. ``opener``: the
    judge's model, opened once for a sweep's cells."""
    from posixlab.judge import judge_run

    instruction = judge.instruction_text(flags)
    spec = judge_spec(judge.model, judge.base_url, judge.api_key_env, judge.max_concurrency)
    summary = judge_run(folder, spec, sets=judge.sets, out=out, instruction=instruction,
                        both_orders=judge.both_orders, alpha=judge.alpha, decoys=judge.decoys, cache_dir=cache_dir,
                        progress=progress, flags=flags, opener=opener)
    draw_judged_figure(Path(out or folder), summary)
    return summary


def judged_figures(folder: str | Path) -> dict[str, Path]:
    """The judge's figure in a judged folder, by name, for W&B (none where it could not be drawn)."""
    from posixlab.analysis.judged import FIGURE

    path = Path(folder) / "figures" / f"{FIGURE}.png"
    return {FIGURE: path} if path.is_file() else {}


def draw_judged_figure(folder: Path, summary: dict) -> None:
    """``figures/psi_vs_judged.png`` in a judged folder; a figure that cannot be drawn is a warning, never the
    judge's failure: its verdicts are already saved."""
    from posixlab.analysis.judged import draw_judged

    try:
        draw_judged(folder, summary)
    except Exception as exc:  # noqa: BLE001 (the verdicts stand without the figure)
        print(f"posixlab: warning: no figure of ψ against the judge ({type(exc).__name__}: {exc})", file=sys.stderr)


def judge_spec(name: str, base_url: str | None, api_key_env: str, max_concurrency: int = 8):
    """The judge's ModelSpec: a chat API's model with ``base_url`` (``max_concurrency`` requests in flight), else
    every form ``posixlab.evaluate`` takes (``posixlab.api.judge_model``)."""
    from posixlab.api import judge_model

    return judge_model(name, None, base_url, api_key_env, max_concurrency)[0]


def merge_command(args: list[str]) -> int:
    """``posixlab merge OUT SHARD_FOLDER...``: join the folders of a ``shard=K/N`` sweep into OUT."""
    from posixlab.merge import merge_shards

    if len(args) < 2 or args[0] in ("-h", "--help"):
        return usage("usage: posixlab merge OUT SHARD_FOLDER [SHARD_FOLDER ...]\n\nJoins the result folders of the "
                     "shards of one cell (shard=1/N ... shard=N/N) into OUT, as one run of the whole cell.",
                     asked=args[:1] in (["-h"], ["--help"]))
    try:
        flags = [a for a in args if a.startswith("-")]
        if flags:
            raise ConfigError(f"posixlab merge takes no flag ({flags[0]}): posixlab merge OUT SHARD_FOLDER ...")
        summary = merge_shards(args[1:], args[0])
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    task_type = task_of_summary(summary)
    value = task_type.headline(summary)
    print(f"{task_type.headline_name} = {'n/a' if value is None else f'{value:.4f}'} ({task_type.num_units(summary)} "
          f"{task_type.unit_name}s from {len(args) - 1} shards) · results: {args[0]}")
    write_run_report(args[0])  # the merged cell's page, as one run of the whole cell writes it
    return 0


def gate_command(args: list[str]) -> int:
    """``posixlab gate FOLDER... gate.KEY=VALUE...``: check saved runs' ``summary.json`` against thresholds, running
    nothing (what a CI job runs after a cached run). 0: every folder passed; 1: a threshold was missed; 2: an error."""
    if not args or args[0] in ("-h", "--help"):
        return usage("usage: posixlab gate FOLDER [FOLDER ...] gate.KEY=VALUE [...] [--json]\n\nChecks the "
                     "summary.json of run folders (or of every job of a sweep folder) against thresholds: "
                     + ", ".join(metrics()) + " (gate.accuracy_reading=options|greedy picks the accuracy read); "
                     "--json prints each folder's rows as JSON. Exit status 0: passed; 1: a threshold missed; 2: an "
                     "error.", asked=args[:1] in (["-h"], ["--help"]))
    as_json, args = "--json" in args, [a for a in args if a != "--json"]
    try:
        flags = [a for a in args if a.startswith("-")]
        if flags:
            raise ConfigError(f"posixlab gate takes no {flags[0]} (its one flag is --json); see posixlab gate --help")
        gate = parse_gate_overrides([a for a in args if "=" in a])
        if not thresholds_of(gate):
            raise ConfigError(f"give at least one threshold: gate.KEY=VALUE with KEY one of {', '.join(metrics())}")
        folders = [a for a in args if "=" not in a]
        if not folders:
            raise ConfigError("give the result folders to check")
        checked = []
        for folder in folders:
            summaries = read_summaries(folder)
            for run_folder, summary in summaries:
                try:
                    checked.append((run_folder, check_gate(summary, gate)))
                except ConfigError as exc:
                    raise ConfigError(f"{run_folder}: {exc}") from None
            # a sweep's cell without a summary (it failed, or is still running or pending) fails the gate, as a run
            # that stopped early does: a CI job must not pass a grid with a hole
            shown = {Path(run_folder).resolve() for run_folder, _ in summaries}
            checked += [(Path(folder), [GateRow("complete", None, f"no results: {cell}", False, "summary.json")])
                        for cell in cells_without_results(Path(folder), shown)]
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    if as_json:  # a CI job's machine-readable verdict: the same rows and exit status
        print(json.dumps([{"folder": str(run_folder), "passed": gate_passed(rows),
                           "rows": [dataclasses.asdict(row) for row in rows]} for run_folder, rows in checked],
                         indent=2))
        return 0 if all(gate_passed(rows) for _, rows in checked) else 1
    return max(report_gate(rows, f"{run_folder}: ") for run_folder, rows in checked)


def gguf_path_command(args: list[str]) -> int:
    """``posixlab gguf-path MODEL``: the path of a packaged model's GGUF file (fetched from the package registry and
    assembled first if needed), or of a GGUF repository's file on the Hugging Face Hub (``OWNER/REPO:Q4_K_M``,
    downloaded into the Hugging Face cache first if needed), for llama.cpp's server; from any folder:

        python -m llama_cpp.server --model "$(posixlab gguf-path qwen2.5-coder-1.5b-instruct)" --port 8765
    """
    from posixlab.models.assets import PACKAGED_MODELS, assemble_gguf

    on_hub = len(args) == 1 and "/" in args[0] and not args[0].startswith("-")
    if len(args) == 1 and not args[0].startswith("-") and args[0] not in PACKAGED_MODELS and not on_hub:
        print(f"posixlab error: {args[0]!r} is not a packaged model, so it has no GGUF file here; the packaged ones: "
              f"{', '.join(sorted(PACKAGED_MODELS))}, or a GGUF file on the Hugging Face Hub: OWNER/REPO:Q4_K_M (a "
              f"hub checkpoint is served by vLLM: model.backend=vllm model.server.launch=true)", file=sys.stderr)
        return 2
    if len(args) != 1 or args[0] in ("-h", "--help"):
        return usage(f"usage: posixlab gguf-path MODEL\n\nPrints the GGUF file of a packaged model (assembled from "
                     f"its packages on first use) or of a GGUF repository on the Hugging Face Hub (downloaded on first "
                     f"use; a file split in parts: its first part, every part beside it), for llama.cpp's server. "
                     f"MODEL: {', '.join(sorted(PACKAGED_MODELS))}, or OWNER/REPO:TAG, OWNER/REPO/FILE.gguf",
                     asked=args[:1] in (["-h"], ["--help"]))
    try:
        if on_hub:
            from posixlab.llamacpp.hub import hub_gguf
            from posixlab.models.loading import ModelSpec

            print(hub_gguf(ModelSpec(args[0], "hub", args[0], backend="llamacpp"))[0])
        else:
            print(assemble_gguf(PACKAGED_MODELS[args[0]]))
    except PosixlabError as exc:
        print(f"posixlab error: {exc}", file=sys.stderr)
        return 2
    return 0
