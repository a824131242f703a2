"""Slide metadata of the class path (dlgn_lib.record.slides): written by rule, and current."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from dlgn_lib import files
from dlgn_lib.record import slides


def test_the_rule_starts_slides_at_the_title_sections_and_verdict_and_skips_the_plumbing():
    cells = [new_markdown_cell("# 01 · title", metadata={"tags": ["title"]}),
             new_markdown_cell("*Reconstruction.* …", metadata={"tags": ["reconstruction"]}),
             new_code_cell('PROFILE = "quick"', metadata={"tags": ["parameters"]}),
             new_code_cell("import dlgn_lib as dl", metadata={"tags": ["setup"]}),
             new_code_cell("# NBVAL_IGNORE_OUTPUT\nimport numpy"),
             new_markdown_cell("## A section"),
             new_code_cell("fig = plot()"),
             new_markdown_cell("### Over training"),
             new_code_cell("# NBVAL_IGNORE_OUTPUT\ndl.widgets.epoch_slider(run, panel)"),
             new_markdown_cell("## Verdict", metadata={"tags": ["verdict"]}),
             new_code_cell("dl.verdict.verdict(...)", metadata={"tags": ["verdict"]}),
             new_markdown_cell("## Exercises", metadata={"tags": ["exercises"]}),
             new_markdown_cell("## Results", metadata={"tags": ["results"]}),
             new_code_cell("dl.verdict.history('01')", metadata={"tags": ["history"]})]
    got = [slides.slide_type(c, k) for k, c in enumerate(new_notebook(cells=cells).cells)]
    assert got == ["slide", "skip", "skip", "skip", "skip", "slide", "-", "subslide", "-", "slide", "-",
                   "skip", "skip", "skip"]


def test_the_committed_class_notebooks_carry_the_rule_s_slide_metadata():
    """Fails when a notebook of the class path changed without `python -m dlgn_lib.record.slides tag`."""
    for path in slides.class_notebooks():
        nb = nbformat.read(path, as_version=4)
        stale = [k for k, c in enumerate(nb.cells)
                 if c.metadata.get("slideshow", {}).get("slide_type") != slides.slide_type(c, k)]
        assert stale == [], f"{path.name}: cells {stale}; run: python -m dlgn_lib.record.slides tag"


def test_a_notebook_outside_the_class_path_is_refused_by_name():
    with pytest.raises(files.Refusal, match="no slides for notebook\\(s\\) 07; the class path is 00, 01, 03, 05"):
        slides.class_notebooks(["01", "07"])
    assert slides.main(["--only", "07"]) == 1
