"""Training: ``train(config) -> Run`` with per-epoch history and log-spaced snapshots (no plotting).

Losses (SPEC §1): logistic loss on the scalar output for ±1 labels, cross-entropy for k classes,
squared loss for regression. Metrics: accuracy for labels, R² for regression. Model selection
uses the validation split only; the test split is reported, never used to choose.
"""
from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import __version__, data, models
from .config import RunConfig, snapshot_epochs

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

    Fully connected kinds read flattened inputs; "conv_<kind>" builds ``models.build_conv_model``
    for image inputs (N, C, H, W), its widths being the channels of each layer.
    """
    kind, widths, options = config.model.kind, config.model.widths, config.model.kwargs()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        if kind.startswith("conv_"):
            return models.build_conv_model(kind[len("conv_"):], dataset.x_train.shape[1], widths,
                                           dataset.out_dim, **options)
        return models.build_model(kind, dataset.in_dim, widths, dataset.out_dim, **options)


def task_loss(output: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    """Mean loss of outputs (N, out_dim) against targets, by task (SPEC §1 losses)."""
    if task == "binary":
        return F.softplus(-y * output[:, 0]).mean()
    if task == "multiclass":
        return F.cross_entropy(output, y)
    return F.mse_loss(output[:, 0], y)


def task_metric(output: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    """Accuracy for binary (sign of the output, 0 counted as +1) and multiclass; R² for regression."""
    if task == "binary":
        return ((output[:, 0] >= 0) == (y > 0)).float().mean()
    if task == "multiclass":
        return (output.argmax(dim=1) == y).float().mean()
    residual = ((output[:, 0] - y) ** 2).sum()
    return 1.0 - residual / ((y - y.mean()) ** 2).sum().clamp_min(1e-12)


def metric_name(task: str) -> str:
    return "r2" if task == "regression" else "accuracy"


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


def _batches(n: int, batch_size: int | None, generator: torch.Generator):
    if batch_size is None or batch_size >= n:
        return [None]
    order = torch.randperm(n, generator=generator)
    return list(order.split(batch_size))


def evaluation_row(model: torch.nn.Module, splits: dict, task: str) -> torch.Tensor:
    """Loss and metric of the model on each split (``SPLITS`` order, 6 values), on the CPU.

    Args:
        splits: split name → (inputs, targets) on the model's device.
    """
    with torch.no_grad():
        row = []
        for s in SPLITS:
            x, y = splits[s]
            # Large splits (full-size images) go through in chunks so activations fit in memory.
            out = model(x) if len(x) <= EVAL_CHUNK else torch.cat([model(c) for c in x.split(EVAL_CHUNK)])
            row += [task_loss(out, y, task), task_metric(out, y, task)]
        return torch.stack(row).cpu()


def history_and_meta(table: list[list[float]], evaluated: list[int], best_val: float, best_epoch: int,
                     ds: data.Dataset, device: torch.device, model: torch.nn.Module,
                     seconds: float) -> tuple[dict[str, list[float]], dict]:
    """A run's ``history`` and ``meta`` from its evaluation table (shared with ``batched``).

    Args:
        table: one row per evaluation, (loss, metric) for each split in ``SPLITS`` order.
        evaluated: the epoch of each row.
        best_val, best_epoch: the best validation metric and its epoch.
        model: a model of the run (for parameter counts).
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
        "best_epoch": best_epoch, "best_val_metric": best_val, "test_metric_at_best": best_row[5],
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

    records: list[torch.Tensor] = []   # one row per evaluation: losses and metrics of the 3 splits
    evaluated: list[int] = []
    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    best = (-float("inf"), 0, None)

    def evaluate(epoch: int):
        nonlocal best
        row = evaluation_row(model, splits, ds.task)
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
        for idx in _batches(x_train.shape[0], config.batch_size, shuffle):
            xb, yb = (x_train, y_train) if idx is None else (x_train[idx], y_train[idx])
            opt.zero_grad(set_to_none=True)
            task_loss(model(xb), yb, ds.task).backward()
            opt.step()
        model.eval()
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            evaluate(epoch)
        if epoch in snap_at:
            snapshots[epoch] = _cpu_state(model)
    seconds = time.perf_counter() - start

    table = torch.stack(records).tolist()
    best_val, best_epoch, best_state = best
    history, meta = history_and_meta(table, evaluated, best_val, best_epoch, ds, device, model, seconds)
    return Run(config, history, snapshots, best_state, meta)
