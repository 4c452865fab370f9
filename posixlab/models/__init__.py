"""Models: loading (packaged GGUF assets, hub names, local folders), greedy generation and scoring on token ids."""

from posixlab.models.assets import PACKAGED_MODELS
from posixlab.models.causal_lm import CausalLM, Prefix, TokenizedModel
from posixlab.models.loading import ModelSpec, ServerSettings, load_model, spec_from_dict

__all__ = ["PACKAGED_MODELS", "CausalLM", "ModelSpec", "Prefix", "ServerSettings", "TokenizedModel", "load_model", "spec_from_dict"]
