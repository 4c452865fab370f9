"""Sampled replies to a chat from a model in this process (``CausalLM``): how an in-process model writes free text
(a rephraser's paraphrases), beside the greedy decoding and scoring on token ids that POSIX measures with.

``sample_chats`` takes several requests as a chat API would get them (messages and a
``posixlab.openai_client.Generation`` each) and decodes them together with ``transformers``' ``generate``: the chat
template, each request's ``n`` replies as rows of one batch (in batches of at most ``SAMPLE_BATCH_TOKENS``
positions), the chats' common first tokens (a rephraser's system message and worked examples) through the model once
(``_shared_prefix`` says when a sliding-window model cannot share them).
Every reply draws from a generator of its own, seeded from its request's seed and its number, through the Gumbel-max
trick (``RowSampler``: the argmax of the logits plus Gumbel noise is a draw from their softmax), so a reply is the same
whatever it is decoded beside: one request alone, or a batch of many (to float rounding of the logits, which on the
packaged models changed no reply, ``tests/test_sampling.py``); the same seed gives the same replies on the same
machine. ``sample_chat`` is one request; at temperature 0 it is the greedy reply. It is the ``generate`` of the backend
that runs models in this process (``posixlab.backends.generate``), ``sample_chats`` its ``generate_many``.
"""

from __future__ import annotations

import copy
import hashlib

SAMPLE_BATCH_TOKENS = 32768  # positions (rows x the longest row, prompt and reply) one batch of sampled rows may take


def sample_chat(lm, messages: list[dict], generation) -> list[str]:
    """``generation.n`` reply texts to ``messages`` from ``lm`` (a ``CausalLM``), decoded as ``generation`` says."""
    import torch  # here, not at the top: posixlab.backends names this module without importing torch

    if generation.temperature > 0:
        return sample_chats(lm, [(messages, generation)])[0]
    ids, pad = _chat_ids(lm, messages)
    with torch.inference_mode():
        out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=generation.max_tokens,
                                num_return_sequences=generation.n, pad_token_id=pad, do_sample=False)
    return [lm.decode(row[ids.shape[1]:]) for row in out]


def sample_chats(lm, requests: list[tuple[list[dict], object]]) -> list[list[str]]:
    """For each request of ``requests`` (messages, ``Generation``), its ``n`` sampled reply texts, decoded together
    with the other requests' (see the module's docstring): top-p over the full vocabulary (top-k off), a request's
    budget of new tokens its own, each reply from its own generator. A request without a seed takes one from torch's
    global generator. A model whose generation config reads the batch's padding (a ``no_repeat_ngram_size``, a
    minimum length) decodes one reply at a time; its ``repetition_penalty`` is applied to each row's own tokens."""
    import torch

    rows, seeds, settings, budgets = [], [], [], []
    encoded = [_chat_ids(lm, messages) for messages, _ in requests]
    for (ids, _), (_, generation) in zip(encoded, requests):
        seed = generation.seed if generation.seed is not None else int(torch.randint(2**31 - 1, ()))
        for j in range(generation.n):
            rows.append(ids)
            seeds.append(reply_seed(seed, j))
            settings.append((generation.temperature, 1.0 if generation.top_p is None else generation.top_p))
            budgets.append(generation.max_tokens)
    config = lm.model.generation_config
    penalty = getattr(config, "repetition_penalty", None) or 1.0
    alone = any(getattr(config, key, None) not in (None, 1.0, 0, {}) for key in READS_THE_INPUT
                if key != "repetition_penalty") or bool(getattr(config, "min_length", 0)) \
        or bool(getattr(config, "min_new_tokens", 0))
    replies = []
    with torch.inference_mode():
        shared, prefix = _shared_prefix(lm, rows, max(budgets, default=0))
        lengths = [row.shape[1] + budget for row, budget in zip(rows, budgets)]
        for batch in _batches(lengths, 0 if alone else SAMPLE_BATCH_TOKENS):
            replies += _sampled_batch(lm, [rows[k] for k in batch], shared, prefix, encoded[0][1],
                                      [seeds[k] for k in batch], [settings[k] for k in batch],
                                      [budgets[k] for k in batch], penalty)
    out, start = [], 0
    for _, generation in requests:
        out.append(replies[start:start + generation.n])
        start += generation.n
    return out


def reply_seed(seed: int, j: int) -> int:
    """The seed of reply ``j`` of a request seeded ``seed``: 32 bits of a hash (torch's CPU generator keeps only a
    seed's low 32 bits, so seeds that differ above them would give the same replies).

    >>> reply_seed(7, 0), reply_seed(7, 1)
    (3929264094, 648206328)
    """
    return int.from_bytes(hashlib.sha256(f"{seed}\x1f{j}".encode()).digest()[:4], "big")


class RowSampler:
    """A logits processor for ``generate`` in greedy mode that makes its argmax a sample: each row's scores are
    divided by its temperature, cut to its top-p nucleus, and get Gumbel noise from the row's own generator (rows at
    temperature 0 are left as they are: greedy). ``penalty`` (a ``repetition_penalty`` other than 1) divides a
    positive logit of each token the row has seen, or multiplies a negative one, as ``transformers`` does, counting
    only the row's own tokens (``valid``: the prompt positions that are not padding)."""

    def __init__(self, seeds: list[int], settings: list[tuple[float, float]], penalty: float = 1.0, valid=None):
        import torch

        self.seeds, self.generators = seeds, None  # made on the logits' device at the first step
        self.temperature = torch.tensor([max(t, 1e-6) for t, _ in settings])
        self.sampled = torch.tensor([t > 0 for t, _ in settings])
        self.top_p = torch.tensor([p for _, p in settings])
        self.penalty, self.valid = penalty, valid

    def __call__(self, input_ids, scores):
        import torch

        scores = scores.float()
        if self.penalty != 1.0:
            ids = input_ids
            if self.valid is not None:  # a padded position points at the row's last token: penalised once anyway
                seen = torch.ones_like(ids, dtype=torch.bool)
                seen[:, :self.valid.shape[1]] = self.valid.bool()
                ids = torch.where(seen, ids, ids[:, -1:])
            taken = scores.gather(1, ids)
            scores = scores.scatter(1, ids, torch.where(taken < 0, taken * self.penalty, taken / self.penalty))
        device = scores.device
        if self.generators is None:
            self.generators = [torch.Generator(device=device).manual_seed(seed) for seed in self.seeds]
        scaled = scores / self.temperature.to(device)[:, None]
        ordered, order = scaled.sort(dim=-1)
        cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
        outside = cumulative <= (1 - self.top_p.to(device))[:, None]
        outside[:, -1] = False  # the likeliest token always stays
        scaled = scaled.masked_fill(outside.scatter(1, order, outside), float("-inf"))
        uniform = torch.stack([torch.rand(scores.shape[1], generator=g, device=device) for g in self.generators])
        noisy = scaled - torch.log(-torch.log(uniform))
        return torch.where(self.sampled.to(device)[:, None], noisy, scores)


class RowBudgets:
    """A stopping criterion: row ``k`` is done once it has ``budgets[k]`` new tokens (``generate`` then pads it)."""

    def __init__(self, start: int, budgets: list[int]):
        import torch

        self.start, self.budgets = start, torch.tensor(budgets)

    def __call__(self, input_ids, scores, **kwargs):
        return (input_ids.shape[1] - self.start) >= self.budgets.to(input_ids.device)


def _sampled_batch(lm, rows: list, shared: int, prefix, pad: int, seeds: list[int], settings: list, budgets: list,
                   penalty: float) -> list[str]:
    """The sampled replies to ``rows`` (laid out as ``_greedy_batch`` lays them out), row ``k`` drawn with a
    generator seeded ``seeds[k]`` and ``settings[k]`` (temperature, top-p), at most ``budgets[k]`` new tokens."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    batch, mask, cache = _layout(lm, rows, shared, prefix, pad)
    out = lm.model.generate(batch, attention_mask=mask, past_key_values=cache, max_new_tokens=max(budgets),
                            pad_token_id=pad, do_sample=False, repetition_penalty=1.0,
                            logits_processor=LogitsProcessorList([RowSampler(seeds, settings, penalty, mask)]),
                            stopping_criteria=StoppingCriteriaList([RowBudgets(batch.shape[1], budgets)]))
    replies = []
    for k, budget in enumerate(budgets):
        reply = out[k, batch.shape[1]:batch.shape[1] + budget].tolist()
        end = next((j + 1 for j, token in enumerate(reply) if token in lm.eos_ids), len(reply))  # then padding
        replies.append(lm.decode(reply[:end]))
    return replies


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
    response) goes through the model once (unless a sliding window forbids it: ``_shared_prefix``); then the chats
    are decoded together, in batches of at most ``BATCH_TOKENS`` positions, each row its own tokens after the shared
    ones (padded on their left, masked) over a copy of the shared keys and values. On 2 CPU cores a set's judge
    requests take about half the time of one chat at a time (``experiments/benchmark_judge.py``); a GPU gains more.
    The log-probabilities equal each chat's plain forward pass to rounding (1e-5 measured, tested to 1e-4), the
    replies are the same, and the same chats give the same numbers every time."""
    import torch

    encoded = [_chat_ids(lm, messages) for messages in chats]
    rows = [ids for ids, _ in encoded]
    together = not any(getattr(lm.model.generation_config, key, None) not in (None, 1.0, 0, {})
                       for key in READS_THE_INPUT)
    out = []
    with torch.inference_mode():
        shared, prefix = _shared_prefix(lm, rows, generation.max_tokens)
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

    batch, mask, cache = _layout(lm, rows, shared, prefix, pad)
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


def _shared_prefix(lm, rows: list, new_tokens: int) -> tuple[int, object]:
    """How many first token ids ``rows`` share and their keys and values, computed once (0 and None when fewer than
    ``SHARED_AT_LEAST``: not worth a pass of its own).

    None either for a model with sliding-window attention whose rows, with ``new_tokens`` more, may outgrow its
    window: ``_layout`` pads a row between the shared ids and its own, and ``transformers`` measures a window in a
    batch's slots, padding included, so such a row would see fewer of its tokens than alone (measured: other replies
    from Gemma 2 and 3 and OLMo 3 models). Without a shared prefix the padding goes in front, where it is harmless."""
    window = getattr(lm, "sliding_window", None)
    if window and max((row.shape[1] for row in rows), default=0) + new_tokens >= window:
        return 0, None
    shared = _shared_length(rows) if len(rows) > 1 else 0
    if shared < SHARED_AT_LEAST:
        return 0, None
    return shared, lm.model(input_ids=rows[0][:, :shared], use_cache=True, logits_to_keep=1).past_key_values


def _layout(lm, rows: list, shared: int, prefix, pad: int):
    """The batch of ``rows`` (token id rows of shape (1, length) whose first ``shared`` ids are the same, their keys
    and values in ``prefix``; None where ``shared`` is 0): each row's own ids at the right end, its padding between the
    shared ids and them, masked out (the positions come from the mask, so each row is the chat alone). Returns the
    ids, the attention mask and a copy of the prefix's cache for every row."""
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
    return batch, mask, cache


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

    text = lm.apply_chat_template(messages)  # a system turn folded into the first user turn where refused
    ids = torch.tensor([lm.encode(text, add_special_tokens=False)], device=lm.device)
    return ids, lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else min(lm.eos_ids)
