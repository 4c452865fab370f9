"""The ``llamacpp`` backend: a GGUF file in llama.cpp, in this process (``LlamaCppModel``), requests run by
``LlamaCppEngine``. It generates and scores token sequences, and greedy decoding repeats itself; it writes replies to
chats for a rephraser or a judge (``posixlab/llamacpp/chat.py``). Scores are cached
by token ids under the file's identity (``ScoreCache``), apart from every other backend's."""

from __future__ import annotations

from posixlab.backends import Backend, register
from posixlab.errors import ConfigError
from posixlab.models.capabilities import DETERMINISTIC, GENERATE, SCORE
from posixlab.scoring.backend import score_cache


def check_llamacpp(spec) -> None:
    import importlib.util

    try:
        missing = importlib.util.find_spec("llama_cpp") is None
    except ValueError:  # sys.modules holds None for it: blocked, as good as missing
        missing = True
    if missing:  # said before any work, not when the weights would load
        from posixlab.llamacpp.model import NOT_INSTALLED

        raise ConfigError(NOT_INSTALLED)
    if spec.server.launch or spec.server.base_url:
        raise ConfigError("model.server.launch and model.server.base_url belong to a server backend; llamacpp runs "
                          "the GGUF file in this process")
    if spec.source == "local" and not spec.path:
        raise ConfigError("model=gguf needs the file: model.path=FILE.gguf")
    if spec.source == "hub":
        from posixlab.llamacpp.hub import parse_hub_path

        parse_hub_path(spec.path)  # a path of the forms a GGUF repository's file is named by
    elif spec.source not in ("packaged", "local"):
        raise ConfigError(f"model {spec.name}: model.backend=llamacpp runs a GGUF file: a packaged model, your file "
                          f"(model=gguf model.path=FILE.gguf) or a GGUF repository's file on the Hugging Face Hub "
                          f"(model.source=hub model.path=OWNER/REPO:Q4_K_M)")


def check_hub(spec) -> None:
    from posixlab.llamacpp.hub import check_hub_gguf

    check_hub_gguf(spec)


def open_llamacpp(spec, cache_dir=None):
    from posixlab.llamacpp.model import open_gguf

    return open_gguf(spec, cache_dir)


def llamacpp_engine(lm, max_new_tokens: int, options, cache, requests: list):
    from posixlab.llamacpp.engine import LlamaCppEngine

    return LlamaCppEngine(lm, max_new_tokens, cache)


def generate(lm, messages: list[dict], generation) -> list[str]:
    from posixlab.llamacpp.chat import generate as replies

    return replies(lm, messages, generation)


def first_tokens(lm, chats: list[list[dict]], generation, top: int) -> list:
    from posixlab.llamacpp.chat import first_tokens as replies_and_first_tokens

    return replies_and_first_tokens(lm, chats, generation, top)


def tokenizer(spec, cache_dir=None):
    from posixlab.llamacpp.model import gguf_file, gguf_tokenizer

    return gguf_tokenizer(*gguf_file(spec, cache_dir), cache_dir)


def open_for_plan(spec, cache_dir=None):
    from posixlab.llamacpp.model import open_for_plan as plan_model

    return plan_model(spec, cache_dir)


register(Backend("llamacpp", frozenset({GENERATE, SCORE, DETERMINISTIC}), open_llamacpp, llamacpp_engine,
                 kind="in-process", check=check_llamacpp, hub_check=check_hub, cache=score_cache,
                 generate=generate, first_tokens=first_tokens, tokenizer=tokenizer, open_for_plan=open_for_plan))
