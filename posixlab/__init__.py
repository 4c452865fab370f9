"""posixlab: prompt sensitivity of language models (POSIX, Chatterjee et al. 2024), reproduced and extended.

The library is plain Python: it never imports Hydra or Weights & Biases (``run.py`` wires those in).
"""

__version__ = "0.1.0"
