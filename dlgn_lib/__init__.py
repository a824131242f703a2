"""dlgn-halfspace: Deep Linearly Gated Networks and half-space feature learning.

A small library behind the notebook series that rebuilds the claims of *Half-Space Feature
Learning in Neural Networks* (Yadav, Ramaswamy, Lakshminarayanan, arXiv 2404.04312).
"""
__version__ = "0.1.0"

from . import clusters, config, data, kernels, locations, models, paths, plots, runs, train, verdict, widgets  # noqa: F401,E402
from .plots import save_figure  # noqa: F401,E402
