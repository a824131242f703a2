"""Build the rendered book of the executed series from the committed notebook outputs (``make book``).

    python docs/book/build.py [OUT]        (default: build/book; DLGN_BUILD_DIR moves build/)

Nothing is executed: the book shows the notebooks as committed (quick profile), each slider by its
static twin (dlgn_lib.widgets). The sources are staged in ``OUT-src/`` beside ``OUT``: conf.py and
_static/ from this folder, copies of notebooks/*.ipynb without their saved widget state (the twins
replace it), a thumbnail and a full copy of each figures/*.png, and the front page, index.md,
generated here: the bottom line per claim and the claims table (dlgn_lib.record.report; its links, notebooks/NAME.ipynb, name the
staged notebooks, which MyST turns into links to their pages), the notebooks' table of contents,
the figure gallery by notebook and the paper's citation (README, "How to cite"); the record and the
guide (docs/record.md, docs/guide.md); and the API page,
api.md, of the library's public names by layer (dlgn_lib.record.layers). Then ``sphinx-build -b html`` writes ``OUT/index.html``. See conf.py for why Sphinx
with myst-nb rather than Jupyter Book.
"""
from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from PIL import Image

from dlgn_lib import locations

from dlgn_lib.record import full_results, layers, readme_blocks, student

HERE = Path(__file__).resolve().parent
ROOT = locations.REPO_ROOT
NOTEBOOKS = ROOT / "notebooks"
RECONSTRUCTION = ROOT / "docs" / "reconstruction.md"
FIGURES = ROOT / "figures"
#: Width in pixels of the gallery's thumbnails (shown 220 px wide).
THUMB_WIDTH = 400
TITLE = "Half-Space Feature Learning in Neural Networks: the executed series"


def citation(readme: Path = ROOT / "README.md") -> str:
    """The BibTeX entry of the README's "How to cite" section."""
    match = re.search(r"^## How to cite\s*\n+```bibtex\n(.*?)```", readme.read_text(), re.S | re.M)
    if match is None:
        raise ValueError(f"{readme}: no bibtex block under '## How to cite'")
    return match.group(1).strip()


def book_reconstruction(text: str) -> str:
    """The reconstruction document as a page of the book: its HTML anchors (``<a id="s1"></a>``,
    which notebooks link as ``../docs/reconstruction.md#s1``) become MyST targets, so Sphinx
    resolves those links to the section."""
    return re.sub(r'^<a id="([\w-]+)"></a>$', r"(\1)=", text, flags=re.M)


#: Link targets of the docs pages that are pages of the book; a link to any other file of the
#: repository (README, LICENSE, …) is shown as its path, since the book does not carry it.
_IN_BOOK = re.compile(r"^(https?:|#|\.\./notebooks/\d\d_\w+\.ipynb|(record|guide|reconstruction)\.md)")


def book_page(text: str) -> str:
    """A docs page as a page of the book: links to repository files outside the book become the
    file's path in the text."""
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)",
                  lambda m: m.group(0) if _IN_BOOK.match(m.group(2)) else
                  f"{m.group(1)} (`{m.group(2).removeprefix('../')}` in the repository)", text)


def figure_caption(path: Path) -> str:
    """'01_top_paths.png' -> 'top paths'."""
    return path.stem.split("_", 1)[1].replace("_", " ")


def gallery(figures: list[Path], names: dict[str, str]) -> str:
    """The figures grouped by notebook (their NN_ prefix): a heading linking the page, then one
    captioned thumbnail each, linking the full image."""
    parts = []
    for nb_id, name in names.items():
        mine = [f for f in figures if f.name.startswith(nb_id + "_")]
        if not mine:
            continue
        parts.append(f"### [{name.replace('_', ' ', 1)}](notebooks/{name}.ipynb)\n")
        parts.append('<div class="dlgn-gallery">')
        for f in mine:
            caption = html.escape(figure_caption(f))
            parts.append(f'<figure><a href="_static/figures/{f.name}"><img src="_static/thumbs/{f.name}" '
                         f'alt="{nb_id}: {caption}"></a><figcaption>{nb_id} · {caption}</figcaption></figure>')
        parts.append("</div>\n")
    return "\n".join(parts)


def front_page(data: dict, figures: list[Path]) -> str:
    names = {nb_id: m.name for nb_id, m in data.items()}
    toc = "\n".join(f"notebooks/{name}" for name in names.values())
    return f"""# {TITLE}

What holds of the paper's claims at paper scale (the `full` profile), each with the number that
speaks for it and its 90 % interval; every part, how each run was made and every earlier verdict
are in [the record](docs/record.md).

```{{container}} dlgn-bottom
{readme_blocks.short_table(data, full_results.full_record())}
```

A read-only copy of the notebook series of *dlgn-halfspace*, which rebuilds **Half-Space Feature
Learning in Neural Networks** (Yadav, Ramaswamy, Lakshminarayanan; arXiv
[2404.04312](https://arxiv.org/abs/2404.04312), 2024) as a PyTorch library and turns each claim of
the paper into a measured number and a printed verdict. Every page shows a notebook as committed,
executed with the `quick` profile; nothing was run to make this book. The sliders are static
copies: a few pre-rendered epochs behind a range control, which works without a kernel. To run
the notebooks and move every control, install the package (`make lab`). The terms, and how to
run and check everything: [the guide](docs/guide.md).

## Notebooks

```{{toctree}}
:maxdepth: 1

{toc}
docs/record
docs/guide
docs/reconstruction
api
```

## Figure gallery

The figures the notebooks save (`figures/`), by notebook; each opens at full size.

{gallery(figures, names)}
## How to cite

```bibtex
{citation()}
```
"""


def stage(source: Path, notebooks: Path = NOTEBOOKS) -> None:
    """Lay out the Sphinx sources in ``source`` (emptied first), the notebooks from ``notebooks``."""
    if source.exists():
        shutil.rmtree(source)
    (source / "notebooks").mkdir(parents=True)
    shutil.copy(HERE / "conf.py", source / "conf.py")
    shutil.copytree(HERE / "_static", source / "_static")
    for path in sorted(Path(notebooks).glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nb.metadata.pop("widgets", None)         # the live widgets' state: the twins stand for it
        for cell in nb.cells:                    # the test suite's markers are not for readers
            if cell.cell_type == "code":
                cell.source = student.without_test_markers(cell.source)
        nbformat.write(nb, source / "notebooks" / path.name)
    (source / "docs").mkdir()
    (source / "docs" / "reconstruction.md").write_text(book_reconstruction(RECONSTRUCTION.read_text()))
    for page in ("record.md", "guide.md"):   # the record and the guide, pages of the book too
        (source / "docs" / page).write_text(book_page(RECONSTRUCTION.with_name(page).read_text()))
    figures = sorted(FIGURES.glob("[0-9][0-9]_*.png"))
    for folder in ("figures", "thumbs"):
        (source / "_static" / folder).mkdir()
    for f in figures:
        shutil.copy(f, source / "_static" / "figures" / f.name)
        with Image.open(f) as image:
            image.thumbnail((THUMB_WIDTH, THUMB_WIDTH * 4))
            image.save(source / "_static" / "thumbs" / f.name, optimize=True)
    (source / "api.md").write_text(layers.api_page())
    (source / "index.md").write_text(front_page(full_results.measured(Path(notebooks)), figures))


def build(out: Path, notebooks: Path = NOTEBOOKS) -> Path:
    """Stage the sources beside ``out`` and build the HTML book into ``out``; returns index.html."""
    out = Path(out).resolve()
    source = out.with_name(out.name + "-src")
    stage(source, notebooks)
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(source / ".doctrees"),
                    str(source), str(out)], check=True)
    index = out / "index.html"
    if not index.exists():
        raise RuntimeError(f"sphinx-build wrote no {index}")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the rendered book of the executed notebooks.")
    parser.add_argument("out", nargs="?", type=Path, default=locations.build_dir() / "book")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    index = build(args.out)
    print(f"book: {index} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
