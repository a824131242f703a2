"""Running a notebook leaves a checkout clean: its figures are not rewritten when they show the same
thing (reconstruction §7.1), whether it runs in a Jupyter kernel (as in JupyterLab) or papermill."""
from __future__ import annotations

import re
import shutil

import nbformat
from nbclient import NotebookClient

from dlgn_lib import locations
from dlgn_lib.text import logical_lines
from dlgn_lib.record.series import CURRENT_INTERPRETER_KERNEL, _KernelManager
from fingerprint import tree

REPO = locations.REPO_ROOT


def test_a_kernel_run_of_a_notebook_rewrites_none_of_its_figures(tmp_path, monkeypatch):
    figures = tmp_path / "figures"
    figures.mkdir()
    for png in REPO.glob("figures/01_*"):
        shutil.copy2(png, figures / png.name)
    before = tree(figures)
    mtimes = {p.name: p.stat().st_mtime_ns for p in figures.iterdir()}
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(figures))
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    notebook = REPO / "notebooks" / "01_paths.ipynb"
    committed = notebook.read_bytes()
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, kernel_name=CURRENT_INTERPRETER_KERNEL, kernel_manager_class=_KernelManager,
                   resources={"metadata": {"path": str(notebook.parent)}}, timeout=600).execute()
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stdout")
    # the printed lines are the committed ones ("saved ..." with the folder's name aside), though
    # nothing was written: a notebook's output does not depend on what the folder held
    committed_lines = _saved_lines(nbformat.reads(committed.decode(), as_version=4))
    assert len(committed_lines) == 3 and _saved_lines(nb) == committed_lines
    assert tree(figures) == before and {p.name: p.stat().st_mtime_ns for p in figures.iterdir()} == mtimes
    assert notebook.read_bytes() == committed, "the notebook file itself is not written by a kernel run"


def _saved_lines(nb) -> list[str]:
    """The figure lines a notebook printed, each path cut to its file name."""
    printed = [line for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stdout"
               for line in o.get("text", "").splitlines()]
    saved = re.compile("^(saved|unchanged) ")
    lines = [line for line in logical_lines(printed, saved) if saved.match(line)]
    return [line.split(" ", 1)[0] + " " + ", ".join(p.rsplit("/", 1)[-1] for p in line.split(" ", 1)[1].split(", "))
            for line in lines]
