"""The numeric code path of CPU runs: pinned by default, so that different x86-64 CPUs compute alike.

PyTorch's CPU kernels are chosen at run time by the CPU's instruction set (ATen's vector kernels:
AVX-512, AVX2 or the portable "default" build) and its matrix products by MKL's branch for that
CPU; numpy does the same for its own loops. Each choice rounds differently in the last bit, and
training magnifies the last bit (reconstruction §7). Importing :mod:`dlgn_lib` therefore pins the
choices that differ between x86-64 CPUs to the ones every x86-64 CPU has, before torch or numpy is
imported:

=============================  ==============================  =====================================
variable                       pinned value                    what it fixes
=============================  ==============================  =====================================
``ATEN_CPU_CAPABILITY``        ``default``                     ATen's portable kernels, not AVX2/512
``MKL_CBWR``                   ``COMPATIBLE``                  MKL's conditional numerical
                                                               reproducibility branch (SSE2 code)
``NPY_DISABLE_CPU_FEATURES``   ``X86_V3 X86_V4 AVX512_ICL      numpy's loops at its x86-64-v2
                               AVX512_SPR``                    baseline
``ONEDNN_MAX_CPU_ISA``         ``SSE41``                       oneDNN's kernels (convolutions)
=============================  ==============================  =====================================

A variable the user has set is left as it is, and ``DLGN_NUMERICS=native`` turns the pin off (the
machine's fastest kernels, with numbers that match the committed ones only within tolerance). The
pin cannot act when torch or numpy was imported before :mod:`dlgn_lib`; :func:`status` says which
code path the process actually uses. GPU runs are not covered: CUDA kernels have their own order of
operations, and results there agree with CPU runs only within tolerance.
"""
from __future__ import annotations

import os
import sys

from . import files
from .text import wrap

__all__ = ["PINNED", "describe", "mode", "pin", "status"]

#: The environment of the pinned code path (the committed outputs' own; set before torch loads).
PINNED = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
}
MODES = ("pinned", "native")


def mode(environ=os.environ) -> str:
    """``pinned`` (default) or ``native``, from ``DLGN_NUMERICS`` (another value: ``files.Refusal``)."""
    return files.env_choice("DLGN_NUMERICS", "pinned", MODES, environ=environ)


def pin(environ=os.environ) -> dict[str, str]:
    """Set the pinned variables that are not set yet (unless ``DLGN_NUMERICS=native``); returns what it set.

    Must run before torch and numpy are imported to take effect; :mod:`dlgn_lib` calls it first thing.
    """
    if mode(environ) == "native":
        return {}
    missing = {name: value for name, value in PINNED.items() if name not in environ}
    if "numpy" in sys.modules:   # numpy refuses to start with a feature disabled after import
        missing.pop("NPY_DISABLE_CPU_FEATURES", None)
    environ.update(missing)
    return missing


def status() -> dict[str, str]:
    """The code path this process uses: ATen's capability, MKL's branch setting, numpy's disabled features."""
    import numpy
    import torch
    return {
        "numerics": mode(),
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": os.environ.get("MKL_CBWR", "(auto)"),
        "numpy_disabled_features": os.environ.get("NPY_DISABLE_CPU_FEATURES", "(none)"),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "(auto)"),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }


def overrides(environ=os.environ) -> dict[str, str]:
    """Pinned variables that the environment sets to another value (kept by :func:`pin`)."""
    return {name: environ[name] for name, value in PINNED.items() if name in environ and environ[name] != value}


def cache_tag() -> str | None:
    """The code path as the run cache keys it: ``None`` on the pinned path with one torch thread,
    else a description (ATen's capability, MKL's branch, numpy's disabled features, oneDNN's ISA,
    torch's threads) that :meth:`dlgn_lib.config.RunConfig.key` hashes with the config.

    A run trained on one code path is then never served to a process on another: their last bits
    differ, and training magnifies them (the pinned path's keys are the same as before the tag).
    Two native paths that report the same settings (say MKL's automatic branch on two CPU makers)
    are not told apart.
    """
    import torch
    s = status()
    used = {"ATEN_CPU_CAPABILITY": s["aten_cpu_capability"].lower(), "MKL_CBWR": s["mkl_cbwr"],
            "NPY_DISABLE_CPU_FEATURES": s["numpy_disabled_features"], "ONEDNN_MAX_CPU_ISA": s["onednn_max_cpu_isa"]}
    threads = torch.get_num_threads()
    if used == PINNED and threads == 1:
        return None
    return ", ".join([f"{k}={v}" for k, v in used.items()] + [f"threads={threads}"])


def torch_came_first() -> bool:
    """Whether the pin asked for ATen's portable kernels and torch runs others: torch was imported
    before :mod:`dlgn_lib` (not a user's own ``ATEN_CPU_CAPABILITY``)."""
    return mode() == "pinned" and "ATEN_CPU_CAPABILITY" not in overrides() and not _is_pinned()


def _is_pinned() -> bool:
    """Whether this process runs ATen's portable kernels, as the pin asks (False when torch came first)."""
    import torch
    return torch.backends.cpu.get_cpu_capability() == "DEFAULT"


def describe() -> str:
    """A line (wrapped to the column) for a notebook's versions cell: which numeric code path this kernel runs."""
    s = status()
    if torch_came_first():
        return wrap(f"numerics: NOT pinned (torch was imported before dlgn_lib; ATen uses {s['aten_cpu_capability']}): "
                "numbers agree with the committed ones only within tolerance")
    path = (f"(ATen {s['aten_cpu_capability']}, MKL_CBWR {s['mkl_cbwr']}, "
            f"numpy without {s['numpy_disabled_features']})")
    changed = overrides() if s["numerics"] == "pinned" else {}
    if changed:
        return wrap(f"numerics: pinned except {', '.join(f'{k}={v}' for k, v in changed.items())} as set in the "
                f"environment {path}: numbers agree with the committed ones only within tolerance")
    return wrap(f"numerics: {s['numerics']} {path}")

