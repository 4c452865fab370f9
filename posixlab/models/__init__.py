"""Models: loading (packaged GGUF assets, hub names, local folders), greedy generation and scoring on token ids.

The names below are imported on first use, so that importing a light part of the package (a model's settings,
``posixlab.models.loading.ModelSpec``) does not import torch: a chat run needs neither torch nor transformers.
"""

from posixlab.lazy import lazy_exports

_WHERE = {"PACKAGED_MODELS": "posixlab.models.assets", "CausalLM": "posixlab.models.causal_lm",
          "Prefix": "posixlab.models.causal_lm", "TokenizedModel": "posixlab.models.causal_lm",
          "ModelSpec": "posixlab.models.loading", "ServerSettings": "posixlab.models.loading",
          "load_model": "posixlab.models.loading", "spec_from_dict": "posixlab.models.loading"}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
