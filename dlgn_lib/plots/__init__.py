"""Figures: one style, one colour per model kind, and ``save_figure`` (PNG + PDF in the figures folder:
``build/figures``, or the committed ``figures/`` under ``make figures``; ``locations.figures_dir``).

Plot functions live in topic submodules (``dlgn_lib.plots.<topic>``); each returns a
``matplotlib.figure.Figure`` and never saves: notebooks decide what is saved.

The style is seaborn's "ticks" theme with the series' rc values (``STYLE``: font sizes, savefig dpi,
the SVG hash salt, …), set once by ``use_style`` on import. Every figure that shows model kinds
draws each in its registry colour (``MODEL_COLORS``), and every heatmap or map has a labelled
colour bar.
"""
from __future__ import annotations

import importlib
import os
import shutil
import sys
from types import MappingProxyType

import matplotlib

__all__ = ["FIGURE_FLOOR_RMS", "MODEL_COLORS", "MODEL_NAMES", "compact_png", "figure_rms", "save_figure",
           "show_compact_figures", "smallest_text_pt", "stamped_text_px", "use_figure_tolerance"]

if not os.environ.get("MPLBACKEND") and "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # headless outside Jupyter; inside a kernel the inline backend stays
import matplotlib.pyplot as plt  # noqa: E402,F401 (pyplot after the backend is chosen)
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from .. import costs, locations, models  # noqa: E402
from ..text import listed  # noqa: E402

STYLE = {
    "figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight",
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "legend.fontsize": 8,
    "legend.title_fontsize": 9, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": False,
    "image.cmap": "viridis", "svg.hashsalt": "dlgn", "pdf.compression": 6,
}
#: One colour per run kind (``models.RUN_KINDS``), the same in every notebook: a read-only view
#: of the registry ``models.KINDS`` (conv variants share their fully connected kind's colour).
MODEL_COLORS = MappingProxyType({kind: models.kind_color(kind) for kind in models.RUN_KINDS})
#: Display name of each run kind, from ``models.KINDS`` (conv variants: "conv <name>"); read-only.
MODEL_NAMES = MappingProxyType({kind: models.kind_name(kind) for kind in models.RUN_KINDS})


#: seaborn theme of the series (``use_style``); ``STYLE`` overrides its rc values.
THEME = {"context": "notebook", "style": "ticks", "palette": "deep"}


def use_style() -> None:
    """Apply the series' style: seaborn's theme ``THEME`` with the rc values of ``STYLE`` on top."""
    sns.set_theme(**THEME, rc=STYLE)


def heatmap(ax, values, *, vmin: float, vmax: float, cmap: str, square: bool = False, **options):
    """Draw a matrix as ``seaborn.heatmap`` draws it (one cell per entry, row 0 on top, NaN cells left
    blank, no spines, no tick labels, rasterised so that a PDF stays small) and no colour bar of its
    own; returns the mesh, for one shared ``fig.colorbar``.

    Drawn with ``pcolormesh`` directly: ``seaborn.heatmap`` draws the whole figure once per call (to
    check its tick labels for overlap), which made a grid of n panels cost n whole-figure draws.
    """
    data = np.asarray(values, dtype=float)
    mesh = ax.pcolormesh(np.ma.masked_where(np.isnan(data), data), cmap=cmap, vmin=vmin, vmax=vmax,
                         rasterized=True, **options)
    ax.set(xlim=(0, data.shape[1]), ylim=(0, data.shape[0]), xticks=[], yticks=[])
    ax.invert_yaxis()
    for spine in ax.spines.values():
        spine.set_visible(False)
    if square:
        ax.set_aspect("equal")
    return mesh


#: RMS (0-255 scale) below which two renderings of a figure count as the same picture when no
#: measured spread says more (reconstruction §7), and the relative size difference within which
#: two PNGs are compared on their common area.
FIGURE_FLOOR_RMS = 0.5
FIGURE_SIZE_SLACK = 0.02


def figure_rms(expected, actual) -> float:
    """RMS pixel difference of two PNGs (paths, bytes or file objects) on the 0-255 scale, as
    ``matplotlib.testing.compare.calculate_rms`` computes it; sizes within ``FIGURE_SIZE_SLACK``
    are compared on their common area, others give inf."""
    import io
    import math

    from matplotlib.image import imread
    from matplotlib.testing.compare import calculate_rms

    def pixels(image):
        array = imread(io.BytesIO(image) if isinstance(image, bytes) else image, format="png")
        return (array[..., :3] * 255).round().astype("int16")

    a, b = pixels(expected), pixels(actual)
    if a.shape != b.shape:
        if any(abs(x - y) > FIGURE_SIZE_SLACK * max(x, y) for x, y in zip(a.shape[:2], b.shape[:2])):
            return math.inf
        rows, cols = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
        a, b = a[:rows, :cols], b[:rows, :cols]
    return float(calculate_rms(a, b))


def _floor_tolerance(notebook: str, name: str) -> float:
    return FIGURE_FLOOR_RMS


_FIGURE_TOLERANCE = _floor_tolerance


def use_figure_tolerance(tolerance) -> None:
    """Install how far a re-rendered figure may differ from the saved one and still count as the
    same picture: ``tolerance(notebook, png_name) -> allowed RMS``, given from above (``dl.setup``
    passes the spread record's, reconstruction §7); ``None``: ``FIGURE_FLOOR_RMS``."""
    global _FIGURE_TOLERANCE
    _FIGURE_TOLERANCE = tolerance or _floor_tolerance


def compact_png(png, text_px: float | None = None) -> bytes:
    """A PNG (bytes, or a Pillow image) as an indexed PNG of at most 256 colours, about 40 % of the
    bytes: exact for a figure of few colours, else Pillow's median-cut palette refined by k-means
    (within 2 levels RMS of the full-colour pixels even across a full-range shading, with no banding
    at display size); one with any transparency stays lossless. ``text_px``: the figure's smallest
    text in pixels of this image, kept in the file (:func:`stamped_text_px`)."""
    import io

    from PIL import Image, PngImagePlugin

    image = png if isinstance(png, Image.Image) else Image.open(io.BytesIO(png))
    if image.mode != "RGBA" or image.getchannel("A").getextrema()[0] == 255:
        image = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, kmeans=1)
    info = PngImagePlugin.PngInfo()
    if text_px is not None:
        info.add_text(TEXT_PX_KEY, f"{text_px:.2f}")
    out = io.BytesIO()
    image.save(out, "png", optimize=True, pnginfo=info)
    return out.getvalue()


#: The key under which an image of a figure keeps its smallest text's size in its own pixels (a PNG
#: text chunk; a twin frame's XMP packet), so that what shows it can tell how large it reads.
TEXT_PX_KEY = "dlgn-smallest-text-px"


class _DrawnText:
    """Within it, every non-empty text the Agg renderer draws (labels, ticks, legends, mathtext) adds its
    size in points to ``sizes``: what a reader sees, not what hidden or axis-off artists hold."""

    def __enter__(self):
        from matplotlib.backends.backend_agg import RendererAgg
        self.sizes, self._original = [], RendererAgg.draw_text
        sizes, original = self.sizes, self._original

        def draw_text(renderer, gc, x, y, s, prop, *args, **kwargs):
            if s.strip():
                sizes.append(prop.get_size_in_points())
            return original(renderer, gc, x, y, s, prop, *args, **kwargs)
        RendererAgg.draw_text = draw_text
        return self

    def __exit__(self, *exc):
        from matplotlib.backends.backend_agg import RendererAgg
        RendererAgg.draw_text = self._original

    @property
    def smallest(self) -> float | None:
        return min(self.sizes) if self.sizes else None


def smallest_text_pt(fig) -> float | None:
    """The font size (points) of the smallest text ``fig`` draws (drawn once to find out); None without text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    with _DrawnText() as drawn:
        (fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)).draw()
    return drawn.smallest


def stamped_text_px(image: bytes) -> float | None:
    """The smallest text's size in pixels that :func:`compact_png` (or a twin frame) kept in ``image``."""
    import io
    import re

    from PIL import Image

    opened = Image.open(io.BytesIO(image))
    if value := getattr(opened, "text", {}).get(TEXT_PX_KEY) if opened.format == "PNG" else None:
        return float(value)
    xmp = opened.info.get("xmp", b"")
    found = re.search(rf'{TEXT_PX_KEY}="([0-9.]+)"'.encode(), xmp if isinstance(xmp, bytes) else xmp.encode())
    return float(found[1]) if found else None


def _inline_png(fig):
    """The inline backend's PNG of ``fig`` (IPython's ``print_figure``: its dpi, colours and tight
    box), as :func:`compact_png`, base64-encoded as IPython's own PNG formatter returns it."""
    import base64

    from IPython.core.pylabtools import print_figure
    with _DrawnText() as drawn:
        png = print_figure(fig, "png")   # at the figure's dpi
    if png is None:
        return None
    pt = drawn.smallest
    return base64.b64encode(compact_png(png, None if pt is None else pt * fig.dpi / 72)).decode("ascii")


def show_compact_figures() -> None:
    """In an IPython kernel, show every figure as a :func:`compact_png` (IPython's documented way to
    format a type, ``formatters["image/png"].for_type``), so that an executed notebook stays small;
    elsewhere nothing changes. ``dl.setup`` calls it."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "display_formatter"):
        from matplotlib.figure import Figure
        try:    # the inline backend sets IPython's figure formats when first imported: import it first
            import matplotlib_inline.backend_inline  # noqa: F401
        except ImportError:
            pass
        shell.display_formatter.formatters["image/png"].for_type(Figure, _inline_png)


class FigureWriteError(OSError):
    """A figure could not be written (full disk, folder not writable); nothing half-written is left."""


@costs.spent("io")
def save_figure(fig, figure_id: str, *, formats=("png", "pdf"), verbose: bool = True) -> None:
    """Save ``fig`` as ``<figure_id>.png`` and ``.pdf`` in ``locations.figures_dir()`` (``build/figures``
    unless ``DLGN_FIGURES_DIR`` names another, as ``make figures`` does): fixed metadata, atomic
    writes, and no write at all when the saved figure already shows the same thing.

    The PNG decides: when the saved PNG has the same pixels, or differs by no more than the RMS
    the figure showed across CPU code paths (``docs/spread.json``, reconstruction §7; installed by
    ``dl.setup``, ``use_figure_tolerance``), every format
    is left as it is, so re-running a notebook leaves a checkout clean. ``figure_id`` starts with
    the notebook id, e.g. "05_arcs". Prints ``saved <paths>`` (relative to the repository) once the
    files hold this figure, the same line whether they were written now or already showed it, so
    that a notebook's printed output does not depend on what the folder held before the run; it
    returns nothing, so a notebook cell ending in it shows no path objects.

    Raises:
        FigureWriteError: a file could not be written; its temporary file is removed and the
            figure saved before is kept.
    """
    import io

    if not figure_id or "/" in figure_id or figure_id.startswith("."):
        raise ValueError(f"figure_id={figure_id!r}: use a plain name such as '05_arcs'")
    out_dir = locations.figures_dir()
    rendered = {}
    for fmt in formats:
        buffer = io.BytesIO()
        metadata = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Software": None}
        fig.savefig(buffer, format=fmt, metadata=metadata)
        rendered[fmt] = buffer.getvalue()
    paths = {fmt: out_dir / f"{figure_id}.{fmt}" for fmt in formats}
    if "png" in rendered and all(p.exists() for p in paths.values()):
        old = paths["png"].read_bytes()
        same = old == rendered["png"]
        if not same:
            notebook = figure_id.split("_", 1)[0]
            same = figure_rms(old, rendered["png"]) <= _FIGURE_TOLERANCE(notebook, paths["png"].name)
        if same:
            if verbose:
                _print_saved(paths)
            return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FigureWriteError(f"cannot create the figures folder {out_dir}: {exc.strerror or exc}") from None
    for fmt, path in paths.items():
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        try:
            tmp.write_bytes(rendered[fmt])
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            free = _free_bytes(out_dir)
            raise FigureWriteError(
                f"cannot write {locations.display_path(path)} ({len(rendered[fmt]):,} bytes): "
                f"{exc.strerror or exc}; {free:,} bytes free on that disk. The figure saved before "
                f"(if any) is kept; free some space or set DLGN_FIGURES_DIR to another folder") from None
    if verbose:
        _print_saved(paths)


def _print_saved(paths) -> None:
    print(listed("saved", [locations.display_path(p) for p in paths.values()]))


def _free_bytes(folder) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


use_style()

#: Topic modules of plot functions, imported on first use (``dl.plots.circle``, …).
TOPICS = ("circle", "hyperplanes", "images", "planes", "regions", "schematic", "sensitivity", "tables")


def __getattr__(name: str):
    if name in TOPICS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
