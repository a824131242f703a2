"""Run the notebook series headlessly on a Dask cluster and summarise each notebook's verdict (reconstruction §4, §5).

    python -m dlgn_lib.record.series run [--profile quick|full] [--only 05 07 ...] [--kernel NAME] [--notebooks DIR]
                                  [--workers N | --scheduler ADDRESS] [--output DIR]

Each ``notebooks/NN_*.ipynb`` is executed by papermill, with ``PROFILE`` injected into its ``parameters`` cell,
into ``build/notebooks/`` (with ``series.json`` beside), as a task of a local Dask cluster
(:mod:`dlgn_lib.record.dask_cluster`) or of the one at ``--scheduler``. The summary lists every notebook in series
order with its status, time and the lines it printed that contain "SUPPORTED". Exit status: 1 when a notebook
failed, or with one line naming a file or variable that is refused; 2 for bad arguments or an unreachable
scheduler; 130 on Ctrl-C, after the summary of what finished and with the command that runs the rest.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import shutil
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
from dlgn_lib.config import PROFILES
from dlgn_lib.locations import REPO_ROOT, build_dir, display_path, figures_dir, find_notebooks, notebook_id, runs_dir
from dlgn_lib.record import dask_cluster as cluster, executed
from dlgn_lib.record.executed import SERIES_NOTE
from dlgn_lib.verdict import EARLIER_MARK

__all__ = ["main"]

# Kernel name that always means "ipykernel on the interpreter running the series".
CURRENT_INTERPRETER_KERNEL = "dlgn-halfspace"
#: Words of a verdict line: "SUPPORTED" (also in "NOT SUPPORTED"), a verdict that the data cannot decide
#: (rules v3), and quick's line in place of a verdict it cannot give.
VERDICT_MARKS = ("SUPPORTED", "INCONCLUSIVE", "SMOKE TEST")
#: A registered rule printed by ``dl.verdict.rules`` ("C5, C7 rule v3 (registered ..."): its
#: statement names the verdict words, but it is not a verdict.
_RULE_LINE = re.compile(r"^\S+(?:, \S+)* rule v\d+ \(registered ")
NO_VERDICT = "—"
#: Seconds between the runner's "still running" lines, unless ``DLGN_HEARTBEAT_S`` says otherwise.
HEARTBEAT_S = 30.0


@dataclass(frozen=True)
class Result:
    """One notebook's execution: ``error`` is None when it ran through, else the exception's class (the one raised
    in a cell, e.g. ``ValueError``) with its ``message``; ``verdicts`` are its printed verdict lines, in order;
    ``output`` is the executed copy (partial when the notebook failed)."""

    notebook: str
    error: str | None
    message: str
    seconds: float
    verdicts: tuple[str, ...]
    output: Path
    #: Seconds the kernel spent training, analysing and on file I/O (``dlgn_lib.costs``); None if not measured.
    costs: dict | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def status(self) -> str:
        return "ok" if self.ok else f"FAILED {self.error}"


class _CurrentInterpreterKernelSpecs(KernelSpecManager):
    """The installed kernel specs, plus one that runs ipykernel on ``sys.executable`` (an installed
    ``python3`` spec may point at another Python, and ``JUPYTER_PATH`` reorders the search)."""

    def get_kernel_spec(self, kernel_name):
        if kernel_name == CURRENT_INTERPRETER_KERNEL:
            return self.kernel_spec_class(resource_dir=RESOURCES, **get_kernel_dict())
        return super().get_kernel_spec(kernel_name)


class _KernelManager(AsyncKernelManager):
    """A kernel manager that knows :data:`CURRENT_INTERPRETER_KERNEL` and talks to its kernel over Unix
    sockets in a folder of its own, removed with the kernel's cleanup (the connection file too).

    Asynchronous, as nbclient's default: a synchronous one hands nbclient a blocking client whose wait
    holds the event loop, so a kernel killed from outside would leave its notebook waiting without end
    instead of ending it with ``DeadKernelError``. Not TCP: ports are picked free and released before the
    kernel binds them, so two kernels started at once can collide, and each TCP kernel warns of an
    unencrypted transport; private sockets cannot collide and are not reachable from the network.
    """

    #: Where the kernel's folder is made: a series run's own folder, which the run removes even when a
    #: kernel ends before its cleanup; None (or a folder this machine lacks) means the system's temporary folder.
    root: str | None = None
    #: Where the kernel writes its ``dlgn_lib.costs`` totals when it ends (``DLGN_COSTS_FILE``); None: nowhere.
    costs_file: str | None = None
    _socket_dir: str | None = None

    async def _async_pre_start_kernel(self, **kw):
        if self.costs_file:
            kw["env"] = {**kw.get("env", os.environ), "DLGN_COSTS_FILE": self.costs_file}
        return await super()._async_pre_start_kernel(**kw)

    def _folder(self) -> str:
        if self._socket_dir is None:
            # Short and absolute: a Unix socket path is limited to about 100 bytes, and a relative
            # one would land in the notebook's folder (papermill runs kernels there).
            root = self.root if self.root and os.path.isdir(self.root) else None
            self._socket_dir = tempfile.mkdtemp(prefix="k" if root else "dlgn-kernel-", dir=root)
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
        if self._socket_dir is not None and not restart:
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


def select_notebooks(notebooks: Sequence[Path], only: Iterable[str] | None) -> list[Path]:
    """The notebooks whose ids are in ``only`` (all when None), in series order; ValueError names unknown ids."""
    if only is None:
        return list(notebooks)
    wanted = set(only)
    available = {notebook_id(path) for path in notebooks}
    if unknown := sorted(wanted - available):
        raise ValueError(f"--only: unknown notebook id(s) {', '.join(unknown)}; "
                         f"available: {', '.join(sorted(available)) or 'none'}")
    return [path for path in notebooks if notebook_id(path) in wanted]


def check_profile(profile: str) -> None:
    """Raise ValueError unless ``profile`` is one of :data:`PROFILES`."""
    if profile not in PROFILES:
        raise ValueError(f"--profile: unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")


def _check_kernel(kernel_name: str) -> None:
    specs = _CurrentInterpreterKernelSpecs()
    try:
        specs.get_kernel_spec(kernel_name)
    except NoSuchKernel:
        available = sorted({CURRENT_INTERPRETER_KERNEL, *specs.find_kernel_specs()})
        raise ValueError(f"--kernel: no kernel named {kernel_name!r}; available: {', '.join(available)}") from None


def extract_verdicts(nb: nbformat.NotebookNode) -> list[str]:
    """Lines printed to stdout that contain a :data:`VERDICT_MARKS` word, in order, less the earlier verdicts a
    notebook prints beside its current one (``verdict.history``) and the statements of registered rules."""
    return [line.strip() for line in executed._stdout_lines(nb) if any(mark in line for mark in VERDICT_MARKS)
            and not line.strip().startswith(EARLIER_MARK) and not _RULE_LINE.match(line)]


def _partial(output: Path) -> Path:
    """Where papermill saves the copy ``output`` while it runs (as each cell starts)."""
    return output.with_name(f".{output.stem}.partial.ipynb")   # papermill warns unless it ends in .ipynb


def run_notebook(notebook: Path, output_dir: Path, profile: str, kernel_name: str,
                 kernels: str | None = None) -> Result:
    """Execute one notebook with papermill into ``output_dir``; failures are returned, not raised.

    The copy is saved at :func:`_partial` while it runs and written whole at the end, also when the
    notebook failed; one that cannot be written whole (a full disk) is removed, and the notebook has
    failed. ``kernels``: the folder the kernel's folder goes in (:attr:`_KernelManager.root`)."""
    output = output_dir / notebook.name
    partial = _partial(output)
    # A copy left by an earlier run must not lend its verdicts to a run that fails early.
    output.unlink(missing_ok=True)
    # In the series' kernel folder where there is one (removed whatever happens, Ctrl-C included).
    costs_file = Path(kernels if kernels and os.path.isdir(kernels) else output_dir) / f".{notebook.stem}.costs.json"
    costs_file.unlink(missing_ok=True)
    manager = type("_KernelManager", (_KernelManager,), {"root": kernels, "costs_file": str(costs_file)})
    error, message = None, ""
    start = time.perf_counter()
    try:
        papermill.execute_notebook(notebook, partial, parameters={"PROFILE": profile}, cwd=notebook.parent,
                                   kernel_name=kernel_name, language="python", progress_bar=False,
                                   kernel_manager_class=manager)
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
    try:
        costs = json.loads(costs_file.read_text())
    except (OSError, ValueError):   # a kernel that was killed writes none
        costs = None
    costs_file.unlink(missing_ok=True)
    return Result(notebook.name, error, message, seconds, tuple(extract_verdicts(nb)) if nb is not None else (), output,
                  costs)


# papermill changes the process's working directory while it executes a notebook, so one process
# executes one notebook at a time, even on a Dask worker with several threads.
_ONE_NOTEBOOK_AT_A_TIME = threading.Lock()


def run_notebook_task(notebook: Path, output_dir: Path, profile: str, kernel_name: str, topic: str | None,
                      kernels: str | None = None) -> Result:
    """:func:`run_notebook` as a Dask task: logs a start event on ``topic`` (the notebook's name and the
    worker's address), and fails clearly when the worker cannot see the notebook."""
    with _ONE_NOTEBOOK_AT_A_TIME:
        if topic is not None:
            get_worker().log_event(topic, {"notebook": notebook.name, "worker": cluster.worker_address()})
        if not notebook.is_file():   # a worker of another machine without the repository at the same path
            message = (f"worker {cluster.worker_address()} has no file {notebook}; "
                       f"workers must see the repository at the same path")
            return Result(notebook.name, "FileNotFoundError", message, 0.0, (), output_dir / notebook.name)
        return run_notebook(notebook, output_dir, profile, kernel_name, kernels)


def expected_seconds(notebooks: Sequence[Path], profile: str, cold: bool = False) -> dict[str, float]:
    """Each notebook's last measured run time, where it has one: ``docs/full_results.json`` (full: an entry's
    ``cold_seconds``, from an empty run cache, else ``seconds``); for quick from an empty run cache (``cold``),
    the cold series of the bench record (``docs/bench.json``), else the committed outputs' cell timings."""
    if profile != "full" and cold:
        from dlgn_lib.record import bench
        rows = {row.name: row.median for row, _ in bench.load_record(bench.RECORD)[0]} if bench.RECORD.exists() else {}
        recorded = {nb.name: rows[name] for nb in notebooks   # the series' own notebooks only
                    if (REPO_ROOT / "notebooks" / nb.name).exists()
                    and (name := bench.COST_ROW.format(notebook_id(nb), profile)) in rows}
        if recorded:
            return recorded
    if profile == "full":
        entries = (files.read_json(executed.FULL_RECORD, what="the record of full runs").get("notebooks", {})
                   if executed.FULL_RECORD.exists() else {})
        return {nb.name: float(entry.get("cold_seconds", entry["seconds"]))
                for nb in notebooks if (entry := entries.get(notebook_id(nb))) is not None}
    committed = {nb.name: REPO_ROOT / "notebooks" / nb.name for nb in notebooks}
    seconds = {name: executed.seconds_of(nbformat.read(path, as_version=4))
               for name, path in committed.items() if path.exists()}
    return {name: s for name, s in seconds.items() if s}


def longest_first(notebooks: Sequence[Path], expected: dict[str, float]) -> list[Path]:
    """The order notebooks start in: the longest last measured time first (a notebook without
    one counts as longest), series order among equals. With fewer workers than notebooks this
    keeps a long notebook from starting last and running alone at the end."""
    longest = max(expected.values(), default=0.0)
    return sorted(notebooks, key=lambda nb: -expected.get(nb.name, longest + 1.0))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def cell_progress(output: Path) -> str | None:
    """Where papermill is in the notebook it saves to ``output`` as each cell starts: "cell 14 of 32 for
    3.5 min"; None while the file is missing, half written, or has no cell running."""
    try:
        nb = json.loads(Path(output).read_text())
    except (OSError, ValueError):
        return None
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    states = [c.get("metadata", {}).get("papermill", {}) for c in cells]
    k = next((k for k, state in enumerate(states) if state.get("status") == "running"), None)
    if k is None:
        return None
    try:
        since = datetime.datetime.fromisoformat(states[k]["start_time"])
    except (KeyError, TypeError, ValueError):
        return f"cell {k + 1} of {len(cells)}"
    since = since.replace(tzinfo=since.tzinfo or datetime.timezone.utc)   # papermill writes UTC without a zone
    in_cell = (datetime.datetime.now(datetime.timezone.utc) - since).total_seconds()
    return f"cell {k + 1} of {len(cells)} for {_minutes(max(in_cell, 0.0))}"


def _run_on_client(client, notebooks: Sequence[Path], output_dir: Path, profile: str, kernel_name: str,
                   progress: Callable[[str], None] | None, *, expected: dict[str, float], heartbeat_s: float,
                   kernels: str | None) -> list[Result]:
    """One task per notebook, longest first by ``expected`` seconds; reports each start and end and, every
    ``heartbeat_s`` seconds, what runs (its time, its last measured time, its cell) and an estimate of what
    is left (the remaining measured time over the workers); results in series order."""
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
                now, now_running, finished = time.perf_counter(), dict(running), set(done)
                parts = [f"{name} {_minutes(now - start)}"
                         + (f" of ~{_minutes(expected[name])}" if name in expected else "")
                         + (f" ({cell})" if (cell := cell_progress(_partial(output_dir / name))) else "")
                         for name, start in sorted(now_running.items())]
                left = sum(max(expected.get(name, 0.0) - (now - start), 0.0) for name, start in now_running.items())
                left += sum(v for k, v in expected.items() if k not in now_running and k not in finished)
                estimate = f", about {_minutes(left / workers)} left by the last measured times" if expected else ""
                progress(f"  ... {len(finished)} of {len(notebooks)} done after {_minutes(now - begun)}{estimate}; "
                         f"running: {', '.join(parts) or 'none'}")
        threading.Thread(target=heartbeat, daemon=True).start()
    submitted = time.perf_counter()
    futures = {client.submit(run_notebook_task, notebook, output_dir, profile, kernel_name,
                             topic if progress else None, kernels, pure=False,
                             key=f"notebook-{notebook.stem}-{uuid.uuid4().hex[:8]}",
                             priority=len(order) - rank): notebook   # Dask starts higher priorities first
               for rank, notebook in enumerate(order)}
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
    except BaseException as exc:   # the notebooks not started yet need not run
        client.cancel(list(futures))
        if not isinstance(exc, KeyboardInterrupt):
            raise
        # Ctrl-C: its message says what finished and the command that runs the rest; main prints the results
        rest = [n for n in notebooks if n not in results]
        stopped = KeyboardInterrupt(f"{len(results)} notebooks finished"
                                    + (f", not finished: {', '.join(n.name for n in rest)}" if rest else "")
                                    + f"; to run the rest: python -m dlgn_lib.record.series run --profile {profile}"
                                    + (" --only " + " ".join(notebook_id(n) for n in rest) if rest else ""))
        stopped.finished = [results[n] for n in notebooks if n in results]
        raise stopped from None
    finally:
        stop.set()
        if progress:
            client.unsubscribe_topic(topic)
    return [results[notebook] for notebook in notebooks]


def run_series(folder: Path | str | None = None, *, profile: str = "quick", only: Iterable[str] | None = None,
               kernel_name: str = CURRENT_INTERPRETER_KERNEL, output_dir: Path | str | None = None,
               progress: Callable[[str], None] | None = None, workers: int | None = None,
               scheduler: str | None = None) -> list[Result]:
    """``series run`` (``progress`` may be called from the Dask client's thread): one Result per notebook, in
    series order. Bad arguments (ValueError) and files (files.Refusal) are refused before any cluster starts;
    a Refusal to write ``series.json`` carries the results as its ``finished``."""
    check_profile(profile)
    _check_kernel(kernel_name)
    cluster.check_options(workers, scheduler)
    notebooks = find_notebooks(folder)
    if not notebooks:
        raise ValueError(f"no notebooks named NN_*.ipynb in {display_path(folder or REPO_ROOT / 'notebooks')}")
    notebooks = select_notebooks(notebooks, only)
    # Absolute, because papermill saves the copy from inside the notebooks folder.
    output_dir = Path(output_dir).resolve() if output_dir is not None else build_dir() / "notebooks"
    files.check_writable_folder(output_dir)
    run = {"expected": expected_seconds(notebooks, profile, cold=_cache_is_empty()),
           "heartbeat_s": files.env_float("DLGN_HEARTBEAT_S", HEARTBEAT_S, minimum=0.1)}
    if workers is None and scheduler is None:
        workers = min(os.cpu_count() or 1, len(notebooks))
    # The kernels' folders, removed after the cluster, also when Ctrl-C ended the workers before
    # their kernels' cleanup; so are the copies those workers were saving.
    with tempfile.TemporaryDirectory(prefix="dlgn-kernels-", ignore_cleanup_errors=True) as run["kernels"]:
        try:
            with cluster.client(workers, scheduler) as client:
                return _run_and_note(client, notebooks, output_dir, profile, kernel_name, progress, **run)
        finally:
            for notebook in notebooks:
                _partial(output_dir / notebook.name).unlink(missing_ok=True)


def _cache_is_empty() -> bool:
    runs = runs_dir()
    return not runs.is_dir() or not any(runs.iterdir())


def _run_and_note(client, notebooks: Sequence[Path], output_dir: Path, profile: str, kernel_name: str,
                  progress: Callable[[str], None] | None, **run) -> list[Result]:
    """:func:`_run_on_client`, then :data:`SERIES_NOTE` in ``output_dir`` (what ``report record`` reads to
    record a cold series); an interrupted run writes none, and a Refusal to write it carries the results."""
    from dlgn_lib import numerics
    from dlgn_lib.record.provenance import code_version, machine_label
    files.writable_folder(output_dir)
    (output_dir / SERIES_NOTE).unlink(missing_ok=True)   # a note of an earlier run here is not this run's
    cache_empty = _cache_is_empty()
    workers = len(client.scheduler_info().get("workers", {}))
    started, begun = datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    results = _run_on_client(client, notebooks, output_dir, profile, kernel_name, progress, **run)
    note = {"profile": profile, "workers": workers, "seconds": round(time.perf_counter() - begun, 1),
            "started": started.isoformat(timespec="seconds"), "runs_cache_empty_at_start": cache_empty,
            "runs_cache": display_path(runs_dir()), "cpu": machine_label(), "numerics": numerics.mode(),
            "code_version": code_version(),
            "notebooks": {r.notebook: {"status": r.status, "seconds": round(r.seconds, 1),
                                       **({"costs": r.costs} if r.costs else {})} for r in results}}
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
    """Re-execute committed notebooks in place (their ``PROFILE`` as written), storing outputs, timings and
    widget state in the file, as a maintainer does after a change.

    A notebook's figures are moved aside first, so that it saves each anew and prints "saved" as a run from a
    clean checkout does; they come back when it fails, and it is left unchanged. Figures go to the
    repository's ``figures/`` unless ``DLGN_FIGURES_DIR`` says otherwise."""
    from nbclient import NotebookClient
    # committed outputs save into the repository's figures/, as `make figures` does (the default
    # of a notebook run by hand is build/figures); the kernels inherit the variable
    unset = not os.environ.get("DLGN_FIGURES_DIR")
    if unset:
        os.environ["DLGN_FIGURES_DIR"] = str(REPO_ROOT / "figures")
    try:
        figures = figures_dir()
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
    finally:
        if unset:
            del os.environ["DLGN_FIGURES_DIR"]


def format_summary(results: Sequence[Result]) -> str:
    """A plain-text table: notebook, status, seconds, verdict; then failures and a count line."""
    header = ("notebook", "status", "seconds", "verdict")
    rows = [(r.notebook, r.status, f"{r.seconds:.1f}", " | ".join(r.verdicts) or NO_VERDICT) for r in results]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    rule = (*("-" * w for w in widths), "-" * len("verdict"))
    lines = [f"{name:<{widths[0]}}  {status:<{widths[1]}}  {seconds:>{widths[2]}}  {verdict}"
             for name, status, seconds, verdict in [header, rule, *rows]]
    failed = [r for r in results if not r.ok]
    lines += [f"{r.notebook}: {r.error}: {(r.message.strip().splitlines() or [''])[0]}  (see {display_path(r.output)})"
              for r in failed]
    lines.append(f"notebooks: {len(results)}, ok: {len(results) - len(failed)}, failed: {len(failed)}")
    return "\n".join(lines)


def positive_int(text: str) -> int:
    """An argparse type: ASCII digits making a number of at least 1 (``--workers``)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


@files.command
def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.series", description=__doc__.split("\n")[0])
    run = parser.add_subparsers(dest="command", required=True).add_parser(
        "run", help="execute the notebooks and print a summary")
    run.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    run.add_argument("--only", nargs="+", metavar="ID", help="notebook ids to run, e.g. 05 07 (default: all)")
    run.add_argument("--kernel", default=CURRENT_INTERPRETER_KERNEL,
                     help=f"Jupyter kernel name (default: {CURRENT_INTERPRETER_KERNEL}, this Python interpreter)")
    run.add_argument("--notebooks", type=Path, help="notebooks folder (default: the repository's notebooks/)")
    run.add_argument("--output", type=Path, help="folder of the executed copies (default: build/notebooks)")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, metavar="N", help="worker processes of the local Dask "
                       "cluster (default: one per core, at most one per notebook)")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on an existing Dask cluster, e.g. tcp://HOST:8786, instead of a local one")
    args = parser.parse_args(argv)
    try:
        results = run_series(args.notebooks, profile=args.profile, only=args.only, kernel_name=args.kernel,
                             output_dir=args.output, progress=lambda text: print(text, flush=True),
                             workers=args.workers, scheduler=args.scheduler)
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
