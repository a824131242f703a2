"""Notebook 09's CIFAR rows, executed in-process with CIFAR-shaped synthetic images on "disk".

CIFAR has no offline source (SPEC §3), so papermill runs of 09 only ever take the "not available
offline" branch. Here the notebook's code cells run in one namespace with the CIFAR loader
replaced by synthetic uint8 arrays split by the real ``cifar_dataset_from_arrays`` and tiny
``quick`` sizes: the conv rows must be trained, selected on validation and filled in.
"""
import csv
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import pytest

from dlgn_lib import config, data

matplotlib.use("Agg")
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "09_table.ipynb"
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


def test_notebook_09_trains_and_fills_the_conv_rows_when_cifar_is_present(monkeypatch, tmp_path, capsys):
    try:
        data.load("fashion_mnist", n_per_class_train=1, n_per_class_val=1, n_per_class_test=1)
    except data.DatasetNotAvailable:
        pytest.skip("Fashion-MNIST is not prepared (make data)")
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("DLGN_QUIET", "1")
    monkeypatch.setitem(config.NOTEBOOK_SIZES["09"], "quick", TINY)
    monkeypatch.setattr(data, "cifar", fake_cifar)

    namespace = {}
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, str(NOTEBOOK), "exec"), namespace)
    printed = capsys.readouterr().out

    assert "not available offline" not in printed
    assert printed.count("data present; conv DLGN and conv ReLU are trained below") == 2
    table, conv_runs = namespace["table"], namespace["conv_runs"]
    assert len(conv_runs) == 2 * 2 * 2 * 2   # data sets × models × learning rates × seeds
    for row, name in (("CIFAR-10 (conv)", "cifar10"), ("CIFAR-100 (conv)", "cifar100")):
        for column, kind in (("DLGN", "conv_dlgn"), ("ReLU", "conv_relu")):
            mine = [r for r in conv_runs if r.config.data.name == name and r.config.model.kind == kind]
            by_lr = {lr: [r for r in mine if r.config.lr == lr] for lr in TINY["lrs"]}
            best_lr = max(by_lr, key=lambda lr: np.mean([r.meta["best_val_metric"] for r in by_lr[lr]]))
            expected = np.mean([r.meta["test_metric_at_best"] for r in by_lr[best_lr]])
            assert table.loc[row, (column, "n")] == 2
            assert table.loc[row, (column, "mean")] == pytest.approx(expected, rel=1e-12)
        assert np.isnan(table.loc[row, ("DLN", "mean")])
        assert f"{row}: conv DLGN" in printed
    with open(tmp_path / "figures" / "09_table.csv") as f:
        rows = {r[""]: r for r in csv.DictReader(f)}
    for row in ("CIFAR-10 (conv)", "CIFAR-100 (conv)"):
        for column in ("DLGN", "ReLU"):
            assert float(rows[row][f"{column} mean"]) == pytest.approx(table.loc[row, (column, "mean")])
    assert (tmp_path / "figures" / "09_accuracy.png").exists()
