"""The engine on every decoder family a replication runs (the paper's Llama 2 and 3, Mistral and OLMo, the packaged
Gemma 3, Qwen2.5 and SmolLM2, and their neighbours): a tiny random model of each architecture, built in memory as
``tests/tiny_model.py`` builds its Llama (same character tokenizer, float32, seeded), held to the model's own
``transformers`` passes, which know each family's quirks: sliding-window layers beside full ones (Gemma 2 and 3,
OLMo 3, Qwen2 with ``use_sliding_window``, Cohere 2, EXAONE 4, gpt-oss) or a window on every layer (Mistral,
Mixtral, Phi-3, Starcoder2), logit soft-capping and eager attention (Gemma 2), attention sinks (gpt-oss), an attention
scale of its own (Gemma, Granite), clipped queries and keys (OLMo), layers without positions (SmolLM3), learned
positions (GPT-2), a parallel block (GPT-NeoX), mixtures of experts (Mixtral, gpt-oss).

The window is 8 tokens, so every prompt (13 to 120 tokens) outgrows it. The references are one-prompt greedy decoding
through the model's own cache (``CausalLM.greedy``, whose sliding layers keep only a window of keys) and one full pass
per (prompt, response) pair or (prompt, label) pair (``score_full``, with the model's own masks); the engine's
batched, packed passes must equal them to float32 rounding, as ``tests/test_tiny_model.py`` holds the Llama (its tolerances, its prompt sets). The
in-process judge's and rephraser's batched decoding (``posixlab.models.sampling``) must give every chat the reply it
gets alone. A failure here is a family whose sets would be scored against the wrong keys.
"""

from __future__ import annotations

import hashlib

import pytest
import torch
import transformers
from test_tiny_model import (PROMPT_SETS, one_thread, paper_psi, posix_config, records,  # noqa: F401  (autouse)
                             run_recording_requests)
from tiny_model import CLASSES, MAX_NEW, build_tokenizer, classifier_config

from posixlab.errors import ContextLengthError
from posixlab.models.causal_lm import WINDOW_ON_EVERY_LAYER, CausalLM
from posixlab.models.sampling import replies_and_first_tokens, sample_chats
from posixlab.openai_client import Generation
from posixlab.runner import run
from posixlab.scoring import bruteforce_matrix

WINDOW = 8  # tokens a sliding-window layer sees
SIZES = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=1024, initializer_range=0.3, tie_word_embeddings=False)
ALTERNATING = {"sliding_window": WINDOW, "layer_types": ["sliding_attention", "full_attention"]}
# family -> (config class, model class, settings beside SIZES)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": WINDOW}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"sliding_window": WINDOW, "num_local_experts": 4,
                                                        "num_experts_per_tok": 2}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"sliding_window": WINDOW}),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {"sliding_window": WINDOW}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"use_sliding_window": True, "sliding_window": WINDOW,
                                                  "max_window_layers": 1}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 8}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 8}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 8, "sliding_window": WINDOW,
                                                     "query_pre_attn_scalar": 16, "attn_logit_softcapping": 5.0,
                                                     "final_logit_softcapping": 3.0}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 8, "query_pre_attn_scalar": 16,
                                                         **ALTERNATING}),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {"clip_qkv": 2.0}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", ALTERNATING),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"num_key_value_heads": None}),  # no grouped queries
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", None),  # GPT-2 names its sizes its own way
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {"head_dim": 8, "num_local_experts": 4,
                                                      "num_experts_per_tok": 2, **ALTERNATING}),  # attention sinks
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"no_rope_layers": [1, 0]}),  # a layer without positions
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", ALTERNATING),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {}),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", ALTERNATING),
}
HEAD = "you are a careful judge. read the question and the answer below and say yes or no. "  # 84 shared tokens
CHATS = [[{"role": "user", "content": HEAD + q}] for q in
         ("is it red?", "two plus two is four, is that so?", "ok?", "name a colour that is not blue or green, please.")]


def build_family_lm(family: str, **settings) -> CausalLM:
    """A tiny random model of ``family`` as a ``CausalLM`` (sdpa attention where the family has it, as
    ``from_pretrained`` chooses), its config's ``settings`` changed as given."""
    config_name, model_name, extra = FAMILIES[family]
    model_class = getattr(transformers, model_name)
    tokenizer = build_tokenizer()
    ids = dict(vocab_size=len(tokenizer), bos_token_id=1, eos_token_id=2, pad_token_id=2)
    if extra is None:
        config = getattr(transformers, config_name)(n_embd=32, n_layer=2, n_head=4, n_inner=64, n_positions=1024,
                                                    initializer_range=0.3, tie_word_embeddings=False, **ids)
    else:
        config = getattr(transformers, config_name)(**{**SIZES, **extra, **settings}, **ids)
    config._attn_implementation = "sdpa" if model_class._supports_sdpa else "eager"
    torch.manual_seed(0)
    model = model_class(config).to(torch.float32).eval()
    model.generation_config = transformers.GenerationConfig(eos_token_id=2, bos_token_id=1, pad_token_id=2)
    weights = hashlib.sha256()
    for key, tensor in sorted(model.state_dict().items()):
        weights.update(key.encode() + tensor.numpy().tobytes())
    identity = {"name": f"tiny-{family}", "weights_sha256": weights.hexdigest(),
                "attention": config._attn_implementation, "settings": repr(sorted(settings.items()))}
    return CausalLM(model, tokenizer, name=f"tiny-{family}", identity=identity)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_lm(request):
    return build_family_lm(request.param)


def test_a_family_s_run_equals_its_model_s_own_passes(family_lm, tmp_path):
    """Every set's responses are the one-prompt greedy decodes, every matrix entry one full pass, every ψ and the
    POSIX the paper's formula on those entries, past the window (the long shared set decodes in shared passes)."""
    summary = run(posix_config(tmp_path, "run"), lm=family_lm, progress=False)
    tok, psis = family_lm.tokenizer, []
    for given, record in zip(PROMPT_SETS, records(tmp_path / "run"), strict=True):
        prompts = [tok(p).input_ids for p in given["prompts"]]
        responses = [r["token_ids"] for r in record["responses"]]
        for prompt, response in zip(prompts, responses):
            assert response == family_lm.greedy(family_lm.prefill(prompt), given.get("max_new_tokens", MAX_NEW))[0]
        reference = bruteforce_matrix(family_lm, prompts, responses)
        worst = max(abs(a - b) for row, ref in zip(record["logprob_matrix"], reference) for a, b in zip(row, ref))
        assert worst < 1e-4, worst
        psis.append(paper_psi(reference, [len(r) for r in responses]))
        assert abs(record["psi"] - psis[-1]) < 2e-4
    assert abs(summary["psi"]["posix"] - sum(psis) / len(psis)) < 2e-4


def test_a_family_s_label_probabilities_are_one_pass_per_label(family_lm, tmp_path):
    """A classifier's label log-probabilities (probability=label_probs) each equal one full pass of prompt + label."""
    _, got, built = run_recording_requests(classifier_config(tmp_path, probability="label_probs"), family_lm)
    labels = [family_lm.tokenizer(f" {c}", add_special_tokens=False).input_ids for c in CLASSES]
    for record in got:
        for request, logprobs in zip(built[record["sample_id"]], record["label_logprobs"], strict=True):
            assert logprobs == pytest.approx([family_lm.score_full(request.ids[0], label) for label in labels],
                                             abs=1e-4)


def test_a_family_s_chats_get_in_a_batch_the_replies_they_get_alone(family_lm):
    """The judge's greedy replies and first-token log-probabilities, and the rephraser's sampled replies, of chats
    decoded together (84 shared tokens, then each chat's own, past the window) equal each chat's alone."""
    greedy = Generation(max_tokens=12, temperature=0.0)
    together = replies_and_first_tokens(family_lm, CHATS, greedy, top=3)
    for chat, (reply, first) in zip(CHATS, together, strict=True):
        ((alone, alone_first),) = replies_and_first_tokens(family_lm, [chat], greedy, top=3)
        assert reply == alone
        assert [t for t, _ in first] == [t for t, _ in alone_first]
        assert [v for _, v in first] == pytest.approx([v for _, v in alone_first], abs=1e-4)
    sampled = Generation(max_tokens=12, temperature=1.0, n=2, seed=3)
    assert sample_chats(family_lm, [(chat, sampled) for chat in CHATS]) == \
        [sample_chats(family_lm, [(chat, sampled)])[0] for chat in CHATS]


def test_verify_models_passes_a_family_and_catches_keys_outside_the_window(monkeypatch):
    """``experiments/verify_models.py``'s checks on the tiny Gemma 3 (the tokenizer has a chat template): exact on a
    template set, past the window and in batched chats; the same model with its window hidden from the engine and the
    batches (as both were before this check existed, for the batches) fails, past the window and in the chats."""
    from experiments import verify_models
    from experiments.verify_models import verify

    lm = build_family_lm("gemma3")
    result = verify(lm, num_variants=2, max_new_tokens=6, past=40)
    assert result["exact"] and result["past_window"]["tokens"] > WINDOW + 40 and result["chats"]["same"]
    assert result["short"]["max_abs_logprob_diff"] < 1e-4 and result["past_window"]["greedy_equals_generate"]
    texts = verify_models.long_prompts(lm, WINDOW + 40, 6)
    monkeypatch.setattr(verify_models, "long_prompts", lambda *_: texts)
    lm.sliding_window = 10**6  # as wide as no window to the engine's masks and the batches' layout
    blind = verify(lm, num_variants=2, max_new_tokens=6, past=40)
    assert not blind["exact"] and blind["past_window"]["max_abs_logprob_diff"] > 0.1 and not blind["chats"]["same"]


def test_a_window_the_engine_cannot_place_bounds_the_prompts_before_any_work(tmp_path):
    """A config with a sliding window, no layer types and a model type the engine does not know to slide on every
    layer: its prompts must fit inside the window, refused with the sizes and what to do before any pass (the engine
    would otherwise have to guess which layers slide); within the window it runs and equals the model's passes."""
    assert "llama" not in WINDOW_ON_EVERY_LAYER
    lm = build_family_lm("llama", sliding_window=WINDOW)
    assert lm.max_context == WINDOW
    with pytest.raises(ContextLengthError, match=r"needs \d+, more than the 8-token attention window \(which the "
                                                 r"engine cannot place layer by layer\) of tiny-llama\. Shorten"):
        run(posix_config(tmp_path, "run"), lm=lm, progress=False)
    assert lm.forward_tokens == 0
    wide = build_family_lm("llama", sliding_window=1000)
    assert wide.max_context == 1000
    run(posix_config(tmp_path, "wide"), lm=wide, progress=False)
    first = records(tmp_path / "wide")[0]
    prompts = [wide.tokenizer(p).input_ids for p in PROMPT_SETS[0]["prompts"]]
    reference = bruteforce_matrix(wide, prompts, [r["token_ids"] for r in first["responses"]])
    assert abs(reference - first["logprob_matrix"]).max() < 1e-4


# Mistral-7B-Instruct-v0.1's rule (user and assistant turns alternating, a user turn first), as its template raises it
ALTERNATING_TEMPLATE = ("{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
                        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
                        "{% endif %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                        "{% if add_generation_prompt %}<s>assistant:{% endif %}")


def test_a_template_that_refuses_a_system_turn_reads_it_in_the_first_user_turn():
    """The judge's and the rephraser's requests open with a system message, which Gemma 2's and Mistral v0.1's
    templates refuse: in process the model reads it at the head of the first user turn (the same replies as that chat
    written so), where it used to raise mid-run; a template error of another kind still raises."""
    from jinja2.exceptions import TemplateError

    from posixlab.backends import system_folded
    from posixlab.rephrase.base import Rephraser
    from posixlab.judge import judge_messages

    lm = build_family_lm("gemma2")
    assert system_folded(lm) is False  # the tiny model's own template takes a system turn
    lm.tokenizer.chat_template = ALTERNATING_TEMPLATE
    assert system_folded(lm) is True  # what the judge's summary records
    assert Rephraser("in-process", {}, lm=lm).system_folded() is True  # and a rephraser's paraphrase records
    assert Rephraser("not opened", {}, open_lm=lambda: lm).system_folded() is None
    asked = judge_messages(("name a colour.", "red"), ("say a colour.", "blue"))
    assert asked[0]["role"] == "system"
    folded = [{"role": "user", "content": asked[0]["content"] + "\n\n" + asked[1]["content"]}]
    assert lm.apply_chat_template(asked) == lm.apply_chat_template(folded)
    greedy = Generation(max_tokens=6, temperature=0.0)
    assert replies_and_first_tokens(lm, [asked], greedy, top=3) == replies_and_first_tokens(lm, [folded], greedy, top=3)
    sampled = Generation(max_tokens=6, temperature=1.0, n=2, seed=1)
    assert sample_chats(lm, [(asked, sampled)]) == sample_chats(lm, [(folded, sampled)])
    with pytest.raises(TemplateError, match="must alternate"):
        lm.apply_chat_template([{"role": "assistant", "content": "hi"}, {"role": "user", "content": "hello"}])
