"""Figures of paths and regions in the plane (notebooks 01 and 03; claims C1 and C3)."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Polygon

from .. import paths

__all__ = ["BOX", "layer_hyperplanes", "partition_comparison", "path_regions", "path_value_spectrum"]

#: The plane's window for region plots: (x min, x max, y min, y max).
BOX = (-2.2, 2.2, -2.2, 2.2)
LAYER_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


LABEL_COLORS = {-1: "#1f77b4", 1: "#d62728"}  # training points by their ±1 label


def _scatter(ax, dataset, size=6):
    x, y = dataset.x_train.numpy(), dataset.y_train.numpy()
    ax.scatter(x[:, 0], x[:, 1], c=np.where(y > 0, LABEL_COLORS[1], LABEL_COLORS[-1]), s=size, alpha=0.35, lw=0)


def _label_handles():
    return [Line2D([], [], ls="", marker="o", ms=4, color=LABEL_COLORS[label], alpha=0.6)
            for label in (-1, 1)], ["label −1", "label +1"]


def _frame(ax, box=BOX, title=""):
    ax.set_xlim(box[0], box[1])
    ax.set_ylim(box[2], box[3])
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():  # a closed frame: the box is part of the picture
        spine.set_visible(True)
        spine.set_linewidth(0.6)
    ax.set_title(title)


def _panel_grid(nrows, ncols, side, title_h, key_h, gap=0.1):
    """A figure of nrows × ncols square panels ``side`` inches wide, ``title_h`` inches above each
    for its title, ``gap`` between them and ``key_h`` under them for a key, laid out in inches."""
    width = ncols * side + (ncols - 1) * gap + 0.1
    height = nrows * (title_h + side) + (nrows - 1) * gap + key_h + 0.05
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(left=0.05 / width, right=1 - 0.05 / width, top=1 - (title_h + 0.05) / height,
                        bottom=key_h / height, wspace=gap / side, hspace=(title_h + gap) / side)
    return fig, axes


def draw_lines(ax, V, c, box=BOX, **style):
    """Draw the boundary lines ``v·x + c = 0`` of 2-D half-spaces, clipped to the box."""
    corners = paths.box_polygon(box)
    for v, b in zip(np.asarray(V, dtype=float), np.asarray(c, dtype=float)):
        s = corners @ v + b
        pts = [corners[i] + s[i] / (s[i] - s[j]) * (corners[j] - corners[i])
               for i, j in zip(range(4), [1, 2, 3, 0]) if s[i] * s[j] < 0]
        if len(pts) == 2:
            ax.plot([pts[0][0], pts[1][0]], [pts[0][1], pts[1][1]], **style)


def layer_hyperplanes(model, dataset, box=BOX):
    """One panel per layer: the effective hyperplanes of that layer over the training data."""
    planes = paths.effective_hyperplanes(model)
    side = min(2.0, (6.3 - 0.1 * len(planes)) / len(planes))  # the row fits the book's 6.6 in column
    fig, axes = _panel_grid(1, len(planes), side, title_h=0.3, key_h=0.55)
    for layer, (ax, (V, c)) in enumerate(zip(axes[0], planes)):
        _scatter(ax, dataset)
        draw_lines(ax, V.detach().numpy(), c.detach().numpy(), box,
                   color=LAYER_COLORS[layer % len(LAYER_COLORS)], lw=1.2)
        _frame(ax, box, f"layer {layer + 1}: {V.shape[0]} half-spaces")
    fig.legend(*_label_handles(), loc="lower center", ncol=2, frameon=False, title="training points")
    return fig


def path_regions(model, chosen, dataset=None, box=BOX, ncols=4, scores=None):
    """Each chosen path's active region ``R_π`` (exact polygon), shaded, with its L boundary lines
    (dashed, one colour per layer; a key under the panels says which)."""
    n = len(chosen)
    nrows = math.ceil(n / ncols)
    planes = paths.effective_hyperplanes(model)
    side = min(1.6, (6.4 - 0.1 * ncols) / ncols)  # panel width (in): the figure fits the book's 6.6 in column
    n_keys = 1 + len(planes) + 2 * (dataset is not None)
    key_cols = min(n_keys, 3)
    key_height = 0.15 + 0.2 * math.ceil(n_keys / key_cols)  # inches under the panels for the key
    fig, axes = _panel_grid(nrows, ncols, side, title_h=0.25 if scores is None else 0.45, key_h=key_height)
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.axis("off")
            continue
        path = chosen[k]
        if dataset is not None:
            _scatter(ax, dataset, size=3)
        poly = paths.path_region_polygon(model, path, box)
        if len(poly):
            ax.add_patch(Polygon(poly, closed=True, fc="#ffbf00", ec="black", alpha=0.55, lw=1))
        for layer, ((V, c), i) in enumerate(zip(planes, path)):
            draw_lines(ax, V[i:i + 1].detach().numpy(), c[i:i + 1].detach().numpy(), box,
                       color=LAYER_COLORS[layer % len(LAYER_COLORS)], lw=1.0, ls="--")
        label = f"path {path}" + (f"\n|g| = {scores[k]:.3g}" if scores is not None else "")
        _frame(ax, box, label)
    depth = len(planes)
    handles = [Patch(fc="#ffbf00", ec="black", alpha=0.55)]
    names = ["active region R_π"]
    handles += [Line2D([], [], color=LAYER_COLORS[layer % len(LAYER_COLORS)], lw=1.0, ls="--") for layer in range(depth)]
    names += [f"boundary of the layer-{layer + 1} gate" for layer in range(depth)]
    if dataset is not None:
        points, point_names = _label_handles()
        handles, names = handles + points, names + point_names
    fig.legend(handles, names, loc="lower center", ncol=key_cols, frameon=False)
    return fig


def path_value_spectrum(values: torch.Tensor, labels=("DLGN",)):
    """Sorted path magnitudes |g_π| (log scale) and the share of total magnitude held by the top k."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.4, 2.8))
    for v, label in zip(values if isinstance(values, (list, tuple)) else [values], labels):
        mags = np.sort(np.abs(v.detach().double().numpy().ravel()))[::-1]
        a.plot(np.arange(1, len(mags) + 1), mags, label=label)
        b.plot(np.arange(1, len(mags) + 1), np.cumsum(mags) / mags.sum(), label=label)
    a.set(xscale="log", yscale="log", xlabel="path rank", ylabel="|g_π|", title="path values, sorted")
    b.set(xscale="log", xlabel="top k paths", ylabel="share of Σ|g_π|", title="how concentrated", ylim=(0, 1.02))
    a.legend()
    fig.tight_layout()
    return fig


def partition_comparison(dlgn, relu, dataset, box=BOX, resolution=300):
    """Left: the DLGN's gate-pattern cells (exact convex polygons, straight lines). Right: the ReLU
    net's activation regions on a grid (cells bent at every deeper neuron)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.4, 3.5))
    cells = paths.gate_pattern_cells_2d(dlgn, box)
    rng = np.random.default_rng(0)
    for poly in cells.values():
        a.add_patch(Polygon(poly, closed=True, fc=plt.cm.tab20(rng.integers(20)), ec="white", lw=0.4))
    _frame(a, box, f"DLGN: {len(cells)} convex cells (exact)")
    xs = np.linspace(box[0], box[1], resolution)
    grid = torch.tensor(np.stack(np.meshgrid(xs, xs[::-1]), -1).reshape(-1, 2),
                        dtype=next(relu.parameters()).dtype)
    ids = paths.activation_regions_grid(relu, grid).numpy().reshape(resolution, resolution)
    shuffled = rng.permutation(ids.max() + 1)[ids] % 20
    b.imshow(shuffled, extent=box, cmap="tab20", interpolation="nearest")
    _frame(b, box, f"ReLU: {ids.max() + 1} activation regions (grid)")
    fig.tight_layout()
    return fig
