"""Teacher and student material apart: the student edition has no solution text, `make lab` serves none."""
import nbformat
import pytest

from dlgn_lib import locations

from dlgn_lib.record import student


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "student"
    student.write_edition(out)
    return out


def test_the_edition_has_every_notebook_with_outputs_and_results_cleared_and_exercises_kept(edition):
    originals = sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in edition.glob("*.ipynb")) == [p.name for p in originals]
    for original in originals:
        nb = nbformat.read(edition / original.name, as_version=4)
        source = nbformat.read(original, as_version=4)
        assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")
        assert not any({"results", "finds"} & set(c.metadata.get("tags", [])) for c in nb.cells)
        kept = [c for c in source.cells if not {"results", "finds"} & set(c.metadata.get("tags", []))]
        assert [c.source for c in nb.cells] == \
            [c.source if c.cell_type == "markdown" else "\n".join(line for line in c.source.split("\n")
                                                                  if not line.lstrip().startswith("# NBVAL_"))
             for c in kept], "every other cell is kept, code without the test markers"
        assert not any("NBVAL_" in c.source for c in nb.cells)
        assert any(c.source.startswith("## Exercises") for c in nb.cells)


def test_no_solution_text_leaks_into_the_edition(edition):
    lines = student.solution_lines()
    assert len(lines) > 100, "the solutions are found (folded <details> blocks of teaching/SOLUTIONS.md)"
    assert student.leaked_solution_lines(edition) == {}
    assert not [p for p in edition.rglob("*") if "solution" in p.name.lower() or "course_guide" in p.name]


def test_text_the_notebooks_show_themselves_is_not_a_solution_line(tmp_path):
    solutions = tmp_path / "SOLUTIONS.md"
    solutions.write_text("<details>\nrows = study.fit_times(part, FIT_FRACTION, names=NAMES)\n"
                         "dataset   model  seed  epochs  train acc  test acc\n"
                         "The smooth arc is fitted first in every one of the five seeds.\n</details>\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1\nrows = study.fit_times(part, FIT_FRACTION, names=NAMES)")])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                  text="dataset   model  seed  epochs  train acc  test acc\n")]
    nbformat.write(nb, tmp_path / "05_smooth.ipynb")
    assert student.solution_lines(solutions, [tmp_path / "05_smooth.ipynb"]) == {
        "The smooth arc is fitted first in every one of the five seeds."}


def test_the_leak_check_finds_a_solution_line_that_got_in(edition, tmp_path):
    leaked = tmp_path / "leaked"
    leaked.mkdir()
    line = sorted(student.solution_lines())[0]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("intro\n" + line + "\nmore")])
    nbformat.write(nb, leaked / "05_smooth.ipynb")
    assert student.leaked_solution_lines(leaked) == {"05_smooth.ipynb": [line]}


def test_make_lab_serves_a_folder_without_teacher_material():
    makefile = (locations.REPO_ROOT / "Makefile").read_text()
    assert "--ServerApp.root_dir=notebooks" in makefile
    served = {p.name for p in (locations.REPO_ROOT / "notebooks").rglob("*") if p.is_file()}
    assert not {n for n in served if "solution" in n.lower() or n.endswith(".md")}, served
