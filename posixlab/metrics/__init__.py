"""Metrics: pure functions of log-probability matrices and responses, with doctested examples."""

from posixlab.metrics.posix import PAPER, PSI_MODES, REFERENCE_COMPAT, posix, psi, psi_per_prompt, summarize

__all__ = ["PAPER", "PSI_MODES", "REFERENCE_COMPAT", "posix", "psi", "psi_per_prompt", "summarize"]

from posixlab.metrics.accuracy import (accuracy_per_prompt, accuracy_spread, average_performance, best_case_accuracy,
                                       combined_performance_score, consistency_rate, estimated_accuracy_per_prompt,
                                       estimated_accuracy_spread, max_performance, prompt_sensitivity_score,
                                       two_way_bootstrap_ci, variants_needed, worst_case_accuracy)

__all__ += ["accuracy_per_prompt", "accuracy_spread", "average_performance", "best_case_accuracy",
            "combined_performance_score", "consistency_rate", "estimated_accuracy_per_prompt",
            "estimated_accuracy_spread", "max_performance", "prompt_sensitivity_score",
            "two_way_bootstrap_ci", "variants_needed", "worst_case_accuracy"]

from posixlab.metrics.selection import best_prompt_set, choose_prompt, lowest_prompt_set

__all__ += ["best_prompt_set", "choose_prompt", "lowest_prompt_set"]

from posixlab.metrics.race import race_on_grid, race_prompts

__all__ += ["race_on_grid", "race_prompts"]
