"""Figures of circle data (notebooks 05 and 06; claims C5, C7): the target with a model's boundary
angles and path arcs, curves over epochs, and overlap-kernel heatmaps over the angle.

Angles run along the horizontal axis from 0 to 2π; the numbers drawn come from ``dlgn_lib.circle``.
"""
from __future__ import annotations

import math
import textwrap
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D

from .. import circle, data, kernels, paths
from . import MODEL_COLORS, MODEL_NAMES, heatmap

__all__ = ["epoch_curves"]

TWO_PI = 2.0 * math.pi
LAYER_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
ARC_COLORS = {"smooth": "#2ca02c", "rough": "#ff7f0e"}
OTHER_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf")  # none is an arc colour
INSIDE_COLOR, OUTSIDE_COLOR = "#2ca02c", "#7f7f7f"
LINESTYLES = ("-", "--", ":", "-.")
#: Line style of each arc's curves when colour shows the model (``epoch_curves``).
ARC_STYLES = {"smooth": "-", "rough": "--"}
OTHER_STYLES = (":", "-.")  # other columns sharing a panel with colour = model
#: Size (inches) of one panel of ``epoch_curves``, and the most panels in a row: two fit the
#: book's 6.7 in column with every text at 8 pt or more.
CURVE_PANEL = (3.25, 2.2)
MAX_CURVE_COLUMNS = 2


def _angle_axis(ax, label=True):
    ax.set_xlim(0, TWO_PI)
    ax.set_xticks([0, math.pi / 2, math.pi, 1.5 * math.pi, TWO_PI])
    ax.set_xticklabels(["0", "π/2", "π", "3π/2", "2π"] if label else [])


def _shade_arcs(ax, arcs: Mapping[str, tuple], alpha=0.08):
    """Shade the named arcs of a mixture target (wrapping arcs in two parts)."""
    for name, (a, b) in arcs.items():
        parts = [(a, b)] if b > a else [(a, TWO_PI), (0.0, b)]
        for k, (s, e) in enumerate(parts):
            ax.axvspan(s, e, color=ARC_COLORS.get(name, "#cccccc"), alpha=alpha, lw=0,
                       label=f"{name} arc" if k == 0 else None)


def _marks(ax, marks):
    for m in marks:
        ax.axvline(m, color="black", lw=0.8, ls=":", alpha=0.7)


def _top_paths(cells, mags, n):
    """Indices of the n active paths of largest magnitude, largest first."""
    active = cells.path_lengths() > circle.MIN_CELL
    flat = np.where(active, mags, -1.0).ravel()
    order = np.argsort(-flat, kind="stable")[:n]
    order = order[flat[order] >= 0]
    return [tuple(int(i) for i in np.unravel_index(k, mags.shape)) for k in order]


@torch.no_grad()
def smooth_state(model, dataset, *, n_paths: int = 40, title: str = "") -> plt.Figure:
    """Target, boundary angles per layer and the heaviest path arcs of a DLGN on circle data (C5).

    Top: the target and the model's output (for ±1 labels, 2σ(f) − 1). Middle: every neuron's
    boundary angles, one row per layer, marker area ∝ the neuron's importance
    (``circle.neuron_importance``). Bottom: the ``n_paths`` active paths of largest ‖g_π‖, one row
    each (sorted by where the arc starts), opacity ∝ ‖g_π‖, green when the arc lies inside one
    smooth piece (``circle.inside_pieces``). Dotted lines: the target's discontinuities.
    """
    meta = dataset.meta
    arcs = circle.target_arcs(dataset)
    smooth = list(arcs.values()) if meta["target"] == "steps" else [arcs["smooth"]]
    marks = meta["discontinuities"]
    fig, (top, mid, bottom) = plt.subplots(3, 1, figsize=(6.5, 6.4), sharex=True,
                                           gridspec_kw={"height_ratios": [1.2, 0.8, 1.6]})
    theta = np.linspace(0.0, TWO_PI, 721)
    target = data.circle_target(torch.from_numpy(theta), meta["target"], **meta["params"]).numpy()
    out = model(circle.points(theta, model))[:, 0].double().numpy()
    if dataset.task == "binary":
        out = np.tanh(out / 2.0)  # = 2σ(f) − 1, the expected label under the logistic model
    if meta["target"] == "mixture":
        _shade_arcs(top, arcs)
    top.plot(theta, target, color="black", lw=1.2, label="target")
    label = "model (2σ(f)−1)" if dataset.task == "binary" else "model"
    top.plot(theta, out, color=MODEL_COLORS["dlgn"], lw=1.2, label=label)
    top.set_ylabel("value")
    top.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=4, frameon=False)

    cells = circle.circle_cells(model, marks)
    mags = circle.path_magnitudes(model)
    importance = circle.neuron_importance(mags, active=cells.path_lengths() > circle.MIN_CELL)
    biggest = max(float(w.max()) for w in importance) or 1.0
    for layer, (angles, weight) in enumerate(zip(paths.region_boundary_angles(model), importance)):
        size = 4 + 60 * np.repeat(weight / biggest, 2)
        mid.scatter(angles.ravel(), np.full(angles.size, layer + 1), s=size,
                    color=LAYER_COLORS[layer % len(LAYER_COLORS)], alpha=0.75, lw=0)
    mid.set_ylim(model.depth + 0.6, 0.4)
    mid.set_yticks(range(1, model.depth + 1))
    mid.set_ylabel("layer")
    mid.set_title("boundary angles (area ∝ neuron importance)", loc="left", fontsize=9)

    chosen = _top_paths(cells, mags, n_paths)
    inside = circle.inside_pieces(cells, smooth)
    pieces = {p: paths.path_arc(model, p) for p in chosen}
    chosen.sort(key=lambda p: pieces[p][0][0] if pieces[p] else 0.0)
    top_mag = max((mags[p] for p in chosen), default=1.0)
    for row, p in enumerate(chosen):
        color = INSIDE_COLOR if inside[p] else OUTSIDE_COLOR
        for s, e in pieces[p]:
            bottom.plot([s, e], [row, row], color=color, lw=2.2, alpha=0.15 + 0.85 * mags[p] / top_mag,
                        solid_capstyle="butt")
    bottom.set_ylim(len(chosen), -1)
    bottom.set_yticks([])
    bottom.set_ylabel(f"top {len(chosen)} paths")
    bottom.set_title("active path arcs (opacity ∝ ‖g_π‖; green: inside one smooth piece)",
                     loc="left", fontsize=9)
    for ax in (top, mid, bottom):
        _marks(ax, marks)
        _angle_axis(ax)
    bottom.set_xlabel("θ")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _arc_of(column: str) -> str | None:
    """The arc a column names ("loss smooth" → "smooth"), or None."""
    return next((word for word in column.split() if word in ARC_COLORS), None)


def epoch_curves(table: pd.DataFrame, panels: Mapping[str, Sequence[str]], *, by: str = "setting",
                 log_y: Sequence[str] = (), baselines: Mapping[str, Mapping[str, float]] | None = None,
                 labels: Mapping[str, str] | None = None, group_colors: Mapping[str, str] | None = None,
                 group_names: Mapping[str, str] | None = None, ncols: int = 3, title: str = "") -> plt.Figure:
    """Curves over epochs, one panel per entry of ``panels`` (title → columns of ``table``).

    When the groups (the values of ``by``) are model kinds, or ``group_colors`` is given, colour
    is the group (the model: ``MODEL_COLORS``, the same in every notebook) and line style the
    column: solid for the smooth arc, dashed for the rough arc (``ARC_STYLES``), dotted / dash-dot
    for other columns sharing a panel; one key under the figure says which colour is which model
    and which line style is which column. Otherwise (e.g. one model in several settings) colour is
    the column (green / orange for the smooth / rough arc) and line style the group. The thick
    line is the mean over the table's ``seed`` column, thin lines are single seeds. The epoch axis
    is symmetric-log (epoch 0 is the init). At most ``MAX_CURVE_COLUMNS`` panels a row (the figure
    fits the book's column); a figure-wide key sits in the grid's empty cell when there is one, else
    under the panels; a panel's own legend sits under its epoch axis.

    Args:
        log_y: titles of panels drawn with a logarithmic value axis.
        baselines: title → {label: value} drawn as horizontal grey lines (dashed, dotted, …).
        labels: column → legend label (default: the column name).
        ncols: panels a row (at most ``MAX_CURVE_COLUMNS``).
        group_colors: group → colour (default: ``MODEL_COLORS`` when every group is a model kind).
        group_names: value of ``by`` → legend label (default: ``MODEL_NAMES`` for model kinds, else
            the value).
    """
    titles = list(panels)
    ncols = max(1, min(ncols, len(titles), MAX_CURVE_COLUMNS))
    nrows = math.ceil(len(titles) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(CURVE_PANEL[0] * ncols, CURVE_PANEL[1] * nrows + 0.6),
                             squeeze=False, layout="constrained")
    groups = list(dict.fromkeys(table[by]))
    if all(g in MODEL_COLORS for g in groups):
        group_colors = MODEL_COLORS if group_colors is None else group_colors
        group_names = MODEL_NAMES if group_names is None else group_names
    column_name = (labels or {}).get
    style_key: dict[str, str] = {}
    for ax, name in zip(axes.flat, titles):
        columns = panels[name]
        for k, column in enumerate(columns):
            for g, group in enumerate(groups):
                if group_colors:
                    color = group_colors[group]
                    if len(columns) == 1:
                        style = "-"
                    else:
                        style = ARC_STYLES.get(_arc_of(column), OTHER_STYLES[k % len(OTHER_STYLES)])
                        style_key.setdefault(column_name(column, column), style)
                else:
                    color = ARC_COLORS.get(_arc_of(column)) or OTHER_COLORS[k % len(OTHER_COLORS)]
                    style = LINESTYLES[g % len(LINESTYLES)]
                wide = table[table[by] == group].pivot_table(index="epoch", columns="seed", values=column)
                if wide.shape[1] > 1:
                    ax.plot(wide.index, wide.values, color=color, ls=style, lw=0.5, alpha=0.35)
                parts = ([column_name(column, column)] if len(columns) > 1 or len(groups) == 1 else []) \
                    + ([(group_names or {}).get(group, str(group))] if len(groups) > 1 else [])
                ax.plot(wide.index, wide.mean(axis=1), color=color, ls=style, lw=1.6,
                        label=None if group_colors else ", ".join(parts))
        for j, (label, value) in enumerate((baselines or {}).get(name, {}).items()):
            ax.axhline(value, color="black", ls=LINESTYLES[(j + 1) % len(LINESTYLES)], lw=0.8, alpha=0.6, label=label)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=0)
        if name in log_y:
            ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("epoch")
    used = list(axes.flat)[:len(titles)]
    spare = None   # the first unused cell of the grid: the figure's key goes there
    for k, ax in list(enumerate(axes.flat))[len(titles):]:
        spare = ax.get_subplotspec() if spare is None else spare
        ax.remove()   # the figure has one axes per panel
    key = None
    if group_colors:
        # One key for the figure: colour = model (group), line style = column; baselines in their panel.
        handles = [Line2D([], [], color=group_colors[g], lw=1.6) for g in groups]
        names = [(group_names or {}).get(g, str(g)) for g in groups]
        handles += [Line2D([], [], color="black", ls=style, lw=1.6) for style in style_key.values()]
        names += list(style_key)
        what = "colour: model" if all(g in MODEL_COLORS for g in groups) else f"colour: {by}"
        arcs = [name in ARC_STYLES for name in style_key]
        if arcs:
            what += " · line style: " + ("arc" if all(arcs) else "arc or measure" if any(arcs) else "measure")
        key = (handles, names, what)
        for ax in used:
            if ax.get_legend_handles_labels()[1]:
                _panel_legend(ax)
    else:
        entries = [ax.get_legend_handles_labels() for ax in used]
        if len(used) > 1 and all(labels_ == entries[0][1] for _, labels_ in entries):
            # Every panel has the same lines: one legend for the figure keeps the curves clear.
            key = (*entries[0], None)
        else:
            for ax in used:
                _panel_legend(ax)
    # Room under each row for its panels' own legends (about 0.17 in an entry).
    below = [max((len(ax.get_legend().get_texts()) for ax in used[r * ncols:(r + 1) * ncols] if ax.get_legend()),
                 default=0) for r in range(nrows)]
    fig.set_figheight(fig.get_figheight() + sum(0.17 * n + 0.1 for n in below if n))
    if key is not None:
        handles, names, what = key
        if spare is not None:   # in the empty cell beside the last panel
            fig.legend(handles, names, loc="center", bbox_to_anchor=spare.get_position(fig),
                       ncol=1 if len(names) <= 4 else 2, frameon=False, fontsize=8, title=what, title_fontsize=8)
        else:                   # under the panels
            fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 4 if what is None else 5),
                       frameon=False, fontsize=8, title=what, title_fontsize=8)
    if title:
        fig.suptitle(_wrapped(title, fig))
    return fig


def _panel_legend(ax) -> None:
    """A panel's own legend, under its epoch axis (its labels are long: inside, it would cover the curves)."""
    from matplotlib.transforms import ScaledTranslation
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=ax.transAxes + ScaledTranslation(0, -0.5, ax.figure.dpi_scale_trans),
              fontsize=8, frameon=False, borderaxespad=0.0)


def _wrapped(title: str, fig, size: float = 12.0) -> str:
    """``title`` broken into lines that fit the figure's width at ``size`` points."""
    return textwrap.fill(title, width=max(20, int(fig.get_figwidth() * 72 / (0.58 * size))))


@torch.no_grad()
def cosine_kernel_on_angles(model, theta) -> np.ndarray:
    """The cosine-normalised overlap kernel ``K(θ, θ') / √(K(θ, θ) K(θ', θ'))`` on the angles."""
    K = kernels.model_overlap_kernel(model, circle.points(theta, model))
    return kernels.cosine_kernel(K).double().numpy()


def kernel_heatmaps(panels: Mapping[tuple[str, str], np.ndarray], theta, *, arcs: Mapping[str, tuple] | None = None,
                    title: str = "") -> plt.Figure:
    """Overlap-kernel heatmaps over θ × θ, a grid of rows × columns given by the panel keys.

    Args:
        panels: (row label, column label) → (N, N) kernel on the sorted angles ``theta``, e.g. the
            output of ``cosine_kernel_on_angles`` (values in [0, 1]).
        arcs: named arcs whose ends are marked with dotted lines.
    """
    rows = list(dict.fromkeys(r for r, _ in panels))
    cols = list(dict.fromkeys(c for _, c in panels))
    side = min(1.9, 5.8 / len(cols))   # a panel's side (inches): the grid fits the book's 6.7 in column
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(side * len(cols) + 0.7, side * len(rows) + 1.3),
                             squeeze=False, constrained_layout=True)
    theta = np.asarray(theta, dtype=np.float64)

    def at(angle):  # heatmap coordinate of an angle (cell k spans k … k + 1 and shows theta[k])
        return 0.5 + (angle - theta[0]) / (theta[-1] - theta[0]) * (len(theta) - 1)

    image = None
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i, j]
            if (r, c) not in panels:
                ax.axis("off")
                continue
            image = heatmap(ax, panels[r, c], vmin=0, vmax=1, cmap="magma", square=True)
            for a, _ in (arcs or {}).values():
                ax.axvline(at(a), color="white", ls=":", lw=0.8)
                ax.axhline(at(a), color="white", ls=":", lw=0.8)
            ticks = [at(t) for t in (0, math.pi, TWO_PI)]
            ax.set_xticks(ticks, ["0", "π", "2π"] if i == len(rows) - 1 else [], rotation=0)
            ax.set_yticks(ticks, ["0", "π", "2π"] if j == 0 else [], rotation=0)
            if i == 0:
                ax.set_title(c)
            if j == 0:
                ax.set_ylabel(f"{r}\nθ'")
            if i == len(rows) - 1:
                ax.set_xlabel("θ")
    if image is not None:
        fig.colorbar(image, ax=axes, location="bottom", shrink=0.7, aspect=40,
                     label="cosine overlap kernel K(θ, θ') / √(K(θ, θ) K(θ', θ'))")
    if title:
        fig.suptitle(title)
    return fig
