"""Notebook 07 (and 08's odt runs): do the half-spaces of later DLGN layers cluster with training?

The run set (:func:`run_configs`, one function, so that 08's odt runs share 07's cache entries),
the unit normals of a model's gating layers (:func:`unit_normals`), the per-layer tables at init
and after training (:func:`layer_tables`, :func:`layer_summary`, :func:`count_table`), the
quantities the verdict reads (:func:`growth`, :func:`deepest_directions`, :func:`extra_growth_table`,
:func:`checks`), the metrics over training (:func:`over_training`, :func:`deepest_over_training`)
and the panels of the figures (:func:`panels`).

Run keys are ``(dataset, kind, seed)``; normals keys add the state, ``(dataset, kind, seed, state)``.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from .. import clusters, config, parts, paths, protocol, verdict
from ..plots import MODEL_COLORS, MODEL_NAMES

__all__ = ["DATASETS", "KINDS", "PANEL_COLORS", "STATES", "accuracy_table", "checks", "count_table",
           "deepest_over_training", "layer_summary", "layer_tables", "normals_of", "over_training", "panels",
           "run_configs", "seed_values", "unit_normals"]

#: The datasets notebook 07 trains on: Fashion-MNIST and the group's SD-I (odt).
DATASETS = ("fashion_mnist", "odt")
#: The models notebook 07 compares: the DLGN and its control, the DLGN-SF.
KINDS = ("dlgn", "dlgn_sf")
#: Snapshot epoch of each state (None: the last snapshot).
STATES = {"init": 0, "trained": None}
#: Panels of the figures: DLGN at init, DLGN trained, DLGN-SF trained (the control).
PANELS = {"DLGN init": ("dlgn", "init"), "DLGN trained": ("dlgn", "trained"),
          "DLGN-SF trained": ("dlgn_sf", "trained")}
#: The colour of each panel of 07's figures (init, trained DLGN, trained DLGN-SF).
PANEL_COLORS = {"DLGN init": "#9ecae1", "DLGN trained": MODEL_COLORS["dlgn"],
                "DLGN-SF trained": MODEL_COLORS["dlgn_sf"]}


def _data_sets(cfg) -> dict:
    """``{dataset: (DataSpec, hidden widths)}``: Fashion-MNIST at ``cfg.fmnist_per_class`` images
    per class, and odt = the group's SD-I (``protocol.data_spec``) at ``cfg.odt_n_total`` points."""
    return {"fashion_mnist": (config.fashion_mnist_spec(cfg.fmnist_per_class), cfg.fmnist_widths),
            "odt": (protocol.data_spec("SD-I", cfg.odt_n_total), cfg.odt_widths)}


def run_configs(cfg, seeds: Sequence[int], *, datasets: Sequence[str] = DATASETS,
                kinds: Sequence[str] = KINDS) -> dict:
    """07's runs: ``{(dataset, kind, seed): RunConfig}`` with ``cfg``'s training sizes.

    ``cfg`` is notebook 07's ``NotebookConfig`` (``dl.config.for_notebook("07", …)``); ``seeds`` the
    model seeds. Notebook 08 takes its odt runs from here (``datasets=("odt",)``), so both share
    cache entries.
    """
    specs = _data_sets(cfg)
    return {(d, k, s): cfg.run(specs[d][0], config.ModelSpec.make(k, specs[d][1]),
                               name=f"{MODEL_NAMES[k]} on {d} (seed {s})").replace(seed=s)
            for d in datasets for k in kinds for s in seeds}


def accuracy_table(runs: Mapping) -> pd.DataFrame:
    """One row per run: data set, model name, seed, epochs, final train and test accuracy."""
    return pd.DataFrame([{"dataset": d, "model": MODEL_NAMES[k], "seed": s, "epochs": run.config.epochs,
                          "train acc": run.final("train_metric"), "test acc": run.final("test_metric")}
                         for (d, k, s), run in runs.items()])


def unit_normals(model) -> list:
    """Per gating layer, the (m_ℓ, d) unit normals v_i = V_i / ‖V_i‖ of the effective hyperplanes
    ``V^ℓ`` (gate biases off: the normal is the whole hyperplane)."""
    return [paths.unit_hyperplanes(V, c)[0] for V, c in paths.effective_hyperplanes(model)]


def normals_of(runs: Mapping, states: Mapping = STATES) -> dict:
    """``{(dataset, kind, seed, state): unit_normals(model at the state's snapshot)}``."""
    return {(*key, state): unit_normals(run.model_at(epoch))
            for key, run in runs.items() for state, epoch in states.items()}


def layer_tables(normals: Mapping, threshold: float) -> pd.DataFrame:
    """``clusters.layer_table`` of every entry of :func:`normals_of`, with columns dataset, model
    (the kind), seed and state."""
    return pd.concat([clusters.layer_table(layers, threshold, dataset=d, model=k, seed=s, state=state)
                      for (d, k, s, state), layers in normals.items()], ignore_index=True)


def layer_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Score, cluster count, mean pairwise |cos| and effective directions per layer (columns), one row
    per (dataset, model, state), mean over seeds."""
    return table.pivot_table(index=["dataset", "model", "state"], columns="layer",
                             values=["score", "n_clusters", "mean_abs_cos", "n_directions"],
                             aggfunc="mean", sort=False)


def count_table(normals: Mapping, taus: Sequence[float]) -> pd.DataFrame:
    """Per (dataset, model name, state, layer), mean over seeds: width m, the cluster count at each τ
    of ``taus`` (columns ``k (τ=…)``), the effective directions ``n_eff`` and the collapse."""
    rows = pd.DataFrame([
        {"dataset": d, "model": MODEL_NAMES[k], "state": state, "layer": layer, "m": len(u),
         **{f"k (τ={tau:g})": n for tau, n in clusters.cluster_counts(u, taus).items()},
         "n_eff": clusters.effective_directions(u), "collapse": clusters.collapse(u)}
        for (d, k, s, state), layers in normals.items() for layer, u in enumerate(layers, start=1)])
    return rows.groupby(["dataset", "model", "state", "layer"], sort=False).mean()


def _rows(table: pd.DataFrame, dataset: str, kind: str, state: str) -> pd.DataFrame:
    return table[(table["dataset"] == dataset) & (table["model"] == kind) & (table["state"] == state)]


def growth(table: pd.DataFrame, dataset: str, kind: str, state: str) -> float:
    """Growth of the clustering score with depth, ``s_L − s_1`` (last minus first layer), mean over
    seeds, from a :func:`layer_tables` table."""
    by_seed = _rows(table, dataset, kind, state).pivot_table(index="seed", columns="layer", values="score")
    return float((by_seed[by_seed.columns.max()] - by_seed[by_seed.columns.min()]).mean())


def extra_growth(table: pd.DataFrame, dataset: str, kind: str) -> float:
    """Δ = growth trained − growth init: what training adds to the growth of the score with depth."""
    return growth(table, dataset, kind, "trained") - growth(table, dataset, kind, "init")


def deepest_directions(table: pd.DataFrame, dataset: str, kind: str, state: str) -> float:
    """Effective directions of the deepest layer, mean over seeds."""
    rows = _rows(table, dataset, kind, state)
    return float(rows[rows["layer"] == rows["layer"].max()]["n_directions"].mean())


def extra_growth_table(table: pd.DataFrame, datasets: Sequence[str] = DATASETS,
                       kinds: Sequence[str] = KINDS) -> pd.DataFrame:
    """Per (dataset, model): growth at init and trained, Δ, and the deepest layer's n_eff."""
    return pd.DataFrame([{"dataset": d, "model": MODEL_NAMES[k],
                          "growth init": growth(table, d, k, "init"),
                          "growth trained": growth(table, d, k, "trained"),
                          "extra growth Δ": extra_growth(table, d, k),
                          "n_eff layer L init": deepest_directions(table, d, k, "init"),
                          "n_eff layer L trained": deepest_directions(table, d, k, "trained")}
                         for d in datasets for k in kinds])


def _per_seed(table: pd.DataFrame, dataset: str, kind: str, state: str, value: str) -> pd.DataFrame:
    return _rows(table, dataset, kind, state).pivot_table(index="seed", columns="layer", values=value, dropna=False)


def seed_growth(table: pd.DataFrame, dataset: str, kind: str) -> pd.DataFrame:
    """Per seed (rows, index ``seed``): growth ``s_L − s_1`` of the clustering score at init and
    trained and Δ (trained − init), from a :func:`layer_tables` or ``compare.gate_layer_table``
    table; NaN where a layer has no score (fewer than two units whose gate varies)."""
    out = pd.DataFrame()
    for state in STATES:
        score = _per_seed(table, dataset, kind, state, "score")
        out[f"growth {state}"] = score[score.columns.max()] - score[score.columns.min()]
    out["extra growth Δ"] = out["growth trained"] - out["growth init"]
    return out


def seed_values(table: pd.DataFrame, dataset: str, kind: str) -> pd.DataFrame:
    """Per seed (rows, index ``seed``): growth ``s_L − s_1`` at init and trained, Δ (trained − init)
    and the deepest layer's effective directions at init and trained, from a :func:`layer_tables` table."""
    out = seed_growth(table, dataset, kind)
    for state in STATES:
        n_eff = _per_seed(table, dataset, kind, state, "n_directions")
        out[f"n_eff layer L {state}"] = n_eff[n_eff.columns.max()]
    return out


def checks(table: pd.DataFrame, min_extra_growth: float, min_directions: float,
           datasets: Sequence[str] = DATASETS, rules: int = 3) -> list:
    """Rule v3's checks for the DLGN, per data set, over seeds with 90 % intervals
    (``verdict.seed_check``): mean Δ >= ``min_extra_growth`` (a trained − init difference) and mean
    effective directions of the deepest layer after training >= ``min_directions`` (a guard against
    collapse, which holds at init by construction: not held against init, see the rule).

    ``rules=4`` (reconstruction §8.2): the same checks with the v4 interval (``dl.parts.check``);
    they decide C6's parts (a) (Δ) and (b) (directions)."""
    seed_check = parts.check if rules >= 4 else verdict.seed_check
    out = []
    for d in datasets:
        depth = int(table.loc[table["dataset"] == d, "layer"].max())
        per_seed = seed_values(table, d, "dlgn")
        out += [seed_check(f"{d}: DLGN extra growth Δ of the score, layer 1 → {depth}",
                           per_seed["extra growth Δ"].to_numpy(), ">=", min_extra_growth),
                seed_check(f"{d}: DLGN effective directions of layer {depth}, trained",
                           per_seed["n_eff layer L trained"].to_numpy(), ">=", min_directions)]
    return out


def over_training(runs: Mapping, threshold: float, kind: str = "dlgn") -> pd.DataFrame:
    """``clusters.layer_table`` at every snapshot of the runs of ``kind``, columns dataset, seed, epoch."""
    return pd.concat([clusters.layer_table(unit_normals(run.model_at(epoch)), threshold,
                                           dataset=d, seed=s, epoch=epoch)
                      for (d, k, s), run in runs.items() if k == kind for epoch in run.epochs],
                     ignore_index=True)


def deepest_over_training(over_time: pd.DataFrame) -> pd.DataFrame:
    """The deepest layer of each data set per snapshot: score, cluster count, n_eff and collapse
    (mean over seeds), epochs as rows and (metric, dataset) as columns."""
    deepest = over_time[over_time["layer"] == over_time.groupby("dataset")["layer"].transform("max")]
    return (deepest.groupby(["dataset", "epoch"])[["score", "n_clusters", "n_directions", "collapse"]]
            .mean().unstack("dataset"))


def panels(normals: Mapping, dataset: str, seed: int) -> dict:
    """The figures' panels of one data set and seed: ``{panel label: per-layer unit normals}``."""
    return {label: normals[dataset, kind, seed, state] for label, (kind, state) in PANELS.items()}
