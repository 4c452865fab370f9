"""Models: loading (packaged GGUF assets, hub names, local folders), greedy generation and scoring on token ids.

The names below are imported on first use, so that importing a light part of the package (a model's settings,
``posixlab.models.loading.ModelSpec``) does not import torch: a chat run needs neither torch nor transformers.
"""

import importlib

_WHERE = {"PACKAGED_MODELS": "posixlab.models.assets", "CausalLM": "posixlab.models.causal_lm",
          "Prefix": "posixlab.models.causal_lm", "TokenizedModel": "posixlab.models.causal_lm",
          "ModelSpec": "posixlab.models.loading", "ServerSettings": "posixlab.models.loading",
          "load_model": "posixlab.models.loading", "spec_from_dict": "posixlab.models.loading"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'posixlab.models' has no attribute {name!r}")


__all__ = sorted(_WHERE)
