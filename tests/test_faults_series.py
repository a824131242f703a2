"""The series runner and ``reproduce spread|verify`` never damage the record (issue 46): each fault
is one line naming the file or variable, exit status 1 (130 on Ctrl-C, 2 for bad arguments), and the
record as it was, byte for byte; no temporary file, kernel folder or connection file is left.

The ``reproduce`` tests run its real child process code with a stand-in for the series (a script
put in place of ``sys.executable``): one that runs nothing and says so, one that fails, one that
writes what a finished series writes, one that waits for Ctrl-C and then prints its summary."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import papermill
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from dlgn_lib import locations
from dlgn_lib.record import dask_cluster as cluster, executed, reproduce, series

REPO = locations.REPO_ROOT
PYTHON = sys.executable   # the fixture below puts a stand-in in its place
FIRST = locations.notebook_id(locations.find_notebooks()[0])   # a committed notebook's id

#: The stand-in for ``python -m dlgn_lib.record.series run --profile P --output DIR [--only ID ...]``.
FAKE_SERIES = '''
import json, os, pathlib, shutil, signal, sys, time
args = sys.argv[sys.argv.index("run") + 1:]
out = pathlib.Path(args[args.index("--output") + 1])
only = args[args.index("--only") + 1:] if "--only" in args else []
pathlib.Path(os.environ["FAKE_RAN"]).touch()
mode = os.environ["FAKE_SERIES"]
if mode == "fail":
    print("python -m dlgn_lib.record.series: error: the stand-in fails", file=sys.stderr)
    sys.exit(2)
if mode == "ok":   # what a finished series leaves: the executed copies and series.json
    out.mkdir(parents=True, exist_ok=True)
    for nb in sorted(pathlib.Path(os.environ["FAKE_NOTEBOOKS"]).glob("*.ipynb")):
        if nb.name[:2] in only:
            shutil.copy(nb, out / nb.name)
    (out / "series.json").write_text(json.dumps({"notebooks": {}}))
    sys.exit(0)
def stop(*_):   # "wait": Ctrl-C stops it after a second's cleanup; then it prints its summary
    time.sleep(1)
    print("01_x.ipynb  ok  1.0  (the stand-in's summary)", flush=True)
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
pathlib.Path(os.environ["FAKE_READY"]).touch()
time.sleep(120)
'''


@pytest.fixture
def fake_series(tmp_path, monkeypatch):
    """``reproduce`` runs the stand-in; ``fake_series.ran`` exists once it has run; build output and
    the records go to tmp_path (``spread`` and ``full`` stand-ins, each a file's bytes)."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\n{FAKE_SERIES}")
    script.chmod(0o755)
    monkeypatch.setattr(reproduce.sys, "executable", str(script))
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    for name, value in {"FAKE_SERIES": "ok", "FAKE_RAN": tmp_path / "ran", "FAKE_READY": tmp_path / "ready",
                        "FAKE_NOTEBOOKS": REPO / "notebooks"}.items():
        monkeypatch.setenv(name, str(value))
    spread, full = tmp_path / "records" / "spread.json", tmp_path / "records" / "full_results.json"
    spread.parent.mkdir()
    spread.write_text(json.dumps({"notebooks": {}, "machines": [], "variants": {}}) + "\n")
    shutil.copy(executed.FULL_RECORD, full)
    monkeypatch.setattr(reproduce, "SPREAD_RECORD", spread)
    monkeypatch.setattr(executed, "FULL_RECORD", full)
    return SimpleNamespace(script=script, ran=tmp_path / "ran", spread=spread, full=full)


def one_line(err: str, command: str = "reproduce") -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"python -m dlgn_lib.record.{command}: "), lines
    return lines[0]


def tiny_series(folder: Path, *cells: str) -> Path:
    """A series folder with one notebook, ``01_tiny.ipynb``: a parameters cell, then ``cells``."""
    folder.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[new_code_cell("PROFILE = 'quick'", metadata={"tags": ["parameters"]}),
                                       *(new_code_cell(c) for c in cells)]), folder / "01_tiny.ipynb")
    return folder


# --- Dask's scratch space ------------------------------------------------------------------------------

def test_the_local_cluster_keeps_its_scratch_files_in_a_folder_of_its_own_removed_after_it(tmp_path, monkeypatch):
    import tempfile
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    with cluster.client(workers=1) as client:
        assert client.submit(os.getpid).result() != os.getpid()
        (scratch,) = (tmp_path / "build" / "dask-scratch").iterdir()
        assert any(scratch.rglob("*.lock"))
    assert list(temporary.iterdir()) == []                           # not /tmp/dask-scratch-space
    assert list((tmp_path / "build" / "dask-scratch").iterdir()) == []
