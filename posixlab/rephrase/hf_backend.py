"""The in-process rephrasers: a chat model in this process writes the paraphrases, through transformers (``hf``) or
llama.cpp (``llamacpp``, a GGUF file as it is quantized).

The offline default is the packaged Qwen2.5-Coder-1.5B-Instruct (its 0.5B sibling is the faster, weaker choice): of
the packaged models, the family that rewrites a question instead of answering it, given a system message and worked
examples. Replies are sampled (temperature, top-p) so that repeated requests add new paraphrases; each reply draws
from a generator seeded from its request's seed, so the same seed gives the same paraphrases on the same machine,
whatever the reply is decoded beside. The model is its backend's (``transformers`` or ``llamacpp``), opened through the
backend registry, and writes with ``posixlab.models.sampling``'s sampler; this module only configures it.

``hf``: ``max_concurrency`` rows are decoded in one batch: ``max_concurrency // samples`` questions written in step
(``ParaphraseSource.paraphrases_of``), 2 at the defaults; raise it on a GPU. ``llamacpp``: one reply at a time (a
request's replies share one pass of its chat), 24 s a request against ``hf``'s 56 s on 2 CPU cores with the
packaged 1.5B file (2.3 times as fast to write the same paraphrases), in under half the peak memory (its Q4_K_M
weights, not float32 copies). Either loads only when a paraphrase is missing from the paraphrase file: a rerun that
finds them all never loads it.
"""

from __future__ import annotations

import sys

from posixlab.backends import open_to_generate
from posixlab.errors import ModelUnavailableError, RephraserError
from posixlab.models.fetch_errors import said_of
from posixlab.models.loading import ModelSpec
from posixlab.rephrase.base import Rephraser


class HFRephraser(Rephraser):
    """The ``hf`` rephraser: the transformers model ``spec`` names, loaded on first use, and its sampling."""

    kind = "hf"  # the rephraser backend: its name's prefix, its identity's "backend"
    batches = True  # its requests are decoded side by side in one batch (``chat_batch``)
    # what one batch of the packaged 1.5B rephraser costs on 2 CPU cores, float32: the requests of the texts written
    # in step (max_concurrency // samples: 2 of 4 sampled replies each) decode side by side, and one request alone
    # takes about as long as two (decoding is bound by reading the weights): 2 x 55.9 s in
    # experiments/benchmark_local_rephrasers.py (docs/choices.md), 110-131 s for one request alone (2026-12-07)
    seconds_per_batch = 112
    load_seconds = 22  # opening its converted float32 weights (the first use converts them once: 30-80 s more)

    def __init__(self, spec: ModelSpec, cache_dir: str | None = None, temperature: float = 0.8, top_p: float = 0.95,
                 max_concurrency: int = 8):
        if max_concurrency < 1:
            raise RephraserError(f"rephraser.max_concurrency must be at least 1, got {max_concurrency}")
        self.spec = spec
        self.cache_dir = cache_dir
        self.concurrency = max_concurrency  # replies decoded together; not in the identity: how fast, never what
        super().__init__(f"{self.kind}:{spec.name}",
                         {"backend": self.kind, "model": spec.path, "source": spec.source, "revision": spec.revision,
                          "dtype": spec.dtype, "temperature": temperature, "top_p": top_p},
                         open_lm=self._load, temperature=temperature, top_p=top_p)

    def _load(self):
        print(f"posixlab: loading the rephraser {self.spec.name} to write missing paraphrases", file=sys.stderr)
        try:
            return open_to_generate(self.spec, self.cache_dir)
        except ModelUnavailableError as exc:  # its hints name the rephraser's settings, not the run's model's
            raise ModelUnavailableError(said_of(str(exc), "the rephraser's", "rephraser.model",
                                                "rephraser.revision")) from None


class LlamaCppRephraser(HFRephraser):
    """The ``llamacpp`` rephraser: the GGUF file ``spec`` names (a packaged model, a local file, a GGUF repository's
    file on the hub) in llama.cpp, loaded on first use. Its requests run one at a time (the backend decodes one chat
    at a time), so one question is written at a time whatever ``max_concurrency`` says."""

    kind = "llamacpp"
    # measured with the packaged 1.5B's Q4_K_M file on 2 CPU cores, 4 sampled replies a request: 24.0 s a request
    # (a batch here: one at a time) against hf's 55.9 s, on the same questions in the same run
    # (experiments/benchmark_local_rephrasers.py; docs/choices.md); 25-52 s on 2026-12-07
    seconds_per_batch = 24
    load_seconds = 16

    def __init__(self, spec: ModelSpec, cache_dir: str | None = None, temperature: float = 0.8, top_p: float = 0.95):
        super().__init__(spec, cache_dir, temperature=temperature, top_p=top_p, max_concurrency=1)
