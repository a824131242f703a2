"""The notebooks' sliders in a real browser: JupyterLab driven through Chromium (reconstruction §3, §7).

A claim notebook with an epoch slider is opened in Lab, run through the Run menu (its runs are
cached beforehand, so nothing trains), and its slider is moved with the keyboard: the epoch caption
and the figure must both change. The primer's "build a DLGN by hand" panel gets the same check with
a hyperplane slider. Screenshots of every step go to ``build/browser/``.
"""
from __future__ import annotations

import re
import socket
import sys

import numpy as np
import pytest

from lab_session import non_loopback_addresses

CLAIM_NOTEBOOK = "01_paths.ipynb"
EPOCH_CAPTION = re.compile(r"epoch (\d+) of (\d+)")
PRIMER = "00_primer.ipynb"
# The "build a DLGN by hand" panel is the one with these sliders (the normals' angles).
HAND_BUILT_SLIDERS = ["θ1 (deg)", "θ2 (deg)", "θ3 (deg)"]


def test_server_listens_on_loopback_only_and_requires_a_token(lab_server):
    assert lab_server.listening_addresses() == {"127.0.0.1"}
    assert lab_server.request("/api/contents")[0] == 200
    assert lab_server.request("/api/contents", token=False)[0] == 403
    status, location = lab_server.request("/lab", token=False)
    assert status == 302 and location.startswith("/login"), (status, location)
    for address in non_loopback_addresses():
        with pytest.raises(OSError):
            socket.create_connection((address, lab_server.port), timeout=3).close()


def _figure_changes(lab, panel, slider, key: str, stem: str) -> tuple[np.ndarray, np.ndarray]:
    """Press ``key`` on ``slider`` and wait for the panel's image to be replaced.

    Returns the pixels before and after; screenshots ``<stem>-4-before`` and ``<stem>-5-after``.
    """
    panel.scroll_into_view_if_needed()
    assert slider.locator(".widget-label").is_visible(), "the slider's label is hidden"
    src_before, before = lab.image(panel)
    lab.screenshot(f"{stem}-4-before", panel)
    lab.press_on_slider(slider, key)
    lab.wait_for_new_image(panel, src_before)
    _, after = lab.image(panel)
    lab.screenshot(f"{stem}-5-after", panel)
    return before, after


def _open_and_run_all(lab, notebook, name: str) -> str:
    """Open a notebook (its runs cached), run all cells from the Run menu; returns the screenshot stem."""
    stem = name.removesuffix(".ipynb")
    lab.open_notebook(notebook(name))
    lab.screenshot(f"{stem}-1-opened")
    lab.run_all_cells(stem)
    assert lab.error_outputs() == []
    kernels = [p.cmdline() for p in lab.server.processes() if "ipykernel_launcher" in p.cmdline()[1:3]]
    assert kernels and all(k[0] == sys.executable for k in kernels), f"kernels not run by {sys.executable}: {kernels}"
    return stem


def test_epoch_slider_moves_caption_and_figure(lab, notebook):
    stem = _open_and_run_all(lab, notebook, CLAIM_NOTEBOOK)
    panel = lab.panel(["epoch"])
    slider = lab.slider(panel, "epoch")
    caption = panel.locator(".widget-html", has_text=EPOCH_CAPTION)
    epoch_before, last = map(int, EPOCH_CAPTION.search(caption.text_content()).groups())
    assert epoch_before == last, "the slider starts at the last saved epoch"
    assert slider.locator(".widget-readout").text_content() == str(last)

    before, after = _figure_changes(lab, panel, slider, "ArrowLeft", stem)

    epoch_after, _ = map(int, EPOCH_CAPTION.search(caption.text_content()).groups())
    assert epoch_after < epoch_before
    assert slider.locator(".widget-readout").text_content() == str(epoch_after)
    assert not np.array_equal(before, after), "the figure did not change with the epoch"
    assert lab.error_outputs() == []


def test_primer_hand_built_dlgn_redraws_when_a_hyperplane_turns(lab, notebook):
    stem = _open_and_run_all(lab, notebook, PRIMER)
    panel = lab.panel(HAND_BUILT_SLIDERS)
    slider = lab.slider(panel, HAND_BUILT_SLIDERS[0])
    angle_before = float(slider.locator(".widget-readout").text_content())

    before, after = _figure_changes(lab, panel, slider, "ArrowRight", stem)

    assert float(slider.locator(".widget-readout").text_content()) > angle_before
    assert not np.array_equal(before, after), "the figure did not change with the hyperplane"
    assert lab.error_outputs() == []
