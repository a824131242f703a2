"""dlgn_lib.studies.sensitivity: the grid of notebook 11 against hand-written cells and against
notebook 05's run set (the registered cells must be 05's runs), and its tables on a made-up frame."""
import dataclasses

import pandas as pd
import pytest

from dlgn_lib import config, data, sensitivity
from dlgn_lib.studies import sensitivity as study


def test_targets_and_their_names():
    assert study.steps_params("default", 100) == {} and study.mixture_params("default", 100) == {}
    assert study.steps_params(2, 100) == data.random_circle_target("steps", 102)
    assert study.mixture_params(0, 7) == data.random_circle_target("mixture", 7)
    assert study.target_name("default", 100) == "default" and study.target_name(2, 100) == "random 102"


def test_model_spec_leaves_the_defaults_implicit():
    assert study.model_spec("group", 4.0, False, (8,)) == config.ModelSpec.make("dlgn", (8,), convention="group")
    assert study.model_spec("he", 30.0, True, (8,)) == config.ModelSpec.make("dlgn", (8,), convention="he", beta=30.0,
                                                                            gate_bias=True)


def test_grid_configs_has_every_cell_and_seed_once():
    cfg = config.for_notebook("11", "quick", seed=100)
    grid = study.grid_configs(cfg, 100)
    n_targets = len(cfg.steps_targets) + len(cfg.mixture_targets)
    assert len(grid) == (n_targets * len(cfg.n_trains) * len(cfg.inits) * len(cfg.betas) * len(cfg.biases)
                         * cfg.n_seeds) == len({c.key() for c in grid.values()})
    c = grid["steps", 256, "he", 10.0, "on", "random 100", 101]
    assert c.seed == 101 and c.model == study.model_spec("he", 10.0, True, cfg.widths)
    assert dict(c.data.params) == dict(config.DataSpec.make("circle", target="steps", n_train=256,
                                                            **data.random_circle_target("steps", 100)).params)


def test_the_framed_cells_are_notebook_05s_rule_v2_runs():
    """The map's framed cells are 05's quick runs under its rule v2 (seeds 100-102, targets of seed
    100, 400 epochs at lr 0.01); rule v3 moved 05 to fresh seeds and full's learning rate."""
    from dlgn_lib.studies import circle as circle_study
    grid = study.grid_configs(config.for_notebook("11", "quick", seed=100), 100)
    v2_quick = dict(epochs=400, lr=1e-2, n_seeds=3)
    cfg_05 = dataclasses.replace(config.for_notebook("05", "quick", seed=100, **v2_quick), target_seed=100)
    smooth = circle_study.smooth_configs(cfg_05)
    keys_05 = {c.key() for c in smooth.values()}
    registered = [c for (kind, n_train, init, beta, bias, target, seed), c in grid.items()
                  if kind == "steps" and init == "group" and beta == 4.0 and target == "random 100"
                  and seed in cfg_05.seeds]   # 05 has fewer seeds than the map
    assert len(registered) == 2 * len(cfg_05.seeds) and all(c.key() in keys_05 for c in registered)


def test_effect_tables_one_per_effect_of_its_kind():
    rows = [{"kind": kind, "n_train": 256, "init": "group", "beta": 4.0, "bias": "off", "target": "default",
             "seed": seed, **{name: value for name in study.EFFECTS[kind]}}
            for kind, value in (("steps", 0.5), ("mixture", -1.0)) for seed in range(5)]
    effects = pd.DataFrame(rows)
    tables = study.effect_tables(effects)
    assert list(tables) == study.EFFECTS["steps"] + study.EFFECTS["mixture"]
    for kind, names in study.EFFECTS.items():
        for name in names:
            expected = sensitivity.effect_table(effects[effects["kind"] == kind], study.FACTORS, name)
            pd.testing.assert_frame_equal(tables[name], expected)
            assert tables[name]["median"].item() == (0.5 if kind == "steps" else -1.0)


# --------------------------------------------------------------------------- C6 and C7 maps

def test_c6_configs_are_hand_built_07_style_runs():
    from dlgn_lib import protocol
    for profile in ("quick", "full"):
        cfg = config.for_notebook("11", profile, seed=100)
        grid = study.c6_configs(cfg)
        assert len(grid) == (len(cfg.c6_points) * len(cfg.c6_widths) * len(cfg.inits) * len(cfg.c6_depths)
                             * cfg.n_seeds) == len({c.key() for c in grid.values()})
        assert cfg.c6_depths == (2, 4, 6) and cfg.c6_lr == 1e-3 and cfg.c6_batch_size == 256   # 07's depth, lr, batch
    c = grid["odt", 40000, 64, "he", 4, 102]
    want = config.RunConfig(data=protocol.data_spec("SD-I"), model=config.ModelSpec.make("dlgn", (64,) * 4, convention="he"),
                            epochs=cfg.c6_epochs, lr=1e-3, batch_size=256, n_snapshots=2, seed=102)
    assert c.key() == want.key()


class PlantedRun:
    """A run whose model at init and at the end are given per-layer unit normals (``unit_normals``
    is patched to return them)."""
    epochs = [0, 9]

    def __init__(self, init, trained):
        self.layers = {0: init, 9: trained}

    def model_at(self, epoch):
        return self.layers[epoch]


def test_c6_run_effects_against_notebook_07s_per_seed_statistics_and_a_planted_collapse(monkeypatch):
    import numpy as np
    from dlgn_lib import clusters
    from dlgn_lib.studies import clusters as clusters_study
    monkeypatch.setattr(clusters_study, "unit_normals", lambda layers: layers)
    rng = np.random.default_rng(0)

    def unit(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True)
    init = [unit(rng.normal(size=(8, 6))) for _ in range(3)]
    line = unit(rng.normal(size=(1, 6)))
    trained = [unit(rng.normal(size=(8, 6))), unit(rng.normal(size=(8, 6))),
               np.repeat(line, 8, axis=0) * np.array([1, -1] * 4)[:, None]]   # the deepest layer on one line
    run = PlantedRun(init, trained)
    got = study.c6_run_effects(run, 0.9, 2.0)
    # by hand: scores of the first and last layer at both states
    s = {state: [clusters.clustering_score(clusters.abs_cosine_matrix(u), 0.9, is_cos=True) for u in (layers[0], layers[-1])]
         for state, layers in (("init", init), ("trained", trained))}
    assert s["trained"][1] == 1.0
    assert got["extra growth Δ"] == pytest.approx((s["trained"][1] - s["trained"][0]) - (s["init"][1] - s["init"][0]))
    assert got["extra growth Δ"] > 0.5
    assert got["directions above the bar"] == pytest.approx(clusters.effective_directions(trained[-1]) - 2.0)
    assert got["directions above the bar"] == pytest.approx(-1.0)   # one direction: collapse, below the bar
    # notebook 07's per-seed path gives the same two numbers
    table = clusters_study.layer_tables(clusters_study.normals_of({("odt", "dlgn", 5): run},
                                                                  {"init": 0, "trained": 9}), 0.9)
    per_seed = clusters_study.seed_values(table, "odt", "dlgn").loc[5]
    assert got["extra growth Δ"] == pytest.approx(per_seed["extra growth Δ"])
    assert got["directions above the bar"] == pytest.approx(per_seed["n_eff layer L trained"] - 2.0)
    effects = study.c6_effects({("odt", 4000, 8, "group", 3, 5): run}, 0.9, 2.0)
    assert effects.iloc[0].to_dict() == {"kind": "odt", "points": 4000, "width": 8, "init": "group", "depth": 3,
                                         "seed": 5, **got}


def test_c7_configs_share_the_c5_grids_dlgn_runs():
    cfg = config.for_notebook("11", "quick", seed=100)
    grid = study.c7_configs(cfg, 100)
    n_targets = len(cfg.steps_targets) + len(cfg.mixture_targets)
    assert len(grid) == n_targets * 2 * len(cfg.inits) * len(cfg.c7_widths) * cfg.n_seeds == len({c.key() for c in grid.values()})
    c5 = {c.key() for c in study.grid_configs(cfg, 100).values()}
    dlgn = [c for key, c in grid.items() if key[1] == "DLGN"]
    assert dlgn and all(c.key() in c5 for c in dlgn)   # at the C5 grid's width: its runs
    relu = grid["mixture", "ReLU", "he", 16, "random 100", 103]
    assert relu.model == config.ModelSpec.make("relu", (16, 16, 16), convention="he") and relu.seed == 103
    assert (relu.epochs, relu.lr, relu.n_snapshots) == (cfg.epochs, cfg.lr, cfg.n_snapshots)


@pytest.fixture(scope="module")
def tiny_circle_runs():
    from dlgn_lib import runs as runs_module
    from dlgn_lib.studies import circle as circle_study
    specs = {name: config.DataSpec.make("circle", target=name.split()[0], n_train=32, n_val=8, n_test=16, **params)
             for name, params in circle_study.target_params(3).items() if name in ("steps 1", "mixture")}
    return {(t, k, 1): runs_module.train_group([config.RunConfig(specs[t], config.ModelSpec.make(k, (4, 4)),
                                                                 epochs=12, n_snapshots=4, seed=1)])[0]
            for t in specs for k in ("dlgn", "relu")}


def test_c7_run_effects_are_notebook_08s_rows_per_run(tiny_circle_runs):
    import numpy as np
    from dlgn_lib.studies import circle as circle_study
    from dlgn_lib.studies import relu
    table = relu.measure_table(tiny_circle_runs, 512)
    for kind in ("dlgn", "relu"):
        ends = table[table["model"] == kind].sort_values("epoch").groupby("target")
        first, last = ends.first(), ends.last()
        steps = study.c7_run_effects(tiny_circle_runs["steps 1", kind, 1], "steps", 512)
        assert steps["R1 switches settle"] == pytest.approx(
            1 - last.loc["steps 1", "switch distance"] / first.loc["steps 1", "switch distance"])
        assert steps["R3 alignment rise"] == pytest.approx(last.loc["steps 1", "centred"] - first.loc["steps 1", "centred"])
        mixture = study.c7_run_effects(tiny_circle_runs["mixture", kind, 1], "mixture", 512)
        assert mixture["R2 rough switch rise"] == pytest.approx(
            last.loc["mixture", "switch share rough"] - first.loc["mixture", "switch share rough"])
        times = circle_study.fit_times(table[(table["model"] == kind) & (table["target"] == "mixture")], 0.1)
        np.testing.assert_allclose(mixture["R4 fit lead"], -np.log(times["fit ratio"]), equal_nan=True)
    with pytest.raises(ValueError, match="'circle'"):
        study.c7_run_effects(tiny_circle_runs["steps 1", "relu", 1], "circle", 512)


def test_summary_shares_and_agreement_by_hand():
    rows = [{"model": m, "init": i, "seed": s, "gain": {("A", "g"): 1.0, ("A", "h"): -1.0,
                                                        ("B", "g"): 1.0, ("B", "h"): 1.0}[m, i] * (1 + s)}
            for m in ("A", "B") for i in ("g", "h") for s in range(5)]
    table = sensitivity.effect_table(pd.DataFrame(rows), ["model", "init"], "gain")
    tables = {"gain": table}
    summary = sensitivity.summary_table(tables).iloc[0].to_dict()
    assert summary == {"effect": "gain", "cells": 4, "significant (p ≤ 0.05)": 3, "median > 0": 3, "median < 0": 1}
    shares = sensitivity.significant_shares(tables, "init")
    assert shares.loc["gain", "g"] == 1.0 and shares.loc["gain", "h"] == 0.5
    agree = sensitivity.agreement(tables, "model", "A", "B").iloc[0].to_dict()
    assert agree == {"effect": "gain", "cells": 2, "both": 1, "A only": 0, "B only": 1, "neither": 0}


def test_a_factor_with_one_value_moves_into_the_panel_title():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from dlgn_lib.plots import sensitivity as plot
    frame = pd.DataFrame([{"init": i, "width": 32, "depth": d, "seed": s, "gain": 0.1 + s}
                          for i in ("group", "he") for d in (2, 6) for s in range(5)])
    table = sensitivity.effect_table(frame, ["init", "width", "depth"], "gain")
    ax = plot.effect_heatmaps({"gain": table}, ["init"], ["width", "depth"]).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["depth 2", "depth 6"]
    assert ax.get_title() == "gain  (width 32)"
    plt.close("all")
