"""Diagrams of the models (notebook 00): the DLGN's two networks and the gates between them.

``dlgn_architecture`` draws a DLGN as ``dlgn_lib.models.DLGN`` computes it: the gating network on
top (linear layers, no non-linearity, producing the pre-activations ``η^ℓ``), the value network
below, and per layer the gates ``G^ℓ = σ(β η^ℓ)`` that multiply the value units ``⊙``. The input x
feeds the gating network; the value input (a vector of ones, or x) feeds the value network.

Artists carry a ``gid`` so that tests can count what was drawn: "gating-unit", "value-unit",
"input-unit", "value-input-unit", "output-unit" (circles), "gate" (one box per layer) and
"ellipsis" (a layer shown with fewer units than it has).
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from .. import models

__all__ = ["dlgn_architecture"]

GATING_COLOR = "#1b7837"   # the gating network (green, as the gate lines over decision functions)
VALUE_COLOR = "#2166ac"    # the value network
GATE_COLOR = "#e66101"     # the gates
EDGE_COLOR = "#9a9a9a"

_DX = 2.0          # distance between layers (columns)
_DY = 0.42         # distance between units of one layer
_RADIUS = 0.14
_GATING_Y = 6.2    # centre of the gating network's band
_VALUE_Y = 1.4     # centre of the value network's band
_GATE_Y = 3.8      # centre of the gate boxes


def shown_units(m: int, max_units: int) -> list[int | None]:
    """The unit indices drawn for a layer of ``m`` units: all of them when ``m <= max_units``, else
    the first ``max_units - 1``, an ellipsis (None) and the last one."""
    if m <= max_units:
        return list(range(m))
    return [*range(max_units - 1), None, m - 1]


def _stack(ax, x, centre, m, max_units, color, gid, labels=None):
    """A column of unit circles (an ellipsis for skipped units); returns the drawn centres (x, y)."""
    slots = shown_units(m, max_units)
    top = centre + _DY * (len(slots) - 1) / 2
    centres = []
    for k, unit in enumerate(slots):
        y = top - k * _DY
        if unit is None:
            ax.text(x, y, "⋮", ha="center", va="center", fontsize=11, color=color, gid="ellipsis")
            continue
        ax.add_patch(Circle((x, y), _RADIUS, fc="white", ec=color, lw=1.4, gid=gid, zorder=3))
        if labels is not None:
            ax.text(x, y, labels, ha="center", va="center", fontsize=8, color=color, zorder=4)
        centres.append((x, y))
    return centres


def _connect(ax, left, right, color=EDGE_COLOR):
    """Full connectivity between two columns of units (a linear layer)."""
    for xa, ya in left:
        for xb, yb in right:
            ax.plot([xa + _RADIUS, xb - _RADIUS], [ya, yb], color=color, lw=0.45, alpha=0.6, zorder=1)


def _arrow(ax, start, end, color, lw=1.6, style="-|>", **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=11, color=color, lw=lw,
                                 zorder=2, **kw))


def dlgn_architecture(widths: Sequence[int] = (4, 4, 4), *, in_dim: int = 2, out_dim: int = 1,
                      value_input: str = "ones", gate_bias: bool = False, max_units: int = 5) -> plt.Figure:
    """A diagram of a DLGN (``dlgn_lib.models.DLGN``) with hidden ``widths`` (m_1, …, m_L).

    Top: the gating network, ``η^0 = x``, ``η^ℓ = W^ℓ η^{ℓ-1}`` (``+ b^ℓ`` with ``gate_bias``, the
    model's option, off by default: every gate's half-space then passes through the origin): linear layers without any
    non-linearity, whose outputs are the pre-activations. Middle: per layer the gates
    ``G^ℓ = σ(β η^ℓ)`` (hard: ``1[η^ℓ ≥ 0]``), one per unit. Bottom: the value network, fed the
    value input (``value_input`` "ones": a vector of ``in_dim`` ones; "x": the input itself),
    ``h^ℓ = G^ℓ ⊙ (U^ℓ h^{ℓ-1})``, output ``ŷ = U^{L+1} h^L``; no value biases.

    Args:
        widths: hidden widths; layers wider than ``max_units`` are drawn with an ellipsis and
            labelled with their true width.
        in_dim, out_dim: input and output dimensions.
        value_input: "ones" or "x" (``models.VALUE_INPUTS``).
        gate_bias: label the gating layers ``W^ℓ, b^ℓ`` (the model's ``gate_bias=True``), else ``W^ℓ``.
        max_units: the most units drawn per column (at least 2).
    """
    widths = models._check_widths(widths)
    models._check_choice("value_input", value_input, models.VALUE_INPUTS)
    if in_dim < 1 or out_dim < 1:
        raise ValueError(f"in_dim={in_dim!r}, out_dim={out_dim!r}: need positive dimensions")
    if max_units < 2:
        raise ValueError(f"max_units={max_units!r}: need at least 2")
    L = len(widths)
    xlim, ylim = (-2.3, _DX * (L + 1) + 1.9), (-0.4, 8.6)
    # At most 6.5 inches wide, so that the book shows it at full size (every text >= 8 pt).
    scale = min(0.7, 6.5 / (xlim[1] - xlim[0]))   # inches per data unit
    fig, ax = plt.subplots(figsize=(round(scale * (xlim[1] - xlim[0]), 2), round(scale * (ylim[1] - ylim[0]) + 0.4, 2)))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")

    # Bands behind the two networks.
    for y, color, text in ((_GATING_Y, GATING_COLOR, "gating network: linear, no non-linearity"),
                           (_VALUE_Y, VALUE_COLOR, "value network:\nno biases")):
        ax.add_patch(FancyBboxPatch((-1.9, y - 1.45), _DX * (L + 1) + 3.5, 2.9, boxstyle="round,pad=0.05",
                                    fc=color, alpha=0.06, ec=color, lw=0.8, zorder=0))
        inside = y == _VALUE_Y   # the gating band's name sits above it, clear of the layer labels
        ax.text(-1.8, y + 1.3 if inside else y + 1.7, text, color=color, fontsize=9, fontweight="bold",
                va="top" if inside else "bottom")

    # Gating network: x -> eta^1 -> ... -> eta^L.
    gating = [_stack(ax, 0.0, _GATING_Y, in_dim, max_units, GATING_COLOR, "input-unit")]
    ax.text(-0.45, _GATING_Y, "input\n$x$", ha="right", va="center", fontsize=9, color=GATING_COLOR)
    for layer, m in enumerate(widths, start=1):
        x = _DX * layer
        gating.append(_stack(ax, x, _GATING_Y, m, max_units, GATING_COLOR, "gating-unit"))
        _connect(ax, gating[-2], gating[-1])
        weights = f"$W^{layer},\\ b^{layer}$" if gate_bias else f"$W^{layer}$"
        ax.text(x - _DX / 2, _GATING_Y - 1.2, weights, ha="center", fontsize=8,
                color=GATING_COLOR)
        ax.text(x, max(y for _, y in gating[-1]) + 0.3, f"$\\eta^{layer}$  ($m_{layer}={m}$)", ha="center", fontsize=8,
                color=GATING_COLOR)

    # Value network: value input -> h^1 -> ... -> h^L -> y.
    ones = value_input == "ones"
    value = [_stack(ax, 0.0, _VALUE_Y, in_dim, max_units, VALUE_COLOR, "value-input-unit",
                    labels="1" if ones else None)]
    ax.text(-0.45, _VALUE_Y, "value input\n" + ("$\\mathbf{1}$ (ones)" if ones else "$x$"), ha="right",
            va="center", fontsize=9, color=VALUE_COLOR)
    for layer, m in enumerate(widths, start=1):
        x = _DX * layer
        value.append(_stack(ax, x, _VALUE_Y, m, max_units, VALUE_COLOR, "value-unit"))
        _connect(ax, value[-2], value[-1])
        name = f"$U^{layer}$" + ("\n($u^1 = U^1\\mathbf{1}$)" if ones and layer == 1 else "")
        ax.text(x - _DX / 2, _VALUE_Y - 1.35, name, ha="center", fontsize=8, color=VALUE_COLOR)
        low = min(y for _, y in value[-1])
        ax.text(x, low - 0.3, f"$h^{layer}$", ha="center", va="top", fontsize=8, color=VALUE_COLOR)
    x_out = _DX * (L + 1)
    value.append(_stack(ax, x_out, _VALUE_Y, out_dim, max_units, VALUE_COLOR, "output-unit"))
    _connect(ax, value[-2], value[-1])
    ax.text(x_out - _DX / 2, _VALUE_Y - 1.35, f"$U^{L + 1}$", ha="center", fontsize=8, color=VALUE_COLOR)
    ax.text(x_out + 0.3, _VALUE_Y, "$\\hat y$", ha="left", va="center", fontsize=11, color=VALUE_COLOR)

    # Gates: per layer, sigma(beta * eta^l) multiplies the value units elementwise.
    for layer in range(1, L + 1):
        x = _DX * layer
        top = min(y for _, y in gating[layer]) - _RADIUS
        bottom = max(y for _, y in value[layer]) + _RADIUS
        ax.add_patch(FancyBboxPatch((x - 0.55, _GATE_Y - 0.3), 1.1, 0.6, boxstyle="round,pad=0.04",
                                    fc="white", ec=GATE_COLOR, lw=1.6, gid="gate", zorder=3))
        ax.text(x, _GATE_Y, "$\\sigma(\\beta\\,\\cdot)$", ha="center", va="center", fontsize=9,
                color=GATE_COLOR, zorder=4)
        _arrow(ax, (x, top - 0.05), (x, _GATE_Y + 0.36), GATE_COLOR)
        _arrow(ax, (x, _GATE_Y - 0.36), (x, bottom + 0.05), GATE_COLOR)
        ax.text(x + 0.12, (_GATE_Y + bottom) / 2 - 0.05, f"$G^{layer}\\odot$", ha="left", va="center",
                fontsize=9, color=GATE_COLOR)
    ax.text(_DX * (L + 1) - 0.6, _GATE_Y, "gates $G^\\ell=\\sigma(\\beta\\,\\eta^\\ell)$\n"
            "(hard: $1[\\eta^\\ell\\geq 0]$)\nmultiply the value\nunits of layer $\\ell$",
            ha="left", va="center", fontsize=8.5, color=GATE_COLOR)
    fig.suptitle(f"DLGN with widths {tuple(widths)}: gates from x, values from the value input "
                 f"({value_input!r})", fontsize=10)
    fig.tight_layout()
    return fig
