"""Analysis on circle data (reconstruction §3 circle; claims C5 and C7): where half-spaces and path regions
sit relative to the target's discontinuities and arcs, and how fit, paths and kernels move in training.

On the unit circle x = (cos θ, sin θ) a neuron's half-space is an arc, its boundary meets the circle
at (at most) two angles, and a path's active region is an arc or a few arcs (claim C3). Claim C5 says
training moves these boundaries onto the target's discontinuities, so that the regions that carry
path value cover smooth pieces, and that smooth (low-frequency) parts are fitted and get paths first.

Conventions: angles in radians. An *arc* is a pair ``(a, b)`` of angles in [0, 2π) run
counter-clockwise from a to b (it wraps through 0 when b < a), as in ``data.circle``'s
``meta["arcs"]``; the *pieces* of a target are the arcs between consecutive discontinuities.

Exact path geometry of a DLGN uses *cells*: every neuron's boundary angles (and any extra marks)
cut the circle into arcs on which every hard gate is constant, so a path's region is a union of
cells and every length below is exact (float64), with no angle grid.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from . import kernels, paths
from .losses import task_loss

__all__ = ["MIN_CELL", "antipodal_distance_floor", "ccw_length", "circle_cells", "epochs_to_fraction_of_initial",
           "fit_lead", "inside_pieces", "kernel_alignments", "mixture_effects", "neuron_importance",
           "overlap_metrics", "path_magnitudes", "points", "ratio_above_floor", "region_metrics", "snapshot_table",
           "steps_effects", "sustained_rise_epoch", "target_arcs", "time_ratio", "uniform_distance"]

TWO_PI = 2.0 * math.pi
#: Cells shorter than this (radians) are dropped: they arise where two boundaries coincide.
MIN_CELL = 1e-12


# --------------------------------------------------------------------------- angles and arcs

def _check_arc(arc) -> tuple[float, float]:
    a, b = (float(t) for t in arc)
    if not (0 <= a < TWO_PI and 0 <= b < TWO_PI) or a == b:
        raise ValueError(f"arc={arc!r}: need two different angles in [0, 2π)")
    return a, b


def ccw_length(arc) -> float:
    """Length of the counter-clockwise arc (a, b): ``(b − a) mod 2π``."""
    a, b = _check_arc(arc)
    return (b - a) % TWO_PI


def in_arc(theta, arc) -> np.ndarray:
    """Whether each angle lies on the closed counter-clockwise arc (a, b), bool array like theta."""
    a, _ = _check_arc(arc)
    return np.mod(np.asarray(theta, dtype=np.float64) - a, TWO_PI) <= ccw_length(arc)


def pieces_between(marks: Sequence[float]) -> list[tuple[float, float]]:
    """The arcs between consecutive marks (e.g. a target's discontinuities), counter-clockwise.

    ``pieces_between((0.6, 1.9, 3.4, 5.3))`` is ``[(0.6, 1.9), (1.9, 3.4), (3.4, 5.3), (5.3, 0.6)]``.
    """
    marks = sorted(float(m) % TWO_PI for m in marks)
    if len(marks) < 2 or len(set(marks)) != len(marks):
        raise ValueError(f"marks={marks!r}: need at least two distinct angles")
    return [(a, b) for a, b in zip(marks, marks[1:] + marks[:1])]


def angular_distance(a, b) -> np.ndarray:
    """Distance along the circle between angles, in [0, π] (broadcasts)."""
    d = np.mod(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64), TWO_PI)
    return np.minimum(d, TWO_PI - d)


def nearest_mark_distance(angles, marks: Sequence[float]) -> np.ndarray:
    """Distance from each angle to the nearest mark (NaN angles stay NaN)."""
    marks = np.asarray(marks, dtype=np.float64)
    if marks.ndim != 1 or len(marks) == 0:
        raise ValueError(f"marks={marks!r}: need a non-empty list of angles")
    angles = np.asarray(angles, dtype=np.float64)
    return angular_distance(angles[..., None], marks).min(axis=-1)


def mean_boundary_distance(boundaries: Sequence[np.ndarray], marks: Sequence[float],
                           weights: Sequence[np.ndarray] | None = None) -> float:
    """Mean distance from boundary angles to the nearest mark, optionally weighted per neuron (C5).

    Args:
        boundaries: per layer, (m_ℓ, 2) boundary angles (``paths.region_boundary_angles``); NaN
            rows (a line that misses the circle) are left out.
        marks: the target's discontinuities.
        weights: per layer, (m_ℓ,) neuron weights; both angles of a neuron get its weight.

    Returns:
        The (weighted) mean distance in radians; NaN when no boundary meets the circle.
    """
    dist = np.concatenate([nearest_mark_distance(b, marks).ravel() for b in boundaries])
    if weights is None:
        w = np.ones_like(dist)
    else:
        if len(weights) != len(boundaries):
            raise ValueError(f"weights: need one array per layer ({len(boundaries)}), got {len(weights)}")
        w = np.concatenate([np.repeat(np.asarray(wl, dtype=np.float64), np.shape(b)[1])
                            for wl, b in zip(weights, boundaries)])
    keep = ~np.isnan(dist)
    total = w[keep].sum()
    return float((w[keep] * dist[keep]).sum() / total) if total > 0 else math.nan


def uniform_distance(marks: Sequence[float]) -> float:
    """Expected distance from a uniformly random angle to the nearest mark: ``Σ_gaps g² / (8π)``.

    The random-placement baseline of ``mean_boundary_distance`` (weighted or not): a uniform point
    in a gap of length g lies on average g/4 from the nearer end. K equally spaced marks give π/(2K).
    """
    gaps = [ccw_length(p) for p in pieces_between(marks)]
    return float(sum(g * g for g in gaps) / (4.0 * TWO_PI))


def points(theta, like: torch.nn.Module | None = None) -> torch.Tensor:
    """Points (cos θ, sin θ), (N, 2), in the dtype of a model's parameters (float32 without one)."""
    dtype = next(like.parameters()).dtype if like is not None else torch.float32
    theta = np.asarray(theta, dtype=np.float64)
    return torch.tensor(np.stack([np.cos(theta), np.sin(theta)], axis=1), dtype=dtype)


def antipodal_distance_floor(marks: Sequence[float]) -> float:
    """Smallest mean distance to the nearest mark that a boundary pair (φ, φ + π) can reach.

    Without gate biases every boundary comes with its antipode, so both ends sit on marks only when
    two marks are antipodal. The mean ``(d(φ) + d(φ + π)) / 2`` is piecewise linear in φ and concave
    between its kinks at marks and their antipodes, so its minimum is at one of those angles.
    """
    marks = np.asarray(marks, dtype=np.float64)
    candidates = np.mod(np.concatenate([marks, marks + math.pi]), TWO_PI)
    pair = nearest_mark_distance(candidates, marks) + nearest_mark_distance(candidates + math.pi, marks)
    return float(pair.min() / 2.0)


# --------------------------------------------------------------------------- path values and cells

@torch.no_grad()
def path_magnitudes(model) -> np.ndarray:
    """``‖g_π‖`` per path, (m_1, …, m_L) float64 (the norm over outputs and, for value input "x", inputs)."""
    values = paths.path_values(model).double()
    return values.flatten(model.depth).norm(dim=-1).cpu().numpy()


def neuron_importance(magnitudes: np.ndarray, active: np.ndarray | None = None) -> list[np.ndarray]:
    """Per layer, each neuron's total path magnitude ``Σ_{π ∋ neuron} ‖g_π‖`` (C5 importance).

    Args:
        magnitudes: (m_1, …, m_L) path magnitudes (``path_magnitudes``).
        active: optional (m_1, …, m_L) bool: count only these paths (e.g. paths whose region
            meets the circle; the others never contribute to the output).
    """
    mags = np.asarray(magnitudes, dtype=np.float64)
    if active is not None:
        mags = mags * np.asarray(active, dtype=bool)
    axes = range(mags.ndim)
    return [mags.sum(axis=tuple(a for a in axes if a != layer)) for layer in axes]


@dataclass(frozen=True)
class Cells:
    """The circle cut at every boundary angle of a model and at extra marks.

    Attributes:
        edges: (C + 1,) increasing angles from 0 to 2π; cell c is [edges[c], edges[c+1]].
        support: (C, m_1, …, m_L) float 0/1: path π is active on cell c (hard gates, constant on
            a cell).
    """
    edges: np.ndarray
    support: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.edges)

    @property
    def mids(self) -> np.ndarray:
        return 0.5 * (self.edges[:-1] + self.edges[1:])

    def path_lengths(self) -> np.ndarray:
        """Length of every path's region on the circle, (m_1, …, m_L)."""
        return np.tensordot(self.lengths, self.support, axes=(0, 0))

    def covered(self, arc) -> np.ndarray:
        """Length of every path's region that lies on the arc, (m_1, …, m_L)."""
        inside = in_arc(self.mids, arc) * self.lengths
        return np.tensordot(inside, self.support, axes=(0, 0))


@torch.no_grad()
def circle_cells(model, marks: Sequence[float] = ()) -> Cells:
    """Cut the circle at the model's boundary angles and at ``marks``; path gates on every cell.

    The gates are evaluated at the cells' midpoints in float64 (on a float64 copy unless the model
    is float64 already); for a DLGN (any depth, with or without gate biases) they are constant on
    each cell, so the result is exact.
    """
    angles = [b[~np.isnan(b)] for b in paths.region_boundary_angles(model)]
    cuts = np.unique(np.concatenate([[0.0], *angles, np.mod(np.asarray(marks, dtype=np.float64), TWO_PI)]))
    edges = np.append(cuts, TWO_PI)
    edges = edges[np.append(True, np.diff(edges) > MIN_CELL)]  # drop slivers where cuts coincide
    mids = 0.5 * (edges[:-1] + edges[1:])
    exact = model if next(model.parameters()).dtype == torch.float64 else copy.deepcopy(model).double()
    support = paths.path_gates(exact, points(mids, exact), hard=True).cpu().numpy()
    return Cells(edges, (support > 0.5).astype(np.float64))


def inside_pieces(cells: Cells, pieces: Sequence) -> np.ndarray:
    """Whether each path's region is non-empty and contained in a single piece, (m_1, …, m_L) bool.

    A region that straddles a piece's end (a discontinuity), or lies outside every piece, is not
    inside. The piece ends must be among the cells' marks (``circle_cells(model, marks=...)``), so
    that every cell is in or out of every piece.
    """
    length = cells.path_lengths()
    tolerance = MIN_CELL * len(cells.lengths)
    inside = np.zeros(length.shape, dtype=bool)
    for piece in pieces:
        inside |= length - cells.covered(piece) <= tolerance
    return inside & (length > MIN_CELL)


def share_inside_pieces(cells: Cells, magnitudes: np.ndarray, pieces: Sequence) -> float:
    """Share of path mass on regions that lie inside one piece (C5).

    ``Σ ‖g_π‖`` over paths whose region is inside one piece (``inside_pieces``), divided by the sum
    over all paths with a non-empty region; NaN when no region is non-empty.
    """
    mags = np.asarray(magnitudes, dtype=np.float64)
    total = mags[cells.path_lengths() > MIN_CELL].sum()
    return float(mags[inside_pieces(cells, pieces)].sum() / total) if total > 0 else math.nan


def rotated_share_inside_pieces(cells: Cells, magnitudes: np.ndarray, pieces: Sequence) -> float:
    """Expected ``share_inside_pieces`` when every path region is rotated by a uniformly random angle.

    The random-placement baseline (same regions, same values, random position against the target).
    A region whose gaps (maximal arcs free of it) have lengths g_j fits inside a piece of length P
    for a set of rotations of measure ``Σ_j max(0, g_j − (2π − P))``: the piece's complement must
    fall inside one gap. For a single arc of length ℓ this is ``max(0, P − ℓ)``.
    """
    mags = np.asarray(magnitudes, dtype=np.float64).ravel()
    support = cells.support.reshape(len(cells.lengths), -1).T > 0.5  # (paths, cells)
    active = support.any(axis=1)
    support, mags = support[active], mags[active]
    complements = np.array([TWO_PI - ccw_length(p) for p in pieces])

    def fits(gap):  # measure of rotations that put each gap over some piece's complement
        return np.clip(gap[..., None] - complements, 0.0, None).sum(axis=-1)

    # Roll each path's cells to start at its first active cell; then every gap (a run of inactive
    # cells) ends at an active cell, or at the end of the row (closing onto the first cell).
    n_cells = support.shape[1]
    order = (support.argmax(axis=1)[:, None] + np.arange(n_cells)) % n_cells
    on = np.take_along_axis(support, order, axis=1)
    free = np.cumsum(np.where(on, 0.0, cells.lengths[order]), axis=1)  # inactive length so far
    before = np.maximum.accumulate(np.where(on, free, 0.0), axis=1)    # ... up to the last active cell
    gaps = np.where(on[:, 1:], free[:, 1:] - before[:, :-1], 0.0)
    gaps = np.concatenate([gaps, free[:, -1:] - before[:, -1:]], axis=1)
    measure = fits(gaps).sum(axis=1)
    total = mags.sum()
    return float((mags * measure / TWO_PI).sum() / total) if total > 0 else math.nan


#: Rotations on the uniform grid of the random-rotation baselines of purity and tolerant containment.
N_ROTATIONS = 720
#: Bound on the (rotations × pieces × paths) block evaluated at once.
_COVER_BLOCK = 4_000_000


def _distinct_regions(cells: Cells, magnitudes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct non-empty path regions, as cell indicators (C, R), and the total ``‖g_π‖`` of the
    paths on each. Paths with the same region give the same purity and containment, so every
    measure below is computed once per region and weighted by its paths' total magnitude."""
    support = cells.support.reshape(len(cells.lengths), -1) > 0.5
    mags = np.asarray(magnitudes, dtype=np.float64).ravel()
    keep = support.any(axis=0) & (mags != 0)   # every kept cell is longer than MIN_CELL
    if not keep.any():
        return np.zeros((len(cells.lengths), 0)), np.zeros(0)
    rows = support[:, keep].T
    packed = np.ascontiguousarray(np.packbits(rows, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()   # one byte string per region
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    weights = np.bincount(inverse.ravel(), weights=mags[keep], minlength=len(first))
    return rows[first].T.astype(np.float64), weights


def _cover(cells: Cells, cdf: np.ndarray, regions: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Length of every region on each arc (starts[i] → ends[i], counter-clockwise): (n, R).

    Exact for any arc, marks or not: within a cell a region is all or nothing, so its length up to
    θ is linear between edges (``cdf`` holds it at the edges).
    """
    def upto(theta):
        idx = np.clip(np.searchsorted(cells.edges, theta, side="right") - 1, 0, len(cells.lengths) - 1)
        return cdf[idx] + (theta - cells.edges[idx])[:, None] * regions[idx]
    a, b = upto(starts), upto(ends)
    wraps = (ends < starts)[:, None]
    return np.where(wraps, cdf[-1][None, :] - a + b, b - a)


def _best_piece_cover(cells: Cells, regions: np.ndarray, pieces: Sequence,
                      rotations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each region's largest length inside one piece, the pieces turned by each rotation: (n_rot, R);
    and the regions' lengths (R,)."""
    cdf = np.vstack([np.zeros((1, regions.shape[1])), np.cumsum(cells.lengths[:, None] * regions, axis=0)])
    bounds = np.array([_check_arc(p) for p in pieces], dtype=np.float64)          # (K, 2)
    best = np.empty((len(rotations), regions.shape[1]))
    step = max(1, _COVER_BLOCK // max(len(bounds) * regions.shape[1], 1))
    for first in range(0, len(rotations), step):
        turn = rotations[first:first + step, None]                                  # (r, 1)
        starts = np.mod(bounds[None, :, 0] + turn, TWO_PI).ravel()
        ends = np.mod(bounds[None, :, 1] + turn, TWO_PI).ravel()
        cover = _cover(cells, cdf, regions, starts, ends).reshape(len(turn), len(bounds), -1)
        best[first:first + step] = cover.max(axis=1)
    return best, cdf[-1]


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    total = weights.sum()
    return (values * weights).sum(axis=-1) / total if total > 0 else np.full(values.shape[:-1], math.nan)


def _check_tolerance(tolerance: float) -> float:
    if not (isinstance(tolerance, (int, float)) and 0 <= tolerance < math.pi):
        raise ValueError(f"tolerance={tolerance!r} is not allowed; it must be an angle in [0, π) radians")
    return float(tolerance)


def _check_rotations(n_rotations: int) -> int:
    if not (isinstance(n_rotations, int) and n_rotations >= 1):
        raise ValueError(f"n_rotations={n_rotations!r} is not allowed; it must be a positive integer")
    return n_rotations


def _purity_and_inside(cells: Cells, magnitudes: np.ndarray, pieces: Sequence, tolerance: float,
                       rotations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mass-weighted purity and tolerant share inside, one value per rotation of the pieces."""
    regions, weights = _distinct_regions(cells, magnitudes)
    best, length = _best_piece_cover(cells, regions, pieces, rotations)
    purity = best / length
    inside = (length - best <= tolerance + MIN_CELL * len(cells.lengths)).astype(np.float64)
    return _weighted_mean(purity, weights), _weighted_mean(inside, weights)


def region_purity(cells: Cells, magnitudes: np.ndarray, pieces: Sequence, rotation: float = 0.0) -> float:
    """Continuous purity of the path regions against the target's pieces (C5).

    Each path's purity is the share of its region that lies in its best piece (1: inside one piece;
    1/2: split evenly over two); the result is its mean weighted by ``‖g_π‖`` over paths with a
    non-empty region. A region that overhangs a jump by a sliver loses only the sliver's share, so
    nothing hinges on a knife edge. ``rotation`` turns the pieces (for baselines).
    """
    purity, _ = _purity_and_inside(cells, magnitudes, pieces, 0.0, np.array([float(rotation)]))
    return float(purity[0])


def tolerant_share_inside(cells: Cells, magnitudes: np.ndarray, pieces: Sequence, tolerance: float,
                          rotation: float = 0.0) -> float:
    """Share of path mass on regions inside one piece up to ``tolerance`` radians (C5).

    A region counts as inside when the part of it outside its best piece is at most ``tolerance``
    long: e.g. the grid step π / n_train, which no training point can resolve, or the width of a
    soft gate. ``tolerance=0`` is :func:`share_inside_pieces` (up to float rounding).
    """
    _, inside = _purity_and_inside(cells, magnitudes, pieces, _check_tolerance(tolerance),
                                   np.array([float(rotation)]))
    return float(inside[0])


def rotation_baselines(cells: Cells, magnitudes: np.ndarray, pieces: Sequence, tolerance: float = 0.0,
                       n_rotations: int = N_ROTATIONS) -> dict[str, float]:
    """Purity and tolerant share inside, each averaged over the pieces turned by every angle of a
    uniform grid of ``n_rotations`` (the regions placed at random against the target).

    Returns ``{"purity": …, "share inside": …}``.
    """
    tolerance = _check_tolerance(tolerance)
    rotations = np.arange(_check_rotations(n_rotations)) * (TWO_PI / n_rotations)
    purity, inside = _purity_and_inside(cells, magnitudes, pieces, tolerance, rotations)
    return {"purity": float(purity.mean()), "share inside": float(inside.mean())}


# --------------------------------------------------------------------------- regions of a target

def boundaries_per_arc(boundaries: Sequence[np.ndarray], arcs: Mapping[str, tuple]) -> dict[str, int]:
    """Number of boundary angles (all layers, both ends; NaN left out) on each named arc."""
    angles = np.concatenate([np.asarray(b, dtype=np.float64).ravel() for b in boundaries])
    angles = angles[~np.isnan(angles)]
    return {name: int(in_arc(angles, arc).sum()) for name, arc in arcs.items()}


def path_mass_density(cells: Cells, magnitudes: np.ndarray, arc) -> float:
    """Mean over θ on the arc of ``Σ_π ‖g_π‖ f_π(θ)``: how much path value the arc holds per radian.

    The arc's ends must be among the cells' marks.
    """
    mags = np.asarray(magnitudes, dtype=np.float64)
    return float((cells.covered(arc) * mags).sum() / ccw_length(arc))


#: Angles of the grid on which soft-gate path mass is averaged over an arc.
N_SOFT_GRID = 2048


@torch.no_grad()
def soft_path_mass_density(model, arcs: Mapping[str, tuple], magnitudes: np.ndarray | None = None,
                           n_grid: int = N_SOFT_GRID) -> dict[str, float]:
    """Mean over θ on each arc of ``Σ_π ‖g_π‖ f_π(θ)`` with *soft* path gates: the path mass of the
    function that was trained (reconstruction §2.1), where hard gates describe another one.

    The mean is over the midpoints of a regular grid of ``n_grid`` angles that fall on the arc.
    """
    mags = torch.from_numpy(path_magnitudes(model) if magnitudes is None else np.asarray(magnitudes, dtype=np.float64))
    theta = (np.arange(n_grid) + 0.5) * (TWO_PI / n_grid)
    exact = model if next(model.parameters()).dtype == torch.float64 else copy.deepcopy(model).double()
    gates = exact.gates(points(theta, exact), hard=False)
    # Σ_π ‖g_π‖ Π_ℓ G^ℓ_{i_ℓ}(θ), contracted one layer at a time from the last, so that no
    # (points × paths) array is ever formed.
    per_point = torch.einsum("...k,nk->n...", mags, gates[-1])
    for g in reversed(gates[:-1]):
        per_point = torch.einsum("n...k,nk->n...", per_point, g)
    per_point = per_point.numpy()
    out = {}
    for name, arc in arcs.items():
        inside = in_arc(theta, arc)
        out[name] = float(per_point[inside].mean()) if inside.any() else math.nan
    return out


@torch.no_grad()
def arc_losses(model, theta, y: torch.Tensor, arcs: Mapping[str, tuple], task: str) -> dict[str, float]:
    """The task loss of the model on the points of each named arc (``losses.task_loss``)."""
    theta = np.asarray(theta, dtype=np.float64)
    out = model(points(theta, model))
    y = torch.as_tensor(y).to(out.dtype)
    losses = {}
    for name, arc in arcs.items():
        mask = torch.from_numpy(in_arc(theta, arc))
        losses[name] = float(task_loss(out[mask], y[mask], task)) if mask.any() else math.nan
    return losses


@torch.no_grad()
def pattern_breakpoints(model, theta) -> np.ndarray:
    """Angles where the joint hard gate pattern changes between neighbouring grid angles.

    Args:
        theta: grid angles; sorted here and treated as cyclic, so a change between the last and the
            first angle counts too. Each breakpoint is placed halfway between the two angles.
    """
    theta = np.sort(np.mod(np.asarray(theta, dtype=np.float64), TWO_PI))
    patterns = paths.gate_patterns(model, points(theta, model))
    changed = (patterns != patterns.roll(-1, dims=0)).any(dim=1).cpu().numpy()
    nxt = np.roll(theta, -1) + np.where(np.arange(len(theta)) == len(theta) - 1, TWO_PI, 0.0)
    return np.mod(0.5 * (theta + nxt), TWO_PI)[changed]


def breakpoint_shares(breakpoints, arcs: Mapping[str, tuple]) -> dict[str, float]:
    """Share of breakpoints on each named arc (NaN when there are none)."""
    breakpoints = np.asarray(breakpoints, dtype=np.float64)
    if len(breakpoints) == 0:
        return {name: math.nan for name in arcs}
    return {name: float(in_arc(breakpoints, arc).mean()) for name, arc in arcs.items()}


@torch.no_grad()
def kernel_alignments(model, theta, y, arcs: Mapping[str, tuple]) -> dict[str, float]:
    """Overlap-kernel–target alignments on the given angles (reconstruction §2; claims C5, C7).

    Returns keys ``alignment`` and ``centred`` (all angles), and per named arc ``<name> alignment``
    and ``<name> centred``: the kernel and the target restricted to that arc's angles
    (``kernels.restricted_alignment``). Hard gates; for ReLU nets, activation indicators.
    """
    theta = np.asarray(theta, dtype=np.float64)
    K = kernels.model_overlap_kernel(model, points(theta, model)).double()
    y = torch.as_tensor(y, dtype=torch.float64)
    out = {"alignment": kernels.alignment(K, y), "centred": kernels.centered_alignment(K, y)}
    for name, arc in arcs.items():
        mask = torch.from_numpy(in_arc(theta, arc))
        out[f"{name} alignment"] = kernels.restricted_alignment(K, y, mask)
        out[f"{name} centred"] = kernels.restricted_alignment(K, y, mask, centered=True)
    return out


# --------------------------------------------------------------------------- over epochs

def crossing_epoch(epochs, values, level: float, direction: str = "down") -> float:
    """First epoch at which a curve reaches a level, linear between snapshots; inf if never.

    Args:
        epochs, values: the curve at snapshot epochs (increasing epochs).
        direction: "down" (first value ≤ level) or "up" (first value ≥ level).
    """
    if direction not in ("down", "up"):
        raise ValueError(f"direction={direction!r} is not allowed; choose 'down' or 'up'")
    e = np.asarray(epochs, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if direction == "up":
        v, level = -v, -level
    if len(e) == 0 or len(e) != len(v):
        raise ValueError(f"epochs and values: need equal non-zero lengths, got {len(e)} and {len(v)}")
    reached = np.flatnonzero(v <= level)
    if len(reached) == 0:
        return math.inf
    j = reached[0]
    if j == 0:
        return float(e[0])
    return float(e[j - 1] + (v[j - 1] - level) / (v[j - 1] - v[j]) * (e[j] - e[j - 1]))


def epochs_to_fraction_of_initial(epochs, values, fraction: float) -> float:
    """First epoch at which a decreasing curve (a loss) is ≤ fraction × its initial value."""
    values = np.asarray(values, dtype=np.float64)
    return crossing_epoch(epochs, values, fraction * float(values[0]), "down")


def epochs_to_fraction_of_change(epochs, values, fraction: float) -> float:
    """First epoch at which a curve has covered ``fraction`` of its net change (last − first).

    Rising curves count upwards, falling curves downwards; NaN when the curve ends where it started.
    """
    values = np.asarray(values, dtype=np.float64)
    first, last = float(values[0]), float(values[-1])
    if last == first:
        return math.nan
    return crossing_epoch(epochs, values, first + fraction * (last - first), "up" if last > first else "down")


def epochs_to_fraction_of_rise(epochs, values, fraction: float) -> float:
    """First epoch at which a curve has made ``fraction`` of its net rise; inf when it does not rise.

    For curves that should grow (an alignment): a curve that ends at or below its start never
    "reaches" anything.
    """
    values = np.asarray(values, dtype=np.float64)
    if not values[-1] > values[0]:
        return math.inf
    return epochs_to_fraction_of_change(epochs, values, fraction)


def sustained_rise_epoch(epochs, values, fraction: float = 0.5) -> float:
    """The first epoch from which a quantity stays at least ``fraction`` of its net rise above its
    start: ``min e_k`` with ``v_j − v_0 ≥ fraction · (v_end − v_0)`` for every ``j ≥ k``.

    Directed: when the quantity ends no higher than it started (``v_end ≤ v_0``) it never rose, and
    the result is inf (never), so a quantity that falls cannot be timed as if it had risen.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction!r} is not allowed; it must lie in (0, 1]")
    epochs, values = np.asarray(epochs, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if epochs.shape != values.shape or epochs.size < 2:
        raise ValueError(f"epochs and values must be 1-D of the same length >= 2, got {epochs.shape} and {values.shape}")
    rise = values[-1] - values[0]
    if not rise > 0:
        return math.inf
    above = values - values[0] >= fraction * rise
    # Positions from which every later value stays above: a suffix of `above` that is all True.
    stays = np.flip(np.logical_and.accumulate(np.flip(above)))
    return float(epochs[np.argmax(stays)])


def ratio_above_floor(value: float, reference: float, floor: float) -> float:
    """``(value − floor) / (reference − floor)``: how much of the distance a quantity could still
    fall (to ``floor``) is left, e.g. the boundary distance trained against init above the antipodal
    floor of a net without gate biases (``antipodal_distance_floor``). NaN when reference ≤ floor."""
    return float((value - floor) / (reference - floor)) if reference > floor else math.nan


def time_ratio(first: float, second: float) -> float:
    """``first / second`` for epochs that may be inf (never reached): inf/inf and NaN give NaN."""
    if math.isnan(first) or math.isnan(second) or (math.isinf(first) and math.isinf(second)):
        return math.nan
    if math.isinf(second):
        return 0.0
    if second == 0:
        return math.inf if first > 0 else math.nan
    return first / second


def snapshot_table(run, measure: Callable, epochs: Sequence[int] | None = None, **columns) -> pd.DataFrame:
    """One row per snapshot epoch: the epoch, ``columns``, and ``measure(model, dataset)`` (a dict).

    The model of each snapshot is measured in float64 (a fresh copy per epoch, so exact cell geometry
    needs no further copy).
    """
    dataset = run.dataset()
    rows = [{**columns, "epoch": epoch, **measure(run.model_at(epoch).double(), dataset)}
            for epoch in (run.epochs if epochs is None else epochs)]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the notebooks' metrics

def target_arcs(dataset) -> dict[str, tuple[float, float]]:
    """Named arcs of a circle dataset: the steps target's pieces ("piece 1", …) or the mixture's
    "smooth" and "rough" arcs."""
    meta = dataset.meta
    if meta.get("target") == "mixture":
        return dict(meta["arcs"])
    if meta.get("target") == "steps":
        return {f"piece {k + 1}": p for k, p in enumerate(pieces_between(meta["discontinuities"]))}
    raise ValueError(f"dataset {dataset.name!r}: need a circle dataset with target 'steps' or 'mixture'")


def smooth_region_metrics(model, dataset, baselines: bool = True) -> dict[str, float]:
    """Notebook 05's numbers for one DLGN on a circle dataset (claim C5).

    Keys: ``distance`` and ``weighted distance`` (boundaries to the nearest discontinuity; weights:
    ``neuron_importance`` over paths with a non-empty region), ``share inside`` (path mass on
    regions inside one smooth piece); with ``baselines``, also ``uniform distance`` and ``rotated
    share`` (their random-placement baselines); per named arc (``target_arcs``): ``loss <arc>``,
    ``boundaries <arc>`` and ``path mass <arc>`` (``path_mass_density``). Smooth pieces: every piece
    of a steps target; the smooth arc of a mixture.
    """
    meta = dataset.meta
    arcs = target_arcs(dataset)
    smooth = list(arcs.values()) if meta["target"] == "steps" else [arcs["smooth"]]
    marks = meta["discontinuities"]
    boundaries = paths.region_boundary_angles(model)
    cells = circle_cells(model, marks)
    mags = path_magnitudes(model)
    weights = neuron_importance(mags, active=cells.path_lengths() > MIN_CELL)
    row = {
        "distance": mean_boundary_distance(boundaries, marks),
        "weighted distance": mean_boundary_distance(boundaries, marks, weights),
        "share inside": share_inside_pieces(cells, mags, smooth),
    }
    if baselines:
        row["uniform distance"] = uniform_distance(marks)
        row["rotated share"] = rotated_share_inside_pieces(cells, mags, smooth)
    losses = arc_losses(model, meta["theta_train"], dataset.y_train, arcs, dataset.task)
    counts = boundaries_per_arc(boundaries, arcs)
    for name, arc in arcs.items():
        row[f"loss {name}"] = losses[name]
        row[f"boundaries {name}"] = counts[name]
        row[f"path mass {name}"] = path_mass_density(cells, mags, arc)
    return row


def overlap_metrics(model, dataset) -> dict[str, float]:
    """Notebook 06's numbers for one model (DLGN or ReLU) on a circle dataset (claims C5, C7).

    On the training angles: ``kernel_alignments`` (plain, centred, and restricted to each named
    arc), ``loss <arc>`` per arc, ``breakpoints`` (gate-pattern changes on the training grid) and
    ``breakpoint share <arc>``.
    """
    theta = dataset.meta["theta_train"]
    arcs = target_arcs(dataset)
    row = kernel_alignments(model, theta, dataset.y_train, arcs)
    for name, value in arc_losses(model, theta, dataset.y_train, arcs, dataset.task).items():
        row[f"loss {name}"] = value
    points = pattern_breakpoints(model, theta)
    row["breakpoints"] = len(points)
    for name, share in breakpoint_shares(points, arcs).items():
        row[f"breakpoint share {name}"] = share
    return row


def region_metrics(model, dataset, baselines: bool = True, n_rotations: int = N_ROTATIONS) -> dict[str, float]:
    """The second reading of notebook 05's numbers (claim C5): ``smooth_region_metrics`` and

    - ``purity``: :func:`region_purity` against the smooth pieces;
    - ``tolerant share``: :func:`tolerant_share_inside` with a tolerance of half the training
      grid's step, π / n_train, which no training point can resolve;
    - with ``baselines``, ``rotated purity`` and ``rotated tolerant share`` (:func:`rotation_baselines`);
    - per named arc, ``soft path mass <arc>`` (:func:`soft_path_mass_density`).
    """
    row = smooth_region_metrics(model, dataset, baselines)
    meta = dataset.meta
    arcs = target_arcs(dataset)
    smooth = list(arcs.values()) if meta["target"] == "steps" else [arcs["smooth"]]
    cells = circle_cells(model, meta["discontinuities"])
    mags = path_magnitudes(model)
    tolerance = math.pi / len(meta["theta_train"])
    rotations = np.arange(_check_rotations(n_rotations) if baselines else 1) * (TWO_PI / n_rotations)  # 0 first
    purity, inside = _purity_and_inside(cells, mags, smooth, tolerance, rotations)
    row["purity"], row["tolerant share"] = float(purity[0]), float(inside[0])
    if baselines:
        row["rotated purity"], row["rotated tolerant share"] = float(purity.mean()), float(inside.mean())
    for name, value in soft_path_mass_density(model, arcs, mags).items():
        row[f"soft path mass {name}"] = value
    return row


# --------------------------------------------------------------------------- per-run effects (sensitivity maps)

def steps_effects(run, n_rotations: int = N_ROTATIONS) -> dict[str, float]:
    """One run's C5 effects on a steps target, positive in the claimed direction:

    - ``boundary``: 1 − the importance-weighted boundary distance trained / init; without gate
      biases measured above the target's antipodal floor (:func:`ratio_above_floor`);
    - ``purity gain``: region purity above its random-rotation baseline, trained minus init;
    - ``tolerant gain``: the same for the tolerant share inside one piece (tolerance π / n_train).
    """
    dataset = run.dataset()
    init, final = (region_metrics(run.model_at(epoch).double(), dataset, True, n_rotations)
                   for epoch in (0, run.epochs[-1]))
    if run.config.model.kwargs().get("gate_bias", False):
        ratio = final["weighted distance"] / init["weighted distance"]
    else:
        floor = antipodal_distance_floor(dataset.meta["discontinuities"])
        ratio = ratio_above_floor(final["weighted distance"], init["weighted distance"], floor)

    def excess(row, what, baseline):
        return row[what] - row[baseline]
    return {"boundary": 1.0 - ratio,
            "purity gain": excess(final, "purity", "rotated purity") - excess(init, "purity", "rotated purity"),
            "tolerant gain": (excess(final, "tolerant share", "rotated tolerant share")
                              - excess(init, "tolerant share", "rotated tolerant share"))}


def _loss_row(model, dataset) -> dict[str, float]:
    arcs = target_arcs(dataset)
    return {f"loss {name}": value for name, value in
            arc_losses(model, dataset.meta["theta_train"], dataset.y_train, arcs, dataset.task).items()}


def _mixture_row(model, dataset) -> dict[str, float]:
    row = _loss_row(model, dataset)
    row.update({f"soft path mass {name}": value
                for name, value in soft_path_mass_density(model, target_arcs(dataset)).items()})
    return row


def lead(smooth: float, rough: float) -> float:
    """log(rough / smooth) of two epochs: positive when the smooth arc comes first; ±inf when one
    arc never gets there (its epoch inf), NaN when neither does."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.log(np.float64(rough) / np.float64(smooth)))


def _fit_lead(table: pd.DataFrame, fit_fraction: float) -> float:
    fit = {arc: epochs_to_fraction_of_initial(table["epoch"], table[f"loss {arc}"], fit_fraction)
           for arc in ("smooth", "rough")}
    return lead(fit["smooth"], fit["rough"])


def fit_lead(run, fit_fraction: float = 0.1) -> float:
    """One mixture run of any model (DLGN or ReLU net): log(rough / smooth epochs to
    ``fit_fraction`` of the arc's initial loss), over the run's snapshots (:func:`lead`)."""
    return _fit_lead(snapshot_table(run, _loss_row), fit_fraction)


def mixture_effects(run, fit_fraction: float = 0.1, rise_fraction: float = 0.5) -> dict[str, float]:
    """One run's C5 timing effects on a mixture target, positive when the smooth arc comes first:
    ``fit lead`` = log(rough / smooth epochs to ``fit_fraction`` of the arc's initial loss) and
    ``mass lead`` = log(rough / smooth :func:`sustained_rise_epoch` of the soft-gate path mass).
    An arc that never gets there is infinitely late (±inf; NaN when neither does)."""
    table = snapshot_table(run, _mixture_row)
    mass = {arc: sustained_rise_epoch(table["epoch"], table[f"soft path mass {arc}"], rise_fraction)
            for arc in ("smooth", "rough")}
    return {"fit lead": _fit_lead(table, fit_fraction), "mass lead": lead(mass["smooth"], mass["rough"])}
