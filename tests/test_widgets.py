"""The panels' static twins (dlgn_lib.widgets): the ``text/html`` fallback that a display of a panel
carries beside its widget view, for readers without a kernel (the rendered book).

Each test figure is a single flat colour chosen from the controls' values, so a decoded frame says
which values it was drawn with; frame positions are checked against hand-picked lists.
"""
from __future__ import annotations

import base64
import io
import re
from html.parser import HTMLParser

import ipywidgets as W
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from nbval.plugin import get_sanitize_patterns
from PIL import Image

from dlgn_lib import locations, widgets

matplotlib.use("Agg")

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Twin(HTMLParser):
    """The parts of a twin: its range inputs, its frames (value, hidden, caption text, image bytes)."""

    def __init__(self, text: str):
        super().__init__()
        self.inputs, self.frames, self.outputs, self._in = [], [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input":
            self.inputs.append(a)
        elif tag == "div" and a.get("class") == "dlgn-frame":
            self.frames.append({"value": a["data-value"], "hidden": "hidden" in a, "caption": ""})
            self._in = "frame"
        elif tag == "img" and self._in == "frame":
            src = a["src"]
            assert src.startswith("data:image/webp;base64,")
            self.frames[-1]["image"] = base64.b64decode(src.split(",", 1)[1])
            self._in = None                          # the caption comes before the image
        elif tag == "output":
            self._in = "output"

    def handle_data(self, data):
        if self._in == "frame":
            self.frames[-1]["caption"] += data
        elif self._in == "output":
            self.outputs.append(data)
            self._in = None


def flat(red: float, green: float):
    """A figure that is one flat colour: (red, green, 0.5)."""
    fig = plt.figure(figsize=(2, 1))
    fig.patch.set_facecolor((red, green, 0.5))
    return fig


def colour(image: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(image)).convert("RGB"), dtype=float).mean(axis=(0, 1)) / 255


EPOCHS = list(range(0, 62, 2))                     # 31 saved epochs: 0, 2, ..., 60
# round(k * 30 / 9) for k = 0..9 (positions), then doubled (epochs), worked out by hand
TWIN_EPOCHS = [0, 6, 14, 20, 26, 34, 40, 46, 54, 60]


def panel_with_dropdown():
    target = widgets.dropdown([("first", 0.0), ("second", 1.0)], "target")
    epoch = widgets.epoch_selector(EPOCHS)
    panel = widgets.figure_panel(lambda target, epoch: flat(epoch / 60, target),
                                 {"target": target, "epoch": epoch},
                                 caption=lambda target, epoch: f"epoch {epoch} of 60", title="flat colours")
    return panel, target, epoch


def test_evenly_spaced_by_hand():
    assert widgets.evenly_spaced(EPOCHS) == TWIN_EPOCHS
    assert widgets.evenly_spaced([5, 7, 9]) == [5, 7, 9]
    assert widgets.evenly_spaced(list(range(11)), 3) == [0, 5, 10]
    assert widgets.evenly_spaced(list(range(12)), 10) == [0, 1, 2, 4, 5, 6, 7, 9, 10, 11]


def test_display_carries_the_widget_view_and_the_twin():
    panel, _, _ = panel_with_dropdown()
    bundle = panel._repr_mimebundle_()
    assert bundle[WIDGET_VIEW]["model_id"] == panel.model_id
    assert bundle["text/html"].startswith('<div class="dlgn-twin">')
    assert "<b>flat colours</b>" in bundle["text/html"]


def test_twin_frames_are_the_evenly_spaced_epochs_at_the_other_controls_values():
    panel, target, epoch = panel_with_dropdown()
    target.value = 1.0                              # "second": the frames' green channel is 1
    twin = Twin(panel._repr_mimebundle_()["text/html"])

    assert [f["value"] for f in twin.frames] == [str(e) for e in TWIN_EPOCHS]
    assert [f["caption"] for f in twin.frames] == [f"epoch {e} of 60" for e in TWIN_EPOCHS]
    # only the current epoch (the last) is shown before the input is moved
    assert [f["hidden"] for f in twin.frames] == [True] * 9 + [False]
    for frame, e in zip(twin.frames, TWIN_EPOCHS):
        np.testing.assert_allclose(colour(frame["image"]), [e / 60, 1.0, 0.5], atol=0.03)
    [range_input] = twin.inputs
    assert range_input["type"] == "range"
    assert (range_input["min"], range_input["max"], range_input["step"], range_input["value"]) == ("0", "9", "1", "9")
    assert "hidden" in range_input["oninput"] and "dataset.value" in range_input["oninput"]
    assert twin.outputs == ["60"]
    assert "with target: second" in panel._repr_mimebundle_()["text/html"]


def test_twin_always_holds_the_epoch_set_now_and_starts_there():
    panel, _, epoch = panel_with_dropdown()
    epoch.value = 2                                 # not one of the evenly spaced epochs
    twin = Twin(panel._repr_mimebundle_()["text/html"])
    values = [int(f["value"]) for f in twin.frames]
    assert values == [0, 2, 6, 14, 20, 26, 34, 40, 46, 54]
    assert [f["hidden"] for f in twin.frames] == [True, False] + [True] * 8
    assert twin.inputs[0]["value"] == "1" and twin.outputs == ["2"]
    np.testing.assert_allclose(colour(twin.frames[1]["image"]), [2 / 60, 0.0, 0.5], atol=0.03)


def test_frames_are_rendered_once_and_shared_with_the_live_panel():
    calls = []

    def plot(epoch):
        calls.append(epoch)
        return flat(epoch / 4, 0)

    panel = widgets.figure_panel(plot, {"epoch": widgets.epoch_selector([0, 1, 2, 3, 4])})
    assert calls == [4]
    panel._repr_mimebundle_()
    panel._repr_mimebundle_()
    assert sorted(calls) == [0, 1, 2, 3, 4]
    image = panel.children[-1]
    assert Image.open(io.BytesIO(image.value)).format == "PNG"


def test_twin_frames_are_rendered_for_the_twin_only_until_shown_and_equal_a_full_render(monkeypatch):
    live = []                                         # per render: is it the live panel's (its dpi)?
    real_save = widgets._save

    def save(fig, fmt, dpi, **kwargs):
        live.append(dpi == widgets.LIVE_DPI)
        return real_save(fig, fmt, dpi, **kwargs)

    monkeypatch.setattr(widgets, "_save", save)
    calls = []

    def plot(epoch):
        calls.append(epoch)
        return flat(epoch / 4, 0)

    slider = widgets.epoch_selector([0, 1, 2, 3, 4])
    panel = widgets.figure_panel(plot, {"epoch": slider})
    assert live == [True, False]                      # the value shown: the live PNG and the frame
    html_twin = panel._repr_mimebundle_()["text/html"]
    assert live[2:] == [False] * 4                    # the twin's other frames: the frame only
    _, frame_full = widgets._frames(plot(2))          # a frame rendered in full is the same frame
    assert base64.b64encode(frame_full).decode() in html_twin
    calls.clear()
    slider.value = 2                                   # shown live: its PNG is rendered now, once
    slider.value = 3
    slider.value = 2
    assert calls == [2, 3]
    assert Image.open(io.BytesIO(panel.children[-1].value)).format == "PNG"


@pytest.mark.parametrize("size", [(2, 1), (3.5, 3.5), (12, 2)])
def test_a_frame_is_as_wide_as_the_book_shows_it_whatever_the_figure_s_size(size):
    """The frame is TWIN_WIDTH_PX wide and has its figure's proportions: those of the figure's tight
    box as matplotlib saves it at its own dpi (a title and a colour bar stretch the box)."""
    def plot(epoch):
        fig, ax = plt.subplots(figsize=size)
        ax.imshow(np.arange(12.0).reshape(3, 4))
        ax.set_title(f"epoch {epoch}")
        fig.colorbar(ax.images[0], ax=ax)
        return fig

    panel = widgets.figure_panel(plot, {"epoch": widgets.epoch_selector([0, 1])})
    frames = Twin(panel._repr_mimebundle_()["text/html"]).frames
    reference = io.BytesIO()
    plot(1).savefig(reference, format="png", bbox_inches="tight")
    width, height = Image.open(reference).size
    for frame in frames:
        image = Image.open(io.BytesIO(frame["image"]))
        assert image.format == "WEBP" and image.width == widgets.TWIN_WIDTH_PX
        assert image.height == pytest.approx(height * widgets.TWIN_WIDTH_PX / width, rel=0.03)


def test_a_panel_without_an_epoch_control_gets_its_current_figure_alone():
    angle = W.IntSlider(value=30, min=0, max=90, description="θ (deg)")
    panel = widgets.figure_panel(lambda angle: flat(angle / 90, 0), {"angle": angle})
    angle.value = 60
    twin = Twin(panel._repr_mimebundle_()["text/html"])
    assert twin.inputs == [] and len(twin.frames) == 1 and not twin.frames[0]["hidden"]
    np.testing.assert_allclose(colour(twin.frames[0]["image"]), [60 / 90, 0, 0.5], atol=0.03)


def test_epoch_slider_twin_captions_come_from_the_run_history():
    class FakeRun:
        epochs = [0, 10, 20]
        history = {"epoch": [0, 10, 20], "train_loss": [1.0, 0.5, 0.25], "val_metric": [0.5, 0.75, 0.875]}

    panel = widgets.epoch_slider(FakeRun(), lambda run, epoch: flat(epoch / 20, 0), title="fake")
    twin = Twin(panel._repr_mimebundle_()["text/html"])
    assert [f["value"] for f in twin.frames] == ["0", "10", "20"]
    assert twin.frames[1]["caption"] == "epoch 10 of 20 · train loss 0.5 · val metric 0.75"


def test_twin_html_needs_a_frame():
    with pytest.raises(ValueError):
        widgets.twin_html([])


def sanitized(text: str) -> str:
    for regex, replace in get_sanitize_patterns((locations.REPO_ROOT / "tests" / "nbval_sanitize.cfg").read_text()):
        text = re.sub(regex, replace, text)
    return text


def test_nbval_compares_the_twin_without_its_image_bytes():
    """The frames are images, which nbval does not compare (tests/nbval_sanitize.cfg, twin_frames)."""
    one = widgets.twin_html([(0, "epoch 0", b"\x01\x02"), (5, "epoch 5", b"\x03")])
    other = widgets.twin_html([(0, "epoch 0", b"\xff\xfe\xfd"), (5, "epoch 5", b"\x00")])
    assert one != other and sanitized(one) == sanitized(other)
    moved = widgets.twin_html([(0, "epoch 0", b"\x01\x02"), (6, "epoch 6", b"\x03")])
    assert sanitized(moved) != sanitized(one)
