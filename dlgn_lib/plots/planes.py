"""Figures for 2-D inputs: decision functions of trained models, their hyperplanes, and a DLGN
built by hand (notebooks 00 and 02; claims C2, C3).

Decision functions are drawn as ``tanh(ŷ(x))`` on a grid (blue −1 … red +1, a labelled colour
bar) with the boundary ``ŷ = 0`` in black; points are coloured by label (a key says which). Every function returns a Figure and never saves.
"""
from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon

from .. import models, paths
from . import MODEL_NAMES
from .regions import draw_lines

__all__ = ["decision_functions", "hand_dlgn_figure", "hyperplanes_over_function"]

CMAP = "RdBu_r"  # −1 blue, +1 red, as the label colours below
LABEL_COLORS = ("#2166ac", "#b2182b")  # label −1, label +1
GATE_LINE_COLOR = "#1b7837"  # gate boundaries over a decision function: dark green on pale red/blue
#: Colours of the hand-set hyperplanes 1, 2, 3, … in ``hand_dlgn_figure``.
PLANE_COLORS = ("#e66101", "#5e3c99", "#1b7837", "#c51b7d", "#8c510a")
#: The widest figure (inches) drawn here: the book's column shows it at full size (text >= 8 pt).
MAX_WIDTH = 6.4


def data_box(dataset, margin: float = 0.25) -> tuple[float, float, float, float]:
    """A square box (x_min, x_max, y_min, y_max) around all splits of a 2-D dataset, plus a margin."""
    if dataset.in_dim != 2:
        raise ValueError(f"dataset {dataset.name!r} has {dataset.in_dim} input dimensions; need 2")
    x = torch.cat([dataset.x_train, dataset.x_val, dataset.x_test]).double().numpy()
    half = float(np.abs(x).max()) + margin
    return (-half, half, -half, half)


def _grid(box, resolution: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid coordinates over the box in image order (row 0 = top), each (resolution, resolution)."""
    return np.meshgrid(np.linspace(box[0], box[1], resolution), np.linspace(box[3], box[2], resolution))


@torch.no_grad()
def model_on_grid(model, box, resolution: int = 150, hard: bool | None = None) -> np.ndarray:
    """The scalar output ``ŷ(x)`` on a resolution × resolution grid over the box (row 0 = top).

    ``hard=None`` evaluates the model as it is (its own gate mode); True/False force hard/soft gates.
    """
    xx, yy = _grid(box, resolution)
    dtype = next(model.parameters()).dtype
    points = torch.tensor(np.stack([xx.ravel(), yy.ravel()], 1), dtype=dtype)
    out = model(points) if hard is None else model(points, hard=hard)
    return out[:, 0].double().numpy().reshape(xx.shape)


def _points(ax, x, y, size=9):
    """Data points coloured by their ±1 label."""
    x, y = np.asarray(x), np.asarray(y)
    for label, color in zip((-1, 1), LABEL_COLORS):
        mask = y * label > 0
        ax.scatter(x[mask, 0], x[mask, 1], s=size, c=color, edgecolors="white", linewidths=0.3)


def _frame(ax, box, title=""):
    ax.set_xlim(box[0], box[1])
    ax.set_ylim(box[2], box[3])
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():  # a closed frame: the box is part of the picture
        spine.set_visible(True)
        spine.set_linewidth(0.6)
    if title:
        ax.set_title(title)


def draw_decision_function(ax, model, box, *, resolution: int = 150, hard: bool | None = None,
                           scale: float | None = None):
    """Shade the output over the box and draw the decision boundary ``ŷ = 0``; returns the image.

    Args:
        scale: None shades ``tanh(ŷ)`` (saturates where the model is confident); a number shades
            ``ŷ`` itself, linearly, with ±scale at pale red/blue (for a colour bar).
    """
    z = model_on_grid(model, box, resolution, hard)
    # The shaded values span the middle 40% of the colour map only: pale shades, so that points
    # and lines drawn on top stay readable.
    shade, limit = (np.tanh(z), 1.0) if scale is None else (z, float(scale))
    image = ax.imshow(shade, extent=box, cmap=CMAP, vmin=-2.5 * limit, vmax=2.5 * limit,
                      interpolation="bilinear")
    if z.min() < 0 < z.max():
        ax.contour(*_grid(box, resolution), z, levels=[0.0], colors="black", linewidths=1.8)
    return image


def _shade_colorbar(fig, axes, label: str = "tanh ŷ(x)  (black line: ŷ = 0)"):
    """One colour bar for the shaded decision functions of ``draw_decision_function`` (scale None):
    the pale middle of the colour map that tanh ŷ ∈ [−1, 1] spans."""
    cmap = ListedColormap(plt.get_cmap(CMAP)(np.linspace(0.3, 0.7, 256)))
    return fig.colorbar(ScalarMappable(Normalize(-1.0, 1.0), cmap), ax=axes, shrink=0.7, label=label)


def _label_key(fig, extra=(), **where):
    """A key for the points' colours (and ``extra`` (handle, name) pairs)."""
    handles = [Line2D([], [], ls="", marker="o", ms=5, color=color, markeredgecolor="white") for color in LABEL_COLORS]
    names = ["label −1", "label +1"]
    for handle, name in extra:
        handles.append(handle)
        names.append(name)
    return fig.legend(handles, names, frameon=False, **where)


def _accuracy_at(run, epoch) -> float:
    """Test accuracy at the best-validation epoch ("best"), or at the evaluation nearest a saved epoch."""
    if epoch == "best":
        return run.meta["test_metric_at_best"]
    epoch = run.epochs[-1] if epoch is None else epoch
    evaluated = run.history["epoch"]
    i = min(range(len(evaluated)), key=lambda j: abs(evaluated[j] - epoch))
    return run.history["test_metric"][i]


def _run_title(run, epoch="best") -> str:
    """Panel title: the model's name and its test accuracy at that epoch."""
    name = MODEL_NAMES.get(run.config.model.kind, run.config.model.kind)
    return f"{name}\ntest acc {_accuracy_at(run, epoch):.3f}"


def decision_functions(runs: Sequence, *, epoch="best", ncols: int | None = None,
                       titles: Sequence[str] | None = None, row_labels: Sequence[str] | None = None,
                       points: str = "test", resolution: int = 150, panel_size: float = 2.3) -> plt.Figure:
    """Decision functions of trained 2-D models side by side, one panel per run (claim C2).

    The figure stays within the book's column (:data:`MAX_WIDTH` inches): panels shrink below
    ``panel_size`` when ``ncols`` of them would not fit.

    Args:
        runs: runs on 2-D datasets, laid out row by row.
        epoch: "best" (best validation epoch, the model selected without the test set), a saved
            snapshot epoch, or None (the last).
        ncols: panels per row (default: all in one row when each panel can be at least 1.6
            inches wide, else as few rows of equal length as that allows).
        titles: one title per panel (default: model name and test accuracy at ``epoch``).
        row_labels: a y-label for the first panel of each row (e.g. the dataset).
        points: which split to scatter ("train", "val", "test").
        panel_size: the largest side of a panel (inches).
    """
    runs = list(runs)
    if not runs:
        raise ValueError("runs is empty; pass at least one run")
    if points not in ("train", "val", "test"):
        raise ValueError(f"points={points!r} is not allowed; choose 'train', 'val' or 'test'")
    room = MAX_WIDTH - 0.9 - (0.3 if row_labels is not None else 0.0)   # beside the colour bar, row labels
    if ncols is None:   # as many as fit at 1.6 inches a panel (or panel_size, if smaller), in rows of equal length
        rows = math.ceil(len(runs) / max(1, math.floor(room / min(panel_size, 1.6))))
        ncols = math.ceil(len(runs) / rows)
    ncols = int(ncols)
    nrows = math.ceil(len(runs) / ncols)
    if titles is not None and len(titles) != len(runs):
        raise ValueError(f"titles has {len(titles)} entries for {len(runs)} runs")
    if row_labels is not None and len(row_labels) != nrows:
        raise ValueError(f"row_labels has {len(row_labels)} entries for {nrows} rows")
    panel = min(panel_size, math.floor(100 * room / ncols) / 100)   # whole pixels at 100 dpi
    title_size = 10 if panel >= 1.6 else 8
    size = (round(panel * ncols + MAX_WIDTH - room, 2), round((panel + 0.5) * nrows + 0.6, 2))
    fig, axes = plt.subplots(nrows, ncols, figsize=size,
                             squeeze=False, constrained_layout=True)
    boxes: dict = {}
    for k, ax in enumerate(axes.flat):
        if k >= len(runs):
            ax.remove()
            continue
        run = runs[k]
        ds = run.dataset()
        box = boxes.setdefault(run.config.data, data_box(ds))
        draw_decision_function(ax, run.model_at(epoch), box, resolution=resolution)
        _points(ax, getattr(ds, f"x_{points}").numpy(), getattr(ds, f"y_{points}").numpy(),
                size=8 if panel >= 1.6 else 4)
        _frame(ax, box)
        ax.set_title(titles[k] if titles is not None else _run_title(run, epoch), fontsize=title_size)
        if row_labels is not None and k % ncols == 0:
            ax.set_ylabel(row_labels[k // ncols])
    used = [ax for ax in axes.flat if ax.figure is fig and ax.get_images()]
    _shade_colorbar(fig, used)
    _label_key(fig, loc="outside lower center", ncol=2, title=f"{points} points")
    return fig


def hyperplanes_over_function(run, *, epoch="best", layers: Sequence[int] = (1,),
                              resolution: int = 150) -> plt.Figure:
    """A DLGN's decision function with the effective hyperplanes of the chosen layers drawn over it.

    One panel per layer (1-based). Each gate of a DLGN switches along one straight line of the
    input plane (claim C3); training moves these lines (claim C5).
    """
    model = run.model_at(epoch)
    if not isinstance(model, models.DLGN):
        raise TypeError(f"run of kind {run.config.model.kind!r}: hyperplanes need a DLGN kind "
                        "(dlgn, dlgn_sf, dlgn_frozen)")
    hyperplanes = paths.effective_hyperplanes(model)
    bad = [layer for layer in layers if not 1 <= layer <= len(hyperplanes)]
    if bad or not layers:
        raise ValueError(f"layers={tuple(layers)!r}: need layer numbers between 1 and {len(hyperplanes)}")
    ds = run.dataset()
    box = data_box(ds)
    label = "best epoch" if epoch == "best" else f"epoch {run.epochs[-1] if epoch is None else epoch}"
    width = min(3.4 * len(layers), MAX_WIDTH)   # panels narrower than 3.4 in for several layers
    panel = math.floor(100 * (width - 0.9) / len(layers)) / 100   # whole pixels at 100 dpi
    fig, axes = plt.subplots(1, len(layers), figsize=(width, round(panel + 1.5, 2)), squeeze=False,
                             constrained_layout=True)
    for ax, layer in zip(axes[0], layers):
        draw_decision_function(ax, model, box, resolution=resolution)
        _points(ax, ds.x_train.numpy(), ds.y_train.numpy(), size=4)
        V, c = hyperplanes[layer - 1]
        draw_lines(ax, V.numpy(), c.numpy(), box, color=GATE_LINE_COLOR, lw=0.9, alpha=0.85)
        _frame(ax, box)
        ax.set_title(f"layer {layer}: {V.shape[0]} hyperplanes" + ("\n" if len(layers) > 1 else " ") + f"({label})",
                     fontsize=10 if panel >= 2.2 else 9)
    _shade_colorbar(fig, list(axes[0]))
    _label_key(fig, [(Line2D([], [], color=GATE_LINE_COLOR, lw=0.9), "gate hyperplane")],
               loc="outside lower center", ncol=3, title="training points")
    fig.suptitle(f"{MODEL_NAMES.get(run.config.model.kind)}: decision function, test acc "
                 f"{_accuracy_at(run, epoch):.3f}")
    return fig


# --------------------------------------------------------------------------- a DLGN built by hand

def hand_dlgn(angles_deg: Sequence[float], depth: int, x: torch.Tensor, y: torch.Tensor) -> models.DLGN:
    """A DLGN with hand-set hyperplanes through the origin and path values fitted by least squares.

    Layer 1 has one gate per angle: ``1(n_i·x ≥ 0)`` with normal ``n_i = (cos θ_i, sin θ_i)``. With
    ``depth=2``, layer 2 copies layer 1 (``W² = I``), so path (i, j) is on exactly where both
    half-planes i and j are: their intersection (claim C3). The path values ``g_π`` minimise
    ``Σ_n (Σ_π g_π f_π(x_n) − y_n)²`` (minimum-norm solution) and are written into the value
    network, so the model's hard-gate output equals the fitted path sum (claim C1).

    Args:
        angles_deg: normal angles θ_i in degrees.
        depth: 1 or 2 layers.
        x, y: (N, 2) inputs and (N,) targets to fit.
    """
    if depth not in (1, 2):
        raise ValueError(f"depth={depth!r} is not allowed; choose 1 or 2")
    if len(angles_deg) < 1:
        raise ValueError("angles_deg is empty; give at least one angle")
    m = len(angles_deg)
    theta = torch.deg2rad(torch.tensor([float(a) for a in angles_deg], dtype=torch.float64))
    # Convention "he": u¹ is a parameter of its own, set directly below.
    model = models.DLGN(2, (m,) * depth, gate_mode="hard", convention="he").double()
    with torch.no_grad():
        model.gating[0].weight.copy_(torch.stack([torch.cos(theta), torch.sin(theta)], 1))
        if depth == 2:
            model.gating[1].weight.copy_(torch.eye(m, dtype=torch.float64))
        features = paths.path_gates(model, x.double(), hard=True).reshape(len(x), -1)
        g = torch.linalg.lstsq(features, y.double().unsqueeze(1), driver="gelsd").solution[:, 0]
        # Path (i) or (i, j) gets value g: u¹ = g (depth 1), or u¹ = 1 and U²[j, i] = g[i, j].
        model.head.weight.fill_(1.0)
        if depth == 1:
            model.value_first.copy_(g)
        else:
            model.value_first.fill_(1.0)
            model.value_layers[0].weight.copy_(g.reshape(m, m).T)
    return model


def hand_dlgn_figure(angles_deg: Sequence[float], depth: int, dataset, *, resolution: int = 160) -> plt.Figure:
    """Build a DLGN by hand and show how it computes: gates → path regions → function (teaching).

    Top left: the half-planes of the hand-set gates (shaded on their "on" side, arrow = normal).
    Top right: the function ``Σ_π g_π 1[x ∈ R_π]`` with the training points and its accuracy.
    Below: one small panel per path, its active region shaded and its fitted value ``g_π``.
    The model is :func:`hand_dlgn` fitted to the dataset's training split.
    """
    x, y = dataset.x_train, dataset.y_train
    model = hand_dlgn(angles_deg, depth, x, y)
    m = len(angles_deg)
    box = data_box(dataset, margin=0.1)
    V, _ = paths.effective_hyperplanes(model)[0]
    g = paths.path_values(model)[..., 0].numpy()  # (m,) or (m, m)
    with torch.no_grad():
        accuracy = float(((model(x.double())[:, 0] >= 0) == (y > 0)).double().mean())

    rows = m if depth == 2 else 1
    mini_height = 1.45   # a path's panel and its title (inches)
    top_height = 3.1
    fig = plt.figure(figsize=(MAX_WIDTH, top_height + rows * mini_height + 0.9), constrained_layout=True)
    top, bottom = fig.subfigures(2, 1, height_ratios=[top_height, rows * mini_height + 0.35])
    left, right = top.subfigures(1, 2, width_ratios=[1.0, 1.1])

    ax = left.subplots()
    _points(ax, x.numpy(), y.numpy(), size=4)
    half = 0.5 * (box[1] - box[0])
    for i, normal in enumerate(V.numpy()):
        color = _plane_color(i)
        region = paths.clip_halfplane(paths.box_polygon(box), normal, 0.0)
        ax.add_patch(Polygon(region, closed=True, fc=color, alpha=0.12, lw=0))
        draw_lines(ax, normal[None], np.zeros(1), box, color=color, lw=2.0)
        tip = 0.55 * half * normal
        ax.annotate("", xy=tip, xytext=(0, 0), arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6))
        ax.text(*(0.68 * half * normal), str(i + 1), color=color, fontsize=12, fontweight="bold",
                ha="center", va="center")
    _frame(ax, box)
    ax.set_title(f"layer 1: {m} gates = half-planes\n(shaded: gate on; arrow: normal)", fontsize=9)

    mini = bottom.subplots(rows, m, squeeze=False)
    regions = paths.path_regions_2d(model, box)
    g_max = max(float(np.abs(g).max()), 1e-12)
    for index, ax in np.ndenumerate(mini):
        path = (index[1],) if depth == 1 else (index[0], index[1])
        value = g[path]
        poly = regions.get(path)
        if poly is not None:
            # Colour: the value's sign, darker for larger |g|; never white, so every region shows.
            shade = 0.5 + np.sign(value) * (0.12 + 0.33 * abs(value) / g_max)
            ax.add_patch(Polygon(poly, closed=True, fc=plt.get_cmap(CMAP)(shade), ec="black", lw=0.8))
        for unit in sorted(set(path)):
            draw_lines(ax, V[unit:unit + 1].numpy(), np.zeros(1), box, color=_plane_color(unit), lw=1.2)
        name = "".join(str(i + 1) for i in path)
        _frame(ax, box)
        ax.set_title(f"path {name}: g = {value:+.2f}", fontsize=8)
    what = "half-plane i" if depth == 1 else "half-planes i and j both on"
    bottom.suptitle(f"{m ** depth} paths: region of path {'i' if depth == 1 else 'ij'} = {what}",
                    fontsize=10)

    ax = right.subplots()
    f_max = float(np.abs(model_on_grid(model, box, resolution, hard=True)).max())
    image = draw_decision_function(ax, model, box, resolution=resolution, hard=True,
                                   scale=max(f_max, 1e-6))
    right.colorbar(image, ax=ax, shrink=0.8, label="f(x)")
    _points(ax, x.numpy(), y.numpy(), size=4)
    _frame(ax, box)
    ax.set_title(f"f(x) = Σ_π g_π · 1[x in region π]\ntrain accuracy {accuracy:.2f}", fontsize=9)
    kind = "1 layer" if depth == 1 else "2 layers (layer 2 = layer 1, W² = I)"
    fig.suptitle(f"A DLGN built by hand: {kind};\npath values fitted by least squares", fontsize=11)
    return fig


def _plane_color(i: int) -> str:
    return PLANE_COLORS[i % len(PLANE_COLORS)]
