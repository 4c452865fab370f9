"""``posixlab merge OUT SHARD_FOLDER...``: join the folders of a ``shard=K/N`` sweep into one results folder, as one
run of the whole cell would have written it, for any task (``posixlab/shards.py`` says how a cell is cut).

Refuses shards of different cells (their config fingerprints differ), of different tasks, missing and duplicate
shards, and shards that stopped early, naming them.
"""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.paths import check_folder_to_write
from posixlab.results import SUMMARY_FILE, line_index
from posixlab.tasks import task_of_summary


def _task_type(summary: dict):
    try:
        return task_of_summary(summary)
    except ConfigError as exc:
        raise ConfigError(f"a shard's {SUMMARY_FILE}: {exc}") from None


def _check_one_cell(shards: list[tuple[Path, dict]]) -> None:
    """Refuse shards of different tasks or cells, cut in different numbers of pieces, missing or given twice."""
    tasks = {s.get("task", "posix") for _, s in shards}
    if len(tasks) > 1:
        raise ConfigError(f"these shards come from different tasks ({', '.join(sorted(tasks))})")
    fingerprints = {s["config_fingerprint"] for _, s in shards}
    if len(fingerprints) > 1:
        by = {}
        for folder, s in shards:
            by.setdefault(s["config_fingerprint"], []).append(str(folder))
        raise ConfigError("these shards come from different configurations and cannot be merged: " +
                          "; ".join(f"{fp}: {', '.join(names)}" for fp, names in by.items()))
    counts = {s["shard"]["count"] for _, s in shards}
    if len(counts) > 1:
        raise ConfigError(f"the shards were cut in different numbers of pieces ({sorted(counts)}); merge the shards "
                          f"of one shard=K/N sweep")
    count = counts.pop()
    seen: dict[int, Path] = {}
    for folder, s in shards:
        k = s["shard"]["index"]
        if k in seen:
            raise ConfigError(f"shard {k}/{count} is given twice: {seen[k]} and {folder}")
        seen[k] = folder
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        raise ConfigError(f"missing shard(s) {', '.join(f'{k}/{count}' for k in missing)}; run them (shard=K/{count}) "
                          f"or give their folders")


def _check_out(out: Path, folders: list[Path]) -> None:
    """Refuse an OUT that would overwrite a run: one of the shards (``posixlab merge s1 s1 s2``), or a folder holding
    a run of its own. A previous merge's folder is rewritten (merging again gives the same files)."""
    check_folder_to_write(out, "the merged run")
    if any(out.resolve() == folder.resolve() for folder in folders):
        raise ConfigError(f"the output folder {out} is one of the shards; write posixlab merge OUT SHARD... with a new "
                          f"folder first")
    summary = out / SUMMARY_FILE
    if summary.is_file():
        try:
            merged = "merged_from" in json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            merged = False
        if not merged:
            raise ConfigError(f"the output folder {out} holds a run of its own ({SUMMARY_FILE}); give a new folder "
                              f"(a previous merge's folder is rewritten)")


def _lines_in_cell_order(paths: list[Path], key: str) -> list[tuple[int, int, int, int]]:
    """Where each unit's record is: (its index in the cell, which file, byte offset, length), in the cell's order.
    Records are not kept (a paper-sized cell's are GBs as Python objects), nor parsed where the line starts with its
    index, as the runner writes them."""
    lines = []
    for n, path in enumerate(paths):
        offset = 0
        with open(path, "rb") as file:
            for number, line in enumerate(file, 1):
                if line.strip():
                    index = line_index(line, key)
                    if not isinstance(index, int):
                        raise ConfigError(f"{path}, line {number}: not a record with its {key} (a damaged file?); "
                                          f"run that shard again")
                    lines.append((index, n, offset, len(line)))
                offset += len(line)
    return sorted(lines)


def _copy_lines(lines: list[tuple[int, int, int, int]], paths: list[Path], out: Path) -> None:
    """Write the records' lines as they are (each shard wrote them as one run would), in the given order."""
    with ExitStack() as files:
        sources = [files.enter_context(open(path, "rb")) for path in paths]
        target = files.enter_context(open(out, "wb"))
        for _, n, offset, length in lines:
            sources[n].seek(offset)
            line = sources[n].read(length)
            target.write(line if line.endswith(b"\n") else line + b"\n")


def merge_shards(folders: list[str | Path], out: str | Path) -> dict:
    """Join shard folders into ``out`` (the records file, ``summary.json``/``.md``, ``config.yaml`` and the task's
    other files); returns the merged summary."""
    if not folders:
        raise ConfigError("give the shard folders to merge")
    shards = []
    for folder in map(Path, folders):
        path = folder / SUMMARY_FILE
        if not path.is_file():
            raise ConfigError(f"{folder} is not a finished run folder (no {SUMMARY_FILE})")
        summary = json.loads(path.read_text(encoding="utf-8"))
        if not (folder / _task_type(summary).records_file).is_file():
            raise ConfigError(f"{folder} is not a finished run folder (no {_task_type(summary).records_file})")
        if not summary.get("shard"):
            raise ConfigError(f"{folder} is not a shard (it was run without shard=K/N)")
        shards.append((folder, summary))
    _check_one_cell(shards)
    _check_out(Path(out), [folder for folder, _ in shards])
    shards.sort(key=lambda fs: fs[1]["shard"]["index"])
    task_type = _task_type(shards[0][1])
    paths = [folder / task_type.records_file for folder, _ in shards]
    lines = _lines_in_cell_order(paths, task_type.index_key)
    total = shards[0][1]["shard"]["num_units_total"]
    if [index for index, _, _, _ in lines] != list(range(total)):
        raise ConfigError(f"the shards hold {len(lines)} {task_type.unit_name}s, not the cell's {total} (a shard "
                          f"run stopped early?)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _copy_lines(lines, paths, out / task_type.records_file)
    first_folder, first = shards[0]
    meta = {k: v for k, v in first.items() if k not in (*task_type.summary_keys, "shard", "engine")}
    meta["config"] = {**first.get("config", {}), "shard": None}
    engines = [s.get("engine", {}) for _, s in shards]
    meta["engine"] = {"kind": engines[0].get("kind"),
                      **{k: sum(e.get(k) or 0 for e in engines) for k in ("forward_tokens", "processed_tokens")}}
    meta["merged_from"] = [str(folder) for folder, _ in shards]
    summary = task_type.summarize(task_type.summary_records(out), meta)
    task_type.write_summary(out, summary)
    for name in task_type.input_files:  # files about the inputs, the same in every shard
        if (first_folder / name).is_file():
            shutil.copyfile(first_folder / name, out / name)
    config = first_folder / "config.yaml"
    if config.is_file():  # the first shard's resolved config, as one run of the whole cell would have it
        import yaml

        resolved = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        resolved["shard"] = None
        (out / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True),
                                         encoding="utf-8")
    return summary
