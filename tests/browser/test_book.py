"""The rendered book (``make book``) in a real browser: system Chromium through Playwright.

The book is built into a throwaway folder by docs/book/build.py, the code ``make book`` runs, and
served from 127.0.0.1 by http.server in a thread. Every page must load without a console error
and every image must decode; on a notebook page, moving a slider's static twin (its range input
set and an ``input`` event sent, as a drag does) must show another frame and its epoch. The book
needs nothing from outside (MathJax ships with it): any outside request fails the test, and the
formulas of a notebook page must be typeset. Screenshots go to
``build/browser/book-*.png``. Without Chromium the test is skipped locally and fails under CI=true
(the ``chromium`` fixture of conftest.py).
"""
from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from dlgn_lib import locations
from lab_session import CHROMIUM_ARGS

BUILD = locations.REPO_ROOT / "docs" / "book" / "build.py"
# The outside resources the book may ask for: none (MathJax is copied into it).
ALLOWED_OUTSIDE = ()
# Calls that display a panel (dlgn_lib.widgets) in a notebook's code.
PANEL_CALLS = ("epoch_slider(", "figure_panel(", "_slider(")
TWIN_PAGE = "01_paths"


@pytest.fixture(scope="module")
def built(chromium, tmp_path_factory) -> tuple[Path, str]:
    """The book built into a throwaway folder (after the Chromium check: no build to skip), with
    everything the build printed."""
    out = tmp_path_factory.mktemp("book") / "book"
    done = subprocess.run([sys.executable, str(BUILD), str(out)], cwd=locations.REPO_ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout + done.stderr


@pytest.fixture(scope="module")
def book(built) -> Path:
    return built[0]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(book):
    """The book served over HTTP on 127.0.0.1 (a random port); yields its base address."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(book)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def book_browser(chromium, tmp_path_factory):
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
                                                 timeout=60_000)
        except Exception as exc:  # installed but unable to start: always a failure
            pytest.fail(f"Chromium ({chromium}) did not start: {exc}")
        try:
            yield browser
        finally:
            browser.close()


class BookPage:
    """A page of the book with its console errors, uncaught exceptions and outside requests."""

    def __init__(self, browser, site: str):
        self.site = site
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"exception: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url} {r.failure}"))
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        self.page.route("**/*", self._route)

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.site) or url.startswith("data:"):
            route.continue_()
        else:
            self.outside.append(url)
            route.fulfill(status=200, content_type="application/javascript", body="")

    def open(self, path: str):
        self.page.goto(self.site + path, wait_until="networkidle")
        self.page.wait_for_function("Array.from(document.images).every(i => i.complete)")
        return self.page

    def broken_images(self) -> list[str]:
        return self.page.evaluate(
            "Array.from(document.images).filter(i => !(i.naturalWidth > 0)).map(i => i.src.slice(0, 120))")

    def close(self):
        self.context.close()


@pytest.fixture
def book_page(book_browser, site):
    page = BookPage(book_browser, site)
    try:
        yield page
    finally:
        page.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = locations.build_dir() / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pages(book: Path) -> list[str]:
    """The book's pages: its HTML files outside the _static/ and _images/ folders (the theme ships
    template fragments as .html files there)."""
    return sorted(str(p.relative_to(book)) for p in book.rglob("*.html")
                  if not p.relative_to(book).parts[0].startswith("_"))


def panels_in(notebook: Path) -> bool:
    nb = nbformat.read(notebook, as_version=4)
    return any(call in c.source for c in nb.cells if c.cell_type == "code" for call in PANEL_CALLS)


def test_every_page_loads_without_errors_and_every_image_decodes(book, book_page, shots):
    found = pages(book)
    notebooks = sorted(p.stem for p in (locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {"index.html", "search.html", "genindex.html"} <= set(found)
    assert [p for p in found if p.startswith("notebooks/")] == [f"notebooks/{n}.html" for n in notebooks]
    images = 0
    for path in found:
        page = book_page.open(path)
        assert book_page.broken_images() == [], path
        images += page.evaluate("document.images.length")
        if path == "index.html":
            page.screenshot(path=str(shots / "book-front.png"))
            page.evaluate("document.getElementById('figure-gallery').scrollIntoView()")
            page.screenshot(path=str(shots / "book-gallery.png"))
    assert book_page.errors == [], "\n".join(book_page.errors)
    assert [url for url in book_page.outside if not url.startswith(ALLOWED_OUTSIDE)] == []
    assert [p for p in found if p.startswith("notebooks/") and "NBVAL_" in (book / p).read_text()] == [], \
        "the test markers are hidden"
    # the front page alone shows one thumbnail per committed figure
    assert images >= len(list((locations.REPO_ROOT / "figures").glob("[0-9][0-9]_*.png")))


def test_the_build_prints_no_warning(built):
    assert "WARNING" not in built[1] and "ERROR" not in built[1], built[1]


def test_front_page_shows_every_claim_s_bottom_line_on_the_first_screen(book_page, shots):
    """At 1280×900 the whole table of bottom lines, one row per claim with its key number, ends above
    the fold; at 390 px wide (a phone) it starts on the first screen and scrolls inside itself, not
    the page."""
    page = book_page.open("index.html")
    first = page.locator("table").first
    assert [h.strip() for h in first.locator("th").all_text_contents()][:3] == \
        ["claim", "bottom line (full)", "key number, 90 % interval (bar)"]
    rows = first.locator("tbody tr")
    assert [r.split(":")[0] for r in rows.locator("td:first-child").all_text_contents()] == \
        ["C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    for line in rows.locator("td:nth-child(2)").all_text_contents():
        assert line.startswith(("HOLDS", "DOES NOT HOLD", "INCONCLUSIVE", "pending")), line   # HOLDS IN PART too
    box = first.bounding_box()
    assert box["y"] + box["height"] <= 900, f"the table ends at {box['y'] + box['height']:.0f} px"
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(shots / "book-front-390.png"))
    assert first.bounding_box()["y"] < 844, "on a phone the table starts on the first screen"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "the page itself does not scroll sideways"


def test_the_record_page_has_the_claims_the_history_and_the_runs(book_page):
    page = book_page.open("docs/record.html")
    table = page.locator("#each-notebook-s-verdict table").first
    assert table.locator("th").first.text_content().strip() == "id"
    claims = [c.strip() for c in table.locator("tbody tr td:first-child").all_text_contents()]
    assert claims == ["—", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "T"]
    hrefs = set(table.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))"))
    assert "../notebooks/01_paths.html" in hrefs and all(h.endswith(".html") for h in hrefs), hrefs
    for section in ("bottom-lines-by-parts", "how-each-full-run-was-made", "verdict-history", "spread"):
        assert page.locator(f"#{section} table").count() >= 1, section
    assert book_page.errors == [], "\n".join(book_page.errors)


def test_front_page_has_the_gallery_and_the_citation(book_page):
    page = book_page.open("index.html")
    figures = sorted(p.name for p in (locations.REPO_ROOT / "figures").glob("[0-9][0-9]_*.png"))
    shown = page.locator(".dlgn-gallery img").evaluate_all("imgs => imgs.map(i => i.getAttribute('src'))")
    assert sorted(Path(s).name for s in shown) == figures
    assert "arXiv:2404.04312" in page.locator("#how-to-cite pre").text_content()
    assert book_page.errors == [], "\n".join(book_page.errors)


def test_every_panel_shows_its_static_twin_not_the_widget_fallback(book, book_page):
    for notebook in sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = book_page.open(f"notebooks/{notebook.stem}.html")
        text = page.locator("main").inner_text()
        assert "Panel(children=" not in text and "VBox(children=" not in text, notebook.name
        if panels_in(notebook):
            assert page.locator(".dlgn-twin").count() >= 1, f"{notebook.name}: a panel without its twin"
    assert book_page.errors == [], "\n".join(book_page.errors)


def test_moving_a_static_slider_shows_another_frame(book_page, shots):
    page = book_page.open(f"notebooks/{TWIN_PAGE}.html")
    twin = page.locator(".dlgn-twin").filter(has=page.locator("input[type=range]")).first
    twin.scroll_into_view_if_needed()
    slider = twin.locator("input[type=range]")
    shown = twin.locator(".dlgn-frame:not([hidden]) img")
    frames = twin.locator(".dlgn-frame").evaluate_all("fs => fs.map(f => f.dataset.value)")
    assert len(frames) >= 2 and slider.get_attribute("max") == str(len(frames) - 1)
    assert shown.count() == 1 and twin.locator(".dlgn-twin-value").text_content() == frames[-1]
    src_before = shown.get_attribute("src")
    pixels_before = shown.screenshot()
    twin.screenshot(path=str(shots / "book-twin-before.png"))

    slider.evaluate("s => { s.value = '0'; s.dispatchEvent(new Event('input', {bubbles: true})); }")

    assert shown.count() == 1
    assert twin.locator(".dlgn-twin-value").text_content() == frames[0]
    assert shown.get_attribute("src") != src_before
    assert shown.screenshot() != pixels_before
    twin.screenshot(path=str(shots / "book-twin-after.png"))
    assert book_page.errors == [], "\n".join(book_page.errors)


def test_formulas_are_typeset_without_a_network(book_page):
    page = book_page.open("notebooks/06_overlap.html")
    page.wait_for_function("document.querySelectorAll('mjx-container').length > 0", timeout=30_000)
    assert page.evaluate("document.querySelectorAll('mjx-container').length") >= 3
    assert book_page.outside == [] and book_page.errors == [], book_page.errors


def test_no_output_is_wider_than_the_column_and_figures_open_at_full_size(book, book_page):
    """At 1280 px every printed output fits its column as printed, with no line wrapped by the browser
    (``dlgn_lib.text``: the notebooks print at most ``TEXT_WIDTH`` characters a line; the book's
    wrapping is only a fallback for narrower screens), and every output table scrolls inside itself,
    so nothing is cut off at the right; a click on a figure opens it at its native resolution, and
    a second click closes it."""
    checked, tables = 0, 0
    for notebook in sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = book_page.open(f"notebooks/{notebook.stem}.html")
        sizes = page.evaluate("""() => {
            const right = document.querySelector('main').getBoundingClientRect().right;
            return Array.from(document.querySelectorAll('.cell_output pre, .cell_output table')).map(p => {
                if (p.tagName === 'PRE') { p.style.whiteSpace = 'pre'; p.style.overflowWrap = 'normal'; }
                return [p.tagName, p.scrollWidth, p.clientWidth, p.getBoundingClientRect().right, right]; }); }""")
        wide = [s for s in sizes if s[1] > s[2] + 1 and s[0] == "PRE" or s[3] > s[4] + 1]
        assert wide == [], (notebook.name, wide[:3])
        checked += sum(s[0] == "PRE" for s in sizes)
        tables += sum(s[0] == "TABLE" for s in sizes)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert checked >= 100 and tables >= 1, (checked, tables)
    page = book_page.open("notebooks/00_primer.html")
    figure = page.locator(".cell_output img").first
    natural = figure.evaluate("i => [i.naturalWidth, i.getBoundingClientRect().width]")
    figure.click()
    big = page.locator(".dlgn-lightbox img")
    assert big.count() == 1
    assert big.evaluate("i => [i.naturalWidth, i.getBoundingClientRect().width]") == [natural[0], natural[0]]
    page.locator(".dlgn-lightbox").click()
    assert page.locator(".dlgn-lightbox").count() == 0
    assert book_page.errors == [], "\n".join(book_page.errors)


#: The smallest text a figure may show: 8 pt, in CSS px (1 pt = 4/3 px).
SMALLEST_TEXT_PX = 8 * 4 / 3


def test_every_figure_s_smallest_text_reads_at_8_pt_or_more(book, book_page):
    """At 1280 px, on every notebook page, every figure (each output image and each frame of the sliders'
    static twins) shows its smallest text at 8 pt or more: the text's size in the image's own pixels,
    which the image keeps (``plots.stamped_text_px``), times the width it is shown at over its natural
    width (issue 47, item 4)."""
    import base64
    from urllib.parse import unquote

    from dlgn_lib.plots import stamped_text_px

    site, measured, small = book_page.site, 0, []
    for notebook in sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = book_page.open(f"notebooks/{notebook.stem}.html")
        page.evaluate("document.querySelectorAll('.dlgn-frame').forEach(f => f.hidden = false)")  # every frame
        for src, natural, shown in page.evaluate("""Array.from(document.querySelectorAll('.cell_output img'))
                .map(i => [i.currentSrc, i.naturalWidth, i.getBoundingClientRect().width])"""):
            if src.startswith("data:"):
                image = base64.b64decode(src.partition(",")[2])
            else:
                assert src.startswith(site), src
                image = (book / unquote(src[len(site):].split("#")[0])).read_bytes()
            text_px = stamped_text_px(image)
            assert text_px is not None, f"{notebook.stem}: {src[:80]} keeps no text size"
            measured += 1
            if text_px * shown / natural < SMALLEST_TEXT_PX:
                small.append(f"{notebook.stem}: {src[:60]}: {text_px * shown / natural * 0.75:.1f} pt")
    assert measured >= 100, measured
    assert small == [], "\n".join(small)


def test_twin_frames_are_stored_at_the_size_the_book_shows_them(book, book_page, shots):
    """At 1280 px every panel's frame fills its twin and is shown at its own width (a few px of
    rounding aside): neither a small image blown up nor a large one shrunk (issue 47, item 4)."""
    measured = []
    for notebook in sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if not panels_in(notebook):
            continue
        page = book_page.open(f"notebooks/{notebook.stem}.html")
        shown = page.locator(".dlgn-twin .dlgn-frame:not([hidden]) img")
        sizes = shown.evaluate_all("is => is.map(i => [i.getBoundingClientRect().width, i.naturalWidth, "
                                   "i.closest('.dlgn-twin').clientWidth])")
        for width, natural, column in sizes:
            assert width >= 0.9 * column, (notebook.name, width, column)      # the frame spans the column
            assert abs(natural - width) <= 3, (notebook.name, natural, width)  # at its own size
            measured.append(notebook.name)
    assert len(set(measured)) >= 9, measured
    page = book_page.open(f"notebooks/{TWIN_PAGE}.html")
    page.locator(".dlgn-twin").first.screenshot(path=str(shots / "book-twin-width.png"))


def test_every_internal_link_resolves_and_each_notebook_page_downloads_its_notebook(book, book_page):
    """Every link inside the book reaches a file of the book, and its #fragment an element of that
    page (the reconstruction document is a page of the book); the download button of a notebook
    page fetches that notebook."""
    import html.parser
    import urllib.parse

    class Links(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.hrefs, self.ids = [], set()

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if attrs.get("id"):
                self.ids.add(attrs["id"])
            if tag == "a" and attrs.get("href"):
                self.hrefs.append(attrs["href"])

    parsed = {}
    for path in pages(book):
        parser = Links()
        parser.feed((book / path).read_text())
        parsed[path] = parser
    broken, reached = [], 0
    for path, parser in parsed.items():
        for href in parser.hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme or href.startswith(("mailto:", "javascript:")) or href == "#":
                continue
            target = (book / path).parent / urllib.parse.unquote(url.path) if url.path else book / path
            target = Path(str(target.resolve()))
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path}: {href}")
                continue
            reached += 1
            if url.fragment and target.suffix == ".html":
                ids = parsed.get(str(target.relative_to(book.resolve())), Links()).ids
                if url.fragment not in ids:
                    broken.append(f"{path}: {href} (no #{url.fragment})")
    assert broken == [], "\n".join(broken[:20])
    assert reached > 100
    assert any("docs/reconstruction.html#s1" in h for h in parsed["notebooks/01_paths.html"].hrefs)

    page = book_page.open(f"notebooks/{TWIN_PAGE}.html")
    href = page.locator("a.btn-download-source-button").get_attribute("href")
    got = page.request.get(urllib.parse.urljoin(page.url, href))
    assert got.status == 200 and href.endswith(f"{TWIN_PAGE}.ipynb"), href
    shipped = nbformat.reads(got.text(), as_version=4)
    committed = nbformat.read(locations.REPO_ROOT / "notebooks" / f"{TWIN_PAGE}.ipynb", as_version=4)
    from dlgn_lib.record.student import without_test_markers
    assert [c.source for c in shipped.cells] == \
        [without_test_markers(c.source) if c.cell_type == "code" else c.source for c in committed.cells]


def test_the_footer_names_the_licence_the_repository_carries(book_page):
    licence = (locations.REPO_ROOT / "LICENSE").read_text().splitlines()
    holder = next(line for line in licence if line.startswith("Copyright")).split(" ", 3)[-1]
    footer = book_page.open("index.html").locator("footer.bd-footer-content").inner_text()
    assert licence[0].startswith("MIT") and "MIT" in footer, footer
    assert holder.lower() in footer.lower(), (holder, footer)
