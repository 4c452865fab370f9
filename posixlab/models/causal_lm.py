"""A causal language model behind the three operations POSIX needs, all on token ids.

- ``prefill(prompt_ids)``: run the prompt once; keep its key/value cache and the next-token distribution.
- ``greedy(prefix, n)``: greedy decoding from a prefill, stopping after the first end-of-sequence token, which the
  response keeps (it was generated, so it is scored and counted in the response length).
- ``score_full(prompt, continuation)``: log P(continuation | prompt) from one full pass, no cache: the reference.

These one-sequence operations are the readable reference path. The scoring engine (``posixlab.scoring``) runs
many sequences per forward pass through ``forward_masked``: rows padded on the right, each query given an explicit
position and an explicit set of keys it may see, so padding and packing never change what a token attends to.

Log-probabilities are computed in float32 whatever the model's dtype, as ``logit - logsumexp(logits)``
(``token_logprobs``). We avoid ``torch.log_softmax`` there on purpose: on CPU in float32 it is off by up to ~2e-5
per token, always in the same direction (measured against float64 on SmolLM2's logits), which adds up to ~3e-4
over a 30-token response; ``logsumexp`` stays within ~4e-6.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import Cache, DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from posixlab.errors import ConfigError, ContextLengthError, PromptSetError
from posixlab.models.capabilities import GENERATE, SCORE, check_chat_template
from posixlab.prompts import fold_system_turn



@dataclass
class Prefix:
    """A prompt after one forward pass: what scoring and generation continue from."""

    ids: tuple[int, ...]
    cache: object  # transformers Cache holding the prompt's keys and values
    next_logits: torch.Tensor  # raw logits of the token after the prompt, shape (vocab,)
    next_logprobs: torch.Tensor  # float32 log_softmax of next_logits


def eos_ids_of(generation_eos, tokenizer) -> frozenset[int]:
    """The ids that end a response: the generation config's end-of-sequence id(s) and the tokenizer's."""
    eos = [] if generation_eos is None else [generation_eos] if isinstance(generation_eos, int) else list(generation_eos)
    if tokenizer.eos_token_id is not None:
        eos.append(tokenizer.eos_token_id)
    return frozenset(int(e) for e in eos)


# model types whose transformers model applies its config's ``sliding_window`` to every layer through one mask
# (``create_sliding_window_causal_mask``) and whose config has no ``layer_types``: the engine masks every layer with
# the window. A config of another type with a window and no layer types (the model may apply it or not) is held to
# prompts that fit inside it. tests/test_model_families.py holds Mistral, Mixtral, Phi-3 and Starcoder2 to the
# models' own passes past their windows.
WINDOW_ON_EVERY_LAYER = frozenset({"mistral", "mixtral", "ministral3", "phi3", "phimoe", "starcoder2", "qwen3_moe"})


def context_length(config) -> int | None:
    """The longest sequence a model's config allows (a multimodal config keeps it in its text part)."""
    return getattr(config, "max_position_embeddings", None) or getattr(
        getattr(config, "text_config", None), "max_position_embeddings", None)


def chat_text(tokenizer, messages: list[dict]) -> str:
    """``messages`` in the tokenizer's chat template, ready for the assistant's reply. A template that refuses a
    system turn (Gemma 2's raises "System role not supported", Mistral-7B-Instruct-v0.1's wants user and assistant
    turns alternating) gets the system message at the head of the first user turn (``prompts.fold_system_turn``):
    how such models are prompted with one (the judge's and the rephraser's requests open with one).

    >>> from transformers import PreTrainedTokenizerFast
    >>> from tokenizers import Tokenizer, models
    >>> tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"x": 0}, unk_token="x")))
    >>> tok.chat_template = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system') }}{% endif %}"
    ...                      "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<model>")
    >>> chat_text(tok, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}])
    '<user>Be brief.\\n\\nHi?<model>'
    """
    from jinja2.exceptions import TemplateError

    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except TemplateError:
        folded = fold_system_turn(messages)
        if folded is None:
            raise
    return tokenizer.apply_chat_template(folded, tokenize=False, add_generation_prompt=True)


def refuses_system_turn(tokenizer) -> bool:
    """Whether the tokenizer's chat template refuses a chat that opens with a system turn (``chat_text`` folds it)."""
    from jinja2.exceptions import TemplateError

    probe = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    try:
        tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    except TemplateError:
        return True
    return False


# Probe strings for the tokenizer check: spaces, digits, punctuation, a newline, non-ASCII text and an answer mark,
# the places where two tokenizers of one family most often part ways.
TOKENIZER_PROBES = (
    "Question: What is the capital of France?\nA: (B)",
    "  leading spaces, 1234567 digits, and a tab\there.",
    "Ünïcödé — «quotes», 数学, emoji 🙂!",
)


def tokenizer_disagreement(tokenizer, theirs) -> str | None:
    """Where the tokenizer here and another (``theirs(text, add_special_tokens)`` -> ids: a server's, llama.cpp's)
    first part ways on the probes, described; None when they agree on every probe, with and without special tokens.

    >>> class Chars:  # a toy tokenizer: one id per character
    ...     def __call__(self, text, add_special_tokens=True):
    ...         return type("E", (), {"input_ids": [0] * add_special_tokens + [ord(c) for c in text]})()
    >>> tokenizer_disagreement(Chars(), lambda text, special: Chars()(text, special).input_ids) is None
    True
    >>> print(tokenizer_disagreement(Chars(), lambda text, special: [ord(c) for c in text]))
    'Question: What is the capital of France?\\nA: (B)' (add_special_tokens=True): from token 0, here [0, 81, 117, \
101, 115], there [81, 117, 101, 115, 116]
    """
    for probe in TOKENIZER_PROBES:
        for special in (True, False):
            ours, other = list(tokenizer(probe, add_special_tokens=special).input_ids), list(theirs(probe, special))
            if ours != other:
                first = next((k for k, (a, b) in enumerate(zip(ours, other)) if a != b), min(len(ours), len(other)))
                return (f"{probe!r} (add_special_tokens={special}): from token {first}, here {ours[first:first + 5]}, "
                        f"there {other[first:first + 5]}")
    return None


class TokenizedModel:
    """What every backend shares: the model's tokenizer on this machine, its name, identity and context length.

    Prompts are tokenised here, once, and only token ids travel to the model (in this process or on a server), so
    every backend scores the very same ids."""

    capabilities = frozenset({GENERATE, SCORE})  # greedy generation and scoring on token ids

    def __init__(self, tokenizer, *, name: str, identity: dict, eos_ids: frozenset[int], max_context: int | None):
        self.tokenizer = tokenizer
        self.name = name
        self.identity = identity  # what a result depends on: source, path, revision, sha256, dtype, versions
        self.eos_ids = eos_ids
        self.max_context = max_context
        self.context_is = "context"  # what max_context is, for check_fits' message
        self.forward_tokens = 0  # tokens run through the model so far, for the run's accounting
        self._token_ints: list[int] = []  # encode_batch's shared int objects, one per token id

    def close(self) -> None:
        """Release what the model holds outside this process (a server it started); nothing for in-process models."""

    # --- text <-> ids -------------------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of a prompt, with the special tokens the tokenizer adds by default (as the authors' library).

        Text that already went through a chat template carries its own special tokens: pass False.
        """
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens).input_ids)

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """``encode`` of each text, the same ids, from one call to the tokenizer: a fast tokenizer encodes a batch on
        every core (3-shot MMLU sets of 21 prompts: 1.8x faster than one at a time on 2 cores, measured by
        experiments/benchmark_inputs.py; the paper's 14,042-set cells tokenise about 300,000 prompts before the first
        forward pass)."""
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=add_special_tokens).input_ids
        # every prompt's ids point at one shared int object per token id: a paper-sized cell holds ~150 million ids
        # until its last set is scored, 8 bytes each this way, 36 with an int object of their own
        top = max((max(ids) for ids in encoded if ids), default=0)
        if top >= len(self._token_ints):
            self._token_ints = list(range(max(top + 1, len(self.tokenizer))))
        table = self._token_ints
        return [[table[t] for t in ids] for ids in encoded]

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def apply_chat_template(self, prompt: str | list[dict]) -> str:
        """The prompt in the model's chat template, ready for the assistant's answer: a text becomes one user turn;
        a list of messages (few-shot exemplars as user/assistant turns, then the question) is used as it is."""
        check_chat_template(self.tokenizer, self.name)
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        return chat_text(self.tokenizer, messages)

    def check_fits(self, prompt_ids, max_new_tokens: int, what: str = "prompt") -> None:
        if len(prompt_ids) == 0:
            raise PromptSetError(f"{what} encodes to no tokens; give it some text")
        if self.max_context and len(prompt_ids) + max_new_tokens > self.max_context:
            raise ContextLengthError(
                f"{what} has {len(prompt_ids)} tokens; with max_new_tokens={max_new_tokens} it needs "
                f"{len(prompt_ids) + max_new_tokens}, more than the {self.max_context}-token {self.context_is} of "
                f"{self.name}. "
                f"Shorten the prompt (fewer shots, a shorter question) or use a model with a longer context."
            )


class CausalLM(TokenizedModel):
    """A ``transformers`` model in this process."""

    backend = "transformers"  # its capabilities: posixlab/scoring/backend.py

    def __init__(self, model, tokenizer, *, name: str, identity: dict):
        super().__init__(tokenizer, name=name, identity=identity,
                         eos_ids=eos_ids_of(model.generation_config.eos_token_id, tokenizer),
                         max_context=context_length(model.config))
        self.model = model.eval()
        self.device = next(model.parameters()).device
        text_config = model.config.get_text_config(decoder=True)
        self.vocab_size = int(text_config.vocab_size)
        layer_types = getattr(text_config, "layer_types", None)
        self.layer_types = sorted(set(layer_types)) if layer_types else None
        self.sliding_window = getattr(text_config, "sliding_window", None)
        self.window_on_every_layer = bool(self.sliding_window and not self.layer_types
                                          and text_config.model_type in WINDOW_ON_EVERY_LAYER)
        if self.sliding_window and not self.layer_types and not self.window_on_every_layer:
            self.max_context = min(self.max_context or self.sliding_window, self.sliding_window)
            self.context_is = "attention window (which the engine cannot place layer by layer)"
        heads = text_config.num_attention_heads
        head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // heads
        kv_heads = getattr(text_config, "num_key_value_heads", None) or heads
        # bytes one token occupies in the key/value cache: how the earlier engine that gpu_check --before measures
        # sized its batches (today's engine reads posixlab.scoring.memory.ModelShape)
        self.kv_bytes_per_token = 2 * text_config.num_hidden_layers * kv_heads * head_dim * model.dtype.itemsize

    # --- the three operations -----------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, prompt_ids) -> Prefix:
        ids = torch.tensor([list(prompt_ids)], device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        self.forward_tokens += ids.shape[1]
        logits = out.logits[0, -1]
        return Prefix(tuple(prompt_ids), out.past_key_values, logits, log_probabilities(logits))

    @torch.inference_mode()
    def greedy(self, prefix: Prefix, max_new_tokens: int) -> tuple[list[int], list[float]]:
        """Greedy response token ids (ending at the first EOS, included) and each token's float32 log-probability."""
        cache = copy.deepcopy(prefix.cache)
        logits, logprobs = prefix.next_logits, prefix.next_logprobs
        tokens, token_logprobs = [], []
        for step in range(max_new_tokens):
            token = int(torch.argmax(logits))
            tokens.append(token)
            token_logprobs.append(float(logprobs[token]))
            if token in self.eos_ids or step == max_new_tokens - 1:
                break
            out = self.model(input_ids=torch.tensor([[token]], device=self.device), past_key_values=cache,
                             use_cache=True)
            self.forward_tokens += 1
            cache = out.past_key_values
            logits = out.logits[0, -1]
            logprobs = log_probabilities(logits)
        return tokens, token_logprobs

    @torch.inference_mode()
    def score_full(self, prompt_ids, continuation) -> float:
        """log P(continuation | prompt) from one full forward pass of prompt + continuation, without any cache.

        The brute-force reference the cached, batched ``score`` is tested against.
        """
        ids = list(prompt_ids) + list(continuation)
        out = self.model(input_ids=torch.tensor([ids], device=self.device))
        start = len(prompt_ids)
        picked = token_logprobs(out.logits[0, start - 1:-1], torch.tensor(list(continuation), device=self.device))
        return sum(picked.tolist())  # float64 sum of float32 terms, first token to last, as the engine

    # --- the batched path the scoring engine uses -----------------------------------------------------------------
    @staticmethod
    def new_cache(kv=None) -> DynamicCache:
        """A key/value cache whose layers keep every key (no sliding-window truncation: masks handle windows),
        filled with ``kv`` (a list of per-layer ``(keys, values)``). Today's engine uses ``slot_cache``; the earlier
        engine that ``experiments/gpu_check.py --before`` measures beside it calls this."""
        cache = DynamicCache()
        for layer, (keys, values) in enumerate(kv or ()):
            cache.update(keys, values, layer)
        return cache

    @staticmethod
    def slot_cache(buffer: torch.Tensor, length: int) -> Cache:
        """A key/value cache in ``buffer`` (``(layers, 2, rows, kv_heads, capacity, head_dim)``, allocated once) whose
        first ``length`` slots are filled: each pass writes its tokens into the next free slots (``SlotLayer``)."""
        return Cache(layers=[SlotLayer(buffer[layer, 0], buffer[layer, 1], length) for layer in range(len(buffer))])

    @torch.inference_mode()
    def forward_masked(self, input_ids, position_ids, visible, key_positions, cache, logits_to_keep=0,
                       fold_heads: bool = False):
        """One forward pass of a batch of rows in which every query says which keys it sees.

        Args:
            input_ids, position_ids: ``(B, Q)``; each token's true position in its own sequence.
            visible: ``(B, Q, K)`` bool, ``K = cache length + Q``: ``visible[b, q, k]`` lets query ``q`` of row
                ``b`` attend to key ``k`` (cached keys first, then this call's tokens). Causality is the caller's.
            key_positions: ``(B, K)``: the position of every key, for sliding-window layers.
            cache: the rows' cache; this call's keys and values are appended to it.
            logits_to_keep: 0 for the logits of every query, or a 1-D tensor of the query indices to keep.
            fold_heads: with sdpa and grouped-query attention, attend without repeating keys and values for every
                head (``folded_sdpa_attention``); for passes of several queries on long shared keys (shared decoding).
        """
        if self.model.config._attn_implementation not in ("sdpa", "eager"):
            raise ConfigError(f"the scoring engine needs sdpa or eager attention; {self.name} uses "
                              f"{self.model.config._attn_implementation}")
        masks = {"full_attention": visible}
        if self.sliding_window:
            in_window = (position_ids[:, :, None] - key_positions[:, None, :]) < self.sliding_window
            masks["sliding_attention"] = visible & in_window
        if self.layer_types:
            unknown = set(self.layer_types) - set(masks)
            if unknown:
                raise ConfigError(f"{self.name} has attention layers of type {sorted(unknown)}, which the scoring "
                                  f"engine does not support")
            attention_mask = {t: self._additive(masks[t]) for t in self.layer_types}
        elif self.window_on_every_layer:
            attention_mask = self._additive(masks["sliding_attention"])
        else:  # check_fits keeps prompts inside a window that cannot be placed (max_context); this is the backstop
            if self.sliding_window and not torch.equal(masks["sliding_attention"], visible):
                raise ContextLengthError(f"{self.name} attends within a {self.sliding_window}-token window and the "
                                         f"engine cannot mask it per layer; use shorter prompts")
            attention_mask = self._additive(visible)
        text_config = self.model.config.get_text_config(decoder=True)
        fold = fold_heads and text_config._attn_implementation == "sdpa"
        with attention_kernels(self.device), attention_implementation(text_config, FOLDED_SDPA if fold else None):
            out = self.model(input_ids=input_ids.to(self.device), position_ids=position_ids.to(self.device),
                             attention_mask=attention_mask, past_key_values=cache, use_cache=True,
                             logits_to_keep=logits_to_keep if isinstance(logits_to_keep, int)
                             else logits_to_keep.to(self.device))
        return out.logits

    def _additive(self, visible: torch.Tensor) -> torch.Tensor:
        # A float mask (0 where seen, the dtype's minimum elsewhere) works for sdpa and eager alike; hidden keys get
        # exactly zero weight, and a query that sees nothing (padding) still gets finite values.
        mask = torch.zeros(visible.shape, dtype=self.model.dtype, device=self.device)
        mask.masked_fill_(~visible.to(self.device), torch.finfo(self.model.dtype).min)
        return mask[:, None]


def attention_kernels(device: torch.device):
    """The attention kernels of the engine's passes: on a GPU every one of torch's but cuDNN's. cuDNN builds an
    execution plan for every new shape it sees, and the engine's passes seldom repeat one (rows and widths follow the
    prompts): measured on an H200 at 7B, the first run of 24 MMLU sets took 0.31 s a set and a second run of the
    same shapes 0.16 s; the memory-efficient kernel takes the explicit mask at no such cost."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


FOLDED_SDPA = "posixlab_folded_sdpa"


def folded_sdpa_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' sdpa attention, except for grouped-query attention with a mask and several queries: there
    transformers repeats a layer's keys and values for every query head (``repeat_kv``: a copy, and as many reads of
    it as heads), where this folds the query heads that share a key/value head into more queries of that head (as
    transformers does for a single query). Every (head, query) sees the same keys under the same mask, so only the
    kernel's rounding can differ."""
    groups = getattr(module, "num_key_value_groups", 1)
    if groups == 1 or query.shape[2] == 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    batch, heads, queries, dim = query.shape
    folded = query.reshape(batch, heads // groups, groups * queries, dim)  # head h = kv_head * groups + r
    mask = attention_mask
    if mask is not None:  # query r * queries + q of a key/value head: query q's mask
        mask = mask[:, :, :, :key.shape[-2]]
        mask = mask[:, :, None].expand(-1, -1, groups, -1, -1).reshape(batch, mask.shape[1], groups * queries, -1)
    out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask, dropout_p=dropout,
                                                           scale=scaling, is_causal=False)
    return out.reshape(batch, heads, queries, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(FOLDED_SDPA, folded_sdpa_attention)


@contextlib.contextmanager
def attention_implementation(config, name: str | None):
    """The attention functions the model's layers call, ``name`` for the block's duration (None: unchanged). The
    layers read it from their config at every call."""
    if name is None:
        yield
        return
    before = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = before


class SlotLayer(DynamicLayer):
    """One layer's keys and values in buffers allocated once, ``(rows, kv_heads, capacity, head_dim)``.

    A pass writes its keys into the next free slots and attends to the whole buffer: slots not yet written hold
    zeros the caller's mask hides. Nothing is copied as the cache grows (a ``DynamicLayer`` concatenates: a copy of
    the whole cache every decoding step), and the keys' length stays the same from step to step, so every kernel of a
    decoding block runs at one shape."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int):
        super().__init__()
        self.keys, self.values, self.length = keys, values, length
        self.dtype, self.device = keys.dtype, keys.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.length + key_states.shape[-2]
        if end > self.keys.shape[-2]:
            raise RuntimeError(f"a slot cache of {self.keys.shape[-2]} slots cannot hold {end} tokens")
        self.keys[:, :, self.length:end] = key_states
        self.values[:, :, self.length:end] = value_states
        self.length = end
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length


def logsumexp(logits: torch.Tensor) -> torch.Tensor:
    """The log-sum-exp of each row (last dimension), the same bits for a row whatever rows are reduced beside it.

    torch's CPU reduction of a single row on several threads splits the row among them and adds their parts (a sum
    in another order: the last bits differ), while rows in a batch are each summed whole by one thread. So a single
    row is reduced as a batch of two views of itself: the same logits give the same log-probability whether their row
    is reduced alone or beside others. (The logits themselves can differ in their last bits between batch shapes, from
    the model's matrix products; the engine's contract is 1e-4.)

    >>> rows = torch.randn(64, 49152, generator=torch.Generator().manual_seed(0)) * 4
    >>> all(bool(logsumexp(rows[i]) == logsumexp(rows)[i]) for i in range(64)), tuple(logsumexp(rows[:1]).shape)
    (True, (1,))
    """
    if logits.shape[:-1].numel() != 1:
        return torch.logsumexp(logits, dim=-1)
    return torch.logsumexp(logits.reshape(1, -1).expand(2, -1), dim=-1)[0].reshape(logits.shape[:-1])


def log_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """float32 log-probabilities of every token of the vocabulary (last dimension)."""
    logits = logits.float()
    return logits - logsumexp(logits).unsqueeze(-1)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log P(target) under ``logits`` (..., vocab), in float32: the logit minus the float32 log-sum-exp."""
    logits = logits.float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logsumexp(logits)
