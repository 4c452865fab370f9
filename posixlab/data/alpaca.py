"""Alpaca instructions as open-ended ``PromptItem``s: the hub's ``tatsu-lab/alpaca`` or a local file.

Sources. "hub" loads the one ``train`` split (52,002 rows with ``instruction``, ``input``, ``output``). "path" reads a
local JSON (a list, or ``{"data": [...]}``), JSONL or CSV file in that layout, or in the layout of Self-Instruct's
seed tasks, from which Alpaca was generated: ``instruction`` plus ``instances: [{"input", "output"}, ...]``; there
the first instance gives the input and output. There is no bundled sample: offline, a local copy is the user's to
supply.

Decisions.
- By default only instructions with an empty ``input`` are kept, so that the instruction alone is the prompt. The
  paper does not say how it treats inputs, but every Alpaca example it shows (App. F) is such an instruction.
  With ``include_inputs=True`` the others are kept too, and the question is the instruction, a blank line, then
  the input: the layout of Alpaca's own prompt (``### Instruction:`` / ``### Input:`` blocks).
- ``item_id`` is ``alpaca/<row index in the source>``, counted before filtering, so an item keeps its id whatever
  the filter and a run can be matched back to its row.
- ``answer`` is the reference output: it is not graded (``graded=False``: no accuracy), but it is what few-shot
  exemplars show.
- All qualifying items are returned; the paper's 5,000-instruction sample is drawn later (``num_sets``).
"""

from __future__ import annotations

import json
from pathlib import Path

from posixlab.data.files import hub_rows, read_records
from posixlab.errors import ConfigError, DatasetUnavailableError
from posixlab.prompts import PromptItem

HUB_ID = "tatsu-lab/alpaca"
SEED_TASKS = "selfinstruct_seed_tasks.jsonl"  # conf/dataset/alpaca_selfinstruct.yaml's default file name
LOCAL_HINT = ("To run offline, use a local copy: dataset.source=path dataset.path=<JSON/JSONL/CSV/Parquet file with "
              "fields instruction, input, output> (Self-Instruct's seed_tasks.jsonl layout also works).")


def _input_output(row: dict, where: str) -> tuple[str, str | None]:
    """The row's input and reference output, from the hub layout or Self-Instruct's ``instances`` list."""
    if "instances" in row:
        instances = row["instances"]
        if isinstance(instances, str):  # a CSV cell holds the list as JSON text
            try:
                instances = json.loads(instances)
            except json.JSONDecodeError as exc:
                raise DatasetUnavailableError(f"{where}: 'instances' is not a JSON list: {exc}") from None
        if not isinstance(instances, list) or (instances and not isinstance(instances[0], dict)):
            raise DatasetUnavailableError(f"{where}: 'instances' must be a list of {{input, output}} objects")
        first = instances[0] if instances else {}
        return str(first.get("input") or ""), first.get("output")
    return str(row.get("input") or ""), row.get("output")


def items_from_rows(rows, source: str, include_inputs: bool = False) -> list[PromptItem]:
    """Open-ended items from rows in the hub or Self-Instruct layout; see the module docstring for the filter.

    >>> rows = [{"instruction": " Name a colour. ", "input": "", "output": "Blue"},
    ...         {"instruction": "Translate.", "input": "chat", "output": "cat"}]
    >>> [(i.item_id, i.question, i.answer) for i in items_from_rows(rows, "doc")]
    [('alpaca/0', 'Name a colour.', 'Blue')]
    >>> items_from_rows(rows, "doc", include_inputs=True)[1].question
    'Translate.\\n\\nchat'
    """
    if not isinstance(include_inputs, bool):  # "false" from a hand-written override would otherwise be truthy
        raise ConfigError(f"dataset.options.include_inputs must be true or false, got {include_inputs!r}")
    items, total, with_input = [], 0, 0
    for n, row in enumerate(rows):
        total += 1
        where = f"{source}, record {n}"
        if not isinstance(row, dict) or "instruction" not in row:
            fields = ", ".join(row) if isinstance(row, dict) else type(row).__name__
            raise DatasetUnavailableError(f"{where}: no 'instruction' field (fields: {fields}); Alpaca records need "
                                          f"instruction, input, output (or Self-Instruct's instruction, instances)")
        instruction = str(row["instruction"] or "").strip()
        text, output = _input_output(row, where)
        text = text.strip()
        with_input += bool(text)
        if not instruction or (text and not include_inputs):
            continue
        question = f"{instruction}\n\n{text}" if text else instruction
        items.append(PromptItem(item_id=f"alpaca/{n}", question=question, options=(), subject=None,
                                answer=None if output is None else str(output),
                                meta={"source": source, "input": text}, graded=False))
    if not items:
        hint = (f"{with_input} of {total} rows have a non-empty input and are left out by default (as the paper's "
                f"examples are); set dataset.options.include_inputs=true to keep them"
                if with_input and not include_inputs else f"{total} rows read, none with a non-empty instruction")
        raise DatasetUnavailableError(f"no Alpaca instruction left in {source}: {hint}")
    return items


def load_alpaca(source: str = "hub", path: str | None = None, split: str = "train", subjects: list[str] | None = None,
                include_inputs: bool = False) -> list[PromptItem]:
    """Alpaca items. ``source`` is "hub" (``tatsu-lab/alpaca``) or "path" (a local JSON, JSONL, CSV or Parquet file)."""
    if subjects:
        raise ConfigError("Alpaca instructions have no subjects; leave dataset.subjects null")
    if source == "path":
        if not path:
            raise DatasetUnavailableError("dataset.source=path needs dataset.path=<a JSON, JSONL, CSV or Parquet file>")
        file = Path(path).expanduser()
        if not file.is_file() and file.name == SEED_TASKS:  # dataset=alpaca_selfinstruct on a machine without it
            raise DatasetUnavailableError(
                f"no file at {path}: dataset=alpaca_selfinstruct reads Self-Instruct's {SEED_TASKS} (175 tasks, "
                f"seed_tasks.jsonl in github.com/tatsu-lab/stanford_alpaca), which posixlab does not ship; point "
                f"POSIXLAB_SELFINSTRUCT (or dataset.path) at your copy")
        return items_from_rows(read_records(file), str(path), include_inputs)
    if source == "hub":
        rows = hub_rows(HUB_ID, [None], split, "Alpaca", LOCAL_HINT)[None]
        return items_from_rows(rows, f"{HUB_ID}:{split}", include_inputs)
    raise DatasetUnavailableError(f"unknown Alpaca source {source!r}; choose hub or path (there is no bundled sample)")
