"""Notebooks 05, 06 and 08's run sets and tables, against hand-built configs and brute-force loops."""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dlgn_lib import circle, config, data, fidelity, intervals, plots
from dlgn_lib.studies import circle as study


def sizes(notebook, **overrides):
    cfg = config.for_notebook(notebook, "quick", seed=100, **overrides)
    return config.replace(cfg, target_seed=100)


def test_smooth_configs_are_notebook_05s_hand_built_configs():
    cfg = sizes("05")
    got = study.smooth_configs(cfg)
    want = {}
    for target in ["steps 1", "steps 2", "steps 3", "mixture"]:
        kind = target.split()[0]
        params = data.random_circle_target(kind, 100 + (int(target[-1]) - 1 if kind == "steps" else 0))
        spec = config.DataSpec.make("circle", target=kind, n_train=256, **params)
        for setting, options in (("no gate bias", {}), ("gate bias", {"gate_bias": True})):
            for seed in range(100, 110):   # rule v4: 10 seeds under quick
                run = config.RunConfig(spec, config.ModelSpec.make("dlgn", (16, 16, 16), **options),
                                       name=f"DLGN, {setting}, circle-{target} (seed {seed})", epochs=800, lr=5e-3,
                                       n_snapshots=30, eval_every=10, seed=seed)
                want[target, setting, seed] = run
    assert list(got) == list(want)
    assert [c.key() for c in got.values()] == [c.key() for c in want.values()]
    assert got == want


def overlap_by_hand(n_train, widths, epochs, lr, n_snapshots, seeds, target_seed=100):
    """Notebook 06's run set written out: three models on three steps targets and the mixture."""
    want = {}
    for target in ["steps 1", "steps 2", "steps 3", "mixture"]:
        kind = target.split()[0]
        params = data.random_circle_target(kind, target_seed + (int(target[-1]) - 1 if kind == "steps" else 0))
        spec = config.DataSpec.make("circle", target=kind, n_train=n_train, **params)
        for model in ("dlgn", "relu", "dlgn_frozen"):
            for seed in seeds:
                want[target, model, seed] = config.RunConfig(
                    spec, config.ModelSpec.make(model, widths), name="", epochs=epochs, lr=lr,
                    n_snapshots=n_snapshots, eval_every=10, seed=seed)
    return want


def test_overlap_configs_of_06_and_08_are_hand_built():
    # 06 (rule v4): quick at full's learning rate, 10 seeds; 08 (rule v4) trains its own 10 seeds at 06's sizes.
    cases = ((study.overlap_configs(sizes("06")), (256, (16, 16, 16), 800, 5e-3, 30, range(100, 110))),
             (study.overlap_configs(sizes("08")), (256, (16, 16, 16), 800, 5e-3, 30, range(100, 110))))
    for got, args in cases:
        want = overlap_by_hand(*args)
        assert list(got) == list(want)
        assert [c.key() for c in got.values()] == [c.key() for c in want.values()]
    full_06 = study.overlap_configs(config.replace(config.for_notebook("06", "full", seed=100), target_seed=100))
    full_08 = study.overlap_configs(config.replace(config.for_notebook("08", "full", seed=100), target_seed=100))
    assert [c.key() for c in full_06.values()] == [c.key() for c in full_08.values()]   # full's sizes did not move
    assert list(full_06) == list(overlap_by_hand(1024, (64, 64, 64), 4000, 5e-3, 60, range(100, 110)))
    fewer = study.overlap_configs(sizes("08", n_seeds=2))
    assert {s for *_, s in fewer} == {100, 101}


def test_target_params_draw_steps_from_consecutive_seeds():
    params = study.target_params(7)
    assert list(params) == ["steps 1", "steps 2", "steps 3", "mixture"]
    for k in range(3):
        assert params[f"steps {k + 1}"] == data.random_circle_target("steps", 7 + k)
    assert "jumps at θ" in study.jump_lines(params)


def fake_run(loss, metric, test):
    values = {"train_loss": loss, "train_metric": metric, "test_metric": test}
    return SimpleNamespace(final=lambda name: values[name])


def test_final_fit_is_the_mean_over_seeds_in_key_order():
    rng = np.random.default_rng(0)
    runs = {(t, k, s): fake_run(*rng.random(3)) for t in ("b", "a") for k in ("relu", "dlgn") for s in (1, 2, 3)}
    table = study.final_fit(runs, ["target", "model"])
    assert list(table.index) == [("b", "ReLU"), ("b", "DLGN"), ("a", "ReLU"), ("a", "DLGN")]
    for t in ("a", "b"):
        for k in ("relu", "dlgn"):
            for column, name in (("train loss", "train_loss"), ("test metric", "test_metric")):
                want = sum(runs[t, k, s].final(name) for s in (1, 2, 3)) / 3
                assert table.loc[(t, plots.MODEL_NAMES[k]), column] == pytest.approx(want, rel=1e-12)


def test_fidelity_tables_by_hand():
    checks = {("steps 1", "dlgn", 1): fidelity.Fidelity("binary", 0.99, 0.95),
              ("steps 1", "dlgn", 2): fidelity.Fidelity("binary", 0.99, 0.99),
              ("mixture", "dlgn", 1): fidelity.Fidelity("regression", 0.9, 0.1),
              ("mixture", "dlgn", 2): fidelity.Fidelity("regression", 0.9, 0.85)}
    grid = study.fidelity_grid(checks, ["target", "model"])
    assert grid.loc[("steps 1", "dlgn"), 1] == "0.990 / 0.950 DISAGREE"
    assert grid.loc[("mixture", "dlgn"), 2] == "0.900 / 0.850 agree"
    assert list(grid.index) == [("steps 1", "dlgn"), ("mixture", "dlgn")]
    summary = study.fidelity_summary(checks)
    assert summary.loc[("steps 1", "DLGN"), "agree"] == 1 and summary.loc[("steps 1", "DLGN"), "runs"] == 2
    assert summary.loc[("mixture", "DLGN"), "hard"] == pytest.approx(0.475)
    lines = study.left_out_lines(checks, ["dlgn"]).splitlines()
    assert lines == ["dlgn: 1 of 2 steps runs left out of S1–S3 (steps 1 seed 1)",
                     "mixture: 1 of 2 runs agree (not used by M1–M2 either way)"]


def ends_frame(rng):
    rows = []
    for setting in ("no gate bias", "gate bias"):
        for target in ("steps 1", "steps 2"):
            for seed in (1, 2):
                for state in ("init", "trained"):
                    rows.append({"target": target, "setting": setting, "seed": seed, "state": state,
                                 "epoch": 0 if state == "init" else 9, **dict(zip(
                                     ["weighted distance", "purity", "rotated purity", "tolerant share",
                                      "rotated tolerant share"], rng.random(5)))})
    return pd.DataFrame(rows)


def test_steps_summary_against_a_loop():
    ends = ends_frame(np.random.default_rng(1))
    floors = {"steps 1": 0.01, "steps 2": 0.02, "steps 3": 0.03}
    table, means = study.steps_summary(ends, floors)
    assert table.loc[("gate bias", "steps 3"), "runs"] == 0 and math.isnan(table.loc[("gate bias", "steps 3"), "purity gain"])
    for setting in ("no gate bias", "gate bias"):
        ratios, purity = [], []
        for target in ("steps 1", "steps 2"):
            rows = [r for r in ends.to_dict("records") if r["setting"] == setting and r["target"] == target]
            mean = {st: np.mean([r["weighted distance"] for r in rows if r["state"] == st]) for st in ("init", "trained")}
            if setting == "gate bias":
                ratio = mean["trained"] / mean["init"]
            else:
                f = floors[target]
                ratio = (mean["trained"] - f) / (mean["init"] - f)
            gains = []
            for seed in (1, 2):
                e = {r["state"]: r["purity"] - r["rotated purity"] for r in rows if r["seed"] == seed}
                gains.append(e["trained"] - e["init"])
            assert table.loc[(setting, target), "distance ratio"] == pytest.approx(ratio, rel=1e-12)
            assert table.loc[(setting, target), "purity gain"] == pytest.approx(np.mean(gains), rel=1e-12)
            ratios.append(ratio)
            purity.append(np.mean(gains))
        assert means.loc[setting, "distance ratio"] == pytest.approx(np.mean(ratios), rel=1e-12)
        assert means.loc[setting, "purity gain"] == pytest.approx(np.mean(purity), rel=1e-12)


def test_steps_seed_values_against_a_loop_and_the_ratio_of_means():
    ends = ends_frame(np.random.default_rng(2))
    ends = ends[~((ends["seed"] == 2) & (ends["target"] == "steps 2") & (ends["setting"] == "gate bias"))]  # a run left out
    floors = {"steps 1": 0.01, "steps 2": 0.02}
    for setting in ("no gate bias", "gate bias"):
        values = study.steps_seed_values(ends, floors, setting)
        assert list(values.index) == [1, 2]
        for seed in (1, 2):
            rows = [r for r in ends.to_dict("records") if r["setting"] == setting and r["seed"] == seed]
            targets = sorted({r["target"] for r in rows})
            assert values.loc[seed, "runs"] == len(targets)
            num = den = 0.0
            gains = []
            for t in targets:
                by = {r["state"]: r for r in rows if r["target"] == t}
                f = floors[t] if setting == "no gate bias" else 0.0
                num += by["trained"]["weighted distance"] - f
                den += by["init"]["weighted distance"] - f
                gains.append((by["trained"]["tolerant share"] - by["trained"]["rotated tolerant share"])
                             - (by["init"]["tolerant share"] - by["init"]["rotated tolerant share"]))
            assert values.loc[seed, "distance trained"] == pytest.approx(num, rel=1e-12)
            assert values.loc[seed, "distance init"] == pytest.approx(den, rel=1e-12)
            assert values.loc[seed, "tolerant gain"] == pytest.approx(np.mean(gains), rel=1e-12)
        # S1 under rule v3: the pooled ratio over every run, resampling seeds
        pairs = values[["distance trained", "distance init"]].to_numpy()
        pooled = sum(r["weighted distance"] - (floors[r["target"]] if setting == "no gate bias" else 0)
                     for r in ends.to_dict("records") if r["setting"] == setting and r["state"] == "trained")
        pooled /= sum(r["weighted distance"] - (floors[r["target"]] if setting == "no gate bias" else 0)
                      for r in ends.to_dict("records") if r["setting"] == setting and r["state"] == "init")
        assert intervals.bootstrap(pairs, "ratio of means").value == pytest.approx(pooled, rel=1e-12)


def test_seed_ratios_count_never_as_inf():
    times = pd.DataFrame({"setting": ["x"] * 3, "seed": [1, 2, 3], "fit ratio": [0.5, np.nan, 0.0]}).set_index(
        ["setting", "seed"])
    got = study.seed_ratios(times, "x", "fit")
    assert got[0] == 0.5 and math.isinf(got[1]) and got[2] == 0.0


def test_init_vs_trained_and_with_state():
    frame = pd.DataFrame({"model": ["dlgn"] * 4 + ["relu"] * 4, "epoch": [0, 5, 9, 0] * 2, "x": np.arange(8.0)})
    picked = study.with_state(frame)
    assert list(picked["epoch"]) == [0, 9, 0, 0, 9, 0]
    table = study.init_vs_trained(frame, ["x"])
    assert table.loc[("DLGN", "init"), "x"] == pytest.approx((0 + 3) / 2)
    assert table.loc[("ReLU", "trained"), "x"] == 6.0


def mixture_runs():
    epochs = np.array([0, 1, 2, 4, 8, 16])
    rows = []
    for setting, k in (("a", 1.0), ("b", 3.0)):
        for seed in (1, 2):
            smooth = np.exp(-k * seed * epochs)
            rough = np.exp(-0.01 * epochs)
            mass_s, mass_r = np.minimum(epochs, 4.0), np.minimum(epochs, 8.0)
            rows += [{"setting": setting, "seed": seed, "epoch": e, "loss smooth": a, "loss rough": b,
                      "soft path mass smooth": c, "soft path mass rough": d}
                     for e, a, b, c, d in zip(epochs, smooth, rough, mass_s, mass_r)]
    return pd.DataFrame(rows)


def test_arc_times_and_median_ratio_by_hand():
    table = study.times_table(mixture_runs(), ["setting", "seed"], study.arc_times, 0.1, 0.5)
    # smooth loss e^{-ks t} reaches 0.1 between snapshots; the rough arc never does
    row = table.loc[("a", 1)]
    assert math.isinf(row["fit rough"]) and row["fit ratio"] == 0.0
    want = circle.epochs_to_fraction_of_initial([0, 1, 2, 4, 8, 16], np.exp(-np.array([0, 1, 2, 4, 8, 16.0])), 0.1)
    assert row["fit smooth"] == pytest.approx(want) and 2 < want <= 4
    # mass min(t, 4) stays above half its rise from t = 2; min(t, 8) from t = 4
    assert row["rise smooth"] == 2 and row["rise rough"] == 4 and row["rise ratio"] == 0.5
    assert study.median_ratio(table, "a", "rise") == 0.5
    nan_times = pd.DataFrame({"setting": ["x"] * 3, "seed": [1, 2, 3], "fit ratio": [0.5, np.nan, np.nan]}).set_index(
        ["setting", "seed"])
    assert math.isinf(study.median_ratio(nan_times, "x", "fit"))


def test_fit_times_and_frozen_ratio_by_hand():
    frame = mixture_runs().rename(columns={"setting": "model"}).replace({"model": {"a": "dlgn", "b": "dlgn_frozen"}})
    frame = frame.sample(frac=1.0, random_state=0)  # fit_times sorts by epoch itself
    times = study.times_table(frame.sort_values(["model", "seed"], kind="stable"), ["model", "seed"], study.fit_times,
                              0.1, names=plots.MODEL_NAMES)
    assert list(times.columns) == ["fit smooth", "fit rough", "fit ratio", "final loss smooth", "final loss rough"]
    assert times.loc[("DLGN", 2), "final loss smooth"] == pytest.approx(math.exp(-32))
    ratio = study.frozen_ratio(times)
    rough = math.exp(-0.16)
    assert ratio.loc["DLGN", "final rough-arc loss"] == pytest.approx(rough)
    assert ratio.loc["DLGN", "frozen-gate / model"] == pytest.approx(1.0)
    assert "e-" in study.fit_times_text(times) and "frozen-gate / model" in study.frozen_ratio_text(ratio)


def test_alignment_rises_against_a_loop():
    rng = np.random.default_rng(3)
    rows = [{"model": m, "target": t, "seed": s, "epoch": e, "centred": rng.random()}
            for m in ("dlgn", "relu") for t in ("steps 1", "steps 2") for s in (1, 2) for e in (5, 0, 9)]
    frame = pd.DataFrame(rows)
    rises = study.alignment_rises(frame)
    for m in ("dlgn", "relu"):
        for t in ("steps 1", "steps 2"):
            for s in (1, 2):
                run = {r["epoch"]: r["centred"] for r in rows if (r["model"], r["target"], r["seed"]) == (m, t, s)}
                got = rises[(rises["model"] == m) & (rises["target"] == t) & (rises["seed"] == s)]["rise"].item()
                assert got == pytest.approx(run[9] - run[0])
    table = study.rise_table(rises)
    assert table.loc["DLGN", "n"] == 4
    assert table.loc["ReLU", "mean over runs"] == pytest.approx(rises[rises["model"] == "relu"]["rise"].mean())


def test_chosen_epochs_and_distance_baselines():
    assert study.chosen_epochs([0, 1, 3, 9, 50, 70, 400]) == [0, 9, 50, 400]
    assert study.chosen_epochs([0, 100]) == [0, 100]
    params = {f"steps {k}": {"discontinuities": [0.5 * k, 2.0, 4.0]} for k in (1, 2, 3)}
    table = study.distance_baselines(params)
    assert table.loc["steps 2", "uniform distance"] == circle.uniform_distance([1.0, 2.0, 4.0])
    assert table.loc["steps 3", "antipodal floor"] == circle.antipodal_distance_floor([1.5, 2.0, 4.0])


@pytest.fixture(scope="module")
def tiny_runs():
    from dlgn_lib import runs as runs_module
    specs = {name: config.DataSpec.make("circle", target=name.split()[0], n_train=32, n_val=8, n_test=16, **params)
             for name, params in study.target_params(5).items()}
    configs = {(t, k, 1): config.RunConfig(specs[t], config.ModelSpec.make(k.split("|")[0], (4, 4),
                                           **({"gate_bias": True} if k.endswith("bias") else {})),
                                           epochs=4, n_snapshots=3, seed=1)
               for t in specs for k in ("dlgn", "relu", "dlgn_frozen", "dlgn|gate bias")}
    trained = {key: runs_module.train_group([c])[0] for key, c in configs.items()}
    return {(t, {"dlgn|gate bias": "gate bias"}.get(k, k), s): run for (t, k, s), run in trained.items()}


def test_kernel_panels_are_cosine_kernels_on_the_sorted_angles(tiny_runs):
    import matplotlib.pyplot as plt
    epochs = tiny_runs["mixture", "dlgn", 1].epochs
    theta, panels = study.kernel_panels(tiny_runs, "mixture", [epochs[0], epochs[-1]], 1)
    assert np.all(np.diff(theta) > 0) and len(theta) == 32
    assert set(panels) == {(plots.MODEL_NAMES[k], f"epoch {e}") for k in study.KINDS for e in (epochs[0], epochs[-1])}
    model = tiny_runs["mixture", "relu", 1].model_at(epochs[-1]).double()
    gates = [g.numpy() for g in model.gates(circle.points(theta, model), hard=True)]
    overlap = np.prod([g @ g.T for g in gates], axis=0)  # paths active for both: the product of shared gates per layer
    d = np.sqrt(np.diag(overlap))
    want = overlap / np.outer(d, d)
    np.testing.assert_allclose(panels["ReLU", f"epoch {epochs[-1]}"], want, atol=1e-6)
    assert isinstance(study.kernel_figure(tiny_runs, "steps 1", [epochs[-1]], 1, "t"), plt.Figure)
    assert study.kernel_slider(tiny_runs, 1, "kernels").children
    plt.close("all")


def test_state_figure_and_slider(tiny_runs):
    import matplotlib.pyplot as plt
    runs = {key: run for key, run in tiny_runs.items() if key[1] in study.SETTINGS or key[1] == "dlgn"}
    runs = {(t, "no gate bias" if k == "dlgn" else k, s): run for (t, k, s), run in runs.items()}
    last = runs["steps 1", "gate bias", 1].epochs[-1]
    fig = study.state_figure(runs, "steps 1", "gate bias", last, 1)
    assert fig._suptitle.get_text() == f"DLGN, gate bias, steps 1 target, epoch {last} (seed 1)"
    panel = study.state_slider(runs, {"steps": "steps 1", "mixture": "mixture"}, 1, "states")
    assert panel.children[1].children[0].options == (("steps 1", "steps"), ("mixture", "mixture"))
    plt.close("all")


def rule_v3_05():
    from dlgn_lib import verdict
    (rule,) = [r for r in verdict.registered_rules("05") if r["version"] == 3]
    return rule["thresholds"]


def mixture_table(smooth, rough, seeds=(1, 2, 3, 4, 5)):
    """A mixture table whose loss and soft path mass of each arc follow ``smooth(t)`` / ``rough(t)``."""
    epochs = np.array([0, 1, 2, 4, 8, 16, 32])
    return pd.DataFrame([{"setting": "s", "seed": seed, "epoch": e, "loss smooth": smooth(e), "loss rough": rough(e),
                          "soft path mass smooth": 1 - smooth(e), "soft path mass rough": 1 - rough(e)}
                         for seed in seeds for e in epochs])


def test_05_v3_checks_fail_for_a_network_that_does_not_learn_or_fits_both_arcs_at_once():
    """Rule v3 of 05 holds its mixture checks against what a network without C5 does: one stuck at
    initialisation (flat losses and masses: no arc ever gets there, counted inf) and one that fits
    both arcs at the same epoch (ratio 1, a tie); its steps checks are trained / init and
    trained − init, so an untrained network (trained = init) fails them."""
    from dlgn_lib import verdict
    bars = rule_v3_05()
    for smooth, rough in ((lambda t: 1.0, lambda t: 1.0), (lambda t: float(np.exp(-t)), lambda t: float(np.exp(-t)))):
        times = study.times_table(mixture_table(smooth, rough), ["setting", "seed"], study.arc_times,
                                  bars["FIT_FRACTION"], bars["RISE_FRACTION"])
        for what in ("fit", "rise"):
            check = verdict.seed_check(what, study.seed_ratios(times, "s", what), "<", bars["MAX_TIME_RATIO"],
                                       statistic="median")
            assert check.outcome == verdict.FAIL, (what, check.line())
    learns = study.times_table(mixture_table(lambda t: float(np.exp(-t)), lambda t: float(np.exp(-t / 8))),
                               ["setting", "seed"], study.arc_times, bars["FIT_FRACTION"], bars["RISE_FRACTION"])
    assert verdict.seed_check("fit", study.seed_ratios(learns, "s", "fit"), "<", 1.0, statistic="median").outcome \
        == verdict.PASS                                           # the checks can pass: smooth first
    ends = ends_frame(np.random.default_rng(3))
    trained = ends[ends["state"] == "init"].assign(state="trained")   # a network that stayed at init
    untrained = pd.concat([ends[ends["state"] == "init"], trained])
    for setting in ("no gate bias", "gate bias"):
        values = study.steps_seed_values(untrained, {"steps 1": 0.01, "steps 2": 0.02}, setting)
        s1 = verdict.seed_check("S1", values[["distance trained", "distance init"]].to_numpy(), "<=",
                                bars["MAX_DISTANCE_RATIO"], statistic="ratio of means")
        s2 = verdict.seed_check("S2", values["purity gain"], ">=", bars["MIN_PURITY_GAIN"])
        s3 = verdict.seed_check("S3", values["tolerant gain"], ">=", bars["MIN_TOLERANT_GAIN"])
        assert [s1.outcome, s2.outcome, s3.outcome] == [verdict.FAIL] * 3
        assert s1.value == pytest.approx(1.0) and s2.value == 0.0 and s3.value == 0.0


def test_seed_rises_against_a_loop_with_and_without_the_fidelity_filter():
    rng = np.random.default_rng(5)
    rises = pd.DataFrame([{"model": m, "target": t, "seed": s, "rise": rng.normal()}
                          for m in ("dlgn", "relu") for t in study.STEPS for s in (1, 2, 3)])
    kept = {("steps 1", "dlgn", 1), ("steps 3", "dlgn", 1), ("steps 2", "dlgn", 3)}   # seed 2 has none
    got = study.seed_rises(rises, "dlgn", kept)
    assert list(got.index) == [1, 3] and list(got["runs"]) == [2, 1]
    for seed in (1, 3):
        want = [r.rise for r in rises.itertuples() if r.model == "dlgn" and (r.target, r.model, r.seed) in kept
                and r.seed == seed]
        assert got.loc[seed, "rise"] == pytest.approx(sum(want) / len(want))
    every = study.seed_rises(rises, "relu")
    assert list(every["runs"]) == [3, 3, 3]
    assert every.loc[2, "rise"] == pytest.approx(rises[(rises.model == "relu") & (rises.seed == 2)]["rise"].mean())


def test_frozen_pairs_pair_seeds_at_init_and_at_the_end():
    rows = []
    for model, scale in (("dlgn", 1.0), ("dlgn_frozen", 5.0)):
        for seed in (7, 3):
            for epoch in (10, 0, 4):                      # out of order on purpose
                rows.append({"model": model, "seed": seed, "epoch": epoch,
                             "loss rough": scale * seed / (1 + epoch) if model == "dlgn" else scale + seed})
    mixture = pd.DataFrame(rows)
    last, first = study.frozen_pairs(mixture, "dlgn", "last"), study.frozen_pairs(mixture, "dlgn", "first")
    assert last.tolist() == [[5.0 + 3, 3 / 11], [5.0 + 7, 7 / 11]]           # seeds 3, 7; epoch 10
    assert first.tolist() == [[5.0 + 3, 3.0], [5.0 + 7, 7.0]]                # epoch 0
    est = intervals.bootstrap(last, "ratio of means")
    assert est.value == pytest.approx((8 + 12) / (10 / 11))
    with pytest.raises(ValueError, match="at='middle'"):
        study.frozen_pairs(mixture, "dlgn", "middle")


def rule_v3_06():
    from dlgn_lib import verdict
    (rule,) = [r for r in verdict.registered_rules("06") if r["version"] == 3]
    return rule["thresholds"]


def test_06_v3_checks_fail_for_a_network_that_does_not_learn_or_fits_both_arcs_at_once():
    """Rule v3 of 06 against what a network without C5 / C7 does: K2 fails for a network stuck at
    initialisation (never, inf) and for one that fits both arcs at the same epoch (a tie); K1 is
    trained − init, so it is 0 for a network that stays at init; K3 is refused when the model's
    rough-arc loss is the frozen-gate net's (the state at init), and passes when the model fits
    the rough arc and the frozen-gate net does not."""
    from dlgn_lib import verdict
    bars = rule_v3_06()
    for curve in (lambda t: 1.0, lambda t: float(np.exp(-t))):
        table = mixture_table(curve, curve).rename(columns={"setting": "model"})
        times = study.times_table(table, ["model", "seed"], study.fit_times, bars["FIT_FRACTION"])
        check = verdict.seed_check("K2", study.seed_ratios(times, "s", "fit"), "<", bars["MAX_TIME_RATIO"],
                                   statistic="median")
        assert check.outcome == verdict.FAIL, check.line()
    stuck = pd.DataFrame([{"model": "dlgn", "target": t, "seed": s, "epoch": e, "centred": 0.3}
                          for t in study.STEPS for s in range(5) for e in (0, 9)])
    k1 = verdict.seed_check("K1", study.seed_rises(study.alignment_rises(stuck), "dlgn")["rise"], ">=",
                            bars["MIN_ALIGNMENT_RISE"])
    assert k1.outcome == verdict.FAIL and k1.value == 0.0
    rng = np.random.default_rng(2)
    mixture = pd.DataFrame([{"model": m, "seed": s, "epoch": e,
                             "loss rough": 0.5 + 0.01 * rng.random() if (e == 0 or m == "dlgn_frozen") else 0.01}
                            for m in ("dlgn", "dlgn_frozen") for s in range(5) for e in (0, 9)])
    at_init = study.frozen_pairs(mixture, "dlgn", "first")
    with pytest.raises(verdict.RuleError, match="already passes at initialisation"):
        verdict.seed_check("K3", at_init * [bars["MIN_FROZEN_LOSS_RATIO"] * 2, 1], ">=",
                           bars["MIN_FROZEN_LOSS_RATIO"], statistic="ratio of means", init=at_init * [4, 1])
    k3 = verdict.seed_check("K3", study.frozen_pairs(mixture, "dlgn", "last"), ">=", bars["MIN_FROZEN_LOSS_RATIO"],
                            statistic="ratio of means", init=at_init)
    assert k3.outcome == verdict.PASS and k3.init.value == pytest.approx(1.0, abs=0.05)
