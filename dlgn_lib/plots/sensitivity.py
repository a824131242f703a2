"""Sensitivity maps: a claim's effect over a grid of settings, as annotated heatmaps.

Each heatmap cell is one setting (``dlgn_lib.sensitivity.effect_table``): its colour is the median
effect over seeds (blue: the claimed direction, red: against it; a labelled colour bar per effect), its text the median and the
number of seeds pointing the claimed way, with ``*`` where the one-sided sign test gives
p ≤ ``sensitivity.ALPHA``. A framed cell marks the registered setting in which the verdict is
checked.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.patches import Rectangle

__all__ = ["effect_heatmaps"]


#: How factor names are shown.
FACTOR_NAMES = {"beta": "β", "bias": "gate bias", "init": "init", "n_train": "n", "target": "target"}


def _labels(table: pd.DataFrame, factors: Sequence[str]) -> pd.Series:
    def show(value):
        return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)
    return table[list(factors)].apply(
        lambda row: ", ".join(f"{FACTOR_NAMES.get(f, f)} {show(v)}" for f, v in row.items()), axis=1)


def _varying(table: pd.DataFrame, factors: Sequence[str]) -> list[str]:
    """The factors that take more than one value in ``table``; the first one if none does (a
    heatmap's axis needs a label). The others are shown once, in the panel's title."""
    varying = [f for f in factors if table[f].nunique(dropna=False) > 1]
    return varying or list(factors[:1])


def effect_heatmaps(tables: Mapping[str, pd.DataFrame], rows: Sequence[str], cols: Sequence[str], *,
                    registered: Mapping | None = None, title: str = "") -> plt.Figure:
    """One heatmap per effect (``tables``: effect name → ``effect_table`` output), one above another.

    Args:
        rows, cols: the factor columns whose combinations form the heatmap's rows and columns.
        registered: factor → value (or list of values) of the registered cells, framed in black.

    A factor with one value in a table labels no row or column: it is named once in the panel's
    title.
    """
    first = next(iter(tables.values()))
    n_rows, n_cols = len(first.groupby(list(rows))), len(first.groupby(list(cols)))
    col_chars = max(len(label) for label in _labels(first, _varying(first, cols)))
    row_chars = max(len(label) for label in _labels(first, _varying(first, rows)))
    # Row labels (about 0.065 in a character at 8 pt), colour bar and its label, and the cells: at most
    # 6.5 in wide, to fit the book's 6.7 in column (cells narrow to about 0.55 in for a wide grid).
    width = min(6.5, 1.4 + 0.065 * row_chars + 0.8 * n_cols)
    fig, axes = plt.subplots(len(tables), 1, squeeze=False, constrained_layout=True,
                             figsize=(width, len(tables) * (1.2 + 0.5 * n_rows + 0.085 * col_chars)))
    for ax, (name, table) in zip(axes[:, 0], tables.items()):
        fixed = [f for f in [*rows, *cols] if f not in _varying(table, rows) + _varying(table, cols)]
        frame = table.assign(_row=_labels(table, _varying(table, rows)), _col=_labels(table, _varying(table, cols)))
        median = frame.pivot(index="_row", columns="_col", values="median").loc[
            list(dict.fromkeys(frame["_row"])), list(dict.fromkeys(frame["_col"]))]
        def shown(m):
            return f"{m:+.2f}" if np.isfinite(m) else ("n/a" if np.isnan(m) else ("+∞" if m > 0 else "−∞"))
        text = frame.assign(_text=[f"{shown(m)}{'*' if s else ''}\n{p}/{n}"
                                   for m, s, p, n in zip(frame["median"], frame["significant"],
                                                         frame["positive"], frame["n"])])
        annot = text.pivot(index="_row", columns="_col", values="_text").loc[median.index, median.columns]
        values = median.to_numpy(dtype=float)
        finite = np.abs(values[np.isfinite(values)])
        limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        median = median.astype(float).clip(-limit, limit)   # ±∞ (an arc that never gets there) at full colour
        with warnings.catch_warnings():  # seaborn 0.13 calls a colormap method matplotlib deprecates
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            sns.heatmap(median, ax=ax, cmap="RdBu", center=0.0, vmin=-limit, vmax=limit,
                        annot=annot.to_numpy(), fmt="", annot_kws={"fontsize": 8}, cbar_kws={"shrink": 0.8, "label": "median over seeds\n(blue: the claimed way)"},
                        linewidths=0.5, linecolor="white")
        ax.set_title(name + (f"  ({_labels(table.iloc[:1], fixed).iloc[0]})" if fixed else ""), fontsize=9)
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(labelsize=8)
        cell = (width - 1.4 - 0.065 * row_chars) / median.shape[1]   # a cell's width (inches), about
        if max(len(str(c)) for c in median.columns) * 0.065 > 0.9 * cell:
            ax.tick_params(axis="x", labelrotation=90)   # labels wider than their cell: upright, not overlapping
        if registered:
            hit = frame[np.logical_and.reduce([frame[f].isin(v if isinstance(v, (list, tuple, set)) else [v])
                                               for f, v in registered.items() if f in frame])]
            for _, cell in hit.iterrows():
                r, c = list(median.index).index(cell["_row"]), list(median.columns).index(cell["_col"])
                ax.add_patch(Rectangle((c, r), 1, 1, fill=False, edgecolor="black", linewidth=2))
    if title:
        fig.suptitle(title)
    return fig
