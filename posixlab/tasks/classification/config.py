"""The classification task's configuration (``ClassificationConfig``, ``ClassificationData``) and its checks, run
before any model is loaded: the settings, the user's own schema, and the classifier file of ``dataset=classifier``."""

from __future__ import annotations

from dataclasses import dataclass, field

from posixlab.backends import backend_of
from posixlab.classification_prompts import STRATEGIES
from posixlab.data.classification import CLASSES
from posixlab.data.classifier_file import ClassifierDefinition, load_classifier
from posixlab.errors import ConfigError, check_field_types, is_whole, nearest
from posixlab.models import ModelSpec
from posixlab.models.capabilities import SLOT_SCORES, TOOLS
from posixlab.rephrase import RephraserConfig
from posixlab.scoring import EngineOptions
from posixlab.shards import parse_shard
from posixlab.tasks.base import check_max_new_tokens

PROBABILITY_MODES = ("greedy", "label_probs")
CLASSIFIER = "classifier"  # dataset=classifier: your own classifier from one file (posixlab/data/classifier_file.py)


@dataclass
class ClassificationData:
    name: str = "mmlu_letters"  # trec | cb | rte | dbpedia14 | wos46985 | mmlu_letters
    source: str = "sample"  # hub | path (| sample: mmlu_letters only)
    path: str | None = None
    split: str | None = None  # None: the data set's default (test)
    num_samples: int | None = None  # None: every sample
    balanced: bool = False  # a class-balanced draw of num_samples (DBPedia, WoS: 2,000, seed 42)
    sample_seed: int = 42
    exemplar_path: str | None = None  # labelled data for the 1-shot examples; None: the evaluated file's rest
    exemplar_split: str | None = None  # hub: the split the 1-shot examples come from (None: the same split)
    options: dict = field(default_factory=dict)  # dbpedia14: classes_path

    def __post_init__(self):  # dataset.* is a free-form node: its kinds are checked where the config is read
        check_field_types(self, "dataset")


@dataclass
class ClassificationConfig:
    model: ModelSpec
    data: ClassificationData = field(default_factory=ClassificationData)
    strategy: str = "simple"  # simple | detail | 1shot
    num_rephrasings: int = 30  # Q: the original task sentence plus Q - 1 rephrasings
    task_sentence: str | None = None  # None: the data set's (posixlab/data/classifiers/<name>.yaml)
    probability: str = "greedy"  # greedy | label_probs
    max_new_tokens: int = 10
    seed: int = 0  # the 1-shot examples' draw, the bootstrap intervals
    chat_template: bool = False
    output_dir: str = "."
    cache_dir: str | None = None
    score_cache: bool = True
    score_cache_dir: str | None = None
    engine: EngineOptions = field(default_factory=EngineOptions)
    # no similarity threshold for task sentences: conf/task/classification.yaml says why
    rephraser: RephraserConfig = field(default_factory=lambda: RephraserConfig(min_similarity=0.0))
    shard: str | None = None  # "K/N": the K-th of N slices of the samples (posixlab/shards.py)
    repeats: int = 1  # R: every prompt sent R times; R >= 2 gives the noise floor (the same prompt, answered again)
    # strategy=structured: the answer is a JSON object of a schema built as instructor builds it (posixlab/structured/)
    variants: str = "sentence"  # what the Q prompts vary: sentence (the task sentence's rephrasings) | schema
    structured_mode: str = "json_schema"  # instructor's mode: json_schema | json | tools
    schema_reasoning: str | None = None  # None | before | after: a reasoning field beside the label
    schema_dimensions: tuple[str, ...] | None = None  # variants=schema: the dimensions varied; None: all that apply
    # your own schema: a JSON schema file's path (CLI: task.schema=FILE.json) or the schema itself (a dict; Python:
    # classify(schema=MyModel)); its label field's classes must be the data set's. None: built from the data set
    schema: str | dict | None = None
    dry_run: bool = False  # say what the run would send (chat APIs: requests after cache hits, tokens), send nothing


def has(cfg: ClassificationConfig, capability: str) -> bool:
    """Whether the configured model's backend declares ``capability`` (posixlab/models/capabilities.py)."""
    return capability in backend_of(cfg.model).capabilities


def check_settings(cfg: ClassificationConfig) -> None:
    """The settings, checked before any model is loaded (``dataset=classifier``: the file too; ``inputs.check`` then
    reads its samples and 1-shot examples)."""
    parse_shard(cfg.shard)
    if cfg.strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {cfg.strategy!r}{nearest(cfg.strategy, STRATEGIES)}; choose one of "
                          f"{', '.join(STRATEGIES)}")
    if cfg.probability not in PROBABILITY_MODES:
        raise ConfigError(f"probability must be one of {', '.join(PROBABILITY_MODES)}, got {cfg.probability!r}")
    if cfg.variants not in ("sentence", "schema"):
        raise ConfigError(f"task.variants must be sentence (rephrasings of the task sentence) or schema (variants of "
                          f"the answer's JSON schema), got {cfg.variants!r}")
    if cfg.variants == "schema" and cfg.strategy != "structured":
        raise ConfigError("task.variants=schema varies the answer's JSON schema: it needs strategy=structured")
    if cfg.strategy == "structured":
        _check_structured(cfg)
    elif cfg.schema is not None:
        raise ConfigError("task.schema is the JSON schema of a structured answer: add strategy=structured")
    check_max_new_tokens(cfg.max_new_tokens)  # 0 failed deep in the engine, after the rephrasings were made
    if not is_whole(cfg.repeats, 1):
        raise ConfigError(f"task.repeats (R) must be a whole number of at least 1, got {cfg.repeats!r}")
    if not is_whole(cfg.num_rephrasings, 1):
        raise ConfigError(f"num_rephrasings (Q) must be a whole number of at least 1, got {cfg.num_rephrasings!r}")
    if cfg.data.name == CLASSIFIER:
        classifier_definition(cfg)
    elif cfg.data.name not in CLASSES:
        raise ConfigError(f"unknown classification dataset {cfg.data.name!r}{nearest(cfg.data.name, CLASSES)}; "
                          f"choose one of {', '.join(CLASSES)}, "
                          f"or {CLASSIFIER} (your own: dataset.path=my_task.yaml)")


def _check_structured(cfg: ClassificationConfig) -> None:
    from posixlab.structured.schema import MODES, REASONING

    if cfg.structured_mode not in MODES:
        raise ConfigError(f"task.structured_mode must be one of {', '.join(MODES)}, got {cfg.structured_mode!r}")
    if not has(cfg, TOOLS) and (cfg.structured_mode == "tools" or "mode" in (cfg.schema_dimensions or ())):
        raise ConfigError("in process and on vLLM, a structured answer is decoded under the schema shown in "
                          "the prompt (as instructor's JSON mode shows it): tools mode and the mode dimension "
                          "need a chat model (model=chat)")
    if cfg.probability == "label_probs" and not has(cfg, SLOT_SCORES):
        raise ConfigError("strategy=structured with probability=label_probs reads each class's probability in "
                          "the answer's JSON slot, scored in this process: run the model in process "
                          "(model.backend=transformers), or use probability=greedy")
    if cfg.schema_reasoning not in REASONING:
        raise ConfigError(f"task.schema_reasoning must be null, before or after, got {cfg.schema_reasoning!r}")
    if cfg.schema is not None:
        own_schema(cfg, None)  # read and checked before any model is loaded


def own_schema(cfg: ClassificationConfig, classes: list[str] | None):
    """Your own schema (``task.schema``), read (``posixlab.structured.schema.read_schema``) and held to the data's
    classes: the same set, in the schema's order. ``classes`` None: the built-in data set's, or the classifier file's."""
    from posixlab.structured.schema import read_schema

    if cfg.schema_reasoning is not None:
        raise ConfigError("task.schema_reasoning adds a reasoning field to posixlab's own schema; with task.schema, "
                          "put the reasoning field in your schema (or leave it out) and remove task.schema_reasoning")
    schema = read_schema(cfg.schema, cfg.structured_mode)
    if classes is None:
        own = classifier_definition(cfg)
        classes = own.classes if own is not None else CLASSES.get(cfg.data.name)
    if classes is not None and set(schema.classes) != set(classes):
        raise ConfigError(f"the schema's label field {schema.field_name!r} lists {list(schema.classes)}, but the data "
                          f"set's classes are {list(classes)}: make the enum the same classes (any order)")
    return schema


def classifier_definition(cfg: ClassificationConfig) -> ClassifierDefinition | None:
    """The classifier file of ``dataset=classifier``, read and checked against the run's settings (None for the
    built-in data sets)."""
    d = cfg.data
    if d.name != CLASSIFIER:
        return None
    if not d.path:
        raise ConfigError("dataset=classifier needs its file: dataset.path=my_task.yaml (from Python: "
                          "posixlab.classify('my_task.yaml', ...)); README, 'Your own classifier', shows the format")
    for key in ("split", "exemplar_split"):
        if getattr(d, key) is not None:
            raise ConfigError(f"dataset.{key}={getattr(d, key)}: a classifier file has no splits; remove it (1-shot "
                              f"examples from other labelled data: dataset.exemplar_path=FILE.jsonl or .csv)")
    if d.options:
        raise ConfigError(f"dataset.options={d.options}: a classifier file takes no options; remove them")
    definition = load_classifier(d.path)
    missing = [c for c in definition.classes if c not in definition.definitions]
    if cfg.strategy == "detail" and missing:
        raise ConfigError(f"{definition.path}: strategy=detail shows a definition of every class, but "
                          f"{', '.join(map(repr, missing))} {'has' if len(missing) == 1 else 'have'} none; write "
                          f"each class as {{name: ..., definition: ...}}, or use strategy=simple")
    if cfg.strategy == "1shot" and not d.exemplar_path and not definition.labelled:
        raise ConfigError(f"{definition.path}: strategy=1shot shows one labelled example per class, but its samples "
                          f"have no labels; label them, give labelled examples as dataset.exemplar_path=FILE.jsonl "
                          f"(or .csv), or use strategy=simple")
    return definition
