"""``posixlab.classify``: a classifier's sensitivity and consistency under rephrased instructions (Errica et al.),
from Python, no Hydra and no W&B::

    import posixlab
    result = posixlab.classify("mmlu_letters", model="smollm2-135m-instruct", num_samples=20, num_rephrasings=5)
    result.sensitivity, result.consistency, result.micro_f1
    result.to_pandas()                 # one row per sample
    result.save("my_results/")         # the files a `posixlab task=classification` run writes
    posixlab.classify("my_task.yaml", model=...)   # your own classifier (posixlab/data/classifier_file.py)

It runs the same task through the same run skeleton as ``posixlab task=classification``, so the numbers are the same.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.rephrase import RephraserConfig
from posixlab.results import REPHRASINGS_FILE, SAMPLES_FILE, SUMMARY_FILE, RunResult, SetWriter, check_run_folder, \
    read_records
from posixlab.runner import run
from posixlab.scoring import EngineOptions
from posixlab.tasks.classification import CLASSIFIER, ClassificationConfig, ClassificationData, ClassificationTask

CLASSIFIER_SUFFIXES = (".yaml", ".yml", ".json")  # a str dataset ending so is your own classifier's file


@dataclass
class ClassificationResult(RunResult):
    """What ``classify`` computed: the summary, one record per sample (``samples.jsonl``) and the rephrasings."""

    rephrasings: dict = field(repr=False, default_factory=dict)

    def __repr__(self) -> str:
        c = "n/a" if self.consistency is None else f"{self.consistency:.4f}"
        return (f"ClassificationResult(sensitivity={self.sensitivity:.4f}, consistency={c}, "
                f"samples={len(self.records)}, model={self.summary.get('model', {}).get('name')!r})")

    @property
    def sensitivity(self) -> float:
        """S: the mean over samples of the entropy of p(y | x) over the rephrasings, over ln C (Errica et al.)."""
        return self.summary["sensitivity"]["mean"]

    @property
    def sensitivity_ci95(self) -> tuple[float, float] | None:
        """S's 95% expanded percentile bootstrap interval over the samples (seeded by the run's seed)."""
        ci = self.summary["sensitivity"].get("ci95")
        return None if ci is None else (ci[0], ci[1])

    @property
    def consistency(self) -> float | None:
        """C: the mean over classes of 1 - TVD between samples of the class; None without gold labels."""
        c = self.summary.get("consistency")
        return None if c is None else c["mean"]

    @property
    def consistency_ci95(self) -> tuple[float, float] | None:
        """C's 95% percentile bootstrap interval over the samples (pairs of copies of two different samples only);
        None without gold labels or a class of two samples."""
        ci = (self.summary.get("consistency") or {}).get("ci95")
        return None if ci is None else (ci[0], ci[1])

    @property
    def micro_f1(self) -> float | None:
        """micro-F1 averaged over the rephrasings (N/A counts as wrong); None unless every sample has a label."""
        f1 = self.summary.get("micro_f1")
        return None if f1 is None else f1["mean"]

    def to_pandas(self):
        """One row per sample: id, gold class, sensitivity, the predicted label per rephrasing."""
        import pandas as pd

        return pd.DataFrame([{"sample_id": r["sample_id"], "gold": r["gold"], "sensitivity": r["sensitivity"],
                              "labels": [p["label"] for p in r["predictions"]]} for r in self.records])

    def save(self, folder: str | Path) -> Path:
        """Write ``samples.jsonl``, ``rephrasings.json`` and ``summary.json``/``.md`` into ``folder``."""
        folder = Path(folder).expanduser()
        with SetWriter(folder, SAMPLES_FILE) as writer:
            for record in self.records:
                writer.write(record)
        (folder / REPHRASINGS_FILE).write_text(json.dumps(self.rephrasings, indent=1, ensure_ascii=False) + "\n",
                                               encoding="utf-8")
        ClassificationTask.write_summary(folder, self.summary)
        return folder


def classify(dataset: str | os.PathLike | ClassificationData = "mmlu_letters", model="smollm2-135m-instruct", *,
             strategy: str = "simple", num_samples: int | None = None, num_rephrasings: int = 30,
             probability: str = "greedy", task_sentence: str | None = None,
             rephraser: RephraserConfig | None = None, max_new_tokens: int = 10, seed: int = 0,
             chat_template: bool = False, cache_dir: str | None = None, score_cache: bool | None = None,
             engine: EngineOptions | None = None, shard: str | None = None, repeats: int = 1,
             variants: str = "sentence", structured_mode: str = "json_schema", schema_reasoning: str | None = None,
             schema_dimensions: tuple[str, ...] | None = None, schema=None,
             output_dir: str | Path | None = None, progress: bool = True) -> ClassificationResult:
    """Sensitivity, consistency and micro-F1 of ``model`` classifying ``dataset`` under ``num_rephrasings`` - 1
    rephrasings of the task sentence (plus the original).

    ``dataset``: a classification data set's name (``mmlu_letters`` offline; ``trec``, ``cb``, ``rte``,
    ``dbpedia14``, ``wos46985`` from the hub), your own classifier's file (a path ending in ``.yaml``, ``.yml`` or
    ``.json``: task sentence, classes, samples; ``posixlab/data/classifier_file.py``) or a ``ClassificationData``
    (a local copy: ``source="path"``; your own: ``name="classifier", path=...``). Without gold labels in the file,
    S is reported and C and micro-F1 are None (``summary["notes"]`` says so).
    ``model``: as ``posixlab.evaluate`` takes it (a name, a ``ModelSpec``, a loaded model), or a model behind a chat
    API: ``posixlab.chat_model("gpt-4o-2024-08-06")`` (OpenAI, ``$OPENAI_API_KEY``) or
    ``posixlab.chat_model("my-model", base_url="http://127.0.0.1:8080/v1")``. ``rephraser``: who writes the
    rephrasings (default: the packaged Qwen rephraser; ``RephraserConfig(backend="file", path=...)`` reads them).
    ``repeats``: every prompt sent R times, for the noise floor (``summary["noise_floor"]``). ``strategy="structured"``
    with ``variants="schema"``: schema variants instead of rephrasings (``structured_mode``, ``schema_reasoning``,
    ``schema_dimensions`` as ``task.*`` on the command line). ``schema``: your own, a Pydantic model class (its label
    a ``Literal`` or ``Enum`` of the data set's classes), its JSON schema (a dict) or a JSON schema file's path
    (``posixlab.structured.schema.read_schema`` says what is read); the schema variants vary it.
    """
    from posixlab.api import resolve_model

    if isinstance(dataset, os.PathLike) or isinstance(dataset, str) and \
            dataset.lower().endswith(CLASSIFIER_SUFFIXES):
        data = ClassificationData(name=CLASSIFIER, source="path", path=str(dataset), num_samples=num_samples,
                                  split=None)
    elif isinstance(dataset, str):
        data = ClassificationData(name=dataset, num_samples=num_samples,
                                  source="sample" if dataset == "mmlu_letters" else "hub")
    elif isinstance(dataset, ClassificationData):
        data = dataset if num_samples is None else ClassificationData(**{**asdict(dataset),
                                                                         "num_samples": num_samples})
    else:
        raise ConfigError(f"dataset must be a classification data set's name, a classifier file (.yaml, .yml, "
                          f".json) or a ClassificationData, not "
                          f"{type(dataset).__name__}")
    spec, lm = resolve_model(model, None)
    with tempfile.TemporaryDirectory(prefix="posixlab-") as scratch:
        out = Path(output_dir or scratch)
        cfg = ClassificationConfig(
            model=spec, data=data, strategy=strategy, num_rephrasings=num_rephrasings, task_sentence=task_sentence,
            probability=probability, max_new_tokens=max_new_tokens, seed=seed, chat_template=chat_template,
            output_dir=str(out), cache_dir=cache_dir, score_cache=lm is None if score_cache is None else score_cache,
            engine=engine or EngineOptions(), rephraser=rephraser or RephraserConfig(min_similarity=0.0), shard=shard,
            repeats=repeats, variants=variants, structured_mode=structured_mode, schema_reasoning=schema_reasoning,
            schema_dimensions=schema_dimensions, schema=_schema_data(schema))
        summary = run(cfg, lm=lm, progress=progress)
        records = read_records(out, SAMPLES_FILE, ClassificationTask.index_key)
        rephrasings = json.loads((out / REPHRASINGS_FILE).read_text(encoding="utf-8"))
    return ClassificationResult(summary=summary, records=records, rephrasings=rephrasings)


def _schema_data(schema):
    """A Pydantic model class becomes its JSON schema (the config holds data); a dict or a path stays as given."""
    from pydantic import BaseModel

    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return str(schema) if isinstance(schema, os.PathLike) else schema


def load_classification(folder: str | Path) -> ClassificationResult:
    """A saved classification run folder as a ``ClassificationResult``."""
    folder = Path(folder).expanduser()
    check_run_folder(folder, SAMPLES_FILE)
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    rephrasings = folder / REPHRASINGS_FILE
    return ClassificationResult(summary, read_records(folder, SAMPLES_FILE, ClassificationTask.index_key),
                                json.loads(rephrasings.read_text(encoding="utf-8")) if rephrasings.is_file() else {})


__all__ = ["ClassificationResult", "classify", "load_classification"]
