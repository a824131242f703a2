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
