"""Notebook 09: the benchmark table (claim T, no verdict).

The run set (:func:`benchmarks`, :func:`run_configs`), the row and column of a run in the table
(:func:`row_labels`, :func:`row_key`, :func:`column_of`), the learning rate chosen on validation
(:func:`select`, :func:`validation_report`), the provenance lines (:func:`provenance`), the CIFAR
rows (:func:`cifar_probe`: each CIFAR set is loaded if it is on disk, else its row says "not
available offline"; :func:`conv_selection_lines`), the table shown with its notes
(:func:`shown_table`), its caption (:func:`caption`) and the summary per data set
(:func:`summary_lines`).

Rows are labelled by data set ("Fashion-MNIST", "CIFAR-10 (conv)", …); columns by model name, a
conv model under the name of its fully connected kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import config, data, models, tables, text
from ..plots import MODEL_NAMES

__all__ = ["CIFAR_ROWS", "COLUMNS", "benchmarks", "caption", "cifar_probe", "column_of", "conv_selection_lines",
           "conv_sizes_lines", "panels", "provenance", "row_key", "row_labels", "run_configs", "select",
           "shown_table", "summary_lines", "validation_report"]

#: Fully connected models of the Fashion-MNIST row, in column order.
FC_KINDS = ("dln", "dlgn_frozen", "dlgn", "dlgn_sf", "relu")
#: Conv models of the CIFAR rows (shown in the DLGN and ReLU columns).
CONV_KINDS = ("conv_dlgn", "conv_relu")
#: Row label -> (data set name, number of classes).
CIFAR_ROWS = {"CIFAR-10 (conv)": ("cifar10", 10), "CIFAR-100 (conv)": ("cifar100", 100)}
NOT_AVAILABLE = "not available offline"
#: The fully connected models' column names of the benchmark table (09).
COLUMNS = [MODEL_NAMES[kind] for kind in FC_KINDS]


def benchmarks(cfg) -> dict:
    """Row label -> (DataSpec, hidden widths, model kinds, training sizes that differ from cfg's)."""
    return {"Fashion-MNIST": (config.fashion_mnist_spec(cfg.fmnist_per_class), cfg.fmnist_widths, FC_KINDS, {})}


def run_configs(cfg, rows: Mapping) -> list:
    """Every (row, kind, learning rate of ``cfg.lrs``, seed of ``cfg.seeds``) of ``rows``
    (:func:`benchmarks`) as a RunConfig, in that nesting order."""
    return [cfg.run(spec, config.ModelSpec.make(kind, widths),
                    name=f"{MODEL_NAMES[kind]} on {row}, lr {lr:g} (seed {seed})", lr=lr, **training).replace(seed=seed)
            for row, (spec, widths, kinds, training) in rows.items()
            for kind in kinds for lr in cfg.lrs for seed in cfg.seeds]


def row_labels(rows: Mapping) -> dict:
    """DataSpec -> row label, for the rows of :func:`benchmarks` (the CIFAR probe adds its own)."""
    return {spec: row for row, (spec, *_) in rows.items()}


def row_key(labels: Mapping) -> Callable:
    """The table row of a run: ``row_key(labels)(run)`` is the label of its data set."""
    return lambda run: labels[run.config.data]


def column_of(run) -> str:
    """The table column: the model's name, a conv model under the name of its fully connected kind."""
    return MODEL_NAMES[run.config.model.kind.removeprefix("conv_")]


def select(runs: Sequence, labels: Mapping) -> tuple[list, dict]:
    """``tables.select_on_validation`` per (row, model name): the learning rate with the best mean
    best-validation accuracy; returns ``(selected runs, {(row, model): lr})``."""
    return tables.select_on_validation(runs, lambda r: (labels[r.config.data], MODEL_NAMES[r.config.model.kind]))


def records(runs: Sequence, labels: Mapping) -> pd.DataFrame:
    """One row per run: data, model, lr, seed, best epoch, best validation and test-at-best accuracy."""
    return pd.DataFrame([{"data": labels[r.config.data], "model": MODEL_NAMES[r.config.model.kind],
                          "lr": r.config.lr, "seed": r.config.seed, "best epoch": r.meta["best_epoch"],
                          "val": r.meta["best_val_metric"], "test": r.meta["test_metric_at_best"]} for r in runs])


def validation_report(runs: Sequence, labels: Mapping, chosen: Mapping) -> str:
    """Mean validation accuracy per (data, model) and learning rate, then the chosen learning rates."""
    mean_val = records(runs, labels).groupby(["data", "model", "lr"], sort=False)["val"].mean()
    chosen_lr = pd.Series(chosen).rename_axis(["data", "model"])
    models_in_order = list(dict.fromkeys(model for _, model in chosen))
    return "\n".join([mean_val.unstack("lr").round(3).rename(columns=lambda lr: f"mean val, lr {lr:g}")
                      .rename_axis(columns=None).pipe(text.table), "",
                      "chosen learning rate per (data set, model):",
                      text.table(chosen_lr.unstack("model")[models_in_order], na_rep="—")])


def provenance(rows: Mapping, selected: Sequence, labels: Mapping, seeds: Sequence[int]) -> str:
    """Per row: the data set's source, split rule and sizes, the training settings and, per model, the
    chosen lr, its parameter count and the best-validation epoch per seed."""
    lines = []
    for row, (_, widths, kinds, _) in rows.items():
        picked = [r for r in selected if labels[r.config.data] == row]
        ds, first = picked[0].dataset(), picked[0]
        sources = sorted({r.meta["data_source"] for r in picked})
        lines += [f"{row}: {ds.name}, source {', '.join(sources)}",
                  f"  split: {ds.meta['split']}; {ds.meta['val_rule']}",
                  f"  train / val / test: {len(ds.y_train):,} / {len(ds.y_val):,} / {len(ds.y_test):,}; "
                  f"input dimension {ds.in_dim}, task {ds.task}",
                  f"  widths {widths}, {first.config.epochs} epochs, batch {first.config.batch_size}, "
                  f"{first.config.optimizer}, evaluated every {first.config.eval_every} epoch(s), seeds {list(seeds)}"]
        for kind in kinds:
            mine = [r for r in picked if r.config.model.kind == kind]
            lines.append(f"  {MODEL_NAMES[kind]:>17}: lr {mine[0].config.lr:g}, {mine[0].meta['n_trainable']:,} "
                         f"trainable parameters, best-validation epoch per seed {[r.meta['best_epoch'] for r in mine]}")
    return text.wrap("\n".join(lines))


def conv_sizes_lines(cfg) -> list[str]:
    """Per CIFAR row, the parameter count of the conv DLGN and conv ReLU at ``cfg.conv_channels``."""
    lines = []
    for row, (_, n_classes) in CIFAR_ROWS.items():
        sizes = {MODEL_NAMES[kind]: sum(p.numel() for p in models.build_conv_model(
            kind.removeprefix("conv_"), 3, cfg.conv_channels, n_classes).parameters()) for kind in CONV_KINDS}
        lines.append(f"{row}: conv nets with channels {cfg.conv_channels}: "
                     + ", ".join(f"{model} {n:,} parameters" for model, n in sizes.items()))
    return lines


@dataclass
class CifarProbe:
    """What :func:`cifar_probe` found: per CIFAR row a note ("" when the data is present, else
    ``NOT_AVAILABLE``), the conv runs to train, their rows (DataSpec -> label) and the lines to print."""
    notes: dict = field(default_factory=dict)
    configs: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)
    lines: list = field(default_factory=list)

    @property
    def measured(self) -> list[str]:
        """The CIFAR rows whose data is present (their conv runs are in ``configs``)."""
        return [row for row, note in self.notes.items() if not note]


def cifar_probe(cfg) -> CifarProbe:
    """Try to load each CIFAR set at ``cfg.cifar_sizes``; where it loads, the conv DLGN and conv ReLU
    runs over ``cfg.lrs`` and ``cfg.seeds`` (``cfg.conv_*`` sizes), else the note ``NOT_AVAILABLE``."""
    probe = CifarProbe()
    n_train, n_val, n_test = cfg.cifar_sizes
    for row, (name, _) in CIFAR_ROWS.items():
        spec = config.DataSpec.make(name, n_train=n_train, n_val=n_val, n_test=n_test)
        try:
            data.load(spec.name, **spec.kwargs())
        except data.DatasetNotAvailable as error:
            probe.notes[row] = NOT_AVAILABLE
            probe.lines.append(f"{row}: {NOT_AVAILABLE}. {error}")
            continue
        probe.labels[spec] = row
        probe.configs += [cfg.run(spec, config.ModelSpec.make(kind, cfg.conv_channels),
                                  name=f"{MODEL_NAMES[kind]} on {row}, lr {lr:g} (seed {seed})", lr=lr,
                                  epochs=cfg.conv_epochs, batch_size=cfg.conv_batch_size).replace(seed=seed)
                          for kind in CONV_KINDS for lr in cfg.lrs for seed in cfg.seeds]
        probe.notes[row] = ""
        probe.lines.append(f"{row}: data present; conv DLGN and conv ReLU are trained below")
    return probe


def conv_selection_lines(selected: Sequence, chosen: Mapping, labels: Mapping) -> list[str]:
    """Per (CIFAR row, conv model): the lr chosen on validation, the split and its sizes, the epochs
    and the best-validation epoch per seed."""
    lines = []
    for (row, model), lr in chosen.items():
        picked = [r for r in selected if labels[r.config.data] == row and MODEL_NAMES[r.config.model.kind] == model]
        ds = picked[0].dataset()
        lines.append(f"{row} {model}: lr {lr:g} chosen on validation; train / val / test {len(ds.y_train):,} / "
                     f"{len(ds.y_val):,} / {len(ds.y_test):,} ({ds.meta['split']}; {ds.meta['val_rule']}), "
                     f"{picked[0].config.epochs} epochs, best-validation epoch per seed "
                     f"{[r.meta['best_epoch'] for r in picked]}")
    return lines


def shown_table(table: pd.DataFrame, notes: Mapping) -> pd.DataFrame:
    """``tables.format_table`` plus a ``note`` column: for a CIFAR row its note, or which conv models
    fill it when it was measured; empty for the other rows."""
    shown = tables.format_table(table)
    shown["note"] = [(notes[row] or "conv: " + ", ".join(MODEL_NAMES[k] for k in CONV_KINDS)) if row in notes
                     else "" for row in table.index]
    return shown


def caption(n_seeds: int, profile: str, notes: Mapping, conv_measured: bool) -> str:
    """The saved table's caption: metric, seeds, profile, and what the CIFAR rows hold."""
    return (f"Test accuracy (mean ± std over {n_seeds} seeds) at the best-validation epoch, "
            f"learning rate chosen on validation; profile {profile}"
            + (" (reduced sizes)" if profile == "quick" else "") + ". "
            + " ".join(f"{row}: {note}, no number measured." for row, note in notes.items() if note)
            + (" CIFAR rows: conv DLGN and conv ReLU in the DLGN and ReLU columns." if conv_measured else ""))


def summary_line(table: pd.DataFrame, row: str, columns: Sequence[str] = COLUMNS) -> str:
    """The best model of a row by mean test accuracy (the first in column order on a tie) and whether
    the DLGN is within one std of it: best mean − DLGN mean ≤ the larger of the two stds."""
    present = [c for c in columns if tables.cell(table, row, c, "n") > 0]
    means = {c: tables.cell(table, row, c) for c in present}
    best = max(present, key=means.get)
    gap = means[best] - means["DLGN"]
    spread = max(tables.cell(table, row, best, "std"), tables.cell(table, row, "DLGN", "std"))
    if best == "DLGN":
        relation = "DLGN is the best"
    elif np.isnan(spread):
        relation = f"DLGN {means['DLGN']:.3f}, gap {gap:.3f} (one seed: no std)"
    else:
        within = "within" if gap <= spread else "not within"
        relation = f"DLGN {means['DLGN']:.3f} is {within} 1 std of the best (gap {gap:.3f}, std {spread:.3f})"
    return f"{row}: best {best} {means[best]:.3f}; {relation}"


def summary_lines(table: pd.DataFrame, rows: Sequence[str], notes: Mapping) -> list[str]:
    """:func:`summary_line` for the fully connected ``rows``, then per CIFAR row its note or the conv
    DLGN against conv ReLU."""
    lines = [summary_line(table, row) for row in rows]
    for row, note in notes.items():
        if note:
            lines.append(f"{row}: {note}")
            continue
        dlgn, relu = (tables.cell(table, row, column) for column in ("DLGN", "ReLU"))
        lines.append(f"{row}: conv DLGN {dlgn:.3f}, conv ReLU {relu:.3f} (difference {dlgn - relu:+.3f})")
    return lines


def panels(rows: Mapping, probe: CifarProbe) -> dict:
    """Row label -> model kinds, for the figure: every benchmark row and the CIFAR rows measured."""
    return {**{row: kinds for row, (_, _, kinds, _) in rows.items()},
            **{row: CONV_KINDS for row in probe.measured}}
