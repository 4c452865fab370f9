"""Replies to chats from a GGUF model in llama.cpp: a rephraser's paraphrases (``generate``) and a judge's verdicts
with the likeliest first tokens of a reply (``first_tokens``), as the ``transformers`` backend gives them.

A chat goes through the model's own chat template (``TokenizedModel.apply_chat_template``: a system turn folded into
the first user turn where the template refuses one), then llama.cpp, one chat at a time; a chat that begins as the
previous one did (a judge's requests for one set) runs only the rest (the model's cache). Sampling is the
``transformers`` backend's sampler (``posixlab.models.sampling.RowSampler``: temperature, top-p over the full
vocabulary, Gumbel noise from each reply's own seeded generator) on llama.cpp's raw logits, so a seeded request gives
the same replies every time; its replies are not the ``transformers`` backend's (the logits are the quantized
model's).
"""

from __future__ import annotations

import torch

from posixlab.models.sampling import RowSampler, reply_seed


def _chat_ids(lm, messages: list[dict], budget: int) -> list[int]:
    ids = lm.encode(lm.apply_chat_template(messages), add_special_tokens=False)  # the template has its own
    lm.check_fits(ids, budget, "chat")
    return ids


def generate(lm, messages: list[dict], generation) -> list[str]:
    """``generation.n`` reply texts to the chat ``messages``: greedy at temperature 0 (the one reply, ``n`` times, as
    ``generate`` without sampling gives), else each sampled with its own generator (``reply_seed``; a request without
    a seed takes one from torch's global generator)."""
    ids = _chat_ids(lm, messages, generation.max_tokens)
    first = lm.next_logits(ids)  # every reply starts from them: the chat runs once
    if generation.temperature <= 0:
        return [lm.decode(lm.greedy(ids, generation.max_tokens, first=first))] * generation.n
    seed = generation.seed if generation.seed is not None else int(torch.randint(2**31 - 1, ()))
    setting = (generation.temperature, 1.0 if generation.top_p is None else generation.top_p)
    replies = []
    for j in range(generation.n):
        sampler = RowSampler([reply_seed(seed, j)], [setting])
        pick = lambda logits: int(sampler(None, torch.from_numpy(logits)[None]).argmax())  # noqa: E731
        replies.append(lm.decode(lm.greedy(ids, generation.max_tokens, pick, first=first)))
    return replies


def first_tokens(lm, chats: list[list[dict]], generation, top: int) -> list[tuple[str, list]]:
    """For each chat, the greedy reply and the ``top`` likeliest first tokens of a reply as (token text,
    log-probability): float32 log-softmax of llama.cpp's raw logits after the chat, what a chat API's
    ``top_logprobs`` reports (a judge reads P(yes) from it)."""
    out = []
    for messages in chats:
        ids = _chat_ids(lm, messages, generation.max_tokens)
        logits = lm.next_logits(ids)  # the first tokens' and the greedy reply's: the chat runs once
        first = torch.log_softmax(torch.from_numpy(logits), dim=-1)
        values, indices = first.topk(min(top, first.shape[-1]))
        tokens = [(lm.tokenizer.decode([i]), float(v)) for v, i in zip(values.tolist(), indices.tolist())]
        out.append((lm.decode(lm.greedy(ids, generation.max_tokens, first=logits)), tokens))
    return out
