"""``posixlab.evaluate_dataset``: POSIX of a data set's questions under a variant type, from Python, no Hydra::

    import posixlab
    result = posixlab.evaluate_dataset("mmlu_sample", "template", model="smollm2-135m-instruct", num_sets=20)
    result = posixlab.evaluate_dataset("quiz.csv", "spelling", fields={"question": "q", "choices": ["A", "B", "C", "D"],
                                                                         "answer": "gold"})

The twin of ``posixlab.evaluate``, which takes prompt sets as they are: here posixlab builds them from the questions,
as ``posixlab dataset=NAME variant=KIND`` does, and the numbers equal that command's, bit for bit.
A data set is named as the command line names it (``mmlu_sample``, ``mmlu``, ``alpaca``, ``bbh``,
``alpaca_selfinstruct``: their settings are read from ``posixlab/conf/dataset/``), or is your questions' file or hub
data set with ``fields`` naming their fields (``posixlab/data/questions.py``), or a ``DatasetSpec``.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path

from posixlab.api import EvaluationResult, _embedding, evaluated
from posixlab.data import DatasetSpec
from posixlab.data.questions import answer_length, data_name
from posixlab.errors import ConfigError
from posixlab.scoring import EngineOptions

_FILES = (".json", ".jsonl", ".csv")
_NOT_DATASET_KEYS = ("max_new_tokens", "experiment_sets", "num_sets", "task", "defaults")


def _conf(group: str, name: str) -> dict | None:
    import yaml

    path = resources.files("posixlab") / "conf" / group / f"{name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None


_ENV = re.compile(r"\$\{oc\.env:(\w+),([^}]*)\}")


def _dataset_conf(name: str) -> dict | None:
    """A data set's YAML as Hydra composes it, for the two things our data set YAMLs use: a defaults list of other
    data sets, then ``_self_`` (alpaca_selfinstruct is alpaca's settings with its own file), and an environment
    variable with a default (``${oc.env:POSIXLAB_SELFINSTRUCT,...}``)."""
    conf = _conf("dataset", name)
    if conf is None:
        return None
    merged = {}
    for parent in conf.pop("defaults", None) or []:
        if parent != "_self_":
            merged.update(_dataset_conf(parent) or {})
    merged.update(conf)
    return {key: _ENV.sub(lambda m: os.environ.get(m.group(1), m.group(2)), value) if isinstance(value, str) else value
            for key, value in merged.items()}


def named_datasets() -> list[str]:
    """The POSIX data sets named as on the command line (``dataset=NAME``) that ``evaluate_dataset`` reads by name."""
    folder = resources.files("posixlab") / "conf" / "dataset"
    names = sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".yaml"))
    return [n for n in names if (c := _dataset_conf(n)) and c.get("task", "posix") == "posix"
            and n not in ("prompt_sets", "questions")]


def dataset_spec(dataset, variant: str = "spelling", fields: dict | None = None) -> tuple[DatasetSpec, dict, int]:
    """(the ``DatasetSpec``, the variant type's options, the data set's response length) of ``dataset`` as
    ``evaluate_dataset`` takes it: a name (its YAML in ``posixlab/conf/dataset/``, with the variant type's own
    settings from ``posixlab/conf/variant/``, as the command line composes them), a questions file or hub data set
    with ``fields``, or a ``DatasetSpec``.

    >>> spec, options, tokens = dataset_spec("mmlu_sample", "paraphrase")
    >>> spec.name, spec.source, spec.max_question_chars, tokens   # the sample's questions with shipped paraphrases
    ('mmlu', 'sample', 130, 5)
    >>> spec, _, tokens = dataset_spec("allenai/ai2_arc", fields={"config": "ARC-Easy", "choices": "choices"})
    >>> spec.name, spec.loader, spec.source, spec.options["config"], tokens
    ('ai2_arc-ARC-Easy', 'questions', 'hub', 'ARC-Easy', 5)
    >>> dataset_spec(DatasetSpec("alpaca", source="path", path="my_alpaca.jsonl"))[2]   # Alpaca's 30 tokens
    30
    """
    variant_conf = _conf("variant", variant) or {}  # a plug-in variant type has none: no options
    options = dict(variant_conf.get("options") or {})
    if isinstance(dataset, DatasetSpec):  # its response length: its named data set's, or your questions' rule
        if dataset.loader == "questions":
            return dataset, options, answer_length(dataset.options.get("choices"))
        return dataset, options, (_dataset_conf(dataset.name) or {}).get("max_new_tokens", 5)
    name = str(dataset)
    named = named_datasets()
    if name in named:
        if fields:
            raise ConfigError(f"fields name the fields of your own questions; {name} is a data set posixlab reads "
                              f"itself: leave fields out")
        conf = _dataset_conf(name)
        tokens = conf["max_new_tokens"]
        conf = {k: v for k, v in conf.items() if k not in _NOT_DATASET_KEYS}
        for key, value in conf.items():  # ${oc.select:variant.KEY,null}: the variant type's setting, as Hydra reads it
            if isinstance(value, str) and value.startswith("${oc.select:variant."):
                conf[key] = variant_conf.get(value.removeprefix("${oc.select:variant.").split(",")[0])
        return DatasetSpec(**conf), options, tokens
    is_file = Path(name).suffix.lower() in _FILES
    if is_file or name.count("/") == 1 and not name.startswith((".", "/", "~")):
        fields = dict(fields or {})
        source = "path" if is_file else "hub"
        if is_file and not Path(name).expanduser().is_file():
            raise ConfigError(f"no file at {name}: give your questions' JSON, JSONL or CSV file")
        spec = DatasetSpec(data_name(name, fields.get("config")), loader="questions", source=source, path=name,
                           split=None, options=fields)
        return spec, options, answer_length(fields.get("choices"))
    close = difflib.get_close_matches(name, named, n=1)
    hint = {"prompt_sets": "your prompt sets, used as given, go to posixlab.evaluate(FILE_OR_LISTS)",
            "questions": "give your questions' file or hub data set itself, with fields={...}"}.get(name)
    raise ConfigError(f"dataset {name!r} is not one posixlab reads by name ({', '.join(named)}), a JSON, JSONL or CSV "
                      f"file of your questions, or a hub data set's id (owner/name)"
                      + (f"; {hint}" if hint else f"; did you mean {close[0]}?" if close else "")
                      + ("" if (_conf("dataset", name) or {}).get("task", "posix") == "posix" else
                         f"; {name} is a classification data set: posixlab.classify({name!r}, ...)"))


def evaluate_dataset(dataset="mmlu_sample", variant: str = "spelling", model="smollm2-135m-instruct", *,
                     fields: dict | None = None, num_sets: int | None = 20, num_variants: int = 20, shots: int = 0,
                     split: str | None = None, subjects: list[str] | None = None,
                     exemplar_split: str | None = None, variant_options: dict | None = None, tokenizer=None,
                     max_new_tokens: int | None = None, seed: int = 0, chat_template: bool = False,
                     cache_dir: str | None = None, score_cache: bool | None = None,
                     score_cache_dir: str | None = None, embedding="all-MiniLM-L6-v2",
                     engine: EngineOptions | None = None, output_dir=None, progress: bool = True,
                     judge=None) -> EvaluationResult:
    """POSIX of ``dataset``'s questions under ``variant`` (``spelling``, ``template``, ``paraphrase``, ``mixture``,
    ``format``, or a plug-in's): ``num_sets`` prompt sets of the original and ``num_variants`` variants each, drawn
    with ``seed``, with ``shots`` few-shot exemplars; then as ``posixlab.evaluate`` (greedy responses, the N×N
    scores, ψ per set and POSIX), with every keyword the command line's key of the same name.

    ``dataset``: a name (``mmlu_sample``, ``mmlu``, ``alpaca``, ``bbh``, ``alpaca_selfinstruct``;
    ``named_datasets()``), your questions' JSON, JSONL or CSV file or hub data set (``owner/name``) with ``fields``
    naming their fields (``question``, ``choices``, ``answer``, ``subject``, ``id``, and the hub's ``config``:
    ``posixlab/data/questions.py``), or a ``DatasetSpec``.
    ``split``, ``subjects`` and ``exemplar_split`` as ``dataset.``'s keys; ``variant_options`` as
    ``variant.options.``'s, over the variant type's configured ones (the mixture's ``kinds``, a plug-in type's
    constructor keywords); ``max_new_tokens`` None: the data
    set's (5 for multiple choice, 30 open-ended). ``model``, ``judge`` and the rest: as ``posixlab.evaluate``.
    Bad input raises ``posixlab.ConfigError`` before any model loads.
    """
    spec, options, tokens = dataset_spec(dataset, variant, fields)
    options.update(variant_options or {})
    given = {"split": split, "subjects": None if subjects is None else list(subjects), "exemplar_split": exemplar_split}
    spec = replace(spec, **{key: value for key, value in given.items() if value is not None})
    settings = dict(dataset=spec, variant=variant, variant_options=options, num_sets=num_sets,
                    num_variants=num_variants, shots=shots, max_new_tokens=tokens if max_new_tokens is None
                    else max_new_tokens, seed=seed, chat_template=chat_template, cache_dir=cache_dir,
                    score_cache_dir=score_cache_dir, engine=engine or EngineOptions(), embedding=_embedding(embedding))
    return evaluated(settings, model, tokenizer, score_cache=score_cache, output_dir=output_dir, progress=progress,
                     judge=judge)


__all__ = ["dataset_spec", "evaluate_dataset", "named_datasets"]
