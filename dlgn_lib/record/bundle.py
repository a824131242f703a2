"""Run bundles: cache entries packed into one file, to hand trained runs to a class.

A teacher trains once (``make figures PROFILE=full``) and exports; students import, or a course
server points ``DLGN_RUNS_DIR`` at a shared read-only folder the bundle was imported into::

    python -m dlgn_lib.runs export course.tar.gz [--profile full] [--notebook 05]
    python -m dlgn_lib.runs import course.tar.gz [--into DIR]

A bundle is a gzipped tar of entry folders (``<key>/manifest.json``, ``<key>/run.pt``, exactly as
in the cache) and ``bundle.json`` (what it holds). Import trusts nothing in it:

- members other than those files and their folders are refused before anything is written:
  absolute paths, ``..``, links, devices, anything else (a crafted tar is a classic attack);
- every entry is verified as the cache verifies its own (checksum, layout, key recomputed from
  the config, so an entry of another code version is refused) in a temporary folder; one bad
  entry refuses the whole bundle, and the temporary folder is removed;
- a valid local entry is never replaced (it is reported as present); a corrupt one is;
- the work is bounded before anything is written: sparse members are refused, and the sizes in
  the members' headers must stay under ``MAX_MEMBER_BYTES`` each and ``MAX_BUNDLE_BYTES`` in all,
  and fit the free space of the target; each ``run.pt`` is hashed while it streams and stops at
  the first byte past its header's size or a checksum that differs from its manifest's.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__, locations, runs
from ..runs import CacheWriteError
from .. import config as _config
from ..config import PROFILES
from ..files import command

__all__ = ["main"]

BUNDLE_FORMAT = 1
_ENTRY_NAME = re.compile(r"^[0-9a-f]{20}$")
_MEMBER = re.compile(r"^(bundle\.json|[0-9a-f]{20}|[0-9a-f]{20}/(run\.pt|manifest\.json))$")
ENTRY_FILES = ("manifest.json", "run.pt")
#: Bounds of one import: a run.pt of the full profile is a few MB; a class bundle a few hundred.
MAX_MEMBER_BYTES = 1 << 30          # 1 GiB
MAX_BUNDLE_BYTES = 8 << 30          # 8 GiB
MAX_MANIFEST_BYTES = 1 << 20        # 1 MiB
_CHUNK = 1 << 20


class BundleError(RuntimeError):
    """A bundle cannot be written or is refused; the message names the file, member or entry."""


@dataclass
class ImportReport:
    """What an import did, entry by entry (keys, shortened)."""
    imported: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)

    def text(self) -> str:
        return (f"imported {len(self.imported)} entries, {len(self.replaced)} corrupt local entries replaced, "
                f"{len(self.present)} already present (kept)")


def _selected(manifest: dict, profile: str | None, notebook: str | None) -> bool:
    made_by = manifest.get("made_by") or {}
    return ((profile is None or made_by.get("profile") == profile)
            and (notebook is None or made_by.get("notebook") == notebook))


def export(file: Path | str, *, profile: str | None = None, notebook: str | None = None,
           root: Path | None = None) -> list[str]:
    """Write the verified entries of the cache (or of one profile / notebook) to ``file``.

    Entries are selected by the notebook and profile recorded when they were trained (``made_by``
    in their manifest); entries that fail verification are left out and named. Returns the keys.
    """
    if profile is not None and profile not in PROFILES:
        raise BundleError(f"--profile {profile!r} is not a profile; choose one of {', '.join(PROFILES)}")
    root = Path(root) if root else locations.runs_dir()
    file = Path(file)
    chosen, skipped = [], []
    for folder in runs.entry_folders(root):
        try:
            manifest = runs.verify_entry(folder)
        except runs.CorruptEntry as exc:
            skipped.append(f"{folder.name}: {exc}")
            continue
        if _selected(manifest, profile, notebook):
            chosen.append(folder)
    if not chosen:
        what = " and ".join(x for x in (profile and f"profile {profile}", notebook and f"notebook {notebook}") if x)
        raise BundleError(f"no valid entries to export from {root}" + (f" for {what}" if what else ""))
    about = {"format": BUNDLE_FORMAT, "dlgn_lib": __version__, "code_version": _config.CODE_VERSION,
             "entries": [f.name for f in chosen], "profile": profile, "notebook": notebook}
    file.parent.mkdir(parents=True, exist_ok=True)
    runs.remove_stale_temporaries(file.parent, kind="export")   # left by an export that was killed
    fd, tmp = tempfile.mkstemp(prefix=runs.temp_prefix("export"), suffix=".tar.gz", dir=file.parent)
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            data = json.dumps(about, indent=1).encode()
            info = tarfile.TarInfo("bundle.json")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
            for folder in chosen:
                for name in ENTRY_FILES:
                    tar.add(folder / name, arcname=f"{folder.name}/{name}", recursive=False)
        os.chmod(tmp, 0o666 & ~locations.UMASK)   # mkstemp makes it 0600; a bundle is for a class to read
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for line in skipped:
        print(f"left out (fails verification): {line}")
    return [f.name for f in chosen]


def _check_member(member: tarfile.TarInfo) -> None:
    name = member.name
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise BundleError(f"member {name!r} has an absolute path")
    if ".." in Path(name).parts or "\\" in name:
        raise BundleError(f"member {name!r} leaves the bundle's folder")
    if not (member.isfile() or member.isdir()):
        kind = "a link" if (member.issym() or member.islnk()) else "a device or special file"
        raise BundleError(f"member {name!r} is {kind}; a bundle holds plain files and folders only")
    if not _MEMBER.match(name.rstrip("/")):
        raise BundleError(f"member {name!r} is not part of a run bundle (expected <key>/manifest.json, "
                          "<key>/run.pt or bundle.json)")
    if member.isdir() == name.rstrip("/").endswith((".pt", ".json")):
        raise BundleError(f"member {name!r} has the wrong type")


def _open(file: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(file, mode="r:*")
    except FileNotFoundError:
        raise BundleError(f"{file}: no such bundle") from None
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise BundleError(f"{file} is not a readable run bundle (truncated or not a tar.gz): {exc}") from None


def _bounded(file: Path, files: list[tarfile.TarInfo], root: Path) -> int:
    """Refuse sparse or oversized members, and a bundle larger than its bound or the free space."""
    total = 0
    for member in files:
        if member.issparse():
            raise BundleError(f"{file}: member {member.name} is a sparse file; a run bundle holds plain files only")
        limit = MAX_MANIFEST_BYTES if not member.name.endswith(".pt") else MAX_MEMBER_BYTES
        if member.size > limit:
            raise BundleError(f"{file}: member {member.name} claims {member.size:,} bytes, over the bound of "
                              f"{limit:,} for such a member; refused before anything was written")
        total += member.size
    if total > MAX_BUNDLE_BYTES:
        raise BundleError(f"{file} claims {total:,} bytes in all, over the bound of {MAX_BUNDLE_BYTES:,}")
    free = shutil.disk_usage(root).free
    if total > free:
        raise BundleError(f"{file} needs {total / 2**20:,.1f} MB and the disk of {root} has {free / 2**20:,.1f} MB "
                          "free; free some space or import --into a folder on another disk. Nothing was written")
    return total


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, file: Path, root: Path,
                 expected_sha256: str | None = None) -> None:
    """Stream one member to ``target``, hashing it; read errors blame the bundle, write errors the disk."""
    import hashlib
    try:
        source = tar.extractfile(member)
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise BundleError(f"{file}: member {member.name} cannot be read (truncated?): {exc}") from None
    digest, written = hashlib.sha256(), 0
    with open(target, "wb") as out:
        while True:
            try:
                chunk = source.read(_CHUNK)
            except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
                raise BundleError(f"{file}: member {member.name} cannot be read (truncated?): {exc}") from None
            if not chunk:
                break
            written += len(chunk)
            if written > member.size:
                raise BundleError(f"{file}: member {member.name} holds more than the {member.size:,} bytes its header says")
            digest.update(chunk)
            try:
                out.write(chunk)
            except OSError as exc:
                raise BundleError(f"cannot write {member.name} into {root}: {exc.strerror or exc} "
                                  f"({shutil.disk_usage(root).free / 2**20:,.1f} MB free there, this member needs "
                                  f"{member.size / 2**20:,.1f} MB); nothing was imported") from None
    if written != member.size:
        raise BundleError(f"{file}: member {member.name} is truncated ({written:,} of {member.size:,} bytes)")
    if expected_sha256 is not None and digest.hexdigest() != expected_sha256:
        raise BundleError(f"{file}: member {member.name} does not match the checksum in its manifest; refused")


def _copy_manifest(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, file: Path, root: Path) -> str | None:
    """Write a manifest member (small: read whole) and return the ``run.pt`` checksum it states."""
    try:
        data = tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise BundleError(f"{file}: member {member.name} cannot be read (truncated?): {exc}") from None
    try:
        target.write_bytes(data)
    except OSError as exc:
        raise BundleError(f"cannot write {member.name} into {root}: {exc.strerror or exc} "
                          f"({shutil.disk_usage(root).free / 2**20:,.1f} MB free there); nothing was imported") from None
    try:
        return json.loads(data).get("sha256")
    except (ValueError, AttributeError) as exc:
        raise BundleError(f"{file}: member {member.name} is not a manifest: {exc}") from None


def import_bundle(file: Path | str, into: Path | str | None = None) -> ImportReport:
    """Verify every member and entry of a bundle, then add its entries to the cache ``into``.

    Nothing is written unless the whole bundle passes; see the module docstring for what is
    refused. Returns what was imported, kept and replaced.
    """
    file = Path(file)
    root = Path(into).expanduser().resolve() if into else locations.runs_dir()
    try:
        runs.check_root(root)
    except runs.CacheLocationError as exc:
        raise BundleError(str(exc).replace("point DLGN_RUNS_DIR to a folder (or unset it for data/runs)",
                                           "name a folder with --into")) from None
    with _open(file) as tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BundleError(f"{file} is not a readable run bundle (truncated or damaged): {exc}") from None
        for member in members:
            _check_member(member)
        files = [m for m in members if m.isfile()]
        entries = sorted({m.name.split("/")[0] for m in files if "/" in m.name})
        if not entries:
            raise BundleError(f"{file} holds no run entries")
        for key in entries:
            have = sorted(m.name.split("/")[1] for m in files if m.name.startswith(key + "/"))
            if have != sorted(ENTRY_FILES):
                raise BundleError(f"entry {key} in {file} has files {have}, not {list(ENTRY_FILES)}")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BundleError(f"cannot create the cache folder {root}: {exc.strerror or exc}") from None
        _bounded(file, files, root)
        runs.remove_stale_temporaries(root)
        staging = Path(tempfile.mkdtemp(prefix=runs.temp_prefix("import"), dir=root))
        try:
            by_name = {m.name: m for m in files}
            for key in entries:   # manifests first: each run.pt is checked against its own as it streams
                (staging / key).mkdir()
                expected = _copy_manifest(tar, by_name[f"{key}/manifest.json"], staging / key / "manifest.json",
                                          file, root)
                _copy_member(tar, by_name[f"{key}/run.pt"], staging / key / "run.pt", file, root, expected)
            for key in entries:
                try:
                    runs.verify_entry(staging / key)
                except runs.CorruptEntry as exc:
                    raise BundleError(f"entry {key} in {file} is refused: {exc}") from None
            report = ImportReport()
            for key in entries:
                with runs.entry_lock(key, root):
                    local = root / key
                    if local.exists():
                        try:
                            runs.verify_entry(local)
                            report.present.append(key)
                            continue
                        except runs.CorruptEntry:
                            runs.discard(local)
                            report.replaced.append(key)
                    else:
                        report.imported.append(key)
                    runs.make_shareable(staging / key)
                    os.rename(staging / key, local)
            return report
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@command
def main(argv: list[str] | None = None) -> int:
    """``python -m dlgn_lib.runs export FILE [--profile P] [--notebook NN]`` and ``import FILE [--into DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.runs",
                                     description="Pack run-cache entries into a bundle, or add a bundle's entries to a cache.")
    sub = parser.add_subparsers(dest="command", required=True)
    out = sub.add_parser("export", help="write the cache's verified entries (or one profile's / notebook's) to FILE")
    out.add_argument("file", type=Path)
    out.add_argument("--profile", choices=_config.PROFILES, help="only entries trained under this profile")
    out.add_argument("--notebook", help="only entries trained by this notebook (e.g. 05)")
    into = sub.add_parser("import", help="verify a bundle and add its entries to the cache")
    into.add_argument("file", type=Path)
    into.add_argument("--into", type=Path, help="the cache to add to (default: DLGN_RUNS_DIR or data/runs)")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            keys = export(args.file, profile=args.profile, notebook=args.notebook)
            print(f"wrote {len(keys)} entries to {args.file}")
        else:
            report = import_bundle(args.file, args.into)
            print(report.text() + f" into {args.into or locations.display_path(locations.runs_dir())}")
    except (BundleError, CacheWriteError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        done = ("no bundle was written (its temporary file is removed)" if args.command == "export" else
                "entries already moved into the cache are complete and verified, nothing half-written is left "
                "(the staging folder is removed)")
        print(f"interrupted: {done}; run the same command again to finish", file=sys.stderr)
        return 130
    return 0

