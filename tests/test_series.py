"""The series runner on two tiny notebooks: one prints verdicts, one raises."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import papermill
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from jupyter_client.utils import run_sync

from dlgn_lib.record import series


def write_notebook(path: Path, *sources: str, parameters: str | None = None) -> Path:
    cells = []
    if parameters is not None:
        cells.append(new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    cells += [new_code_cell(source) for source in sources]
    nbformat.write(new_notebook(cells=cells), path)
    return path


def series_folder(tmp_path, good, bad, others=()):
    """notebooks/ with 01_good (``good``'s cells, after a parameters cell), 02_bad (``bad``'s) and
    ``others``, (name, source) pairs of more notebooks."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    write_notebook(folder / "01_good.ipynb", *good, parameters='PROFILE = "quick"')
    write_notebook(folder / "02_bad.ipynb", *bad)
    for name, source in others:
        write_notebook(folder / name, source)
    return folder


@pytest.fixture
def notebooks(tmp_path):
    """A series folder: 01 prints two verdicts, 02 raises; two files that are not series notebooks."""
    return series_folder(
        tmp_path,
        ["import sys\nprint('interpreter', sys.executable)\nprint('profile', PROFILE)",
         "print('max error 3.1e-12\\nC1 (paths = forward): SUPPORTED')\nprint('C2 midway: NOT SUPPORTED')"],
        ["raise ValueError('PROFILE must be quick or full')"],
        [("scratch.ipynb", "print('SUPPORTED')"), ("3_short_id.ipynb", "print('SUPPORTED')")])


@pytest.fixture
def build(tmp_path, monkeypatch):
    """Send build output to tmp_path, as the Makefile's users would with DLGN_BUILD_DIR."""
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    return tmp_path / "build"


def test_find_notebooks_takes_only_numbered_notebooks_in_order(notebooks):
    assert [p.name for p in series.find_notebooks(notebooks)] == ["01_good.ipynb", "02_bad.ipynb"]


def test_extract_verdicts_reads_printed_lines_only():
    nb = new_notebook(cells=[
        new_code_cell("", outputs=[
            new_output("stream", name="stdout", text="accuracy 0.93\nC2: SUPPORTED (gap 0.12)\n"),
            new_output("stream", name="stderr", text="warning: SUPPORTED is not a verdict here\n"),
        ]),
        new_code_cell("", outputs=[new_output("execute_result", data={"text/plain": "'SUPPORTED'"})]),
        new_code_cell("", outputs=[new_output("stream", name="stdout", text="  C5: NOT SUPPORTED  \n")]),
        new_code_cell("", outputs=[new_output("stream", name="stdout",
                                              text="  earlier: C5 [quick]: SUPPORTED (2 of 2)\n")]),
        new_code_cell("", outputs=[new_output("stream", name="stdout", text=(
            "C5, C7 rule v3 (registered 2026-12-02, registered): a claim is SUPPORTED when ...\n"
            "VERDICT C6 [full]: INCONCLUSIVE (1 of 2 checks pass, 0 fail, 1 inconclusive)\n"
            "SMOKE TEST C4 [quick] (quick cannot decide C4: why; the full result in docs/full_results.json is x)\n"))]),
    ])
    assert series.extract_verdicts(nb) == [
        "C2: SUPPORTED (gap 0.12)", "C5: NOT SUPPORTED",
        "VERDICT C6 [full]: INCONCLUSIVE (1 of 2 checks pass, 0 fail, 1 inconclusive)",
        "SMOKE TEST C4 [quick] (quick cannot decide C4: why; the full result in docs/full_results.json is x)"]


def test_series_runs_every_notebook_and_reports_failures(notebooks, build, capsys):
    status = series.main(["run", "--notebooks", str(notebooks), "--profile", "full"])
    out = capsys.readouterr().out

    assert status == 1
    good, bad = build / "notebooks" / "01_good.ipynb", build / "notebooks" / "02_bad.ipynb"
    printed = "".join(
        output["text"] for cell in nbformat.read(good, as_version=4).cells for output in cell.get("outputs", [])
    )
    assert f"interpreter {sys.executable}\n" in printed  # the kernel is this very interpreter
    assert "profile full\n" in printed  # the profile reached the parameters cell
    assert bad.exists()  # the partial copy is kept for reading the traceback

    table = {line.split()[0]: line for line in out.splitlines() if line.startswith(("01_", "02_"))}
    assert "  ok  " in table["01_good.ipynb"]
    assert table["01_good.ipynb"].endswith("C1 (paths = forward): SUPPORTED | C2 midway: NOT SUPPORTED")
    assert "FAILED ValueError" in table["02_bad.ipynb"]
    assert table["02_bad.ipynb"].endswith(series.NO_VERDICT)
    assert "02_bad.ipynb: ValueError: PROFILE must be quick or full" in out
    assert "notebooks: 2, ok: 1, failed: 1" in out


def test_series_exits_zero_when_all_selected_notebooks_pass(notebooks, build, capsys):
    assert series.main(["run", "--notebooks", str(notebooks), "--only", "01"]) == 0
    assert "notebooks: 1, ok: 1, failed: 0" in capsys.readouterr().out
    assert sorted(p.name for p in (build / "notebooks").iterdir()) == ["01_good.ipynb", series.SERIES_NOTE]


def test_a_series_run_notes_its_wall_time_workers_and_whether_the_run_cache_was_empty(notebooks, build, tmp_path,
                                                                                      monkeypatch, capsys):
    runs = tmp_path / "runs"
    monkeypatch.setenv("DLGN_RUNS_DIR", str(runs))
    monkeypatch.setenv("DLGN_NUMERICS", "native")
    assert series.main(["run", "--notebooks", str(notebooks), "--profile", "full", "--workers", "1"]) == 1
    note = json.loads((build / "notebooks" / series.SERIES_NOTE).read_text())
    from dlgn_lib.record import reproduce
    assert (note["profile"], note["workers"], note["runs_cache_empty_at_start"], note["numerics"], note["cpu"]) == \
        ("full", 1, True, "native", reproduce.machine_label())
    assert {name: n["status"] for name, n in note["notebooks"].items()} == \
        {"01_good.ipynb": "ok", "02_bad.ipynb": "FAILED ValueError"}
    # one worker: the wall time holds both notebooks, one after the other
    assert note["seconds"] >= sum(n["seconds"] for n in note["notebooks"].values()) - 0.2
    assert f"series: 2 notebooks in {note['seconds']:.0f} s on 1 worker, run cache empty at the start" \
        in capsys.readouterr().out
    runs.mkdir(exist_ok=True)
    (runs / "a-run.pt").write_bytes(b"")
    assert series.main(["run", "--notebooks", str(notebooks), "--only", "01"]) == 0
    note = json.loads((build / "notebooks" / series.SERIES_NOTE).read_text())
    assert (note["runs_cache_empty_at_start"], list(note["notebooks"])) == (False, ["01_good.ipynb"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--only", "01", "07"], "unknown notebook id(s) 07; available: 01, 02"),
        (["--only", "1"], "unknown notebook id(s) 1; available: 01, 02"),
        (["--profile", "huge"], "unknown profile 'huge'; allowed: quick, full"),
        (["--kernel", "no-such-kernel"], "no kernel named 'no-such-kernel'; available: dlgn-halfspace"),
    ],
)
def test_bad_arguments_fail_before_anything_runs(notebooks, build, monkeypatch, capsys, arguments, message):
    def must_not_run(*args, **kwargs):
        raise AssertionError("a notebook was executed despite bad arguments")

    monkeypatch.setattr(papermill, "execute_notebook", must_not_run)
    exits_on_bad_arguments(notebooks, arguments, message, capsys)
    assert not build.exists()


def exits_on_bad_arguments(notebooks, arguments, message, capsys):
    """``series run`` with bad arguments exits with status 2 and names the problem."""
    with pytest.raises(SystemExit) as exit_info:
        series.main(["run", "--notebooks", str(notebooks), *arguments])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_empty_folder_is_an_error_not_an_empty_success(tmp_path, build):
    with pytest.raises(ValueError, match="no notebooks named NN_"):
        series.run_series(tmp_path)


def test_format_summary_aligns_columns_and_counts():
    results = [
        series.Result("00_primer.ipynb", None, "", 3.04, (), Path("b/00_primer.ipynb")),
        series.Result("05_smooth.ipynb", None, "", 41.96, ("a: SUPPORTED", "b: NOT SUPPORTED"), Path("b/05.ipynb")),
        series.Result("09_table.ipynb", "KeyError", "'cifar10'\nmore", 0.5, (), Path("/elsewhere/09_table.ipynb")),
    ]
    lines = series.format_summary(results).splitlines()

    assert lines[0].split() == ["notebook", "status", "seconds", "verdict"]
    assert lines[2].split() == ["00_primer.ipynb", "ok", "3.0", series.NO_VERDICT]
    assert lines[3].split("  ")[-1] == "a: SUPPORTED | b: NOT SUPPORTED"
    assert lines[4].split() == ["09_table.ipynb", "FAILED", "KeyError", "0.5", series.NO_VERDICT]
    # Columns line up: every row's seconds field ends where the header's does.
    ends = {line.index("seconds") + len("seconds") for line in lines[:1]}
    ends |= {line.rindex(s) + len(s) for line, s in zip(lines[2:5], ["3.0", "42.0", "0.5"])}
    assert len(ends) == 1
    assert lines[5] == "09_table.ipynb: KeyError: 'cifar10'  (see /elsewhere/09_table.ipynb)"
    assert lines[6] == "notebooks: 3, ok: 2, failed: 1"


def test_kernels_talk_over_private_unix_sockets_and_leave_nothing(tmp_path, capfd, monkeypatch):
    """Two kernels started at once cannot pick the same socket (TCP ports are picked free and
    released before the kernel binds them), nothing is reachable from the network, the
    unencrypted-TCP warning is not printed, and the socket folder goes with the kernel."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    first, second = series._KernelManager(), series._KernelManager()
    assert first.transport == second.transport == "ipc"
    assert Path(first.ip).parent != Path(second.ip).parent
    assert Path(first.ip).is_absolute() and len(f"{first.ip}-99") < 100
    run_sync(first.cleanup_resources)(), run_sync(second.cleanup_resources)()
    assert list((tmp_path / "tmp").iterdir()) == []

    folder = tmp_path / "nb"
    folder.mkdir()
    nb = write_notebook(folder / "01_transport.ipynb",
                        "from ipykernel.kernelapp import IPKernelApp\nprint(IPKernelApp.instance().transport)",
                        parameters='PROFILE = "quick"')
    (tmp_path / "out").mkdir()
    result = series.run_notebook(nb, tmp_path / "out", "quick", series.CURRENT_INTERPRETER_KERNEL)
    assert result.ok, result.message
    printed = [o["text"] for c in nbformat.read(result.output, as_version=4).cells for o in c.get("outputs", [])]
    assert printed == ["ipc\n"]
    assert "without encryption" not in capfd.readouterr().err
    assert list((tmp_path / "tmp").iterdir()) == []  # the kernel's socket folder is gone
    assert sorted(p.name for p in folder.iterdir()) == ["01_transport.ipynb"]  # nothing beside the notebook


def test_cell_progress_reads_the_running_cell_from_papermill_s_saved_copy(tmp_path):
    import datetime
    import json
    started = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=125)).isoformat()
    nb = new_notebook(cells=[new_code_cell("a"), nbformat.v4.new_markdown_cell("m"), new_code_cell("b"),
                             new_code_cell("c")])
    for cell, state in zip([nb.cells[0], nb.cells[2], nb.cells[3]], ("completed", "running", "pending")):
        cell.metadata.papermill = {"status": state, "start_time": started if state == "running" else None}
    path = tmp_path / "07_x.ipynb"
    nbformat.write(nb, path)
    assert series.cell_progress(path) == "cell 2 of 3 for 2.1 min"      # code cells only; 125 s in it
    text = path.read_text()
    path.write_text(text[: len(text) // 2])                              # papermill mid-write
    assert series.cell_progress(path) is None
    assert series.cell_progress(tmp_path / "missing.ipynb") is None
    done = json.loads(text)
    for cell in done["cells"]:
        cell.get("metadata", {}).get("papermill", {}).update(status="completed")
    path.write_text(json.dumps(done))
    assert series.cell_progress(path) is None                             # nothing running


def test_a_long_run_says_which_cell_is_running(tmp_path, build, monkeypatch):
    folder = tmp_path / "slow"
    folder.mkdir()
    write_notebook(folder / "01_slow.ipynb", "import time", "time.sleep(6)", "print('done')",
                   parameters='PROFILE = "quick"')
    monkeypatch.setattr(series, "HEARTBEAT_S", 0.5)
    lines = []
    [result] = series.run_series(folder, workers=1, progress=lines.append)
    assert result.ok, result.message
    beats = [line for line in lines if line.startswith("  ... ")]
    # code cells as papermill runs them: parameters, its injected parameters, import, sleep, print
    assert any("01_slow.ipynb" in line and "(cell 4 of 5 for " in line for line in beats), beats


def test_a_kernel_killed_from_outside_ends_its_notebook_and_the_series_goes_on(tmp_path):
    """A kernel that dies mid-cell (here it kills itself, as an out-of-memory kill or a user's
    kill would) ends that notebook with DeadKernelError within seconds; it must not leave the
    notebook waiting for output that never comes (a blocking kernel client did)."""
    import threading
    folder = tmp_path / "nb"
    folder.mkdir()
    nb = write_notebook(folder / "01_dies.ipynb", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                        "print('not reached')", parameters='PROFILE = "quick"')
    (tmp_path / "out").mkdir()
    results = []
    worker = threading.Thread(target=lambda: results.append(series.run_notebook(
        nb, tmp_path / "out", "quick", series.CURRENT_INTERPRETER_KERNEL)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the notebook still waits on its dead kernel after 120 s"
    (result,) = results
    assert not result.ok and result.error == "DeadKernelError", (result.error, result.message)


def test_longest_notebooks_start_first_and_results_stay_in_series_order(tmp_path, build, monkeypatch):
    # One worker, three notebooks whose last measured times are 1 s, 30 s and none: the one
    # without a time (a new notebook) starts first, then 30 s, then 1 s; the summary keeps series order.
    folder = tmp_path / "timed"
    folder.mkdir()
    for name in ("01_short", "02_long", "03_new"):
        write_notebook(folder / f"{name}.ipynb", f"print('{name}')", parameters='PROFILE = "quick"')
    measured = {"01_short.ipynb": 1.0, "02_long.ipynb": 30.0}
    monkeypatch.setattr(series, "expected_seconds", lambda notebooks, profile, cold=False: dict(measured))
    assert [p.name for p in series.longest_first(series.find_notebooks(folder), measured)] == [
        "03_new.ipynb", "02_long.ipynb", "01_short.ipynb"]
    lines = []
    results = series.run_series(folder, workers=1, progress=lines.append)
    assert [r.notebook for r in results] == ["01_short.ipynb", "02_long.ipynb", "03_new.ipynb"]
    assert all(r.ok for r in results), [r.message for r in results]
    started = [line.split()[1] for line in lines if line.startswith("running ")]
    assert started == ["03_new.ipynb", "02_long.ipynb", "01_short.ipynb"], lines


def test_full_expected_times_take_an_entrys_cold_time_where_it_has_one(tmp_path, monkeypatch):
    # A notebook recorded from runs trained beforehand ran in seconds; its `cold_seconds` (runs
    # trained from an empty cache) is what a cold series waits for, so it must decide the order.
    import json
    from dlgn_lib.record import executed
    record = tmp_path / "full_results.json"
    record.write_text(json.dumps({"notebooks": {
        "01": {"seconds": 100}, "02": {"seconds": 9, "cold_seconds": 5000}, "03": {"seconds": 50}}}))
    monkeypatch.setattr(executed, "FULL_RECORD", record)
    notebooks = [tmp_path / f"{n}_x.ipynb" for n in ("01", "02", "03", "04")]
    expected = series.expected_seconds(notebooks, "full")
    assert expected == {"01_x.ipynb": 100.0, "02_x.ipynb": 5000.0, "03_x.ipynb": 50.0}
    assert [p.name[:2] for p in series.longest_first(notebooks, expected)] == ["04", "02", "01", "03"]


def test_a_cold_quick_series_expects_the_bench_records_cold_times(tmp_path, monkeypatch):
    """From an empty run cache the committed outputs' (warm) cell times say nothing of the wait: the bench
    record's cold per-notebook rows decide the estimate and the order; with a filled cache, the cell times."""
    import json
    from dlgn_lib.record import bench
    record = tmp_path / "bench.json"
    row = {"unit": " s", "target": None, "note": "", "run": 1}
    record.write_text(json.dumps({"about": "", "runs": [{}], "rows": [
        {**row, "name": bench.COST_ROW.format("01", "quick"), "values": [15.0]},
        {**row, "name": bench.COST_ROW.format("02", "quick"), "values": [110.0]},
        {**row, "name": bench.COST_ROW.format("02", "full"), "values": [9999.0]}]}))
    monkeypatch.setattr(bench, "RECORD", record)
    notebooks = [series.REPO_ROOT / "notebooks" / name
                 for name in ("01_paths.ipynb", "02_midway.ipynb", "03_regions.ipynb")]
    assert series.expected_seconds(notebooks, "quick", cold=True) == {"01_paths.ipynb": 15.0, "02_midway.ipynb": 110.0}
    assert series.expected_seconds(notebooks, "quick")["03_regions.ipynb"] > 0   # warm: the committed cell times
    # Notebooks of another folder with the same ids are not the series' own: no recorded time is theirs.
    assert series.expected_seconds([tmp_path / "01_fast.ipynb"], "quick", cold=True) == {}


def test_each_notebook_records_where_its_kernel_spent_its_time(tmp_path, build):
    """The kernel writes its dlgn_lib.costs totals when it ends; the result and series.json carry them, and
    the file is gone afterwards. A sleep inside ``costs.spent("analysis")`` is counted as analysis."""
    folder = tmp_path / "nb"
    folder.mkdir()
    write_notebook(folder / "01_costs.ipynb", "import time\nfrom dlgn_lib import costs\n"
                   "with costs.spent('analysis'):\n    time.sleep(0.3)", parameters='PROFILE = "quick"')
    out = tmp_path / "out"
    out.mkdir()
    result = series.run_notebook(folder / "01_costs.ipynb", out, "quick", series.CURRENT_INTERPRETER_KERNEL)
    assert result.ok, result.message
    assert 0.3 <= result.costs["analysis"] <= result.costs["wall"] <= result.seconds
    assert result.costs["training"] == result.costs["io"] == 0
    assert sorted(p.name for p in out.iterdir()) == ["01_costs.ipynb"]
