"""Training engine and run cache (reconstruction §7): determinism, snapshots, atomicity, corruption, races."""
import concurrent.futures
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from dlgn_lib import config as C
from dlgn_lib import files, runs, train


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("DLGN_QUIET", "1")
    return tmp_path / "runs"


def small_config(**changes):
    cfg = C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=64, n_val=64, n_test=64),
                      C.ModelSpec.make("dlgn", (4, 4), gate_bias=True), epochs=20, n_snapshots=6)
    return cfg.replace(**changes)


def states_equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_is_deterministic_and_records_history_and_snapshots():
    cfg = small_config()
    a, b = train.train(cfg), train.train(cfg)
    assert a.history == b.history
    assert a.epochs == C.snapshot_epochs(cfg.epochs, cfg.n_snapshots)
    assert all(states_equal(a.snapshots[e], b.snapshots[e]) for e in a.epochs)
    n = len(a.history["epoch"])
    assert n == cfg.epochs + 1 and all(len(v) == n for v in a.history.values())
    assert all(type(v) is float for values in a.history.values() for v in values)
    # Epoch 0 is the untrained model of the same seed.
    init = train.make_model(cfg, a.dataset())
    assert states_equal(a.snapshots[0], init.state_dict())
    assert a.history["train_loss"][-1] < a.history["train_loss"][0]


def test_best_epoch_is_chosen_on_validation_only():
    run = train.train(small_config(epochs=30))
    val = run.history["val_metric"]
    best = max(range(len(val)), key=lambda i: (val[i], -i))
    assert run.meta["best_epoch"] == run.history["epoch"][best]
    assert run.meta["test_metric_at_best"] == run.history["test_metric"][best]
    model = run.model_at("best")
    ds = run.dataset()
    with torch.no_grad():
        acc = train.task_metric(model(ds.x_test), ds.y_test, ds.task).item()
    assert acc == pytest.approx(run.meta["test_metric_at_best"], abs=1e-6)


def test_minibatch_training_differs_from_full_batch_and_is_seeded():
    full = train.train(small_config())
    mini = train.train(small_config(batch_size=16))
    assert mini.history != full.history
    assert mini.history == train.train(small_config(batch_size=16)).history


def test_frozen_gates_stay_fixed_through_training():
    run = train.train(small_config(model=C.ModelSpec.make("dlgn_frozen", (4, 4), gate_bias=True)))
    first, last = run.snapshots[0], run.snapshots[run.epochs[-1]]
    gating = [k for k in first if k.startswith("gating")]
    assert gating and all(torch.equal(first[k], last[k]) for k in gating)
    assert any(not torch.equal(first[k], last[k]) for k in first if not k.startswith("gating"))


def test_second_get_or_train_loads_identical_run_without_training(monkeypatch, capsys):
    cfg = small_config()
    first = runs.get_or_train(cfg)
    assert "training" in capsys.readouterr().out

    def no_training(*a, **k):
        raise AssertionError("trained although a cache entry exists")
    monkeypatch.setattr(runs, "train", no_training)
    second = runs.get_or_train(cfg)
    assert "loaded run" in capsys.readouterr().out
    assert second.history == first.history and second.meta == first.meta
    assert all(states_equal(first.snapshots[e], second.snapshots[e]) for e in first.epochs)
    assert states_equal(first.best_state, second.best_state)


def test_changed_config_trains_anew(capsys):
    runs.get_or_train(small_config())
    capsys.readouterr()
    runs.get_or_train(small_config(seed=1))
    assert "training" in capsys.readouterr().out
    assert runs.entry_dir(small_config()) != runs.entry_dir(small_config(seed=1))


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "drop_manifest", "manifest_garbage"])
def test_damaged_entry_is_reported_and_retrained(damage, capsys):
    cfg = small_config()
    original = runs.get_or_train(cfg)
    folder = runs.entry_dir(cfg)
    blob = (folder / "run.pt").read_bytes()
    if damage == "truncate":
        (folder / "run.pt").write_bytes(blob[: len(blob) // 2])
    elif damage == "flip_byte":
        i = len(blob) // 3
        (folder / "run.pt").write_bytes(blob[:i] + bytes([blob[i] ^ 0xFF]) + blob[i + 1:])
    elif damage == "drop_manifest":
        (folder / "manifest.json").unlink()
    else:
        (folder / "manifest.json").write_text("{not json")
    with pytest.raises(runs.CorruptEntry):
        runs.load(cfg)
    capsys.readouterr()
    again = runs.get_or_train(cfg)
    captured = capsys.readouterr()
    assert "corrupt" in captured.err and "training" in captured.out
    assert again.history == original.history
    runs.load(cfg)  # the new entry verifies


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_entry_with_pickled_code_is_refused_even_with_a_matching_checksum():
    cfg = small_config()
    runs.get_or_train(cfg)
    folder = runs.entry_dir(cfg)
    with open(folder / "run.pt", "wb") as fh:
        pickle.dump({"config": cfg.to_json(), "x": Boom()}, fh)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = runs._sha256(folder / "run.pt")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(runs.CorruptEntry, match="never unpickles"):
        runs.load(cfg)


SCRIPT = textwrap.dedent("""
    import sys
    from dlgn_lib import config as C, runs
    cfg = C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=512, n_val=64, n_test=64),
                      C.ModelSpec.make("dlgn", (32, 32)), epochs=int(sys.argv[1]), n_snapshots=6)
    run = runs.get_or_train(cfg)
    print("RESULT", run.history["train_loss"][-1], flush=True)
""")


def _spawn(cache_dir, epochs):
    env = {**os.environ, "DLGN_RUNS_DIR": str(cache_dir), "DLGN_QUIET": "1"}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(epochs)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_run_killed_mid_training_leaves_no_entry_and_next_run_completes(cache_dir):
    proc = _spawn(cache_dir, 100_000)
    line = proc.stdout.readline()
    assert line.startswith("training"), line + proc.stderr.read()
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    assert entries == []
    done = _spawn(cache_dir, 3)
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0 and "RESULT" in out, err


def test_two_processes_on_one_config_train_once_and_agree(cache_dir):
    procs = [_spawn(cache_dir, 400) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    texts = [o[0] for o in outs]
    assert sum(t.count("training") for t in texts) == 1
    assert sum(t.count("loaded run") for t in texts) == 1
    results = {t.split("RESULT")[1].strip() for t in texts}
    assert len(results) == 1
    entries = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and sorted(f.name for f in entries[0].iterdir()) == ["manifest.json", "run.pt"]



SIDE_BY_SIDE = """
import json, os, sys
import dlgn_lib
import torch
from dlgn_lib import config as C, runs
root = sys.argv[1]
relu, sf = C.ModelSpec.make("relu", (4, 4)), C.ModelSpec.make("dlgn_sf", (4, 4))
base = C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=64, n_val=64, n_test=64),
                   C.ModelSpec.make("dlgn", (4, 4), gate_bias=True), epochs=20, n_snapshots=6)
configs = ([base.replace(seed=s) for s in (0, 1)] + [base.replace(model=relu, seed=s) for s in (0, 1)]
           + [base.replace(model=sf, seed=3)])
C._MADE_BY = {"notebook": "07", "profile": "full"}
calls, train_group = [], runs.train_group   # groups trained in this process (not in spawned ones)
runs.train_group = lambda group, **kw: calls.append(len(group)) or train_group(group, **kw)
os.environ["DLGN_RUNS_DIR"] = os.path.join(root, "side")
side = runs.get_or_train_many(configs, processes=2)
side_calls, calls[:] = list(calls), []
made_by = [json.load(open(runs.entry_dir(c) / "manifest.json"))["made_by"] for c in configs]
os.environ["DLGN_RUNS_DIR"] = os.path.join(root, "here")
runs.concurrent.futures.ProcessPoolExecutor = None   # processes=1 must start none
here = runs.get_or_train_many(configs, processes=1)
def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
print(json.dumps({"made_by": made_by, "calls": [side_calls, calls], "equal": [
    a.history == b.history and same(a.best_state, b.best_state) and a.snapshots.keys() == b.snapshots.keys()
    and all(same(a.snapshots[e], b.snapshots[e]) for e in a.snapshots) for a, b in zip(side, here)]}))
"""


def test_groups_trained_side_by_side_in_processes_equal_the_runs_trained_here(tmp_path):
    # In a fresh process (dlgn_lib imported first, as a notebook does): three groups missing from
    # the cache (DLGN 2 seeds, ReLU 2 seeds, DLGN-SF 1 seed) trained by 2 spawned processes and
    # loaded back equal, bit for bit, the runs trained one group after another in the process
    # itself; the summary counts them as trained, and the entries say what made them.
    env = {**os.environ, "DLGN_QUIET": "1"}
    env.pop("DLGN_RUNS_DIR", None)
    out = subprocess.run([sys.executable, "-c", SIDE_BY_SIDE, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("5 runs: 0 loaded from the cache, 5 trained in"), out.stdout
    assert "not trained side by side" not in out.stderr and "failed" not in out.stderr, out.stderr
    result = json.loads(lines[-1])
    assert result["made_by"] == [{"notebook": "07", "profile": "full"}] * 5
    assert result["calls"] == [[], [2, 2, 1]]   # side by side: nothing trained in the process itself
    assert result["equal"] == [True] * 5


def test_a_side_by_side_process_on_another_code_path_trains_nothing(cache_dir):
    config = small_config()
    with pytest.raises(runs.OtherCodePath, match="another than this one's"):
        runs._train_in_child([config], 1, None, ["0" * 64])
    assert not runs.entry_dir(config).exists()


def test_side_by_side_processes_are_checked_and_a_failed_process_leaves_its_group_here(monkeypatch, capsys):
    monkeypatch.setenv("DLGN_TRAIN_PROCESSES", "zero")
    with pytest.raises(files.Refusal, match="DLGN_TRAIN_PROCESSES='zero'"):
        runs.train_processes()
    with pytest.raises(ValueError, match="processes=0"):
        runs.get_or_train_many([small_config()], processes=0)
    monkeypatch.delenv("DLGN_TRAIN_PROCESSES")
    failures = iter([RuntimeError("killed"), runs.OtherCodePath("a new process runs the numeric code path X")])

    def fail(*args):
        raise next(failures)

    class Pool:   # runs the submitted function here, so that the failures above are what it returns
        def __init__(self, **kw): pass
        def __enter__(self): return self
        def __exit__(self, *a): return False
        def submit(self, fn, *args):
            future = concurrent.futures.Future()
            try:
                future.set_result(fn(*args))
            except Exception as exc:
                future.set_exception(exc)
            return future
    monkeypatch.setattr(runs, "_train_in_child", fail)
    monkeypatch.setattr(runs.concurrent.futures, "ProcessPoolExecutor", Pool)
    configs = [small_config(seed=0), small_config(model=C.ModelSpec.make("relu", (4, 4)), seed=0)]
    got = runs.get_or_train_many(configs, processes=2)
    captured = capsys.readouterr()
    assert "in a separate process failed (RuntimeError: killed); training it here" in captured.err
    assert "1 group(s) of seeds not trained side by side: a new process runs the numeric code path X" in captured.err
    assert "2 runs: 0 loaded from the cache, 2 trained in" in captured.out
    assert [r.config for r in got] == configs and all(runs.entry_dir(c).exists() for c in configs)
