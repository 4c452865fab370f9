"""Sampled replies to a chat from a model in this process (``CausalLM``): how an in-process model writes free text
(a rephraser's paraphrases), beside the greedy decoding and scoring on token ids that POSIX measures with.

``sample_chat`` takes what a request to a chat API would say (``posixlab.openai_client.Generation``) and does it
with ``transformers``' ``generate``: the chat template, then ``n`` replies sampled in one call (one generator seeded
once per request, so the same seed gives the same replies on the same machine), or the greedy reply at temperature
0. It is the ``generate`` of the backend that runs models in this process (``posixlab.backends.generate``).
"""

from __future__ import annotations


def sample_chat(lm, messages: list[dict], generation) -> list[str]:
    """``generation.n`` reply texts to ``messages`` from ``lm`` (a ``CausalLM``), decoded as ``generation`` says."""
    import torch  # here, not at the top: posixlab.backends names this module without importing torch

    ids, pad = _chat_ids(lm, messages)
    if generation.temperature > 0:
        # top_k=0 and top-p 1 unless asked: only what the request says narrows the distribution, as an API does
        decoding = {"do_sample": True, "temperature": generation.temperature, "top_k": 0,
                    "top_p": 1.0 if generation.top_p is None else generation.top_p}
    else:
        decoding = {"do_sample": False}
    if generation.seed is not None:
        torch.manual_seed(generation.seed)  # every reply of the request comes from this one seeded generator
    with torch.inference_mode():
        out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=generation.max_tokens,
                                num_return_sequences=generation.n, pad_token_id=pad, **decoding)
    return [lm.decode(row[ids.shape[1]:]) for row in out]


def reply_and_first_tokens(lm, messages: list[dict], generation, top: int) -> tuple[str, list[tuple[str, float]]]:
    """The greedy reply to ``messages`` (as ``sample_chat`` at temperature 0) and the ``top`` likeliest first tokens
    of a reply, as (token text, log-probability): the model's own next-token distribution after the chat template
    (raw logits, float32 log-softmax, before any processor of its generation config), what a chat API's
    ``top_logprobs`` reports for the first token. A judge reads P(yes) from it (``posixlab.judge.first_token_odds``)."""
    import torch

    ids, pad = _chat_ids(lm, messages)
    with torch.inference_mode():
        out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=generation.max_tokens,
                                pad_token_id=pad, do_sample=False, output_logits=True, return_dict_in_generate=True)
    first = torch.log_softmax(out.logits[0][0].float(), dim=-1)
    values, indices = first.topk(min(top, first.numel()))
    tokens = [(lm.tokenizer.decode([i]), float(v)) for v, i in zip(values.tolist(), indices.tolist())]
    return lm.decode(out.sequences[0][ids.shape[1]:]), tokens


def _chat_ids(lm, messages: list[dict]):
    """The chat in the model's template as a batch of one row of token ids, and the id ``generate`` pads with."""
    import torch

    text = lm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([lm.encode(text, add_special_tokens=False)], device=lm.device)
    return ids, lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else min(lm.eos_ids)
