"""The 90-minute class's slides (``make slides``) in a real browser: system Chromium through
Playwright. Built by ``dlgn_lib.record.slides`` into a throwaway folder and served from 127.0.0.1; every
deck must load without a console error or a request outside the folder (reveal.js, jQuery,
RequireJS and MathJax are copied beside the slides), start reveal.js, move to the next slide on
the arrow key, and show the notebook's figures, its verdict lines and typeset formulas.
Screenshots go to ``build/browser/slides-*.png``."""
from __future__ import annotations

import functools
import http.server
import threading

import pytest
from playwright.sync_api import sync_playwright

from dlgn_lib import locations

from dlgn_lib.record import slides
from lab_session import CHROMIUM_ARGS


@pytest.fixture(scope="module")
def decks(chromium, tmp_path_factory):
    out = tmp_path_factory.mktemp("slides")
    return out, slides.build(out)


@pytest.fixture(scope="module")
def served(decks):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(decks[0])))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_every_deck_loads_offline_steps_forward_and_shows_figures_and_verdicts(chromium, decks, served):
    shots = locations.build_dir() / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    assert [p.name for p in decks[1]] == [f"{nb.stem}.slides.html" for nb in slides.class_notebooks()]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            for deck in decks[1]:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                errors, outside = [], []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("response", lambda r: errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)

                def route(r, seen):
                    if r.request.url.startswith(served) or r.request.url.startswith("data:"):
                        r.continue_()
                    else:
                        seen.append(r.request.url)
                        r.abort()
                page.route("**/*", functools.partial(route, seen=outside))
                page.goto(served + deck.name, wait_until="networkidle")
                page.wait_for_selector(".reveal.ready", timeout=30_000)            # reveal.js initialised
                total = page.evaluate("document.querySelectorAll('.reveal .slides section').length")
                assert total >= 5, (deck.name, total)
                page.screenshot(path=str(shots / f"slides-{deck.stem}-first.png"))
                first = page.evaluate("location.hash")
                page.keyboard.press("ArrowRight")
                page.wait_for_function(f"location.hash !== {first!r}", timeout=10_000)  # history: #/1
                text = page.evaluate("document.querySelector('.reveal .slides').innerText")
                assert "VERDICT" in text or deck.name.startswith("00_"), deck.name     # 00 judges no claim
                assert page.evaluate("document.querySelectorAll('.reveal .slides img').length") >= 2
                broken = page.evaluate("Array.from(document.images).filter(i => i.complete && !(i.naturalWidth > 0))"
                                       ".map(i => i.src.slice(0, 80))")
                assert broken == [], (deck.name, broken)
                page.wait_for_function("window.MathJax && MathJax.isReady", timeout=30_000)   # MathJax 2, local
                if deck.name.startswith("01_"):   # its title slide states the path sum as a formula
                    page.wait_for_function("document.querySelectorAll('.mjx-chtml').length > 0", timeout=30_000)
                page.screenshot(path=str(shots / f"slides-{deck.stem}-second.png"))
                assert outside == [], (deck.name, outside)
                assert errors == [], (deck.name, errors)
                page.close()
        finally:
            browser.close()
