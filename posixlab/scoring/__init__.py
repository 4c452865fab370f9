"""Scoring: the N×N log-probability matrix of prompt sets (the engine), its on-disk cache, and the brute-force
reference the engine is tested against."""

from posixlab.scoring.bruteforce import bruteforce_matrix
from posixlab.scoring.cache import ScoreCache
from posixlab.scoring.engine import EngineOptions, ScoringEngine, SetScores, score_prompt_set

__all__ = ["EngineOptions", "ScoreCache", "ScoringEngine", "SetScores", "bruteforce_matrix", "score_prompt_set"]
