"""ReLU nets beside DLGNs (claim C7): the analyses of notebooks 05 and 07 in forms defined for both.

A DLGN's gates are global half-spaces, so notebook 05 reads its boundaries off the effective
hyperplanes (``paths.region_boundary_angles``) and notebook 07 clusters the hyperplanes themselves
(``clusters``). A ReLU neuron of layer ≥ 2 has no such hyperplane: its region is bent. The forms
here use only the hard gates ``G^ℓ(x)`` (activation indicators for ReLU), so the same code measures
both models:

- **Switch angles** (``neuron_switch_angles``, ``switch_metrics``): on the unit circle every gate
  switches on or off at a few angles, found on a fine cyclic θ grid. For a DLGN they are the exact
  boundary angles to within half a grid step; for a ReLU net they trace its bent boundaries.
- **Gate vectors** (``gate_vectors``, ``gate_layer_table``): each unit's centred hard gates over a
  set of inputs; two units are near-twins when their gates agree (or are complementary) on almost
  every input, ``|cos| ≈ 1``. For homogeneous half-spaces with normals at angle α and inputs
  uniform on a sphere, the gate-vector cosine is ``1 − 2α/π`` in expectation (Grothendieck's
  identity, ``P[sign(u·x) ≠ sign(v·x)] = α/π``), so the hyperplane threshold τ of notebook 07
  becomes ``gate_threshold(τ)`` here.

Angles are radians, as in ``dlgn_lib.circle``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from . import circle, clusters

__all__ = ["gate_layer_table", "gate_threshold", "gate_vectors", "neuron_switch_angles", "switch_metrics"]

TWO_PI = 2.0 * math.pi


def _cyclic_grid(theta) -> np.ndarray:
    grid = np.unique(np.mod(np.asarray(theta, dtype=np.float64).ravel(), TWO_PI))
    if len(grid) < 3:
        raise ValueError(f"theta: need at least 3 distinct angles, got {len(grid)}")
    return grid


@torch.no_grad()
def neuron_switch_angles(model, theta) -> list[list[np.ndarray]]:
    """Per layer and neuron, the angles where the neuron's hard gate flips along the circle.

    Args:
        model: any gated model with 2 inputs (DLGN, ReLU net, …); evaluated in its own dtype.
        theta: grid angles; sorted here and treated as cyclic, so a flip between the last and the
            first angle counts too.

    Returns:
        ``angles[ℓ][i]``: sorted angles of neuron i of layer ℓ+1, each placed halfway between the
        two neighbouring grid angles whose gates differ (as in ``circle.pattern_breakpoints``). A
        gate that flips twice between neighbouring grid angles is missed, so the grid should be
        fine compared with the narrowest region.
    """
    theta = _cyclic_grid(theta)
    following = np.append(theta[1:], theta[0] + TWO_PI)
    mids = np.mod(0.5 * (theta + following), TWO_PI)
    out = []
    for gates in model.gates(circle.points(theta, model), hard=True):
        on = gates.cpu().numpy() > 0.5
        flips = on != np.roll(on, -1, axis=0)  # row j: the gate differs at angles j and j+1
        out.append([np.sort(mids[flips[:, i]]) for i in range(on.shape[1])])
    return out


def switch_metrics(model, dataset, n_grid: int) -> dict[str, float]:
    """Boundary placement of any gated model on a circle dataset (claims C5, C7; notebook 08).

    On the regular grid of ``n_grid`` angles: ``switches`` (number of gate switches, all neurons
    of all layers), ``switch distance`` (mean distance of the switch angles to the nearest of the
    target's discontinuities, ``circle.mean_boundary_distance``; NaN without switches), and per
    named arc of the target (``circle.target_arcs``) ``switch share <arc>`` (the share of switch
    angles on it, ``circle.breakpoint_shares``).
    """
    if isinstance(n_grid, bool) or not isinstance(n_grid, int) or n_grid < 3:
        raise ValueError(f"n_grid={n_grid!r}: need an integer >= 3")
    grid = TWO_PI * np.arange(n_grid) / n_grid
    per_layer = [np.concatenate([np.empty(0), *neurons]) for neurons in neuron_switch_angles(model, grid)]
    angles = np.concatenate(per_layer)
    row = {"switches": len(angles),
           "switch distance": circle.mean_boundary_distance(per_layer, dataset.meta["discontinuities"])
           if len(angles) else math.nan}
    for name, share in circle.breakpoint_shares(angles, circle.target_arcs(dataset)).items():
        row[f"switch share {name}"] = share
    return row


@torch.no_grad()
def gate_vectors(model, x: torch.Tensor) -> list[np.ndarray]:
    """Per layer, the centred hard gates of the units whose gate varies over the inputs.

    Returns:
        per layer a float64 array (k_ℓ, N): row i is ``G^ℓ_i(x_n) − mean_n G^ℓ_i(x_n)`` for a unit
        that is on for some inputs and off for others. Units that are on for every input or off
        for every input (dead ReLU units) draw no boundary through the data and are left out;
        ``model.widths[ℓ] − k_ℓ`` of them.
    """
    out = []
    for gates in model.gates(x, hard=True):
        g = gates.double().cpu().numpy().T
        g = g - g.mean(axis=1, keepdims=True)  # exact zeros for a constant 0/1 row
        out.append(g[np.any(g != 0, axis=1)])
    return out


def gate_threshold(threshold: float) -> float:
    """The gate-vector ``|cos|`` that matches a hyperplane ``|cos|`` threshold: ``1 − 2 arccos(τ)/π``.

    Exact in expectation for homogeneous half-spaces and inputs from any rotation-invariant
    distribution (e.g. uniform on a sphere): normals at angle α give centred gates with cosine
    ``1 − 2α/π``. τ = 0.9 (notebook 07) gives about 0.713.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold={threshold!r} is not allowed; it must lie in (0, 1]")
    return 1.0 - 2.0 * math.acos(threshold) / math.pi


def gate_layer_table(model, x: torch.Tensor, threshold: float, /, **columns) -> pd.DataFrame:
    """``clusters.layer_table`` of a model's gate vectors on x, one row per layer (claims C6, C7).

    The clustering score, cluster count and mean ``|cos|`` are those of notebook 07, computed on
    ``gate_vectors`` instead of hyperplane normals, so they are defined for ReLU nets too. Column
    ``m`` counts the units whose gate varies over x; ``constant`` the units left out; ``columns``
    are added as constant columns (e.g. ``model="relu", state="init"``). A layer with fewer than
    two varying units has no clustering score: its score, cluster count, cluster share and mean
    ``|cos|`` are NaN (pandas means skip it).
    """
    vectors = gate_vectors(model, x)
    rows = []
    for layer, varying in enumerate(vectors, start=1):
        if len(varying) >= 2:
            rows.append({**clusters.layer_table([varying], threshold, **columns).iloc[0].to_dict(), "layer": layer})
        else:
            rows.append({**columns, "layer": layer, "m": len(varying), "score": math.nan, "n_clusters": math.nan,
                         "cluster_share": math.nan, "mean_abs_cos": math.nan})
    table = pd.DataFrame(rows)
    table["constant"] = [m - len(varying) for m, varying in zip(model.widths, vectors)]
    return table
