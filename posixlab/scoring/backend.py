"""The ``transformers`` backend: the model in this process (``CausalLM``), requests run by ``ScoringEngine``.

It generates, scores token sequences, decodes under a JSON schema (llguidance: ``ConstrainedEngine``), reads
token-level scores inside one sequence (a class's probability in a JSON answer's label slot), and greedy decoding
repeats itself exactly. Scores are cached by token ids under the model's identity (``ScoreCache``).
"""

from __future__ import annotations

from pathlib import Path

from posixlab.backends import Backend, register
from posixlab.errors import ConfigError
from posixlab.models.capabilities import DETERMINISTIC, GENERATE, SCORE, SLOT_SCORES, STRUCTURED
from posixlab.models.sampling import replies_and_first_tokens, sample_chat, sample_chats
from posixlab.models.loading import open_for_plan, open_tokenizer
from posixlab.paths import default_cache_dir


def check_in_process(spec) -> None:
    if spec.server.launch or spec.server.base_url:
        raise ConfigError("model.server.launch and model.server.base_url belong to a server backend; add "
                          "model.backend=vllm")


def open_in_process(spec, cache_dir=None):
    from posixlab.models.loading import load_model

    return load_model(spec, cache_dir)


def score_cache(lm, folder, cache_dir):
    """Scores and greedy responses by token ids, under the model's identity (``<cache_dir>/scores``)."""
    from posixlab.scoring.cache import ScoreCache

    return ScoreCache(folder or Path(cache_dir or default_cache_dir()) / "scores", lm.identity)


def prompt_schemas(requests: list) -> dict:
    """Each structured request's prompt ids -> its schema (a prompt must show the schema it is decoded under).

    >>> from types import SimpleNamespace as R
    >>> prompt_schemas([R(ids=[[1, 2], [3]], structured="s"), R(ids=[[4]], structured=None)])
    {(1, 2): 's', (3,): 's'}
    """
    out = {}
    for request in requests:
        if request.structured is None:
            continue
        for ids in request.ids:
            if out.setdefault(tuple(ids), request.structured) != request.structured:
                raise ValueError("two structured requests share their prompt but not their schema; the prompt must "
                                 "show the schema it is decoded under")
    return out


def in_process_engine(lm, max_new_tokens: int, options, cache, requests: list):
    """``ScoringEngine``; for requests that carry a schema, ``ConstrainedEngine`` (one llguidance grammar per schema,
    however many prompts show it; no score cache: a cached answer would be an unconstrained one)."""
    schemas = prompt_schemas(requests)
    if not schemas:
        from posixlab.scoring.engine import ScoringEngine

        return ScoringEngine(lm, max_new_tokens, options, cache)
    from posixlab.structured.constrain import ConstrainedEngine, grammar_for

    built, grammars = {}, {}
    for ids, schema in schemas.items():
        if id(schema) not in built:
            built[id(schema)] = grammar_for(schema)
        grammars[ids] = built[id(schema)]
    return ConstrainedEngine(lm, max_new_tokens, options, grammars)


register(Backend("transformers", frozenset({GENERATE, SCORE, STRUCTURED, SLOT_SCORES, DETERMINISTIC}),
                 open_in_process, in_process_engine, kind="in-process", check=check_in_process, cache=score_cache,
                 generate=sample_chat, generate_many=sample_chats, first_tokens=replies_and_first_tokens,
                 tokenizer=open_tokenizer,
                 open_for_plan=open_for_plan))
