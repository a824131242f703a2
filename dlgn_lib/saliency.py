"""Input-gradient (saliency) maps of hidden neurons and how much they vary across inputs (claim C4).

A neuron's *saliency map* at an input x is the input gradient of its pre-activation,
``∇_x z^ℓ_i(x)``; ``dlgn_lib.paths.local_hyperplanes`` computes it for every neuron at once. For a
DLGN it is the effective hyperplane ``V^ℓ_i`` at every input: one global map per neuron. For a ReLU
net it is ``W^ℓ D^{ℓ-1}(x) W^{ℓ-1} ⋯ D^1(x) W^1`` (``D`` the 0/1 activation masks), so after the
first layer it changes with the input: a local explanation only.

The metric (reconstruction §4, notebook 04) is a neuron's **mean pairwise cosine** of its input gradients
over a set of inputs,

    c_i = (2 / (n (n − 1))) Σ_{a < b} cos(g_a, g_b),   g_a = ∇_x z^ℓ_i(x_a),

which is 1 exactly when the map is the same at every input (a DLGN, by construction) and below 1
when it varies (a ReLU neuron after the first layer). It is computed without forming all pairs:
with unit vectors ``u_a = g_a / ‖g_a‖``, ``Σ_{a≠b} u_a·u_b = ‖Σ_a u_a‖² − n``.

Treatment of special neurons: gradients of *pre-activations* are used, so a neuron that is off
(or never on) at an input still has a defined map there and takes part. An input where a neuron's
gradient is exactly zero (every path to it switched off) has no direction; it is left out of that
neuron's pairs and counted (``n_zero`` in ``cosine_table``). With fewer than two non-zero
gradients the metric is NaN.
"""
from __future__ import annotations

import pandas as pd
import torch

from . import paths, runs as runs_module
from .models import GatedNet

__all__ = ["cosine_tables", "saliency_rows", "seed_medians", "summary_table"]

DEFAULT_CHUNK = 128  # inputs per pass: holds (chunk, m, d) gradients of one layer at a time


def _check_layer(model: GatedNet, layer: int) -> int:
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= model.depth:
        raise ValueError(f"layer={layer!r} is not allowed; choose an integer 1 … {model.depth} "
                         "(layers are counted from 1, as ℓ in reconstruction §1)")
    return layer


def _check_chunk(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r} is not allowed; it must be an integer >= 1")
    return chunk_size


def input_gradients(model: GatedNet, x: torch.Tensor, layer: int) -> torch.Tensor:
    """Saliency maps ``∇_x z^ℓ_i(x_n)`` of every neuron of one layer at every input, (N, m_ℓ, d).

    Args:
        layer: 1 … L (reconstruction §1 numbering).
    """
    return paths.local_hyperplanes(model, x)[_check_layer(model, layer) - 1][0]


def _unit_sum(gradients: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum over inputs of unit gradients (m, d) and the number of non-zero gradients (m,), float64."""
    g = gradients.double()
    norm = torch.linalg.vector_norm(g, dim=-1)                     # (n, m)
    inverse = torch.where(norm > 0, 1.0 / norm, torch.zeros_like(norm))  # zero maps drop out
    return torch.einsum("nmd,nm->md", g, inverse), (norm > 0).sum(0)


def _mean_cosine(unit_sum: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """``(‖Σ u‖² − n) / (n (n − 1))`` per neuron; NaN where n < 2."""
    n = count.double()
    pairs = n * (n - 1)
    mean = ((unit_sum * unit_sum).sum(-1) - n) / torch.where(pairs > 0, pairs, torch.ones_like(pairs))
    return torch.where(pairs > 0, mean, torch.full_like(mean, float("nan")))


def mean_pairwise_cosine(gradients: torch.Tensor) -> torch.Tensor:
    """Mean over input pairs a < b of ``cos(g_a, g_b)``, per neuron (the claim C4 metric), float64.

    Args:
        gradients: (N, m, d) maps of m neurons at N inputs, or (N, d) for one neuron.

    Returns:
        (m,) or a scalar tensor. Zero maps are left out; NaN with fewer than two non-zero maps.
    """
    if gradients.dim() not in (2, 3):
        raise ValueError(f"gradients of shape {tuple(gradients.shape)}: need (N, m, d) or (N, d)")
    single = gradients.dim() == 2
    mean = _mean_cosine(*_unit_sum(gradients.unsqueeze(1) if single else gradients))
    return mean[0] if single else mean


def _layer_sums(model: GatedNet, x: torch.Tensor, chunk_size: int) -> list[dict[str, torch.Tensor]]:
    """Per layer, over all inputs: unit-gradient sums, non-zero counts, and how often each unit is on."""
    sums = None
    for xs in torch.split(x, _check_chunk(chunk_size)):
        parts = []
        for (A, _), gate in zip(paths.local_hyperplanes(model, xs), model.gates(xs, hard=True)):
            unit_sum, count = _unit_sum(A)
            parts.append({"unit_sum": unit_sum, "count": count, "on": (gate > 0).sum(0)})
        sums = parts if sums is None else [{k: s[k] + p[k] for k in s} for s, p in zip(sums, parts)]
    return sums


@torch.no_grad()
def gradient_cosines(model: GatedNet, x: torch.Tensor, chunk_size: int = DEFAULT_CHUNK) -> list[torch.Tensor]:
    """Per layer, the mean pairwise cosine of each neuron's input gradients over the inputs x.

    Exactly the same as ``mean_pairwise_cosine(input_gradients(model, x, ℓ))`` for every layer ℓ,
    but accumulated over chunks of inputs so the (N, m, d) maps are never all in memory.

    Returns:
        list of float64 (m_ℓ,) tensors.
    """
    return [_mean_cosine(s["unit_sum"], s["count"]) for s in _layer_sums(model, x, chunk_size)]


@torch.no_grad()
def cosine_table(model: GatedNet, x: torch.Tensor, /, chunk_size: int = DEFAULT_CHUNK, **columns) -> pd.DataFrame:
    """One row per neuron: its mean pairwise gradient cosine and how it was obtained (claim C4).

    Args:
        columns: constant columns to add (e.g. ``model="relu"``; model and x are positional-only,
            so a column may be called "model").

    Returns:
        DataFrame with ``columns`` and ``layer`` (1-based), ``unit`` (0-based), ``mean_cos``,
        ``n_zero`` (inputs whose map is zero, left out of the pairs) and ``active_share`` (share
        of the inputs where the neuron's hard gate is on; 0 for a neuron never on).
    """
    n = x.shape[0]
    frames = []
    for layer, s in enumerate(_layer_sums(model, x, chunk_size), start=1):
        m = s["count"].shape[0]
        frames.append(pd.DataFrame({
            **{k: [v] * m for k, v in columns.items()},
            "layer": layer, "unit": range(m),
            "mean_cos": _mean_cosine(s["unit_sum"], s["count"]).cpu().numpy(),
            "n_zero": (n - s["count"]).cpu().numpy(),
            "active_share": (s["on"].double() / n).cpu().numpy()}))
    return pd.concat(frames, ignore_index=True)


def cosine_tables(runs, keys, x: torch.Tensor, epoch: int | None = None, chunk_size: int = DEFAULT_CHUNK) -> pd.DataFrame:
    """``cosine_table`` of the model at ``epoch`` (None: the last snapshot) of each ``runs[seed, kind]``
    for the ``(seed, kind)`` pairs of ``keys``, in that order, in float64, with columns ``model``
    (the kind) and ``seed``; one frame (kept in the analysis cache, ``dlgn_lib.runs.cached_table``)."""
    keys = [tuple(k) for k in keys]

    def compute():
        return pd.concat([cosine_table(runs[seed, kind].model_at(epoch).double(), x, chunk_size=chunk_size,
                                       model=kind, seed=seed) for seed, kind in keys], ignore_index=True)
    params = {"keys": [list(k) for k in keys], "x": runs_module.tensor_hash(x), "epoch": epoch, "chunk_size": chunk_size}
    return runs_module.cached_table("saliency.cosine_tables", params, [runs[k] for k in keys], compute)


def layer_summary(rows: pd.DataFrame) -> dict:
    """Summary of one layer's rows of a ``cosine_table``: number of neurons, median, 10% and 90%
    quantiles, min and max of ``mean_cos``; neurons never on; the median over neurons on at least
    once; and the zero maps left out of the pairs (summed over neurons)."""
    cos = rows["mean_cos"]
    return {"neurons": len(rows), "median": cos.median(), "10%": cos.quantile(0.1),
            "90%": cos.quantile(0.9), "min": cos.min(), "max": cos.max(),
            "never on": int((rows["active_share"] == 0).sum()),
            "median, on ≥ once": cos[rows["active_share"] > 0].median(),
            "zero maps left out": int(rows["n_zero"].sum())}


def summary_table(table: pd.DataFrame, keys=("model", "layer")) -> pd.DataFrame:
    """``layer_summary`` of every group of a ``cosine_table`` (by default per model and layer)."""
    return pd.DataFrame.from_dict({key: layer_summary(rows) for key, rows in table.groupby(list(keys))},
                                  orient="index").rename_axis(list(keys))


def seed_medians(table: pd.DataFrame, model: str, layer: int) -> list[float]:
    """Per seed (in the order of ``table``'s ``seed`` column), the median over one layer's neurons
    of ``mean_cos`` in a ``cosine_table`` of several seeds: the per-seed values of C4's ReLU check
    (rules v3)."""
    rows = table[(table["model"] == model) & (table["layer"] == layer)]
    if rows.empty:
        raise ValueError(f"the table has no rows of model {model!r}, layer {layer}")
    return [float(group["mean_cos"].median()) for _, group in rows.groupby("seed", sort=False)]


def saliency_rows(neurons, x: torch.Tensor, layer: int) -> tuple[dict, dict]:
    """The saliency maps of chosen neurons of one layer at the inputs ``x``, for a grid of images.

    Args:
        neurons: ``(name, model, unit)`` triples, e.g. ``("ReLU", relu, 29)``.
        layer: the neurons' layer (1-based).

    Returns:
        ``(rows, notes)``: per neuron a label (name, layer, unit and the mean pairwise cosine of its
        maps over ``x``) → its maps (N, d), and the same label → "on"/"off" per input (its hard gate).
    """
    rows, notes = {}, {}
    for name, model, unit in neurons:
        maps = input_gradients(model, x, layer)[:, unit]
        on = model.gates(x, hard=True)[layer - 1][:, unit] > 0
        label = f"{name}, layer {layer}\nunit {unit}\nmean cos {mean_pairwise_cosine(maps).item():.2f}"
        rows[label], notes[label] = maps, ["on" if v else "off" for v in on]
    return rows, notes
