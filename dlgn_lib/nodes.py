"""Half-spaces against the tree's node hyperplanes: claim C5 measured directly on odt data.

On the oblique-decision-tree sets the label jumps exactly on the node hyperplanes ``w_k · x = 0``
of the tree (``data.odt``'s ``meta["normals"]``, 15 nodes at depth 4). "Half-spaces settle where
the target is not smooth" can then be read off each gating unit's effective hyperplane ``V^ℓ_i``:
how close is its direction to some node normal? Per unit the largest ``|cos|`` with a node normal
(sign-blind: ``w`` and ``−w`` are the same cut); per layer

- ``share``: the share of units with largest ``|cos|`` ≥ τ (τ = 0.9 by default, about 26°);
- ``mean``: the mean over units of their largest ``|cos|``;

both against the same numbers for random directions (``random_baseline``: Gaussian directions in
the same d, as many as the layer has units, averaged over draws). In d = 20 with 15 nodes a random
direction has largest ``|cos|`` about 0.45, and essentially never 0.9.

A ReLU net's first layer is a set of global half-spaces; its later neurons are half-spaces only
locally, around each input (``paths.local_hyperplanes``): ``normals_per_layer`` gives those at a set
of points, one row per (point, unit), so the same measures apply to them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from . import paths
from .clusters import _as_rows, _check_threshold
from .models import ReLUNet

__all__ = ["layer_table", "normals_per_layer", "random_baseline"]

#: |cos| at which a unit counts as aligned with a node (the same τ as notebook 07's clustering).
DEFAULT_THRESHOLD = 0.9


def _unit_rows(vectors, what: str) -> np.ndarray:
    """Non-zero rows scaled to unit norm, float64 (zero rows are left out)."""
    try:
        rows = _as_rows(vectors)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    norms = np.linalg.norm(rows, axis=1)
    keep = norms > 0
    return rows[keep] / norms[keep, None]


def best_node_cos(normals, node_normals) -> np.ndarray:
    """Each unit's largest ``|cos|`` with a node normal, (m,) float64; zero rows are left out."""
    units, nodes = _unit_rows(normals, "normals"), _unit_rows(node_normals, "node_normals")
    if units.shape[1] != nodes.shape[1]:
        raise ValueError(f"normals have d = {units.shape[1]} but node_normals have d = {nodes.shape[1]}")
    return np.abs(units @ nodes.T).max(axis=1)


def _summary(best: np.ndarray, threshold: float) -> dict[str, float]:
    return {"share": float((best >= _check_threshold(threshold)).mean()), "mean": float(best.mean())}


def node_alignment(normals, node_normals, threshold: float = DEFAULT_THRESHOLD) -> dict[str, float]:
    """``{"share": share of units with largest |cos| ≥ threshold, "mean": mean largest |cos|}``."""
    return _summary(best_node_cos(normals, node_normals), threshold)


def random_baseline(m: int, node_normals, threshold: float = DEFAULT_THRESHOLD, n_draws: int = 200,
                    seed: int = 0) -> dict[str, float]:
    """``node_alignment`` of m random Gaussian directions, averaged over ``n_draws`` draws."""
    nodes = _unit_rows(node_normals, "node_normals")
    rng = np.random.default_rng(seed)
    draws = rng.standard_normal((n_draws, m, nodes.shape[1]))
    draws /= np.linalg.norm(draws, axis=2, keepdims=True)
    return _summary(np.abs(draws @ nodes.T).max(axis=2), threshold)


@torch.no_grad()
def normals_per_layer(model, x: torch.Tensor | None = None) -> list[np.ndarray]:
    """Per gating layer, the hyperplane normals: a DLGN's ``V^ℓ`` (m_ℓ, d); a ReLU net's first-layer
    weights, and for later layers its local hyperplanes at the points ``x`` (N·m_ℓ, d), or only the
    first layer when ``x`` is None."""
    if isinstance(model, ReLUNet):
        if x is None:
            return [paths.effective_hyperplanes(model, n_layers=1)[0][0].double().cpu().numpy()]
        local = paths.local_hyperplanes(model, x.to(next(model.parameters()).dtype))
        return [A[0].double().cpu().numpy() if layer == 0 else A.reshape(-1, A.shape[-1]).double().cpu().numpy()
                for layer, (A, _) in enumerate(local)]
    return [V.double().cpu().numpy() for V, _ in paths.effective_hyperplanes(model)]


def layer_table(net, node_normals, threshold: float = DEFAULT_THRESHOLD, x: torch.Tensor | None = None,
                **columns) -> pd.DataFrame:
    """One row per gating layer of the network ``net``: ``layer`` (1-based), ``units`` (rows
    measured), ``share`` and ``mean`` (``node_alignment``), plus ``columns`` (e.g.
    ``model="dlgn", seed=0, epoch=10``)."""
    rows = []
    for layer, normals in enumerate(normals_per_layer(net, x), start=1):
        best = best_node_cos(normals, node_normals)
        rows.append({**columns, "layer": layer, "units": int(best.size), **_summary(best, threshold)})
    return pd.DataFrame(rows)
