"""Run configurations (frozen dataclasses), profiles, and notebook parameter checks (reconstruction §5, §7).

A ``RunConfig`` says everything a training run depends on: data, model, optimiser, epochs, batch,
seed and snapshot count. Its ``key()`` (a stable hash that also covers ``CODE_VERSION``) names the
run in the cache. Profiles ``quick`` and ``full`` change sizes and counts only, never code paths:
each notebook's sizes are in ``NOTEBOOK_SIZES`` and reach it through ``for_notebook``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from dataclasses import dataclass, field, replace
from types import MappingProxyType, ModuleType
from typing import Any, Mapping

import numpy as np

from .models import DEFAULT_CONVENTION, MODEL_KINDS, RUN_KINDS
from .text import use_width, wrap

__all__ = ["CODE_VERSION", "DataSpec", "ModelSpec", "NotebookConfig", "PROFILES", "RunConfig",
           "fashion_mnist_spec", "for_notebook", "setup"]

#: Bump when a change to models, data or training alters what a given config produces: old cache
#: entries then stop matching instead of being reused.
#: 5: a lone seed trains beside a copy of itself (``fused.train_seeds``), so its run equals the
#: same seed's run in any group.
CODE_VERSION = "5"

#: The run profiles every notebook takes: quick (the default) and full.
PROFILES = ("quick", "full")
OPTIMIZERS = ("adam", "sgd")


class ParameterError(ValueError):
    """A notebook or config parameter has a value that is not allowed; the message names it."""


def _freeze(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    def plain(v):
        if isinstance(v, (list, tuple)):
            return tuple(plain(u) for u in v)
        if isinstance(v, Mapping):
            return tuple(sorted((k, plain(u)) for k, u in v.items()))
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        raise ParameterError(f"config value {v!r} of type {type(v).__name__} is not allowed; "
                             "use numbers, strings, booleans, None, or tuples of them")
    return tuple(sorted((str(k), plain(v)) for k, v in params.items()))


@dataclass(frozen=True)
class DataSpec:
    """A dataset by name and generator parameters, as passed to ``dlgn_lib.data.load``."""
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def make(cls, name: str, /, **params) -> "DataSpec":
        return cls(name, _freeze(params))

    def kwargs(self) -> dict:
        return dict(self.params)


@dataclass(frozen=True)
class ModelSpec:
    """A model by kind (``models.RUN_KINDS``), hidden widths (conv: channels) and options such as β.

    Fully connected kinds always record their initialisation ``convention`` (default "group",
    ``models.CONVENTIONS``), so runs of the two conventions never share a cache entry.
    """
    kind: str
    widths: tuple[int, ...]
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def make(cls, kind: str, widths, **options) -> "ModelSpec":
        if kind not in RUN_KINDS:
            raise ParameterError(f"model kind={kind!r} is not allowed; choose one of {list(RUN_KINDS)}")
        if kind in MODEL_KINDS:
            options.setdefault("convention", DEFAULT_CONVENTION)
        return cls(kind, tuple(int(m) for m in widths), _freeze(options))

    def kwargs(self) -> dict:
        return dict(self.options)


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run depends on (reconstruction §5). ``batch_size=None`` means full batch.

    ``shuffle``: minibatches in a fresh random order each epoch (seeded by ``seed``), or in the
    data's order (fixed order). ``curves``: evaluate every split at every evaluation epoch, or
    only the validation split (lean epochs: all splits at snapshot epochs and at the end).
    """
    data: DataSpec
    model: ModelSpec
    epochs: int = 100
    lr: float = 1e-2
    optimizer: str = "adam"
    weight_decay: float = 0.0
    batch_size: int | None = None
    seed: int = 0
    n_snapshots: int = 25
    eval_every: int = 1
    shuffle: bool = True
    curves: bool = True
    name: str = field(default="", compare=False)

    def __post_init__(self):
        _check_int("epochs", self.epochs, minimum=1)
        _check_int("seed", self.seed, minimum=0)
        _check_int("n_snapshots", self.n_snapshots, minimum=2)
        _check_int("eval_every", self.eval_every, minimum=1)
        if self.batch_size is not None:
            _check_int("batch_size", self.batch_size, minimum=1)
        for flag in ("shuffle", "curves"):
            if not isinstance(getattr(self, flag), bool):
                raise ParameterError(f"{flag}={getattr(self, flag)!r} must be True or False")
        if self.optimizer not in OPTIMIZERS:
            raise ParameterError(f"optimizer={self.optimizer!r} is not allowed; choose one of {list(OPTIMIZERS)}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ParameterError(f"lr={self.lr!r} must be a positive number")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("name")
        return d

    def key(self, numerics_tag: str | None = "this process") -> str:
        """Stable hash of the config, ``CODE_VERSION`` and, off the pinned path, the numeric code
        path (``numerics.cache_tag``; ``numerics_tag`` names another one, None the pinned path):
        the run cache key."""
        from . import numerics
        about = {"config": self.to_dict(), "code": CODE_VERSION}
        tag = numerics.cache_tag() if numerics_tag == "this process" else numerics_tag
        if tag is not None:
            about["numerics"] = tag
        text = json.dumps(about, sort_keys=True, default=list)
        return hashlib.sha256(text.encode()).hexdigest()

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    def label(self) -> str:
        return self.name or f"{self.model.kind} on {self.data.name} (seed {self.seed})"

    def to_json(self) -> str:
        return json.dumps({**self.to_dict(), "name": self.name}, sort_keys=True, default=list)

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        d = json.loads(text)
        data = DataSpec(d["data"]["name"], _freeze(dict(d["data"]["params"])))
        model = ModelSpec(d["model"]["kind"], tuple(d["model"]["widths"]), _freeze(dict(d["model"]["options"])))
        rest = {k: v for k, v in d.items() if k not in ("data", "model")}
        return cls(data=data, model=model, **rest)


def fashion_mnist_spec(per_class) -> DataSpec:
    """Fashion-MNIST with ``per_class`` = (train, validation, test) images per class (None: all)."""
    if not isinstance(per_class, (tuple, list)) or len(per_class) != 3:
        raise ParameterError(f"per_class={per_class!r}: give (train, validation, test) images per class")
    train, val, test = per_class
    return DataSpec.make("fashion_mnist", n_per_class_train=train, n_per_class_val=val, n_per_class_test=test)


def snapshot_epochs(epochs: int, n: int) -> list[int]:
    """Epochs at which to keep model snapshots: 0, the last, and log-spaced between (dense early).

    Returns ``min(n, epochs + 1)`` distinct epochs; where rounding merges early log-spaced points
    the smallest unused epochs fill in.
    """
    if n >= epochs + 1:
        return list(range(epochs + 1))
    picks = {0, epochs, *(int(round(v)) - 1 for v in np.geomspace(1, epochs + 1, n - 1))}
    missing = (e for e in range(1, epochs) if e not in picks)
    while len(picks) < n:
        picks.add(next(missing))
    return sorted(picks)


# --------------------------------------------------------------------------- notebook parameters

#: Bounds of the integer parameters: a seed is a 32-bit unsigned integer (NumPy, scikit-learn and
#: PyTorch all accept it); counts have a ceiling that no sensible run reaches.
PARAMETER_BOUNDS = {"SEED": (0, 2**32 - 1), "TARGET_SEED": (0, 2**32 - 1), "EPOCHS": (1, 1_000_000),
                    "SEEDS": (1, 1000)}
#: The notebook parameters and what each means (a notebook declares a subset, ``NOTEBOOK_PARAMETERS``).
PARAMETERS = {
    "PROFILE": "the profile of sizes, one of " + ", ".join(repr(p) for p in PROFILES),
    "SEED": "the first seed (run k uses SEED + k), an integer in [0, 2**32 - 1]",
    "TARGET_SEED": "the seed of the random circle targets (target k: TARGET_SEED + k), in [0, 2**32 - 1]",
    "EPOCHS": "epochs of every run, an integer in [1, 1000000], or None for the profile's",
    "SEEDS": "the number of seeds, an integer in [1, 1000], or None for the profile's",
}
#: Per notebook: the parameters its first cell declares. Anything else is an error.
NOTEBOOK_PARAMETERS = {
    "00": ("PROFILE", "SEED"), "01": ("PROFILE", "SEED", "SEEDS"), "02": ("PROFILE", "SEED", "SEEDS"),
    "03": ("PROFILE", "SEED", "SEEDS"), "04": ("PROFILE", "SEED", "SEEDS"),
    "05": ("PROFILE", "SEED", "TARGET_SEED", "EPOCHS", "SEEDS"),
    "06": ("PROFILE", "SEED", "TARGET_SEED", "EPOCHS", "SEEDS"),
    "07": ("PROFILE", "SEED", "EPOCHS", "SEEDS"), "08": ("PROFILE", "SEED", "TARGET_SEED", "SEEDS"),
    "09": ("PROFILE", "SEED", "SEEDS"), "10": ("PROFILE", "SEED", "SEEDS"),
    "11": ("PROFILE", "SEED", "TARGET_SEED"),
}
#: The sizes a parameter replaces when it is not None (in 02 and 08 SEEDS sets both seed counts).
PARAMETER_SIZES = {"EPOCHS": ("epochs",), "SEEDS": ("n_seeds",)}
NOTEBOOK_PARAMETER_SIZES = {"02": {"SEEDS": ("n_seeds", "odt_seeds")}, "08": {"SEEDS": ("n_seeds", "odt_seeds")}}
#: Names IPython puts in a kernel's namespace; they are not parameters.
_KERNEL_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


def _check_int(name: str, value, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{name}={value!r} has type {type(value).__name__}; it must be an integer >= {minimum}"
                             + (f" and <= {maximum}" if maximum is not None else ""))
    if value < minimum or (maximum is not None and value > maximum):
        raise ParameterError(f"{name}={value!r} is not allowed; it must be an integer >= {minimum}"
                             + (f" and <= {maximum}" if maximum is not None else ""))


#: Random circle targets a notebook draws from its TARGET_SEED: steps k with TARGET_SEED + k, k < 3
#: (``studies.circle.target_params``).
TARGET_SEEDS_DRAWN = 3


def _check_derived_seeds(cfg, params) -> None:
    """The seeds a notebook derives (SEED + k for each of its runs, TARGET_SEED + k for its targets)
    must stay 32-bit too, so that a run's seed is never silently wrapped or rejected later."""
    top = PARAMETER_BOUNDS["SEED"][1]
    n = cfg.sizes.get("n_seeds", 1)
    if params["SEED"] + n - 1 > top:
        raise ParameterError(f"SEED={params['SEED']} is not allowed here: this notebook trains seeds SEED .. SEED + "
                             f"{n - 1}, which must stay <= {top}; use SEED <= {top - n + 1}")
    if "TARGET_SEED" in params and params["TARGET_SEED"] + TARGET_SEEDS_DRAWN - 1 > top:
        raise ParameterError(f"TARGET_SEED={params['TARGET_SEED']} is not allowed: targets are drawn with TARGET_SEED .. "
                             f"TARGET_SEED + {TARGET_SEEDS_DRAWN - 1}, which must stay <= {top}; "
                             f"use TARGET_SEED <= {top - TARGET_SEEDS_DRAWN + 1}")


def check_parameters(**params) -> None:
    """Validate notebook parameters before any work; raise ``ParameterError`` naming the bad one.

    Known names (``PARAMETERS``): ``PROFILE`` (one of ``PROFILES``), ``SEED`` and ``TARGET_SEED``
    (32-bit unsigned integers), ``EPOCHS`` and ``SEEDS`` (bounded positive integers, or None for the
    profile's value). Other names are an error too, so a typo does not pass silently.
    """
    for name, value in params.items():
        if name == "PROFILE":
            if not isinstance(value, str) or value not in PROFILES:
                raise ParameterError(f"PROFILE={value!r} is not allowed; allowed values: "
                                     + ", ".join(repr(p) for p in PROFILES))
        elif name in PARAMETER_BOUNDS:
            if value is None and name in ("EPOCHS", "SEEDS"):
                continue
            _check_int(name, value, *PARAMETER_BOUNDS[name])
        else:
            raise ParameterError(f"unknown notebook parameter {name}; known: " + ", ".join(PARAMETERS))


def _notebook_parameters(notebook: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters found in a notebook's namespace, checked against what the notebook declares.

    Every public name that is not a module, not one of IPython's and not declared by the notebook
    (``NOTEBOOK_PARAMETERS``) is an error: ``papermill -p PROFIEL full`` or ``-p EPOCHS 5`` on a
    notebook without epochs fails here, naming the parameter and the known ones, before any file
    is touched. Values are then checked by ``check_parameters``.
    """
    if notebook not in NOTEBOOK_PARAMETERS:
        raise ParameterError(f"notebook={notebook!r} is not a notebook of the series; known: "
                             f"{sorted(NOTEBOOK_PARAMETERS)}")
    declared = NOTEBOOK_PARAMETERS[notebook]
    unknown = sorted(name for name, value in namespace.items()
                     if not name.startswith("_") and name not in _KERNEL_NAMES and name not in declared
                     and not isinstance(value, ModuleType))
    if unknown:
        raise ParameterError(
            f"notebook {notebook} has no parameter {', '.join(unknown)}; its parameters are "
            + ", ".join(declared) + " (" + "; ".join(f"{n}: {PARAMETERS[n]}" for n in declared) + ")")
    missing = [name for name in declared if name not in namespace]
    if missing:
        said = f"parameter {missing[0]} is not set" if len(missing) == 1 else \
            f"parameters {', '.join(missing)} are not set"
        raise ParameterError(f"notebook {notebook}: {said}; run the parameters cell first")
    params = {name: namespace[name] for name in declared}
    check_parameters(**params)
    return params


#: The notebook and profile of this process's ``setup`` (recorded in the run-cache entries it saves).
_MADE_BY: dict[str, str] | None = None


def made_by() -> dict[str, str] | None:
    """``{"notebook": "05", "profile": "full"}`` after ``setup`` in this process, else None."""
    return dict(_MADE_BY) if _MADE_BY else None


def setup(notebook: str, namespace: Mapping[str, Any], *, show: bool = True) -> "NotebookConfig":
    """A notebook's first step: check its parameters and return its sizes (``NotebookConfig``).

    ``namespace`` is the notebook's ``globals()`` right after its parameters cell (and the cell
    papermill injects): parameters it does not declare, and bad values, raise ``ParameterError``
    before any work. ``EPOCHS`` and ``SEEDS`` replace the sizes of ``PARAMETER_SIZES``. Prints the
    sizes unless ``show`` is false.
    """
    params = _notebook_parameters(notebook, namespace)
    mapping = {**PARAMETER_SIZES, **NOTEBOOK_PARAMETER_SIZES.get(notebook, {})}
    overrides = {size: params[name] for name in ("EPOCHS", "SEEDS") if name in params
                 for size in mapping[name]}
    cfg = for_notebook(notebook, params["PROFILE"], seed=params["SEED"], **overrides)
    if "TARGET_SEED" in params:
        cfg = replace(cfg, target_seed=params["TARGET_SEED"])
    _check_derived_seeds(cfg, params)
    global _MADE_BY
    _MADE_BY = {"notebook": notebook, "profile": params["PROFILE"]}
    from dlgn_lib import numerics
    if numerics.torch_came_first():
        warnings.warn(numerics.describe() + "; restart the kernel and import dlgn_lib before torch", stacklevel=2)
    use_width()
    if show:
        print(cfg.describe())
    return cfg


@dataclass(frozen=True)
class NotebookConfig:
    """The sizes of one notebook under one profile, plus its seed; sizes read as attributes."""
    notebook: str
    profile: str
    seed: int
    sizes: Mapping[str, Any]
    target_seed: int | None = None  # the notebook's TARGET_SEED, where it has one

    @property
    def seeds(self) -> list[int]:
        """The model seeds of the runs: SEED, SEED + 1, … (``n_seeds`` of them)."""
        return [self.seed + k for k in range(self.sizes["n_seeds"])]

    def __getattr__(self, name):
        sizes = self.__dict__.get("sizes", {})
        if name in sizes:
            return sizes[name]
        raise AttributeError(f"notebook {self.__dict__.get('notebook')} has no size {name!r}; "
                             f"known: {sorted(sizes)}")

    def run(self, data: DataSpec, model: ModelSpec, name: str = "", **overrides) -> RunConfig:
        """A ``RunConfig`` with this profile's training sizes (epochs, lr, batch, snapshots)."""
        base = {k: self.sizes[k] for k in ("epochs", "lr", "batch_size", "n_snapshots", "optimizer",
                                            "weight_decay", "eval_every", "shuffle", "curves")
                if k in self.sizes}
        base["seed"] = self.seed
        base.update(overrides)
        return RunConfig(data=data, model=model, name=name, **base)

    def describe(self) -> str:
        items = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return wrap(f"notebook {self.notebook}, profile {self.profile}, seed {self.seed}: {items}")


def for_notebook(notebook: str, profile: str = "quick", seed: int = 0, **overrides) -> NotebookConfig:
    """Sizes for a notebook id ("00" … "09") under a profile, validated; overrides replace sizes.

    ``overrides`` with value None are ignored (notebook parameters such as ``EPOCHS=None``).
    """
    check_parameters(PROFILE=profile, SEED=seed)
    if notebook not in NOTEBOOK_SIZES:
        raise ParameterError(f"notebook={notebook!r} has no sizes; known: {sorted(NOTEBOOK_SIZES)}")
    sizes = dict(NOTEBOOK_SIZES[notebook][profile])
    for k, v in overrides.items():
        if v is None:
            continue
        if k not in sizes:
            raise ParameterError(f"{k} is not a size of notebook {notebook}; known: {sorted(sizes)}")
        sizes[k] = v
    return NotebookConfig(notebook, profile, seed, MappingProxyType(sizes))


#: Keys that count or size things (reconstruction §5): where quick is a miniature of full, these are
#: the only keys in which the two may differ. Widths may shrink, never their number (the depth).
SIZE_KEYS = frozenset({
    "n", "n_train", "n_seeds", "odt_seeds", "epochs", "odt_epochs", "conv_epochs", "n_snapshots", "eval_every",
    "n_check", "n_cos_inputs", "n_paths_shown", "n_grid", "n_rotations", "n_relu_points", "fmnist_per_class",
    "cifar_sizes", "widths", "fmnist_widths", "odt_widths", "conv_channels", "report_sets", "odt_sets",
    "n_trains", "steps_targets", "mixture_targets", "c6_points", "c6_widths", "c6_epochs", "c7_widths",
})
#: What ``quick`` is, per notebook (rules v3, reconstruction §8.1): "miniature" (same depth, models,
#: data kind, estimator and rule as full; only SIZE_KEYS differ), "smoke test" (quick prints its
#: checks and a SMOKE TEST line, no verdict), "no verdict" (a primer, a table or a map), or "not
#: yet a miniature: why" for a notebook whose rule has not been moved to rules v3.
QUICK_IS: dict[str, str] = {
    "00": "no verdict", "09": "no verdict", "11": "no verdict",
    "02": "smoke test", "05": "smoke test", "06": "smoke test", "10": "smoke test",
    "01": "miniature",
    "03": "miniature",
    "04": "smoke test",   # rule v4: the ReLU medians depend on the training-set size
    "07": "smoke test",
    "08": "smoke test",
}


#: Rules v4 (reconstruction §8.2), registered before any v4 run: what each notebook runs once it
#: moves to v4, per profile: its first model seed (``seed``; ``target_seed`` for the circle targets),
#: seed counts (``n_seeds``; ``odt_seeds``) and, where quick changes its role, ``smoke``. Every
#: other size is its rule v3's (``NOTEBOOK_SIZES``). ``verdict_rules.json`` (``v4`` → ``rules`` →
#: ``profiles``) states the same, and tests/test_rules_v4.py holds the two equal. Until its v4 runs
#: land, a notebook runs its rule v3 (its parameters cell and ``NOTEBOOK_SIZES``).
RULES_V4: dict[str, dict[str, dict[str, Any]]] = {
    "02": {"quick": dict(seed=7000, n_seeds=10, odt_seeds=5), "full": dict(seed=7000, n_seeds=10, odt_seeds=5)},
    "04": {"quick": dict(seed=7000, n_seeds=5, smoke=True), "full": dict(seed=7000, n_seeds=5, smoke=False)},
    "05": {"quick": dict(seed=7000, target_seed=7000, n_seeds=10), "full": dict(seed=7000, target_seed=7000, n_seeds=10)},
    "06": {"quick": dict(seed=7100, target_seed=7100, n_seeds=10), "full": dict(seed=7100, target_seed=7100, n_seeds=10)},
    "07": {"quick": dict(seed=7200, n_seeds=5), "full": dict(seed=7200, n_seeds=5)},
    "08": {"quick": dict(seed=7300, target_seed=7300, n_seeds=10, odt_seeds=5),
           "full": dict(seed=7300, target_seed=7300, n_seeds=10, odt_seeds=5)},
    "10": {"quick": dict(seed=7000, n_seeds=5), "full": dict(seed=7000, n_seeds=5)},
}


#: The notebooks that run rules v4 now (their parameters cell, ``NOTEBOOK_SIZES`` and verdict cell
#: moved to ``RULES_V4``; tests/test_rules_v4.py checks each); the others still run rules v3.
AT_RULES_V4 = frozenset(RULES_V4)   # every notebook whose rule v4 changes


#: Notebooks whose runs are trained at another notebook's sizes (its run-config functions, its
#: current sizes): 08 trains its own seeds at 06's circle sizes and 07's odt sizes.
READS_RUNS_OF = {"08": ("06", "07")}


def profile_differences(notebook: str) -> tuple[list[str], list[str]]:
    """The keys whose values differ between a notebook's quick and full, split into size keys
    (``SIZE_KEYS``, same depth) and the rest (another setting, or widths of another depth). The
    keys of notebooks at whose sizes it trains (``READS_RUNS_OF``) count too, named "07: lr"."""
    sizes, other = [], []
    for source in (notebook, *READS_RUNS_OF.get(notebook, ())):
        quick, full = (NOTEBOOK_SIZES[source][p] for p in ("quick", "full"))
        prefix = "" if source == notebook else f"{source}: "
        for key in dict.fromkeys([*quick, *full]):
            if quick.get(key) == full.get(key):
                continue
            same_depth = (not key.endswith(("widths", "channels"))
                          or len(quick.get(key) or ()) == len(full.get(key) or ()))
            (sizes if key in SIZE_KEYS and same_depth else other).append(prefix + key)
    return sizes, other


#: Per notebook, per profile: sizes and counts only (reconstruction §5). ``full`` is the paper-scale setting.
NOTEBOOK_SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "00": {
        "quick": dict(n=600, widths=(16, 16, 16), epochs=300, lr=1e-2, n_snapshots=12),
        "full": dict(n=4000, widths=(64, 64, 64), epochs=2000, lr=5e-3, n_snapshots=30),
    },
    "01": {
        "quick": dict(n=600, widths=(6, 5, 4), epochs=300, lr=5e-3, n_snapshots=12, n_check=1000, n_seeds=10),
        "full": dict(n=4000, widths=(10, 8, 8), epochs=3000, lr=5e-3, n_snapshots=30, n_check=20000, n_seeds=10),
    },
    "03": {
        "quick": dict(n=600, widths=(6, 6, 6), epochs=400, lr=5e-3, n_snapshots=15, n_check=20000, n_seeds=10),
        "full": dict(n=4000, widths=(10, 10, 10), epochs=3000, lr=5e-3, n_snapshots=40, n_check=200000, n_seeds=10),
    },
    "02": {
        # Plane sets: n points each, full batch. SD-I: the group's data and protocol (dl.protocol),
        # odt_epochs passes (the protocol's 1,501 under full); odt_n_total None = all 40,000 points.
        # Rule v4 (v3's sizes): n_seeds plane seeds, odt_seeds SD-I seeds (10 and 5 under both
        # profiles: a plane run costs under a minute); quick a smoke test at full's lr.
        "quick": dict(n=600, widths=(16, 16, 16), epochs=300, lr=5e-3, eval_every=5, n_snapshots=6,
                      n_seeds=10, odt_seeds=5, odt_epochs=40, odt_n_total=None),
        "full": dict(n=4000, widths=(64, 64, 64), epochs=2000, lr=5e-3, eval_every=10, n_snapshots=20,
                     n_seeds=10, odt_seeds=5, odt_epochs=1501, odt_n_total=None),
    },
    "04": {
        # Fashion-MNIST images per class in each split (all of them: 5,400 / 600 / 1,000); the
        # gradient cosine is measured on the first n_cos_inputs test images. top_paths enumerates
        # Π m_ℓ · 10 path values, which must stay below paths.MAX_ENTRIES. Rule v4: quick is a
        # smoke test (at 400 images per class the ReLU layer-2 median stays at 0.93-0.94).
        "quick": dict(fmnist_per_class=(400, 100, 100), widths=(64, 64, 64),
                      epochs=100, lr=1e-3, batch_size=256, n_snapshots=6, n_cos_inputs=500, n_paths_shown=4,
                      n_seeds=5),
        "full": dict(fmnist_per_class=(5400, 600, 1000), widths=(96, 96, 96),
                     epochs=100, lr=1e-3, batch_size=256, n_snapshots=20, n_cos_inputs=10000,
                     n_paths_shown=6, n_seeds=5),
    },
    "05": {
        # Rule v4 (v3's sizes): quick is a smoke test (S1 and S3 move with widths and n_train), at
        # full's lr; 10 seeds under both profiles (a circle run costs under a minute).
        "quick": dict(n_train=256, widths=(16, 16, 16), epochs=800, lr=5e-3, n_snapshots=30,
                      eval_every=10, n_seeds=10),
        "full": dict(n_train=1024, widths=(32, 32, 32), epochs=4000, lr=5e-3, n_snapshots=60,
                     eval_every=10, n_seeds=10),
    },
    "06": {
        # Rule v4 (v3's sizes): quick is a smoke test (K1 and K3 move with widths and n_train), at
        # full's lr; 10 seeds under both profiles (a circle run costs under a minute).
        "quick": dict(n_train=256, widths=(16, 16, 16), epochs=800, lr=5e-3, n_snapshots=30,
                      eval_every=10, n_seeds=10),
        "full": dict(n_train=1024, widths=(64, 64, 64), epochs=4000, lr=5e-3, n_snapshots=60,
                     eval_every=10, n_seeds=10),
    },
    "07": {
        # odt: the group's SD-I (dl.protocol.data_spec), odt_n_total None = all 40,000 points.
        # Rules v3 and v4: quick keeps full's depth (6 gating layers), learning rate and batch size.
        "quick": dict(fmnist_per_class=(200, 100, 100), fmnist_widths=(64,) * 6,
                      odt_n_total=None, odt_widths=(32,) * 6, epochs=30, lr=1e-3, batch_size=256,
                      n_snapshots=10, n_seeds=5),
        "full": dict(fmnist_per_class=(None, None, None), fmnist_widths=(128,) * 6,
                     odt_n_total=None, odt_widths=(64,) * 6, epochs=100, lr=1e-3, batch_size=256,
                     n_snapshots=20, n_seeds=5),
    },
    "08": {
        # Rule v4 (v3's sizes): 08's own runs (fresh seeds and targets) at the sizes of notebook
        # 06's circle runs and notebook 07's odt runs; n_seeds circle seeds (10 under both profiles:
        # a circle run costs under a minute), odt_seeds odt seeds. n_grid: angles of the θ grid on
        # which gate switches are located. Quick is a smoke test.
        "quick": dict(n_grid=4096, n_seeds=10, odt_seeds=5),
        "full": dict(n_grid=16384, n_seeds=10, odt_seeds=5),
    },
    "10": {
        # The group's odt protocol (dl.protocol) on the data sets `sets` (checked) and
        # `report_sets` (reported only), `epochs` passes, `n_seeds` seeds from SEED, `n_snapshots`
        # log-spaced snapshots; a ReLU net's later layers are read at `n_relu_points` validation points.
        "quick": dict(sets=("SD-I", "SD-II"), report_sets=(), epochs=20, n_seeds=5, n_snapshots=8,
                      n_relu_points=200),
        "full": dict(sets=("SD-I", "SD-II"), report_sets=("SD-III",), epochs=1501, n_seeds=5, n_snapshots=12,
                     n_relu_points=200),
    },
    "11": {
        # Sensitivity map of C5 on the circle. Run sizes are notebook 05's quick ones under rule v2
        # (so the map's registered cells share 05's v2 runs); the grid: n_trains × inits × betas × gate biases ×
        # targets ("default" or k: the random target of seed TARGET_SEED + k), `n_seeds` seeds each.
        # n_rotations: rotations of the random-rotation baselines.
        # C6 map on SD-I (07's data, learning rate and batch size): c6_points points (None: all
        # 40,000) × c6_widths × inits × c6_depths gating layers, c6_epochs epochs.
        # C7 map on the circle: the ReLU net and the DLGN × inits × c7_widths (3 layers) × the C5
        # grid's targets at its first n_train; n_grid angles locate the gate switches (08's grid).
        "quick": dict(widths=(16, 16, 16), epochs=400, lr=1e-2, n_snapshots=30, eval_every=10, n_seeds=5,
                      n_trains=(256,), inits=("group", "he"), betas=(4.0, 10.0, 30.0), biases=(False, True),
                      steps_targets=("default", 0), mixture_targets=(0,), n_rotations=180,
                      c6_points=(4000,), c6_widths=(32,), c6_depths=(2, 4, 6), c6_epochs=60, c6_lr=1e-3,
                      c6_batch_size=256, c7_widths=(16,), n_grid=4096),
        "full": dict(widths=(16, 16, 16), epochs=400, lr=1e-2, n_snapshots=30, eval_every=10, n_seeds=5,
                     n_trains=(256, 1024), inits=("group", "he"), betas=(4.0, 10.0, 30.0), biases=(False, True),
                     steps_targets=("default", 0, 1, 2), mixture_targets=("default", 0), n_rotations=360,
                     c6_points=(4000, None), c6_widths=(32, 64), c6_depths=(2, 4, 6), c6_epochs=100, c6_lr=1e-3,
                     c6_batch_size=256, c7_widths=(16, 64), n_grid=16384),
    },
    "09": {
        # Fashion-MNIST: images per class for training, validation and test (all of them: 5,400 /
        # 600 / 1,000). lrs: the learning rates tried, one chosen per model on validation.
        # odt: the group's protocol (dl.protocol) on the data sets odt_sets, odt_seeds seeds,
        # odt_epochs passes (the protocol's 1,501 under full); odt_n_total None = the full sets.
        # CIFAR-10/100 (only where the data is on disk): cifar_sizes = images for training,
        # validation and test (None: all; validation = the last official training images);
        # conv_channels: the 5-layer conv net (the reference size, 128, under full).
        "quick": dict(n_seeds=2, lrs=(3e-3,), fmnist_per_class=(100, 100, 100),
                      fmnist_widths=(64, 64, 64), epochs=15, batch_size=100,
                      odt_sets=("SD-I",), odt_seeds=5, odt_epochs=40, odt_n_total=None,
                      n_snapshots=2, cifar_sizes=(1000, 500, 1000),
                      conv_channels=(16,) * 5, conv_epochs=5, conv_batch_size=100),
        "full": dict(n_seeds=3, lrs=(1e-3, 3e-3), fmnist_per_class=(5400, 600, 1000),
                     fmnist_widths=(128, 128, 128, 128), epochs=30, batch_size=256,
                     odt_sets=("SD-I", "SD-II", "SD-III"), odt_seeds=5, odt_epochs=1501, odt_n_total=None,
                     n_snapshots=2, cifar_sizes=(None, 5000, None), conv_channels=(128,) * 5,
                     conv_epochs=50, conv_batch_size=256),
    },
}
