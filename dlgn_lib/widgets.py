"""Interactive figures for JupyterLab: epoch sliders over saved snapshots (never training), and a
generic slider panel (used by the primer's "build a DLGN by hand").

A figure is rendered to PNG once per slider value and cached, so stepping back and forth is
instant (the static twin's other frames are rendered for the twin only, their live PNGs when first
shown). The widget starts at the last epoch, so a notebook executed headlessly records the final
state. Every image has at most 256 colours (``plots.compact_png``), so a saved notebook stays small.

Every panel also carries a static twin for readers without a kernel (the rendered book): its
display bundle holds, next to the widget view, a ``text/html`` fallback with frames of the epoch
control pre-rendered (at most :data:`TWIN_FRAMES` evenly spaced epochs, every other control at its
current value; lossless WebP images :data:`TWIN_WIDTH_PX` wide, the width the book shows them at,
base64-embedded)
behind an HTML range input whose few lines of inline JavaScript show the chosen frame and its
epoch. JupyterLab prefers the widget view and keeps showing the live panel; the book is configured
to prefer ``text/html`` (docs/book/conf.py). A panel without an epoch control gets a twin of one
frame, its current state, and no range input.
"""
from __future__ import annotations

import base64
import html
import io
from typing import Callable, Sequence

import ipywidgets as W
import matplotlib.pyplot as plt
from PIL import Image

from .plots import TEXT_PX_KEY, _DrawnText, compact_png

__all__ = ["epoch_slider", "figure_panel"]

#: Most frames a static twin holds (evenly spaced over the epoch control's values, last included).
TWIN_FRAMES = 10
#: Width in pixels of a twin's frames: what the book shows of one at a 1280 px window (its content
#: column, 688 CSS px, less the twin's border and padding: docs/book/_static/book.css), so each frame
#: is stored at the size it is shown, whatever its figure's size.
TWIN_WIDTH_PX = 670
#: Resolution of the live panel's PNGs (JupyterLab scales them to the cell's width).
LIVE_DPI = 90
#: How a twin's frames are stored: lossless WebP of their indexed colours, about 20 % fewer bytes
#: than the same pixels as PNG (libwebp's method 4: a hundredth of a second a frame).
TWIN_FORMAT = {"format": "webp", "lossless": True, "quality": 100, "method": 4}
_TWIN_TYPE = TWIN_FORMAT["format"]
#: The control a twin steps through.
TWIN_CONTROL = "epoch"

# Shows the frame whose index the range input holds, and that frame's value; no ids, so that the
# same HTML works wherever it is pasted and a notebook's output is the same on every run.
_TWIN_SCRIPT = ("var t=this.closest('.dlgn-twin'),f=t.querySelectorAll('.dlgn-frame'),i=+this.value;"
                "f.forEach(function(e,j){e.hidden=j!==i});"
                "t.querySelector('.dlgn-twin-value').textContent=f[i].dataset.value")


def _save(fig, fmt: str, dpi: float, **kwargs) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", **kwargs)
    return buf.getvalue()


def _twin_frame(fig) -> bytes:
    """``fig`` as a twin's frame, :data:`TWIN_WIDTH_PX` wide: drawn at the dpi that makes its tight
    box (with its padding) that wide, the pixel or two that rounding leaves over taken off, or
    added, at the right edge, which is padding; its colours those of ``plots.compact_png``."""
    width_in = fig.get_tightbbox().width + 2 * plt.rcParams["savefig.pad_inches"]
    with _DrawnText() as drawn:   # the sizes of the texts this drawing shows
        image = Image.open(io.BytesIO(_save(fig, "png", TWIN_WIDTH_PX / width_in,
                                            pil_kwargs={"compress_level": 1}))).convert("RGB")
    pt = drawn.smallest
    if image.width != TWIN_WIDTH_PX:
        framed = Image.new("RGB", (TWIN_WIDTH_PX, image.height), image.getpixel((image.width - 1, 0)))
        framed.paste(image, (0, 0))
        image = framed
    buf = io.BytesIO()   # the smallest text's pixels at this dpi kept in the frame (plots.stamped_text_px)
    xmp = b"" if pt is None else f'<dlgn {TEXT_PX_KEY}="{pt * TWIN_WIDTH_PX / width_in / 72:.2f}"/>'.encode()
    Image.open(io.BytesIO(compact_png(image))).save(buf, **TWIN_FORMAT, xmp=xmp)
    return buf.getvalue()


def _frames(fig) -> tuple[bytes, bytes]:
    """The live panel's PNG and the twin's frame of one figure, which is then closed."""
    try:
        return compact_png(_save(fig, "png", LIVE_DPI)), _twin_frame(fig)
    finally:
        plt.close(fig)


def _twin_only(fig) -> bytes:
    """The twin's frame of one figure, which is then closed (a frame the live panel does not show yet)."""
    try:
        return _twin_frame(fig)
    finally:
        plt.close(fig)


def evenly_spaced(values: Sequence, n: int = TWIN_FRAMES) -> list:
    """At most ``n`` of ``values``, evenly spaced by position, the first and the last included."""
    values = list(values)
    if len(values) <= n:
        return values
    picks = sorted({round(k * (len(values) - 1) / (n - 1)) for k in range(n)})
    return [values[i] for i in picks]


def _control_values(control) -> list:
    """Every value a control offers, in order (selection widgets' options, or a slider's range)."""
    if hasattr(control, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in control.options]
    return list(range(control.min, control.max + 1, control.step))


def _shown(control) -> str:
    """What a control shows now: a selection's label, else its value."""
    label = getattr(control, "label", None)
    return str(control.value if label is None else label)


def twin_html(frames: Sequence[tuple[object, str, bytes]], *, start: int | None = None, title: str = "",
              control: str = TWIN_CONTROL, note: str = "") -> str:
    """The static twin: ``frames`` as (value, caption HTML, image bytes in :data:`TWIN_FORMAT`), one
    shown at a time.

    With more than one frame a range input over the frames' indices picks the one shown (the last,
    or ``start``, at first) and writes its value beside the input; with one there is no input.
    """
    if not frames:
        raise ValueError("a static twin needs at least one frame")
    start = len(frames) - 1 if start is None else start
    parts = ['<div class="dlgn-twin">']
    if title:
        parts.append(f"<b>{title}</b>")
    if len(frames) > 1:
        parts.append(
            f'<div class="dlgn-twin-control"><label>{html.escape(control)} '
            f'<input type="range" min="0" max="{len(frames) - 1}" step="1" value="{start}" '
            f'aria-label="{html.escape(control)}" oninput="{html.escape(_TWIN_SCRIPT)}"> '
            f'<output class="dlgn-twin-value">{html.escape(str(frames[start][0]))}</output></label></div>')
    if note:
        parts.append(f'<div class="dlgn-twin-note"><small>{note}</small></div>')
    for i, (value, caption, image) in enumerate(frames):
        data = base64.b64encode(image).decode("ascii")
        parts.append(
            f'<div class="dlgn-frame" data-value="{html.escape(str(value))}"{"" if i == start else " hidden"}>'
            + (f"<div>{caption}</div>" if caption else "")
            + f'<img alt="{html.escape(control)} {html.escape(str(value))}" style="width:100%" '
              f'src="data:image/{_TWIN_TYPE};base64,{data}"></div>')
    parts.append("</div>")
    return "\n".join(parts)


class Panel(W.VBox):
    """A ``VBox`` whose display carries a static twin (``text/html``) beside the widget view.

    ``twin()`` builds the twin's HTML; it is called each time the panel is displayed, so the twin
    shows the other controls as they are then.
    """

    def __init__(self, children, twin: Callable[[], str], **kwargs):
        super().__init__(children, **kwargs)
        self._twin = twin

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data["text/html"] = self._twin()
        return data


def figure_panel(plot_fn: Callable, controls: dict[str, W.ValueWidget], *, caption: Callable | None = None,
                 title: str = "") -> Panel:
    """A panel of controls above a figure: ``plot_fn(**values) -> Figure`` re-renders on change.

    Args:
        plot_fn: called with the current value of every control, by name.
        controls: name → ipywidgets control (sliders, dropdowns).
        caption: optional ``caption(**values) -> str`` shown (as text) under the controls.

    Its static twin steps through the control named ``"epoch"`` (at most :data:`TWIN_FRAMES` of
    its values), every other control at its current value; without such a control, it is the
    current figure alone.
    """
    pngs: dict[tuple, bytes] = {}     # the live panel's images, rendered when first shown
    twins: dict[tuple, bytes] = {}    # the twin's frames
    image = W.Image(format="png", layout=W.Layout(max_width="100%"))
    label = W.HTML()

    def png(values: dict) -> bytes:
        key = tuple(sorted(values.items()))
        if key not in pngs:
            pngs[key], twins[key] = _frames(plot_fn(**values))
        return pngs[key]

    def frame(values: dict) -> bytes:
        key = tuple(sorted(values.items()))
        if key not in twins:    # a twin frame the live panel has not shown: its PNG waits until it is
            twins[key] = _twin_only(plot_fn(**values))
        return twins[key]

    def render(*_):
        values = {name: c.value for name, c in controls.items()}
        image.value = png(values)
        label.value = caption(**values) if caption else ""

    def twin() -> str:
        current = {name: c.value for name, c in controls.items()}
        others = "; ".join(f"{html.escape(c.description or name)}: {html.escape(_shown(c))}"
                           for name, c in controls.items() if name != TWIN_CONTROL)
        if TWIN_CONTROL not in controls:
            return twin_html([("", caption(**current) if caption else "", frame(current))], title=title,
                             note="A static copy of the figure as set here; moving the controls needs a "
                                  "running kernel.")
        shown = evenly_spaced(_control_values(controls[TWIN_CONTROL]))
        if current[TWIN_CONTROL] not in shown:    # the value set now is always one of the frames
            shown = sorted(set(shown[:-1]) | {current[TWIN_CONTROL]})
        rows = []
        for value in shown:
            values = {**current, TWIN_CONTROL: value}
            rows.append((value, caption(**values) if caption else "", frame(values)))
        note = (f"A static copy: {len(shown)} of the {len(_control_values(controls[TWIN_CONTROL]))} "
                f"{TWIN_CONTROL}s" + (f", with {others}" if others else "") + ".")
        return twin_html(rows, start=shown.index(current[TWIN_CONTROL]), title=title, note=note)

    for c in controls.values():
        c.observe(render, names="value")
    render()
    parts = ([W.HTML(f"<b>{title}</b>")] if title else []) + [W.HBox(list(controls.values())), label, image]
    return Panel(parts, twin)


def dropdown(options: Sequence, description: str, value=None) -> W.Dropdown:
    """A dropdown over ``options`` (values, or (label, value) pairs), starting at ``value`` (default: the first)."""
    first = options[0][1] if isinstance(options[0], tuple) else options[0]
    return W.Dropdown(options=list(options), value=first if value is None else value, description=description)


def epoch_selector(epochs: Sequence[int]) -> W.SelectionSlider:
    """A slider over snapshot epochs, starting at the last; it updates on release."""
    return W.SelectionSlider(options=list(epochs), value=epochs[-1], description="epoch",
                             continuous_update=False, layout=W.Layout(width="480px"))


def epoch_slider(runs, plot_fn: Callable, *, epochs: Sequence[int] | None = None, title: str = "") -> Panel:
    """A slider over the snapshot epochs of one run (or several with the same schedule).

    Args:
        runs: a ``Run`` or a list of runs; the slider offers epochs saved in all of them.
        plot_fn: ``plot_fn(runs, epoch) -> Figure`` (receives exactly what was passed as ``runs``).
        epochs: restrict to these epochs (default: every common snapshot epoch).

    Displayed, it also carries a static twin of at most :data:`TWIN_FRAMES` of those epochs.
    """
    run_list = runs if isinstance(runs, (list, tuple)) else [runs]
    common = sorted(set.intersection(*(set(r.epochs) for r in run_list)))
    if epochs is not None:
        missing = sorted(set(epochs) - set(common))
        if missing:
            raise ValueError(f"epochs {missing} have no snapshot; saved epochs: {common}")
        common = sorted(epochs)
    if not common:
        raise ValueError("the runs share no snapshot epoch")
    slider = epoch_selector(common)

    def caption(epoch):
        hist = run_list[0].history
        i = min(range(len(hist["epoch"])), key=lambda j: abs(hist["epoch"][j] - epoch))
        return (f"epoch {epoch} of {common[-1]} &middot; train loss {hist['train_loss'][i]:.4g}"
                f" &middot; val metric {hist['val_metric'][i]:.4g}")

    return figure_panel(lambda epoch: plot_fn(runs, epoch), {"epoch": slider}, caption=caption, title=title)
