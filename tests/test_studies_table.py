"""Notebook 09's study module against hand-built runs and hand computations: the run set, the row
and column of a run, the learning rate chosen on validation, the provenance lines, the table's
notes, caption and summary, and the points of the accuracy figure."""
from types import SimpleNamespace as NS

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection

from dlgn_lib import config, tables
from dlgn_lib.text import TEXT_WIDTH, wrap
from dlgn_lib.plots.tables import accuracy_points, point_values
from dlgn_lib.studies import table as study

matplotlib.use("Agg")
DATA = config.DataSpec.make("fashion_mnist", n_per_class_train=3)


def fake_run(kind, lr, seed, val, test, data=DATA, best_epoch=1):
    return NS(config=NS(data=data, model=NS(kind=kind), lr=lr, seed=seed, epochs=4, batch_size=8,
                        optimizer="adam", eval_every=1),
              meta={"best_val_metric": val, "test_metric_at_best": test, "best_epoch": best_epoch,
                    "n_trainable": 1234, "data_source": "src"}, history={})


def test_run_configs_cover_rows_kinds_lrs_and_seeds_in_order():
    cfg = config.for_notebook("09", "full", seed=5)
    rows = study.benchmarks(cfg)
    (spec, widths, kinds, training), = rows.values()
    assert spec == config.fashion_mnist_spec(cfg.fmnist_per_class) and widths == cfg.fmnist_widths
    built = study.run_configs(cfg, rows)
    expected = [(k, lr, s) for k in study.FC_KINDS for lr in cfg.lrs for s in (5, 6, 7)]
    assert [(c.model.kind, c.lr, c.seed) for c in built] == expected
    assert all(c.data == spec and c.model.widths == tuple(widths) and c.epochs == cfg.epochs for c in built)
    assert built[0].name == "DLN on Fashion-MNIST, lr 0.001 (seed 5)"
    assert study.row_labels(rows) == {spec: "Fashion-MNIST"}


def test_row_and_column_of_a_run():
    labels = {DATA: "Fashion-MNIST"}
    assert study.row_key(labels)(fake_run("dlgn", 0.1, 0, 0.5, 0.5)) == "Fashion-MNIST"
    assert study.column_of(fake_run("conv_relu", 0.1, 0, 0.5, 0.5)) == "ReLU"
    assert study.column_of(fake_run("dlgn_frozen", 0.1, 0, 0.5, 0.5)) == "frozen-gate DLGN"


def test_selection_and_validation_report_by_hand():
    labels = {DATA: "F"}
    # DLGN: lr 0.1 has mean val 0.6, lr 0.2 mean val 0.7 -> 0.2; ReLU: 0.1 wins (0.9 against 0.5)
    runs = [fake_run("dlgn", 0.1, 0, 0.5, 0.9), fake_run("dlgn", 0.1, 1, 0.7, 0.9),
            fake_run("dlgn", 0.2, 0, 0.8, 0.1), fake_run("dlgn", 0.2, 1, 0.6, 0.2),
            fake_run("relu", 0.1, 0, 0.9, 0.3), fake_run("relu", 0.2, 0, 0.5, 0.99)]
    selected, chosen = study.select(runs, labels)
    assert chosen == {("F", "DLGN"): 0.2, ("F", "ReLU"): 0.1}
    assert selected == [runs[2], runs[3], runs[4]]
    report = study.validation_report(runs, labels, chosen).splitlines()
    assert report[0].split() == ["mean", "val,", "lr", "0.1", "mean", "val,", "lr", "0.2"]
    assert report[2].split() == ["F", "DLGN", "0.6", "0.7"]
    assert report[3].split() == ["ReLU", "0.9", "0.5"]
    assert report[5] == "chosen learning rate per (data set, model):"
    assert report[-1].split() == ["F", "0.2", "0.1"]


def test_provenance_lines_read_the_selected_runs():
    ds = NS(name="fashion_mnist", meta={"split": "S", "val_rule": "V"}, y_train=[0] * 1200, y_val=[0] * 3,
            y_test=[0] * 4, in_dim=784, task="multiclass")
    runs = [fake_run(k, 0.1, s, 0.5, 0.5, best_epoch=s + 2) for k in ("dlgn", "relu") for s in (0, 1)]
    for r in runs:
        r.dataset = lambda: ds
    rows = {"F": (DATA, (8, 8), ("dlgn", "relu"), {})}
    printed = study.provenance(rows, runs, {DATA: "F"}, [0, 1])
    expected = ["F: fashion_mnist, source src", "  split: S; V",
                "  train / val / test: 1,200 / 3 / 4; input dimension 784, task multiclass",
                "  widths (8, 8), 4 epochs, batch 8, adam, evaluated every 1 epoch(s), seeds [0, 1]",
                " " * 15 + "DLGN: lr 0.1, 1,234 trainable parameters, best-validation epoch per seed [2, 3]"]
    # each line wrapped to the book's column (dl.text.wrap), the rest of a line four spaces deeper
    assert printed.startswith(wrap("\n".join(expected)) + "\n")
    assert max(map(len, printed.splitlines())) <= TEXT_WIDTH and printed.count("trainable parameters") == 2


def table_of(cells):
    """An accuracy table from {(row, column): [test accuracies]}."""
    runs = [fake_run(kind, 0.1, i, 0.5, v, data=row)
            for (row, kind), values in cells.items() for i, v in enumerate(values)]
    return tables.accuracy_table(runs, row_key=lambda r: r.config.data, col_key=study.column_of,
                                 rows=list(dict.fromkeys(r for r, _ in cells)), cols=study.COLUMNS)


def test_summary_lines_by_hand():
    t = table_of({("B", "dlgn"): [0.4, 0.8], ("B", "relu"): [0.7, 0.8],
                  ("C", "dlgn"): [0.9, 0.95], ("C", "relu"): [0.5, 0.6],
                  ("D", "dlgn"): [0.6], ("D", "relu"): [0.7]})
    assert study.summary_line(t, "C") == "C: best DLGN 0.925; DLGN is the best"
    # B: ReLU 0.75, DLGN 0.6, gap 0.15; stds 0.0707 and 0.2828 -> within
    assert study.summary_line(t, "B") == ("B: best ReLU 0.750; DLGN 0.600 is within 1 std of the best "
                                          "(gap 0.150, std 0.283)")
    assert study.summary_line(t, "D") == "D: best ReLU 0.700; DLGN 0.600, gap 0.100 (one seed: no std)"
    t2 = table_of({("E", "dlgn"): [0.60, 0.62], ("E", "relu"): [0.80, 0.82], ("E", "dln"): [0.81, 0.81]})
    # a tie of means: the first in column order (DLN before ReLU) is the best
    assert study.summary_line(t2, "E") == ("E: best DLN 0.810; DLGN 0.610 is not within 1 std of the best "
                                           "(gap 0.200, std 0.014)")
    notes = {"C": "", "X": "not available offline"}
    assert study.summary_lines(t, ["B"], notes)[1:] == [
        "C: conv DLGN 0.925, conv ReLU 0.550 (difference +0.375)", "X: not available offline"]


def test_shown_table_notes_and_caption():
    t = table_of({("Fashion-MNIST", "dlgn"): [0.8, 0.9], ("CIFAR-10 (conv)", "dlgn"): [0.3, 0.4],
                  ("CIFAR-100 (conv)", "relu"): [0.1]})
    notes = {"CIFAR-10 (conv)": "", "CIFAR-100 (conv)": "not available offline"}
    shown = study.shown_table(t, notes)
    assert list(shown["note"]) == ["", "conv: conv DLGN, conv ReLU", "not available offline"]
    assert shown.loc["Fashion-MNIST", "DLGN"] == "0.850 ± 0.071"
    assert study.caption(2, "quick", notes, False) == (
        "Test accuracy (mean ± std over 2 seeds) at the best-validation epoch, learning rate chosen on "
        "validation; profile quick (reduced sizes). CIFAR-100 (conv): not available offline, no number measured.")
    assert study.caption(3, "full", {}, True) == (
        "Test accuracy (mean ± std over 3 seeds) at the best-validation epoch, learning rate chosen on "
        "validation; profile full.  CIFAR rows: conv DLGN and conv ReLU in the DLGN and ReLU columns.")


def test_panels_and_accuracy_points_draw_mean_std_and_every_seed():
    probe = study.CifarProbe(notes={"CIFAR-10 (conv)": "", "CIFAR-100 (conv)": "not available offline"})
    rows = {"F": (DATA, (8,), ("dln", "dlgn"), {})}
    assert study.panels(rows, probe) == {"F": ("dln", "dlgn"), "CIFAR-10 (conv)": study.CONV_KINDS}
    runs = [fake_run("dln", 0.1, i, 0.5, v) for i, v in enumerate([0.5, 0.6, 0.7])] + [fake_run("dlgn", 0.1, 0, 0.5, 0.9)]
    row_of = study.row_key({DATA: "F"})
    np.testing.assert_array_equal(point_values(runs, row_of, "F", "dln"), [0.5, 0.6, 0.7])
    fig = accuracy_points(runs, {"F": ("dln", "dlgn")}, row_of, chance={"F": 0.1})
    ax, = fig.axes
    # y-range: from the chance line to the highest seed, 0.02 either side
    assert ax.get_ylim() == pytest.approx((0.1 - 0.02, 0.9 + 0.02))
    means = [line.get_ydata()[0] for line in ax.lines if line.get_marker() == "o"]
    assert means == pytest.approx([0.6, 0.9])
    seeds = [list(c.get_offsets()[:, 1]) for c in ax.collections if isinstance(c, PathCollection)]
    assert seeds == [[0.5, 0.6, 0.7], [0.9]]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["DLN", "DLGN"]
