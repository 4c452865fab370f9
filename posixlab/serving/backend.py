"""The ``vllm`` backend: a model behind a vLLM server (``ServedModel``: the tokenizer here, token ids over HTTP),
requests run by ``ServerEngine``. It generates, scores token sequences and decodes under a JSON schema (vLLM's
``structured_outputs``); greedy decoding at temperature 0 repeats itself. Scores share the in-process engine's cache
format (``ScoreCache``, keyed by the model's identity)."""

from __future__ import annotations

from posixlab.backends import Backend, register
from posixlab.errors import ConfigError
from posixlab.models.capabilities import DETERMINISTIC, GENERATE, SCORE, STRUCTURED
from posixlab.models.loading import open_for_plan, open_tokenizer
from posixlab.scoring.backend import prompt_schemas, score_cache


def check_vllm(spec) -> None:
    server = spec.server
    if server.launch == bool(server.base_url):
        raise ConfigError(f"model.backend=vllm needs either model.server.base_url=http://HOST:PORT/v1 (a running "
                          f"vLLM server) or model.server.launch=true (posixlab starts one), not "
                          f"{'both' if server.launch else 'neither'}")
    for key in ("max_concurrency", "request_batch", "max_attempts"):
        if getattr(server, key) < 1:
            raise ConfigError(f"model.server.{key} must be at least 1, got {getattr(server, key)}")


def open_served(spec, cache_dir=None):
    from posixlab.serving.model import connect

    return connect(spec, cache_dir)


def server_engine(lm, max_new_tokens: int, options, cache, requests: list):
    """``ServerEngine``; requests that carry a schema are decoded under it by the server (no score cache then)."""
    from posixlab.serving.engine import ServerEngine

    schemas = prompt_schemas(requests)
    return ServerEngine(lm, max_new_tokens, None, schemas) if schemas else ServerEngine(lm, max_new_tokens, cache)


register(Backend("vllm", frozenset({GENERATE, SCORE, STRUCTURED, DETERMINISTIC}), open_served, server_engine,
                 kind="server", remote=True, check=check_vllm, cache=score_cache, tokenizer=open_tokenizer,
                 open_for_plan=open_for_plan))
