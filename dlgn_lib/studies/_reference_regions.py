"""Notebook 03's region checks as first written, path by path: the independent reference that the
batched ``dlgn_lib.studies.planes`` versions are tested against (``tests/test_studies_planes.py``)
and timed against (``python -m dlgn_lib.record.bench``). Slow on purpose: do not use it for work."""
from __future__ import annotations

import math

import numpy as np
import torch

from .. import paths

__all__: list[str] = []   # a private module: for the tests and the bench only


@torch.no_grad()
def half_space_disagreements(models, x: torch.Tensor) -> int:
    """Per model, chunk of inputs and path: the half-space test against the hard path gate."""
    disagreements = 0
    for model in models:
        for xs in torch.split(x, paths.chunk_size(model)):
            gates = paths.path_gates(model, xs, hard=True) > 0
            for path in np.ndindex(*model.widths):
                disagreements += int((_in_active_path_region(model, xs, path) != gates[(slice(None), *path)]).sum())
    return disagreements


def _in_active_path_region(model, x: torch.Tensor, path) -> torch.Tensor:
    inside = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    for (V, c), i in zip(paths.effective_hyperplanes(model), path):
        inside &= (x @ V[i] + c[i]) >= 0
    return inside


@torch.no_grad()
def worst_area_z(model, x_uniform: torch.Tensor, box) -> float:
    """Per path: its polygon clipped on its own, against the share of points whose path gate is on."""
    n = x_uniform.shape[0]
    box_area = paths.polygon_area(paths.box_polygon(box))
    total = sum(paths.path_gates(model, xs, hard=True).sum(0, dtype=torch.float64)
                for xs in torch.split(x_uniform, paths.chunk_size(model)))
    sampled = (total / n).to(x_uniform.dtype)
    worst = 0.0
    for path in np.ndindex(*model.widths):
        exact = paths.polygon_area(paths.path_region_polygon(model, path, box)) / box_area
        se = math.sqrt(max(exact * (1 - exact), 1.0 / n) / n)
        worst = max(worst, abs(exact - sampled[path].item()) / se)
    return worst


def tiling_error(model, box) -> float:
    """|Σ area of the gate-pattern cells / area of ``box`` − 1|."""
    box_area = paths.polygon_area(paths.box_polygon(box))
    return abs(sum(paths.polygon_area(p) for p in paths.gate_pattern_cells_2d(model, box).values()) / box_area - 1)


def region_checks(run, x_uniform: torch.Tensor, x_data: torch.Tensor, box) -> dict:
    """The three numbers of ``planes.region_checks``, computed as above."""
    from .planes import _region_checks
    return _region_checks(run, x_uniform, x_data, box, half_space_disagreements, worst_area_z, tiling_error)
