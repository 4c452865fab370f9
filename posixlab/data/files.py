"""Where a data set's rows come from: a local JSON, JSONL, CSV or Parquet file, or one split of a Hugging Face Hub data
set (whose own files are Parquet: a split copied from the hub is read as it is).

Both give plain dicts in the hub's field layout; each loader turns them into ``PromptItem``s. Failures are
``DatasetUnavailableError``s that say what to do: for the hub, how to supply a local copy instead.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from posixlab.errors import DatasetUnavailableError
from posixlab.hub import describe_hub_error, hub_endpoint, hub_offline_flag, hub_unreachable_reason
from posixlab.paths import shown

# A JSON file may wrap its records in an object: {"data": [...]} (exports), {"rows": [...]}, or {"examples": [...]}
# (the original BIG-Bench Hard repository's <task>.json files).
JSON_LIST_KEYS = ("data", "rows", "examples")
FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")  # what read_records reads


def read_records(path: Path) -> list[dict]:
    """Rows of a local JSONL, JSON (a list of objects, or an object holding one), CSV (with a header) or Parquet file
    (a hub data set's own file, e.g. ``cais/mmlu``'s ``all/test-00000-of-00001.parquet``: lists stay lists). A CSV file
    is separated by commas, or by semicolons or tabs where its header line holds no comma (``csv_delimiter``).

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "t.json"; _ = p.write_text('{"examples": [{"input": "1"}]}')
    >>> read_records(p)
    [{'input': '1'}]
    >>> import shutil; shutil.rmtree(p.parent)
    """
    given = str(path)
    path = Path(path).expanduser()
    if not path.is_file():  # owner/name with no file suffix: most likely a data set on the hub, meant as one
        hub = "" if given.count("/") != 1 or given.startswith((".", "/", "~")) or path.suffix else (
            f"; a data set on the Hugging Face Hub: dataset.source=hub dataset.path={given}")
        raise DatasetUnavailableError(f"no file at {shown(path)}; give an existing JSON, JSONL, CSV or Parquet file as "
                                      f"dataset.path{hub}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = []
            for n, line in enumerate(path.read_text(encoding="utf-8-sig").split("\n"), 1):
                try:
                    if line.strip():
                        rows.append(json.loads(line))
                except json.JSONDecodeError as exc:  # name the line: JSONL files are long and hand-edited
                    raise DatasetUnavailableError(f"{path}, line {n} is not valid JSON: {exc}") from None
            return rows
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8-sig"))
            if isinstance(data, list):
                return data
            for key in JSON_LIST_KEYS:
                if isinstance(data, dict) and isinstance(data.get(key), list):
                    return data[key]
            raise DatasetUnavailableError(
                f"{path}: expected a JSON list of records or an object with a list under one of "
                f"{', '.join(repr(k) for k in JSON_LIST_KEYS)}")
        if suffix == ".parquet":
            return parquet_rows(path)
        if suffix == ".csv":
            with open(path, newline="", encoding="utf-8-sig") as f:  # with or without a byte-order mark
                text = f.read()
            return list(csv.DictReader(io.StringIO(text, newline=""), delimiter=csv_delimiter(text)))
    except (json.JSONDecodeError, csv.Error, UnicodeDecodeError) as exc:
        raise DatasetUnavailableError(f"{path} could not be parsed as {suffix[1:].upper()}: {exc}") from None
    raise DatasetUnavailableError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json, .csv or .parquet")


def csv_delimiter(text: str) -> str:
    """The separator of a CSV file, read off its header line: a comma, or, where the header holds none, a semicolon or
    a tab, as a spreadsheet saves "CSV" where the decimal mark is a comma (Excel in most of Europe) or as TSV. Only
    the header decides (a question's own semicolons never do); a one-column header is comma-separated.

    >>> [csv_delimiter(h) for h in ("question,options,gold", "question;options;gold", "q\\tgold\\n1;2\\t3", "text")]
    [',', ';', '\\t', ',']
    >>> csv_delimiter('"a;b",c\\n')   # a comma in the header: comma-separated, however many semicolons
    ','
    """
    header = text.split("\n", 1)[0]
    if "," in header:
        return ","
    return max((";", "\t"), key=header.count) if (";" in header or "\t" in header) else ","


def hub_file_split(path) -> str | None:
    """The split a hub data set's file holds, read off its name (``<split>-00000-of-00001.parquet``), or None.

    >>> hub_file_split("all/test-00000-of-00001.parquet"), hub_file_split("quiz.parquet")
    ('test', None)
    """
    shard = re.match(r"^(.+?)-\d{5}-of-\d{5}$", Path(path).stem)
    return shard.group(1) if shard else None


def parquet_rows(path: Path) -> list[dict]:
    """A Parquet file's rows as plain dicts (pyarrow, which ``datasets`` installs)."""
    import pyarrow
    import pyarrow.parquet

    try:
        return pyarrow.parquet.read_table(path).to_pylist()
    except (pyarrow.ArrowException, OSError) as exc:
        raise DatasetUnavailableError(f"{path} could not be read as Parquet: {exc}") from None


def hub_rows(hub_id: str, configs: list[str | None], split: str, label: str, local_hint: str) -> dict:
    """``{config: rows}`` for one split of each config of a hub data set, or an error naming ``label``.

    The hub is asked once, up front, so that an unreachable hub fails in seconds rather than after ``datasets``'
    retries. With HF_HUB_OFFLINE set, ``datasets`` may still serve a cached copy, so it is tried; its failure is
    turned into the same message. ``local_hint`` says how to run from a local copy instead.
    """
    offline = hub_offline_flag()
    if not offline:
        reason = hub_unreachable_reason(hub_id)
        if reason:
            # the hub asked is named: with HF_ENDPOINT set it is a mirror, not huggingface.co
            raise DatasetUnavailableError(f"dataset {label} ({hub_id}) cannot be fetched: the Hugging Face Hub at "
                                          f"{hub_endpoint()} did not answer for it ({reason}). {local_hint}")
    import datasets

    out = {}
    for config in configs:
        try:
            out[config] = datasets.load_dataset(hub_id, config, split=split)
        except Exception as exc:  # noqa: BLE001 - missing cache, unknown split, network: all mean "not here"
            why = "HF_HUB_OFFLINE is set and it is not in the local cache; " if offline else ""
            what = f"{hub_id}" + (f", config {config}" if config else "") + f", split {split!r}"
            # a download that failed part way (a 500, a dropped connection) leaves no half-built data set: datasets
            # builds its Arrow cache only from complete files, so the next run downloads again
            raise DatasetUnavailableError(f"dataset {label} ({what}) cannot be loaded: {why}"
                                          f"{describe_hub_error(exc).rstrip('.')}. {local_hint}") from None
    return out
