"""What made a record: the machine (CPU model and features, the numeric code path, library
versions) and the code version (the checkout's commit)."""
from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path

from .. import locations

__all__ = []


def machine() -> dict:
    """What made a record: CPU model and features, the code path, library versions."""
    cpu = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            cpu.setdefault(name.strip(), value.strip())   # the first CPU's
    except OSError:
        pass
    from dlgn_lib import numerics
    return {"cpu": cpu.get("model name", "unknown"),
            "cpu_family_model_stepping": "/".join(cpu.get(k, "?") for k in ("cpu family", "model", "stepping")),
            "cpu_features": sorted(set(cpu.get("flags", "").split()) & {"avx2", "fma", "avx512f", "avx512_bf16",
                                                                         "amx_tile"}),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "(auto)"),
            "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            **numerics.status()}


def machine_label(info: Mapping | None = None) -> str:
    """A short name of a machine for the record's variant names: CPU model, family/model/stepping."""
    info = info or machine()
    if not (fms := info.get("cpu_family_model_stepping")):
        return f"{info['cpu']} (family/model not recorded)"
    family, model, stepping = fms.split("/")
    return f"{info['cpu']} family {family} model {model} stepping {stepping}"


def code_version() -> str:
    """The checkout's commit, short ("unknown" outside a git checkout)."""
    try:
        return subprocess.run(["git", "-C", str(locations.REPO_ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
