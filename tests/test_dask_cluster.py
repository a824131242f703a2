"""Training and the series on a real Dask LocalCluster: two single-threaded workers on 127.0.0.1.

One cluster serves the whole module (starting one costs seconds); the run cache goes to a
temporary folder set in the environment before the workers start, so they inherit it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import sys
from pathlib import Path

import cloudpickle
import nbformat
import psutil
import pytest
import torch
from distributed import LocalCluster, get_task_stream
from nbformat.v4 import new_code_cell, new_notebook

from dlgn_lib import locations, runs

from dlgn_lib.record import dask_cluster as cluster, series
from dlgn_lib import config as C

# Helpers below run on the workers; send them by value, whatever name pytest imported this file as.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DLGN_RUNS_DIR", str(path))
        env.setenv("DLGN_QUIET", "1")
        yield path


@pytest.fixture(scope="module")
def dask_client(runs_dir):
    with cluster.client(workers=2) as client:
        yield client


def write_notebook(path: Path, *sources: str, parameters: str | None = None) -> Path:
    cells = [new_code_cell(parameters, metadata={"tags": ["parameters"]})] if parameters is not None else []
    nbformat.write(new_notebook(cells=cells + [new_code_cell(source) for source in sources]), path)
    return path


def config(seed=0, widths=(6, 5), epochs=12):
    data = C.DataSpec.make("circle", target="steps", n_train=64, n_val=48, n_test=80)
    return C.RunConfig(data, C.ModelSpec.make("dlgn", widths), epochs=epochs, n_snapshots=5, seed=seed)


def assert_same_run(a: runs.Run, b: runs.Run):
    assert a.config == b.config
    assert a.history == b.history
    assert a.meta == b.meta
    assert a.snapshots.keys() == b.snapshots.keys()
    for epoch in a.snapshots:
        for name, tensor in a.snapshots[epoch].items():
            assert torch.equal(tensor, b.snapshots[epoch][name]), (epoch, name)
    assert a.best_state.keys() == b.best_state.keys()
    for name, tensor in a.best_state.items():
        assert torch.equal(tensor, b.best_state[name]), name


def leftovers(folder: Path) -> list[str]:
    """Temporary or discarded entries in the run cache (anything hidden but the lock folder)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != ".locks")


def worker_pids(client) -> set[int]:
    return set(client.run(os.getpid).values())


def listening_hosts(pid: int) -> set[str]:
    return {c.laddr.ip for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}


def test_local_cluster_is_loopback_single_threaded_and_inherits_the_environment(dask_client, runs_dir):
    info = dask_client.scheduler_info()
    assert len(info["workers"]) == 2
    assert {w["nthreads"] for w in info["workers"].values()} == {1}
    assert all(address.startswith("tcp://127.0.0.1:") for address in [info["address"], *info["workers"]])
    # Scheduler (in this process) and worker processes listen on the loopback interface only.
    assert {host for pid in [os.getpid(), *worker_pids(dask_client)] for host in listening_hosts(pid)} == {"127.0.0.1"}
    assert set(dask_client.run(locations.runs_dir).values()) == {runs_dir}
    assert set(dask_client.run(torch.get_num_threads).values()) == {1}

    # Dask's own monitoring is slowed on the scheduler and on every worker (cluster.QUIET_MONITORING).
    def monitoring(dask_worker):
        callbacks = dask_worker.periodic_callbacks
        return "profile" in callbacks, callbacks["monitor"].callback_time
    assert set(dask_client.run(monitoring).values()) == {(False, 5000.0)}
    scheduler = dask_client.cluster.scheduler
    assert (scheduler.periodic_callbacks["monitor"].callback_time, scheduler._tick_interval) == (5000.0, 0.5)

    options = cluster.local_cluster_options()
    assert options["n_workers"] == os.cpu_count()
    assert (options["threads_per_worker"], options["processes"], options["host"]) == (1, True, "127.0.0.1")
    assert options["dashboard_address"] is None and options["scheduler_kwargs"]["dashboard"] is False


def test_seed_groups_are_those_of_get_or_train_many():
    a0, a1, b0 = config(0), config(1), config(0, widths=(5, 4))
    assert cluster.seed_groups([a0, b0, a1, a0]) == [[a0, a1], [b0]]


def test_get_or_train_distributed_trains_on_the_workers_into_the_shared_cache(dask_client, runs_dir, monkeypatch,
                                                                              capsys):
    wanted = [config(2), config(3, widths=(5, 4)), config(3), config(2)]   # two groups, one listed twice

    with get_task_stream(dask_client) as stream:
        got = cluster.get_or_train_distributed(wanted, dask_client)

    assert [run.config for run in got] == wanted
    assert got[0] is got[3]
    tasks = [task["key"] for task in stream.data if task["key"].startswith("get_or_train_group-")]
    assert len(tasks) == 2   # one task per seed group: seeds 2 and 3 of (6, 5) train together
    # The workers saved every run; this process only loads them.
    def no_saving(run):
        raise AssertionError(f"{run.config.label()} was trained in the test process instead of loaded")
    monkeypatch.setattr(runs, "save", no_saving)
    capsys.readouterr()
    for config_, run in zip(wanted, got):
        assert_same_run(runs.get_or_train(config_), run)
    assert capsys.readouterr().out.count("loaded run ") == len(wanted)
    assert leftovers(runs_dir) == []


def _install_killer(marker: str):
    """On a worker: the first run to finish training writes the worker's pid to ``marker`` and
    SIGKILLs the worker before saving (with the entry's lock held); later runs save as usual."""
    original = runs.save

    def save(run):
        if not os.path.exists(marker):
            Path(marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return original(run)

    save.original = original
    runs.save = save


def _remove_killer():
    runs.save = getattr(runs.save, "original", runs.save)


def test_a_worker_killed_mid_run_is_replaced_and_the_run_retried(dask_client, runs_dir, tmp_path):
    marker = tmp_path / "killed-worker-pid"
    wanted = config(4, widths=(7, 3), epochs=30)
    before = worker_pids(dask_client)
    dask_client.run(_install_killer, str(marker))
    try:
        [run] = cluster.get_or_train_distributed([wanted], dask_client)
    finally:
        dask_client.run(_remove_killer)
        dask_client.wait_for_workers(2, timeout=30)

    killed = int(marker.read_text())
    assert killed in before   # a worker of the cluster died in the middle of get_or_train ...
    after = worker_pids(dask_client)
    assert len(after) == 2 and killed not in after   # ... the nanny replaced it ...
    assert run.history["epoch"][-1] == 30   # ... and the retried task trained the run to the end
    assert_same_run(runs.load(wanted), run)   # the entry verifies (checksum, config)
    assert leftovers(runs_dir) == []   # no .tmp-* (half-written) or .trash-* folders
    entries = [p for p in runs_dir.iterdir() if not p.name.startswith(".")]
    assert all((p / "manifest.json").is_file() and (p / "run.pt").is_file() for p in entries)


def test_a_worker_with_another_run_cache_is_refused(dask_client, tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "elsewhere"))   # this process only
    with pytest.raises(RuntimeError, match="start the workers with DLGN_RUNS_DIR="):
        cluster.get_or_train_distributed([config(5)], dask_client)
    assert not (tmp_path / "elsewhere").exists()


@pytest.fixture
def notebooks(tmp_path):
    """01 runs a second and prints verdicts and where it ran; 02 prints its start, then raises."""
    from tests.test_series import series_folder
    return series_folder(
        tmp_path,
        ["import os, time\nprint('start', time.time())",
         "import torch, dlgn_lib\nprint('threads', torch.get_num_threads())\nprint('parent', os.getppid())",
         "time.sleep(1.5)\nprint('C1 (paths = forward): SUPPORTED')\nprint('C2 midway: NOT SUPPORTED')",
         "print('end', time.time())"],
        ["import time\nprint('start', time.time())", "raise ValueError('PROFILE must be quick or full')"])


def printed(path: Path) -> dict[str, str]:
    """First word of each printed line -> the rest, from an executed notebook."""
    cells = nbformat.read(path, as_version=4).cells
    text = "".join(o.get("text", "") for cell in cells for o in cell.get("outputs", []) if o.get("name") == "stdout")
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def test_series_on_an_existing_cluster_gives_the_in_process_results(dask_client, notebooks, tmp_path):
    (tmp_path / "in-process").mkdir()
    reference = [series.run_notebook(nb, tmp_path / "in-process", "quick", series.CURRENT_INTERPRETER_KERNEL)
                 for nb in series.find_notebooks(notebooks)]   # the sequential runner, in this process
    lines = []

    results = series.run_series(notebooks, output_dir=tmp_path / "dask", progress=lines.append,
                                scheduler=dask_client.scheduler_info()["address"])

    def comparable(result):
        return dataclasses.replace(result, seconds=0.0, output=Path(result.output.name))

    assert [r.notebook for r in results] == ["01_good.ipynb", "02_bad.ipynb"]
    assert [comparable(r) for r in results] == [comparable(r) for r in reference]
    assert series.format_summary([comparable(r) for r in results]) == series.format_summary(
        [comparable(r) for r in reference])
    assert results[0].ok and results[1].error == "ValueError"
    assert results[0].verdicts == ("C1 (paths = forward): SUPPORTED", "C2 midway: NOT SUPPORTED")

    good, bad = printed(tmp_path / "dask" / "01_good.ipynb"), printed(tmp_path / "dask" / "02_bad.ipynb")
    assert good["threads"] == "1"
    assert int(good["parent"]) in worker_pids(dask_client)   # the kernel was started by a worker
    assert float(bad["start"]) < float(good["end"])   # 02 did not wait for 01: side by side
    for name in ("01_good.ipynb", "02_bad.ipynb"):
        assert any(line.startswith(f"running {name} (profile quick) on tcp://127.0.0.1:") for line in lines)
    assert any(line.startswith("  01_good.ipynb: ok in ") for line in lines)
    assert any(line.startswith("  02_bad.ipynb: FAILED ValueError in ") for line in lines)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def no_cluster(monkeypatch, tmp_path):
    """Any attempt to start or reach a cluster fails the test; build output goes to tmp_path."""
    def must_not_start(*args, **kwargs):
        raise AssertionError("a cluster was started despite bad arguments")

    monkeypatch.setattr(cluster, "client", must_not_start)
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    return tmp_path / "build"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--workers", "0"], "argument --workers: '0' is not a positive integer"),
        (["--workers", "two"], "argument --workers: 'two' is not a positive integer"),
        (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"], "not allowed with argument --workers"),
        (["--workers", "2", "--only", "07"], "unknown notebook id(s) 07; available: 01, 02"),
        (["--scheduler", "tcp://127.0.0.1:8786", "--profile", "huge"], "unknown profile 'huge'"),
        (["--scheduler", "http://host:8786"], "--scheduler: 'http://host:8786' is not a scheduler address"),
        (["--scheduler", "host"], "missing port number in address 'host'); write it as tcp://HOST:PORT"),
    ],
)
def test_bad_arguments_fail_before_any_cluster_starts(notebooks, no_cluster, capsys, arguments, message):
    from tests.test_series import exits_on_bad_arguments
    exits_on_bad_arguments(notebooks, arguments, message, capsys)
    assert not no_cluster.exists()


def test_run_series_checks_workers_too(notebooks, no_cluster):
    with pytest.raises(ValueError, match="--workers: 0 is not a positive integer"):
        series.run_series(notebooks, workers=0)
    with pytest.raises(ValueError, match="exclude each other"):
        series.run_series(notebooks, workers=2, scheduler="tcp://127.0.0.1:8786")


def test_unreachable_scheduler_exits_2_naming_the_address(notebooks, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 1.0)
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(SystemExit) as exit_info:
        series.main(["run", "--notebooks", str(notebooks), "--scheduler", address])
    assert exit_info.value.code == 2
    assert f"error: cannot reach a Dask scheduler at {address} within 1 s" in capsys.readouterr().err
    assert not (tmp_path / "build").exists()


def test_a_scheduler_without_workers_is_reported():
    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=None) as empty:
        with pytest.raises(cluster.ClusterUnavailable, match=f"the Dask scheduler at {empty.scheduler_address} has no workers"):
            cluster.connect(empty.scheduler_address, timeout=0.5)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([], {"workers": min(os.cpu_count(), 2), "scheduler": None}),   # one per core, at most one per notebook
        (["--workers", "3"], {"workers": 3, "scheduler": None}),
        (["--scheduler", "tcp://10.0.0.5:8786"], {"workers": None, "scheduler": "tcp://10.0.0.5:8786"}),
    ],
)
def test_cli_passes_workers_and_scheduler_to_the_cluster(notebooks, tmp_path, monkeypatch, capsys, arguments, expected):
    asked = []

    @contextlib.contextmanager
    def fake_client(workers=None, scheduler=None):
        asked.append({"workers": workers, "scheduler": scheduler})
        yield "client"

    def fake_run(client, notebooks_, output_dir, profile, kernel_name, progress, **run):
        assert client == "client"
        return [series.Result(nb.name, None, "", 0.1, (), output_dir / nb.name) for nb in notebooks_]

    monkeypatch.setattr(cluster, "client", fake_client)
    monkeypatch.setattr(series, "_run_and_note", fake_run)
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))

    assert series.main(["run", "--notebooks", str(notebooks), *arguments]) == 0
    assert asked == [expected]
    assert "notebooks: 2, ok: 2, failed: 0" in capsys.readouterr().out
