"""Figures of claim C4 on images: active path regions seen through the images inside them,
a neuron's saliency maps at several inputs, and the distribution of the gradient-cosine metric.

Maps (hyperplane normals, input gradients) are drawn red for positive and blue for negative
entries, each scaled by its own largest |entry| (one labelled colour bar per figure); images are
drawn in grey. Functions return a Figure and never save.
"""
from __future__ import annotations

import math
import warnings
from collections import Counter
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.lines import Line2D

from .. import paths
from . import MODEL_COLORS, MODEL_NAMES

__all__ = ["cosine_distributions", "path_region_images", "saliency_grid"]

MAP_CMAP = plt.get_cmap("RdBu_r")
IMAGE_CMAP = "gray_r"  # Fashion-MNIST: dark garment on a white page


def _rows(values) -> np.ndarray:
    """A tensor or array as a float64 NumPy array (detached, on the CPU)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu()
    return np.asarray(values, dtype=np.float64)


def _check_shape(rows: np.ndarray, image_shape: tuple[int, int], what: str) -> None:
    if rows.ndim != 2 or rows.shape[1] != math.prod(image_shape):
        raise ValueError(f"{what} of shape {rows.shape} do not fit image_shape={image_shape}: "
                         f"need (n, {math.prod(image_shape)})")


def _bare(ax) -> None:
    """No ticks and no frame; axis labels stay usable (unlike ``set_axis_off``)."""
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)


def _show_map(ax, vector: np.ndarray, image_shape):
    scale = np.abs(vector).max()
    image = ax.imshow(vector.reshape(image_shape) / (scale if scale > 0 else 1.0), cmap=MAP_CMAP,
                      vmin=-1, vmax=1, interpolation="nearest")
    _bare(ax)
    return image


def _show_image(ax, vector: np.ndarray, image_shape) -> None:
    ax.imshow(vector.reshape(image_shape), cmap=IMAGE_CMAP, interpolation="nearest")
    _bare(ax)


def path_region_images(model, x: torch.Tensor, path_list: Sequence, image_shape: tuple[int, int] = (28, 28),
                       *, labels: torch.Tensor | None = None, class_names: Sequence[str] | None = None,
                       n_images: int = 8) -> plt.Figure:
    """Active path regions (claim C3/C4) shown through the inputs that fall inside them.

    One block per path: the L half-space normals ``V^ℓ_{i_ℓ}`` of the path's gates as images (the
    region is the intersection of their half-spaces ``V·x + c ≥ 0``), then ``n_images`` of the inputs
    of x inside the region (``paths.in_active_path_region``), spread evenly over them in the order
    of x (all of them when there are fewer), in lines of at most 5.

    Args:
        model: a DLGN (its effective hyperplanes are global half-spaces).
        x: (N, h·w) inputs, e.g. the test images.
        path_list: paths, each one unit index per layer.
        labels: class index per input, to name the most common classes inside each region.
        class_names: names of the class indices.
        n_images: inputs shown per region.
    """
    if not path_list:
        raise ValueError("path_list is empty: give at least one path")
    if n_images < 1:
        raise ValueError(f"n_images={n_images!r} must be >= 1")
    images = _rows(x)
    _check_shape(images, image_shape, "x")
    normals = [_rows(V) for V, _ in paths.effective_hyperplanes(model)]
    depth = len(normals)
    # Per path a block: the normals, a narrow spacer, then the inputs in lines of at most 5 (the
    # block as tall as the lines its inputs fill), so the figure fits the book's 6.6 in column.
    shown, insides = [], []
    for path in path_list:
        inside = paths.in_active_path_region(model, x, path).cpu().numpy()
        members = np.flatnonzero(inside)
        if len(members) > n_images:
            members = members[np.linspace(0, len(members) - 1, n_images).round().astype(int)]
        shown.append(members)
        insides.append(inside)
    per_line = min(n_images, 5)
    lines = [max(1, math.ceil(len(members) / per_line)) for members in shown]
    width, gap = 6.4, 0.08                          # inches: the figure, between panels
    side = min(0.95, (width - (depth + per_line) * gap) / (depth + 0.3 + per_line))
    head, title_h, foot, bar_h = 0.5, 0.26, 0.3, 0.75  # the caption, a path's title, under a block, the bar
    block_h = [title_h + n * side + (n - 1) * gap + foot for n in lines]
    height = head + sum(block_h) + bar_h
    fig = plt.figure(figsize=(width, height))
    lefts = [k * (side + gap) for k in range(depth)]
    lefts.append(depth * (side + gap))                                         # the spacer
    lefts += [lefts[-1] + 0.3 * side + gap + k * (side + gap) for k in range(per_line)]

    def panel(left, top):  # an axes at (left, top) inches from the figure's top left corner
        return fig.add_axes((left / width, 1 - (top + side) / height, side / width, side / height))

    for r, (path, members, inside) in enumerate(zip(path_list, shown, insides)):
        n_inside = int(inside.sum())
        top = head + sum(block_h[:r]) + title_h
        row = [panel(lefts[layer], top) for layer in range(depth)]
        row.append(panel(lefts[depth], top))
        # an input panel left empty (fewer inputs inside than n_images) stays in the block's last line
        row += [panel(lefts[depth + 1 + k % per_line], top + min(k // per_line, lines[r] - 1) * (side + gap))
                for k in range(n_images)]
        for layer, unit in enumerate(path):
            mapped = _show_map(row[layer], normals[layer][unit], image_shape)
            row[layer].set_xlabel(f"ℓ={layer + 1}, unit {unit}", fontsize=8, labelpad=2)
        row[depth].set_axis_off()
        for k in range(n_images):
            ax = row[depth + 1 + k]
            if k < len(members):
                _show_image(ax, images[members[k]], image_shape)
            else:
                ax.set_axis_off()
        summary = f"path {tuple(int(i) for i in path)}: {n_inside} of {len(images)} inputs inside"
        if labels is not None and n_inside:
            counts = Counter(_rows(labels)[inside].astype(int).tolist()).most_common(3)
            names = [class_names[c] if class_names is not None else str(c) for c, _ in counts]
            summary += "; most common: " + ", ".join(f"{name} {n}" for name, (_, n) in zip(names, counts))
        row[0].set_title(summary, loc="left", fontsize=9, pad=4)
    fig.text(0, 1.0 - 0.08 / height,
             "left: the half-space normals of the path's gates, one per layer\n"
             "right: inputs inside its region, spread over all of them",
             ha="left", va="top", fontsize=9)
    # the colour bar lies under the blocks, across the middle of the figure
    colorbar = fig.colorbar(mapped, orientation="horizontal",
                            cax=fig.add_axes((0.3, (bar_h - 0.25) / height, 0.4, 0.1 / height)))
    colorbar.set_ticks([-1, -0.5, 0, 0.5, 1])
    colorbar.set_label("normal entry / its largest |entry|", fontsize=8)
    colorbar.ax.tick_params(labelsize=8)
    return fig


def saliency_grid(images, rows: Mapping[str, object], image_shape: tuple[int, int] = (28, 28), *,
                  column_titles: Sequence[str] | None = None, notes: Mapping[str, Sequence[str]] | None = None,
                  title: str = "") -> plt.Figure:
    """Inputs in the top row; below, per labelled row, a neuron's saliency map at each input.

    Args:
        images: (k, h·w) inputs.
        rows: row label → (k, h·w) maps at those inputs (e.g. ``saliency.input_gradients`` of one
            neuron), one per input.
        column_titles: one title per input (e.g. its class).
        notes: row label → one short text per map, written under it (e.g. "on"/"off").
    """
    images = _rows(images)
    _check_shape(images, image_shape, "images")
    k = len(images)
    # more than 6 inputs: the columns wrap into blocks (inputs, then their maps) of at most 6
    # columns each, one under another, so the figure fits the book's 6.6 in column
    blocks = math.ceil(k / 6)
    cols = math.ceil(k / blocks)
    height = 1 + len(rows)  # rows per block
    fig, axes = plt.subplots(blocks * height, cols, figsize=(0.95 * cols + 1.6, (1.1 * height + 0.15) * blocks + 0.2),
                             squeeze=False, constrained_layout=True)
    for ax in axes[(blocks - 1) * height:, k - (blocks - 1) * cols:].flat:  # cells past the last input
        fig.delaxes(ax)

    def cell(r, c):  # the axes of row r (0: the inputs) at input c
        return axes[(c // cols) * height + r, c % cols]

    for c in range(k):
        _show_image(cell(0, c), images[c], image_shape)
        if column_titles is not None:
            cell(0, c).set_title(column_titles[c], fontsize=8)
    for start in range(0, k, cols):
        cell(0, start).set_ylabel("input", fontsize=9)
    map_axes = []
    for r, (label, maps) in enumerate(rows.items(), start=1):
        maps = _rows(maps)
        _check_shape(maps, image_shape, f"rows[{label!r}]")
        if len(maps) != k:
            raise ValueError(f"rows[{label!r}] has {len(maps)} maps for {k} images")
        for c in range(k):
            mapped = _show_map(cell(r, c), maps[c], image_shape)
            map_axes.append(cell(r, c))
            if notes is not None and label in notes:
                cell(r, c).set_xlabel(notes[label][c], fontsize=8, labelpad=2)
        for start in range(0, k, cols):
            cell(r, start).set_ylabel(label, fontsize=9)
    if rows:
        fig.colorbar(mapped, ax=map_axes, shrink=0.8, label="gradient entry / the map's largest |entry|")
    if title:
        fig.suptitle(title)
    return fig


def cosine_distributions(table, *, threshold: float | None = None, threshold_label: str = "",
                         title: str = "") -> plt.Figure:
    """Per layer, the distribution over neurons of the mean pairwise gradient cosine: a box (the
    whiskers reach the extremes) and a jittered dot per neuron, one box per model in its colour.

    Args:
        table: rows of ``saliency.cosine_table`` with a ``model`` column (a kind such as "dlgn").
        threshold: a reference level drawn as a dotted line (e.g. a verdict threshold).
        threshold_label: its legend entry (default: the number).
    """
    kinds = list(dict.fromkeys(table["model"]))
    layers = sorted(table["layer"].unique())
    frame = table[["model", "layer", "mean_cos"]].dropna().assign(
        model=lambda t: t["model"].map(lambda k: MODEL_NAMES.get(k, k)), layer=lambda t: t["layer"].map(lambda n: f"layer {n}"))
    names = [MODEL_NAMES.get(k, k) for k in kinds]
    palette = {MODEL_NAMES.get(k, k): MODEL_COLORS.get(k, "0.3") for k in kinds}
    order = [f"layer {n}" for n in layers]
    fig, ax = plt.subplots(figsize=(1.3 + 1.3 * len(layers) * len(kinds) / 2, 3.0), constrained_layout=True)
    common = dict(data=frame, x="layer", y="mean_cos", hue="model", order=order, hue_order=names,
                  palette=palette, dodge=True, ax=ax)
    with warnings.catch_warnings():  # seaborn 0.13 passes boxplot's deprecated ``vert`` argument
        warnings.simplefilter("ignore", DeprecationWarning)
        sns.boxplot(**common, fill=False, showfliers=False, whis=(0, 100), linewidth=1.2, width=0.8, legend=False)
    # seaborn jitters with NumPy's global generator: seed it for this call only, so that the
    # figure is the same on every run, and leave the caller's random state as it was
    state = np.random.get_state()
    try:
        np.random.seed(0)
        sns.stripplot(**common, size=2.5, alpha=0.5, jitter=0.3, legend=False)
    finally:
        np.random.set_state(state)
    handles = [Line2D([], [], color=palette[n], linewidth=2) for n in names]
    if threshold is not None:
        ax.axhline(threshold, color="0.4", linestyle=":", linewidth=1)
        handles.append(Line2D([], [], color="0.4", linestyle=":", linewidth=1))
        names = names + [threshold_label or f"{threshold:g}"]
    ax.set_xlabel("")
    ax.set_ylabel("mean pairwise cosine\nof a neuron's input gradients")
    ax.legend(handles, names, loc="lower left", frameon=False)
    if title:
        ax.set_title(title)
    return fig
