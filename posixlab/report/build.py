"""``build_report``: one HTML page about one or more run folders, for any registered task.

Each folder is read and checked before any page is written: its task comes from its summary
(``posixlab.tasks.task_of_summary``), or, in a run killed before its summary, from its ``config.yaml`` and records
file (the page is then marked PARTIAL and built from the records written so far, summarised by the task's own
``summarize``). The page asks each run's task for its sections (``Task.report_sections``); several runs get a
comparison (headline numbers side by side, each run's per-unit values, ``Task.report_values``, on one axis, and
finished runs of one task paired item by item, ``posixlab.compare``: each with the run that differs from it in one
setting only, else with its task's first); a gated run gets a section of its thresholds, with what is behind a
failed one (``Task.report_gate_detail``).

This is the only module of ``posixlab.report`` that imports the tasks; no Hydra here (``posixlab.cli`` calls it).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.compare import UNITS, checked_values, compare_values, environment_words, interval_words, judged_values
from posixlab.errors import ConfigError, PosixlabError
from posixlab.metrics.stats import holm_adjust
from posixlab.paths import check_folder_to_write, file_to_write
from posixlab.report import html as h
from posixlab.report.grid import grid_markdown, grid_section, one_setting_pairs, task_settings
from posixlab.results import SCHEMA_VERSION, SUMMARY_FILE
from posixlab.status import cells_without_results, folders_without_results, job_order, runs_below
from posixlab.tasks import TASK_TYPES, task_named, task_of_records, task_of_summary
from posixlab.tasks.base import Task, model_name, records_read_once

REPORT_FILE = "report.html"
GRID_FILE = "grid.md"  # a sweep's headline grid, written at its end (sweep_summary)
HEADLINES = 4  # runs on a page whose headlines its title lists one by one


@dataclass
class Run:
    """One run folder as the page reads it."""

    folder: Path
    task: type[Task]
    summary: dict
    units_in: int | None = None  # a partial run: the units whose records were written before it stopped
    units_planned: int | None = None
    notes: list[str] = field(default_factory=list)  # what the page cannot show, and why

    @property
    def partial(self) -> bool:
        return self.units_in is not None


# --- reading run folders -------------------------------------------------------------------------------------------
def run_folders(folder: str | Path) -> list[Path]:
    """A run folder; or a sweep folder's runs (its sub-folders with a summary or a records file), in the sweep's
    order; or, for a folder of sweeps and runs (``multirun/``, ``outputs/<date>/<time>_<run name>``), the runs of
    each sweep below it, then its single runs (``posixlab.status.runs_below``). Anything else comes back as it is,
    for ``read_run`` to say what is wrong with it."""
    folder = Path(folder)

    def is_run(path: Path) -> bool:
        return (path / SUMMARY_FILE).is_file() or task_of_records(path) is not None

    if not folder.is_dir() or is_run(folder):
        return [folder]

    cells = [p for p in folder.iterdir() if p.is_dir() and is_run(p)]
    if cells:
        return sorted(cells, key=lambda p: job_order(p.name))  # a sweep's cell is <num>_<run name>: 2 before 10
    sweeps, runs = runs_below(folder)
    return [cell for sweep in sweeps for cell in run_folders(sweep) if cell != sweep] + \
        [run for run in runs if is_run(run)] or [folder]


def read_run(folder: str | Path) -> Run:
    """A run folder, checked: a ``ConfigError`` naming what is wrong when it is not a run folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder (give a run's results folder)")
    if (folder / SUMMARY_FILE).is_file():
        return _finished(folder)
    return _partial(folder)


def _finished(folder: Path) -> Run:
    try:
        summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder / SUMMARY_FILE} cannot be read as JSON ({exc})") from None
    if not isinstance(summary, dict):
        raise ConfigError(f"{folder / SUMMARY_FILE} is not a run summary (a JSON object)")
    task = task_of_summary(summary)  # an unknown task: a ConfigError naming the known ones
    run = Run(folder, task, task.with_files_beside(folder, summary))
    run.notes += _version_notes(task, summary)
    if not (folder / task.records_file).is_file():
        run.notes.append(f"the folder has no {task.records_file}: the {task.unit_name}s cannot be shown")
    return run


def _version_notes(task: type[Task], summary: dict) -> list[str]:
    """What an older (or newer) summary lacks for this page."""
    notes = []
    version = summary.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        notes.append(f"this summary was written by a newer posixlab (results version {version}; this posixlab "
                     f"reads {SCHEMA_VERSION}): some of it may not be shown")
    missing = [key for key in task.summary_keys if key not in summary and key != "notes"]
    if missing:
        older = f"results version {version}" if version is not None else "no results version"
        notes.append(f"this summary was written by an older posixlab ({older}): it has no "
                     f"{', '.join(missing)}, which the page leaves out")
    if task.headline(summary) is None and task.headline_key:
        notes.append(f"the summary has no {task.headline_key}: the headline reads n/a")
    return notes


def _partial(folder: Path) -> Run:
    """A folder without ``summary.json``: a run killed before its end, summarised from the records written."""
    config = _read_config(folder)
    task = _task_of_folder(folder, config)
    records = task.read_unit_records(folder)
    if not records:
        raise ConfigError(f"{folder} has no {SUMMARY_FILE} and no {task.unit_name} in {task.records_file} yet: "
                          f"nothing to report (a run that stopped before its first {task.unit_name})")
    meta = task.partial_meta(config, folder)
    try:  # the records as the summary reads them (the page's may leave texts out)
        summary = task.summarize(task.summary_records(folder, skip_unreadable=True), meta)
    except Exception as exc:  # noqa: BLE001 (too few records for a statistic; the records are still shown)
        summary = {**meta, "task": task.name}
        note = f"the {len(records)} {task.unit_name}s written so far cannot be summarised ({type(exc).__name__}: {exc})"
    else:
        note = None
    planned = _planned(task, config)
    summary["stopped"] = f"partial run: {len(records)} of {planned or '?'} {task.unit_name}s"  # a gate fails it
    run = Run(folder, task, summary, units_in=len(records), units_planned=planned)
    run.notes += [note] if note else []
    return run


def _read_config(folder: Path) -> dict:
    path = folder / "config.yaml"
    if not path.is_file():
        return {}
    import yaml

    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc})") from None
    return config if isinstance(config, dict) else {}


def _task_of_folder(folder: Path, config: dict) -> type[Task]:
    name = (config.get("task") or {}).get("name") if isinstance(config.get("task"), dict) else None
    if name:
        task = task_named(name)
        if (folder / task.records_file).is_file():
            return task
    for task in TASK_TYPES.values():
        if (folder / task.records_file).is_file():
            return task
    if config.get("dry_run") is True:  # a folder a dry run wrote: its config.yaml alone
        raise ConfigError(f"{folder} is a dry run's folder (dry_run=true): it planned, nothing was computed; give a "
                          f"run's results folder")
    if (folder / "config.yaml").is_file():  # a run's folder, of a run that ended before its first unit
        raise ConfigError(f"{folder} holds a run that stopped before its first unit: no results to show "
                          f"(posixlab status {folder} says why)")
    files = ", ".join(dict.fromkeys(t.records_file for t in TASK_TYPES.values()))
    raise ConfigError(f"{folder} is not a run folder: it has no {SUMMARY_FILE} and no records file ({files}); give "
                      f"a run's results folder")


def _planned(task: type[Task], config: dict) -> int | None:
    try:
        return task.units_planned(config)
    except Exception:  # noqa: BLE001 (an older or foreign config.yaml)
        return None


# --- the page --------------------------------------------------------------------------------------------------------
def build_report(folders, out, gate_rows=None, *, gate=None) -> Path:
    """Write the report page about ``folders`` (run folders, or sweep folders: their runs; several: compared) to
    ``out``; returns its path.
    ``gate_rows``: the checked gate of the (first) run (``posixlab.gate.check_gate``); ``gate``: a ``GateConfig``
    checked against every run here. Bad input is a ``ConfigError`` before anything is written."""
    folders = [folders] if isinstance(folders, (str, Path)) else list(folders)
    if not folders:
        raise ConfigError("give at least one run folder")
    runs, unread, seen, unread_folders = [], [], set(), set()
    for folder in folders:
        found = run_folders(folder)
        for run in found:
            if Path(run).resolve() in seen:  # given twice (or a sweep and one of its runs): one place on the page
                print(f"posixlab: {run} is given twice: shown once", file=sys.stderr)
                continue
            seen.add(Path(run).resolve())
            try:
                runs.append(read_run(run))
            except ConfigError as exc:  # a folder given is refused; one found in it is named, not shown
                if found == [Path(folder)]:
                    raise
                unread.append(f"{run.name}: {exc}")
                unread_folders.add(Path(run).resolve())
    if not runs:
        raise ConfigError(f"no run to report in {', '.join(map(str, folders))}: " + "; ".join(unread))
    gates = _gates(runs, gate_rows, gate)
    shown = {Path(run.folder).resolve() for run in runs}
    absent = [cell for folder in folders for cell in cells_without_results(Path(folder), shown)]
    unread = [why for why in unread if not any(cell.startswith(why.split(":")[0] + ":") for cell in absent)]
    # below a folder of runs: the others without results (a failed run, a dry run); one unread is said above
    below = [run for folder in folders for run in folders_without_results(Path(folder), shown | unread_folders)]
    out = file_to_write(out, REPORT_FILE)
    check_folder_to_write(out.parent, f"the page {out.name}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with h.page_of_runs(len(runs)):  # the runs share the page's room for their units (report/html.py)
        page = render(runs, gates, absent, unread, below)
    out.write_text(page, encoding="utf-8")
    return out


def sweep_summary(sweep: str | Path, page: bool = True) -> list[str]:
    """A sweep's end: its grid (``grid_markdown``) written to ``grid.md`` and (``page``) its page to ``report.html``
    in its folder; the lines to print (the grid, the cells without results, where the files are). Nothing where the
    folder holds no run yet (a dry run's sweep)."""
    sweep = Path(sweep)
    runs = []
    for folder in run_folders(sweep):
        try:
            runs.append(read_run(folder))
        except ConfigError:  # a cell that left nothing readable: named below with the others without results
            pass
    if not runs:
        return []
    absent = cells_without_results(sweep, {Path(run.folder).resolve() for run in runs})
    grid = grid_markdown(runs) + ([""] if absent else []) + [f"No results: {cell}" for cell in absent]
    lines = []
    if grid:
        (sweep / GRID_FILE).write_text("\n".join(grid) + "\n", encoding="utf-8")
        lines = [f"posixlab: the sweep's grid ({len(runs)} runs; {sweep / GRID_FILE}):", *grid]
    if not page:
        return lines
    try:
        return lines + [f"posixlab: the sweep's page: {build_report([sweep], sweep / REPORT_FILE)}"]
    except PosixlabError as exc:  # a cell's folder the page cannot read: the grid stands, the page says what is wrong
        return lines + [f"posixlab: the sweep's page was not written: {exc}"]


def _gates(runs: list[Run], gate_rows, gate) -> list[list]:
    if gate is None:
        return [list(gate_rows or [])] + [[] for _ in runs[1:]]
    from posixlab.gate import check_gate

    out = []
    for run in runs:
        try:
            out.append(check_gate(run.summary, gate))
        except ConfigError as exc:
            raise ConfigError(f"{run.folder}: {exc}") from None
    return out


def headline(run: Run) -> str:
    """The run's one number as its task names it: "POSIX = 0.2921", "sensitivity S = 0.0982"."""
    value = run.task.headline(run.summary)
    return f"{run.task.headline_name} = {'n/a' if value is None else f'{value:.4f}'}"


def render(runs: list[Run], gates: list[list], absent: list[str] = (), unread: list[str] = (),
           below: list[str] = ()) -> str:
    """The page's HTML; ``absent``: the cells of the sweeps given that have no results (``cells_without_results``);
    ``unread``: the run folders found in a folder given that could not be read, each with why; ``below``: what has no
    results below a folder of runs and sweeps given (``folders_without_results``: a failed run, a dry run)."""
    several = len(runs) > 1
    title = ("PARTIAL · " if any(r.partial for r in runs) else "") + _title(runs)
    first_partial = next((r for r in runs if r.partial), None)  # its banner is the page's #partial
    body = [_banners(run, several, run is first_partial) for run in runs]
    missing = [f"{len(found)} {what}{'s' * (len(found) > 1)}{where} without results: "
               + "; ".join(h.esc(one) for one in found)
               for found, what, where in ((absent, "cell", " of the sweep"), (unread, "run folder", ""),
                                          (below, "folder", " below")) if found]
    if missing:
        body.insert(0, h.banner("<strong>Not on this page</strong>: " + "; ".join(missing), id="absent", kind="warn"))
    sections, values, paired, reads = [], [], [], {}
    plan = _pairing_plan(runs) if several else []  # from the summaries, before any records are read
    with records_read_once():  # each run's records read once for its sections, its values, its gate and pairing
        for n, (run, rows) in enumerate(zip(runs, gates)):
            prefix = "" if n == 0 else f"r{n + 1}-"
            sections.append(_gate(run, rows, prefix) + _sections(run, prefix))
            values.append(_values(run) if several else [])
            if any(n in pair[:2] for pair in plan):
                reads[n] = _pairing_values(run)
            for k, b, changed in plan:  # each pair once both its runs are read; a run's values kept while needed
                if max(k, b) == n and reads[k] is not None and reads[b] is not None:
                    paired.append((k + 1, b + 1, changed, _paired_result(reads[b], reads[k])))
            for j in [j for j in reads if not any(j in pair[:2] and max(pair[:2]) > n for pair in plan)]:
                del reads[j]
    paired.sort(key=lambda pair: pair[:2])
    back = ""
    if several:
        numbers = list(range(1, len(runs) + 1))
        grid = grid_section(runs, numbers, [f"run-{n}" for n in numbers])
        body.append(grid + _compare(runs, values, paired))
        back = ('<p class="small">' + ('<a href="#grid">↑ grid</a> · ' if grid else "")
                + '<a href="#compare">↑ runs compared</a></p>')  # a long page of runs: back to where they are listed
    for n, (run, inner) in enumerate(zip(runs, sections)):
        body.append(h.section(f"Run {n + 1}: {run.folder}", back + inner, id=f"run-{n + 1}", cls="run")
                    if several else inner)
    # several runs: run 1's result line would read as the page's; each run's is in its own section
    subtitle = f"{runs[0].folder} · {_about(runs[0])}" if not several else f"{len(runs)} runs compared"
    return h.page(f"posixlab report: {title}", title, "".join(body), subtitle=subtitle)


def _title(runs: list[Run]) -> str:
    """Each run's headline; a grid's page (more than ``HEADLINES`` runs): how many, and each task's range."""
    if len(runs) <= HEADLINES:
        return " · ".join(headline(r) for r in runs)
    ranges = []
    for task in dict.fromkeys(r.task for r in runs):
        values = [v for r in runs if r.task is task and (v := task.headline(r.summary)) is not None]
        ranges.append(f"{task.headline_name} {min(values):.4f} to {max(values):.4f}" if values
                      else f"{task.headline_name} n/a")
    return " · ".join([f"{len(runs)} runs", *ranges])


def _about(run: Run) -> str:
    try:
        return run.task.report_lines(run.summary)[0]
    except Exception:  # noqa: BLE001 (an older or partial summary the task's result line cannot read)
        return f"{run.task.name} run"


def _banners(run: Run, several: bool, first_partial: bool) -> str:
    where = f"{run.folder}: " if several else ""
    out = []
    if run.partial:
        of = f" of {run.units_planned}" if run.units_planned else ""
        out.append(h.banner(f"<strong>PARTIAL</strong> {h.esc(where)}this run stopped before its summary: "
                            f"{run.units_in}{of} {h.esc(run.task.unit_name)}s are in. Every number below is over "
                            f"those {h.esc(run.task.unit_name)}s only.", id="partial" if first_partial else None,
                            kind="warn"))
    for note in run.notes:
        out.append(h.banner(h.esc(where + note), kind="warn"))
    return "".join(out)


def _sections(run: Run, prefix: str) -> str:
    """The task's sections; where they cannot read this summary (an older one), the generic page and why."""
    try:
        return run.task.report_sections(run.folder, run.summary, prefix)
    except Exception as exc:  # noqa: BLE001 (the page still opens, and says what it cannot show)
        note = h.banner(h.esc(f"the {run.task.name} page cannot read this run's results ({type(exc).__name__}: "
                              f"{exc}); the generic view follows"), kind="warn")
        return note + Task.report_sections.__func__(run.task, run.folder, run.summary, prefix)


def _values(run: Run) -> list[float]:
    try:
        return run.task.report_values(run.folder, run.summary)
    except Exception:  # noqa: BLE001 (a run whose records the task cannot read has no distribution here)
        return []


def _compare(runs: list[Run], values: list[list[float]], paired: list) -> str:
    """The runs side by side, with the settings that differ between runs of one task; ``values``: each run's
    per-unit values (``_values``); ``paired``: (run number, its base's, what changed, ``posixlab.compare``'s result
    or None) of each pair of runs the page compares (``_pairing_plan``)."""
    named: dict[int, dict[str, str]] = {}
    differ: list[str] = []
    for task in dict.fromkeys(run.task for run in runs):
        mine = [i for i, run in enumerate(runs) if run.task is task]
        rows, names = task_settings(runs, mine)
        named.update(zip(mine, rows))
        differ += [name for name in names if name != "model" and name not in differ]
    rows = []
    for n, run in enumerate(runs, 1):
        s = run.summary
        model = model_name(s)
        rows.append([n, h.cell(None, h.esc(run.folder)), h.cell(None, h.esc(run.task.name)),
                     h.cell(None, h.esc(run.task.headline_name)), run.task.headline(s),
                     run.task.num_units(s) if not run.partial else run.units_in, h.cell(None, h.esc(model)),
                     h.cell(None, h.esc(s.get("dataset"))),
                     *(h.cell(None, h.esc(named[n - 1].get(name, ""))) for name in differ),
                     h.cell(None, "partial" if run.partial else "finished")])
    table = h.table([("run", "run"), ("folder", "folder"), ("task", "task"), ("metric", "headline"),
                     ("value", "value"), ("units", "units"), ("model", "model"), ("dataset", "data set"),
                     *((f"setting-{k}", name) for k, name in enumerate(differ)), ("state", "state")], rows,
                    id="compare-table")
    plots = []
    for task in dict.fromkeys(r.task for r in runs):  # one axis per task: ψ per set, S per sample, ...
        named = [(f"run {n}: {r.folder.name}", v) for n, (r, v) in enumerate(zip(runs, values), 1) if r.task is task]
        label = f"{task.report_value_name or task.headline_key.split('.')[0]} per {task.unit_name}"
        plots.append(f"<h3>{h.esc(label)}</h3>" + h.distributions(named, label=label))
    return h.section("Runs compared", table + "".join(plots)
                     + '<p class="small">A dot per unit (its value on hover); red bar: median; green diamond: '
                       "mean.</p>" + _paired(paired), id="compare")


def _pairing_plan(runs: list[Run]) -> list[tuple[int, int, str]]:
    """Which finished runs the page pairs item by item, (run, base, what changed) by position: per task, the runs
    that differ in one setting at most, the base at that setting's first value (the first with a finished run along
    the line, where a job failed), a rerun with its cell's first run (``grid.one_setting_pairs``: a grid read one
    factor at a time); where no two do (a before and after that changed two things), each later run with the task's
    first."""
    plan = []
    for task in dict.fromkeys(run.task for run in runs):
        mine = [i for i, run in enumerate(runs) if run.task is task and not run.partial]
        if len(mine) < 2 or task.name not in UNITS:
            continue
        rows, names = task_settings(runs, mine)
        pairs = [(k, b) for k, b, _ in one_setting_pairs(rows, names)] or [(k, 0) for k in range(1, len(mine))]
        for k, b in pairs:
            changed = ", ".join(f"{name} {rows[b][name]} → {rows[k][name]}" for name in names
                                if rows[k][name] != rows[b][name])
            plan.append((mine[k], mine[b], changed or "no setting"))
    return sorted(plan)


def _pairing_values(run: Run) -> tuple | None:
    """What ``posixlab.compare`` pairs a finished run by, from the records its page read (``records_read_once``: no
    second read), in unit order as ``compare.run_values`` reads them; None for a task compare does not read, or
    units that share an id."""
    units = UNITS.get(run.task.name)
    if units is None:
        return None
    try:
        values = checked_values(run.folder, units, [units.values(r) for r in run.task.read_unit_records(run.folder)])
    except PosixlabError:
        return None
    return run.folder, run.summary, units, judged_values(run.folder, run.summary, values)


def _paired_result(base: tuple, new: tuple) -> dict | None:
    try:
        return compare_values(base, new)
    except PosixlabError:  # no shared item
        return None


def _paired(paired: list) -> str:
    """Each planned pair of runs (``_pairing_plan``) on the items both hold (``posixlab compare``): the mean
    difference of each metric, its interval, Wilcoxon and Holm p and verdict; runs sharing no item named below."""
    compared, unpaired, notes = [], [], []  # (run, base, what changed, one metric's comparison); pairs sharing
    for n, base, changed, result in paired:   # nothing; what a pair left out (judged shares of one run only)
        if result is None:  # runs of other items (another seed, data set or sample)
            unpaired.append(f"{n} against {base} ({changed})")
            continue
        notes += [f"{n} against {base}: {note}" for note in result["notes"]]
        if result["paired_by"] != result["unit"]:  # no set in common: each question's set in one, in the other
            changed += f" (paired by {result['paired_by']})"
        if result.get("environment_changed"):  # "no setting" while the numbers moved: why (posixlab compare's line)
            changed += f"; ran differently: {environment_words(result['environment_changed'])}"
        compared += [(n, base, changed, m) for m in result["metrics"]]
    missing = ('<p class="small">Not paired, sharing no unit or item (another seed, data set or sample): '
               f"{h.esc('; '.join(unpaired))}.</p>") if unpaired else ""
    missing += f'<p class="small">{h.esc("; ".join(notes))}.</p>' if notes else ""
    if not compared:
        return missing
    rows = [[h.cell(n, f'<a href="#run-{n}">{n}</a>'), h.cell(base, f'<a href="#run-{base}">{base}</a>'),
             h.cell(None, h.esc(changed)), h.cell(None, h.esc(m["metric"])), h.cell(None, m["better"]), m["units"],
             m["base"], m["new"], m["difference"], h.cell(None, h.esc(interval_words(m["interval"]))),
             m["wilcoxon_p"], holm, h.cell(None, m["verdict"])]
            for (n, base, changed, m), holm in zip(compared, _holm_by_metric([m for *_, m in compared]))]
    table = h.table([("run", "run"), ("against", "against run"), ("changed", "what changed"), ("metric", "metric"),
                     ("better", "better"), ("units", "paired units"), ("base", "that run"), ("new", "this run"),
                     ("difference", "difference"), ("interval", "95% interval"), ("p", "Wilcoxon p"),
                     ("holm", "Holm p"), ("verdict", "verdict")], rows, id="paired-table")
    return ("<h3>Paired item by item</h3>" + table
            + '<p class="small">Each run against the run that differs from it in one setting only, at that '
              "setting's first value on the page (a sweep read one factor at a time: each model against the first, "
              "each variant type against the first, each shot count against the first; where that run failed, the "
              "first value that has a finished one), and a rerun against its cell's first run; where no two runs differ in one setting at most, each against the first run of its "
              "task. Each unit (set, sample) both runs hold: its "
              "value in this run minus that run's; the interval is an expanded percentile bootstrap of the mean "
              "difference (on 2 to 4 units, the t interval); worse or better when it excludes 0 (posixlab compare), "
              "each pair at 95% on its own. Holm "
              "p: the Wilcoxon p adjusted (Holm–Bonferroni) over the page's pairs of that metric: where nothing "
              "changed, a metric shows any Holm p under 0.05 on at most 5% of pages.</p>" + missing)


def _holm_by_metric(comparisons: list[dict]) -> list[float | None]:
    """Each comparison's Wilcoxon p adjusted by Holm's step-down over the comparisons of its metric (the page's
    family for that metric); None where a pair has no p (nothing moved)."""
    out: list[float | None] = [None] * len(comparisons)
    for metric in dict.fromkeys(m["metric"] for m in comparisons):
        at = [i for i, m in enumerate(comparisons) if m["metric"] == metric]
        pvalues = [p if isinstance(p, float) and math.isfinite(p) else None
                   for p in (comparisons[i]["wilcoxon_p"] for i in at)]
        for i, adjusted in zip(at, holm_adjust(pvalues)):
            out[i] = adjusted
    return out


def _gate(run: Run, rows: list, prefix: str) -> str:
    if not rows:
        return ""
    lines = []
    for row in rows:
        if row.threshold is None:
            threshold, value = "the run finished", h.esc(row.value)
        else:
            threshold = f"{'≤' if row.metric.startswith('max_') else '≥'} {row.threshold:g}"
            value = h.fmt(row.value)
        behind = "" if row.passed or row.threshold is None else _gate_detail(run, row, prefix)
        lines.append(f'<tr class="{"pass" if row.passed else "fail"}"><td>{h.esc(row.metric)}</td>'
                     f"<td><code>{h.esc(row.key)}</code></td><td>{h.esc(threshold)}</td><td>{value}</td>"
                     f'<td class="{"pass" if row.passed else "fail"}">{"pass" if row.passed else "FAIL"}</td>'
                     f"<td>{behind}</td></tr>")
    passed = all(r.passed for r in rows)
    table = ("<table><thead><tr><th>gate</th><th>summary key</th><th>threshold</th><th>value</th><th>result</th>"
             f"<th>behind a failure</th></tr></thead><tbody>{''.join(lines)}</tbody></table>")
    return h.section(f"Gate {'passed' if passed else 'FAILED'}", table, id="gate" if not prefix else f"{prefix}gate")


def _gate_detail(run: Run, row, prefix: str) -> str:
    try:
        return run.task.report_gate_detail(run.folder, run.summary, row, prefix)
    except Exception:  # noqa: BLE001 (the threshold's row is shown either way)
        return ""
