"""Bad notebook parameters fail at once, through papermill, and touch no figure or cache file (reconstruction §7)."""
from pathlib import Path

import papermill
import pytest

from dlgn_lib import config, locations
from fingerprint import tree

NOTEBOOKS = sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Figures, data and run cache in a temporary folder, each holding a file written before."""
    figures, data, cache = tmp_path / "figures", tmp_path / "data", tmp_path / "runs"
    for folder in (figures, data / "fashion_mnist", cache / "existing-entry"):
        folder.mkdir(parents=True)
    (figures / "00_existing.png").write_bytes(b"an existing figure")
    (data / "fashion_mnist" / "source.json").write_text('{"source": "existing"}')
    (cache / "existing-entry" / "run.pt").write_bytes(b"an existing cache entry")
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(figures))
    monkeypatch.setenv("DLGN_DATA_DIR", str(data))
    monkeypatch.setenv("DLGN_RUNS_DIR", str(cache))
    monkeypatch.setenv("DLGN_QUIET", "1")
    return figures, data, cache


def run_papermill(notebook: Path, tmp_path: Path, **parameters):
    return papermill.execute_notebook(str(notebook), str(tmp_path / "out.ipynb"), parameters=parameters,
                                      cwd=str(notebook.parent), progress_bar=False, kernel_name="python3")


def refused(notebook: Path, sandbox, tmp_path, **parameters) -> str:
    """Run a notebook with bad parameters: it must fail, and no figure or cache file may change."""
    before = [tree(folder) for folder in sandbox]
    with pytest.raises(papermill.PapermillExecutionError) as info:
        run_papermill(notebook, tmp_path, **parameters)
    assert [tree(folder) for folder in sandbox] == before, "figures, data or the run cache changed"
    return str(info.value)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_unknown_profile_fails_naming_profile_and_touches_nothing(notebook, sandbox, tmp_path):
    message = refused(notebook, sandbox, tmp_path, PROFILE="bogus")
    assert "PROFILE" in message and "'quick', 'full'" in message


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_misspelt_parameter_fails_naming_it_and_touches_nothing(notebook, sandbox, tmp_path):
    """``-p PROFIEL full`` used to run the quick profile silently; now it stops before any work."""
    message = refused(notebook, sandbox, tmp_path, PROFIEL="full")
    known = config.NOTEBOOK_PARAMETERS[notebook.name[:2]]
    assert "no parameter PROFIEL" in message and "its parameters are " + ", ".join(known) in message


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS
                                      if "EPOCHS" not in config.NOTEBOOK_PARAMETERS[n.name[:2]]][:2],
                         ids=lambda n: n.stem)
def test_a_parameter_the_notebook_does_not_declare_is_refused(notebook, sandbox, tmp_path):
    assert "no parameter EPOCHS" in refused(notebook, sandbox, tmp_path, EPOCHS=5)


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
    assert name in refused(NOTEBOOKS[0], sandbox, tmp_path, **parameters)


def test_there_are_notebooks_to_check():
    assert len(NOTEBOOKS) >= 1, "no notebooks found under notebooks/"


def test_make_rejects_a_bad_profile_before_installing_or_preparing_anything(tmp_path):
    import shutil
    import subprocess
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the CI script installs it)")
    env = {"PATH": "/usr/bin:/bin", "DLGN_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path)}
    done = subprocess.run(["make", "--no-print-directory", "figures", "PROFILE=bogus", f"VENV={tmp_path / 'venv'}"],
                          cwd=locations.REPO_ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    assert "PROFILE=bogus is not a profile; use PROFILE=quick or PROFILE=full" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing was installed or prepared"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_reads_every_declared_parameter_with_its_help(notebook, caplog):
    """``papermill --help-notebook`` lists what papermill parses from the parameters cell; a line it
    cannot parse (an "=" inside the comment) silently drops that parameter from the list."""
    found = papermill.inspect_notebook(str(notebook))
    declared = config.NOTEBOOK_PARAMETERS[locations.notebook_id(notebook)]
    assert sorted(found) == sorted(declared)
    assert all(found[name]["help"] for name in declared), "every parameter has its comment as help"
    assert "Unable to parse" not in caplog.text
