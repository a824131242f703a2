"""The record is never damaged (issue 46, N1 N2 N3 N6 N15): `report record`, `solutions`, `student`
and `slides` answer each fault with one line naming the file and the reason, exit 1 (130 for
Ctrl-C), and leave the record byte for byte and no temporary behind."""
import builtins
import io
import json
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from dlgn_lib import locations, verdict
from dlgn_lib.record import report, slides, solutions, student
from tests.test_report import executed, printed_verdict

REAL_RECORD = locations.REPO_ROOT / "docs" / "full_results.json"
NAMES = {"01": "01_paths.ipynb", "03": "03_regions.ipynb"}


def _one_line(err: str, command: str, word: str = "error") -> str:
    """The message of a one-line answer (no traceback)."""
    assert "Traceback" not in err and err.count("\n") == 1, err
    prefix = f"python -m dlgn_lib.record.{command}: {word}: "
    assert err.startswith(prefix), err
    return err[len(prefix):].rstrip("\n")


def _listing(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != ".filler")


def _full_notebook(nb_id: str, n_checks: int = 1):
    """A notebook executed by papermill under full that printed a passing verdict of each of its
    claims (``n_checks`` checks each)."""
    claims = [c for c, nbs in verdict.combination_rule()["claims"].items() if nb_id in nbs]
    checks = [verdict.check(f"check {k}", 1.0, ">=", 0.5) for k in range(n_checks)]
    nb = executed("numerics: native\n", *(printed_verdict(c, checks, "full") for c in claims),
                  papermill={"duration": 60.0, "parameters": {"PROFILE": "full"}, "exception": None})
    for k, cell in enumerate(nb.cells, 1):
        cell.execution_count, cell.metadata["papermill"] = k, {"status": "completed"}
    return nb


def _folder(tmp_path, *ids, series: dict | None = None, n_checks: int = 1):
    folder = tmp_path / "run"
    folder.mkdir()
    for nb_id in ids:
        nbformat.write(_full_notebook(nb_id, n_checks), folder / NAMES[nb_id])
    if series is not None:
        (folder / "series.json").write_text(json.dumps(series))
    return folder


def _series(*ids, profile="full", status="ok"):
    return {"profile": profile, "workers": 2, "seconds": 120.0, "runs_cache_empty_at_start": False,
            "notebooks": {NAMES[i]: {"status": status, "seconds": 60.0} for i in ids}}


@pytest.fixture
def record(tmp_path, monkeypatch):
    """A copy of docs/full_results.json that `report record` writes (``report.FULL_RECORD``)."""
    path = tmp_path / "docs" / "full_results.json"
    path.parent.mkdir()
    shutil.copyfile(REAL_RECORD, path)
    monkeypatch.setattr(report, "FULL_RECORD", path)
    return path


def test_a_good_folder_is_recorded(tmp_path, record, capsys):
    folder = _folder(tmp_path, "03", series=_series("03"))
    assert report.main(["record", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("recorded for 1 notebooks (03) in ")
    written = json.loads(record.read_text())
    assert written["notebooks"]["03"]["verdicts"][0]["claim"] == "C3" and written["series"]["03"]["seconds"] == 120.0
    assert _listing(record.parent) == ["full_results.json"]


# --- N1: a bad series.json, a foreign folder: one line naming the file, nothing written -------------

@pytest.mark.parametrize("note, message", [
    ("{oops", r"run/series\.json is not valid JSON \(the note of `series run`\): Expecting property name"),
    ("[1, 2]", r"run/series\.json holds a JSON list, not a dict"),
    (json.dumps(_series("03", profile="quick")), r"run/series\.json: a run of \['03_regions\.ipynb'\] under 'quick', "
                                                 r"not of this folder's notebooks under 'full'; nothing recorded"),
    (json.dumps({"profile": "full", "notebooks": {"03_regions.ipynb": {"status": "ok"}}}),
     r"run/series\.json: not a note of `series run` \(no seconds, workers\); nothing recorded"),
    (json.dumps(_series("01")), r"run/series\.json: a run of \['01_paths\.ipynb'\] under 'full', not of this folder's"),
])
def test_a_bad_or_foreign_series_note_is_refused_by_name_and_the_record_is_unchanged(tmp_path, record, capsys,
                                                                                     note, message):
    folder = _folder(tmp_path, "03")
    (folder / "series.json").write_text(note)
    before = record.read_bytes()
    assert report.main(["record", str(folder)]) == 1
    assert re.search(message, _one_line(capsys.readouterr().err, "report"))
    assert record.read_bytes() == before and _listing(record.parent) == ["full_results.json"]


def test_a_missing_folder_a_file_and_a_foreign_notebook_are_refused_by_name(tmp_path, record, capsys):
    before = record.read_bytes()
    (tmp_path / "afile").write_text("x")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    nbformat.write(_full_notebook("03"), foreign / "03_someone_elses.ipynb")
    for folder, said in ((tmp_path / "nowhere", "nowhere does not exist"), (tmp_path / "afile", "afile is a file, not a folder"),
                         (foreign, "03_someone_elses.ipynb: not a notebook of this series; nothing recorded")):
        assert report.main(["record", str(folder)]) == 1
        assert _one_line(capsys.readouterr().err, "report").endswith(said)
    assert record.read_bytes() == before


# --- N2: a notebook that stopped, a series that failed: refused, the record byte for byte --------

def _stopped_at_an_error(nb):
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[])]
    nb.cells[1].metadata["papermill"]["status"] = "failed"
    nb.metadata["papermill"]["exception"] = True


def _killed(nb):
    nb.cells[1].metadata["papermill"]["status"] = "running"
    nb.cells[1].outputs, nb.cells[1].execution_count = [], None
    nb.metadata["papermill"]["duration"] = None


def _no_verdict(nb):
    nb.cells = nb.cells[:1]


@pytest.mark.parametrize("spoil, message", [
    (_stopped_at_an_error, "01_paths.ipynb: stopped at an error in cell 2 (ValueError: boom); nothing recorded"),
    (_killed, "01_paths.ipynb: did not finish: cell 2 never ran to its end (the run stopped or was interrupted)"),
    (_no_verdict, "01_paths.ipynb: printed no full verdict of C1; nothing recorded"),
])
def test_a_notebook_that_did_not_finish_is_refused_and_its_recorded_verdicts_are_kept(tmp_path, record, capsys,
                                                                                      spoil, message):
    folder = _folder(tmp_path, "01")
    nb = _full_notebook("01")
    spoil(nb)
    nbformat.write(nb, folder / "01_paths.ipynb")
    before = record.read_bytes()
    assert report.main(["record", str(folder)]) == 1
    assert message in _one_line(capsys.readouterr().err, "report")
    assert record.read_bytes() == before


def test_a_series_note_saying_failed_is_refused(tmp_path, record, capsys):
    folder = _folder(tmp_path, "01", "03", series=_series("01", "03"))
    note = json.loads((folder / "series.json").read_text())
    note["notebooks"]["01_paths.ipynb"]["status"] = "FAILED CellExecutionError"
    (folder / "series.json").write_text(json.dumps(note))
    before = record.read_bytes()
    assert report.main(["record", str(folder)]) == 1
    assert _one_line(capsys.readouterr().err, "report").endswith(
        "run/series.json: the run did not finish (01_paths.ipynb FAILED CellExecutionError); nothing recorded")
    assert record.read_bytes() == before


def test_ctrl_c_while_the_record_is_written_leaves_it_byte_for_byte(tmp_path, record, capsys, monkeypatch):
    """Ctrl-C after half the new record reached the disk: the old record stays, no temporary."""
    real_open = io.open

    class HalfThenCtrlC:
        def __init__(self, fh):
            self._fh = fh

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

        def write(self, data):
            self._fh.write(data[:len(data) // 2])
            self._fh.flush()
            raise KeyboardInterrupt

    def interrupted_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        writing = any(m in mode for m in "wax") and str(file).startswith(str(record.parent))
        return HalfThenCtrlC(fh) if writing else fh

    folder = _folder(tmp_path, "03")
    before = record.read_bytes()
    monkeypatch.setattr(builtins, "open", interrupted_open)
    monkeypatch.setattr(io, "open", interrupted_open)
    assert report.main(["record", str(folder)]) == 130
    said = _one_line(capsys.readouterr().err, "report", "interrupted")
    assert said.startswith("nothing recorded") and "rerun `python -m dlgn_lib.record.report record " in said
    assert record.read_bytes() == before and _listing(record.parent) == ["full_results.json"]


# --- N3: docs/ on a full disk -------------------------------------------------------------------

def test_a_full_disk_leaves_the_record_byte_for_byte_and_no_temporary(tmp_path, full_folder, capsys, monkeypatch):
    """The new record is larger than the blocks the old one holds (100 checks more)."""
    record = full_folder / "full_results.json"
    shutil.copyfile(REAL_RECORD, record)
    monkeypatch.setattr(report, "FULL_RECORD", record)
    folder = _folder(tmp_path, "03", n_checks=100)
    before = record.read_bytes()
    full_folder.fill()
    assert report.main(["record", str(folder)]) == 1
    assert _one_line(capsys.readouterr().err, "report").endswith(
        "full_results.json: No space left on device; it is unchanged")
    assert record.read_bytes() == before and _listing(full_folder) == ["full_results.json"]


# --- N6, N15: solutions run onto a full disk, without its file or its notebook ---------------------

SOLUTIONS_TEXT = """# Solutions

<!-- output:about -->
<!-- /output:about -->

## 00 · Primer

### 1. First

```python
print(1)
```

## 01 · Paths

### 1. Second

```python
print(2)
```
"""


@pytest.fixture
def no_kernel(monkeypatch):
    """Snippets "run" without a kernel: each prints its id."""
    monkeypatch.setattr(solutions, "run_notebook", lambda notebook, items: {s.id: f"{s.id}\n" for s in items})


def test_solutions_run_onto_a_full_disk_leaves_the_file_and_no_temporary(full_folder, capsys, monkeypatch, no_kernel):
    path = full_folder / "SOLUTIONS.md"
    path.write_text(SOLUTIONS_TEXT)
    monkeypatch.setattr(solutions, "SOLUTIONS", path)
    full_folder.fill()
    assert solutions.main(["run", "--only", "01"]) == 1
    assert _one_line(capsys.readouterr().err, "solutions").endswith(
        "SOLUTIONS.md: No space left on device; it is unchanged")
    assert path.read_text() == SOLUTIONS_TEXT and _listing(full_folder) == ["SOLUTIONS.md"]


def test_solutions_without_their_file_or_a_notebook_are_refused_by_name(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(solutions, "run_notebook", lambda *_: pytest.fail("nothing may run"))
    monkeypatch.setattr(solutions, "SOLUTIONS", tmp_path / "SOLUTIONS.md")
    for command in (["check"], ["run", "--only", "01"]):
        assert solutions.main(command) == 1
        assert _one_line(capsys.readouterr().err, "solutions").endswith("SOLUTIONS.md is missing (the worked solutions)")
    (tmp_path / "SOLUTIONS.md").write_text(SOLUTIONS_TEXT)
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "notebooks" / "00_primer.ipynb")
    monkeypatch.setattr(solutions, "NOTEBOOKS_DIR", tmp_path / "notebooks")
    assert solutions.main(["run"]) == 1
    assert _one_line(capsys.readouterr().err, "solutions").endswith(
        "notebooks has no notebook 01 (NN_*.ipynb) to run the solutions of; nothing written")
    assert (tmp_path / "SOLUTIONS.md").read_text() == SOLUTIONS_TEXT


def test_ctrl_c_during_solutions_run_says_what_was_written_and_what_to_rerun(tmp_path, capsys, monkeypatch):
    path = tmp_path / "SOLUTIONS.md"
    path.write_text(SOLUTIONS_TEXT)
    monkeypatch.setattr(solutions, "SOLUTIONS", path)

    def first_then_ctrl_c(notebook, items):
        if notebook.name.startswith("01"):
            raise KeyboardInterrupt
        return {s.id: "printed\n" for s in items}
    monkeypatch.setattr(solutions, "run_notebook", first_then_ctrl_c)
    assert solutions.main(["run"]) == 130
    assert _one_line(capsys.readouterr().err, "solutions", "interrupted").endswith(
        "00 written, " + locations.display_path(path) + " is whole; rerun with --only 01")
    assert "<!-- output:00.1 -->" in path.read_text() and "<!-- output:01.1 -->" not in path.read_text()
    assert _listing(tmp_path) == ["SOLUTIONS.md"]


def test_ctrl_c_of_a_running_kernel_leaves_no_scratch_folder_or_kernel_file(tmp_path):
    """A real Ctrl-C while a snippet's notebook runs: one line, exit 130, the file unchanged, and
    nothing left in the temporary folder (figures, the kernel's sockets and connection file)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    (tmp_path / "notebooks").mkdir()
    marker = tmp_path / "started"
    temporary = Path(tempfile.mkdtemp(prefix="dlgn-t-", dir="/tmp"))   # short: Unix socket paths are limited
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)")])
    nbformat.write(nb, tmp_path / "notebooks" / "00_primer.ipynb")
    path = tmp_path / "SOLUTIONS.md"
    path.write_text(SOLUTIONS_TEXT.split("## 01")[0])
    code = ("import sys\nfrom pathlib import Path\nfrom dlgn_lib.record import solutions\n"
            "solutions.SOLUTIONS, solutions.NOTEBOOKS_DIR = Path(sys.argv[1]), Path(sys.argv[2])\n"
            "sys.exit(solutions.main(['run']))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(tmp_path / "notebooks")],
                            cwd=locations.REPO_ROOT, env={**os.environ, "TMPDIR": str(temporary)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    left = os.listdir(temporary)
    temporary.rmdir() if not left else shutil.rmtree(temporary)
    assert proc.returncode == 130, err
    assert _one_line(err, "solutions", "interrupted").startswith("no notebook written, ")
    assert path.read_text() == SOLUTIONS_TEXT.split("## 01")[0]
    assert left == [] and _listing(tmp_path) == ["SOLUTIONS.md", "notebooks", "started"]


# --- student and slides: bad output paths and a full disk are one line --------------------------

def test_the_student_edition_into_a_file_is_refused_and_leaves_no_temporary(tmp_path, capsys):
    (tmp_path / "out").write_text("a file")
    assert student.main([str(tmp_path / "out")]) == 1
    assert _one_line(capsys.readouterr().err, "student").endswith("out is a file, not a folder")
    assert _listing(tmp_path) == ["out"] and (tmp_path / "out").read_text() == "a file"


def test_the_student_edition_onto_a_full_disk_keeps_the_old_edition(full_folder, capsys):
    if not full_folder.mounted:
        pytest.skip("needs a real full filesystem (mounting a tmpfs is not allowed here)")
    out = full_folder / "student"
    out.mkdir()
    (out / "README.md").write_text("the old edition")
    full_folder.fill()
    assert student.main([str(out)]) == 1
    assert _one_line(capsys.readouterr().err, "student").endswith("student: No space left on device; it is unchanged")
    assert _listing(full_folder) == ["student"] and _listing(out) == ["README.md"]
    assert (out / "README.md").read_text() == "the old edition"


def test_slides_into_a_file_or_onto_a_full_disk_are_one_line(tmp_path, full_folder, capsys):
    (tmp_path / "out").write_text("a file")
    assert slides.main(["--out", str(tmp_path / "out"), "--only", "00"]) == 1
    assert _one_line(capsys.readouterr().err, "slides").endswith("out is a file, not a folder")
    if not all((locations.build_dir() / "vendor" / f"{p.replace('@', '-')}.tgz").exists() for p in slides.VENDOR):
        pytest.skip("the slides' npm packages are not fetched here (build/vendor)")
    full_folder.fill()
    assert slides.main(["--out", str(full_folder / "slides"), "--only", "00"]) == 1
    assert "slides/vendor: No space left on device" in _one_line(capsys.readouterr().err, "slides")
