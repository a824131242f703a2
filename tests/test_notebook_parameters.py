"""Bad notebook parameters fail at once, through papermill, and touch no figure or cache file (SPEC §7)."""
from pathlib import Path

import papermill
import pytest

from dlgn_lib import config, locations

NOTEBOOKS = sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def tree_state(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    figures, cache = tmp_path / "figures", tmp_path / "runs"
    figures.mkdir()
    cache.mkdir()
    (figures / "00_existing.png").write_bytes(b"an existing figure")
    (cache / "existing-entry").mkdir()
    (cache / "existing-entry" / "run.pt").write_bytes(b"an existing cache entry")
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(figures))
    monkeypatch.setenv("DLGN_RUNS_DIR", str(cache))
    monkeypatch.setenv("DLGN_QUIET", "1")
    return figures, cache


def run_papermill(notebook: Path, tmp_path: Path, **parameters):
    return papermill.execute_notebook(str(notebook), str(tmp_path / "out.ipynb"), parameters=parameters,
                                      cwd=str(notebook.parent), progress_bar=False, kernel_name="python3")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_unknown_profile_fails_naming_profile_and_touches_nothing(notebook, sandbox, tmp_path):
    figures, cache = sandbox
    before = (tree_state(figures), tree_state(cache))
    with pytest.raises(papermill.PapermillExecutionError) as info:
        run_papermill(notebook, tmp_path, PROFILE="bogus")
    message = str(info.value)
    assert "PROFILE" in message and "'quick', 'full'" in message
    assert (tree_state(figures), tree_state(cache)) == before


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_misspelt_parameter_fails_naming_it_and_touches_nothing(notebook, sandbox, tmp_path):
    """``-p PROFIEL full`` used to run the quick profile silently; now it stops before any work."""
    figures, cache = sandbox
    before = (tree_state(figures), tree_state(cache))
    with pytest.raises(papermill.PapermillExecutionError) as info:
        run_papermill(notebook, tmp_path, PROFIEL="full")
    message = str(info.value)
    assert "no parameter PROFIEL" in message
    known = config.NOTEBOOK_PARAMETERS[notebook.name[:2]]
    assert "its parameters are " + ", ".join(known) in message
    assert (tree_state(figures), tree_state(cache)) == before


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS
                                      if "EPOCHS" not in config.NOTEBOOK_PARAMETERS[n.name[:2]]][:2],
                         ids=lambda n: n.stem)
def test_a_parameter_the_notebook_does_not_declare_is_refused(notebook, sandbox, tmp_path):
    figures, cache = sandbox
    before = (tree_state(figures), tree_state(cache))
    with pytest.raises(papermill.PapermillExecutionError) as info:
        run_papermill(notebook, tmp_path, EPOCHS=5)
    assert "no parameter EPOCHS" in str(info.value)
    assert (tree_state(figures), tree_state(cache)) == before


def test_every_notebook_declares_exactly_its_registered_parameters():
    import ast
    import nbformat
    for notebook in NOTEBOOKS:
        cell = next(c for c in nbformat.read(notebook, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        names = tuple(t.id for node in ast.parse(cell.source).body for t in node.targets)
        assert names == config.NOTEBOOK_PARAMETERS[notebook.name[:2]], notebook.name


@pytest.mark.parametrize("parameters,name", [(dict(SEED=-1), "SEED"), (dict(SEED="zero"), "SEED"),
                                             (dict(SEED=2**64), "SEED")])
def test_bad_seed_fails_naming_seed(parameters, name, sandbox, tmp_path):
    figures, cache = sandbox
    before = (tree_state(figures), tree_state(cache))
    with pytest.raises(papermill.PapermillExecutionError) as info:
        run_papermill(NOTEBOOKS[0], tmp_path, **parameters)
    assert name in str(info.value)
    assert (tree_state(figures), tree_state(cache)) == before


def test_there_are_notebooks_to_check():
    assert len(NOTEBOOKS) >= 1, "no notebooks found under notebooks/"
