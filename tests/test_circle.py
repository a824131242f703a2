"""Circle-data analysis (claims C5, C7) against hand-computed cases and independent computations."""
import itertools
import math

import numpy as np
import pytest
import torch

from dlgn_lib import circle, data, models, paths

TWO_PI = 2.0 * math.pi


def arc_dlgn(arcs_per_layer, values=None, head=None):
    """A float64 DLGN-SF whose layer ℓ, unit i opens its gate on a chosen arc (centre, half-width).

    A unit with normal (cos φ, sin φ) and bias −cos h is on where cos(θ − φ) ≥ cos h: the arc of
    half-width h around φ. Value weights default to ones; ``values`` sets u^1, ``head`` U^{L+1}.
    """
    widths = tuple(len(layer) for layer in arcs_per_layer)
    model = models.DLGN(2, widths, gate_bias=True, shallow=True, convention="he").double()   # u^1 set directly
    with torch.no_grad():
        for layer, arcs in zip(model.gating, arcs_per_layer):
            for i, (centre, half) in enumerate(arcs):
                layer.weight[i] = torch.tensor([math.cos(centre), math.sin(centre)], dtype=torch.float64)
                layer.bias[i] = -math.cos(half)
        model.value_first.fill_(1.0)
        for value_layer in model.value_layers:
            value_layer.weight.fill_(1.0)
        model.head.weight.fill_(1.0)
        if values is not None:
            model.value_first.copy_(torch.tensor(values, dtype=torch.float64))
        if head is not None:
            model.head.weight.copy_(torch.tensor(head, dtype=torch.float64).reshape(1, -1))
    return model


def random_arc_dlgn(widths=(3, 2, 2), seed=0):
    """``arc_dlgn`` with random arcs (half-widths 0.4 … 2.6, so that many paths are active) and
    random value weights."""
    rng = np.random.default_rng(seed)
    model = arc_dlgn([[(rng.uniform(0, TWO_PI), rng.uniform(0.4, 2.6)) for _ in range(m)] for m in widths])
    with torch.no_grad():
        for p in [model.value_first, *model.value_layers.parameters(), model.head.weight]:
            p.copy_(torch.from_numpy(rng.normal(size=tuple(p.shape))))
    return model


def random_dlgn(widths=(3, 2, 2), seed=0):
    """A float64 DLGN with deep linear gating and small random gate biases."""
    torch.manual_seed(seed)
    model = models.DLGN(2, widths, gate_bias=True, convention="he").double()
    with torch.no_grad():
        for layer in model.gating:
            layer.bias.normal_(std=0.3)
    return model


# --------------------------------------------------------------------------- angles and distances

def test_angular_distance_and_nearest_mark_by_brute_force():
    rng = np.random.default_rng(0)
    a, marks = rng.uniform(-10, 10, 50), rng.uniform(0, TWO_PI, 5)
    brute = [min(abs(x - m + TWO_PI * k) for m in marks for k in range(-3, 4)) for x in a]
    assert np.allclose(circle.nearest_mark_distance(a, marks), brute, atol=1e-12)
    assert circle.angular_distance(0.1, TWO_PI - 0.1) == pytest.approx(0.2)
    assert np.isnan(circle.nearest_mark_distance([np.nan], marks)[0])


def test_arcs_pieces_and_membership():
    assert circle.pieces_between((5.3, 0.6, 1.9)) == [(0.6, 1.9), (1.9, 5.3), (5.3, 0.6)]
    assert circle.ccw_length((5.3, 0.6)) == pytest.approx(TWO_PI - 4.7)
    assert circle.in_arc([6.0, 0.3, 0.6, 1.0, 5.3], (5.3, 0.6)).tolist() == [True, True, True, False, True]
    with pytest.raises(ValueError, match="arc"):
        circle.ccw_length((1.0, 1.0))
    with pytest.raises(ValueError, match="marks"):
        circle.pieces_between((1.0,))


def test_boundaries_on_the_marks_have_distance_zero_and_weights_count_per_neuron():
    marks = (0.6, 1.9, 3.4, 5.3)
    on_marks = [np.array([[0.6, 3.4], [1.9, 5.3]])]
    assert circle.mean_boundary_distance(on_marks, marks) == 0.0
    # Two neurons: one at distance 0.1 (both ends), one at 0.3 (both ends); weights 3 and 1.
    layers = [np.array([[0.7, 1.8], [2.2, 5.0]])]
    assert circle.mean_boundary_distance(layers, marks) == pytest.approx(0.2)
    assert circle.mean_boundary_distance(layers, marks, [np.array([3.0, 1.0])]) == pytest.approx(0.15)
    # A line that misses the circle (NaN row) is left out.
    layers = [np.array([[0.7, 1.8], [np.nan, np.nan]])]
    assert circle.mean_boundary_distance(layers, marks) == pytest.approx(0.1)


@pytest.mark.parametrize("k", [2, 4, 7])
def test_uniform_distance_is_pi_over_2k_for_equally_spaced_marks(k):
    marks = [0.3 + TWO_PI * j / k for j in range(k)]
    assert circle.uniform_distance([m % TWO_PI for m in marks]) == pytest.approx(math.pi / (2 * k))


def test_uniform_distance_matches_an_average_over_a_fine_grid():
    marks = data.DEFAULT_STEPS
    theta = (np.arange(200_000) + 0.5) * TWO_PI / 200_000
    assert circle.uniform_distance(marks) == pytest.approx(circle.nearest_mark_distance(theta, marks).mean(), abs=1e-6)


def test_antipodal_floor_by_hand_and_on_a_fine_grid():
    assert circle.antipodal_distance_floor((0.5, 0.5 + math.pi)) == pytest.approx(0.0, abs=1e-12)
    # Marks 0 and 1: the best pair puts one end on a mark and the other at distance π − 1.
    assert circle.antipodal_distance_floor((0.0, 1.0)) == pytest.approx((math.pi - 1.0) / 2)
    marks = data.DEFAULT_STEPS
    phi = np.arange(100_000) * TWO_PI / 100_000
    brute = (circle.nearest_mark_distance(phi, marks) + circle.nearest_mark_distance(phi + math.pi, marks)).min() / 2
    assert circle.antipodal_distance_floor(marks) == pytest.approx(brute, abs=1e-4)


# --------------------------------------------------------------------------- paths on the circle

def test_neuron_importance_by_looping_over_paths():
    rng = np.random.default_rng(1)
    mags = rng.uniform(0, 1, (3, 4, 2))
    active = rng.uniform(0, 1, (3, 4, 2)) > 0.3
    got = circle.neuron_importance(mags, active)
    for layer, width in enumerate(mags.shape):
        for i in range(width):
            want = sum(mags[p] for p in itertools.product(*map(range, mags.shape)) if p[layer] == i and active[p])
            assert got[layer][i] == pytest.approx(want)


def test_path_magnitudes_are_path_values_by_the_spec_formula():
    model = random_dlgn((3, 2), seed=2)
    u1 = model.value_first.detach()
    U2 = model.value_layers[0].weight.detach()
    U3 = model.head.weight.detach()
    got = circle.path_magnitudes(model)
    for i, j in itertools.product(range(3), range(2)):
        assert got[i, j] == pytest.approx(abs(float(u1[i] * U2[j, i] * U3[0, j])), rel=1e-12)


@pytest.mark.parametrize("make", [random_dlgn, random_arc_dlgn], ids=["deep", "shallow"])
@pytest.mark.parametrize("seed", [0, 1])
def test_cell_lengths_match_the_exact_path_arcs(make, seed):
    model = make((3, 3, 2), seed=seed)
    cells = circle.circle_cells(model, marks=(0.6, 1.9))
    lengths = cells.path_lengths()
    assert cells.lengths.sum() == pytest.approx(TWO_PI)
    assert (lengths > 0.05).sum() >= 3  # a case with several non-empty regions
    for path in itertools.product(*map(range, model.widths)):
        assert lengths[path] == pytest.approx(paths.arc_length(paths.path_arc(model, path)), abs=1e-9)


def test_share_inside_pieces_by_hand():
    # Marks at the quarter angles. Neuron 0: arc 0.5 ± 0.2 (inside piece 1); neuron 1: π/2 ± 0.3
    # (straddles a discontinuity: outside); neuron 2: 2.0 ± 0.1 (inside piece 2). |g| = 1, 2, 3.
    marks = (0.0, math.pi / 2, math.pi, 1.5 * math.pi)
    model = arc_dlgn([[(0.5, 0.2), (math.pi / 2, 0.3), (2.0, 0.1)]], values=[1.0, -2.0, 3.0])
    cells = circle.circle_cells(model, marks)
    mags = circle.path_magnitudes(model)
    assert circle.inside_pieces(cells, circle.pieces_between(marks)).tolist() == [True, False, True]
    assert circle.share_inside_pieces(cells, mags, circle.pieces_between(marks)) == pytest.approx(4 / 6)
    # Only piece 2 counts as smooth: neuron 2 alone is inside.
    assert circle.share_inside_pieces(cells, mags, [(math.pi / 2, math.pi)]) == pytest.approx(3 / 6)


def test_rotated_share_of_single_arcs_is_sum_of_piece_slack():
    # An arc of length ℓ fits inside a piece of length P for a measure max(0, P − ℓ) of rotations.
    marks = (0.6, 1.9, 3.4, 5.3)
    pieces = circle.pieces_between(marks)
    model = arc_dlgn([[(1.0, 0.4), (4.0, 0.7)]], values=[1.0, 3.0])
    want = [sum(max(0.0, circle.ccw_length(p) - ell) for p in pieces) / TWO_PI for ell in (0.8, 1.4)]
    cells = circle.circle_cells(model, marks)
    got = circle.rotated_share_inside_pieces(cells, circle.path_magnitudes(model), pieces)
    assert got == pytest.approx((1 * want[0] + 3 * want[1]) / 4)


def test_rotated_share_of_a_two_piece_region_by_hand():
    # Arcs (0, 4) and (3, 7 − 2π) intersect in [3, 4] ∪ [0, 7 − 2π]: two gaps of 2.283.. each. It fits
    # the piece (0, 5) when that piece's complement (length 2π − 5) lies in a gap: 2 × (g − (2π − 5)).
    model = arc_dlgn([[(2.0, 2.0)], [(5.0, 2.0)]])
    cells = circle.circle_cells(model, marks=(0.0, 5.0))
    assert cells.path_lengths()[0, 0] == pytest.approx(1.0 + 7.0 - TWO_PI)
    gap = 3.0 - (7.0 - TWO_PI)
    want = 2 * (gap - (TWO_PI - 5.0)) / TWO_PI
    pieces = circle.pieces_between((0.0, 5.0))
    assert circle.share_inside_pieces(cells, circle.path_magnitudes(model), pieces) == 1.0
    assert circle.rotated_share_inside_pieces(cells, circle.path_magnitudes(model), pieces) == pytest.approx(want)


def test_rotated_share_matches_an_average_over_rotated_targets():
    # Rotating every region by s is rotating the pieces by −s: average the exact share over many s.
    model = random_arc_dlgn((3, 2, 2), seed=4)
    marks = np.array(data.DEFAULT_STEPS)
    mags = circle.path_magnitudes(model)
    # Midpoint rule over 1,000 shifts: each jump of the integrand costs at most 1/1,000.
    shifts = (np.arange(1000) + 0.5) * TWO_PI / 1000
    brute = np.mean([circle.share_inside_pieces(circle.circle_cells(model, np.mod(marks - s, TWO_PI)), mags,
                                                circle.pieces_between(np.mod(marks - s, TWO_PI)))
                     for s in shifts])
    got = circle.rotated_share_inside_pieces(circle.circle_cells(model, marks), mags, circle.pieces_between(marks))
    assert got == pytest.approx(brute, abs=3e-3)


def test_boundaries_and_path_mass_per_arc_by_hand():
    # Two units: arcs 1.0 ± 0.5 and 4.0 ± 0.3, path values 2 and −1.
    model = arc_dlgn([[(1.0, 0.5), (4.0, 0.3)]], values=[2.0, -1.0])
    arcs = {"a": (0.0, 1.2), "b": (3.0, 5.0)}
    boundaries = paths.region_boundary_angles(model)
    assert circle.boundaries_per_arc(boundaries, arcs) == {"a": 1, "b": 2}
    cells = circle.circle_cells(model, marks=[0.0, 1.2, 3.0, 5.0])
    mags = circle.path_magnitudes(model)
    assert circle.path_mass_density(cells, mags, arcs["a"]) == pytest.approx(2.0 * 0.7 / 1.2)
    assert circle.path_mass_density(cells, mags, arcs["b"]) == pytest.approx(1.0 * 0.6 / 2.0)


def test_metrics_of_a_net_whose_boundaries_sit_on_the_discontinuities():
    # Marks 0.5 and 0.5 + π; two bias-free units whose half-circles are exactly the two pieces.
    marks = (0.5, 0.5 + math.pi)
    dataset = data.circle("steps", n_train=64, n_val=8, n_test=8, discontinuities=marks)
    model = models.DLGN(2, (2,)).double()
    with torch.no_grad():
        for i, centre in enumerate((0.5 + math.pi / 2, 0.5 + 1.5 * math.pi)):
            model.gating[0].weight[i] = torch.tensor([math.cos(centre), math.sin(centre)], dtype=torch.float64)
    row = circle.smooth_region_metrics(model, dataset)
    assert row["distance"] == pytest.approx(0.0, abs=1e-12)
    assert row["weighted distance"] == pytest.approx(0.0, abs=1e-12)
    assert row["share inside"] == 1.0
    assert row["rotated share"] == pytest.approx(0.0, abs=1e-12)  # half-circles fit a half-circle piece once
    assert row["uniform distance"] == pytest.approx(math.pi / 4)


# --------------------------------------------------------------------------- fit, breakpoints, kernels

def test_arc_losses_match_masked_losses():
    dataset = data.circle("mixture", n_train=128, n_val=8, n_test=8)
    torch.manual_seed(0)
    model = models.DLGN(2, (4, 3))
    theta = dataset.meta["theta_train"].numpy()
    got = circle.arc_losses(model, theta, dataset.y_train, dataset.meta["arcs"], "regression")
    out = model(dataset.x_train)[:, 0].detach().double()
    for name, (a, b) in dataset.meta["arcs"].items():
        mask = [((t - a) % TWO_PI) <= ((b - a) % TWO_PI) for t in theta]
        errors = [(float(o) - float(y)) ** 2 for o, y, m in zip(out, dataset.y_train, mask) if m]
        assert got[name] == pytest.approx(sum(errors) / len(errors), rel=1e-5)


def test_pattern_breakpoints_sit_next_to_the_boundaries():
    model = arc_dlgn([[(1.0, 0.5), (4.0, 0.3)]])
    theta = np.arange(720) * TWO_PI / 720
    points = circle.pattern_breakpoints(model, theta)
    boundaries = np.array([0.5, 1.5, 3.7, 4.3])
    assert len(points) == 4
    assert circle.angular_distance(np.sort(points), boundaries).max() <= 0.5 * TWO_PI / 720 + 1e-12
    shares = circle.breakpoint_shares(points, {"low": (0.0, 2.0), "high": (3.0, 5.0)})
    assert shares == {"low": 0.5, "high": 0.5}
    # A breakpoint between the last and the first grid angle counts: a unit switching at θ = 0.
    wrap = arc_dlgn([[(math.pi / 2, math.pi / 2)]])
    assert len(circle.pattern_breakpoints(wrap, theta + 0.001)) == 2


def test_kernel_alignments_match_explicit_path_features():
    model = random_arc_dlgn((4, 3), seed=5)
    theta = np.linspace(0, TWO_PI, 40, endpoint=False)
    y = torch.from_numpy(np.sin(3 * theta))
    arcs = {"first": (0.0, 2.0), "second": (3.0, 6.0)}
    got = circle.kernel_alignments(model, theta, y, arcs)
    x = circle.points(theta, model)
    phi = paths.path_gates(model, x).reshape(len(theta), -1).double().numpy()  # path features
    K = phi @ phi.T
    yv = y.numpy()

    def align(K, v):
        return float(v @ K @ v / (np.linalg.norm(K) * (v @ v)))

    def centred(K, v):
        H = np.eye(len(v)) - 1.0 / len(v)
        return align(H @ K @ H, v - v.mean())

    assert got["alignment"] == pytest.approx(align(K, yv), rel=1e-9)
    assert got["centred"] == pytest.approx(centred(K, yv), rel=1e-9)
    for name, arc in arcs.items():
        m = circle.in_arc(theta, arc)
        assert got[f"{name} alignment"] == pytest.approx(align(K[np.ix_(m, m)], yv[m]), rel=1e-9)
        assert got[f"{name} centred"] == pytest.approx(centred(K[np.ix_(m, m)], yv[m]), rel=1e-9)


# --------------------------------------------------------------------------- over epochs

def test_crossing_epochs_by_hand():
    epochs = [0, 10, 20, 40]
    loss = [1.0, 0.5, 0.2, 0.05]
    assert circle.crossing_epoch(epochs, loss, 0.35) == pytest.approx(15.0)
    assert circle.epochs_to_fraction_of_initial(epochs, loss, 0.1) == pytest.approx(20 + 20 * (0.1 / 0.15))
    assert circle.epochs_to_fraction_of_initial(epochs, loss, 0.01) == math.inf
    assert circle.crossing_epoch(epochs, loss, 2.0) == 0.0
    rise = [0.1, 0.2, 0.5, 0.3]  # net change 0.2: half of it (0.2) is first reached at epoch 10
    assert circle.epochs_to_fraction_of_change(epochs, rise, 0.5) == pytest.approx(10.0)
    assert math.isnan(circle.epochs_to_fraction_of_change(epochs, [1.0, 0.0, 2.0, 1.0], 0.5))  # no net change
    assert circle.crossing_epoch(epochs, rise, 0.35, "up") == pytest.approx(15.0)
    assert circle.epochs_to_fraction_of_rise(epochs, rise, 0.5) == pytest.approx(10.0)
    assert circle.epochs_to_fraction_of_rise(epochs, loss, 0.5) == math.inf  # a falling curve never rises
    with pytest.raises(ValueError, match="direction"):
        circle.crossing_epoch(epochs, rise, 0.3, "sideways")


def test_time_ratio_handles_never_reached():
    assert circle.time_ratio(10.0, 40.0) == 0.25
    assert circle.time_ratio(10.0, math.inf) == 0.0
    assert circle.time_ratio(math.inf, 10.0) == math.inf
    assert math.isnan(circle.time_ratio(math.inf, math.inf))
    assert math.isnan(circle.time_ratio(math.nan, 3.0))


def test_target_arcs_of_the_circle_targets():
    steps = data.circle("steps", n_train=8, n_val=8, n_test=8)
    assert list(circle.target_arcs(steps).values()) == circle.pieces_between(data.DEFAULT_STEPS)
    mixture = data.circle("mixture", n_train=8, n_val=8, n_test=8)
    assert circle.target_arcs(mixture) == {"smooth": (0.5, 3.7), "rough": (3.7, 0.5)}
    with pytest.raises(ValueError, match="steps"):
        circle.target_arcs(data.circle("ramp", n_train=8, n_val=8, n_test=8))


# --------------------------------------------------------------------------- purity and tolerance

def test_purity_of_regions_by_hand():
    # Marks at the quarter angles. Neuron 0: 0.5 ± 0.2, inside piece 1 (purity 1); neuron 1:
    # π/2 ± 0.3, half in each piece (1/2); neuron 2: π/2 + 0.1 ± 0.3, 0.4 of 0.6 in piece 2 (2/3).
    marks = (0.0, math.pi / 2, math.pi, 1.5 * math.pi)
    pieces = circle.pieces_between(marks)
    model = arc_dlgn([[(0.5, 0.2), (math.pi / 2, 0.3), (math.pi / 2 + 0.1, 0.3)]], values=[1.0, -2.0, 3.0])
    cells = circle.circle_cells(model, marks)
    mags = circle.path_magnitudes(model)
    want = (1 * 1.0 + 2 * 0.5 + 3 * (0.4 / 0.6)) / 6
    assert circle.region_purity(cells, mags, pieces) == pytest.approx(want)
    # The marks need not be cut points: the same cells without marks give the same purity.
    assert circle.region_purity(circle.circle_cells(model), mags, pieces) == pytest.approx(want)


def test_a_region_exactly_inside_a_piece_has_purity_one_and_counts_inside():
    model = arc_dlgn([[(1.0, 0.5)]])
    cells, mags = circle.circle_cells(model), circle.path_magnitudes(model)
    pieces = [(0.5, 1.5), (1.5, 0.5)]   # the region is exactly the first piece
    assert circle.region_purity(cells, mags, pieces) == pytest.approx(1.0)
    assert circle.tolerant_share_inside(cells, mags, pieces, tolerance=0.0) == 1.0


@pytest.mark.parametrize("overhang,tolerance,inside", [(0.01, 0.02, True), (0.03, 0.02, False),
                                                       (0.01, 0.0, False)])
def test_an_overhang_below_the_tolerance_counts_as_inside(overhang, tolerance, inside):
    # Region [1.0, 1.5 + overhang] against pieces split at 1.5.
    half = (0.5 + overhang) / 2
    model = arc_dlgn([[(1.0 + half, half)]])
    cells, mags = circle.circle_cells(model), circle.path_magnitudes(model)
    pieces = circle.pieces_between((0.2, 1.5, 4.0))
    assert circle.tolerant_share_inside(cells, mags, pieces, tolerance) == (1.0 if inside else 0.0)
    assert circle.region_purity(cells, mags, pieces) == pytest.approx(0.5 / (0.5 + overhang))


def test_tolerance_zero_is_the_exact_share_and_the_rotation_grid_matches_the_exact_baseline():
    model = random_arc_dlgn((3, 2, 2), seed=4)
    marks = np.array(data.DEFAULT_STEPS)
    pieces = circle.pieces_between(marks)
    cells, mags = circle.circle_cells(model, marks), circle.path_magnitudes(model)
    assert circle.tolerant_share_inside(cells, mags, pieces, 0.0) == pytest.approx(
        circle.share_inside_pieces(cells, mags, pieces))
    # A second method: the exact measure of rotations (gap arithmetic) against a grid of 20,000.
    grid = circle.rotation_baselines(cells, mags, pieces, tolerance=0.0, n_rotations=20_000)
    assert grid["share inside"] == pytest.approx(circle.rotated_share_inside_pieces(cells, mags, pieces), abs=2e-3)


def test_purity_baseline_of_one_arc_by_numerical_integration():
    # One region of length ℓ = 1 against two pieces (π, π): its purity under rotation s is
    # max(cover)/ℓ; average it over a fine midpoint grid by direct interval arithmetic.
    model = arc_dlgn([[(2.0, 0.5)]])
    cells, mags = circle.circle_cells(model), circle.path_magnitudes(model)
    pieces = [(0.0, math.pi), (math.pi, 0.0)]
    shifts = (np.arange(4000) + 0.5) * TWO_PI / 4000
    def overlap(lo, hi, a, b):
        return max(0.0, min(hi, b) - max(lo, a))
    values = []
    for s in shifts:   # turn the region instead of the pieces (the same thing)
        lo = (1.5 - s) % TWO_PI
        parts = [(lo, min(lo + 1.0, TWO_PI))] + ([(0.0, lo + 1.0 - TWO_PI)] if lo + 1.0 > TWO_PI else [])
        first = sum(overlap(a, b, 0.0, math.pi) for a, b in parts)
        values.append(max(first, 1.0 - first))
    got = circle.rotation_baselines(cells, mags, pieces, n_rotations=4000)["purity"]
    assert got == pytest.approx(np.mean(values), abs=1e-3)
    assert circle.region_purity(cells, mags, pieces) == 1.0


def test_bad_tolerance_and_rotation_count_are_named():
    model = arc_dlgn([[(1.0, 0.5)]])
    cells, mags = circle.circle_cells(model), circle.path_magnitudes(model)
    with pytest.raises(ValueError, match="tolerance"):
        circle.tolerant_share_inside(cells, mags, [(0.0, 1.0)], tolerance=-0.1)
    with pytest.raises(ValueError, match="n_rotations"):
        circle.rotation_baselines(cells, mags, [(0.0, 1.0)], n_rotations=0)


@pytest.mark.parametrize("values,want", [
    ([0.0, 0.1, 0.2, 0.3, 0.4], 20.0),          # steady rise: half the rise first held at 0.2
    ([0.0, 0.3, -0.1, 0.25, 0.4], 30.0),         # rises, falls back, then rises for good
    ([0.5, 0.2, 0.1, 0.3, 0.4], math.inf),       # ends below its start: never rose
    ([0.2, 0.2, 0.2, 0.2, 0.2], math.inf)])      # flat
def test_sustained_rise_epoch_is_directed(values, want):
    got = circle.sustained_rise_epoch([0, 10, 20, 30, 40], values, 0.5)
    assert got == want


def test_ratio_above_floor():
    assert circle.ratio_above_floor(0.3, 0.5, 0.1) == pytest.approx(0.5)
    assert math.isnan(circle.ratio_above_floor(0.3, 0.1, 0.1))


def test_soft_path_mass_by_a_loop_over_paths_and_hard_limit():
    model = random_arc_dlgn((3, 2, 2), seed=5)
    arcs = {"a": (0.3, 2.5), "b": (2.5, 0.3)}
    mags = circle.path_magnitudes(model)
    got = circle.soft_path_mass_density(model, arcs, n_grid=720)
    theta = (np.arange(720) + 0.5) * TWO_PI / 720
    x = circle.points(theta, model)
    gates = [g.detach().numpy() for g in model.gates(x, hard=False)]
    brute = np.zeros(len(theta))
    for i, j, k in itertools.product(*(range(m) for m in mags.shape)):
        brute += mags[i, j, k] * gates[0][:, i] * gates[1][:, j] * gates[2][:, k]
    for name, arc in arcs.items():
        assert got[name] == pytest.approx(brute[circle.in_arc(theta, arc)].mean(), rel=1e-10)
    # With very sharp gates the soft mass is the exact (cell) hard mass, up to the grid.
    model.beta = 1e6
    cells = circle.circle_cells(model, [0.3, 2.5])
    sharp = circle.soft_path_mass_density(model, arcs, n_grid=20_000)
    for name, arc in arcs.items():
        assert sharp[name] == pytest.approx(circle.path_mass_density(cells, mags, arc), rel=2e-3)


def test_region_metrics_add_the_second_reading():
    dataset = data.circle("steps", n_train=64, n_val=8, n_test=8)
    model = random_dlgn((4, 3), seed=2)
    row = circle.region_metrics(model, dataset, n_rotations=90)
    pieces = list(circle.target_arcs(dataset).values())
    cells = circle.circle_cells(model, dataset.meta["discontinuities"])
    mags = circle.path_magnitudes(model)
    assert row["purity"] == pytest.approx(circle.region_purity(cells, mags, pieces))
    assert row["tolerant share"] == pytest.approx(circle.tolerant_share_inside(cells, mags, pieces, math.pi / 64))
    assert row["tolerant share"] >= row["share inside"] - 1e-12
    assert {"rotated purity", "rotated tolerant share", "soft path mass piece 1"} <= set(row)


def test_run_effects_by_their_definitions():
    from dlgn_lib import config, runs
    steps = config.DataSpec.make("circle", target="steps", n_train=64, n_val=16, n_test=16)
    mixture = config.DataSpec.make("circle", target="mixture", n_train=64, n_val=16, n_test=16)
    for bias in (False, True):
        options = {"gate_bias": True} if bias else {}
        run = runs.train_group([config.RunConfig(steps, config.ModelSpec.make("dlgn", (4, 4), **options),
                                                 epochs=30, n_snapshots=3)])[0]
        got = circle.steps_effects(run, n_rotations=60)
        dataset = run.dataset()
        a, b = (circle.region_metrics(run.model_at(e).double(), dataset, True, 60) for e in (0, run.epochs[-1]))
        floor = 0.0 if bias else circle.antipodal_distance_floor(dataset.meta["discontinuities"])
        want = 1 - (b["weighted distance"] - floor) / (a["weighted distance"] - floor)
        assert got["boundary"] == pytest.approx(want)
        assert got["purity gain"] == pytest.approx((b["purity"] - b["rotated purity"]) - (a["purity"] - a["rotated purity"]))
    run = runs.train_group([config.RunConfig(mixture, config.ModelSpec.make("dlgn", (4, 4)), epochs=30, n_snapshots=6)])[0]
    got = circle.mixture_effects(run)
    table = circle.snapshot_table(run, circle._mixture_row)
    smooth = circle.epochs_to_fraction_of_initial(table["epoch"], table["loss smooth"], 0.1)
    rough = circle.epochs_to_fraction_of_initial(table["epoch"], table["loss rough"], 0.1)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log(np.float64(rough) / np.float64(smooth))
    assert (np.isnan(got["fit lead"]) and np.isnan(want)) or got["fit lead"] == pytest.approx(want)
