"""Studies: what the notebooks of the series run and report, one module per family of notebooks.

A notebook imports, configures, calls, shows and says; the logic behind it lives here, tested:
the run sets notebooks share (one function builds them, so notebooks that share runs share cache
entries by construction) and the tables and figures a notebook reports. The general tools they
use (paths, kernels, circle metrics, clustering, plots) stay in the library's topic modules.

Modules, imported on first use (``dl.studies.circle``):
"""
from __future__ import annotations

import importlib

__all__ = []

#: Study modules, imported on first use.
STUDIES = ("circle", "clusters", "relu", "table", "planes", "nodes", "sensitivity")


def __getattr__(name: str):
    if name in STUDIES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
