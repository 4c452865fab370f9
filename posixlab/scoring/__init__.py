"""Scoring: the N×N log-probability matrix of a prompt set, and the brute-force reference it is tested against."""

from posixlab.scoring.bruteforce import bruteforce_matrix
from posixlab.scoring.engine import SetScores, score_prompt_set

__all__ = ["SetScores", "bruteforce_matrix", "score_prompt_set"]
