"""Run cache faults and run bundles: every bad case is reported clearly and leaves nothing behind."""
import errno
import io
import json
import os
import socket
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest
import torch

from dlgn_lib import locations, runs

from dlgn_lib.record import bundle
from dlgn_lib import config as C
from fingerprint import tree
from run_cache_helpers import cache_dir, small_config  # noqa: F401  (cache_dir: an autouse fixture)




def rewrite_payload(folder: Path, payload) -> None:
    """Replace run.pt and fix the manifest's checksum: the checksum passes, the layout must not."""
    torch.save(payload, folder / "run.pt")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = runs._sha256(folder / "run.pt")
    (folder / "manifest.json").write_text(json.dumps(manifest))


# --------------------------------------------------------------------------- cache entries

@pytest.mark.parametrize("payload,why", [({"format": 1}, "wrong layout"),
                                         ([1, 2, 3], "wrong layout"),
                                         ("config", "wrong layout")])
def test_an_entry_with_a_valid_checksum_but_the_wrong_layout_is_corrupt_and_retrained(payload, why, capsys):
    cfg = small_config()
    first = runs.get_or_train(cfg, verbose=False)
    folder = runs.entry_dir(cfg)
    rewrite_payload(folder, payload)
    with pytest.raises(runs.CorruptEntry, match=why):
        runs.load(cfg)
    again = runs.get_or_train(cfg, verbose=False)
    err = capsys.readouterr().err
    assert "is corrupt" in err and why in err and folder.name in err
    assert again.history == first.history
    runs.load(cfg)   # the retrained entry verifies


def test_a_field_of_the_wrong_type_and_a_manifest_that_is_not_a_mapping_are_corrupt():
    cfg = small_config()
    run = runs.get_or_train(cfg, verbose=False)
    folder = runs.entry_dir(cfg)
    payload = torch.load(folder / "run.pt", weights_only=True)
    rewrite_payload(folder, {**payload, "meta": {"not": "a json string"}})
    with pytest.raises(runs.CorruptEntry, match="meta is a dict"):
        runs.load(cfg)
    runs.save(run)
    (folder / "manifest.json").write_text("[1, 2]")
    with pytest.raises(runs.CorruptEntry, match="manifest has the wrong layout"):
        runs.load(cfg)


def _small_tmpfs(path: Path) -> bool:
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def test_a_save_into_a_full_filesystem_names_the_entry_and_the_free_space(tmp_path, monkeypatch):
    run = runs.train_group([small_config(epochs=40)])[0]
    small = tmp_path / "small"
    mounted = _small_tmpfs(small)
    try:
        if mounted:   # a real 64 kB filesystem, filled up: run.pt does not fit
            with open(small / "filler", "wb", buffering=0) as fh:
                with pytest.raises(OSError):
                    for _ in range(100):
                        fh.write(b"\0" * 4096)
        else:         # no mount allowed here: a writer that fails as torch.save does on a full disk
            monkeypatch.setattr(runs.torch, "save", lambda *a, **k: (_ for _ in ()).throw(
                RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")))
        with pytest.raises(runs.CacheWriteError) as info:
            runs.save(run, root=small)
        message = str(info.value)
        assert runs.entry_dir(run.config, small).name in message and "MB free" in message
        assert sorted(p.name for p in small.iterdir()) == (["filler"] if mounted else []), \
            "a failed save leaves no entry and no temporary folder"
        del info   # its traceback holds the half-written file open
    finally:
        if mounted:
            import gc
            gc.collect()
            subprocess.run(["umount", "-l", str(small)], check=True)


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_temporary_folders_of_dead_writers_are_removed_by_the_next_writer(cache_dir):
    cache_dir.mkdir(parents=True)
    host = socket.gethostname()
    dead = cache_dir / f".tmp-{_dead_pid()}@{host}-abc123"
    alive = cache_dir / f".tmp-{os.getpid()}@{host}-def456"
    other_host = cache_dir / f".tmp-{_dead_pid()}@another-host-ghi789"
    old_unnamed, new_unnamed = cache_dir / ".tmp-k2j3h4g5", cache_dir / ".tmp-a1b2c3d4"
    dead_trash = cache_dir / f".trash-{_dead_pid()}@{host}-0123456789abcdef0123"
    for folder in (dead, alive, other_host, old_unnamed, new_unnamed, dead_trash):
        folder.mkdir()
        (folder / "run.pt").write_bytes(b"x" * 1000)
    hours_ago = time.time() - 2 * runs.ABANDONED_AFTER_S
    os.utime(old_unnamed, (hours_ago, hours_ago))
    runs.get_or_train(small_config(), verbose=False)
    left = {p.name for p in cache_dir.iterdir() if p.name.startswith(".t")}
    assert left == {alive.name, other_host.name, new_unnamed.name}


def test_a_valid_entry_is_read_from_a_read_only_cache_without_a_lock(monkeypatch):
    cfg = small_config()
    trained = runs.get_or_train(cfg, verbose=False)

    def no_lock(*args, **kwargs):
        raise AssertionError("a valid entry must load without taking a lock")
    monkeypatch.setattr(runs, "entry_lock", no_lock)
    assert runs.get_or_train(cfg, verbose=False).history == trained.history
    assert runs.get_or_train_many([cfg, cfg.replace(seed=0)], verbose=False)[0].history == trained.history


def test_a_run_missing_from_a_read_only_cache_is_trained_and_not_saved(monkeypatch, capsys, cache_dir):
    cache_dir.mkdir(parents=True)
    before = tree(cache_dir)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(cache_dir / ".locks"))
    monkeypatch.setattr(runs, "entry_lock", read_only)
    run = runs.get_or_train(small_config(), verbose=False)
    assert run.history["train_loss"][-1] < run.history["train_loss"][0]
    assert "is read-only: training" in capsys.readouterr().err
    assert tree(cache_dir) == before


def test_a_process_that_waits_on_a_lock_says_so(monkeypatch, capsys):
    monkeypatch.setattr(runs, "WAIT_NOTICE_S", 0.2)
    key = small_config().key()
    held = threading.Event()

    def holder():
        with runs.entry_lock(key):
            held.set()
            time.sleep(1.0)
    thread = threading.Thread(target=holder)
    thread.start()
    held.wait()
    start = time.monotonic()
    with runs.entry_lock(key, label="the run we want"):
        waited = time.monotonic() - start
    thread.join()
    err = capsys.readouterr().err
    assert waited >= 0.5 and "waiting for another process that holds the run the run we want" in err


def test_entries_take_the_umask_permissions_and_record_who_made_them(monkeypatch):
    namespace = {"PROFILE": "quick", "SEED": 0, "SEEDS": None}
    monkeypatch.setattr(C, "_MADE_BY", None)
    C.setup("01", namespace, show=False)
    cfg = small_config()
    runs.get_or_train(cfg, verbose=False)
    folder = runs.entry_dir(cfg)
    umask = os.umask(0)
    os.umask(umask)
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (folder / "run.pt").stat().st_mode & 0o777 == 0o666 & ~umask
    manifest = runs.verify_entry(folder)
    assert manifest["made_by"] == {"notebook": "01", "profile": "quick"}
    assert manifest["code_version"] == C.CODE_VERSION


# --------------------------------------------------------------------------- run bundles

@pytest.fixture
def trained(cache_dir, monkeypatch):
    """Three entries: two made by notebook 05 under quick, one by 06 under full."""
    made = []
    for seed, who in ((0, {"notebook": "05", "profile": "quick"}), (1, {"notebook": "05", "profile": "quick"}),
                      (2, {"notebook": "06", "profile": "full"})):
        monkeypatch.setattr(C, "_MADE_BY", who)
        made.append(runs.get_or_train(small_config(seed), verbose=False))
    return made


def test_bundle_round_trip_verifies_and_never_replaces_a_valid_entry(trained, tmp_path, capsys):
    file = tmp_path / "course.tar.gz"
    assert len(bundle.main(["export", str(file)]) == 0 and bundle.export(file)) == 3
    into = tmp_path / "class-cache"
    report = bundle.import_bundle(file, into)
    assert (len(report.imported), report.present, report.replaced) == (3, [], [])
    for run in trained:
        loaded = runs.load(run.config, into)
        assert loaded.history == run.history
        assert all(torch.equal(loaded.snapshots[e][k], run.snapshots[e][k]) for e in run.epochs
                   for k in run.snapshots[e])
    # a second import keeps the valid local entries; a corrupt one is replaced
    victim = runs.entry_dir(trained[0].config, into)
    (victim / "run.pt").write_bytes(b"damaged")
    again = bundle.import_bundle(file, into)
    assert (again.imported, sorted(again.present), again.replaced) == (
        [], sorted(runs.entry_dir(r.config).name for r in trained[1:]), [victim.name])
    runs.load(trained[0].config, into)
    assert bundle.main(["import", str(file), "--into", str(into)]) == 0
    assert "already present" in capsys.readouterr().out
    assert not [p for p in into.iterdir() if p.name.startswith(".tmp")]
    assert file.stat().st_mode & 0o777 == 0o666 & ~locations.UMASK, "a bundle takes the umask's permissions, like entries"


def test_export_selects_by_profile_and_notebook(trained, tmp_path):
    assert len(bundle.export(tmp_path / "full.tar.gz", profile="full")) == 1
    assert len(bundle.export(tmp_path / "nb05.tar.gz", notebook="05")) == 2
    with pytest.raises(bundle.BundleError, match="no valid entries to export .* for notebook 09"):
        bundle.export(tmp_path / "none.tar.gz", notebook="09")
    with pytest.raises(bundle.BundleError, match="'bogus' is not a profile"):
        bundle.export(tmp_path / "none.tar.gz", profile="bogus")
    assert not (tmp_path / "none.tar.gz").exists()


def _members(file: Path) -> dict[str, bytes]:
    with tarfile.open(file) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _write_tar(file: Path, members: dict[str, bytes], extra=()):
    with tarfile.open(file, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)


def _refused(file: Path, into: Path, match: str):
    before = tree(into)
    with pytest.raises(bundle.BundleError, match=match):
        bundle.import_bundle(file, into)
    assert tree(into) == before, "a refused bundle writes nothing"
    assert not into.exists() or not [p for p in into.iterdir() if p.name.startswith(".tmp")]


def test_tampered_truncated_and_crafted_bundles_are_refused_with_nothing_written(trained, tmp_path):
    good = tmp_path / "good.tar.gz"
    bundle.export(good)
    members = _members(good)
    into = tmp_path / "class-cache"
    into.mkdir()
    (into / "keep.txt").write_text("a file already there")
    key = next(name.split("/")[0] for name in members if name.endswith("run.pt"))

    tampered = dict(members)
    data = bytearray(tampered[f"{key}/run.pt"])
    data[len(data) // 2] ^= 0xFF
    tampered[f"{key}/run.pt"] = bytes(data)
    _write_tar(tmp_path / "tampered.tar.gz", tampered)
    _refused(tmp_path / "tampered.tar.gz", into, f"member {key}/run.pt does not match the checksum in its manifest")

    raw = good.read_bytes()
    (tmp_path / "truncated.tar.gz").write_bytes(raw[: len(raw) // 2])
    _refused(tmp_path / "truncated.tar.gz", into, "truncated")

    _write_tar(tmp_path / "traversal.tar.gz", {**members, "../evil.txt": b"outside"})
    _refused(tmp_path / "traversal.tar.gz", into, "leaves the bundle's folder")
    assert not (tmp_path / "evil.txt").exists()

    _write_tar(tmp_path / "absolute.tar.gz", {**members, "/tmp/evil.txt": b"outside"})
    _refused(tmp_path / "absolute.tar.gz", into, "absolute path")

    link = tarfile.TarInfo(f"{key}/manifest.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    _write_tar(tmp_path / "link.tar.gz", {k: v for k, v in members.items() if k != f"{key}/manifest.json"}, [link])
    _refused(tmp_path / "link.tar.gz", into, "is a link")

    device = tarfile.TarInfo(f"{key}/run.pt")
    device.type = tarfile.CHRTYPE
    _write_tar(tmp_path / "device.tar.gz", {k: v for k, v in members.items() if k != f"{key}/run.pt"}, [device])
    _refused(tmp_path / "device.tar.gz", into, "device or special file")

    _write_tar(tmp_path / "stranger.tar.gz", {**members, "notes.sh": b"rm -rf /"})
    _refused(tmp_path / "stranger.tar.gz", into, "not part of a run bundle")

    (tmp_path / "not-a-tar.tar.gz").write_bytes(b"hello")
    _refused(tmp_path / "not-a-tar.tar.gz", into, "not a readable run bundle")


def test_an_entry_of_another_code_version_is_refused(trained, tmp_path, monkeypatch):
    file = tmp_path / "old.tar.gz"
    bundle.export(file)
    monkeypatch.setattr(C, "CODE_VERSION", C.CODE_VERSION + "-next")
    into = tmp_path / "class-cache"
    _refused(file, into, "made by code version")
