"""The classification task (Errica et al., NAACL 2025): a unit is one sample, prompted with Q rephrasings of the task
sentence; the record holds every rephrasing's answer, its parsed class and the class distribution p(y | x), from
which the summary computes sensitivity, consistency and micro-F1. ``ClassificationConfig`` is its configuration.

p(y | x, ρ), two ways (``probability``): ``greedy`` (the paper's: the class the greedy answer names, one per
rephrasing) or ``label_probs`` (the model's probabilities of the class labels as the answer, normalised over the
classes; N/A gets none). The greedy answers are generated and kept in both modes, for auditing.

Besides the runner's files, a run folder holds ``rephrasings.json`` (the original task sentence first) and
``samples.jsonl`` (per sample: text, gold class, every rephrasing's answer and parse record, p(y | x), S_τ(x)).

One module per job: ``config`` (the settings and their checks), ``inputs`` (samples, classes, prompts, rephrasings,
schemas, requests), ``records`` (one sample's record), ``summary`` (the summary and ``summary.md``); the token-level
slot scores of structured answers are ``posixlab/structured/slots.py``'s.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from posixlab.data.classification import Sample
from posixlab.metrics.classification import NA
from posixlab.models.capabilities import STRUCTURED
from posixlab.results import REPHRASINGS_FILE, SAMPLES_FILE
from posixlab.structured.slots import slot_logprobs
from posixlab.tasks.base import GENERATE, SCORE, Request, Task
from posixlab.tasks.classification import app
from posixlab.tasks.classification.config import (CLASSIFIER, PROBABILITY_MODES, ClassificationConfig,
                                                  ClassificationData, check_settings, classifier_definition,
                                                  own_schema)
from posixlab.tasks.classification.inputs import (Inputs, build_inputs, build_requests, check, label_continuations,
                                                  label_tokens, load_data, rephrase, rephrasings_document,
                                                  structured_tokens)
from posixlab.tasks.classification.records import label_distribution, read_record
from posixlab.tasks.classification.summary import (ONE_CLASS_SHARE, answer_spread, build_classification_summary,
                                                   classification_accuracy, classification_summary_markdown,
                                                   write_classification_summary)


class ClassificationTask(Task):
    """The runner's steps, each delegated to its module. The order the runner keeps matters once: ``build_units``
    builds the run's ``inputs`` (classes, prompts' frame, rephrasings, schemas), which every later step reads, and
    ``prepare`` finds the class labels' tokens (``label_ids``, probability=label_probs) that ``requests`` attach to
    each request; a record reads them off its request, so ``record`` depends on no state but ``inputs``."""

    name = "classification"
    config_type = ClassificationConfig
    records_file = SAMPLES_FILE
    index_key = "sample_index"
    unit_name = "sample"
    in_order = True  # a sample's Q prompts are neighbours and share everything up to the task sentence
    summary_keys = ("sensitivity", "consistency", "micro_f1", "na_share", "answers", "accuracy", "num_samples",
                    "noise_floor", "structured", "notes")
    input_files = (REPHRASINGS_FILE,)
    # the command line, the gate and the tracker (app.py)
    headline_name = "sensitivity S"
    headline_key = "sensitivity.mean"
    grid_columns = ("data.name", "strategy")  # a page of runs: models by data set, a table per prompting strategy
    grid_extra = (("consistency C", "consistency.mean", "consistency.ci95"),  # with S, Errica et al.'s Table 1
                  ("micro-F1", "micro_f1.mean", None))
    gate_metrics = app.GATE_METRICS
    gate_guards = app.GATE_GUARDS
    gate_ranges = app.GATE_RANGES
    gate_missing = app.GATE_MISSING
    accuracy_readings = ("greedy",)  # classification runs score no options
    config_groups = ("strategy",)  # how the classifier is prompted (simple, detail, 1shot, structured)
    instead_of = {"task.num_sets": "its samples: dataset.num_samples",
                  "task.num_variants": "its prompts: task.num_rephrasings", "task.shots": "strategy=1shot",
                  "task.score_options": "task.probability=label_probs",
                  "variant": "the task sentence's rephrasings: task.num_rephrasings"}
    task_settings = ("num_rephrasings", "probability", "repeats", "variants", "structured_mode", "schema_reasoning",
                     "schema_dimensions", "schema", "task_sentence")

    def __init__(self, cfg: ClassificationConfig):
        super().__init__(cfg)
        self._inputs: Inputs | None = None  # build_units
        self.label_ids: list[list[int]] | None = None  # prepare: probability=label_probs, free-text answers
        self.finished_s: list[float] = []  # S of each sample finished so far (the progress bar's running mean)

    @property
    def inputs(self) -> Inputs:
        if self._inputs is None:
            raise RuntimeError("the classification task's inputs are built by build_units, which runs first")
        return self._inputs

    # what a run's inputs hold, by their old names (tests and notebooks read them after build_units)
    classes = property(lambda self: self.inputs.classes)
    aliases = property(lambda self: self.inputs.aliases)
    definition = property(lambda self: self.inputs.definition)
    frame = property(lambda self: self.inputs.frame)
    rephrasings = property(lambda self: self.inputs.rephrasings)
    schemas = property(lambda self: self.inputs.schemas)

    def check(self) -> None:
        check(self.cfg)

    def needs(self) -> dict[str, str]:
        if self.cfg.strategy == "structured":  # a chat API through instructor; in process and on vLLM, constrained
            # decoding (llguidance grammars, vLLM's structured_outputs)
            return {GENERATE: "the answers", STRUCTURED: "strategy=structured (a JSON object of the schema)"}
        if self.cfg.probability == "label_probs":
            return {GENERATE: "the answers", SCORE: "probability=label_probs (the class labels' log-probabilities)"}
        # the greedy answers need text only; the engines that run them today also score (label tokens unused)
        return {GENERATE: "the answers"}

    def build_units(self, progress: bool) -> list[Sample]:
        self._inputs, samples = build_inputs(self.cfg, progress)
        return samples

    def prepare(self, lm, units: list[Sample], out: Path) -> None:
        if not self.cfg.dry_run:  # a dry run writes nothing (its rephrasings may be placeholders)
            (out / REPHRASINGS_FILE).write_text(json.dumps(rephrasings_document(self.inputs), indent=1,
                                                           ensure_ascii=False) + "\n", encoding="utf-8")
        self.label_ids = label_tokens(self.cfg, self.inputs, units, lm)

    def requests(self, sample: Sample, lm) -> list[Request]:
        return build_requests(self.cfg, self.inputs, self.label_ids, sample, lm)

    def record(self, sample: Sample, requests: list[Request], scores: list, lm) -> dict:
        return read_record(self.cfg, self.inputs, sample, requests, scores, lm)

    def progress_note(self, record: dict) -> str:
        self.finished_s.append(record["sensitivity"])  # the running mean: what the summary's S will be so far
        return f"mean S = {np.mean(self.finished_s):.3f} over {len(self.finished_s)}"

    def describe(self) -> str:
        return f"{self.cfg.data.name} · {self.cfg.strategy}"

    def meta(self, lm) -> dict:
        cfg, own, inputs = self.cfg, self.inputs.definition, self.inputs
        # your own classifier: its name is the dataset's; classifier_file holds its path and sha256 (and its samples')
        mine = {"dataset": own.name, "dataset_source": "file", "classifier_file": own.describe()} if own else {}
        return {"task": "classification", "dataset": cfg.data.name, "dataset_source": cfg.data.source, **mine,
                "strategy": cfg.strategy, "probability": cfg.probability, "frame": inputs.frame.describe(),
                "max_new_tokens": cfg.max_new_tokens, "chat_template": cfg.chat_template,
                "label_tokens": self.label_ids, "classes": [*inputs.classes, NA],
                "num_rephrasings": len(inputs.rephrasings), "repeats": cfg.repeats, "variants": cfg.variants,
                "schema_dimensions": [v.dimension for v in inputs.schemas] or None,
                "schema_changes": [v.change for v in inputs.schemas] or None,
                "structured_mode": cfg.structured_mode if inputs.schemas else None}

    @classmethod
    def summarize(cls, records: list[dict], meta: dict) -> dict:
        return build_classification_summary(records, meta["classes"], meta["num_rephrasings"], meta)

    @classmethod
    def write_summary(cls, folder: Path, summary: dict) -> None:
        write_classification_summary(folder, summary)

    @classmethod
    def config_from(cls, c: dict, output_dir: str) -> ClassificationConfig:
        return app.config_from(c, output_dir)

    @classmethod
    def report_lines(cls, summary: dict) -> list[str]:
        return app.report_lines(summary)

    @classmethod
    def tracked(cls, summary: dict, folder: Path):
        return app.tracked(summary, folder)

    @classmethod
    def figures(cls, folder: Path) -> dict[str, Path]:
        return app.figures(folder)

    @classmethod
    def units_planned(cls, config: dict) -> int | None:
        return (config.get("dataset") or {}).get("num_samples")

    @classmethod
    def live_metrics(cls, records: list[dict]) -> dict:
        return app.live_metrics(records)

    # --- posixlab report (report.py) ----------------------------------------------------------------------------------
    report_value_name = "S"

    @classmethod
    def report_sections(cls, folder: Path, summary: dict, prefix: str = "") -> str:
        from posixlab.tasks.classification import report

        return report.sections(Path(folder), summary, cls.read_unit_records(folder), prefix)

    @classmethod
    def report_values(cls, folder: Path, summary: dict) -> list[float]:
        """S per sample."""
        from posixlab.tasks.classification import report

        return report.values(cls.read_unit_records(folder))

    @classmethod
    def report_gate_detail(cls, folder: Path, summary: dict, row, prefix: str = "") -> str:
        from posixlab.tasks.classification import report

        own = report.gate_detail(cls.read_unit_records(folder), summary, row, cls.unit_name, prefix)
        return super().report_gate_detail(folder, summary, row, prefix) if own is None else own

    @classmethod
    def partial_meta(cls, config: dict, folder: Path) -> dict:
        """The data set's classes (read from its definition: no model, no data), else those the records name."""
        from posixlab.tasks.classification import report
        from posixlab.data.classification import CLASSES

        meta = super().partial_meta(config, folder)
        try:
            cfg = cls.config_from(config, str(folder))
            definition = classifier_definition(cfg)
            classes = list(definition.classes if definition else CLASSES[cfg.data.name])
        except Exception:  # noqa: BLE001 (a config this posixlab cannot read; the records name the classes)
            classes = None
        return report.partial_meta(meta, config, cls.read_unit_records(folder), classes)

    @classmethod
    def final_metrics(cls, summary: dict) -> dict:
        out = {"S": (summary.get("sensitivity") or {}).get("mean")}
        if summary.get("consistency"):
            out["C"] = summary["consistency"].get("mean")
        return out


__all__ = ["CLASSIFIER", "ONE_CLASS_SHARE", "PROBABILITY_MODES", "ClassificationConfig", "ClassificationData",
           "ClassificationTask", "Inputs", "answer_spread", "build_classification_summary", "build_inputs", "check",
           "check_settings", "classification_accuracy", "classification_summary_markdown", "classifier_definition",
           "label_continuations", "label_distribution", "load_data", "own_schema", "rephrase", "slot_logprobs",
           "structured_tokens", "write_classification_summary"]
