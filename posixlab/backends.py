"""Where a model runs, chosen by ``model.backend``: in this process (``transformers``) or on a vLLM server.

``load`` returns the model (a ``CausalLM``, or a ``ServedModel`` that talks to the server) and ``engine_for`` the
engine that scores prompt sets with it. Both kinds tokenise here and fill the same ``SetScores``, so everything after
scoring (ψ, accuracy, results files) is the same code whichever ran."""

from __future__ import annotations

from posixlab.models import ModelSpec, TokenizedModel, load_model
from posixlab.models.loading import check_spec
from posixlab.scoring import EngineOptions, ScoreCache, ScoringEngine
from posixlab.scoring.engine import SetScorer
from posixlab.serving import ServedModel, ServerEngine, connect


def load(spec: ModelSpec, cache_dir=None) -> TokenizedModel:
    """The model ``spec`` names, where ``spec.backend`` says it runs (a server is started first with ``launch``)."""
    check_spec(spec)
    return connect(spec, cache_dir) if spec.backend == "vllm" else load_model(spec, cache_dir)


def engine_for(lm: TokenizedModel, max_new_tokens: int, options: EngineOptions | None = None,
               cache: ScoreCache | None = None) -> SetScorer:
    """``ServerEngine`` for a model behind a server (its batching is the server's), ``ScoringEngine`` otherwise."""
    if isinstance(lm, ServedModel):
        return ServerEngine(lm, max_new_tokens, cache)
    return ScoringEngine(lm, max_new_tokens, options, cache)
