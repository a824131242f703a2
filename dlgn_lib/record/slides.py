"""The 90-minute class's slides (``make slides``): one reveal.js deck, built for a projector.

    python -m dlgn_lib.record.slides [--out build/slides] [--only 00 01]

``teaching/class_deck/slides.md`` (its opening comment says how to write it), each slide rendered by
nbconvert's markdown renderer, becomes ``OUT/class.slides.html`` inside ``page.html``, with
``style.css``, the committed figures it shows and reveal.js and MathJax (``VENDOR``: npm tarballs
fetched once into ``build/vendor/``, checked against the registry's sha1) beside it. ``--only``
keeps the slides of those notebooks of the class path and the slides of none.
"""
from __future__ import annotations

import argparse
import html
import re
import shutil
import string
import sys
import tarfile
import time
from pathlib import Path

import nbformat

from dlgn_lib import locations
from ..files import Refusal, command, writable_folder, write_atomic

__all__ = ["build", "main", "page"]

#: The notebooks of the course guide's 90-minute class, in order.
CLASS_PATH = ("00", "01", "03", "05")
#: The deck's source (slides.md, page.html, style.css) and the file it becomes.
SOURCE = locations.REPO_ROOT / "teaching" / "class_deck"
DECK = SOURCE / "slides.md"
DECK_FILE = "class.slides.html"
#: npm packages the deck loads, with the registry's sha1 of each tarball, and what is copied.
VENDOR = {
    "reveal.js@4.0.2": ("2e5e9f8ed0fa239924b448f21d4238c5aa6e852e",
                        ("dist/reveal.css", "dist/reveal.js", "dist/theme/white.css",
                         "dist/theme/fonts/source-sans-pro", "plugin/math/math.js", "plugin/notes/notes.js")),
    "mathjax@2.7.9": ("d6b67955c173e7d719fcb2fc0288662884eb7d3d",
                      ("MathJax.js", "config/TeX-AMS_CHTML-full.js", "extensions", "jax/input/TeX",
                       "jax/output/CommonHTML", "jax/element", "fonts/HTML-CSS/TeX/woff", "localization/en")),
}

_FILL = re.compile(r"\{\{(claims|verdict|parts|exercise|title)((?: \w+)+)\}\}")
_ATTRIBUTES = re.compile(r"^<!-- \.slide: (.*) -->\n", re.M)
_FIGURE = re.compile(r"^!\[([^\]]*)\]\(\.\./\.\./figures/([\w.-]+\.png)\)\n", re.M)
_TITLE = re.compile(r"^(#{1,2}) (.*)\n", re.M)


def class_notebooks(only=None) -> list[Path]:
    """The notebooks of the class path (or of ``only``, which must be on it), in order."""
    ids = list(only or CLASS_PATH)
    if unknown := [i for i in ids if i not in CLASS_PATH]:
        raise Refusal(f"no slides for notebook(s) {', '.join(unknown)}; the class path is {', '.join(CLASS_PATH)}")
    found = {locations.notebook_id(p): p for p in locations.find_notebooks()}
    if missing := [i for i in ids if i not in found]:
        raise Refusal(f"notebooks/ has no notebook {', '.join(missing)} (NN_*.ipynb) of the class path")
    return [found[i] for i in ids]


def vendor(out: Path) -> Path:
    """reveal.js and MathJax under ``out/vendor`` (from verified npm tarballs)."""
    from dlgn_lib.data.base import DatasetNotAvailable
    from dlgn_lib.data.prepare import npm_package
    target = out / "vendor"
    try:
        if target.exists():
            shutil.rmtree(target)
        for package, (sha1, members) in VENDOR.items():
            tarball = npm_package(package, locations.build_dir() / "vendor", sha1,
                                  "Delete it and run `make slides` again.")
            with tarfile.open(tarball, "r:gz") as archive:
                chosen = [m for m in archive.getmembers() if m.isfile() and any(
                    m.name == f"package/{w}" or m.name.startswith(f"package/{w}/") for w in members)]
                for member in chosen:
                    member.name = member.name[len("package/"):]
                archive.extractall(target / package.rsplit("@", 1)[0], members=chosen, filter="data")
    except DatasetNotAvailable as err:
        raise Refusal(str(err)) from None
    except OSError as err:
        raise Refusal(f"cannot write {locations.display_path(target)}: {err.strerror or err}") from None
    return target


def _exercise(notebook: Path, number: str) -> str:
    """Exercise ``number`` of a notebook's cell tagged ``exercises``, on one line."""
    cells = [c for c in nbformat.read(notebook, as_version=4).cells if "exercises" in c.metadata.get("tags", [])]
    items = dict(re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |\Z)", cells[0].source if cells else "", re.M | re.S))
    if number not in items:
        raise Refusal(f"{notebook.name} has no exercise {number} (a numbered item of its cell tagged 'exercises')")
    return f"**{locations.notebook_id(notebook)}, exercise {number}.** " + " ".join(items[number].split())


def _fill(kind: str, args: list[str], record: dict, notebooks: dict[str, Path]) -> str:
    """The markdown a ``{{kind args}}`` stands for."""
    from dlgn_lib import parts
    from . import full_results, readme_blocks
    deck = locations.display_path(DECK)
    if len(args) != (2 if kind == "exercise" else len(args) if kind == "claims" else 1):
        raise Refusal(f"{deck}: {{{{{kind} {' '.join(args)}}}}} has the wrong number of words")
    if kind in ("exercise", "title"):
        if args[0] not in notebooks:
            raise Refusal(f"{deck}: notebooks/ has no notebook {args[0]}")
        if kind == "exercise":
            return _exercise(notebooks[args[0]], args[1])
        return _TITLE.search(nbformat.read(notebooks[args[0]], as_version=4).cells[0].source + "\n").group(2)
    text = {c: t for c, t, _ in full_results.CLAIMS if c.startswith("C")}
    if unknown := [c for c in args if c not in text]:
        raise Refusal(f"{deck}: no claim {', '.join(unknown)}; the claims are {', '.join(text)}")
    if kind == "claims":
        return "\n".join(["| claim | bottom line (`full`) |", "|---|---|"] + [
            f"| **{c}** {readme_blocks.escape(text[c])} | {readme_blocks.claim_by_parts(c, record)[0]} |"
            for c in args])
    if kind == "parts":
        return " ".join(f"({label}) {p['statement']} [{', '.join(sorted({r['notebook'] for r in p['checks']}))}]."
                        for label, p in parts.registered_parts(args[0]).items())
    line, shown = readme_blocks.claim_by_parts(args[0], record)
    return "\n".join([f"## {args[0]} at paper scale (`full`): {line}", ""] + [f"- {text}" for text in shown])


def _render(markdown: str) -> str:
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
    return MarkdownWithMath(renderer=IPythonRenderer(escape=False, exclude_anchor_links=True)).render(markdown).strip()


def _slide(source: str, figures: set[str]) -> str:
    """One ``<section>``: the title, the figure, the text, the notes."""
    attributes = " ".join(_ATTRIBUTES.findall(source))
    source, _, notes = _ATTRIBUTES.sub("", source).partition("\nNote:\n")
    shown = ""
    if figure := _FIGURE.search(source):
        if not (locations.REPO_ROOT / "figures" / figure.group(2)).is_file():
            raise Refusal(f"{locations.display_path(DECK)}: figures/{figure.group(2)} is not a committed figure")
        figures.add(figure.group(2))
        source = source[:figure.start()] + source[figure.end():]
        shown = f'<figure><img src="figures/{figure.group(2)}" alt="{html.escape(figure.group(1))}"></figure>\n'
    source += "\n"
    if (title := _TITLE.search(source)) is None:
        raise Refusal(f"{locations.display_path(DECK)}: a slide without a '## ' title: {source.strip()[:60]!r}")
    body = source[:title.start()] + source[title.end():]
    return (f"<section{' ' + attributes if attributes else ''}>\n<div class=\"frame\">\n{_render(title.group(0))}\n"
            f'<div class="body">\n{shown}<div class="text">\n{_render(body)}\n</div>\n</div>\n</div>\n'
            + (f'<aside class="notes">\n{_render(notes)}\n</aside>\n' if notes.strip() else "") + "</section>")


def page(only=None) -> tuple[str, list[str]]:
    """The deck's HTML page (the slides of ``only``'s notebooks and of none) and the figures it shows."""
    from . import full_results
    keep = {locations.notebook_id(p) for p in class_notebooks(only)}
    if missing := [p for p in (DECK, SOURCE / "page.html", SOURCE / "style.css") if not p.is_file()]:
        raise Refusal(f"{locations.display_path(missing[0])} is missing: it is part of the deck's source")
    record = full_results.full_record()
    notebooks = {locations.notebook_id(p): p for p in locations.find_notebooks()}
    text = re.sub(r"\A\s*<!--.*?-->\s*", "", DECK.read_text(), flags=re.S)
    text = _FILL.sub(lambda m: _fill(m.group(1), m.group(2).split(), record, notebooks), text)
    figures, sections = set(), []
    for source in re.split(r"^---\n", text, flags=re.M):
        tied = re.search(r'data-notebook="(\w+)"', source)
        if tied and tied.group(1) not in CLASS_PATH:
            raise Refusal(f"{locations.display_path(DECK)}: a slide of notebook {tied.group(1)}, not of the class "
                          f"path ({', '.join(CLASS_PATH)})")
        if tied is None or tied.group(1) in keep:
            sections.append(_slide(source.strip("\n") + "\n", figures))
    title = html.escape(_TITLE.search(text).group(2))
    template = string.Template((SOURCE / "page.html").read_text())
    return template.substitute(title=title, slides="\n".join(sections)), sorted(figures)


def build(out: Path, only=None) -> list[Path]:
    """The class deck in ``out``, its figures beside it and ``vendor/``; returns the HTML file written."""
    text, figures = page(only)
    out = writable_folder(out)
    vendor(out)
    try:
        shutil.copyfile(SOURCE / "style.css", out / "class.css")
        (out / "figures").mkdir(exist_ok=True)
        for name in figures:
            shutil.copyfile(locations.REPO_ROOT / "figures" / name, out / "figures" / name)
        for old in out.glob("[0-9][0-9]_*.slides.html"):   # the per-notebook decks of earlier versions
            old.unlink()
    except OSError as err:
        raise Refusal(f"cannot write {locations.display_path(out)}: {err.strerror or err}") from None
    return [write_atomic(out / DECK_FILE, text)]


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.slides``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.slides", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="folder of the deck (default: build/slides)")
    parser.add_argument("--only", nargs="+", metavar="ID",
                        help=f"keep the slides of these notebooks of the class path ({', '.join(CLASS_PATH)})")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    for path in build(args.out or locations.build_dir() / "slides", args.only):
        print(f"slides: {locations.display_path(path)}")
    print(f"1 deck in {time.perf_counter() - start:.0f} s; open it in a browser (arrow keys to move, "
          "Esc for the overview, S for the teacher's notes, F for full screen)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
