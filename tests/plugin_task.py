"""A task that lives outside the package, as a contributor's would: one module with a config dataclass and a ``Task``
subclass that registers itself when imported (``posixlab.tasks.register_task``), with no edit to posixlab.

**Agreement**: each unit is one question asked in several wordings; the model answers every wording, and the record
holds the share of wordings that give the most common answer. The summary's headline is the mean agreement; the gate
takes ``min_agreement``. It runs on any model that generates (tests/test_plugins.py: the test-only backend).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from posixlab.models.loading import ModelSpec, spec_from_dict
from posixlab.scoring.options import EngineOptions
from posixlab.tasks import register_task
from posixlab.tasks.base import GENERATE, Request, Task, Tracked, answer_texts, shared_settings

RECORDS = "questions.jsonl"


@dataclass
class AgreementConfig:
    model: ModelSpec
    questions: list[list[str]] = field(default_factory=list)  # each question, in its wordings
    max_new_tokens: int = 4
    seed: int = 0
    output_dir: str = "."
    cache_dir: str | None = None
    score_cache: bool = True
    score_cache_dir: str | None = None
    engine: EngineOptions = field(default_factory=EngineOptions)
    shard: str | None = None
    dry_run: bool = False


@register_task
class AgreementTask(Task):
    name = "agreement"
    config_type = AgreementConfig
    records_file = RECORDS
    index_key = "question_index"
    unit_name = "question"
    summary_keys = ("agreement", "num_questions")
    headline_name = "agreement"
    headline_key = "agreement.mean"
    gate_metrics = {"min_agreement": "agreement.mean"}
    task_settings = ("questions",)  # set on the command line as task.questions=... (defaults: AgreementConfig's)

    def check(self) -> None:
        if not self.cfg.questions or any(len(q) < 2 for q in self.cfg.questions):
            from posixlab.errors import ConfigError

            raise ConfigError("agreement: give questions, each in at least two wordings")

    def needs(self) -> dict[str, str]:
        return {GENERATE: "the answers"}

    def build_units(self, progress: bool) -> list:
        return list(self.cfg.questions)

    def requests(self, wordings: list[str], lm) -> list[Request]:
        return [Request(texts=list(wordings), ids=[], max_new_tokens=self.cfg.max_new_tokens)]

    def record(self, wordings: list[str], requests: list[Request], scores: list, lm) -> dict:
        answers = answer_texts(scores[0], lm)
        return {"wordings": wordings, "answers": answers,
                "agreement": Counter(answers).most_common(1)[0][1] / len(answers)}

    @classmethod
    def summarize(cls, records: list[dict], meta: dict) -> dict:
        values = [r["agreement"] for r in records]
        return {**meta, "num_questions": len(records),
                "agreement": {"mean": sum(values) / len(values), "min": min(values)}}

    @classmethod
    def write_summary(cls, folder: Path, summary: dict) -> None:
        (Path(folder) / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")

    @classmethod
    def config_from(cls, c: dict, output_dir: str) -> AgreementConfig:
        """From the command line's composed config: ``posixlab task=agreement 'task.questions=[[...], ...]'`` with
        ``POSIXLAB_PLUGINS=plugin_task`` (posixlab/plugins.py); the settings every task shares, those it has."""
        own = {f.name for f in fields(AgreementConfig)}
        shared = {key: value for key, value in shared_settings(c, output_dir).items() if key in own}
        return AgreementConfig(model=spec_from_dict(c["model"]), questions=c["task"]["questions"], **shared)

    @classmethod
    def tracked(cls, summary: dict, folder: Path) -> Tracked:
        return Tracked({"agreement": summary["agreement"]["mean"]}, artifact_type="agreement-results")


def as_dict(cfg: AgreementConfig) -> dict:
    return asdict(cfg)
