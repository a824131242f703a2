"""Run bundles, side-by-side training, the class walk and the environment variables they read: each
fault of issue 46 (N10-N14, tamper evidence, a killed training process) ends in one line that
names the file or variable and the reason, and leaves nothing changed or lost."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time

import pytest
import torch

from dlgn_lib import files, locations, numerics, runs
from dlgn_lib.record import bundle, classwalk
from fingerprint import tree
from run_cache_helpers import bundle_members, cache_dir, small_config, write_tar  # noqa: F401  (cache_dir: an autouse fixture)

REPO = locations.REPO_ROOT




def _python(args, env=None, timeout=300):
    """A fresh process on the default numeric path (the pin this process set is not handed down), plus ``env``."""
    unset = ("DLGN_NUMERICS", "DLGN_NUM_THREADS", *numerics.PINNED)
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**base, **(env or {})})


def _one_line(err: str, command: str = "python -m dlgn_lib.runs") -> str:
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"{command}: error: "), err
    return err


_members, _write_tar = bundle_members, write_tar


# --- N10: a bundle of many tiny members ---------------------------------------------------------------

def test_a_bundle_of_more_members_than_the_bound_is_refused_fast_before_anything_is_staged(tmp_path):
    """10,000 entries of two tiny files each (the 145 kB bundle that took 94 s and staged 20,000
    files): refused from its member list, in well under 5 s, with nothing written."""
    sha = hashlib.sha256(b"x").hexdigest()
    manifest = json.dumps({"format": 1, "key": "", "sha256": sha}).encode()
    file = tmp_path / "many.tar.gz"
    with tarfile.open(file, "w:gz") as tar:
        for i in range(10_000):
            for name, data in (("manifest.json", manifest), ("run.pt", b"x")):
                info = tarfile.TarInfo(f"{i:020x}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    assert file.stat().st_size < 300_000
    into = tmp_path / "class"
    into.mkdir()
    start = time.perf_counter()
    with pytest.raises(bundle.BundleError, match=r"many\.tar\.gz holds more than 15,001 members, over the bound "
                                                 r"of a run bundle \(15,001: 5,000 entries\); refused before"):
        bundle.import_bundle(file, into)
    assert time.perf_counter() - start < 5
    assert list(into.iterdir()) == [], "nothing staged, not even a temporary folder"


# --- N11: an entry of another numeric code path -------------------------------------------------------

TRAIN_AND_EXPORT = textwrap.dedent("""
    import sys
    from dlgn_lib import config as C, runs
    from dlgn_lib.record import bundle
    cfg = C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=32, n_val=32, n_test=32),
                      C.ModelSpec.make("dlgn", (3, 3)), epochs=5, n_snapshots=3)
    runs.get_or_train(cfg, verbose=False)
    sys.exit(bundle.main(["export", sys.argv[1]]))
""")


def test_an_entry_of_another_numeric_code_path_is_refused_naming_both_paths(tmp_path):
    """Trained and exported under DLGN_NUMERICS=native, imported in a fresh process on the pinned path."""
    file = tmp_path / "native.tar.gz"
    made = _python(["-c", TRAIN_AND_EXPORT, str(file)],
                   env={"DLGN_NUMERICS": "native", "DLGN_RUNS_DIR": str(tmp_path / "native-runs")})
    assert made.returncode == 0, made.stderr
    into = tmp_path / "class"
    done = _python(["-m", "dlgn_lib.runs", "import", str(file), "--into", str(into)])
    assert done.returncode == 1
    err = _one_line(done.stderr)
    assert "fails verification: made on another numeric code path (ATEN_CPU_CAPABILITY=" in err
    assert "threads=1) than this process runs (pinned, the default); set DLGN_NUMERICS" in err
    assert "the bundle is refused whole, nothing was imported" in err and "retrained" not in err
    assert [p.name for p in into.iterdir()] == [".locks"] or not list(into.iterdir())


# --- N12: export's writes -----------------------------------------------------------------------------

@pytest.fixture
def one_entry(cache_dir):
    return runs.get_or_train(small_config(), verbose=False)


def test_export_to_a_folder_is_refused_by_name(one_entry, tmp_path, capsys):
    target = tmp_path / "out"
    target.mkdir()
    assert bundle.main(["export", str(target)]) == 1
    assert f"{target} is a folder; name the bundle's file, such as {target / 'course.tar.gz'}" in \
        _one_line(capsys.readouterr().err)
    assert list(target.iterdir()) == []


def test_export_under_a_file_is_refused_by_name(one_entry, tmp_path, capsys):
    (tmp_path / "FILE").write_text("x")
    assert bundle.main(["export", str(tmp_path / "FILE" / "x.tar.gz")]) == 1
    assert f"{tmp_path / 'FILE'} is a file, not a folder" in _one_line(capsys.readouterr().err)
    assert (tmp_path / "FILE").read_text() == "x"


def test_export_onto_a_full_disk_keeps_the_old_bundle_and_leaves_no_temporary(cache_dir, tmp_path, full_folder,
                                                                                capsys):
    for seed in range(3):
        runs.get_or_train(small_config(seed, epochs=60), verbose=False)
    file = full_folder / "b.tar.gz"
    file.write_bytes(b"the old bundle")
    full_folder.fill()
    before = tree(full_folder)
    assert bundle.main(["export", str(file)]) == 1
    err = _one_line(capsys.readouterr().err)
    assert f"cannot write {file}: No space left on device; no bundle was written" in err
    assert tree(full_folder) == before and file.read_bytes() == b"the old bundle"


def test_export_into_a_read_only_folder_is_refused_by_name(one_entry, tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("this machine does not allow mounting a read-only filesystem")
    try:
        assert bundle.main(["export", str(folder / "b.tar.gz")]) == 1
        assert f"cannot write {folder / 'b.tar.gz'}: Read-only file system" in _one_line(capsys.readouterr().err)
        assert list(folder.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


# --- N13: environment variables -----------------------------------------------------------------------

def test_train_processes_accepts_ascii_digits_only(monkeypatch):
    monkeypatch.setenv("DLGN_TRAIN_PROCESSES", "²")    # str.isdigit says yes, int() says no
    with pytest.raises(files.Refusal, match=r"DLGN_TRAIN_PROCESSES='²' is not allowed; use a whole number ≥ 1 "
                                            r"\(default 1\)"):
        runs.train_processes()


@pytest.mark.parametrize("variable, value, allowed", [
    ("DLGN_NUMERICS", "bogus", "use one of pinned, native (default pinned)"),
    ("DLGN_NUM_THREADS", "²", "use a whole number ≥ 1 (default 1)")])
def test_a_bad_variable_read_on_import_is_one_line_on_the_command_line(tmp_path, variable, value, allowed):
    done = _python(["-m", "dlgn_lib.runs", "export", str(tmp_path / "b.tar.gz")], env={variable: value})
    assert done.returncode == 1
    assert _one_line(done.stderr) == f"python -m dlgn_lib.runs: error: {variable}={value!r} is not allowed; {allowed}\n"
    assert list(tmp_path.iterdir()) == []


# --- N14 and the slides' packages: the class walk refuses before any step ------------------------------

def test_the_class_walk_refuses_a_workdir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "FILE").write_text("x")
    assert classwalk.main(["--workdir", str(tmp_path / "FILE")]) == 1
    err = _one_line(capsys.readouterr().err, "python -m dlgn_lib.record.classwalk")
    assert f"{tmp_path / 'FILE'} is a file, not a folder" in err
    assert (tmp_path / "FILE").read_text() == "x"


def test_the_class_walk_refuses_a_missing_slides_package_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(classwalk.shutil, "which", lambda name: None)
    with pytest.raises(files.Refusal, match=r"the slides \(step 3\) need .*reveal\.js-4\.0\.2\.tgz and npm is not "
                                            r"installed to fetch reveal\.js@4\.0\.2"):
        classwalk.walk(["01"], tmp_path / "walk", say=lambda line: pytest.fail(f"a step ran: {line}"))
    assert list((tmp_path / "walk").iterdir()) == []


# --- tamper evidence: the checksum published beside the bundle ----------------------------------------

def test_a_forged_bundle_with_its_inner_checksum_recomputed_is_refused_by_the_published_sha256(one_entry, tmp_path,
                                                                                               capsys):
    file = tmp_path / "course.tar.gz"
    bundle.export(file)
    published = (tmp_path / "course.tar.gz.sha256").read_text()
    assert published == f"{hashlib.sha256(file.read_bytes()).hexdigest()}  course.tar.gz\n"
    digest = published.split()[0]
    # forge the history (a better accuracy), then recompute run.pt's checksum in its manifest
    members = _members(file)
    key = next(name.split("/")[0] for name in members if name.endswith("run.pt"))
    payload = torch.load(io.BytesIO(members[f"{key}/run.pt"]), weights_only=True)
    payload["history"] = {k: [1.0 for _ in v] if isinstance(v, list) else v for k, v in payload["history"].items()}
    forged = io.BytesIO()
    torch.save(payload, forged)
    manifest = json.loads(members[f"{key}/manifest.json"])
    manifest["sha256"] = hashlib.sha256(forged.getvalue()).hexdigest()
    members[f"{key}/run.pt"], members[f"{key}/manifest.json"] = forged.getvalue(), json.dumps(manifest).encode()
    _write_tar(file, members)
    # the checksums inside the bundle cannot tell: without the published one it imports
    alone = tmp_path / "alone" / "course.tar.gz"
    alone.parent.mkdir()
    alone.write_bytes(file.read_bytes())
    assert len(bundle.import_bundle(alone, tmp_path / "fooled").imported) == 1
    # the SHA-256 published beside it, or given with --sha256, can
    into = tmp_path / "class"
    for args in (["import", str(file), "--into", str(into)],
                 ["import", str(alone), "--into", str(into), "--sha256", digest.upper()]):
        assert bundle.main(args) == 1
        err = _one_line(capsys.readouterr().err)
        assert f"not {digest} as " in err and "altered or damaged since it was published" in err
        assert not into.exists()
    assert bundle.main(["import", str(alone), "--into", str(into), "--sha256", "abc"]) == 1
    assert "--sha256: 'abc' is not a SHA-256 (64 hexadecimal digits)" in capsys.readouterr().err


# --- item 4: a killed training process loses only its own group ---------------------------------------

KILLER = """
import os, signal
from dlgn_lib import runs

def train_or_die(configs, *args):
    if configs[0].model.kind == "relu":   # this group's process dies as a killed one does
        os.kill(os.getpid(), signal.SIGKILL)
    return runs._train_in_child(configs, *args)
"""

SIDE_BY_SIDE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import dlgn_lib
from dlgn_lib import config as C, runs
import killer
base = C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=64, n_val=64, n_test=64),
                   C.ModelSpec.make("dlgn", (4, 4)), epochs=300, n_snapshots=3)
relu, sf = C.ModelSpec.make("relu", (4, 4)), C.ModelSpec.make("dlgn_sf", (4, 4))
configs = ([base.replace(seed=s) for s in (0, 1)] + [base.replace(model=relu, seed=s) for s in (0, 1)]
           + [base.replace(model=sf, epochs=5)])
here, train_group = [], runs.train_group   # groups trained in this process
runs.train_group = lambda group, **kw: here.append(group[0].model.kind) or train_group(group, **kw)
runs._train_in_child = killer.train_or_die
got = runs.get_or_train_many(configs, processes=2)
print(json.dumps({"here": here, "runs": len(got), "saved": all(runs.entry_dir(c).exists() for c in configs)}))
"""


def test_a_killed_training_process_loses_only_its_own_group_and_is_named(tmp_path):
    (tmp_path / "killer.py").write_text(KILLER)
    done = _python(["-c", SIDE_BY_SIDE, str(tmp_path)], env={"DLGN_RUNS_DIR": str(tmp_path / "runs")}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    # the DLGN group (beside the killed one) and the DLGN-SF group (after it) are kept from their processes
    assert result == {"here": ["relu"], "runs": 5, "saved": True}, done.stderr
    failed = [line for line in done.stderr.splitlines() if "failed" in line]
    assert failed == ["training relu on circle (widths 4-4, seeds 0, 1) in a separate process failed (its process "
                      "was killed or crashed); training it here"], done.stderr
    assert done.stdout.startswith("5 runs: 0 loaded from the cache, 5 trained in")
