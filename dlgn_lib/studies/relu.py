"""Notebook 08: the ReLU net beside the DLGN (claim C7), on its own runs at the sizes of notebook
06's circle runs (``studies.circle.overlap_configs``) and notebook 07's odt runs
(``studies.clusters.run_configs``).

- **Runs**: ``odt_sizes``, ``odt_configs`` (07's function and sizes, 08's seeds).
- **Switch measurements** (``measure_table``): 06's kernel and per-arc numbers of every snapshot,
  and for the DLGN and the ReLU net the gate switch angles (``compare.switch_metrics``).
- **Boundary figure** (``boundary_figure``, ``boundary_slider``): outputs and switch angles.
- **Comparison rows** R1–R6 (rule v3: ``row_checks``, ``comparison``, ``c7_checks``): each row
  for both models as a statistic over seeds with its 90 % interval and three outcomes, the
  side-by-side table, and C7's two checks, which count the rows by their outcomes.
"""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from .. import circle, compare, config, data, parts, runs as runs_module, verdict, widgets
from ..plots import MODEL_COLORS, MODEL_NAMES
from . import circle as circle_study
from . import clusters as clusters_study

__all__ = ["KINDS", "STATES", "boundary_figure", "boundary_slider", "comparison", "gate_tables", "layer_summary",
           "like_for_like_checks", "measure_table", "odt_configs", "odt_models", "odt_sizes", "row_checks",
           "undecided_notes"]

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
#: A row's reading from the two models' outcomes (pass: shows the effect; fail: does not;
#: inconclusive: the interval straddles the bar).
VERDICT_WORDS = {(verdict.PASS, verdict.PASS): "alike", (verdict.PASS, verdict.FAIL): "ReLU differs",
                 (verdict.FAIL, verdict.PASS): "ReLU only", (verdict.FAIL, verdict.FAIL): "neither"}


def row_word(dlgn: str, relu: str) -> str:
    """"alike", "ReLU differs", "ReLU only", "neither", or which model's row is undecided."""
    if verdict.INCONCLUSIVE in (dlgn, relu):
        return "DLGN undecided" if dlgn == verdict.INCONCLUSIVE else "ReLU undecided"
    return VERDICT_WORDS[dlgn, relu]


# --------------------------------------------------------------------------- runs

def odt_sizes(cfg) -> config.NotebookConfig:
    """Notebook 07's sizes under 08's profile and seed: the sizes of 08's odt runs."""
    return config.for_notebook("07", cfg.profile, seed=cfg.seed)


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
    return runs_module.cached_table("studies.relu.measure_table", {"keys": [list(key) for key in runs], "n_grid": n_grid},
                      runs.values(), lambda: circle_study.snapshot_tables(runs, measures, ["target", "model", "seed"]))


# --------------------------------------------------------------------------- the boundary figure

@torch.no_grad()
def boundary_figure(runs: Mapping[tuple, object], target: str, epoch: int, seed: int, n_grid: int) -> plt.Figure:
    """Top: the target and both models' outputs (±1 labels: 2σ(f) − 1); below, per model, every
    switch angle of every neuron, one row per layer; dotted: the target's jumps."""
    dataset = runs[target, "dlgn", seed].dataset()
    theta = np.linspace(0, 2 * np.pi, 721)
    grid = 2 * np.pi * np.arange(n_grid) / n_grid
    fig, axes = plt.subplots(3, 1, figsize=(6.4, 5.0), sharex=True,   # the book's column: 6.4 inches wide
                             gridspec_kw={"height_ratios": [1.4, 1, 1]})
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

def seed_end_pairs(frame: pd.DataFrame, column: str, kind: str) -> np.ndarray:
    """Per seed, (mean at the last snapshot, mean at init) of ``column`` over the seed's runs of
    ``kind`` in ``frame`` (one run per target); one row per seed, seeds in order. R1 takes the
    ratio of their means (``intervals.bootstrap(..., "ratio of means")``)."""
    mine = frame[frame["model"] == kind].sort_values("epoch")
    ends = mine.groupby(["seed", "target"], sort=True)[column].agg(["last", "first"])
    return ends.groupby(level="seed").mean()[["last", "first"]].to_numpy(dtype=float)


def seed_changes(frame: pd.DataFrame, column: str, kind: str) -> np.ndarray:
    """Per seed, the mean over the seed's runs of ``kind`` of ``column`` at the last snapshot minus
    at init; seeds in order."""
    pairs = seed_end_pairs(frame, column, kind)
    return pairs[:, 0] - pairs[:, 1]


def row_checks(kind: str, steps: pd.DataFrame, mixture: pd.DataFrame, times: pd.DataFrame, both: pd.DataFrame,
               thresholds: Mapping[str, float], depth: int, rules: int = 3) -> dict:
    """Rule v3's rows R1–R6 for one model kind, each a statistic over seeds with its 90 % interval
    (``verdict.seed_check``): R1 the ratio of means of the switch distance trained / init (steps
    runs in ``steps``: the agreeing ones), R2 the rise of the rough arc's switch share, R3 the rise
    of the centred alignment (06's K1), R4 the median fit-time ratio (06's K2), R5' the frozen-gate
    / model final rough-arc loss as a ratio of means held against init (06's K3; ``mixture`` must
    hold the frozen-gate runs), R6 the extra growth Δ of the gate-vector score (seeds whose layers
    have no score drop out; with fewer than two seeds left the row has no value and is undecided,
    ``verdict.undecided_check``). Returns ``{row: SeedCheck}``.

    ``rules=4`` (reconstruction §8.2): every row with the v4 interval (``dl.parts.check``), and R6's
    seeds without a score are counted by v4's missing-value rule, never left out."""
    name = MODEL_NAMES[kind]
    seed_check = parts.check if rules >= 4 else verdict.seed_check
    label = {row: f"{row} {metric.format(depth=depth)}: {name}" for row, _, metric, _ in ROWS}
    op = {row: o for row, _, _, o in ROWS}
    growth = clusters_study.seed_growth(both, GATES, kind)["extra growth Δ"]
    defined = growth.dropna()
    if rules >= 4:
        r6 = parts.check(label["R6"], growth.to_numpy(dtype=float), op["R6"], thresholds["R6"])
    elif len(defined) >= 2:
        r6 = verdict.seed_check(label["R6"] + (f" ({len(growth) - len(defined)} of {len(growth)} seeds without a "
                                               "score left out)" if len(defined) < len(growth) else ""),
                                defined.to_numpy(), op["R6"], thresholds["R6"])
    else:
        r6 = verdict.undecided_check(label["R6"], op["R6"], thresholds["R6"],
                                     f"{len(growth) - len(defined)} of {len(growth)} seeds have a layer with fewer "
                                     "than two units whose gate varies, at init or trained, so no score")
    return {
        "R1": seed_check(label["R1"], seed_end_pairs(steps, "switch distance", kind), op["R1"],
                         thresholds["R1"], statistic="ratio of means"),
        "R2": seed_check(label["R2"], seed_changes(mixture, "switch share rough", kind), op["R2"],
                         thresholds["R2"]),
        "R3": seed_check(label["R3"], circle_study.seed_rises(circle_study.alignment_rises(steps), kind)["rise"],
                         op["R3"], thresholds["R3"]),
        "R4": seed_check(label["R4"], circle_study.seed_ratios(times, name, "fit"), op["R4"], thresholds["R4"],
                         statistic="median"),
        "R5'": seed_check(label["R5'"], circle_study.frozen_pairs(mixture, kind, "last"), op["R5'"],
                          thresholds["R5'"], statistic="ratio of means",
                          init=circle_study.frozen_pairs(mixture, kind, "first")),
        "R6": r6,
    }


def comparison(checks: Mapping[str, Mapping[str, object]], thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The side-by-side table of ``checks[row][kind]`` (``row_checks``): per row, each model's value
    with its 90 % interval and outcome, the seeds it is over, the criterion, and the row's reading
    (``row_word``)."""
    def cell(c) -> str:
        e, f = c.estimate, verdict.format_number
        if isinstance(c, verdict.UndecidedCheck):
            return f"no value, {verdict.MARKS[c.outcome]}"
        return f"{f(e.value)} [{f(e.low)}, {f(e.high)}] {verdict.MARKS[c.outcome]}"

    def seeds(row: str) -> str:
        return " / ".join(dict.fromkeys(str(checks[row][k].estimate.n) for k in KINDS))

    lines = [{"row": row, "analysis": analysis, **{MODEL_NAMES[k]: cell(checks[row][k]) for k in KINDS},
              "seeds": seeds(row), "criterion": f"{op} {verdict.format_number(thresholds[row])}",
              "reading": row_word(checks[row]["dlgn"].outcome, checks[row]["relu"].outcome)}
             for row, analysis, _, op in ROWS]
    return pd.DataFrame(lines).set_index("row")


def undecided_notes(checks: Mapping[str, Mapping[str, object]]) -> list[str]:
    """Why a row has no value for a model (``verdict.UndecidedCheck``), one line each."""
    return [f"{row}, {MODEL_NAMES[k]}: no value: {c.why}" for row, pair in checks.items()
            for k, c in pair.items() if isinstance(c, verdict.UndecidedCheck)]


def like_for_like_checks(checks: Mapping[str, Mapping[str, object]]) -> list:
    """Rule v4's C7 checks in 08, like for like (reconstruction §8.2): the ReLU net's check on every
    row where the DLGN's passes (the pairs that count); a row where the DLGN's is inconclusive
    gives an undecided check in its place (its part is inconclusive whatever the ReLU net shows),
    and a row where the DLGN's fails counts nothing (not shown by the DLGN)."""
    out = []
    for row, pair in checks.items():
        dlgn, other = pair["dlgn"], pair["relu"]
        if dlgn.outcome == verdict.PASS:
            out.append(other)
        elif dlgn.outcome == verdict.INCONCLUSIVE:
            out.append(verdict.undecided_check(other.name, other.op, other.threshold,
                                               f"the DLGN's {row} is undecided, so the pair cannot count"))
    return out


def c7_checks(checks: Mapping[str, Mapping[str, object]], min_dlgn_rows: int) -> list:
    """C7's two checks (rule v3), counting the rows by their outcomes: (1) rows where the DLGN shows
    the effect >= ``min_dlgn_rows`` (undecided DLGN rows might count); (2) rows where the DLGN shows
    it and the ReLU net does not <= 0 (undecided ReLU rows might count)."""
    shown = [row for row, pair in checks.items() if pair["dlgn"].outcome == verdict.PASS]
    open_rows = [row for row, pair in checks.items() if pair["dlgn"].outcome == verdict.INCONCLUSIVE]
    differs = [row for row in shown if checks[row]["relu"].outcome == verdict.FAIL]
    undecided = [row for row in shown if checks[row]["relu"].outcome == verdict.INCONCLUSIVE]

    def rows(names) -> str:
        return ", ".join(names) or "none"

    return [verdict.row_count_check(f"rows where the DLGN shows the effect ({rows(shown)}; undecided: {rows(open_rows)})",
                                    len(shown), len(open_rows), ">=", min_dlgn_rows),
            verdict.row_count_check(f"of those, rows where the ReLU net does not ({rows(differs)}; undecided: "
                                    f"{rows(undecided)})", len(differs), len(undecided), "<=", 0)]
