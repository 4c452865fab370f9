"""The POSIX task (Chatterjee et al., 2024): a unit is one prompt set (an item's original prompt and its variants);
the model answers every prompt greedily, every response is scored under every prompt of its set, and the record holds
the N×N matrix, ψ, the paper's four factors and the answers per prompt. ``PosixConfig`` is its plain configuration.

The prompt sets come from a data set and a variant type, or, with ``dataset.name == "prompt_sets"`` (variant
``user``), from the user's own file or lists, used as given. Cheap checks (data, variants, context lengths) all
happen before the first forward pass.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from posixlab.answers import candidate_strings, set_answers
from posixlab.backends import text_only
from posixlab.data import OPEN_ENDED, DatasetSpec, load_items, select_items
from posixlab.data.exemplars import exemplar_pool
from posixlab.data.prompt_sets import UserPromptSet, read_prompt_set_file
from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder, check_embedding_available
from posixlab.errors import ConfigError, is_whole
from posixlab.metrics import REFERENCE_COMPAT, psi, psi_per_prompt
from posixlab.metrics.factors import set_factors
from posixlab.models.loading import ModelSpec, spec_from_dict
from posixlab.paths import default_cache_dir
from posixlab.prompts import PromptItem
from posixlab.rephrase import RephraserConfig, make_paraphrase_source
from posixlab.metrics.accuracy import accuracy_metrics
from posixlab.rephrase.quality import describe_summary
from posixlab.results import (SETS_FILE, accuracy_lines, api_lines, build_summary, choice_lines, iter_records,
                              prompts_per_set, race_words, summary_records, without_texts, write_summary)
from posixlab.scoring import EngineOptions
from posixlab.seeding import rng_for
from posixlab.shards import parse_shard
from posixlab.tasks.base import (ACCURACY_GATES, ACCURACY_MISSING, ACCURACY_RANGES, FRACTION, GENERATE, SCORE,
                                 Request, Task, Tracked, answer_texts, check_max_new_tokens, model_name, read_setting,
                                 shared_settings)
from posixlab.tasks.race import PromptRace
from posixlab.variants import PromptSet, PromptVariant, VariantGenerator, get_variant_generator, variant_type
from posixlab.variants.format import open_ended_refused

USER_SETS = "prompt_sets"  # the data set name of the user's own prompt sets (conf/dataset/prompt_sets.yaml)
USER_VARIANT = "user"  # their variant type: the prompts are the user's, no variant is generated


@dataclass
class PosixConfig:
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
    dry_run: bool = False  # say what the run would do (for a chat API: what it would send), do nothing
    # False: answers only (no ψ): what a text-only model (a chat API) allows, and a cheap accuracy run for any model:
    # every prompt is answered once; a model that scores also scores each option after it (score_options), nothing else
    psi: bool = True
    # with psi=false and a shared prompt pool (variant=template or format): the share of each set's prompts answered,
    # a seeded sample per set; each prompt's accuracy over every set is then estimated (PromptEval's Rasch model)
    prompt_share: float = 1.0
    # with psi=false and a shared prompt pool: race the prompts (posixlab.metrics.race) in rounds of this many sets,
    # dropping after each round the prompts a racing prompt beats beyond noise; later sets ask only those left. None:
    # every set asks every prompt
    race_sets: int | None = None
    race_confidence: float = 0.95  # the probability that the best prompt is among those left racing


def make_generator(cfg: PosixConfig) -> VariantGenerator:
    allowed = cfg.dataset.variants
    if allowed is not None and cfg.variant not in allowed:
        raise ConfigError(f"dataset {cfg.dataset.name} allows variant types {', '.join(allowed)} only (the others do "
                          f"not preserve its intent; see conf/dataset/{cfg.dataset.name}.yaml), not variant="
                          f"{cfg.variant}: run with {' or '.join(f'variant={v}' for v in allowed)}, or set "
                          f"dataset.variants=null to run it anyway")
    options = dict(cfg.variant_options)
    if variant_type(cfg.variant).uses_paraphrases:  # a plug-in's type is imported here
        # a dry run writes no paraphrase: it says what the rephraser would write
        options["source"] = make_paraphrase_source(cfg.rephraser, cfg.cache_dir or default_cache_dir(), cfg.model,
                                                   dry_run=cfg.dry_run)
    return get_variant_generator(cfg.variant, **options)


SHARED_POOLS = ("template", "format")  # variant types whose prompt j is one prompt for every item


def _exemplars_named(cfg: PosixConfig) -> str | None:
    """The setting that names where few-shot exemplars come from (``dataset.exemplar_path=...`` or
    ``dataset.exemplar_split=...``), as a message quotes it; None when neither is set."""
    d = cfg.dataset
    return f"dataset.exemplar_path={d.exemplar_path}" if d.exemplar_path else \
        f"dataset.exemplar_split={d.exemplar_split}" if d.exemplar_split else None


def check_settings(cfg: PosixConfig) -> None:
    """Settings that are wrong whatever the data: caught before anything is loaded."""
    parse_shard(cfg.shard)
    if cfg.dataset.exemplar_split and cfg.dataset.exemplar_path:
        raise ConfigError(f"few-shot exemplars come from one place: dataset.exemplar_path={cfg.dataset.exemplar_path}"
                          f" or dataset.exemplar_split={cfg.dataset.exemplar_split}, not both")
    if cfg.dataset.exemplar_split and cfg.dataset.source != "hub" and cfg.dataset.name != USER_SETS:
        raise ConfigError(f"dataset.exemplar_split={cfg.dataset.exemplar_split} names a split of a hub data set; "
                          f"{cfg.dataset.name} is read from {cfg.dataset.source} (dataset.source), which has no "
                          f"splits: give the exemplars' file as dataset.exemplar_path=FILE")
    if cfg.variant == "format" and (cfg.dataset.loader or cfg.dataset.name) in OPEN_ENDED:  # before it downloads
        raise open_ended_refused(cfg.dataset.name)
    share = cfg.prompt_share
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ConfigError(f"prompt_share is the share of each set's prompts to answer, above 0 and at most 1, not "
                          f"{share!r}")
    if share < 1 and cfg.psi:
        raise ConfigError(f"prompt_share={share} answers a sample of each set's prompts, but ψ scores every response "
                          f"under every prompt of its set: add task.psi=false (accuracy only), or drop prompt_share")
    if share < 1 and (cfg.variant not in SHARED_POOLS or cfg.dataset.name == USER_SETS):
        raise ConfigError(f"prompt_share={share} samples a pool of prompts every item shares, whose accuracies are "
                          f"then estimated over every item: variant=template or variant=format, not "
                          f"{USER_VARIANT if cfg.dataset.name == USER_SETS else cfg.variant}")
    check_race(cfg)
    if not is_whole(cfg.shots, 0):
        raise ConfigError(f"shots must be a whole number, 0 or more, got {cfg.shots!r}")
    check_max_new_tokens(cfg.max_new_tokens)
    if cfg.num_sets is not None and not is_whole(cfg.num_sets, 1):
        raise ConfigError(f"num_sets must be at least 1 (or null for every set), got {cfg.num_sets!r}")


def check_race(cfg: PosixConfig) -> None:
    """A prompt race (``race_sets``) compares the answers of a pool of prompts every set shares, one round of sets
    after another, over the whole cell."""
    rounds = cfg.race_sets
    if rounds is None:
        return
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ConfigError(f"race_sets is the number of sets in each round of a prompt race, at least 1, not {rounds!r}")
    if cfg.psi:
        raise ConfigError(f"race_sets={rounds} races the prompts by their answers, but ψ scores every response under "
                          f"every prompt of its set: add task.psi=false (accuracy only), or drop race_sets")
    if cfg.variant not in SHARED_POOLS or cfg.dataset.name == USER_SETS:
        raise ConfigError(f"race_sets={rounds} races a pool of prompts every item shares: variant=template or "
                          f"variant=format, not {USER_VARIANT if cfg.dataset.name == USER_SETS else cfg.variant}")
    confidence = cfg.race_confidence
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ConfigError(f"race_confidence is the probability that the best prompt stays racing, between 0 and 1 "
                          f"(0.95), not {confidence!r}")
    if cfg.prompt_share < 1:
        raise ConfigError(f"race_sets and prompt_share={cfg.prompt_share} both choose which prompts a set asks: use "
                          f"one")
    if cfg.shard is not None:
        raise ConfigError(f"a prompt race decides each round from every set before it, so it cannot be split into "
                          f"shards (shard={cfg.shard}): run it whole, or drop race_sets")


def _sets(n: int) -> str:
    return f"{n} set" if n == 1 else f"{n} sets"


def user_prompt_set(given: UserPromptSet) -> PromptSet:
    """A user's prompt set as the record type every run uses: the first prompt is the original, the rest are
    ``user`` variants; the set's own response length, if it has one, travels in its item's ``meta``."""
    meta = {"max_new_tokens": given.max_new_tokens} if given.max_new_tokens is not None else {}
    item = PromptItem(given.set_id, given.prompts[0], answer=given.answer, meta=meta)
    prompts = [PromptVariant(text=given.prompts[0], kind="original", index=-1)]
    prompts += [PromptVariant(text=text, kind=USER_VARIANT, index=k) for k, text in enumerate(given.prompts[1:])]
    return PromptSet(item=item, variant_type=USER_VARIANT, prompts=tuple(prompts))


def _user_prompt_sets(cfg: PosixConfig, given: list[UserPromptSet] | None) -> tuple[list[PromptSet], dict]:
    if cfg.variant != USER_VARIANT:
        raise ConfigError(f"your prompt sets are used as given, so no variant type applies (variant={cfg.variant} "
                          f"was asked); leave variant unset or set variant={USER_VARIANT}")
    exemplars = _exemplars_named(cfg)
    if cfg.shots or exemplars:
        asked = f"shots={cfg.shots}" if cfg.shots else exemplars
        raise ConfigError(f"your prompt sets are used as given, so {asked} cannot add exemplars; write the "
                          f"exemplars into your prompts and run with shots=0 (and no exemplar_path)")
    if given is None:
        if not cfg.dataset.path:
            raise ConfigError("dataset=prompt_sets needs the file: dataset.path=my_sets.jsonl (one JSON object per "
                              'line: {"id": ..., "prompts": ["...", "..."]}; README, "Your own prompts")')
        given = read_prompt_set_file(cfg.dataset.path)
    given = given[: cfg.num_sets or len(given)]  # as given: the first num_sets sets, in order
    about = {"variant_details": {"prompt_sets": cfg.dataset.path or "given in Python"}, "shots": 0,
             "perturb_shots": False, "exemplar_pool": None}
    return [user_prompt_set(g) for g in given], about


def build_prompt_sets(cfg: PosixConfig, progress: bool = True,
                      given: list[UserPromptSet] | None = None) -> tuple[list[PromptSet], dict]:
    """The run's prompt sets, and what the results should record about how they were made. ``given``: the user's
    own sets (``posixlab.evaluate``), used as given; ``dataset.name == "prompt_sets"`` reads them from its path."""
    check_settings(cfg)
    if given is not None or cfg.dataset.name == USER_SETS:
        sets, about = _user_prompt_sets(cfg, given)
        note_sets_of_one_text(sets, "your prompt sets")
        return sets, about
    if cfg.variant == USER_VARIANT:
        raise ConfigError(f"variant={USER_VARIANT} means your own prompt sets: use it with dataset=prompt_sets "
                          f"dataset.path=FILE")
    # notes, not errors: a sweep over shots=0,1,3 keeps its 0-shot cell
    if cfg.perturb_shots and not cfg.shots:
        print("posixlab: task.perturb_shots=true changes nothing with task.shots=0 (there are no exemplars to edit)",
              file=sys.stderr)
    exemplars = _exemplars_named(cfg)
    if exemplars and not cfg.shots:
        print(f"posixlab: {exemplars} changes nothing with task.shots=0 (no exemplar precedes a question)",
              file=sys.stderr)
    generator = make_generator(cfg)
    all_items = load_items(cfg.dataset)
    items = select_items(all_items, cfg.num_sets, cfg.seed, cfg.dataset.exclude_items)
    if cfg.num_sets is not None and len(items) < cfg.num_sets:  # a note: every item is used, as null would
        print(f"posixlab: num_sets={cfg.num_sets} asks for more sets than {cfg.dataset.name} has items"
              f"{' of the length limit' if cfg.dataset.max_question_chars else ''}"
              f"{' left after exclude_items' if cfg.dataset.exclude_items else ''}: {len(items)} "
              f"set{'' if len(items) == 1 else 's'}, one an item",
              file=sys.stderr)
    # exemplars come from every item, also those a length limit keeps out of the prompt sets (that limit is about
    # the rephraser's reach, not about exemplars)
    every = load_items(replace(cfg.dataset, max_question_chars=None)) if cfg.dataset.max_question_chars else all_items
    pool = exemplar_pool(cfg.dataset, every) if cfg.shots else None
    shots = [pool.select(item, cfg.shots, cfg.seed) if pool else () for item in items]
    to_render = items + ([ex for s in shots for ex in s] if cfg.perturb_shots else [])
    try:
        generator.prepare(list(dict.fromkeys(to_render)), cfg.num_variants, progress)
        sets = [generator.build_set(item, cfg.num_variants, cfg.seed, s, cfg.perturb_shots)
                for item, s in zip(items, shots)]
        about = {"variant_details": generator.describe(), "shots": cfg.shots, "perturb_shots": cfg.perturb_shots,
                 "exemplar_pool": pool.description if pool else None}
    finally:
        generator.release()  # a rephraser's model, closed before the run's model loads
    if cfg.prompt_share < 1:
        check_every_prompt_asked(sets, cfg.prompt_share, cfg.seed)
    note_sets_of_one_text(sets, f"variant={cfg.variant}")
    return sets, about


def note_sets_of_one_text(sets: list[PromptSet], made_by: str) -> None:
    """A warning on stderr where every prompt of a set is the same text: its ψ is 0 by construction, which says
    nothing about the model (a variant type whose ``edit`` changes nothing, a file that repeats one prompt)."""
    same = [s.set_id for s in sets if len(s.prompts) > 1 and len(set(s.texts())) == 1]
    if same:
        print(f"posixlab: warning: {len(same)} of {len(sets)} sets ({', '.join(same[:3])}"
              f"{', ...' if len(same) > 3 else ''}) have every prompt the same text, as {made_by} made them: their ψ "
              f"is 0 by construction, not a measure of the model", file=sys.stderr)


def _set_record(prompt_set: PromptSet, model_texts, prompt_ids, scores, lm, max_new_tokens: int,
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
        **answer_fields(item),
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
        "answers": set_answers(item.options, item.gold, [p.record for p in prompt_set.prompts], texts,
                               continuations, scores.candidates, lead, option_text),
        "stats": scores.stats,
    }


def answer_fields(item: PromptItem) -> dict:
    """A record's ``answer``: the gold answer, or None; an ungraded item's reference output (Alpaca's) is kept as
    ``reference_output``, not as a gold answer.

    >>> answer_fields(PromptItem("a", "Name a colour.", answer="Red is one.", graded=False))
    {'answer': None, 'reference_output': 'Red is one.'}
    >>> answer_fields(PromptItem("b", "2+2?", answer="4"))
    {'answer': '4'}
    """
    if item.graded or item.answer is None:
        return {"answer": item.gold}
    return {"answer": None, "reference_output": item.answer}


def asked_prompts(set_id: str, size: int, share: float, seed: int) -> list[int]:
    """The prompts of a set that are answered (``prompt_share``): all of them at 1; else round(share · size) of them
    (at least 1), drawn from the set's own seeded stream (``posixlab.seeding``), so a set is asked the same prompts
    whatever else the run holds, in shards too. Every prompt is equally likely to be drawn.

    >>> asked_prompts("mmlu/x/0", 21, 1.0, 0) == list(range(21)), len(asked_prompts("mmlu/x/0", 21, 0.2, 0))
    (True, 4)
    >>> asked_prompts("mmlu/x/0", 21, 0.2, 0) == asked_prompts("mmlu/x/0", 21, 0.2, 0), asked_prompts("s", 5, 0.01, 0)
    (True, [1])
    """
    if share >= 1:
        return list(range(size))
    return sorted(rng_for(seed, set_id, "prompt_share", 0).sample(range(size), max(1, round(share * size))))




def check_every_prompt_asked(sets: list[PromptSet], share: float, seed: int) -> None:
    """A ``ConfigError`` before any answer when the sample leaves a prompt of the pool unasked in every set: its
    accuracy could not be estimated. (A shard may still miss one: its own summary says so; the merged run has it.)"""
    size = max(len(s.prompts) for s in sets)
    asked = {j for s in sets for j in asked_prompts(s.set_id, len(s.prompts), share, seed)}
    never = [j for j in range(size) if j not in asked]
    if never:
        raise ConfigError(f"prompt_share={share} over {len(sets)} sets never asks prompt(s) "
                          f"{', '.join(map(str, never))} of {size}: raise task.prompt_share or task.num_sets (about {size} / prompt_share sets "
                          f"ask each prompt once on average)")


def _prompt_entry(prompt: PromptVariant, request: Request | None) -> dict:
    """A prompt of an answers record: the text the model was sent where it differs (a chat template), its length in
    tokens; both None for a prompt not asked (or sent as text to a chat API)."""
    if request is None:
        return {**prompt.to_dict(), "model_text": None, "num_tokens": None}
    return {**prompt.to_dict(), "model_text": request.texts[0] if request.texts[0] != prompt.text else None,
            "num_tokens": len(request.ids[0]) if request.ids else None}


def _answers_record(prompt_set: PromptSet, requests: list[Request], results: list, lm, lead: str,
                    asked: list[int], continuations: list[str] = (), option_text: bool = False) -> dict:
    """A set's record without ψ (``psi=false``): every prompt's greedy answer and its readings against the gold
    answer (the options' too, where ``continuations`` were scored under each prompt). The same keys as a ψ record
    where they apply; no matrix, ψ or factors. With ``prompt_share`` below 1 (or a race) only the ``asked`` prompts
    were answered (``requests`` and ``results`` are theirs): the others keep their place with no response
    (``{"text": None, "asked": False}``) and no reading, and the record lists ``asked``."""
    texts = [answer_texts(result, lm)[0] for result in results]
    responses = []
    for text, result in zip(texts, results):
        response = {"text": text}
        if hasattr(result, "responses"):  # token ids, where the model has them
            ids = result.responses[0]
            response.update({"token_ids": ids, "length": len(ids), "ends_with_eos": bool(ids) and ids[-1] in lm.eos_ids})
        elif getattr(result, "answers", None):  # a chat API: what answered
            answer = result.answers[0]
            response.update({"finish_reason": answer.finish_reason, "served": [answer.served_model,
                                                                               answer.system_fingerprint]})
        responses.append(response)
    item, prompts = prompt_set.item, prompt_set.prompts
    scored = [getattr(result, "candidates", None) for result in results]  # each request's one prompt's row
    rows = [row[0] for row in scored] if continuations and all(row is not None for row in scored) else None
    answers = set_answers(item.options, item.gold, [prompts[j].record for j in asked], texts,
                          list(continuations) if rows is not None else [], rows, lead, option_text)
    by_prompt = dict(zip(asked, zip(requests, responses, answers or [None] * len(asked))))
    record = {
        "set_id": prompt_set.set_id, "item_id": item.item_id, "subject": item.subject, **answer_fields(item),
        "variant_type": prompt_set.variant_type, "max_new_tokens": requests[0].max_new_tokens,
        "exemplars": [ex.item_id for ex in prompt_set.shots],
        "prompts": [_prompt_entry(p, by_prompt[j][0] if j in by_prompt else None) for j, p in enumerate(prompts)],
        "responses": [by_prompt[j][1] if j in by_prompt else {"text": None, "asked": False}
                      for j in range(len(prompts))],
        "answers": None if answers is None else [  # a prompt not asked: no reading
            by_prompt[j][2] if j in by_prompt else {"gold": item.gold, "by_options": None, "by_greedy": None}
            for j in range(len(prompts))],
    }
    if len(asked) < len(prompts):
        record["asked"] = asked
    return record


class PosixTask(Task):
    name = "posix"
    config_type = PosixConfig
    headline_name = "POSIX"
    headline_key = "psi.posix"
    grid_columns = ("variant", "shots")  # the paper's Tables 1 and 2: models by variant type, a table per shot count
    # besides ψ, what the answers say (multiple choice; results.accuracy_lines): the mean accuracy over prompts, how
    # far apart the best and worst prompt are, and how often two prompts of a set get the same answer
    grid_extra = tuple((f"{name} ({reading})", f"accuracy.by_{reading}.{key}",
                        f"accuracy.by_{reading}.ci95" if interval else None)
                       for name, key, interval in (("accuracy", "accuracy", True),  # two-way: items and prompts
                                                   ("accuracy range over prompts", "spread.range", False),
                                                   ("consistency rate", "consistency_rate", False))
                       for reading in ("options", "greedy")) + (
        # a judge's (judge= or posixlab judge: judge.json beside the records, with_files_beside): judged consistency
        ("judged the same (judge)", "judged.judged_share", None), ("judged away (judge)", "judged.judged_away", None))
    # min_judged_share: a judge's (judge= or posixlab judge, read from judge.json: with_files_beside), guarded by how
    # often that judge called another question's response the same (a judge that says yes to everything passes any)
    gate_metrics = {"max_posix": "psi.posix", "min_judged_share": "judged.judged_share", **ACCURACY_GATES}
    gate_guards = {"max_judge_control_same": "judged.control_judged_same"}
    gate_guarded = {"max_judge_control_same": "min_judged_share"}
    gate_ranges = {"max_posix": (0.0, math.inf), "min_judged_share": FRACTION, "max_judge_control_same": FRACTION,
                   **ACCURACY_RANGES}
    gate_missing = {**ACCURACY_MISSING, "judged": "no judge read this run: end the run with one (judge=packaged, or "
                                                  "judge.model=...), or run posixlab judge RUN before the gate"}
    config_groups = ("variant", "embedding")
    task_settings = ("num_variants", "shots", "perturb_shots", "score_options", "psi", "option_text", "prompt_share",
                     "race_sets", "race_confidence")
    moved_settings = ("num_sets", *task_settings[:-3])  # prompt_share and the race's are newer than top-level spellings
    records_file = SETS_FILE
    index_key = "set_index"
    unit_name = "set"
    live_keys = ("psi",)
    summary_keys = ("schema_version", "psi", "factors", "psi_reference_compat", "compute", "accuracy",
                    "prompt_choice", "most_sensitive", "num_prompts_per_set")

    def __init__(self, cfg: PosixConfig, given: list[UserPromptSet] | None = None):
        super().__init__(cfg)
        self.given = given  # the user's own sets (posixlab.evaluate), used as given
        self.about: dict = {}
        self.embedder = None
        self.lead = "" if cfg.chat_template else " "
        self.race: PromptRace | None = None  # race_sets: the rounds and each finished set's answers
        self.answer_options = False  # psi=false on a model that scores: each prompt's options scored too (prepare)

    def check(self) -> None:
        check_settings(self.cfg)
        if self.cfg.embedding is not None and self.cfg.psi and not self.cfg.dry_run:
            check_embedding_available(self.cfg.embedding)  # a hub embedder the hub will not serve: before any work

    def needs(self) -> dict[str, str]:
        # ψ scores every response under every prompt; option scoring reads each option's log-likelihood
        if not self.cfg.psi:
            return {GENERATE: "greedy responses"}
        return {GENERATE: "greedy responses",
                SCORE: "ψ (every response scored under every prompt of its set; task.psi=false runs the greedy "
                       "answers alone: accuracy per prompt, its spread, worst case, consistency)"}

    def build_units(self, progress: bool) -> list[PromptSet]:
        sets, self.about = build_prompt_sets(self.cfg, progress, self.given)
        return sets

    def prepare(self, lm, units: list[PromptSet], out: Path) -> None:
        # responses are embedded for a factor of ψ (semantic coherence): not needed without ψ, nor by a dry run
        use = self.cfg.embedding is not None and self.cfg.psi and not self.cfg.dry_run
        self.embedder = SentenceEmbedder(self.cfg.embedding) if use else None
        # without ψ, a model that scores still reads each prompt's options (lm-evaluation-harness's reading, one
        # short continuation each after the prompt it already runs); a chat API answers in text alone
        self.answer_options = not self.cfg.psi and self.cfg.score_options and not text_only(lm)

    def requests(self, prompt_set: PromptSet, lm) -> list[Request]:
        cfg = self.cfg
        # a set may carry its own response length (user prompt sets); every other set takes the run's
        length = prompt_set.item.meta.get("max_new_tokens") or cfg.max_new_tokens
        if not cfg.psi:  # answers only: one request per prompt asked (a set of one needs no scoring)
            return self._answer_requests(prompt_set, lm, length)
        texts = [lm.apply_chat_template(p.messages()) if cfg.chat_template else p.text for p in prompt_set.prompts]
        ids = lm.encode_batch(texts, add_special_tokens=not cfg.chat_template)
        for k, prompt in enumerate(ids):
            lm.check_fits(prompt, length, what=f"prompt {k} of set {prompt_set.set_id}")
        # answer options scored as continuations (multiple choice with a gold answer): after the paper's "A:" a
        # space comes before the option's mark; in a chat template the assistant's turn starts with it
        options = self._continuations(prompt_set)
        return [Request(texts, ids, length, lm.encode_batch(options, add_special_tokens=False))]

    def rounds(self, units: list[PromptSet]) -> list[list[int]]:
        if self.cfg.race_sets is None:
            return super().rounds(units)
        self.race = PromptRace(units, self.cfg.race_sets, self.cfg.race_confidence, self.race_reading)
        return self.race.rounds

    def _asked(self, prompt_set: PromptSet) -> list[int]:
        if self.race is not None:
            return self.race.asked(prompt_set)
        return asked_prompts(prompt_set.set_id, len(prompt_set.prompts), self.cfg.prompt_share, self.cfg.seed)

    @property
    def race_reading(self) -> str:
        """What a race compares: the options' log-likelihoods where the run scores them, else the greedy answers."""
        return "options" if self.answer_options else "greedy"

    def _answer_requests(self, prompt_set: PromptSet, lm, length: int) -> list[Request]:
        asked = [(k, prompt_set.prompts[k]) for k in self._asked(prompt_set)]
        if text_only(lm):  # a chat API: each prompt as the text of one user message (exemplars inline)
            return [Request([p.text], [], length) for _, p in asked]
        chat = self.cfg.chat_template
        texts = [lm.apply_chat_template(p.messages()) if chat else p.text for _, p in asked]
        # every option string of the set under each prompt (a prompt reads its own: answers.set_answers)
        options = lm.encode_batch(self._continuations(prompt_set), add_special_tokens=False)
        out = []
        for (k, _), text, ids in zip(asked, texts, lm.encode_batch(texts, add_special_tokens=not chat)):
            lm.check_fits(ids, length, what=f"prompt {k} of set {prompt_set.set_id}")
            out.append(Request([text], [ids], length, options))
        return out

    def _continuations(self, prompt_set: PromptSet) -> list[str]:
        if not (self.cfg.psi or self.answer_options) or not self.cfg.score_options or prompt_set.item.gold is None:
            return []
        return candidate_strings(prompt_set.item.options, [v.record for v in prompt_set.prompts], self.lead,
                                 self.cfg.option_text)

    def record(self, prompt_set: PromptSet, requests: list[Request], scores: list, lm) -> dict:
        if not self.cfg.psi:
            record = _answers_record(prompt_set, requests, scores, lm, self.lead, self._asked(prompt_set),
                                     self._continuations(prompt_set), self.cfg.option_text)
            if self.race is not None:
                self.race.answered(prompt_set, record)
            return record
        (request,), (set_scores,) = requests, scores
        return _set_record(prompt_set, request.texts, request.ids, set_scores, lm, request.max_new_tokens,
                           self.embedder, self._continuations(prompt_set), self.lead, self.cfg.option_text)

    def progress_note(self, record: dict) -> str:
        if "psi" not in record:
            greedy = [a["by_greedy"]["correct"] for a in record.get("answers") or [] if a["by_greedy"]]  # asked
            return f"correct {sum(map(bool, greedy))}/{len(greedy)}" if greedy else ""
        return f"ψ = {record['psi']:.3f}"

    def describe(self) -> str:
        return self.cfg.variant

    def meta(self, lm) -> dict:
        cfg = self.cfg
        return {"dataset": cfg.dataset.name, "dataset_source": cfg.dataset.source, "variant": cfg.variant,
                "max_new_tokens": cfg.max_new_tokens, "chat_template": cfg.chat_template,
                "embedding": self.embedder.identity if self.embedder is not None else None, "psi_computed": cfg.psi,
                # a race's looks are counted from the sets planned, which a run stopped early (a request budget)
                # did not all record: the summary replays the race with the run's count
                **({"race_sets_planned": len(self.race.position), "race_reading": self.race.reading}
                   if self.race is not None else {}),
                **self.about}

    @classmethod
    def summarize(cls, records: list[dict], meta: dict) -> dict:
        sizes = {len(r["prompts"]) for r in records}
        # N, or None when the sets differ in size (user prompt sets), then with the smallest and largest
        meta = {**meta, "num_prompts_per_set": next(iter(sizes)) if len(sizes) == 1 else None,
                **({"num_prompts_range": [min(sizes), max(sizes)]} if len(sizes) > 1 else {})}
        return build_summary(records, meta)

    @classmethod
    def summary_records(cls, folder: Path, skip_unreadable: bool = False) -> list[dict]:
        # texts only for the most sensitive sets
        return summary_records(folder, cls.records_file, cls.index_key, skip_unreadable=skip_unreadable)

    page_record = staticmethod(without_texts)  # a set's detail reads its texts again (whole_unit_records)

    @classmethod
    def write_summary(cls, folder: Path, summary: dict) -> None:
        write_summary(folder, summary)

    # --- the command line, the gate, the tracker ------------------------------------------------------------------------
    @classmethod
    def config_from(cls, c: dict, output_dir: str) -> PosixConfig:
        dataset = dict(c["dataset"])
        if dataset.pop("task", "posix") != "posix":
            raise ConfigError(f"dataset {dataset['name']} is a classification data set: add task=classification")
        for key in ("max_new_tokens", "experiment_sets", "num_sets"):  # defaults of task settings, not of the loader
            dataset.pop(key, None)
        task = c["task"]
        return PosixConfig(
            model=spec_from_dict(c["model"]),
            dataset=read_setting(dataset, DatasetSpec, f"dataset {dataset['name']}"),
            variant=c["variant"]["name"],
            variant_options=c["variant"].get("options") or {},
            num_sets=task["num_sets"],
            num_variants=task["num_variants"],
            shots=task["shots"],
            perturb_shots=task["perturb_shots"],
            **shared_settings(c, output_dir),
            embedding=read_setting(c["embedding"], EmbeddingSpec, "embedding") if c["embedding"].get("name") else None,
            score_options=task["score_options"],
            psi=bool(task["psi"]),
            option_text=bool(task.get("option_text", False)),
            prompt_share=task.get("prompt_share", 1.0),
            race_sets=task.get("race_sets"),
            race_confidence=task.get("race_confidence", 0.95),
        )

    @classmethod
    def num_units(cls, summary: dict) -> int | None:
        return summary["psi"]["num_sets"] if summary.get("psi") else summary.get("num_sets")

    @classmethod
    def with_files_beside(cls, folder: Path, summary: dict) -> dict:
        """With a judge's shares (``judge.json`` in the folder: ``judge=`` or ``posixlab judge``) as ``judged``: its
        grid measures and ``gate.min_judged_share`` read them."""
        from posixlab.judge import read_judged

        judged = read_judged(folder, summary)[0]
        if judged is None:  # no judge, or one of an earlier run in this folder
            return summary
        return {**summary, "judged": {key: judged.get(key) for key in ("judged_share", "identical_share",
                                                                       "judged_away", "control_judged_same")}}

    @classmethod
    def report_lines(cls, summary: dict) -> list[str]:
        about = (f"{model_name(summary)} · {summary['dataset']} · {summary['variant']} · "
                 f"{summary['shots']}-shot")
        accuracy = accuracy_lines(summary.get("accuracy")) + choice_lines(summary.get("prompt_choice"))
        p = summary["psi"]
        if p is None:  # psi=false: the answers alone
            race = race_words(summary.get("race"))
            return [f"answers only (psi=false): {_sets(summary['num_sets'])} · {about}", *([race] if race else []),
                    *accuracy, *api_lines(summary)]
        sd = "n/a" if p["sd"] is None else f"{p['sd']:.4f}"
        quality = describe_summary(summary.get("variant_details", {}).get("paraphrase_quality"))
        ci = "no interval from one set" if p["num_sets"] < 2 else f"95% CI {p['ci95'][0]:.4f} to {p['ci95'][1]:.4f}"
        return [f"POSIX = {p['posix']:.4f} ({ci}, sd {sd}, median "
                f"{p['median']:.4f}, {_sets(p['num_sets'])} of N = {prompts_per_set(summary)}) · "
                f"{about}", *accuracy, *([quality] if quality else [])]

    @classmethod
    def tracked(cls, summary: dict, folder: Path) -> Tracked:
        """ψ and its statistics, the factors, compute and accuracy in the summary; one table row per set."""
        p = summary["psi"]
        if p is None:  # psi=false: the answers alone
            race = summary.get("race")  # task.race_sets: how many prompts are left, and what share was asked
            raced = {} if not race else {"race/prompts_left": len(race["alive"]),
                                         "race/asked_share": race["asked"]["cells"] / max(1, race["asked"]["of"])}
            return Tracked({"num_sets": summary["num_sets"], **accuracy_metrics(summary.get("accuracy")), **raced},
                           artifact_type="posix-answers", artifact_metadata={"num_sets": summary["num_sets"]})
        rows = []  # (set index, table row): records streamed, so a large run holds its table, not its records
        for r in iter_records(folder, cls.records_file):
            f = r.get("factors", {})
            rows.append((r.get(cls.index_key, 0), [
                r.get("set_index"), r["item_id"], r.get("subject"), r["variant_type"], r["psi"],
                r["psi_reference_compat"], f.get("unique_responses"), f.get("response_entropy"),
                f.get("semantic_coherence"), f.get("logprob_variance"), f.get("logprob_sd"),
                json.dumps(sorted({p["kind"] for p in r["prompts"]})),
                json.dumps([x["text"] for x in r["responses"]], ensure_ascii=False)]))
        rows = [row for _, row in sorted(rows, key=lambda pair: pair[0])]  # the data set's order
        return Tracked({
            "posix": p["posix"], "psi_mean": p["mean"], "psi_sd": p["sd"], "psi_median": p["median"],
            "psi_ci95_low": p["ci95"][0], "psi_ci95_high": p["ci95"][1], "num_sets": p["num_sets"],
            "posix_reference_compat": summary["psi_reference_compat"]["posix"],
            **{f"factor/{k}": v["mean"] for k, v in summary.get("factors", {}).items()},
            **{f"compute/{k}": v for k, v in summary.get("compute", {}).items()},
            **accuracy_metrics(summary.get("accuracy")),
        }, "sets", list(TABLE_COLUMNS), rows, "posix-results", {"posix": p["posix"], "num_sets": p["num_sets"]})

    @classmethod
    def units_planned(cls, config: dict) -> int | None:
        task = config.get("task") or {}
        return task["num_sets"] if "num_sets" in task else config.get("num_sets")  # older folders: top level

    @classmethod
    def live_metrics(cls, records: list[dict]) -> dict:
        psis = [r["psi"] for r in records if r.get("psi") is not None]
        return {"POSIX": sum(psis) / len(psis)} if psis else {}

    @classmethod
    def figures(cls, folder: Path) -> dict[str, Path]:
        """The paper's per-run figures (none for psi=false: no ψ)."""
        from posixlab.analysis.collect import load_rows
        from posixlab.analysis.figures import run_figures

        summary = json.loads((Path(folder) / "summary.json").read_text(encoding="utf-8"))
        return {} if summary["psi"] is None else run_figures(load_rows(folder), Path(folder) / "figures")

    # --- posixlab report (posixlab/tasks/posix_report.py) ---------------------------------------------------------------
    report_value_name = "ψ"

    @classmethod
    def report_sections(cls, folder: Path, summary: dict, prefix: str = "") -> str:
        from posixlab.tasks import posix_report

        return posix_report.sections(Path(folder), summary, cls.read_unit_records(folder), prefix,
                                     whole=lambda indices: cls.whole_unit_records(folder, indices))

    @classmethod
    def grid_note(cls, summary: dict) -> str | None:
        """The paper's POSIX for the same model, data set, variant type and shots (Tables 1, 2, 6-9), where it has
        one: "paper 0.810 ± 0.299"."""
        from posixlab.analysis.paper import paper_value

        value = paper_value(model_name(summary) or "", summary.get("dataset"), summary.get("variant"),
                            summary.get("shots", 0))
        return None if value is None else f"paper {value[0]:.3f} ± {value[1]:.3f}"

    @classmethod
    def report_values(cls, folder: Path, summary: dict) -> list[float]:
        """ψ per set."""
        from posixlab.tasks import posix_report

        return posix_report.values(cls.read_unit_records(folder))

    @classmethod
    def partial_meta(cls, config: dict, folder: Path) -> dict:
        from posixlab.tasks import posix_report

        records = cls.read_unit_records(folder)
        meta = posix_report.partial_meta(super().partial_meta(config, folder), config, records)
        if (meta.get("config") or {}).get("race_sets"):  # the race replayed with the looks the run planned, on what
            meta["race_sets_planned"] = cls.units_planned(config)  # it read (options where it scored them)
            meta["race_reading"] = "options" if any(a and a.get("by_options") for r in records
                                                    for a in r.get("answers") or []) else "greedy"
        return meta


# the per-set table a run tracker logs (PosixTask.tracked)
TABLE_COLUMNS = ("set_index", "item_id", "subject", "variant_type", "psi", "psi_reference_compat", "unique_responses",
                 "response_entropy", "semantic_coherence", "logprob_variance", "logprob_sd", "variant_types",
                 "responses")
