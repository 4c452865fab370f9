"""Scoring: the N×N log-probability matrix of prompt sets (the engine), its on-disk cache, and the brute-force
reference the engine is tested against. Names are imported on first use: ``EngineOptions`` needs no torch."""

from posixlab.lazy import lazy_exports

_WHERE = {"EngineOptions": "posixlab.scoring.options", "ScoreCache": "posixlab.scoring.cache",
          "ScoringEngine": "posixlab.scoring.engine", "SetScores": "posixlab.scoring.engine",
          "score_prompt_set": "posixlab.scoring.engine", "bruteforce_matrix": "posixlab.scoring.bruteforce"}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
