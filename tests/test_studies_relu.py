"""Notebook 08's run sets, switch measurements, odt clustering and comparison rows, against
hand-built configs, hand-known values and direct computations."""
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import clusters, compare, config, models, paths, protocol, verdict
from dlgn_lib.studies import circle as study, relu


def test_odt_configs_are_08s_hand_built_configs():
    """08 (rule v2) reads 07's odt runs as 07 trained them under its rule v2: under quick 4 gating
    layers of 32, lr 0.002, batch 128 (07's rule v3 moved its own quick to 6 layers, 0.001, 256)."""
    spec = protocol.data_spec("SD-I")
    v2 = {"quick": dict(odt_widths=(32,) * 4, lr=2e-3, batch_size=128, epochs=60, n_snapshots=10),
          "full": dict(odt_widths=(64,) * 6, lr=1e-3, batch_size=256, epochs=100, n_snapshots=20)}
    for profile, sizes in v2.items():
        cfg = config.for_notebook("08", profile, seed=100)
        got = relu.odt_configs(cfg)
        want = {("odt", k, s): config.RunConfig(spec, config.ModelSpec.make(k, sizes["odt_widths"]), epochs=sizes["epochs"],
                                                lr=sizes["lr"], batch_size=sizes["batch_size"],
                                                n_snapshots=sizes["n_snapshots"], seed=s)
                for k in ("dlgn", "relu") for s in (100, 101, 102)}
        assert list(got) == list(want) and [c.key() for c in got.values()] == [c.key() for c in want.values()], profile
        assert relu.odt_sizes(cfg).notebook == "07"
    own = relu.clusters_study.run_configs(config.for_notebook("07", "quick", seed=100), [100], datasets=("odt",))
    assert own["odt", "dlgn", 100].key() != relu.odt_configs(config.for_notebook("08", "quick", seed=100))["odt", "dlgn", 100].key()


def frame(values):
    """Rows (model, epoch, x) from {model: {epoch: [values over runs]}}."""
    return pd.DataFrame([{"model": m, "epoch": e, "x": v} for m, by in values.items()
                         for e, vs in by.items() for v in vs])


def test_change_by_hand():
    f = frame({"dlgn": {0: [1.0, 3.0], 5: [9.0], 9: [0.5, 1.5]}, "relu": {0: [2.0], 9: [5.0]}})
    assert relu.change(f, "x", "dlgn") == pytest.approx(1.0 - 2.0)
    assert relu.change(f, "x", "dlgn", "ratio") == pytest.approx(0.5)
    assert relu.change(f, "x", "relu") == 3.0


def test_comparison_and_agreement_by_hand():
    thresholds = {"R1": 0.9, "R2": 0.05, "R3": 0.05, "R4": 1.0, "R5'": 2.0, "R6": 0.1}
    values = {"dlgn": {"R1": 0.7, "R2": -0.02, "R3": 0.07, "R4": 0.0, "R5'": 5.3, "R6": 0.05},
              "relu": {"R1": 0.95, "R2": 0.13, "R3": 0.15, "R4": 0.0, "R5'": 4.1, "R6": 0.6}}
    checks, table = relu.comparison(values, thresholds, depth=4)
    assert list(table["verdict"]) == ["ReLU differs", "ReLU only", "alike", "alike", "alike", "ReLU only"]
    assert table.loc["R1", "criterion"] == "<= 0.9" and table.loc["R5'", "DLGN"] == verdict.format_number(5.3)
    assert checks["R6"]["dlgn"].name.startswith("R6 odt: extra growth Δ of the gate-vector score, layer 1 → 4")
    assert relu.agreement(checks) == (["R1", "R3", "R4", "R5'"], ["R3", "R4", "R5'"])


def test_row_values_against_direct_computations():
    steps = pd.DataFrame([{"model": m, "epoch": e, "switch distance": d, "centred": c}
                          for m, d0, c0 in (("dlgn", 0.4, 0.1), ("relu", 0.3, 0.2))
                          for e, d, c in ((0, d0, c0), (9, d0 / 2, c0 + 0.1))])
    mixture = pd.DataFrame([{"model": m, "epoch": e, "switch share rough": r}
                            for m in ("dlgn", "relu") for e, r in ((0, 0.5), (9, 0.6))])
    times = pd.DataFrame({"model": ["DLGN"] * 3 + ["ReLU"] * 3, "seed": [1, 2, 3] * 2,
                          "fit ratio": [0.1, 0.3, np.nan, 0.2, 0.4, 0.6]}).set_index(["model", "seed"])
    frozen = pd.DataFrame({"frozen-gate / model": {"DLGN": 5.0, "ReLU": 4.0}})
    rows = []
    for k, grow in (("dlgn", 0.5), ("relu", 0.2)):
        for s in (1, 2):
            for state, top in (("init", 0.1), ("trained", 0.1 + grow * s)):
                rows += [{"dataset": relu.GATES, "model": k, "seed": s, "state": state, "layer": 1, "score": 0.05},
                         {"dataset": relu.GATES, "model": k, "seed": s, "state": state, "layer": 2, "score": top}]
    both = pd.DataFrame(rows)
    got = relu.row_values("dlgn", steps, mixture, times, frozen, both)
    assert got["R1"] == pytest.approx(0.5) and got["R2"] == pytest.approx(0.1) and got["R3"] == pytest.approx(0.1)
    assert got["R4"] == pytest.approx(0.2) and got["R5'"] == 5.0
    assert got["R6"] == pytest.approx(0.5 * 1.5)  # mean over seeds of the growth added by training


def test_gate_tables_hyperplanes_are_07s_normals_in_float64():
    torch.manual_seed(0)
    dlgn, net = models.DLGN(5, (6, 6)).double(), models.ReLUNet(5, (6, 6)).double()
    x = torch.randn(300, 5, dtype=torch.float64)
    model_set = {("dlgn", 1, "init"): dlgn, ("relu", 1, "init"): net}
    both = relu.gate_tables(model_set, x, 0.7, 0.9)
    assert list(both["dataset"].unique()) == [relu.HYPERPLANES, relu.GATES]
    hyper = both[both["dataset"] == relu.HYPERPLANES]
    normals = []
    for V, c in paths.effective_hyperplanes(dlgn):
        V = V.detach().numpy()
        normals.append(V / np.linalg.norm(V, axis=1, keepdims=True))
    want = clusters.layer_table(normals, 0.9)
    np.testing.assert_allclose(hyper["score"].to_numpy(), want["score"].to_numpy())
    gates = both[(both["dataset"] == relu.GATES) & (both["model"] == "relu")]
    np.testing.assert_allclose(gates["score"].to_numpy(), compare.gate_layer_table(net, x, 0.7)["score"].to_numpy())
    summary = relu.layer_summary(both)
    assert summary.loc[(relu.GATES, "relu", "init"), ("constant", 1)] == gates["constant"].iloc[0]


@pytest.fixture(scope="module")
def tiny_runs():
    from dlgn_lib import runs as runs_module
    specs = {name: config.DataSpec.make("circle", target=name.split()[0], n_train=32, n_val=8, n_test=16, **params)
             for name, params in study.target_params(3).items()}
    return {(t, k, 1): runs_module.train_group([config.RunConfig(specs[t], config.ModelSpec.make(k, (4, 4)),
                                                                 epochs=4, n_snapshots=3, seed=1)])[0]
            for t in specs for k in ("dlgn", "relu", "dlgn_frozen")}


def test_measure_table_adds_switches_to_the_compared_models_only(tiny_runs):
    table = relu.measure_table(tiny_runs, 512)
    assert len(table) == sum(len(run.epochs) for run in tiny_runs.values())
    frozen = table[table["model"] == "dlgn_frozen"]
    assert frozen["switch distance"].isna().all() and frozen["centred"].notna().all()
    run = tiny_runs["steps 1", "relu", 1]
    row = table[(table["target"] == "steps 1") & (table["model"] == "relu") & (table["epoch"] == run.epochs[-1])].iloc[0]
    want = compare.switch_metrics(run.model_at(run.epochs[-1]).double(), run.dataset(), 512)
    for key, value in want.items():
        assert row[key] == pytest.approx(value, nan_ok=True)


def test_boundary_figure_marks_every_switch(tiny_runs):
    last = tiny_runs["steps 1", "dlgn", 1].epochs[-1]
    fig = relu.boundary_figure(tiny_runs, "steps 1", last, 1, 256)
    assert len(fig.axes) == 3
    grid = 2 * np.pi * np.arange(256) / 256
    for ax, kind in zip(fig.axes[1:], relu.KINDS):
        model = tiny_runs["steps 1", kind, 1].model_at(last).double()
        n = sum(len(a) for layer in compare.neuron_switch_angles(model, grid) for a in layer)
        drawn = sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() == "|")
        assert drawn == n
    assert relu.boundary_slider(tiny_runs, 1, 256, "switches").children
    plt.close("all")
