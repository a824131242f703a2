"""Interactive figures for JupyterLab: epoch sliders over saved snapshots (never training), and a
generic slider panel (used by the primer's "build a DLGN by hand").

A figure is rendered to PNG once per slider value and cached, so stepping back and forth is
instant. The widget starts at the last epoch, so a notebook executed headlessly records the final
state.
"""
from __future__ import annotations

import io
from typing import Callable, Sequence

import ipywidgets as W
import matplotlib.pyplot as plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def figure_panel(plot_fn: Callable, controls: dict[str, W.ValueWidget], *, caption: Callable | None = None,
                 title: str = "") -> W.VBox:
    """A panel of controls above a figure: ``plot_fn(**values) -> Figure`` re-renders on change.

    Args:
        plot_fn: called with the current value of every control, by name.
        controls: name → ipywidgets control (sliders, dropdowns).
        caption: optional ``caption(**values) -> str`` shown (as text) under the controls.
    """
    cache: dict[tuple, bytes] = {}
    image = W.Image(format="png", layout=W.Layout(max_width="100%"))
    label = W.HTML()

    def render(*_):
        values = {name: c.value for name, c in controls.items()}
        key = tuple(sorted(values.items()))
        if key not in cache:
            cache[key] = _png(plot_fn(**values))
        image.value = cache[key]
        label.value = caption(**values) if caption else ""

    for c in controls.values():
        c.observe(render, names="value")
    render()
    parts = ([W.HTML(f"<b>{title}</b>")] if title else []) + [W.HBox(list(controls.values())), label, image]
    return W.VBox(parts)


def dropdown(options: Sequence, description: str, value=None) -> W.Dropdown:
    """A dropdown over ``options`` (values, or (label, value) pairs), starting at ``value`` (default: the first)."""
    first = options[0][1] if isinstance(options[0], tuple) else options[0]
    return W.Dropdown(options=list(options), value=first if value is None else value, description=description)


def epoch_selector(epochs: Sequence[int]) -> W.SelectionSlider:
    """A slider over snapshot epochs, starting at the last; it updates on release."""
    return W.SelectionSlider(options=list(epochs), value=epochs[-1], description="epoch",
                             continuous_update=False, layout=W.Layout(width="480px"))


def epoch_slider(runs, plot_fn: Callable, *, epochs: Sequence[int] | None = None, title: str = "") -> W.VBox:
    """A slider over the snapshot epochs of one run (or several with the same schedule).

    Args:
        runs: a ``Run`` or a list of runs; the slider offers epochs saved in all of them.
        plot_fn: ``plot_fn(runs, epoch) -> Figure`` (receives exactly what was passed as ``runs``).
        epochs: restrict to these epochs (default: every common snapshot epoch).
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
