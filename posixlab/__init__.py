"""posixlab: prompt sensitivity of language models (POSIX, Chatterjee et al. 2024), reproduced and extended.

The public API::

    import posixlab
    result = posixlab.evaluate([["What is 2+2?", "what's 2 + 2?"]], model="smollm2-135m-instruct")
    result.posix, result.posix_ci95, result.psi
    result.judge("qwen2.5-coder-1.5b-instruct")  # a judge model reads the responses: result.judged_share
    result = posixlab.evaluate_dataset("mmlu_sample", "template", num_sets=20)  # prompt sets built from a data set
    result = posixlab.classify("mmlu_letters", model="smollm2-135m-instruct", num_samples=20)   # Errica et al.
    result.sensitivity, result.consistency, result.micro_f1     # and sensitivity_ci95, consistency_ci95

Bad input raises a ``posixlab.PosixlabError`` (``posixlab.ConfigError`` for a setting) before any model loads.

The library is plain Python: it never imports Hydra or Weights & Biases (``posixlab.cli`` and ``posixlab.tracking``,
the command-line application, wire those in). ``evaluate`` is loaded on first use, so ``import posixlab`` stays
cheap (no torch until a model is needed).
"""

from posixlab.lazy import lazy_exports
from posixlab.version import __version__  # noqa: F401 (re-exported: posixlab.__version__)

_WHERE = {**dict.fromkeys(("evaluate", "EvaluationResult", "load_result", "configured_models", "JudgeWarning"),
                          "posixlab.api"),
          **dict.fromkeys(("evaluate_dataset", "named_datasets"), "posixlab.dataset_api"),
          **dict.fromkeys(("classify", "ClassificationResult", "load_classification"), "posixlab.classify_api"),
          **dict.fromkeys(("PosixlabError", "ConfigError"), "posixlab.errors"),  # what to catch
          "chat_model": "posixlab.chat.model"}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
