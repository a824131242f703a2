"""The run cache: ``get_or_train(config)`` trains once, then loads (SPEC §7 reliability).

An entry is a folder ``<runs dir>/<key>/`` holding ``run.pt`` (tensors, lists, numbers and JSON
strings only, read back with ``torch.load(weights_only=True)`` so loading never runs pickled code)
and ``manifest.json`` (the config, the library version and the SHA-256 of ``run.pt``).

- Written atomically: both files go to a temporary folder that is renamed into place, so a run
  killed mid-training leaves no entry.
- Verified on load: a missing, truncated or altered file fails the checksum; the entry is
  reported, moved aside and the run retrained.
- Safe across processes: an exclusive lock per key makes a second process wait for the first and
  then load its entry instead of training the same config again.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from . import __version__, batched, fused, locations
from .config import RunConfig
from .train import Run, train

FORMAT = 1


class CorruptEntry(RuntimeError):
    """A cache entry failed verification; the message says why."""


def entry_dir(config: RunConfig) -> Path:
    return locations.runs_dir() / config.key()[:20]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _lock(config: RunConfig):
    lock_dir = locations.runs_dir() / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{config.key()[:20]}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def save(run: Run) -> Path:
    """Write a run's entry atomically (temp folder, fsync, rename); returns the entry folder."""
    final = entry_dir(run.config)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        payload = {"format": FORMAT, "config": run.config.to_json(), "history": run.history,
                   "snapshots": run.snapshots, "best_state": run.best_state, "meta": json.dumps(run.meta)}
        torch.save(payload, tmp / "run.pt")
        manifest = {"format": FORMAT, "key": run.config.key(), "dlgn_lib": __version__,
                    "config": json.loads(run.config.to_json()), "sha256": _sha256(tmp / "run.pt")}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        for name in ("run.pt", "manifest.json"):
            with open(tmp / name, "rb") as fh:
                os.fsync(fh.fileno())
        if final.exists():
            _discard(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _discard(folder: Path) -> None:
    """Move a stale or corrupt entry out of the way (rename first: atomic), then delete it."""
    trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}")
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)


def load(config: RunConfig) -> Run:
    """Load and verify the entry of a config; raises ``FileNotFoundError`` or ``CorruptEntry``."""
    folder = entry_dir(config)
    if not folder.exists():
        raise FileNotFoundError(f"no cache entry {locations.display_path(folder)}")
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"manifest unreadable ({exc.__class__.__name__})") from exc
    if manifest.get("format") != FORMAT or manifest.get("key") != config.key():
        raise CorruptEntry("manifest does not match this config or format")
    if not (folder / "run.pt").exists() or _sha256(folder / "run.pt") != manifest.get("sha256"):
        raise CorruptEntry("checksum of run.pt does not match its manifest (truncated or altered)")
    try:
        payload = torch.load(folder / "run.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # a file that passes the checksum but cannot be read is still corrupt
        raise CorruptEntry(f"run.pt unreadable ({exc.__class__.__name__}: {exc})") from exc
    if RunConfig.from_json(payload["config"]).key() != config.key():
        raise CorruptEntry("stored config differs from the requested one")
    return Run(config, payload["history"], payload["snapshots"], payload["best_state"],
               json.loads(payload["meta"]))


def _cached(config: RunConfig, say) -> Run | None:
    """The verified entry of a config (saying "loaded run …"), or None; a corrupt entry is
    reported and moved aside. Call with the config's lock held."""
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
        _discard(folder)
        return None


def train_group(configs: list[RunConfig], *, device=None, progress: bool | None = None) -> list[Run]:
    """Train configs that differ only in seed, with the fastest engine that fits (SPEC §6).

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
    retraining it.
    """
    say = _speaker(verbose)
    with _lock(config):
        run = _cached(config, say)
        if run is not None:
            return run
        say(f"training {config.label()} [{entry_dir(config).name[:12]}] for {config.epochs} epochs")
        run, = train_group([config], device=device, progress=progress)
        save(run)
        say(f"trained {config.label()} in {run.meta['seconds']:.1f} s")
        return run


def _get_or_train_seeds(configs: list[RunConfig], *, device, progress, verbose) -> list[Run]:
    """``get_or_train`` for configs that differ only in seed: the missing ones train together.

    The locks of all configs are held (taken in key order, so two processes cannot deadlock)
    while the cache is re-checked and the missing seeds are trained together by ``train_group``
    (SPEC §6) and saved, one entry per seed.
    """
    say = _speaker(verbose)
    with contextlib.ExitStack() as locks:
        for config in sorted(configs, key=RunConfig.key):
            locks.enter_context(_lock(config))
        found = {c.key(): _cached(c, say) for c in configs}
        missing = [c for c in configs if found[c.key()] is None]
        for config in missing:
            say(f"training {config.label()} [{entry_dir(config).name[:12]}] for {config.epochs} epochs")
        for run in train_group(missing, device=device, progress=progress) if missing else []:
            save(run)
            found[run.config.key()] = run
            say(f"trained {run.config.label()} in {run.meta['seconds']:.1f} s")
    return [found[c.key()] for c in configs]


def get_or_train_many(configs, *, device=None, progress: bool | None = None,
                      verbose: bool = True) -> list[Run]:
    """``get_or_train`` for each config; returns the runs in the order of ``configs``.

    Configs equal in everything but ``seed`` form a group: its configs missing from the cache
    are trained at once (``train_group``: fused or vectorised over seeds, SPEC §6), and saved one
    entry per seed. Each config prints the same "loaded run …" / "training …" lines as with
    ``get_or_train``. A config listed twice is looked up once.
    """
    configs = list(configs)
    groups: dict[str, dict[str, RunConfig]] = {}
    for config in configs:
        groups.setdefault(config.replace(seed=0).key(), {}).setdefault(config.key(), config)
    found: dict[str, Run] = {}
    for group in groups.values():
        members = list(group.values())
        if len(members) == 1:
            got = [get_or_train(members[0], device=device, progress=progress, verbose=verbose)]
        else:
            got = _get_or_train_seeds(members, device=device, progress=progress, verbose=verbose)
        found.update((c.key(), run) for c, run in zip(members, got))
    return [found[c.key()] for c in configs]
