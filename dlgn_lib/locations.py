"""Where the package reads and writes: data, run cache, figures, build output.

Every location can be moved with an environment variable so that tests (and users with a shared
scratch disk) never touch the repository's own folders. A notebook run by hand (JupyterLab,
papermill) saves its figures and tables under ``build/figures``; only ``make figures`` names the
committed ``figures/`` (it sets ``DLGN_FIGURES_DIR``), so running a notebook leaves tracked files alone:

=====================  ==========================  =================
variable               default                     holds
=====================  ==========================  =================
``DLGN_DATA_DIR``      ``<repo>/data``             prepared datasets
``DLGN_RUNS_DIR``      ``<data dir>/runs``         the run cache
``DLGN_FIGURES_DIR``   ``<build dir>/figures``     saved figures and tables
``DLGN_BUILD_DIR``     ``<repo>/build``            executed notebooks, benchmark output
=====================  ==========================  =================
"""
from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["REPO_ROOT", "UMASK", "build_dir", "display_path", "figures_dir", "find_notebooks", "notebook_id",
           "runs_dir"]

#: The repository's root folder (the one holding notebooks/, data/ and docs/).
REPO_ROOT = Path(__file__).resolve().parent.parent

#: The process umask, read once at import (reading it means setting it): files the package makes
#: with ``mkstemp``/``mkdtemp`` (mode 0600/0700) are given ``0666``/``0777`` less this mask, so a
#: shared run cache or a bundle is readable by whom the user's other files are.
UMASK = os.umask(0)
os.umask(UMASK)


def _dir(variable: str, default: Path) -> Path:
    value = os.environ.get(variable)
    return Path(value).expanduser().resolve() if value else default


def data_dir() -> Path:
    """Folder of prepared datasets (``DLGN_DATA_DIR``)."""
    return _dir("DLGN_DATA_DIR", REPO_ROOT / "data")


def runs_dir() -> Path:
    """Folder of the run cache (``DLGN_RUNS_DIR``)."""
    return _dir("DLGN_RUNS_DIR", data_dir() / "runs")


def figures_dir() -> Path:
    """Folder the notebooks save figures and tables into (``DLGN_FIGURES_DIR``; else ``build/figures``)."""
    return _dir("DLGN_FIGURES_DIR", build_dir() / "figures")


def build_dir() -> Path:
    """Folder of generated build output (``DLGN_BUILD_DIR``)."""
    return _dir("DLGN_BUILD_DIR", REPO_ROOT / "build")


#: A notebook of the series: two digits, an underscore, a name (``05_smooth.ipynb``).
NOTEBOOK_NAME = re.compile(r"^(\d{2})_.+\.ipynb$")


def find_notebooks(folder: Path | str | None = None) -> list[Path]:
    """The series' notebooks ``NN_*.ipynb`` in ``folder`` (default: the repository's notebooks/), sorted."""
    folder = Path(folder).resolve() if folder is not None else REPO_ROOT / "notebooks"
    return sorted(path for path in folder.glob("*.ipynb") if NOTEBOOK_NAME.match(path.name))


def notebook_id(path: Path) -> str:
    """The two-digit id of a series notebook: ``05`` for ``05_smooth.ipynb``."""
    return NOTEBOOK_NAME.match(Path(path).name).group(1)


def display_path(path: Path | str) -> str:
    """A path as printed to readers: relative to the repository when inside it."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
