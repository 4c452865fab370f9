"""A GGUF model run by llama.cpp in this process: the tokenizer here (transformers reads it from the same file), the
weights quantized as the file holds them.

Prompts are tokenised here, as every backend does, and llama.cpp runs the ids. Its key/value cache keeps the tokens
last run, so a prompt that begins as the previous one did runs only the rest (``advance``). A pass that asks for
logits asks for them on every token it runs. llama.cpp gives a token the same logits, bit for bit, whatever other
tokens share its pass and however the pass is split (``n_batch``), with one exception: a pass of one token alone
(0.02 nats apart, measured). So no pass here runs one token but a greedy decoding step: ``advance`` and ``_run`` run
one more, a prompt's passes begin at its last two tokens, and a greedy response, decoded a token at a time as
llama.cpp decodes, is scored again in one pass for its own log-probabilities. Every entry of a set's matrix comes
from the same computation (``tests/test_llamacpp.py`` holds the engine to a pass per pair from an empty cache, bit
for bit).

llama.cpp computes with the file's quantized weights (and quantized activations), so its numbers differ from the
``transformers`` backend's, which dequantizes a GGUF file to float32: log-probabilities by about 0.06 nats a token
on SmolLM2's Q4_1 file. ψ then measures the model as it is deployed quantized.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

from posixlab.errors import ConfigError, ModelUnavailableError, TokenizerMismatchError
from posixlab.llamacpp.parts import all_parts, first_part, whole_files
from posixlab.models.causal_lm import TokenizedModel, eos_ids_of, tokenizer_disagreement

MAX_CONTEXT = 8192  # llama.cpp allocates its key/value cache for the whole context: a 128k-token model's would not fit
LLAMA_CPP_PIN = "llama-cpp-python==0.3.36"  # the version the tests run (the private batch and context objects used)
NOT_INSTALLED = (f"model.backend=llamacpp needs llama-cpp-python: pip install {LLAMA_CPP_PIN} (it compiles llama.cpp; "
                 f"CMAKE_ARGS=\"-DGGML_CUDA=on\" builds it for an NVIDIA GPU)")


def gguf_file(spec, cache_dir=None) -> tuple[Path, dict]:
    """(the GGUF file, the identity of its weights) for a packaged model, a local ``.gguf`` file (or a folder that
    holds exactly one) or a file of a GGUF repository on the Hugging Face Hub (``posixlab/llamacpp/hub.py``). A file
    split in parts (``posixlab/llamacpp/parts.py``) is its first part, named by any part, every part beside it."""
    identity = {"name": spec.name, "source": spec.source, "path": spec.path}
    if spec.source == "hub":  # a file of a GGUF repository, from the Hugging Face cache (downloaded once)
        from posixlab.llamacpp.hub import hub_gguf

        return hub_gguf(spec)
    if spec.source == "packaged":
        from posixlab.models.assets import PACKAGED_MODELS, assemble_gguf

        if spec.path not in PACKAGED_MODELS:
            raise ConfigError(f"no packaged model {spec.path!r}; packaged models: {', '.join(PACKAGED_MODELS)}")
        asset = PACKAGED_MODELS[spec.path]
        return assemble_gguf(asset, Path(cache_dir) if cache_dir else None), {**identity, "gguf_sha256": asset.sha256}
    path = Path(spec.path).expanduser()  # a local file (the backend's check refused other sources)
    if path.is_dir():
        found = whole_files(file.name for file in path.glob("*.gguf"))  # a file split in parts counts once
        if len(found) != 1:
            raise ModelUnavailableError(f"model {spec.name}: {path} holds {len(found)} .gguf files; give the file "
                                        f"itself as model.path")
        path = path / found[0]
    if not path.is_file() or path.suffix != ".gguf":
        hub = not path.exists() and not str(spec.path).startswith((".", "/", "~")) and "/" in str(spec.path)
        raise ModelUnavailableError(f"model {spec.name}: {spec.path} is not a .gguf file; give model.path=FILE.gguf"
                                    + (" (a file on the Hugging Face Hub also needs model.source=hub)" if hub else ""))
    path = path.with_name(first_part(path.name))  # a file split in parts: llama.cpp opens its first part
    parts = [path.with_name(part) for part in all_parts(path.name)]
    missing = [part.name for part in parts if not part.is_file()]
    if missing:
        raise ModelUnavailableError(f"model {spec.name}: {path.parent} lacks {', '.join(missing)} of the "
                                    f"{len(parts)} parts of {path.name}'s file: llama.cpp reads every part from the "
                                    f"first part's folder")
    stats = [part.stat() for part in parts]  # names, sizes and times, as for a local folder (hashing GBs is slow)
    identity = {**identity, "file": path.name, "size": sum(stat.st_size for stat in stats),
                "mtime_ns": max(stat.st_mtime_ns for stat in stats)}
    return path, identity if len(parts) == 1 else {**identity, "parts": len(parts)}


def gguf_tokenizer(path: Path, identity: dict, cache_dir=None):
    """The tokenizer transformers reads from the GGUF file itself: the ids llama.cpp will run.

    Reading it from the file takes seconds (3 s for SmolLM2's 49k tokens, 14 s for Gemma 3's 262k, on 2 cores: the
    vocabulary is rebuilt from the file's metadata), and a run opens it twice (the chat template's check before any
    work, then the model). So it is saved, once, as transformers' own files under
    ``<cache>/gguf-tokenizers/<key>`` (the key: the file's identity and transformers' version) and read from there
    (a fifth of the time); a folder that does not read is made again. The model's load checks it against llama.cpp's
    own tokenizer all the same.
    """
    import hashlib
    import json
    import shutil

    import transformers
    from transformers import AutoTokenizer

    from posixlab.paths import default_cache_dir

    key = hashlib.sha256(json.dumps([identity, transformers.__version__], sort_keys=True, default=str).encode())
    folder = Path(cache_dir or default_cache_dir()) / "gguf-tokenizers" / key.hexdigest()[:20]
    if (folder / "tokenizer_config.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(str(folder))
        except Exception:  # noqa: BLE001 - a folder cut short or damaged: read the file again and save it anew
            shutil.rmtree(folder, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    partial = folder.with_name(f"{folder.name}.{os.getpid()}.partial")
    tokenizer.save_pretrained(str(partial))
    try:
        partial.replace(folder)  # whole or not at all; another process that saved it first wins
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return tokenizer


def open_for_plan(spec, cache_dir=None) -> TokenizedModel:
    """The tokenizer alone, for a dry run (no weights read)."""
    path, identity = gguf_file(spec, cache_dir)  # found once: a packaged file's sha256 is checked on every call
    tokenizer = gguf_tokenizer(path, identity, cache_dir)
    model = TokenizedModel(tokenizer, name=spec.name, identity=identity,
                           eos_ids=eos_ids_of(None, tokenizer), max_context=None)
    model.backend = "llamacpp"
    return model


class LlamaCppModel(TokenizedModel):
    """A GGUF model in llama.cpp: text methods from ``TokenizedModel``; ``advance`` and ``logprobs_after`` run it."""

    backend = "llamacpp"  # its capabilities: posixlab/llamacpp/backend.py

    def __init__(self, llm, tokenizer, *, name: str, identity: dict, spec):
        eos = set(eos_ids_of(None, tokenizer)) | {int(llm.token_eos())}
        super().__init__(tokenizer, name=name, identity=identity, eos_ids=frozenset(eos), max_context=llm.n_ctx())
        self.llm = llm
        self.spec = spec
        self.vocab = llm.n_vocab()
        self.cached: list[int] = []  # the tokens whose keys and values llama.cpp holds, position 0 on

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()  # freed now, not in __del__ at exit (where llama-cpp-python's teardown raises)
            self.llm = None

    def _run(self, tokens: list[int], start: int, logits: bool) -> np.ndarray | None:
        """Run ``tokens`` at positions ``start`` on (the cache beyond ``start`` dropped first); their logits as a
        (len(tokens), vocab) float32 array when asked."""
        ctx, batch, step = self.llm._ctx, self.llm._batch, self.llm.n_batch
        ctx.kv_cache_seq_rm(-1, start, -1)
        del self.cached[start:]
        rows = []
        starts = list(range(0, len(tokens), step))
        if len(starts) > 1 and len(tokens) - starts[-1] == 1:  # no pass of one token (see the module's docstring)
            starts[-1] -= 1
        for k, end in zip(starts, starts[1:] + [len(tokens)]):
            chunk = tokens[k:end]
            batch.set_batch(chunk, start + k, logits_all=logits)
            ctx.decode(batch)
            if logits:
                rows.append(np.ctypeslib.as_array(ctx.get_logits(), shape=(len(chunk) * self.vocab,))
                            .reshape(len(chunk), self.vocab).copy())
        self.cached.extend(tokens)
        self.forward_tokens += len(tokens)
        return np.concatenate(rows) if logits else None

    def advance(self, prefix: list[int]) -> int:
        """Hold ``prefix`` in the cache, running only what the cache does not already hold; the tokens run."""
        same = 0
        for a, b in zip(self.cached, prefix):
            if a != b:
                break
            same += 1
        same -= same == len(prefix) - 1 and same > 0  # no pass of one token: run the last two again
        rest = prefix[same:]
        if rest:
            self._run(list(rest), same, logits=False)
        elif same < len(self.cached):
            self.llm._ctx.kv_cache_seq_rm(-1, same, -1)
            del self.cached[same:]
        return len(rest)

    def logprobs_after(self, prompt: list[int], continuation: list[int]) -> list[float]:
        """log P(continuation[k] | prompt, continuation[:k]) for every k, float32 log-softmax, from one pass of the
        prompt's last two tokens and the continuation but its last (the rest of the prompt from the cache)."""
        start = scoring_start(prompt)
        self.advance(prompt[:start])
        logits = self._run([*prompt[start:], *continuation[:-1]], start, logits=True)[len(prompt) - 1 - start:]
        logprobs = torch.log_softmax(torch.from_numpy(logits), dim=-1)
        return logprobs[torch.arange(len(continuation)), torch.tensor(continuation)].tolist()

    def save(self) -> tuple[list[int], object]:
        """The cache's tokens and their keys and values, copied out of llama.cpp (``restore`` puts them back)."""
        import ctypes

        import llama_cpp

        size = llama_cpp.llama_state_seq_get_size(self.llm._ctx.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(self.llm._ctx.ctx, buffer, size, 0) != size:
            raise RuntimeError("llama.cpp did not copy out its cache")
        return list(self.cached), buffer

    def restore(self, saved: tuple[list[int], object]) -> None:
        import ctypes

        import llama_cpp

        tokens, buffer = saved
        self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        if llama_cpp.llama_state_seq_set_data(self.llm._ctx.ctx, buffer, ctypes.sizeof(buffer), 0) == 0:
            raise RuntimeError("llama.cpp did not take back its cache")
        self.cached = list(tokens)

    def next_logits(self, prompt: list[int]) -> np.ndarray:
        """The raw logits of the token after ``prompt`` (float32, the vocabulary's length), from a pass of its last
        two tokens, the rest read from the cache."""
        start = scoring_start(prompt)  # the prompt's end runs as a pass of two, as its whole would in llama.cpp
        self.advance(prompt[:start])
        return self._run(prompt[start:], start, logits=True)[-1]

    def greedy(self, prompt: list[int], max_new_tokens: int, choose=None, first=None) -> list[int]:
        """The greedy response, a token a pass after the prompt, as llama.cpp decodes: the raw logits' argmax (the
        lowest id on a tie, as torch's argmax), ending after the first end-of-sequence token (kept). ``choose``
        (logits -> token id) picks each token instead: a sampler. ``first``: the prompt's ``next_logits``, when the
        caller has them already (the cache then holds the prompt)."""
        logits, tokens = self.next_logits(prompt) if first is None else first, []
        while True:
            tokens.append(int(np.argmax(logits)) if choose is None else choose(logits))
            if tokens[-1] in self.eos_ids or len(tokens) == max_new_tokens:
                return tokens
            logits = self._run(tokens[-1:], len(prompt) + len(tokens) - 1, logits=True)[0]


def scoring_start(prompt: list[int]) -> int:
    """Where a prompt's passes begin: its last two tokens run with what follows them (never a pass of one token), the
    rest read from the cache."""
    return max(0, len(prompt) - 2)


def trained_context(path: Path) -> int | None:
    """The context length the file's metadata declares (``<architecture>.context_length``), or None: read with the
    vocabulary alone (a tenth of a second), whose context llama.cpp warns about on stderr (hushed)."""
    from llama_cpp import Llama
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):
        vocabulary = Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        metadata = vocabulary.metadata
        found = metadata.get(f"{metadata.get('general.architecture')}.context_length")
        return int(found) if found is not None else None
    finally:
        vocabulary.close()


def placement(gpu_layers: int, offload: bool, gpu_visible: bool) -> tuple[str, str | None]:
    """(where the layers run, a warning or None): a GPU this process sees and a llama.cpp built without GPU support
    is said at load, since the run would take many times longer on the CPU without a word.

    >>> placement(-1, True, True)
    ('every layer on the GPU', None)
    >>> placement(0, True, True)
    ('on the CPU (model.device=cpu)', None)
    >>> placement(-1, False, True)[1].split(":")[0]
    'a GPU is visible, but this llama-cpp-python was built without GPU support, so every layer runs on the CPU'
    """
    if gpu_layers and offload:
        return "every layer on the GPU", None
    if not gpu_layers:
        return "on the CPU (model.device=cpu)", None
    warning = None if not gpu_visible else (
        f"a GPU is visible, but this llama-cpp-python was built without GPU support, so every layer runs on the CPU: "
        f"reinstall it built for the GPU, CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install --force-reinstall --no-cache-dir "
        f"{LLAMA_CPP_PIN}")
    return "on the CPU (llama.cpp built without GPU support)", warning


def open_gguf(spec, cache_dir=None) -> LlamaCppModel:
    """Load the spec's GGUF file into llama.cpp (all its layers on the GPU where llama.cpp was built for one and
    ``model.device`` is not ``cpu``)."""
    try:
        import llama_cpp
    except ImportError:
        raise ConfigError(NOT_INSTALLED) from None
    path, identity = gguf_file(spec, cache_dir)  # found once: a packaged file's sha256 is checked on every call
    tokenizer = gguf_tokenizer(path, identity, cache_dir)
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu_layers = 0 if spec.device == "cpu" else -1
    context = min(MAX_CONTEXT, trained_context(path) or MAX_CONTEXT)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=context, n_threads=threads, n_gpu_layers=gpu_layers,
                          verbose=False)
    where = tokenizer_disagreement(tokenizer, lambda probe, special: llm.tokenize(probe.encode(), add_bos=special,
                                                                                  special=True))
    if where is not None:
        llm.close()
        raise TokenizerMismatchError(f"the tokenizer transformers reads from {path.name} and llama.cpp's disagree on "
                                     f"{where}: prompts tokenised here would not be the text llama.cpp reads. Report "
                                     f"the file to posixlab, or run it with model.backend=transformers")
    # a GPU build's numbers are not a CPU build's: whether layers could go to a GPU is part of what scores depend on
    offload = llama_cpp.llama_supports_gpu_offload()
    identity.update({"backend": "llamacpp", "llama_cpp_python": llama_cpp.__version__, "n_ctx": context,
                     "gpu_layers": gpu_layers if offload else 0})
    where, warning = placement(gpu_layers, offload, torch.cuda.is_available())
    print(f"posixlab: {spec.name} in llama.cpp ({path.name}, {context} tokens of context, {where})", file=sys.stderr)
    if warning:
        print(f"posixlab: warning: {warning}", file=sys.stderr)
    return LlamaCppModel(llm, tokenizer, name=spec.name, identity=identity, spec=spec)
