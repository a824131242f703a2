"""The committed notebooks are small (issue 47: ``notebooks/`` at most 8 MB), and what keeps them
small loses nothing the book shows: the sliders' static frames are stored at the width the book
shows them (``widgets.TWIN_WIDTH_PX``), every figure is an indexed PNG (``plots.compact_png``)
within a few levels of the full-colour render, and every frame holds the same colours as lossless
WebP (``widgets.TWIN_FORMAT``).

The notebooks' checks read the committed files; the compact PNG's checks compare it with the
full-colour PNG matplotlib writes of the same figure (looked at side by side, the largest
differences are single pixels at the edges of lines and markers).
"""
from __future__ import annotations

import base64
import io
import json
import re

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from dlgn_lib import locations, plots, widgets

matplotlib.use("Agg")

NOTEBOOKS = sorted((locations.REPO_ROOT / "notebooks").glob("*.ipynb"))
MAX_BYTES = 8_000_000
FRAME = re.compile(r'class="dlgn-frame".*?src="data:image/(\w+);base64,([A-Za-z0-9+/=]+)"', re.DOTALL)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def committed_images() -> tuple[list[tuple[str, bytes]], list[tuple[str, str, bytes]]]:
    """(notebook, PNG bytes) of every figure output, and (notebook, MIME subtype, bytes) of every
    twin frame, in the committed notebooks."""
    figures, frames = [], []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "image/png" in data:
                    figures.append((path.name, base64.b64decode(_text(data["image/png"]))))
                for kind, encoded in FRAME.findall(_text(data.get("text/html", ""))):
                    frames.append((path.name, kind, base64.b64decode(encoded)))
    return figures, frames


@pytest.fixture(scope="module")
def images():
    return committed_images()


def test_the_notebooks_together_are_at_most_8_mb():
    sizes = {p.name: p.stat().st_size for p in NOTEBOOKS}
    assert len(sizes) >= 12
    assert sum(sizes.values()) <= MAX_BYTES, f"{sum(sizes.values()):,} bytes: {sizes}"


def test_every_twin_frame_is_as_wide_as_the_book_shows_it(images):
    _, frames = images
    panels = {p.name for p in NOTEBOOKS                       # a panel of dl.widgets, or a study's slider
              if any(call in p.read_text() for call in ("epoch_slider(", "figure_panel(", "_slider("))}
    assert {name for name, _, _ in frames} == panels          # every notebook with a panel has frames
    widths = {(name, Image.open(io.BytesIO(png)).width) for name, _, png in frames}
    assert {w for _, w in widths} == {widgets.TWIN_WIDTH_PX}, sorted(widths)


def test_every_figure_is_an_indexed_png_and_every_frame_a_webp_of_at_most_256_colours(images):
    figures, frames = images
    assert figures and frames
    figure_kinds = {(Image.open(io.BytesIO(data)).format, Image.open(io.BytesIO(data)).mode) for _, data in figures}
    assert figure_kinds == {("PNG", "P")}
    frame_kinds = {(kind, Image.open(io.BytesIO(data)).format) for _, kind, data in frames}
    assert frame_kinds == {("webp", "WEBP")}
    colours = [len(Image.open(io.BytesIO(data)).convert("RGB").getcolors(1 << 24)) for _, _, data in frames]
    assert max(colours) <= 256


# --- the compact PNG against matplotlib's full-colour PNG of the same figure ------------------------

def full_png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)


def shaded_figure():
    """A smooth diverging shading under lines, points and text: the primer's decision-function panels."""
    fig, ax = plt.subplots(figsize=(6, 5))
    x, y = np.meshgrid(np.linspace(-2, 2, 400), np.linspace(-2, 2, 400))
    shade = ax.imshow(np.tanh(x * y + 0.5 * x), cmap="RdBu_r", vmin=-1, vmax=1, extent=(-2, 2, -2, 2))
    rng = np.random.default_rng(0)
    for _ in range(8):
        ax.axline(tuple(rng.uniform(-1, 1, 2)), slope=rng.normal(), color="seagreen", lw=1)
    ax.scatter(*rng.uniform(-2, 2, (2, 60)), s=6, c="crimson", edgecolors="white", linewidths=0.3)
    ax.set_title("decision function, test acc 0.867")
    fig.colorbar(shade, ax=ax, label="tanh ŷ(x)")
    return fig


def test_a_figure_of_few_colours_is_stored_exactly():
    fig = plt.figure(figsize=(3, 2))
    fig.patch.set_facecolor((0.2, 0.6, 0.4))
    fig.add_artist(plt.Rectangle((0.1, 0.1), 0.5, 0.5, color=(0.9, 0.1, 0.3), antialiased=False))
    full = full_png(fig)
    assert len(Image.open(io.BytesIO(full)).convert("RGB").getcolors()) <= 256
    compact = plots.compact_png(full)
    assert Image.open(io.BytesIO(compact)).mode == "P"
    np.testing.assert_array_equal(pixels(compact), pixels(full))


def rms(a: np.ndarray, b: np.ndarray) -> float:
    """RMS difference on the 0-255 scale."""
    assert a.shape == b.shape
    return float(np.sqrt(((a - b) ** 2).mean()))


def test_a_shaded_figure_stays_within_2_levels_rms_at_under_half_the_bytes():
    """Thousands of colours, a full-range shading: 256 of them, well chosen, stay within 2 levels RMS
    (Pillow's median cut without its k-means refinement, or its octree, are near 3)."""
    full = full_png(shaded_figure())
    assert len(Image.open(io.BytesIO(full)).convert("RGB").getcolors(1 << 24)) > 2000
    compact = plots.compact_png(full)
    assert rms(pixels(full), pixels(compact)) < 2.0
    assert len(compact) < 0.5 * len(full), (len(compact), len(full))


def test_a_png_with_transparency_stays_lossless():
    fig = shaded_figure()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=50, transparent=True)
    plt.close(fig)
    compact = plots.compact_png(buffer.getvalue())
    original = np.asarray(Image.open(buffer).convert("RGBA"))
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(compact)).convert("RGBA")), original)


def test_in_an_ipython_shell_figures_are_shown_as_compact_pngs():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    shell = InteractiveShell.instance()
    formatter = shell.display_formatter.formatters["image/png"]
    try:
        plots.show_compact_figures()
        fig = shaded_figure()
        data, _ = shell.display_formatter.format(fig)
        shown = base64.b64decode(data["image/png"])
        inline = print_figure(fig, "png")                     # IPython's own PNG of the figure
        assert Image.open(io.BytesIO(shown)).mode == "P" and len(shown) < len(inline)
        assert rms(pixels(inline), pixels(shown)) < 2.0
    finally:
        plt.close("all")
        formatter.pop(Figure, None)
        InteractiveShell.clear_instance()
