"""The ``hf`` rephraser: a local transformers chat model writes the paraphrases.

The offline default is the packaged Qwen2.5-Coder-1.5B-Instruct (its 0.5B sibling is the faster, weaker choice): of
the packaged models, the family that rewrites a question instead of answering it, given a system message and worked
examples. Replies are sampled (temperature,
top-p) so that repeated requests add new paraphrases; each request reseeds torch's generator, so the same seed gives
the same paraphrases on the same machine. The model is the ``transformers`` backend's, opened through the backend
registry, and writes with ``posixlab.models.sampling``; this module only configures it. It loads only when a
paraphrase is missing from the paraphrase file: a rerun that finds them all never loads it.
"""

from __future__ import annotations

import sys

from posixlab.backends import open_to_generate
from posixlab.models.loading import ModelSpec
from posixlab.rephrase.base import Rephraser


class HFRephraser(Rephraser):
    """The ``hf`` rephraser: the transformers model ``spec`` names, loaded on first use, and its sampling."""

    def __init__(self, spec: ModelSpec, cache_dir: str | None = None, temperature: float = 0.8, top_p: float = 0.95):
        self.spec = spec
        self.cache_dir = cache_dir
        super().__init__(f"hf:{spec.name}",
                         {"backend": "hf", "model": spec.path, "source": spec.source, "revision": spec.revision,
                          "dtype": spec.dtype, "temperature": temperature, "top_p": top_p},
                         open_lm=self._load, temperature=temperature, top_p=top_p)

    def _load(self):
        print(f"posixlab: loading the rephraser {self.spec.name} to write missing paraphrases", file=sys.stderr)
        return open_to_generate(self.spec, self.cache_dir)
