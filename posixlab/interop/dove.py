"""DOVE (Habba et al., 2025: "DOVE: A Large-Scale Multi-Dimensional Predictions Dataset Towards Meaningful LLM
Evaluation"): a posixlab MMLU run written as DOVE's evaluation records, and DOVE's records read into posixlab's
accuracy metrics, so that numbers can be compared on the same questions without running the other's models.

**Export** (``export_dove``, ``posixlab dove export RUN``): one record per prompt of every set, in the layout of DOVE's
``src/schema_validation/schema.json`` (SLAB-NLP/DOVE at 014654e; the fields it requires, its names, its enums):

- ``instance.sample_identifier``: ``cais/mmlu``, ``test``, the question's place in the hub's ``all`` split
  (``posixlab.data.mmlu.hub_index``): the index DOVE's own MMLU rows give, so a run and DOVE's rows join on it;
- ``prompt_config.dimensions``: the prompt's format as DOVE's dimensions. The paper's prompts (original, template,
  spelling and paraphrase variants) list the options in the data set's order as ``(A)...(D)`` joined by spaces:
  ``capitals``, ``"\\\\s"`` (DOVE's word for a space), order ``none``. A format variant
  (``posixlab.variants.format``) gives its own: enumerator ``A-D``/``1-4``/``a-d``/``i-iv`` as ``capitals``/
  ``numbers``/``lowercase``/``roman``, its separator, its option order as where the gold is shown
  (``posixlab_gold_at_1`` ... ``_4``), and two dimensions DOVE has not, ``mark_style`` (``A. text``) and
  ``casing`` (of ``Question:``/``Answer:``). ``instruction_phrasing.name`` is
  ``posixlab.<kind>.<index>`` (``posixlab.template.7``; the original ``posixlab.original``), which is also
  posixlab's prompt column: reading the file back by that name alone gives the run's own grid;
- ``instance.classification_fields``: the item's question, the options as this prompt shows them (order and labels)
  and the gold option with its label here;
- ``output``: the greedy response and the sum of its tokens' log-probabilities;
- ``evaluation``: ``score`` is the greedy response read as an answer (``posixlab.answers.read_choice``; unparsed is
  wrong), or with ``score="options"`` the option of highest log-likelihood; ``evaluation_method.parameters`` keeps
  both readings, and ``pred_text``, the text of the option picked (what ``read_dove`` compares answers by);
- ``model``: the run's model name (``<base>+<adapter>`` for an adapter), family where its name says it, the hub path
  and commit for a hub model, the context length from its config, the dtype as ``bit_precision``, greedy decoding;
- a top-level ``posixlab`` block (DOVE's schema allows more keys): the run, set, item, prompt index and kind, the
  set's ψ, so a record leads back to the run it came from.

Only MMLU runs are exported: DOVE's records are graded (``score`` 0-1) and name a hub question; Alpaca's answers are
not graded, and a file of your own questions names none.

**Read** (``read_dove``, ``dove_summary``, ``posixlab dove summary FILE...``): records in DOVE's schema (nested: an
export, DOVE's full files) or DOVE_Lite's flat rows (its hub files: ``dataset``, ``sample_index``, ``model``,
``dimensions_1: enumerator`` ... ``dimensions_5: shots``, ``closest_answer``, ``score``), from JSON (a list or one
record), JSON Lines or Parquet, become one grid per model and shot count: rows are questions (``dataset_name``,
split, ``hf_index``), columns are prompts, a prompt being one combination of the dimensions named in ``by`` (default:
instruction phrasing, enumerator, separator, choice order). Cells are ``evaluation.score``; answers are compared by
the text of the option picked (``pred_text``, or DOVE's ``closest_answer`` less its label), so the same option
under other labels and orders is the same answer. DOVE's published records name the dimensions without the ``mc_``
prefix its schema gives them (``enumerator``); both spellings are read. A question seen twice under one prompt is an
error naming the dimensions to add to ``by``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from pathlib import Path

from posixlab.errors import ConfigError, DatasetUnavailableError
from posixlab.interop.prompteval import is_prompteval, read_prompteval
from posixlab.paths import file_to_write
from posixlab.results import SETS_FILE, SUMMARY_FILE, iter_records, iter_records_in_order

OUT_FILE = "dove.jsonl"
DOVE_ENUMERATORS = {"A-D": "capitals", "1-4": "numbers", "a-d": "lowercase", "i-iv": "roman"}
DOVE_SEPARATORS = {" ": "\\s"}  # DOVE writes a space as "\s"; its other separators are written as they are
FAMILIES = (("llama", "Llama"), ("mistral", "Mistral"), ("olmo", "OLMo"), ("gemma", "gemma"), ("qwen", "Qwen"),
            ("falcon", "falcon"), ("gpt", "gpt"))  # DOVE's family enum, found in the model's name
PRECISION = {"float32": "float32", "float16": "float16"}  # bfloat16 is no quantisation DOVE lists: "none"
READ_METHOD = "posixlab_read_choice"
SCORES = ("greedy", "options")
DIMENSIONS = ("instruction_phrasing", "enumerator", "separator", "choices_order", "shots", "mark_style", "casing")
DEFAULT_BY = ("instruction_phrasing", "enumerator", "separator", "choices_order")


# --- export ----------------------------------------------------------------------------------------------------------
def export_dove(run_folder: str | Path, out: str | Path | None = None, *, score: str = "greedy",
                context_window: int | None = None) -> tuple[Path, int]:
    """Write the MMLU run in ``run_folder`` as DOVE records, one JSON object a line, to ``out`` (default
    ``<run>/dove.jsonl``). Returns (the file, the number of records), sets in the cell's order. The run, its data and
    its model are checked before a line is written; an error leaves no file."""
    if score not in SCORES:
        raise ConfigError(f"score={score!r}: choose greedy (the response read as an answer) or options (the option "
                          f"of highest log-likelihood)")
    folder = Path(run_folder)
    summary = _run_summary(folder)
    items = _mmlu_items(summary, folder)
    model = _model_block(summary, context_window)
    out = file_to_write(folder if out is None else out, OUT_FILE)  # a folder (by default the run's): the file in it
    count = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")  # a file a reader finds is whole; a failed export leaves none
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            for record in iter_records_in_order(folder, SETS_FILE, "set_index"):  # the cell's order, as its summary's
                for row in set_rows(record, items[record["item_id"]], model, summary, score, folder.name):
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                    count += 1
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out, count


def _run_summary(folder: Path) -> dict:
    if not (folder / SETS_FILE).is_file():
        raise ConfigError(f"{folder} holds no {SETS_FILE}: give the folder of a POSIX run")
    if not (folder / SUMMARY_FILE).is_file():
        raise ConfigError(f"{folder} holds no {SUMMARY_FILE}: a run that did not finish; run its command again to "
                          f"finish it (the sets it wrote are kept), then export")
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    if summary.get("task", "posix") != "posix" or summary.get("dataset") != "mmlu":
        raise ConfigError(f"{folder} is a {summary.get('task', 'posix')} run on {summary.get('dataset')}: only MMLU "
                          f"runs are exported to DOVE (its records are graded and name a question of cais/mmlu)")
    if "dataset" not in (summary.get("config") or {}):
        raise ConfigError(f"{folder}/{SUMMARY_FILE} keeps no run configuration (a run from before it did): run "
                          f"the cell again to export it")
    return summary


def _mmlu_items(summary: dict, folder: Path) -> dict:
    """The run's questions by item id, read again from its data set (records keep prompts, not options)."""
    from posixlab.data import DatasetSpec, load_items
    from posixlab.data.mmlu import hub_index
    from posixlab.tasks.base import read_setting

    spec = read_setting(dict(summary["config"]["dataset"]), DatasetSpec, "the run's dataset")
    wanted = {r["item_id"] for r in iter_records(folder, SETS_FILE)}
    items = {item.item_id: item for item in load_items(spec) if item.item_id in wanted}
    missing = sorted(wanted - set(items))
    if missing:
        raise DatasetUnavailableError(f"{len(missing)} of the run's questions are not in its data set as it loads now "
                                      f"(first: {missing[0]}); export with the data the run read")
    unplaced = sorted(i for i in items if hub_index(i) is None)
    if unplaced:
        raise ConfigError(f"{len(unplaced)} questions have no place in cais/mmlu's test split (first: {unplaced[0]}; "
                          f"MMLU ids read mmlu/<subject>/<index>): DOVE's records name the hub's question")
    if spec.split not in (None, "test"):  # hub_index places a question in the test split
        raise ConfigError(f"the run read MMLU's {spec.split!r} split: DOVE's MMLU records are the test split's, and "
                          f"hf_index is a place in it")
    return items


def _model_block(summary: dict, context_window: int | None) -> dict:
    from posixlab.tasks.base import model_name

    identity = summary["model"]
    name = model_name(summary)
    lower = name.lower()
    family = next((value for key, value in FAMILIES if key in lower), None)
    window = context_window if context_window is not None else _context_window(summary)
    backend = (summary.get("config", {}).get("model") or {}).get("backend", "transformers")
    return {
        "model_info": {"name": name, "family": family},
        "configuration": {"architecture": "transformer", "parameters": None, "context_window": window,
                          "hf_path": identity["path"] if identity.get("source") == "hub" else None,
                          "revision": identity.get("commit") or identity.get("revision")},
        "inference_settings": {
            "quantization": {"bit_precision": PRECISION.get(str(identity.get("dtype")), "none"), "method": "None"},
            "generation_args": {"use_vllm": backend == "vllm", "temperature": 0.0, "top_p": None, "top_k": None,
                                "max_tokens": int(summary["max_new_tokens"]), "stop_sequences": []}},
    }


def _context_window(summary: dict) -> int:
    """The model's context length from its config (a packaged or hub model's, from this machine's cache)."""
    from transformers import AutoConfig

    from posixlab.models.causal_lm import context_length
    from posixlab.models.loading import model_folder, spec_from_dict

    spec = spec_from_dict(summary["config"]["model"])
    hint = "give it with --context-window N (the model's maximum sequence length)"
    if spec.source not in ("packaged", "local", "hub") or spec.backend != "transformers":
        raise ConfigError(f"model {spec.name} runs on {spec.backend}: its context length is not read here; {hint}")
    try:
        folder, _, kwargs = model_folder(spec)
        length = context_length(AutoConfig.from_pretrained(folder, trust_remote_code=spec.trust_remote_code,
                                                           **kwargs))
    except Exception as exc:  # a model not on this machine any more, a hub that cannot be reached
        raise ConfigError(f"model {spec.name}'s config could not be read ({type(exc).__name__}: {exc}); {hint}") \
            from None
    if not length:
        raise ConfigError(f"model {spec.name}'s config names no context length; {hint}")
    return int(length)


def set_rows(record: dict, item, model: dict, summary: dict, score: str, run: str) -> list[dict]:
    """The DOVE records of one set record (``sets.jsonl``): one per prompt."""
    from posixlab.data.mmlu import hub_index

    subject, index = hub_index(record["item_id"])
    rows = []
    for j, (prompt, response, answer) in enumerate(zip(record["prompts"], record["responses"], record["answers"])):
        if response.get("asked") is False:  # prompt_share < 1: this prompt was not answered, so it has no record
            continue
        dims, shown = _dimensions(prompt, len(record["exemplars"]))
        choices = [{"id": label, "text": item.options[k]} for k, label in shown]
        gold_k = "ABCD".index(record["answer"])
        gold = next(c for (k, _), c in zip(shown, choices) if k == gold_k)
        greedy, options = answer["by_greedy"] or {}, answer["by_options"] or {}
        reading = greedy if score == "greedy" else options
        if reading.get("correct") is None:
            raise ConfigError(f"set {record['set_id']} prompt {j} has no {score} reading: export with "
                              f"--score {'options' if score == 'greedy' else 'greedy'}")
        picked = reading.get("pred")
        logprobs = response.get("generation_logprobs")
        evaluation_id = hashlib.sha256(json.dumps(
            [model["model_info"]["name"], summary.get("seed"), record["set_id"], j, prompt["text"]],
            ensure_ascii=False).encode()).hexdigest()
        rows.append({
            "evaluation_id": evaluation_id,
            "model": model,
            "prompt_config": {"prompt_class": "MultipleChoice", "dimensions": dims},
            "instance": {
                "task_type": "classification",
                "raw_input": prompt["text"],
                "language": "en",
                "sample_identifier": {"dataset_name": f"mmlu.{subject}", "hf_repo": "cais/mmlu", "hf_split": "test",
                                      "hf_index": index},
                "classification_fields": {"full_input": prompt.get("model_text") or prompt["text"],
                                          "question": item.question, "choices": choices, "ground_truth": gold},
            },
            "output": {"response": response["text"],
                       "cumulative_logprob": math.fsum(logprobs) if logprobs else None},
            "evaluation": {
                "evaluation_method": {
                    "method_name": READ_METHOD if score == "greedy" else "option_loglikelihood",
                    "description": ("the greedy response read as an option by posixlab.answers.read_choice (a label "
                                    "or an option's text; unparsed counts as wrong)" if score == "greedy" else
                                    "the option whose label, after the prompt, has the highest log-likelihood"),
                    "parameters": {"pred": picked, "pred_text": None if picked is None else
                                   item.options["ABCD".index(picked)],
                                   "greedy": greedy or None, "options": options or None}},
                "ground_truth": f"{gold['id']}. {gold['text']}",
                "score": 1.0 if reading["correct"] else 0.0},
            "posixlab": {"run": run, "set_id": record["set_id"], "item_id": record["item_id"], "prompt": j,
                         "kind": prompt["kind"], "variant_index": prompt["index"], "variant_type":
                         record["variant_type"], "psi": record.get("psi")},
        })
    return rows


def _dimensions(prompt: dict, shots: int) -> tuple[dict, list[tuple[int, str]]]:
    """DOVE's dimensions of one prompt, and the options as it shows them: (index in the item, label) per position."""
    kind, index, rec = prompt["kind"], prompt["index"], prompt.get("record") or {}
    name = "posixlab.original" if kind == "original" else f"posixlab.{kind}.{index}"
    if kind == "format":
        order = rec["option_order"]
        shown = list(zip(order, rec["option_labels"]))
        gold = rec.get("gold_position")
        where = "balanced" if gold is None else f"at_{gold + 1}"  # the gold's place, 1-4: position bias shows
        dims = {"instruction_phrasing": {"name": name, "text": rec["template"]}, "shots": shots,
                "mc_enumerator": DOVE_ENUMERATORS[rec["enumerator"]],
                "mc_separator": DOVE_SEPARATORS.get(rec["separator"], rec["separator"]),
                "mc_choices_order": {"method": f"posixlab_gold_{where}",
                                     "description": f"options shown in the order {order} of the data set's; over "
                                                    f"every 4 variants the gold is shown once at each position"},
                "mark_style": rec["mark_style"], "casing": rec["casing"]}  # posixlab's dimensions DOVE has not
        return dims, shown
    from posixlab.prompts import MCQ_ORIGINAL

    template = rec.get("template") if kind == "template" else MCQ_ORIGINAL
    dims = {"instruction_phrasing": {"name": name, "text": template}, "shots": shots, "mc_enumerator": "capitals",
            "mc_separator": "\\s", "mc_choices_order": {"method": "none", "description": "the data set's order"}}
    return dims, list(enumerate("ABCD"))


# --- read ------------------------------------------------------------------------------------------------------------
def read_dove(paths) -> list[dict]:
    """DOVE records from JSON (a list or one record), JSON Lines or Parquet files, in file order; a Parquet file of
    PromptEval's correctness (``posixlab.interop.prompteval``) as DOVE_Lite's rows."""
    rows = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: no such file")
        if path.suffix.lower() not in (".parquet", ".json", ".jsonl"):
            raise ConfigError(f"{path}: DOVE's records are a .json, .jsonl or .parquet file (posixlab dove export "
                              f"writes .jsonl), not {path.suffix or 'a file without a suffix'}")
        if path.suffix == ".parquet":
            import pandas as pd

            table = pd.read_parquet(path)
            if is_prompteval(table.columns):  # PromptEval's correctness: a row per template, a column per question
                rows += read_prompteval(path, table=table)
            else:
                rows += _plain(table.to_dict(orient="records"))
        elif path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            rows += data if isinstance(data, list) else [data]
        else:
            with open(path, encoding="utf-8") as handle:
                for n, line in enumerate(handle, 1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except json.JSONDecodeError as exc:
                            raise ConfigError(f"{path}, line {n}: not JSON ({exc.msg})") from None
    return rows


def _plain(value):
    """Parquet's values as JSON's: arrays as lists, nested structs as dicts (pandas gives numpy arrays)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [_plain(v) for v in value]
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


LITE_COLUMNS = {  # DOVE_Lite's flat columns (its hub files): dimension -> column
    "enumerator": "dimensions_1: enumerator", "separator": "dimensions_2: separator",
    "choices_order": "dimensions_3: choices_order", "instruction_phrasing": "dimensions_4: instruction_phrasing_text",
    "shots": "dimensions_5: shots"}


def _dimension(dims: dict, name: str):
    """A dimension as a hashable value, under either spelling (``mc_enumerator`` or ``enumerator``)."""
    value = dims.get(name, dims.get(f"mc_{name}"))
    if isinstance(value, dict):  # instruction_phrasing, choices_order: named by their name or method
        return value.get("name", value.get("method", value.get("text")))
    return value


def _option_text(answer: str | None, labels) -> str | None:
    """An answer written as DOVE writes options, ``"2. text"``, less its label: the option's text, the same under
    every enumerator. ``labels``: the prompt's labels when known (else any label of at most 4 characters).

    >>> _option_text("2. Paris", ["1", "2"]), _option_text("β. Paris", None), _option_text("Paris", None)
    ('Paris', 'Paris', 'Paris')
    """
    if answer is None or (isinstance(answer, float) and math.isnan(answer)):
        return None
    label, dot, rest = str(answer).strip().partition(". ")
    if dot and (label in labels if labels is not None else 0 < len(label) <= 4):
        return rest.strip()
    return str(answer).strip()


def _cell(row: dict) -> tuple:
    """(model, shots, question, dimensions, score, text of the option picked) of one record: DOVE's schema (nested, as
    an export writes it) or DOVE_Lite's flat columns."""
    if "prompt_config" in row:
        dims = row["prompt_config"]["dimensions"]
        ident = row["instance"]["sample_identifier"]
        question = (ident["dataset_name"], ident.get("hf_split") or "test", int(ident["hf_index"]))
        method = row["evaluation"].get("evaluation_method") or {}
        params = method.get("parameters") or {}
        choices = (row["instance"].get("classification_fields") or {}).get("choices")
        picked = params["pred_text"] if "pred_text" in params else _option_text(
            method.get("closest_answer"), None if choices is None else [c["id"] for c in choices])
        values = {d: _dimension(dims, d) for d in DIMENSIONS}
        return (row["model"]["model_info"]["name"], int(dims.get("shots", 0)), question, values,
                float(row["evaluation"]["score"]), picked)
    values = {d: row.get(column) for d, column in LITE_COLUMNS.items()}
    question = (row["dataset"], "test", int(row["sample_index"]))  # DOVE_Lite keeps no split: its MMLU is the test's
    return (row["model"], int(values["shots"] or 0), question, values, float(row["score"]),
            _option_text(row.get("closest_answer"), None))


def _cells(rows: list[dict]):
    """``_cell`` of every record, each checked: a record of another layout, or a score that is no correctness, is an
    error naming the record."""
    for n, row in enumerate(rows):
        try:
            cell = _cell(row)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"record {n} is neither a DOVE evaluation record nor a DOVE_Lite row (missing or bad "
                              f"{exc})") from None
        if cell[4] not in (0.0, 1.0):
            raise ConfigError(f"record {n} scores {cell[4]}: only correctness (1 or 0) is read, as DOVE gives for "
                              f"multiple-choice questions; keep the records of one such task")
        yield cell


def dove_grids(rows: list[dict], by=DEFAULT_BY) -> dict:
    """One grid per (model, shots): ``{"items": [...], "prompts": [...], "correct": [[...]], "preds": [[...]]}``,
    rows and columns in order of first appearance, None where a question was not asked under a prompt."""
    unknown = [b for b in by if b not in DIMENSIONS]
    if unknown or not by:
        raise ConfigError(f"by={','.join(by)}: name one or more of {', '.join(DIMENSIONS)}")
    cells = defaultdict(dict)  # (model, shots) -> {(question, prompt): (score, option text picked)}
    for model, shots, question, values, score, picked in _cells(rows):
        prompt = tuple(values[b] for b in by)
        if (question, prompt) in cells[model, shots]:
            rest = [d for d in DIMENSIONS if d not in by]
            raise ConfigError(f"question {question} is asked twice under the prompt {dict(zip(by, prompt))} "
                              f"({model}, {shots} shots): tell the prompts apart by more dimensions "
                              f"(by= adding one of {', '.join(rest)})")
        cells[model, shots][question, prompt] = (score, picked)
    grids = {}
    for group, found in cells.items():
        items = list(dict.fromkeys(i for i, _ in found))
        prompts = list(dict.fromkeys(p for _, p in found))
        grids[group] = {
            "items": items, "prompts": prompts,
            "correct": [[found.get((i, p), (None, None))[0] for p in prompts] for i in items],
            "preds": [[found.get((i, p), (None, None))[1] for p in prompts] for i in items],
        }
    return grids


def dove_summary(rows: list[dict], by=DEFAULT_BY, seed: int = 0, shared: bool = False) -> list[dict]:
    """posixlab's accuracy metrics (``posixlab.answers.accuracy_block``) of each (model, shots) grid of the rows.
    ``shared``: only the questions every grid has (and the prompts that still ask one), so that grids compare on the
    same questions: a posixlab run's sample beside DOVE's rows of the same subjects. Where a grid has unscored cells
    (DOVE samples the prompts each question gets), ``estimated`` adds each prompt's accuracy over all its questions
    as PromptEval estimates it (``posixlab.metrics.accuracy.estimated_accuracy_spread``): observed accuracies also
    measure which questions a prompt happened to get."""
    from posixlab.answers import accuracy_block
    from posixlab.metrics.accuracy import estimated_accuracy_spread

    grids = dove_grids(rows, by)
    if shared:
        common = set.intersection(*(set(g["items"]) for g in grids.values()))
        if not common:
            raise ConfigError(f"the {len(grids)} grids share no question: nothing to compare")
        grids = {group: _restricted(grid, common) for group, grid in grids.items()}
    out = []
    for (model, shots), grid in grids.items():
        filled = sum(c is not None for row in grid["correct"] for c in row)
        answered = any(p is not None for row in grid["preds"] for p in row)  # PromptEval's rows name no answer
        full = filled == len(grid["items"]) * len(grid["prompts"])
        out.append({"model": model, "shots": shots, "items": len(grid["items"]), "prompts": len(grid["prompts"]),
                    "cells": filled, "by": list(by),
                    **accuracy_block(grid["correct"], grid["preds"] if answered else None, seed,
                                     shared_prompts=_shares_prompts(grid)),
                    # a sampled grid (DOVE's): each prompt's accuracy over every question, PromptEval's estimate
                    "estimated": None if full else estimated_accuracy_spread(grid["correct"])})
    return out


def _shares_prompts(grid: dict) -> bool:
    """Whether each prompt of the grid is one prompt for every question, so the prompts can be compared (DOVE's and
    PromptEval's are); not for a posixlab run's export whose prompt j is each item's own variant
    (``posixlab.spelling.3``: a different misspelling of every question).

    >>> _shares_prompts({"prompts": [("posixlab.original",), ("posixlab.format.1",)]})
    True
    >>> _shares_prompts({"prompts": [("posixlab.original",), ("posixlab.spelling.1",)]})
    False
    """
    from posixlab.answers import SHARED_PROMPT_KINDS

    kinds = {value.split(".")[1] for prompt in grid["prompts"] for value in prompt
             if isinstance(value, str) and value.startswith("posixlab.")}
    return kinds <= {"original", *SHARED_PROMPT_KINDS}


def _restricted(grid: dict, keep: set) -> dict:
    """The grid's rows of the questions in ``keep``, and its columns that still have a cell."""
    rows = [n for n, item in enumerate(grid["items"]) if item in keep]
    cols = [j for j in range(len(grid["prompts"])) if any(grid["correct"][n][j] is not None for n in rows)]
    return {"items": [grid["items"][n] for n in rows], "prompts": [grid["prompts"][j] for j in cols],
            "correct": [[grid["correct"][n][j] for j in cols] for n in rows],
            "preds": [[grid["preds"][n][j] for j in cols] for n in rows]}


def dimension_accuracy(rows: list[dict], dimensions=("enumerator", "separator", "choices_order", "mark_style",
                                                      "casing", "instruction_phrasing")) -> list[dict]:
    """Accuracy per value of each format dimension, per (model, shots): which dimension moves the score (DOVE's and
    FormatSpread's question). Each value's accuracy is the mean score of the records that show it, over whatever the
    other dimensions were; where the values were drawn independently of each other and of the question (posixlab's
    format variants, a full grid), that is the dimension's effect averaged over the others. ``range`` is the best
    value's accuracy less the worst's.

    >>> rows = [{"dataset": "d", "sample_index": q, "model": "m", "dimensions_1: enumerator": e, "score": s}
    ...         for q, e, s in [(1, "capitals", 1), (1, "numbers", 0), (2, "capitals", 1), (2, "numbers", 1)]]
    >>> [(d["dimension"], d["values"], d["range"]) for d in dimension_accuracy(rows, ["enumerator"])]
    [('enumerator', [{'value': 'capitals', 'records': 2, 'accuracy': 1.0}, {'value': 'numbers', 'records': 2, \
'accuracy': 0.5}], 0.5)]
    """
    tally = defaultdict(lambda: defaultdict(list))  # (model, shots, dimension) -> value -> scores
    for model, shots, _, values, score, _ in _cells(rows):
        for dimension in dimensions:
            if values.get(dimension) is not None:
                tally[model, shots, dimension][values[dimension]].append(score)
    out = []
    for (model, shots, dimension), by_value in tally.items():
        found = [{"value": value, "records": len(scores), "accuracy": math.fsum(scores) / len(scores)}
                 for value, scores in by_value.items()]
        found.sort(key=lambda v: (-v["accuracy"], str(v["value"])))
        out.append({"model": model, "shots": shots, "dimension": dimension, "values": found,
                    "range": found[0]["accuracy"] - found[-1]["accuracy"]})
    return out


def dimension_table(effects: list[dict]) -> str:
    """``dimension_accuracy``'s result as a Markdown table, a row per value, best first."""
    lines = ["| model | shots | dimension (range) | value | records | accuracy |", "|---|---|---|---|---|---|"]
    for effect in effects:
        for value in effect["values"]:
            shown = str(value["value"]).replace("\n", "\\n")  # a newline separator, seen as DOVE writes a space: \s
            lines.append(f"| {effect['model']} | {effect['shots']} | {effect['dimension']} ({effect['range']:.3f}) | "
                         f"{str(shown).replace('|', '&#124;')[:60]} | {value['records']} | {value['accuracy']:.3f} |")
    return "\n".join(lines)


def summary_table(summaries: list[dict]) -> str:
    """The summaries as a Markdown table."""
    from posixlab.metrics.selection import best_set_words

    lines = ["| model | shots | questions | prompts | filled | accuracy | over prompts | estimated over all questions "
             "| within noise of the best (95%) | worst case | CPS | PSS | consistency |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"  # noqa: E731
    for s in summaries:
        size, est = s["items"] * s["prompts"], s.get("estimated")
        estimated = "as observed" if est is None else f"{fmt(est['mean'])}: {fmt(est['min'])} to {fmt(est['max'])}"
        lines.append(f"| {re.sub(r'[|]', '/', s['model'])} | {s['shots']} | {s['items']} | {s['prompts']} | "
                     f"{s['cells'] / size:.0%} | {fmt(s['accuracy'])} | {fmt(s['spread']['min'])} to "
                     f"{fmt(s['spread']['max'])} | {estimated} | {best_set_words(s.get('best_prompts'))} | "
                     f"{fmt(s['worst_case'])} | {fmt(s['cps'])} | "
                     f"{fmt(s['pss'])} | "
                     f"{fmt(s['consistency_rate'])} |")
    return "\n".join(lines)
