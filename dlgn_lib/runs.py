"""The run cache: ``get_or_train(config)`` trains once, then loads (reconstruction §7, reliability).

An entry is a folder ``<runs dir>/<key>/`` holding ``run.pt`` (tensors, lists, numbers and JSON
strings only, read back with ``torch.load(weights_only=True)`` so loading never runs pickled code)
and ``manifest.json`` (the config, the code version, who made it and the SHA-256 of ``run.pt``).

- Written atomically: both files go to a temporary folder (``.tmp-<pid>@<host>-…``) that is
  renamed into place, so a run killed mid-training leaves no entry; temporary folders of writers
  that died are removed by the next writer. A failed write (a full disk) names the entry and the
  free space.
- Verified on load: a missing, truncated or altered file fails the checksum, and a file with a
  valid checksum but the wrong layout fails the layout check; either way the entry is reported,
  moved aside and the run retrained.
- Safe across processes: an exclusive lock per key makes a second process wait for the first
  (saying so after a few seconds) and then load its entry instead of training the same config.
- Shareable: a valid entry is read without taking a lock, so a read-only cache (a course's
  shared folder, ``DLGN_RUNS_DIR``) serves its entries; entry folders get the permissions of the
  user's umask (readable by the group with the usual 022), not 0700. Runs missing from a read-only
  cache are trained and used, with a warning that they cannot be saved.

The analysis cache (:func:`cached_table`, at the end of this module) keeps the tables measured on
cached runs beside them, so a warm cache does not measure its runs again.

``python -m dlgn_lib.runs export|import`` packs entries into run bundles (``dlgn_lib.record.bundle``, whose
``main`` the command runs: the record tools sit above the run cache).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import errno
import fcntl
import hashlib
import json
import multiprocessing
import os
import pickle
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from . import __version__, batched, config as _config, costs, files, fused, locations, models, numerics
from .config import RunConfig
from .train import Run, quiet, train

__all__ = ["CacheLocationError", "CacheWriteError", "CorruptEntry", "analysis_entries", "cached_table",
           "check_analysis", "check_root", "discard", "entry_folders", "entry_lock", "function_name",
           "get_or_train_many", "make_shareable", "remove_stale_temporaries", "store_analysis", "temp_prefix", "tensor_hash", "verify_entry"]

FORMAT = 1
#: The payload of ``run.pt``: its keys and their types (the layout every entry must have).
PAYLOAD_LAYOUT = {"format": int, "config": str, "history": dict, "snapshots": dict, "best_state": (dict, type(None)),
                  "meta": str}
#: Seconds a process waits for another one's lock before it says that it is waiting.
WAIT_NOTICE_S = 3.0
#: Temporary folders older than this, of a format that names no writer, count as abandoned.
ABANDONED_AFTER_S = 3600
_KEY = re.compile(r"^[0-9a-f]{20}$")
_TEMP = re.compile(r"^\.(?:tmp|trash)-(?:[a-z]+-)?(\d+)@(.+)-[^-]+$")


class CorruptEntry(RuntimeError):
    """A cache entry failed verification; the message says why."""


class CacheWriteError(OSError):
    """An entry could not be written (a full disk, a read-only folder); the message names it."""


class CacheLocationError(CacheWriteError):
    """The run cache's location is not a folder (``DLGN_RUNS_DIR`` names a file, say)."""


def check_root(root: Path | None = None) -> Path:
    """The cache folder, refused with a clear message when something other than a folder is there."""
    root = Path(root) if root else locations.runs_dir()
    for folder in (root, *root.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "DLGN_RUNS_DIR" if os.environ.get("DLGN_RUNS_DIR") else "the run cache folder"
                raise CacheLocationError(
                    f"{where} {root} cannot be used: {folder} is a file, not a folder; point DLGN_RUNS_DIR to a "
                    "folder (or unset it for data/runs) and run again")
            break
    return root


def temp_prefix(kind: str = "") -> str:
    """The one naming scheme of every temporary or trash folder of a cache: ``.tmp-[kind-]<pid>@<host>-``,
    so that the next writer removes it when its writer has died, whatever wrote it."""
    return f".tmp-{kind + '-' if kind else ''}{_writer_tag()}"


def entry_dir(config: RunConfig, root: Path | None = None) -> Path:
    return (Path(root) if root else locations.runs_dir()) / config.key()[:20]


def entry_folders(root: Path | None = None) -> list[Path]:
    """The entry folders of a cache (``<key>/``), in name order; temporary and trash folders left out."""
    root = Path(root) if root else locations.runs_dir()
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and _KEY.match(p.name))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def make_shareable(folder: Path) -> None:
    """Give an entry folder the permissions of the umask (``mkdtemp`` makes it 0700)."""
    os.chmod(folder, 0o777 & ~locations.UMASK)
    for child in folder.iterdir():
        os.chmod(child, 0o666 & ~locations.UMASK)


@contextlib.contextmanager
def entry_lock(key: str, root: Path | None = None, label: str = ""):
    """The exclusive lock of one entry (``<root>/.locks/<key>.lock``), across processes.

    A process that has to wait says so on stderr after ``WAIT_NOTICE_S`` seconds, naming the run
    and the lock file, then waits on. Raises ``OSError`` where the cache is read-only.
    """
    lock_dir = check_root(root) / ".locks"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        check_root(lock_dir)   # a file in the way: say which
        raise
    path = lock_dir / f"{key[:20]}.lock"
    with open(path, "a") as fh:
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start >= WAIT_NOTICE_S:
                    print(f"waiting for another process that holds the run {label or key[:12]} "
                          f"(lock {locations.display_path(path)}) …", file=sys.stderr, flush=True)
                    fcntl.flock(fh, fcntl.LOCK_EX)
                    break
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _lock(config: RunConfig):
    return entry_lock(config.key(), label=config.label())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(root: Path | None = None, kind: str | None = None) -> list[str]:
    """Remove temporary and trash folders whose writer is dead (same host, no such process), and
    unnamed ones older than ``ABANDONED_AFTER_S``; returns their names. Writers call it while
    holding a lock, so a folder being written by a live process is never touched.

    ``kind`` limits it to one kind's named temporaries (``.tmp-<kind>-<pid>@<host>-…``): a folder
    that is not a cache, such as where a bundle is exported, is swept only of what we wrote there.
    """
    root = Path(root) if root else locations.runs_dir()
    host, removed = socket.gethostname(), []
    for folder in root.glob(".t*-*") if root.is_dir() else []:
        if not folder.name.startswith((".tmp-", ".trash-") if kind is None else f".tmp-{kind}-"):
            continue
        match = _TEMP.match(folder.name)
        if kind is not None and not match:
            continue
        if match:
            stale = match[2] == host and not _alive(int(match[1]))
        else:
            stale = time.time() - folder.lstat().st_mtime > ABANDONED_AFTER_S
        if stale:
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)
            else:   # a plain file (or link) left under a temporary name
                folder.unlink(missing_ok=True)
            removed.append(folder.name)
    return removed


def _writer_tag() -> str:
    return f"{os.getpid()}@{socket.gethostname()}-"


def _free_space(folder: Path) -> str:
    try:
        return f"{shutil.disk_usage(folder).free / 2**20:,.1f} MB free"
    except OSError:
        return "free space unknown"


@costs.spent("io")
def save(run: Run, root: Path | None = None, *, rescue: bool = True) -> Path:
    """Write a run's entry atomically (temp folder, fsync, rename); returns the entry folder.

    Call with the entry's lock held. Raises ``CacheWriteError`` naming the entry and the free
    space when the write fails; nothing is left behind in the cache then, and (with ``rescue``)
    the trained run is written under ``<build dir>/rescued-runs/`` instead, which the error names.
    """
    final = entry_dir(run.config, root)
    try:
        check_root(final.parent)
        final.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(), dir=final.parent))
    except OSError as exc:
        raise CacheWriteError(f"could not write the run entry {locations.display_path(final)}: "
                              f"{exc.strerror or exc}{_rescued(run) if rescue else ''}") from None
    try:
        payload = {"format": FORMAT, "config": run.config.to_json(), "history": run.history,
                   "snapshots": run.snapshots, "best_state": run.best_state, "meta": json.dumps(run.meta)}
        torch.save(payload, tmp / "run.pt")
        manifest = {"format": FORMAT, "key": run.config.key(), "dlgn_lib": __version__, "code_version": _config.CODE_VERSION,
                    "config": json.loads(run.config.to_json()), "sha256": _sha256(tmp / "run.pt"),
                    "made_by": _config.made_by(), "numerics": numerics.cache_tag()}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        for name in ("run.pt", "manifest.json"):
            with open(tmp / name, "rb") as fh:
                os.fsync(fh.fileno())
        make_shareable(tmp)
        if final.exists():
            discard(final)
        os.rename(tmp, final)
    except (OSError, RuntimeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CacheWriteError(f"could not write the run entry {locations.display_path(final)} "
                              f"({_free_space(final.parent)}): {exc}{_rescued(run) if rescue else ''}") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _rescued(run: Run) -> str:
    """Save a trained run that its cache refused under ``<build dir>/rescued-runs/`` (else the
    system's temporary folder); returns the sentence that says where, for the error message."""
    for base in (locations.build_dir() / "rescued-runs", Path(tempfile.gettempdir()) / "dlgn-rescued-runs"):
        try:
            base.mkdir(parents=True, exist_ok=True)
            if not base.is_dir():
                continue
            target = save(run, base, rescue=False)
        except (OSError, RuntimeError):
            continue
        return (f". The trained run is kept in {locations.display_path(target)}: move that folder into a "
                f"working run cache (or set DLGN_RUNS_DIR={locations.display_path(base)}) and it loads instead of "
                "training again")
    return ". The trained run could not be kept anywhere either (no writable build or temporary folder)"


def discard(folder: Path) -> None:
    """Move a stale or corrupt entry out of the way (rename first: atomic), then delete it."""
    trash = folder.with_name(f".trash-{_writer_tag()}{folder.name}")
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)


_discard = discard


def _verified(folder: Path, key: str | None = None) -> tuple[dict, dict]:
    """(manifest, payload) of an entry folder after every check; raises ``CorruptEntry``."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"manifest unreadable ({exc.__class__.__name__})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("key"), str):
        raise CorruptEntry("manifest has the wrong layout or format")
    if (key is not None and manifest["key"] != key) or manifest["key"][:20] != folder.name:
        raise CorruptEntry("manifest does not match this config or folder")
    if not (folder / "run.pt").is_file() or _sha256(folder / "run.pt") != manifest.get("sha256"):
        raise CorruptEntry("checksum of run.pt does not match its manifest (truncated or altered)")
    try:
        payload = torch.load(folder / "run.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # a file that passes the checksum but cannot be read is still corrupt
        if isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc):
            raise CorruptEntry("run.pt holds objects other than tensors and plain data, which this cache never "
                               "unpickles (no code in it was run)") from None
        raise CorruptEntry(f"run.pt unreadable ({exc.__class__.__name__}: {exc})") from exc
    if not isinstance(payload, dict) or set(payload) != set(PAYLOAD_LAYOUT):
        found = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise CorruptEntry(f"run.pt has the wrong layout: {found}, expected {sorted(PAYLOAD_LAYOUT)}")
    for name, kind in PAYLOAD_LAYOUT.items():
        if not isinstance(payload[name], kind):
            raise CorruptEntry(f"run.pt has the wrong layout: {name} is a {type(payload[name]).__name__}")
    try:
        stored = RunConfig.from_json(payload["config"])
        meta = json.loads(payload["meta"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptEntry(f"run.pt has the wrong layout: config or meta unreadable ({exc})") from exc
    if not isinstance(meta, dict):
        raise CorruptEntry("run.pt has the wrong layout: meta is not a mapping")
    if stored.key() != manifest["key"]:
        raise CorruptEntry(_why_another_key(manifest, stored))
    payload["meta"] = meta
    return manifest, payload


def _why_another_key(manifest: dict, stored: RunConfig) -> str:
    """Why an entry's stored config keys otherwise than its manifest: another code version, another
    numeric code path (named when the manifest records it, or when it is the pinned one), or altered."""
    version = manifest.get("code_version")
    if version is not None and version != _config.CODE_VERSION:
        return f"made by code version {version}; this library is code version {_config.CODE_VERSION}"
    here = numerics.cache_tag()
    for tag in {manifest.get("numerics"), None} - {here}:
        if stored.key(tag) == manifest["key"]:
            return (f"made on another numeric code path ({tag or 'pinned, the default'}) than this process runs "
                    f"({here or 'pinned, the default'}); set DLGN_NUMERICS, DLGN_NUM_THREADS and the pinned "
                    "variables as where it was made (dlgn_lib.numerics)")
    return ("stored config differs from its key: made on another numeric code path (DLGN_NUMERICS, "
            "DLGN_NUM_THREADS or the pinned variables), or altered")


def verify_entry(folder: Path, key: str | None = None) -> dict:
    """Verify an entry folder as ``load`` does (checksum, layout, key); returns its manifest."""
    return _verified(Path(folder), key)[0]


@costs.spent("io")
def load(config: RunConfig, root: Path | None = None) -> Run:
    """Load and verify the entry of a config; raises ``FileNotFoundError`` or ``CorruptEntry``."""
    folder = entry_dir(config, root)
    if not folder.exists():
        raise FileNotFoundError(f"no cache entry {locations.display_path(folder)}")
    _, payload = _verified(folder, config.key())
    return Run(config, payload["history"], payload["snapshots"], payload["best_state"], payload["meta"])


def _cached(config: RunConfig, say, *, writable: bool = True) -> Run | None:
    """The verified entry of a config (saying "loaded run …"), or None; a corrupt entry is
    reported and, where the cache is writable (call with the lock held), moved aside."""
    folder = entry_dir(config)
    try:
        run = load(config)
        say(f"loaded run {config.label()} [{folder.name[:12]}]")
        return run
    except FileNotFoundError:
        return None
    except CorruptEntry as exc:
        print(f"cache entry {locations.display_path(folder)} is corrupt: {exc}; retraining",
              file=sys.stderr, flush=True)
        if writable:
            discard(folder)
        return None


def _read_only(exc: OSError) -> bool:
    return exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def _unlocked(config: RunConfig, say) -> Run | None:
    """A valid entry read without the lock (entries appear whole, by rename), else None."""
    try:
        run = load(config)
    except (FileNotFoundError, CorruptEntry):
        return None
    say(f"loaded run {config.label()} [{entry_dir(config).name[:12]}]")
    return run


def _train_unsaved(configs: list[RunConfig], say, *, device, progress) -> list[Run]:
    """Where the cache is read-only: report, train, and return runs that are not saved."""
    for config in configs:
        if entry_dir(config).exists():
            _cached(config, say, writable=False)
        print(f"run cache {locations.display_path(locations.runs_dir())} is read-only: training "
              f"{config.label()} without saving it (set DLGN_RUNS_DIR to a writable folder to keep it)",
              file=sys.stderr, flush=True)
    return train_group(configs, device=device, progress=progress)


@costs.spent("training")
def train_group(configs: list[RunConfig], *, device=None, progress: bool | None = None) -> list[Run]:
    """Train configs that differ only in seed, with the fastest engine that fits (reconstruction §6).

    Kinds marked ``fused`` in ``models.KINDS`` (every fully connected kind; ``fused.FUSED_KINDS``):
    ``fused.train_seeds`` (all seeds in one fused pass, one seed included). Other kinds (the conv
    ones): ``batched.train_seeds`` (vmap over seeds) for two or more seeds with the default epochs,
    else ``train.train`` one by one.
    """
    if not configs:
        return []
    first = configs[0]
    if first.model.kind in fused.FUSED_KINDS:
        return fused.train_seeds(configs, device=device, progress=progress)
    if len(configs) > 1 and first.curves and first.shuffle:
        return batched.train_seeds(configs, device=device, progress=progress)
    return [train(c, device=device, progress=progress) for c in configs]


def _speaker(verbose: bool):
    def say(msg):
        if verbose:
            print(msg, flush=True)
    return say


def get_or_train(config: RunConfig, *, device=None, progress: bool | None = None, verbose: bool = True) -> Run:
    """The run of a config: loaded from the cache when a valid entry exists, else trained and saved.

    Prints "loaded run …" or "training …" (with seconds), and reports a corrupt entry before
    retraining it. A valid entry is read without a lock (a read-only cache works).
    """
    return _get_or_train_seeds([config], device=device, progress=progress, say=_speaker(verbose))[0]


def _get_or_train_seeds(configs: list[RunConfig], *, device, progress, say, tally: dict | None = None) -> list[Run]:
    """``get_or_train`` for configs that differ only in seed: the missing ones train together.

    Valid entries are read without locks first. For the rest, the locks of all configs are held
    (taken in key order, so two processes cannot deadlock) while the cache is re-checked and the
    missing seeds are trained together by ``train_group`` (reconstruction §6) and saved, one entry
    per seed. ``tally`` (if given) counts the runs ``loaded`` and ``trained`` and the training
    ``seconds``.
    """
    tally = {"loaded": 0, "trained": 0, "seconds": 0.0} if tally is None else tally
    found = {c.key(): _unlocked(c, say) for c in configs}
    rest = [c for c in configs if found[c.key()] is None]
    tally["loaded"] += len(configs) - len(rest)
    if not rest:
        return [found[c.key()] for c in configs]
    try:
        with contextlib.ExitStack() as locks:
            for config in sorted(rest, key=RunConfig.key):
                locks.enter_context(_lock(config))
            found.update({c.key(): _cached(c, say) for c in rest})
            missing = [c for c in rest if found[c.key()] is None]
            tally["loaded"] += len(rest) - len(missing)
            for config in missing:
                say(f"training {config.label()} [{entry_dir(config).name[:12]}] for {config.epochs} epochs")
            start = time.perf_counter()
            refused = None
            for run in train_group(missing, device=device, progress=progress) if missing else []:
                try:
                    save(run)
                except CacheWriteError as exc:   # each refused run is kept elsewhere; go on with the rest
                    refused = refused or exc
                found[run.config.key()] = run
                say(f"trained {run.config.label()} in {run.meta['seconds']:.1f} s")
            if refused is not None:
                raise refused
    except OSError as exc:
        if isinstance(exc, CacheWriteError) or not _read_only(exc):
            raise
        missing = [c for c in rest if found[c.key()] is None]
        start = time.perf_counter()
        for run in _train_unsaved(missing, say, device=device, progress=progress):
            found[run.config.key()] = run
    if missing:
        tally["trained"] += len(missing)
        tally["seconds"] += time.perf_counter() - start
    return [found[c.key()] for c in configs]


def summary_line(n_runs: int, tally: dict) -> str:
    """One line for a group of runs: how many were loaded and trained, and the training time."""
    line = f"{n_runs} run{'s' if n_runs != 1 else ''}: {tally['loaded']} loaded from the cache, {tally['trained']} trained"
    return line + (f" in {tally['seconds']:.1f} s" if tally["trained"] else "")


def train_processes() -> int:
    """Processes that train groups of seeds side by side in ``get_or_train_many``
    (``DLGN_TRAIN_PROCESSES``, default 1: every group in this process, one after another)."""
    return files.env_int("DLGN_TRAIN_PROCESSES", 1)


class OtherCodePath(RuntimeError):
    """A side-by-side training process would run another numeric code path than its parent."""


def _train_in_child(configs: list[RunConfig], threads: int, made_by: dict | None, keys: list[str]) -> int:
    """In a spawned process: train and save the missing seeds of one group (``_get_or_train_seeds``
    under the group's locks) at the parent's torch thread count, its entries saying what made them
    as the parent's would (``config.made_by``); returns how many it trained.

    Raises ``OtherCodePath`` before any training where this process keys the configs otherwise
    than the parent (``keys``): its numeric code path differs (the parent imported numpy or torch
    before ``dlgn_lib``, say), so its runs would not be the parent's.
    """
    torch.set_num_threads(threads)
    if [c.key() for c in configs] != keys:
        from . import numerics
        raise OtherCodePath(f"a new process runs the numeric code path {numerics.cache_tag() or 'pinned'}, "
                            f"another than this one's")
    _config._MADE_BY = made_by
    tally = {"loaded": 0, "trained": 0, "seconds": 0.0}
    _get_or_train_seeds(configs, device=None, progress=False, say=_speaker(False), tally=tally)
    return tally["trained"]


def _group_label(group: list[RunConfig]) -> str:
    """A group of seeds as a person tells it from the others: its label less the seed, widths and seeds."""
    first = group[0]
    label = re.sub(r" ?\(seed \d+\)$", "", first.label())
    return (f"{label} (widths {'-'.join(map(str, first.model.widths))}, "
            f"seed{'s' if len(group) > 1 else ''} {', '.join(str(c.seed) for c in group)})")


@costs.spent("training")
def _train_side_by_side(groups: list[list[RunConfig]], processes: int, device, progress: bool | None) -> int:
    """Train the groups that have missing entries in up to ``processes`` spawned processes, one
    group per process at a time, each saving its runs to the cache; returns the runs trained.

    Each process runs the same training code on the same thread count as this one (so the same
    code path and cache keys), and a group's seeds still train together: the runs are the ones
    this process would train, bit for bit. Each of the ``processes`` lanes hands its process group
    after group; a process that dies (killed, out of memory) loses only the group it trains: its
    lane starts a new process for the next group, the other lanes go on, and every group finished
    stays saved. Each failed group is named (``_group_label``) and left to this process, which
    trains it or raises the error with its usual message (a read-only cache, a full disk).
    """
    on = torch.device(device) if device is not None else models.default_device()
    if processes < 2 or len(groups) < 2 or on.type != "cpu":
        return 0
    todo = [[c for c in group if not (entry_dir(c) / "manifest.json").exists()] for group in groups]
    todo = [group for group in todo if group]
    if len(todo) < 2:
        return 0
    lanes, context = min(processes, len(todo)), multiprocessing.get_context("spawn")
    args = (torch.get_num_threads(), _config.made_by())
    waiting, outcome, stop = list(reversed(range(len(todo)))), {}, threading.Event()
    show = (not quiet()) if progress is None else progress
    bar = tqdm(total=len(todo), disable=not show, desc=f"groups of seeds, {lanes} processes", leave=False)

    def lane():
        while waiting and not stop.is_set():
            with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
                while not stop.is_set():
                    try:
                        index = waiting.pop()
                    except IndexError:
                        return
                    try:
                        outcome[index] = pool.submit(_train_in_child, todo[index], *args,
                                                     [c.key() for c in todo[index]]).result()
                    except BaseException as exc:   # reported below; Ctrl-C in the process stops the lanes too
                        outcome[index] = exc
                        if not isinstance(exc, Exception):
                            stop.set()
                    bar.update()
                    if isinstance(outcome[index], BrokenProcessPool):
                        break   # its process died: a new one for the next group

    threads = [threading.Thread(target=lane, daemon=True) for _ in range(lanes)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop.set()   # Ctrl-C here: the lanes hand out no more groups
        bar.close()
    trained, other_path = 0, []
    for index, result in sorted(outcome.items()):
        if isinstance(result, int):
            trained += result
        elif isinstance(result, OtherCodePath):   # said once below
            other_path.append(result)
        else:   # left to this process, which trains it or reports the error itself
            why = ("its process was killed or crashed" if isinstance(result, BrokenProcessPool)
                   else f"{type(result).__name__}: {result}")
            print(f"training {_group_label(todo[index])} in a separate process failed ({why}); training it here",
                  file=sys.stderr, flush=True)
    if other_path:
        print(f"{len(other_path)} group(s) of seeds not trained side by side: {other_path[0]}; training them here, "
              f"one after another (import dlgn_lib before numpy and torch to train them side by side)",
              file=sys.stderr, flush=True)
    return trained


def get_or_train_many(configs, *, device=None, progress: bool | None = None, verbose: bool = True,
                      detail: bool = False, processes: int | None = None) -> list[Run]:
    """``get_or_train`` for each config; returns the runs in the order of ``configs``.

    Configs equal in everything but ``seed`` form a group: its configs missing from the cache
    are trained at once (``train_group``: fused or vectorised over seeds, reconstruction §6), and
    saved one entry per seed. Prints one summary line ("24 runs: 20 loaded from the cache, 4
    trained in 31.2 s", ``summary_line``) unless ``verbose`` is false; ``detail=True`` adds the
    "loaded run …" / "training …" line of every run. A config listed twice is looked up once.
    Corrupt entries are always reported (on stderr).

    ``processes`` (default ``train_processes()``, ``DLGN_TRAIN_PROCESSES``): with 2 or more and
    two or more groups to train on a CPU, the groups train side by side in that many spawned
    processes (each group's seeds still together, at this process's thread count), giving the same
    runs bit for bit; the summary's time is then the wall time.
    """
    configs = list(configs)
    groups: dict[str, dict[str, RunConfig]] = {}
    for config in configs:
        groups.setdefault(config.replace(seed=0).key(), {}).setdefault(config.key(), config)
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise ValueError(f"processes={processes!r} is not allowed; use a positive integer (or None: "
                         f"DLGN_TRAIN_PROCESSES, default 1)")
    found: dict[str, Run] = {}
    say, tally = _speaker(verbose and detail), {"loaded": 0, "trained": 0, "seconds": 0.0}
    start = time.perf_counter()
    elsewhere = _train_side_by_side([list(g.values()) for g in groups.values()],
                                    train_processes() if processes is None else processes, device, progress)
    for group in groups.values():
        members = list(group.values())
        got = _get_or_train_seeds(members, device=device, progress=progress, say=say, tally=tally)
        found.update((c.key(), run) for c, run in zip(members, got))
    if elsewhere:   # trained by the side-by-side processes, then loaded here: count them as trained
        tally["loaded"] -= elsewhere
        tally["trained"] += elsewhere
        tally["seconds"] = time.perf_counter() - start
    if verbose and configs:
        print(summary_line(sum(len(g) for g in groups.values()), tally), flush=True)
    return [found[c.key()] for c in configs]


if __name__ == "__main__":   # the bundle commands live with the record tools (dlgn_lib.record.bundle)
    from dlgn_lib.record.bundle import main
    sys.exit(main())


# =========================================================================== the analysis cache
#
# Tables measured on cached runs are computed once per code and numeric path.
#
# A warm run cache makes training free, but a notebook still spends most of its time measuring its
# runs again (region metrics with hundreds of random rotations, switch angles on fine grids, saliency
# cosines). :func:`cached_table` keeps such a table beside the runs it was measured on and serves it again
# only when nothing it depends on has changed. Its key covers
#
# - what was measured: a label naming the computation and its parameters (every argument that is not
#   a run), which the caller must give in full;
# - the runs' contents: each run's config key and a SHA-256 of its snapshots and best state, so a run
#   retrained elsewhere (another CPU, another code path) counts as another run;
# - the code: a SHA-256 of every source file of :mod:`dlgn_lib`, so any change to the library
#   recomputes every table;
# - the numeric code path (:func:`dlgn_lib.numerics.status`), torch's thread count, and the versions
#   of torch, numpy, pandas and scipy.
#
# A served table is exactly the computed one: a table is stored only when its stored form reads back
# equal to it, bit for bit and dtype for dtype (otherwise it is recomputed every time), and an entry
# that fails its checksum or cannot be read is removed and recomputed. Entries are JSON files
# (``<runs dir>/analyses/<code hash>-<key>.json``, written atomically; no pickle), so a fresh runs
# folder (``DLGN_RUNS_DIR``, the bench, the spread tool) starts with no analyses either; writing one
# removes the entries of other library versions. A read-only runs folder serves what it has and
# computes the rest. ``DLGN_ANALYSIS_CACHE=off`` turns the cache off (every table is computed).
#
# Run bundles carry the entries of this code (:func:`analysis_entries`); an entry read from elsewhere
# passes the same checks as one served here, and its name must match its key and code
# (:func:`check_analysis`), before :func:`store_analysis` moves it in.
ANALYSIS_FORMAT = 1
ANALYSIS_FOLDER = "analyses"
#: Size bound of one analysis entry read from elsewhere (a bundle): the series' tables are tens of kB.
MAX_ANALYSIS_BYTES = 32 << 20
_ANALYSIS_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{32})\.json$")
#: Column dtypes a stored table may have (anything else is computed every time).
_TABLE_DTYPES = ("float64", "int64", "bool", "object", "str")


class _NotStorable(ValueError):
    """A table whose stored form would not read back equal to it."""


def _analysis_cache_enabled(environ=os.environ) -> bool:
    """Whether tables are cached (``DLGN_ANALYSIS_CACHE``: ``on``, the default, or ``off``)."""
    value = environ.get("DLGN_ANALYSIS_CACHE", "on")
    if value not in ("on", "off"):
        raise ValueError(f"DLGN_ANALYSIS_CACHE={value!r} is not allowed; use on or off (default: on)")
    return value == "on"


def analysis_folder(root: Path | None = None) -> Path:
    """Where analyses are kept: ``analyses/`` inside the run cache (``root``, default the user's)."""
    return (Path(root) if root else locations.runs_dir()) / ANALYSIS_FOLDER


def _library_hash() -> str:
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json") and p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


# Taken once, when this module is imported (the library's sources as loaded then), not at each
# table: a process keeps one name for the code it runs even if the files change under it.
_CODE_HASH = _library_hash()


def _code_hash() -> str:
    """SHA-256 of every ``.py`` and ``.json`` file of the library (paths and contents), as imported."""
    return _CODE_HASH


def _analysis_environment() -> dict:
    import scipy
    import torch
    return {**numerics.status(), "threads": torch.get_num_threads(), "pandas": pd.__version__,
            "scipy": scipy.__version__}


def tensor_hash(*tensors) -> str:
    """SHA-256 of tensors' dtypes, shapes and values (a parameter that is data, e.g. probe inputs)."""
    digest = hashlib.sha256()
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        digest.update(f"{t.dtype}{tuple(t.shape)}".encode())
        digest.update(t.numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def run_hash(run) -> str:
    """A run's identity: its config key and a SHA-256 of its saved states (kept on the run)."""
    cached = getattr(run, "_analysis_hash", None)
    if cached is not None:
        return cached
    digest = hashlib.sha256(run.config.key().encode())
    states = [(f"snapshot {epoch}", state) for epoch, state in sorted(run.snapshots.items())]
    states.append(("best", run.best_state or {}))
    for name, state in states:
        digest.update(name.encode())
        for k in sorted(state):
            digest.update(k.encode() + tensor_hash(state[k]).encode())
    value = digest.hexdigest()
    try:
        run._analysis_hash = value
    except AttributeError:   # a run type without attributes: hash again next time
        pass
    return value


def analysis_key(label: str, params: Mapping, runs: Iterable) -> str:
    """The cache key of a table (see the module's docstring)."""
    text = json.dumps({"format": ANALYSIS_FORMAT, "label": label, "params": params, "runs": [run_hash(r) for r in runs],
                       "environment": _analysis_environment()}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- stored form

def _table_value(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if v is None or isinstance(v, str):
        return v
    raise _NotStorable(f"value of type {type(v).__name__}")


def encode_table(table: pd.DataFrame) -> dict:
    """The JSON form of ``table``; raises when it would not read back exactly (see :func:`decode_table`)."""
    if not isinstance(table, pd.DataFrame):
        raise _NotStorable(f"not a DataFrame but {type(table).__name__}")
    if not table.index.equals(pd.RangeIndex(len(table))) or not isinstance(table.index, pd.RangeIndex):
        raise _NotStorable("index is not 0 .. n-1")
    if not all(isinstance(c, str) for c in table.columns) or table.columns.duplicated().any():
        raise _NotStorable("column names are not distinct strings")
    columns = []
    for name in table.columns:
        series = table[name]
        dtype = str(series.dtype)
        if dtype not in _TABLE_DTYPES:
            raise _NotStorable(f"column {name!r} has dtype {dtype}")
        columns.append({"name": name, "dtype": dtype, "values": [_table_value(v) for v in series.tolist()]})
    stored = {"n": len(table), "columns": columns}
    if not _tables_equal(decode_table(stored), table):
        raise _NotStorable("stored form reads back different")
    return stored


def decode_table(stored: dict) -> pd.DataFrame:
    """The table of :func:`encode_table`'s JSON form."""
    data = {}
    for column in stored["columns"]:
        values = column["values"]
        if column["dtype"] == "object":
            array = np.empty(len(values), dtype=object)
            array[:] = values
        elif column["dtype"] == "str":   # pandas' string dtype (NaN for a missing value)
            array = pd.array([np.nan if v is None else v for v in values], dtype="str")
        else:
            array = np.array(values, dtype=column["dtype"])
        data[column["name"]] = array
    return pd.DataFrame(data, index=pd.RangeIndex(stored["n"]))


def _tables_equal(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True, check_dtype=True, check_index_type=True,
                                      check_column_type=True)
    except AssertionError:
        return False
    # assert_frame_equal treats -0.0 and 0.0 (and NaN payloads) as equal; the bits must match too.
    return all(a[c].to_numpy().tobytes() == b[c].to_numpy().tobytes() for c in a.columns
               if a[c].dtype.kind in "fib")


def _table_checksum(stored: dict) -> str:
    return hashlib.sha256(json.dumps(stored, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- read and write

def _analysis_path(k: str) -> Path:
    return analysis_folder() / f"{_code_hash()[:16]}-{k[:32]}.json"


def _checked_table(entry, k: str) -> pd.DataFrame:
    """The table of an analysis entry whose format, key ``k`` and checksum match; raises otherwise."""
    if not isinstance(entry, dict) or entry.get("format") != ANALYSIS_FORMAT or entry.get("key") != k:
        raise ValueError("format or key does not match")
    if entry.get("sha256") != _table_checksum(entry["table"]):
        raise ValueError("the table does not match its checksum (damaged or altered)")
    if any(column["dtype"] not in _TABLE_DTYPES for column in entry["table"]["columns"]):
        raise ValueError("a column has a dtype a stored table never has")
    return decode_table(entry["table"])


@costs.spent("io")
def _load_analysis(path: Path, k: str) -> pd.DataFrame | None:
    try:
        return _checked_table(json.loads(path.read_text()), k)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        _remove_analysis(path)    # unreadable or altered: computed again below
        return None


def _remove_analysis(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


@costs.spent("io")
def _save_analysis(path: Path, k: str, label: str, stored: dict) -> None:
    entry = {"format": ANALYSIS_FORMAT, "key": k, "label": label, "code": _code_hash(), "sha256": _table_checksum(stored),
             "table": stored}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".tmp-", suffix=".json", delete=False) as fh:
            json.dump(entry, fh)
        os.chmod(fh.name, 0o666 & ~locations.UMASK)
        os.replace(fh.name, path)
    except OSError:   # a read-only or full runs folder: the table is simply not kept
        if "fh" in locals():
            _remove_analysis(Path(fh.name))
        return
    prefix = _code_hash()[:16]
    for old in path.parent.glob("*.json"):   # entries of other library versions can never be served again
        if not old.name.startswith(prefix):
            _remove_analysis(old)


def analysis_entries(root: Path | None = None) -> list[Path]:
    """The analysis entry files of this library's code in a cache (``root``, default the user's), in name order."""
    folder = analysis_folder(root)
    names = sorted(p for p in folder.glob(f"{_code_hash()[:16]}-*.json")) if folder.is_dir() else []
    return [p for p in names if _ANALYSIS_NAME.match(p.name) and p.is_file() and not p.is_symlink()]


def check_analysis(path: Path) -> dict:
    """An analysis entry file read from elsewhere, verified; raises ``CorruptEntry`` saying why.

    The checks of an entry served here (JSON, format, the table's SHA-256 and dtypes), plus a size
    bound (``MAX_ANALYSIS_BYTES``) and a name that matches the entry's code and key."""
    path = Path(path)
    name = _ANALYSIS_NAME.match(path.name)
    try:
        if not name:
            raise ValueError("its name is not <16 hex>-<32 hex>.json")
        if path.stat().st_size > MAX_ANALYSIS_BYTES:
            raise ValueError(f"{path.stat().st_size:,} bytes, over the bound of {MAX_ANALYSIS_BYTES:,}")
        entry = json.loads(path.read_bytes())
        key, code = entry["key"], entry["code"]
        if not all(isinstance(h, str) and re.fullmatch("[0-9a-f]{64}", h) for h in (key, code)):
            raise ValueError("its key or code is not a SHA-256")
        if (code[:16], key[:32]) != name.groups():
            raise ValueError("its name does not match its code and key")
        _checked_table(entry, key)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptEntry(f"analysis {path.name} is not a valid analysis entry: {exc}") from None
    return entry


def store_analysis(path: Path, root: Path | None = None) -> str:
    """Move a verified analysis entry file into the analyses folder of the cache ``root``, where it is staged.

    A valid entry there is kept, an invalid one replaced, and an entry of other library code left
    out (it could never be served). Returns ``"imported"``, ``"replaced"``, ``"present"`` or ``"other code"``."""
    path = Path(path)
    if check_analysis(path)["code"] != _code_hash():
        return "other code"
    local = analysis_folder(root) / path.name
    outcome = "imported"
    if local.exists():
        try:
            check_analysis(local)
            return "present"
        except (CorruptEntry, OSError):
            outcome = "replaced"
    local.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o666 & ~locations.UMASK)
    os.replace(path, local)
    return outcome


def cached_table(label: str, params: Mapping, runs: Iterable, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``compute()``, a table measured on ``runs``, or the stored one from an earlier call.

    Args:
        label: names the computation (e.g. ``"studies.circle.snapshot_tables"``).
        params: every other input of ``compute`` (JSON-able; tensors as :func:`tensor_hash`).
        runs: the runs ``compute`` reads, in a fixed order.
    """
    if not _analysis_cache_enabled():
        with costs.spent("analysis"):
            return compute()
    runs = list(runs)
    k = analysis_key(label, params, runs)
    path = _analysis_path(k)
    table = _load_analysis(path, k)
    if table is not None:
        return table
    with costs.spent("analysis"):
        table = compute()
    try:
        stored = encode_table(table)
    except _NotStorable:
        return table
    _save_analysis(path, k, label, stored)
    return table


def function_name(fn) -> str | None:
    """A stable name of a measure (``module.qualname``, or a ``functools.partial`` of one with
    JSON-able arguments); None for a lambda, a nested function or anything else without one."""
    if isinstance(fn, functools.partial):
        inner = function_name(fn.func)
        if inner is None:
            return None
        try:
            args = json.dumps([list(fn.args), fn.keywords], sort_keys=True)
        except TypeError:
            return None
        return f"partial({inner}, {args})"
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or not module.startswith("dlgn_lib."):
        return None
    return f"{module}.{qualname}"
