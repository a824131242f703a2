"""Figures of hidden units' hyperplanes (claims C4, C5, C6): similarity matrices, |cos| histograms,
clustering scores against depth and over training, hyperplanes drawn as images, and units against
an odt tree's node hyperplanes.

Every function takes hyperplane normals as arrays (m, d) per layer (rows need not be unit norm)
and returns a Figure; similarity, scores and orders come from ``dlgn_lib.clusters``.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .. import clusters
from . import MODEL_COLORS, MODEL_NAMES

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
            need the same number of layers.
        method: linkage of the clustered order (``clusters.LINKAGES``).
    """
    labels = list(panels)
    n_layers = {len(layers) for layers in panels.values()}
    if len(n_layers) != 1:
        raise ValueError(f"panels have different numbers of layers: {sorted(n_layers)}")
    n_layers = n_layers.pop()
    fig, axes = plt.subplots(len(labels), n_layers, figsize=(2.1 * n_layers + 0.8, 2.1 * len(labels)),
                             squeeze=False, constrained_layout=True)
    image = None
    for r, label in enumerate(labels):
        for layer, vectors in enumerate(panels[label]):
            cos = clusters.abs_cosine_matrix(vectors)
            order = clusters.clustered_order(cos, method=method, is_cos=True)
            ax = axes[r, layer]
            image = ax.imshow(cos[np.ix_(order, order)], vmin=0, vmax=1, cmap="magma",
                              interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"layer {layer + 1}")
            if layer == 0:
                ax.set_ylabel(label)
    fig.colorbar(image, ax=axes, shrink=0.8, label="|cos|")
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
    fig, axes = plt.subplots(1, n_layers, figsize=(2.6 * n_layers, 2.5), sharey=True,
                             squeeze=False, constrained_layout=True)
    edges = np.linspace(0, 1, bins + 1)
    for layer in range(n_layers):
        ax = axes[0, layer]
        for label in labels:
            if layer >= len(panels[label]):
                continue
            cos = clusters.abs_cosine_matrix(panels[label][layer])
            pairs = cos[np.triu_indices(cos.shape[0], 1)]
            ax.hist(pairs, bins=edges, density=True, histtype="step", color=color[label],
                    label=label, linewidth=1.4)
        if threshold is not None:
            ax.axvline(threshold, color="0.4", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlim(0, 1)
        ax.set_title(f"layer {layer + 1}")
        ax.set_xlabel("pairwise |cos|")
    axes[0, 0].set_ylabel("density")
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside right center", frameon=False)
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
    fig, axes = plt.subplots(len(metrics), len(datasets), figsize=(3.6 * len(datasets), 2.6 * len(metrics)),
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
    axes[0, -1].legend(loc="best", frameon=False)
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
    fig, axes = plt.subplots(len(metrics), len(datasets), figsize=(3.6 * len(datasets), 2.5 * len(metrics)),
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
    axes[0, -1].legend(loc="best", frameon=False)
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


def hyperplane_images(layers: Sequence, image_shape: tuple[int, int] = (28, 28), *,
                      order: str | None = "clustered", method: str = "complete", n_cols: int = 16,
                      max_units: int | None = None, titles: Sequence[str] | None = None,
                      image_size: float = 0.5) -> plt.Figure:
    """Hyperplane normals drawn as images (claim C4: one global map per neuron), layer by layer.

    Each unit's normal is reshaped to ``image_shape`` and scaled by its own largest |entry|, so
    every image spans the full colour range (red positive, blue negative): the input direction
    that opens its gate. One mosaic per layer keeps the figure fast to draw for many units.

    Args:
        layers: per-layer (m_ℓ, h·w) arrays or tensors (or one array for a single layer).
        order: "clustered" (``clusters.clustered_order``; near-parallel units side by side) or
            None (unit index order).
        n_cols: images per row.
        max_units: show only the first units (in the chosen order) of each layer.
        titles: one title per layer (default "layer ℓ").
        image_size: width of one image in inches.
    """
    if order not in ("clustered", None):
        raise ValueError(f"order={order!r} is not allowed; choose 'clustered' or None")
    if hasattr(layers, "shape") and len(layers.shape) == 2:
        layers = [layers]
    mosaics = []
    for vectors in layers:
        rows = np.asarray(vectors.detach().cpu() if hasattr(vectors, "detach") else vectors, dtype=float)
        if rows.ndim != 2 or rows.shape[1] != math.prod(image_shape):
            raise ValueError(f"normals of shape {rows.shape} do not fit image_shape={image_shape}")
        index = clusters.clustered_order(rows, method=method) if order == "clustered" else np.arange(len(rows))
        rows = rows[index[:max_units]]
        scale = np.abs(rows).max(axis=1, keepdims=True)
        rows = rows / np.where(scale > 0, scale, 1.0)
        mosaics.append(_mosaic(rows.reshape(-1, *image_shape), n_cols))
    titles = list(titles) if titles is not None else [f"layer {k + 1}" for k in range(len(mosaics))]
    width = image_size * n_cols
    heights = [width * m.shape[0] / m.shape[1] for m in mosaics]
    fig, axes = plt.subplots(len(mosaics), 1, figsize=(width, sum(heights) + 0.35 * len(mosaics)),
                             height_ratios=heights, squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="white")
    for ax, mosaic, title in zip(axes[:, 0], mosaics, titles):
        ax.imshow(mosaic, cmap=cmap, vmin=-1, vmax=1, interpolation="nearest")
        ax.set_axis_off()
        ax.set_title(title)
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
    fig, axes = plt.subplots(len(names), n_layers, figsize=(2.3 * n_layers + 0.8, 2.4 * len(names)),
                             squeeze=False, constrained_layout=True)
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
            image = ax.imshow(cos[order], vmin=0, vmax=1, cmap="magma", aspect="auto", interpolation="nearest")
            share = (cos.max(axis=1) >= threshold).mean() if threshold is not None else None
            ax.set_title(f"layer {c + 1}" + (f": {share:.2f} on a node" if share is not None else ""), fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(f"{name}\nunits", fontsize=9)
            if r == len(names) - 1:
                ax.set_xlabel("tree nodes", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="|cos|")
    if title:
        fig.suptitle(title)
    return fig


def node_alignment_vs_epoch(table, *, baselines: Mapping | None = None) -> plt.Figure:
    """Share of units on a node and mean largest |cos| over training, mean over layers and seeds:
    a column per data set, a row per measure, a line per model; dotted: random directions.

    Args:
        table: columns ``dataset``, ``model``, ``seed``, ``epoch``, ``layer``, ``share``, ``mean``.
        baselines: optional ``{dataset: {"share": …, "mean": …}}`` drawn as dotted lines.
    """
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(2, len(datasets), figsize=(3.8 * len(datasets), 5.0), squeeze=False,
                             constrained_layout=True, sharex="col")
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
