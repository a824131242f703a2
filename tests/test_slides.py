"""The class deck (dlgn_lib.record.slides) as written, without a browser: its verdict lines and
bottom lines are the record's, its exercises the notebooks', its figures committed, ``--only``
keeps the right slides, and a deck source with a mistake is refused in one line.
(tests/browser/test_class_slides.py measures the slides as projected.)"""
import re
from html import unescape

import nbformat
import pytest

from dlgn_lib import files, locations
from dlgn_lib.record import full_results, readme_blocks, slides


def _sections(page: str) -> list[str]:
    return re.findall(r"<section[^>]*>.*?</section>", page, re.S)


def _text(fragment: str) -> str:
    """What a browser shows of an HTML fragment, spaces collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _plain(markdown: str) -> str:
    return " ".join(re.sub(r"[*`]", "", markdown).split())


@pytest.fixture(scope="module")
def page():
    return slides.page()[0]


def test_each_claim_s_verdict_slide_shows_the_record_s_bottom_line_and_every_part_s_line(page):
    record = full_results.full_record()
    source = slides.DECK.read_text()
    claims = re.findall(r"\{\{verdict (C\d)\}\}", source)
    assert claims, "the deck has no verdict slide"
    for claim in claims:
        line, shown = readme_blocks.claim_by_parts(claim, record)
        found = [s for s in _sections(page) if re.search(rf"<h2>{claim} at paper scale", s)]
        assert len(found) == 1, claim
        assert _text(re.search(r"<h2>.*?</h2>", found[0]).group(0)) == _plain(f"{claim} at paper scale (full): {line}")
        items = [_text(li) for li in re.findall(r"<li>.*?</li>", found[0].split('<aside')[0], re.S)]
        assert items == [_plain(t) for t in shown]


def test_the_claims_tables_show_every_named_claim_s_bottom_line_from_the_record(page):
    record = full_results.full_record()
    named = [c for group in re.findall(r"\{\{claims ((?:C\d ?)+)\}\}", slides.DECK.read_text()) for c in group.split()]
    rows = {_text(cells[0]).split(" ")[0]: _text(cells[1]) for cells in
            (re.findall(r"<td>(.*?)</td>", tr, re.S) for tr in re.findall(r"<tr>.*?</tr>", page, re.S)) if cells}
    assert set(named) == {c for c, _, _ in full_results.CLAIMS if c.startswith("C")}   # every claim is framed
    assert rows == {c: _plain(readme_blocks.claim_by_parts(c, record)[0]) for c in named}


def test_each_exercise_slide_quotes_its_notebook_s_exercise_whole():
    for notebook_id, number in re.findall(r"\{\{exercise (\d\d) (\d+)\}\}", slides.DECK.read_text()):
        notebook = next(p for p in locations.find_notebooks() if p.name.startswith(notebook_id))
        cell = next(c for c in nbformat.read(notebook, as_version=4).cells if "exercises" in c.metadata.get("tags", []))
        words = " ".join(cell.source.split())
        quoted = slides._exercise(notebook, number)
        prefix = f"**{notebook_id}, exercise {number}.** "
        assert quoted.startswith(prefix)
        body = quoted[len(prefix):]
        at = words.index(f"{number}. {body}")               # the item, word for word ...
        rest = words[at + len(number) + 2 + len(body):]
        assert rest == "" or rest.startswith(f" {int(number) + 1}. ")   # ... up to the next item


def test_every_slide_has_a_title_and_at_most_one_figure_and_the_figures_are_committed(page):
    sections = _sections(page)
    assert all(re.search(r"<h[12]>", s) for s in sections)
    shown = sorted(set(re.findall(r'<img src="figures/([^"]+)"', page)))
    assert shown == sorted(set(re.findall(r"\]\(\.\./\.\./figures/([^)]+)\)", slides.DECK.read_text())))
    assert all((locations.REPO_ROOT / "figures" / name).is_file() for name in shown)
    assert all(len(re.findall(r"<img ", s)) <= 1 for s in sections)    # one figure per slide, at most


def test_only_keeps_the_slides_of_the_named_notebooks_and_those_of_none(page):
    def tied(text):
        return [re.search(r'data-notebook="(\d\d)"', s) for s in _sections(text)]
    every = tied(page)
    assert {m.group(1) for m in every if m} == set(slides.CLASS_PATH)
    kept = tied(slides.page(["01"])[0])
    assert [m.group(1) if m else None for m in kept] == [m.group(1) if m else None for m in every
                                                         if m is None or m.group(1) == "01"]


def test_a_notebook_outside_the_class_path_is_refused_by_name():
    with pytest.raises(files.Refusal, match="no slides for notebook\\(s\\) 07; the class path is 00, 01, 03, 05"):
        slides.class_notebooks(["01", "07"])
    assert slides.main(["--only", "07"]) == 1


@pytest.mark.parametrize("slide, message", [
    ("## A\n\n![x](../../figures/no_such_figure.png)\n", "figures/no_such_figure.png is not a committed figure"),
    ("## A\n\n{{verdict C9}}\n", "no claim C9; the claims are C1, C2"),
    ('<!-- .slide: data-notebook="07" -->\n\n## A\n', "a slide of notebook 07, not of the class path"),
    ("## A\n\n{{exercise 01 99}}\n", "01_paths.ipynb has no exercise 99"),
    ("Text without a title.\n", "a slide without a '## ' title"),
    ("## A\n\n{{exercise 01}}\n", "{{exercise 01}} has the wrong number of words"),
])
def test_a_deck_source_with_a_mistake_is_refused_in_one_line(tmp_path, monkeypatch, capsys, slide, message):
    deck = tmp_path / "deck.md"
    deck.write_text("# Title\n\n---\n\n" + slide)
    monkeypatch.setattr(slides, "DECK", deck)
    assert slides.main(["--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err, err
    assert not (tmp_path / "out").exists()                   # refused before anything is written
