"""Unit hyperplanes against an odt tree's node hyperplanes (C5 on odt), against independent loops."""
import math

import numpy as np
import pytest
import torch

from dlgn_lib import data, models, nodes


def test_units_on_node_normals_are_fully_aligned_either_sign():
    node_normals = np.eye(4)[:3]
    normals = np.array([[2.0, 0, 0, 0], [0, -0.5, 0, 0], [0, 0, 0, 1.0]])
    assert nodes.best_node_cos(normals, node_normals).tolist() == [1.0, 1.0, 0.0]
    assert nodes.node_alignment(normals, node_normals, 0.9) == {"share": pytest.approx(2 / 3), "mean": pytest.approx(2 / 3)}


def test_best_node_cos_by_a_double_loop():
    rng = np.random.default_rng(3)
    normals, node_normals = rng.standard_normal((7, 20)), rng.standard_normal((15, 20))
    want = [max(abs(u @ w) / (math.sqrt(u @ u) * math.sqrt(w @ w)) for w in node_normals) for u in normals]
    assert nodes.best_node_cos(normals, node_normals) == pytest.approx(want, rel=1e-12)


def test_random_baseline_against_a_fresh_monte_carlo():
    """Random directions in d = 20 against 15 random node normals: about 0.45 on average, never 0.9."""
    _, node_normals, _ = data.odt_group_draw(20, 4, 10)
    base = nodes.random_baseline(20, node_normals, 0.9, n_draws=400, seed=1)
    rng = np.random.default_rng(99)
    fresh = [nodes.best_node_cos(rng.standard_normal((20, 20)), node_normals).mean() for _ in range(400)]
    assert base["mean"] == pytest.approx(np.mean(fresh), abs=0.01)
    assert 0.35 < base["mean"] < 0.55 and base["share"] < 0.001


def test_layer_table_of_a_dlgn_uses_its_effective_hyperplanes():
    torch.manual_seed(0)
    model = models.DLGN(5, (4, 3)).double()
    node_normals = np.random.default_rng(0).standard_normal((3, 5))
    table = nodes.layer_table(model, node_normals, 0.9, model="dlgn")
    assert table["layer"].tolist() == [1, 2] and table["units"].tolist() == [4, 3]
    for layer, (V, _) in enumerate(model.effective_hyperplanes()):
        want = nodes.node_alignment(V.detach().numpy(), node_normals, 0.9)
        assert table["share"][layer] == want["share"] and table["mean"][layer] == pytest.approx(want["mean"])


def test_relu_layers_beyond_the_first_use_local_hyperplanes_at_the_points():
    torch.manual_seed(1)
    model = models.ReLUNet(4, (3, 2)).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    first_only = nodes.normals_per_layer(model)
    assert len(first_only) == 1 and first_only[0].shape == (3, 4)
    layers = nodes.normals_per_layer(model, x)
    assert [a.shape for a in layers] == [(3, 4), (12, 4)]
    # Local hyperplane of layer-2 unit j at point n = gradient of its pre-activation at x_n.
    n, j = 4, 1
    xn = x[n:n + 1].clone().requires_grad_(True)
    z2 = model.gate_preactivations(xn)[1][0, j]
    (grad,) = torch.autograd.grad(z2, xn)
    assert layers[1][n * 2 + j] == pytest.approx(grad[0].numpy(), rel=1e-10)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="threshold"):
        nodes.node_alignment(np.eye(2), np.eye(2), 1.5)
    with pytest.raises(ValueError, match="d = 3"):
        nodes.best_node_cos(np.eye(2), np.eye(3))
