"""One POSIX run, top to bottom: data -> prompt sets -> model -> generate and score -> ψ -> results files.

``RunConfig`` is a plain dataclass; the ``posixlab`` command (``posixlab/cli.py``) builds it from the Hydra config,
``posixlab.evaluate`` from its arguments, tests and notebooks by hand. Cheap checks (data, variants, context lengths)
all happen before the first forward pass.

The prompt sets come from a data set and a variant type, or, with ``dataset.name == "prompt_sets"`` (variant
``user``), from the user's own file or lists, used as given.
"""

from __future__ import annotations

import platform
import sys
import time
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tqdm.auto import tqdm

from posixlab.answers import candidate_strings, set_answers
from posixlab.backends import engine_for, load
from posixlab.data import DatasetSpec, load_items, select_items
from posixlab.data.exemplars import exemplar_pool
from posixlab.data.prompt_sets import UserPromptSet, read_prompt_set_file
from posixlab.errors import ConfigError
from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder
from posixlab.metrics import REFERENCE_COMPAT, psi, psi_per_prompt
from posixlab.metrics.factors import set_factors
from posixlab.models import ModelSpec
from posixlab.models.causal_lm import TokenizedModel
from posixlab.models.loading import check_spec
from posixlab.paths import default_cache_dir
from posixlab.prompts import PromptItem
from posixlab.rephrase import RephraserConfig, make_paraphrase_source
from posixlab.results import SetWriter, build_summary, read_sets, write_summary
from posixlab.scoring import EngineOptions, ScoreCache
from posixlab.scoring.engine import SetScorer
from posixlab.shards import config_fingerprint, parse_shard, shard_indices
from posixlab.variants import VARIANT_TYPES, PromptSet, PromptVariant, VariantGenerator, get_variant_generator
from posixlab.version import __version__

USER_SETS = "prompt_sets"  # the data set name of the user's own prompt sets (conf/dataset/prompt_sets.yaml)
USER_VARIANT = "user"  # their variant type: the prompts are the user's, no variant is generated


@dataclass
class RunConfig:
    model: ModelSpec
    dataset: DatasetSpec
    variant: str = "spelling"
    num_sets: int | None = 20  # prompt sets (one per data item); None: every item
    num_variants: int = 20  # variants per set; the set adds the original, so N = num_variants + 1
    max_new_tokens: int = 5
    seed: int = 0
    shots: int = 0  # few-shot exemplars before each prompt (paper Table 2: 0-3, MMLU)
    perturb_shots: bool = False  # apply each variant's question edit to the exemplars too (the paper is silent)
    chat_template: bool = False  # wrap each prompt in the model's chat template (the paper does not)
    output_dir: str = "."
    cache_dir: str | None = None  # models and the score cache; None: ~/.cache/posixlab (or $POSIXLAB_CACHE)
    score_cache: bool = True  # reuse generations and scores from earlier runs of the same model (content-keyed)
    score_cache_dir: str | None = None  # None: <cache_dir>/scores
    engine: EngineOptions = field(default_factory=EngineOptions)
    variant_options: dict = field(default_factory=dict)
    rephraser: RephraserConfig = field(default_factory=RephraserConfig)  # paraphrase and mixture variants only
    # embeds responses for the semantic-coherence factor; None: that factor is left out (the other three are kept)
    embedding: EmbeddingSpec | None = field(default_factory=EmbeddingSpec)
    # score each answer option as a continuation of every prompt (multiple-choice items with a gold answer), for
    # accuracy from the options' log-likelihoods; the greedy response is parsed for accuracy either way
    score_options: bool = True
    # the options reading scores each option's mark (" (B)", lm-evaluation-harness's letter scoring); with
    # option_text, the mark followed by the option's text (" (B)Paris"), as a few-shot exemplar writes its answer.
    # Summed log-likelihoods, not length-normalised: longer option texts are penalised (lm-evaluation-harness's acc)
    option_text: bool = False
    shard: str | None = None  # "K/N": run the K-th of N deterministic slices of the sets (posixlab/shards.py)


def make_generator(cfg: RunConfig) -> VariantGenerator:
    allowed = cfg.dataset.variants
    if allowed is not None and cfg.variant not in allowed:
        raise ConfigError(f"dataset {cfg.dataset.name} allows variant types {', '.join(allowed)} only (the others do "
                          f"not preserve its intent; see conf/dataset/{cfg.dataset.name}.yaml); to run it anyway, set "
                          f"dataset.variants=null")
    options = dict(cfg.variant_options)
    if VARIANT_TYPES.get(cfg.variant) is not None and VARIANT_TYPES[cfg.variant].uses_paraphrases:
        options["source"] = make_paraphrase_source(cfg.rephraser, cfg.cache_dir or default_cache_dir())
    return get_variant_generator(cfg.variant, **options)


def check_max_new_tokens(value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"max_new_tokens must be a whole number of at least 1 (a response has at least one token), "
                          f"got {value!r}")


def check_settings(cfg: RunConfig) -> None:
    """Settings that are wrong whatever the data: caught before anything is loaded."""
    if cfg.model is not None:  # None: prompt sets built without a model (build_prompt_sets alone)
        check_spec(cfg.model)
    parse_shard(cfg.shard)
    if cfg.shots < 0:
        raise ConfigError(f"shots must be 0 or more, got {cfg.shots}")
    check_max_new_tokens(cfg.max_new_tokens)
    if cfg.num_sets is not None and cfg.num_sets < 1:
        raise ConfigError(f"num_sets must be at least 1 (or null for every set), got {cfg.num_sets}")


def user_prompt_set(given: UserPromptSet) -> PromptSet:
    """A user's prompt set as the record type every run uses: the first prompt is the original, the rest are
    ``user`` variants; the set's own response length, if it has one, travels in its item's ``meta``."""
    meta = {"max_new_tokens": given.max_new_tokens} if given.max_new_tokens is not None else {}
    item = PromptItem(given.set_id, given.prompts[0], answer=given.answer, meta=meta)
    prompts = [PromptVariant(text=given.prompts[0], kind="original", index=-1)]
    prompts += [PromptVariant(text=text, kind=USER_VARIANT, index=k) for k, text in enumerate(given.prompts[1:])]
    return PromptSet(item=item, variant_type=USER_VARIANT, prompts=tuple(prompts))


def _user_prompt_sets(cfg: RunConfig, given: list[UserPromptSet] | None) -> tuple[list[PromptSet], dict]:
    if cfg.variant != USER_VARIANT:
        raise ConfigError(f"your prompt sets are used as given, so no variant type applies (variant={cfg.variant} "
                          f"was asked); leave variant unset or set variant={USER_VARIANT}")
    if cfg.shots:
        raise ConfigError(f"your prompt sets are used as given, so shots={cfg.shots} cannot add exemplars; write "
                          f"the exemplars into your prompts and run with shots=0")
    if given is None:
        if not cfg.dataset.path:
            raise ConfigError("dataset=prompt_sets needs the file: dataset.path=my_sets.jsonl (one JSON object per "
                              'line: {"id": ..., "prompts": ["...", "..."]}; README, "Your own prompts")')
        given = read_prompt_set_file(cfg.dataset.path)
    given = given[: cfg.num_sets or len(given)]  # as given: the first num_sets sets, in order
    about = {"variant_details": {"prompt_sets": cfg.dataset.path or "given in Python"}, "shots": 0,
             "perturb_shots": False, "exemplar_pool": None}
    return [user_prompt_set(g) for g in given], about


def build_prompt_sets(cfg: RunConfig, progress: bool = True,
                      given: list[UserPromptSet] | None = None) -> tuple[list[PromptSet], dict]:
    """The run's prompt sets, and what the results should record about how they were made. ``given``: the user's
    own sets (``posixlab.evaluate``), used as given; ``dataset.name == "prompt_sets"`` reads them from its path."""
    check_settings(cfg)
    if given is not None or cfg.dataset.name == USER_SETS:
        return _user_prompt_sets(cfg, given)
    if cfg.variant == USER_VARIANT:
        raise ConfigError(f"variant={USER_VARIANT} means your own prompt sets: use it with dataset=prompt_sets "
                          f"dataset.path=FILE")
    generator = make_generator(cfg)
    all_items = load_items(cfg.dataset)
    items = select_items(all_items, cfg.num_sets, cfg.seed, cfg.dataset.exclude_items)
    # exemplars come from every item, also those a length limit keeps out of the prompt sets (that limit is about
    # the rephraser's reach, not about exemplars)
    every = load_items(replace(cfg.dataset, max_question_chars=None)) if cfg.dataset.max_question_chars else all_items
    pool = exemplar_pool(cfg.dataset, every) if cfg.shots else None
    shots = [pool.select(item, cfg.shots, cfg.seed) if pool else () for item in items]
    to_render = items + ([ex for s in shots for ex in s] if cfg.perturb_shots else [])
    generator.prepare(list(dict.fromkeys(to_render)), cfg.num_variants, progress)
    sets = [generator.build_set(item, cfg.num_variants, cfg.seed, s, cfg.perturb_shots) for item, s in zip(items, shots)]
    about = {"variant_details": generator.describe(), "shots": cfg.shots, "perturb_shots": cfg.perturb_shots,
             "exemplar_pool": pool.description if pool else None}
    return sets, about


def _set_record(prompt_set: PromptSet, model_texts, prompt_ids, scores, lm: TokenizedModel, max_new_tokens: int,
                embedder: SentenceEmbedder | None, continuations: list[str], lead: str,
                option_text: bool = False) -> dict:
    lengths = scores.lengths
    texts = [lm.decode(r) for r in scores.responses]
    item = prompt_set.item
    embeddings = embedder.embed(texts) if embedder is not None else None
    return {
        "set_id": prompt_set.set_id,
        "item_id": prompt_set.item.item_id,
        "subject": prompt_set.item.subject,
        "answer": prompt_set.item.answer,
        "variant_type": prompt_set.variant_type,
        "max_new_tokens": max_new_tokens,
        "exemplars": [ex.item_id for ex in prompt_set.shots],
        "prompts": [
            {**p.to_dict(), "model_text": mt if mt != p.text else None, "num_tokens": len(ids)}
            for p, mt, ids in zip(prompt_set.prompts, model_texts, prompt_ids)
        ],
        "responses": [
            {"text": t, "token_ids": r, "length": len(r), "ends_with_eos": bool(r) and r[-1] in lm.eos_ids,
             "generation_logprobs": g}
            for t, r, g in zip(texts, scores.responses, scores.generation_logprobs)
        ],
        "logprob_matrix": scores.matrix.tolist(),
        "lengths": lengths,
        "psi": psi(scores.matrix, lengths),
        "psi_per_prompt": psi_per_prompt(scores.matrix, lengths),  # their mean is ψ (metrics/posix.py)
        "psi_reference_compat": psi(scores.matrix, lengths, mode=REFERENCE_COMPAT, max_new_tokens=max_new_tokens),
        # responses are the same response when their token ids are (paper §3.3's four factors; metrics/factors.py)
        "factors": set_factors([tuple(r) for r in scores.responses], scores.matrix, embeddings),
        # per prompt: the gold answer, the option its log-likelihoods pick, the greedy response's reading (answers.py)
        "answers": set_answers(item.options, item.answer, [p.record for p in prompt_set.prompts], texts,
                               continuations, scores.candidates, lead, option_text),
        "stats": scores.stats,
    }


def _score_in_order(engines: dict[int, SetScorer], lengths: list[int], sets: list, candidates: list):
    """(set index, scores) from the engine of each set's response length, as each set finishes."""
    for length, engine in engines.items():
        indices = [i for i, n in enumerate(lengths) if n == length]
        extra = [candidates[i] for i in indices]
        for local, scores in engine.score_sets([sets[i] for i in indices], extra if any(extra) else None):
            yield indices[local], scores


def run(cfg: RunConfig, lm: TokenizedModel | None = None, progress: bool = True,
        given: list[UserPromptSet] | None = None) -> dict:
    """Run ``cfg`` and write its results to ``cfg.output_dir``; returns the summary. ``lm`` reuses a loaded model
    (the caller keeps it; a model loaded here is closed at the end, which stops a server it started); ``given``
    scores the user's own prompt sets instead of the configured data set's."""
    with ExitStack() as owned:
        if lm is None and cfg.model.backend != "transformers":
            # a server is asked first, before any prompt is built: a dead one is reported at once
            lm = owned.enter_context(closing(load(cfg.model, cfg.cache_dir)))
        return _run(cfg, lm, progress, given, owned)


def _run(cfg: RunConfig, lm: TokenizedModel | None, progress: bool, given, owned: ExitStack) -> dict:
    prompt_sets, about = build_prompt_sets(cfg, progress, given)
    cell_size = len(prompt_sets)
    positions = shard_indices(cell_size, cfg.shard)  # every set, or one shard's slice; records keep cell indices
    prompt_sets = [prompt_sets[i] for i in positions]
    if lm is None:
        lm = owned.enter_context(closing(load(cfg.model, cfg.cache_dir)))
    # a set may carry its own response length (user prompt sets); every other set takes the run's
    lengths = [prompt_set.item.meta.get("max_new_tokens") or cfg.max_new_tokens for prompt_set in prompt_sets]
    encoded = []
    for prompt_set, length in zip(prompt_sets, lengths):
        texts = [lm.apply_chat_template(p.messages()) if cfg.chat_template else p.text for p in prompt_set.prompts]
        ids = [lm.encode(t, add_special_tokens=not cfg.chat_template) for t in texts]
        for k, prompt in enumerate(ids):
            lm.check_fits(prompt, length, what=f"prompt {k} of set {prompt_set.set_id}")
        encoded.append((texts, ids))

    cache = None
    if cfg.score_cache:
        folder = cfg.score_cache_dir or Path(cfg.cache_dir or default_cache_dir()) / "scores"
        cache = ScoreCache(folder, lm.identity)
    # answer options scored as continuations (multiple choice with a gold answer): after the paper's "A:" a space
    # comes before the option's mark; in a chat template the assistant's turn starts with it
    lead = "" if cfg.chat_template else " "
    continuations = [candidate_strings(p.item.options, [v.record for v in p.prompts], lead, cfg.option_text)
                     if cfg.score_options and p.item.answer is not None else [] for p in prompt_sets]
    candidate_ids = [[lm.encode(c, add_special_tokens=False) for c in cs] for cs in continuations]
    # one engine per response length (a run's sets share one unless the user's sets set their own)
    engines = {n: engine_for(lm, n, cfg.engine, cache) for n in sorted(set(lengths))}
    embedder = SentenceEmbedder(cfg.embedding) if cfg.embedding is not None else None
    tokens_before = lm.forward_tokens

    out = Path(cfg.output_dir)
    with SetWriter(out) as writer:
        desc, done = f"{lm.name} · {cfg.variant}", 0
        bar = tqdm(total=len(prompt_sets), desc=desc, unit="set", disable=not progress,
                   file=sys.stderr)
        started = time.monotonic()
        # Sets finish wave by wave, in order of prompt length; each record is written the moment it is done.
        for index, scores in _score_in_order(engines, lengths, [ids for _, ids in encoded], candidate_ids):
            texts, ids = encoded[index]
            record = _set_record(prompt_sets[index], texts, ids, scores, lm, lengths[index], embedder,
                                 continuations[index], lead, cfg.option_text)
            writer.write({"set_index": positions[index], **record})
            bar.update(1)
            bar.set_postfix(psi=f"{record['psi']:.3f}", cached=scores.stats["cached"])
            if not progress:  # no bar (sweeps, logs): one plain line per finished set, so a log shows how far it got
                done += 1
                print(f"posixlab: {desc}: {done}/{len(prompt_sets)} sets, {time.monotonic() - started:.0f} s, "
                      f"set {positions[index]} ψ = {record['psi']:.3f}", file=sys.stderr, flush=True)
        bar.close()
    if cache is not None:
        cache.close()
    meta = {
        "model": lm.identity,
        "dataset": cfg.dataset.name,
        "dataset_source": cfg.dataset.source,
        "variant": cfg.variant,
        # N, or None when the sets differ in size (user prompt sets, mixtures of other sizes)
        "num_prompts_per_set": sizes.pop() if len(sizes := {len(p.prompts) for p in prompt_sets}) == 1 else None,
        "max_new_tokens": cfg.max_new_tokens,
        "seed": cfg.seed,
        "chat_template": cfg.chat_template,
        "embedding": embedder.identity if embedder is not None else None,
        **about,
        "posixlab": __version__,
        "python": platform.python_version(),
        "config": asdict(cfg),
        "config_fingerprint": config_fingerprint(asdict(cfg)),
        "shard": None if cfg.shard is None else {"index": parse_shard(cfg.shard)[0], "count": parse_shard(cfg.shard)[1],
                                                 "num_sets_total": cell_size, "set_indices": positions},
        "score_cache": str(cache.path) if cache is not None else None,
        "engine": {"forward_tokens": lm.forward_tokens - tokens_before,
                   "processed_tokens": sum(engine.processed_tokens for engine in engines.values())},
    }
    summary = build_summary(read_sets(out), meta)
    write_summary(out, summary)
    return summary
