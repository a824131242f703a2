"""Notebook 08's run sets, switch measurements, odt clustering and comparison rows, against
hand-built configs, hand-known values and direct computations."""
import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import clusters, compare, config, models, paths, protocol, verdict
from dlgn_lib.studies import circle as study, relu


def test_odt_configs_are_08s_hand_built_configs():
    """08 (rule v3) trains its own odt seeds at 07's current sizes: 6 layers, lr 0.001, batch 256,
    widths 32 (quick) / 64 (full); the same configs 07 would build for those seeds, and none of
    07's registered seeds."""
    spec = protocol.data_spec("SD-I")
    sizes = {"quick": dict(odt_widths=(32,) * 6, epochs=30, n_snapshots=10),
             "full": dict(odt_widths=(64,) * 6, epochs=100, n_snapshots=20)}
    for profile, size in sizes.items():
        cfg = config.for_notebook("08", profile, seed=6000)
        got = relu.odt_configs(cfg)
        seeds = range(6000, 6005)
        want = {("odt", k, s): config.RunConfig(spec, config.ModelSpec.make(k, size["odt_widths"]), epochs=size["epochs"],
                                                lr=1e-3, batch_size=256, n_snapshots=size["n_snapshots"], seed=s)
                for k in ("dlgn", "relu") for s in seeds}
        assert list(got) == list(want) and [c.key() for c in got.values()] == [c.key() for c in want.values()], profile
        assert relu.odt_sizes(cfg).notebook == "07"
        own = relu.clusters_study.run_configs(config.for_notebook("07", profile, seed=6000), list(seeds),
                                              datasets=("odt",), kinds=relu.KINDS)
        assert [c.key() for c in own.values()] == [c.key() for c in got.values()]
    registered_07 = relu.clusters_study.run_configs(config.for_notebook("07", "quick", seed=5000), range(5000, 5005),
                                                    datasets=("odt",), kinds=relu.KINDS)
    assert not {c.key() for c in registered_07.values()} & {c.key() for c in relu.odt_configs(
        config.for_notebook("08", "quick", seed=6000)).values()}


def runs_frame(values, column="x"):
    """Rows (model, target, seed, epoch, column) from {(model, target, seed): {epoch: value}}."""
    return pd.DataFrame([{"model": m, "target": t, "seed": s, "epoch": e, column: v}
                         for (m, t, s), by in values.items() for e, v in by.items()])


def test_seed_end_pairs_and_changes_by_hand():
    f = runs_frame({("dlgn", "a", 1): {0: 1.0, 5: 9.0, 9: 0.5}, ("dlgn", "b", 1): {9: 1.5, 0: 3.0},
                    ("dlgn", "a", 2): {0: 2.0, 9: 4.0}, ("relu", "a", 1): {0: 7.0, 9: 7.0}})
    pairs = relu.seed_end_pairs(f, "x", "dlgn")
    assert pairs.tolist() == [[(0.5 + 1.5) / 2, (1.0 + 3.0) / 2], [4.0, 2.0]]   # seed 1: two targets
    assert relu.seed_changes(f, "x", "dlgn").tolist() == [1.0 - 2.0, 2.0]
    assert relu.seed_changes(f, "x", "relu").tolist() == [0.0]


def seed_checks(values, op, threshold):
    return verdict.seed_check("x", values, op, threshold)


THRESHOLDS = {"R1": 0.9, "R2": 0.05, "R3": 0.05, "R4": 1.0, "R5'": 2.0, "R6": 0.1}


def planted(dlgn, relu_values):
    """Row checks from per-seed values per row: {row: values}, thresholds and ops of the rows."""
    ops = {row: op for row, _, _, op in relu.ROWS}
    return {row: {"dlgn": seed_checks(dlgn[row], ops[row], THRESHOLDS[row]),
                  "relu": seed_checks(relu_values[row], ops[row], THRESHOLDS[row])} for row in THRESHOLDS}


def test_comparison_reads_each_row_by_the_two_outcomes():
    clear = {"R1": [0.5, 0.6, 0.55], "R2": [0.2, 0.3, 0.25], "R3": [0.2, 0.3, 0.25], "R4": [0.1, 0.2, 0.3],
             "R5'": [5.0, 6.0, 7.0], "R6": [0.5, 0.6, 0.7]}
    dlgn = {**clear, "R2": [-0.1, -0.2, -0.15], "R6": [0.0, 0.2, 0.1, 0.05, 0.15]}     # R2 not shown, R6 straddles
    relu_values = {**clear, "R1": [0.95, 1.0, 0.97], "R3": [0.0, 0.1, 0.05, 0.07, 0.02]}  # R1 not, R3 straddles
    checks = planted(dlgn, relu_values)
    table = relu.comparison(checks, THRESHOLDS)
    assert list(table["reading"]) == ["ReLU differs", "ReLU only", "ReLU undecided", "alike", "alike", "DLGN undecided"]
    assert table.loc["R1", "criterion"] == "<= 0.9"
    means = sorted(np.mean(r) for r in itertools.product([5.0, 6.0, 7.0], repeat=3))   # all 27 resamples
    low, high = means[math.ceil(0.05 * 27) - 1], means[math.ceil(0.95 * 27) - 1]          # 5 % and 95 % quantiles
    assert table.loc["R5'", "DLGN"] == f"6 [{verdict.format_number(low)}, {verdict.format_number(high)}] pass"
    one, two = relu.c7_checks(checks, 3)
    assert (one.value, one.estimate.high, one.outcome) == (4, 5, verdict.PASS)   # R1, R3, R4, R5' shown; R6 open
    assert (two.value, two.estimate.high, two.outcome) == (1, 2, verdict.FAIL)   # ReLU misses R1; R3 undecided
    assert verdict.evaluate("C7", [one, two], "quick").word == "NOT SUPPORTED"


def test_c7_is_inconclusive_when_an_undecided_row_could_change_it():
    clear = {"R1": [0.5, 0.6, 0.55], "R2": [0.2, 0.3, 0.25], "R3": [0.2, 0.3, 0.25], "R4": [0.1, 0.2, 0.3],
             "R5'": [5.0, 6.0, 7.0], "R6": [0.5, 0.6, 0.7]}
    straddle = [0.0, 0.1, 0.05, 0.07, 0.02]
    checks = planted(clear, {**clear, "R3": straddle})
    one, two = relu.c7_checks(checks, 3)
    assert one.outcome == verdict.PASS and two.outcome == verdict.INCONCLUSIVE
    assert "undecided: R3" in two.name and verdict.evaluate("C7", [one, two], "full").word == "INCONCLUSIVE"
    few = {**clear, "R2": [-0.1, -0.2, -0.15], "R3": [-0.1, -0.2, -0.15], "R4": [2.0, 3.0, 4.0],
           "R6": [0.05, 0.15, 0.1, 0.12, 0.07]}                                          # straddles 0.1
    one, _ = relu.c7_checks(planted(few, clear), 3)
    assert (one.value, one.estimate.high, one.outcome) == (2, 3, verdict.INCONCLUSIVE)   # R1, R5' shown, R6 open
    one, _ = relu.c7_checks(planted({**few, "R6": [0.0, 0.01, 0.02]}, clear), 3)
    assert one.outcome == verdict.FAIL                                                  # 2 shown, none open
    assert one.line().startswith("  [FAIL] rows where the DLGN shows the effect (R1, R5'; undecided: none) = 2  "
                                 "(threshold: >= 3; counted from the rows' outcomes, 2 to 2")


def test_row_checks_against_direct_computations():
    steps = pd.DataFrame([{"model": m, "target": t, "seed": s, "epoch": e, "switch distance": d, "centred": c}
                          for m, d0, c0 in (("dlgn", 0.4, 0.1), ("relu", 0.3, 0.2)) for t in ("a", "b")
                          for s in (1, 2, 3)
                          for e, d, c in ((0, d0 * s, c0), (9, d0 * s / (2 if t == "a" else 4), c0 + 0.1 * s))])
    mixture = pd.DataFrame([{"model": m, "target": "mixture", "seed": s, "epoch": e, "switch share rough": r,
                             "loss rough": loss}
                            for m, scale in (("dlgn", 1.0), ("relu", 2.0), ("dlgn_frozen", 10.0)) for s in (1, 2, 3)
                            for e, r, loss in ((0, 0.5, 1.0 * s), (9, 0.5 + 0.1 * s, scale * 0.01 * s))])
    times = pd.DataFrame({"model": ["DLGN"] * 3 + ["ReLU"] * 3, "seed": [1, 2, 3] * 2,
                          "fit ratio": [0.1, 0.3, np.nan, 0.2, 0.4, 0.6]}).set_index(["model", "seed"])
    rows = []
    for k, grow in (("dlgn", 0.5), ("relu", 0.2)):
        for s in (1, 2, 3):
            for state, top in (("init", 0.1), ("trained", 0.1 + grow * s)):
                rows += [{"dataset": relu.GATES, "model": k, "seed": s, "state": state, "layer": 1, "score": 0.05},
                         {"dataset": relu.GATES, "model": k, "seed": s, "state": state, "layer": 2, "score": top}]
    both = pd.DataFrame(rows)
    got = relu.row_checks("dlgn", steps, mixture, times, both, THRESHOLDS, depth=2)
    # R1: per seed the mean over targets a and b: trained (d/2 + d/4) / 2 against d, summed over seeds
    assert got["R1"].value == pytest.approx(sum(0.4 * s * 0.375 for s in (1, 2, 3)) / sum(0.4 * s for s in (1, 2, 3)))
    assert got["R2"].value == pytest.approx(np.mean([0.1, 0.2, 0.3]))
    assert got["R3"].value == pytest.approx(np.mean([0.1, 0.2, 0.3]))
    assert got["R4"].value == pytest.approx(0.3) and got["R4"].estimate.statistic == "median"   # 0.1, 0.3, inf
    assert got["R5'"].value == pytest.approx(10.0) and got["R5'"].init.value == pytest.approx(1.0)
    assert got["R6"].value == pytest.approx(np.mean([0.5, 1.0, 1.5]))  # the growth training adds, per seed
    assert got["R6"].name == "R6 odt: extra growth Δ of the gate-vector score, layer 1 → 2: DLGN"
    # R4: a seed whose arcs never get there (inf) puts the median's interval up to inf: undecided
    assert [c.outcome for c in got.values()] == [verdict.PASS] * 3 + [verdict.INCONCLUSIVE] + [verdict.PASS] * 2
    with pytest.raises(verdict.RuleError):                       # a frozen net far worse already at init
        relu.row_checks("dlgn", steps, mixture.assign(**{"loss rough": mixture["loss rough"] * np.where(
            mixture["model"] == "dlgn_frozen", 10.0, 1.0)}), times, both, THRESHOLDS, depth=2)


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


def test_r6_without_a_score_at_init_is_undecided_never_a_pass_or_a_fail():
    """A ReLU net whose deepest layer has fewer than two units with a varying gate at init has no
    score there: its Δ is undefined, so R6 cannot be decided (seeds without it drop out first)."""
    rows = []
    for s in (1, 2, 3):
        for state, top in (("init", np.nan if s < 3 else 0.1), ("trained", 0.9)):
            rows += [{"dataset": relu.GATES, "model": "relu", "seed": s, "state": state, "layer": 1, "score": 0.0},
                     {"dataset": relu.GATES, "model": "relu", "seed": s, "state": state, "layer": 2, "score": top}]
    growth = relu.clusters_study.seed_growth(pd.DataFrame(rows), relu.GATES, "relu")["extra growth Δ"]
    assert growth.isna().tolist() == [True, True, False] and growth.iloc[2] == pytest.approx(0.8)
    steps = pd.DataFrame([{"model": "relu", "target": "a", "seed": s, "epoch": e, "switch distance": 1.0 - 0.5 * (e > 0),
                           "centred": 0.1 * e} for s in (1, 2, 3) for e in (0, 1)])
    mixture = pd.DataFrame([{"model": m, "target": "mixture", "seed": s, "epoch": e, "switch share rough": 0.5,
                             "loss rough": (1.0 if e == 0 else (0.5 if m == "dlgn_frozen" else 0.01))}
                            for m in ("relu", "dlgn_frozen") for s in (1, 2, 3) for e in (0, 1)])
    times = pd.DataFrame({"model": ["ReLU"] * 3, "seed": [1, 2, 3], "fit ratio": [0.1, 0.2, 0.3]}).set_index(["model", "seed"])
    got = relu.row_checks("relu", steps, mixture, times, pd.DataFrame(rows), THRESHOLDS, depth=2)
    assert isinstance(got["R6"], verdict.UndecidedCheck) and got["R6"].outcome == verdict.INCONCLUSIVE
    assert "2 of 3 seeds" in got["R6"].why
    assert " ".join(got["R6"].line().split()).startswith(
        "[inconclusive] R6 odt: extra growth Δ of the gate-vector score, layer 1 → 2: ReLU = nan (threshold: >= 0.1; "
        "no value: 2 of 3 seeds")
    assert relu.undecided_notes({"R6": {"relu": got["R6"], "dlgn": got["R1"]}}) == [f"R6, ReLU: no value: {got['R6'].why}"]
    table = relu.comparison({row: {"dlgn": c, "relu": c} for row, c in got.items()}, THRESHOLDS)
    assert table.loc["R6", "ReLU"] == "no value, inconclusive" and table.loc["R6", "reading"] == "DLGN undecided"
    rows = [r for r in rows if not (r["seed"] == 1 and r["state"] == "init" and r["layer"] == 2)] + [
        {"dataset": relu.GATES, "model": "relu", "seed": 1, "state": "init", "layer": 2, "score": 0.2}]
    got = relu.row_checks("relu", steps, mixture, times, pd.DataFrame(rows), THRESHOLDS, depth=2)
    assert got["R6"].estimate.n == 2 and "(1 of 3 seeds without a score left out)" in got["R6"].name
