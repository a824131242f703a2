"""The 90-minute class's deck (``make slides``) in a real browser: system Chromium through
Playwright, at a 1280×720 viewport (the deck's own size, so one CSS pixel is one screen pixel).
Built by ``dlgn_lib.record.slides`` into a throwaway folder and served from 127.0.0.1; the deck must
load without a console error or a request outside the folder, start reveal.js, typeset its formulas
with the local MathJax, step forward on the arrow key, and show each committed figure. Then every
slide, one by one, is measured: its content within 1280×720 (nothing to scroll, nothing outside
the screen), at most ``MAX_LINES`` rendered lines of text below the title, the figure before the
text, and on the verdict slides each verdict line as the record words it, in full, no word broken.
Screenshots go to ``build/browser/class-slide-NN.png``."""
from __future__ import annotations

import functools
import http.server
import re
import threading

import pytest
from playwright.sync_api import sync_playwright

from dlgn_lib import locations
from dlgn_lib.record import full_results, readme_blocks, slides
from lab_session import CHROMIUM_ARGS

WIDTH, HEIGHT = 1280, 720
#: Lines of text a slide may show below its title ("at most about 8").
MAX_LINES = 8
#: The smallest a slide's figure may be drawn, in pixels of the 720 (the figure comes first).
MIN_FIGURE_HEIGHT = 300

#: Per slide, as shown: its box, the union of its visible content, its rendered lines of text
#: (text nodes' line boxes below the title, a typeset formula counting as one box, merged by
#: vertical overlap), the figure, and the verdict lines.
MEASURE = """() => {
  const s = Reveal.getCurrentSlide();
  const rects = (root, skip) => {            // line boxes of the text under root; a typeset formula is one box
    const out = [], walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) {
      const node = walk.currentNode, parent = node.parentElement;
      if (!node.textContent.trim() || parent.closest(skip)) continue;
      const math = parent.closest('.mjx-chtml'), range = document.createRange();
      range.selectNodeContents(node);
      for (const r of math ? [math.getBoundingClientRect()] : range.getClientRects())
        if (r.width > 0 && r.height > 0) out.push(r);
    }
    return out;
  };
  const lines = boxes => {                   // boxes merged into lines by vertical overlap
    let n = 0, bottom = -1e9;
    for (const r of [...boxes].sort((a, b) => a.top - b.top)) {
      if (r.top >= bottom - 2) { n += 1; bottom = r.bottom; } else bottom = Math.max(bottom, r.bottom);
    }
    return n;
  };
  const hidden = 'aside.notes, script, .MJX_Assistive_MathML, .MathJax_Preview';
  const boxes = rects(s, hidden);
  const painted = [...s.querySelectorAll('img')].map(img => {   // drawn with object-fit: scale-down, centred
    const b = img.getBoundingClientRect(), k = Math.min(b.width / img.naturalWidth, b.height / img.naturalHeight, 1);
    const w = img.naturalWidth * k, h = img.naturalHeight * k, left = b.left + (b.width - w) / 2, top = b.top + (b.height - h) / 2;
    return {left, top, right: left + w, bottom: top + h, width: w, height: h};
  });
  const all = [...boxes, ...painted];
  const union = {left: Math.min(...all.map(r => r.left)), top: Math.min(...all.map(r => r.top)),
    right: Math.max(...all.map(r => r.right)), bottom: Math.max(...all.map(r => r.bottom))};
  const title = s.querySelector('h1, h2'), figure = s.querySelector('figure img'), text = s.querySelector('.text');
  return {
    index: Reveal.getIndices().h, scrollWidth: s.scrollWidth, scrollHeight: s.scrollHeight, union,
    lines: lines(rects(s, hidden + ', h1, h2')), title: title && title.innerText, titleLines: title ? lines(rects(title, hidden)) : 0,
    figure: figure && {src: figure.getAttribute('src'), loaded: figure.complete && figure.naturalWidth > 0,
      width: painted[0].width, height: painted[0].height,
      beforeText: !!(figure.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING)},
    verdicts: s.classList.contains('verdict') ? [...s.querySelectorAll('.text li')].map(li => ({
      text: li.innerText, overflow: li.scrollWidth > li.clientWidth,
      wrap: getComputedStyle(li).overflowWrap + ' ' + getComputedStyle(li).wordBreak})) : null,
    bottoms: [...s.querySelectorAll('table tbody tr')].map(tr => ({claim: tr.cells[0].innerText.split(' ')[0],
      text: tr.cells[tr.cells.length - 1].innerText, lines: lines(rects(tr.cells[tr.cells.length - 1], hidden))})),
  };
}"""


@pytest.fixture(scope="module")
def deck(chromium, tmp_path_factory):
    out = tmp_path_factory.mktemp("slides")
    return out, slides.build(out)


@pytest.fixture(scope="module")
def served(deck):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(deck[0])))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _plain(markdown: str) -> str:
    """A verdict line as the browser shows it: markdown emphasis and code marks dropped."""
    return re.sub(r"[*`]", "", markdown)


def test_every_slide_of_the_deck_fits_1280x720_with_its_figure_first_and_its_verdict_lines_whole(chromium, deck, served):
    shots = locations.build_dir() / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    assert [p.name for p in deck[1]] == [slides.DECK_FILE]
    record = full_results.full_record()
    errors, outside = [], []

    def watch(page):                      # every page: the deck and the speaker view it opens
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)

    def route(r):
        if r.request.url.startswith((served, "data:", "about:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
            context.on("page", watch)
            context.route("**/*", route)
            page = context.new_page()
            page.goto(served + slides.DECK_FILE, wait_until="networkidle")
            page.wait_for_selector(".reveal.ready", timeout=30_000)                     # reveal.js started
            page.wait_for_function("window.MathJax && MathJax.isReady", timeout=30_000)  # MathJax 2, local
            page.evaluate("new Promise(done => MathJax.Hub.Queue(done))")              # every formula typeset
            assert page.evaluate("document.querySelectorAll('.mjx-chtml').length") > 0
            first = page.evaluate("location.hash")
            page.keyboard.press("ArrowRight")
            page.wait_for_function(f"location.hash !== {first!r}", timeout=10_000)
            total = page.evaluate("Reveal.getTotalSlides()")
            assert total == len(re.findall(r"<section", deck[1][0].read_text())), total
            seen, problems = [], []
            for k in range(total):
                page.evaluate(f"Reveal.slide({k})")
                m = page.evaluate(MEASURE)
                page.screenshot(path=str(shots / f"class-slide-{k:02d}.png"))
                seen.append(m)
                u = m["union"]
                if m["scrollHeight"] > HEIGHT or m["scrollWidth"] > WIDTH:
                    problems.append(f"slide {k} ({m['title']}): content {m['scrollWidth']}x{m['scrollHeight']}")
                if u["left"] < 0 or u["top"] < 0 or u["right"] > WIDTH or u["bottom"] > HEIGHT:
                    problems.append(f"slide {k} ({m['title']}): content reaches {u}")
                if m["lines"] > MAX_LINES:
                    problems.append(f"slide {k} ({m['title']}): {m['lines']} lines of text")
                if m["figure"] and not (m["figure"]["loaded"] and m["figure"]["beforeText"]):
                    problems.append(f"slide {k} ({m['title']}): figure {m['figure']}")
                if m["figure"] and m["figure"]["height"] < MIN_FIGURE_HEIGHT:
                    problems.append(f"slide {k} ({m['title']}): figure only {m['figure']['height']:.0f} px high")
                for row in (r for r in m["bottoms"] if re.fullmatch(r"C\d", r["claim"])):   # the claims' bottom lines
                    assert row["text"] == _plain(readme_blocks.claim_by_parts(row["claim"], record)[0]), row
                    if row["lines"] != 1:
                        problems.append(f"slide {k}: {row['claim']}'s bottom line takes {row['lines']} lines")
                if m["verdicts"] is not None:
                    claim = m["title"].split(" ")[0]
                    line, shown = readme_blocks.claim_by_parts(claim, record)
                    assert m["title"] == f"{claim} at paper scale (full): {_plain(line)}", m["title"]
                    if m["titleLines"] != 1:
                        problems.append(f"slide {k}: the bottom line takes {m['titleLines']} lines")
                    assert [v["text"] for v in m["verdicts"]] == [_plain(t) for t in shown], claim
                    for v in m["verdicts"]:
                        if v["overflow"] or v["wrap"] != "normal normal":
                            problems.append(f"slide {k}: verdict line {v}")
            print("\n".join(f"slide {m['index']:2d}: {m['scrollWidth']}x{m['scrollHeight']}, content to "
                            f"{m['union']['bottom']:.0f} px, {m['lines']} lines"
                            + (f", figure {m['figure']['width']:.0f}x{m['figure']['height']:.0f}" if m['figure'] else "")
                            + f"  {m['title']}" for m in seen))
            assert problems == [], problems
            figures = {m["figure"]["src"] for m in seen if m["figure"]}
            assert figures == {f"figures/{p.name}" for p in (deck[0] / "figures").iterdir()}
            verdicts = [m["title"].split(" ")[0] for m in seen if m["verdicts"] is not None]
            source = re.sub(r"\A\s*<!--.*?-->", "", slides.DECK.read_text(), flags=re.S)   # after its how-to
            assert verdicts == re.findall(r"\{\{verdict (C\d)\}\}", source)

            # The teacher's notes: S opens reveal.js's speaker view, offline, with the slide's notes.
            k = next(i for i in range(total) if page.evaluate(
                f"!!Reveal.getSlides()[{i}].querySelector('aside.notes')"))
            page.evaluate(f"Reveal.slide({k})")
            with page.expect_popup() as popup:
                page.keyboard.press("s")
            view = popup.value
            view.wait_for_selector(".speaker-controls-notes", timeout=30_000)
            notes = page.evaluate(f"Reveal.getSlides()[{k}].querySelector('aside.notes').innerText").strip()
            view.wait_for_function("t => document.querySelector('.speaker-controls-notes').innerText.includes(t)",
                                   arg=notes[:60], timeout=30_000)
            view.screenshot(path=str(shots / "class-notes.png"))
            assert outside == [] and errors == [], (outside, errors)
        finally:
            browser.close()
