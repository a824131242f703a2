"""Path analysis against independent computations (reconstruction §1 path form, §2; claims C1, C3), in float64."""
import itertools
import math

import numpy as np
import pytest
import torch

from dlgn_lib import models, paths


def dlgn(in_dim, widths, out_dim=1, seed=0, gate_bias=True, **options):
    """A float64 DLGN whose gate biases are non-zero (they start at zero)."""
    torch.manual_seed(seed)
    model = models.DLGN(in_dim, widths, out_dim, gate_bias=gate_bias, **options).double()
    if gate_bias:
        for layer in model.gating:
            torch.nn.init.normal_(layer.bias, std=0.5)
    return model


def scalar_path_value(model, path, x=None):
    """g_{π,k} (or g_{π,k}(x)) for one path from the reconstruction §1 formula, with Python scalars."""
    first, middle, head = model.value_weights()
    first, head = first.detach(), head.detach()
    v = first[path[0]].item() if model.value_input == "ones" else float(first[path[0]] @ x)
    for layer in range(1, len(path)):
        v *= middle[layer - 1][path[layer], path[layer - 1]].item()
    return [head[k, path[-1]].item() * v for k in range(head.shape[0])]


# --------------------------------------------------------------------------- path form (C1)

@pytest.mark.parametrize("value_input", ["ones", "x"])
@pytest.mark.parametrize("shallow", [False, True])
@pytest.mark.parametrize("hard", [False, True])
def test_path_sum_equals_the_forward_pass(value_input, shallow, hard):
    model = dlgn(3, (3, 2, 4), out_dim=2, value_input=value_input, shallow=shallow)
    x = torch.randn(40, 3, dtype=torch.float64)
    got = paths.path_sum(model, x, hard=hard)
    assert got.shape == (40, 2)
    assert (got - model(x, hard=hard)).abs().max().item() <= 1e-10


@pytest.mark.parametrize("model", [models.ReLUNet(3, (4, 3, 2), out_dim=2, bias=False),
                                   models.DeepLinearNet(3, (4, 3), out_dim=2)], ids=["relu", "dln"])
def test_path_sum_of_bias_free_relu_and_dln(model):
    model = model.double()
    x = torch.randn(30, 3, dtype=torch.float64)
    assert (paths.path_sum(model, x) - model(x)).abs().max().item() <= 1e-10


def test_path_sum_in_sample_chunks_matches_the_forward_pass():
    model = dlgn(2, (3, 3), value_input="x")
    x = torch.randn(25, 2, dtype=torch.float64)
    # max_entries = 40 paths-by-samples forces passes of 4 samples over 9 paths.
    assert (paths.path_sum(model, x, max_entries=40) - model(x, hard=True)).abs().max().item() <= 1e-10


@pytest.mark.parametrize("value_input", ["ones", "x"])
def test_path_values_and_gates_match_the_formulas_path_by_path(value_input):
    model = dlgn(3, (2, 3, 2), out_dim=2, value_input=value_input)
    x = torch.randn(5, 3, dtype=torch.float64)
    values, gates = paths.path_values(model), paths.path_gates(model, x, hard=False)
    layer_gates = model.gates(x, hard=False)
    for path in itertools.product(*map(range, model.widths)):
        for s in range(5):
            got = values[path] if value_input == "ones" else values[path] @ x[s]
            assert np.allclose(got.tolist(), scalar_path_value(model, path, x[s]), atol=1e-13)
            f = math.prod(layer_gates[layer][s, unit].item() for layer, unit in enumerate(path))
            assert abs(gates[(s, *path)].item() - f) <= 1e-13


def test_top_paths_are_the_largest_by_brute_force():
    model = dlgn(2, (3, 4, 2), out_dim=2)
    x = torch.randn(60, 2, dtype=torch.float64)
    f = paths.path_gates(model, x).mean(0)
    all_paths = list(itertools.product(*map(range, model.widths)))
    by_value = sorted(all_paths, key=lambda p: -np.linalg.norm(scalar_path_value(model, p)))
    by_use = sorted(all_paths, key=lambda p: -np.linalg.norm(scalar_path_value(model, p)) * f[p].item())
    assert [p for p, _ in paths.top_paths(model, 5)] == by_value[:5]
    top = paths.top_paths(model, 5, x)
    assert [p for p, _ in top] == by_use[:5]
    assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)


def test_top_paths_with_value_input_x_score_mean_contributions():
    model = dlgn(2, (3, 2), value_input="x")
    x = torch.randn(20, 2, dtype=torch.float64)
    gates = paths.path_gates(model, x)
    (path, score), = paths.top_paths(model, 1, x)
    expected = {p: np.mean([abs(scalar_path_value(model, p, x[s])[0]) * gates[(s, *p)].item() for s in range(20)])
                for p in itertools.product(*map(range, model.widths))}
    assert path == max(expected, key=expected.get)
    assert score == pytest.approx(expected[path], abs=1e-12)


@pytest.mark.parametrize("value_input", ["ones", "x"])
def test_top_paths_and_gate_means_in_chunks_equal_one_pass(value_input):
    """A path-gate tensor of 500 inputs × 24 paths (× 2 outputs) is 24,000 entries; with
    max_entries=1,000 the inputs go in chunks of 41 (or 20), and the results must not change."""
    model = dlgn(2, (3, 4, 2), out_dim=2, value_input=value_input)
    x = torch.randn(500, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    one_pass = paths.path_gates(model, x).mean(0)
    assert paths.chunk_size(model, max_entries=1000) == 41 and paths.chunk_size(model, 2, 1000) == 20
    chunked = paths.path_gate_mean(model, x, max_entries=1000)
    assert torch.allclose(chunked, one_pass, rtol=0, atol=1e-14)
    full, small = paths.top_paths(model, 6, x), paths.top_paths(model, 6, x, max_entries=1000)
    assert [p for p, _ in full] == [p for p, _ in small]
    assert np.allclose([s for _, s in full], [s for _, s in small], rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="max_entries"):
        paths.path_gates(model, x, max_entries=1000)


def relu_with_biases(seed=1):
    torch.manual_seed(seed)
    model = models.ReLUNet(2, (6, 5, 4)).double()
    for layer in model.layers:
        torch.nn.init.normal_(layer.bias, std=0.5)
    return model


@pytest.mark.parametrize("make", [lambda: dlgn(2, (3, 4, 2)), lambda: dlgn(3, (5,)),
                                  lambda: dlgn(2, (2, 3, 2, 3), seed=5), relu_with_biases,
                                  lambda: models.DeepLinearNet(2, (3, 2)).double()],
                         ids=["dlgn", "one layer", "four layers", "relu", "dln"])
def test_hard_gate_means_are_the_path_gate_means_to_the_bit(make):
    """The hard branch contracts the layers' 0/1 gates instead of enumerating the paths: the counts
    are whole numbers, so they equal the enumerated ones exactly, in chunks or not, float32 or 64."""
    model = make()
    x = torch.randn(700, model.in_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    for xs in (x, x.float()):
        counts = paths.path_gates(model.to(xs.dtype), xs, hard=True).sum(0, dtype=torch.float64)
        want = (counts / len(xs)).to(xs.dtype)
        assert torch.equal(paths.path_gate_mean(model, xs, hard=True), want)
        assert torch.equal(paths.path_gate_mean(model, xs, hard=True, max_entries=100), want)
        assert want.sum() > 0
    model = model.double()
    soft = paths.path_gate_mean(model, x, hard=False)    # the soft branch enumerates, as before
    assert torch.allclose(soft, paths.path_gates(model, x, hard=False).mean(0), rtol=1e-14, atol=0)

def test_enumeration_refuses_big_nets_and_biased_relu():
    with pytest.raises(ValueError, match="max_entries"):
        paths.path_gates(dlgn(2, (5, 5, 4)), torch.zeros(20, 2, dtype=torch.float64), max_entries=1999)
    with pytest.raises(ValueError, match="max_entries"):
        paths.path_sum(dlgn(2, (5, 5, 4), value_input="x"), torch.zeros(3, 2, dtype=torch.float64), max_entries=199)
    with pytest.raises(ValueError, match="bias"):
        paths.path_values(models.ReLUNet(2, (3,), bias=True))
    with pytest.raises(ValueError, match="path"):
        paths.in_active_path_region(dlgn(2, (3, 3)), torch.zeros(1, 2, dtype=torch.float64), (0, 3))


# --------------------------------------------------------------------------- regions (C3)

@pytest.mark.parametrize("shallow", [False, True])
def test_half_space_membership_equals_the_hard_path_gate(shallow):
    model = dlgn(4, (5, 4, 3), shallow=shallow)
    x = torch.randn(500, 4, dtype=torch.float64)
    gates = paths.path_gates(model, x, hard=True)
    for path in itertools.product(*map(range, model.widths)):
        assert torch.equal(paths.in_active_path_region(model, x, path), gates[(slice(None), *path)] > 0)


@pytest.mark.parametrize("shallow", [False, True])
def test_half_space_gates_are_each_unit_s_half_space_test_and_the_hard_gates(shallow):
    model = dlgn(3, (5, 4, 3), shallow=shallow)
    x = torch.randn(400, 3, dtype=torch.float64)
    half = paths.half_space_gates(model, x)
    assert [h.shape for h in half] == [(400, m) for m in model.widths] and all(h.dtype == torch.bool for h in half)
    for layer, (h, (V, c)) in enumerate(zip(half, model.effective_hyperplanes())):
        for i in range(model.widths[layer]):
            assert torch.equal(h[:, i], (x @ V[i] + c[i]) >= 0)    # the path-by-path test's own product
    assert all(torch.equal(h, g > 0) for h, g in zip(half, model.gates(x, hard=True)))


def test_first_layer_of_relu_and_dln_gates_are_half_spaces():
    torch.manual_seed(1)
    relu = models.ReLUNet(3, (6,)).double()
    torch.nn.init.normal_(relu.layers[0].bias)
    x = torch.randn(200, 3, dtype=torch.float64)
    for i in range(6):
        assert torch.equal(paths.in_active_path_region(relu, x, (i,)), relu.gates(x)[0][:, i] > 0)
    assert paths.in_active_path_region(models.DeepLinearNet(3, (2, 2)).double(), x, (1, 0)).all()
    with pytest.raises(ValueError, match="local_hyperplanes"):
        paths.effective_hyperplanes(models.ReLUNet(3, (4, 4)))
    assert len(paths.effective_hyperplanes(models.ReLUNet(3, (4, 4)), n_layers=1)) == 1


def test_local_hyperplanes_of_relu_are_the_input_gradients():
    torch.manual_seed(2)
    relu = models.ReLUNet(3, (5, 4, 3)).double()
    for layer in relu.layers:
        torch.nn.init.normal_(layer.bias)
    x = torch.randn(6, 3, dtype=torch.float64)
    local = paths.local_hyperplanes(relu, x)
    for s in range(6):
        jacobians = torch.autograd.functional.jacobian(lambda v: tuple(relu.gate_preactivations(v[None])), x[s])
        for (A, b), J, z in zip(local, jacobians, relu.gate_preactivations(x[s:s + 1])):
            assert torch.allclose(A[s], J[0], atol=1e-12)
            assert torch.allclose(A[s] @ x[s] + b[s], z[0], atol=1e-12)
    # A DLGN neuron has one hyperplane for every input (claim C4).
    model = dlgn(3, (4, 2))
    for (A, b), (V, c) in zip(paths.local_hyperplanes(model, x), model.effective_hyperplanes()):
        assert torch.equal(A, V.expand(6, -1, -1)) and torch.equal(b, c.expand(6, -1))


def test_unit_hyperplanes_have_unit_rows_and_the_same_half_spaces():
    V, c = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    U, u = paths.unit_hyperplanes(V, c)
    x = torch.randn(100, 3, dtype=torch.float64)
    assert torch.allclose(U.norm(dim=1), torch.ones(7, dtype=torch.float64))
    assert torch.equal(x @ U.T + u >= 0, x @ V.T + c >= 0)


def uniform_in_box(n, box, seed):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(box[0], box[1], n), rng.uniform(box[2], box[3], n)])


@pytest.mark.parametrize("widths", [(6,), (4, 3), (3, 3, 2)])
def test_path_polygon_areas_match_monte_carlo_fractions(widths):
    box = (-1.5, 1.5, -1.0, 2.0)
    model = dlgn(2, widths, seed=3)
    n = 40_000
    gates = paths.path_gates(model, torch.from_numpy(uniform_in_box(n, box, seed=0)))
    regions = paths.path_regions_2d(model, box)
    box_area = paths.polygon_area(paths.box_polygon(box))
    for path in itertools.product(*map(range, widths)):
        frac = gates[(slice(None), *path)].mean().item()
        poly = paths.path_region_polygon(model, path, box)
        assert (path in regions) == (len(poly) > 0)
        area_frac = paths.polygon_area(poly) / box_area
        assert abs(area_frac - frac) <= 5 * math.sqrt(max(frac * (1 - frac), 1e-4) / n)
    assert paths.count_nonempty_regions(model, box) == len(regions) > 0


def test_gate_pattern_cells_tile_the_box_and_match_a_dense_grid():
    box = (-1.0, 1.0, -1.0, 1.0)
    model = dlgn(2, (4, 3), seed=4, convention="he")   # unit-scale hyperplanes: many cells in the box
    cells = paths.gate_pattern_cells_2d(model, box)
    assert sum(map(paths.polygon_area, cells.values())) == pytest.approx(4.0, abs=1e-10)
    h = 2.0 / 500
    ticks = np.linspace(-1 + h / 2, 1 - h / 2, 500)
    grid = torch.from_numpy(np.stack(np.meshgrid(ticks, ticks), axis=-1).reshape(-1, 2))
    patterns = torch.unique(torch.cat(model.gates(grid, hard=True), dim=1).int(), dim=0)
    seen = {tuple(row) for row in patterns.tolist()}
    assert seen <= set(cells)
    # Cells missed by the grid are slivers: too thin to hold a grid point.
    assert all(paths.polygon_area(cells[p]) < 20 * h for p in set(cells) - seen)
    assert paths.count_regions(model, grid) == len(seen) >= 10


def test_a_gate_that_is_on_everywhere_has_no_complement_cell():
    """A unit with zero weights and zero bias has η = 0 everywhere, so its gate 1(η ≥ 0) is always on:
    each cell has it on, and the cells still tile the box (once, not twice)."""
    box = (-1.0, 1.0, -1.0, 1.0)
    model = dlgn(2, (3, 2), seed=2)
    with torch.no_grad():
        model.gating[0].weight[1] = 0.0
        model.gating[0].bias[1] = 0.0
    cells = paths.gate_pattern_cells_2d(model, box)
    assert all(pattern[1] == 1 for pattern in cells)
    assert sum(map(paths.polygon_area, cells.values())) == pytest.approx(4.0, abs=1e-12)
    x = torch.from_numpy(uniform_in_box(2000, box, seed=1))
    assert {tuple(row) for row in torch.cat(model.gates(x, hard=True), dim=1).int().tolist()} <= set(cells)


def test_activation_region_ids_group_points_by_gate_pattern():
    torch.manual_seed(5)
    relu = models.ReLUNet(2, (5, 4)).double()
    for layer in relu.layers:
        torch.nn.init.normal_(layer.bias, std=0.5)
    x = torch.randn(300, 2, dtype=torch.float64)
    ids = paths.activation_regions_grid(relu, x)
    pattern = [tuple(r) for r in torch.cat(relu.gates(x), dim=1).tolist()]
    for i in range(0, 300, 7):
        for j in range(300):
            assert (ids[i] == ids[j]).item() == (pattern[i] == pattern[j])


# --------------------------------------------------------------------------- unit circle

def arc_mask(arcs, theta):
    return np.any([((theta - s) % (2 * np.pi) <= e - s) for s, e in arcs], axis=0) if arcs else np.zeros(len(theta), bool)


def check_arcs_against_gates(model, n=200_000, max_pieces=None):
    theta = (np.arange(n) + 0.5) * 2 * np.pi / n
    gates = paths.path_gates(model, torch.from_numpy(np.column_stack([np.cos(theta), np.sin(theta)])))
    for path in itertools.product(*map(range, model.widths)):
        arcs = paths.path_arc(model, path)
        assert max_pieces is None or len(arcs) <= max_pieces
        on = gates[(slice(None), *path)].numpy() > 0
        assert abs(paths.arc_length(arcs) / (2 * np.pi) - on.mean()) <= 2 * model.depth / n
        assert (arc_mask(arcs, theta) != on).sum() <= 2 * model.depth  # only at the end points


@pytest.mark.parametrize("gate_bias", [False, True])
def test_path_arcs_match_the_hard_path_gate_on_a_fine_circle_grid(gate_bias):
    # Semicircles intersect in at most one arc (which may wrap through angle 0).
    check_arcs_against_gates(dlgn(2, (4, 3, 3), seed=6, gate_bias=gate_bias), max_pieces=None if gate_bias else 1)


def test_biased_arcs_can_intersect_in_two_pieces():
    model = models.DLGN(2, (1, 1), gate_bias=True, shallow=True).double()
    with torch.no_grad():
        model.gating[0].weight.copy_(torch.tensor([[1.0, 0.0]]))
        model.gating[1].weight.copy_(torch.tensor([[-1.0, 0.0]]))
        model.gating[0].bias.fill_(0.5)
        model.gating[1].bias.fill_(0.5)
    arcs = paths.path_arc(model, (0, 0))
    assert len(arcs) == 2  # |cos θ| ≤ 1/2: around π/2 and 3π/2
    assert paths.arc_length(arcs) == pytest.approx(2 * np.pi / 3, abs=1e-12)
    check_arcs_against_gates(model)


def test_circle_arc_special_cases():
    assert paths.circle_arc([1.0, 0.0], 2.0) == [(0.0, 2 * np.pi)]
    assert paths.circle_arc([1.0, 0.0], -2.0) == []
    assert paths.circle_arc([0.0, 0.0], 0.1) == [(0.0, 2 * np.pi)]
    wrapping = paths.circle_arc([1.0, 0.0], 0.0)
    assert paths.intersect_arcs(wrapping, [(0.0, 2 * np.pi)]) == wrapping
    s, e = paths.half_circle_arc([0.0, 1.0])
    assert (s, e) == pytest.approx((0.0, np.pi), abs=1e-12)


def test_region_boundary_angles_lie_on_each_boundary_line():
    model = dlgn(2, (6, 4), seed=7)
    for angles, (V, c) in zip(paths.region_boundary_angles(model), model.effective_hyperplanes()):
        V, c = V.detach().numpy(), c.detach().numpy()
        misses = np.abs(c) > np.linalg.norm(V, axis=1)
        assert np.array_equal(np.isnan(angles).any(axis=1), misses)
        for column in angles.T:
            on_line = V[:, 0] * np.cos(column) + V[:, 1] * np.sin(column) + c
            assert np.all(np.abs(on_line[~misses]) < 1e-12)


def test_plane_geometry_rejects_bad_arguments():
    with pytest.raises(ValueError, match="in_dim"):
        paths.path_regions_2d(dlgn(3, (2,)))
    with pytest.raises(ValueError, match="box"):
        paths.box_polygon((1.0, -1.0, 0.0, 1.0))
