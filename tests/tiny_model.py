"""A tiny scoring model for the fast lane: a 2-layer Llama with random weights and a character-level tokenizer,
both built in memory (no file is read, nothing is downloaded), that loads and runs in milliseconds.

It is a real ``CausalLM`` around a real ``transformers`` model, so the scoring engine, ψ, label probabilities and
constrained decoding run through the same code as with a packaged model. Its answers are gibberish, but they are
deterministic: the weights come from ``torch.manual_seed(0)`` in float32. The end-of-sequence token's output bias
(``OUTPUT_BIAS``) is set so that greedy responses end within a few tokens for some prompts and run to
``max_new_tokens`` for others (``tests/test_tiny_model.py`` checks that both happen).

Use the session fixture ``tiny_lm`` (``from tiny_model import tiny_lm``), or ``build_tiny_lm()`` for a model of
your own.
"""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path

import pytest

from posixlab.models.loading import ModelSpec

NAME = "tiny-test-model"
VERSION = "1"  # bump when the model changes (the identity keys the score cache)
SPECIALS = ("<unk>", "<s>", "</s>")  # unknown, beginning and end of sequence: ids 0, 1, 2
# one token per character: enough to write prompts, JSON objects and class labels (anything else is <unk>)
CHARACTERS = string.ascii_lowercase + string.ascii_uppercase + string.digits + " .,:;?!'\"(){}[]-_+=*/\n"
# added to the output logits of these tokens: the end-of-sequence token, so that some greedy answers stop early and
# others run to the limit; spaces and newlines, so that a JSON answer held to a schema (which may put any whitespace
# between its tokens) closes its object instead of filling max_new_tokens with whitespace
OUTPUT_BIAS = {"</s>": 2.0, " ": -3.0, "\n": -3.0}
CHAT_TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<s>assistant:{% endif %}")


def build_tokenizer():
    """A fast tokenizer with one token per character: a byte-level BPE without merges (llguidance reads its byte
    mapping), ``<s>`` added in front of every text encoded with special tokens, and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    byte_char = _bytes_to_unicode()
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for c in CHARACTERS:
        vocab[byte_char[ord(c)]] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                                        eos_token="</s>", pad_token="</s>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which the byte-level pre-tokenizer applies (``Ġ`` for a space)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def build_tiny_lm():
    """The tiny model as a ``CausalLM``: the same weights, tokens and identity on every call."""
    import torch
    import transformers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    from posixlab.models.causal_lm import CausalLM

    tokenizer = build_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2, tie_word_embeddings=False,
                         initializer_range=0.3)  # larger than Llama's 0.02: answers that depend on the prompt
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32)
    with torch.no_grad():  # a bias on the output layer, zero but for the tokens of OUTPUT_BIAS
        head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        for token, bias in OUTPUT_BIAS.items():
            (token_id,) = tokenizer.encode(token, add_special_tokens=False)
            head.bias[token_id] = bias
        model.lm_head = head
    model.generation_config = GenerationConfig(eos_token_id=2, bos_token_id=1, pad_token_id=2)
    model.eval()
    weights = hashlib.sha256()
    for key, tensor in sorted(model.state_dict().items()):
        weights.update(key.encode() + tensor.numpy().tobytes())
    identity = {"name": NAME, "source": "tests/tiny_model.py", "path": NAME, "revision": VERSION,
                "note": "the tiny test model: random weights, built in memory, no file",
                "weights_sha256": weights.hexdigest(), "vocab": CHARACTERS, "dtype": "float32", "device": "cpu",
                "transformers": transformers.__version__, "torch": torch.__version__}
    return CausalLM(model, tokenizer, name=NAME, identity=identity)


@pytest.fixture(scope="session")
def tiny_lm():
    """The tiny model, built once per session (10 ms once transformers is imported)."""
    return build_tiny_lm()


# --- a tiny classification task, for the tests that run one (test_tiny_model.py, test_report_browser.py) --------------
SPEC = ModelSpec("tiny-test-model", "local", "tiny-test-model")  # never loaded: every run is given the model
MAX_NEW = 6
CLASSES = ["positive", "negative", "mixed"]
TASK = "is the review positive or negative?"


def classifier_config(tmp_path: Path, num_samples: int = 3, num_rephrasings: int = 3, **task) :
    """A three-class classifier file of three labelled samples, and two rephrasings of its task sentence from a
    paraphrase file (no rephraser model, no quality model)."""
    from posixlab.rephrase import RephraserConfig
    from posixlab.tasks.classification import ClassificationConfig, ClassificationData

    (tmp_path / "reviews.yaml").write_text(
        f"task: {TASK}\nclasses: [{', '.join(CLASSES)}]\nsamples:\n"
        '  - {text: "a joy from start to finish.", label: positive}\n'
        '  - {text: "two hours i will not get back.", label: negative}\n'
        '  - {text: "great cast, dull plot.", label: mixed}\n', encoding="utf-8")
    (tmp_path / "rephrasings.jsonl").write_text(json.dumps({"original": TASK, "paraphrases": [
        "is this review positive or negative?", "say if the review is positive or negative."]}) + "\n")
    rephraser = RephraserConfig(backend="file", path=str(tmp_path / "rephrasings.jsonl"), min_similarity=0.0,
                                validate=False)
    data = ClassificationData(name="classifier", source="path", path=str(tmp_path / "reviews.yaml"),
                              num_samples=num_samples)
    return ClassificationConfig(model=SPEC, data=data, num_rephrasings=num_rephrasings, max_new_tokens=MAX_NEW,
                                output_dir=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"),
                                score_cache_dir=str(tmp_path / "scores"), rephraser=rephraser, **task)
