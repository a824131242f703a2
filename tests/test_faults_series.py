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


# --- N4: series run --output a file, --output on a full disk ----------------------------------------

def test_n4_an_output_that_is_a_file_is_refused_before_any_cluster_starts(tmp_path, monkeypatch, capsys):
    notebooks = tiny_series(tmp_path / "nb", "print('hi')")
    (tmp_path / "copies").write_text("a user's file\n")
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(cluster, "client", lambda *a, **k: pytest.fail("a cluster was started"))
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    assert series.main(["run", "--notebooks", str(notebooks), "--output", str(tmp_path / "copies")]) == 1
    assert one_line(capsys.readouterr().err, "series").endswith(f"error: {tmp_path / 'copies'} is a file, not a folder")
    assert (tmp_path / "copies").read_text() == "a user's file\n" and not (tmp_path / "build").exists()


def test_n4_a_full_disk_leaves_no_cut_short_copy_or_empty_note_and_the_summary_is_printed(tmp_path, monkeypatch,
                                                                                           capsys, full_folder):
    notebooks = tiny_series(tmp_path / "nb", "print('C1: SUPPORTED')")
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    full_folder.fill()
    assert series.main(["run", "--notebooks", str(notebooks), "--output", str(full_folder), "--workers", "1"]) == 1
    out, err = capsys.readouterr()
    assert "01_tiny.ipynb" in out and "notebooks: 1, ok: 0, failed: 1" in out   # the summary, first
    assert err.strip().splitlines()[-1] == (f"python -m dlgn_lib.record.series: error: cannot write "
                                            f"{full_folder / 'series.json'}: No space left on device; it is unchanged")
    assert sorted(p.name for p in full_folder.iterdir()) == [".filler"]   # no copy cut short, no temporary


# --- N5: spread --only 99, and a child that failed ----------------------------------------------------

@pytest.mark.parametrize("add", [[], ["--add"]])
def test_n5_unknown_only_ids_are_refused_before_anything_is_removed_or_run(fake_series, tmp_path, capsys, add):
    earlier = tmp_path / "build" / "spread" / "pinned" / "notebooks" / "01_x.ipynb"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("an earlier run's copy\n")
    before = fake_series.spread.read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        reproduce.main(["spread", "--only", "99", "--variants", "pinned", *add])
    assert exit_info.value.code == 2
    assert "--only: unknown notebook id(s) 99; available: 00, 01," in capsys.readouterr().err
    assert earlier.read_text() == "an earlier run's copy\n" and not fake_series.ran.exists()
    assert fake_series.spread.read_bytes() == before


@pytest.mark.parametrize("add", [[], ["--add"]])
def test_n5_a_failed_child_records_and_stamps_nothing(fake_series, tmp_path, monkeypatch, capfd, add):
    monkeypatch.setenv("FAKE_SERIES", "fail")
    before = fake_series.spread.read_bytes()
    assert reproduce.main(["spread", "--only", FIRST, "--variants", "pinned", *add]) == 1
    assert fake_series.ran.exists() and fake_series.spread.read_bytes() == before
    assert capfd.readouterr().err.splitlines() == [   # the child's message, then the one line
        "python -m dlgn_lib.record.series: error: the stand-in fails",
        f"python -m dlgn_lib.record.reproduce: error: the series run into {tmp_path}/build/spread/pinned/notebooks "
        f"stopped with exit status 2 before it ran every notebook (its message is above); "
        f"{fake_series.spread} is unchanged"]


# --- N6: spread onto a full disk ---------------------------------------------------------------------

def test_n6_spread_onto_a_full_disk_names_the_record_and_leaves_it_whole(fake_series, monkeypatch, capsys,
                                                                          full_folder):
    record = full_folder / "spread.json"
    shutil.copy(fake_series.spread, record)
    before = record.read_bytes()
    monkeypatch.setattr(reproduce, "SPREAD_RECORD", record)
    full_folder.fill()
    assert reproduce.main(["spread", "--only", FIRST, "--variants", "pinned"]) == 1
    assert sorted(p.name for p in full_folder.iterdir()) == [".filler", "spread.json"]   # no temporary
    assert fake_series.ran.exists() and record.read_bytes() == before
    assert one_line(capsys.readouterr().err).endswith(
        f"error: cannot write {record}: No space left on device; it is unchanged")


# --- N7: verify with a damaged or missing record -------------------------------------------------------

@pytest.mark.parametrize(("record", "text", "profile", "message"), [
    ("spread", "{oops", "quick", "spread.json is not valid JSON (the spread record, which the tolerances come from): "
                                 "Expecting property name enclosed in double quotes at line 1"),
    ("spread", None, "quick", "spread.json is missing (the spread record, which the tolerances come from)"),
    ("spread", "{}", "quick",
     'spread.json has no "notebooks" table (the spread record, which the tolerances come from)'),
    ("full", None, "full", "full_results.json is missing (the record of full runs)"),
    ("full", "[1, 2]", "full", "full_results.json holds a JSON list, not a dict (the record of full runs)"),
    ("full", "[1, 2]", "quick", "full_results.json holds a JSON list, not a dict (the record of full runs)"),
])
def test_n7_verify_checks_the_records_before_it_runs_anything(fake_series, capsys, record, text, profile, message):
    path = getattr(fake_series, record)
    path.unlink()
    if text is not None:
        path.write_text(text)
    others = {p: p.read_bytes() for p in path.parent.iterdir()}
    assert reproduce.main(["verify", "--profile", profile, "--only", FIRST]) == 1
    assert one_line(capsys.readouterr().err).endswith(f"error: {path.parent}/{message}")
    assert not fake_series.ran.exists()
    assert {p: p.read_bytes() for p in path.parent.iterdir()} == others


# --- N8: Ctrl-C of make verify --------------------------------------------------------------------------

def test_n8_ctrl_c_of_verify_keeps_the_child_s_summary_and_says_what_to_rerun(fake_series, tmp_path):
    code = (f"import sys\nimport dlgn_lib.record.series\nfrom dlgn_lib.record import reproduce\n"
            f"sys.executable = {str(fake_series.script)!r}\n"
            f"sys.exit(reproduce.main(['verify', '--only', '{FIRST}']))\n")
    env = {**os.environ, "FAKE_SERIES": "wait"}
    parent = subprocess.Popen([PYTHON, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while not (tmp_path / "ready").exists() and parent.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    os.killpg(parent.pid, signal.SIGINT)   # as the terminal's Ctrl-C does: to make and what it runs
    out, err = parent.communicate(timeout=60)
    assert parent.returncode == 130
    assert "(the stand-in's summary)" in out   # the child had its time to stop and print
    assert one_line(err) == (
        f"python -m dlgn_lib.record.reproduce: interrupted: the series run into "
        f"{tmp_path / 'build' / 'verify' / 'quick' / 'notebooks'} was stopped (what finished is above); "
        f"nothing was compared; to verify, rerun: python -m dlgn_lib.record.reproduce verify --profile quick "
        f"--only {FIRST}")


# --- N9: Ctrl-C of series run leaves no kernel folder or connection file -------------------------------

@pytest.fixture
def short_tmp():
    """A temporary folder with a short path: a kernel's Unix sockets must fit in about 100 bytes."""
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="n9-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_n9_ctrl_c_of_a_series_run_leaves_no_kernel_files_and_no_partial_copy(tmp_path, short_tmp):
    notebooks = tiny_series(tmp_path / "nb", "import time\ntime.sleep(120)")
    temporary = short_tmp
    env = {**os.environ, "TMPDIR": str(temporary), "DLGN_BUILD_DIR": str(tmp_path / "build"), "DLGN_HEARTBEAT_S": "0.5"}
    child = subprocess.Popen([sys.executable, "-m", "dlgn_lib.record.series", "run", "--notebooks", str(notebooks),
                              "--workers", "1", "--output", str(tmp_path / "out")], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen, deadline = "", time.time() + 120
    while "(cell 3 of 3 " not in seen and child.poll() is None and time.time() < deadline:   # the kernel runs the sleep
        seen += child.stdout.readline()
    assert any(p.name.startswith("dlgn-kernel") for p in temporary.iterdir()), seen
    os.killpg(child.pid, signal.SIGINT)   # as the terminal's Ctrl-C does: the runner and its workers
    out, err = child.communicate(timeout=120)
    time.sleep(2)   # the orphaned kernel notices its worker is gone within a second
    left = [p.name for p in temporary.iterdir() if p.name.startswith("dlgn-kernel") or p.suffix == ".json"]
    assert left == []
    assert [p.name for p in (tmp_path / "out").iterdir()] == []   # no partial copy
    assert child.returncode == 130
    assert ("python -m dlgn_lib.record.series: interrupted: 0 notebooks finished, not finished: 01_tiny.ipynb; "
            "to run the rest: python -m dlgn_lib.record.series run --profile quick --only 01\n") in err


# --- N13: DLGN_HEARTBEAT_S=abc --------------------------------------------------------------------------

def test_n13_a_bad_heartbeat_names_the_variable_before_anything_runs(tmp_path):
    notebooks = tiny_series(tmp_path / "nb", "print('hi')")
    env = {**os.environ, "DLGN_HEARTBEAT_S": "abc", "DLGN_BUILD_DIR": str(tmp_path / "build")}
    done = subprocess.run([sys.executable, "-m", "dlgn_lib.record.series", "run", "--notebooks", str(notebooks)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert one_line(done.stderr, "series") == ("python -m dlgn_lib.record.series: error: DLGN_HEARTBEAT_S='abc' is "
                                               "not allowed; use a number ≥ 0.1 (default 30.0)")
    assert not (tmp_path / "build").exists()


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
