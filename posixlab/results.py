"""The results of a run, as files a person can open; the one source of truth for every later table and figure.

A run folder holds:

- ``config.yaml``: the resolved configuration (written by the caller, e.g. ``run.py``);
- ``sets.jsonl``: one JSON record per prompt set, appended and flushed as each set finishes, so an interrupted run
  keeps every set it completed;
- ``summary.json`` and ``summary.md``: POSIX with mean, standard deviation, median, number of sets and a bootstrap
  95% interval, the mean of each factor, the model's identity and the run's compute accounting.

A classification run folder (``posixlab/tasks/classification/``) holds ``rephrasings.json``, ``samples.jsonl`` and its
own ``summary.json`` and ``summary.md`` (``"task": "classification"``; written by its ``summary.py``).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from posixlab.answers import accuracy_summary, shares_prompts
from posixlab.errors import ConfigError
from posixlab.rephrase.quality import describe_summary
from posixlab.metrics import psi_per_prompt, summarize
from posixlab.metrics.factors import FACTOR_NAMES, LOGPROB_FACTOR_NOTE
from posixlab.metrics.race import race_prompts
from posixlab.metrics.selection import best_set_words, choose_prompt, lowest_prompt_set
from posixlab.metrics.stats import bootstrap_ci, interval_method
from posixlab.metrics.where import most_moved_pair

SETS_FILE = "sets.jsonl"
SUMMARY_FILE = "summary.json"
# classification runs (posixlab/tasks/classification/) write these beside summary.json
SAMPLES_FILE = "samples.jsonl"
REPHRASINGS_FILE = "rephrasings.json"
SUMMARY_MD = "summary.md"
SCHEMA_VERSION = 1
TOP_SETS = 5  # the summary's "most_sensitive" sets


class SetWriter:
    """Appends one record per unit (a prompt set to ``sets.jsonl``, a sample to ``samples.jsonl``) and flushes it
    to disk at once, so an interrupted run keeps every unit it finished."""

    def __init__(self, folder: str | Path, name: str = SETS_FILE):
        self.path = Path(folder) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class RunResult:
    """What the Python API returns for a run (``posixlab.evaluate``, ``posixlab.classify``): its summary and one
    record per unit, as ``summary.json`` and ``sets.jsonl`` or ``samples.jsonl`` hold them."""

    summary: dict
    records: list[dict] = field(repr=False)


def iter_records(folder: str | Path, name: str, *, skip_unreadable: bool = False):
    """The records of a run folder's ``name`` file one at a time, in file order: a reader that keeps a little of
    each (a paper-sized cell's file is 0.5-0.9 GB, several times that as Python objects) holds only that.
    ``skip_unreadable``: leave out a line that is not JSON (a last line cut short by a run killed while writing)."""
    with open(Path(folder) / name, encoding="utf-8", newline="\n") as handle:  # lines end at "\n" alone
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                if skip_unreadable:
                    continue
                raise
            yield record


def check_run_folder(folder: Path, records_file: str) -> None:
    """A ``ConfigError`` saying what ``folder`` is where a run folder holding ``records_file`` and a summary was
    wanted (``posixlab.load_result``, ``load_classification``): missing, the other task's run, a sweep or folder of
    runs (which runs to load), or a run stopped before its summary.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / SAMPLES_FILE).write_text("")
    >>> check_run_folder(d, SETS_FILE)
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: ... is a classification run (samples.jsonl): posixlab.load_classification reads it
    >>> import shutil; shutil.rmtree(d)
    """
    folder = Path(folder)
    if (folder / records_file).is_file() and (folder / SUMMARY_FILE).is_file():
        return
    other = {SETS_FILE: (SAMPLES_FILE, "a classification run", "posixlab.load_classification"),
             SAMPLES_FILE: (SETS_FILE, "a POSIX run", "posixlab.load_result")}.get(records_file)
    runs = sorted({p.parent for depth in (1, 2, 3) for p in folder.glob("*/" * depth + SUMMARY_FILE)})
    if folder.is_file() and any((folder.parent / name).is_file() for name in (SUMMARY_FILE, SETS_FILE, SAMPLES_FILE)):
        said = f"{folder} is a file of a run: give its folder, {folder.parent}"
    elif not folder.is_dir():
        said = f"no folder at {folder}"
    elif other and (folder / other[0]).is_file():
        said = f"{folder} is {other[1]} ({other[0]}): {other[2]} reads it"
    elif (folder / records_file).is_file():
        said = (f"{folder} is a run that stopped before its {SUMMARY_FILE} (posixlab status says why; the units it "
                f"finished are in {records_file})")
    elif runs:
        said = (f"{folder} is no run but holds {len(runs)} below it (a sweep or a folder of runs): load each, e.g. "
                f"{runs[0]}")
    else:
        said = f"{folder} has no {records_file}: give a run folder written by posixlab"
    raise ConfigError(said)


def read_records(folder: str | Path, name: str, index_key: str, *, skip_unreadable: bool = False) -> list[dict]:
    """The records of a run folder's ``name`` file, in the order of their units in the cell (``index_key``);
    ``skip_unreadable`` as ``iter_records``."""
    # the engine finishes sets in order of prompt length; the file keeps that order, readers get the data set's
    return sorted(iter_records(folder, name, skip_unreadable=skip_unreadable), key=lambda r: r.get(index_key, 0))


def read_sets(folder: str | Path) -> list[dict]:
    return read_records(folder, SETS_FILE, "set_index")


def summary_records(folder: str | Path, name: str = SETS_FILE, index_key: str = "set_index", k: int = TOP_SETS,
                    skip_unreadable: bool = False) -> list[dict]:
    """The records ``build_summary`` reads, in the cell's order, without the texts it reads of its ``k`` most
    sensitive sets alone (``without_texts``); those ``k`` sets are read again, whole. The same summary as from
    ``read_records``, from a fraction of the memory: a paper-sized 0-shot MMLU cell's records held 1.8 GB whole (a
    3-shot cell's prompts are 4-5 times longer), and the summary is built at the end of every job and by
    ``posixlab merge`` on a login node. ``skip_unreadable``: as ``iter_records`` (a killed run's last line)."""
    records = sorted((without_texts(r) for r in iter_records(folder, name, skip_unreadable=skip_unreadable)),
                     key=lambda r: r.get(index_key, 0))
    top = {records[n].get(index_key) for n in _most_sensitive_order(records)[:k]}
    if top:
        whole = whole_records(folder, name, index_key, top)
        records = [whole.get(r.get(index_key), r) for r in records]
    return records


def whole_records(folder: str | Path, name: str, index_key: str, indices) -> dict:
    """The records of the units ``indices`` (their ``index_key``), whole, read again from the file: a line is parsed
    only when it is one of theirs (``line_index``)."""
    wanted, found = set(indices), {}
    with open(Path(folder) / name, "rb") as handle:
        for line in handle:
            index = line_index(line, index_key) if line.strip() else None
            if index in wanted:
                found[index] = json.loads(line)
    return found


def iter_records_in_order(folder: str | Path, name: str, index_key: str):
    """The records of ``name`` one at a time in the order of their units (``index_key``), as ``read_records`` gives
    them, holding one at a time: a first pass reads each line's index (``line_index``), a second reads the lines."""
    path = Path(folder) / name
    places, offset = [], 0
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                places.append((line_index(line, index_key) or 0, offset))
            offset += len(line)
        for _, start in sorted(places):
            handle.seek(start)
            yield json.loads(handle.readline())


@functools.lru_cache
def _index_first(index_key: str) -> re.Pattern:
    return re.compile(rb'\{"' + re.escape(index_key.encode()) + rb'": (\d+)[,}]')


def line_index(line: bytes, index_key: str) -> int | None:
    """A records file line's unit index: read from the line's start, where the runner writes it, without parsing
    the line (a set's record is 40-60 KB), else from the parsed record; None for a line that is not JSON (a killed
    run's last line, cut short).

    >>> line_index(b'{"set_index": 12, "psi": 0.5}\\n', "set_index")   # read from the start
    12
    >>> line_index(b'{"psi": 1, "set_index": 3}', "set_index"), line_index(b'{"set', "set_index")  # parsed; not JSON
    (3, None)
    """
    head = _index_first(index_key).match(line)
    if head is not None:
        return int(head.group(1))
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get(index_key) if isinstance(record, dict) else None


def _positions(shown: dict | None) -> dict:
    """What ``answers.position_rows`` reads of a prompt's variant record, where it says where the gold is shown."""
    if not shown or shown.get("gold_position") is None:
        return {}
    return {"record": {"option_order": shown["option_order"], "gold_position": shown["gold_position"]}}


def without_texts(record: dict) -> dict:
    """A set's record without what only its page's detail and the summary's most sensitive sets read: its prompts
    keep their kind and index (and a format variant's option order and gold position: position bias), its responses
    whether they ended with EOS, its answers their readings without the options' log-likelihoods, and its exemplars
    go (texts, chat turns, token ids)."""
    light = {key: value for key, value in record.items() if key not in ("prompts", "responses", "exemplars")}
    if "prompts" in record:
        light["prompts"] = [{"kind": p.get("kind"), "index": p.get("index"), **_positions(p.get("record"))}
                            for p in record["prompts"]]
    if "responses" in record:
        light["responses"] = [{"ends_with_eos": r.get("ends_with_eos")} for r in record["responses"]]
    if record.get("answers"):  # the readings' answers, not the options' log-likelihoods
        light["answers"] = [{reading: reading_answer if not isinstance(reading_answer, dict) else
                             {k: v for k, v in reading_answer.items() if k != "logprobs"}
                             for reading, reading_answer in answer.items()} for answer in record["answers"]]
    return light


def build_summary(records: list[dict], meta: dict) -> dict:
    if not meta.get("psi_computed", True):
        return build_answers_summary(records, meta)
    summary = {"schema_version": SCHEMA_VERSION, **meta}
    psis = [r["psi"] for r in records]
    interval = bootstrap_ci(psis, seed=meta.get("seed", 0), bounds=(0.0, None))  # ψ ≥ 0
    summary["psi"] = {**summarize(psis), "ci95": list(interval), "ci_method": interval_method(len(psis))}
    summary["factors"] = factor_means(records)
    summary["accuracy"] = accuracy_summary(records, seed=meta.get("seed", 0))
    summary["prompt_choice"] = prompt_choice(records, seed=meta.get("seed", 0))
    summary["most_sensitive"] = most_sensitive(records)
    summary["psi_reference_compat"] = {
        "label": "prompt-sensitivity-index 0.0.1 formula (transposed index, divided by max_new_tokens); not the paper's",
        **summarize([r["psi_reference_compat"] for r in records]),
    }
    stats = [r["stats"] for r in records]
    naive = sum(s["forward_tokens_naive"] for s in stats)
    engine = meta.get("engine", {})
    # what the run's engine really ran (in process: tokens through the model; on a server: the tokens of the requests
    # sent, each of which the server runs whole); older runs recorded only the per-set cost model
    ran = engine.get("forward_tokens")
    if ran is None:
        ran = sum(s["forward_tokens"] for s in stats)
    summary["compute"] = {
        "forward_tokens": ran,
        "engine": engine.get("kind", "in-process"),
        "forward_tokens_naive": naive,  # one full pass per (prompt, response) pair, as the authors' library
        # prefix caches, generation-pass diagonal, deduplication, response tries (what one pass per pair would have
        # run for the sets computed here, less what ran)
        "saved_by_reuse": sum(s["forward_tokens_naive"] for s in stats if not s["cached"]) - ran,
        # served from the score cache (what the in-process engine would have run for those sets)
        "saved_by_cache": sum(s["engine_tokens"] for s in stats if s["cached"]),
        "sets_from_cache": sum(bool(s["cached"]) for s in stats),
        **{k: v for k, v in engine.items() if k == "processed_tokens"},  # padding included
    }
    return summary


def build_answers_summary(records: list[dict], meta: dict) -> dict:
    """A run without ψ (``psi=false``: answers only, the only POSIX measurement a chat API allows): the
    accuracy block (per prompt, spread, worst case, consistency rate) and the held-out prompt choice by accuracy."""
    seed = meta.get("seed", 0)
    accuracy = accuracy_summary(records, seed=seed)
    race = race_summary(records, meta["config"], meta.get("race_sets_planned"), meta.get("race_reading", "greedy")) \
        if (meta.get("config") or {}).get("race_sets") else None
    if race is not None and accuracy is not None:  # a race asked what earlier answers chose: tests on its grid that
        for reading in ("by_options", "by_greedy"):  # ignore its looks promise nothing; the race's set does
            if accuracy.get(reading):
                accuracy[reading]["best_prompts"] = None
    return {"schema_version": SCHEMA_VERSION, **meta, "psi": None, "factors": None, "psi_reference_compat": None,
            "most_sensitive": None, "num_sets": len(records),
            "accuracy": accuracy, "prompt_choice": prompt_choice(records, seed=seed), "race": race,
            "compute": {"engine": meta.get("engine", {}).get("kind", "in-process"),
                        "forward_tokens": meta.get("engine", {}).get("forward_tokens"),
                        "processed_tokens": meta.get("engine", {}).get("processed_tokens")},
            "note": "psi=false: answers only (the greedy response, and each option's log-likelihood where the model "
                    "scores); no ψ or factors"}


def race_row(record: dict, reading: str = "greedy") -> list:
    """A set's answers as a race reads them (``reading``: options, greedy): 1/0 per prompt (an unparsed greedy answer
    is wrong), None where the set did not ask the prompt or has no gold answer."""
    key = f"by_{reading}"
    answers = record.get("answers") or [None] * len(record["prompts"])
    return [None if not a or not a.get(key) or a[key].get("correct") is None else int(a[key]["correct"])
            for a in answers]


def prompts_per_set(summary: dict) -> str:
    """A POSIX summary's N, as a headline writes it: one number, or the smallest to the largest where sets differ.

    >>> prompts_per_set({"num_prompts_per_set": 21}), prompts_per_set({"num_prompts_per_set": None,
    ...                                                                "num_prompts_range": [2, 4]})
    ('21', '2 to 4')
    """
    if summary.get("num_prompts_per_set"):
        return str(summary["num_prompts_per_set"])
    low_high = summary.get("num_prompts_range")
    return f"{low_high[0]} to {low_high[1]}" if low_high else "varies"  # a summary written before the range


def race_words(race: dict | None) -> str | None:
    """A prompt race (``race_summary``) in one line: what is left racing, what was dropped when, what was asked.

    >>> race = {"alive": [0, 1], "eliminated": [{"prompt": 2, "sets": 8}, {"prompt": 3, "sets": 8}],
    ...         "round_sets": 4, "looks": 4, "confidence": 0.95, "asked": {"cells": 48, "of": 64}}
    >>> for part in race_words(race).split("; "):
    ...     print(part)
    prompt race (greedy, rounds of 4 sets, 95%): prompts 0, 1 left (2 of 4)
    dropped 2 after 8 sets, 3 after 8 sets
    48 of 64 answers asked (75%)
    """
    if not race:
        return None
    width = len(race["alive"]) + len(race["eliminated"])
    dropped = ", ".join(f"{e['prompt']} after {e['sets']} sets" for e in race["eliminated"]) or "none"
    left = f"prompt{'s' if len(race['alive']) > 1 else ''} {', '.join(map(str, race['alive']))}"
    asked = race["asked"]
    return (f"prompt race ({race.get('reading', 'greedy')}, rounds of {race['round_sets']} sets, "
            f"{race['confidence']:.0%}): {left} left "
            f"({len(race['alive'])} of {width}); dropped {dropped}; {asked['cells']} of {asked['of']} answers asked "
            f"({asked['cells'] / max(1, asked['of']):.0%})")


def race_summary(records: list[dict], config: dict, planned: int | None = None, reading: str = "greedy") -> dict:
    """The race a run's records tell (records in the cell's order, the order the rounds asked them), with the run's
    ``race_sets`` and ``race_confidence``; ``planned``: the sets the run planned (its looks), default every record;
    ``reading``: what it compared (options, greedy)."""
    race = race_prompts([race_row(r, reading) for r in records], config["race_sets"], planned or len(records),
                        config.get("race_confidence", 0.95))
    return {**race, "reading": reading}


def prompt_choice(records: list[dict], seed: int = 0) -> dict | None:
    """For template and format variants (prompt j is one format for every item): the best and worst prompt by
    accuracy and by ψ (``psi_per_prompt``, lower is better), chosen on a seeded half of the sets and reported on the
    other half (``metrics/selection.py``). None for other variant types, with fewer than 2 sets, or where only a
    sample of each set's prompts was answered (``prompt_share``)."""
    if len(records) < 2 or not shares_prompts(records):
        return None
    if any("asked" in r for r in records):  # prompt_share < 1: a half asks a prompt a few times at most; the
        return None                         # estimated accuracies (summary's accuracy block) name the best instead
    first = records[0]["prompts"]
    out = {"prompts": [{"kind": p["kind"], "index": p["index"]} for p in first],
           "note": "chosen on the selection half of the sets, reported on the held-out half"}
    by_psi = None
    if all("logprob_matrix" in r for r in records):  # a run with ψ (psi=false keeps the answers only)
        rows = [r.get("psi_per_prompt") or psi_per_prompt(r["logprob_matrix"], r["lengths"]) for r in records]
        by_psi = choose_prompt(rows, higher_is_better=False, seed=seed)
        by_psi["within_noise"] = lowest_prompt_set(rows)  # the prompts the sets cannot tell from the least sensitive
    out["by_psi"] = by_psi
    for reading in ("by_options", "by_greedy"):
        rows = [[(a[reading] or {}).get("correct") for a in r["answers"]] for r in records if r.get("answers")]
        if len(rows) < 2 or all(c is None for row in rows for c in row):
            continue
        by_accuracy = choose_prompt([[None if c is None else float(c) for c in row] for row in rows], seed=seed)
        out[f"accuracy_{reading}"] = by_accuracy
        if by_psi is not None and len(rows) == len(records):  # the same halves: what the ψ choice scores
            held = by_accuracy["held_out_per_prompt"]
            by_psi[f"held_out_accuracy_{reading}"] = {"best": held[by_psi["best"]["prompt"]],
                                                      "worst": held[by_psi["worst"]["prompt"]]}
    return out


def most_sensitive(records: list[dict], k: int = TOP_SETS) -> list[dict]:
    """Where ψ comes from: the ``k`` sets with the highest ψ (ties to the lower set index), each with the prompt
    pair and response whose term of ψ is largest (``metrics.where.most_moved_pair``): prompt ``i`` scoring the
    response ``j`` of prompt ``j``, ``logp_i`` = log P(y_j | x_i), ``logp_j`` = log P(y_j | x_j), ``length`` = |y_j|
    in tokens, ``normalised_log_ratio`` = (logp_i − logp_j) / length (signed; its absolute value, ``term``, is what
    ψ averages). Texts in full, from the set records (``prompts[i].text``, ``responses[j].text``); read from
    records alone, so merged shards and rebuilt folders give the same list. A set with no pair (every response
    empty) keeps its ψ with ``i`` and ``j`` None."""
    out = []
    for n in _most_sensitive_order(records)[:k]:
        r = records[n]
        pair = most_moved_pair(r["logprob_matrix"], r["lengths"])
        entry = {"set_index": r.get("set_index", n), "set_id": r.get("set_id"), "psi": r["psi"]}
        if pair is None:
            out.append({**entry, "i": None, "j": None})
            continue
        i, j = pair["i"], pair["j"]
        prompts, responses = r.get("prompts") or [], r.get("responses") or []
        text = lambda items, m: items[m].get("text") if m < len(items) else None  # noqa: E731
        kind = lambda m: prompts[m].get("kind") if m < len(prompts) else None  # noqa: E731
        eos = responses[j].get("ends_with_eos") if j < len(responses) else None
        out.append({**entry, "i": i, "j": j, "kind_i": kind(i), "kind_j": kind(j), "prompt_i": text(prompts, i),
                    "prompt_j": text(prompts, j), "response_j": text(responses, j), "response_j_ends_with_eos": eos,
                    "logp_i": pair["logp_i"], "logp_j": pair["logp_j"], "length": pair["length"],
                    "normalised_log_ratio": pair["log_ratio"], "term": pair["term"]})
    return out


def _most_sensitive_order(records: list[dict]) -> list[int]:
    """Positions of the records by ψ, highest first, ties to the lower set index (records without ψ: none)."""
    if not records or records[0].get("psi") is None:
        return []
    return sorted(range(len(records)), key=lambda n: (-records[n]["psi"], records[n].get("set_index", n)))


def rebuild_summary(folder: str | Path) -> dict:
    """Recompute ``summary.json``/``summary.md`` of a POSIX run folder from its ``sets.jsonl`` (keeping the run's
    metadata), e.g. after posixlab gained a metric; no model is loaded. Returns the new summary."""
    folder = Path(folder)
    old = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    computed = ("schema_version", "psi", "factors", "psi_reference_compat", "compute", "accuracy", "prompt_choice",
                "most_sensitive")
    meta = {k: v for k, v in old.items() if k not in computed}
    meta.setdefault("engine", {})["processed_tokens"] = old.get("compute", {}).get("processed_tokens")
    summary = build_summary(summary_records(folder), meta)
    summary["compute"] = old.get("compute", summary["compute"])  # what the run did, not what a rebuild would
    write_summary(folder, summary)
    return summary


def factor_means(records: list[dict]) -> dict:
    """The mean of each factor over the sets that have it, and how many sets do (variance in confidence exists only
    for sets whose responses are all identical; semantic coherence only when responses were embedded)."""
    means = {}
    for name in FACTOR_NAMES:
        values = [r["factors"][name] for r in records if r.get("factors", {}).get(name) is not None]
        means[name] = {"mean": sum(values) / len(values) if values else None, "num_sets": len(values)}
    return means


def accuracy_table_lines(accuracy: dict | None, fmt) -> list[str]:
    """The accuracy block of ``summary.md``: one row per reading (options' log-likelihoods, parsed greedy answer)."""
    if not accuracy:
        return []
    lines = ["| accuracy from | mean over prompts (AvgP) | two-way 95% interval | min to max over prompts | sd over "
             "prompts | worst case | best case | CPS | consistency rate | PSS | prompts needed (ε 0.01, δ 0.1) | "
             "parse rate |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for reading, name in (("by_options", "options' log-likelihoods"), ("by_greedy", "greedy response, parsed")):
        b = accuracy.get(reading)
        if not b:
            continue
        ci = "n/a" if not b["ci95"] else f"{fmt(b['ci95'][0])} to {fmt(b['ci95'][1])}"
        parse = b.get("parse_rate", {}).get("overall")
        lines.append(f"| {name} | {fmt(b['accuracy'])} | {ci} | {fmt(b['spread']['min'])} to "
                     f"{fmt(b['spread']['max'])} | {fmt(b['spread']['sd'])} | {fmt(b['worst_case'])} | "
                     f"{fmt(b['best_case'])} | {fmt(b['cps'])} | {fmt(b['consistency_rate'])} | {fmt(b['pss'])} | "
                     f"{b['variants_needed']['n']} | {fmt(parse)} |")
    lines += ["", f"Accuracy over {accuracy['num_sets']} sets with a gold answer; {accuracy['note']}.", ""]
    best = [(name, accuracy[reading]["best_prompts"]) for reading, name in (("by_options", "options"),
            ("by_greedy", "greedy response")) if (accuracy.get(reading) or {}).get("best_prompts")]
    if best:  # template and format pools: which prompts the sets cannot tell apart from the best
        lines += [f"Within noise of the best prompt ({best[0][1]['confidence']:.0%}; exact paired McNemar tests, "
                  f"Bonferroni over the rivals): " + "; ".join(f"{name}: {best_set_words(b, True)}" for name, b in best)
                  + ".", ""]
    lines += position_bias_table_lines(accuracy.get("position_bias"), fmt)
    estimated = [(name, accuracy[reading]["estimated"]) for reading, name in (("by_options", "options"),
                 ("by_greedy", "greedy response, parsed")) if (accuracy.get(reading) or {}).get("estimated")]
    if estimated:  # prompt_share < 1: each prompt over every set, not only the sets that asked it
        lines += ["| estimated over every set (PromptEval's Rasch model) | cells asked | mean | min to max over "
                  "prompts | q05 / q50 / q95 | best prompt | worst prompt |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {e['scored']:.0%} | {fmt(e['mean'])} | {fmt(e['min'])} to {fmt(e['max'])} | "
                  f"{fmt(e['q05'])} / {fmt(e['q50'])} / {fmt(e['q95'])} | {e['argmax']} | {e['argmin']} |"
                  for name, e in estimated]
        lines.append("")
    return lines


def accuracy_lines(accuracy: dict | None) -> list[str]:
    """The same readings as ``accuracy_table_lines``, one printed line each, beside POSIX (what a job prints)."""
    lines = []
    for reading, name in (("by_options", "options"), ("by_greedy", "greedy")):
        b = (accuracy or {}).get(reading)
        if not b:
            continue
        parse = b.get("parse_rate", {}).get("overall")
        ci = f" (two-way 95% CI {b['ci95'][0]:.3f} to {b['ci95'][1]:.3f})" if b["ci95"] else ""
        lines.append(f"accuracy ({name}) = {b['accuracy']:.3f}{ci} · over prompts {b['spread']['min']:.3f} to "
                     f"{b['spread']['max']:.3f} · worst case {b['worst_case']:.3f} · CPS {b['cps']:.3f} · consistency "
                     f"{'n/a' if b['consistency_rate'] is None else format(b['consistency_rate'], '.3f')}"
                     + ("" if parse is None else f" · parsed {parse:.3f}"))
        if b.get("best_prompts"):
            lines.append(f"  within noise of the best ({b['best_prompts']['confidence']:.0%}): "
                         f"{best_set_words(b['best_prompts'], True)}")
        bias = ((accuracy or {}).get("position_bias") or {}).get(reading)
        if bias:
            lines.append(position_bias_line(bias))
        est = b.get("estimated")
        if est:  # prompt_share < 1
            lines.append(f"  estimated over every set ({est['scored']:.0%} of the cells asked): {est['mean']:.3f} · "
                         f"over prompts {est['min']:.3f} to {est['max']:.3f} · best prompt {est['argmax']}, worst "
                         f"{est['argmin']}")
    return lines


def position_bias_table_lines(bias: dict | None, fmt) -> list[str]:
    """Position bias in ``summary.md`` (format variants): per reading, accuracy by where the gold is shown, RStd and
    the picks against no preference (``posixlab.metrics.position``)."""
    readings = [(name, bias[reading]) for reading, name in (("by_options", "options' log-likelihoods"),
                ("by_greedy", "greedy response, parsed")) if (bias or {}).get(reading)]
    if not readings:
        return []
    lines = ["| position bias, from | format prompts (with the gold at 1, 2, ...) | accuracy with the gold shown at "
             "1, 2, ... | RStd | share of picks at 1, 2, ... | with no preference | χ² p |", "|---|---|---|---|---|---|---|"]
    for name, b in readings:
        p_value = "n/a" if b["p_value"] is None else f"{b['p_value']:.3g}"
        lines.append(f"| {name} | {b['prompts']} ({' / '.join(str(g['prompts']) for g in b['by_gold_position'])}) | "
                     f"{' / '.join(fmt(g['accuracy']) for g in b['by_gold_position'])} | {fmt(b['rstd'])} | "
                     f"{' / '.join(fmt(p['share']) for p in b['picks'])} | "
                     f"{' / '.join(fmt(p['expected']) for p in b['picks'])} | {p_value} |")
    return lines + ["", "Format variants show the gold option equally often at every position, so a model without "
                        "position bias is as accurate wherever it is shown and picks every position as often (RStd: "
                        "the sd of the accuracies over positions, Zheng et al. 2024; χ²: the picks against no "
                        "preference).", ""]


def position_bias_line(bias: dict) -> str:
    """Position bias, one printed line: accuracy by where the gold is shown, RStd, and the picks against uniform.

    >>> from posixlab.metrics.position import position_bias
    >>> position_bias_line(position_bias([(2, 0, 0, True), (2, 0, 1, False), (2, 1, 1, True), (2, 1, 1, True)]))
    '  by where the gold is shown (4 format prompts): accuracy 0.500 1.000 at 1, 2 · RStd 0.250 · picks 0.25 0.75 \
(no preference: 0.50 0.50) · χ² p 0.317'
    """
    fmt = lambda value, spec: "n/a" if value is None else format(value, spec)  # noqa: E731
    accuracy = " ".join(fmt(g["accuracy"], ".3f") for g in bias["by_gold_position"])
    picks = " ".join(fmt(p["share"], ".2f") for p in bias["picks"])
    expected = " ".join(fmt(p["expected"], ".2f") for p in bias["picks"])
    where = ", ".join(str(g["position"]) for g in bias["by_gold_position"])
    return (f"  by where the gold is shown ({bias['prompts']} format prompts): accuracy {accuracy} at {where} · RStd "
            f"{bias['rstd']:.3f} · picks {picks} (no preference: {expected}) · χ² p {fmt(bias['p_value'], '.3g')}")


def prompt_choice_lines(choice: dict | None, fmt) -> list[str]:
    """Best and worst prompt, chosen on half the sets, scored on the other half (``summary.md``)."""
    if not choice:
        return []
    lines = ["| chosen by (on the selection half) | best prompt | its held-out value | worst prompt | its held-out "
             "value | held-out best of all (oracle) | held-out mean |", "|---|---|---|---|---|---|---|"]
    for key, name in (("accuracy_by_options", "accuracy (options)"), ("accuracy_by_greedy", "accuracy (greedy)"),
                      ("by_psi", "ψ per prompt (lower is better)")):
        c = choice.get(key)
        if c and c.get("selection_tied"):  # no choice was made: every prompt scored the same on the selection half
            lines.append(f"| {name} | none: all {fmt(c['best']['selection'])} | | none | | "
                         f"{fmt(c['held_out_oracle_best']['held_out'])} | {fmt(c['held_out_mean'])} |")
        elif c:
            lines.append(f"| {name} | {c['best']['prompt']} | {fmt(c['best']['held_out'])} | {c['worst']['prompt']} | "
                         f"{fmt(c['worst']['held_out'])} | {fmt(c['held_out_oracle_best']['held_out'])} | "
                         f"{fmt(c['held_out_mean'])} |")
    psi_choice = choice.get("by_psi") or {}
    for reading in ("by_options", "by_greedy"):
        held = psi_choice.get(f"held_out_accuracy_{reading}")
        if held:
            lines.append(f"| ψ's choice, its held-out accuracy ({reading[3:]}) | {psi_choice['best']['prompt']} | "
                         f"{fmt(held['best'])} | {psi_choice['worst']['prompt']} | {fmt(held['worst'])} | | |")
    near = psi_choice.get("within_noise")
    if near:  # over every set, not a half: which prompts are as little sensitive as the least, within noise
        lines += ["", f"Within noise of the least sensitive prompt by ψ per prompt ({near['confidence']:.0%}; "
                      f"one-sided Wilcoxon signed-rank tests per pair, Bonferroni over the rivals): "
                      f"{best_set_words(near, True)}."]
    return lines + ["", "Prompt j is the j-th prompt of every set (0: the original); the halves are a seeded split "
                        "of the sets.", ""]


def most_sensitive_lines(top: list[dict] | None, fmt, limit: int = 200) -> list[str]:
    """The most sensitive sets of ``summary.md`` (``most_sensitive``): one row per set, its texts on one line each
    (line breaks shown as ⏎, pipes escaped, cut in the middle past ``limit`` characters)."""
    if not top:
        return []
    lines = ["Most sensitive sets (highest ψ). In each, prompt x_i scoring the response y_j that prompt x_j wrote, "
             "for the pair (i, j) whose term of ψ, |log P(y_j | x_i) − log P(y_j | x_j)| / |y_j|, is largest "
             "(prompt 0: the original; a negative log-ratio: x_i makes y_j less likely than x_j does; ⟨eos⟩: the "
             "response ended with the end-of-sequence token, which counts in |y_j|).", "",
             "| set | ψ | i, j | prompt x_i | prompt x_j | response y_j | log P(y_j\\|x_i) | log P(y_j\\|x_j) | "
             "\\|y_j\\| tokens | log-ratio per token |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in top:
        name = _md_cell(t.get("set_id") if t.get("set_id") is not None else t["set_index"], 40)
        if t.get("i") is None:
            lines.append(f"| {name} | {fmt(t['psi'])} | — | | | | | | | |")
            continue
        text = "" if t.get("response_j") is None else _md_cell(t["response_j"], limit)
        response = " ".join(x for x in (text, "⟨eos⟩" if t.get("response_j_ends_with_eos") else "") if x) or "—"
        lines.append(f"| {name} | {fmt(t['psi'])} | {t['i']}, {t['j']} | {_md_cell(t.get('prompt_i'), limit)} | "
                     f"{_md_cell(t.get('prompt_j'), limit)} | {response} | {fmt(t['logp_i'])} | {fmt(t['logp_j'])} | "
                     f"{t['length']} | {fmt(t['normalised_log_ratio'])} |")
    return lines + [""]


def _md_cell(text, limit: int) -> str:
    """Text fit for one Markdown table cell: line breaks as ⏎, pipes escaped; past ``limit`` characters, its start
    and its end around an ellipsis (a prompt's differences often sit at its end, after a shared subject line).

    >>> _md_cell("Q: a|b\\nA:", 200)
    'Q: a\\\\|b⏎A:'
    >>> _md_cell("x" * 10 + "y" * 10, 11)
    'xxx … yyyyy'
    """
    if text is None:
        return "—"
    text = str(text).replace("\r\n", "\n").replace("\n", "⏎").replace("\t", " ").strip()
    if len(text) > limit:
        keep = limit - 3
        text = f"{text[:keep * 2 // 5].rstrip()} … {text[len(text) - (keep - keep * 2 // 5):].lstrip()}"
    return text.replace("|", "\\|")


def write_summary(folder: str | Path, summary: dict) -> None:
    folder = Path(folder)
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    p, c = summary["psi"], summary["psi_reference_compat"]
    fmt = lambda v: "n/a" if v is None else f"{v:.4f}"  # noqa: E731
    if p is None:  # psi=false: the answers alone
        lines = [f"# Answers across prompts: {summary.get('model', {}).get('name', '?')}, "
                 f"{summary.get('dataset', '?')}, {summary.get('variant', '?')} variants", "",
                 f"{summary['num_sets']} prompt sets; {summary['note']}.", "",
                 *([f"{race_words(summary['race'])}: the prompts left are a {summary['race']['confidence']:.0%} set "
                    f"for the best by accuracy (posixlab.metrics.race).", ""] if summary.get("race") else []),
                 *accuracy_table_lines(summary.get("accuracy"), fmt),
                 *prompt_choice_lines(summary.get("prompt_choice"), fmt),
                 *paraphrase_quality_lines(summary.get("variant_details", {}).get("paraphrase_quality"))]
        (folder / SUMMARY_MD).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return
    interval = "n/a (one set)" if p["num_sets"] < 2 else f"{fmt(p['ci95'][0])} to {fmt(p['ci95'][1])}" + (
        f" ({p['ci_method']})" if p.get("ci_method") else "")
    lines = [
        f"# POSIX: {summary.get('model', {}).get('name', '?')}, {summary.get('dataset', '?')}, "
        f"{summary.get('variant', '?')} variants",
        "",
        "| metric | POSIX (mean ψ) | 95% interval over sets | sd | median | sets |",
        "|---|---|---|---|---|---|",
        f"| ψ (paper, Def. 3.3) | {fmt(p['posix'])} | {interval} | {fmt(p['sd'])} | "
        f"{fmt(p['median'])} | {p['num_sets']} |",
        f"| ψ (reference_compat, library 0.0.1) | {fmt(c['posix'])} | | {fmt(c['sd'])} | {fmt(c['median'])} | "
        f"{c['num_sets']} |",
        "",
        "| factor (paper §3.3) | mean over sets | sets |",
        "|---|---|---|",
        *[f"| {name} | {fmt(v['mean'])} | {v['num_sets']} |" for name, v in summary.get("factors", {}).items()],
        "",
        LOGPROB_FACTOR_NOTE,
        "",
        *accuracy_table_lines(summary.get("accuracy"), fmt),
        *prompt_choice_lines(summary.get("prompt_choice"), fmt),
        *most_sensitive_lines(summary.get("most_sensitive"), fmt),
        *paraphrase_quality_lines(summary.get("variant_details", {}).get("paraphrase_quality")),
        f"Forward tokens computed ({summary['compute'].get('engine', 'in-process')}): "
        f"{summary['compute']['forward_tokens']:,}; one pass per pair would need "
        f"{summary['compute']['forward_tokens_naive']:,}. Saved by reuse: {summary['compute']['saved_by_reuse']:,}; "
        f"by the score cache: {summary['compute']['saved_by_cache']:,} "
        f"({summary['compute']['sets_from_cache']} sets).",
    ]
    (folder / SUMMARY_MD).write_text("\n".join(lines) + "\n", encoding="utf-8")


def paraphrase_quality_lines(quality: dict | None) -> list[str]:
    line = describe_summary(quality)
    return [f"{line[0].upper()}{line[1:]} ({', '.join(f'{k} {v}' for k, v in quality['rules'].items())}).", ""] \
        if line else []


def choice_lines(choice: dict | None) -> list[str]:
    """The prompt chosen on half the sets, scored on the other half (template and format variants)."""
    lines = []
    for key, name in (("accuracy_by_options", "accuracy (options)"), ("by_psi", "ψ")):
        c = (choice or {}).get(key)
        if c and c["best"]["held_out"] is not None and c.get("selection_tied"):
            lines.append(f"prompt chosen by {name} on half the sets: none, every prompt scored "
                         f"{c['best']['selection']:.3f} there (mean of all prompts on the other half "
                         f"{c['held_out_mean']:.3f})")
        elif c and c["best"]["held_out"] is not None:
            lines.append(f"prompt chosen by {name} on half the sets: best {c['best']['prompt']}, worst "
                         f"{c['worst']['prompt']}; on the other half {c['best']['held_out']:.3f} and "
                         f"{c['worst']['held_out']:.3f} (mean of all prompts {c['held_out_mean']:.3f})")
    return lines


def api_lines(summary: dict) -> list[str]:
    """A chat run's requests, usage and cost, the noise floor and a stop at the budget, one line each."""
    lines = []
    floor = summary.get("noise_floor")
    if floor:
        fixed, equal = floor["fixed_prompt"], floor.get("rephrasings_at_equal_count")
        lines.append(floor.get("reading") or (
            f"noise floor (R = {floor['repeats']} repeats of each prompt): S = {fixed['sensitivity']:.4f}, flip rate "
            f"{fixed['flip_rate']:.3f}" + ("" if not equal else f"; rephrasings on equal counts: S = "
                                            f"{equal['sensitivity']:.4f}, flip rate {equal['flip_rate']:.3f}")
            + f" · {floor['stack_note']}"))
    api = summary.get("api")
    if api:
        usage = api["usage_sent"]
        cost = "" if api["cost_sent"] is None else f", cost {api['cost_sent']:.4f}"
        lines.append(f"requests: {api['requests_sent']} sent, {api['answers_from_cache']} from the cache · sent "
                     f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens{cost}")
    if summary.get("stopped"):
        lines.append(f"stopped early: {summary['stopped']}")
    return lines
