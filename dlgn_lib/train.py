"""Training: ``train(config) -> Run`` with per-epoch history and log-spaced snapshots (no plotting).

Losses and metrics by task are in ``dlgn_lib.losses``. Model selection uses the validation split
only; the test split is reported, never used to choose. ``train`` is the plain reference trainer
(autograd, one model); ``dlgn_lib.fused`` trains the fully connected kinds, one seed or many, with
the same results to float rounding and is what ``dlgn_lib.runs`` uses for them.
"""
from __future__ import annotations

import functools
import math
import os
import platform
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from . import __version__, data, models
from .config import RunConfig, snapshot_epochs
from .losses import metric_name, task_loss, task_metric

__all__ = ["Run", "load_dataset", "train"]

SPLITS = ("train", "val", "test")
EVAL_CHUNK = 8192  # evaluation batch for splits larger than this


def quiet() -> bool:
    """Progress bars off under CI (``CI`` set) or when ``DLGN_QUIET`` is set."""
    return bool(os.environ.get("CI") or os.environ.get("DLGN_QUIET"))


@functools.lru_cache(maxsize=16)
def load_dataset(spec) -> data.Dataset:
    """The dataset of a ``DataSpec``, kept in memory so many runs on one dataset load it once."""
    return data.load(spec.name, **spec.kwargs())


def make_model(config: RunConfig, dataset: data.Dataset) -> torch.nn.Module:
    """The untrained model of a config, initialised from ``config.seed`` (global RNG untouched).

    The kind is looked up in ``models.KINDS`` (``models.build_run_model``): fully connected kinds
    read flattened inputs; "conv_<kind>" builds the kind's conv variant for image inputs
    (N, C, H, W), its widths being the channels of each layer.
    """
    model = config.model
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return models.build_run_model(model.kind, dataset.x_train.shape[1:], model.widths, dataset.out_dim,
                                      **model.kwargs())


def loss_margin(config: RunConfig) -> float:
    """The binary-loss margin factor of a config's model convention (``models.binary_margin``)."""
    return models.binary_margin(config.model.kwargs().get("convention", models.DEFAULT_CONVENTION))


def make_optimizer(config: RunConfig, params, **options) -> torch.optim.Optimizer:
    """The config's optimiser over the trainable ``params``; ``options`` (e.g. ``fused=True``) go
    to the torch optimiser and change how, not what, it computes."""
    params = [p for p in params if p.requires_grad]
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay, **options)
    return torch.optim.SGD(params, lr=config.lr, momentum=0.9, weight_decay=config.weight_decay, **options)


def _cpu_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


@dataclass
class Run:
    """A finished run: its config, per-epoch history (plain floats), snapshots and metadata.

    ``history`` has key "epoch" and, for each split, "<split>_loss" and "<split>_metric", all lists
    of floats of the same length. ``snapshots`` maps epoch → model state (CPU tensors);
    ``best_state`` is the state at the epoch of best validation metric.
    """
    config: RunConfig
    history: dict[str, list[float]]
    snapshots: dict[int, dict[str, torch.Tensor]]
    best_state: dict[str, torch.Tensor]
    meta: dict = field(default_factory=dict)

    @property
    def epochs(self) -> list[int]:
        """Epochs with a saved snapshot, ascending."""
        return sorted(self.snapshots)

    def dataset(self) -> data.Dataset:
        return load_dataset(self.config.data)

    def model_at(self, epoch: int | str | None = None, device=None) -> torch.nn.Module:
        """The model at a snapshot epoch (None: the last; "best": best validation epoch), in eval mode."""
        if epoch is None:
            state = self.snapshots[self.epochs[-1]]
        elif epoch == "best":
            state = self.best_state
        elif epoch in self.snapshots:
            state = self.snapshots[epoch]
        else:
            raise ValueError(f"epoch={epoch!r} has no snapshot; saved epochs: {self.epochs}")
        model = make_model(self.config, self.dataset())
        model.load_state_dict(state)
        return model.to(device or "cpu").eval()

    def final(self, key: str) -> float:
        """Last recorded value of a history key, e.g. ``run.final("test_metric")``."""
        return self.history[key][-1]


def _batches(n: int, batch_size: int | None, generator: torch.Generator, shuffle: bool = True):
    """The minibatches of one epoch: index tensors in a fresh random order (``shuffle``) or
    contiguous slices in the data's order (``slice`` objects); ``[None]`` for full batch."""
    if batch_size is None or batch_size >= n:
        return [None]
    if not shuffle:
        return [slice(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]
    order = torch.randperm(n, generator=generator)
    return list(order.split(batch_size))


def eval_splits(config: RunConfig, epoch: int, snap_at) -> tuple[str, ...]:
    """The splits evaluated at an evaluation epoch: all of them with ``config.curves``; else the
    validation split only, and all of them at snapshot epochs and at the end (lean epochs)."""
    if config.curves or epoch in snap_at or epoch == config.epochs:
        return SPLITS
    return ("val",)


def evaluation_row(model: torch.nn.Module, splits: dict, task: str, margin: float = 1.0,
                   which=SPLITS) -> torch.Tensor:
    """Loss and metric of the model on each split (``SPLITS`` order, 6 values), on the CPU.

    Args:
        splits: split name → (inputs, targets) on the model's device.
        margin: binary-loss margin factor (``loss_margin``).
        which: the splits to evaluate; the others are NaN.
    """
    with torch.no_grad():
        row = []
        for s in SPLITS:
            if s not in which:
                row += [torch.tensor(float("nan"))] * 2
                continue
            x, y = splits[s]
            # Large splits (full-size images) go through in chunks so activations fit in memory.
            out = model(x) if len(x) <= EVAL_CHUNK else torch.cat([model(c) for c in x.split(EVAL_CHUNK)])
            row += [task_loss(out, y, task, margin).cpu(), task_metric(out, y, task).cpu()]
        return torch.stack(row)


def history_and_meta(table: list[list[float]], evaluated: list[int], best_val: float, best_epoch: int,
                     ds: data.Dataset, device: torch.device, model: torch.nn.Module,
                     seconds: float, test_at_best: float | None = None) -> tuple[dict[str, list[float]], dict]:
    """A run's ``history`` and ``meta`` from its evaluation table (shared with ``fused``).

    Args:
        table: one row per evaluation, (loss, metric) for each split in ``SPLITS`` order (NaN for
            a split not evaluated at that epoch).
        evaluated: the epoch of each row.
        best_val, best_epoch: the best validation metric and its epoch.
        model: a model of the run (for parameter counts).
        test_at_best: the test metric of the best-validation state, when its row has none.
    """
    history = {"epoch": [float(e) for e in evaluated]}
    for j, s in enumerate(SPLITS):
        history[f"{s}_loss"] = [r[2 * j] for r in table]
        history[f"{s}_metric"] = [r[2 * j + 1] for r in table]
    best_row = table[evaluated.index(best_epoch)]
    meta = {
        "versions": {"dlgn_lib": __version__, "torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "device": str(device), "seconds": seconds, "data_source": ds.source, "task": ds.task,
        "metric": metric_name(ds.task), "n_params": sum(p.numel() for p in model.parameters()),
        "n_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "best_epoch": best_epoch, "best_val_metric": best_val,
        "test_metric_at_best": best_row[5] if test_at_best is None else test_at_best,
    }
    return history, meta


def train(config: RunConfig, *, device=None, progress: bool | None = None,
          dataset: data.Dataset | None = None) -> Run:
    """Train one model from its config (seeded, device-agnostic) and return the ``Run``.

    Args:
        device: torch device; default CUDA when present, else CPU.
        progress: show a tqdm bar; default on unless ``quiet()``.
        dataset: the dataset, if already loaded (else loaded from ``config.data``).
    """
    device = torch.device(device) if device is not None else models.default_device()
    ds = dataset if dataset is not None else load_dataset(config.data)
    model = make_model(config, ds).to(device)
    opt = make_optimizer(config, model.parameters())
    splits = {s: (getattr(ds, f"x_{s}").to(device), getattr(ds, f"y_{s}").to(device)) for s in SPLITS}
    x_train, y_train = splits["train"]
    shuffle = torch.Generator().manual_seed(config.seed)
    snap_at = set(snapshot_epochs(config.epochs, config.n_snapshots))
    margin = loss_margin(config)

    records: list[torch.Tensor] = []   # one row per evaluation: losses and metrics of the 3 splits
    evaluated: list[int] = []
    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    best = (-float("inf"), 0, None)

    def evaluate(epoch: int):
        nonlocal best
        row = evaluation_row(model, splits, ds.task, margin, eval_splits(config, epoch, snap_at))
        records.append(row)
        evaluated.append(epoch)
        if row[3].item() > best[0]:  # validation metric
            best = (row[3].item(), epoch, _cpu_state(model))

    start = time.perf_counter()
    evaluate(0)
    snapshots[0] = _cpu_state(model)
    show = (not quiet()) if progress is None else progress
    for epoch in tqdm(range(1, config.epochs + 1), desc=config.label(), disable=not show, leave=False):
        model.train()
        for idx in _batches(x_train.shape[0], config.batch_size, shuffle, config.shuffle):
            xb, yb = (x_train, y_train) if idx is None else (x_train[idx], y_train[idx])
            opt.zero_grad(set_to_none=True)
            task_loss(model(xb), yb, ds.task, margin).backward()
            opt.step()
        model.eval()
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            evaluate(epoch)
        if epoch in snap_at:
            snapshots[epoch] = _cpu_state(model)
    seconds = time.perf_counter() - start

    table = torch.stack(records).tolist()
    best_val, best_epoch, best_state = best
    test_at_best = None
    if math.isnan(table[evaluated.index(best_epoch)][5]):   # the best epoch was a lean one
        model.load_state_dict(best_state)
        test_at_best = evaluation_row(model.eval(), splits, ds.task, margin, ("test",))[5].item()
    history, meta = history_and_meta(table, evaluated, best_val, best_epoch, ds, device, model, seconds,
                                     test_at_best)
    meta.update(engine="autograd", seeds_together=1, compiled=False)
    return Run(config, history, snapshots, best_state, meta)
