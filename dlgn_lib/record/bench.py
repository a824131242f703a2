"""Performance benchmarks of reconstruction §6: ``python -m dlgn_lib.record.bench [--quick] [--series]``.

Each row is a ratio of two timings taken in this process, interleaved repeat by repeat (their order reversed
every other repeat) so that machine load hits both sides: median [min – max] over repeats. FLOP counts are the
matrix-multiply FLOPs executed (``torch.utils.flop_counter``), against the float32 matmul rate measured on the
spot. The table goes to ``<build dir>/bench.txt``; ``--record`` writes the rows into ``docs/bench.json`` (the
guide's table is made from it), where a row this run did not measure keeps its earlier entry and every row
names the run that measured it.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .. import files, fused, kernels, locations, losses, models, numerics, train
from ..config import DataSpec, ModelSpec, RunConfig
from ..files import command
from . import provenance

__all__ = ["main"]

#: The committed record of ``--record`` runs (docs/bench.json), read by ``dlgn_lib.record.report``.
RECORD = locations.REPO_ROOT / "docs" / "bench.json"


@dataclass(frozen=True)
class Sizes:
    """Problem sizes of one bench mode; the defaults are reconstruction §6's."""
    fc_in: int = 784                       # Fashion-MNIST, flattened
    fc_widths: tuple[int, ...] = (128,) * 4
    fc_classes: int = 10
    batch: int = 256
    steps: int = 50                        # training steps per timing
    n_seeds: int = 16
    seed_widths: tuple[int, ...] = (16, 16, 16)
    seed_epochs: int = 200
    seed_n_train: int = 256                # circle data as in notebook 05
    seed_n_eval: int | None = None         # validation and test points; None: the circle defaults
    seed_eval_every: int = 10              # as in notebook 05
    kernel_n: int = 10_000
    kernel_layers: int = 4
    kernel_width: int = 128
    matmul_n: int = 4096
    sd1_n_total: int = 40_000              # SD-I: 20,000 train, 10,000 validation
    sd1_d: int = 20
    sd1_widths: tuple[int, ...] = (20,) * 5
    sd1_batch: int = 2000
    sd1_epochs: int = 20                   # epochs per timing (the protocol runs 1,501)
    sd1_seeds: int = 16
    sd1_protocol_epochs: int = 1501        # one whole protocol run per side, timed once
    # 03's region checks, one seed: (widths, snapshots, uniform points, data points); None: 03's full sizes
    region_sizes: tuple[tuple[int, ...], int, int, int] | None = None
    repeats: int = 5
    targets_apply: bool = True             # False at toy sizes: the targets are for the reconstruction's sizes

    def sd1_configs(self) -> list[RunConfig]:
        """The group's SD-I protocol (convention "group"), one config per seed."""
        data = DataSpec.make("odt", d=self.sd1_d, n_total=self.sd1_n_total)
        model = ModelSpec.make("dlgn", self.sd1_widths, beta=3.0, convention="group")
        base = RunConfig(data, model, epochs=self.sd1_epochs, lr=0.02, batch_size=self.sd1_batch,
                         shuffle=False, curves=False, n_snapshots=2)
        return [base.replace(seed=s) for s in range(self.sd1_seeds)]

    def seed_configs(self) -> list[RunConfig]:
        eval_sizes = {} if self.seed_n_eval is None else {"n_val": self.seed_n_eval, "n_test": self.seed_n_eval}
        data = DataSpec.make("circle", target="steps", n_train=self.seed_n_train, **eval_sizes)
        base = RunConfig(data, ModelSpec.make("dlgn", self.seed_widths), epochs=self.seed_epochs,
                         eval_every=self.seed_eval_every, n_snapshots=30)
        return [base.replace(seed=s) for s in range(self.n_seeds)]


MODES = {
    "default": Sizes(),
    "quick": Sizes(steps=20, sd1_epochs=10, sd1_protocol_epochs=300, repeats=3),
    # Smoke test of the machinery (tests/test_bench.py): toy sizes, one repeat.
    "tiny": Sizes(fc_in=12, fc_widths=(8, 8), fc_classes=3, batch=16, steps=2, n_seeds=2, seed_widths=(4, 4),
                  seed_epochs=3, seed_n_train=16, seed_n_eval=16, seed_eval_every=1, kernel_n=64,
                  kernel_layers=2, kernel_width=8, matmul_n=64, sd1_n_total=400, sd1_widths=(6, 6),
                  sd1_batch=20, sd1_epochs=2, sd1_seeds=2, sd1_protocol_epochs=3,
                  region_sizes=((4, 3, 3), 3, 500, 60), repeats=1, targets_apply=False),
}
SERIES_TARGETS = {"cold": 600.0, "warm": 120.0}   # seconds, reconstruction §6
SERIES_ROW = "quick series wall time, {} run cache"   # .format(state), a key of SERIES_TARGETS
COST_ROW = "{} under {}, seconds: training, analysis, file I/O, other"   # .format(notebook id, profile)


@dataclass(frozen=True)
class Row:
    """One table row: the per-repeat values, their unit, and the target (None: no target)."""
    name: str
    values: tuple[float, ...]
    target: tuple[str, float] | None = None        # ("<=" or ">=", bound)
    unit: str = "×"
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def met(self, targets_apply: bool = True) -> str:
        if self.target is None or not self.values or not targets_apply:
            return "—"
        op, bound = self.target
        ok = self.median <= bound if op == "<=" else self.median >= bound
        return "yes" if ok else "NO"


# --------------------------------------------------------------------------- measurements

def _timed(fn, device: torch.device) -> float:
    """Seconds that ``fn()`` takes, the device synchronised before and after."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def _matmul_flops(fn) -> int:
    """Matrix-multiply FLOPs that ``fn()`` executes (forward and backward), counted by torch."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def fc_training_step(kind: str, sizes: Sizes, device: torch.device, seed: int = 0):
    """One Adam training step of a fully connected model on a fixed random batch, as a closure."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = models.build_model(kind, sizes.fc_in, sizes.fc_widths, sizes.fc_classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(sizes.batch, sizes.fc_in, generator=generator).to(device)
    y = torch.randint(sizes.fc_classes, (sizes.batch,), generator=generator).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        losses.task_loss(model(x), y, "multiclass").backward()
        opt.step()
    return step


class PlainDLGN(nn.Module):
    """The SD-I model as a plain PyTorch user writes it: ``nn.Linear`` layers, PyTorch's init,
    value input a vector of ones through a d → m_1 layer, logits (-f, f)."""

    def __init__(self, d: int, widths: tuple[int, ...], beta: float):
        super().__init__()
        self.beta = beta
        self.gating = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip((d, *widths[:-1]), widths))
        self.value = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip((d, *widths[:-1]), widths))
        self.head = nn.Linear(widths[-1], 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eta, h = x, torch.ones_like(x)
        for gate, value in zip(self.gating, self.value):
            eta = gate(eta)
            h = torch.sigmoid(self.beta * eta) * value(h)
        f = self.head(h)
        return torch.cat([-f, f], dim=1)


def _plain_sd1_loop(config: RunConfig, dataset, device: torch.device):
    """A plain training loop of one SD-I seed (Adam, minibatches in order, validation accuracy after every epoch):
    ``(run, epoch)``, ``run()`` training a fresh model from the seed, ``epoch()`` one epoch of a model of its own."""
    x, y = dataset.x_train.to(device), (dataset.y_train > 0).long().to(device)
    xv, yv = dataset.x_val.to(device), (dataset.y_val > 0).long().to(device)
    loss_fn = nn.CrossEntropyLoss()

    def fresh_epoch():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            model = PlainDLGN(dataset.in_dim, config.model.widths, config.model.kwargs()["beta"]).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)

        def epoch():
            for start in range(0, len(x), config.batch_size):
                xb, yb = x[start:start + config.batch_size], y[start:start + config.batch_size]
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()
            with torch.no_grad():
                return (model(xv).argmax(dim=1) == yv).float().mean().item()
        return epoch

    def run():
        epoch = fresh_epoch()
        for _ in range(config.epochs):
            epoch()
    return run, fresh_epoch()


# Work timed in fresh processes (``_in_fresh_process``): a process's peak memory, and the package's work on
# both code paths (reconstruction §7.1), which is fixed per process when torch loads.
PROLOGUE = """
import torch
torch.set_num_threads({threads})
from dlgn_lib import fused, train
from dlgn_lib.record import bench
sizes = bench.MODES[{mode!r}]
device = {device!r}
"""
PEAK_RSS_SCRIPT = """
configs = sizes.sd1_configs()
ds = train.load_dataset(configs[0].data)
before = bench.peak_rss()
fused.train_seeds(configs, device=device, progress=False, dataset=ds)
print(before, bench.peak_rss())
"""
NUMERICS_SCRIPT = """
import time
sd1, circle = sizes.sd1_configs()[:1], sizes.seed_configs()
sd1_data, circle_data = train.load_dataset(sd1[0].data), train.load_dataset(circle[0].data)
step = bench.fc_training_step("dlgn", sizes, torch.device(device))
times = []
for work in (lambda: fused.train_seeds(sd1, device=device, progress=False, dataset=sd1_data),
             lambda: fused.train_seeds(circle, device=device, progress=False, dataset=circle_data),
             lambda: [step() for _ in range(sizes.steps)]):
    work()   # first call: allocations and kernel selection, not timed
    start = time.perf_counter()
    work()
    times.append(time.perf_counter() - start)
print(*times)
"""


def _in_fresh_process(script: str, mode: str, device: torch.device, env: dict, count: int) -> list[float]:
    """The last ``count`` numbers that ``script`` prints, run after ``PROLOGUE`` in a fresh process."""
    code = PROLOGUE.format(threads=torch.get_num_threads(), mode=mode, device=str(device)) + script
    done = subprocess.run([sys.executable, "-c", code], cwd=locations.REPO_ROOT, capture_output=True, text=True,
                          check=True, env=env)
    return [float(x) for x in done.stdout.split()[-count:]]


def peak_rss() -> float:
    """This process's peak resident memory in bytes: VmHWM on Linux (getrusage's ru_maxrss would
    also count the parent's pages at fork, which outlive exec), else ru_maxrss."""
    with contextlib.suppress(OSError):
        return float(re.search(r"^VmHWM:\s*(\d+)", Path("/proc/self/status").read_text(), re.M).group(1)) * 1024
    import resource
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024))


def _sd1_peak_rss(mode: str, device: torch.device, compile_setting: str) -> list[float]:
    """Peak resident memory (bytes) of a fresh process before training the SD-I seeds together (torch and the
    data loaded) and after. A compiled run compiles from an empty compile cache, as on a new machine."""
    with tempfile.TemporaryDirectory(prefix="dlgn-bench-compile-") as cache:
        env = {**os.environ, "DLGN_COMPILE": compile_setting, "TORCHINDUCTOR_CACHE_DIR": cache}
        return _in_fresh_process(PEAK_RSS_SCRIPT, mode, device, env, 2)


def measure(sizes: Sizes, device: torch.device, say=print, mode: str = "default") -> tuple[list[Row], list[str]]:
    """Run the cheap benchmarks; returns the table rows and reference lines (absolute numbers)."""
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(sizes.matmul_n, sizes.matmul_n, generator=generator).to(device) for _ in range(2))
    steps = {kind: fc_training_step(kind, sizes, device) for kind in ("relu", "dlgn", "dlgn_sf")}
    gates = [(torch.rand(sizes.kernel_n, sizes.kernel_width, generator=generator) < 0.5).float().to(device)
             for _ in range(sizes.kernel_layers)]
    configs, sd1 = sizes.seed_configs(), sizes.sd1_configs()
    dataset, sd1_data = train.load_dataset(configs[0].data), train.load_dataset(sd1[0].data)
    n_sd1, e_sd1 = len(sd1), sizes.sd1_epochs
    plain_one, plain_epoch = _plain_sd1_loop(sd1[0], sd1_data, device)
    plain_many = [_plain_sd1_loop(c, sd1_data, device)[0] for c in sd1]
    # The protocol's 1,501 epochs compile the step (DLGN_COMPILE=auto); the timed runs are
    # shorter, so they compile as the protocol would, unless compiling is switched off.
    # Toy sizes (the machinery's smoke test) do not compile.
    sd1_compile = "0" if os.environ.get("DLGN_COMPILE") == "0" or not sizes.targets_apply else "1"

    def sd1_fused(configs):
        def run():   # the trainer reads DLGN_COMPILE per run
            with files.environment(DLGN_COMPILE=sd1_compile):
                return fused.train_seeds(configs, device=device, progress=False, dataset=sd1_data)
        return run

    def run_steps(kind):
        """``sizes.steps`` steps of a fresh model: every timing starts from the same init (a model
        that has trained for long steps through denormal floats, which slows some kinds more)."""
        def run():
            step = fc_training_step(kind, sizes, device)
            for _ in range(sizes.steps):
                step()
        return run

    jobs = {
        "matmul": lambda: a @ b,
        **{kind: run_steps(kind) for kind in steps},
        "kernel": lambda: kernels.overlap_kernel(gates),
        "sequential": lambda: [train.train(c, device=device, progress=False, dataset=dataset) for c in configs],
        "together": lambda: fused.train_seeds(configs, device=device, progress=False, dataset=dataset),
        "one seed": lambda: fused.train_seeds(configs[:1], device=device, progress=False, dataset=dataset),
        "sd1 plain": plain_one,
        "sd1 fused": sd1_fused(sd1[:1]),
        f"sd1 plain ×{n_sd1}": lambda: [run() for run in plain_many],
        f"sd1 fused ×{n_sd1}": sd1_fused(sd1),
    }
    # Warm-up runs, which also count the FLOPs. The SD-I work is counted on the plain loop's
    # epoch (10 steps, validation): the fused trainer does the same training in other products.
    flops = {"matmul": 2 * sizes.matmul_n ** 3, "kernel": _matmul_flops(jobs["kernel"])}
    flops.update({kind: _matmul_flops(step) for kind, step in steps.items()})
    flops["sd1 epoch"] = _matmul_flops(plain_epoch)
    for kind in steps:
        jobs[kind]()
    fused.train_seeds(configs[:2], device=device, progress=False, dataset=dataset)
    say(f"  SD-I warm-up (DLGN_COMPILE={sd1_compile}: the first runs compile the step) …")
    warmup = {}
    for name in ("sd1 fused", f"sd1 fused ×{n_sd1}"):
        start = time.perf_counter()
        compiled = jobs[name]()[0].meta["compiled"]
        warmup[name] = time.perf_counter() - start
    # One whole protocol run per side: a plain loop slows down as training proceeds (its Adam
    # state and activations run into denormal floats), so the first epochs alone flatter it.
    whole = [c.replace(epochs=sizes.sd1_protocol_epochs) for c in sd1[:1]]
    say(f"  SD-I, one seed, {sizes.sd1_protocol_epochs} passes, plain loop and package (once each) …")
    whole_times = {"plain": _timed(_plain_sd1_loop(whole[0], sd1_data, device)[0], device),
                   "package": _timed(sd1_fused(whole), device)}
    say("  peak memory of the SD-I seeds trained together (fresh processes) …")
    rss_before, peak_rss = _sd1_peak_rss(mode, device, "0")
    peak_rss_compiled = _sd1_peak_rss(mode, device, "1")[1] if sd1_compile == "1" else float("nan")

    times: dict[str, list[float]] = {name: [] for name in jobs}
    for r in range(sizes.repeats):
        for name in list(jobs) if r % 2 == 0 else list(reversed(jobs)):
            times[name].append(_timed(jobs[name], device))
        say(f"  repeat {r + 1}/{sizes.repeats}: " + ", ".join(f"{n} {times[n][-1]:.3g} s" for n in jobs))

    def per_repeat(fn) -> tuple[float, ...]:
        return tuple(fn(r) for r in range(sizes.repeats))

    def ratio(top: str, bottom: str) -> tuple[float, ...]:
        return per_repeat(lambda r: times[top][r] / times[bottom][r])

    def vs_matmul(name: str, work: float) -> tuple[float, ...]:
        """The FLOP rate of the job ``name`` (``work`` FLOPs a timing) / the matmul's, per repeat."""
        return per_repeat(lambda r: work / times[name][r] / (flops["matmul"] / times["matmul"][r]))

    sd1_name = f"SD-I protocol (DLGN {'-'.join(map(str, sizes.sd1_widths))}, batch {sizes.sd1_batch}, val every epoch)"
    sd1_work = e_sd1 * flops["sd1 epoch"]
    fc = f"FC {'→'.join(map(str, (sizes.fc_in, *sizes.fc_widths, sizes.fc_classes)))}, batch {sizes.batch}"
    seeds = (f"circle DLGN {'-'.join(map(str, sizes.seed_widths))}, {sizes.seed_epochs} epochs full batch, "
             f"eval every {sizes.seed_eval_every}")
    kernel = f"N={sizes.kernel_n:,}, L={sizes.kernel_layers}, m={sizes.kernel_width}, hard gates"
    rows = [
        Row(f"{sd1_name}, one seed, passes 1-{e_sd1}: plain loop / package", ratio("sd1 plain", "sd1 fused"),
            (">=", 3.0)),
        Row(f"(same), one seed, a whole run of {sizes.sd1_protocol_epochs} passes: plain loop / package",
            (whole_times["plain"] / whole_times["package"],), (">=", 3.0)),
        Row(f"{sd1_name}, {n_sd1} seeds, passes 1-{e_sd1}: plain loops / package, per seed",
            ratio(f"sd1 plain ×{n_sd1}", f"sd1 fused ×{n_sd1}"), (">=", 6.0)),
        Row(f"peak memory of the {n_sd1}-seed SD-I run (fresh process)", (peak_rss / 1e9,), ("<=", 1.0),
            unit=" GB"),
        Row("(same), compiled step, empty compile cache", (peak_rss_compiled / 1e9,), ("<=", 1.0), unit=" GB"),
        *(Row(f"SD-I FLOP/s / matmul FLOP/s, {who}", vs_matmul(name, n * sd1_work)) for who, name, n in (
            ("plain loop, one seed", "sd1 plain", 1), ("package, one seed", "sd1 fused", 1),
            (f"plain loops, {n_sd1} seeds", f"sd1 plain ×{n_sd1}", n_sd1),
            (f"package, {n_sd1} seeds", f"sd1 fused ×{n_sd1}", n_sd1))),
        Row(f"DLGN step / ReLU step ({fc}, Adam)", ratio("dlgn", "relu"), ("<=", 1.6)),
        Row("DLGN-SF step / ReLU step (same)", ratio("dlgn_sf", "relu"), ("<=", 1.6)),
        Row(f"{sizes.n_seeds} seeds one by one / together ({seeds})", ratio("sequential", "together"), (">=", 5.0)),
        # rules v3 (reconstruction §8.1) takes every check over 5-10 seeds: what a notebook's seed
        # count costs, in runs of one seed, when the seeds train together
        Row(f"cost of {sizes.n_seeds} seeds in one-seed runs: together / one seed ({seeds})",
            ratio("together", "one seed"), unit=" runs"),
        Row(f"cost of {n_sd1} seeds in one-seed runs: together / one seed ({sd1_name}, passes 1-{e_sd1})",
            ratio(f"sd1 fused ×{n_sd1}", "sd1 fused"), unit=" runs"),
        Row(f"overlap kernel FLOP/s / matmul FLOP/s ({kernel})", vs_matmul("kernel", flops["kernel"]), (">=", 0.5)),
        Row("training FLOP/s / matmul FLOP/s, ReLU step", vs_matmul("relu", sizes.steps * flops["relu"])),
        Row("training FLOP/s / matmul FLOP/s, DLGN step", vs_matmul("dlgn", sizes.steps * flops["dlgn"])),
    ]
    # Seconds of the SD-I run, the circle seeds and FC DLGN steps, pinned and native code path alternately
    env = {k: v for k, v in os.environ.items() if k not in (*numerics.PINNED, "DLGN_NUMERICS")}
    paths: dict[str, list[list[float]]] = {"pinned": [], "native": []}
    for _ in range(min(sizes.repeats, 3)):
        for path, seconds in paths.items():
            seconds.append(_in_fresh_process(NUMERICS_SCRIPT, mode, device,
                                             {**env, "DLGN_NUMERICS": path, "DLGN_COMPILE": "0"}, 3))
    for i, work in enumerate((f"{sd1_name}, one seed, {e_sd1} passes", seeds, f"{fc}, {sizes.steps} steps")):
        rows.append(Row(f"pinned / native code path, time of: {work}",
                        tuple(p[i] / n[i] for p, n in zip(paths["pinned"], paths["native"]))))
    med = {name: statistics.median(t) for name, t in times.items()}
    region_row, region_line = _region_checks(sizes, say)
    rows.append(region_row)
    reference = [
        f"matmul {sizes.matmul_n}² float32: {flops['matmul'] / med['matmul'] / 1e9:.1f} GFLOP/s (median)",
        "matmul FLOPs per training step (forward + backward): "
        + ", ".join(f"{k} {flops[k] / 1e6:.3g} M ({flops[k] / flops['relu']:.2f}× ReLU)" for k in steps),
        "time per training step: " + ", ".join(f"{k} {med[k] / sizes.steps * 1e3:.2f} ms" for k in steps),
        f"{sizes.n_seeds} seeds: one by one {med['sequential']:.2f} s, together {med['together']:.2f} s; "
        f"overlap kernel {med['kernel']:.2f} s ({flops['kernel'] / 1e9:.1f} GFLOP executed)",
        f"SD-I per epoch: plain loop {med['sd1 plain'] / e_sd1 * 1e3:.1f} ms, package "
        f"{med['sd1 fused'] / e_sd1 * 1e3:.1f} ms (one seed); per seed-epoch with {n_sd1} seeds: plain "
        f"{med[f'sd1 plain ×{n_sd1}'] / e_sd1 / n_sd1 * 1e3:.1f} ms, package "
        f"{med[f'sd1 fused ×{n_sd1}'] / e_sd1 / n_sd1 * 1e3:.1f} ms; "
        f"{flops['sd1 epoch'] / 1e9:.3f} GFLOP of matrix products per epoch (plain loop's count)",
        f"SD-I, one seed, {sizes.sd1_protocol_epochs} passes: plain loop {whole_times['plain']:.1f} s, package "
        f"{whole_times['package']:.1f} s; the timed windows above are passes 1-{e_sd1} from initialisation",
        f"peak memory of the {n_sd1}-seed SD-I run: {peak_rss / 1e6:.0f} MB uncompiled, "
        f"{peak_rss_compiled / 1e6:.0f} MB compiling its step; {rss_before / 1e6:.0f} MB of it before training "
        "(torch and the data loaded)",
        f"SD-I package step compiled: {'yes' if compiled else 'no'}; first runs (compiling, once per "
        f"process and shape): one seed {warmup['sd1 fused']:.1f} s, {n_sd1} seeds "
        f"{warmup[f'sd1 fused ×{n_sd1}']:.1f} s",
        region_line,
    ]
    return rows, reference


def _region_checks(sizes: Sizes, say=print) -> tuple[Row, str]:
    """Notebook 03's region checks of one seed (``studies.planes.region_checks``) against the path-by-path
    code they replaced (``studies._reference_regions``), one timing each after a warm-up. The snapshots
    have random weights: the checks' cost does not depend on training."""
    from types import SimpleNamespace

    from .. import config
    from ..plots.regions import BOX
    from ..studies import _reference_regions, planes
    full = config.NOTEBOOK_SIZES["03"]["full"]
    widths, n_snapshots, n_check, n_data = sizes.region_sizes or (full["widths"], full["n_snapshots"],
                                                                   full["n_check"], full["n"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        snapshots = [models.DLGN(2, widths, 1, gate_bias=True).double() for _ in range(n_snapshots)]
        lo, hi = torch.tensor([BOX[0], BOX[2]]), torch.tensor([BOX[1], BOX[3]])
        x_uniform, x_data = (lo + (hi - lo) * torch.rand(n, 2, dtype=torch.float64) for n in (n_check, n_data))
    run = SimpleNamespace(epochs=list(range(n_snapshots)), config=SimpleNamespace(seed=0),
                          model_at=lambda epoch=None: snapshots[-1 if epoch is None else epoch])
    say("  03's region checks, one seed, path by path and batched (once each) …")
    planes.region_checks(run, x_uniform, x_data, BOX)
    seconds, values = {}, {}
    for name, module in (("before", _reference_regions), ("after", planes)):
        start = time.perf_counter()
        values[name] = module.region_checks(run, x_uniform, x_data, BOX)
        seconds[name] = time.perf_counter() - start
    same = values["before"]["disagreements"] == values["after"]["disagreements"] and all(
        math.isclose(values["before"][k], values["after"][k], rel_tol=1e-12, abs_tol=1e-15)
        for k in ("worst area z", "tiling error"))
    what = (f"DLGN {'-'.join(map(str, widths))}, {n_snapshots} snapshots, {n_check + n_data:,} points"
            + (", 03's full sizes" if sizes.region_sizes is None else ""))
    row = Row(f"03's region checks, one seed ({what}): before / after", (seconds["before"] / seconds["after"],),
              note="" if same else f"the values differ: before {values['before']}, after {values['after']}")
    seeds = full["n_seeds"]
    line = (f"time of 03's region checks, one seed ({what}): before {seconds['before']:.1f} s, after "
            f"{seconds['after']:.2f} s; {seeds} seeds: about {seeds * seconds['before']:,.0f} s before, "
            f"{seeds * seconds['after']:,.0f} s after; the same values: {'yes' if same else 'NO'}")
    return row, line


_SUMMARY_LINE = re.compile(r"^(\d\d)_\S+\.ipynb\s+(\S+)\s+([0-9.]+)\s")


def notebook_seconds(summary: str) -> dict[str, float]:
    """The per-notebook times of a ``python -m dlgn_lib.record.series run`` summary table: id -> seconds."""
    return {m.group(1): float(m.group(3)) for m in map(_SUMMARY_LINE.match, summary.splitlines()) if m}


def series_note(times: dict[str, float], shown: int = 4) -> str:
    """What a series row's wall time is made of: the notebooks' own times added up (two side by
    side: the wall time cannot be under half of it) and the longest ones."""
    if not times:
        return ""
    longest = sorted(times.items(), key=lambda kv: -kv[1])[:shown]
    return (f"the {len(times)} notebooks' own times add to {sum(times.values()):,.0f} s; longest: "
            + ", ".join(f"{nb} {t:,.0f} s" for nb, t in longest))


def series_rows(say=print) -> list[Row]:
    """Wall time of ``python -m dlgn_lib.record.series run`` from a fresh run cache (runs, figures and notebooks in
    a temporary folder), then again (warm); each run's output goes to ``<build dir>/bench_series_<state>.log``."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlgn-bench-") as tmp:
        env = {**os.environ, "DLGN_RUNS_DIR": f"{tmp}/runs", "DLGN_FIGURES_DIR": f"{tmp}/figures",
               "DLGN_BUILD_DIR": f"{tmp}/build", "DLGN_QUIET": "1"}
        for state, target in SERIES_TARGETS.items():
            say(f"  series, {state} run cache …")
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "dlgn_lib.record.series", "run", "--profile", "quick"],
                                  cwd=locations.REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            seconds = time.perf_counter() - start
            files.write_atomic(locations.build_dir() / f"bench_series_{state}.log", done.stdout)
            note = (series_note(notebook_seconds(done.stdout)) if done.returncode == 0
                    else f"series exited {done.returncode}: {done.stdout[-300:]!r}")
            rows.append(Row(SERIES_ROW.format(state), (seconds,), ("<=", target), unit=" s", note=note))
            if state == "cold" and done.returncode == 0:
                rows += cost_rows(files.read_json(Path(tmp, "build", "notebooks", "series.json"), what="series record"))
    return rows


def _cost_split(record: dict) -> list[tuple[str, str, float, list[float]]]:
    """(notebook id, profile, seconds, [training, analysis, file I/O, other]) per notebook of a ``series.json`` that
    records its kernel's costs (``dlgn_lib.costs``); other: plotting, uncached analyses, the kernel's start."""
    out = []
    for name, entry in sorted(record.get("notebooks", {}).items()):
        if cost := entry.get("costs"):
            parts = [cost["training"], cost["analysis"], cost["io"]]
            out.append((name[:2], record.get("profile", "?"), entry["seconds"],
                        [*parts, max(entry["seconds"] - sum(parts), 0.0)]))
    return out


def cost_rows(record: dict) -> list[Row]:
    """A bench row per notebook of a series record: its seconds, the split in the note."""
    return [Row(COST_ROW.format(nb, profile), (seconds,), unit=" s", note=", ".join(f"{v:.1f}" for v in parts))
            for nb, profile, seconds, parts in _cost_split(record)]


def cost_table(record: dict, source: str = "the series record") -> str:
    """The split of :func:`cost_rows` as a markdown table (``--costs``)."""
    split = _cost_split(record)
    if not split:
        raise files.Refusal(f"{source}: no notebook in it has its costs (a series run of this version records "
                            "them: rerun it)")
    return "\n".join(["| notebook | seconds | training | analysis | file I/O | other |", "|---|---|---|---|---|---|",
                      *(f"| {nb} | {seconds:.0f} | " + " | ".join(f"{v:.0f}" for v in parts) + " |"
                        for nb, _, seconds, parts in split)])


# --------------------------------------------------------------------------- report

def load_average() -> str:
    """The 1, 5 and 15 min load averages: on a shared machine they say how loaded it was."""
    return ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def _machine_lines(device: torch.device) -> list[str]:
    """Torch version, threads, BLAS, CPU and load: what the numbers depend on."""
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    capability = re.search(r"CPU capability usage: (\w+)", config)
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, AttributeError):   # no /proc/cpuinfo, or no model name in it
        cpu = re.search(r"^model name[^:]*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).strip()
    env = ", ".join(f"{k}={os.environ[k]}" for k in ("DLGN_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
                    if k in os.environ)
    return [
        f"torch {torch.__version__}, python {platform.python_version()}, device {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
        f"torch threads {torch.get_num_threads()} (inter-op {torch.get_num_interop_threads()})"
        + (f", {env}" if env else "") + f"; BLAS {blas.group(1) if blas else 'unknown'}, "
        f"MKL {'yes' if torch.backends.mkl.is_available() else 'no'}, "
        f"CPU capability {capability.group(1) if capability else 'unknown'}",
        f"CPU {cpu}, {os.cpu_count()} logical cores; load average (1, 5, 15 min) {load_average()}",
    ]


def _num(v: float, unit: str) -> str:
    return f"{v:.0f}{unit}" if unit == " s" else f"{v:.3g}{unit}"


def row_cells(row: Row, targets_apply: bool = True) -> tuple[str, str, str, str]:
    """A row's median, [min – max] (or "(1 run)", or the note of a row not run), target and met."""
    if row.values:
        spread = f"[{_num(min(row.values), row.unit)} – {_num(max(row.values), row.unit)}]" \
            if len(row.values) > 1 else "(1 run)"
        median = _num(row.median, row.unit)
    else:
        median, spread = "not run", row.note
    target = "—" if row.target is None else \
        f"{'≤' if row.target[0] == '<=' else '≥'} {_num(row.target[1], row.unit)}"
    return median, spread, target, row.met(targets_apply)


def format_table(rows: list[Row], targets_apply: bool = True) -> str:
    """The rows as a fixed-width text table: median, [min – max], target, met."""
    lines = [("benchmark", "median", "[min – max]", "target", "met")]
    lines += [(row.name, *row_cells(row, targets_apply)) for row in rows]
    widths = [max(map(len, column)) for column in zip(*lines)]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out += [f"note: {row.name}: {row.note}" for row in rows if row.values and row.note]
    return "\n".join(out)


# --------------------------------------------------------------------------- the committed record

def record_rows(rows: list[Row], reference: list[str], head: list[str], path: Path = RECORD,
                date: str | None = None) -> dict:
    """Write this run's measured rows into the record at ``path``: they replace their entries, a row
    this run did not measure keeps its earlier measured entry (and that entry's run), or is recorded
    as not run (no values, its note) when no run has measured it; a row whose name this run does
    not have at all is dropped (renamed or removed). Returns the record written."""
    old = json.loads(path.read_text()) if path.exists() else {"runs": [], "rows": []}
    old_rows = {entry["name"]: entry for entry in old.get("rows", [])}
    dirty = subprocess.run(["git", "-C", str(locations.REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    run = {"date": date or datetime.now(timezone.utc).strftime("%Y-%m-%d"),
           "command": head[0].split(": ", 1)[-1], "machine": head[1:], "cpu": provenance.machine_label(),
           "code_version": provenance.code_version() + (" (uncommitted changes)" if dirty else ""),
           "reference": reference}
    entries, runs = [], []
    for row in rows:
        if row.name in old_rows and not row.values and old_rows[row.name]["values"]:
            entry = dict(old_rows[row.name])
            source = old["runs"][entry["run"]]
        else:   # measured now, or measured by no run yet (kept, as "not run", with this run's note)
            entry = {"name": row.name, "values": list(row.values), "unit": row.unit,
                     "target": list(row.target) if row.target else None, "note": row.note}
            source = run
        if source not in runs:
            runs.append(source)
        entry["run"] = runs.index(source)
        entries.append(entry)
    record = {"about": "make bench rows, written by `python -m dlgn_lib.record.bench --record`; the README's "
                       "Performance table is generated from it (python -m dlgn_lib.record.report write)",
              "runs": runs, "rows": entries}
    files.write_atomic(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def load_record(path: Path = RECORD) -> tuple[list[tuple[Row, int]], list[dict]]:
    """The recorded rows (each with the index of the run that measured it) and the runs."""
    record = files.read_json(path, what="the bench record")
    rows = [(Row(e["name"], tuple(e["values"]), tuple(e["target"]) if e["target"] else None, e["unit"], e["note"]),
             e["run"]) for e in record["rows"]]
    return rows, record["runs"]


@command
def main(argv: list[str] | None = None) -> int:
    """``python -m dlgn_lib.record.bench``; torch runs on ``DLGN_NUM_THREADS`` threads (default 1), as in the series."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.bench", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="3 repeats and fewer steps (same sizes)")
    mode.add_argument("--tiny", action="store_true", help="toy sizes, 1 repeat: checks the machinery only")
    parser.add_argument("--series", action="store_true",
                        help="also time the whole quick series, cold and warm run cache (about 10 min)")
    parser.add_argument("--series-only", action="store_true",
                        help="time only the quick series; with --record the other rows keep their recorded run")
    parser.add_argument("--costs", metavar="SERIES_JSON", type=Path,
                        help="print only where each notebook's time went in a series run's series.json, and stop")
    parser.add_argument("--device", default=None, help="torch device (default: CUDA when present, else CPU)")
    parser.add_argument("--record", action="store_true",
                        help=f"also write the rows into {locations.display_path(RECORD)} (the README's table)")
    args = parser.parse_args(argv)
    if args.record and (args.quick or args.tiny):
        parser.error("--record: only the default sizes are recorded (the targets are for them); drop --quick/--tiny")
    if args.costs:
        print(cost_table(files.read_json(args.costs, what="series record"), locations.display_path(args.costs)))
        return 0
    name = "tiny" if args.tiny else "quick" if args.quick else "default"
    sizes = MODES[name]
    device = torch.device(args.device) if args.device else models.default_device()

    command = " ".join(["python -m dlgn_lib.record.bench", *(argv if argv is not None else sys.argv[1:])])
    head = [f"dlgn-halfspace benchmarks (reconstruction §6): {command}", *_machine_lines(device),
            f"mode {name}: {sizes.repeats} repeat(s); each ratio is measured within this process, "
            "interleaved; median [min – max] over repeats"]
    if not sizes.targets_apply:
        head.append("toy sizes: the targets are for reconstruction §6's sizes and are not judged here")
    print("\n".join(head), flush=True)
    if args.series_only:   # the other rows, unmeasured: a record keeps their earlier entries
        recorded = load_record(RECORD)[0] if RECORD.exists() else []
        series_names = set(map(SERIES_ROW.format, SERIES_TARGETS))
        rows, reference = [Row(r.name, (), r.target, r.unit, r.note) for r, _ in recorded
                           if r.name not in series_names], []
    else:
        rows, reference = measure(sizes, device, mode=name)
        reference.append(f"load average at the end of the cheap rows (1, 5, 15 min): {load_average()}")
    if args.series or args.series_only:
        rows += series_rows()
    else:
        rows += [Row(SERIES_ROW.format(state), (), ("<=", t), unit=" s",
                     note="add --series (runs the series twice)") for state, t in SERIES_TARGETS.items()]
    body = ["", format_table(rows, sizes.targets_apply), "", *reference, f"load average at the end: {load_average()}"]
    print("\n" + "\n".join(body))
    out = files.write_atomic(locations.build_dir() / "bench.txt", "\n".join([*head, *body]) + "\n")
    print(f"saved {locations.display_path(out)}")
    if args.record:
        record_rows(rows, reference, head, RECORD)
        print(f"recorded in {locations.display_path(RECORD)}; "
              "`python -m dlgn_lib.record.report write` updates the README")
    return 0


if __name__ == "__main__":
    sys.exit(main())
