"""dlgn-halfspace: Deep Linearly Gated Networks and half-space feature learning.

A small library behind the notebook series that rebuilds the claims of *Half-Space Feature
Learning in Neural Networks* (Yadav, Ramaswamy, Lakshminarayanan, arXiv 2404.04312).

Docstrings cite "reconstruction §n": the sections of ``docs/reconstruction.md``, the project's
account of what it rebuilds (claims, conventions, data, metrics, profiles, verdict rules).
"""
__version__ = "0.1.0"

import importlib as _importlib
import sys as _sys

from dlgn_lib import files as _files, numerics as _numerics


def _refused_at_import(refusal: Exception):
    """A bad environment variable read on import: one line and exit code 1 for a command line
    (``python -m dlgn_lib.…``, where ``sys.argv[0]`` is ``-m`` while the package loads), else raised."""
    if _sys.argv[:1] != ["-m"]:
        raise refusal
    args = getattr(_sys, "orig_argv", [])
    module = args[args.index("-m") + 1] if "-m" in args[:-1] else __name__
    raise SystemExit(f"python -m {module}: error: {refusal}") from None


# Before torch and numpy: pin the numeric code path that differs between x86-64 CPUs
# (reconstruction §7; DLGN_NUMERICS=native turns it off). Torch's CPU threads come from
# DLGN_NUM_THREADS (default 1): the series trains small nets, which are overhead-bound, so one
# thread is as fast as several and makes every printed number independent of the machine's core
# count (float sums are ordered the same way). Set it higher for large full-profile runs on a CPU.
try:
    _numerics.pin()
    _threads = _files.env_int("DLGN_NUM_THREADS", 1)
except _files.Refusal as _refusal:
    _refused_at_import(_refusal)

import torch as _torch  # noqa: E402 (after the pin, on purpose)

_torch.set_num_threads(_threads)

#: The library's modules, imported on first use (``dl.paths``, ``dl.kernels``, …), so that
#: ``python -m dlgn_lib.<module>`` runs a module that has not been imported yet.
MODULES = ("batched", "circle", "clusters", "compare", "config", "data", "fidelity", "fused",
           "intervals", "kernels", "locations", "losses", "models", "nodes", "numerics", "parts", "paths", "plots",
           "protocol", "runs", "saliency", "sensitivity", "studies", "tables", "text", "train", "verdict", "widgets")
__all__ = [*MODULES, "save_figure", "setup"]


def __getattr__(name: str):
    if name in MODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name == "save_figure":
        from .plots import save_figure
        return save_figure
    if name == "setup":
        return _setup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _setup(notebook: str, namespace, *, show: bool = True):
    """A notebook's first step (``dlgn_lib.config.setup``: its parameters checked, its sizes
    returned), and what the record says about it handed to the verdict code
    (``dlgn_lib.verdict.use_record``): the package root sits above the record tools and the science,
    so the science reads no record. In a kernel, figures are shown as compact PNGs
    (``plots.show_compact_figures``)."""
    from . import config, plots, verdict
    from .record import full_results, reproduce
    cfg = config.setup(notebook, namespace, show=show)
    spread = reproduce.load_record()
    verdict.use_record(full_results.recorded_for(notebook, spread))
    plots.use_figure_tolerance(lambda nb, name: reproduce.figure_tolerance(spread, nb, name))
    plots.show_compact_figures()
    return cfg


_setup.__name__ = "setup"


def __dir__():
    return sorted([*globals(), *__all__])
