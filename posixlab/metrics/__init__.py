"""Metrics: pure functions of log-probability matrices and responses, with doctested examples."""

from posixlab.metrics.posix import MODES, PAPER, REFERENCE_COMPAT, posix, psi, summarize

__all__ = ["MODES", "PAPER", "REFERENCE_COMPAT", "posix", "psi", "summarize"]
