"""Result tables (claim C2, table T): mean ± std over seeds against an independent computation."""
import statistics

import numpy as np
import pandas as pd
import pytest

from dlgn_lib import config as C
from dlgn_lib import tables
from dlgn_lib.train import Run

DATASETS = ("moons", "circles", "xor")
KINDS = ("dln", "dlgn", "relu")


def fake_run(dataset: str, kind: str, seed: int, value: float, history_last: float = 0.5) -> Run:
    """A run holding only what tables read: config labels, meta and history (no training)."""
    config = C.RunConfig(C.DataSpec.make("plane", name=dataset, n=100), C.ModelSpec.make(kind, (4,)),
                         seed=seed)
    history = {"epoch": [0.0, 1.0], "test_metric": [0.0, history_last]}
    return Run(config, history, {}, {}, {"test_metric_at_best": value, "best_epoch": 1})


def dataset_of(run):
    return dict(run.config.data.params)["name"]


@pytest.fixture
def runs_and_values():
    rng = np.random.default_rng(7)
    runs, values = [], {}
    for dataset in DATASETS:
        for kind in KINDS:
            n_seeds = {"dln": 1, "dlgn": 3, "relu": 5}[kind]
            for seed in range(n_seeds):
                v = float(rng.uniform(0.4, 1.0))
                runs.append(fake_run(dataset, kind, seed, v))
                values.setdefault((dataset, kind), []).append(v)
    rng.shuffle(runs)  # grouping must not depend on order
    return runs, values


def test_mean_std_and_count_match_an_independent_computation(runs_and_values):
    runs, values = runs_and_values
    table = tables.accuracy_table(runs, dataset_of, "kind", rows=DATASETS, cols=KINDS)
    assert list(table.index) == list(DATASETS)
    for (dataset, kind), vs in values.items():
        assert tables.cell(table, dataset, kind, "n") == len(vs)
        assert tables.cell(table, dataset, kind, "mean") == pytest.approx(statistics.fmean(vs), rel=1e-12)
        if len(vs) > 1:
            assert tables.cell(table, dataset, kind, "std") == pytest.approx(statistics.stdev(vs), rel=1e-12)
        else:
            assert np.isnan(tables.cell(table, dataset, kind, "std"))


def test_labels_follow_first_appearance_and_model_shortcut_uses_display_names():
    runs = [fake_run("xor", "relu", 0, 0.9), fake_run("moons", "dlgn", 0, 0.8), fake_run("xor", "dlgn", 1, 0.7)]
    table = tables.accuracy_table(runs, dataset_of, "model")
    assert list(table.index) == ["xor", "moons"]
    assert list(dict.fromkeys(table.columns.get_level_values(0))) == ["ReLU", "DLGN"]
    assert tables.cell(table, "moons", "ReLU", "n") == 0 and np.isnan(tables.cell(table, "moons", "ReLU"))


def test_metric_falls_back_to_the_last_history_value():
    runs = [fake_run("xor", "dlgn", s, 0.9, history_last=h) for s, h in enumerate((0.25, 0.75))]
    table = tables.accuracy_table(runs, dataset_of, "kind", metric="test_metric")
    assert tables.cell(table, "xor", "dlgn") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="metric='nope'"):
        tables.accuracy_table(runs, dataset_of, "kind", metric="nope")


def test_bad_keys_and_unlisted_labels_are_errors():
    runs = [fake_run("xor", "dlgn", 0, 0.9)]
    with pytest.raises(ValueError, match="row_key='dataset'.*pass a function"):
        tables.accuracy_table(runs, "dataset", "kind")
    with pytest.raises(ValueError, match="missing from rows/cols"):
        tables.accuracy_table(runs, dataset_of, "kind", rows=["moons"])
    with pytest.raises(ValueError, match="runs is empty"):
        tables.accuracy_table([], dataset_of, "kind")


def test_format_table_strings():
    runs = [fake_run("xor", "dlgn", 0, 0.4), fake_run("xor", "dlgn", 1, 0.6), fake_run("xor", "dln", 0, 0.55)]
    text = tables.format_table(tables.accuracy_table(runs, dataset_of, "kind", cols=["dlgn", "dln", "relu"]))
    # sample std of (0.4, 0.6) = 0.1 * sqrt(2)
    assert text.loc["xor", "dlgn"] == f"0.500 ± {0.1 * np.sqrt(2):.3f}"
    assert text.loc["xor", "dln"] == "0.550"
    assert text.loc["xor", "relu"] == "—"


def test_save_table_writes_csv_numbers_and_latex(runs_and_values, tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path))
    runs, values = runs_and_values
    table = tables.accuracy_table(runs, dataset_of, "kind", rows=DATASETS, cols=KINDS)
    written = tables.save_table(table, "99_test", verbose=False)
    assert [p.name for p in written] == ["99_test.csv", "99_test.tex"]
    back = pd.read_csv(tmp_path / "99_test.csv", index_col=0, dtype=str, keep_default_na=False)
    for (dataset, kind), vs in values.items():   # notebook 99 has no spread record: as printed, 3 decimals
        assert back.loc[dataset, f"{kind} mean"] == f"{statistics.fmean(vs):.3f}"
        assert back.loc[dataset, f"{kind} std"] == (f"{statistics.stdev(vs):.3f}" if len(vs) > 1 else "")
        assert back.loc[dataset, f"{kind} n"] == str(len(vs))
    tex = (tmp_path / "99_test.tex").read_text()
    assert r"\begin{tabular}" in tex and r"$\pm$" in tex and "±" not in tex
    assert all(d in tex for d in DATASETS)
    with pytest.raises(ValueError, match="table_id"):
        tables.save_table(table, "../escape")


def lr_run(dataset, kind, lr, seed, val, test):
    config = C.RunConfig(C.DataSpec.make("plane", name=dataset, n=100), C.ModelSpec.make(kind, (4,)),
                         seed=seed, lr=lr)
    return Run(config, {"epoch": [0.0]}, {}, {}, {"best_val_metric": val, "test_metric_at_best": test})


def test_select_on_validation_picks_the_best_mean_validation_lr_by_brute_force():
    rng = np.random.default_rng(11)
    lrs = (1e-3, 3e-3, 1e-2)
    runs = [lr_run(d, k, lr, s, float(rng.uniform()), float(rng.uniform()))
            for d in DATASETS for k in KINDS for lr in lrs for s in range(3)]
    rng.shuffle(runs)
    selected, chosen = tables.select_on_validation(runs, lambda r: (dataset_of(r), r.config.model.kind))
    for d in DATASETS:
        for k in KINDS:
            means = [statistics.fmean(r.meta["best_val_metric"] for r in runs
                                      if dataset_of(r) == d and r.config.model.kind == k and r.config.lr == lr)
                     for lr in lrs]
            assert chosen[(d, k)] == lrs[int(np.argmax(means))]
    assert selected == [r for r in runs if r.config.lr == chosen[(dataset_of(r), r.config.model.kind)]]
    assert len(selected) == len(DATASETS) * len(KINDS) * 3


def test_select_on_validation_ignores_test_numbers_and_keeps_the_first_on_a_tie():
    runs = [lr_run("xor", "dlgn", 3e-3, 0, 0.8, 0.1), lr_run("xor", "dlgn", 1e-3, 0, 0.8, 0.99),
            lr_run("xor", "dlgn", 1e-2, 0, 0.7, 1.0)]
    selected, chosen = tables.select_on_validation(runs, "kind")
    assert chosen == {"dlgn": 3e-3} and selected == runs[:1]
    with pytest.raises(ValueError, match="group_key"):
        tables.select_on_validation(runs, "colour")
