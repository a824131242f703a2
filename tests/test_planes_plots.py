"""Plots for 2-D inputs (notebooks 00, 02): figure smoke tests and the hand-built DLGN's maths."""
import itertools

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from dlgn_lib import config as C
from dlgn_lib import data, train
from dlgn_lib.plots import planes

ANGLES = (0.0, 90.0, 225.0)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def xor():
    return data.plane("xor", n=200, seed=0)


@pytest.fixture(scope="module")
def runs():
    spec = C.DataSpec.make("plane", name="moons", n=100, seed=0)
    kinds = [("dln", {}), ("relu", {}), ("dlgn", {"gate_bias": True})]
    return [train.train(C.RunConfig(spec, C.ModelSpec.make(k, (4, 3), **o), epochs=3, n_snapshots=3),
                        progress=False) for k, o in kinds]


def test_decision_functions_has_one_axes_per_run(runs):
    fig = planes.decision_functions(runs)
    assert isinstance(fig, plt.Figure) and len(fig.axes) == 3 + 1   # and one colour bar
    assert fig.axes[-1].get_ylabel() == "tanh ŷ(x)  (black line: ŷ = 0)"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["label −1", "label +1"]
    fig = planes.decision_functions(runs * 2, ncols=4, row_labels=["a", "b"], epoch=None)
    assert len(fig.axes) == 6 + 1  # the two unused cells of the 2 × 4 grid are removed
    with pytest.raises(ValueError, match="row_labels"):
        planes.decision_functions(runs, row_labels=["a", "b"])


def test_hyperplanes_over_function_panels_and_kind_check(runs):
    fig = planes.hyperplanes_over_function(runs[2], layers=(1, 2), epoch=3)
    assert len(fig.axes) == 2 + 1 and fig.axes[-1].get_ylabel().startswith("tanh ŷ(x)")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["label −1", "label +1", "gate hyperplane"]
    with pytest.raises(TypeError, match="DLGN"):
        planes.hyperplanes_over_function(runs[1])
    with pytest.raises(ValueError, match="layers"):
        planes.hyperplanes_over_function(runs[2], layers=(3,))


def brute_force_features(angles, depth, x):
    """Path gates by loops over paths: products of half-plane indicators (float64)."""
    normals = [np.array([np.cos(np.radians(a)), np.sin(np.radians(a))]) for a in angles]
    on = [(x @ n >= 0).astype(np.float64) for n in normals]
    return np.stack([np.prod([on[i] for i in path], axis=0)
                     for path in itertools.product(range(len(angles)), repeat=depth)], axis=1)


@pytest.mark.parametrize("depth", [1, 2])
def test_hand_dlgn_is_the_least_squares_path_sum(xor, depth):
    model = planes.hand_dlgn(ANGLES, depth, xor.x_train, xor.y_train)
    x = xor.x_train.double().numpy()
    features = brute_force_features(ANGLES, depth, x)
    coef, *_ = np.linalg.lstsq(features, xor.y_train.double().numpy(), rcond=None)
    with torch.no_grad():
        out = model(torch.from_numpy(x))[:, 0].numpy()
    np.testing.assert_allclose(out, features @ coef, atol=1e-10)
    # Least squares: the residual is orthogonal to every path feature.
    residual = xor.y_train.double().numpy() - out
    np.testing.assert_allclose(features.T @ residual, 0.0, atol=1e-8)


def test_depth_two_fits_xor_and_depth_one_cannot(xor):
    def accuracy(depth):
        model = planes.hand_dlgn(ANGLES, depth, xor.x_train, xor.y_train)
        with torch.no_grad():
            return float(((model(xor.x_train.double())[:, 0] >= 0) == (xor.y_train > 0)).double().mean())
    # Gates 1, 2 are axis-aligned: path (1, 2) is exactly one quadrant, and gate 3 is on where
    # neither is, so two layers can give each quadrant its own value (XOR up to the noisy points
    # near the axes); one layer is additive in the half-planes and cannot.
    assert accuracy(2) > 0.9
    assert accuracy(1) < 0.8


def test_model_on_grid_orientation(runs):
    model = runs[2].model_at()
    box = (-1.0, 2.0, -3.0, 1.0)
    z = planes.model_on_grid(model, box, resolution=5)
    with torch.no_grad():
        corners = model(torch.tensor([[-1.0, 1.0], [2.0, -3.0]]))[:, 0].double().numpy()
    np.testing.assert_allclose([z[0, 0], z[-1, -1]], corners, rtol=1e-6)  # row 0 = top


def test_data_box_needs_2d_and_covers_all_points(xor):
    box = planes.data_box(xor, margin=0.0)
    x = torch.cat([xor.x_train, xor.x_val, xor.x_test])
    assert box[0] <= x[:, 0].min() and x[:, 0].max() <= box[1]
    assert box[2] <= x[:, 1].min() and x[:, 1].max() <= box[3]
    with pytest.raises(ValueError, match="2"):
        planes.data_box(data.odt(d=20, n_total=40))
    with pytest.raises(ValueError, match="depth"):
        planes.hand_dlgn(ANGLES, 3, xor.x_train, xor.y_train)


@pytest.mark.parametrize("depth", [1, 2])
def test_hand_dlgn_figure_shows_each_path_value_and_the_fitted_accuracy(xor, depth):
    """Every path panel is titled with its least-squares value, and the function panel with the
    training accuracy of the path sum, both computed here by brute force."""
    fig = planes.hand_dlgn_figure(ANGLES, depth, xor, resolution=40)
    x, y = xor.x_train.double().numpy(), xor.y_train.double().numpy()
    features = brute_force_features(ANGLES, depth, x)
    coef, *_ = np.linalg.lstsq(features, y, rcond=None)
    paths_ = itertools.product(range(len(ANGLES)), repeat=depth)
    expected = sorted(f"path {''.join(str(i + 1) for i in p)}: g = {g:+.2f}" for p, g in zip(paths_, coef))
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_title().startswith("path "))
    assert titles == expected
    accuracy = float(((features @ coef >= 0) == (y > 0)).mean())
    assert any(ax.get_title().endswith(f"train accuracy {accuracy:.2f}") for ax in fig.axes)
