"""Do hidden units' half-spaces cluster? Hyperplane similarity and clustering scores (claim C6).

Each gate of a DLGN is a half-space of the input space with normal ``V^ℓ_i`` (reconstruction §1 effective
hyperplanes). Two units whose normals point along the same line, either way, cut the input space
along nearly the same hyperplane, so similarity is measured by the absolute cosine

    |cos(i, j)| = |V_i · V_j| / (‖V_i‖ ‖V_j‖),

which treats ``v`` and ``-v`` as the same hyperplane (the two sides of one cut). On top of it:

- **clustering score** at threshold τ (``clustering_score``): the share of units whose nearest
  other unit has ``|cos| ≥ τ``. 0 when all normals are pairwise far apart, 1 when every unit has
  a near-twin.
- **cluster count** at τ (``cluster_labels``, ``cluster_count``): complete-linkage hierarchical
  clustering on the distance ``1 − |cos|``, cut at ``1 − τ``; so within a cluster *every* pair has
  ``|cos| ≥ τ``. m units in general position give m clusters; m copies of one line give 1.
- **clustered order** (``clustered_order``): the leaf order of the same dendrogram, which puts
  similar units next to each other in a similarity matrix.
- **cluster counts over thresholds** (``cluster_counts``): the count at a sweep of τ, so that no
  conclusion hangs on one threshold.
- **effective number of directions** and **collapse** (``effective_directions``, ``collapse``):
  clustering into a few tight groups and collapse of a whole layer onto a few lines both raise the
  score; these tell them apart. With unit normals u_i, the matrix M = (1/m) Σ u_i u_iᵀ has
  eigenvalues λ summing to 1 and its participation ratio ``1 / Σ λ²`` counts the distinct lines
  (1 for m copies of one line, k for k orthogonal lines equally used); collapse rescales it to
  [0, 1]: ``(r − n_eff) / (r − 1)`` with r = min(m, d), 1 when every unit lies on one line, 0 when
  the units spread evenly over r orthogonal lines.

Inputs are arrays (or tensors) of shape (m, d), one row per unit; rows need not be unit-normalised
but must be non-zero. Everything is computed in float64.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.cluster import hierarchy
from scipy.spatial.distance import squareform

__all__ = ["abs_cosine_matrix", "cluster_counts", "clustered_order", "collapse", "effective_directions",
           "layer_table"]

#: τ = 0.9 is an angle of about 25.8° between the two lines.
DEFAULT_THRESHOLD = 0.9
LINKAGES = ("complete", "average", "single")


def _as_rows(vectors) -> np.ndarray:
    """Rows as a float64 (m, d) array; tensors are detached and moved to the CPU."""
    if hasattr(vectors, "detach"):
        vectors = vectors.detach().cpu().numpy()
    rows = np.asarray(vectors, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] < 1:
        raise ValueError(f"vectors must be a 2-D array (m units, d inputs) with m >= 1, "
                         f"got shape {rows.shape}")
    return rows


def _check_threshold(threshold: float) -> float:
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold={threshold!r} is not allowed; it must lie in (0, 1]")
    return float(threshold)


def abs_cosine_matrix(vectors) -> np.ndarray:
    """Pairwise ``|cos|`` of the rows: an (m, m) float64 matrix with ones on the diagonal.

    Raises:
        ValueError: a row is zero (a hyperplane needs a non-zero normal).
    """
    rows = _as_rows(vectors)
    norms = np.linalg.norm(rows, axis=1)
    if np.any(norms == 0):
        raise ValueError(f"vectors has zero rows {np.flatnonzero(norms == 0).tolist()}; "
                         "every hyperplane needs a non-zero normal")
    unit = rows / norms[:, None]
    cos = np.abs(unit @ unit.T)
    np.fill_diagonal(cos, 1.0)
    return np.minimum(cos, 1.0)  # rounding can push |cos| of parallel rows just above 1


def _cos_of(vectors_or_cos, is_cos: bool) -> np.ndarray:
    if not is_cos:
        return abs_cosine_matrix(vectors_or_cos)
    cos = _as_rows(vectors_or_cos)
    if cos.shape[0] != cos.shape[1]:
        raise ValueError(f"a |cos| matrix must be square, got shape {cos.shape}")
    return cos


def _nearest_neighbour_abs_cos(vectors, *, is_cos: bool = False) -> np.ndarray:
    """Per unit, ``max_{j≠i} |cos(i, j)|``: how close its nearest other unit is (m,).

    Args:
        vectors: (m, d) rows, or an (m, m) ``|cos|`` matrix when ``is_cos``; needs m >= 2.
    """
    cos = _cos_of(vectors, is_cos)
    if cos.shape[0] < 2:
        raise ValueError("a nearest neighbour needs at least 2 units")
    off = cos.copy()
    np.fill_diagonal(off, -np.inf)
    return off.max(axis=1)


def clustering_score(vectors, threshold: float = DEFAULT_THRESHOLD, *, is_cos: bool = False) -> float:
    """Share of units whose nearest other unit has ``|cos| ≥ threshold`` (claim C6 score).

    ``score = (1/m) Σ_i 1[max_{j≠i} |cos(V_i, V_j)| ≥ τ]``: 0 for pairwise orthogonal normals,
    1 when every unit has a near-parallel (or anti-parallel) partner.
    """
    threshold = _check_threshold(threshold)
    return float(np.mean(_nearest_neighbour_abs_cos(vectors, is_cos=is_cos) >= threshold))


def _linkage(cos: np.ndarray, method: str) -> np.ndarray:
    if method not in LINKAGES:
        raise ValueError(f"method={method!r} is not allowed; choose one of {list(LINKAGES)}")
    distance = np.clip(1.0 - cos, 0.0, None)
    distance = (distance + distance.T) / 2  # exact symmetry for squareform
    np.fill_diagonal(distance, 0.0)
    return hierarchy.linkage(squareform(distance, checks=False), method=method)


def cluster_labels(vectors, threshold: float = DEFAULT_THRESHOLD, *, method: str = "complete",
                   is_cos: bool = False) -> np.ndarray:
    """Cluster id (1..k) per unit: hierarchical clustering on ``1 − |cos|`` cut at ``1 − threshold``.

    With complete linkage (the default) every pair inside a cluster has ``|cos| ≥ threshold``.
    """
    threshold = _check_threshold(threshold)
    cos = _cos_of(vectors, is_cos)
    if cos.shape[0] == 1:
        return np.ones(1, dtype=np.int64)
    # A hair above the cut so that pairs exactly at |cos| = τ join (matching the score's "≥").
    cut = (1.0 - threshold) + 1e-12
    labels = hierarchy.fcluster(_linkage(cos, method), t=cut, criterion="distance")
    return labels.astype(np.int64)


def cluster_count(vectors, threshold: float = DEFAULT_THRESHOLD, *, method: str = "complete",
                  is_cos: bool = False) -> int:
    """Number of clusters of :func:`cluster_labels` (m units in general position give m)."""
    return int(np.unique(cluster_labels(vectors, threshold, method=method, is_cos=is_cos)).size)


def clustered_order(vectors, *, method: str = "complete", is_cos: bool = False) -> np.ndarray:
    """A permutation of the units putting similar ones side by side (dendrogram leaf order)."""
    cos = _cos_of(vectors, is_cos)
    if cos.shape[0] == 1:
        return np.zeros(1, dtype=np.int64)
    return hierarchy.leaves_list(_linkage(cos, method)).astype(np.int64)


def cluster_counts(vectors, thresholds, *, method: str = "complete", is_cos: bool = False) -> dict[float, int]:
    """:func:`cluster_count` at each threshold τ of ``thresholds``: ``{τ: count}``."""
    cos = _cos_of(vectors, is_cos)
    return {float(t): cluster_count(cos, _check_threshold(t), method=method, is_cos=True) for t in thresholds}


def effective_directions(vectors) -> float:
    """Participation ratio ``1 / Σ λ²`` of M = (1/m) Σ u_i u_iᵀ over the unit rows u_i.

    Sign-blind (u and −u give the same u uᵀ), between 1 (all rows on one line) and min(m, d).
    """
    rows = _as_rows(vectors)
    norms = np.linalg.norm(rows, axis=1)
    if np.any(norms == 0):
        raise ValueError("a row is zero: a hyperplane needs a non-zero normal")
    unit = rows / norms[:, None]
    # The non-zero eigenvalues of M = UᵀU/m are those of the Gram matrix UUᵀ/m (the smaller side).
    gram = unit @ unit.T if unit.shape[0] <= unit.shape[1] else unit.T @ unit
    eigenvalues = np.clip(np.linalg.eigvalsh(gram / unit.shape[0]), 0.0, None)
    return float(1.0 / np.sum(eigenvalues ** 2))


def collapse(vectors) -> float:
    """``(r − n_eff) / (r − 1)``, r = min(m, d), n_eff = :func:`effective_directions`: 1 when all
    units lie on one line, 0 when they spread evenly over r orthogonal lines (NaN when r = 1)."""
    rows = _as_rows(vectors)
    r = min(rows.shape)
    return float((r - effective_directions(rows)) / (r - 1)) if r > 1 else float("nan")


def layer_table(layers, threshold: float = DEFAULT_THRESHOLD, *, method: str = "complete",
                **columns) -> pd.DataFrame:
    """One row per layer: width, clustering score, cluster count and mean pairwise ``|cos|``.

    Args:
        layers: per layer an (m_ℓ, d) array of hyperplane normals, e.g. the ``V^ℓ`` of
            ``model.effective_hyperplanes()``.
        columns: constant columns to add (e.g. ``dataset="odt", model="dlgn", state="trained"``).

    Returns:
        DataFrame with columns ``layer`` (1-based), ``m``, ``score``, ``n_clusters``,
        ``cluster_share`` (= n_clusters / m; 1 means no two units cluster), ``mean_abs_cos``
        (over pairs i < j), ``n_directions`` (:func:`effective_directions`) and ``collapse``
        (:func:`collapse`), plus ``columns``.
    """
    rows = []
    for layer, vectors in enumerate(layers, start=1):
        cos = abs_cosine_matrix(vectors)
        m = cos.shape[0]
        n_clusters = cluster_count(cos, threshold, method=method, is_cos=True)
        rows.append({**columns, "layer": layer, "m": m,
                     "score": clustering_score(cos, threshold, is_cos=True),
                     "n_clusters": n_clusters, "cluster_share": n_clusters / m,
                     "mean_abs_cos": float(cos[np.triu_indices(m, 1)].mean()) if m > 1 else float("nan"),
                     "n_directions": effective_directions(vectors), "collapse": collapse(vectors)})
    return pd.DataFrame(rows)
