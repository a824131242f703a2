"""Overlap kernels and kernel–target alignment (reconstruction §2).

The overlap kernel counts the paths that are active for both inputs,
``K(x, x') = Σ_π f_π(x) f_π(x') = Π_ℓ Σ_i G^ℓ_i(x) G^ℓ_i(x')``: the path features factorise over
layers, so K is the Hadamard product of the per-layer Gram matrices ``G^ℓ_a (G^ℓ_b)ᵀ`` and no path is
ever enumerated. It is the kernel of the value network when the gates are held fixed (the frozen-gate
"kernel regime"); how it moves during training, and how well it aligns with the target, is how
feature learning shows (claims C5, C7). The same code serves ReLU nets, whose gates are their
activation indicators.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

__all__ = ["cosine_kernel", "model_overlap_kernel", "overlap_kernel"]

BLOCK_MEMORY_BYTES = 256 * 2**20  # per-block working memory when block_size is not given


def _check_gates(gates_a: Sequence[torch.Tensor], gates_b: Sequence[torch.Tensor]) -> None:
    if len(gates_a) == 0 or len(gates_a) != len(gates_b):
        raise ValueError(f"gates_a, gates_b: need the same non-zero number of layers, got "
                         f"{len(gates_a)} and {len(gates_b)}")
    for layer, (a, b) in enumerate(zip(gates_a, gates_b)):
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
            raise ValueError(f"gates layer {layer}: need (N, m) matrices of equal width m, got "
                             f"{tuple(a.shape)} and {tuple(b.shape)}")
        if a.shape[0] != gates_a[0].shape[0] or b.shape[0] != gates_b[0].shape[0]:
            raise ValueError(f"gates layer {layer}: every layer needs the same number of inputs")


def _as_float(g: torch.Tensor) -> torch.Tensor:
    """Float gates as given (float32 or float64); bool/int gates as float32."""
    return g if g.is_floating_point() else g.float()


def default_block_size(dtype: torch.dtype = torch.float32, memory_bytes: int = BLOCK_MEMORY_BYTES) -> int:
    """Side of a square block whose Gram and running product fit in ``memory_bytes``."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return max(1, math.isqrt(memory_bytes // (2 * itemsize)))


def _block(rows: Sequence[torch.Tensor], cols: Sequence[torch.Tensor]) -> torch.Tensor:
    """Π_ℓ rows[ℓ] cols[ℓ]ᵀ for one block, reusing one buffer for the per-layer Grams."""
    out = rows[0] @ cols[0].T
    gram = torch.empty_like(out)
    for a, b in zip(rows[1:], cols[1:]):
        torch.mm(a, b.T, out=gram)
        out.mul_(gram)
    return out


@torch.no_grad()
def overlap_kernel(gates_a: Sequence[torch.Tensor], gates_b: Sequence[torch.Tensor] | None = None, *,
                   block_size: int | None = None) -> torch.Tensor:
    """Overlap kernel ``K = Π_ℓ G^ℓ_a (G^ℓ_b)ᵀ``, (N_a, N_b) (reconstruction §2).

    Args:
        gates_a: per-layer gates (N_a, m_ℓ), hard (0/1) or soft.
        gates_b: per-layer gates (N_b, m_ℓ); default: gates_a (symmetric K, upper blocks mirrored).
        block_size: rows and columns per block; default: ``default_block_size`` (256 MB per block).
            The arithmetic runs in the gates' float dtype (float32 unless they are float64).
    """
    symmetric = gates_b is None
    gates_a = [_as_float(g) for g in gates_a]
    gates_b = gates_a if symmetric else [_as_float(g).to(gates_a[0].dtype) for g in gates_b]
    _check_gates(gates_a, gates_b)
    n_a, n_b = gates_a[0].shape[0], gates_b[0].shape[0]
    step = default_block_size(gates_a[0].dtype) if block_size is None else int(block_size)
    if step < 1:
        raise ValueError(f"block_size={block_size!r}: need a positive integer or None")
    K = gates_a[0].new_empty(n_a, n_b)
    for r in range(0, n_a, step):
        rows = [g[r:r + step] for g in gates_a]
        for c in range(r if symmetric else 0, n_b, step):
            block = _block(rows, [g[c:c + step] for g in gates_b])
            K[r:r + step, c:c + step] = block
            if symmetric and c != r:
                K[c:c + step, r:r + step] = block.T.contiguous()  # a contiguous transpose copies ~3x faster
    return K


@torch.no_grad()
def kernel_diagonal(gates: Sequence[torch.Tensor]) -> torch.Tensor:
    """``K(x, x) = Π_ℓ Σ_i G^ℓ_i(x)²`` for every input, (N,), without the full kernel."""
    return math.prod(_as_float(g).square().sum(dim=1) for g in gates)


@torch.no_grad()
def model_overlap_kernel(model, x: torch.Tensor, x2: torch.Tensor | None = None, hard: bool = True,
                         block_size: int | None = None) -> torch.Tensor:
    """Overlap kernel of a model's gates between x and x2 (default x); ReLU: activation indicators."""
    gates_b = None if x2 is None else model.gates(x2, hard=hard)
    return overlap_kernel(model.gates(x, hard=hard), gates_b, block_size=block_size)


def normalized_kernel(K: torch.Tensor, widths: Sequence[int]) -> torch.Tensor:
    """``K / Π_ℓ m_ℓ``: the fraction of all paths active for both inputs (hard gates)."""
    return K / math.prod(widths)


def cosine_kernel(K: torch.Tensor, diag_a: torch.Tensor | None = None,
                  diag_b: torch.Tensor | None = None) -> torch.Tensor:
    """``K(x, x') / √(K(x, x) K(x', x'))``; 0 where an input has no active path.

    Args:
        diag_a, diag_b: ``K(x, x)`` for the rows and ``K(x', x')`` for the columns (see
            ``kernel_diagonal``). Omit both when K is the square kernel of one set of inputs.
    """
    if diag_a is None and diag_b is None:
        if K.dim() != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"K of shape {tuple(K.shape)}: pass diag_a and diag_b unless K is square K(X, X)")
        diag_a = diag_b = K.diagonal()
    elif diag_a is None or diag_b is None:
        raise ValueError("diag_a, diag_b: pass both or neither")
    denom = torch.sqrt(torch.outer(diag_a, diag_b).to(K.dtype))
    return torch.where(denom > 0, K / torch.where(denom > 0, denom, 1), 0)


def neural_path_kernel(K: torch.Tensor, x: torch.Tensor, x2: torch.Tensor | None = None) -> torch.Tensor:
    """``⟨x, x'⟩ · K(x, x')``: the path-feature kernel for value input "x" (reconstruction §2)."""
    return (x @ (x if x2 is None else x2).T).to(K.dtype) * K


# --------------------------------------------------------------------------- alignment

def _targets(K: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Targets as an (N, k) matrix in K's dtype; one column for scalar targets."""
    if K.dim() != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K of shape {tuple(K.shape)}: alignment needs a square kernel K(X, X)")
    y = torch.as_tensor(y).to(K.dtype)
    y = y.unsqueeze(1) if y.dim() == 1 else y
    if y.dim() != 2 or y.shape[0] != K.shape[0]:
        raise ValueError(f"y of shape {tuple(y.shape)}: need (N,) or (N, k) with N = {K.shape[0]}")
    return y


def alignment(K: torch.Tensor, y: torch.Tensor) -> float:
    """Kernel–target alignment ``yᵀKy / (‖K‖_F ‖y‖²)`` (reconstruction §2); for (N, k) targets tr(YᵀKY)/(‖K‖_F ‖Y‖_F²).

    1 when K is a positive multiple of yyᵀ; NaN when K or y is zero.
    """
    Y = _targets(K, y)
    return float((Y * (K @ Y)).sum() / (torch.linalg.matrix_norm(K) * Y.square().sum()))


def centered_alignment(K: torch.Tensor, y: torch.Tensor) -> float:
    """Alignment of the centred kernel ``HKH`` with the centred targets ``y − ȳ``, H = I − 11ᵀ/N."""
    Y = _targets(K, y)
    centred = K - K.mean(dim=0, keepdim=True) - K.mean(dim=1, keepdim=True) + K.mean()
    return alignment(centred, Y - Y.mean(dim=0))


def restricted_alignment(K: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, centered: bool = False) -> float:
    """Alignment of K and y restricted to the inputs selected by a boolean mask (N,) (a region's inputs)."""
    Y = _targets(K, y)
    mask = torch.as_tensor(mask, device=K.device)
    if mask.dtype != torch.bool or mask.shape != (K.shape[0],):
        raise ValueError(f"mask: need a boolean tensor of shape ({K.shape[0]},), got {mask.dtype} {tuple(mask.shape)}")
    sub_K, sub_Y = K[mask][:, mask], Y[mask]
    return centered_alignment(sub_K, sub_Y) if centered else alignment(sub_K, sub_Y)
