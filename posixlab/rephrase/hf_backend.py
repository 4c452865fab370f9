"""The ``hf`` rephraser: a local transformers chat model writes the paraphrases.

The offline default is the packaged Qwen2.5-Coder-1.5B-Instruct (its 0.5B sibling is the faster, weaker choice): of
the packaged models, the family that rewrites a question instead of answering it, given a system message and worked
examples. Replies are sampled (temperature, top-p) so that repeated requests add new paraphrases; each reply draws
from a generator seeded from its request's seed, so the same seed gives the same paraphrases on the same machine,
whatever the reply is decoded beside. The model is the ``transformers`` backend's, opened through the backend
registry, and writes with ``posixlab.models.sampling``; this module only configures it. ``max_concurrency`` rows are
decoded in one batch: ``max_concurrency // samples`` questions written in step (``ParaphraseSource.paraphrases_of``),
2 at the defaults; raise it on a GPU. It loads only when a paraphrase is missing from the paraphrase file: a rerun
that finds them all never loads it.
"""

from __future__ import annotations

import sys

from posixlab.backends import open_to_generate
from posixlab.errors import RephraserError
from posixlab.models.loading import ModelSpec
from posixlab.rephrase.base import Rephraser


class HFRephraser(Rephraser):
    """The ``hf`` rephraser: the transformers model ``spec`` names, loaded on first use, and its sampling."""

    batches = True  # its requests are decoded side by side in one batch (``chat_batch``)

    def __init__(self, spec: ModelSpec, cache_dir: str | None = None, temperature: float = 0.8, top_p: float = 0.95,
                 max_concurrency: int = 8):
        if max_concurrency < 1:
            raise RephraserError(f"rephraser.max_concurrency must be at least 1, got {max_concurrency}")
        self.spec = spec
        self.cache_dir = cache_dir
        self.concurrency = max_concurrency  # replies decoded together; not in the identity: how fast, never what
        super().__init__(f"hf:{spec.name}",
                         {"backend": "hf", "model": spec.path, "source": spec.source, "revision": spec.revision,
                          "dtype": spec.dtype, "temperature": temperature, "top_p": top_p},
                         open_lm=self._load, temperature=temperature, top_p=top_p)

    def _load(self):
        print(f"posixlab: loading the rephraser {self.spec.name} to write missing paraphrases", file=sys.stderr)
        return open_to_generate(self.spec, self.cache_dir)
