"""A causal language model behind the three operations POSIX needs, all on token ids.

- ``prefill(prompt_ids)``: run the prompt once; keep its key/value cache and the next-token distribution.
- ``greedy(prefix, n)``: greedy decoding from a prefill, stopping after the first end-of-sequence token, which the
  response keeps (it was generated, so it is scored and counted in the response length).
- ``score(prefix, continuations)``: log P(continuation | prompt) for several continuations at once, reusing the
  prompt's cache. Continuations are right-padded, so no real token ever attends to padding (causal attention
  looks left only) and padding never changes a score; padded positions are dropped from the sums.

Log-probabilities are ``log_softmax`` of the logits cast to float32, whatever the model's dtype.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from posixlab.errors import ContextLengthError

# Scoring batches are cut so that one batch's logits stay under this many float32 values (256 MiB).
DEFAULT_MAX_BATCH_LOGITS = 1 << 26


@dataclass
class Prefix:
    """A prompt after one forward pass: what scoring and generation continue from."""

    ids: tuple[int, ...]
    cache: object  # transformers Cache holding the prompt's keys and values
    next_logits: torch.Tensor  # raw logits of the token after the prompt, shape (vocab,)
    next_logprobs: torch.Tensor  # float32 log_softmax of next_logits


class CausalLM:
    def __init__(self, model, tokenizer, *, name: str, identity: dict, max_batch_logits: int = DEFAULT_MAX_BATCH_LOGITS):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.identity = identity  # what a result depends on: source, path, revision, sha256, dtype, versions
        self.max_batch_logits = max_batch_logits
        self.device = next(model.parameters()).device
        eos = model.generation_config.eos_token_id
        eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        if tokenizer.eos_token_id is not None:
            eos.append(tokenizer.eos_token_id)
        self.eos_ids = frozenset(int(e) for e in eos)
        self.max_context = getattr(model.config, "max_position_embeddings", None) or getattr(
            getattr(model.config, "text_config", None), "max_position_embeddings", None)
        self.forward_tokens = 0  # tokens run through the model so far, for the run's accounting

    # --- text <-> ids -------------------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of a prompt, with the special tokens the tokenizer adds by default (as the authors' library).

        Text that already went through a chat template carries its own special tokens: pass False.
        """
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens).input_ids)

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def apply_chat_template(self, text: str) -> str:
        """The prompt as a single user turn of the model's chat template, ready for the assistant's answer."""
        if not getattr(self.tokenizer, "chat_template", None):
            from posixlab.errors import ConfigError
            raise ConfigError(f"model {self.name} has no chat template; run with chat_template=false")
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)

    def check_fits(self, prompt_ids, max_new_tokens: int, what: str = "prompt") -> None:
        if self.max_context and len(prompt_ids) + max_new_tokens > self.max_context:
            raise ContextLengthError(
                f"{what} has {len(prompt_ids)} tokens; with max_new_tokens={max_new_tokens} it needs "
                f"{len(prompt_ids) + max_new_tokens}, more than the {self.max_context}-token context of {self.name}. "
                f"Shorten the prompt (fewer shots, a shorter question) or use a model with a longer context."
            )

    # --- the three operations -----------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, prompt_ids) -> Prefix:
        ids = torch.tensor([list(prompt_ids)], device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        self.forward_tokens += ids.shape[1]
        logits = out.logits[0, -1]
        return Prefix(tuple(prompt_ids), out.past_key_values, logits, torch.log_softmax(logits.float(), dim=-1))

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
            logprobs = torch.log_softmax(logits.float(), dim=-1)
        return tokens, token_logprobs

    @torch.inference_mode()
    def score(self, prefix: Prefix, continuations) -> list[float]:
        """log P(c | prompt) for each continuation c (a non-empty list of token ids), in nats."""
        scores = [float(prefix.next_logprobs[c[0]]) for c in continuations]
        # The first token's log-probability comes from the prefill; the rest need c[:-1] run on the cached prompt.
        todo = sorted((i for i, c in enumerate(continuations) if len(c) > 1), key=lambda i: -len(continuations[i]))
        vocab = prefix.next_logits.shape[-1]
        start = 0
        while start < len(todo):
            width = len(continuations[todo[start]]) - 1  # longest first, so the batch's first sets the width
            rows = max(1, self.max_batch_logits // (width * vocab))
            batch = todo[start:start + rows]
            start += len(batch)
            inputs = torch.zeros((len(batch), width), dtype=torch.long)
            targets = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.bool)
            for row, i in enumerate(batch):
                c = continuations[i]
                inputs[row, : len(c) - 1] = torch.tensor(c[:-1])
                targets[row, : len(c) - 1] = torch.tensor(c[1:])
                mask[row, : len(c) - 1] = True
            cache = copy.deepcopy(prefix.cache)
            if len(batch) > 1:
                cache.batch_repeat_interleave(len(batch))
            out = self.model(input_ids=inputs.to(self.device), past_key_values=cache, use_cache=True)
            self.forward_tokens += int(mask.sum())
            logprobs = torch.log_softmax(out.logits.float(), dim=-1)
            picked = logprobs.gather(-1, targets.to(self.device).unsqueeze(-1)).squeeze(-1).cpu()
            sums = (picked * mask).sum(dim=1, dtype=torch.float64)
            for row, i in enumerate(batch):
                scores[i] += float(sums[row])
        return scores

    @torch.inference_mode()
    def score_full(self, prompt_ids, continuation) -> float:
        """log P(continuation | prompt) from one full forward pass of prompt + continuation, without any cache.

        The brute-force reference the cached, batched ``score`` is tested against.
        """
        ids = list(prompt_ids) + list(continuation)
        out = self.model(input_ids=torch.tensor([ids], device=self.device))
        logprobs = torch.log_softmax(out.logits[0].float(), dim=-1)
        start = len(prompt_ids)
        return float(sum(logprobs[start - 1 + t, tok].double() for t, tok in enumerate(continuation)))
