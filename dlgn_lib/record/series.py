"""Run the notebook series headlessly and summarise each notebook's verdict (reconstruction §4, §5).

    python -m dlgn_lib.record.series run [--profile quick|full] [--only 05 07 ...] [--kernel NAME]
                                  [--workers N | --scheduler ADDRESS] [--output DIR]

Each ``notebooks/NN_*.ipynb`` is executed by papermill with ``PROFILE`` injected into its
``parameters`` cell, in the notebooks folder, into ``build/notebooks/``. The executions are tasks
of a Dask cluster (:mod:`dlgn_lib.record.dask_cluster`), so notebooks run side by side: by default a local
cluster on 127.0.0.1 with one single-threaded worker process per core (no more than there are
notebooks to run); ``--workers N`` sets the count, ``--scheduler tcp://HOST:8786`` uses an
existing cluster instead, whose workers must see the repository at the same path and share the
run cache (``DLGN_RUNS_DIR``). Each notebook's kernel is a process of its own, using one torch
thread (``DLGN_NUM_THREADS``, default 1); notebooks that need the same run wait for each other on
the run cache's lock and then load it.

``python -m dlgn_lib.record.reproduce spread|verify`` (:mod:`dlgn_lib.record.reproduce`) run the same runner under
other CPU code paths or into ``build/verify`` and compare the outputs with the record
(reconstruction §7).

A failing notebook does not stop the others; progress lines are printed as notebooks start and
finish, and the summary table lists every notebook, in series order, with its status, its run
time and the lines it printed that contain "SUPPORTED" (its verdict). The exit status is 1 when
any notebook failed, 2 for bad arguments (checked before any cluster is started) or an
unreachable ``--scheduler``; 1 with one line naming the file or variable when ``--output`` is a
file or read-only, ``DLGN_HEARTBEAT_S`` is not a number (checked before any cluster is started too),
or ``series.json`` cannot be written (the summary comes first); 130 on Ctrl-C, after the summary of
the notebooks that finished and with the command that runs the rest. Executed copies and
``series.json`` are written whole or not at all, and no kernel's folder is left behind.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat
import papermill
from distributed import as_completed, get_worker
from ipykernel.kernelspec import RESOURCES, get_kernel_dict
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from traitlets import default

from dlgn_lib import files
from dlgn_lib.record import dask_cluster as cluster
from dlgn_lib.config import PROFILES
from dlgn_lib.verdict import EARLIER_MARK
from dlgn_lib.locations import REPO_ROOT, build_dir, display_path, find_notebooks, notebook_id  # noqa: F401 (find_notebooks: part of the runner's API)

__all__ = ["main"]

# Kernel name that always means "ipykernel on the interpreter running the series".
CURRENT_INTERPRETER_KERNEL = "dlgn-halfspace"
VERDICT_MARK = "SUPPORTED"  # also matches "NOT SUPPORTED"
#: Words of a verdict line besides VERDICT_MARK (rules v3): a verdict that the data cannot decide,
#: and quick's line in place of a verdict it cannot give.
OTHER_VERDICT_MARKS = ("INCONCLUSIVE", "SMOKE TEST")
#: A registered rule printed by ``dl.verdict.rules`` ("C5, C7 rule v3 (registered ..."): its
#: statement names the verdict words, but it is not a verdict.
_RULE_LINE = re.compile(r"^\S+(?:, \S+)* rule v\d+ \(registered ")
NO_VERDICT = "—"


@dataclass(frozen=True)
class Result:
    """Outcome of executing one notebook.

    Attributes:
        notebook: file name, e.g. ``05_smooth.ipynb``.
        error: None when the notebook ran through; else the exception class (the one raised
            inside the notebook when it came from a cell, e.g. ``ValueError``).
        message: the exception's message, "" when it ran through.
        seconds: wall-clock time of the execution.
        verdicts: printed lines containing "SUPPORTED", in order.
        output: the executed copy (partial when the notebook failed).
    """

    notebook: str
    error: str | None
    message: str
    seconds: float
    verdicts: tuple[str, ...]
    output: Path

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def status(self) -> str:
        return "ok" if self.ok else f"FAILED {self.error}"


class SeriesInterrupted(KeyboardInterrupt):
    """Ctrl-C during a series run: the results of the notebooks that finished, the rest's names, and
    (its message) the command that runs the rest."""

    def __init__(self, finished: list[Result], unfinished: list[str], profile: str):
        rerun = " --only " + " ".join(notebook_id(n) for n in unfinished) if unfinished else ""
        super().__init__(f"{len(finished)} notebooks finished"
                         + (f", not finished: {', '.join(unfinished)}" if unfinished else "")
                         + f"; to run the rest: python -m dlgn_lib.record.series run --profile {profile}{rerun}")
        self.finished, self.unfinished = finished, unfinished


class _CurrentInterpreterKernelSpecs(KernelSpecManager):
    """The installed kernel specs, plus one that runs ipykernel on ``sys.executable``.

    Installed specs are not trusted to mean this interpreter: a user-level ``python3`` spec may
    point at another Python, and ``JUPYTER_PATH`` reorders the search. Nothing is written to disk.
    """

    def get_kernel_spec(self, kernel_name):
        if kernel_name == CURRENT_INTERPRETER_KERNEL:
            return self.kernel_spec_class(resource_dir=RESOURCES, **get_kernel_dict())
        return super().get_kernel_spec(kernel_name)


class _KernelManager(AsyncKernelManager):
    """A kernel manager that also knows :data:`CURRENT_INTERPRETER_KERNEL`, and talks to its
    kernel over Unix sockets in a folder of its own.

    It is asynchronous, as nbclient's default is: a synchronous manager hands nbclient a blocking
    client, whose wait for the kernel's next output message holds the event loop, so nbclient's
    once-a-second check that the kernel lives never runs, and a kernel killed from outside leaves
    the notebook waiting without end. With this one a dead kernel ends the notebook with
    ``DeadKernelError`` within seconds, and the series goes on with the rest.

    TCP ports are picked free and then released before the kernel binds them, so two kernels
    started at the same moment (``--workers 2``) can pick the same port, and the kernel's
    heartbeat then dies with "Address already in use"; every TCP kernel also prints an
    unencrypted-transport warning. Sockets under a fresh private folder cannot collide, are not
    reachable from the network, and are removed with the folder when the kernel is cleaned up.
    The connection file is in that folder too (not a ``tmp*.json`` of the temporary folder).
    """

    #: Where the kernel's folder is made: a series run's own folder, which the run removes even when
    #: Ctrl-C or a lost worker ends a kernel before its cleanup; None (or a folder this machine
    #: lacks, on a worker of another machine) means the system's temporary folder.
    root: str | None = None

    def _folder(self) -> str:
        if getattr(self, "_socket_dir", None) is None:
            # Short and absolute: a Unix socket path is limited to about 100 bytes, and a relative
            # one would land in the notebook's folder (papermill runs kernels there).
            if self.root and os.path.isdir(self.root):
                self._socket_dir = tempfile.mkdtemp(prefix="k", dir=self.root)
            else:
                self._socket_dir = tempfile.mkdtemp(prefix="dlgn-kernel-")
            if len(self._socket_dir) > 90 and os.path.isdir("/tmp"):   # a long TMPDIR: no room for the sockets
                os.rmdir(self._socket_dir)
                self._socket_dir = tempfile.mkdtemp(prefix="dlgn-kernel-", dir="/tmp")
        return self._socket_dir

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self):
        return _CurrentInterpreterKernelSpecs(data_dir=self.data_dir)

    @default("transport")
    def _transport_default(self):
        return "ipc"

    @default("ip")
    def _ip_default(self):
        return os.path.join(self._folder(), "k")

    @default("connection_file")
    def _connection_file_default(self):
        return os.path.join(self._folder(), "kernel.json")

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        # shutdown_kernel awaits this one directly; so does anyone calling cleanup_resources.
        await super()._async_cleanup_resources(restart=restart)
        socket_dir = getattr(self, "_socket_dir", None)
        if socket_dir is not None and not restart:
            import shutil
            shutil.rmtree(socket_dir, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


def select_notebooks(notebooks: Sequence[Path], only: Iterable[str] | None) -> list[Path]:
    """The notebooks whose ids are in ``only`` (all when None), in series order.

    Raises:
        ValueError: an id in ``only`` matches no notebook; the message lists the available ids.
    """
    if only is None:
        return list(notebooks)
    wanted = set(only)
    available = {notebook_id(path) for path in notebooks}
    unknown = sorted(wanted - available)
    if unknown:
        raise ValueError(
            f"--only: unknown notebook id(s) {', '.join(unknown)}; "
            f"available: {', '.join(sorted(available)) or 'none'}"
        )
    return [path for path in notebooks if notebook_id(path) in wanted]


def check_profile(profile: str) -> None:
    """Raise ValueError unless ``profile`` is one of :data:`PROFILES`."""
    if profile not in PROFILES:
        raise ValueError(f"--profile: unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")


def _check_kernel(kernel_name: str) -> None:
    """Raise ValueError unless a Jupyter kernel spec named ``kernel_name`` can be found."""
    specs = _CurrentInterpreterKernelSpecs()
    try:
        specs.get_kernel_spec(kernel_name)
    except NoSuchKernel:
        available = sorted({CURRENT_INTERPRETER_KERNEL, *specs.find_kernel_specs()})
        raise ValueError(f"--kernel: no kernel named {kernel_name!r}; available: {', '.join(available)}") from None


def extract_verdicts(nb: nbformat.NotebookNode) -> list[str]:
    """Lines printed to stdout by the notebook's cells that contain "SUPPORTED" (or "INCONCLUSIVE",
    "SMOKE TEST"), in order; earlier verdicts that a notebook prints beside its current one
    (``verdict.history``) are left out."""
    lines = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                lines += [line.strip() for line in output["text"].splitlines()
                          if any(mark in line for mark in (VERDICT_MARK, *OTHER_VERDICT_MARKS))
                          and not line.strip().startswith(EARLIER_MARK) and not _RULE_LINE.match(line)]
    return lines


def _partial(output: Path) -> Path:
    """Where papermill saves the copy ``output`` while it runs (as each cell starts)."""
    return output.with_name(f".{output.stem}.partial.ipynb")   # papermill warns unless it ends in .ipynb


def run_notebook(notebook: Path, output_dir: Path, profile: str, kernel_name: str,
                 kernels: str | None = None) -> Result:
    """Execute one notebook with papermill into ``output_dir``; failures are returned, not raised.

    The copy is saved beside its place while it runs (:func:`_partial`) and written there whole
    at the end, also when the notebook failed; a copy that cannot be written whole (a full disk)
    is removed, and the notebook has failed. ``kernels``: the folder the kernel's own folder goes
    in (:attr:`_KernelManager.root`)."""
    output = output_dir / notebook.name
    partial = _partial(output)
    # A copy left by an earlier run must not lend its verdicts to a run that fails early.
    output.unlink(missing_ok=True)
    manager = type("_KernelManager", (_KernelManager,), {"root": kernels}) if kernels else _KernelManager
    error, message = None, ""
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            notebook,
            partial,
            parameters={"PROFILE": profile},
            cwd=notebook.parent,
            kernel_name=kernel_name,
            language="python",
            progress_bar=False,
            kernel_manager_class=manager,
        )
    except papermill.PapermillExecutionError as exc:
        error, message = exc.ename, exc.evalue
    except OSError as exc:   # a copy that cannot be written (a full disk), a kernel that cannot start
        error, message = type(exc).__name__, f"{display_path(exc.filename or output)}: {exc.strerror or exc}"
    except Exception as exc:  # kernel died, no such kernel, unreadable notebook: go on with the rest
        error, message = type(exc).__name__, str(exc)
    seconds = time.perf_counter() - start
    try:
        nb = nbformat.read(partial, as_version=4)
        nb.metadata.setdefault("papermill", {})["output_path"] = str(output)
        files.write_atomic(output, nbformat.writes(nb))
    except (OSError, ValueError, files.Refusal) as exc:   # never saved, cut short, or cannot be written
        nb = None
        if error is None:
            error, message = type(exc).__name__, str(exc)
    finally:
        partial.unlink(missing_ok=True)
    verdicts = tuple(extract_verdicts(nb)) if nb is not None else ()
    return Result(notebook.name, error, message, seconds, verdicts, output)


# papermill changes the process's working directory while it executes a notebook, so one process
# executes one notebook at a time, even on a Dask worker with several threads.
_ONE_NOTEBOOK_AT_A_TIME = threading.Lock()


def run_notebook_task(notebook: Path, output_dir: Path, profile: str, kernel_name: str, topic: str | None,
                      kernels: str | None = None) -> Result:
    """:func:`run_notebook` as a Dask task: logs a start event on ``topic`` (a dict with the
    notebook's name and the worker's address), and fails clearly when the worker cannot see the
    notebook (a worker of another machine without the repository at the same path)."""
    with _ONE_NOTEBOOK_AT_A_TIME:
        return _run_notebook_task(notebook, output_dir, profile, kernel_name, topic, kernels)


def _run_notebook_task(notebook: Path, output_dir: Path, profile: str, kernel_name: str, topic: str | None,
                       kernels: str | None) -> Result:
    if topic is not None:
        try:
            worker = get_worker()
        except ValueError:  # called outside a worker
            pass
        else:
            worker.log_event(topic, {"notebook": notebook.name, "worker": worker.address})
    if not notebook.is_file():
        message = (f"worker {cluster.worker_address()} has no file {notebook}; "
                   f"workers must see the repository at the same path")
        return Result(notebook.name, "FileNotFoundError", message, 0.0, (), output_dir / notebook.name)
    return run_notebook(notebook, output_dir, profile, kernel_name, kernels)


#: Seconds between the runner's "still running" lines, unless ``DLGN_HEARTBEAT_S`` says otherwise.
HEARTBEAT_S = 30.0


def expected_seconds(notebooks: Sequence[Path], profile: str) -> dict[str, float]:
    """Each notebook's last measured run time: the committed outputs' cell timings (quick) or
    ``docs/full_results.json`` (full: an entry's ``cold_seconds`` where it has one, the time with
    its runs trained from an empty cache, which a notebook recorded from runs trained beforehand
    states beside its ``seconds``); notebooks without one are left out."""
    from dlgn_lib.record import executed
    out = {}
    if profile == "full":
        record = executed.FULL_RECORD
        entries = files.read_json(record, what="the record of full runs").get("notebooks", {}) if record.exists() else {}
        for nb in notebooks:
            if notebook_id(nb) in entries:
                entry = entries[notebook_id(nb)]
                out[nb.name] = float(entry.get("cold_seconds", entry["seconds"]))
        return out
    for nb in notebooks:
        committed = REPO_ROOT / "notebooks" / nb.name
        if committed.exists():
            seconds = executed.seconds_of(nbformat.read(committed, as_version=4))
            if seconds:
                out[nb.name] = seconds
    return out


def longest_first(notebooks: Sequence[Path], expected: dict[str, float]) -> list[Path]:
    """The order notebooks start in: the longest last measured time first (a notebook without
    one counts as longest), series order among equals. With fewer workers than notebooks this
    keeps a long notebook from starting last and running alone at the end."""
    longest = max(expected.values(), default=0.0)
    return sorted(notebooks, key=lambda nb: -expected.get(nb.name, longest + 1.0))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def cell_progress(output: Path) -> str | None:
    """Where papermill is in the notebook it is saving to ``output`` (:func:`_partial`: it saves
    the notebook as each cell starts): "cell 14 of 32 for 3.5 min". None while the file is
    missing, half written, or has no cell running."""
    try:
        nb = json.loads(Path(output).read_text())
    except (OSError, ValueError):
        return None
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    states = [c.get("metadata", {}).get("papermill", {}) for c in cells]
    running = [k for k, state in enumerate(states) if state.get("status") == "running"]
    if not running:
        return None
    k = running[0]
    try:
        since = datetime.datetime.fromisoformat(states[k]["start_time"])
    except (KeyError, TypeError, ValueError):
        return f"cell {k + 1} of {len(cells)}"
    if since.tzinfo is None:
        since = since.replace(tzinfo=datetime.timezone.utc)
    in_cell = (datetime.datetime.now(datetime.timezone.utc) - since).total_seconds()
    return f"cell {k + 1} of {len(cells)} for {_minutes(max(in_cell, 0.0))}"


def _progress_line(running: dict[str, float], done: set[str], total: int, elapsed: float,
                  expected: dict[str, float], workers: int, cells: dict[str, str | None] | None = None) -> str:
    """One "still running" line: each running notebook's time so far (and its last measured
    time) and the cell it is in (``cells``: name → ``cell_progress``), the count done, and an
    estimate of what is left (remaining measured time / workers)."""
    now = time.perf_counter()
    cells = cells or {}
    parts = [f"{name} {_minutes(now - start)}" + (f" of ~{_minutes(expected[name])}" if name in expected else "")
             + (f" ({cells[name]})" if cells.get(name) else "")
             for name, start in sorted(running.items())]
    left = sum(max(expected.get(name, 0.0) - (now - start), 0.0) for name, start in running.items())
    left += sum(v for k, v in expected.items() if k not in running and k not in done)
    estimate = f", about {_minutes(left / max(workers, 1))} left by the last measured times" if expected else ""
    return (f"  ... {len(done)} of {total} done after {_minutes(elapsed)}{estimate}; "
            f"running: {', '.join(parts) or 'none'}")


def _run_on_client(client, notebooks: Sequence[Path], output_dir: Path, profile: str, kernel_name: str,
                   progress: Callable[[str], None] | None, *, expected: dict[str, float], heartbeat_s: float,
                   kernels: str | None) -> list[Result]:
    """Submit one task per notebook, longest first by the ``expected`` seconds
    (:func:`longest_first`), report them as they start and finish (and every ``heartbeat_s``
    seconds, what is running and about how long is left); results in series order. The kernels'
    folders go in ``kernels``."""
    topic = f"dlgn-series-{uuid.uuid4().hex}"   # one per call: runs sharing a cluster do not mix
    running: dict[str, float] = {}
    done: set[str] = set()
    stop = threading.Event()
    order = longest_first(notebooks, expected)
    if progress:
        def started(event):
            _, message = event
            running[message["notebook"]] = time.perf_counter()
            progress(f"running {message['notebook']} (profile {profile}) on {message['worker']} ...")
        client.subscribe_topic(topic, started)
        workers = max(len(client.scheduler_info().get("workers", {})), 1)
        begun = time.perf_counter()

        def heartbeat():
            while not stop.wait(heartbeat_s):
                now_running = dict(running)
                cells = {name: cell_progress(_partial(output_dir / name)) for name in now_running}
                progress(_progress_line(now_running, set(done), len(notebooks), time.perf_counter() - begun,
                                       expected, workers, cells))
        threading.Thread(target=heartbeat, daemon=True).start()
    submitted = time.perf_counter()
    futures = {
        client.submit(run_notebook_task, notebook, output_dir, profile, kernel_name, topic if progress else None,
                      kernels, pure=False, key=f"notebook-{notebook.stem}-{uuid.uuid4().hex[:8]}",
                      priority=len(order) - rank): notebook   # Dask starts higher priorities first
        for rank, notebook in enumerate(order)
    }
    results = {}
    try:
        for future in as_completed(futures, loop=client.loop):
            notebook = futures[future]
            try:
                result = future.result()
            except (Exception, asyncio.CancelledError) as exc:  # its workers died too often, or it was cancelled
                result = Result(notebook.name, type(exc).__name__, str(exc), time.perf_counter() - submitted, (),
                                output_dir / notebook.name)
            results[notebook] = result
            running.pop(notebook.name, None)
            done.add(notebook.name)
            if progress:
                progress(f"  {notebook.name}: {result.status} in {result.seconds:.1f} s")
    except KeyboardInterrupt:   # Ctrl-C: stop the rest, say what finished
        client.cancel(list(futures))
        raise SeriesInterrupted([results[n] for n in notebooks if n in results],
                                [n.name for n in notebooks if n not in results], profile) from None
    except BaseException:   # interrupted otherwise: the notebooks not started yet need not run
        client.cancel(list(futures))
        raise
    finally:
        stop.set()
        if progress:
            client.unsubscribe_topic(topic)
    return [results[notebook] for notebook in notebooks]


def run_series(
    folder: Path | str | None = None,
    *,
    profile: str = "quick",
    only: Iterable[str] | None = None,
    kernel_name: str = CURRENT_INTERPRETER_KERNEL,
    output_dir: Path | str | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    client=None,
) -> list[Result]:
    """Execute the series (or the notebooks in ``only``) on Dask; one Result per notebook, in order.

    Args:
        folder: where the notebooks are (default: the repository's notebooks/).
        profile: value injected as ``PROFILE``; one of :data:`PROFILES`.
        only: notebook ids such as ``"05"``; None runs them all.
        kernel_name: Jupyter kernel; the default runs this interpreter, whatever specs are installed.
        output_dir: where executed copies go (default: ``build/notebooks``).
        progress: called with a line as each notebook starts and finishes (e.g. ``print``); it
            may be called from the Dask client's thread.
        workers: worker processes of the local cluster (default: one per core, at most one per
            notebook).
        scheduler: address of an existing Dask scheduler to use instead of a local cluster.
        client: a ``distributed.Client`` to use as it is (no cluster is started or closed).

    Raises:
        ValueError: bad ``profile``, ``only``, ``kernel_name`` or ``workers``, ``workers`` with
            ``scheduler``, or no notebooks in ``folder``; raised before any cluster is started.
        cluster.ClusterUnavailable: ``scheduler`` cannot be reached or has no workers.
        files.Refusal: ``output_dir`` is a file or read-only, ``DLGN_HEARTBEAT_S`` is not a number,
            ``docs/full_results.json`` is damaged (full); raised before any cluster is started.
            Also when ``series.json`` cannot be written: its ``finished`` are the results.
    """
    check_profile(profile)
    _check_kernel(kernel_name)
    cluster.check_options(workers, scheduler)
    if client is not None and (workers is not None or scheduler is not None):
        raise ValueError("give a client, or workers/scheduler to start one, not both")
    notebooks = find_notebooks(folder)
    if not notebooks:
        raise ValueError(f"no notebooks named NN_*.ipynb in {display_path(folder or REPO_ROOT / 'notebooks')}")
    notebooks = select_notebooks(notebooks, only)
    # Absolute, because papermill saves the copy from inside the notebooks folder.
    output_dir = _writable(Path(output_dir).resolve() if output_dir is not None else build_dir() / "notebooks")
    run = {"expected": expected_seconds(notebooks, profile),
           "heartbeat_s": files.env_float("DLGN_HEARTBEAT_S", HEARTBEAT_S, minimum=0.1)}
    if workers is None and scheduler is None and client is None:
        workers = min(os.cpu_count() or 1, len(notebooks))
    # The kernels' folders, removed after the cluster, also when Ctrl-C ended the workers before
    # their kernels' cleanup; so are the copies those workers were saving.
    with tempfile.TemporaryDirectory(prefix="dlgn-kernels-", ignore_cleanup_errors=True) as run["kernels"]:
        try:
            if client is not None:
                return _run_and_note(client, notebooks, output_dir, profile, kernel_name, progress, **run)
            with cluster.client(workers, scheduler) as own_client:
                return _run_and_note(own_client, notebooks, output_dir, profile, kernel_name, progress, **run)
        finally:
            for notebook in notebooks:
                _partial(output_dir / notebook.name).unlink(missing_ok=True)


def _writable(folder: Path) -> Path:
    """``folder``, when it is a folder one can write in or can be made one (nothing is made); a
    :class:`files.Refusal` naming the file in its way, or the read-only folder, otherwise."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        raise files.Refusal(f"{display_path(existing)} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise files.Refusal(f"{display_path(existing)} is read-only")
    return folder


#: What ``series run`` writes beside the executed copies: how the whole run went.
from dlgn_lib.record.executed import SERIES_NOTE  # noqa: E402 (the note this runner writes)


def _run_and_note(client, notebooks: Sequence[Path], output_dir: Path, profile: str, kernel_name: str,
                  progress: Callable[[str], None] | None, **run) -> list[Result]:
    """:func:`_run_on_client`, then :data:`SERIES_NOTE` in ``output_dir``: the run's wall time
    from start to the last notebook's end, its workers, whether the run cache was empty at the
    start, the CPU, code path and code version, and each notebook's status and time (what
    ``report record`` reads to record a cold series). An interrupted run writes none; when the note
    cannot be written, the :class:`files.Refusal` carries the results (``finished``)."""
    from dlgn_lib import locations, numerics
    from dlgn_lib.record.provenance import code_version, machine_label
    files.writable_folder(output_dir)
    (output_dir / SERIES_NOTE).unlink(missing_ok=True)   # a note of an earlier run here is not this run's
    runs = locations.runs_dir()
    cache_empty = not runs.is_dir() or not any(runs.iterdir())
    workers = len(client.scheduler_info().get("workers", {}))
    started, begun = datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    results = _run_on_client(client, notebooks, output_dir, profile, kernel_name, progress, **run)
    note = {"profile": profile, "workers": workers, "seconds": round(time.perf_counter() - begun, 1),
            "started": started.isoformat(timespec="seconds"), "runs_cache_empty_at_start": cache_empty,
            "runs_cache": display_path(runs), "cpu": machine_label(), "numerics": numerics.mode(),
            "code_version": code_version(),
            "notebooks": {r.notebook: {"status": r.status, "seconds": round(r.seconds, 1)} for r in results}}
    try:
        files.write_atomic(output_dir / SERIES_NOTE, json.dumps(note, indent=1) + "\n")
    except files.Refusal as exc:
        exc.finished = results
        raise
    if progress:
        progress(f"series: {len(results)} notebooks in {_minutes(note['seconds'])} on {workers} worker"
                 f"{'s' if workers != 1 else ''}, run cache {'empty' if cache_empty else 'not empty'} at the start "
                 f"({display_path(output_dir / SERIES_NOTE)})")
    return results


def execute_in_place(notebooks: Sequence[Path], progress: Callable[[str], None] | None = print) -> None:
    """Re-execute committed notebooks in place (their ``PROFILE`` as written, i.e. quick), as a
    maintainer does after a change: outputs, timings and widget state are stored in the file.

    A notebook's figures are moved aside first, so that it saves every figure anew and prints
    "saved" as a run from a clean checkout does; they come back when the notebook fails, which is
    then left unchanged. Figures go to the repository's ``figures/`` unless ``DLGN_FIGURES_DIR``
    says otherwise.
    """
    from dlgn_lib import locations
    # committed outputs save into the repository's figures/, as `make figures` does (the default
    # of a notebook run by hand is build/figures); the kernels inherit the variable
    unset = not os.environ.get("DLGN_FIGURES_DIR")
    if unset:
        os.environ["DLGN_FIGURES_DIR"] = str(locations.REPO_ROOT / "figures")
    try:
        _execute_in_place(notebooks, locations.figures_dir(), progress)
    finally:
        if unset:
            del os.environ["DLGN_FIGURES_DIR"]


def _execute_in_place(notebooks, figures: Path, progress) -> None:
    import shutil
    import tempfile

    from nbclient import NotebookClient
    build_dir().mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        with tempfile.TemporaryDirectory(dir=build_dir(), prefix=".outputs-") as scratch:
            aside = sorted(figures.glob(f"{notebook_id(path)}_*"))
            for figure in aside:
                shutil.move(figure, Path(scratch) / figure.name)
            nb = nbformat.read(path, as_version=4)
            start = time.perf_counter()
            try:
                NotebookClient(nb, kernel_name=CURRENT_INTERPRETER_KERNEL, kernel_manager_class=_KernelManager,
                               resources={"metadata": {"path": str(path.parent)}}, record_timing=True,
                               store_widget_state=True, timeout=None).execute()
            except BaseException:
                for figure in aside:
                    shutil.move(Path(scratch) / figure.name, figure)
                raise
            files.write_atomic(path, nbformat.writes(nb) + "\n")   # as nbformat.write ends a file
            if progress:
                progress(f"{path.name}: executed in place in {time.perf_counter() - start:.0f} s")


def format_summary(results: Sequence[Result]) -> str:
    """A plain-text table: notebook, status, seconds, verdict; then failures and a count line."""
    header = ("notebook", "status", "seconds", "verdict")
    rows = [
        (r.notebook, r.status, f"{r.seconds:.1f}", " | ".join(r.verdicts) or NO_VERDICT) for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]

    def line(row):
        name, status, seconds, verdict = row
        return f"{name:<{widths[0]}}  {status:<{widths[1]}}  {seconds:>{widths[2]}}  {verdict}"

    lines = [line(header), line(tuple("-" * w for w in widths) + ("-" * len("verdict"),))]
    lines += [line(row) for row in rows]
    failed = [r for r in results if not r.ok]
    for r in failed:
        first_line = r.message.strip().splitlines()[0] if r.message.strip() else ""
        lines.append(f"{r.notebook}: {r.error}: {first_line}  (see {display_path(r.output)})")
    lines.append(f"notebooks: {len(results)}, ok: {len(results) - len(failed)}, failed: {len(failed)}")
    return "\n".join(lines)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


@files.command
def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.series", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute the notebooks and print a summary")
    run.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    run.add_argument("--only", nargs="+", metavar="ID", help="notebook ids to run, e.g. 05 07 (default: all)")
    run.add_argument(
        "--kernel",
        default=CURRENT_INTERPRETER_KERNEL,
        help=f"Jupyter kernel name (default: {CURRENT_INTERPRETER_KERNEL}, this Python interpreter)",
    )
    run.add_argument("--notebooks", type=Path, help="notebooks folder (default: the repository's notebooks/)")
    run.add_argument("--output", type=Path, help="folder of the executed copies (default: build/notebooks)")
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="worker processes of the local Dask cluster (default: one per core, at most one per notebook)",
    )
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on an existing Dask cluster, e.g. tcp://HOST:8786, instead of a local one",
    )
    args = parser.parse_args(argv)
    try:
        results = run_series(
            args.notebooks,
            profile=args.profile,
            only=args.only,
            kernel_name=args.kernel,
            progress=lambda text: print(text, flush=True),
            workers=args.workers,
            scheduler=args.scheduler,
            output_dir=args.output,
        )
    except (ValueError, cluster.ClusterUnavailable) as exc:  # notebook failures are results, not errors
        parser.error(str(exc))
    except (KeyboardInterrupt, files.Refusal) as exc:   # what finished is shown before the one line
        if getattr(exc, "finished", None):
            print(format_summary(exc.finished), flush=True)
        raise
    print(format_summary(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy's: the functions sent to Dask
    # workers must be importable there as dlgn_lib.record.series.*.
    from dlgn_lib.record.series import main as _main

    sys.exit(_main())
