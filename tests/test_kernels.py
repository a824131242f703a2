"""Overlap kernels and alignment against explicit path features and double loops (reconstruction §2), in float64."""
import itertools
import math

import pytest
import torch

from dlgn_lib import kernels, models


def explicit_path_features(gates):
    """F[n, π] = Π_ℓ G^ℓ_{i_ℓ}(x_n), one column per enumerated path, by plain loops."""
    n = gates[0].shape[0]
    columns = []
    for path in itertools.product(*[range(g.shape[1]) for g in gates]):
        columns.append([math.prod(g[s, i].item() for g, i in zip(gates, path)) for s in range(n)])
    return torch.tensor(columns, dtype=torch.float64).T


def gated_model(kind, seed=0):
    torch.manual_seed(seed)
    if kind == "relu":
        model = models.ReLUNet(3, (4, 3, 3)).double()
        for layer in model.layers:
            torch.nn.init.normal_(layer.bias, std=0.5)
        return model
    model = models.DLGN(3, (4, 3, 3), gate_bias=True, shallow=(kind == "dlgn_sf"), beta=2.0).double()
    for layer in model.gating:
        torch.nn.init.normal_(layer.bias, std=0.5)
    return model


@pytest.mark.parametrize("kind, hard", [("dlgn", True), ("dlgn", False), ("dlgn_sf", True),
                                        ("dlgn_sf", False), ("relu", True)])
def test_overlap_kernel_is_the_gram_matrix_of_path_features(kind, hard):
    model = gated_model(kind)
    x, x2 = torch.randn(9, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    F, F2 = explicit_path_features(model.gates(x, hard=hard)), explicit_path_features(model.gates(x2, hard=hard))
    assert torch.allclose(kernels.model_overlap_kernel(model, x, hard=hard), F @ F.T, rtol=0, atol=1e-12)
    assert torch.allclose(kernels.model_overlap_kernel(model, x, x2, hard=hard), F @ F2.T, rtol=0, atol=1e-12)
    diag = kernels.kernel_diagonal(model.gates(x, hard=hard))
    assert torch.allclose(diag, (F * F).sum(1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("block_size", [1, 3, 7, 16, 64])
def test_blocked_kernel_equals_unblocked(block_size):
    torch.manual_seed(1)
    gates_a = [torch.rand(37, m, dtype=torch.float64) for m in (5, 8, 3)]
    gates_b = [torch.rand(23, m, dtype=torch.float64) for m in (5, 8, 3)]
    whole = kernels.overlap_kernel(gates_a, block_size=10_000)
    assert torch.allclose(kernels.overlap_kernel(gates_a, block_size=block_size), whole, rtol=1e-13, atol=0)
    cross = kernels.overlap_kernel(gates_a, gates_b, block_size=10_000)
    assert torch.allclose(kernels.overlap_kernel(gates_a, gates_b, block_size=block_size), cross, rtol=1e-13, atol=0)
    assert torch.allclose(cross, explicit_path_features(gates_a) @ explicit_path_features(gates_b).T, rtol=1e-12)


def test_boolean_gates_give_exact_float32_path_counts():
    torch.manual_seed(2)
    gates = [torch.rand(50, m) > 0.5 for m in (6, 5, 4)]
    K = kernels.overlap_kernel(gates, block_size=7)
    assert K.dtype == torch.float32
    F = explicit_path_features([g.double() for g in gates])
    assert torch.equal(K.double(), F @ F.T)  # integer counts, exact in float32
    assert torch.allclose(kernels.normalized_kernel(K, (6, 5, 4)).double(), F @ F.T / F.shape[1])


def test_cosine_and_neural_path_kernels_match_explicit_features():
    model = gated_model("dlgn", seed=3)
    x, x2 = torch.randn(8, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    F, F2 = explicit_path_features(model.gates(x, hard=False)), explicit_path_features(model.gates(x2, hard=False))
    K, K12 = kernels.model_overlap_kernel(model, x, hard=False), kernels.model_overlap_kernel(model, x, x2, hard=False)
    unit = lambda A: A / A.norm(dim=1, keepdim=True)
    assert torch.allclose(kernels.cosine_kernel(K), unit(F) @ unit(F).T, atol=1e-12)
    diag_a, diag_b = (kernels.kernel_diagonal(model.gates(v, hard=False)) for v in (x, x2))
    assert torch.allclose(kernels.cosine_kernel(K12, diag_a, diag_b), unit(F) @ unit(F2).T, atol=1e-12)
    # Value input "x": path features x_j f_π(x), one per (input dimension, path).
    phi = lambda v, G: torch.einsum("nd,np->ndp", v, G).reshape(len(v), -1)
    assert torch.allclose(kernels.neural_path_kernel(K12, x, x2), phi(x, F) @ phi(x2, F2).T, atol=1e-12)
    with pytest.raises(ValueError, match="diag_a"):
        kernels.cosine_kernel(K12)


def test_cosine_kernel_is_zero_for_inputs_without_active_paths():
    gates = [torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)]
    C = kernels.cosine_kernel(kernels.overlap_kernel(gates))
    assert torch.equal(C[1], torch.zeros(3, dtype=torch.float64)) and C[0, 2] == pytest.approx(1 / math.sqrt(2))


def test_overlap_kernel_rejects_mismatched_gates():
    a = [torch.ones(4, 3), torch.ones(4, 2)]
    with pytest.raises(ValueError, match="gates"):
        kernels.overlap_kernel(a, [torch.ones(5, 3)])
    with pytest.raises(ValueError, match="width"):
        kernels.overlap_kernel(a, [torch.ones(5, 3), torch.ones(5, 4)])
    with pytest.raises(ValueError, match="block_size"):
        kernels.overlap_kernel(a, block_size=0)


# --------------------------------------------------------------------------- alignment

def loop_alignment(K, y):
    """yᵀKy / (‖K‖_F ‖y‖²) with explicit double loops."""
    n = len(y)
    num = sum(y[i] * K[i][j] * y[j] for i in range(n) for j in range(n))
    fro = math.sqrt(sum(K[i][j] ** 2 for i in range(n) for j in range(n)))
    return num / (fro * sum(v * v for v in y))


def random_psd(n, seed):
    torch.manual_seed(seed)
    A = torch.randn(n, 4, dtype=torch.float64)
    return A @ A.T + 0.5


def test_alignment_matches_the_double_loop_formula():
    K = random_psd(12, 4)
    y = torch.randn(12, dtype=torch.float64)
    assert kernels.alignment(K, y) == pytest.approx(loop_alignment(K.tolist(), y.tolist()), abs=1e-13)
    Y = torch.randn(12, 3, dtype=torch.float64)  # k columns: the sum over columns, per formula
    num = sum(loop_alignment(K.tolist(), Y[:, c].tolist()) * Y[:, c].square().sum().item() for c in range(3))
    assert kernels.alignment(K, Y) == pytest.approx(num / Y.square().sum().item(), abs=1e-13)


def test_centered_alignment_uses_hkh_and_is_invariant_to_shifting_y():
    K = random_psd(10, 5)
    y = torch.randn(10, dtype=torch.float64)
    H = torch.eye(10, dtype=torch.float64) - torch.full((10, 10), 0.1, dtype=torch.float64)
    expected = loop_alignment((H @ K @ H).tolist(), (y - y.mean()).tolist())
    assert kernels.centered_alignment(K, y) == pytest.approx(expected, abs=1e-13)
    assert kernels.centered_alignment(K, y + 3.7) == pytest.approx(expected, abs=1e-12)
    assert kernels.alignment(K, y + 3.7) != pytest.approx(kernels.alignment(K, y), abs=1e-6)


def test_a_kernel_built_from_the_target_has_alignment_one():
    y = torch.sign(torch.randn(15, dtype=torch.float64))
    assert kernels.alignment(torch.outer(y, y), y) == pytest.approx(1.0, abs=1e-14)
    assert kernels.alignment(2.5 * torch.outer(y, y), y) == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("centered", [False, True])
def test_restricted_alignment_uses_only_the_masked_inputs(centered):
    K = random_psd(14, 6)
    y = torch.randn(14, dtype=torch.float64)
    mask = torch.rand(14, generator=torch.Generator().manual_seed(0)) > 0.4
    idx = [i for i in range(14) if mask[i]]
    sub_K = [[K[i, j].item() for j in idx] for i in idx]
    sub_y = [y[i].item() for i in idx]
    if centered:
        n = len(idx)
        H = torch.eye(n, dtype=torch.float64) - 1.0 / n
        sub_K = (H @ torch.tensor(sub_K, dtype=torch.float64) @ H).tolist()
        sub_y = [v - sum(sub_y) / n for v in sub_y]
    got = kernels.restricted_alignment(K, y, mask, centered=centered)
    assert got == pytest.approx(loop_alignment(sub_K, sub_y), abs=1e-13)
    with pytest.raises(ValueError, match="mask"):
        kernels.restricted_alignment(K, y, mask.int())
