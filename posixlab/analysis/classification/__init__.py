"""Figures, tables and the "most sensitive samples" report for classification runs (Errica et al., NAACL 2025).

Reads only saved results (a run's ``summary.json``, ``samples.jsonl`` and ``rephrasings.json``); loads no model. The
metrics come from ``posixlab.metrics.classification``: sensitivity S_τ(x) is the normalised entropy of a sample's
label distribution over the Q rephrasings (N/A counted as a class), and consistency C_y(x, x') = 1 − TVD(p_x, p_x')
compares two samples of the same gold class y.

Per (data set, model, probability mode), across prompting strategies:
  - ``sensitivity_violin``: per-sample S_τ, one violin per strategy (the paper's Simple / Detail / 1-shot);
  - ``sensitivity_per_class``: mean S_τ per gold class, one line per strategy.
Per run (one strategy):
  - ``consistency_matrix``: C_y(x, x') for every pair of samples, sorted by gold class, class boundaries marked;
  - ``consistency_histogram``: C_y(x, x') over the pairs of distinct samples of each class, one panel per class;
  - ``sensitivity_vs_consistency``: each sample's S_τ against its mean consistency with the other samples of its
    gold class, beside two simulated baselines (``simulate_labels``): a random predictor and a noisy one;
  - ``most_sensitive.md``: the top-k samples by S_τ with every rephrasing's raw answer and parsed label.
And a Table-1-style table (micro-F1 over rephrasings, S_τ, C_y; ``classification_table1``) with its per-class
companion (``per_class``), as Markdown and CSV, copied from the runs' summaries.

A strategy or class that a figure expects but the results lack leaves a gap (an empty slot, a missing point) and a
``GridWarning``, never an error.

Modules, split as the POSIX side of ``posixlab.analysis`` is: ``load`` (``ClassificationRun``, finding and loading
saved runs), ``baselines`` (the simulated predictors and per-sample consistency), ``figures``, ``tables``,
``report`` (``most_sensitive_report``) and ``regenerate`` (the entry points). Everything public is importable from
here.
"""

from posixlab.analysis.classification.baselines import (NOISE, SEED, baseline, class_mean, mean_consistency,
                                                        simulate_labels)
from posixlab.analysis.classification.figures import (histogram_figure, matrix_figure, per_class_figure,
                                                      scatter_figure, violin_figure)
from posixlab.analysis.classification.load import (STRATEGIES, STRATEGY_LABELS, ClassificationRun,
                                                   find_classification_runs, load_classification_runs, load_run)
from posixlab.analysis.classification.regenerate import regenerate_classification, run_classification_figures
from posixlab.analysis.classification.report import TOP_K, most_sensitive_report
from posixlab.analysis.classification.tables import classification_table1, per_class_table

__all__ = ["NOISE", "SEED", "STRATEGIES", "STRATEGY_LABELS", "TOP_K", "ClassificationRun", "baseline", "class_mean",
           "classification_table1", "find_classification_runs", "histogram_figure", "load_classification_runs",
           "load_run", "matrix_figure", "mean_consistency", "most_sensitive_report", "per_class_figure",
           "per_class_table", "regenerate_classification", "run_classification_figures", "scatter_figure",
           "simulate_labels", "violin_figure"]
