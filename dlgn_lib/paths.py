"""Path analysis (reconstruction §1 path form, reconstruction §2): path values and gates, path sums, active path regions.

A gated network is a sum over paths π = (i_1, …, i_L), one hidden unit per layer (claim C1):
``ŷ_k(x) = Σ_π g_{π,k} f_π(x)`` with the path gate ``f_π(x) = Π_ℓ G^ℓ_{i_ℓ}(x)`` and the path value
``g_{π,k}`` (a product of value weights; linear in x for value input "x"). In a DLGN every hard
gate is a half-space indicator, so a path's hard gate is the indicator of the *active path
region* ``R_π = ∩_ℓ {x : V^ℓ_{i_ℓ}·x + c^ℓ_{i_ℓ} ≥ 0}`` (claim C3): a convex polygon in the plane,
an arc on the unit circle. ReLU nets have such global half-spaces in their first layer only;
deeper ReLU neurons are half-spaces only locally (``local_hyperplanes``), which bends their regions.

Explicit enumeration (``path_values``, ``path_gates``, ``path_sum``) is for small nets; the
overlap kernel of many paths is computed without it in ``dlgn_lib.kernels``. The exact 2-D
geometry works in float64 NumPy; angles are radians.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .models import DLGN, DeepLinearNet, GatedNet, ReLUNet

__all__ = ["activation_regions_grid", "box_polygon", "chunk_size", "clip_halfplane", "count_nonempty_regions",
           "count_regions", "effective_hyperplanes", "gate_pattern_cells_2d", "half_space_gates",
           "in_active_path_region", "local_hyperplanes", "path_arc", "path_gate_mean", "path_gates",
           "path_region_polygon", "path_regions_2d", "path_sum", "path_values", "polygon_area",
           "region_boundary_angles", "top_paths", "unit_hyperplanes"]

MAX_ENTRIES = 20_000_000  # largest enumerated tensor (160 MB in float64)
TWO_PI = 2.0 * math.pi
DEFAULT_BOX = (-1.0, 1.0, -1.0, 1.0)  # (x_min, x_max, y_min, y_max)


def n_paths(model: GatedNet) -> int:
    """Number of paths Π_ℓ m_ℓ."""
    return math.prod(model.widths)


def _check_size(what: str, entries: int, max_entries: int) -> None:
    if entries > max_entries:
        raise ValueError(f"{what} would hold {entries:,} entries, above max_entries={max_entries:,}: "
                         "path enumeration is for small nets (dlgn_lib.kernels works without it)")


def _check_path(model: GatedNet, path) -> tuple[int, ...]:
    path = tuple(int(i) for i in path)
    if len(path) != model.depth or any(not 0 <= i < m for i, m in zip(path, model.widths)):
        raise ValueError(f"path={path!r}: need one unit index per layer, 0 <= i_l < m_l for widths {model.widths}")
    return path


# --------------------------------------------------------------------------- path form (claim C1)

@torch.no_grad()
def path_values(model: GatedNet, max_entries: int = MAX_ENTRIES) -> torch.Tensor:
    """Path values ``g_{π,k}`` for every path (reconstruction §1 path form).

    Returns:
        (m_1, …, m_L, k) for value input "ones"; (m_1, …, m_L, k, d) for value input "x", where the
        path value at input x is ``g_π(x) = values[π] @ x``.
    """
    if isinstance(model, ReLUNet) and model.bias:
        raise ValueError("model: a ReLU net with bias=True has no exact path form; use bias=False")
    first, middle, head = model.value_weights()
    d = first.shape[1] if model.value_input == "x" else 1
    _check_size("path_values", n_paths(model) * head.shape[0] * d, max_entries)
    # Multiply the value weights along each path, one layer at a time, by broadcasting:
    # values[..., i_{l-1}, i_l] = values[..., i_{l-1}] * U^l[i_l, i_{l-1}].
    values = first if model.value_input == "ones" else first.new_ones(first.shape[0])
    for U in [*middle, head]:
        values = values.unsqueeze(-1) * U.T
    if model.value_input == "x":
        values = values.unsqueeze(-1) * first.reshape(first.shape[0], *([1] * model.depth), d)
    return values


def chunk_size(model: GatedNet, per_path: int = 1, max_entries: int = MAX_ENTRIES) -> int:
    """Inputs per pass so that an (inputs × paths × per_path) tensor stays within max_entries.

    Loop with ``for xs in torch.split(x, chunk_size(model)): …`` to enumerate paths over many
    inputs (e.g. ``path_gates`` on 200,000 points of a 10 × 10 × 10 net).
    """
    return max(1, max_entries // (n_paths(model) * per_path))


@torch.no_grad()
def path_gates(model: GatedNet, x: torch.Tensor, hard: bool = True,
               max_entries: int = MAX_ENTRIES) -> torch.Tensor:
    """Path gates ``f_π(x) = Π_ℓ G^ℓ_{i_ℓ}(x)``, shape (N, m_1, …, m_L) (reconstruction §1 path form)."""
    _check_size("path_gates", x.shape[0] * n_paths(model), max_entries)
    gates = model.gates(x, hard=hard)
    out = gates[0]
    for g in gates[1:]:
        out = out.unsqueeze(-1) * g.reshape(g.shape[0], *([1] * (out.dim() - 1)), g.shape[1])
    return out


@torch.no_grad()
def path_gate_mean(model: GatedNet, x: torch.Tensor, hard: bool = True,
                   max_entries: int = MAX_ENTRIES) -> torch.Tensor:
    """Mean path gate over the inputs, shape (m_1, …, m_L): with hard gates, the share of inputs in
    each active path region. Inputs go in chunks, so any number of them fits in memory."""
    total = None
    for xs in torch.split(x, chunk_size(model, max_entries=max_entries)):
        part = (_hard_path_gate_sums(model.gates(xs, hard=True)).reshape(model.widths) if hard
                else path_gates(model, xs, hard, max_entries).sum(0, dtype=torch.float64))
        total = part if total is None else total + part
    return (total / x.shape[0]).to(x.dtype)


def _hard_path_gate_sums(gates: list[torch.Tensor]) -> torch.Tensor:
    """``Σ_n Π_ℓ G^ℓ_{n, i_ℓ}`` for every path, flat and float64: the products over all layers but
    the last, then one matrix product with the last. With 0/1 gates every sum is a whole number
    below 2^53, so it is exact whatever the order of the additions (``path_gates(…).sum(0)``)."""
    gates = [g.double() for g in gates]
    head = gates[0]
    for g in gates[1:-1]:
        head = (head.unsqueeze(2) * g.unsqueeze(1)).flatten(1)
    return head.sum(0) if len(gates) == 1 else (head.T @ gates[-1]).flatten()


@torch.no_grad()
def path_sum(model: GatedNet, x: torch.Tensor, hard: bool = True,
             max_entries: int = MAX_ENTRIES) -> torch.Tensor:
    """``Σ_π g_π f_π(x)`` by explicit enumeration of the paths, (N, k); equals ``model(x, hard)`` (C1)."""
    values = path_values(model, max_entries)
    n_p, k = n_paths(model), values.shape[model.depth]
    flat = values.reshape(n_p, -1)
    out = []
    for xs in torch.split(x, chunk_size(model, max_entries=max_entries)):
        mixed = path_gates(model, xs, hard, max_entries).reshape(len(xs), n_p) @ flat
        if model.value_input == "x":
            mixed = torch.einsum("nkd,nd->nk", mixed.reshape(len(xs), k, -1), xs)
        out.append(mixed)
    return torch.cat(out)


@torch.no_grad()
def top_paths(model: GatedNet, n: int, x: torch.Tensor | None = None, hard: bool = True,
              max_entries: int = MAX_ENTRIES) -> list:
    """The n paths with the largest values, as ``[(path, score), …]`` in decreasing score.

    Without x the score is ``‖g_π‖`` (over outputs, and input dimensions for value input "x");
    with x it is the mean path contribution ``mean_x ‖g_π(x) f_π(x)‖`` over the given inputs,
    which go in chunks of at most ``max_entries`` enumerated entries (any number of inputs fits).
    """
    values = path_values(model, max_entries)
    depth = model.depth
    if x is None:
        scores = values.flatten(depth).norm(dim=-1)
    elif model.value_input == "ones":
        scores = values.norm(dim=-1) * path_gate_mean(model, x, hard, max_entries)  # gates are ≥ 0
    else:   # inputs in chunks, so that the (inputs × paths × outputs) contributions fit
        total = values.new_zeros(model.widths)
        for xs in torch.split(x, chunk_size(model, values.shape[depth], max_entries)):
            per_input = torch.einsum("...kd,nd->n...k", values, xs).norm(dim=-1)
            total += (per_input * path_gates(model, xs, hard, max_entries)).sum(0)
        scores = total / x.shape[0]
    order = torch.argsort(scores.flatten(), descending=True, stable=True)[:n]
    units = np.unravel_index(order.cpu().numpy(), model.widths)
    return [(tuple(int(u[j]) for u in units), float(scores.flatten()[i])) for j, i in enumerate(order)]


# --------------------------------------------------------------------------- hyperplanes (claim C3)

def effective_hyperplanes(model: GatedNet, n_layers: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the global half-spaces ``(V^ℓ (m_ℓ, d), c^ℓ (m_ℓ,))`` with gate ``1(V^ℓ x + c^ℓ ≥ 0)``.

    DLGN / DLGN-SF: ``model.effective_hyperplanes()``. DLN: every gate is always open, written as
    the whole-space half-space ``0·x + 1 ≥ 0``. ReLU: only the first layer is a global half-space
    (its gate ``z > 0`` differs from ``≥`` on the boundary line only); ask for ``n_layers=1`` on
    deeper nets, or use ``local_hyperplanes``.

    Args:
        n_layers: the first n_layers layers only (default: all).
    """
    depth = model.depth if n_layers is None else int(n_layers)
    if not 1 <= depth <= model.depth:
        raise ValueError(f"n_layers={n_layers!r}: need 1 <= n_layers <= {model.depth}")
    if isinstance(model, DLGN):
        planes = [(V.detach(), c.detach()) for V, c in model.effective_hyperplanes()]
    elif isinstance(model, DeepLinearNet):
        w = model.layers[0].weight.detach()
        planes = [(w.new_zeros(m, model.in_dim), w.new_ones(m)) for m in model.widths]
    elif isinstance(model, ReLUNet):
        if depth > 1:
            raise ValueError(f"n_layers={depth}: a ReLU net's neurons beyond layer 1 are not global "
                             "half-spaces; pass n_layers=1 or use local_hyperplanes(model, x)")
        layer = model.layers[0]
        W = layer.weight.detach()
        planes = [(W, layer.bias.detach() if layer.bias is not None else W.new_zeros(W.shape[0]))]
    else:
        raise TypeError(f"model of type {type(model).__name__}: need DLGN, DeepLinearNet or ReLUNet")
    return planes[:depth]


@torch.no_grad()
def local_hyperplanes(model: GatedNet, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the hyperplane of every neuron around each input: ``z^ℓ = A x' + b`` near x' = x.

    For a ReLU net ``A`` is the input gradient of the neuron's pre-activation, which changes from
    one activation region to the next ("bent" half-spaces); for a DLGN or DLN it is the same at
    every input (claim C4).

    Returns:
        list of ``(A (N, m_ℓ, d), b (N, m_ℓ))``.
    """
    n = x.shape[0]
    if not isinstance(model, ReLUNet):
        return [(V.expand(n, -1, -1), c.expand(n, -1)) for V, c in effective_hyperplanes(model)]
    out, on = [], None
    for layer, z in zip(model.layers, model.gate_preactivations(x)):
        W = layer.weight
        bias = layer.bias if layer.bias is not None else W.new_zeros(W.shape[0])
        if on is None:
            A, b = W.expand(n, -1, -1), bias.expand(n, -1)
        else:  # chain rule through the active units of the previous layer
            A = torch.einsum("ij,njd->nid", W, A * on.unsqueeze(-1))
            b = (b * on) @ W.T + bias
        out.append((A, b))
        on = (z > 0).to(z.dtype)
    return out


def unit_hyperplanes(V: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of V scaled to unit norm, biases scaled alike (same half-spaces); zero rows kept."""
    norm = V.norm(dim=1)
    scale = torch.where(norm > 0, norm, torch.ones_like(norm))
    return V / scale.unsqueeze(1), c / scale


@torch.no_grad()
def half_space_gates(model: GatedNet, x: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, every unit's half-space test ``V^ℓ x + c^ℓ ≥ 0`` from the effective hyperplanes
    alone, bool (N, m_ℓ): for a DLGN, its hard gates without the gating network (claim C3)."""
    return [(x @ V.T + c) >= 0 for V, c in effective_hyperplanes(model)]


@torch.no_grad()
def in_active_path_region(model: GatedNet, x: torch.Tensor, path) -> torch.Tensor:
    """Half-space test ``x ∈ ∩_ℓ {V^ℓ_{i_ℓ}·x + c^ℓ_{i_ℓ} ≥ 0}``, bool (N,) (claim C3).

    For a DLGN this equals the hard path gate ``f_π(x)``, computed here without the gating network.
    """
    path = _check_path(model, path)
    inside = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    for (V, c), i in zip(effective_hyperplanes(model), path):
        inside &= (x @ V[i] + c[i]) >= 0
    return inside


@torch.no_grad()
def gate_patterns(model: GatedNet, x: torch.Tensor) -> torch.Tensor:
    """Joint hard gate pattern of all neurons (layer by layer), bool (N, Σ_ℓ m_ℓ)."""
    return torch.cat(model.gates(x, hard=True), dim=1) > 0


def activation_regions_grid(model: GatedNet, points: torch.Tensor) -> torch.Tensor:
    """Region id per point (N,): points share an id when they share the joint gate pattern.

    For a DLGN the regions are convex cells of an arrangement of lines; for a ReLU net they are
    its bent activation regions.
    """
    return torch.unique(gate_patterns(model, points), dim=0, return_inverse=True)[1]


def count_regions(model: GatedNet, points: torch.Tensor) -> int:
    """Number of distinct joint gate patterns among the points."""
    return int(torch.unique(gate_patterns(model, points), dim=0).shape[0])


# --------------------------------------------------------------------------- exact plane geometry

def _planes_2d(model: GatedNet) -> list[tuple[np.ndarray, np.ndarray]]:
    if model.in_dim != 2:
        raise ValueError(f"model.in_dim={model.in_dim}: the exact plane and circle geometry needs d = 2")
    return [(V.double().cpu().numpy(), c.double().cpu().numpy()) for V, c in effective_hyperplanes(model)]


def box_polygon(box=DEFAULT_BOX) -> np.ndarray:
    """The box (x_min, x_max, y_min, y_max) as a counter-clockwise (4, 2) polygon."""
    x0, x1, y0, y1 = map(float, box)
    if not (x0 < x1 and y0 < y1):
        raise ValueError(f"box={box!r}: need (x_min, x_max, y_min, y_max) with x_min < x_max, y_min < y_max")
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])


def clip_halfplane(poly: np.ndarray, a: np.ndarray, c: float) -> np.ndarray:
    """The part of a convex polygon where ``a·p + c ≥ 0`` (one Sutherland–Hodgman step, float64)."""
    if len(poly) == 0:
        return poly
    s = poly @ a + c
    out = []
    for i in range(len(poly)):
        j = (i + 1) % len(poly)
        if s[i] >= 0:
            out.append(poly[i])
        if (s[i] > 0 > s[j]) or (s[i] < 0 < s[j]):  # the edge crosses the line
            out.append(poly[i] + s[i] / (s[i] - s[j]) * (poly[j] - poly[i]))
    return np.array(out, dtype=np.float64).reshape(-1, 2)


def polygon_area(poly: np.ndarray) -> float:
    """Area of a simple polygon (shoelace formula); 0 for fewer than 3 vertices."""
    if len(poly) < 3:
        return 0.0
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def _min_area(box) -> float:
    """Pieces below this area are clipping slivers, not regions."""
    return 1e-12 * polygon_area(box_polygon(box))


def path_region_polygon(model: GatedNet, path, box=DEFAULT_BOX) -> np.ndarray:
    """Active path region ``R_π`` clipped to the box, as a convex (K, 2) polygon; (0, 2) when empty (C3)."""
    path = _check_path(model, path)
    poly = box_polygon(box)
    for (V, c), i in zip(_planes_2d(model), path):
        poly = clip_halfplane(poly, V[i], c[i])
    return poly if polygon_area(poly) > _min_area(box) else np.empty((0, 2))


def _clip_tree(poly, choices, prefix, out, min_area) -> None:
    """Depth-first over ``choices`` (one list of half-planes per level), pruning empty pieces early."""
    if not choices:
        out[prefix] = poly
        return
    for index, (a, c) in enumerate(choices[0]):
        piece = clip_halfplane(poly, a, c)
        if polygon_area(piece) > min_area:
            _clip_tree(piece, choices[1:], prefix + (index,), out, min_area)


def path_regions_2d(model: GatedNet, box=DEFAULT_BOX) -> dict[tuple[int, ...], np.ndarray]:
    """Every non-empty active path region in the box: ``{path: polygon}`` (claim C3)."""
    choices = [list(zip(V, c)) for V, c in _planes_2d(model)]
    out: dict = {}
    _clip_tree(box_polygon(box), choices, (), out, _min_area(box))
    return out


def count_nonempty_regions(model: GatedNet, box=DEFAULT_BOX) -> int:
    """Number of paths whose active region meets the box."""
    return len(path_regions_2d(model, box))


def gate_pattern_cells_2d(model: GatedNet, box=DEFAULT_BOX) -> dict[tuple[int, ...], np.ndarray]:
    """The partition of the box by joint hard gate pattern: ``{pattern: polygon}``.

    A pattern has one 0/1 entry per neuron, layer by layer (as in ``gate_patterns``); its cell is the
    intersection over neurons of the half-space (1) or its complement (0). The cells tile the box.
    The complement ``η < 0`` is clipped as ``-η ≥ 0`` (its line has area 0), except where η is 0
    everywhere (a zero row and bias): that gate is always on, and its complement is empty.
    """
    choices = [[(-a, -c) if a.any() or c != 0 else (a, -1.0), (a, c)]
               for V, cs in _planes_2d(model) for a, c in zip(V, cs)]
    out: dict = {}
    _clip_tree(box_polygon(box), choices, (), out, _min_area(box))
    return out


# --------------------------------------------------------------------------- unit circle

def circle_arc(v, c: float = 0.0) -> list[tuple[float, float]]:
    """Arc of angles θ where ``v·(cos θ, sin θ) + c ≥ 0``.

    Returns:
        ``[]`` (empty), ``[(0, 2π)]`` (whole circle) or ``[(start, end)]`` with start in [0, 2π) and
        start < end < start + 2π (end may pass 2π: the arc wraps through angle 0).
    """
    v = np.asarray(v, dtype=np.float64)
    r = float(np.hypot(v[0], v[1]))
    cos_half = -float(c) / r if r > 0 else (-math.inf if c >= 0 else math.inf)
    if cos_half <= -1.0:
        return [(0.0, TWO_PI)]
    if cos_half >= 1.0:
        return []
    half = math.acos(cos_half)  # cos(θ - φ) ≥ cos_half  ⇔  |θ - φ| ≤ half
    start = (math.atan2(v[1], v[0]) - half) % TWO_PI
    return [(start, start + 2.0 * half)]


def half_circle_arc(v) -> tuple[float, float]:
    """The semicircle where ``v·(cos θ, sin θ) ≥ 0`` (homogeneous half-space), as (start, end)."""
    return circle_arc(v, 0.0)[0]


def _unwrap(arcs):
    """Arcs as plain intervals inside [0, 2π]: a wrapping arc becomes two."""
    for s, e in arcs:
        yield from ([(s, TWO_PI), (0.0, e - TWO_PI)] if e > TWO_PI else [(s, e)])


def intersect_arcs(a: list, b: list) -> list[tuple[float, float]]:
    """Intersection of two sets of disjoint arcs, in the format of ``circle_arc``."""
    pieces = sorted((max(s1, s2), min(e1, e2)) for s1, e1 in _unwrap(a) for s2, e2 in _unwrap(b)
                    if min(e1, e2) > max(s1, s2))
    if len(pieces) > 1 and pieces[0][0] == 0.0 and pieces[-1][1] == TWO_PI:  # rejoin across angle 0
        pieces = pieces[1:-1] + [(pieces[-1][0], pieces[0][1] + TWO_PI)]
    return pieces


def arc_length(arcs: list) -> float:
    """Total angle covered by disjoint arcs."""
    return float(sum(e - s for s, e in arcs))


def path_arc(model: GatedNet, path) -> list[tuple[float, float]]:
    """Active path region on the unit circle: the intersection of the L arcs (claim C3).

    Homogeneous half-spaces give semicircles, whose intersection is empty or one arc; with gate
    biases an arc can be longer than π and the intersection can have several pieces.
    """
    path = _check_path(model, path)
    arcs = [(0.0, TWO_PI)]
    for (V, c), i in zip(_planes_2d(model), path):
        arcs = intersect_arcs(arcs, circle_arc(V[i], c[i]))
    return arcs


def region_boundary_angles(model: GatedNet) -> list[np.ndarray]:
    """Per layer, the angles in [0, 2π) where each neuron's boundary line meets the unit circle.

    Returns:
        list of (m_ℓ, 2) arrays; a row is NaN where the line misses the circle (|c| > ‖v‖).
    """
    out = []
    for V, c in _planes_2d(model):
        r = np.hypot(V[:, 0], V[:, 1])
        with np.errstate(divide="ignore", invalid="ignore"):
            half = np.arccos(-c / r)  # NaN when the line misses the circle
        phi = np.arctan2(V[:, 1], V[:, 0])
        out.append(np.stack([(phi - half) % TWO_PI, (phi + half) % TWO_PI], axis=1))
    return out
