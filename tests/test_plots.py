"""The series' figures: one style, registry colours, keys and colour bars, the heaviest units.

Each test checks a figure against something known independently: the registry's colours, the rc
values of ``plots.STYLE``, path values multiplied out one path at a time, a model whose heaviest
units are set by hand.
"""
import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex

from dlgn_lib import data, models, paths, plots
from dlgn_lib.plots import circle as circle_plots
from dlgn_lib.plots import hyperplanes, regions, tables
from dlgn_lib.plots import images as image_plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def colorbar_labels(fig):
    """Labels of the figure's colour bars (a colour bar's axes knows its ``_colorbar``)."""
    return [ax.get_ylabel() or ax.get_xlabel() for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]


# --------------------------------------------------------------------------- style and colours

def test_use_style_sets_the_seaborn_theme_and_keeps_our_rc_values():
    matplotlib.rcdefaults()
    plots.use_style()
    for key, value in plots.STYLE.items():
        assert matplotlib.rcParams[key] == value, key
    # seaborn's "ticks" theme: its axes edge colour and its "deep" colour cycle
    assert matplotlib.rcParams["axes.edgecolor"] == ".15"
    assert to_hex(matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][0]) == "#4c72b0"


def test_model_colors_are_the_registry_colors():
    assert dict(plots.MODEL_COLORS) == {k: models.KINDS[k.removeprefix("conv_")].color for k in models.RUN_KINDS}


def curve_table(kinds, columns):
    rows = []
    for kind in kinds:
        for seed in (0, 1):
            for epoch in (0, 1, 10):
                rows.append({"model": kind, "seed": seed, "epoch": epoch,
                             **{c: 0.1 * (1 + seed) + epoch + k for k, c in enumerate(columns)}})
    return pd.DataFrame(rows)


def test_epoch_curves_colour_is_the_model_and_line_style_the_arc():
    kinds = ["dlgn", "relu"]
    table = curve_table(kinds, ["loss smooth", "loss rough", "breakpoints"])
    fig = circle_plots.epoch_curves(table, {"loss": ["loss rough", "loss smooth"], "breakpoints": ["breakpoints"]},
                                    by="model", labels={"loss smooth": "smooth", "loss rough": "rough"})
    mean_lines = [line for ax in fig.axes for line in ax.lines if line.get_linewidth() == 1.6]
    assert {to_hex(line.get_color()) for line in mean_lines} == {plots.MODEL_COLORS[k] for k in kinds}
    loss = fig.axes[0]
    # loss rough is drawn first, yet dashed; loss smooth solid; the means are drawn after the seeds
    means = [line for line in loss.lines if line.get_linewidth() == 1.6]
    styles = {(to_hex(line.get_color()), line.get_linestyle()) for line in means}
    assert styles == {(plots.MODEL_COLORS[k], s) for k in kinds for s in ("-", "--")}
    np.testing.assert_allclose(means[0].get_ydata(), table[table["model"] == "dlgn"].groupby("epoch")["loss rough"].mean())
    legend, = fig.legends
    assert legend.get_title().get_text() == "colour: model · line style: arc"
    entries = {text.get_text(): handle for text, handle in zip(legend.get_texts(), legend.legend_handles)}
    assert list(entries) == ["DLGN", "ReLU", "rough", "smooth"]
    assert to_hex(entries["DLGN"].get_color()) == plots.MODEL_COLORS["dlgn"]
    assert entries["rough"].get_linestyle() == "--" and entries["smooth"].get_linestyle() == "-"


def test_epoch_curves_of_one_model_in_settings_keep_arc_colours():
    table = curve_table(["a", "b"], ["loss smooth", "loss rough"]).rename(columns={"model": "setting"})
    fig = circle_plots.epoch_curves(table, {"loss": ["loss smooth", "loss rough"]})
    colors = {to_hex(line.get_color()) for line in fig.axes[0].lines}
    assert colors == {circle_plots.ARC_COLORS["smooth"], circle_plots.ARC_COLORS["rough"]}


def test_accuracy_points_and_cosine_distributions_use_registry_colours():
    from types import SimpleNamespace as NS
    runs = [NS(config=NS(model=NS(kind=kind)), meta={"test_metric_at_best": v}, row="F")
            for kind, values in (("dln", (0.5, 0.6)), ("relu", (0.8, 0.9, 0.85))) for v in values]
    fig = tables.accuracy_points(runs, {"F": ("dln", "relu")}, lambda r: r.row)
    ax = fig.axes[0]
    means = [line for line in ax.lines if line.get_marker() == "o"]
    assert [to_hex(line.get_color()) for line in means] == [plots.MODEL_COLORS["dln"], plots.MODEL_COLORS["relu"]]
    seeds = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert [to_hex(c.get_facecolor()[0]) for c in seeds] == [plots.MODEL_COLORS["dln"], plots.MODEL_COLORS["relu"]]
    assert [sorted(c.get_offsets()[:, 1]) for c in seeds] == [[0.5, 0.6], [0.8, 0.85, 0.9]]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["mean ± std over seeds", "one seed"]

    table = pd.DataFrame([{"model": kind, "layer": layer, "unit": u, "mean_cos": 0.1 * u}
                          for kind in ("dlgn", "relu") for layer in (1, 2) for u in range(6)])
    fig = image_plots.cosine_distributions(table, threshold=0.5, threshold_label="limit")
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["DLGN", "ReLU", "limit"]
    assert [to_hex(h.get_color()) for h in legend.legend_handles[:2]] == [plots.MODEL_COLORS["dlgn"],
                                                                          plots.MODEL_COLORS["relu"]]
    swarms = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    assert sorted(len(c.get_offsets()) for c in swarms) == [6] * 4   # every neuron, per model and layer
    assert {to_hex(c.get_facecolor()[0]) for c in swarms} == {plots.MODEL_COLORS["dlgn"], plots.MODEL_COLORS["relu"]}


def test_a_layer_without_units_gets_an_empty_panel_not_an_error():
    """Gate vectors of a layer whose units all have constant gates: m = 0 rows."""
    rng = np.random.default_rng(0)
    fig = hyperplanes.abs_cosine_grid({"DLGN": [rng.normal(size=(5, 7)), rng.normal(size=(3, 7))],
                                       "ReLU": [rng.normal(size=(4, 7)), np.zeros((0, 7))]})
    empty = fig.axes[3]                                  # row ReLU, layer 2
    assert [t.get_text() for t in empty.texts] == ["no unit\nvaries"] and not empty.collections
    assert all(ax.collections for ax in fig.axes[:3])    # the other three are heatmaps


# --------------------------------------------------------------------------- keys and colour bars

def test_heatmap_draws_what_seaborn_draws_without_drawing_the_figure(monkeypatch):
    import seaborn as sns
    rng = np.random.default_rng(1)
    values = rng.uniform(size=(5, 7))
    values[1, 2] = np.nan
    fig, (mine, theirs) = plt.subplots(1, 2)
    draws = []
    monkeypatch.setattr(type(fig.canvas), "draw", lambda canvas, *a, **k: draws.append(1))
    mesh = plots.heatmap(mine, values, vmin=0, vmax=1, cmap="magma", square=True)
    assert draws == []                                   # seaborn draws the whole figure per call
    sns.heatmap(values, ax=theirs, vmin=0, vmax=1, cmap="magma", cbar=False, square=True,
                xticklabels=False, yticklabels=False, rasterized=True)
    assert draws                                          # (which is what made grids slow)
    reference = theirs.collections[0]
    assert np.array_equal(np.ma.getmaskarray(mesh.get_array()), np.ma.getmaskarray(reference.get_array()))
    assert np.ma.allequal(mesh.get_array(), reference.get_array())
    assert mine.get_xlim() == theirs.get_xlim() and mine.get_ylim() == theirs.get_ylim() == (5.0, 0.0)
    assert list(mine.get_xticks()) == list(theirs.get_xticks()) == []
    assert list(mine.get_yticks()) == list(theirs.get_yticks()) == []
    assert mine.get_aspect() == theirs.get_aspect() == 1.0
    assert [s.get_visible() for s in mine.spines.values()] == [s.get_visible() for s in theirs.spines.values()]
    assert (mesh.cmap.name, mesh.norm.vmin, mesh.norm.vmax, mesh.get_rasterized()) == \
        (reference.cmap.name, reference.norm.vmin, reference.norm.vmax, reference.get_rasterized())


def test_heatmaps_have_labelled_colour_bars():
    rng = np.random.default_rng(0)
    layers = [rng.normal(size=(6, 5)), rng.normal(size=(4, 5))]
    fig = hyperplanes.abs_cosine_grid({"a": layers, "b": layers})
    assert colorbar_labels(fig) == ["|cos| between two units"]
    # seaborn draws the clustered |cos| matrix cell by cell: the mesh holds the matrix itself
    cos = np.abs(layers[1] / np.linalg.norm(layers[1], axis=1, keepdims=True)
                 @ (layers[1] / np.linalg.norm(layers[1], axis=1, keepdims=True)).T)
    shown = np.asarray(fig.axes[1].collections[0].get_array()).reshape(4, 4)
    assert sorted(shown.ravel()) == pytest.approx(sorted(cos.ravel()))
    fig = hyperplanes.node_cos_heatmaps({"trained": layers}, rng.normal(size=(3, 5)), threshold=0.5)
    assert colorbar_labels(fig) == ["|cos| of a unit's and a node's hyperplane"]
    theta = np.linspace(0, 2 * math.pi, 20, endpoint=False)
    fig = circle_plots.kernel_heatmaps({("DLGN", "epoch 0"): np.eye(20)}, theta, arcs={"smooth": (1.0, 2.0)})
    assert colorbar_labels(fig) == ["cosine overlap kernel K(θ, θ') / √(K(θ, θ) K(θ', θ'))"]
    ax = fig.axes[0]
    # ticks at θ = 0, π, 2π on the 20-cell axis: cell k (k … k + 1) shows theta[k]
    assert [t for t in ax.get_xticks()] == pytest.approx([0.5, 0.5 + 19 * math.pi / theta[-1], 0.5 + 19 * 2 * math.pi / theta[-1]])


def test_image_maps_have_one_labelled_colour_bar():
    maps = np.random.default_rng(0).normal(size=(3, 16))
    fig = image_plots.saliency_grid(maps, {"neuron": maps, "other": -maps}, (4, 4))
    assert colorbar_labels(fig) == ["gradient entry / the map's largest |entry|"]


def test_path_regions_key_names_each_layer_colour():
    torch.manual_seed(0)
    model = models.DLGN(2, (3, 3), gate_bias=True).double()
    fig = regions.path_regions(model, [(0, 1), (2, 2)], data.plane("moons", n=60, seed=0))
    legend, = fig.legends
    entries = {text.get_text(): handle for text, handle in zip(legend.get_texts(), legend.legend_handles)}
    for layer in (1, 2):
        handle = entries[f"boundary of the layer-{layer} gate"]
        assert handle.get_linestyle() == "--" and to_hex(handle.get_color()) == regions.LAYER_COLORS[layer - 1]
    assert {"active region R_π", "label −1", "label +1"} <= set(entries)
    dashed = {to_hex(line.get_color()) for line in fig.axes[0].lines if line.get_linestyle() == "--"}
    assert dashed <= {regions.LAYER_COLORS[0], regions.LAYER_COLORS[1]}


# --------------------------------------------------------------------------- the heaviest units

@pytest.mark.parametrize("value_input, out_dim", [("ones", 1), ("ones", 3), ("x", 2)])
def test_unit_path_weights_sum_path_value_sizes(value_input, out_dim):
    torch.manual_seed(1)
    model = models.DLGN(4, (3, 5, 2), out_dim, value_input=value_input).double()
    g = paths.path_values(model)                          # one path at a time, multiplied out
    size = g.reshape(3, 5, 2, -1).norm(dim=-1).numpy()    # ‖g_π‖ over outputs (and inputs)
    weights = hyperplanes.unit_path_weights(model)
    for layer in range(3):
        others = tuple(a for a in range(3) if a != layer)
        np.testing.assert_allclose(weights[layer], size.sum(axis=others), rtol=1e-12)
        assert weights[layer].sum() == pytest.approx(size.sum())


def hand_model():
    """A 2-layer DLGN (widths 4, 3) on 2 × 2 images whose value weights make the heaviest units
    known: layer 1 unit 2 (u¹ = 5), then unit 0 (u¹ = 2); layer 2 unit 1 (head weight 10)."""
    model = models.DLGN(4, (4, 3), convention="he").double()
    with torch.no_grad():
        model.value_first.copy_(torch.tensor([2.0, 0.5, 5.0, 1.0]))
        model.value_layers[0].weight.fill_(1.0)
        model.head.weight.copy_(torch.tensor([[1.0, 10.0, 2.0]]))
    return model


def test_hand_model_weights_are_known():
    weights = hyperplanes.unit_path_weights(hand_model())
    # layer 1 unit i: u_i · Σ_j |U_ji| · |head_j| = u_i · 13; layer 2 unit j: Σ_i u_i · |head_j| = 8.5 · head_j
    np.testing.assert_allclose(weights[0], 13 * np.array([2.0, 0.5, 5.0, 1.0]))
    np.testing.assert_allclose(weights[1], 8.5 * np.array([1.0, 10.0, 2.0]))


def test_hyperplane_images_show_the_heaviest_units_large_with_one_colour_bar():
    model = hand_model()
    normals = [V for V, _ in paths.effective_hyperplanes(model)]
    fig = hyperplanes.hyperplane_images(normals, (2, 2), weights=hyperplanes.unit_path_weights(model), n_units=2)
    image_axes = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in image_axes] == [
        f"unit 2\n{5 / 8.5:.1%}", f"unit 0\n{2 / 8.5:.1%}", f"unit 1\n{10 / 13:.1%}", f"unit 2\n{2 / 13:.1%}"]
    expected = [normals[0][2], normals[0][0], normals[1][1], normals[1][2]]
    for ax, normal in zip(image_axes, expected):
        normal = normal.detach().numpy()
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), (normal / np.abs(normal).max()).reshape(2, 2))
        assert ax.images[0].get_clim() == (-1, 1)
    assert colorbar_labels(fig) == ["normal entry / the unit's largest |entry|"]
    assert "heaviest" in fig._suptitle.get_text() and "Σ‖g_π‖" in fig._suptitle.get_text()


def test_hyperplane_images_full_grid_and_missing_weights():
    model = hand_model()
    normals = [V for V, _ in paths.effective_hyperplanes(model)]
    fig = hyperplanes.hyperplane_images(normals, (2, 2), full_grid=True, n_cols=2)
    mosaics = [ax for ax in fig.axes if ax.images]
    assert len(mosaics) == 2 and colorbar_labels(fig) == ["normal entry / the unit's largest |entry|"]
    # layer 1: 4 units in a 2 × 2 mosaic of 2 × 2 images with 2-pixel gaps
    assert mosaics[0].images[0].get_array().shape == (6, 6)
    with pytest.raises(ValueError, match="full_grid=True"):
        hyperplanes.hyperplane_images(normals, (2, 2), n_units=2)
    # few enough units: every one is shown, no weights needed
    fig = hyperplanes.hyperplane_images(normals, (2, 2), n_units=4)
    assert [ax.get_title() for ax in fig.axes if ax.images][:4] == [f"unit {i}" for i in range(4)]
