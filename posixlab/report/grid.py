"""A page of several runs as the grid they form: the settings that differ between runs of one task, and the
headline in a table per combination of the settings that are neither its rows nor its columns.

A sweep (``posixlab -m model=a,b variant=spelling,template shots=0,1``, a SLURM grid) is read back as the paper
prints it: rows are the models, columns the task's main setting (``Task.grid_columns``; POSIX: the variant type),
one table per number of shots (Tables 1 and 2 of the paper); the task's other measures fold under it (POSIX:
accuracy, its range over prompts and the consistency rate; classification: C and micro-F1, which with S make
Errica et al.'s Table 1). A run's settings are its model's name and the leaves of the configuration its summary
records (``summary["config"]``: what ``variant=template`` or ``dataset.name=alpaca`` set), less what does not change
a result's numbers (where files go, the engine's batch and memory options, a shard). Only the settings that differ
between the runs are shown; a value is shown as a Hydra override would write it.

Pure functions of the runs' summaries (no task is imported here; ``posixlab.report.build`` passes the runs).
"""

from __future__ import annotations

import json

from posixlab.compare import UNCOMPARED, flatten
from posixlab.report import html as h
from posixlab.tasks.base import UNRECORDED_METHOD, interval_unrecorded, model_name, summary_interval, summary_value

# besides where a run wrote (compare.UNCOMPARED): the engine's batch and memory options change no number, and the
# model is its name
NOT_SETTINGS = ("engine", "model")


def shown(value) -> str:
    """A setting's value as a Hydra override writes it.

    >>> shown(True), shown(None), shown(0.05), shown("template"), shown(["a", "b"])
    ('true', 'null', '0.05', 'template', '["a", "b"]')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=isinstance(value, dict))
    return str(value)


def settings(summary: dict, model: str | None) -> dict[str, str]:
    """A run's settings, by their dotted override names, from its summary: ``model`` (the model's name) first, then
    the configuration's leaves in its order.

    >>> settings({"config": {"variant": "template", "shots": 1, "output_dir": "x", "dataset": {"name": "mmlu"},
    ...                      "engine": {"batch_tokens": 4096}, "variant_options": {}}}, "gpt2")
    {'model': 'gpt2', 'variant': 'template', 'shots': '1', 'dataset.name': 'mmlu'}
    """
    out = {"model": shown(model)} if model is not None else {}  # a killed run's folder may not name it
    config = summary.get("config")
    for key, value in flatten(config if isinstance(config, dict) else {}).items():
        parts = key.split(".")
        if parts[0] not in NOT_SETTINGS and not set(parts) & UNCOMPARED:
            out[key] = shown(value)
    return out


def varying(rows: list[dict[str, str]], first: tuple[str, ...] = ()) -> list[str]:
    """The settings whose values differ between the ``rows`` that have them (a killed run's folder may hold none),
    ``model`` first, then those named in ``first``, then in the order the rows name them.

    >>> varying([{"model": "a", "shots": "0", "seed": "0"}, {"model": "a", "shots": "1", "seed": "1"}], ("seed",))
    ['seed', 'shots']
    >>> varying([{"model": "a", "shots": "0"}, {"model": "a"}])
    []
    """
    names = list(dict.fromkeys(name for row in rows for name in row))
    differ = [name for name in names if len({row[name] for row in rows if name in row}) > 1]
    order = ["model", *first]
    return sorted(differ, key=lambda name: (order.index(name) if name in order else len(order), names.index(name)))


def pivot_axes(names: list[str], columns: tuple[str, ...]) -> tuple[str, str | None, list[str]]:
    """(the rows' setting, the columns' setting or None, the settings that split the tables) for the varying
    settings ``names``: rows are the model when it varies, columns the first of ``columns`` that varies (else the
    next setting).

    >>> pivot_axes(["model", "variant", "shots"], ("variant",))
    ('model', 'variant', ['shots'])
    >>> pivot_axes(["shots", "seed"], ("variant",)), pivot_axes(["seed"], ())
    (('shots', 'seed', []), ('seed', None, []))
    """
    rows = "model" if "model" in names else names[0]
    rest = [name for name in names if name != rows]
    column = next((name for name in columns if name in rest), rest[0] if rest else None)
    return rows, column, [name for name in rest if name != column]


def task_settings(runs: list, mine: list[int]) -> tuple[list[dict[str, str]], list[str]]:
    """The settings of the runs ``mine`` (positions in ``runs``, all of one task) and those that differ between
    them; a run that lacks one of those (a killed run with no ``config.yaml``) has it as "—"."""
    rows = [settings(runs[i].summary, model_name(runs[i].summary)) for i in mine]
    names = varying(rows, tuple(runs[mine[0]].task.grid_columns)) if mine else []
    return [{**row, **{name: row.get(name, "—") for name in names}} for row in rows], names


def task_grids(runs: list):
    """Each task's grid on a page of ``runs``: (the task, its runs' positions, their settings, ``pivot_axes``), for
    each task with two runs or more that differ in a setting."""
    for task in dict.fromkeys(run.task for run in runs):
        mine = [i for i, run in enumerate(runs) if run.task is task]
        rows, names = task_settings(runs, mine)
        if len(mine) >= 2 and names:
            yield task, mine, rows, pivot_axes(names, tuple(task.grid_columns))


def grid_section(runs: list, numbers: list[int], sections: list[str]) -> str:
    """The "Grid" section of a page of several runs: per task with two runs or more that differ in a setting, the
    headline by rows and columns, one table per combination of the other settings, each value a link to its run's
    section (``sections[i]``: the id of run ``numbers[i]``'s); then, folded, the task's other measures
    (``Task.grid_extra``: accuracy, consistency, a judge's shares) that some of the runs have. Empty when no task has
    such runs."""
    out = []
    grids = list(task_grids(runs))
    for task, mine, rows, axes in grids:
        for n, (name, key, interval) in enumerate(task.grid_measures()):
            if n and all(summary_value(runs[i].summary, key) is None for i in mine):
                continue  # open-ended runs have no accuracy; a measure no run has is no table
            title = f"{name} by {axes[0]}" + (f" and {axes[1]}" if axes[1] else "")
            body = _tables(runs, mine, rows, axes, (name, key, interval), numbers, sections, headline=not n)
            out.append(f"<h3>{h.esc(title)}</h3>{body}" if not n else
                       f'<details class="measure"><summary>{h.esc(title)}</summary>{body}</details>')
    if not out:
        return ""
    return h.section("Grid", "".join(out) + '<p class="small">Each value links to its run below; * a partial run. '
                     "Only the settings that differ between the runs are named. Under a value: its 95% interval "
                     "where its run has one (the expanded percentile bootstrap over sets or samples that its run's "
                     "result line prints; an accuracy's two-way interval over items and prompts), and what its task "
                     "reads the headline against (POSIX: the paper's mean ± sd of ψ for the same model and setting). A "
                     f"headline's other measures (accuracy, consistency) open below it. {h.esc(_unrecorded_note(runs, grids))}"
                     "</p>", id="grid")


def grid_markdown(runs: list) -> list[str]:
    """The grid section's headline tables as Markdown lines (what a sweep prints at its end and writes to
    ``grid.md``): per task with two runs or more that differ in a setting, its headline by rows and columns, a table
    per combination of the other settings; each value with its 95% interval and what its task reads it against, "—"
    where no run is; a partial run's value starred. Empty when no task has such runs."""
    out = []
    grids = list(task_grids(runs))
    for task, mine, rows, (row_key, column_key, split) in grids:
        name, key, interval = task.grid_measures()[0]
        for combination in dict.fromkeys(tuple(row[n] for n in split) for row in rows):
            members = [(i, row) for i, row in zip(mine, rows) if tuple(row[n] for n in split) == combination]
            columns = list(dict.fromkeys(row[column_key] for _, row in members)) if column_key else [None]
            caption = "".join(f" · {n} = {value}" for n, value in zip(split, combination))
            out += ["", f"{name} by {row_key}" + (f" and {column_key}" if column_key else "") + caption, "",
                    "| " + " | ".join([row_key] + [f"{column_key} = {c}" if column_key else name for c in columns])
                    + " |", "|---" * (len(columns) + 1) + "|"]
            for row_value in dict.fromkeys(row[row_key] for _, row in members):
                cells = [" / ".join(_markdown_value(runs[i], key, interval) for i, row in members
                                    if row[row_key] == row_value and (column_key is None or row[column_key] == c))
                         or "—" for c in columns]
                out.append("| " + " | ".join([row_value, *cells]) + " |")
    note = _unrecorded_note(runs, grids)
    return out[1:] + (["", note] if note and out else [])


def _markdown_value(run, key: str, interval: str | None) -> str:
    """A run's value in a Markdown grid: the number (starred: a partial run), its interval, its task's note."""
    notes = [note for note in (_interval(run, interval, headline=True), run.task.grid_note(run.summary)) if note]
    return h.fmt(summary_value(run.summary, key)) + "*" * run.partial + "".join(f" {note}" for note in notes)


def _tables(runs: list, mine: list[int], rows: list[dict], axes: tuple, measure: tuple, numbers: list[int],
            sections: list[str], headline: bool) -> str:
    """A measure (``Task.grid_measures``) of the runs ``mine``: a table per combination of the settings that split
    them."""
    row_key, column_key, split = axes
    body = []
    for combination in dict.fromkeys(tuple(row[name] for name in split) for row in rows):
        members = [(i, row) for i, row in zip(mine, rows) if tuple(row[name] for name in split) == combination]
        caption = " · ".join(f"{name} = {value}" for name, value in zip(split, combination))
        body.append((f'<p class="small">{h.esc(caption)}</p>' if caption else "")
                    + _pivot(runs, members, axes, measure, numbers, sections, headline))
    return "".join(body)


def _pivot(runs: list, members: list[tuple[int, dict]], axes: tuple, measure: tuple, numbers: list[int],
           sections: list[str], headline: bool) -> str:
    row_key, column_key, _ = axes
    name, key, interval = measure
    row_values = list(dict.fromkeys(row[row_key] for _, row in members))
    column_values = list(dict.fromkeys(row[column_key] for _, row in members)) if column_key else [None]
    lines = []
    for row_value in row_values:
        line = [h.cell(None, h.esc(row_value))]
        for column_value in column_values:
            here = [i for i, row in members if row[row_key] == row_value
                    and (column_key is None or row[column_key] == column_value)]
            links = [f'<a href="#{h.esc(sections[i])}" title="run {numbers[i]}: {h.esc(runs[i].folder)}">'
                     f"{h.esc(h.fmt(summary_value(runs[i].summary, key)))}{'*' if runs[i].partial else ''}</a>"
                     for i in here]
            value = summary_value(runs[here[0]].summary, key) if len(here) == 1 else None
            # two runs of a cell: no interval here, each has its own in its section
            notes = [_interval(runs[here[0]], interval, headline)] if len(here) == 1 else []
            if headline and here:  # one cell: one setting, so one published value
                notes.append(runs[here[0]].task.grid_note(runs[here[0]].summary))
            line.append(h.cell(value, " / ".join(links) + "".join(f'<div class="small">{h.esc(note)}</div>'
                                                                 for note in notes if note)))
        lines.append(line)
    columns = [("row", row_key)] + [(f"c{n}", f"{column_key} = {value}" if column_key else name)
                                    for n, value in enumerate(column_values)]
    return h.table(columns, lines, cls="grid")


def _interval(run, key: str | None, headline: bool = False) -> str | None:
    """A run's interval at ``key`` as its grid cell writes it under the value ("[0.1234, 0.3456]"), where it has one;
    a headline's with † where the run records no method for it (``interval_unrecorded``; the other measures' intervals
    have never changed method)."""
    ci = None if key is None else summary_interval(run.summary, key)
    dagger = "†" if ci is not None and headline and interval_unrecorded(run.summary, key) else ""
    return None if ci is None else f"[{h.fmt(ci[0])}, {h.fmt(ci[1])}]{dagger}"


def _unrecorded_note(runs: list, grids: list) -> str:
    """The footnote for † (``_interval``) when the ``grids`` (``task_grids``) of ``runs`` show one; empty otherwise."""
    shown = any(interval_unrecorded(runs[i].summary, task.grid_measures()[0][2])
                for task, mine, _, _ in grids for i in mine)
    return f"† {UNRECORDED_METHOD}." if shown else ""


def one_setting_pairs(rows: list[dict[str, str]], names: list[str]) -> list[tuple[int, int, str | None]]:
    """The pairs of runs that differ in one setting at most, as a grid is read one factor at a time: (run, base, the
    setting), the base at that setting's first value on the page (a sweep's first model, variant type, shot count),
    for each run not at it; a run with the settings of an earlier one (a rerun of a cell) with the first such run,
    its setting None. In page order. Where the first value's run is missing along a line (a sweep's job that failed),
    the line's runs are paired with its first value that has one, so a failed job costs its own pairs only.

    >>> rows = [{"model": "a", "shots": "0"}, {"model": "a", "shots": "1"}, {"model": "b", "shots": "0"},
    ...         {"model": "b", "shots": "1"}, {"model": "a", "shots": "1"}]
    >>> one_setting_pairs(rows, ["model", "shots"])
    [(1, 0, 'shots'), (2, 0, 'model'), (3, 1, 'model'), (3, 2, 'shots'), (4, 1, None), (4, 0, 'shots')]
    >>> one_setting_pairs([{"model": "a", "shots": "0"}, {"model": "b", "shots": "1"}], ["model", "shots"])
    []

    Model a's 1-shot run failed: model c's is paired with model b's, the first model that has a 1-shot run.

    >>> rows = [{"model": m, "shots": s} for m, s in [("a", "0"), ("b", "0"), ("b", "1"), ("c", "0"), ("c", "1")]]
    >>> one_setting_pairs(rows, ["model", "shots"])
    [(1, 0, 'model'), (2, 1, 'shots'), (3, 0, 'model'), (4, 2, 'model'), (4, 3, 'shots')]
    """
    order = {name: list(dict.fromkeys(row[name] for row in rows)) for name in names}
    out = []
    for k, row in enumerate(rows):
        same = next((j for j in range(k) if all(rows[j][n] == row[n] for n in names)), None)
        if same is not None:
            out.append((k, same, None))
        for name in names:
            line = [j for j, other in enumerate(rows) if all(other[n] == row[n] for n in names if n != name)]
            base = min(line, key=lambda j: (order[name].index(rows[j][name]), j))  # the line's first value, first run
            if rows[base][name] != row[name]:
                out.append((k, base, name))
    return out
