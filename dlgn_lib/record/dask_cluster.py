"""Dask (``dask.distributed``) for the series and for many-config training.

    with cluster.client() as c:                              # LocalCluster: one worker per core
        got = cluster.get_or_train_distributed(configs, c)   # runs, in the order of configs
    with cluster.client(scheduler="tcp://host:8786") as c:   # an existing cluster
        ...

The local cluster listens on 127.0.0.1 only, without a dashboard, with one single-threaded worker process per
core and no memory limit (its tasks are notebooks and training runs, not Dask collections: nothing to spill).
Its scratch files go to a folder of their own under ``build/dask-scratch/``, removed when it closes. Workers
inherit this process's environment (``DLGN_*`` included); workers of an existing cluster must see the
repository at the same path and the same run cache (``DLGN_RUNS_DIR``, with ``flock`` locks that hold across
machines), and run with ``--nthreads 1`` (papermill changes a process's working directory while it runs a
notebook). The run cache's per-config locks and atomic writes make a task whose worker died safe to rerun.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import dask
from distributed import Client, LocalCluster, get_worker
from distributed.comm import get_address_host_port

from .. import files, locations, runs
from ..config import RunConfig
from ..train import Run

__all__ = []

#: Dask's monitoring slowed on the local cluster (tasks run for seconds to hours; the defaults take CPU from the
#: notebooks on a 2-core machine): no statistical profiler, an event-loop tick every 500 ms, a system monitor
#: every 5 s. At rest, a 2-worker cluster on a 2-core AMD EPYC used 12.1-12.8 % of a core with Dask's defaults,
#: 1.7-1.8 % with these (two clusters of each, interleaved, 20 s each).
QUIET_MONITORING = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}

#: Seconds to wait for an existing scheduler to answer, and then for it to have a worker.
CONNECT_TIMEOUT = 10.0


class ClusterUnavailable(ConnectionError):
    """The Dask scheduler cannot be reached, or has no workers; the message names its address."""


def check_options(workers: int | None = None, scheduler: str | None = None) -> None:
    """Raise ValueError for a worker count below 1, a malformed scheduler address, or both given."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"--workers: {workers!r} is not a positive integer")
    if scheduler is not None:
        try:
            get_address_host_port(scheduler)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"--scheduler: {scheduler!r} is not a scheduler address ({exc}); write it as tcp://HOST:PORT"
            ) from None
    if workers is not None and scheduler is not None:
        raise ValueError("--workers and --scheduler exclude each other: an existing cluster has its own workers")


def local_cluster_options(workers: int | None = None, scratch: Path | None = None) -> dict:
    """Keyword arguments of the ``LocalCluster``: ``workers`` processes (default one per core), their
    scratch space in ``scratch`` (default ``build/dask-scratch``)."""
    return {
        "n_workers": workers if workers is not None else (os.cpu_count() or 1),
        "threads_per_worker": 1,
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": None,
        # The scheduler's plain HTTP endpoints (health, metrics): loopback, any free port, not 8787.
        "scheduler_kwargs": {"dashboard": False, "dashboard_address": "127.0.0.1:0"},
        "memory_limit": 0,
        "local_directory": str(scratch or locations.build_dir() / "dask-scratch"),
    }


def connect(address: str, timeout: float | None = None) -> Client:
    """A client of the scheduler at ``address`` that has a worker; ValueError for a malformed address,
    :class:`ClusterUnavailable` when nothing answers, or no worker comes, within ``timeout`` seconds."""
    check_options(scheduler=address)
    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    try:
        c = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ClusterUnavailable(
            f"cannot reach a Dask scheduler at {address} within {timeout:g} s ({type(exc).__name__}: {exc})"
        ) from None
    try:
        c.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        c.close()
        raise ClusterUnavailable(f"the Dask scheduler at {address} has no workers after {timeout:g} s; "
                                 f"start them with `dask worker {address} --nthreads 1`") from exc
    return c


@contextlib.contextmanager
def client(workers: int | None = None, scheduler: str | None = None) -> Iterator[Client]:
    """A Dask client for a ``with`` block, closed (with its cluster) after it: of a local cluster of ``workers``
    processes (default one per core), or of the existing ``scheduler`` (e.g. ``tcp://host:8786``). Raises
    ValueError and :class:`ClusterUnavailable` as :func:`check_options` and :func:`connect` do."""
    check_options(workers, scheduler)
    if scheduler is not None:
        with contextlib.closing(connect(scheduler)) as c:
            yield c
        return
    # The scheduler's lock files too: it keeps them in Dask's temporary directory.
    scratch = tempfile.mkdtemp(dir=files.writable_folder(locations.build_dir() / "dask-scratch"))
    try:
        with dask.config.set({**QUIET_MONITORING, "temporary-directory": scratch}), \
                LocalCluster(**local_cluster_options(workers, scratch)) as cluster, \
                Client(cluster, set_as_default=False) as c:
            yield c
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def worker_address() -> str:
    """Address of the Dask worker running the calling task ("this process" outside a worker)."""
    try:
        return get_worker().address
    except ValueError:
        return "this process"


def seed_groups(configs: Iterable[RunConfig]) -> list[list[RunConfig]]:
    """Configs equal in everything but ``seed``, grouped as ``runs.get_or_train_many`` groups them:
    in order of first appearance, a config listed twice once."""
    groups: dict[str, dict[str, RunConfig]] = {}
    for config in configs:
        groups.setdefault(config.replace(seed=0).key(), {}).setdefault(config.key(), config)
    return [list(group.values()) for group in groups.values()]


def get_or_train_group(configs: list[RunConfig], runs_dir: str, device=None, verbose: bool = False) -> list[Run]:
    """``runs.get_or_train_many`` in a worker; RuntimeError when the worker's run cache is not ``runs_dir``
    (the caller's), whose later ``get_or_train`` would not see the runs."""
    here = locations.runs_dir()
    if here != Path(runs_dir):
        raise RuntimeError(f"worker {worker_address()} uses the run cache {here}, the client {runs_dir}; "
                           f"start the workers with DLGN_RUNS_DIR={runs_dir}")
    return runs.get_or_train_many(configs, device=device, progress=False, verbose=verbose, detail=verbose)


def get_or_train_distributed(configs: Iterable[RunConfig], client: Client, *, device=None,
                             verbose: bool = False) -> list[Run]:
    """``runs.get_or_train_many`` spread over the workers of ``client``; runs in input order.

    Each group of seeds (:func:`seed_groups`) is one task, so its missing seeds train together; Dask reruns a
    task whose worker died on another worker (``KilledWorker`` when they die too often). ``verbose`` prints
    the "loaded run …" / "training …" lines on the workers' standard output.
    """
    configs = list(configs)
    groups = seed_groups(configs)
    runs_dir = str(locations.runs_dir())
    futures = [client.submit(get_or_train_group, members, runs_dir, device, verbose, pure=False)
               for members in groups]
    try:
        trained = client.gather(futures)
    except BaseException:
        client.cancel(futures)   # the groups not started yet need not run
        raise
    found = {c.key(): run for members, got in zip(groups, trained) for c, run in zip(members, got)}
    return [found[c.key()] for c in configs]
