"""Analysis of saved results: per-set rows, the paper's tables and figures. Reads files only; loads no model.

    python -m posixlab.analysis multirun/ --out figures/      # every table and figure the results allow
"""

from posixlab.analysis.collect import GridWarning, load_rows, write_rows
from posixlab.analysis.regenerate import regenerate

__all__ = ["GridWarning", "load_rows", "regenerate", "write_rows"]
