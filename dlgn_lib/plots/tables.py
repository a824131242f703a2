"""Figures of result tables (claim T, notebook 09): test accuracy per model and data set."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from . import MODEL_COLORS, MODEL_NAMES


def point_values(runs: Sequence, row_of: Callable, row: str, kind: str,
                 metric: str = "test_metric_at_best") -> np.ndarray:
    """``run.meta[metric]`` of the runs of one row (``row_of(run) == row``) and model kind, in order."""
    return np.array([r.meta[metric] for r in runs if row_of(r) == row and r.config.model.kind == kind])


def accuracy_points(runs: Sequence, kinds_of: Mapping[str, Sequence[str]], row_of: Callable,
                    chance: Mapping[str, float] | None = None) -> plt.Figure:
    """Test accuracy per model: mean ± std (ddof 1; 0 for one seed) and every seed, one panel per
    data set (row label, each with its own scale).

    Args:
        runs: the selected runs; ``row_of(run)`` gives a run's row label.
        kinds_of: row label -> the model kinds of its panel, in order.
        chance: row label -> chance level, drawn as a dashed line.
    """
    chance = chance or {}
    fig, axes = plt.subplots(1, len(kinds_of), figsize=(3.2 * len(kinds_of), 3.3), squeeze=False)
    for ax, (row, kinds) in zip(axes[0], kinds_of.items()):
        everything = []
        for i, kind in enumerate(kinds):
            values = point_values(runs, row_of, row, kind)
            std = values.std(ddof=1) if len(values) > 1 else 0.0
            ax.errorbar(i, values.mean(), yerr=std, fmt="o", ms=7, capsize=4, color=MODEL_COLORS[kind])
            ax.plot(np.full(len(values), i + 0.18), values, ".", ms=5, color=MODEL_COLORS[kind], alpha=0.7)
            everything += [values.mean() - std, values.mean() + std, *values]
        low, high = min(everything), max(everything)
        if row in chance:
            low = min(low, chance[row])
            ax.axhline(chance[row], color="0.5", ls="--", lw=1)
        ax.set_ylim(low - 0.02, high + 0.02)
        ax.set_xticks(range(len(kinds)), [MODEL_NAMES[k] for k in kinds], rotation=35, ha="right")
        ax.set_xlim(-0.5, len(kinds) - 0.3)
        ax.set_title(row)
    axes[0][0].set_ylabel("test accuracy (best val epoch)")
    fig.tight_layout()
    return fig
