"""One classification run (Errica et al.), top to bottom: samples -> Q rephrasings of the task sentence -> one
prompt per (sample, rephrasing) -> greedy answers (and, optionally, class-label probabilities) -> parsed classes ->
sensitivity, consistency, micro-F1 -> results files.

``ClassificationConfig`` is a plain dataclass; ``run.py`` builds it from Hydra (``task=classification``), tests
build it by hand. Results, in ``output_dir``:

- ``rephrasings.json``: the original task sentence and its rephrasings (the first is the original);
- ``samples.jsonl``: per sample its text, gold class, every rephrasing's answer, parsed class and parse record,
  the class distribution p(y | x) and the sensitivity S_τ(x) (and, with ``probability=label_probs``, the label
  log-probabilities);
- ``summary.json`` and ``summary.md``: S_τ, C_y per class and on average, micro-F1 over rephrasings.

p(y | x, ρ), two ways (``probability``): ``greedy`` (the paper's: the class the greedy answer names, one per
rephrasing) or ``label_probs`` (the model's probabilities of the class labels as the answer, normalised over the
classes; N/A gets none). The greedy answers are generated and kept in both modes, for auditing.
"""

from __future__ import annotations

import json
import math  # noqa: F401  (label_distribution's doctest)
import platform
import sys
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

import posixlab
from posixlab.backends import engine_for, load
from posixlab.classify.data import ALIASES, CLASSES, Sample, exemplars, load_samples, select_samples
from posixlab.classify.parse import parse_answer
from posixlab.classify.prompts import DEFINITIONS, STRATEGIES, TASKS, TaskFrame
from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA, class_distribution, consistency, micro_f1, sensitivity
from posixlab.models import ModelSpec
from posixlab.models.causal_lm import TokenizedModel
from posixlab.models.loading import check_spec
from posixlab.paths import default_cache_dir
from posixlab.rephrase import RephraserConfig, make_paraphrase_source
from posixlab.results import REPHRASINGS_FILE, SAMPLES_FILE, write_classification_summary
from posixlab.scoring import EngineOptions, ScoreCache

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
    task_sentence: str | None = None  # None: the data set's (posixlab/classify/prompts.py)
    probability: str = "greedy"  # greedy | label_probs
    max_new_tokens: int = 10
    seed: int = 0  # the 1-shot examples' draw
    chat_template: bool = False
    output_dir: str = "."
    cache_dir: str | None = None
    score_cache: bool = True
    score_cache_dir: str | None = None
    engine: EngineOptions = field(default_factory=EngineOptions)
    # no similarity threshold for task sentences: conf/task/classification.yaml says why
    rephraser: RephraserConfig = field(default_factory=lambda: RephraserConfig(min_similarity=0.0))


def check(cfg: ClassificationConfig) -> None:
    check_spec(cfg.model)
    if cfg.strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {cfg.strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if cfg.probability not in PROBABILITY_MODES:
        raise ConfigError(f"probability must be one of {', '.join(PROBABILITY_MODES)}, got {cfg.probability!r}")
    if cfg.num_rephrasings < 1:
        raise ConfigError(f"num_rephrasings (Q) must be at least 1, got {cfg.num_rephrasings}")
    if cfg.data.name not in CLASSES:
        raise ConfigError(f"unknown classification dataset {cfg.data.name!r}; choose one of {', '.join(CLASSES)}")


def load_data(cfg: ClassificationConfig) -> tuple[list[Sample], tuple[Sample, ...]]:
    """The evaluated samples (data set order) and, for ``1shot``, one example per class drawn from the rest."""
    d, classes = cfg.data, CLASSES[cfg.data.name]
    every = load_samples(d.name, d.source, d.path, d.split, d.options)
    samples = select_samples(every, d.num_samples, d.sample_seed, d.balanced, classes)
    if cfg.strategy != "1shot":
        return samples, ()
    pool = every
    if d.exemplar_path or d.exemplar_split:
        pool = load_samples(d.name, "path" if d.exemplar_path else d.source, d.exemplar_path or d.path,
                            d.exemplar_split or d.split, d.options)
    chosen = exemplars(pool, {s.sample_id for s in samples}, classes, cfg.seed)
    return samples, tuple(chosen[c] for c in classes)


def rephrase(cfg: ClassificationConfig, original: str) -> tuple[list[str], dict]:
    """The original task sentence and its Q - 1 rephrasings, through the paraphrase machinery and its file: written
    once, then read back by every later run (every sample, every strategy) of the same rephraser."""
    if cfg.num_rephrasings == 1:
        return [original], {"rephraser": None}
    source = make_paraphrase_source(cfg.rephraser, cfg.cache_dir or default_cache_dir())
    rephrasings, record = source.paraphrases(original, cfg.num_rephrasings - 1)
    about = {**source.describe(), "record_key": record.get("key"),
             "rephrasing_quality": source.quality_summary([(len(rephrasings), record)])}
    return [original, *rephrasings], about


def label_continuations(lm: TokenizedModel, prompt: str, classes: list[str], chat_template: bool) -> list[list[int]]:
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


def label_distribution(logprobs: list[float]) -> list[float]:
    """Label log-probabilities normalised into a distribution over the classes (softmax), in float64.

    >>> [round(p, 3) for p in label_distribution([math.log(0.3), math.log(0.1)])]
    [0.75, 0.25]
    """
    x = np.asarray(logprobs, dtype=np.float64)
    p = np.exp(x - x.max())
    return (p / p.sum()).tolist()


def run_classification(cfg: ClassificationConfig, lm: TokenizedModel | None = None, progress: bool = True) -> dict:
    """Run ``cfg`` and write its results to ``cfg.output_dir``; returns the summary. A model loaded here is closed
    at the end (which stops a server it started); a model passed in is the caller's."""
    check(cfg)
    with ExitStack() as owned:
        if lm is None and cfg.model.backend != "transformers":
            # a server is asked first, before the rephraser runs: a dead one is reported at once
            lm = owned.enter_context(closing(load(cfg.model, cfg.cache_dir)))
        return _run(cfg, lm, progress, owned)


def _run(cfg: ClassificationConfig, lm: TokenizedModel | None, progress: bool, owned: ExitStack) -> dict:
    classes = CLASSES[cfg.data.name]
    all_classes = [*classes, NA]
    samples, examples = load_data(cfg)
    frame = TaskFrame(cfg.data.name, cfg.task_sentence or TASKS[cfg.data.name], classes,
                      DEFINITIONS.get(cfg.data.name, {}), examples)
    rephrasings, rephraser_about = rephrase(cfg, frame.task)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPHRASINGS_FILE).write_text(json.dumps(
        {"original": frame.task, "rephrasings": rephrasings, "rephraser": rephraser_about}, indent=1,
        ensure_ascii=False) + "\n", encoding="utf-8")

    if lm is None:
        lm = owned.enter_context(closing(load(cfg.model, cfg.cache_dir)))
    prompts, ids = [], []  # row k = sample k // Q, rephrasing k % Q
    for sample in samples:
        for q, sentence in enumerate(rephrasings):
            text = frame.prompt(sentence, sample.text, cfg.strategy)
            text = lm.apply_chat_template(text) if cfg.chat_template else text
            prompts.append(text)
            ids.append(lm.encode(text, add_special_tokens=not cfg.chat_template))
            lm.check_fits(ids[-1], cfg.max_new_tokens, what=f"the prompt of sample {sample.sample_id}, rephrasing {q}")
    labels_ids = label_continuations(lm, prompts[0], classes, cfg.chat_template) \
        if cfg.probability == "label_probs" else None

    cache = None
    if cfg.score_cache:
        cache = ScoreCache(cfg.score_cache_dir or Path(cfg.cache_dir or default_cache_dir()) / "scores", lm.identity)
    engine = engine_for(lm, cfg.max_new_tokens, cfg.engine, cache)
    tokens_before = lm.forward_tokens
    results = [None] * len(ids)
    bar = tqdm(total=len(ids), desc=f"{lm.name} · {cfg.data.name} · {cfg.strategy}", unit="prompt",
               disable=not progress, file=sys.stderr)
    # each prompt is a set of its own: its greedy answer, and the class labels' log-probabilities when asked for.
    # In order: a sample's Q prompts are neighbours and share everything up to the task sentence, which runs once.
    for k, scores in engine.score_sets([[p] for p in ids], [labels_ids] * len(ids) if labels_ids else None,
                                       in_order=True):
        results[k] = scores
        bar.update(1)
    bar.close()
    if cache is not None:
        cache.close()

    Q = len(rephrasings)
    records = []
    for s, sample in enumerate(samples):
        predictions, per_rephrasing, logprobs = [], [], []
        for q in range(Q):
            scores = results[s * Q + q]
            answer = lm.decode([t for t in scores.responses[0] if t not in lm.eos_ids]).strip()
            parse = parse_answer(answer, classes, ALIASES.get(cfg.data.name), sample.fields.get("options"))
            label = parse["label"]
            if labels_ids is not None:
                lp = scores.candidates[0].tolist()
                logprobs.append(lp)
                p = label_distribution(lp)
                per_rephrasing.append([*p, 0.0])
                label = classes[int(np.argmax(lp))]
            else:
                per_rephrasing.append(class_distribution([label], all_classes).tolist())
            predictions.append({"rephrasing": q, "answer": answer, "label": label, "parse": parse})
        distribution = np.mean(np.asarray(per_rephrasing), axis=0)
        records.append({
            "sample_id": sample.sample_id, "text": sample.text, "gold": sample.gold, "predictions": predictions,
            "label_logprobs": logprobs or None, "distribution": distribution.tolist(),
            "sensitivity": sensitivity(distribution),
        })
    with open(out / SAMPLES_FILE, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")

    meta = {"model": lm.identity, "dataset": cfg.data.name, "dataset_source": cfg.data.source,
            "strategy": cfg.strategy, "probability": cfg.probability, "frame": frame.describe(),
            "max_new_tokens": cfg.max_new_tokens, "chat_template": cfg.chat_template,
            "label_tokens": labels_ids, "posixlab": posixlab.__version__, "python": platform.python_version(),
            "config": asdict(cfg),
            "engine": {"forward_tokens": lm.forward_tokens - tokens_before, "processed_tokens": engine.processed_tokens}}
    summary = build_classification_summary(records, all_classes, Q, meta)
    write_classification_summary(out, summary)
    return summary


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
    summary["na_share"] = float(np.mean([p["label"] == NA for r in records for p in r["predictions"]]))
    summary["accuracy"] = classification_accuracy(records, num_rephrasings, meta.get("seed", 0))
    return summary


def classification_accuracy(records: list[dict], num_rephrasings: int, seed: int = 0) -> dict | None:
    """The multi-prompt accuracy block (``posixlab/answers.py``) over samples × rephrasings: prompt q is rephrasing
    q of the task sentence; an N/A answer is wrong and counts as unparsed. None without gold labels."""
    from posixlab.answers import accuracy_summary

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
