"""Losses, their gradients and metrics, by task (reconstruction §1): one home for the trainers.

Tasks: "binary" (labels ±1, one output f: loss softplus(-c·y·f) with the margin factor c of the
model's convention, ``models.binary_margin``), "multiclass" (k outputs, cross-entropy) and
"regression" (one output, squared loss). Metrics: accuracy for labels (sign of f, 0 counted as
+1; argmax for k classes), R² for regression.

Every function takes outputs of shape (N, k) or, for S models at once, (S, N, k) with targets of
shape (N,) shared by all S; the loss and metric are means over the N samples, one per model.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .data.base import TASKS  # noqa: F401  (the tasks these functions handle)

__all__ = ["task_loss"]


def task_loss(output: torch.Tensor, y: torch.Tensor, task: str, margin: float = 1.0) -> torch.Tensor:
    """Mean loss of outputs (…, N, k) against targets (N,): a scalar, or one value per model."""
    if task == "binary":
        return F.softplus(-margin * y * output[..., 0]).mean(dim=-1)
    if task == "multiclass":
        if output.dim() == 2:
            return F.cross_entropy(output, y)
        logp = torch.log_softmax(output, dim=-1)
        return -logp.gather(-1, y.expand(*output.shape[:-1]).unsqueeze(-1)).squeeze(-1).mean(dim=-1)
    return ((output[..., 0] - y) ** 2).mean(dim=-1)


def loss_gradient(output: torch.Tensor, y: torch.Tensor, task: str, margin: float = 1.0,
                  n: int | None = None) -> torch.Tensor:
    """d(task_loss)/d(output), shape of ``output``: each model's gradient of its own mean loss.

    binary: -c·y·σ(-c·y·f)/N; multiclass: (softmax - one-hot)/N; regression: 2(f - y)/N.
    ``n``: the N of the mean when ``output`` holds a chunk of its samples (default: all of them).
    """
    n = output.shape[-2] if n is None else n
    if task == "binary":
        scaled = (-margin / n) * y
        return (torch.sigmoid(output[..., 0] * (-margin * y)) * scaled).unsqueeze(-1)
    if task == "multiclass":
        grad = torch.softmax(output, dim=-1)
        grad.scatter_add_(-1, y.expand(*output.shape[:-1]).unsqueeze(-1),
                          grad.new_full((*output.shape[:-1], 1), -1.0))
        return grad.div_(n)
    return ((output[..., 0] - y) * (2.0 / n)).unsqueeze(-1)


def task_metric(output: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    """Accuracy for binary and multiclass, R² for regression: a scalar, or one value per model."""
    if task == "binary":
        return ((output[..., 0] >= 0) == (y > 0)).float().mean(dim=-1)
    if task == "multiclass":
        return (output.argmax(dim=-1) == y).float().mean(dim=-1)
    residual = ((output[..., 0] - y) ** 2).sum(dim=-1)
    return 1.0 - residual / ((y - y.mean()) ** 2).sum().clamp_min(1e-12)


def metric_name(task: str) -> str:
    return "r2" if task == "regression" else "accuracy"
