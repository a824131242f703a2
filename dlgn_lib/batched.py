"""Train many seeds of one config at once, vectorised over the seed axis with ``vmap`` (reconstruction §6).

This is the engine for the conv kinds; the fully connected kinds train faster through
``dlgn_lib.fused``. Lean epochs (``config.curves`` off) and fixed-order batches are not
implemented here: the configs of this engine must keep ``curves`` and ``shuffle`` on.

Small nets are overhead-bound: a training step of a 16-unit DLGN costs about as much Python and
dispatch time as one of a net ten times wider. ``train_seeds`` therefore stacks the parameters of S
seeds (``torch.func.stack_module_state``) and runs one ``vmap``-ed forward, backward and optimiser
step for all of them. Each seed keeps its own run:

- the models are built by ``train.make_model``, so seed s starts from the same init as ``train``;
- the loss is the sum over seeds of each seed's mean loss, so seed s's gradient is its own;
- Adam and SGD (momentum, L2 weight decay) update every element from that element's own gradient
  and state only, so one optimiser over the stacked tensors makes each seed's own update; the
  step count is shared and equal for all seeds;
- minibatches: seed s draws its order from ``torch.Generator().manual_seed(s)`` through
  ``train._batches``, exactly as ``train`` does;
- evaluation, snapshots and best-validation selection follow ``train.train``.

The result equals S one-by-one ``train`` runs up to floating-point rounding: batched matrix
products may round differently from single ones (see ``tests/test_batched.py`` for tolerances).
"""
from __future__ import annotations

import copy
import time

import torch
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from . import data, models
from .config import snapshot_epochs
from .fused import check_same_but_seed
from .losses import task_loss, task_metric
from .train import (SPLITS, Run, _batches, evaluation_row, history_and_meta, load_dataset, loss_margin,
                    make_model, make_optimizer, quiet)

__all__ = []

#: Evaluation runs vmapped over the seeds while their activations on all splits (S × N × width
#: floats) fit in this many bytes, about one core's L2 cache; beyond, a loop over the seeds.
EVAL_CACHE_BYTES = 1 << 20


def _evaluator(template, seed_models, params, buffers, splits, task: str, width: int, margin: float):
    """A function returning the (S, 6) losses and metrics of all seeds on ``SPLITS``, as ``train``.

    Small evaluations are overhead-bound: one vmapped forward on all splits at once is cheapest.
    Large ones are memory-bound once the S seeds' activations fall out of cache; then each seed's
    own model evaluates as in ``train`` (``train.evaluation_row``), its parameters aliasing its
    slice of the stacked tensors so that it always holds the current weights.
    """
    x_all = torch.cat([splits[s][0] for s in SPLITS])
    n_seeds = len(seed_models)
    if n_seeds * len(x_all) * width * x_all.element_size() > EVAL_CACHE_BYTES:
        stacked = {**params, **buffers}
        for s, model in enumerate(seed_models):
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
                tensor.data = stacked[name][s].detach()   # a view: shares the storage
        device = x_all.device
        return lambda: torch.stack([evaluation_row(m, splits, task, margin) for m in seed_models]).to(device)

    bounds = torch.tensor([0] + [len(splits[s][0]) for s in SPLITS]).cumsum(0).tolist()

    def scores_of(p, b):
        out = functional_call(template, (p, b), (x_all,))
        row = []
        for j, s in enumerate(SPLITS):
            o, y = out[bounds[j]:bounds[j + 1]], splits[s][1]
            row += [task_loss(o, y, task, margin), task_metric(o, y, task)]
        return torch.stack(row)

    scores = vmap(scores_of)
    return lambda: scores(params, buffers)


def train_seeds(configs, *, device=None, progress: bool | None = None,
                dataset: data.Dataset | None = None) -> list[Run]:
    """Train configs that differ only in ``seed`` together; one ``Run`` per config, in order.

    Args:
        configs: ``RunConfig`` s equal except for distinct seeds.
        device: torch device; default CUDA when present, else CPU.
        progress: show a tqdm bar; default on unless ``train.quiet()``.
        dataset: the dataset, if already loaded (else loaded from the configs' data spec).

    Returns:
        Runs as ``train.train`` would return them (same history keys, snapshot epochs, best-state
        rule and meta keys), with ``meta["engine"]`` = "vmap", ``meta["seeds_together"]`` = S and
        ``meta["seconds"]`` the wall
        time of the whole batch.
    """
    configs = list(configs)
    check_same_but_seed(configs)
    config, n_seeds = configs[0], len(configs)
    if not (config.curves and config.shuffle):
        raise ValueError("batched.train_seeds needs curves=True and shuffle=True; "
                         "fully connected kinds with lean or fixed-order epochs train through dlgn_lib.fused")
    device = torch.device(device) if device is not None else models.default_device()
    ds = dataset if dataset is not None else load_dataset(config.data)

    seed_models = [make_model(c, ds).to(device) for c in configs]
    state_keys = list(seed_models[0].state_dict())
    params, buffers = stack_module_state(seed_models)   # (S, …) leaves; frozen ones stay frozen
    template = copy.deepcopy(seed_models[0]).to("meta")  # structure only: weights come from params
    # One fused kernel per step over all stacked tensors; same arithmetic as the per-tensor loop.
    opt = make_optimizer(config, params.values(), fused=True)

    def loss_of(p, b, x, y):
        return task_loss(functional_call(template, (p, b), (x,)), y, ds.task, margin)

    splits = {s: (getattr(ds, f"x_{s}").to(device), getattr(ds, f"y_{s}").to(device)) for s in SPLITS}
    x_train, y_train = splits["train"]
    margin = loss_margin(config)
    score_rows = _evaluator(template, seed_models, params, buffers, splits, ds.task, max(config.model.widths), margin)
    full_step = vmap(loss_of, in_dims=(0, 0, None, None))
    batch_step = vmap(loss_of, in_dims=(0, 0, 0, 0))
    shuffles = [torch.Generator().manual_seed(c.seed) for c in configs]
    n_train = x_train.shape[0]
    snap_at = set(snapshot_epochs(config.epochs, config.n_snapshots))

    records: list[torch.Tensor] = []   # one (S, 6) tensor per evaluation
    evaluated: list[int] = []
    snapshots: list[dict[int, dict[str, torch.Tensor]]] = [{} for _ in configs]
    best_val = torch.full((n_seeds,), -float("inf"), device=device)
    best_epoch = torch.zeros(n_seeds, dtype=torch.long, device=device)
    best_state = {k: v.detach().clone() for k, v in {**params, **buffers}.items()}

    def evaluate(epoch: int):
        nonlocal best_val, best_epoch
        with torch.no_grad():
            rows = score_rows()
            # Strictly better validation metric, as in train.train: the first best epoch wins.
            better = rows[:, 3] > best_val
            best_val = torch.where(better, rows[:, 3], best_val)
            best_epoch = torch.where(better, epoch, best_epoch)
            for k, v in {**params, **buffers}.items():
                best_state[k] = torch.where(better.view(-1, *[1] * (v.dim() - 1)), v, best_state[k])
        records.append(rows)
        evaluated.append(epoch)

    def snapshot(epoch: int):
        stacked = {k: v.detach().cpu() for k, v in {**params, **buffers}.items()}
        for s in range(n_seeds):
            # clone: a view would carry (and save) the storage of all S seeds
            snapshots[s][epoch] = {k: stacked[k][s].clone() for k in state_keys}

    start = time.perf_counter()
    evaluate(0)
    snapshot(0)
    show = (not quiet()) if progress is None else progress
    label = f"{config.label()} ×{n_seeds} seeds"
    for epoch in tqdm(range(1, config.epochs + 1), desc=label, disable=not show, leave=False):
        orders = [_batches(n_train, config.batch_size, g) for g in shuffles]
        if orders[0][0] is None:   # full batch (train._batches gives [None])
            steps = [(full_step, x_train, y_train)]
        else:
            # Seed s's minibatches in seed s's order, stacked: (S, B, d) inputs per step.
            order = torch.stack([torch.cat(o) for o in orders]).to(device)
            xs, ys = x_train[order], y_train[order]
            steps = [(batch_step, xb, yb) for xb, yb in zip(xs.split(config.batch_size, dim=1),
                                                          ys.split(config.batch_size, dim=1))]
        for step, xb, yb in steps:
            opt.zero_grad(set_to_none=True)
            step(params, buffers, xb, yb).sum().backward()
            opt.step()
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            evaluate(epoch)
        if epoch in snap_at:
            snapshot(epoch)
    seconds = time.perf_counter() - start

    tables = torch.stack(records, dim=1).cpu().tolist()   # (S, evaluations, 6) as floats
    best_vals, best_epochs = best_val.cpu().tolist(), best_epoch.cpu().tolist()
    best_cpu = {k: best_state[k].cpu() for k in state_keys}
    out = []
    for s, cfg in enumerate(configs):
        history, meta = history_and_meta(tables[s], evaluated, best_vals[s], best_epochs[s], ds, device,
                                         seed_models[s], seconds)
        meta.update(engine="vmap", seeds_together=n_seeds, compiled=False)
        out.append(Run(cfg, history, snapshots[s], {k: best_cpu[k][s].clone() for k in state_keys}, meta))
    return out
