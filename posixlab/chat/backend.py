"""The ``chat`` backend: any OpenAI-compatible chat-completions endpoint (``ChatModel``), requests run by
``ChatEngine``. Text in, text out: it generates, and answers JSON objects of a schema through instructor in any of
its modes (tools, response_format), and writes replies to a chat of messages for a caller of its own (the ``openai``
rephraser: ``generate``); it cannot score. Every answer is cached, keyed by the whole request and its repeat
(``ResponseCache``); the run's metadata gets what was sent, its usage and cost (``api_report``), and a dry run the
requests it would send, their tokens and their price."""

from __future__ import annotations

from pathlib import Path

from posixlab.backends import Backend, register
from posixlab.models.capabilities import GENERATE, STRUCTURED, TOOLS
from posixlab.paths import default_cache_dir


def check(spec) -> None:
    from posixlab.chat.model import check_chat

    check_chat(spec)


def open_model(spec, cache_dir=None, **options):
    from posixlab.chat.model import open_chat

    return open_chat(spec, cache_dir, **options)


def open_for_plan(spec, cache_dir=None):
    from posixlab.chat.model import open_chat

    return open_chat(spec, cache_dir, offline=True)


def credentials(spec) -> None:
    from posixlab.chat.model import check_key

    check_key(spec)


def generate(lm, messages: list[dict], generation) -> list[str]:
    return lm.generate(messages, generation)


def first_tokens(lm, chats: list[list[dict]], generation, top: int) -> list:
    """Each chat's reply and first tokens, at most ``model.server.max_concurrency`` requests in flight; the first
    failure (a dead endpoint) is raised once, after those in flight are back."""
    from posixlab.openai_client import map_bounded

    return map_bounded(lambda messages: lm.reply_and_first_tokens(messages, generation, top), chats,
                       lm.spec.server.max_concurrency)


def engine(lm, max_new_tokens: int, options, cache, requests: list):
    from posixlab.chat.engine import ChatEngine

    return ChatEngine(lm, max_new_tokens, cache)


def response_cache(lm, folder, cache_dir):
    """Every answer, keyed by base URL, the whole request body and the repeat (``<cache_dir>/responses``)."""
    from posixlab.chat.cache import ResponseCache

    return ResponseCache(folder or Path(cache_dir or default_cache_dir()) / "responses")


def report(engines: list, spec) -> dict:
    """What was sent, from the cache, its usage and cost, what answered; and where the run stopped, if it did."""
    from posixlab.chat.engine import api_report

    api = api_report(engines, spec)
    return {"api": api, "stopped": api["stopped"]}


def plan(lm, requests: list, options, cache) -> dict:
    """The requests a run would send after cache hits, their estimated tokens, and their cost at the prices given."""
    from posixlab.chat.engine import ChatEngine

    totals: dict = {}
    for length in sorted({r.max_new_tokens for r in requests}):
        one = ChatEngine(lm, length, cache).plan([r for r in requests if r.max_new_tokens == length])
        for key, value in one.items():
            totals[key] = totals.get(key, 0) + value
    server = lm.spec.server
    if server.price_input_per_million is not None and server.price_output_per_million is not None:
        totals["estimated_cost_at_most"] = (totals["estimated_prompt_tokens"] * server.price_input_per_million
                                            + totals["max_completion_tokens"] * server.price_output_per_million) / 1e6
    if server.max_requests is not None and totals["to_send"] > server.max_requests:
        totals["capped_by_max_requests"] = server.max_requests
    return totals


register(Backend("chat", frozenset({GENERATE, STRUCTURED, TOOLS}), open_model, engine, kind="api", remote=True,
                 check=check, cache=response_cache, repeats_in_cache_key=True, report=report, plan=plan,
                 generate=generate, first_tokens=first_tokens, open_for_plan=open_for_plan, credentials=credentials))
