"""The group's odt protocol at paper scale: their data, their settings, their published numbers.

The same group's later work (Banerjee, Ramaswamy, Yadav, Lakshminarayanan, ICLR 2025) trains
DLGNs on the oblique-decision-tree sets SD-I/II/III with a fixed protocol and publishes test
accuracy (their Table 1). This module states that protocol once, as run configs, so that
notebook 09 (and anyone) can set "reproduced here" beside "published" (reconstruction §3, §5):

- data: the group's own generator (``data.odt(generator="group")``, seed 365), split 50/25/25
  in drawn order;
- the group's conventions (``models.CONVENTIONS``: PyTorch init, u^1 = U^1 1, cross-entropy on
  the logits (-f, f));
- Adam without weight decay, 10 minibatches per epoch in the data's order (no shuffling),
  1,501 passes, validation accuracy after every pass; the state at the *first* best
  validation accuracy is the one reported on test (``Run.meta["test_metric_at_best"]``);
- β, learning rate and widths per data set and kind from the group's notebook (``SETTINGS``);
  the ReLU baseline over a small grid (``RELU_GRID``) chosen on validation only; DLN and
  frozen-gate DLGN at the DLGN's sizes for context.

Nothing here is tuned toward the published numbers: ``SETTINGS`` are the group's, ``RELU_GRID``
and ``SEEDS`` are fixed before any run.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from . import data, locations, models, text
from .config import DataSpec, ModelSpec, RunConfig
from .files import write_atomic
from .tables import run_metric, select_on_validation

__all__ = ["RELU_GRID", "SEEDS", "all_configs", "choose", "comparison", "configs", "data_spec", "dataset_name",
           "format_comparison", "save_comparison"]

DATASETS = ("SD-I", "SD-II", "SD-III")
#: (β, learning rate, hidden widths) per data set and kind, from the group's notebook.
SETTINGS: dict[str, dict[str, tuple[float, float, tuple[int, ...]]]] = {
    "SD-I": {"dlgn": (3.0, 0.02, (20,) * 5), "dlgn_sf": (30.0, 0.02, (10,) * 4)},
    "SD-II": {"dlgn": (10.0, 0.01, (20,) * 4), "dlgn_sf": (3.0, 0.02, (10,) * 4)},
    "SD-III": {"dlgn": (10.0, 0.001, (10,) * 3), "dlgn_sf": (3.0, 0.01, (20,) * 3)},
}
#: Test accuracy (%) published for this protocol (ICLR 2025, Table 1).
PUBLISHED: dict[str, dict[str, float]] = {
    "SD-I": {"dlgn": 96.1, "dlgn_sf": 97.4, "relu": 90.6},
    "SD-II": {"dlgn": 94.3, "dlgn_sf": 90.3, "relu": 82.3},
    "SD-III": {"dlgn": 65.1, "dlgn_sf": 63.6, "relu": 62.1},
}
#: The ReLU baseline's grid: every (widths, learning rate), chosen per data set on validation.
RELU_GRID: dict[str, tuple] = {"widths": ((32,) * 3, (64,) * 3), "lr": (1e-3, 1e-2)}
#: The kinds of the table: the group's two models, the ReLU baseline, and context rows.
KINDS = ("dlgn", "dlgn_sf", "relu", "dln", "dlgn_frozen")
EPOCHS = 1501
N_BATCHES = 10
#: The model seeds, fixed before any run.
SEEDS = (0, 1, 2, 3, 4)


def data_spec(name: str, n_total: int | None = None) -> DataSpec:
    """The group's data set ``name`` (SD-I/II/III), at its full size unless ``n_total`` is given."""
    if name not in DATASETS:
        raise ValueError(f"data set {name!r} is not allowed; choose one of {list(DATASETS)}")
    size = data.ODT_CONFIGS[name]
    return DataSpec.make("odt", d=size["d"], n_total=n_total or size["n_total"], generator="group")


def dataset_name(spec: DataSpec) -> str:
    """The protocol's name ("SD-I", …) of one of its data specs, at any ``n_total``."""
    for name in DATASETS:
        if data_spec(name, spec.kwargs().get("n_total")) == spec:
            return name
    raise ValueError(f"{spec} is not one of the protocol's data sets {list(DATASETS)}")


def configs(name: str, kind: str, *, seeds: Sequence[int] = SEEDS, epochs: int = EPOCHS,
            n_total: int | None = None) -> list[RunConfig]:
    """The protocol's run configs for one data set and kind, one per seed (and per ReLU grid
    point). DLN and frozen-gate DLGN take the DLGN's widths (and β, learning rate)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not allowed; choose one of {list(KINDS)}")
    spec = data_spec(name, n_total)
    n_train = spec.kwargs()["n_total"] // 2
    common = dict(epochs=epochs, batch_size=-(-n_train // N_BATCHES), shuffle=False, curves=False,
                  eval_every=1, n_snapshots=2, optimizer="adam", weight_decay=0.0)
    if kind == "relu":
        grid = [(widths, lr) for widths in RELU_GRID["widths"] for lr in RELU_GRID["lr"]]
        return [RunConfig(spec, ModelSpec.make("relu", widths), lr=lr, seed=seed, **common,
                          name=f"ReLU {'-'.join(map(str, widths))}, lr {lr:g}, {name} (seed {seed})")
                for widths, lr in grid for seed in seeds]
    beta, lr, widths = SETTINGS[name]["dlgn_sf" if kind == "dlgn_sf" else "dlgn"]
    options = {} if kind == "dln" else {"beta": beta}
    model = ModelSpec.make(kind, widths, **options)
    return [RunConfig(spec, model, lr=lr, seed=seed, **common, name=f"{kind} on {name} (seed {seed})")
            for seed in seeds]


def all_configs(names: Iterable[str] = DATASETS, kinds: Iterable[str] = KINDS, **options) -> list[RunConfig]:
    """``configs`` for every (data set, kind), in order."""
    return [c for name in names for kind in kinds for c in configs(name, kind, **options)]


def choose(runs: Sequence) -> list:
    """The runs that enter the table: every DLGN-family and DLN run, and for ReLU the grid point
    with the best mean validation accuracy over seeds (per data set)."""
    def grid_point(run):
        return (tuple(run.config.model.widths), run.config.lr)
    relu = [r for r in runs if r.config.model.kind == "relu"]
    chosen, _ = select_on_validation(relu, lambda r: r.config.data, choice=grid_point) if relu else ([], {})
    keep = {id(r) for r in chosen}
    return [r for r in runs if r.config.model.kind != "relu" or id(r) in keep]


def comparison(runs: Sequence, names: Sequence[str] = DATASETS) -> pd.DataFrame:
    """Published against reproduced test accuracy (%), one row per (data set, kind).

    Columns: published, reproduced mean and sample std over seeds (``ddof=1``), the seeds'
    accuracies, n, the difference reproduced − published, and whether the published number
    lies within 2 std of the reproduced mean ("—" where nothing is published or std is undefined).
    """
    by_cell: dict = {}
    for run in choose(runs):
        name = dataset_name(run.config.data)
        by_cell.setdefault((name, run.config.model.kind), []).append(run)
    rows = []
    for name in names:
        for kind in KINDS:
            cell = sorted(by_cell.get((name, kind), []), key=lambda r: r.config.seed)
            if not cell:
                continue
            accs = np.array([100 * run_metric(r, "test_metric_at_best") for r in cell])
            mean, std = float(accs.mean()), float(accs.std(ddof=1)) if len(accs) > 1 else math.nan
            published = PUBLISHED[name].get(kind, math.nan)
            within = "—" if math.isnan(published) or math.isnan(std) else \
                ("yes" if abs(mean - published) <= 2 * std else "no")
            rows.append({"data": name, "model": kind, "published": published, "mean": mean, "std": std,
                         "seeds": ", ".join(f"{a:.1f}" for a in accs), "n": len(accs),
                         "difference": mean - published, "within 2 std": within,
                         "setting": _setting(cell[0].config)})
    return pd.DataFrame(rows)


def _setting(config: RunConfig) -> str:
    options = config.model.kwargs()
    beta = f"β {options['beta']:g}, " if "beta" in options else ""
    return f"{beta}lr {config.lr:g}, widths {'-'.join(map(str, config.model.widths))}, {config.epochs} epochs"


def format_comparison(table: pd.DataFrame) -> str:
    """The comparison as printed text: accuracies to one decimal, names of the models; rows named by
    data set and model in each block of columns (``text.table``)."""
    rows = pd.MultiIndex.from_arrays([table["data"], [models.display_name(k) for k in table["model"]]],
                                     names=["data", "model"])
    shown = pd.DataFrame({
        "published": [("—" if math.isnan(v) else f"{v:.1f}") for v in table["published"]],
        "reproduced": [f"{m:.1f} ± {s:.1f}" if not math.isnan(s) else f"{m:.1f}"
                       for m, s in zip(table["mean"], table["std"])],
        "difference": [("—" if math.isnan(v) else f"{v:+.1f}") for v in table["difference"]],
        "within 2 std": table["within 2 std"], "seeds": table["seeds"], "setting": table["setting"],
    }).set_axis(rows)
    return text.table(shown)


def save_comparison(table: pd.DataFrame, table_id: str):
    """Write the comparison's numbers to ``<figures dir>/<table_id>.csv`` at the one decimal the
    notebook prints them with (more would record the CPU's last bits, not the result); returns the path."""
    path = locations.figures_dir() / f"{table_id}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, table.to_csv(index=False, float_format="%.1f"))
    return path
