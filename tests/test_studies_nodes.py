"""dlgn_lib.studies.nodes against hand-built tables, brute-force cosine loops and the protocol's configs."""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import models, paths, protocol
from dlgn_lib.studies import nodes as study


def test_configs_for_keeps_one_relu_grid_point_and_sets_the_snapshots():
    got = study.configs_for("SD-I", "relu", seeds=[100, 101], epochs=7, n_snapshots=3)
    assert list(got) == [("SD-I", "relu", 100), ("SD-I", "relu", 101)]
    for (_, _, seed), c in got.items():
        assert (tuple(c.model.widths), c.lr) == study.RELU and c.n_snapshots == 3 and c.epochs == 7 and c.seed == seed
    grid = protocol.configs("SD-I", "relu", seeds=[100, 101], epochs=7)
    assert len(grid) > len(got)   # the other grid points are left out
    dlgn = study.configs_for("SD-II", "dlgn", seeds=[5], epochs=7, n_snapshots=4)
    (only,) = protocol.configs("SD-II", "dlgn", seeds=[5], epochs=7)
    assert dlgn == {("SD-II", "dlgn", 5): only.replace(n_snapshots=4)}


def test_run_configs_covers_every_set_model_and_seed_once():
    got = study.run_configs(("SD-I", "SD-II"), [100, 101, 102], epochs=5, n_snapshots=2)
    assert list(got) == [(s, k, seed) for s in ("SD-I", "SD-II") for k in study.KINDS for seed in (100, 101, 102)]
    assert len({c.key() for c in got.values()}) == len(got)   # distinct runs


class FakeRun:
    def __init__(self, models_by_epoch):
        self.models = models_by_epoch
        self.epochs = list(models_by_epoch)

    def model_at(self, epoch):
        return self.models[epoch]


def brute_force_alignment(normals, node_normals, threshold):
    """Share of rows whose largest |cos| with a node is >= threshold, and the mean largest |cos|."""
    best = []
    for v in normals:
        best.append(max(abs(float(v @ w)) / (np.linalg.norm(v) * np.linalg.norm(w)) for w in node_normals))
    return sum(b >= threshold for b in best) / len(best), sum(best) / len(best)


def test_measure_runs_against_a_cosine_loop_with_states():
    torch.manual_seed(0)
    node_normals = np.eye(3)[:2]                       # nodes e1, e2 in d = 3
    first, later = models.DLGN(3, (4, 2), 1), models.DLGN(3, (4, 2), 1)
    with torch.no_grad():                               # layer 1 of the later snapshot: 3 units on nodes
        later.gating[0].weight.copy_(torch.tensor([[2.0, 0, 0], [0, -1.0, 0.1], [1, 0, 0.2], [1, 1, 1]]))
    runs = {("SD-x", "dlgn", 7): FakeRun({0: first, 3: first, 9: later})}
    table = study.measure_runs(runs, {"SD-x": node_normals}, {"SD-x": None}, threshold=0.9)
    assert list(table["state"]) == ["init", "init", "during", "during", "trained", "trained"]
    assert list(table["layer"]) == [1, 2] * 3 and set(table["dataset"]) == {"SD-x"} and set(table["seed"]) == {7}
    for _, row in table.iterrows():
        model = runs["SD-x", "dlgn", 7].model_at(row["epoch"]).double()
        V = paths.effective_hyperplanes(model)[row["layer"] - 1][0].detach().numpy()
        share, mean = brute_force_alignment(V, node_normals, 0.9)
        assert row["share"] == pytest.approx(share) and row["mean"] == pytest.approx(mean)
    assert table[(table["epoch"] == 9) & (table["layer"] == 1)]["share"].item() == pytest.approx(0.75)


def test_layer_mean_averages_layers_then_seeds():
    rows = [  # seed 0: layers 0.2, 0.4 (and layer 3 only for seed 0); seed 1: layers 0.6, 1.0
        (0, 1, 0.2), (0, 2, 0.4), (0, 3, 0.9), (1, 1, 0.6), (1, 2, 1.0)]
    table = pd.DataFrame([{"dataset": "A", "model": "dlgn", "state": "trained", "seed": s, "layer": l, "share": v}
                          for s, l, v in rows]
                         + [{"dataset": "A", "model": "dlgn", "state": "init", "seed": 0, "layer": 1, "share": 5.0},
                            {"dataset": "B", "model": "dlgn", "state": "trained", "seed": 0, "layer": 1, "share": 7.0}])
    expected = ((0.2 + 0.4 + 0.9) / 3 + (0.6 + 1.0) / 2) / 2
    assert study.layer_mean(table, "A", "dlgn", "trained", "share") == pytest.approx(expected)
    assert study.layer_mean(table, "A", "dlgn", "trained", "share", layers=[1]) == pytest.approx((0.2 + 0.6) / 2)
    assert study.layer_mean(table, "A", "dlgn", "init", "share") == 5.0
    assert math.isnan(study.layer_mean(table, "A", "relu", "init", "share"))
    # the per-seed values a rules-v3 check takes its interval over, in seed order
    assert study.seed_values(table, "A", "dlgn", "trained", "share").to_dict() == pytest.approx(
        {0: (0.2 + 0.4 + 0.9) / 3, 1: (0.6 + 1.0) / 2})


def test_dlgn_panels_are_the_effective_hyperplanes_at_each_epoch():
    torch.manual_seed(0)
    a, b = models.DLGN(3, (2, 2), 1), models.DLGN(3, (2, 2), 1)
    panels = study.dlgn_panels(FakeRun({0: a, 5: b}), (0, 5))
    assert list(panels) == ["pass 0", "pass 5"]
    for model, panel in ((a, panels["pass 0"]), (b, panels["pass 5"])):
        W1, W2 = model.gating[0].weight.detach().double().numpy(), model.gating[1].weight.detach().double().numpy()
        np.testing.assert_allclose(panel[0], W1)
        np.testing.assert_allclose(panel[1], W2 @ W1)
