"""Does the hard-gate network compute the function that was trained? (reconstruction §2.1)

Path regions, overlap kernels and path mass use hard gates ``1(η ≥ 0)``, while a DLGN trains with
soft gates ``σ(β η)``. At small β the two networks can compute different functions, and then a
hard-gate analysis describes a function nobody trained. ``check`` compares the two fits on the
same data before any hard-gate analysis of a run:

- regression: they agree when the hard-gate R² is at least ``R2_FRACTION`` (0.9) of the soft one
  (or, when the soft R² is not positive, at least as high);
- classification: they agree when the accuracies are at most ``MAX_ACCURACY_GAP`` (0.01) apart.

Nets without soft gates (ReLU, DLN) compute the same function either way.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .losses import task_metric

__all__ = ["Fidelity", "check_run"]

R2_FRACTION = 0.9
MAX_ACCURACY_GAP = 0.01


@dataclass(frozen=True)
class Fidelity:
    """Soft- and hard-gate fits (accuracy or R²) on one data set, and whether they agree."""
    task: str
    soft: float
    hard: float

    @property
    def agrees(self) -> bool:
        if self.task == "regression":
            return self.hard >= (R2_FRACTION * self.soft if self.soft > 0 else self.soft)
        return abs(self.hard - self.soft) <= MAX_ACCURACY_GAP

    def describe(self) -> str:
        metric = "R²" if self.task == "regression" else "accuracy"
        rule = (f"hard ≥ {R2_FRACTION:g} × soft" if self.task == "regression"
                else f"|hard − soft| ≤ {MAX_ACCURACY_GAP:g}")
        verdict = "agree" if self.agrees else "DISAGREE: a hard-gate analysis would describe another function"
        return f"{metric}: soft gates {self.soft:.3f}, hard gates {self.hard:.3f} ({rule}): {verdict}"


@torch.no_grad()
def check(model, x: torch.Tensor, y: torch.Tensor, task: str) -> Fidelity:
    """The soft- and hard-gate fits of ``model`` on (x, y) for a task ("binary", "multiclass",
    "regression"), as a :class:`Fidelity`."""
    x = x.to(next(model.parameters()).dtype)
    soft, hard = model(x, hard=False), model(x, hard=True)
    return Fidelity(task, float(task_metric(soft, y, task)), float(task_metric(hard, y, task)))


def check_run(run, float64: bool = False) -> Fidelity:
    """:func:`check` of a run's last snapshot on its data set's test split (in float64 if asked)."""
    dataset = run.dataset()
    model = run.model_at()
    return check(model.double() if float64 else model, dataset.x_test, dataset.y_test, dataset.task)
