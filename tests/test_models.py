"""Models against independent computations (reconstruction §1): brute-force path sums in float64."""
import itertools

import pytest
import torch

from dlgn_lib import models


def brute_force_path_sum(model, x, hard):
    """ŷ_k(x) = Σ_π g_{π,k}(x) f_π(x), by an explicit loop over every path (claim C1).

    Written from the formulas in reconstruction §1 with Python scalars, independent of ``forward``.
    """
    gates = [g.tolist() for g in model.gates(x, hard=hard)]
    first, middle, head = model.value_weights()
    first, middle, head = first.tolist(), [U.tolist() for U in middle], head.tolist()
    xs = x.tolist()
    n, k = x.shape[0], head.__len__()
    out = [[0.0] * k for _ in range(n)]
    for path in itertools.product(*[range(m) for m in model.widths]):
        for s in range(n):
            f = 1.0
            for layer, unit in enumerate(path):
                f *= gates[layer][s][unit]
            if model.value_input == "ones":
                v = first[path[0]]
            else:
                v = sum(w * xi for w, xi in zip(first[path[0]], xs[s]))
            for layer in range(1, len(path)):
                v *= middle[layer - 1][path[layer]][path[layer - 1]]
            for c in range(k):
                out[s][c] += head[c][path[-1]] * v * f
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("value_input", ["ones", "x"])
@pytest.mark.parametrize("gate_bias", [False, True])
@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("shallow", [False, True])
@pytest.mark.parametrize("convention", models.CONVENTIONS)
def test_dlgn_forward_equals_path_sum(value_input, gate_bias, hard, shallow, convention):
    torch.manual_seed(1)
    model = models.DLGN(3, (3, 2, 4), out_dim=2, beta=3.0, gate_bias=gate_bias,
                        value_input=value_input, shallow=shallow, convention=convention).double()
    if gate_bias:  # biases start at zero; make them matter
        for layer in model.gating:
            torch.nn.init.normal_(layer.bias)
    x = torch.randn(7, 3, dtype=torch.float64)
    expected = brute_force_path_sum(model, x, hard)
    got = model(x, hard=hard)
    assert got.shape == (7, 2)
    assert torch.max(torch.abs(got - expected)).item() <= 1e-10


def test_relu_without_bias_equals_path_sum_with_value_input_x():
    torch.manual_seed(2)
    model = models.ReLUNet(4, (3, 3), out_dim=1, bias=False).double()
    x = torch.randn(9, 4, dtype=torch.float64)
    assert torch.max(torch.abs(model(x) - brute_force_path_sum(model, x, True))).item() <= 1e-10


def test_dln_is_the_product_of_its_matrices():
    torch.manual_seed(3)
    model = models.DeepLinearNet(5, (4, 3), out_dim=2).double()
    x = torch.randn(6, 5, dtype=torch.float64)
    product = model.head.weight @ model.layers[1].weight @ model.layers[0].weight
    assert torch.allclose(model(x), x @ product.T, atol=1e-12)
    assert torch.allclose(model(x), brute_force_path_sum(model, x, True), atol=1e-10)


@pytest.mark.parametrize("gate_bias", [False, True])
def test_effective_hyperplanes_reproduce_the_gating_preactivations(gate_bias):
    torch.manual_seed(4)
    model = models.DLGN(6, (5, 4, 3), gate_bias=gate_bias).double()
    if gate_bias:
        for layer in model.gating:
            torch.nn.init.normal_(layer.bias)
    x = torch.randn(11, 6, dtype=torch.float64)
    for (V, c), eta in zip(model.effective_hyperplanes(), model.gate_preactivations(x)):
        assert torch.allclose(x @ V.T + c, eta, atol=1e-12)


@pytest.mark.parametrize("gate_bias", [False, True])
def test_dlgn_sf_with_the_same_effective_hyperplanes_is_the_same_function(gate_bias):
    torch.manual_seed(5)
    deep = models.DLGN(4, (5, 3, 2), out_dim=3, gate_bias=gate_bias).double()
    if gate_bias:
        for layer in deep.gating:
            torch.nn.init.normal_(layer.bias)
    sf = models.DLGN(4, (5, 3, 2), out_dim=3, gate_bias=gate_bias, shallow=True).double()
    with torch.no_grad():
        for layer, (V, c) in zip(sf.gating, deep.effective_hyperplanes()):
            layer.weight.copy_(V)
            if gate_bias:
                layer.bias.copy_(c)
        sf.value_first.copy_(deep.value_first)
        for a, b in zip(sf.value_layers, deep.value_layers):
            a.weight.copy_(b.weight)
        sf.head.weight.copy_(deep.head.weight)
    x = torch.randn(13, 4, dtype=torch.float64)
    for hard in (False, True):
        assert torch.allclose(sf(x, hard=hard), deep(x, hard=hard), atol=1e-12)


def test_frozen_gate_dlgn_keeps_its_gating_network_while_values_train():
    torch.manual_seed(6)
    model = models.build_model("dlgn_frozen", 2, (8, 8), gate_bias=True)
    gating_before = [p.detach().clone() for p in model.gating.parameters()]
    values_before = [p.detach().clone() for n, p in model.named_parameters() if not n.startswith("gating")]
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=1e-2)
    x, y = torch.randn(64, 2), torch.randn(64, 1)
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    for before, p in zip(gating_before, model.gating.parameters()):
        assert torch.equal(before, p)
    values_after = [p for n, p in model.named_parameters() if not n.startswith("gating")]
    assert any(not torch.equal(a, b) for a, b in zip(values_before, values_after))


def test_hard_gates_are_half_space_indicators_and_soft_gates_approach_them():
    torch.manual_seed(7)
    model = models.DLGN(3, (4, 4), beta=1e4, convention="he").double()   # unit-scale pre-activations
    x = torch.randn(50, 3, dtype=torch.float64)
    for (V, c), g_hard, g_soft in zip(model.effective_hyperplanes(), model.gates(x, hard=True),
                                      model.gates(x, hard=False)):
        assert torch.equal(g_hard, ((x @ V.T + c) >= 0).double())
        assert torch.allclose(g_soft, g_hard, atol=1e-3)


@pytest.mark.parametrize("kind", ["relu", "dlgn", "dlgn_frozen"])
def test_conv_models_on_cifar_shaped_tensors(kind):
    torch.manual_seed(8)
    model = models.build_conv_model(kind, 3, (8, 8, 8, 8, 8), n_classes=100)
    out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 100) and torch.isfinite(out).all()


def test_conv_dlgn_with_one_layer_is_a_gated_constant_map():
    """One layer, 1×1 kernels: value map is a constant, output = head(mean_pixels(G) * value)."""
    torch.manual_seed(9)
    model = models.ConvDLGN(3, (4,), n_classes=2, kernel_size=1).double()
    x = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    conv_v = model.value[0].weight[:, :, 0, 0]  # (4, 3)
    gate = torch.sigmoid(model.beta * model.gating[0](x))
    expected = model.head((gate * conv_v.sum(1).view(1, 4, 1, 1)).mean(dim=(2, 3)))
    assert torch.allclose(model(x), expected, atol=1e-12)


@pytest.mark.parametrize("bad", [dict(kind="cnn"), dict(widths=()), dict(widths=(3, 0)),
                                 dict(value_input="y"), dict(beta=0.0)])
def test_bad_model_arguments_name_the_problem(bad):
    args = dict(kind="dlgn", in_dim=2, widths=(3,))
    args.update(bad)
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        models.build_model(**args)


def test_group_convention_init_is_pytorch_default_uniform():
    # PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), i.e. variance 1/(3 fan_in).
    # On 200 × 400 = 80,000 weights the sample mean and variance are within 5 standard errors.
    torch.manual_seed(0)
    model = models.DLGN(400, (200, 200), convention="group")
    for name, w in [("gating.1", model.gating[1].weight), ("value_layers.0", model.value_layers[0].weight),
                    ("value_first", model.value_first)]:
        fan_in = w.shape[1]
        bound, n = fan_in ** -0.5, w.numel()
        w = w.detach().double()
        assert w.abs().max() <= bound, name
        var = bound ** 2 / 3
        assert abs(w.mean().item()) < 5 * (var / n) ** 0.5, name
        # standard error of the sample variance of a uniform: sqrt((μ4 - σ⁴)/n), μ4 = bound⁴/5
        assert abs(w.var().item() - var) < 5 * ((bound ** 4 / 5 - var ** 2) / n) ** 0.5, name
    # Value input "ones" feeds a vector of d ones through U^1: u^1 = U^1 1.
    assert model.value_first.shape == (200, 400)
    torch.testing.assert_close(model.value_weights()[0], model.value_first @ torch.ones(400))
    he = models.DLGN(400, (200, 200), convention="he")
    assert he.value_first.shape == (200,)
    # He-normal value layers: variance 2/fan_in, far from the uniform's 1/(3 fan_in)
    assert he.value_layers[0].weight.var().item() == pytest.approx(2 / 200, rel=0.05)


def test_run_configs_record_the_convention_and_hash_apart():
    from dlgn_lib import config as C
    data = C.DataSpec.make("circle")
    default = C.ModelSpec.make("dlgn", (4,))
    assert default.kwargs()["convention"] == "group" == models.DEFAULT_CONVENTION
    assert C.ModelSpec.make("dlgn", (4,), convention="group") == default
    he = C.ModelSpec.make("dlgn", (4,), convention="he")
    assert C.RunConfig(data, default).key() != C.RunConfig(data, he).key()
    assert "convention" not in C.ModelSpec.make("conv_dlgn", (4,)).kwargs()
    with pytest.raises(ValueError, match="convention"):
        models.build_model("relu", 2, (3,), convention="xavier")


# --------------------------------------------------------------------------- the registry of kinds

#: The names and colours the notebooks print and plot with, as they were before the registry:
#: the registry must reproduce them exactly (a change here changes committed notebook outputs).
EXPECTED_NAMES = {"dln": "DLN", "relu": "ReLU", "dlgn": "DLGN", "dlgn_sf": "DLGN-SF",
                  "dlgn_frozen": "frozen-gate DLGN", "conv_relu": "conv ReLU", "conv_dlgn": "conv DLGN",
                  "conv_dlgn_frozen": "conv frozen-gate DLGN"}
EXPECTED_COLORS = {"dln": "#7f7f7f", "relu": "#d62728", "dlgn": "#1f77b4", "dlgn_sf": "#17becf",
                   "dlgn_frozen": "#ff7f0e", "conv_relu": "#d62728", "conv_dlgn": "#1f77b4",
                   "conv_dlgn_frozen": "#ff7f0e"}


def test_derived_kind_tuples_keep_their_values_and_order():
    assert models.MODEL_KINDS == ("dln", "relu", "dlgn", "dlgn_sf", "dlgn_frozen") == tuple(models.KINDS)
    assert models.CONV_KINDS == ("relu", "dlgn", "dlgn_frozen")
    assert models.RUN_KINDS == models.MODEL_KINDS + ("conv_relu", "conv_dlgn", "conv_dlgn_frozen")


@pytest.mark.parametrize("key", list(models.KINDS))
def test_every_kind_builds_and_is_complete(key):
    kind = models.KINDS[key]
    assert kind.key == key and not key.startswith(models.CONV_PREFIX)
    assert kind.name and kind.color.startswith("#") and len(kind.color) == 7
    torch.manual_seed(0)
    model = models.build_model(key, 3, (4, 2), out_dim=2)
    assert isinstance(model, models.GatedNet) and model.widths == (4, 2)
    assert model(torch.randn(5, 3)).shape == (5, 2)
    if kind.fused:   # the classes whose training dlgn_lib.fused writes out
        assert type(model) in (models.DLGN, models.ReLUNet, models.DeepLinearNet)
    if kind.conv is not None:
        conv = models.build_conv_model(key, 3, (4, 4), n_classes=7)
        assert conv(torch.randn(2, 3, 6, 6)).shape == (2, 7)
        assert kind.conv_key == f"conv_{key}" and kind.conv_key in models.RUN_KINDS
    else:
        assert kind.conv_key is None and f"conv_{key}" not in models.RUN_KINDS


def test_names_and_colours_are_distinct():
    kinds = models.KINDS.values()
    assert len({k.name for k in kinds}) == len(models.KINDS)
    assert len({k.color.lower() for k in kinds}) == len(models.KINDS)


def test_conv_variants_map_to_their_fully_connected_kind():
    for run_kind in models.RUN_KINDS:
        entry, conv = models.run_kind(run_kind)
        assert conv == run_kind.startswith(models.CONV_PREFIX)
        assert (entry.conv_key if conv else entry.key) == run_kind
        assert models.kind_color(run_kind) == entry.color
        assert models.kind_name(run_kind) == (f"conv {entry.name}" if conv else entry.name)
    with pytest.raises(ValueError, match="kind"):
        models.run_kind("conv_dlgn_sf")   # DLGN-SF has no conv variant


def test_registry_variants_keep_their_flags():
    assert not models.build_model("dlgn", 2, (3,)).shallow
    assert models.build_model("dlgn_sf", 2, (3,)).shallow
    assert models.build_model("dlgn_frozen", 2, (3,)).frozen_gates
    assert models.build_conv_model("dlgn_frozen", 3, (4,)).frozen_gates
    assert not models.build_conv_model("dlgn", 3, (4,)).frozen_gates
    with pytest.raises(TypeError):   # a kind's own flags cannot be overridden by options
        models.build_model("dlgn", 2, (3,), shallow=True)


def test_build_run_model_dispatches_on_the_run_kind():
    torch.manual_seed(0)
    fc = models.build_run_model("dlgn", (1, 4, 4), (3,), 10)
    assert isinstance(fc, models.DLGN) and fc.in_dim == 16 and fc.out_dim == 10
    conv = models.build_run_model("conv_relu", (1, 4, 4), (3,), 10)
    assert isinstance(conv, models.ConvReLU) and conv(torch.randn(2, 1, 4, 4)).shape == (2, 10)


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        models.KINDS["new"] = models.KINDS["dlgn"]


def test_plot_names_and_colours_come_from_the_registry_with_todays_values():
    from dlgn_lib import plots
    assert dict(plots.MODEL_NAMES) == EXPECTED_NAMES and list(plots.MODEL_NAMES) == list(models.RUN_KINDS)
    assert dict(plots.MODEL_COLORS) == EXPECTED_COLORS and list(plots.MODEL_COLORS) == list(models.RUN_KINDS)
    assert dict(plots.MODEL_NAMES) == {k: models.kind_name(k) for k in models.RUN_KINDS}
    assert dict(plots.MODEL_COLORS) == {k: models.kind_color(k) for k in models.RUN_KINDS}
    with pytest.raises(TypeError):
        plots.MODEL_NAMES["dlgn"] = "changed"


def test_trainers_dispatch_from_the_registry():
    from dlgn_lib import fused
    assert fused.FUSED_KINDS == tuple(k for k, kind in models.KINDS.items() if kind.fused)
    assert fused.FUSED_KINDS == models.MODEL_KINDS   # every fully connected kind trains fused today
