"""dlgn_lib.plots.schematic: what the DLGN diagram draws, counted against the widths it was given."""
import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Circle

from dlgn_lib.plots import schematic


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def count(fig, gid):
    ax = fig.axes[0]
    return sum(1 for artist in [*ax.patches, *ax.texts] if artist.get_gid() == gid)


def test_shown_units_keeps_small_layers_and_elides_the_middle_of_wide_ones():
    assert schematic.shown_units(3, 5) == [0, 1, 2]
    assert schematic.shown_units(5, 5) == [0, 1, 2, 3, 4]
    assert schematic.shown_units(16, 5) == [0, 1, 2, 3, None, 15]


@pytest.mark.parametrize("widths, in_dim, shown", [((3, 2), 2, (3, 2)), ((4, 4, 4), 3, (4, 4, 4)),
                                                   ((16, 2, 9), 2, (5, 2, 5))])
def test_one_circle_per_drawn_unit_and_one_gate_box_per_layer(widths, in_dim, shown):
    fig = schematic.dlgn_architecture(widths, in_dim=in_dim, max_units=5)
    # counted by hand: a layer wider than 5 shows units 1-4, an ellipsis and its last unit
    assert count(fig, "gating-unit") == count(fig, "value-unit") == sum(shown)
    assert count(fig, "input-unit") == count(fig, "value-input-unit") == in_dim
    assert count(fig, "output-unit") == 1
    assert count(fig, "gate") == len(widths)
    assert count(fig, "ellipsis") == 2 * sum(m > 5 for m in widths)
    circles = [p for p in fig.axes[0].patches if isinstance(p, Circle)]
    assert len(circles) == 2 * sum(shown) + 2 * in_dim + 1


def test_the_value_input_is_labelled_ones_or_x():
    texts = lambda fig: " ".join(t.get_text() for t in fig.axes[0].texts)   # noqa: E731
    ones, x = schematic.dlgn_architecture((2,)), schematic.dlgn_architecture((2,), value_input="x")
    assert "(ones)" in texts(ones) and "u^1 = U^1" in texts(ones)
    assert "(ones)" not in texts(x) and "u^1 = U^1" not in texts(x)
    # with ones every value-input unit is labelled "1"; with x none is
    assert [t.get_text() for t in ones.axes[0].texts].count("1") == 2
    assert [t.get_text() for t in x.axes[0].texts].count("1") == 0


@pytest.mark.parametrize("kwargs, match", [({"widths": ()}, "widths"), ({"widths": (2, 0)}, "widths"),
                                           ({"value_input": "zeros"}, "value_input"),
                                           ({"in_dim": 0}, "in_dim"), ({"max_units": 1}, "max_units")])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        schematic.dlgn_architecture(**kwargs)


def test_gate_biases_are_labelled_only_when_the_model_has_them():
    import matplotlib.pyplot as plt
    from dlgn_lib.plots import schematic
    for gate_bias, expected in ((False, ["$W^1$", "$W^2$"]), (True, ["$W^1,\\ b^1$", "$W^2,\\ b^2$"])):
        fig = schematic.dlgn_architecture((3, 3), gate_bias=gate_bias)
        labels = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("$W^")]
        plt.close(fig)
        assert labels == expected
