"""Input-gradient cosines (claim C4): against autograd Jacobians and pair loops, a DLGN, and a
hand-built ReLU net whose answer is known in closed form."""
import itertools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import models, saliency
from dlgn_lib.plots import images as image_plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _relu(seed=0, in_dim=5, widths=(4, 3, 3), bias=True):
    torch.manual_seed(seed)
    net = models.ReLUNet(in_dim, widths, 2, bias=bias).double()
    if bias:  # non-zero biases, so the test covers them
        for layer in net.layers:
            torch.nn.init.normal_(layer.bias, std=0.3)
    return net


def _autograd_gradients(model, x):
    """Per layer, (N, m, d) Jacobians of the pre-activations, one input at a time (autograd)."""
    per_input = []
    for xn in x:
        jac = torch.autograd.functional.jacobian(
            lambda v: tuple(z[0] for z in model.gate_preactivations(v.unsqueeze(0))), xn)
        per_input.append(jac)
    return [torch.stack([jac[layer] for jac in per_input]) for layer in range(model.depth)]


def _pair_loop_mean_cos(gradients):
    """Mean cosine over pairs a < b of non-zero rows, per neuron, by an explicit double loop."""
    n, m, _ = gradients.shape
    out = []
    for i in range(m):
        rows = [gradients[a, i].tolist() for a in range(n)]
        rows = [r for r in rows if any(v != 0 for v in r)]
        cosines = []
        for a in range(len(rows)):
            for b in range(a + 1, len(rows)):
                dot = sum(p * q for p, q in zip(rows[a], rows[b]))
                norm_a = math.sqrt(sum(p * p for p in rows[a]))
                norm_b = math.sqrt(sum(q * q for q in rows[b]))
                cosines.append(dot / (norm_a * norm_b))
        out.append(sum(cosines) / len(cosines) if cosines else math.nan)
    return np.array(out)


def test_input_gradients_equal_autograd_jacobians():
    net = _relu()
    x = torch.randn(6, 5, dtype=torch.float64)
    for layer, expected in enumerate(_autograd_gradients(net, x), start=1):
        torch.testing.assert_close(saliency.input_gradients(net, x, layer), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("chunk_size", [1, 3, 100])
def test_gradient_cosines_match_jacobians_and_pair_loop(chunk_size):
    net = _relu(seed=1)
    x = torch.randn(9, 5, dtype=torch.float64)
    found = saliency.gradient_cosines(net, x, chunk_size=chunk_size)
    for layer, jac in enumerate(_autograd_gradients(net, x)):
        np.testing.assert_allclose(found[layer].numpy(), _pair_loop_mean_cos(jac), rtol=0, atol=1e-12)
    assert not torch.allclose(found[-1], torch.ones_like(found[-1]))  # the test net does bend


def test_mean_pairwise_cosine_leaves_out_zero_maps_and_is_nan_below_two():
    g = torch.randn(5, 3, 4, dtype=torch.float64)
    g[1, 0] = 0.0
    g[2, 0] = 0.0
    g[:4, 2] = 0.0  # neuron 2 keeps one non-zero map only
    expected = _pair_loop_mean_cos(g)
    found = saliency.mean_pairwise_cosine(g).numpy()
    np.testing.assert_allclose(found[:2], expected[:2], rtol=0, atol=1e-12)
    assert math.isnan(found[2]) and math.isnan(expected[2])
    single = saliency.mean_pairwise_cosine(g[:, 1])  # one neuron as (N, d)
    assert single.dim() == 0 and abs(single.item() - expected[1]) < 1e-12
    with pytest.raises(ValueError, match="gradients of shape"):
        saliency.mean_pairwise_cosine(g[0, 0])


@pytest.mark.parametrize("kind", ["dlgn", "dlgn_sf"])
def test_dlgn_neurons_have_cosine_one(kind):
    torch.manual_seed(2)
    net = models.build_model(kind, 7, (5, 4, 3), 3, gate_bias=True).double()
    x = torch.randn(40, 7, dtype=torch.float64)
    for layer, cos in enumerate(saliency.gradient_cosines(net, x, chunk_size=16), start=1):
        assert torch.all((cos - 1).abs() <= 1e-12), (layer, cos)
        # one map per neuron: the effective hyperplane, the same at every input
        V = net.effective_hyperplanes()[layer - 1][0].detach()
        torch.testing.assert_close(saliency.input_gradients(net, x, layer)[17], V, rtol=0, atol=0)


def test_hand_built_two_layer_relu():
    """z² = W2 ReLU(W1 x) with W1 = I, W2 = [1, 1]: the layer-2 map is W2 D(x) W1 = (1[x1>0], 1[x2>0])."""
    net = models.ReLUNet(2, (2, 1), 1, bias=False).double()
    with torch.no_grad():
        net.layers[0].weight.copy_(torch.eye(2))
        net.layers[1].weight.copy_(torch.tensor([[1.0, 1.0]]))
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0], [-2.0, 0.5], [-1.0, -1.0]], dtype=torch.float64)
    maps = saliency.input_gradients(net, x, 2)[:, 0]
    torch.testing.assert_close(maps, torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]],
                                                  dtype=torch.float64), rtol=0, atol=0)
    # pairs among the three non-zero maps: 1/√2, 1/√2 and 0; the zero map at (-1, -1) is left out
    layer1, layer2 = saliency.gradient_cosines(net, x)
    torch.testing.assert_close(layer1, torch.ones(2, dtype=torch.float64), rtol=0, atol=1e-15)
    assert abs(layer2.item() - math.sqrt(2) / 3) < 1e-15
    table = saliency.cosine_table(net, x, model="relu")
    assert table["n_zero"].tolist() == [0, 0, 1]
    # layer 1 unit 0 is on for x1 > 0 (2 of 4); the layer-2 neuron for x1 + x2 > 0 on the ReLUs (3 of 4)
    assert table["active_share"].tolist() == [0.5, 0.5, 0.75]
    assert table["model"].eq("relu").all() and table["layer"].tolist() == [1, 1, 2]


def test_cosine_table_agrees_with_gradient_cosines():
    net = _relu(seed=3)
    x = torch.randn(11, 5, dtype=torch.float64)
    table = saliency.cosine_table(net, x, chunk_size=4)
    expected = torch.cat(saliency.gradient_cosines(net, x)).numpy()
    np.testing.assert_allclose(table["mean_cos"].to_numpy(), expected, rtol=0, atol=1e-14)
    on = torch.cat([(z > 0).double().mean(0) for z in net.gate_preactivations(x)]).detach().numpy()
    np.testing.assert_allclose(table["active_share"].to_numpy(), on, rtol=0, atol=0)
    assert table["unit"].tolist() == [u for m in net.widths for u in range(m)]


def test_bad_arguments_are_named():
    net = _relu()
    x = torch.randn(3, 5, dtype=torch.float64)
    for layer in (0, 4, 1.0, True):
        with pytest.raises(ValueError, match="layer="):
            saliency.input_gradients(net, x, layer)
    with pytest.raises(ValueError, match="chunk_size="):
        saliency.gradient_cosines(net, x, chunk_size=0)


def test_path_region_images_show_exactly_the_inputs_inside():
    torch.manual_seed(4)
    net = models.DLGN(16, (3, 2), 2, gate_bias=True).double()
    x = torch.randn(60, 16, dtype=torch.float64)
    path = (1, 0)
    fig = image_plots.path_region_images(net, x, [path], (4, 4), labels=torch.arange(60) % 3,
                                         class_names=["a", "b", "c"], n_images=50)
    # brute force: every layer's effective hyperplane, one input and one half-space at a time
    planes = [(V.detach(), c.detach()) for V, c in net.effective_hyperplanes()]
    inside = [n for n in range(60)
              if all(float(x[n] @ V[i] + c[i]) >= 0 for (V, c), i in zip(planes, path))]
    assert 0 < len(inside) < 50
    image_axes = fig.axes[len(path) + 1:]
    shown = [ax.images[0].get_array() for ax in image_axes if ax.images]
    assert len(shown) == len(inside)
    for array, n in zip(shown, inside):
        np.testing.assert_array_equal(np.asarray(array), x[n].numpy().reshape(4, 4))
    assert f"{len(inside)} of 60 inputs inside" in fig.axes[0].get_title(loc="left")


def test_saliency_grid_and_cosine_distributions_draw():
    maps = np.random.default_rng(0).normal(size=(3, 16))
    fig = image_plots.saliency_grid(maps, {"neuron": maps, "other": -maps}, (4, 4),
                                    column_titles=["p", "q", "r"], notes={"neuron": ["on", "off", "on"]})
    assert len(fig.axes) == 9 + 1 and fig.axes[3].get_xlabel() == "on"   # 3 × 3 panels and one colour bar
    assert fig.axes[-1].get_ylabel() == "gradient entry / the map's largest |entry|"
    with pytest.raises(ValueError, match="2 maps for 3 images"):
        image_plots.saliency_grid(maps, {"neuron": maps[:2]}, (4, 4))
    table = pd.DataFrame([{"model": kind, "layer": layer, "mean_cos": v}
                          for kind, layer in itertools.product(["dlgn", "relu"], [1, 2]) for v in (0.5, 1.0)])
    fig = image_plots.cosine_distributions(table, threshold=0.9)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["layer 1", "layer 2"]


# --------------------------------------------------------------------------- notebook 04's summaries

def test_layer_summary_against_numpy():
    rows = pd.DataFrame({"mean_cos": [0.2, 0.9, 0.5, 1.0, 0.7], "active_share": [0.0, 0.3, 0.0, 1.0, 0.5],
                         "n_zero": [3, 0, 1, 0, 2]})
    got = saliency.layer_summary(rows)
    cos = np.array([0.2, 0.9, 0.5, 1.0, 0.7])
    assert got["neurons"] == 5 and got["never on"] == 2 and got["zero maps left out"] == 6
    assert got["median"] == pytest.approx(np.median(cos)) and got["min"] == 0.2 and got["max"] == 1.0
    assert got["10%"] == pytest.approx(np.quantile(cos, 0.1)) and got["90%"] == pytest.approx(np.quantile(cos, 0.9))
    assert got["median, on ≥ once"] == pytest.approx(np.median([0.9, 1.0, 0.7]))


def test_summary_table_has_one_row_per_model_and_layer():
    x = torch.randn(20, 5, dtype=torch.float64)
    table = pd.concat([saliency.cosine_table(_relu(), x, model="relu"),
                       saliency.cosine_table(_relu(seed=1), x, model="other")], ignore_index=True)
    summary = saliency.summary_table(table)
    assert list(summary.index) == [(m, l) for m in ("other", "relu") for l in (1, 2, 3)]
    for (model, layer), row in summary.iterrows():
        rows = table[(table["model"] == model) & (table["layer"] == layer)]
        assert row["neurons"] == len(rows) and row["median"] == pytest.approx(rows["mean_cos"].median())


def _autograd_map(model, x, layer, unit):
    """∇_x z^ℓ_unit at each input by autograd, one input at a time."""
    maps = []
    for xi in x:
        xi = xi.clone().requires_grad_(True)
        z = model.gate_preactivations(xi[None])[layer - 1][0, unit]
        maps.append(torch.autograd.grad(z, xi)[0])
    return torch.stack(maps)


def test_saliency_rows_against_autograd_and_pair_loops():
    torch.manual_seed(0)
    dlgn = models.DLGN(5, (4, 3, 3), 1, gate_bias=True).double()
    relu = _relu()
    x = torch.randn(6, 5, dtype=torch.float64)
    rows, notes = saliency.saliency_rows([("ReLU", relu, 1), ("DLGN", dlgn, 2)], x, 3)
    assert len(rows) == 2 and list(rows) == list(notes)
    for (label, maps), (name, model, unit) in zip(rows.items(), [("ReLU", relu, 1), ("DLGN", dlgn, 2)]):
        expected = _autograd_map(model, x, 3, unit)
        torch.testing.assert_close(maps, expected)
        z = torch.stack([model.gate_preactivations(xi[None])[2][0, unit] for xi in x])
        on = z >= 0 if name == "DLGN" else z > 0          # a DLGN gate is on at η >= 0, a ReLU at z > 0
        assert notes[label] == ["on" if v else "off" for v in on]
        units = [m / m.norm() for m in expected if m.norm() > 0]   # zero maps have no direction: left out
        pairs = [float(a @ b) for a, b in itertools.combinations(units, 2)]
        assert label == f"{name}, layer 3\nunit {unit}\nmean cos {sum(pairs) / len(pairs):.2f}"
    assert "mean cos 1.00" in list(rows)[1]   # a DLGN neuron has one map
