"""Scoring: the N×N log-probability matrix of prompt sets (the engine), its on-disk cache, and the brute-force
reference the engine is tested against. Names are imported on first use: ``EngineOptions`` needs no torch."""

import importlib

_WHERE = {"EngineOptions": "posixlab.scoring.options", "ScoreCache": "posixlab.scoring.cache",
          "ScoringEngine": "posixlab.scoring.engine", "SetScores": "posixlab.scoring.engine",
          "score_prompt_set": "posixlab.scoring.engine", "bruteforce_matrix": "posixlab.scoring.bruteforce"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'posixlab.scoring' has no attribute {name!r}")


__all__ = sorted(_WHERE)
