"""Constrained decoding in this process (``strategy=structured`` with an in-process model): greedy decoding held to
each prompt's JSON schema, token by token, by ``llguidance``.

Why llguidance: it is the grammar engine vLLM, llama.cpp and SGLang can use, it builds its token tables from a
Hugging Face tokenizer directly (``llguidance.hf.from_tokenizer``), and its wheel needs nothing else: no compiler,
no Triton (xgrammar pulls Triton in; outlines and lm-format-enforcer wrap ``generate``, which posixlab's engine does
not use). At each step the tokens the schema does not allow get -inf; the argmax of the rest is the answer's next
token, so the answer is always a valid object of the schema unless ``max_new_tokens`` cuts it (then it is invalid
JSON, counted as a failure). The log-probability kept for a token is the model's own, before the mask.

The score cache is not used here: its keys are token ids alone, and a constrained answer to a prompt differs from
the free one.
"""

from __future__ import annotations

import json

import torch

from posixlab.scoring.engine import EngineOptions, Ids, ScoringEngine

_TOKENIZERS: dict[int, object] = {}  # one llguidance tokenizer per loaded model (building it takes about a second)


def grammar_for(schema) -> str:
    """The llguidance grammar of a ``ClassifierSchema``'s JSON schema, with no keys beyond the schema's (a model
    held to a schema should not invent fields the schema does not name)."""
    import llguidance

    return llguidance.grammar_from("json_schema", json.dumps(schema.decoding_schema()))


def _ll_tokenizer(lm):
    import llguidance.hf

    key = id(lm)
    if key not in _TOKENIZERS:
        eos = sorted(lm.eos_ids)
        _TOKENIZERS[key] = llguidance.hf.from_tokenizer(lm.tokenizer, eos_token=eos[0] if eos else None)
    return _TOKENIZERS[key]


class JsonConstraint:
    """The matchers of one decoding block's rows: ``mask`` the logits of the live rows, ``accept`` a chosen token."""

    def __init__(self, tokenizer, grammars: list[str]):
        import llguidance
        import llguidance.torch as ll_torch

        self._torch = ll_torch
        self.matchers = [llguidance.LLMatcher(tokenizer, g) for g in grammars]
        for m in self.matchers:
            if m.is_error():
                raise ValueError(f"llguidance refused the grammar: {m.get_error()}")
        self.bitmask = ll_torch.allocate_token_bitmask(len(grammars), tokenizer.vocab_size)

    def mask(self, logits: torch.Tensor, live: list[int]) -> torch.Tensor:
        masked = logits.float().clone()
        for b in live:
            self._torch.fill_next_token_bitmask(self.matchers[b], self.bitmask, b)
        self._torch.apply_token_bitmask_inplace(masked, self.bitmask[live])
        return masked

    def accept(self, row: int, token: int) -> None:
        if not self.matchers[row].is_stopped():
            self.matchers[row].consume_token(token)


class ConstrainedEngine(ScoringEngine):
    """``ScoringEngine`` whose greedy decoding follows each prompt's grammar (``grammars``: prompt ids -> grammar)."""

    def __init__(self, lm, max_new_tokens: int, options: EngineOptions | None, grammars: dict[Ids, str]):
        super().__init__(lm, max_new_tokens, options, cache=None)
        self.grammars = grammars
        self.tokenizer = _ll_tokenizer(lm)
        self._wave_prompts: list[Ids] = []

    def _run_wave(self, items):
        # the wave's unique prompts in the order ScoringEngine._run_wave numbers them
        self._wave_prompts = list(dict.fromkeys(p for _, prompts, _ in items for p in prompts))
        yield from super()._run_wave(items)

    def _constraint(self, block) -> JsonConstraint:
        return JsonConstraint(self.tokenizer, [self.grammars[self._wave_prompts[u]] for u in block.prompts])
