"""Rephrasers: models that write paraphrases of a prompt's question, and the paraphrase file that keeps them.

Backends (``RephraserConfig.backend``):

- ``hf``: a local transformers chat model; offline default the packaged Qwen2.5-Coder-1.5B-Instruct;
- ``llamacpp``: a GGUF file in llama.cpp, in this process (by default the same model's packaged Q4_K_M file);
- ``openai``: any OpenAI-compatible chat endpoint (OpenAI, as the paper's GPT-3.5-Turbo, or a local vLLM,
  llama.cpp or Ollama server), the key read from an environment variable, never from config;
- ``file``: no model; a user's own paraphrase file supplies every paraphrase.

Modules: ``base`` (asking a rephraser, validating its replies), ``store`` (the paraphrase file), ``config``
(``RephraserConfig``, ``make_rephraser``), ``quality`` (what a paraphrase keeps of its original, and the rules that
reject clear failures), ``source`` (``ParaphraseSource``, what a paraphrase run reads),
``hf_backend`` (``hf`` and ``llamacpp``) and ``openai_backend``. The package never imports ``posixlab.variants``:
the variants use it.
"""

from __future__ import annotations

from posixlab.rephrase.base import Collected, Instruction, Rephraser, collect_paraphrases, parse_reply, rejection
from posixlab.rephrase.config import BACKENDS, RephraserConfig, default_paraphrase_path, make_rephraser
from posixlab.rephrase.source import ParaphraseSource, make_paraphrase_source
from posixlab.rephrase.store import ParaphraseFile, record_key

__all__ = ["BACKENDS", "Collected", "Instruction", "ParaphraseFile", "ParaphraseSource", "Rephraser",
           "RephraserConfig", "collect_paraphrases", "default_paraphrase_path", "make_paraphrase_source",
           "make_rephraser", "parse_reply", "record_key", "rejection"]
