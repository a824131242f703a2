"""Notebook 07's study module against independent computations: hand-built run configs, numpy
products of the gating weights and the model's own gates, and tables recomputed by plain loops."""
import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import clusters, config, models, protocol
from dlgn_lib.plots import MODEL_NAMES
from dlgn_lib.studies import clusters as study


def test_run_configs_match_configs_built_by_hand_for_any_seeds():
    cfg = config.for_notebook("07", "quick", seed=100)
    seeds = [100, 101, 102]
    built = study.run_configs(cfg, seeds)
    data = {"fashion_mnist": (config.fashion_mnist_spec(cfg.fmnist_per_class), cfg.fmnist_widths),
            "odt": (protocol.data_spec("SD-I", cfg.odt_n_total), cfg.odt_widths)}
    expected = {(d, k, s): cfg.run(spec, config.ModelSpec.make(k, widths), name="x").replace(seed=s)
                for d, (spec, widths) in data.items() for k in ("dlgn", "dlgn_sf") for s in seeds}
    assert list(built) == list(expected) and built == expected
    assert built["odt", "dlgn", 101].name == "DLGN on odt (seed 101)"
    assert built["odt", "dlgn", 101].data.params == protocol.data_spec("SD-I").params
    # notebook 08's odt runs: the same cache entries as 07's
    odt = study.run_configs(cfg, seeds, datasets=("odt",), kinds=("dlgn", "relu"))
    assert odt["odt", "dlgn", 102] == built["odt", "dlgn", 102]
    assert odt["odt", "relu", 100].model.kind == "relu" and len(odt) == 6


@pytest.mark.parametrize("shallow", [False, True])
def test_unit_normals_are_unit_products_of_the_gating_weights_and_predict_the_gates(shallow):
    torch.manual_seed(0)
    model = models.DLGN(6, (5, 4, 3), shallow=shallow).double()
    normals = study.unit_normals(model)
    weights = [layer.weight.detach().numpy() for layer in model.gating]
    V = None
    for W, u in zip(weights, normals):
        V = W if (shallow or V is None) else W @ V
        np.testing.assert_allclose(u.numpy(), V / np.linalg.norm(V, axis=1, keepdims=True), atol=1e-12)
    x = torch.randn(200, 6, dtype=torch.float64)
    for gate, u in zip(model.gates(x, hard=True), normals):
        np.testing.assert_array_equal(gate.numpy() > 0, (x @ u.T).numpy() >= 0)


def toy_table():
    """Scores per layer for two seeds, with n_directions, as layer_tables returns them."""
    rows = []
    scores = {("odt", "dlgn", "init"): [[0, 0, 0.1], [0, 0.1, 0.3]],
              ("odt", "dlgn", "trained"): [[0, 0.2, 0.6], [0.1, 0.3, 0.9]],
              ("odt", "dlgn_sf", "init"): [[0, 0, 0], [0, 0, 0]],
              ("odt", "dlgn_sf", "trained"): [[0.2, 0, 0.1], [0, 0, 0.2]]}
    for (d, k, state), per_seed in scores.items():
        for seed, layer_scores in enumerate(per_seed):
            for layer, score in enumerate(layer_scores, start=1):
                rows.append({"dataset": d, "model": k, "seed": seed, "state": state, "layer": layer,
                             "score": score, "n_directions": 10.0 * seed + layer + (state == "trained")})
    return pd.DataFrame(rows)


def test_growth_and_deepest_directions_by_hand():
    table = toy_table()
    # (s_3 - s_1) per seed, mean: init (0.1 + 0.3) / 2, trained (0.6 + 0.8) / 2
    assert study.growth(table, "odt", "dlgn", "init") == pytest.approx(0.2)
    assert study.growth(table, "odt", "dlgn", "trained") == pytest.approx(0.7)
    assert study.extra_growth(table, "odt", "dlgn") == pytest.approx(0.5)
    assert study.extra_growth(table, "odt", "dlgn_sf") == pytest.approx(0.05)  # seeds: 0.1 - 0.2, 0.2 - 0
    # layer 3, trained: seeds give 4 and 14
    assert study.deepest_directions(table, "odt", "dlgn", "trained") == pytest.approx(9.0)
    assert study.deepest_directions(table, "odt", "dlgn", "init") == pytest.approx(8.0)
    extra = study.extra_growth_table(table, datasets=("odt",))
    assert list(extra["model"]) == ["DLGN", "DLGN-SF"]
    assert extra.loc[0, "extra growth Δ"] == pytest.approx(0.5)
    # rule v3: per-seed values by hand, then a mean over seeds with its interval
    per_seed = study.seed_values(table, "odt", "dlgn")
    assert list(per_seed.index) == [0, 1]
    assert per_seed["growth init"].tolist() == pytest.approx([0.1, 0.3])
    assert per_seed["extra growth Δ"].tolist() == pytest.approx([0.5, 0.5])   # 0.6 - 0.1, 0.8 - 0.3
    assert per_seed["n_eff layer L trained"].tolist() == pytest.approx([4.0, 14.0])
    assert per_seed["n_eff layer L init"].tolist() == pytest.approx([3.0, 13.0])
    checks = study.checks(table, 0.4, 3.0, datasets=("odt",))
    assert [c.name for c in checks] == ["odt: DLGN extra growth Δ of the score, layer 1 → 3",
                                        "odt: DLGN effective directions of layer 3, trained"]
    assert [c.value for c in checks] == pytest.approx([0.5, 9.0])
    # two seeds: the bootstrap interval of a mean spans the two seeds' values
    assert (checks[1].estimate.low, checks[1].estimate.high) == pytest.approx((4.0, 14.0))
    assert [c.outcome for c in checks] == ["pass", "pass"]
    assert [c.outcome for c in study.checks(table, 0.6, 5.0, datasets=("odt",))] == ["fail", "inconclusive"]


def test_the_directions_guard_fails_for_a_deepest_layer_collapsed_onto_one_line():
    """Rule v3's check 2 holds at init by construction; what it guards against is a collapse: the
    same check on a trained deepest layer whose units share one direction (up to sign) fails."""
    rng = np.random.default_rng(0)
    line = np.repeat(rng.standard_normal((1, 8)), 12, axis=0) * rng.choice([-1, 1], size=(12, 1))
    spread = rng.standard_normal((12, 8))
    normals = {("odt", "dlgn", s, state): [rng.standard_normal((12, 8)),
                                           (line + 1e-3 * rng.standard_normal((12, 8))) if state == "trained" else spread]
               for s in range(5) for state in ("init", "trained")}
    table = study.layer_tables(normals, 0.9)
    per_seed = study.seed_values(table, "odt", "dlgn")
    assert per_seed["n_eff layer L trained"].max() < 1.01 and per_seed["n_eff layer L init"].min() > 3
    delta, directions = study.checks(table, 0.1, 2.0, datasets=("odt",))
    assert delta.outcome == "pass"          # the score rises: every unit has a near-twin
    assert directions.outcome == "fail"     # but on one line: the guard catches the collapse


def planted_layers(rng):
    a = np.repeat(np.eye(8)[:4], 3, axis=0) + 0.01 * rng.standard_normal((12, 8))   # 4 groups of 3
    b = np.repeat(np.eye(8)[:1], 12, axis=0) + 0.01 * rng.standard_normal((12, 8))  # one line
    return [rng.standard_normal((12, 8)), a, b]


def test_tables_of_normals_agree_with_plain_loops():
    rng = np.random.default_rng(1)
    normals = {("odt", k, s, state): planted_layers(rng)
               for k in ("dlgn", "dlgn_sf") for s in (0, 1) for state in ("init", "trained")}
    table = study.layer_tables(normals, 0.9)
    assert len(table) == 8 * 3
    summary = study.layer_summary(table)
    counts = study.count_table(normals, (0.8, 0.95))
    for k in ("dlgn", "dlgn_sf"):
        for state in ("init", "trained"):
            for layer in (1, 2, 3):
                us = [normals["odt", k, s, state][layer - 1] for s in (0, 1)]
                score = np.mean([clusters.clustering_score(u, 0.9) for u in us])
                n_eff = np.mean([1 / np.sum(np.linalg.eigvalsh(
                    (u / np.linalg.norm(u, axis=1, keepdims=True)).T
                    @ (u / np.linalg.norm(u, axis=1, keepdims=True)) / len(u)) ** 2) for u in us])
                assert summary.loc[("odt", k, state), ("score", layer)] == pytest.approx(score)
                assert summary.loc[("odt", k, state), ("n_directions", layer)] == pytest.approx(n_eff)
                row = counts.loc[("odt", MODEL_NAMES[k], state, layer)]
                assert row["n_eff"] == pytest.approx(n_eff)
                assert row["k (τ=0.8)"] == np.mean([clusters.cluster_count(u, 0.8) for u in us])
                assert row["m"] == 12
    # the planted layers: 4 clusters of 3 and one line
    assert summary.loc[("odt", "dlgn", "trained"), ("n_clusters", 2)] == 4
    assert summary.loc[("odt", "dlgn", "trained"), ("n_clusters", 3)] == 1
    panels = study.panels(normals, "odt", 1)
    assert list(panels) == ["DLGN init", "DLGN trained", "DLGN-SF trained"]
    assert panels["DLGN-SF trained"] is normals["odt", "dlgn_sf", 1, "trained"]


class FakeRun:
    """A run with snapshots: model_at(epoch) is a DLGN seeded by the epoch (None: the last)."""
    epochs = [0, 3, 7]

    def __init__(self, widths):
        self.widths = widths

    def model_at(self, epoch=None):
        torch.manual_seed(self.epochs[-1] if epoch is None else epoch)
        return models.DLGN(5, self.widths)


def test_normals_and_over_training_read_the_right_snapshots():
    runs = {("a", "dlgn", 0): FakeRun((6, 6)), ("b", "dlgn", 0): FakeRun((6, 6, 6)),
            ("a", "dlgn_sf", 0): FakeRun((6, 6))}
    normals = study.normals_of(runs)
    assert set(normals) == {(*key, state) for key in runs for state in ("init", "trained")}
    torch.manual_seed(7)
    last = study.unit_normals(models.DLGN(5, (6, 6, 6)))
    for got, want in zip(normals["b", "dlgn", 0, "trained"], last):
        torch.testing.assert_close(got, want)
    over = study.over_training(runs, 0.9)
    assert len(over) == 3 * 2 + 3 * 3   # the DLGN runs only, every snapshot, every layer
    deepest = study.deepest_over_training(over)
    assert list(deepest.index) == [0, 3, 7]
    for epoch in (0, 3, 7):
        torch.manual_seed(epoch)
        u = study.unit_normals(models.DLGN(5, (6, 6, 6)))[-1]
        assert deepest.loc[epoch, ("n_directions", "b")] == pytest.approx(clusters.effective_directions(u))
        assert deepest.loc[epoch, ("collapse", "b")] == pytest.approx(clusters.collapse(u))
