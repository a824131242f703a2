"""Notebook 08: the ReLU net beside the DLGN (claim C7), on notebook 06's circle runs
(``studies.circle.overlap_configs``) and notebook 07's odt runs (``studies.clusters.run_configs``).

- **Runs**: ``odt_sizes``, ``odt_configs`` (07's function, so 08 reads 07's cache entries).
- **Switch measurements** (``measure_table``): 06's kernel and per-arc numbers of every snapshot,
  and for the DLGN and the ReLU net the gate switch angles (``compare.switch_metrics``).
- **Boundary figure** (``boundary_figure``, ``boundary_slider``): outputs and switch angles.
- **Comparison rows** R1–R6 (``row_values``, ``comparison``, ``agreement``): each row's number for
  both models, its criterion, and whether both, one or neither show the effect.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from .. import circle, compare, config, data, verdict, widgets
from ..plots import MODEL_COLORS, MODEL_NAMES
from . import circle as circle_study
from . import clusters as clusters_study

#: The two models compared.
KINDS = ("dlgn", "relu")
#: Snapshot epochs of the odt states (None: the last).
STATES = {"init": 0, "trained": None}
GATES = "odt: gate vectors"
HYPERPLANES = "odt: DLGN hyperplanes (07)"
TICKS = ([0, np.pi / 2, np.pi, 1.5 * np.pi, 2 * np.pi], ["0", "π/2", "π", "3π/2", "2π"])
#: (row, analysis, metric, op) of the comparison; ``{depth}`` is the odt nets' number of layers.
ROWS = (("R1", "boundaries settle on the jumps", "steps: switch distance, trained / init", "<="),
        ("R2", "boundaries move to the rough arc", "mixture: rough arc's switch share, trained − init", ">="),
        ("R3", "the overlap kernel aligns", "steps: centred alignment, trained − init", ">="),
        ("R4", "smooth arc fitted first", "mixture: median smooth / rough epochs to 10% of initial loss", "<"),
        ("R5'", "learned features fit the rough arc", "mixture: frozen-gate DLGN / model final rough-arc loss", ">="),
        ("R6", "later layers cluster", "odt: extra growth Δ of the gate-vector score, layer 1 → {depth}", ">="))
VERDICT_WORDS = {(True, True): "alike", (True, False): "ReLU differs", (False, True): "ReLU only",
                 (False, False): "neither"}


# --------------------------------------------------------------------------- runs

def odt_sizes(cfg) -> config.NotebookConfig:
    """Notebook 07's sizes as they were under 07's rule v2 (``config.CLUSTER_SIZES_V2``), under 08's
    profile and seed: the odt runs of 08's rule."""
    return config.for_notebook("07", cfg.profile, seed=cfg.seed, **config.CLUSTER_SIZES_V2[cfg.profile])


def odt_configs(cfg) -> dict:
    """08's odt runs, keyed ("odt", kind, seed): 07's run configs (``studies.clusters.run_configs``)
    for the DLGN and the ReLU net, seeds ``cfg.seed`` … (``cfg.odt_seeds`` of them)."""
    seeds = [cfg.seed + k for k in range(cfg.odt_seeds)]
    return clusters_study.run_configs(odt_sizes(cfg), seeds, datasets=("odt",), kinds=KINDS)


# --------------------------------------------------------------------------- switch measurements

def measure(n_grid: int):
    """The measure of a DLGN or ReLU snapshot: ``circle.overlap_metrics`` and the switch angles on
    an ``n_grid``-angle grid (``compare.switch_metrics``)."""
    return lambda model, dataset: {**circle.overlap_metrics(model, dataset),
                                   **compare.switch_metrics(model, dataset, n_grid)}


def measure_table(runs: Mapping[tuple, object], n_grid: int) -> pd.DataFrame:
    """Every snapshot of every circle run (keys (target, kind, seed)): the switch measure for the
    compared kinds, ``circle.overlap_metrics`` alone for the others."""
    with_switches = measure(n_grid)
    measures = {key: with_switches if key[1] in KINDS else circle.overlap_metrics for key in runs}
    return circle_study.snapshot_tables(runs, measures, ["target", "model", "seed"])


def change(frame: pd.DataFrame, column: str, kind: str, how: str = "difference") -> float:
    """Mean over runs (targets and seeds) at the last epoch against epoch 0: their difference or their ratio."""
    part = frame[frame["model"] == kind]
    first, final = part[part["epoch"] == 0][column].mean(), part[part["epoch"] == part["epoch"].max()][column].mean()
    return float(final / first if how == "ratio" else final - first)


# --------------------------------------------------------------------------- the boundary figure

@torch.no_grad()
def boundary_figure(runs: Mapping[tuple, object], target: str, epoch: int, seed: int, n_grid: int) -> plt.Figure:
    """Top: the target and both models' outputs (±1 labels: 2σ(f) − 1); below, per model, every
    switch angle of every neuron, one row per layer; dotted: the target's jumps."""
    dataset = runs[target, "dlgn", seed].dataset()
    theta = np.linspace(0, 2 * np.pi, 721)
    grid = 2 * np.pi * np.arange(n_grid) / n_grid
    fig, axes = plt.subplots(3, 1, figsize=(8, 5.4), sharex=True, gridspec_kw={"height_ratios": [1.4, 1, 1]})
    axes[0].plot(theta, data.circle_target(torch.from_numpy(theta), dataset.meta["target"], **dataset.meta["params"]).numpy(),
                 color="black", lw=1.2, label="target")
    for ax, kind in zip(axes[1:], KINDS):
        model = runs[target, kind, seed].model_at(epoch).double()
        out = model(circle.points(theta, model))[:, 0].numpy()
        axes[0].plot(theta, np.tanh(out / 2) if dataset.task == "binary" else out, color=MODEL_COLORS[kind], lw=1.2,
                     label=MODEL_NAMES[kind])
        layers = compare.neuron_switch_angles(model, grid)
        for layer, neurons in enumerate(layers, start=1):
            angles = np.concatenate(neurons)
            ax.plot(angles, np.full(len(angles), layer), "|", color=MODEL_COLORS[kind], ms=10, alpha=0.6)
        ax.set_ylim(len(layers) + 0.6, 0.4)
        ax.set_yticks(range(1, len(layers) + 1))
        ax.set_ylabel(f"{MODEL_NAMES[kind]}: layer")
    axes[0].legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=3, frameon=False)
    for ax in axes:
        for mark in dataset.meta["discontinuities"]:
            ax.axvline(mark, color="black", ls=":", lw=0.8, alpha=0.7)
    axes[-1].set_xticks(*TICKS)
    axes[-1].set_xlim(0, 2 * np.pi)
    axes[-1].set_xlabel("θ")
    fig.suptitle(f"{target} target, epoch {epoch} (seed {seed}): outputs and gate switch angles", x=0.02, ha="left")
    fig.tight_layout()
    return fig


def boundary_slider(runs: Mapping[tuple, object], seed: int, n_grid: int, title: str):
    """The boundary figure of any target at any snapshot."""
    epochs = runs[circle_study.STEPS[0], "dlgn", seed].epochs
    return widgets.figure_panel(lambda target, epoch: boundary_figure(runs, target, epoch, seed, n_grid),
                                {"target": widgets.dropdown(list(circle_study.TARGETS), "target"),
                                 "epoch": widgets.epoch_selector(epochs)}, title=title)


# --------------------------------------------------------------------------- odt clustering

def odt_models(odt_runs: Mapping[tuple, object]) -> dict:
    """``{(kind, seed, state): model in float64}`` at init and trained."""
    return {(k, s, state): run.model_at(epoch).double()
            for (_, k, s), run in odt_runs.items() for state, epoch in STATES.items()}


def gate_tables(models: Mapping[tuple, object], x: torch.Tensor, gate_threshold: float,
                hyperplane_threshold: float) -> pd.DataFrame:
    """Per layer: the hyperplane clustering of the DLGNs (07's measure, dataset ``HYPERPLANES``), then
    the gate-vector clustering of both models (``compare.gate_layer_table``, dataset ``GATES``)."""
    normals = {(HYPERPLANES, k, s, state): clusters_study.unit_normals(model)
               for (k, s, state), model in models.items() if k == "dlgn"}
    gates = pd.concat([compare.gate_layer_table(model, x, gate_threshold, dataset=GATES, model=k, seed=s, state=state)
                       for (k, s, state), model in models.items()], ignore_index=True)
    return pd.concat([clusters_study.layer_tables(normals, hyperplane_threshold), gates], ignore_index=True)


def layer_summary(both: pd.DataFrame) -> pd.DataFrame:
    """Score, mean |cos| and units left out per layer, per (dataset, model, state), mean over seeds."""
    return both.pivot_table(index=["dataset", "model", "state"], columns="layer",
                            values=["score", "mean_abs_cos", "constant"], aggfunc="mean", sort=False)


# --------------------------------------------------------------------------- comparison rows

def row_values(kind: str, steps: pd.DataFrame, mixture: pd.DataFrame, times: pd.DataFrame,
               frozen: pd.DataFrame, both: pd.DataFrame) -> dict[str, float]:
    """Rows R1–R6 for one model kind: switch distance ratio and rough-arc share rise, the rise of
    the centred alignment, the median fit-time ratio, the frozen-gate loss ratio, and the extra
    growth of the gate-vector score."""
    name = MODEL_NAMES[kind]
    return {"R1": change(steps, "switch distance", kind, "ratio"),
            "R2": change(mixture, "switch share rough", kind),
            "R3": change(steps, "centred", kind),
            "R4": float(times.loc[name, "fit ratio"].median()),
            "R5'": float(frozen.loc[name, "frozen-gate / model"]),
            "R6": clusters_study.extra_growth(both, GATES, kind)}


def comparison(values: Mapping[str, Mapping[str, float]], thresholds: Mapping[str, float],
               depth: int) -> tuple[dict, pd.DataFrame]:
    """The checks of every row and model (``values[kind][row]``), and the side-by-side table."""
    checks, lines = {}, []
    for row, analysis, metric, op in ROWS:
        metric = metric.format(depth=depth)
        checks[row] = {k: verdict.check(f"{row} {metric}: {MODEL_NAMES[k]}", values[k][row], op, thresholds[row])
                       for k in KINDS}
        lines.append({"row": row, "analysis": analysis,
                      **{MODEL_NAMES[k]: verdict.format_number(c.value) for k, c in checks[row].items()},
                      "criterion": f"{op} {verdict.format_number(thresholds[row])}",
                      "verdict": VERDICT_WORDS[checks[row]["dlgn"].passed, checks[row]["relu"].passed]})
    return checks, pd.DataFrame(lines).set_index("row")


def agreement(checks: Mapping[str, Mapping]) -> tuple[list[str], list[str]]:
    """The rows where the DLGN shows the effect, and those of them where the ReLU net does too."""
    dlgn_rows = [row for row, pair in checks.items() if pair["dlgn"].passed]
    return dlgn_rows, [row for row in dlgn_rows if checks[row]["relu"].passed]
