"""README's first screen in a real browser (system Chromium through Playwright).

GitHub's page cannot be loaded offline, so README.md is rendered here with markdown-it (CommonMark
with tables, as GitHub renders them) into a column of GitHub's README width at 1280 px (the
article's 830 px with 32 px of padding) in GitHub's type (16 px, line height 1.5, table cells
padded 6 px × 13 px). At 1280×900 the whole table of bottom lines, one row per claim, ends above
the fold; at 390 px (a phone) it starts on the first screen and scrolls inside itself, not the page.
"""
from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from playwright.sync_api import sync_playwright

from dlgn_lib import locations
from lab_session import CHROMIUM_ARGS

#: GitHub's README column and type, approximated.
STYLE = """
body { margin: 0; font: 16px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
article { max-width: 830px; margin: 0 auto; padding: 32px; box-sizing: border-box; }
h1 { font-size: 2em; padding-bottom: .3em; border-bottom: 1px solid #d1d9e0; margin: .67em 0 16px; }
p, table { margin: 0 0 16px; }
table { display: block; max-width: 100%; overflow: auto; border-collapse: collapse; }
td, th { padding: 6px 13px; border: 1px solid #d1d9e0; }
img { max-width: 100%; }
pre { overflow: auto; }
"""


@pytest.fixture(scope="module")
def readme_page(chromium, tmp_path_factory):
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render((locations.REPO_ROOT / "README.md").read_text())
    path = tmp_path_factory.mktemp("readme") / "README.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
                    f"content='width=device-width'><style>{STYLE}</style></head><body><article>{html}</article>"
                    "</body></html>")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else route.fulfill(status=204, body=""))
            page.goto(path.as_uri())
            yield page
        finally:
            browser.close()


def test_readme_shows_every_claim_s_bottom_line_on_the_first_screen(readme_page):
    table = readme_page.locator("table").first
    claims = [c.split(":")[0] for c in table.locator("tbody tr td:first-child").all_text_contents()]
    assert claims == ["C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    box = table.bounding_box()
    assert box["y"] + box["height"] <= 900, f"the table of bottom lines ends at {box['y'] + box['height']:.0f} px"
    readme_page.set_viewport_size({"width": 390, "height": 844})
    assert table.bounding_box()["y"] < 844, "on a phone the table starts on the first screen"
    assert readme_page.evaluate("document.documentElement.scrollWidth") <= 390
