"""The ``hf`` rephraser: a local transformers chat model writes the paraphrases.

The offline default is the packaged Qwen2.5-Coder-1.5B-Instruct (its 0.5B sibling is the faster, weaker choice): of
the packaged models, the family that rewrites a question instead of answering it, given a system message and worked
examples. Replies are sampled (temperature,
top-p) so that repeated requests add new paraphrases; each request reseeds torch's generator, so the same seed gives
the same paraphrases on the same machine. The model loads only when a paraphrase is missing from the paraphrase
file: a rerun that finds them all never loads it.
"""

from __future__ import annotations

import sys

from posixlab.models.loading import ModelSpec, load_model
from posixlab.rephrase.base import Rephraser


class HFRephraser(Rephraser):
    def __init__(self, spec: ModelSpec, cache_dir: str | None = None, temperature: float = 0.8, top_p: float = 0.95):
        self.spec = spec
        self.cache_dir = cache_dir
        self.temperature = temperature
        self.top_p = top_p
        self.name = f"hf:{spec.name}"
        self.identity = {"backend": "hf", "model": spec.path, "source": spec.source, "revision": spec.revision,
                         "dtype": spec.dtype, "temperature": temperature, "top_p": top_p}
        self._lm = None

    @property
    def lm(self):
        if self._lm is None:
            print(f"posixlab: loading the rephraser {self.spec.name} to write missing paraphrases", file=sys.stderr)
            self._lm = load_model(self.spec, self.cache_dir)
        return self._lm

    def chat(self, messages: list[dict], *, seed: int, n: int, max_tokens: int) -> list[str]:
        import torch

        lm = self.lm
        text = lm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([lm.encode(text, add_special_tokens=False)], device=lm.device)
        pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else min(lm.eos_ids)
        torch.manual_seed(seed)
        with torch.inference_mode():
            out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                    temperature=self.temperature, top_p=self.top_p, top_k=0, max_new_tokens=max_tokens,
                                    num_return_sequences=n, pad_token_id=pad)
        return [lm.decode(row[ids.shape[1]:]) for row in out]
