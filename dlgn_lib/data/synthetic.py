"""The generated datasets (reconstruction §3): circle, plane and odt, each drawn from its own seed.

Generated sets draw from their own seeded generator (never global random state), so the same
arguments give identical tensors. ``circle_target`` and ``random_circle_target`` give the circle's
target functions for plots and fresh checks; ``odt_tree``, ``odt_labels`` and ``odt_group_draw``
the oblique decision tree behind the odt labels.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .base import Dataset, _check_choice, _check_params, _check_positive_int, _check_seed

__all__ = []

TWO_PI = 2.0 * math.pi


# --------------------------------------------------------------------------------------------
# circle (reconstruction §3): x = (cos θ, sin θ)
# --------------------------------------------------------------------------------------------

CIRCLE_TARGETS = ("steps", "ramp", "mixture")

#: Default discontinuities of the "steps" target, in radians: four, deliberately not symmetric
#: so that no rotation or reflection of the circle maps the target onto itself.
DEFAULT_STEPS = (0.6, 1.9, 3.4, 5.3)
#: Default "ramp": local frequency grows linearly from 1 to 15 cycles per turn; the phase ends
#: at a multiple of 2π so the target is continuous where θ wraps from 2π to 0.
DEFAULT_RAMP = {"f_start": 1.0, "f_end": 15.0}
#: Default "mixture": a smooth arc (one half-wave) and an oscillating arc (six full cycles),
#: together covering the circle; arcs run counter-clockwise from their first angle.
DEFAULT_MIXTURE = {"smooth": (0.5, 3.7), "rough": (3.7, 0.5), "rough_cycles": 6}


def _circle_params(target: str, params: dict) -> dict:
    """Validate a circle target's parameters and fill in the defaults."""
    _check_choice("target", target, CIRCLE_TARGETS)
    if target == "steps":
        _check_params("steps", params, ["discontinuities"])
        angles = tuple(float(a) for a in params.get("discontinuities", DEFAULT_STEPS))
        if (len(angles) < 2 or len(angles) % 2 or any(not 0 <= a < TWO_PI for a in angles)
                or len(set(angles)) != len(angles)):
            # Around a closed circle a ±1 function changes sign an even number of times.
            raise ValueError(f"discontinuities={angles}; expected an even number (>= 2) of "
                             "distinct angles in [0, 2π)")
        return {"discontinuities": tuple(sorted(angles))}
    if target == "ramp":
        _check_params("ramp", params, DEFAULT_RAMP)
        out = {**DEFAULT_RAMP, **{k: float(v) for k, v in params.items()}}
        if not 0 < out["f_start"] < out["f_end"]:
            raise ValueError(f"f_start={out['f_start']}, f_end={out['f_end']}; "
                             "expected 0 < f_start < f_end")
        return out
    _check_params("mixture", params, DEFAULT_MIXTURE)
    out = {**DEFAULT_MIXTURE, **params}
    out["smooth"] = tuple(float(a) for a in out["smooth"])
    out["rough"] = tuple(float(a) for a in out["rough"])
    for key in ("smooth", "rough"):
        arc = out[key]
        if len(arc) != 2 or any(not 0 <= a < TWO_PI for a in arc) or arc[0] == arc[1]:
            raise ValueError(f"{key}={arc}; expected two different angles in [0, 2π)")
    if _arcs_overlap(out["smooth"], out["rough"]):
        raise ValueError(f"smooth={out['smooth']} and rough={out['rough']} overlap")
    _check_positive_int("rough_cycles", out["rough_cycles"])
    return out


#: Fresh random targets (``random_circle_target``): jumps of a steps target, and the smallest
#: gap between two of them in steps of the 256-point training grid.
RANDOM_STEPS_JUMPS = 6
RANDOM_MIN_GAP_STEPS = 8
RANDOM_GRID = 256


def random_circle_target(target: str, seed: int) -> dict:
    """Parameters of a random circle target, drawn reproducibly from ``seed`` (numpy's
    ``default_rng``), for checks on targets that no earlier run has looked at.

    - ``"steps"``: ``RANDOM_STEPS_JUMPS`` = 6 discontinuities, uniform on the circle, redrawn until
      every piece is at least ``RANDOM_MIN_GAP_STEPS`` = 8 steps of a 256-point grid long (≈ 0.196
      rad), so that every piece holds training points and no jump falls between two of them;
    - ``"mixture"``: the smooth arc starts at a uniform angle and covers a uniform 40–60 % of the
      circle; the rough arc (six cycles) is the rest.

    Returns:
        the keyword parameters of :func:`circle` / :func:`circle_target` (angles rounded to 1e-6).
    """
    _check_choice("target", target, ("steps", "mixture"))
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    if target == "steps":
        min_gap = RANDOM_MIN_GAP_STEPS * TWO_PI / RANDOM_GRID
        while True:
            angles = np.sort(np.round(rng.uniform(0.0, TWO_PI, RANDOM_STEPS_JUMPS), 6))
            gaps = np.diff(np.append(angles, angles[0] + TWO_PI))
            if gaps.min() >= min_gap and angles[-1] < TWO_PI:
                return {"discontinuities": tuple(float(a) for a in angles)}
    start = float(np.round(rng.uniform(0.0, TWO_PI), 6))
    end = float(np.round((start + rng.uniform(0.4, 0.6) * TWO_PI) % TWO_PI, 6))
    return {"smooth": (start, end), "rough": (end, start), "rough_cycles": DEFAULT_MIXTURE["rough_cycles"]}


def _arc_position(theta: torch.Tensor, arc: tuple[float, float]) -> torch.Tensor:
    """Fraction of the way along a counter-clockwise arc (a, b): 0 at a, 1 at b, > 1 outside."""
    a, b = arc
    length = (b - a) % TWO_PI
    return torch.remainder(theta - a, TWO_PI) / length


def _arcs_overlap(first: tuple[float, float], second: tuple[float, float]) -> bool:
    """Whether two arcs share more than an endpoint: then one starts strictly inside the other."""
    inside = [float(_arc_position(torch.tensor(b[0], dtype=torch.float64), a))
              for a, b in ((first, second), (second, first))]
    return first[0] == second[0] or any(0 < s < 1 for s in inside)


def circle_target(theta, target: str = "steps", **params) -> torch.Tensor:
    """The circle target at angles ``theta`` (radians), for data and for plots on a fine grid.

    Args:
        theta: angles, any shape; a float64 tensor gives a float64 result, anything else float32.
        target: ``"steps"`` (±1, sign flips at each of ``discontinuities``; +1 on the arc
            counter-clockwise from the last discontinuity through 0 to the first),
            ``"ramp"`` (``sin(phase(θ))``, local frequency growing linearly from ``f_start`` to
            ``f_end`` cycles per turn), or ``"mixture"`` (one half-wave ``sin(π s)`` on the
            ``smooth`` arc, ``sin(2π·rough_cycles·s)`` on the ``rough`` arc, s ∈ [0, 1] the
            position along the arc; 0 elsewhere).
        **params: the target's parameters; defaults ``DEFAULT_STEPS``, ``DEFAULT_RAMP``,
            ``DEFAULT_MIXTURE``.

    Returns:
        The target values, same shape as ``theta``.
    """
    params = _circle_params(target, params)
    theta = torch.as_tensor(theta)
    dtype = torch.float64 if theta.dtype == torch.float64 else torch.float32
    t = torch.remainder(theta.to(torch.float64), TWO_PI)
    if target == "steps":
        edges = torch.tensor(params["discontinuities"], dtype=torch.float64)
        crossed = (t.unsqueeze(-1) >= edges).sum(-1)
        y = 1.0 - 2.0 * (crossed % 2).to(torch.float64)
    elif target == "ramp":
        f0, f1 = params["f_start"], params["f_end"]
        u = t / TWO_PI  # fraction of a turn; local frequency f0 + (f1 - f0) u cycles per turn
        y = torch.sin(TWO_PI * (f0 * u + 0.5 * (f1 - f0) * u**2))
    else:
        s_smooth = _arc_position(t, params["smooth"])
        s_rough = _arc_position(t, params["rough"])
        y = torch.zeros_like(t)
        y = torch.where(s_smooth <= 1, torch.sin(math.pi * s_smooth), y)
        y = torch.where(s_rough <= 1, torch.sin(TWO_PI * params["rough_cycles"] * s_rough), y)
    return y.to(dtype)


def circle(target: str = "steps", n_train: int = 512, n_val: int = 512, n_test: int = 2048,
           grid: bool = True, seed: int = 0, **params) -> Dataset:
    """Points on the unit circle with a 1-D target of the angle (reconstruction §3 circle; claim C5).

    Train angles lie on the regular grid 2π·i/n_train (``grid=True``, independent of the seed)
    or are uniform; validation and test angles are uniform. See :func:`circle_target` for the
    targets and their parameters.

    Returns:
        Task ``"binary"`` for ``"steps"``, ``"regression"`` otherwise. ``meta`` holds
        ``theta_train/val/test``, ``target``, ``params``, ``discontinuities`` (the sign changes
        for steps, the arc endpoints for mixture, empty for ramp) and, for mixture, ``arcs``.
    """
    params = _circle_params(target, params)
    for argument, value in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        _check_positive_int(argument, value)
    _check_seed(seed)
    generator = torch.Generator().manual_seed(seed)

    def uniform(n):
        return TWO_PI * torch.rand(n, generator=generator, dtype=torch.float64)

    theta_train = TWO_PI * torch.arange(n_train, dtype=torch.float64) / n_train if grid \
        else uniform(n_train)
    thetas = {"train": theta_train, "val": uniform(n_val), "test": uniform(n_test)}
    parts = {}
    for part, theta in thetas.items():
        parts[f"x_{part}"] = torch.stack([torch.cos(theta), torch.sin(theta)], 1).float()
        parts[f"y_{part}"] = circle_target(theta, target, **params).float()
    meta = {f"theta_{part}": theta for part, theta in thetas.items()}
    meta.update(target=target, params=params, grid=grid)
    if target == "steps":
        meta["discontinuities"] = params["discontinuities"]
    elif target == "mixture":
        meta["arcs"] = {"smooth": params["smooth"], "rough": params["rough"]}
        meta["discontinuities"] = tuple(sorted({*params["smooth"], *params["rough"]}))
    else:
        meta["discontinuities"] = ()
    return Dataset(name=f"circle-{target}", task="binary" if target == "steps" else "regression",
                   n_classes=1, source="generated", meta=meta, **parts)


# --------------------------------------------------------------------------------------------
# plane (reconstruction §3): 2-D toy sets
# --------------------------------------------------------------------------------------------

PLANE_SETS = ("moons", "circles", "xor", "checkerboard", "spiral")
#: Input noise (standard deviation, before standardising) used when ``noise`` is not given.
PLANE_NOISE = {"moons": 0.1, "circles": 0.05, "xor": 0.05, "checkerboard": 0.02, "spiral": 0.03}


def _checkerboard(n: int, cells: int, noise: float, rng: np.random.Generator):
    """Uniform points in [-1, 1]^2 coloured like a cells × cells checkerboard (cells=2: XOR)."""
    x = rng.uniform(-1.0, 1.0, size=(n, 2))
    index = np.floor((x + 1.0) / 2.0 * cells).clip(0, cells - 1).astype(np.int64)
    y = (index.sum(1) % 2).astype(np.int64)
    return x + noise * rng.standard_normal((n, 2)), y


def _spiral(n: int, noise: float, rng: np.random.Generator, turns: float = 1.5):
    """Two interleaved Archimedean spirals, one per class (class 1 is class 0 turned by π)."""
    y = np.arange(n) % 2
    t = np.sqrt(rng.uniform(0.05, 1.0, size=n))  # sqrt: even density along the arm
    angle = TWO_PI * turns * t + np.pi * y
    x = np.stack([t * np.cos(angle), t * np.sin(angle)], 1)
    return x + noise * rng.standard_normal((n, 2)), y


def plane(name: str = "moons", n: int = 1000, noise: float | None = None, seed: int = 0) -> Dataset:
    """A 2-D binary toy set (reconstruction §3 plane; used for claims C2, C3).

    ``moons`` and ``circles`` come from scikit-learn (``make_moons``, ``make_circles`` with
    factor 0.5); ``xor`` (2×2 cells), ``checkerboard`` (4×4 cells) and ``spiral`` are generated
    here. Labels are ±1. The points are shuffled with the seed, split 60/20/20 into
    train/val/test, and standardised with the training mean and standard deviation (stored in
    ``meta``).
    """
    # Imported here: scikit-learn is slow to import and only this loader needs it.
    from sklearn.datasets import make_circles, make_moons

    _check_choice("name", name, PLANE_SETS)
    _check_positive_int("n", n, minimum=10)
    _check_seed(seed)
    noise = PLANE_NOISE[name] if noise is None else float(noise)
    if noise < 0:
        raise ValueError(f"noise={noise}; expected >= 0")
    rng = np.random.default_rng(seed)
    if name == "moons":
        x, y = make_moons(n, noise=noise, random_state=seed)
    elif name == "circles":
        x, y = make_circles(n, noise=noise, factor=0.5, random_state=seed)
    elif name == "spiral":
        x, y = _spiral(n, noise, rng)
    else:
        x, y = _checkerboard(n, 2 if name == "xor" else 4, noise, rng)
    order = rng.permutation(n)
    x, y = x[order], 2.0 * y[order] - 1.0
    n_train, n_val = int(0.6 * n), int(0.2 * n)
    mean, std = x[:n_train].mean(0), x[:n_train].std(0)
    x = (x - mean) / std
    parts = {}
    for part, rows in (("train", slice(0, n_train)), ("val", slice(n_train, n_train + n_val)),
                       ("test", slice(n_train + n_val, n))):
        parts[f"x_{part}"] = torch.tensor(x[rows], dtype=torch.float32)
        parts[f"y_{part}"] = torch.tensor(y[rows], dtype=torch.float32)
    meta = {"noise": noise, "mean": mean.tolist(), "std": std.tolist()}
    return Dataset(name=f"plane-{name}", task="binary", n_classes=1, source="generated",
                   meta=meta, **parts)


# --------------------------------------------------------------------------------------------
# odt (reconstruction §3): oblique decision tree on the sphere
# --------------------------------------------------------------------------------------------

#: The benchmark configurations (depth 4): n_total points split 50/25/25.
ODT_CONFIGS = {
    "SD-I": dict(d=20, n_total=40_000),
    "SD-II": dict(d=100, n_total=60_000),
    "SD-III": dict(d=500, n_total=100_000),
}


def _odt_normals(d: int, depth: int, generator: torch.Generator) -> torch.Tensor:
    _check_positive_int("d", d)
    _check_positive_int("depth", depth)
    n_nodes = 2**depth - 1
    if d < n_nodes:
        raise ValueError(f"d={d} < 2**depth - 1 = {n_nodes}: cannot make {n_nodes} "
                         "orthonormal normals")
    gaussian = torch.randn(d, n_nodes, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    # Fixing the signs by diag(R) makes Q independent of the QR routine's sign convention.
    return (q * torch.sign(torch.diagonal(r))).T.contiguous()


def odt_tree(d: int, depth: int = 4, seed: int = 0) -> torch.Tensor:
    """The node normals of the odt tree: a float64 tensor (2**depth - 1, d), orthonormal rows.

    Nodes are in heap order: node i has children 2i+1 (left) and 2i+2 (right). The normals are
    the Q factor of a QR decomposition of a seeded Gaussian d × (2**depth - 1) matrix.
    """
    _check_seed(seed)
    return _odt_normals(d, depth, torch.Generator().manual_seed(seed))


def odt_labels(x: torch.Tensor, normals: torch.Tensor, depth: int) -> torch.Tensor:
    """Labels ±1 of points under the odt tree: the parity of the leaf each point reaches.

    Each point walks from the root, going right when ``normal·x >= 0`` (no biases); leaves are
    numbered 0..2**depth - 1 left to right; an even leaf gives +1, an odd leaf -1. The walk is
    done in float64, in chunks of rows so that SD-III needs no float64 copy of all inputs.
    """
    normals = normals.to(torch.float64)
    if normals.ndim != 2 or normals.shape[0] != 2**depth - 1 or x.shape[-1] != normals.shape[1]:
        raise ValueError(f"normals of shape {tuple(normals.shape)} do not fit depth={depth} and "
                         f"inputs of dimension {x.shape[-1]}")
    leaves = []
    for chunk in torch.split(x, 16_384):
        projections = chunk.to(torch.float64) @ normals.T
        node = torch.zeros(len(chunk), dtype=torch.int64)
        for _ in range(depth):
            right = projections.gather(1, node.unsqueeze(1)).squeeze(1) >= 0
            node = 2 * node + 1 + right.long()
        leaves.append(node - (2**depth - 1))
    leaf = torch.cat(leaves)
    return (1 - 2 * (leaf % 2)).to(torch.float32)


ODT_GENERATORS = ("package", "group")
#: The seed of the group's published SD-I/II/III data.
ODT_GROUP_SEED = 365


def odt_group_draw(d: int, depth: int, n_total: int, seed: int = ODT_GROUP_SEED):
    """The group's odt generator, as their public code draws it (reconstruction §3).

    numpy's legacy ``RandomState(seed)`` draws first the 2**depth - 1 node normals
    (``standard_normal((nodes, d))``, each row scaled to unit norm, not orthogonalised, no
    biases), then the points from the same stream (``standard_normal((n_total, d))``, rows
    scaled to unit norm). Each point walks from the root (heap index 0) to node 2i+2 when
    ``w_i·x > 0``, else to 2i+1, ``depth`` times; its label is the leaf's heap index mod 2.

    Returns:
        float64 arrays: points (n_total, d), normals (nodes, d), and labels in {0, 1} (int64).
    """
    rng = np.random.RandomState(seed)
    n_nodes = 2**depth - 1
    normals = rng.standard_normal((n_nodes, d))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    x = rng.standard_normal((n_total, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    node = np.zeros(n_total, dtype=np.int64)
    for _ in range(depth):
        right = np.einsum("ij,ij->i", x, normals[node]) > 0
        node = np.where(right, 2 * node + 2, 2 * node + 1)
    return x, normals, node % 2


def odt(d: int = 20, depth: int = 4, n_total: int = 40_000, seed: int | None = None,
        generator: str = "package") -> Dataset:
    """The oblique-decision-tree benchmark (reconstruction §3 odt; table T).

    generator "package": x is uniform on the unit sphere S^{d-1}; the label is :func:`odt_labels`
    under :func:`odt_tree` ``(d, depth, seed)`` (orthonormal node normals; seed 0 by default).
    generator "group": the group's own data (:func:`odt_group_draw`, seed 365 by default), the one
    behind their published SD-I/II/III numbers; label 1 of their code is +1 here, label 0 is -1.
    The n_total points are split 50/25/25 into train/val/test in their drawn order.
    ``ODT_CONFIGS`` holds the paper-scale settings; a smaller ``n_total`` gives quick profiles.
    """
    _check_positive_int("n_total", n_total, minimum=4)
    _check_choice("generator", generator, ODT_GENERATORS)
    if generator == "group":
        seed = ODT_GROUP_SEED if seed is None else seed
        _check_seed(seed)
        _check_positive_int("d", d)
        _check_positive_int("depth", depth)
        x64, normals64, labels = odt_group_draw(d, depth, n_total, seed)
        x = torch.from_numpy(x64).float()
        normals = torch.from_numpy(normals64)
        y = torch.from_numpy(2.0 * labels - 1).float()
    else:
        seed = 0 if seed is None else seed
        _check_seed(seed)
        torch_generator = torch.Generator().manual_seed(seed)
        normals = _odt_normals(d, depth, torch_generator)  # the same draw as odt_tree(d, depth, seed)
        x = torch.randn(n_total, d, generator=torch_generator)  # a normalised Gaussian is uniform on S^{d-1}
        x /= x.norm(dim=1, keepdim=True)
        y = odt_labels(x, normals, depth)
    n_train, n_val = n_total // 2, n_total // 4
    bounds = {"train": (0, n_train), "val": (n_train, n_train + n_val),
              "test": (n_train + n_val, n_total)}
    parts = {}
    for part, (start, stop) in bounds.items():
        parts[f"x_{part}"], parts[f"y_{part}"] = x[start:stop], y[start:stop]
    meta = {"d": d, "depth": depth, "normals": normals, "generator": generator, "seed": seed}
    name = f"odt-d{d}-depth{depth}" + ("-group" if generator == "group" else "")
    return Dataset(name=name, task="binary", n_classes=1, source="generated", meta=meta, **parts)
