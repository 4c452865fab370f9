"""Sampled replies to a chat from a model in this process (``CausalLM``): how an in-process model writes free text
(a rephraser's paraphrases), beside the greedy decoding and scoring on token ids that POSIX measures with.

``sample_chat`` takes what a request to a chat API would say (``posixlab.openai_client.Generation``) and does it
with ``transformers``' ``generate``: the chat template, then ``n`` replies sampled in one call (one generator seeded
once per request, so the same seed gives the same replies on the same machine), or the greedy reply at temperature
0. It is the ``generate`` of the backend that runs models in this process (``posixlab.backends.generate``).
"""

from __future__ import annotations

import copy


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


SHARED_AT_LEAST = 16  # tokens the chats of a batch must share before their keys and values are computed once
BATCH_TOKENS = 8192  # token positions (rows x the longest row) one batch of chats may take: memory, never results
# processors of a generation config that read the input's tokens: a batch's padding would be read too, so a model
# with one of them set answers its chats one at a time (its replies stay those of each chat alone)
READS_THE_INPUT = ("repetition_penalty", "no_repeat_ngram_size", "encoder_repetition_penalty",
                   "encoder_no_repeat_ngram_size", "sequence_bias")


def replies_and_first_tokens(lm, chats: list[list[dict]], generation, top: int) -> list[tuple[str, list]]:
    """For each chat of ``chats`` (lists of messages), the greedy reply (as ``sample_chat`` at temperature 0) and the
    ``top`` likeliest first tokens of a reply, as (token text, log-probability): the model's own next-token
    distribution after the chat template (raw logits, float32 log-softmax, before any processor of its generation
    config), what a chat API's ``top_logprobs`` reports for the first token. A judge reads P(yes) from it
    (``posixlab.judge.first_token_odds``).

    The chats' longest common run of token ids (a judge's requests for one set all open with the same prompt and
    response) goes through the model once; then the chats are decoded together, in batches of at most
    ``BATCH_TOKENS`` positions, each row its own tokens after the shared ones (padded on their left, masked) over a
    copy of the shared keys and values. On 2 CPU cores a set's judge requests take about half the time of one chat
    at a time (``experiments/benchmark_judge.py``); a GPU gains more. The log-probabilities equal each chat's plain
    forward pass to rounding (1e-5 measured, tested to 1e-4), the replies are the same, and the same chats give the
    same numbers every time."""
    import torch

    encoded = [_chat_ids(lm, messages) for messages in chats]
    rows = [ids for ids, _ in encoded]
    shared = _shared_length(rows) if len(rows) > 1 else 0
    together = not any(getattr(lm.model.generation_config, key, None) not in (None, 1.0, 0, {})
                       for key in READS_THE_INPUT)
    out = []
    with torch.inference_mode():
        prefix = None
        if shared >= SHARED_AT_LEAST:
            prefix = lm.model(input_ids=rows[0][:, :shared], use_cache=True, logits_to_keep=1).past_key_values
        else:
            shared = 0
        for batch in _batches([row.shape[1] for row in rows], BATCH_TOKENS if together else 0):
            out += _greedy_batch(lm, [rows[k] for k in batch], shared, prefix, encoded[0][1], generation, top)
    return out


def _batches(lengths: list[int], budget: int) -> list[list[int]]:
    """The rows in order, in batches whose size times their longest row stays within ``budget`` (a row too long
    for it alone is a batch of its own; 0: one row a batch).

    >>> _batches([10, 30, 20, 5, 40], 60), _batches([10, 30], 0)
    ([[0, 1], [2, 3], [4]], [[0], [1]])
    """
    batches: list[list[int]] = []
    for k, length in enumerate(lengths):
        last = batches[-1] if batches else None
        if last and (len(last) + 1) * max(length, *(lengths[j] for j in last)) <= budget:
            last.append(k)
        else:
            batches.append([k])
    return batches


def _greedy_batch(lm, rows: list, shared: int, prefix, pad: int, generation, top: int) -> list[tuple[str, list]]:
    """``generate``'s greedy replies to ``rows`` (token id rows of shape (1, length) whose first ``shared`` ids are
    the same, their keys and values in ``prefix``; None where ``shared`` is 0) and each first step's ``top`` tokens.
    Each row's own ids sit at the right end, its padding between the shared ids and them, masked out (the positions
    come from the mask, so each row is the chat alone)."""
    import torch

    width = max(row.shape[1] for row in rows) - shared
    batch = torch.full((len(rows), shared + width), pad, dtype=rows[0].dtype, device=lm.device)
    mask = torch.zeros_like(batch)
    for k, row in enumerate(rows):
        own = row.shape[1] - shared
        batch[k, :shared], mask[k, :shared] = row[0, :shared], 1
        batch[k, shared + width - own:], mask[k, shared + width - own:] = row[0, shared:], 1
    cache = None
    if prefix is not None:
        cache = copy.deepcopy(prefix)
        cache.batch_repeat_interleave(len(rows))
    out = lm.model.generate(batch, attention_mask=mask, past_key_values=cache, max_new_tokens=generation.max_tokens,
                            pad_token_id=pad, do_sample=False, output_logits=True, return_dict_in_generate=True)
    first = torch.log_softmax(out.logits[0].float(), dim=-1)
    values, indices = first.topk(min(top, first.shape[-1]), dim=-1)
    replies = []
    for k in range(len(rows)):
        reply = out.sequences[k, batch.shape[1]:].tolist()
        end = next((j + 1 for j, token in enumerate(reply) if token in lm.eos_ids), len(reply))  # then padding
        tokens = [(lm.tokenizer.decode([i]), float(v)) for v, i in zip(values[k].tolist(), indices[k].tolist())]
        replies.append((lm.decode(reply[:end]), tokens))
    return replies


def _shared_length(rows: list) -> int:
    """How many first token ids the rows (tensors of shape (1, length)) all share, leaving each at least one of its
    own (a continuation needs an input token).

    >>> import torch
    >>> rows = [torch.tensor([[1, 2, 3, 4]]), torch.tensor([[1, 2, 5]])]
    >>> _shared_length(rows), _shared_length(rows[:1] * 2), _shared_length([])
    (2, 3, 0)
    """
    import torch

    if not rows:
        return 0
    width = min(row.shape[1] for row in rows) - 1
    if width <= 0:
        return 0
    block = torch.cat([row[:, :width] for row in rows])
    differs = (block != block[:1]).any(dim=0).nonzero()
    return int(differs[0]) if len(differs) else width


def _chat_ids(lm, messages: list[dict]):
    """The chat in the model's template as a batch of one row of token ids, and the id ``generate`` pads with."""
    import torch

    text = lm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([lm.encode(text, add_special_tokens=False)], device=lm.device)
    return ids, lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else min(lm.eos_ids)
