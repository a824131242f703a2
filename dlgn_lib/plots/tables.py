"""Figures of result tables (claim T, notebook 09): test accuracy per model and data set."""
from __future__ import annotations

import warnings
from typing import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from . import MODEL_COLORS, MODEL_NAMES

__all__ = ["accuracy_points"]

# Seeds with equal accuracies (e.g. 1.000 on circles) stack on one point of a swarm: expected, and
# seaborn's warning about it (raised when the figure is drawn) would print a machine path.
warnings.filterwarnings("ignore", message=r".*of the points cannot be placed", category=UserWarning,
                        module="seaborn")


def point_values(runs: Sequence, row_of: Callable, row: str, kind: str,
                 metric: str = "test_metric_at_best") -> np.ndarray:
    """``run.meta[metric]`` of the runs of one row (``row_of(run) == row``) and model kind, in order."""
    return np.array([r.meta[metric] for r in runs if row_of(r) == row and r.config.model.kind == kind])


def accuracy_points(runs: Sequence, kinds_of: Mapping[str, Sequence[str]], row_of: Callable,
                    chance: Mapping[str, float] | None = None) -> plt.Figure:
    """Test accuracy per model: mean ± std (ddof 1; 0 for one seed) as a large point with bars, and
    every seed as a small point beside it (a seaborn swarm), each model in its registry colour
    (``MODEL_COLORS``); one panel per data set (row label, each with its own scale), at most
    three panels a row so that the figure stays within the book's column (6.4 inches).

    Args:
        runs: the selected runs; ``row_of(run)`` gives a run's row label.
        kinds_of: row label -> the model kinds of its panel, in order.
        chance: row label -> chance level, drawn as a dashed line.
    """
    chance = chance or {}
    ncols = min(len(kinds_of), 2 if len(kinds_of) <= 2 else 3)
    nrows = -(-len(kinds_of) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols if ncols <= 2 else 6.4, round(3.3 * nrows + 0.3, 2)),
                             squeeze=False)
    for ax in axes.flat[len(kinds_of):]:   # the unused cells of the last row
        ax.remove()
    for k, (ax, (row, kinds)) in enumerate(zip(axes.flat, kinds_of.items())):
        everything = []
        seeds = pd.DataFrame([(i + 0.22, kind, value) for i, kind in enumerate(kinds)
                              for value in point_values(runs, row_of, row, kind)], columns=["x", "kind", "value"])
        for i, kind in enumerate(kinds):
            values = point_values(runs, row_of, row, kind)
            std = values.std(ddof=1) if len(values) > 1 else 0.0
            ax.errorbar(i, values.mean(), yerr=std, fmt="o", ms=7, capsize=4, color=MODEL_COLORS[kind])
            everything += [values.mean() - std, values.mean() + std, *values]
        sns.swarmplot(data=seeds, x="x", y="value", hue="kind", palette=dict(MODEL_COLORS), native_scale=True,
                      size=3.5, alpha=0.8, legend=False, ax=ax)
        low, high = min(everything), max(everything)
        if row in chance:
            low = min(low, chance[row])
            ax.axhline(chance[row], color="0.5", ls="--", lw=1)
        ax.set_ylim(low - 0.02, high + 0.02)
        ax.set_xticks(range(len(kinds)), [MODEL_NAMES[k] for k in kinds], rotation=35, ha="right")
        ax.set_xlim(-0.5, len(kinds) - 0.3)
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.set_title(row)
        if k % ncols == 0:
            ax.set_ylabel("test accuracy (best val epoch)")
    handles = [Line2D([], [], ls="", marker="o", ms=7, color="0.3"), Line2D([], [], ls="", marker="o", ms=3.5, color="0.3")]
    names = ["mean ± std over seeds", "one seed"]
    if any(row in chance for row in kinds_of):
        handles.append(Line2D([], [], color="0.5", ls="--", lw=1))
        names.append("chance")
    fig.legend(handles, names, loc="lower center", ncol=len(names), frameon=False)
    fig.tight_layout(rect=(0, 0.3 / fig.get_figheight(), 1, 1))
    return fig
