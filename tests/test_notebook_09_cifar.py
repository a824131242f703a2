"""Notebook 09's CIFAR rows through the library, with CIFAR-shaped synthetic images on "disk".

CIFAR has no offline source (reconstruction §3), so papermill runs of 09 only ever take the "not available
offline" branch. Here ``dl.studies.table.cifar_probe`` finds synthetic uint8 arrays, split by the
real ``cifar_dataset_from_arrays``, at tiny ``quick`` sizes: the conv rows must be trained, the
learning rate selected on validation (checked against a selection recomputed by hand) and the
table, its saved CSV, the summary and the figure filled in.
"""
import csv

import matplotlib
import numpy as np
import pytest

from dlgn_lib import config, data, runs as runs_module, tables
from dlgn_lib.plots.tables import accuracy_points
from dlgn_lib.studies import table as study

matplotlib.use("Agg")
TINY = dict(n_seeds=2, lrs=(1e-3, 1e-2), fmnist_per_class=(10, 10, 10), fmnist_widths=(8, 8), epochs=2,
            batch_size=50, odt_sets=("SD-I",), odt_seeds=2, odt_epochs=2, odt_n_total=400,
            n_snapshots=2, cifar_sizes=(60, 30, 40), conv_channels=(4,) * 5, conv_epochs=2,
            conv_batch_size=20)


def fake_cifar(name="cifar10", root=None, download=False, **sizes):
    rng = np.random.default_rng(len(name))
    n_classes = data.CIFAR_CLASSES[name]
    images = rng.integers(0, 256, size=(120, 32, 32, 3), dtype=np.uint8)
    test_images = rng.integers(0, 256, size=(50, 32, 32, 3), dtype=np.uint8)
    return data.cifar_dataset_from_arrays(images, rng.integers(0, n_classes, 120), test_images,
                                          rng.integers(0, n_classes, 50), name=name, source="synthetic",
                                          **sizes)


def test_the_conv_rows_are_trained_selected_on_validation_and_filled_in_when_cifar_is_present(
        monkeypatch, tmp_path):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("DLGN_QUIET", "1")
    monkeypatch.setitem(config.NOTEBOOK_SIZES["09"], "quick", TINY)
    monkeypatch.setattr(data, "cifar", fake_cifar)
    cfg = config.for_notebook("09", "quick", seed=0)

    probe = study.cifar_probe(cfg)
    assert probe.notes == {"CIFAR-10 (conv)": "", "CIFAR-100 (conv)": ""}
    assert probe.measured == list(study.CIFAR_ROWS)
    assert probe.lines == [f"{row}: data present; conv DLGN and conv ReLU are trained below"
                           for row in study.CIFAR_ROWS]
    assert len(probe.configs) == 2 * 2 * 2 * 2   # data sets × models × learning rates × seeds
    assert {c.epochs for c in probe.configs} == {2} and {c.batch_size for c in probe.configs} == {20}

    conv_runs = runs_module.get_or_train_many(probe.configs)
    labels = dict(probe.labels)
    selected, chosen = study.select(conv_runs, labels)
    table = tables.accuracy_table(selected, row_key=study.row_key(labels), col_key=study.column_of,
                                  rows=list(study.CIFAR_ROWS), cols=study.COLUMNS)
    for row, name in (("CIFAR-10 (conv)", "cifar10"), ("CIFAR-100 (conv)", "cifar100")):
        for column, kind in (("DLGN", "conv_dlgn"), ("ReLU", "conv_relu")):
            mine = [r for r in conv_runs if r.config.data.name == name and r.config.model.kind == kind]
            by_lr = {lr: [r for r in mine if r.config.lr == lr] for lr in TINY["lrs"]}
            best_lr = max(by_lr, key=lambda lr: np.mean([r.meta["best_val_metric"] for r in by_lr[lr]]))
            expected = np.mean([r.meta["test_metric_at_best"] for r in by_lr[best_lr]])
            assert chosen[row, f"conv {column}"] == best_lr
            assert table.loc[row, (column, "n")] == 2
            assert table.loc[row, (column, "mean")] == pytest.approx(expected, rel=1e-12)
        assert np.isnan(table.loc[row, ("DLN", "mean")])
        assert study.shown_table(table, probe.notes).loc[row, "note"] == "conv: conv DLGN, conv ReLU"

    lines = study.conv_selection_lines(selected, chosen, labels)
    assert len(lines) == 4 and all("chosen on validation" in line for line in lines)
    summary = study.summary_lines(table, [], probe.notes)
    dlgn, relu = table.loc["CIFAR-10 (conv)", ("DLGN", "mean")], table.loc["CIFAR-10 (conv)", ("ReLU", "mean")]
    assert summary[0] == f"CIFAR-10 (conv): conv DLGN {dlgn:.3f}, conv ReLU {relu:.3f} (difference {dlgn - relu:+.3f})"
    caption = study.caption(2, "quick", probe.notes, conv_measured=True)
    assert "no number measured" not in caption and caption.endswith("in the DLGN and ReLU columns.")

    tables.save_table(table, "09_table", caption=caption)
    with open(tmp_path / "figures" / "09_table.csv") as f:
        saved = {r[""]: r for r in csv.DictReader(f)}
    for row in study.CIFAR_ROWS:
        for column in ("DLGN", "ReLU"):
            # rows the spread record does not hold are written at 3 decimals (tables.stable_texts)
            assert saved[row][f"{column} mean"] == f"{table.loc[row, (column, 'mean')]:.3f}"
    fig = accuracy_points(selected, study.panels({}, probe), study.row_key(labels))
    assert [ax.get_title() for ax in fig.axes] == list(study.CIFAR_ROWS)


def test_the_probe_notes_a_missing_cifar_set_and_plans_no_run(monkeypatch):
    def missing(name="cifar10", **_):
        raise data.DatasetNotAvailable(f"{name} is missing", "data/raw/nowhere", "Copy it there.")

    monkeypatch.setattr(data, "cifar", missing)
    probe = study.cifar_probe(config.for_notebook("09", "quick", seed=0))
    assert probe.notes == {row: "not available offline" for row in study.CIFAR_ROWS}
    assert probe.configs == [] and probe.labels == {} and probe.measured == []
    assert probe.lines[0] == "CIFAR-10 (conv): not available offline. cifar10 is missing: data/raw/nowhere. Copy it there."
    assert study.summary_lines(tables.accuracy_table([], "data", "model", rows=list(study.CIFAR_ROWS),
                                                     cols=study.COLUMNS), [], probe.notes) == \
        [f"{row}: not available offline" for row in study.CIFAR_ROWS]
