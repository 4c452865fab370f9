"""The classification task (Errica et al., NAACL 2025): a unit is one sample, prompted with Q rephrasings of the task
sentence; the record holds every rephrasing's answer, its parsed class and the class distribution p(y | x), from
which the summary computes sensitivity, consistency and micro-F1. ``ClassificationConfig`` is its configuration.

p(y | x, ρ), two ways (``probability``): ``greedy`` (the paper's: the class the greedy answer names, one per
rephrasing) or ``label_probs`` (the model's probabilities of the class labels as the answer, normalised over the
classes; N/A gets none). The greedy answers are generated and kept in both modes, for auditing.

Besides the runner's files, a run folder holds ``rephrasings.json`` (the original task sentence first) and
``samples.jsonl`` (per sample: text, gold class, every rephrasing's answer and parse record, p(y | x), S_τ(x)).
"""

from __future__ import annotations

import json
import math  # noqa: F401  (label_distribution's doctest)
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from posixlab.answers import accuracy_summary, parse_answer
from posixlab.backends import text_only
from posixlab.classification_prompts import DEFINITIONS, STRATEGIES, TASKS, TaskFrame
from posixlab.data.classification import ALIASES, CLASSES, Sample, exemplars, load_samples, select_samples
from posixlab.data.classifier_file import ClassifierDefinition, load_classifier, read_samples_file
from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA, class_distribution, consistency, micro_f1, sensitivity
from posixlab.metrics.noise import noise_floor_from_records
from posixlab.models import ModelSpec
from posixlab.models.capabilities import STRUCTURED
from posixlab.paths import default_cache_dir
from posixlab.rephrase import RephraserConfig, make_paraphrase_source
from posixlab.results import REPHRASINGS_FILE, SAMPLES_FILE, write_classification_summary
from posixlab.scoring import EngineOptions
from posixlab.shards import parse_shard
from posixlab.structured.summary import structured_summary
from posixlab.tasks.base import GENERATE, SCORE, Request, Task, answer_texts

PROBABILITY_MODES = ("greedy", "label_probs")


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


@dataclass
class ClassificationConfig:
    model: ModelSpec
    data: ClassificationData = field(default_factory=ClassificationData)
    strategy: str = "simple"  # simple | detail | 1shot
    num_rephrasings: int = 30  # Q: the original task sentence plus Q - 1 rephrasings
    task_sentence: str | None = None  # None: the data set's (posixlab/classification_prompts.py)
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


def check(cfg: ClassificationConfig) -> None:
    parse_shard(cfg.shard)
    if cfg.strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {cfg.strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if cfg.probability not in PROBABILITY_MODES:
        raise ConfigError(f"probability must be one of {', '.join(PROBABILITY_MODES)}, got {cfg.probability!r}")
    if cfg.variants not in ("sentence", "schema"):
        raise ConfigError(f"task.variants must be sentence (rephrasings of the task sentence) or schema (variants of "
                          f"the answer's JSON schema), got {cfg.variants!r}")
    if cfg.variants == "schema" and cfg.strategy != "structured":
        raise ConfigError("task.variants=schema varies the answer's JSON schema: it needs strategy=structured")
    if cfg.strategy == "structured":
        from posixlab.structured.schema import MODES, REASONING

        if cfg.structured_mode not in MODES:
            raise ConfigError(f"task.structured_mode must be one of {', '.join(MODES)}, got {cfg.structured_mode!r}")
        if cfg.model.backend != "chat" and (cfg.structured_mode == "tools" or "mode" in (cfg.schema_dimensions or ())):
            raise ConfigError("in process and on vLLM, a structured answer is decoded under the schema shown in "
                              "the prompt (as instructor's JSON mode shows it): tools mode and the mode dimension "
                              "need a chat model (model=chat)")
        if cfg.probability == "label_probs" and cfg.model.backend != "transformers":
            raise ConfigError("strategy=structured with probability=label_probs reads each class's probability in "
                              "the answer's JSON slot, scored in this process: run the model in process "
                              "(model.backend=transformers), or use probability=greedy")
        if cfg.schema_reasoning not in REASONING:
            raise ConfigError(f"task.schema_reasoning must be null, before or after, got {cfg.schema_reasoning!r}")
        if cfg.schema is not None:
            own_schema(cfg, None)  # read and checked before any model is loaded
    elif cfg.schema is not None:
        raise ConfigError("task.schema is the JSON schema of a structured answer: add strategy=structured")
    if cfg.repeats < 1:
        raise ConfigError(f"task.repeats (R) must be at least 1, got {cfg.repeats}")
    if cfg.num_rephrasings < 1:
        raise ConfigError(f"num_rephrasings (Q) must be at least 1, got {cfg.num_rephrasings}")
    if cfg.data.name == CLASSIFIER:
        load_data(cfg)  # the file, its samples and the 1-shot examples, checked before any model is loaded
        return
    if cfg.data.name not in CLASSES:
        raise ConfigError(f"unknown classification dataset {cfg.data.name!r}; choose one of {', '.join(CLASSES)}, "
                          f"or {CLASSIFIER} (your own: dataset.path=my_task.yaml)")


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


CLASSIFIER = "classifier"  # dataset=classifier: your own classifier from one file (posixlab/data/classifier_file.py)


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


def load_data(cfg: ClassificationConfig, definition: ClassifierDefinition | None = None
              ) -> tuple[list[Sample], tuple[Sample, ...]]:
    """The evaluated samples (data set order) and, for ``1shot``, one example per class drawn from the rest
    (``definition``: the classifier file of ``dataset=classifier``, read here when not given)."""
    d = cfg.data
    definition = definition or classifier_definition(cfg)
    classes = definition.classes if definition else CLASSES[d.name]
    every = definition.samples if definition else load_samples(d.name, d.source, d.path, d.split, d.options)
    samples = select_samples(every, d.num_samples, d.sample_seed, d.balanced, classes)
    if cfg.strategy != "1shot":
        return samples, ()
    pool = every
    if definition and d.exemplar_path:
        pool = read_samples_file(d.exemplar_path, f"{definition.name}/examples", classes, definition.aliases)
        if pool[0].gold is None:
            raise ConfigError(f"dataset.exemplar_path={d.exemplar_path}: its samples have no labels; the 1-shot "
                              f"examples need them (a label column or key)")
    elif d.exemplar_path or d.exemplar_split:
        pool = load_samples(d.name, "path" if d.exemplar_path else d.source, d.exemplar_path or d.path,
                            d.exemplar_split or d.split, d.options)
    chosen = exemplars(pool, {s.sample_id for s in samples}, classes, cfg.seed)
    return samples, tuple(chosen[c] for c in classes)


def rephrase(cfg: ClassificationConfig, original: str, progress: bool = True) -> tuple[list[str], dict]:
    """The original task sentence and its Q - 1 rephrasings, through the paraphrase machinery and its file: written
    once, then read back by every later run (every sample, every strategy) of the same rephraser. Before any is
    written, one line says where they come from and what writing the rest costs; a dry run writes none (its
    prompts carry placeholders) and says what the rephraser would have to write."""
    if cfg.num_rephrasings == 1:
        print("posixlab: Q = 1 (task.num_rephrasings=1): one prompt per sample, so S is 0 by construction; set "
              "task.num_rephrasings=2 or more to measure sensitivity", file=sys.stderr)
        return [original], {"rephraser": None}
    source = make_paraphrase_source(cfg.rephraser, cfg.cache_dir or default_cache_dir(), cfg.model, "task_sentence")
    source.dry_run, source.progress = cfg.dry_run, progress
    plan = source.plan([original], cfg.num_rephrasings - 1)
    print(source.announce(plan, "task sentence"), file=sys.stderr)
    rephrasings, record = source.paraphrases(original, cfg.num_rephrasings - 1)
    about = {**source.describe(), "record_key": record.get("key"), "plan": plan,
             "rephrasing_quality": source.quality_summary([(len(rephrasings), record)])}
    return [original, *rephrasings], about


def label_continuations(lm, prompt: str, classes: list[str], chat_template: bool) -> list[list[int]]:
    """Token ids of " <label>" after ``prompt``: the tokens the label gets when the prompt and the answer are read
    as one text (so a tokenizer that merges across the join is respected), or the label on its own if the prompt's
    tokens are not a prefix of the joint text's."""
    special = not chat_template
    context = lm.encode(prompt, add_special_tokens=special)
    out = []
    for c in classes:
        joint = lm.encode(f"{prompt} {c}", add_special_tokens=special)
        tail = joint[len(context):] if joint[:len(context)] == context else lm.encode(f" {c}",
                                                                                      add_special_tokens=False)
        if not tail:
            raise ConfigError(f"the class label {c!r} encodes to no tokens")
        out.append(list(tail))
    if len({tuple(t) for t in out}) < len(out):
        raise ConfigError(f"two class labels encode to the same tokens: {classes}")
    return out


def slot_logprobs(lm, prompt_ids: list[int], response: list[int], schema, classes) -> list[float] | None:
    """log P(class + '"' | prompt, the answer up to its label's value) for each of ``classes`` (the task's order,
    whatever order the schema's enum lists them in); None where the answer has no label slot (a failure, counted as N/A).

    The context is the greedy (schema-held) answer's own tokens up to where the label's value starts (its reasoning
    field too, when that comes first), so the probability is read where the model answered; where a token runs
    across that point, the answer's text up to it is encoded afresh. Each class is scored as its own tokens and the
    closing quote, by the raw model (no grammar mask), and the classes are normalised among themselves by the caller
    (``label_distribution``): the model's preference among the enum's members at the slot, which is the greedy
    answer's class wherever the value's first token decides it."""
    import re

    eos = lm.eos_ids
    tokens = [t for t in response if t not in eos]
    text = lm.decode(tokens)
    found = re.search(r'"' + re.escape(schema.field_name) + r'"\s*:\s*"', text)
    if found is None:
        return None
    start = found.end()
    context = None
    for k in range(len(tokens) + 1):
        piece = lm.decode(tokens[:k])
        if len(piece) >= start:
            if piece == text[:start]:
                context = list(prompt_ids) + tokens[:k]
            break
    if context is None:  # a token runs across the slot's start: the text up to it, encoded afresh
        context = list(prompt_ids) + lm.encode(text[:start], add_special_tokens=False)
    return [lm.score_full(context, lm.encode(f'{c}"', add_special_tokens=False)) for c in classes]


def structured_tokens(max_new_tokens: int, schema) -> int:
    """The response length for a JSON answer: at least 64 tokens (an object with a label), 256 with a reasoning
    field; ``max_new_tokens`` when larger. A cut-off object is invalid JSON, counted as a failure, never repaired."""
    return max(max_new_tokens, 256 if schema.reasoning is not None else 64)


def label_distribution(logprobs: list[float]) -> list[float]:
    """Label log-probabilities normalised into a distribution over the classes (softmax), in float64.

    >>> [round(p, 3) for p in label_distribution([math.log(0.3), math.log(0.1)])]
    [0.75, 0.25]
    """
    x = np.asarray(logprobs, dtype=np.float64)
    p = np.exp(x - x.max())
    return (p / p.sum()).tolist()


class ClassificationTask(Task):
    name = "classification"
    records_file = SAMPLES_FILE
    index_key = "sample_index"
    unit_name = "sample"
    in_order = True  # a sample's Q prompts are neighbours and share everything up to the task sentence
    summary_keys = ("sensitivity", "consistency", "micro_f1", "na_share", "answers", "accuracy", "num_samples",
                    "noise_floor", "structured", "notes")
    input_files = (REPHRASINGS_FILE,)

    def __init__(self, cfg: ClassificationConfig):
        super().__init__(cfg)
        self.classes = CLASSES.get(cfg.data.name, [])
        self.aliases: dict[str, list[str]] | None = ALIASES.get(cfg.data.name)  # other phrasings the parser accepts
        self.definition: ClassifierDefinition | None = None  # dataset=classifier: the file (set by build_units)
        self.frame: TaskFrame | None = None
        self.rephrasings: list[str] = []
        self.rephraser_about: dict = {}
        self.label_ids: list[list[int]] | None = None
        self.schemas: list = []  # strategy=structured: each prompt's SchemaVariant (posixlab/structured/)
        self.finished_s: list[float] = []  # S of each sample finished so far (the progress bar's running mean)

    def check(self) -> None:
        check(self.cfg)

    def needs(self) -> dict[str, str]:
        if self.cfg.strategy == "structured":  # in-process and vLLM constrained decoding: not built yet
            return {GENERATE: "the answers", STRUCTURED: "strategy=structured (a JSON object of the schema)"}
        if self.cfg.probability == "label_probs":
            return {GENERATE: "the answers", SCORE: "probability=label_probs (the class labels' log-probabilities)"}
        # the greedy answers need text only; the engines that run them today also score (label tokens unused)
        return {GENERATE: "the answers"}

    def build_units(self, progress: bool) -> list[Sample]:
        cfg = self.cfg
        self.definition = own = classifier_definition(cfg)
        if own is not None:  # your own classifier: classes, definitions, aliases and task sentence from its file
            self.classes, self.aliases = own.classes, own.aliases
        samples, examples = load_data(cfg, own)
        self.frame = TaskFrame(own.name if own else cfg.data.name,
                               cfg.task_sentence or (own.task_sentence if own else TASKS[cfg.data.name]),
                               self.classes, own.definitions if own else DEFINITIONS.get(cfg.data.name, {}), examples)
        self.schemas = self._schemas()
        if cfg.variants == "schema":  # the task sentence is held; the Q prompts are the schema's variants
            self.rephrasings = [self.frame.task] * len(self.schemas)
            if not self.rephraser_about:  # set by _rewordings where the rephraser wrote some
                self.rephraser_about = {"rephraser": None, "variants": "schema"}
        else:
            self.rephrasings, self.rephraser_about = rephrase(cfg, self.frame.task, progress)
        return samples

    def _schemas(self) -> list:
        """strategy=structured: the schema of each of the Q prompts (variants=schema: the original and Q - 1
        variants, ``SchemaVariant``s; otherwise the one schema, held); [] for free-text strategies."""
        cfg = self.cfg
        if cfg.strategy != "structured":
            return []
        from posixlab.structured.schema import ClassifierSchema
        from posixlab.structured.variants import DIMENSIONS, ON_REQUEST, SchemaVariant, schema_variants

        base = own_schema(cfg, self.classes) if cfg.schema is not None else \
            ClassifierSchema(classes=tuple(self.classes), descriptions=dict(self.frame.definitions),
                             reasoning=cfg.schema_reasoning, mode=cfg.structured_mode)
        if cfg.variants == "schema":
            dims = tuple(cfg.schema_dimensions) if cfg.schema_dimensions else None
            if dims is None and cfg.model.backend != "chat":  # in process, every mode is the schema in the prompt
                dims = tuple(d for d in DIMENSIONS
                             if d not in ("mode", *ON_REQUEST) and (d != "key_order" or base.reasoning))
            rewordings = self._rewordings(base, dims) if dims and "rewording" in dims else None
            return schema_variants(base, cfg.num_rephrasings, cfg.seed, dims, rewordings)
        return [SchemaVariant(base, "original", "none")] * cfg.num_rephrasings

    def _rewordings(self, base, dims: tuple[str, ...]) -> dict[str, list[str]]:
        """The rewording dimension's paraphrases: each class description paraphrased by the run's rephraser, through
        the paraphrase machinery (its file, its quality checks), enough for every rewording variant to differ."""
        import math

        described = [c for c in base.classes if base.descriptions.get(c)]
        if not described:
            return {}
        needed = math.ceil((self.cfg.num_rephrasings - 1) / len(dims))  # rewording variants at most
        per_class = max(1, math.ceil(needed / len(described)))
        source = make_paraphrase_source(self.cfg.rephraser, self.cfg.cache_dir or default_cache_dir(), self.cfg.model,
                                        "class_description")
        found, records = {}, []
        for c in described:
            found[c], record = source.paraphrases(base.descriptions[c], per_class)
            records.append((len(found[c]), record))
        self.rephraser_about = {**source.describe(), "variants": "schema",
                                "rephrasing_quality": source.quality_summary(records)}
        return found

    def prepare(self, lm, units: list[Sample], out: Path) -> None:
        (out / REPHRASINGS_FILE).write_text(json.dumps(
            {"original": self.frame.task, "rephrasings": self.rephrasings, "rephraser": self.rephraser_about,
             "schemas": [v.to_dict() for v in self.schemas] or None},
            indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        if self.cfg.probability == "label_probs" and units and not self.schemas:
            first = self._text(units[0], self.rephrasings[0], lm)
            self.label_ids = label_continuations(lm, first, self.classes, self.cfg.chat_template)

    def _text(self, sample: Sample, sentence: str, lm, schema=None) -> str:
        text = self.frame.prompt(sentence, sample.text, self.cfg.strategy)
        if schema is not None:  # in process: the messages instructor's JSON mode sends (the schema in a system turn),
            # whatever the mode asked: the other modes carry the schema outside the messages, which no prompt shows
            messages = replace(schema, mode="json").request_kwargs([{"role": "user", "content": text}])["messages"]
            if self.cfg.chat_template:
                return lm.apply_chat_template(messages)
            return "\n\n".join(m["content"].strip() for m in messages) + "\n"
        return lm.apply_chat_template(text) if self.cfg.chat_template else text

    def requests(self, sample: Sample, lm) -> list[Request]:
        # each prompt is a request of its own, sent R times (task.repeats): its greedy answer, and the class labels'
        # log-probabilities when asked. A chat API gets the prompt text as one user message (its own template)
        out = []
        for q, sentence in enumerate(self.rephrasings):
            schema = self.schemas[q].schema if self.schemas else None
            if text_only(lm):
                text, ids = self.frame.prompt(sentence, sample.text, self.cfg.strategy), []
            else:
                text = self._text(sample, sentence, lm, schema)
                ids = lm.encode(text, add_special_tokens=not self.cfg.chat_template)
                lm.check_fits(ids, self.cfg.max_new_tokens,
                              what=f"the prompt of sample {sample.sample_id}, rephrasing {q}")
            length = self.cfg.max_new_tokens if schema is None else structured_tokens(self.cfg.max_new_tokens, schema)
            out += [Request([text], [ids] if ids else [], length, list(self.label_ids or []), r, schema)
                    for r in range(self.cfg.repeats)]
        return out

    def record(self, sample: Sample, requests: list[Request], scores: list, lm) -> dict:
        classes, all_classes = self.classes, [*self.classes, NA]
        predictions, per_rephrasing, logprobs = [], [], []
        repeats = self.cfg.repeats
        for q, set_scores in enumerate(scores[::repeats]):  # repeat 0 of each rephrasing: the paper's answers
            answer = answer_texts(set_scores, lm)[0].strip()
            parse = self._parse(answer, sample, q)
            label = parse["label"]
            lp = self._label_logprobs(set_scores, requests[q * repeats], q, lm)
            if lp is not None:
                logprobs.append(lp)
                per_rephrasing.append([*label_distribution(lp), 0.0])
                label = classes[int(np.argmax(lp))]
            elif self.schemas and self.cfg.probability == "label_probs":  # no JSON slot in the answer: N/A
                logprobs.append(None)
                per_rephrasing.append(class_distribution([NA], all_classes).tolist())
                label = NA
            else:
                per_rephrasing.append(class_distribution([label], all_classes).tolist())
            prediction = {"rephrasing": q, "answer": answer, "label": label, "parse": parse}
            if hasattr(set_scores, "answers"):  # a chat API: what answered (the served model, its fingerprint)
                served = set_scores.answers[0]
                prediction["served"] = [served.served_model, served.system_fingerprint]
            if repeats > 1:  # every repeat's label, repeat 0 first (the noise floor: posixlab/metrics/noise.py)
                prediction["repeat_labels"] = [label] + [
                    self._label(again, lm, sample, q, requests[q * repeats + r])
                    for r, again in enumerate(scores[q * repeats + 1:(q + 1) * repeats], start=1)]
                prediction["repeat_answers"] = [answer] + [answer_texts(again, lm)[0].strip()
                                                           for again in scores[q * repeats + 1:(q + 1) * repeats]]
            predictions.append(prediction)
        distribution = np.mean(np.asarray(per_rephrasing), axis=0)
        return {"sample_id": sample.sample_id, "text": sample.text, "gold": sample.gold, "predictions": predictions,
                "label_logprobs": logprobs or None, "distribution": distribution.tolist(),
                "sensitivity": sensitivity(distribution)}

    def _parse(self, answer: str, sample: Sample, q: int) -> dict:
        """The parse record of one answer: the one parser's (free text), or the schema check (structured: an answer
        that is not a valid object of its schema is N/A, with the failure named)."""
        if not self.schemas:
            return parse_answer(answer, self.classes, self.aliases, sample.fields.get("options"))
        from posixlab.structured.schema import check_answer

        label, failure = check_answer(answer, self.schemas[q].schema)
        return {"label": NA if label is None else label, "rule": "schema", "failure": failure}

    def _label(self, result, lm, sample: Sample, q: int, request: Request) -> str:
        """The class one answer gives: the labels' most probable (label_probs) or the parsed greedy answer."""
        lp = self._label_logprobs(result, request, q, lm)
        if lp is not None:
            return self.classes[int(np.argmax(lp))]
        if self.schemas and self.cfg.probability == "label_probs":
            return NA
        return self._parse(answer_texts(result, lm)[0].strip(), sample, q)["label"]

    def _label_logprobs(self, result, request: Request, q: int, lm) -> list[float] | None:
        """The classes' log-probabilities as the answer: after the prompt (free text, scored by the engine), or in
        the JSON slot of the structured answer (``slot_logprobs``); None in greedy mode or where the answer has no
        slot."""
        if self.label_ids is not None:
            return result.candidates[0].tolist()
        if self.schemas and self.cfg.probability == "label_probs":
            return slot_logprobs(lm, request.ids[0], result.responses[0], self.schemas[q].schema, self.classes)
        return None

    def progress_note(self, record: dict) -> str:
        self.finished_s.append(record["sensitivity"])  # the running mean: what the summary's S will be so far
        return f"mean S = {np.mean(self.finished_s):.3f} over {len(self.finished_s)}"

    def describe(self) -> str:
        return f"{self.cfg.data.name} · {self.cfg.strategy}"

    def meta(self, lm) -> dict:
        cfg, own = self.cfg, self.definition
        # your own classifier: its name is the dataset's; classifier_file holds its path and sha256 (and its samples')
        mine = {"dataset": own.name, "dataset_source": "file", "classifier_file": own.describe()} if own else {}
        return {"task": "classification", "dataset": cfg.data.name, "dataset_source": cfg.data.source, **mine,
                "strategy": cfg.strategy, "probability": cfg.probability, "frame": self.frame.describe(),
                "max_new_tokens": cfg.max_new_tokens, "chat_template": cfg.chat_template,
                "label_tokens": self.label_ids, "classes": [*self.classes, NA],
                "num_rephrasings": len(self.rephrasings), "repeats": cfg.repeats, "variants": cfg.variants,
                "schema_dimensions": [v.dimension for v in self.schemas] or None,
                "schema_changes": [v.change for v in self.schemas] or None,
                "structured_mode": cfg.structured_mode if self.schemas else None}

    @classmethod
    def summarize(cls, records: list[dict], meta: dict) -> dict:
        return build_classification_summary(records, meta["classes"], meta["num_rephrasings"], meta)

    @classmethod
    def write_summary(cls, folder: Path, summary: dict) -> None:
        write_classification_summary(folder, summary)


def _stats(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if len(a) > 1 else None,
            "median": float(np.median(a))}


def build_classification_summary(records: list[dict], classes: list[str], num_rephrasings: int, meta: dict) -> dict:
    """S_τ over samples (and per gold class), C_y (Eq. 7: per class over pairs of distinct samples, then the
    unweighted mean over classes; also with self-pairs and pooled), micro-F1 per rephrasing (when every sample has
    a gold label)."""
    real = [c for c in classes if c != NA]
    s_values = [r["sensitivity"] for r in records]
    gold = [r["gold"] for r in records]
    per_class_s = {c: float(np.mean([r["sensitivity"] for r in records if r["gold"] == c]))
                   for c in real if any(r["gold"] == c for r in records)}
    distributions = np.array([r["distribution"] for r in records])
    has_gold = any(g is not None for g in gold)
    summary = {"task": "classification", **meta, "classes": classes, "num_rephrasings": num_rephrasings,
               "num_samples": len(records),
               "sensitivity": {**_stats(s_values), "per_class": per_class_s}}
    if has_gold:
        c = consistency(distributions, gold, real)
        with_self = consistency(distributions, gold, real, self_pairs=True)
        summary["consistency"] = {"mean": c["mean"], "per_class": c["per_class"], "self_pairs": False,
                                  "pooled": c["pooled"], "num_pairs": c["num_pairs"],
                                  "mean_with_self_pairs": with_self["mean"],
                                  "per_class_with_self_pairs": with_self["per_class"],
                                  "pooled_with_self_pairs": with_self["pooled"]}
    else:
        summary["consistency"] = None
    if has_gold and all(g is not None for g in gold):
        f1 = [micro_f1(gold, [r["predictions"][q]["label"] for r in records]) for q in range(num_rephrasings)]
        summary["micro_f1"] = {**_stats(f1), "per_rephrasing": f1}
    else:
        summary["micro_f1"] = None
        unlabelled = sum(g is None for g in gold)
        summary["notes"] = [*summary.get("notes", []), (
            "no gold labels: sensitivity S is reported; consistency C and micro-F1 need gold labels and are left out"
            if not has_gold else f"{unlabelled} of {len(gold)} samples have no gold label: micro-F1 needs one on "
                                 f"every sample and is left out (C uses the labelled samples)")]
    summary["na_share"] = float(np.mean([p["label"] == NA for r in records for p in r["predictions"]]))
    if num_rephrasings == 1:
        summary["notes"] = [*summary.get("notes", []), (
            "Q = 1: one prompt per sample, so S is 0 by construction (set task.num_rephrasings=2 or more to measure "
            "sensitivity)")]
    summary["answers"] = answer_spread(records, classes)
    if summary["micro_f1"] is not None:  # what always answering the most frequent gold class would score
        summary["micro_f1"]["majority_baseline"] = summary["answers"]["gold_majority_share"]
    if summary["answers"]["one_class"]:
        a = summary["answers"]
        summary["notes"] = [*summary.get("notes", []), (
            f"{a['majority_share']:.0%} of the {a['num_answers']} answers are {a['majority_class']!r}: the "
            f"classifier (nearly) always gives one class, so a low S and a high C say nothing about its robustness "
            f"(the gate fails such a run: gate.max_answer_share)")]
    summary["accuracy"] = classification_accuracy(records, num_rephrasings, meta.get("seed", 0))
    # task.repeats: S and C of the repeats alone, beside the rephrasings'
    summary["noise_floor"] = noise_floor_from_records(records, classes, meta.get("seed", 0),
                                                      backend=(meta.get("model") or {}).get("backend"))
    summary["structured"] = structured_summary(records, classes, meta.get("schema_dimensions"),
                                               meta.get("schema_changes"))
    return summary


ONE_CLASS_SHARE = 0.95  # answers this concentrated on one class are reported as a (nearly) constant classifier


def answer_spread(records: list[dict], classes: list[str]) -> dict:
    """How the answers (every sample × rephrasing, repeat 0; N/A counted as a class) spread over the classes: the
    most frequent answer and its share, each class's share, and the gold labels' majority share (the micro-F1 of a
    classifier that always answers the majority class). ``one_class``: the top share is at least 0.95.

    >>> recs = [{"gold": g, "predictions": [{"label": "a"}, {"label": "a"}]} for g in "aab"]
    >>> s = answer_spread(recs, ["a", "b", "N/A"])
    >>> s["majority_class"], s["majority_share"], s["one_class"], round(s["gold_majority_share"], 3)
    ('a', 1.0, True, 0.667)
    """
    labels = [p["label"] for r in records for p in r["predictions"]]
    counts = {c: labels.count(c) for c in classes}
    top = max(counts, key=counts.get)
    gold = [r["gold"] for r in records if r["gold"] is not None]
    # ties go to the class listed first (a set's order would change from run to run)
    gold_top = max((c for c in classes if c in gold), key=gold.count, default=None)
    share = counts[top] / max(1, len(labels))
    return {"majority_class": top, "majority_share": share, "num_answers": len(labels),
            "per_class_share": {c: n / max(1, len(labels)) for c, n in counts.items()},
            "one_class": share >= ONE_CLASS_SHARE, "gold_majority_class": gold_top,
            "gold_majority_share": gold.count(gold_top) / len(gold) if gold else None}


def classification_accuracy(records: list[dict], num_rephrasings: int, seed: int = 0) -> dict | None:
    """The multi-prompt accuracy block (``posixlab/answers.py``) over samples × rephrasings: prompt q is rephrasing
    q of the task sentence; an N/A answer is wrong and counts as unparsed. None without gold labels."""
    scored = [r for r in records if r["gold"] is not None]
    if not scored:
        return None
    as_sets = [{"prompts": [{"kind": "original" if q == 0 else "rephrasing"} for q in range(num_rephrasings)],
                "answers": [{"gold": r["gold"], "by_options": None,
                             "by_greedy": {"pred": None if p["label"] == NA else p["label"],
                                           "parsed": p["label"] != NA, "correct": p["label"] == r["gold"]}}
                            for p in r["predictions"]]} for r in scored]
    block = accuracy_summary(as_sets, seed=seed)
    block["note"] = ("prompt q = rephrasing q of the task sentence (0: the original); the answer is the class "
                     "p(y | x, rephrasing) puts first (greedy: the parsed answer, N/A = unparsed and wrong)")
    return block
