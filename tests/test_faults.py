"""Faults built for real (a file where a folder belongs, a real tmpfs, SIGKILL, Ctrl-C, a sparse
tar): each ends in one message that names the problem, a non-zero exit status, and nothing
half-written (reconstruction §7)."""
from __future__ import annotations

import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from dlgn_lib import locations, runs  # noqa: E402

from dlgn_lib.record import bundle
from dlgn_lib import config as C  # noqa: E402
from dlgn_lib.plots import FigureWriteError, save_figure  # noqa: E402
from fingerprint import tree  # noqa: E402

REPO = locations.REPO_ROOT


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("DLGN_QUIET", "1")
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))


def small_config(seed=0, epochs=5):
    return C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=32, n_val=32, n_test=32),
                       C.ModelSpec.make("dlgn", (3, 3)), epochs=epochs, n_snapshots=3, seed=seed)


TRAIN_ONE = ("import dlgn_lib as dl\nfrom dlgn_lib import config as C\n"
             "cfg = C.RunConfig(C.DataSpec.make('circle', target='steps', n_train=32, n_val=32, n_test=32),"
             " C.ModelSpec.make('dlgn', (3, 3)), epochs=5, n_snapshots=3)\n"
             "dl.runs.get_or_train(cfg, verbose=False)\n")


def _python(code_or_args, env=None, timeout=300):
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def tmpfs(tmp_path):
    """A real 256 kB filesystem (skipped where this machine does not allow mounting)."""
    path = tmp_path / "small"
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not allowed here")
    yield path
    gc.collect()
    subprocess.run(["umount", "-l", str(path)], check=True)


def _fill(folder: Path, leave: int = 0) -> None:
    """Fill a filesystem up to ``leave`` bytes free."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize > leave + 4096:
                fh.write(b"\0" * 4096)
        except OSError:
            pass


# --- case 2: DLGN_RUNS_DIR names a file -----------------------------------------------------------

def test_a_runs_dir_that_is_a_file_is_named_and_left_alone(tmp_path):
    cache = tmp_path / "runs"
    cache.write_text("not a folder\n")
    done = _python(TRAIN_ONE, {"DLGN_RUNS_DIR": str(cache)})
    assert done.returncode != 0
    assert f"DLGN_RUNS_DIR {cache} cannot be used: {cache} is a file, not a folder" in done.stderr
    assert "NotADirectoryError" not in done.stderr.splitlines()[-1]
    assert cache.read_text() == "not a folder\n"


# --- case 3: import --into a file ------------------------------------------------------------------

def test_import_into_a_file_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    runs.get_or_train(small_config(), verbose=False)
    file = tmp_path / "b.tar.gz"
    bundle.export(file)
    target = tmp_path / "a-file"
    target.write_text("x")
    done = _python(["-m", "dlgn_lib.runs", "import", str(file), "--into", str(target)])
    assert done.returncode == 1
    assert f"{target} is a file, not a folder; name a folder with --into" in done.stderr
    assert "Traceback" not in done.stderr and target.read_text() == "x"


# --- case 4: the cache folder replaced by a file while a run trains ------------------------------------

def test_a_cache_replaced_by_a_file_during_training_keeps_the_trained_run(tmp_path, monkeypatch):
    cache = tmp_path / "runs"
    monkeypatch.setenv("DLGN_RUNS_DIR", str(cache))
    cfg = small_config(epochs=8)
    real_train_group = runs.train_group

    def train_then_break_the_cache(configs, **kwargs):
        trained = real_train_group(configs, **kwargs)
        import shutil
        shutil.rmtree(cache)
        cache.write_text("replaced while training\n")   # a real file in place of the folder
        return trained

    monkeypatch.setattr(runs, "train_group", train_then_break_the_cache)
    with pytest.raises(runs.CacheWriteError) as info:
        runs.get_or_train(cfg, verbose=False)
    message = str(info.value)
    assert "is a file, not a folder" in message and "The trained run is kept in" in message
    rescued_root = tmp_path / "build" / "rescued-runs"
    assert runs.load(cfg, rescued_root).history, "the trained run loads from where the message says"
    assert str(runs.entry_dir(cfg, rescued_root).relative_to(tmp_path)) in message.replace(str(tmp_path) + "/", "")
    assert cache.read_text() == "replaced while training\n"


# --- case 5: an import killed by SIGKILL --------------------------------------------------------------

def test_every_temporary_folder_has_one_naming_scheme_that_the_next_writer_cleans(tmp_path, monkeypatch):
    """A real import process killed with SIGKILL while its staging folder exists: the next writer
    removes the staging folder (and plain trash files) whatever wrote them."""
    cache = tmp_path / "runs"
    monkeypatch.setenv("DLGN_RUNS_DIR", str(cache))
    runs.get_or_train(small_config(), verbose=False)
    file = tmp_path / "b.tar.gz"
    bundle.export(file)
    into = tmp_path / "class"
    into.mkdir()
    # the child stages the bundle, then stops before it moves anything into place; it is killed there
    code = ("import os, sys, time\nfrom dlgn_lib import runs\nfrom dlgn_lib.record import bundle\n"
            "real = runs.verify_entry\n"
            "def stall(folder, key=None):\n"
            "    print('staged', flush=True); time.sleep(60)\n"
            "runs.verify_entry = stall\n"
            f"bundle.import_bundle({str(file)!r}, {str(into)!r})\n")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "staged"
    staging = [p for p in into.iterdir() if p.name.startswith(".tmp-import-")]
    assert len(staging) == 1 and f"{child.pid}@{socket.gethostname()}-" in staging[0].name
    child.send_signal(signal.SIGKILL)
    child.wait()
    trash_file = into / f".trash-{child.pid}@{socket.gethostname()}-0123456789abcdef0123"
    trash_file.write_bytes(b"x")
    report = bundle.import_bundle(file, into)          # the next writer
    assert len(report.imported) == 1
    assert not [p for p in into.iterdir() if p.name.startswith((".tmp", ".trash"))]


# --- case 1: bounded bundle imports -------------------------------------------------------------------

def test_a_sparse_member_claiming_gigabytes_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    run = runs.get_or_train(small_config(), verbose=False)
    key = runs.entry_dir(run.config).name
    src = tmp_path / "src" / key
    src.mkdir(parents=True)
    (src / "manifest.json").write_bytes((runs.entry_dir(run.config) / "manifest.json").read_bytes())
    with open(src / "run.pt", "wb") as fh:
        fh.truncate(2 << 30)                              # 2 GB of holes
    file = tmp_path / "sparse.tar.gz"
    subprocess.run(["tar", "--sparse", "-czf", str(file), "-C", str(tmp_path / "src"), key], check=True)
    assert file.stat().st_size < 100_000
    into = tmp_path / "class"
    into.mkdir()
    before = tree(into)
    with pytest.raises(bundle.BundleError, match="sparse file"):
        bundle.import_bundle(file, into)
    assert tree(into) == before and not list(into.iterdir())


def test_a_bundle_larger_than_the_free_space_names_the_disk_and_the_size(tmp_path, monkeypatch, tmpfs):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    for seed in range(3):
        runs.get_or_train(small_config(seed, epochs=60), verbose=False)
    file = tmp_path / "b.tar.gz"
    bundle.export(file)
    with tarfile.open(file) as tar:
        needed = sum(m.size for m in tar.getmembers() if m.isfile())
    _fill(tmpfs, leave=needed // 2)
    before = tree(tmpfs)
    done = _python(["-m", "dlgn_lib.runs", "import", str(file), "--into", str(tmpfs)])
    assert done.returncode == 1
    assert f"needs {needed / 2**20:,.1f} MB and the disk of {tmpfs} has" in done.stderr
    assert "Nothing was written" in done.stderr and "truncated" not in done.stderr
    assert tree(tmpfs) == before


def test_a_forged_checksum_fails_while_streaming(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    run = runs.get_or_train(small_config(), verbose=False)
    folder = runs.entry_dir(run.config)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    file = tmp_path / "forged.tar.gz"
    with tarfile.open(file, "w:gz") as tar:
        for name in ("manifest.json", "run.pt"):
            tar.add(folder / name, arcname=f"{folder.name}/{name}")
    into = tmp_path / "class"
    with pytest.raises(bundle.BundleError, match="does not match the checksum in its manifest"):
        bundle.import_bundle(file, into)
    assert not [p for p in into.iterdir()]


# --- case 6: Ctrl-C during a series run --------------------------------------------------------------

def test_ctrl_c_during_a_series_run_prints_what_finished_and_exits_130(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name, code in (("01_fast.ipynb", "print('fast')"), ("02_slow.ipynb", "import time\ntime.sleep(120)")):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("PROFILE = 'quick'", metadata={"tags": ["parameters"]}),
                    nbformat.v4.new_code_cell(code)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / name)
    child = subprocess.Popen([sys.executable, "-m", "dlgn_lib.record.series", "run", "--notebooks", str(folder),
                              "--workers", "2", "--output", str(tmp_path / "out")], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "DLGN_BUILD_DIR": str(tmp_path / "build"), "DLGN_HEARTBEAT_S": "1"})
    deadline = time.time() + 120
    seen = ""
    while "running: 02_slow.ipynb" not in seen.split("01_fast.ipynb: ok")[-1] and time.time() < deadline:
        seen += child.stdout.readline()
    assert "01_fast.ipynb: ok" in seen
    # progress you can see: what runs, for how long, how many are done
    assert re.search(r"\.\.\. 1 of 2 done after \d+ s; running: 02_slow\.ipynb \d+ s", seen), seen
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130
    assert "01_fast.ipynb" in out and "interrupted: 1 notebooks finished, not finished: 02_slow.ipynb" in err
    assert "--only 02" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["export", "import"])
def test_ctrl_c_during_runs_export_or_import_says_what_is_left_and_exits_130(tmp_path, command):
    """A real SIGINT while the bundle is half written (export) or staged (import): exit 130, one
    line saying what is complete and what to rerun, no traceback, no temporary left anywhere."""
    cache = tmp_path / "runs"
    env = {"DLGN_RUNS_DIR": str(cache)}
    assert _python(TRAIN_ONE, env=env).returncode == 0
    file, into = tmp_path / "out" / "b.tar.gz", tmp_path / "class"
    if command == "import":
        assert _python(["-m", "dlgn_lib.runs", "export", str(file)], env=env).returncode == 0
        into.mkdir()
    before = {"cache": tree(cache), "out": tree(file.parent), "into": tree(into) if into.exists() else None}
    # stall the writer where its temporaries exist: in the middle of the tar (export), or on the
    # verification of the staged entry (import)
    stall = ("import tarfile\nreal = tarfile.TarFile.add\n"
             "def add(self, *a, **k):\n    print('writing', flush=True); time.sleep(60)\n"
             "tarfile.TarFile.add = add\n") if command == "export" else (
             "def verify(folder, key=None):\n    print('writing', flush=True); time.sleep(60)\n"
             "runs.verify_entry = verify\n")
    args = [str(file)] if command == "export" else [str(file), "--into", str(into)]
    code = (f"import sys, time\nfrom dlgn_lib import runs\nfrom dlgn_lib.record import bundle\n{stall}"
            f"sys.exit(bundle.main({[command, *args]!r}))\n")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
    assert child.stdout.readline().strip() == "writing"
    temporaries = [p.name for folder in (file.parent, into) if folder.exists() for p in folder.iterdir()
                   if p.name.startswith(".tmp-")]
    assert len(temporaries) == 1 and f"{child.pid}@{socket.gethostname()}-" in temporaries[0]
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130
    assert err.startswith("python -m dlgn_lib.runs: interrupted: ") and "run the same command again" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert tree(cache) == before["cache"] and tree(file.parent) == before["out"]
    if command == "import":
        assert tree(into) == before["into"]


def test_an_export_killed_mid_write_leaves_a_temporary_the_next_export_removes(tmp_path):
    env = {"DLGN_RUNS_DIR": str(tmp_path / "runs")}
    assert _python(TRAIN_ONE, env=env).returncode == 0
    out = tmp_path / "out"
    code = ("import tarfile, time\nfrom dlgn_lib.record import bundle\n"
            "def add(self, *a, **k):\n    print('writing', flush=True); time.sleep(60)\n"
            f"tarfile.TarFile.add = add\nbundle.export({str(out / 'b.tar.gz')!r})\n")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **env})
    assert child.stdout.readline().strip() == "writing"
    child.send_signal(signal.SIGKILL)
    child.wait()
    left = [p.name for p in out.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".tmp-export-{child.pid}@{socket.gethostname()}-")
    (out / "notes.txt").write_text("a user's file beside the bundle\n")
    (out / ".tmp-other-1@elsewhere-x").write_text("not ours to remove\n")
    assert _python(["-m", "dlgn_lib.runs", "export", str(out / "b.tar.gz")], env=env).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [".tmp-other-1@elsewhere-x", "b.tar.gz", "b.tar.gz.sha256",
                                                     "notes.txt"]


# --- case 7: save_figure into a full disk --------------------------------------------------------------

def test_save_figure_into_a_full_disk_says_so_and_leaves_nothing(monkeypatch, tmpfs):
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmpfs))
    _fill(tmpfs, leave=8_000)
    before = tree(tmpfs)
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.imshow([[i * j % 7 for i in range(300)] for j in range(300)])
    with pytest.raises(FigureWriteError, match=r"cannot write .*98_full\.(png|pdf) .*bytes free on that disk"):
        save_figure(fig, "98_full")
    plt.close(fig)
    assert tree(tmpfs) == before, "no temporary file and no partial figure left"


# --- case 8: a prepared file replaced by a folder ----------------------------------------------------

def test_a_folder_in_place_of_source_json_is_named_by_loading_and_by_prepare(tmp_path):
    data = tmp_path / "data"
    prepared = data / "fashion_mnist"
    prepared.mkdir(parents=True)
    for name in ("train.npz", "test.npz"):
        (prepared / name).write_bytes((locations.data_dir() / "fashion_mnist" / name).read_bytes())
    (prepared / "source.json").mkdir()
    before = tree(data)
    for code in ("from dlgn_lib.data import images; images.fashion_mnist(n_per_class_train=10)",
                 "from dlgn_lib.data import prepare; prepare.main(['prepare'])"):
        done = _python(code, {"DLGN_DATA_DIR": str(data)})
        assert done.returncode != 0
        assert "a folder stands where a file belongs" in done.stderr and "rm -r" in done.stderr
        assert "IsADirectoryError" not in done.stderr
        assert tree(data) == before, "nothing rewritten"


# --- the fragile cases ----------------------------------------------------------------------------------

def test_a_refused_pickle_says_the_entry_is_retrained_and_gives_no_unsafe_advice(tmp_path, monkeypatch, capsys):
    import torch
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    cfg = small_config()
    runs.get_or_train(cfg, verbose=False)
    folder = runs.entry_dir(cfg)
    torch.save({"x": Path("/")}, folder / "run.pt")   # an object torch's safe loader refuses
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = runs._sha256(folder / "run.pt")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(runs.CorruptEntry) as info:
        runs.load(cfg)
    assert "never unpickles" in str(info.value) and "weights_only=False" not in str(info.value)
    runs.get_or_train(cfg, verbose=False)   # the cache says what it does with the entry (an import says otherwise)
    assert "never unpickles (no code in it was run); retraining" in capsys.readouterr().err


def test_dask_scratch_space_is_under_the_build_folder(tmp_path):
    from dlgn_lib.record import dask_cluster as cluster
    assert cluster.local_cluster_options(1)["local_directory"] == str(tmp_path / "build" / "dask-scratch")


def test_a_seed_in_other_digits_is_refused_by_type():
    ns = {"PROFILE": "quick", "SEED": "\u0661", "TARGET_SEED": 100, "EPOCHS": None, "SEEDS": None}  # ARABIC-INDIC ONE
    with pytest.raises(C.ParameterError, match=r"SEED='\u0661' has type str; it must be an integer >= 0"):
        C.setup("05", ns, show=False)


def test_derived_seeds_stay_32_bit():
    n = C.NOTEBOOK_SIZES["05"]["quick"]["n_seeds"]   # 05 quick: 10 seeds (rule v4)
    ns = {"PROFILE": "quick", "SEED": 2**32 - 1, "TARGET_SEED": 100, "EPOCHS": None, "SEEDS": None}
    with pytest.raises(C.ParameterError, match=rf"SEED=4294967295 is not allowed here: .* SEED \+ {n - 1}, .* "
                                               rf"use SEED <= {2**32 - n}"):
        C.setup("05", ns, show=False)
    ns.update(SEED=2**32 - n, TARGET_SEED=2**32 - 2)
    with pytest.raises(C.ParameterError, match=r"TARGET_SEED=4294967294 is not allowed"):
        C.setup("05", ns, show=False)
    ns.update(TARGET_SEED=2**32 - 3)
    assert max(C.setup("05", ns, show=False).seeds) == 2**32 - 1
