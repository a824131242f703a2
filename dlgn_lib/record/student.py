"""The student edition: the notebooks to hand out, with nothing a student should find ready-made.

``python -m dlgn_lib.record.student OUT`` (``make student``: ``build/student``): every notebook with
outputs and execution counts cleared, the cells tagged ``results`` and ``finds`` left out, nbval's
markers taken out of the code, the exercises kept; it fails when a line of the worked solutions
(``teaching/SOLUTIONS.md``) got in.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from .. import locations
from ..files import Refusal, command, writable_folder

__all__ = ["main", "without_test_markers"]

NOTEBOOKS_DIR = locations.REPO_ROOT / "notebooks"
SOLUTIONS = locations.REPO_ROOT / "teaching" / "SOLUTIONS.md"
#: Solution lines shorter than this are too generic to count as leaked text ("```python").
MIN_LINE = 40
#: A line of nbval's markers (``# NBVAL_IGNORE_OUTPUT``, ``# NBVAL_SKIP``, …), for the tests, not readers.
_MARKER = re.compile(r"^[ \t]*#[ \t]*NBVAL_[A-Z_]+[^\n]*(\n|$)", re.M)

README = """# Half-space feature learning: student notebooks

Open the notebooks in JupyterLab and run every cell, in order (Run > Run All Cells). Each notebook
states a claim of *Half-Space Feature Learning in Neural Networks* (arXiv 2404.04312), fixes its
verdict rule before measuring anything, measures, and prints the verdict. The exercises are at the
end of each notebook. Trained runs are cached, so a second run of a notebook takes seconds.
"""


def without_test_markers(source: str) -> str:
    """A code cell's source without nbval's marker lines."""
    return _MARKER.sub("", source)


def _student_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    copy = nbformat.from_dict(nb)
    copy.cells = [c for c in copy.cells if not {"results", "finds"} & set(c.metadata.get("tags", []))]
    for cell in copy.cells:
        if cell.cell_type == "code":
            cell.source = without_test_markers(cell.source)
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    copy.metadata.pop("widgets", None)
    return copy


def write_edition(out: Path | str, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Write the student edition into ``out``, replaced whole once every file is written (a failed
    write or Ctrl-C leaves the old edition and no temporary folder); returns the notebooks written."""
    out = Path(out)
    notebooks = locations.find_notebooks(notebooks_dir)
    if not notebooks:
        raise Refusal(f"{locations.display_path(notebooks_dir)}: no notebooks (NN_*.ipynb)")
    if out.exists() and not out.is_dir():
        raise Refusal(f"{locations.display_path(out)} is a file, not a folder")
    writable_folder(out.parent)
    try:
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as err:
        raise Refusal(f"cannot write {locations.display_path(out)}: {err.strerror or err}") from None
    old = tmp.with_name(tmp.name + ".old")
    try:
        for path in notebooks:
            nbformat.write(_student_notebook(nbformat.read(path, as_version=4)), tmp / path.name)
        (tmp / "README.md").write_text(README)
        if out.exists():
            out.rename(old)
        tmp.rename(out)
    except OSError as err:
        raise Refusal(f"cannot write {locations.display_path(out)}: {err.strerror or err}; it is unchanged") from None
    finally:
        if old.exists() and not out.exists():
            old.rename(out)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return [out / path.name for path in notebooks]


def solution_lines(solutions: Path = SOLUTIONS, notebooks=None) -> set[str]:
    """The lines of the folded ``<details>`` solutions long enough to be distinctive and not shown by
    the notebooks themselves (``notebooks``: their paths, default the committed series)."""
    blocks = re.findall(r"<details>(.*?)</details>", solutions.read_text(), flags=re.S)
    lines = {line.strip() for block in blocks for line in block.splitlines() if len(line.strip()) >= MIN_LINE}
    own = "\n".join(readable_text(p) for p in (locations.find_notebooks() if notebooks is None else notebooks))
    return {line for line in lines if line not in own}


def leaked_solution_lines(edition: Path, solutions: Path = SOLUTIONS) -> dict[str, list[str]]:
    """Solution lines found in the edition's files (file name -> lines); empty when nothing leaked."""
    lines = solution_lines(solutions)
    found = {}
    for path in sorted(Path(edition).rglob("*")):
        if path.is_file():
            text = readable_text(path)
            if hits := sorted(line for line in lines if line in text):
                found[path.name] = hits
    return found


def readable_text(path: Path) -> str:
    """What a reader of the file sees: a notebook's cell sources and text outputs, any other file as it is."""
    if path.suffix != ".ipynb":
        return path.read_text(errors="replace")
    parts = []
    for cell in nbformat.read(path, as_version=4).cells:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            parts.append(str(output.get("text", "")))
            parts += [str(v) for k, v in output.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.student``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.student", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write (replaced whole)")
    args = parser.parse_args(argv)
    written = write_edition(args.out)
    if leaked := leaked_solution_lines(args.out):
        print(f"error: solution text in the student edition: {leaked}", file=sys.stderr)
        return 1
    print(f"student edition: {len(written)} notebooks in {locations.display_path(args.out)} "
          "(outputs and results cleared, exercises kept, no solution text)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
