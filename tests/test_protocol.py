"""The group's odt protocol: the settings it states, and the published-vs-reproduced table."""
import math
import types

import numpy as np
import pytest

from dlgn_lib import protocol


def test_dlgn_configs_follow_the_groups_settings():
    for name in protocol.DATASETS:
        for kind in ("dlgn", "dlgn_sf"):
            beta, lr, widths = protocol.SETTINGS[name][kind]
            configs = protocol.configs(name, kind)
            assert [c.seed for c in configs] == list(protocol.SEEDS)
            c = configs[0]
            assert c.model.kind == kind and c.model.widths == widths and c.lr == lr
            assert c.model.kwargs() == {"beta": beta, "convention": "group"}
            n_train = c.data.kwargs()["n_total"] // 2
            assert c.batch_size * 10 == n_train and not c.shuffle and not c.curves
            assert c.epochs == 1501 and c.eval_every == 1 and c.optimizer == "adam" and c.weight_decay == 0
            assert c.data.kwargs()["generator"] == "group"
    assert protocol.configs("SD-II", "dln")[0].model.widths == protocol.SETTINGS["SD-II"]["dlgn"][2]
    relu = protocol.configs("SD-I", "relu", seeds=(0, 1))
    assert len(relu) == 2 * len(protocol.RELU_GRID["widths"]) * len(protocol.RELU_GRID["lr"])
    with pytest.raises(ValueError, match="SD-IV"):
        protocol.configs("SD-IV", "dlgn")


def fake_run(config, val, test):
    return types.SimpleNamespace(config=config, meta={"best_val_metric": val, "test_metric_at_best": test},
                                 history={})


def test_comparison_table_against_numpy():
    rng = np.random.default_rng(0)
    runs, accs = [], {}
    for kind in ("dlgn", "dlgn_sf"):
        tests = rng.uniform(0.9, 0.99, size=3)
        accs[kind] = 100 * tests
        runs += [fake_run(c, 0.9, t) for c, t in zip(protocol.configs("SD-I", kind, seeds=(0, 1, 2)), tests)]
    # ReLU: the grid point with the best *validation* mean wins, whatever its test accuracy.
    relu = protocol.configs("SD-I", "relu", seeds=(0, 1, 2))
    for c in relu:
        best = c.model.widths == (64,) * 3 and c.lr == 1e-3
        runs.append(fake_run(c, 0.95 if best else 0.80, 0.70 + 0.01 * c.seed if best else 0.99))
    table = protocol.comparison(runs, names=("SD-I",)).set_index("model")
    for kind in ("dlgn", "dlgn_sf"):
        row = table.loc[kind]
        assert row["mean"] == pytest.approx(accs[kind].mean()) and row["std"] == pytest.approx(accs[kind].std(ddof=1))
        assert row["published"] == protocol.PUBLISHED["SD-I"][kind]
        assert row["difference"] == pytest.approx(accs[kind].mean() - protocol.PUBLISHED["SD-I"][kind])
        within = abs(accs[kind].mean() - row["published"]) <= 2 * accs[kind].std(ddof=1)
        assert row["within 2 std"] == ("yes" if within else "no")
    assert table.loc["relu", "mean"] == pytest.approx(71.0) and table.loc["relu", "n"] == 3
    assert "lr 0.001, widths 64-64-64" in table.loc["relu", "setting"]
    assert table.loc["relu", "seeds"] == "70.0, 71.0, 72.0"
    assert "dln" not in table.index and math.isnan(protocol.PUBLISHED["SD-I"].get("dln", math.nan))
