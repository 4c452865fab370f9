"""What the classification task sends: the samples and 1-shot examples, the classes, the task sentence and its
rephrasings, each prompt's schema (strategy=structured), the prompt texts and the engine's requests.

``build_inputs`` assembles everything but the model's tokens once, as a frozen ``Inputs``; the requests are built from
it, one sample at a time."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace

from posixlab.backends import text_only
from posixlab.classification_prompts import DEFINITIONS, TASK_SENTENCES, TaskFrame
from posixlab.data.classification import ALIASES, CLASSES, Sample, exemplars, load_samples, select_samples
from posixlab.data.classifier_file import ClassifierDefinition, read_samples_file
from posixlab.errors import ConfigError, RephraserError
from posixlab.models.capabilities import TOOLS
from posixlab.paths import default_cache_dir
from posixlab.rephrase import make_paraphrase_source
from posixlab.tasks.base import Request
from posixlab.tasks.classification.config import (CLASSIFIER, ClassificationConfig, check_settings,
                                                  classifier_definition, has, own_schema)


@dataclass(frozen=True)
class Inputs:
    """What every prompt of a run is built from (``build_inputs``)."""

    definition: ClassifierDefinition | None  # dataset=classifier: the file; None for a built-in data set
    classes: list[str]
    aliases: dict[str, list[str]] | None  # other phrasings of a class the parser accepts
    frame: TaskFrame
    rephrasings: list[str]  # the Q task sentences (the original first); variants=schema: the original, Q times
    rephraser_about: dict  # who wrote the rephrasings (or the rewordings of variants=schema), for rephrasings.json
    schemas: list  # strategy=structured: each prompt's SchemaVariant (posixlab/structured/); [] for free text


def check(cfg: ClassificationConfig) -> None:
    """The settings and, for ``dataset=classifier``, the file, its samples and the 1-shot examples, read and checked
    before any model is loaded."""
    check_settings(cfg)
    if cfg.data.name == CLASSIFIER:
        load_data(cfg)


def build_inputs(cfg: ClassificationConfig, progress: bool = True) -> tuple[Inputs, list[Sample]]:
    """The run's inputs and the samples it evaluates (the classifier file's or the built-in data set's)."""
    own = classifier_definition(cfg)
    classes = own.classes if own else CLASSES[cfg.data.name]
    aliases = own.aliases if own else ALIASES.get(cfg.data.name)
    samples, examples = load_data(cfg, own)
    frame = TaskFrame(own.name if own else cfg.data.name,
                      cfg.task_sentence or (own.task_sentence if own else TASK_SENTENCES[cfg.data.name]),
                      classes, own.definitions if own else DEFINITIONS.get(cfg.data.name, {}), examples)
    schemas, rewordings_about = _schemas(cfg, classes, frame)
    if cfg.variants == "schema":  # the task sentence is held; the Q prompts are the schema's variants
        rephrasings = [frame.task] * len(schemas)
        about = rewordings_about or {"rephraser": None, "variants": "schema"}
    else:
        rephrasings, about = rephrase(cfg, frame.task, progress)
    return Inputs(own, classes, aliases, frame, rephrasings, about, schemas), samples


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
    source = make_paraphrase_source(cfg.rephraser, cfg.cache_dir or default_cache_dir(), cfg.model, "task_sentence",
                                    dry_run=cfg.dry_run)
    source.progress = progress
    plan = source.plan([original], cfg.num_rephrasings - 1)
    print(source.announce(plan, "task sentence"), file=sys.stderr)
    try:
        rephrasings, record = source.paraphrases(original, cfg.num_rephrasings - 1)
        about = {**source.describe(), "record_key": record.get("key"), "plan": plan,
                 "rephrasing_quality": source.quality_summary([(len(rephrasings), record)])}
    finally:
        source.release()  # a rephraser's model, closed before the classifier loads
    return [original, *rephrasings], about


def _schemas(cfg: ClassificationConfig, classes: list[str], frame: TaskFrame) -> tuple[list, dict | None]:
    """strategy=structured: the schema of each of the Q prompts (variants=schema: the original and Q - 1 variants,
    ``SchemaVariant``s; otherwise the one schema, held), and who wrote the rewording variants' paraphrases (None
    where none were written); [] for free-text strategies."""
    if cfg.strategy != "structured":
        return [], None
    from posixlab.structured.schema import ClassifierSchema
    from posixlab.structured.variants import DIMENSIONS, ON_REQUEST, SchemaVariant, schema_variants

    base = own_schema(cfg, classes) if cfg.schema is not None else \
        ClassifierSchema(classes=tuple(classes), descriptions=dict(frame.definitions),
                         reasoning=cfg.schema_reasoning, mode=cfg.structured_mode)
    if cfg.variants != "schema":
        return [SchemaVariant(base, "original", "none")] * cfg.num_rephrasings, None
    dims = tuple(cfg.schema_dimensions) if cfg.schema_dimensions else None
    if dims is None and not has(cfg, TOOLS):  # without instructor's request modes, every mode is the schema in the
        # prompt: the mode dimension would change nothing
        dims = tuple(d for d in DIMENSIONS if d not in ("mode", *ON_REQUEST) and (d != "key_order" or base.reasoning))
    rewordings, about = _rewordings(cfg, base, dims) if dims and "rewording" in dims else (None, None)
    return schema_variants(base, cfg.num_rephrasings, cfg.seed, dims, rewordings), about


def _rewordings(cfg: ClassificationConfig, base, dims: tuple[str, ...]) -> tuple[dict[str, list[str]], dict | None]:
    """The rewording dimension's paraphrases: each class description paraphrased by the run's rephraser, through
    the paraphrase machinery (its file, its quality checks), enough for every rewording variant to differ; and who
    wrote them (None where no class has a description)."""
    described = [c for c in base.classes if base.descriptions.get(c)]
    if not described:
        return {}, None
    needed = math.ceil((cfg.num_rephrasings - 1) / len(dims))  # rewording variants at most
    per_class = max(1, math.ceil(needed / len(described)))
    source = make_paraphrase_source(cfg.rephraser, cfg.cache_dir or default_cache_dir(), cfg.model,
                                    "class_description", dry_run=cfg.dry_run)
    found, records = {}, []
    try:
        written = source.paraphrases_of([base.descriptions[c] for c in described], per_class)  # a server's: together
        described_by = source.describe()  # before the release: it says whether the model folded a system message
    finally:
        source.release()  # a rephraser's model, closed before the classifier loads
    for c in described:
        result = written[base.descriptions[c]]
        if isinstance(result, RephraserError):
            raise result
        found[c], record = result
        records.append((len(found[c]), record))
    return found, {**described_by, "variants": "schema", "rephrasing_quality": source.quality_summary(records)}


def rephrasings_document(inputs: Inputs) -> dict:
    """What ``rephrasings.json`` holds: the original task sentence, its rephrasings, who wrote them, the schemas."""
    return {"original": inputs.frame.task, "rephrasings": inputs.rephrasings, "rephraser": inputs.rephraser_about,
            "schemas": [v.to_dict() for v in inputs.schemas] or None}


def prompt_text(cfg: ClassificationConfig, frame: TaskFrame, sample: Sample, sentence: str, lm, schema=None) -> str:
    """What an in-process or served model reads for one sample and one task sentence (after the chat template)."""
    text = frame.prompt(sentence, sample.text, cfg.strategy)
    if schema is not None:  # in process: the messages instructor's JSON mode sends (the schema in a system turn),
        # whatever the mode asked: the other modes carry the schema outside the messages, which no prompt shows
        messages = replace(schema, mode="json").request_kwargs([{"role": "user", "content": text}])["messages"]
        if cfg.chat_template:
            return lm.apply_chat_template(messages)
        return "\n\n".join(m["content"].strip() for m in messages) + "\n"
    return lm.apply_chat_template(text) if cfg.chat_template else text


def label_tokens(cfg: ClassificationConfig, inputs: Inputs, units: list[Sample], lm) -> list[list[int]] | None:
    """probability=label_probs with free-text answers: the class labels' tokens after the first prompt
    (``label_continuations``), scored after every prompt; None otherwise (or without samples)."""
    if cfg.probability != "label_probs" or not units or inputs.schemas:
        return None
    first = prompt_text(cfg, inputs.frame, units[0], inputs.rephrasings[0], lm)
    return label_continuations(lm, first, inputs.classes, cfg.chat_template)


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


def structured_tokens(max_new_tokens: int, schema) -> int:
    """The response length for a JSON answer: at least 64 tokens (an object with a label), 256 with a reasoning
    field; ``max_new_tokens`` when larger. A cut-off object is invalid JSON, counted as a failure, never repaired."""
    return max(max_new_tokens, 256 if schema.reasoning is not None else 64)


def build_requests(cfg: ClassificationConfig, inputs: Inputs, label_ids: list[list[int]] | None, sample: Sample,
                   lm) -> list[Request]:
    """One sample's requests: each prompt is a request of its own, sent R times (task.repeats): its greedy answer,
    and the class labels' log-probabilities when ``label_ids`` are given. A chat API gets the prompt text as one user
    message (its own template)."""
    schemas = [inputs.schemas[q].schema if inputs.schemas else None for q in range(len(inputs.rephrasings))]
    if text_only(lm):
        texts = [inputs.frame.prompt(sentence, sample.text, cfg.strategy) for sentence in inputs.rephrasings]
        encoded = [[] for _ in texts]
    else:
        texts = [prompt_text(cfg, inputs.frame, sample, sentence, lm, schema)
                 for sentence, schema in zip(inputs.rephrasings, schemas)]
        encoded = lm.encode_batch(texts, add_special_tokens=not cfg.chat_template)  # one tokenizer call a sample
    out = []
    for q, (text, ids, schema) in enumerate(zip(texts, encoded, schemas)):
        # a structured answer may run longer than max_new_tokens (the JSON around the label): the prompt must leave
        # room for that length, not for max_new_tokens
        length = cfg.max_new_tokens if schema is None else structured_tokens(cfg.max_new_tokens, schema)
        if not text_only(lm):
            lm.check_fits(ids, length, what=f"the prompt of sample {sample.sample_id}, rephrasing {q}")
        out += [Request([text], [ids] if ids else [], length, list(label_ids or []), r, schema)
                for r in range(cfg.repeats)]
    return out
