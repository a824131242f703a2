"""The analysis cache (dlgn_lib.runs.cached_table): a served table is the computed one, bit for bit, and only
for the same code, runs, parameters and numeric code path."""
import functools
import json
import os

import numpy as np
import pandas as pd
import pytest
import torch

from dlgn_lib import circle, config, runs as runs_module
from dlgn_lib.studies import circle as circle_study


@pytest.fixture(autouse=True)
def own_runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("DLGN_ANALYSIS_CACHE", raising=False)


@pytest.fixture(scope="module")
def runs():
    from dlgn_lib import runs as runs_module
    spec = config.DataSpec.make("circle", target="steps", n_train=32, n_val=8, n_test=16,
                                discontinuities=[0.5, 2.0, 4.0, 5.5])
    configs = [config.RunConfig(spec, config.ModelSpec.make("dlgn", (4, 4)), epochs=4, n_snapshots=3, seed=s)
               for s in (1, 2)]
    return {("steps", "dlgn", c.seed): run for c, run in zip(configs, runs_module.train_group(configs))}


def mixed_table():
    first = pd.DataFrame([{"name": "a", "n": 1, "x": -0.0, "flag": True, "note": None, "tiny": 5e-324}])
    second = pd.DataFrame([{"name": "b", "n": 2, "x": np.nan, "flag": False, "note": None, "tiny": -np.inf}])
    return pd.concat([first, second], ignore_index=True)


def bits_equal(a, b):
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for column in a.columns:
        if a[column].dtype.kind in "fib":
            assert a[column].to_numpy().tobytes() == b[column].to_numpy().tobytes(), column


def test_stored_form_reads_back_bit_for_bit():
    table = mixed_table()
    back = runs_module.decode_table(json.loads(json.dumps(runs_module.encode_table(table))))
    bits_equal(back, table)
    assert str(back["x"].to_numpy()[0]) == "-0.0"


@pytest.mark.parametrize("table", [
    pd.DataFrame({"x": np.array([1.0, 2.0], dtype=np.float32)}),          # float32 would come back float64
    pd.DataFrame({"x": [1.0, 2.0]}, index=[3, 4]),                         # not 0 .. n-1
    pd.DataFrame({"x": [np.array([1.0]), np.array([2.0])]}),               # arrays in cells
])
def test_a_table_that_would_not_read_back_exactly_is_never_stored(table):
    calls = []

    def compute():
        calls.append(1)
        return table
    for _ in range(2):
        assert runs_module.cached_table("t", {}, [], compute) is table
    assert len(calls) == 2 and not list(runs_module.analysis_folder().glob("*.json"))


def test_served_once_computed_and_again_for_other_params_runs_or_code_path(runs, monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return mixed_table()
    first = runs_module.cached_table("t", {"n": 1}, runs.values(), compute)
    served = runs_module.cached_table("t", {"n": 1}, runs.values(), compute)
    assert len(calls) == 1
    bits_equal(served, first)
    runs_module.cached_table("t", {"n": 2}, runs.values(), compute)                     # another parameter
    runs_module.cached_table("u", {"n": 1}, runs.values(), compute)                     # another computation
    runs_module.cached_table("t", {"n": 1}, list(runs.values())[:1], compute)           # other runs
    assert len(calls) == 4
    monkeypatch.setenv("MKL_CBWR", "AVX2")                                 # another code path
    runs_module.cached_table("t", {"n": 1}, runs.values(), compute)
    assert len(calls) == 5
    monkeypatch.setenv("DLGN_ANALYSIS_CACHE", "off")
    runs_module.cached_table("t", {"n": 1}, runs.values(), compute)
    assert len(calls) == 6
    monkeypatch.setenv("DLGN_ANALYSIS_CACHE", "no")
    with pytest.raises(ValueError, match="DLGN_ANALYSIS_CACHE='no'"):
        runs_module.cached_table("t", {"n": 1}, runs.values(), compute)


def test_a_run_with_other_weights_is_another_run(runs):
    import copy
    run = next(iter(runs.values()))
    other = copy.deepcopy(run)
    del other._analysis_hash
    epoch = other.epochs[-1]
    name = next(iter(other.snapshots[epoch]))
    other.snapshots[epoch][name] = other.snapshots[epoch][name].clone()
    other.snapshots[epoch][name].view(-1)[0] += 1e-7
    assert runs_module.run_hash(other) != runs_module.run_hash(run)
    assert runs_module.analysis_key("t", {}, [other]) != runs_module.analysis_key("t", {}, [run])


def test_an_altered_or_unreadable_entry_is_recomputed(runs):
    calls = []

    def compute():
        calls.append(1)
        return mixed_table()
    runs_module.cached_table("t", {}, runs.values(), compute)
    (path,) = runs_module.analysis_folder().glob("*.json")
    entry = json.loads(path.read_text())
    entry["table"]["columns"][1]["values"][0] = 7           # a changed number fails the checksum
    path.write_text(json.dumps(entry))
    bits_equal(runs_module.cached_table("t", {}, runs.values(), compute), mixed_table())
    path.write_text("{not json")
    bits_equal(runs_module.cached_table("t", {}, runs.values(), compute), mixed_table())
    assert len(calls) == 3
    bits_equal(runs_module.cached_table("t", {}, runs.values(), compute), mixed_table())   # rewritten, served again
    assert len(calls) == 3


def test_entries_of_another_library_version_are_removed_when_one_is_written(runs):
    runs_module.analysis_folder().mkdir(parents=True)
    stale = runs_module.analysis_folder() / "0000000000000000-old.json"
    stale.write_text("{}")
    runs_module.cached_table("t", {}, runs.values(), mixed_table)
    assert not stale.exists() and len(list(runs_module.analysis_folder().glob("*.json"))) == 1


def test_a_runs_folder_that_refuses_writes_computes_without_error(runs, monkeypatch):
    """A read-only (or full) runs folder: the write fails, nothing is kept, nothing is raised (a
    refused write stands in for a read-only folder, which root could write into)."""
    def refuse(*args, **kwargs):
        raise PermissionError("read-only")
    monkeypatch.setattr(runs_module.tempfile, "NamedTemporaryFile", refuse)
    bits_equal(runs_module.cached_table("t", {}, runs.values(), mixed_table), mixed_table())
    assert not runs_module.analysis_folder().exists() or not list(runs_module.analysis_folder().glob("*"))


def test_snapshot_tables_served_equal_the_ones_measured_without_the_cache(runs, monkeypatch):
    measure = functools.partial(circle.region_metrics, baselines=False)
    columns = ["target", "model", "seed"]
    computed = circle_study.snapshot_tables(runs, measure, columns)
    stored = list(runs_module.analysis_folder().glob("*.json"))
    assert len(stored) == 1
    served = circle_study.snapshot_tables(runs, measure, columns)
    monkeypatch.setenv("DLGN_ANALYSIS_CACHE", "off")
    fresh = circle_study.snapshot_tables(runs, measure, columns)
    bits_equal(served, fresh)
    bits_equal(computed, fresh)
    # another measure or other epochs is another table
    circle_study.snapshot_tables(runs, circle.overlap_metrics, columns)
    monkeypatch.setenv("DLGN_ANALYSIS_CACHE", "on")
    circle_study.snapshot_tables(runs, circle.overlap_metrics, columns)
    circle_study.snapshot_tables(runs, measure, columns, epochs=circle_study.ends_of)
    assert len(list(runs_module.analysis_folder().glob("*.json"))) == 3


def test_a_measure_without_a_stable_name_is_measured_every_time(runs):
    calls = []

    def measure(model, dataset):
        calls.append(1)
        return {"n": float(len(dataset.x_train))}
    circle_study.snapshot_tables(runs, measure, ["target", "model", "seed"])
    circle_study.snapshot_tables(runs, measure, ["target", "model", "seed"])
    assert len(calls) == 2 * sum(len(r.epochs) for r in runs.values())
    assert runs_module.function_name(measure) is None
    assert runs_module.function_name(lambda m, d: 0) is None
    assert runs_module.function_name(circle.overlap_metrics) == "dlgn_lib.circle.overlap_metrics"
    assert runs_module.function_name(functools.partial(circle.region_metrics, baselines=False)) == \
        'partial(dlgn_lib.circle.region_metrics, [[], {"baselines": false}])'
    assert runs_module.function_name(np.mean) is None                       # outside the library: no code hash covers it


def test_tensor_hash_sees_dtype_shape_and_values():
    x = torch.arange(6, dtype=torch.float64)
    assert runs_module.tensor_hash(x) == runs_module.tensor_hash(x.clone())
    assert len({runs_module.tensor_hash(x), runs_module.tensor_hash(x.float()), runs_module.tensor_hash(x.view(2, 3)),
                runs_module.tensor_hash(x + 1e-12)}) == 4


def test_entries_take_the_umask_permissions_like_run_entries():
    runs_module.cached_table("t", {}, [], mixed_table)
    [entry] = runs_module.analysis_folder().glob("*.json")
    umask = os.umask(0)
    os.umask(umask)
    assert entry.stat().st_mode & 0o777 == 0o666 & ~umask, "an analysis is readable by whom run entries are"
