"""Gate switches on the circle and gate-vector clustering (claim C7) against exact geometry,
hand-computed cases and brute-force loops."""
import math

import numpy as np
import pytest
import torch

from dlgn_lib import clusters, compare, data, models, paths

TWO_PI = 2.0 * math.pi


def circular_gap(a, b):
    d = np.mod(np.asarray(a) - np.asarray(b), TWO_PI)
    return np.minimum(d, TWO_PI - d)


def line_crossings(v, c):
    """Angles where v·(cos θ, sin θ) + c = 0, from cos(θ − φ) = −c/‖v‖ (empty when the line misses)."""
    r = math.hypot(v[0], v[1])
    if r == 0 or abs(c) >= r:
        return []
    phi, half = math.atan2(v[1], v[0]), math.acos(-c / r)
    return [(phi - half) % TWO_PI, (phi + half) % TWO_PI]


def single_arc_model(centre, half):
    """A float64 one-neuron DLGN-SF whose gate is on for |θ − centre| ≤ half."""
    model = models.DLGN(2, (1,), gate_bias=True, shallow=True).double()
    with torch.no_grad():
        model.gating[0].weight.copy_(torch.tensor([[math.cos(centre), math.sin(centre)]], dtype=torch.float64))
        model.gating[0].bias.fill_(-math.cos(half))
    return model


def sphere(n, d, seed):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


# --------------------------------------------------------------------------- switch angles

@pytest.mark.parametrize("gate_bias", [False, True])
def test_dlgn_switch_angles_are_the_exact_boundary_angles(gate_bias):
    torch.manual_seed(3)
    model = models.DLGN(2, (5, 4, 3), gate_bias=gate_bias).double()
    if gate_bias:
        with torch.no_grad():
            for layer in model.gating:
                layer.bias.normal_(std=0.3)
    n = 5000
    found = compare.neuron_switch_angles(model, TWO_PI * np.arange(n) / n)
    for exact, layer in zip(paths.region_boundary_angles(model), found):
        for row, angles in zip(exact, layer):
            expected = np.sort(row[~np.isnan(row)])
            assert len(angles) == len(expected)
            assert np.all(circular_gap(angles, expected) <= 0.5 * TWO_PI / n + 1e-12)


def test_relu_switch_angles_match_piecewise_linear_geometry():
    """Layer 2 of a ReLU net is linear between layer-1 switches: its exact switches are the
    crossings of each piece's line that fall inside that piece."""
    torch.manual_seed(1)
    model = models.ReLUNet(2, (6, 4), convention="he").double()   # zero biases: switches on the circle
    with torch.no_grad():
        model.layers[0].bias.normal_(std=0.4)
        model.layers[1].bias.normal_(std=0.4)
    W1, b1 = (t.detach().numpy() for t in (model.layers[0].weight, model.layers[0].bias))
    W2, b2 = (t.detach().numpy() for t in (model.layers[1].weight, model.layers[1].bias))

    first = [line_crossings(W1[i], b1[i]) for i in range(len(b1))]
    cuts = np.sort(np.concatenate([a for a in first if a]))
    second = [[] for _ in b2]
    for a, b in zip(cuts, np.append(cuts[1:], cuts[0] + TWO_PI)):
        mid = 0.5 * (a + b)
        on = (W1 @ [math.cos(mid), math.sin(mid)] + b1 > 0).astype(float)
        A, c = W2 @ (on[:, None] * W1), W2 @ (on * b1) + b2  # z2 = A x + c on this piece
        for j in range(len(b2)):
            second[j] += [t for t in line_crossings(A[j], c[j]) if 0 < (t - a) % TWO_PI < b - a]

    n = 20000
    found = compare.neuron_switch_angles(model, TWO_PI * np.arange(n) / n)
    assert sum(len(s) for s in second) > len(b2)  # bent units: some switch more than twice or not at all
    for exact_layer, layer in zip([first, second], found):
        for exact, angles in zip(exact_layer, layer):
            assert len(angles) == len(exact)
            assert np.all(circular_gap(angles, np.sort(exact)) <= 0.5 * TWO_PI / n + 1e-12)


def test_switch_between_last_and_first_grid_angle_is_found():
    n = 100
    step = TWO_PI / n
    model = single_arc_model(0.0, step / 4)  # on at grid angle 0 only
    (layer,) = compare.neuron_switch_angles(model, TWO_PI * np.arange(n) / n)
    np.testing.assert_allclose(layer[0], [step / 2, TWO_PI - step / 2], atol=1e-12)


def test_switch_metrics_by_hand():
    dataset = data.circle("steps", n_train=16, n_val=4, n_test=4)  # discontinuities 0.6, 1.9, 3.4, 5.3
    model = single_arc_model(1.25, 0.6)  # boundaries at 0.65 and 1.85, each 0.05 from a jump
    row = compare.switch_metrics(model, dataset, n_grid=20000)
    assert row["switches"] == 2
    assert row["switch distance"] == pytest.approx(0.05, abs=TWO_PI / 20000)
    assert row["switch share piece 1"] == 1.0 and row["switch share piece 3"] == 0.0


@pytest.mark.parametrize("n_grid", [2, True, 100.0])
def test_switch_metrics_rejects_bad_grid(n_grid):
    dataset = data.circle("steps", n_train=16, n_val=4, n_test=4)
    with pytest.raises(ValueError, match="n_grid"):
        compare.switch_metrics(single_arc_model(1.0, 0.5), dataset, n_grid)


# --------------------------------------------------------------------------- gate vectors

def test_gate_threshold_matches_monte_carlo_on_the_sphere():
    tau = 0.9
    alpha = math.acos(tau)
    u = torch.zeros(20, dtype=torch.float64)
    v = torch.zeros(20, dtype=torch.float64)
    u[0], v[0], v[1] = 1.0, math.cos(alpha), math.sin(alpha)
    x = sphere(400_000, 20, seed=0)
    gu, gv = ((x @ w >= 0).double() for w in (u, v))
    gu, gv = gu - gu.mean(), gv - gv.mean()
    estimate = float(gu @ gv / (gu.norm() * gv.norm()))
    assert compare.gate_threshold(tau) == pytest.approx(estimate, abs=0.01)
    assert compare.gate_threshold(1.0) == 1.0
    assert compare.gate_threshold(math.cos(math.pi / 4)) == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("tau", [0.0, -0.5, 1.5])
def test_gate_threshold_rejects_values_outside_unit_interval(tau):
    with pytest.raises(ValueError, match="threshold"):
        compare.gate_threshold(tau)


def test_dlgn_gate_vectors_follow_the_hyperplane_angles_and_the_table_matches_brute_force():
    torch.manual_seed(0)
    model = models.DLGN(8, (6, 6)).double()
    with torch.no_grad():  # near-twins in layer 2: a copy and a sign flip of a row of W^2
        W = model.gating[1].weight
        W[1] = W[0] + 0.01 * W[2]
        W[3] = -W[2]
    x = sphere(100_000, 8, seed=1)
    vectors = compare.gate_vectors(model, x)
    for (V, _), rows in zip(paths.effective_hyperplanes(model), vectors):
        hyper = clusters.abs_cosine_matrix(V)
        expected = 1.0 - 2.0 * np.arccos(np.clip(hyper, 0.0, 1.0)) / math.pi
        np.testing.assert_allclose(clusters.abs_cosine_matrix(rows), expected, atol=0.01)

    tau = compare.gate_threshold(0.9)
    table = compare.gate_layer_table(model, x, tau, model="dlgn")
    for layer, rows in enumerate(vectors):
        m = len(rows)
        nearest = []
        for i in range(m):
            best = 0.0
            for j in range(m):
                if j != i:
                    best = max(best, abs(float(rows[i] @ rows[j])) / math.sqrt(float(rows[i] @ rows[i]) * float(rows[j] @ rows[j])))
            nearest.append(best)
        assert table.loc[layer, "score"] == pytest.approx(np.mean(np.array(nearest) >= tau), abs=1e-12)
    assert table.loc[1, "score"] >= 4 / 6  # the copy pair and the sign-flip pair
    assert list(table["constant"]) == [0, 0] and list(table["model"]) == ["dlgn", "dlgn"]


def test_gate_vectors_leave_out_dead_and_always_on_units():
    torch.manual_seed(2)
    model = models.ReLUNet(3, (5, 4), convention="he").double()
    with torch.no_grad():
        model.layers[0].weight[:2] *= 0.5 / model.layers[0].weight[:2].norm(dim=1, keepdim=True)
        model.layers[0].bias[0] = -1.0  # dead on the unit sphere (‖w‖ = 0.5)
        model.layers[0].bias[1] = 1.0   # always on
    x = sphere(2000, 3, seed=4)
    W1, b1, W2, b2 = (p.detach().numpy() for p in (*model.layers[0].parameters(), *model.layers[1].parameters()))
    z1 = x.numpy() @ W1.T + b1
    z2 = np.maximum(z1, 0) @ W2.T + b2
    for z, rows in zip((z1, z2), compare.gate_vectors(model, x)):
        g = (z > 0).astype(float).T
        varying = g[(g.min(axis=1) == 0) & (g.max(axis=1) == 1)]
        np.testing.assert_array_equal(rows, varying - varying.mean(axis=1, keepdims=True))
    table = compare.gate_layer_table(model, x, 0.7)
    assert table.loc[0, "constant"] == 2 and table.loc[0, "m"] == 3
    assert table.loc[1, "constant"] + table.loc[1, "m"] == 4


def test_gate_layer_table_has_no_score_for_a_layer_without_two_switching_units():
    model = models.ReLUNet(3, (3, 3)).double()
    with torch.no_grad():
        model.layers[0].bias.fill_(-10.0)  # every unit of layer 1 is dead; so layer 2 is constant too
        model.layers[1].bias.fill_(0.5)
    table = compare.gate_layer_table(model, sphere(100, 3, seed=0), 0.7, model="relu")
    assert list(table["layer"]) == [1, 2] and list(table["m"]) == [0, 0] and list(table["constant"]) == [3, 3]
    assert table[["score", "n_clusters", "cluster_share", "mean_abs_cos"]].isna().all().all()
    assert list(table.columns[:3]) == ["model", "layer", "m"]
