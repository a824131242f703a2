"""The identity rules (C1 in 01, C3 in 03, rules v3) hold at any weights, initialisation included,
so they are not held against init (reconstruction §8.1). What they measure is the decomposition
itself: here a wrong decomposition is planted in a network at initialisation, and the same checks,
at the thresholds the registry holds, fail; the honest decomposition passes them. C4 (04) is a
structural contrast that holds at init too: its checks fail on networks without the structure."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import models, paths, verdict
from dlgn_lib.studies import planes

BOX = (-2.0, 2.0, -2.0, 2.0)


def registered(notebook: str) -> dict:
    (rule,) = [r for r in verdict.registered_rules(notebook) if r["version"] == 3]
    return rule["thresholds"]


def fresh_dlgn(seed=0, widths=(4, 3, 2)):
    torch.manual_seed(seed)
    model = models.DLGN(2, widths, 1, gate_bias=True).double()
    for layer in model.gating:
        torch.nn.init.normal_(layer.bias, std=0.5)
    return model


class OneRun:
    """A run with the snapshots ``models`` (epoch k: models[k]) and a seed."""

    def __init__(self, models_, seed=0):
        self.models, self.epochs, self.config = models_, list(range(len(models_))), SimpleNamespace(seed=seed)

    def model_at(self, epoch=None):
        return self.models[-1 if epoch is None else epoch]


def c1_verdict(table):
    threshold = registered("01")["THRESHOLD"]
    return verdict.evaluate("C1", [verdict.exact_check(f"{r['model']}, {r['gates']}", r["max error float64"],
                                                       r["seeds"], "<=", threshold)
                                   for r in table.to_dict("records")], "quick")


def test_c1_passes_at_init_with_the_honest_path_sum_and_fails_with_a_layer_s_gates_swapped(monkeypatch):
    x = 4 * torch.rand(300, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) - 2
    runs = {seed: {"DLGN": OneRun([fresh_dlgn(seed)], seed),
                   "ReLU": OneRun([models.ReLUNet(2, (4, 3, 2), 1, bias=False).double()], seed)}
            for seed in (0, 1, 2)}
    honest = planes.worst_over_seeds({s: planes.path_sum_errors(r, x) for s, r in runs.items()})
    assert list(honest["seeds"]) == [3, 3, 3] and c1_verdict(honest).word == "SUPPORTED"

    real = paths.path_gates

    def swapped(model, xs, hard=True, *args, **kwargs):   # layer 2's units 0 and 1 exchanged
        return real(model, xs, hard, *args, **kwargs)[:, :, [1, 0, 2]]

    monkeypatch.setattr(paths, "path_gates", swapped)
    wrong = planes.worst_over_seeds({s: planes.path_sum_errors(r, x) for s, r in runs.items()})
    outcome = c1_verdict(wrong)
    assert outcome.word == "NOT SUPPORTED"
    assert all(c.outcome == verdict.FAIL for c in outcome.checks)
    assert (wrong["max error float64"] > 1e-3).all()


def test_worst_over_seeds_takes_the_largest_error_and_counts_seeds_and_snapshots():
    table = lambda e: pd.DataFrame([{"model": "m", "gates": "hard", "epochs checked": 4, "max error float64": e,
                                     "max error float32 (final)": 10 * e}])
    worst = planes.worst_over_seeds({7: table(1e-15), 8: table(3e-14), 9: table(2e-15)})
    assert worst.to_dict("records") == [{"model": "m", "gates": "hard", "seeds": 3, "snapshots checked": 12,
                                         "max error float64": 3e-14, "max error float32 (final)": 3e-13}]


def c3_verdict(worst):
    t = registered("03")
    return verdict.evaluate("C3", [
        verdict.exact_check("disagreements", worst["disagreements"], worst["seeds"], "<=", t["MAX_DISAGREEMENTS"]),
        verdict.exact_check("area z", worst["worst area z"], worst["seeds"], "<=", t["MAX_AREA_Z"]),
        verdict.exact_check("tiling", worst["tiling error"], worst["seeds"], "<=", t["MAX_TILING_ERROR"]),
    ], "quick")


def uniform(n, seed=0):
    lo, hi = torch.tensor([BOX[0], BOX[2]]), torch.tensor([BOX[1], BOX[3]])
    return (lo + (hi - lo) * torch.rand(n, 2, generator=torch.Generator().manual_seed(seed))).double()


def test_c3_passes_at_init_with_the_gating_network_s_hyperplanes_and_fails_with_moved_ones(monkeypatch):
    x_uniform, x_data = uniform(20000), uniform(300, seed=5)
    runs = [OneRun([fresh_dlgn(seed), fresh_dlgn(seed + 10)], seed) for seed in (0, 1, 2)]
    honest = pd.DataFrame([planes.region_checks(r, x_uniform, x_data, BOX) for r in runs])
    assert list(honest["seed"]) == [0, 1, 2] and list(honest["snapshots"]) == [2, 2, 2]
    assert c3_verdict(planes.worst_region_checks(honest)).word == "SUPPORTED"

    real = paths.effective_hyperplanes

    def moved(model, n_layers=None):                  # every hyperplane shifted by 0.3 off the gating net's
        return [(V, c + 0.3) for V, c in real(model, n_layers)]

    monkeypatch.setattr(paths, "effective_hyperplanes", moved)
    wrong = planes.worst_region_checks(pd.DataFrame([planes.region_checks(r, x_uniform, x_data, BOX) for r in runs]))
    outcome = c3_verdict(wrong)
    assert [c.outcome for c in outcome.checks][:2] == [verdict.FAIL, verdict.FAIL]
    assert outcome.word == "NOT SUPPORTED"
    assert wrong["disagreements"] > 0 and wrong["worst area z"] > 5


def test_c3_tiling_check_fails_when_a_cell_goes_missing(monkeypatch):
    run = OneRun([fresh_dlgn(3)])
    real = paths.gate_pattern_cells_2d

    def one_missing(model, box=paths.DEFAULT_BOX):
        cells = real(model, box)
        largest = max(cells, key=lambda k: paths.polygon_area(cells[k]))
        return {k: v for k, v in cells.items() if k != largest}

    monkeypatch.setattr(paths, "gate_pattern_cells_2d", one_missing)
    row = planes.region_checks(run, uniform(2000), uniform(50, seed=5), BOX)
    assert row["tiling error"] > 1e-3
    assert c3_verdict(planes.worst_region_checks(pd.DataFrame([row]))).checks[2].outcome == verdict.FAIL


def test_worst_region_checks_sums_disagreements_and_takes_the_worst_of_the_rest():
    rows = pd.DataFrame([{"seed": 1, "snapshots": 3, "disagreements": 2, "worst area z": 1.5, "tiling error": 1e-16},
                         {"seed": 2, "snapshots": 3, "disagreements": 5, "worst area z": 3.5, "tiling error": 4e-16}])
    assert planes.worst_region_checks(rows) == {"seeds": 2, "disagreements": 7, "worst area z": 3.5,
                                                "tiling error": 4e-16}
    assert np.isclose(planes.worst_region_checks(rows.iloc[:1])["worst area z"], 1.5)


# --------------------------------------------------------------------------- C4 (04): a structural contrast

from dlgn_lib import saliency  # noqa: E402


def c4_tables(make_model, seeds=(0, 1, 2, 3, 4), n_inputs=60):
    x = torch.randn(n_inputs, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    rows = []
    for seed in seeds:
        torch.manual_seed(seed)
        rows.append(saliency.cosine_table(make_model().double(), x, model="m", seed=seed))
    return pd.concat(rows, ignore_index=True)


def c4_checks(table, layers=(1, 2, 3)):
    t = registered("04")
    mins = [verdict.exact_check(f"min layer {layer}", table[table["layer"] == layer]["mean_cos"].min(),
                                table["seed"].nunique(), ">=", t["DLGN_MIN_COS"]) for layer in layers]
    medians = [verdict.seed_check(f"median layer {layer}", saliency.seed_medians(table, "m", layer), "<",
                                  t["RELU_MAX_MEDIAN_COS"]) for layer in layers if layer >= 2]
    return mins, medians


def test_c4_dlgn_check_fails_on_a_relu_net_s_later_layers_and_its_relu_check_on_global_maps():
    relu = c4_tables(lambda: models.ReLUNet(12, (16, 16, 16), 3))
    mins, medians = c4_checks(relu)
    assert mins[0].outcome == verdict.PASS                      # layer 1 of a ReLU net is global too
    assert [c.outcome for c in mins[1:]] == [verdict.FAIL, verdict.FAIL]
    assert all(c.outcome == verdict.PASS for c in medians)      # a ReLU net's later maps bend (at init)

    dlgn = c4_tables(lambda: models.DLGN(12, (16, 16, 16), 3))
    mins, medians = c4_checks(dlgn)
    assert all(c.outcome == verdict.PASS for c in mins)
    assert all(c.outcome == verdict.FAIL for c in medians)      # global maps: the ReLU check fails

    def always_on():                                            # every unit on at every input: a linear net
        net = models.ReLUNet(12, (16, 16, 16), 3)
        with torch.no_grad():
            for layer in net.layers[:-1]:
                layer.bias.fill_(100.0)
        return net

    mins, medians = c4_checks(c4_tables(always_on))
    assert all(c.outcome == verdict.PASS for c in mins) and all(c.outcome == verdict.FAIL for c in medians)


def test_seed_medians_are_each_seed_s_median_over_its_layer_s_neurons():
    table = pd.DataFrame({"model": ["m"] * 7 + ["x"], "layer": [2] * 6 + [3, 2],
                          "seed": [5, 5, 5, 4, 4, 4, 5, 5], "mean_cos": [0.1, 0.9, 0.5, 0.2, 0.4, 0.3, 0.0, 0.0]})
    assert saliency.seed_medians(table, "m", 2) == [0.5, 0.3]
    with pytest.raises(ValueError, match="no rows of model 'm', layer 4"):
        saliency.seed_medians(table, "m", 4)
