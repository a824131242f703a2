"""What the README promises about installing: a clear stop without Python 3.11, citation metadata."""
import shutil
import subprocess

import pytest
import yaml

import dlgn_lib
from dlgn_lib import locations


def make(*args, tmp_path):
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the CI script installs it)")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(["make", "--no-print-directory", *args, f"VENV={tmp_path / 'venv'}"],
                          cwd=locations.REPO_ROOT, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("python", ["", "/no/such/python3.11"])
def test_make_stops_at_once_without_python_3_11(python, tmp_path):
    done = make("venv", f"PYTHON={python}", tmp_path=tmp_path)
    assert done.returncode != 0
    assert "needs Python 3.11" in done.stderr and "make PYTHON=/path/to/python3.11" in done.stderr
    assert not (tmp_path / "venv").exists(), "nothing was created or downloaded"


def test_make_refuses_another_python_version(tmp_path):
    fake = tmp_path / "python3.9"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python 3.9.2' && exit 0\nexit 1\n")
    fake.chmod(0o755)
    done = make("venv", f"PYTHON={fake}", tmp_path=tmp_path)
    assert done.returncode != 0 and "Python 3.9.2" in done.stderr and "needs Python 3.11" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_citation_metadata_names_this_version_and_the_paper():
    cff = yaml.safe_load((locations.REPO_ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == dlgn_lib.__version__
    paper = cff["preferred-citation"]
    assert paper["title"] == "Half-Space Feature Learning in Neural Networks"
    assert [a["family-names"] for a in paper["authors"]] == ["Yadav", "Ramaswamy", "Lakshminarayanan"]
    assert "2404.04312" in paper["url"] and cff["license"] == "MIT"
    assert (locations.REPO_ROOT / "LICENSE").read_text().startswith("MIT License")


def test_make_hands_location_variables_on_as_absolute_paths(tmp_path):
    """A notebook's kernel runs in notebooks/: a relative DLGN_*_DIR would name another folder there
    (CI's second nbval once found the first one's figures under notebooks/build/test-figures)."""
    env_dirs = {"DLGN_BUILD_DIR": "relbuild", "DLGN_RUNS_DIR": "relruns"}
    done = subprocess.run(["make", "--no-print-directory", "-n", "clean", "test-notebooks", f"VENV={tmp_path / 'venv'}"],
                          cwd=locations.REPO_ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env_dirs})
    build, runs = locations.REPO_ROOT / "relbuild", locations.REPO_ROOT / "relruns"
    assert f"rm -rf {build} {runs}" in done.stdout
    assert f"DLGN_FIGURES_DIR={build}/test-figures" in done.stdout
    assert " relbuild" not in done.stdout and "=relbuild" not in done.stdout
