"""Notebook 10: units of trained networks against the node hyperplanes of the group's odt sets.

* ``run_configs`` — the run set (data set × model × seed), built by one function so that any
  notebook reading these runs shares their cache entries;
* ``measure`` / ``measure_runs`` — ``dl.nodes.layer_table`` at every snapshot of every run, with a
  ``state`` column (init, during, trained);
* ``dlgn_panels`` — the heatmap panels of one run at chosen epochs;
* ``seed_values`` — a verdict check's values: per seed, the mean over layers; ``layer_mean``
  their mean over seeds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import nodes, protocol

__all__ = ["KINDS", "checks_v4", "dlgn_panels", "measure_runs", "run_configs", "seed_values"]

#: The models of notebook 10.
KINDS = ("dlgn", "dlgn_sf", "dlgn_frozen", "relu")
#: The ReLU net's (widths, learning rate): one point of the protocol's ReLU grid.
RELU = ((64, 64, 64), 1e-3)


def configs_for(name: str, kind: str, seeds, epochs: int, n_snapshots: int, relu=RELU) -> dict:
    """The protocol's configs of one data set and model (``dl.protocol.configs``) with
    ``n_snapshots`` snapshots, keyed ``(name, kind, seed)``; for "relu" only the grid point ``relu``."""
    chosen = protocol.configs(name, kind, seeds=seeds, epochs=epochs)
    if kind == "relu":
        chosen = [c for c in chosen if (tuple(c.model.widths), c.lr) == relu]
    return {(name, kind, c.seed): c.replace(n_snapshots=n_snapshots) for c in chosen}


def run_configs(sets, seeds, epochs: int, n_snapshots: int, kinds=KINDS) -> dict:
    """``configs_for`` of every data set and model, in that order (sets outer, then models)."""
    return {key: c for name in sets for kind in kinds
            for key, c in configs_for(name, kind, seeds, epochs, n_snapshots).items()}


def measure(key, run, node_normals, threshold: float, x=None) -> pd.DataFrame:
    """``dl.nodes.layer_table`` of ``run`` (keyed ``(dataset, model, seed)``) at every snapshot, in
    float64; ``x``: the points where a ReLU net's later layers are read (ignored for other models)."""
    name, kind, seed = key
    return pd.concat([nodes.layer_table(run.model_at(epoch).double(), node_normals, threshold,
                                        x=x if kind == "relu" else None,
                                        dataset=name, model=kind, seed=seed, epoch=epoch)
                      for epoch in run.epochs], ignore_index=True)


def measure_runs(runs: dict, node_normals: dict, relu_points: dict, threshold: float) -> pd.DataFrame:
    """``measure`` of every run (``(dataset, model, seed) → run``; ``node_normals`` and
    ``relu_points`` per data set), with ``state``: "init" at epoch 0, "trained" at a run's last
    snapshot, "during" between."""
    table = pd.concat([measure(key, run, node_normals[key[0]], threshold, relu_points[key[0]])
                       for key, run in runs.items()], ignore_index=True)
    last = table.groupby(["dataset", "model", "seed"])["epoch"].transform("max")
    table["state"] = np.where(table["epoch"] == 0, "init", np.where(table["epoch"] == last, "trained", "during"))
    return table


def dlgn_panels(run, epochs) -> dict:
    """Heatmap panels of one run: ``"pass e" → dl.nodes.normals_per_layer`` at each epoch."""
    return {f"pass {epoch}": nodes.normals_per_layer(run.model_at(epoch)) for epoch in epochs}


def seed_values(table: pd.DataFrame, name: str, kind: str, state: str, metric: str, layers=None) -> pd.Series:
    """Per seed (in seed order), the mean over layers (only ``layers`` when given) of ``metric``
    ("share" or "mean") of the rows of ``measure_runs`` for one data set, model and state: the
    per-seed values a rules-v3 check takes its interval over."""
    rows = table[(table["dataset"] == name) & (table["model"] == kind) & (table["state"] == state)]
    if layers is not None:
        rows = rows[rows["layer"].isin(layers)]
    return rows.groupby("seed")[metric].mean().sort_index()


def layer_mean(table: pd.DataFrame, name: str, kind: str, state: str, metric: str, layers=None) -> float:
    """Mean over layers (only ``layers`` when given), then over seeds (``seed_values``)."""
    return float(seed_values(table, name, kind, state, metric, layers).mean())


def checks_v4(table: pd.DataFrame, sets, min_trained: float, max_init: float) -> dict[str, list]:
    """Rules v4 of notebook 10 (reconstruction §8.2): per model ("dlgn", "relu"), the share of units
    on a node (mean over the model's layers, per seed) after the last pass, held against init, and
    at init, on each data set of ``sets``, with v4 intervals (``dl.parts.check``). Both models are
    held to the same statistic and bars (C7 like for like); the DLGN's checks also decide C5 (a)."""
    from .. import parts
    checks = {}
    for kind, name in (("dlgn", "DLGN"), ("relu", "ReLU")):
        def values(s, state):
            return seed_values(table, s, kind, state, "share").to_numpy()
        checks[kind] = ([parts.check(f"{s}: {name} share on a node (mean over layers), trained", values(s, "trained"),
                                     ">=", min_trained, init=values(s, "init")) for s in sets]
                        + [parts.check(f"{s}: {name} share on a node (mean over layers), init", values(s, "init"),
                                       "<=", max_init) for s in sets])
    return checks

