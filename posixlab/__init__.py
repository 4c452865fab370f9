"""posixlab: prompt sensitivity of language models (POSIX, Chatterjee et al. 2024), reproduced and extended.

The public API::

    import posixlab
    result = posixlab.evaluate([["What is 2+2?", "what's 2 + 2?"]], model="smollm2-135m-instruct")
    result.posix, result.psi
    result = posixlab.classify("mmlu_letters", model="smollm2-135m-instruct", num_samples=20)   # Errica et al.
    result.sensitivity, result.consistency, result.micro_f1

The library is plain Python: it never imports Hydra or Weights & Biases (``posixlab.cli`` and ``posixlab.tracking``,
the command-line application, wire those in). ``evaluate`` is loaded on first use, so ``import posixlab`` stays
cheap (no torch until a model is needed).
"""

from posixlab.version import __version__

_API = ("evaluate", "EvaluationResult", "load_result", "configured_models")
_CLASSIFY_API = ("classify", "ClassificationResult", "load_classification")
_CHAT_API = ("chat_model",)


def __getattr__(name: str):
    if name in _API:
        from posixlab import api

        return getattr(api, name)
    if name in _CLASSIFY_API:
        from posixlab import classify_api

        return getattr(classify_api, name)
    if name in _CHAT_API:
        from posixlab.chat import model

        return getattr(model, name)
    raise AttributeError(f"module 'posixlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_CLASSIFY_API, *_CHAT_API])


__all__ = ["__version__", *_API, *_CLASSIFY_API, *_CHAT_API]
