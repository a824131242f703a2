"""Run bundles: cache entries packed into one file, to hand trained runs to a class::

    python -m dlgn_lib.runs export course.tar.gz [--profile full] [--notebook 05]
    python -m dlgn_lib.runs import course.tar.gz [--into DIR] [--sha256 HEX]

A bundle is a gzipped tar of entry folders (``<key>/manifest.json``, ``<key>/run.pt``, as in the
cache), this code's analysis entries (``analyses/<code>-<key>.json``) and ``bundle.json``; export
writes it atomically, with its SHA-256 beside it in ``<bundle>.sha256`` (``sha256sum``'s format).
Import trusts nothing in it: members, their count and their sizes are checked before anything is
written; every entry and analysis is verified as the cache verifies its own, in a temporary folder,
and one bad one refuses the whole bundle; a valid local one is never replaced; the bundle's SHA-256
must match ``--sha256`` or else the ``.sha256`` file beside it. docs/guide.md ("Run bundles for a
class") says what each check promises.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__, files, locations, runs
from .. import config as _config
from ..files import Refusal, command
from ..locations import display_path as _shown

__all__ = ["main"]

BUNDLE_FORMAT = 1
_MEMBER = re.compile(r"^(bundle\.json|[0-9a-f]{20}|[0-9a-f]{20}/(run\.pt|manifest\.json)"
                     r"|analyses|analyses/[0-9a-f]{16}-[0-9a-f]{32}\.json)$")
ENTRY_FILES = ("manifest.json", "run.pt")
#: Bounds of one import: a run.pt of the full profile is a few MB; a class bundle a few hundred.
MAX_MEMBER_BYTES = 1 << 30          # 1 GiB
MAX_BUNDLE_BYTES = 8 << 30          # 8 GiB
MAX_MANIFEST_BYTES = 1 << 20        # 1 MiB
#: Entries of one bundle: the whole cache of the series, every profile, is about 3,500.
MAX_ENTRIES = 5_000
#: Members of one bundle: a folder and two files per entry, and bundle.json.
MAX_MEMBERS = 3 * MAX_ENTRIES + 1
#: Analyses of one bundle (members ``analyses/…``, counted apart): the series' quick profile has a few dozen.
MAX_ANALYSES = 20_000
_CHUNK = 1 << 20
_READ_ERRORS = (tarfile.TarError, EOFError, OSError)   # OSError includes gzip.BadGzipFile


class BundleError(Refusal):
    """A bundle cannot be written or is refused; the message names the file, member or entry."""


@dataclass
class ImportReport:
    """What an import did, entry by entry (keys, shortened)."""
    imported: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    #: Analysis file names by outcome: "imported", "replaced", "present", "other code" (``runs.store_analysis``).
    analyses: dict[str, list[str]] = field(default_factory=dict)

    def text(self) -> str:
        counts = {k: len(v) for k, v in self.analyses.items()}
        other = f", {counts['other code']} of other library code left out" if counts.get("other code") else ""
        return (f"imported {len(self.imported)} entries, {len(self.replaced)} corrupt local entries replaced, "
                f"{len(self.present)} already present (kept); imported {counts.get('imported', 0)} analyses, "
                f"{counts.get('replaced', 0)} replaced, {counts.get('present', 0)} already present{other}")


def _sha256(path: Path | str) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def export(file: Path | str, *, profile: str | None = None, notebook: str | None = None,
           root: Path | None = None) -> list[str]:
    """Write the cache's verified entries (or one profile's / notebook's, as ``made_by`` in their manifests says)
    and valid analyses to ``file``, its SHA-256 to ``<file>.sha256``; returns the keys. Entries and analyses that
    fail verification are left out and named; a failed write leaves an old bundle there whole."""
    if profile is not None and profile not in _config.PROFILES:
        raise BundleError(f"--profile {profile!r} is not a profile; choose one of {', '.join(_config.PROFILES)}")
    root = Path(root) if root else locations.runs_dir()
    file = Path(file)
    if file.is_dir():
        raise BundleError(f"{_shown(file)} is a folder; name the bundle's file, such as "
                          f"{_shown(file / 'course.tar.gz')}")
    files.writable_folder(file.parent)
    chosen, skipped, analyses = [], [], []
    for folder in runs.entry_folders(root):
        try:
            made_by = runs.verify_entry(folder).get("made_by") or {}
        except runs.CorruptEntry as exc:
            skipped.append(f"{folder.name}: {exc}")
            continue
        if profile in (None, made_by.get("profile")) and notebook in (None, made_by.get("notebook")):
            chosen.append(folder)
    for path in runs.analysis_entries(root):
        try:
            runs.check_analysis(path)
            analyses.append(path)
        except runs.CorruptEntry as exc:
            skipped.append(str(exc))
    if not chosen:
        what = " and ".join(x for x in (profile and f"profile {profile}", notebook and f"notebook {notebook}") if x)
        raise BundleError(f"no valid entries to export from {root}" + (f" for {what}" if what else ""))
    about = {"format": BUNDLE_FORMAT, "dlgn_lib": __version__, "code_version": _config.CODE_VERSION,
             "entries": [f.name for f in chosen], "analyses": [p.name for p in analyses], "profile": profile,
             "notebook": notebook}
    runs.remove_stale_temporaries(file.parent, kind="export")   # left by an export that was killed
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=runs.temp_prefix("export"), suffix=".tar.gz", dir=file.parent)
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz") as tar:
                data = json.dumps(about, indent=1).encode()
                info = tarfile.TarInfo("bundle.json")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
                for folder in chosen:
                    for name in ENTRY_FILES:
                        tar.add(folder / name, arcname=f"{folder.name}/{name}", recursive=False)
                for path in analyses:
                    tar.add(path, arcname=f"{runs.ANALYSIS_FOLDER}/{path.name}", recursive=False)
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, 0o666 & ~locations.UMASK)   # mkstemp makes it 0600; a bundle is for a class to read
        files.write_atomic(f"{file}.sha256", f"{_sha256(tmp)}  {file.name}\n")
        os.replace(tmp, file)
    except OSError as exc:
        raise BundleError(f"cannot write {_shown(file)}: {exc.strerror or exc}; no bundle was written "
                          "(one there before is unchanged)") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    for line in skipped:
        print(f"left out (fails verification): {line}")
    return [f.name for f in chosen]


def _is_analysis(name: str) -> bool:
    return name.startswith(runs.ANALYSIS_FOLDER + "/")


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
                          "<key>/run.pt, analyses/<16 hex>-<32 hex>.json or bundle.json)")
    if member.isdir() == name.rstrip("/").endswith((".pt", ".json")):
        raise BundleError(f"member {name!r} has the wrong type")


def _open(file: Path) -> tarfile.TarFile:
    if file.is_dir():
        raise BundleError(f"{_shown(file)} is a folder, not a run bundle")
    try:
        return tarfile.open(file, mode="r:*")
    except FileNotFoundError:
        raise BundleError(f"{_shown(file)}: no such bundle") from None
    except _READ_ERRORS as exc:
        raise BundleError(f"{_shown(file)} is not a readable run bundle (truncated or not a tar.gz): {exc}") from None


def _listing(tar: tarfile.TarFile, file: Path) -> tuple[list[tarfile.TarInfo], list[str]]:
    """The bundle's file members in its order, and its entry keys: each header checked as it is read, the list
    refused past ``MAX_MEMBERS`` without reading further, each entry with exactly ``ENTRY_FILES``."""
    members, analyses = [], 0
    try:
        for member in tar:
            if member.name.rstrip("/").startswith(runs.ANALYSIS_FOLDER):
                analyses += 1
                if analyses > MAX_ANALYSES + 1:
                    raise BundleError(f"{_shown(file)} holds more than {MAX_ANALYSES:,} analyses, over the bound of a "
                                      "run bundle; refused before anything was written")
            elif len(members) - analyses == MAX_MEMBERS:
                raise BundleError(f"{_shown(file)} holds more than {MAX_MEMBERS:,} members, over the bound of a run "
                                  f"bundle ({MAX_MEMBERS:,}: {MAX_ENTRIES:,} entries); refused before anything "
                                  "was written")
            _check_member(member)
            members.append(member)
    except _READ_ERRORS as exc:
        raise BundleError(f"{_shown(file)} is not a readable run bundle (truncated or damaged): {exc}") from None
    members = [m for m in members if m.isfile()]
    have: dict[str, list[str]] = {}
    for member in members:
        if "/" in member.name and not _is_analysis(member.name):
            key, name = member.name.split("/")
            have.setdefault(key, []).append(name)
    if not have:
        raise BundleError(f"{_shown(file)} holds no run entries")
    if len(have) > MAX_ENTRIES:
        raise BundleError(f"{_shown(file)} holds {len(have):,} entries, over the bound of {MAX_ENTRIES:,}; "
                          "refused before anything was written")
    for key, names in have.items():
        if sorted(names) != sorted(ENTRY_FILES):
            raise BundleError(f"entry {key} in {_shown(file)} has files {sorted(names)}, not {list(ENTRY_FILES)}")
    return members, sorted(have)


def _bounded(file: Path, members: list[tarfile.TarInfo], root: Path) -> None:
    """Refuse sparse or oversized members, and a bundle larger than its bound or the free space."""
    total = 0
    for member in members:
        if member.issparse():
            raise BundleError(f"{file}: member {member.name} is a sparse file; a run bundle holds plain files only")
        limit = (runs.MAX_ANALYSIS_BYTES if _is_analysis(member.name) else
                 MAX_MEMBER_BYTES if member.name.endswith(".pt") else MAX_MANIFEST_BYTES)
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


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, file: Path, root: Path) -> str:
    """Stream one member to ``target``; returns its SHA-256. Read errors blame the bundle, write errors the disk."""
    digest, written = hashlib.sha256(), 0
    with open(target, "wb") as out:
        try:
            source = tar.extractfile(member)
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                if written > member.size:
                    raise BundleError(f"{file}: member {member.name} holds more than the {member.size:,} bytes its "
                                      "header says")
                digest.update(chunk)
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise BundleError(f"cannot write {member.name} into {root}: {exc.strerror or exc} "
                                      f"({shutil.disk_usage(root).free / 2**20:,.1f} MB free there, this member "
                                      f"needs {member.size / 2**20:,.1f} MB); nothing was imported") from None
        except _READ_ERRORS as exc:
            raise BundleError(f"{file}: member {member.name} cannot be read (truncated?): {exc}") from None
    if written != member.size:
        raise BundleError(f"{file}: member {member.name} is truncated ({written:,} of {member.size:,} bytes)")
    return digest.hexdigest()


def _stage(tar: tarfile.TarFile, members: list[tarfile.TarInfo], staging: Path, file: Path, root: Path) -> None:
    """Copy the entry and analysis members into ``staging`` in the bundle's order (one pass over the
    file), each ``run.pt`` checked against the checksum its manifest states and each analysis verified."""
    stated, found = {}, {}
    for member in members:
        if "/" not in member.name:
            continue   # bundle.json
        target = staging / member.name
        target.parent.mkdir(exist_ok=True)
        digest = _copy_member(tar, member, target, file, root)
        if _is_analysis(member.name):
            try:
                runs.check_analysis(target)
            except runs.CorruptEntry as exc:
                raise BundleError(f"{_shown(file)}: {exc}; the bundle is refused whole, nothing was imported") from None
            continue
        key, name = member.name.split("/")
        if name == "run.pt":
            found[key] = digest
        else:
            try:
                stated[key] = json.loads(target.read_bytes()).get("sha256")
            except (ValueError, AttributeError) as exc:
                raise BundleError(f"{file}: member {member.name} is not a manifest: {exc}") from None
        if key in stated and key in found and stated[key] != found[key]:
            raise BundleError(f"{file}: member {key}/run.pt does not match the checksum in its manifest; refused")


def _check_published(file: Path, sha256: str | None) -> None:
    """Refuse a bundle whose SHA-256 is not ``sha256`` (``--sha256``), or else the one in ``<file>.sha256`` if any."""
    source = "--sha256"
    if sha256 is None:
        beside = Path(f"{file}.sha256")
        if not beside.is_file():
            return
        source = _shown(beside)
        sha256 = (beside.read_text(errors="replace").split() or [""])[0]
    if not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        raise BundleError(f"{source}: {sha256[:80]!r} is not a SHA-256 (64 hexadecimal digits); nothing was imported")
    actual = _sha256(file)
    if actual != sha256.lower():
        raise BundleError(f"{_shown(file)} has the SHA-256 {actual}, not {sha256.lower()} as {source} says: it was "
                          "altered or damaged since it was published, or it is another bundle; nothing was imported")


def import_bundle(file: Path | str, into: Path | str | None = None, sha256: str | None = None) -> ImportReport:
    """Verify every member and entry of a bundle (and its published ``sha256``), then add its entries to the
    cache ``into``; nothing is written unless the whole bundle passes. Returns what was imported, kept and replaced."""
    file = Path(file)
    root = Path(into).expanduser().resolve() if into else locations.runs_dir()
    try:
        runs.check_root(root)
    except runs.CacheLocationError as exc:
        raise BundleError(str(exc).replace("point DLGN_RUNS_DIR to a folder (or unset it for data/runs)",
                                           "name a folder with --into")) from None
    with _open(file) as tar:
        _check_published(file, sha256)
        members, entries = _listing(tar, file)
        try:
            root.mkdir(parents=True, exist_ok=True)
            _bounded(file, members, root)
            runs.remove_stale_temporaries(root)
            staging = Path(tempfile.mkdtemp(prefix=runs.temp_prefix("import"), dir=root))
        except OSError as exc:
            raise BundleError(f"cannot import into {_shown(root)}: {exc.strerror or exc}; "
                              "nothing was imported") from None
        try:
            _stage(tar, members, staging, file, root)
            for key in entries:
                try:
                    runs.verify_entry(staging / key)
                except runs.CorruptEntry as exc:
                    raise BundleError(f"entry {key} in {_shown(file)} fails verification: {exc}; the bundle is "
                                      "refused whole, nothing was imported") from None
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
            for path in sorted((staging / runs.ANALYSIS_FOLDER).glob("*.json")):
                report.analyses.setdefault(runs.store_analysis(path, root), []).append(path.name)
            return report
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@command
def main(argv: list[str] | None = None) -> int:
    """``python -m dlgn_lib.runs export FILE [--profile P] [--notebook NN]`` and
    ``import FILE [--into DIR] [--sha256 HEX]``."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.runs", description="Pack run-cache entries into a "
                                     "bundle, or add a bundle's entries to a cache.")
    sub = parser.add_subparsers(dest="command", required=True)
    out = sub.add_parser("export", help="write the cache's verified entries (or one profile's / notebook's) to FILE "
                                        "and its SHA-256 to FILE.sha256")
    out.add_argument("file", type=Path)
    out.add_argument("--profile", choices=_config.PROFILES, help="only entries trained under this profile")
    out.add_argument("--notebook", help="only entries trained by this notebook (e.g. 05)")
    into = sub.add_parser("import", help="verify a bundle and add its entries to the cache")
    into.add_argument("file", type=Path)
    into.add_argument("--into", type=Path, help="the cache to add to (default: DLGN_RUNS_DIR or data/runs)")
    into.add_argument("--sha256", metavar="HEX", help="the bundle's SHA-256 as published by someone you trust "
                                                      "(default: the one in FILE.sha256, when that file is there)")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            keys = export(args.file, profile=args.profile, notebook=args.notebook)
            with _open(args.file) as tar:
                analyses = len(json.loads(tar.extractfile("bundle.json").read())["analyses"])
            print(f"wrote {len(keys)} entries and {analyses} analyses to {args.file} (SHA-256 in {args.file}.sha256)")
        else:
            report = import_bundle(args.file, args.into, args.sha256)
            print(report.text() + f" into {args.into or _shown(locations.runs_dir())}")
    except KeyboardInterrupt:
        done = ("no bundle was written (its temporary file is removed)" if args.command == "export" else
                "entries already moved into the cache are complete and verified, nothing half-written is left "
                "(the staging folder is removed)")
        raise KeyboardInterrupt(f"{done}; run the same command again to finish") from None
    return 0


main.__wrapped__.__module__ = "dlgn_lib.runs"   # run as ``python -m dlgn_lib.runs``: its one-line errors say so
