"""Seeds trained together (``batched.train_seeds``) equal seeds trained one by one (reconstruction §6).

Tolerances. In float32 the batched matrix products sum in another order than the single ones, so
each step differs by a few units of float32 rounding (~1e-7 relative); over the short runs here
that stays below ~1e-6 on weights and losses of order 1. We ask rtol 1e-4 / atol 1e-5: two
orders of magnitude of headroom, yet far below what a wrong gradient, a shared optimiser state or a
wrong minibatch would produce (those change weights by ~lr = 1e-2 per step). The same comparison
in float64 must hold to 1e-10, which shows the float32 gap is rounding and nothing else.
"""

import pytest
import torch

from dlgn_lib import batched, runs, train
from dlgn_lib import config as C
from tests.run_compare import assert_runs_close, assert_states_close, float64_copy

SEEDS = (0, 1, 2)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("DLGN_QUIET", "1")
    return tmp_path / "runs"


def config(kind="dlgn", batch_size=None, seed=0, **changes):
    data = C.DataSpec.make("circle", target="steps", n_train=64, n_val=48, n_test=80)
    options = {"gate_bias": True} if kind.startswith("dlgn") else {}
    cfg = C.RunConfig(data, C.ModelSpec.make(kind, (6, 5), **options), epochs=12, n_snapshots=5,
                      batch_size=batch_size, seed=seed)
    return cfg.replace(**changes)


@pytest.mark.parametrize("batch_size", [None, 16], ids=["full_batch", "minibatch"])
@pytest.mark.parametrize("kind", ["dlgn", "dlgn_frozen", "relu"])
def test_each_seed_equals_its_one_by_one_run(kind, batch_size):
    configs = [config(kind, batch_size, seed=s) for s in SEEDS]
    together = batched.train_seeds(configs, progress=False)
    for cfg, multi in zip(configs, together):
        assert multi.meta["seeds_together"] == len(SEEDS) and multi.meta["engine"] == "vmap"
        assert_runs_close(train.train(cfg, progress=False), multi, rtol=1e-4, atol=1e-5)
    # Seeds really differ (no seed got another's init or batches).
    assert together[0].history["train_loss"] != together[1].history["train_loss"]
    if kind == "dlgn_frozen":
        for run in together:
            first, last = run.snapshots[0], run.snapshots[run.epochs[-1]]
            assert all(torch.equal(first[k], last[k]) for k in first if k.startswith("gating"))


@pytest.mark.parametrize("kind, batch_size", [("dlgn", None), ("dlgn_frozen", 16)])
def test_per_seed_evaluation_path_matches_too(kind, batch_size, monkeypatch):
    # Large evaluations loop over the seeds' own models (aliasing the stacked weights) instead of
    # one vmapped forward; force that path on this small problem.
    monkeypatch.setattr(batched, "EVAL_CACHE_BYTES", 0)
    configs = [config(kind, batch_size, seed=s) for s in SEEDS]
    for cfg, multi in zip(configs, batched.train_seeds(configs, progress=False)):
        assert_runs_close(train.train(cfg, progress=False), multi, rtol=1e-4, atol=1e-5)


def test_sgd_with_momentum_and_weight_decay_matches_per_seed():
    configs = [config("dlgn", 16, seed=s, optimizer="sgd", lr=0.05, weight_decay=1e-2) for s in SEEDS[:2]]
    for cfg, multi in zip(configs, batched.train_seeds(configs, progress=False)):
        assert_runs_close(train.train(cfg, progress=False), multi, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch_size", [None, 16], ids=["full_batch", "minibatch"])
def test_float64_runs_agree_to_rounding(batch_size):
    configs = [config("dlgn", batch_size, seed=s, weight_decay=1e-3) for s in SEEDS[:2]]
    ds = float64_copy(train.load_dataset(configs[0].data))
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        together = batched.train_seeds(configs, progress=False, dataset=ds)
        singles = [train.train(cfg, progress=False, dataset=ds) for cfg in configs]
    finally:
        torch.set_default_dtype(default)
    for single, multi in zip(singles, together):
        assert multi.snapshots[0]["head.weight"].dtype == torch.float64
        assert_runs_close(single, multi, rtol=1e-10, atol=1e-10)


def test_configs_must_differ_in_seed_only():
    with pytest.raises(ValueError, match="except for its seed"):
        batched.train_seeds([config(seed=0), config(seed=1, lr=0.5)])
    with pytest.raises(ValueError, match="distinct"):
        batched.train_seeds([config(seed=0), config(seed=0)])
    with pytest.raises(ValueError, match="at least one"):
        batched.train_seeds([])


def test_get_or_train_many_batches_missing_seeds_and_saves_one_entry_each(monkeypatch, capsys):
    seeds = [config(seed=s) for s in range(4)]
    other = config("relu")
    runs.get_or_train(seeds[1])
    runs.get_or_train(seeds[3])
    (runs.entry_dir(seeds[1]) / "run.pt").write_bytes(b"truncated")   # seed 1: corrupt entry
    capsys.readouterr()

    calls = []

    group_trainer = runs.train_group

    def recording(configs, **kwargs):
        calls.append([(c.model.kind, c.seed) for c in configs])
        return group_trainer(configs, **kwargs)
    monkeypatch.setattr(runs, "train_group", recording)
    wanted = [seeds[2], other, seeds[0], seeds[1], seeds[3], seeds[2]]
    got = runs.get_or_train_many(wanted, detail=True)
    out, err = capsys.readouterr()

    # The three missing seeds, once, together; then the other config alone.
    assert calls == [[("dlgn", 2), ("dlgn", 0), ("dlgn", 1)], [("relu", 0)]]
    assert "corrupt" in err and runs.entry_dir(seeds[1]).name in err
    assert out.count("loaded run") == 1 and f"loaded run {seeds[3].label()}" in out
    assert out.splitlines()[-1].startswith("5 runs: 1 loaded from the cache, 4 trained in ")
    for cfg in (seeds[0], seeds[1], seeds[2], other):
        assert f"training {cfg.label()}" in out and f"trained {cfg.label()}" in out
    assert [r.config for r in got] == wanted and got[0] is got[-1]
    assert [got[i].meta["seeds_together"] for i in range(5)] == [3, 1, 3, 3, 1]
    for run in got:
        stored = runs.load(run.config)                # a valid entry per seed, equal to what was returned
        assert stored.history == run.history and stored.meta == run.meta
        assert_states_close(run.best_state, stored.best_state, rtol=0, atol=0)
        for epoch in run.epochs:
            assert_states_close(run.snapshots[epoch], stored.snapshots[epoch], rtol=0, atol=0)
        # Saved states are compact: a seed's entry does not carry the other seeds' weights.
        assert all(t.untyped_storage().nbytes() == t.numel() * t.element_size()
                   for t in stored.snapshots[0].values())

    def no_training(*args, **kwargs):
        raise AssertionError("trained although every entry exists")
    monkeypatch.setattr(runs, "train_group", no_training)
    again = runs.get_or_train_many(wanted, detail=True)
    assert capsys.readouterr().out.count("loaded run") == 5
    quiet = runs.get_or_train_many(wanted)   # by default: one summary line for the whole group
    assert capsys.readouterr().out == "5 runs: 5 loaded from the cache, 0 trained\n"
    assert [r.history for r in quiet] == [r.history for r in got]
    assert [r.history for r in again] == [r.history for r in got]
