"""How large a figure's smallest text reads: the size each image keeps (plots.stamped_text_px),
checked against the glyphs' own height in the image's pixels."""
import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from dlgn_lib import plots, widgets  # noqa: E402

#: DejaVu Sans (matplotlib's default font): a capital H is 0.729 of the font size tall.
CAP_HEIGHT = 0.729


def _letter_figure(size_pt: float, width_in: float = 4.0):
    fig = plt.figure(figsize=(width_in, 1.5), dpi=100)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.plot([0, 1], [0, 1], alpha=0)
    ax.tick_params(labelsize=3)
    ax.axis("off")                                           # its 3 pt tick labels are not drawn
    ax.text(0.5, 0.5, "H", fontsize=size_pt, ha="center", va="center")
    ax.text(0.1, 0.1, "", fontsize=2)                       # empty: not text a reader sees
    ax.text(0.9, 0.1, "x", fontsize=3).set_visible(False)   # hidden
    return fig


def _ink_height(image: bytes) -> int:
    """Rows of the image holding dark pixels: the glyph's height in pixels."""
    gray = np.asarray(Image.open(io.BytesIO(image)).convert("L"))
    rows = np.where((gray < 128).any(axis=1))[0]
    return int(rows[-1] - rows[0] + 1)


@pytest.mark.parametrize("size_pt", [10, 24])
def test_an_inline_image_keeps_its_smallest_text_in_its_own_pixels(size_pt):
    fig = _letter_figure(size_pt)
    assert plots.smallest_text_pt(fig) == size_pt   # the empty and the hidden texts are left out
    png = base64.b64decode(plots._inline_png(fig))
    stamped = plots.stamped_text_px(png)
    assert stamped == pytest.approx(size_pt * 100 / 72, abs=0.01)
    assert _ink_height(png) == pytest.approx(CAP_HEIGHT * stamped, abs=1.5)
    plt.close(fig)


def test_a_twin_frame_keeps_its_smallest_text_at_the_width_it_is_drawn():
    """A frame is drawn 670 px wide whatever the figure's size: a wide figure's text shrinks with it."""
    for width_in, expected_shrink in ((3.0, False), (12.0, True)):
        fig = _letter_figure(20, width_in)
        frame = widgets._twin_frame(fig)
        stamped = plots.stamped_text_px(frame)
        assert Image.open(io.BytesIO(frame)).width == widgets.TWIN_WIDTH_PX
        assert _ink_height(frame) == pytest.approx(CAP_HEIGHT * stamped, abs=1.5)
        assert (stamped < 20 * 100 / 72) == expected_shrink
        plt.close(fig)


def test_tick_labels_count_once_drawn_and_an_image_without_a_stamp_says_none():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=6.5)
    ax.set_title("title", fontsize=12)
    fig.canvas.draw()
    assert plots.smallest_text_pt(fig) == 6.5
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert plots.stamped_text_px(buffer.getvalue()) is None
    plt.close(fig)
