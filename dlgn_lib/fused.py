"""Fused training of the fully connected kinds: S seeds in one pass, backward written out (§6).

Small nets are overhead-bound: a training step of a 20-unit DLGN spends most of its time in
per-operation dispatch, autograd bookkeeping and optimiser loops, not in arithmetic. This trainer
removes that overhead for every fully connected kind (DLGN, DLGN-SF, frozen-gate DLGN, DLN, ReLU):

- the parameters of S seeds live in flat buffers (trainable and frozen parts apart), each weight
  a contiguous (S, out, in) block, and every layer is one batched matrix product (for one seed a
  plain one); activations are feature-major, (S, units, samples);
- the gating network of a DLGN is deep *linear*, so all its pre-activations come from one product
  with the stacked effective hyperplanes ``[V^1; …; V^L]`` (``V^ℓ = W^ℓ ⋯ W^1``), followed by one
  sigmoid over all layers at once (reconstruction §1);
- the backward pass is written out: the gradients of a DLGN are a few products of the forward's
  own tensors (``dU^ℓ = (dh^ℓ ⊙ G^ℓ)ᵀ h^{ℓ-1}``, ``dG^ℓ = dh^ℓ ⊙ U^ℓ h^{ℓ-1}``, ``dη = β dG ⊙
  G ⊙ (1 - G)``, ``dV = dηᵀ x``, then the chain ``V^ℓ = W^ℓ V^{ℓ-1}`` back to each ``W^ℓ``), summed
  over chunks of the minibatch into one flat gradient buffer; long runs compile this step with
  ``torch.compile`` (``use_compile``);
- one Adam (or SGD) step updates the whole buffer: both optimisers are element-wise, so this is
  exactly each seed's own optimiser;
- evaluation runs in cache-sized chunks under ``no_grad``; with ``config.curves`` off only the
  validation split is evaluated each epoch (lean epochs); the best-validation state of every
  seed is kept on the device with one ``where`` per evaluation (no host copies).

Each seed keeps its own run: its init is ``train.make_model``'s, its minibatches are drawn as in
``train.train`` (or taken in the data's order when ``config.shuffle`` is off), and evaluation,
snapshots and best-state selection follow ``train.train``. The runs equal ``train.train``'s up to
float rounding (``tests/test_fused.py``). Denormal floats are flushed to zero while this trainer
runs on a CPU (small products and optimiser states produce them, and they are slow there);
PyTorch's default (no flushing) is set again afterwards.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import warnings

import torch
from tqdm.auto import tqdm

from . import data, models
from .config import RunConfig, snapshot_epochs
from .losses import loss_gradient, task_loss, task_metric
from .train import (SPLITS, Run, _batches, eval_splits, history_and_meta, load_dataset, loss_margin,
                    make_model, quiet)

__all__ = ["train_seeds"]

#: The kinds this trainer handles: the fully connected ones whose registry entry says ``fused``
#: (their models are ``DLGN``, ``ReLUNet`` or ``DeepLinearNet``; ``models.KINDS``).
FUSED_KINDS = tuple(key for key, kind in models.KINDS.items() if kind.fused)
#: Evaluation and training go through the inputs in chunks of rows whose gate tensors
#: (S × rows × Σm floats) take about this many bytes, so that the working set stays in a core's
#: cache and temporaries are reused rather than freshly mapped (training sums the gradients of
#: its chunks).
EVAL_CHUNK_BYTES = 1 << 21
TRAIN_CHUNK_BYTES = 1 << 21
#: Runs of at least this many chunk steps compile the step with ``torch.compile`` (when
#: ``DLGN_COMPILE`` is "auto", the default): compiling takes 3-25 s once per process and shape,
#: and pays back on long runs only. "1" always compiles, "0" never.
COMPILE_MIN_STEPS = 5000
#: How many shapes one compiled step may be compiled for in a process (``torch._dynamo``'s
#: ``recompile_limit``, 8 by default, and its ``accumulated_recompile_limit``). Past dynamo's own
#: limit a new shape runs uncompiled, so a run's last bits would depend on which runs the process
#: had trained before it (a notebook's kernel trains dozens of shapes); compiled and uncompiled
#: steps agree to about 1e-6, not bit for bit. Under this limit every long run compiles every shape.
RECOMPILE_LIMIT = 1024


def _chunk_rows(n: int, budget: int, bytes_per_row: int) -> int:
    """Rows per chunk: n split into the fewest equal chunks of at most ``budget`` bytes (≥ 64 rows)."""
    n_chunks = max(1, -(-n * bytes_per_row // budget))
    return max(64, -(-n // n_chunks))


def check_same_but_seed(configs: list[RunConfig]) -> None:
    """Raise ``ValueError`` unless the configs are equal except for distinct seeds."""
    if not configs:
        raise ValueError("configs: need at least one config")
    base = configs[0].replace(seed=0)
    for config in configs:
        if config.replace(seed=0) != base:
            raise ValueError(f"configs: every config must equal the first except for its seed; "
                             f"{config.label()} differs in more than the seed")
    seeds = [c.seed for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"configs: seeds must be distinct, got {seeds}")


class StackedParameters:
    """The parameters of S models of one architecture in flat buffers, with named views.

    ``flat`` holds the trainable parameters (what the optimiser updates, gradient in ``grad``),
    ``frozen`` the others. Each parameter is one contiguous (S, *shape) block of its buffer, so
    that batched products read and write it directly; ``view(name)`` is that block, or for one
    seed the parameter's own shape (plain matrix products are faster than batches of one).
    """

    def __init__(self, seed_models: list[torch.nn.Module]):
        named = list(seed_models[0].named_parameters())
        self.names = [n for n, _ in named]
        self.shapes = {n: tuple(p.shape) for n, p in named}
        self.trainable = {n: p.requires_grad for n, p in named}
        self.n_seeds = S = len(seed_models)
        per_model = [dict(m.named_parameters()) for m in seed_models]

        def stack(part: bool) -> torch.Tensor:
            blocks = [torch.stack([pm[n].detach() for pm in per_model]).reshape(-1)
                      for n in self.names if self.trainable[n] == part]
            return torch.cat(blocks) if blocks else named[0][1].new_empty(0)
        self.flat, self.frozen = stack(True), stack(False)
        self.grad = torch.zeros_like(self.flat)
        self._where: dict[str, tuple[bool, int, int]] = {}
        offsets = {True: 0, False: 0}
        for n, p in named:
            t = self.trainable[n]
            self._where[n] = (t, offsets[t], offsets[t] + S * p.numel())
            offsets[t] += S * p.numel()
        # The seed of every element of ``flat``: selects whole seeds with one ``where``.
        self.seed_of = torch.cat([torch.arange(S, device=self.flat.device).repeat_interleave(
            self.flat.new_empty(self.shapes[n]).numel()) for n in self.names if self.trainable[n]]
            or [torch.zeros(0, dtype=torch.long, device=self.flat.device)])
        self.lead = () if S == 1 else (S,)   # the seed axis of activations and views
        self._views = {n: self._view_of(n, self.flat, self.frozen, self.lead) for n in self.names}
        self._grads = {n: self._view_of(n, self.grad, None, self.lead) for n in self.names if self.trainable[n]}

    def _view_of(self, name: str, trainable: torch.Tensor, frozen: torch.Tensor | None,
                 lead: tuple[int, ...]) -> torch.Tensor:
        t, start, stop = self._where[name]
        return (trainable if t else frozen)[start:stop].view(*lead, *self.shapes[name])

    def view(self, name: str) -> torch.Tensor:
        return self._views[name]

    def grad_view(self, name: str) -> torch.Tensor | None:
        """The gradient view of a trainable parameter; None for a frozen one."""
        return self._grads.get(name)

    def has(self, name: str) -> bool:
        return name in self._views

    def state_dicts(self, flat: torch.Tensor | None = None) -> list[dict[str, torch.Tensor]]:
        """Each seed's state dict on the CPU (compact copies), from ``flat`` (default: current)."""
        trainable = (self.flat if flat is None else flat).detach().cpu()
        frozen = self.frozen.cpu()
        blocks = {n: self._view_of(n, trainable, frozen, (self.n_seeds,)) for n in self.names}
        return [{n: blocks[n][s].clone() for n in self.names} for s in range(self.n_seeds)]


class _Pass:
    """What both passes share: products that work on one seed (2-D matrices) or S (3-D batches).

    Activations are feature-major, (*lead, units, N) with lead = () for one seed and (S,) for
    several, so that each seed's layer is one contiguous block and element-wise work runs along
    the long sample axis. Inputs X are (N, d), shared by every seed, or (S, N, d), one minibatch
    per seed. ``chunk_gradients`` is a pure function of its inputs and the current weights, so it
    can run eagerly or compiled (``torch.compile``).
    """

    def __init__(self, params: StackedParameters, task: str, margin: float):
        self.p, self.task, self.margin = params, task, margin
        self.lead = params.lead
        self.mm = torch.mm if not self.lead else torch.bmm

    @staticmethod
    def times_inputs(W: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """W[s] @ X[s]ᵀ: (*lead, m, N); inputs shared by every seed take one matrix product."""
        if X.dim() == 2:
            return (W.reshape(-1, X.shape[1]) @ X.T).view(*W.shape[:-1], X.shape[0])
        return torch.bmm(W, X.mT)

    @staticmethod
    def grad_of_inputs(D: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """D[s] @ X[s] for D (*lead, m, N): the gradient of ``times_inputs``' weights."""
        if X.dim() == 2:
            return (D.reshape(-1, X.shape[0]) @ X).view(*D.shape[:-1], X.shape[1])
        return torch.bmm(D, X)

    def output_gradient(self, out: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
        return loss_gradient(out.mT, y, self.task, self.margin, n=n).mT

    def effective(self):
        return None

    def finish(self, eff) -> None:
        pass


class _DLGNPass(_Pass):
    """Forward and written-out backward of S DLGNs (deep, SF or frozen-gate) on stacked weights."""

    def __init__(self, model: models.DLGN, params: StackedParameters, task: str, margin: float):
        super().__init__(params, task, margin)
        p = params
        self.beta, self.shallow, self.frozen = model.beta, model.shallow, model.frozen_gates
        self.widths = model.widths
        self.value_x = model.value_input == "x"
        self.first_is_matrix = p.shapes["value_first"] != (self.widths[0],)
        bounds = torch.tensor([0, *self.widths]).cumsum(0).tolist()
        self.slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        L = len(self.widths)
        self.W = [p.view(f"gating.{l}.weight") for l in range(L)]
        self.b = [p.view(f"gating.{l}.bias") for l in range(L)] if model.gate_bias else None
        self.U = [None] + [p.view(f"value_layers.{l}.weight") for l in range(L - 1)]
        self.vf, self.head = p.view("value_first"), p.view("head.weight")
        # Where chunk_gradients' results go: gradient views, and for the gating network the sums
        # of d loss/d(βV) and d loss/d(βc) over the step's chunks, turned into W and b
        # gradients by ``finish``.
        names = ["head.weight", *[f"value_layers.{l}.weight" for l in range(L - 1)], "value_first"]
        self.targets = [p.grad_view(n) for n in names]
        if not self.frozen:
            d = p.shapes["gating.0.weight"][1]
            self.dV = p.grad.new_zeros(*self.lead, sum(self.widths), d)
            self.dc = p.grad.new_zeros(*self.lead, sum(self.widths)) if self.b else None
            self.targets += [self.dV] + ([self.dc] if self.b else [])
            self.gW = [p.grad_view(f"gating.{l}.weight") for l in range(L)]
            self.gb = [p.grad_view(f"gating.{l}.bias") for l in range(L)] if self.b else None

    def effective(self):
        """Each gating layer's effective hyperplanes (*lead, m, d) and biases (*lead, m) (or
        None), and all layers' together scaled by β, computed once per step: ``V^ℓ = W^ℓ V^{ℓ-1}``,
        ``c^ℓ = W^ℓ c^{ℓ-1} + b^ℓ`` (DLGN-SF: the layer itself)."""
        Vs, cs = [], []
        for l, W in enumerate(self.W):
            b = self.b[l] if self.b else None
            if self.shallow or l == 0:
                V, c = W, b
            else:
                V = self.mm(W, Vs[-1])
                c = None if b is None else self.mm(W, cs[-1][..., None])[..., 0] + b
            Vs.append(V)
            cs.append(c)
        V_all = torch.cat(Vs, dim=-2) * self.beta
        c_all = torch.cat(cs, dim=-1) * self.beta if self.b else None
        return Vs, cs, V_all, c_all

    def forward(self, X: torch.Tensor, eff):
        """Outputs (*lead, k, N), the gates G (*lead, Σm, N) and each layer's h^ℓ (*lead, m, N)."""
        _, _, V_all, c_all = eff
        eta = self.times_inputs(V_all, X)                  # β η of every layer at once
        G = torch.sigmoid(eta if c_all is None else eta + c_all[..., None])
        hs = []
        for l, sl in enumerate(self.slices):
            if l == 0 and not self.value_x:   # u^1, learned directly or as U^1 1
                a = (self.vf.sum(dim=-1) if self.first_is_matrix else self.vf)[..., None]
            else:
                a = self.times_inputs(self.vf, X) if l == 0 else self.mm(self.U[l], hs[-1])
            hs.append(G[..., sl, :] * a)       # h^ℓ = G^ℓ ⊙ a^ℓ
        return self.mm(self.head, hs[-1]), G, hs

    def outputs(self, X: torch.Tensor, eff) -> torch.Tensor:
        return self.forward(X, eff)[0]

    def chunk_gradients(self, X: torch.Tensor, y: torch.Tensor, n: int, eff) -> list[torch.Tensor]:
        """The gradients of Σ_s (loss_s summed over this chunk of the n rows of a minibatch), in
        the order of ``self.targets``."""
        out, G, hs = self.forward(X, eff)
        dout = self.output_gradient(out, y, n)
        grads = [self.mm(dout, hs[-1].mT)]
        dh = self.mm(self.head.mT, dout)
        detas, value_grads = [], []
        for l in range(len(self.widths) - 1, -1, -1):
            G_l = G[..., self.slices[l], :]
            if not self.frozen:
                # d loss/d(βη^ℓ) = dh ⊙ a^ℓ ⊙ G ⊙ (1 - G) = t - t ⊙ G with t = dh ⊙ h^ℓ
                t = dh * hs[l]
                detas.append(t - t * G_l)
            da = dh * G_l
            if l > 0:
                value_grads.append(self.mm(da, hs[l - 1].mT))
                dh = self.mm(self.U[l].mT, da)
            elif self.value_x:
                first = self.grad_of_inputs(da, X)
            elif self.first_is_matrix:   # u^1 = U^1 1: every column of U^1 gets du^1
                first = da.sum(dim=-1)[..., None].expand(self.vf.shape)
            else:
                first = da.sum(dim=-1)
        grads += value_grads[::-1] + [first]
        if not self.frozen:
            deta = torch.cat(detas[::-1], dim=-2)
            grads.append(self.grad_of_inputs(deta, X))
            if self.b:
                grads.append(deta.sum(dim=-1))
        return grads

    def finish(self, eff) -> None:
        """The gating weights' gradients from the step's d loss/d(βV) and d loss/d(βc)."""
        if self.frozen:
            return
        (Vs, cs, _, _), dV, dc = eff, self.dV, self.dc
        dV.mul_(self.beta)
        if dc is not None:
            dc.mul_(self.beta)
        add_mm = torch.Tensor.addmm_ if not self.lead else torch.Tensor.baddbmm_
        for l in range(len(self.widths) - 1, -1, -1):
            sl = self.slices[l]
            if self.shallow or l == 0:
                self.gW[l].copy_(dV[..., sl, :])
                if dc is not None:
                    self.gb[l].copy_(dc[..., sl])
                continue
            # V^l = W^l V^{l-1} and c^l = W^l c^{l-1} + b^l pass their gradients down the chain
            W, prev = self.W[l], self.slices[l - 1]
            self.mm(dV[..., sl, :], Vs[l - 1].mT, out=self.gW[l])
            add_mm(dV[..., prev, :], W.mT, dV[..., sl, :])
            if dc is not None:
                add_mm(self.gW[l], dc[..., sl, None], cs[l - 1][..., None, :])
                self.gb[l].copy_(dc[..., sl])
                add_mm(dc[..., prev, None], W.mT, dc[..., sl, None])


class _MLPPass(_Pass):
    """Forward and written-out backward of S ReLU nets or deep linear nets on stacked weights."""

    def __init__(self, model: torch.nn.Module, params: StackedParameters, task: str, margin: float):
        super().__init__(params, task, margin)
        p = params
        self.relu = isinstance(model, models.ReLUNet)
        self.widths = model.widths
        L = len(self.widths)
        bias = p.has("layers.0.bias")
        self.W = [p.view(f"layers.{l}.weight") for l in range(L)]
        self.b = [p.view(f"layers.{l}.bias") for l in range(L)] if bias else None
        self.head = p.view("head.weight")
        names = ["head.weight"] + [f"layers.{l}.{w}" for l in range(L) for w in ("weight", "bias")
                                   if w == "weight" or bias]
        self.targets = [p.grad_view(n) for n in names]

    def forward(self, X: torch.Tensor):
        """Outputs (*lead, k, N) and every layer's activations (the inputs first)."""
        hs = [X]
        for l, W in enumerate(self.W):
            z = self.times_inputs(W, X) if l == 0 else self.mm(W, hs[-1])
            if self.b:
                z = z + self.b[l][..., None]
            hs.append(torch.relu(z) if self.relu else z)
        return self.mm(self.head, hs[-1]), hs

    def outputs(self, X: torch.Tensor, eff) -> torch.Tensor:
        return self.forward(X)[0]

    def chunk_gradients(self, X: torch.Tensor, y: torch.Tensor, n: int, eff) -> list[torch.Tensor]:
        """The gradients of Σ_s (loss_s summed over this chunk), in the order of ``self.targets``."""
        out, hs = self.forward(X)
        dout = self.output_gradient(out, y, n)
        grads = [self.mm(dout, hs[-1].mT)]
        dh = self.mm(self.head.mT, dout)
        layers = []
        for l in range(len(self.widths) - 1, -1, -1):
            dz = torch.where(hs[l + 1] > 0, dh, 0.0) if self.relu else dh
            gW = self.grad_of_inputs(dz, X) if l == 0 else self.mm(dz, hs[l].mT)
            layers.append([gW, dz.sum(dim=-1)] if self.b else [gW])
            if l > 0:
                dh = self.mm(self.W[l].mT, dz)
        return grads + [g for layer in layers[::-1] for g in layer]


class _Optimizer:
    """Adam or SGD (momentum 0.9) over a flat buffer, in torch.optim's arithmetic.

    Both are element-wise, so one update of the stacked buffer is each seed's own update; the
    arithmetic is ``torch.optim.Adam``'s / ``torch.optim.SGD``'s (L2 weight decay added to the
    gradient), without its per-parameter Python loop.
    """

    def __init__(self, config: RunConfig, flat: torch.Tensor):
        self.kind, self.lr, self.weight_decay = config.optimizer, config.lr, config.weight_decay
        self.steps = 0
        self.exp_avg = torch.zeros_like(flat)
        self.exp_avg_sq = torch.zeros_like(flat) if self.kind == "adam" else None

    def step(self, param: torch.Tensor, grad: torch.Tensor) -> None:
        self.steps += 1
        if self.weight_decay:
            grad.add_(param, alpha=self.weight_decay)
        if self.kind == "sgd":
            if self.steps == 1:
                self.exp_avg.copy_(grad)
            else:
                self.exp_avg.mul_(0.9).add_(grad)
            param.add_(self.exp_avg, alpha=-self.lr)
            return
        beta1, beta2, eps = 0.9, 0.999, 1e-8   # torch.optim.Adam's defaults
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = self.lr / (1 - beta1 ** self.steps)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** self.steps)).add_(eps)
        param.addcdiv_(self.exp_avg, denom, value=-step_size)


def use_compile(n_steps: int) -> bool:
    """Whether a run of ``n_steps`` chunk steps compiles its step (``DLGN_COMPILE``: auto, 1, 0)."""
    setting = os.environ.get("DLGN_COMPILE", "auto")
    if setting not in ("auto", "0", "1"):
        raise ValueError(f"DLGN_COMPILE={setting!r} is not allowed; use auto (default), 1 or 0")
    return setting == "1" or (setting == "auto" and n_steps >= COMPILE_MIN_STEPS)


class _CompiledOrEager:
    """``torch.compile`` of a function, falling back to the function itself (with one warning)
    when compiling fails, e.g. on a machine without a C compiler."""

    def __init__(self, fn):
        self.fn, self.compiled = fn, torch.compile(fn, dynamic=False)

    def __call__(self, *args):
        if self.compiled is not None:
            import torch._dynamo   # loaded by torch.compile already; named here for its config
            try:
                with _quiet_cpu_compile(), torch._dynamo.config.patch(
                        recompile_limit=RECOMPILE_LIMIT, accumulated_recompile_limit=RECOMPILE_LIMIT):
                    return self.compiled(*args)
            except Exception as exc:   # any compiler failure: the eager function computes the same
                warnings.warn(f"torch.compile failed ({type(exc).__name__}: {str(exc)[:200]}); "
                              "training continues uncompiled", RuntimeWarning, stacklevel=2)
                self.compiled = None
        return self.fn(*args)


@contextlib.contextmanager
def _quiet_cpu_compile():
    """Silence the C++ extension loader's "No CUDA runtime is found" warning, which a CUDA build of
    PyTorch logs when it compiles for the CPU: it says nothing about the run."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _pass_for(model: torch.nn.Module, params: StackedParameters, task: str, margin: float):
    kind = _DLGNPass if isinstance(model, models.DLGN) else _MLPPass
    return kind(model, params, task, margin)


@contextlib.contextmanager
def _flushed_denormals():
    """Flush denormals to zero inside the block, then back to PyTorch's default (off)."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def train_seeds(configs, *, device=None, progress: bool | None = None,
                dataset: data.Dataset | None = None) -> list[Run]:
    """Train fully connected configs that differ only in ``seed`` together; one ``Run`` each.

    Args:
        configs: ``RunConfig`` s of a kind in ``FUSED_KINDS``, equal except for distinct seeds
            (one config is the S = 1 case).
        device: torch device; default CUDA when present, else CPU.
        progress: show a tqdm bar; default on unless ``train.quiet()``.
        dataset: the dataset, if already loaded (else loaded from the configs' data spec).

    Returns:
        Runs as ``train.train`` returns them (same history keys, snapshot epochs, best-state rule
        and meta keys), with ``meta["engine"]`` = "fused", ``meta["seeds_together"]`` = S and
        ``meta["seconds"]`` the wall time of the whole group. A seed's run is the same, bit for
        bit, whichever seeds it trains with (one seed alone trains beside a copy of itself).
    """
    configs = list(configs)
    check_same_but_seed(configs)
    config, n_seeds = configs[0], len(configs)
    if config.model.kind not in FUSED_KINDS:
        what = ("not fully connected" if config.model.kind not in models.MODEL_KINDS
                else "not marked fused in models.KINDS")
        raise ValueError(f"model kind {config.model.kind!r} is {what}; the fused trainer handles "
                         f"{list(FUSED_KINDS)} (other kinds train through dlgn_lib.batched or train)")
    device = torch.device(device) if device is not None else models.default_device()
    ds = dataset if dataset is not None else load_dataset(config.data)
    with _flushed_denormals() if device.type == "cpu" else contextlib.nullcontext(), torch.no_grad():
        if n_seeds == 1:
            # A lone seed trains beside a copy of itself: with one seed the stacked products
            # reduce to plain matrix(-vector) products, whose last bits differ from the batched
            # ones, and a seed's run would depend on how many seeds the cache lacked.
            run = _train(configs * 2, config, 2, device, ds, progress)[0]
            run.meta["seeds_together"] = 1
            return [run]
        return _train(configs, config, n_seeds, device, ds, progress)


def _train(configs, config, n_seeds, device, ds, progress) -> list[Run]:
    seed_models = [make_model(c, ds).to(device) for c in configs]
    params = StackedParameters(seed_models)
    margin = loss_margin(config)
    net = _pass_for(seed_models[0], params, ds.task, margin)
    opt = _Optimizer(config, params.flat) if params.flat.numel() else None
    splits = {s: (getattr(ds, f"x_{s}").to(device), getattr(ds, f"y_{s}").to(device)) for s in SPLITS}
    x_train, y_train = splits["train"]
    n_train = x_train.shape[0]
    shuffles = [torch.Generator().manual_seed(c.seed) for c in configs]
    snap_at = set(snapshot_epochs(config.epochs, config.n_snapshots))
    width_sum = sum(config.model.widths)
    chunk = _chunk_rows(len(splits["val"][0]), EVAL_CHUNK_BYTES, n_seeds * width_sum * x_train.element_size())
    train_chunk = _chunk_rows(config.batch_size or n_train, TRAIN_CHUNK_BYTES,
                              n_seeds * width_sum * x_train.element_size())

    n_batches = 1 if config.batch_size is None else -(-n_train // config.batch_size)
    n_steps = config.epochs * n_batches * -(-min(config.batch_size or n_train, n_train) // train_chunk)
    compiled = use_compile(n_steps)
    chunk_gradients = _CompiledOrEager(net.chunk_gradients) if compiled else net.chunk_gradients
    chunk_outputs = _CompiledOrEager(net.outputs) if compiled else net.outputs

    def outputs(x: torch.Tensor, flat: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs (S, N, k) of every seed on inputs x (N, d), in chunks (with ``flat``'s weights)."""
        saved = None
        if flat is not None:
            saved = params.flat.clone()
            params.flat.copy_(flat)
        try:
            eff = net.effective()
            out = torch.cat([chunk_outputs(c, eff) for c in x.split(chunk)], dim=-1).mT
            return out.reshape(n_seeds, *out.shape[-2:])
        finally:
            if saved is not None:
                params.flat.copy_(saved)

    def scores(which, flat=None) -> torch.Tensor:
        """(S, 6) losses and metrics on ``SPLITS`` (NaN where not in ``which``)."""
        cols = []
        for s in SPLITS:
            if s in which:
                x, y = splits[s]
                out = outputs(x, flat)
                cols += [task_loss(out, y, ds.task, margin), task_metric(out, y, ds.task)]
            else:
                cols += [x_train.new_full((n_seeds,), float("nan"))] * 2
        return torch.stack(cols, dim=1)

    records: list[torch.Tensor] = []
    evaluated: list[int] = []
    snapshots: list[dict[int, dict[str, torch.Tensor]]] = [{} for _ in configs]
    best_val = torch.full((n_seeds,), -float("inf"), device=device, dtype=x_train.dtype)
    best_epoch = torch.zeros(n_seeds, dtype=torch.long, device=device)
    best_flat = params.flat.detach().clone()

    def evaluate(epoch: int):
        nonlocal best_val, best_epoch
        rows = scores(eval_splits(config, epoch, snap_at))
        # Strictly better validation metric, as in train.train: the first best epoch wins.
        better = rows[:, 3] > best_val
        best_val = torch.where(better, rows[:, 3], best_val)
        best_epoch = torch.where(better, epoch, best_epoch)
        torch.where(better[params.seed_of], params.flat, best_flat, out=best_flat)
        records.append(rows)
        evaluated.append(epoch)

    def snapshot(epoch: int):
        for s, state in enumerate(params.state_dicts()):
            snapshots[s][epoch] = state


    def step(X: torch.Tensor, y: torch.Tensor):
        """One optimiser step on a minibatch X (B, d) shared by the seeds or (S, B, d), targets
        y (B,) or (S, B), in chunks of rows whose gradients add up."""
        eff = net.effective()
        n = X.shape[-2]
        for start in range(0, n, train_chunk):
            grads = chunk_gradients(X[..., start:start + train_chunk, :], y[..., start:start + train_chunk],
                                    n, eff)
            for target, grad in zip(net.targets, grads):
                if start == 0:
                    target.copy_(grad)
                else:
                    target.add_(grad)
        net.finish(eff)
        opt.step(params.flat, params.grad)

    start = time.perf_counter()
    evaluate(0)
    snapshot(0)
    show = (not quiet()) if progress is None else progress
    label = config.label() if n_seeds == 1 else f"{config.label()} ×{n_seeds} seeds"
    for epoch in tqdm(range(1, config.epochs + 1), desc=label, disable=not show, leave=False):
        if opt is not None:
            orders = [_batches(n_train, config.batch_size, g, config.shuffle) for g in shuffles]
            for parts in zip(*orders):
                idx = parts[0]
                if idx is None or isinstance(idx, slice):   # the same rows for every seed
                    xb, yb = (x_train, y_train) if idx is None else (x_train[idx], y_train[idx])
                    step(xb, yb)
                else:   # seed s's own minibatch: (S, B, d) inputs (one seed: (B, d))
                    rows = (parts[0] if n_seeds == 1 else torch.stack(parts)).to(device)
                    step(x_train[rows], y_train[rows])
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            evaluate(epoch)
        if epoch in snap_at:
            snapshot(epoch)
    seconds = time.perf_counter() - start

    tables = torch.stack(records, dim=1).cpu().tolist()   # (S, evaluations, 6)
    best_vals, best_epochs = best_val.cpu().tolist(), best_epoch.cpu().tolist()
    best_states = params.state_dicts(best_flat)
    lean = [math.isnan(tables[s][evaluated.index(best_epochs[s])][5]) for s in range(n_seeds)]
    test_at_best = [None] * n_seeds
    if any(lean):   # a best epoch without a test evaluation: evaluate the best states on test
        tests = scores(("test",), best_flat)[:, 5].cpu().tolist()
        test_at_best = [t if is_lean else None for t, is_lean in zip(tests, lean)]
    out = []
    for s, cfg in enumerate(configs):
        history, meta = history_and_meta(tables[s], evaluated, best_vals[s], best_epochs[s], ds, device,
                                         seed_models[s], seconds, test_at_best[s])
        meta.update(engine="fused", seeds_together=n_seeds,
                    compiled=compiled and getattr(chunk_gradients, "compiled", None) is not None)
        out.append(Run(cfg, history, snapshots[s], best_states[s], meta))
    return out
