"""``model.adapter``: a PEFT (LoRA) adapter merged into the weights as they load (posixlab/models/adapters.py), with
real peft and transformers on a tiny Llama saved as a model folder. The hub's adapters: tests/test_hub.py."""

from __future__ import annotations

import pytest
import torch

from hub_fixtures import build_adapter_repo, build_model_repo
from posixlab.errors import ConfigError, ModelUnavailableError
from posixlab.models.loading import ModelSpec, check_spec, load_model, open_for_plan
from posixlab.scoring.cache import fingerprint_of

TEXTS = ["What is the capital of France? Paris.", "Which planet is the largest? Jupiter.", "(A) (B) (C) (D) Answer:"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny Llama model folder, a LoRA adapter on it, and an adapter on a model of another width."""
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("adapters")
    for name in ("base", "other"):
        (root / name).mkdir()
    build_model_repo(root / "base", TEXTS * 20)
    build_adapter_repo(root / "lora", root / "base")
    config = LlamaConfig(vocab_size=512, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2)
    LlamaForCausalLM(config).save_pretrained(root / "other")
    build_adapter_repo(root / "other-lora", root / "other")
    return root


def spec(folders, **more) -> ModelSpec:
    return ModelSpec("tiny", "local", str(folders / "base"), device="cpu", dtype="float32", **more)


def log_probs(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits.float(), dim=-1)


def test_the_merged_adapter_scores_as_peft_s_own_forward_pass_and_is_named_and_cached_apart(folders):
    import peft
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapted, base = load_model(spec(folders, adapter=str(folders / "lora"))), load_model(spec(folders))
    unmerged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folders / "base"), folders / "lora")
    ids = adapted.encode(TEXTS[0])
    assert ids == base.encode(TEXTS[0])  # the base model's tokenizer
    merged = log_probs(adapted.model, ids)
    assert (merged - log_probs(unmerged.eval(), ids)).abs().max() < 1e-5  # merging changes rounding only
    assert (merged - log_probs(base.model, ids)).abs().max() > 1e-2  # and the adapter changes the model
    assert type(adapted.model).__name__ == "LlamaForCausalLM"  # a plain model again: the engine's fast paths hold
    assert adapted.name == adapted.identity["name"] == "tiny+lora" and base.name == "tiny"
    about = adapted.identity["adapter"]
    assert about["path"] == str(folders / "lora") and about["peft_type"] == "LORA" and about["peft"] == peft.__version__
    assert about["base_model"] == str(folders / "base") and len(about["files"]) == 16
    # the score cache keys on the identity: the base model's numbers are never served for the adapted one
    assert fingerprint_of(adapted.identity) != fingerprint_of(base.identity)
    plan = open_for_plan(spec(folders, adapter=str(folders / "lora")))  # a dry run: the same name and identity
    assert plan.name == "tiny+lora" and plan.identity["adapter"]["files"] == about["files"]


def test_an_adapter_that_cannot_run_is_refused_before_the_weights_load(folders, tmp_path):
    with pytest.raises(ModelUnavailableError, match="model.adapter: no folder .*nope .*or a hub repository id"):
        load_model(spec(folders, adapter=str(tmp_path / "nope")))
    with pytest.raises(ConfigError, match="is not a PEFT adapter's folder: it needs adapter_config.json and "
                                          "adapter_model.safetensors or adapter_model.bin"):
        load_model(spec(folders, adapter=str(folders / "base")))  # a model, not an adapter
    with pytest.raises(ConfigError, match=r"model.adapter .*other-lora does not fit tiny .* it was trained on "
                                          r".*other\. peft said: "):
        load_model(spec(folders, adapter=str(folders / "other-lora")))
    with pytest.raises(ConfigError, match="not on a vllm backend: merge the adapter into the weights"):
        check_spec(ModelSpec("tiny", "local", str(folders / "base"), backend="vllm", adapter=str(folders / "lora")))
    with pytest.raises(ConfigError, match="model.adapter_revision is set without model.adapter"):
        check_spec(spec(folders, adapter_revision="main"))


def test_a_run_of_an_adapter_has_job_folders_and_a_w_and_b_name_of_its_own():
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from posixlab.cli import CONF_DIR

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        names = [compose(config_name="config", overrides=overrides).task.run_name for overrides in (
            [], ["model.adapter=org/smollm2-lora"], ["task=classification", "model.adapter=/data/lora/"])]
    GlobalHydra.instance().clear()
    assert names == ["smollm2-135m-instruct_mmlu_spelling_0shot",
                     "smollm2-135m-instruct+smollm2-lora_mmlu_spelling_0shot",
                     "smollm2-135m-instruct+lora_classification_mmlu_letters_simple_greedy"]
