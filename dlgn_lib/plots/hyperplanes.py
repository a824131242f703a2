"""Figures of hidden units' hyperplanes (claims C4, C5, C6): similarity matrices, |cos| histograms,
clustering scores against depth and over training, hyperplanes drawn as images, and units against
an odt tree's node hyperplanes.

Every function takes hyperplane normals as arrays (m, d) per layer (rows need not be unit norm)
and returns a Figure; similarity, scores and orders come from ``dlgn_lib.clusters``. ``|cos|``
matrices are seaborn heatmaps sharing one labelled colour bar; units' weights for choosing which
hyperplane images to show come from ``unit_path_weights``.
"""
from __future__ import annotations

import math
import textwrap
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.lines import Line2D

from .. import clusters
from . import MODEL_COLORS, MODEL_NAMES, heatmap

__all__ = ["abs_cos_histograms", "abs_cosine_grid", "hyperplane_images", "node_alignment_vs_epoch",
           "node_cos_heatmaps", "score_vs_depth", "score_vs_epoch", "unit_path_weights"]

COS_CMAP = "magma"  # |cos| in [0, 1]: black (orthogonal) to pale yellow (parallel)
MAP_CMAP = "RdBu_r"  # hyperplane normals as images: blue negative, red positive

STATE_STYLES = {"init": "--", "trained": "-"}
METRIC_LABELS = {"score": "clustering score", "cluster_share": "clusters / units",
                 "mean_abs_cos": "mean pairwise |cos|", "collapse": "collapse",
                 "share": "share of units on a node", "mean": "mean largest |cos| with a node"}


def _label_colors(labels: Sequence[str], colors: Mapping[str, str] | None) -> dict[str, str]:
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {label: (colors or {}).get(label, cycle[k % len(cycle)]) for k, label in enumerate(labels)}


def abs_cosine_grid(panels: Mapping[str, Sequence], *, method: str = "complete",
                    title: str = "") -> plt.Figure:
    """|cos| matrices of hyperplane normals, one row per condition and one column per layer.

    Each matrix is shown in its own clustered order (``clusters.clustered_order``), so clusters
    of near-parallel units appear as bright diagonal blocks.

    Args:
        panels: row label (e.g. "DLGN trained") → per-layer (m_ℓ, d) arrays of normals; all rows
            need the same number of layers. A layer with no rows (m_ℓ = 0) gets an empty panel.
        method: linkage of the clustered order (``clusters.LINKAGES``).
    """
    labels = list(panels)
    n_layers = {len(layers) for layers in panels.values()}
    if len(n_layers) != 1:
        raise ValueError(f"panels have different numbers of layers: {sorted(n_layers)}")
    n_layers = n_layers.pop()
    cell = round(min(2.1, 5.8 / n_layers), 2)  # the book's column: the panels, row labels and gaps in about 6.5 inches
    fig, axes = plt.subplots(len(labels), n_layers, squeeze=False, constrained_layout=True,
                             figsize=(cell * n_layers + 0.6, cell * len(labels) + 0.8 + 0.3 * bool(title)))
    fig.get_layout_engine().set(w_pad=0.02, h_pad=0.02, wspace=0.03, hspace=0.03)
    image = None
    for r, label in enumerate(labels):
        for layer, vectors in enumerate(panels[label]):
            ax = axes[r, layer]
            if len(vectors) == 0:      # e.g. gate vectors of a layer whose units all have constant gates
                ax.set_xticks([])
                ax.set_yticks([])
                ax.text(0.5, 0.5, "no unit\nvaries", ha="center", va="center", transform=ax.transAxes)
            else:
                cos = clusters.abs_cosine_matrix(vectors)
                order = clusters.clustered_order(cos, method=method, is_cos=True)
                image = heatmap(ax, cos[np.ix_(order, order)], vmin=0, vmax=1, cmap=COS_CMAP, square=True)
            if r == 0:
                ax.set_title(f"layer {layer + 1}")
            if layer == 0:
                ax.set_ylabel(textwrap.fill(label, 10), linespacing=1.1)
    fig.colorbar(image, ax=axes, location="bottom", shrink=0.5, aspect=30, pad=0.02,
                 label="|cos| between two units")
    if title:
        fig.suptitle(title)
    return fig


def abs_cos_histograms(panels: Mapping[str, Sequence], *, threshold: float | None = None,
                       colors: Mapping[str, str] | None = None, bins: int = 40,
                       title: str = "") -> plt.Figure:
    """Histograms of pairwise |cos| (pairs i < j), one panel per layer, one curve per condition.

    Args:
        panels: condition label → per-layer (m_ℓ, d) arrays, as in :func:`abs_cosine_grid`.
        threshold: draw the clustering threshold τ as a vertical line.
        colors: optional colour per label.
    """
    labels = list(panels)
    n_layers = max(len(layers) for layers in panels.values())
    color = _label_colors(labels, colors)
    n_cols = min(n_layers, 3)            # the book's column: at most 3 panels a row, rows of layers
    n_rows = math.ceil(n_layers / n_cols)
    fig, grid = plt.subplots(n_rows, n_cols, figsize=(2.0 * n_cols + 0.3, 1.8 * n_rows + 0.7 + 0.3 * bool(title)),
                             sharex=True, sharey=True, squeeze=False, constrained_layout=True)
    for ax in grid.ravel()[n_layers:]:   # an unused cell of the last row
        ax.remove()
    axes = grid.ravel()[:n_layers].reshape(1, n_layers)
    edges = np.linspace(0, 1, bins + 1)
    for layer in range(n_layers):
        ax = axes[0, layer]
        for label in labels:
            if layer >= len(panels[label]):
                continue
            cos = clusters.abs_cosine_matrix(panels[label][layer])
            pairs = cos[np.triu_indices(cos.shape[0], 1)]
            sns.histplot(x=pairs, bins=edges, stat="density", element="step", fill=False,
                         color=color[label], linewidth=1.4, ax=ax)
        if threshold is not None:
            ax.axvline(threshold, color="0.4", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlim(0, 1)
        ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
        ax.set_title(f"layer {layer + 1}")
        ax.set_xlabel("pairwise |cos|" if layer + n_cols >= n_layers else "")   # the lowest panel of a column
        ax.set_ylabel("density" if layer % n_cols == 0 else "")
        ax.tick_params(labelbottom=layer + n_cols >= n_layers)
    handles = [Line2D([], [], color=color[label], linewidth=1.4) for label in labels]
    names = list(labels)
    if threshold is not None:
        handles.append(Line2D([], [], color="0.4", linestyle=":", linewidth=1))
        names.append(f"τ = {threshold:g}")
    fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 4), frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def score_vs_depth(table, *, metrics: Sequence[str] = ("score", "cluster_share"),
                   threshold: float | None = None) -> plt.Figure:
    """Clustering metrics against layer: a column per dataset, a row per metric.

    Args:
        table: a DataFrame with columns ``dataset``, ``model``, ``state`` ("init"/"trained"),
            ``layer`` and the metrics (``clusters.layer_table`` rows); several seeds are averaged.
        metrics: columns to plot (see ``METRIC_LABELS``).
        threshold: τ, shown in the row titles.
    """
    datasets = list(dict.fromkeys(table["dataset"]))
    # the book's column: at most 6.3 inches wide, the key below the panels
    fig, axes = plt.subplots(len(metrics), len(datasets), figsize=(min(3.6 * len(datasets), 6.3), 2.3 * len(metrics) + 0.4),
                             squeeze=False, constrained_layout=True, sharex=True)
    mean = table.groupby(["dataset", "model", "state", "layer"], sort=False)[list(metrics)].mean().reset_index()
    for c, dataset in enumerate(datasets):
        part = mean[mean["dataset"] == dataset]
        for (model, state), curve in part.groupby(["model", "state"], sort=False):
            for r, metric in enumerate(metrics):
                axes[r, c].plot(curve["layer"], curve[metric], marker="o", markersize=3,
                                color=MODEL_COLORS.get(model), linestyle=STATE_STYLES.get(state, "-"),
                                label=f"{MODEL_NAMES.get(model, model)}, {state}")
        axes[0, c].set_title(dataset)
        axes[-1, c].set_xlabel("layer")
        axes[-1, c].set_xticks(sorted(part["layer"].unique()))
    for r, metric in enumerate(metrics):
        label = METRIC_LABELS.get(metric, metric)
        if threshold is not None and metric in ("score", "cluster_share"):
            label += f" (τ = {threshold:g})"
        axes[r, 0].set_ylabel(label)
        for ax in axes[r]:
            ax.set_ylim(-0.03, 1.03)
    handles, names = axes[0, -1].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 4), frameon=False)
    return fig


def score_vs_epoch(table, *, metrics: Sequence[str] = ("score", "mean_abs_cos")) -> plt.Figure:
    """Clustering metrics of each layer over training epochs: a column per dataset, a row per metric.

    Args:
        table: a DataFrame with columns ``epoch``, ``layer``, the metrics and optionally
            ``dataset`` (one column of panels each); several seeds are averaged.
    """
    if "dataset" not in table:
        table = table.assign(dataset="")
    datasets = list(dict.fromkeys(table["dataset"]))
    # the book's column: at most 6.3 inches wide, the key below the panels
    fig, axes = plt.subplots(len(metrics), len(datasets), figsize=(min(3.6 * len(datasets), 6.3), 2.2 * len(metrics) + 0.4),
                             squeeze=False, constrained_layout=True, sharex="col")
    mean = table.groupby(["dataset", "layer", "epoch"])[list(metrics)].mean().reset_index()
    for c, dataset in enumerate(datasets):
        part = mean[mean["dataset"] == dataset]
        layers = sorted(part["layer"].unique())
        shades = plt.get_cmap("viridis")(np.linspace(0.1, 0.85, len(layers)))
        for r, metric in enumerate(metrics):
            ax = axes[r, c]
            for shade, layer in zip(shades, layers):
                curve = part[part["layer"] == layer]
                ax.plot(curve["epoch"], curve[metric], marker="o", markersize=3, color=shade,
                        label=f"layer {layer}")
            # symlog keeps epoch 0 (the init value) on the axis beside log-spaced snapshots
            ax.set_xscale("symlog", linthresh=1)
            ax.set_ylim(-0.03, 1.03)
            if c == 0:
                ax.set_ylabel(METRIC_LABELS.get(metric, metric))
        axes[0, c].set_title(dataset)
        axes[-1, c].set_xlabel("epoch")
    handles, names = axes[0, -1].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 6), frameon=False)
    return fig


def _mosaic(images: np.ndarray, n_cols: int, gap: int = 2) -> np.ndarray:
    """Tile (n, h, w) images into one array, row-major, with NaN gaps (drawn blank)."""
    n, h, w = images.shape
    n_rows = math.ceil(n / n_cols)
    out = np.full((n_rows * (h + gap) - gap, n_cols * (w + gap) - gap), np.nan)
    for k, image in enumerate(images):
        r, c = divmod(k, n_cols)
        out[r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = image
    return out


@torch.no_grad()
def unit_path_weights(model) -> list[np.ndarray]:
    """Per layer, each unit's weight: the summed size ``Σ_{π ∋ unit} ‖g_π‖`` of the path values of
    every path through it (``paths.path_values``; ‖·‖ over outputs and, for value input "x", inputs).

    This is how much of the network's path sum the unit's gate can switch: the heaviest units are
    the ones that matter most to the output. The value weights factor along a path, so the sum is
    ``a_i · b_i`` with ``a`` the summed |products| of value weights from the input to the unit and
    ``b`` from the unit to the head: no path is enumerated (a 256 × 256 × 256 × 256 net is fine).
    Each layer's weights add up to ``Σ_π ‖g_π‖``. Works for any model with ``value_weights()``.
    """
    first, middle, head = _value_weights(model)
    forward = [first.abs() if first.dim() == 1 else first.norm(dim=1)]
    for U in middle:
        forward.append(U.abs() @ forward[-1])
    backward = [head.norm(dim=0)]
    for U in reversed(middle):
        backward.insert(0, U.abs().T @ backward[0])
    return [(a * b).numpy() for a, b in zip(forward, backward)]


def _value_weights(model):
    first, middle, head = model.value_weights()
    return (first.detach().double().cpu(), [U.detach().double().cpu() for U in middle],
            head.detach().double().cpu())


def _heaviest_units(weights, n: int) -> np.ndarray:
    """Indices of the ``n`` largest weights, largest first (ties: the lower index first)."""
    weights = np.asarray(weights, dtype=float)
    return np.argsort(-weights, kind="stable")[:n]


def hyperplane_images(layers: Sequence, image_shape: tuple[int, int] = (28, 28), *,
                      weights: Sequence | None = None, n_units: int = 8, full_grid: bool = False,
                      weight_name: str = "Σ‖g_π‖ over the unit's paths",
                      order: str | None = "clustered", method: str = "complete", n_cols: int = 16,
                      max_units: int | None = None, titles: Sequence[str] | None = None,
                      image_size: float | None = None, title: str | None = None) -> plt.Figure:
    """Hyperplane normals drawn as images (claim C4: one global map per neuron).

    Each unit's normal is reshaped to ``image_shape`` and divided by its own largest |entry|, so
    every image spans the colour range −1 … 1 of the one shared colour bar (red positive, blue
    negative): the input direction that opens the unit's gate.

    By default the figure shows, per layer, the ``n_units`` heaviest units, largest first, each
    large enough to read; a unit's weight is given by ``weights`` (per layer, one number per unit;
    e.g. ``unit_path_weights(model)``: the summed size of the path values through the unit) and
    named in the figure title by ``weight_name``. Each image's title gives the unit's index and its
    share of the layer's total weight. ``full_grid=True`` shows every unit instead, as one mosaic
    per layer (small images; ``order``, ``n_cols``, ``max_units`` apply to it only).

    Args:
        layers: per-layer (m_ℓ, h·w) arrays or tensors (or one array for a single layer).
        weights: per-layer (m_ℓ,) unit weights; required unless ``full_grid`` or no layer has
            more than ``n_units`` units (then every unit is shown, in index order).
        n_units: units shown per layer in the selection.
        order: full grid: "clustered" (``clusters.clustered_order``; near-parallel units side by
            side) or None (unit index order).
        n_cols: full grid: images per row.
        max_units: full grid: show only the first units (in the chosen order) of each layer.
        titles: one label per layer (default "layer ℓ").
        image_size: width of one image in inches (default: as large as fits a 6.5-inch-wide
            figure, at most 1.15 selected, 0.5 full grid).
        title: the figure title (default: says what is shown and how units were chosen).
    """
    if order not in ("clustered", None):
        raise ValueError(f"order={order!r} is not allowed; choose 'clustered' or None")
    if hasattr(layers, "shape") and len(layers.shape) == 2:
        layers = [layers]
        weights = None if weights is None else [weights]
    rows_per_layer = []
    for vectors in layers:
        rows = np.asarray(vectors.detach().cpu() if hasattr(vectors, "detach") else vectors, dtype=float)
        if rows.ndim != 2 or rows.shape[1] != math.prod(image_shape):
            raise ValueError(f"normals of shape {rows.shape} do not fit image_shape={image_shape}")
        scale = np.abs(rows).max(axis=1, keepdims=True)
        rows_per_layer.append(rows / np.where(scale > 0, scale, 1.0))
    labels = list(titles) if titles is not None else [f"layer {k + 1}" for k in range(len(rows_per_layer))]
    cmap = plt.get_cmap(MAP_CMAP).with_extremes(bad="white")
    colorbar_label = "normal entry / the unit's largest |entry|"
    if full_grid:
        return _full_grid(rows_per_layer, image_shape, labels, cmap, colorbar_label, order=order,
                          method=method, n_cols=n_cols, max_units=max_units,
                          image_size=min(0.5, 5.4 / n_cols) if image_size is None else image_size, title=title)
    if weights is None:
        if max(len(r) for r in rows_per_layer) > n_units:
            raise ValueError("weights is None: give each unit's weight (e.g. unit_path_weights(model)) "
                             "to select the heaviest units, or pass full_grid=True to show them all")
        return _selection(rows_per_layer, None, range(max(len(r) for r in rows_per_layer)), image_shape, labels, cmap, colorbar_label,
                          size=image_size,
                          title=title if title is not None else "every unit, in index order")
    if len(weights) != len(rows_per_layer):
        raise ValueError(f"weights has {len(weights)} layers for {len(rows_per_layer)} layers of normals")
    weights = [np.asarray(w.detach().cpu() if hasattr(w, "detach") else w, dtype=float) for w in weights]
    for w, rows, label in zip(weights, rows_per_layer, labels):
        if w.shape != (len(rows),):
            raise ValueError(f"weights of {label} has shape {w.shape}; need ({len(rows)},)")
    n_show = min(n_units, max(len(r) for r in rows_per_layer))
    return _selection(rows_per_layer, weights, range(n_show), image_shape, labels, cmap, colorbar_label,
                      size=image_size,
                      title=title if title is not None else
                      f"the {n_show} heaviest units of each layer, heaviest first (weight: {weight_name}; "
                      "above each: unit and its share of the layer's weight)")


def _selection(rows_per_layer, weights, columns, image_shape, labels, cmap, colorbar_label, *, size, title):
    """Chosen units' normals, one row per layer: the heaviest by ``weights`` (or, with None, the
    first units in index order), as large as a 6.5-inch-wide figure allows (``size``: None), with one
    shared colour bar below."""
    n_show = len(columns)
    if size is None:  # fit the book's column: 8 images, a row label and gaps in about 6.5 inches
        size = min(1.15, 5.6 / n_show)
    width = size * n_show + 0.9
    fig, axes = plt.subplots(len(rows_per_layer), n_show,
                             figsize=(width, (size + 0.36) * len(rows_per_layer) + 1.0),
                             squeeze=False, constrained_layout=True)
    fig.get_layout_engine().set(w_pad=0.01, h_pad=0.02, wspace=0.03, hspace=0.03)
    image = None
    for r, (rows, label) in enumerate(zip(rows_per_layer, labels)):
        w = None if weights is None else weights[r]
        chosen = np.arange(len(rows))[:n_show] if w is None else _heaviest_units(w, n_show)
        total = None if w is None else w.sum()
        for c, ax in enumerate(axes[r]):
            if c >= len(chosen):
                ax.set_axis_off()
                continue
            unit = int(chosen[c])
            image = ax.imshow(rows[unit].reshape(image_shape), cmap=cmap, vmin=-1, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_visible(False)
            share = "" if w is None else (f"\n{w[unit] / total:.1%}" if total > 0 else "\n0")
            ax.set_title(f"unit {unit}{share}", fontsize=8, linespacing=1.1, pad=2)
        axes[r, 0].set_ylabel(f"{textwrap.fill(label, 14)}\n({len(rows)} units)", fontsize=8.5, linespacing=1.1)
    bar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.6, aspect=35, pad=0.01)
    bar.set_label(colorbar_label, fontsize=9)
    bar.ax.tick_params(labelsize=8.5)
    if title:
        fig.suptitle(textwrap.fill(title, int(width * 72 / 5.3)), fontsize=10)
    return fig


def _full_grid(rows_per_layer, image_shape, labels, cmap, colorbar_label, *, order, method, n_cols,
               max_units, image_size, title):
    """Every unit's normal, one mosaic per layer (``hyperplane_images(..., full_grid=True)``), with
    one shared colour bar below."""
    mosaics = []
    for rows in rows_per_layer:
        index = clusters.clustered_order(rows, method=method) if order == "clustered" else np.arange(len(rows))
        mosaics.append(_mosaic(rows[index[:max_units]].reshape(-1, *image_shape), n_cols))
    width = image_size * n_cols
    heights = [width * m.shape[0] / m.shape[1] for m in mosaics]
    fig, axes = plt.subplots(len(mosaics), 1, figsize=(width + 0.6, sum(heights) + 0.35 * len(mosaics) + 1.2),
                             height_ratios=heights, squeeze=False, constrained_layout=True)
    image = None
    for ax, mosaic, label in zip(axes[:, 0], mosaics, labels):
        image = ax.imshow(mosaic, cmap=cmap, vmin=-1, vmax=1, interpolation="nearest")
        ax.set_axis_off()
        ax.set_title(label, fontsize=9)
    bar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.6, aspect=35, pad=0.02)
    bar.set_label(colorbar_label, fontsize=9)
    bar.ax.tick_params(labelsize=8.5)
    if title:
        fig.suptitle(textwrap.fill(title, int((width + 0.6) * 72 / 5.3)), fontsize=10)
    return fig


def node_cos_heatmaps(panels: Mapping[str, Sequence], node_normals, *, threshold: float | None = None,
                      title: str = "") -> plt.Figure:
    """|cos| of every unit's hyperplane with every node normal: one row per condition (e.g. init,
    trained), one column per layer; units sorted by their closest node, so aligned units form a
    staircase. Cells at or above ``threshold`` are outlined by the colour scale's top end.

    Args:
        panels: condition → per layer an (m_ℓ, d) array of hyperplane normals.
        node_normals: (nodes, d) normals of the tree's node hyperplanes.
    """
    names = list(panels)
    n_layers = max(len(layers) for layers in panels.values())
    node_units = np.asarray(node_normals, dtype=np.float64)
    node_units = node_units / np.linalg.norm(node_units, axis=1, keepdims=True)
    side = min(2.3, 5.7 / n_layers)  # each panel's width: the figure fits the book's 6.5-inch column
    fig, axes = plt.subplots(len(names), n_layers,
                             figsize=(side * n_layers + 0.55, (side + 0.55) * len(names) + 0.75 + 0.3 * bool(title)),
                             squeeze=False, constrained_layout=True)
    fig.get_layout_engine().set(w_pad=0.02, wspace=0.04)
    image = None
    for r, name in enumerate(names):
        for c in range(n_layers):
            ax = axes[r, c]
            if c >= len(panels[name]):
                ax.axis("off")
                continue
            rows = np.asarray(panels[name][c], dtype=np.float64)
            rows = rows[np.linalg.norm(rows, axis=1) > 0]
            cos = np.abs((rows / np.linalg.norm(rows, axis=1, keepdims=True)) @ node_units.T)
            order = np.lexsort((-cos.max(axis=1), cos.argmax(axis=1)))
            image = heatmap(ax, cos[order], vmin=0, vmax=1, cmap=COS_CMAP)
            share = (cos.max(axis=1) >= threshold).mean() if threshold is not None else None
            ax.set_title(f"layer {c + 1}" + (f"\n{share:.2f} on a node" if share is not None else ""), fontsize=9,
                         linespacing=1.1)
            if c == 0:
                ax.set_ylabel(f"{name}\nunits", fontsize=9)
            if r == len(names) - 1:
                ax.set_xlabel("tree nodes", fontsize=9)
    if image is not None:
        bar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.6, aspect=35, pad=0.02)
        bar.set_label("|cos| of a unit's and a node's hyperplane", fontsize=9)
        bar.ax.tick_params(labelsize=8.5)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def node_alignment_vs_epoch(table, *, baselines: Mapping | None = None) -> plt.Figure:
    """Share of units on a node and mean largest |cos| over training, mean over layers and seeds:
    a column per data set, a row per measure, a line per model; dotted: random directions.

    Args:
        table: columns ``dataset``, ``model``, ``seed``, ``epoch``, ``layer``, ``share``, ``mean``.
        baselines: optional ``{dataset: {"share": …, "mean": …}}`` drawn as dotted lines.
    """
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(2, len(datasets), figsize=(min(3.8, 6.4 / len(datasets)) * len(datasets), 4.8),
                             squeeze=False, constrained_layout=True, sharex="col")
    per_seed = table.groupby(["dataset", "model", "seed", "epoch"])[["share", "mean"]].mean().reset_index()
    curves = per_seed.groupby(["dataset", "model", "epoch"])[["share", "mean"]].mean().reset_index()
    for c, dataset in enumerate(datasets):
        for r, metric in enumerate(("share", "mean")):
            ax = axes[r, c]
            part = curves[curves["dataset"] == dataset]
            for kind in dict.fromkeys(part["model"]):
                curve = part[part["model"] == kind]
                ax.plot(curve["epoch"], curve[metric], marker="o", markersize=3,
                        color=MODEL_COLORS.get(kind), label=MODEL_NAMES.get(kind, kind))
            if baselines and dataset in baselines:
                ax.axhline(baselines[dataset][metric], color="0.4", linestyle=":", label="random directions")
            ax.set_xscale("symlog", linthresh=1)
            ax.set_ylim(-0.03, 1.03)
            if c == 0:
                ax.set_ylabel(METRIC_LABELS[metric])
        axes[0, c].set_title(dataset)
        axes[-1, c].set_xlabel("pass (epoch)")
    axes[0, -1].legend(loc="best", frameon=False, fontsize=8)
    return fig
