"""The models of reconstruction §1: DLGN, DLGN-SF, frozen-gate DLGN, ReLU MLP, deep linear network, conv nets.

Every fully connected model here is a *gated network*: a gating part decides, per layer, which
hidden units are on (the gates ``G^ℓ(x)``), and a value part carries the signal through the units
that are on. The same accessors work for all of them, so path analysis (``dlgn_lib.paths``) and
kernels (``dlgn_lib.kernels``) need no special cases:

- ``gate_preactivations(x)``: list of the gating pre-activations ``η^ℓ`` (N, m_ℓ);
- ``gates(x, hard)``: list of gates ``G^ℓ`` (N, m_ℓ), soft ``σ(β η)`` or hard ``1(η ≥ 0)``;
- ``value_weights()``: ``(first, middle, head)`` with ``first`` = ``u^1`` (m_1,) for value input
  "ones" or ``U^1`` (m_1, d) for value input "x", ``middle`` = [U^2, …, U^L], ``head`` = U^{L+1};
- ``value_input``: "ones" or "x".

Output shape is always (N, out_dim); binary and regression models have out_dim = 1.

Model kinds live in one registry, ``KINDS``: key → :class:`ModelKind` (display name, plot colour,
builder of the fully connected model, builder of its conv variant if it has one, and whether the
fused trainer knows its class). Everything else is derived from it: ``MODEL_KINDS``,
``CONV_KINDS``, ``RUN_KINDS`` ("<key>" and "conv_<key>"), ``dlgn_lib.plots.MODEL_NAMES`` and
``MODEL_COLORS``, ``build_model`` / ``build_conv_model`` / ``build_run_model`` (the trainers'
dispatch) and ``dlgn_lib.fused.FUSED_KINDS``.

To add a model kind, add one ``ModelKind`` entry to ``KINDS`` below (its position sets its place
in ``MODEL_KINDS``): a key that does not start with "conv_", a name and a colour no other kind
uses, ``build(in_dim, widths, out_dim, **options)``, optionally ``conv(in_channels, channels,
n_classes, **options)`` (which adds the run kind "conv_<key>"), and ``fused=True`` only if
``build`` returns a ``DLGN``, ``ReLUNet`` or ``DeepLinearNet`` (the classes whose backward
``dlgn_lib.fused`` writes out; other kinds train through ``dlgn_lib.train`` / ``batched``).
The registry is read-only at run time: the derived tuples are computed once, at import.
``tests/test_models.py`` checks every entry (it builds, its name and colour are its own).

Reference: Yadav, Ramaswamy, Lakshminarayanan, *Half-Space Feature Learning in Neural Networks*,
arXiv 2404.04312 (2024). Conventions are ours (reconstruction §1) and recorded with every run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import torch
from torch import nn

__all__ = ["DLGN", "RUN_KINDS", "VALUE_INPUTS", "build_conv_model", "build_model", "default_device", "kind_color",
           "kind_name"]

#: What the value network of a gated model sees: a constant input of ones, or the input x.
VALUE_INPUTS = ("ones", "x")
GATE_MODES = ("soft", "hard")
#: Initialisation conventions. "group" (the default): the authors' public code (PyTorch's default
#: ``nn.Linear`` init everywhere; value input "ones" as a d-vector of ones through a bias-free
#: d -> m_1 layer, so u^1 = U^1 1; binary loss = cross-entropy on the logits (-f, f)). "he": the
#: package's first choices (gating N(0, 1/fan_in), value layers He-normal, a directly learned
#: u^1, logistic loss on f).
CONVENTIONS = ("group", "he")
DEFAULT_CONVENTION = "group"


def default_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _check_choice(name: str, value, allowed: Sequence) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {list(allowed)}")


def _check_widths(widths) -> tuple[int, ...]:
    widths = tuple(widths)
    if not widths or any(not isinstance(m, int) or m < 1 for m in widths):
        raise ValueError(f"widths={widths!r}: need a non-empty sequence of positive integers")
    return widths


def _value_linear(fan_in: int, fan_out: int, convention: str) -> nn.Linear:
    """A bias-free value layer: He-normal ("he": gates switch off about half the units) or
    PyTorch's default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` ("group")."""
    layer = nn.Linear(fan_in, fan_out, bias=False)
    if convention == "he":
        nn.init.normal_(layer.weight, std=math.sqrt(2.0 / fan_in))
    return layer


def binary_margin(convention: str) -> float:
    """The factor c of the binary loss softplus(-c·y·f) for labels y = ±1 under a convention.

    "he": the logistic loss on f (c = 1); "group": cross-entropy on the two logits (-f, f), which
    is softplus(-2·y·f) (c = 2).
    """
    _check_choice("convention", convention, CONVENTIONS)
    return 2.0 if convention == "group" else 1.0


class GatedNet(nn.Module):
    """Shared parts of the gated view: hard/soft gates and the value network's weights."""

    value_input: str = "x"

    def gate_preactivations(self, x: torch.Tensor) -> list[torch.Tensor]:  # pragma: no cover
        raise NotImplementedError

    def gates(self, x: torch.Tensor, hard: bool = True) -> list[torch.Tensor]:
        """Per-layer gates G^ℓ(x), each (N, m_ℓ). Hard: 1(η ≥ 0); soft: σ(β η) where defined."""
        return [(eta >= 0).to(eta.dtype) for eta in self.gate_preactivations(x)]

    @property
    def widths(self) -> tuple[int, ...]:
        return self._widths

    @property
    def depth(self) -> int:
        return len(self._widths)


class DLGN(GatedNet):
    """Deep Linearly Gated Network (reconstruction §1), and its variants DLGN-SF and frozen-gate DLGN.

    Gating network: ``η^ℓ = W^ℓ η^{ℓ-1} (+ b^ℓ)`` with ``η^0 = x`` (deep linear), or for the
    "shallow features" variant (``shallow=True``, DLGN-SF) ``η^ℓ = V^ℓ x (+ c^ℓ)``. Each gate is the
    indicator of a half-space of the input space, so a path's gate ``Π_ℓ G^ℓ_{i_ℓ}(x)`` is the
    indicator of an intersection of L half-spaces (claim C3).

    Value network: ``h^1 = G^1 ⊙ u^1`` (value input "ones") or ``G^1 ⊙ (U^1 x)`` (value input "x"),
    ``h^ℓ = G^ℓ ⊙ (U^ℓ h^{ℓ-1})``, output ``U^{L+1} h^L``. No value biases.

    Args:
        in_dim: input dimension d.
        widths: hidden widths (m_1, …, m_L).
        out_dim: 1 for binary/regression, k for k classes.
        beta: soft-gate sharpness β > 0 in ``σ(β η)``.
        gate_bias: learn gate biases b^ℓ (otherwise every half-space passes through the origin).
        value_input: "ones" (learnable u^1) or "x".
        shallow: DLGN-SF, each gating layer read directly from x.
        frozen_gates: keep the gating network at its random init (kernel regime, no feature
            learning); only the value network is trained.
        gate_mode: "soft" (training default) or "hard" evaluation of the gates in ``forward``.
        convention: "group" (default) or "he" (``CONVENTIONS``): the initialisation, and with
            value input "ones" whether u^1 is learned as ``U^1 1`` with U^1 of shape (m_1, d)
            ("group"; ``value_first`` then holds U^1) or directly ("he").
    """

    def __init__(self, in_dim: int, widths: Sequence[int], out_dim: int = 1, *, beta: float = 4.0,
                 gate_bias: bool = False, value_input: str = "ones", shallow: bool = False,
                 frozen_gates: bool = False, gate_mode: str = "soft", convention: str = "group"):
        super().__init__()
        widths = _check_widths(widths)
        _check_choice("value_input", value_input, VALUE_INPUTS)
        _check_choice("gate_mode", gate_mode, GATE_MODES)
        _check_choice("convention", convention, CONVENTIONS)
        if not beta > 0:
            raise ValueError(f"beta={beta!r} must be positive")
        self._widths = widths
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.beta, self.gate_bias, self.value_input = float(beta), bool(gate_bias), value_input
        self.shallow, self.frozen_gates, self.gate_mode = bool(shallow), bool(frozen_gates), gate_mode
        self.convention = convention

        # Gating ("he"): unit-variance pre-activations for unit-norm inputs at every depth.
        fan_ins = [in_dim] * len(widths) if shallow else [in_dim, *widths[:-1]]
        self.gating = nn.ModuleList()
        for fan_in, m in zip(fan_ins, widths):
            layer = nn.Linear(fan_in, m, bias=gate_bias)
            if convention == "he":
                nn.init.normal_(layer.weight, std=1.0 / math.sqrt(fan_in))
                if gate_bias:
                    nn.init.zeros_(layer.bias)
            self.gating.append(layer)

        if value_input == "ones" and convention == "he":
            self.value_first = nn.Parameter(torch.randn(widths[0]))
        else:   # U^1 (m_1, d): applied to x, or ("group", "ones") to a vector of d ones
            self.value_first = nn.Parameter(_value_linear(in_dim, widths[0], convention).weight.detach().clone())
        self.value_layers = nn.ModuleList(_value_linear(a, b, convention) for a, b in zip(widths[:-1], widths[1:]))
        self.head = _value_linear(widths[-1], out_dim, convention)
        if frozen_gates:
            self.gating.requires_grad_(False)

    def gate_preactivations(self, x: torch.Tensor) -> list[torch.Tensor]:
        out, eta = [], x
        for layer in self.gating:
            eta = layer(x if self.shallow else eta)
            out.append(eta)
        return out

    def gates(self, x: torch.Tensor, hard: bool | None = None) -> list[torch.Tensor]:
        """Per-layer gates: soft ``σ(β η^ℓ)`` or hard ``1(η^ℓ ≥ 0)``; default: ``self.gate_mode``."""
        hard = (self.gate_mode == "hard") if hard is None else hard
        etas = self.gate_preactivations(x)
        if hard:
            return [(eta >= 0).to(eta.dtype) for eta in etas]
        return [torch.sigmoid(self.beta * eta) for eta in etas]

    def first_value(self) -> torch.Tensor:
        """u^1 (m_1,) for value input "ones" (``U^1 1`` under the "group" convention), else U^1."""
        if self.value_input == "ones" and self.value_first.dim() == 2:
            return self.value_first.sum(dim=1)
        return self.value_first

    def value_weights(self):
        return self.first_value(), [layer.weight for layer in self.value_layers], self.head.weight

    def forward(self, x: torch.Tensor, hard: bool | None = None) -> torch.Tensor:
        gates = self.gates(x, hard)
        if self.value_input == "ones":
            h = gates[0] * self.first_value()
        else:
            h = gates[0] * (x @ self.value_first.T)
        for gate, layer in zip(gates[1:], self.value_layers):
            h = gate * layer(h)
        return self.head(h)

    def effective_hyperplanes(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the effective hyperplanes ``(V^ℓ, c^ℓ)``: ``η^ℓ = V^ℓ x + c^ℓ`` exactly.

        DLGN: ``V^ℓ = W^ℓ ⋯ W^1``, ``c^ℓ = W^ℓ c^{ℓ-1} + b^ℓ`` (reconstruction §1); DLGN-SF: the layer itself.
        Returns (m_ℓ, d) and (m_ℓ,) tensors (zeros for c when there are no gate biases).
        """
        out = []
        V = c = None
        for layer in self.gating:
            W = layer.weight
            b = layer.bias if layer.bias is not None else torch.zeros(W.shape[0], dtype=W.dtype, device=W.device)
            if self.shallow or V is None:
                V, c = W, b
            else:
                V, c = W @ V, W @ c + b
            out.append((V, c))
        return out


class ReLUNet(GatedNet):
    """ReLU MLP ``h^ℓ = ReLU(W^ℓ h^{ℓ-1} + b^ℓ)``, output ``U h^L``; its gates are its activation
    indicators ``1(W^ℓ h^{ℓ-1} + b^ℓ > 0)`` and its value input is x (reconstruction §1 baselines).

    With ``bias=False`` the output equals the path sum with value input "x" exactly (claim C1).
    ``convention``: "group" (PyTorch's default init, the default) or "he" (He-normal weights, zero
    biases).
    """

    value_input = "x"

    def __init__(self, in_dim: int, widths: Sequence[int], out_dim: int = 1, *, bias: bool = True,
                 convention: str = "group"):
        super().__init__()
        widths = _check_widths(widths)
        _check_choice("convention", convention, CONVENTIONS)
        self._widths = widths
        self.in_dim, self.out_dim, self.bias = int(in_dim), int(out_dim), bool(bias)
        self.convention = convention
        self.layers = nn.ModuleList()
        for fan_in, m in zip([in_dim, *widths[:-1]], widths):
            layer = nn.Linear(fan_in, m, bias=bias)
            if convention == "he":
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                if bias:
                    nn.init.zeros_(layer.bias)
            self.layers.append(layer)
        self.head = _value_linear(widths[-1], out_dim, convention)

    def gate_preactivations(self, x: torch.Tensor) -> list[torch.Tensor]:
        out, h = [], x
        for layer in self.layers:
            z = layer(h)
            out.append(z)
            h = torch.relu(z)
        return out

    def gates(self, x: torch.Tensor, hard: bool = True) -> list[torch.Tensor]:
        """Activation indicators ``1(z^ℓ > 0)`` (ReLU gates are hard by nature; ``hard`` is ignored)."""
        return [(z > 0).to(z.dtype) for z in self.gate_preactivations(x)]

    def value_weights(self):
        return self.layers[0].weight, [layer.weight for layer in self.layers[1:]], self.head.weight

    def forward(self, x: torch.Tensor, hard: bool | None = None) -> torch.Tensor:
        h = x
        for layer in self.layers:
            h = torch.relu(layer(h))
        return self.head(h)


class DeepLinearNet(GatedNet):
    """Deep linear network (DLN): ``U^{L+1} ⋯ U^1 x``; every gate is always on (reconstruction §1 baselines).

    ``convention``: "group" (PyTorch's default init, the default) or "he" (N(0, 1/fan_in) weights).
    """

    value_input = "x"

    def __init__(self, in_dim: int, widths: Sequence[int], out_dim: int = 1, *, convention: str = "group"):
        super().__init__()
        widths = _check_widths(widths)
        _check_choice("convention", convention, CONVENTIONS)
        self._widths = widths
        self.in_dim, self.out_dim, self.convention = int(in_dim), int(out_dim), convention
        self.layers = nn.ModuleList()
        for fan_in, m in zip([in_dim, *widths[:-1]], widths):
            self.layers.append(self._layer(fan_in, m))
        self.head = self._layer(widths[-1], out_dim)

    def _layer(self, fan_in: int, fan_out: int) -> nn.Linear:
        layer = nn.Linear(fan_in, fan_out, bias=False)
        if self.convention == "he":
            nn.init.normal_(layer.weight, std=1.0 / math.sqrt(fan_in))
        return layer

    def gate_preactivations(self, x: torch.Tensor) -> list[torch.Tensor]:
        # Gates of a DLN are constant 1: pre-activations of +1 make every hard gate open.
        return [x.new_ones(x.shape[0], m) for m in self._widths]

    def gates(self, x: torch.Tensor, hard: bool = True) -> list[torch.Tensor]:
        return self.gate_preactivations(x)

    def value_weights(self):
        return self.layers[0].weight, [layer.weight for layer in self.layers[1:]], self.head.weight

    def forward(self, x: torch.Tensor, hard: bool | None = None) -> torch.Tensor:
        h = x
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


# --------------------------------------------------------------------------- conv models (CIFAR)

class ConvDLGN(nn.Module):
    """Convolutional DLGN (reconstruction §1 image models).

    The gating convs form a linear chain on the image (no non-linearity between them); the value
    convs start from an all-ones image; gates ``σ(β η^ℓ)`` multiply the value maps channel- and
    pixel-wise; global average pooling and a linear head give the class scores.
    """

    def __init__(self, in_channels: int = 3, channels: Sequence[int] = (128,) * 5, n_classes: int = 10, *,
                 beta: float = 4.0, kernel_size: int = 3, frozen_gates: bool = False, gate_mode: str = "soft"):
        super().__init__()
        channels = _check_widths(channels)
        _check_choice("gate_mode", gate_mode, GATE_MODES)
        self.beta, self.gate_mode, self.frozen_gates = float(beta), gate_mode, bool(frozen_gates)
        pad = kernel_size // 2
        ins = [in_channels, *channels[:-1]]
        self.gating = nn.ModuleList(nn.Conv2d(a, b, kernel_size, padding=pad) for a, b in zip(ins, channels))
        self.value = nn.ModuleList(nn.Conv2d(a, b, kernel_size, padding=pad, bias=False)
                                   for a, b in zip(ins, channels))
        self.head = nn.Linear(channels[-1], n_classes)
        if frozen_gates:
            self.gating.requires_grad_(False)

    def gates(self, x: torch.Tensor, hard: bool | None = None) -> list[torch.Tensor]:
        hard = (self.gate_mode == "hard") if hard is None else hard
        out, eta = [], x
        for conv in self.gating:
            eta = conv(eta)
            out.append((eta >= 0).to(eta.dtype) if hard else torch.sigmoid(self.beta * eta))
        return out

    def forward(self, x: torch.Tensor, hard: bool | None = None) -> torch.Tensor:
        h = torch.ones_like(x)
        for gate, conv in zip(self.gates(x, hard), self.value):
            h = gate * conv(h)
        return self.head(h.mean(dim=(2, 3)))


class ConvReLU(nn.Module):
    """The ReLU counterpart of ``ConvDLGN``: conv + ReLU layers, global average pooling, linear head."""

    def __init__(self, in_channels: int = 3, channels: Sequence[int] = (128,) * 5, n_classes: int = 10, *,
                 kernel_size: int = 3):
        super().__init__()
        channels = _check_widths(channels)
        pad = kernel_size // 2
        ins = [in_channels, *channels[:-1]]
        self.layers = nn.ModuleList(nn.Conv2d(a, b, kernel_size, padding=pad) for a, b in zip(ins, channels))
        self.head = nn.Linear(channels[-1], n_classes)

    def forward(self, x: torch.Tensor, hard: bool | None = None) -> torch.Tensor:
        h = x
        for conv in self.layers:
            h = torch.relu(conv(h))
        return self.head(h.mean(dim=(2, 3)))


# --------------------------------------------------------------------------- the registry of kinds

#: A run kind "conv_<key>" names the conv variant of the fully connected kind <key>.
CONV_PREFIX = "conv_"


@dataclass(frozen=True)
class ModelKind:
    """One model kind: everything the library needs to know about it, in one place.

    Attributes:
        key: the kind's name in configs and tables ("dlgn"); never starts with ``CONV_PREFIX``.
        name: display name in figures and tables ("DLGN"); its conv variant is "conv <name>".
        color: matplotlib colour, the same in every notebook (the conv variant shares it).
        build: ``build(in_dim, widths, out_dim=1, **options)`` → the fully connected model.
        conv: ``conv(in_channels, channels, n_classes, **options)`` → the conv variant, or None
            when the kind has none (then there is no run kind "conv_<key>").
        fused: ``build`` returns a ``DLGN``, ``ReLUNet`` or ``DeepLinearNet``, whose training
            ``dlgn_lib.fused`` writes out; other kinds train through autograd.
    """

    key: str
    name: str
    color: str
    build: Callable[..., GatedNet]
    conv: Callable[..., nn.Module] | None = None
    fused: bool = False

    @property
    def conv_key(self) -> str | None:
        """The run kind of the conv variant ("conv_dlgn"), or None."""
        return None if self.conv is None else CONV_PREFIX + self.key


def _dlgn_builder(shallow: bool = False, frozen_gates: bool = False) -> Callable[..., DLGN]:
    def build(in_dim: int, widths: Sequence[int], out_dim: int = 1, **options) -> DLGN:
        return DLGN(in_dim, widths, out_dim, shallow=shallow, frozen_gates=frozen_gates, **options)
    return build


def _conv_dlgn_builder(frozen_gates: bool = False) -> Callable[..., ConvDLGN]:
    def build(in_channels: int, channels: Sequence[int], n_classes: int, **options) -> ConvDLGN:
        return ConvDLGN(in_channels, channels, n_classes, frozen_gates=frozen_gates, **options)
    return build


#: Every model kind, by key, in the order of ``MODEL_KINDS`` (read-only; see the module docstring
#: for adding a kind).
KINDS: Mapping[str, ModelKind] = MappingProxyType({kind.key: kind for kind in (
    ModelKind("dln", "DLN", "#7f7f7f", DeepLinearNet, fused=True),
    ModelKind("relu", "ReLU", "#d62728", ReLUNet, conv=ConvReLU, fused=True),
    ModelKind("dlgn", "DLGN", "#1f77b4", _dlgn_builder(), conv=_conv_dlgn_builder(), fused=True),
    ModelKind("dlgn_sf", "DLGN-SF", "#17becf", _dlgn_builder(shallow=True), fused=True),
    ModelKind("dlgn_frozen", "frozen-gate DLGN", "#ff7f0e", _dlgn_builder(frozen_gates=True),
              conv=_conv_dlgn_builder(frozen_gates=True), fused=True),
)})

#: The fully connected kinds (the keys of ``KINDS``).
MODEL_KINDS = tuple(KINDS)
#: The kinds with a conv variant (``build_conv_model``'s choices).
CONV_KINDS = tuple(key for key, kind in KINDS.items() if kind.conv is not None)
#: Every kind a run config may name: the fully connected kinds, and "conv_<kind>" for conv nets.
RUN_KINDS = MODEL_KINDS + tuple(CONV_PREFIX + key for key in CONV_KINDS)


def run_kind(kind: str) -> tuple[ModelKind, bool]:
    """The registry entry of a run kind (``RUN_KINDS``) and whether it names the conv variant:
    ``run_kind("conv_dlgn") == (KINDS["dlgn"], True)``."""
    _check_choice("kind", kind, RUN_KINDS)
    if kind in KINDS:
        return KINDS[kind], False
    return KINDS[kind[len(CONV_PREFIX):]], True


def kind_name(kind: str) -> str:
    """Display name of a run kind: "DLGN", "conv DLGN", …"""
    entry, conv = run_kind(kind)
    return f"conv {entry.name}" if conv else entry.name


def display_name(kind: str) -> str:
    """``kind_name`` of a run kind, and any other label as it is (a table's column of kinds)."""
    return kind_name(kind) if kind in RUN_KINDS else kind


def kind_color(kind: str) -> str:
    """Plot colour of a run kind (a conv variant shares its fully connected kind's colour)."""
    return run_kind(kind)[0].color


def build_model(kind: str, in_dim: int, widths: Sequence[int], out_dim: int = 1, **options) -> GatedNet:
    """Make a fully connected model by name (reconstruction §1); images are used flattened.

    Args:
        kind: one of ``MODEL_KINDS`` (the keys of ``KINDS``): "dln", "relu", "dlgn", "dlgn_sf",
            "dlgn_frozen".
        options: passed to the class (``beta``, ``gate_bias``, ``value_input`` for DLGNs;
            ``bias`` for ReLU). Options that a kind does not have are an error.
    """
    _check_choice("kind", kind, MODEL_KINDS)
    return KINDS[kind].build(in_dim, widths, out_dim, **options)


def build_conv_model(kind: str, in_channels: int = 3, channels: Sequence[int] = (128,) * 5,
                     n_classes: int = 10, **options) -> nn.Module:
    """Make a conv model by name: one of ``CONV_KINDS``, "relu", "dlgn" or "dlgn_frozen" (5 layers
    is the reference size)."""
    _check_choice("kind", kind, CONV_KINDS)
    return KINDS[kind].conv(in_channels, channels, n_classes, **options)


def build_run_model(kind: str, input_shape: Sequence[int], widths: Sequence[int], out_dim: int = 1,
                    **options) -> nn.Module:
    """The model of a run kind (``RUN_KINDS``) for inputs of shape ``input_shape`` (one sample).

    Fully connected kinds read flattened inputs (``in_dim`` = the product of ``input_shape``);
    "conv_<kind>" reads images (C, H, W), ``widths`` being the channels of each layer.
    """
    entry, conv = run_kind(kind)
    if conv:
        return entry.conv(int(input_shape[0]), widths, out_dim, **options)
    return entry.build(math.prod(input_shape), widths, out_dim, **options)
