"""Slides of the class path, made from the notebooks with nbconvert (``make slides``).

    python -m dlgn_lib.record.slides [--out build/slides] [--only 00 01]
    python -m dlgn_lib.record.slides tag                    # (re)write the notebooks' slide metadata

The 90-minute class of the course guide walks through ``CLASS_PATH``. Each of those notebooks
carries Jupyter's own slideshow metadata (``cell.metadata.slideshow.slide_type``, editable in
JupyterLab's property inspector), written by ``tag`` from ``slide_type``: a new slide at the title,
at each ``##`` section and at the verdict, the figures and verdict lines as they come, and the
plumbing (imports, the parameters, the run-cache lines, the results tables and the history)
skipped. ``jupyter nbconvert --to slides`` (its SlidesExporter, reveal.js) turns each notebook,
as committed, into ``OUT/NN_name.slides.html``: nothing is executed.

The slides need nothing from outside: reveal.js, jQuery, RequireJS and MathJax 2 come from their
npm packages (``VENDOR``, fetched once with ``npm pack`` into ``build/vendor/`` and checked
against the registry's sha1), copied beside the slides, and the template's mermaid import is
pointed to a local module that draws nothing (the notebooks hold no mermaid diagrams). Saved
widget state is dropped, so each slider shows its static twin (dlgn_lib.widgets).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tarfile
import time
from pathlib import Path

import nbformat

from dlgn_lib import locations
from ..files import Refusal, command, writable_folder, write_atomic

__all__ = ["main"]

#: The notebooks of the course guide's 90-minute class, in order.
CLASS_PATH = ("00", "01", "03", "05")
#: npm packages the slides load, with the registry's sha1 of each tarball, and what is copied.
VENDOR = {
    "reveal.js@4.0.2": ("2e5e9f8ed0fa239924b448f21d4238c5aa6e852e", ("dist", "plugin")),
    "jquery@3.7.1": ("083ef98927c9a6a74d05a6af02806566d16274de", ("dist/jquery.min.js",)),
    "requirejs@2.3.7": ("0b22032e51a967900e0ae9f32762c23a87036bd0", ("require.js",)),
    "mathjax@2.7.9": ("d6b67955c173e7d719fcb2fc0288662884eb7d3d",
                      ("MathJax.js", "config", "extensions", "jax/input/TeX", "jax/output/CommonHTML",
                       "jax/element", "fonts/HTML-CSS/TeX/woff", "localization/en")),
}
#: The template imports mermaid as an ES module; the notebooks hold no mermaid diagrams.
MERMAID_STUB = "// The slides hold no mermaid diagrams: nothing to draw.\nexport default { initialize() {} };\n"

SKIPPED_TAGS = {"parameters", "setup", "history", "results", "exercises"}


def slide_type(cell, index: int) -> str:
    """The slide type ``tag`` gives a cell: "slide", "subslide", "skip" or "-" (continue)."""
    tags = set(cell.metadata.get("tags", []))
    source = cell.source.lstrip()
    if index == 0 or "verdict" in tags and cell.cell_type == "markdown":
        return "slide"
    if tags & SKIPPED_TAGS or "reconstruction" in tags:
        return "skip"
    if cell.cell_type == "markdown":
        return "slide" if source.startswith("## ") else "subslide" if source.startswith("### ") else "-"
    if source.startswith("# NBVAL_IGNORE_OUTPUT") and "widgets." not in source:   # imports, run-cache lines
        return "skip"
    return "-"


def tag(notebook: Path) -> bool:
    """Write ``slide_type`` into a notebook's cells; True when something changed."""
    nb = nbformat.read(notebook, as_version=4)
    changed = False
    for k, cell in enumerate(nb.cells):
        wanted = slide_type(cell, k)
        if cell.metadata.get("slideshow", {}).get("slide_type") != wanted:
            cell.metadata["slideshow"] = {"slide_type": wanted}
            changed = True
    if changed:
        write_atomic(notebook, nbformat.writes(nb) + "\n")
    return changed


def class_notebooks(only=None) -> list[Path]:
    ids = list(only or CLASS_PATH)
    unknown = [i for i in ids if i not in CLASS_PATH]
    if unknown:
        raise Refusal(f"no slides for notebook(s) {', '.join(unknown)}; the class path is {', '.join(CLASS_PATH)}")
    found = {locations.notebook_id(p): p for p in locations.find_notebooks()}
    if missing := [i for i in ids if i not in found]:
        raise Refusal(f"notebooks/ has no notebook {', '.join(missing)} (NN_*.ipynb) of the class path")
    return [found[i] for i in ids]


def vendor(out: Path, cache: Path | None = None) -> Path:
    """reveal.js, jQuery, RequireJS and MathJax under ``out/vendor`` (from verified npm tarballs)."""
    from dlgn_lib.data.base import DatasetNotAvailable
    from dlgn_lib.data.prepare import npm_package
    cache = cache or locations.build_dir() / "vendor"
    target = out / "vendor"
    try:
        if target.exists():
            shutil.rmtree(target)
        for package, (sha1, members) in VENDOR.items():
            tarball = npm_package(package, cache, sha1, "Delete it and run `make slides` again.")
            name = package.rsplit("@", 1)[0]
            with tarfile.open(tarball, "r:gz") as archive:
                chosen = [m for m in archive.getmembers() if m.isfile() and any(
                    m.name == f"package/{w}" or m.name.startswith(f"package/{w}/") for w in members)]
                for member in chosen:
                    member.name = member.name[len("package/"):]
                archive.extractall(target / name, members=chosen, filter="data")
        (target / "mermaid-stub.mjs").write_text(MERMAID_STUB)
    except DatasetNotAvailable as err:
        raise Refusal(str(err)) from None
    except OSError as err:
        raise Refusal(f"cannot write {locations.display_path(target)}: {err.strerror or err}") from None
    return target


def build(out: Path, only=None) -> list[Path]:
    """The class path's slides in ``out``; returns the HTML files written."""
    from nbconvert import SlidesExporter
    out = writable_folder(out)
    vendor(out)
    exporter = SlidesExporter(
        reveal_url_prefix="vendor/reveal.js", reveal_theme="white", reveal_scroll=True,
        jquery_url="vendor/jquery/dist/jquery.min.js", require_js_url="vendor/requirejs/require.js",
        mathjax_url="vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        mermaid_js_url="./vendor/mermaid-stub.mjs", exclude_input=True)
    written = []
    for notebook in class_notebooks(only):
        nb = nbformat.read(notebook, as_version=4)
        nb.metadata.pop("widgets", None)   # the live widgets' state: the static twins stand for it
        if not any("slideshow" in c.metadata for c in nb.cells):
            raise Refusal(f"{notebook.name} has no slide metadata; run `python -m dlgn_lib.record.slides tag`")
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
        written.append(write_atomic(out / f"{notebook.stem}.slides.html", body))
    return written


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.slides`` (the module's docstring says what it does)."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.slides", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("build", "tag"), default="build")
    parser.add_argument("--out", type=Path, default=None, help="folder of the slides (default: build/slides)")
    parser.add_argument("--only", nargs="+", metavar="ID", help=f"notebook ids of the class path ({', '.join(CLASS_PATH)})")
    args = parser.parse_args(argv)
    if args.command == "tag":
        for notebook in class_notebooks(args.only):
            print(f"{notebook.name}: {'tagged' if tag(notebook) else 'already tagged'}")
        return 0
    start = time.perf_counter()
    written = build(args.out or locations.build_dir() / "slides", args.only)
    for path in written:
        print(f"slides: {locations.display_path(path)}")
    print(f"{len(written)} slide decks in {time.perf_counter() - start:.0f} s; open one in a browser "
          "(arrow keys to move, Esc for the overview)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
