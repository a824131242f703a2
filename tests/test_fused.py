"""The fused trainer (``fused.train_seeds``) equals the plain autograd trainer (``train.train``).

``train.train`` is the reference: one ``nn.Module``, autograd and ``torch.optim`` on each seed. The
fused trainer shares nothing with it on the way from weights to updates: it stacks the seeds,
computes every layer as a batched product, writes the backward pass out by hand and updates all
seeds with one optimiser step. Agreement of whole runs (histories, best epochs, snapshots and
best states of every seed) is therefore a test of the forward pass, the hand-written gradients,
the per-seed optimiser state and the minibatch order at once.

Tolerances as in ``tests/test_batched.py``: float32 runs agree to rtol 1e-4 / atol 1e-5 (products
summed in another order differ by ~1e-7 per step; a wrong gradient or batch moves weights by
~lr = 1e-2); float64 runs agree to 1e-10, which shows the float32 gap is rounding alone.
"""
import math

import pytest
import torch

from dlgn_lib import data, fused, losses, models, train
from dlgn_lib import config as C
from tests.run_compare import assert_runs_close, float64_copy

SEEDS = (0, 1, 2)
KINDS = ["dlgn", "dlgn_sf", "dlgn_frozen", "dln", "relu"]
BATCHING = {"full_batch": dict(batch_size=None), "shuffled": dict(batch_size=16),
            "fixed_order": dict(batch_size=16, shuffle=False)}


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("DLGN_QUIET", "1")


def config(kind="dlgn", seed=0, target="steps", convention="he", options=None, **changes):
    data_spec = C.DataSpec.make("circle", target=target, n_train=64, n_val=48, n_test=80)
    options = dict(options or {}, convention=convention)
    if kind.startswith("dlgn"):
        options.setdefault("gate_bias", True)
    cfg = C.RunConfig(data_spec, C.ModelSpec.make(kind, (6, 5), **options), epochs=12, n_snapshots=5, seed=seed)
    return cfg.replace(**changes)


def check_against_single_runs(configs, dataset=None, rtol=1e-4, atol=1e-5):
    together = fused.train_seeds(configs, progress=False, dataset=dataset)
    for cfg, multi in zip(configs, together):
        single = train.train(cfg, progress=False, dataset=dataset)
        assert multi.meta["engine"] == "fused" and multi.meta["seeds_together"] == len(configs)
        assert single.meta["engine"] == "autograd" and single.meta["seeds_together"] == 1
        multi.meta.update(engine="autograd", seeds_together=1, compiled=False)   # the rest must match
        assert_runs_close(single, multi, rtol=rtol, atol=atol)
    return together


@pytest.mark.parametrize("convention", models.CONVENTIONS)
@pytest.mark.parametrize("batching", BATCHING)
@pytest.mark.parametrize("kind", KINDS)
def test_each_seed_equals_its_autograd_run(kind, batching, convention):
    configs = [config(kind, s, convention=convention, **BATCHING[batching]) for s in SEEDS]
    together = check_against_single_runs(configs)
    # Seeds really differ (no seed got another's init or batches) and training moved the weights.
    assert together[0].history["train_loss"] != together[1].history["train_loss"]
    first, last = together[0].snapshots[0], together[0].snapshots[together[0].epochs[-1]]
    assert not torch.equal(first["head.weight"], last["head.weight"])
    if kind == "dlgn_frozen":
        for run in together:
            start, end = run.snapshots[0], run.snapshots[run.epochs[-1]]
            assert all(torch.equal(start[k], end[k]) for k in start if k.startswith("gating"))


@pytest.mark.parametrize("options", [{"value_input": "x"}, {"gate_bias": False}, {"beta": 10.0}],
                         ids=["value_x", "no_gate_bias", "beta10"])
@pytest.mark.parametrize("kind", ["dlgn", "dlgn_sf"])
def test_dlgn_options(kind, options):
    check_against_single_runs([config(kind, s, options=options, batch_size=16) for s in SEEDS[:2]])


def test_regression_and_one_seed():
    check_against_single_runs([config("dlgn", 5, target="mixture", batch_size=20)])
    check_against_single_runs([config("relu", s, target="mixture") for s in SEEDS])


def three_classes(n=120, d=5, seed=0):
    """A small multiclass set: the class is the largest of three fixed projections."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3 * n, d, generator=g)
    y = (x @ torch.randn(d, 3, generator=g)).argmax(dim=1)
    parts = {}
    for i, s in enumerate(("train", "val", "test")):
        parts[f"x_{s}"], parts[f"y_{s}"] = x[i * n:(i + 1) * n], y[i * n:(i + 1) * n]
    return data.Dataset(name="three", task="multiclass", n_classes=3, source="generated", **parts)


@pytest.mark.parametrize("kind", ["dlgn", "dlgn_sf", "relu"])
def test_multiclass(kind):
    ds = three_classes()
    configs = [config(kind, s, batch_size=32, shuffle=(kind != "relu")) for s in SEEDS]
    check_against_single_runs(configs, dataset=ds)


def test_many_chunks_per_batch_give_the_same_runs(monkeypatch):
    # Each minibatch is split into chunks of 64 rows whose gradients are summed.
    monkeypatch.setattr(fused, "TRAIN_CHUNK_BYTES", 1)
    monkeypatch.setattr(fused, "EVAL_CHUNK_BYTES", 1)
    data_spec = C.DataSpec.make("circle", target="steps", n_train=300, n_val=200, n_test=150)
    for kind in ("dlgn", "relu"):
        base = C.RunConfig(data_spec, C.ModelSpec.make(kind, (6, 5)), epochs=6, n_snapshots=3, batch_size=150)
        check_against_single_runs([base.replace(seed=s) for s in SEEDS[:2]])


@pytest.mark.parametrize("kind", ["dlgn", "relu"])
def test_float64_runs_agree_to_rounding(kind):
    configs = [config(kind, s, batch_size=16, weight_decay=1e-3) for s in SEEDS[:2]]
    ds = float64_copy(train.load_dataset(configs[0].data))
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        together = check_against_single_runs(configs, dataset=ds, rtol=1e-10, atol=1e-10)
    finally:
        torch.set_default_dtype(default)
    assert together[0].best_state["head.weight"].dtype == torch.float64


def test_sgd_with_momentum_and_weight_decay():
    check_against_single_runs([config("dlgn", s, batch_size=16, optimizer="sgd", lr=0.05, weight_decay=1e-2)
                               for s in SEEDS[:2]])


def test_lean_epochs_evaluate_validation_only_and_report_test_at_best():
    configs = [config("dlgn", s, batch_size=16, curves=False, epochs=20) for s in SEEDS]
    runs = check_against_single_runs(configs)
    for run in runs:
        snaps = set(run.epochs)
        for i, epoch in enumerate(run.history["epoch"]):
            full = int(epoch) in snaps
            assert not math.isnan(run.history["val_metric"][i])
            assert math.isnan(run.history["test_metric"][i]) != full
            assert math.isnan(run.history["train_loss"][i]) != full
        # The reported test metric is the best state's, computed here independently.
        ds = run.dataset()
        model = run.model_at("best")
        with torch.no_grad():
            expected = losses.task_metric(model(ds.x_test), ds.y_test, ds.task).item()
        assert run.meta["test_metric_at_best"] == pytest.approx(expected, abs=1e-6)
    assert any(int(run.meta["best_epoch"]) not in set(run.epochs) for run in runs)   # a lean best epoch


@pytest.mark.parametrize("task", losses.TASKS)
@pytest.mark.parametrize("margin", [1.0, 2.0])
def test_loss_gradient_equals_autograd(task, margin):
    g = torch.Generator().manual_seed(1)
    k = 4 if task == "multiclass" else 1
    out = torch.randn(3, 50, k, generator=g, dtype=torch.float64, requires_grad=True)
    if task == "multiclass":
        y = torch.randint(k, (50,), generator=g)
    elif task == "binary":
        y = torch.randint(2, (50,), generator=g).double() * 2 - 1
    else:
        y = torch.randn(50, generator=g, dtype=torch.float64)
    per_model = losses.task_loss(out, y, task, margin)
    for s in range(3):   # the seed axis gives each model its own loss
        torch.testing.assert_close(per_model[s], losses.task_loss(out[s].detach(), y, task, margin))
    per_model.sum().backward()
    torch.testing.assert_close(losses.loss_gradient(out.detach(), y, task, margin), out.grad,
                               rtol=1e-12, atol=1e-14)


def test_group_binary_loss_is_cross_entropy_on_minus_f_and_f():
    f = torch.randn(40, 1, dtype=torch.float64)
    y = torch.randint(2, (40,)).double() * 2 - 1
    logits = torch.cat([-f, f], dim=1)
    expected = torch.nn.functional.cross_entropy(logits, (y > 0).long())
    got = losses.task_loss(f, y, "binary", models.binary_margin("group"))
    torch.testing.assert_close(got, expected)


def test_stacked_parameters_round_trip():
    configs = [config("dlgn_frozen", s) for s in SEEDS]
    ds = train.load_dataset(configs[0].data)
    seed_models = [train.make_model(c, ds) for c in configs]
    params = fused.StackedParameters(seed_models)
    assert params.frozen.numel() > 0 and not any(params.trainable[n] for n in params.names if "gating" in n)
    for model, state in zip(seed_models, params.state_dicts()):
        assert state.keys() == model.state_dict().keys()
        for k, v in model.state_dict().items():
            assert torch.equal(state[k], v) and state[k].untyped_storage().nbytes() == v.numel() * v.element_size()


def test_flush_denormal_is_restored():
    tiny = torch.tensor([1e-40])
    fused.train_seeds([config("dlgn")], progress=False)
    assert (tiny * 1.0).item() != 0.0   # denormals are kept again (PyTorch's default)


def test_rejects_mixed_configs_and_conv_kinds():
    with pytest.raises(ValueError, match="except for its seed"):
        fused.train_seeds([config(seed=0), config(seed=1, lr=0.5)])
    with pytest.raises(ValueError, match="distinct"):
        fused.train_seeds([config(seed=0), config(seed=0)])
    with pytest.raises(ValueError, match="at least one"):
        fused.train_seeds([])
    conv = C.RunConfig(C.DataSpec.make("circle"), C.ModelSpec.make("conv_dlgn", (4,)))
    with pytest.raises(ValueError, match="not fully connected"):
        fused.train_seeds([conv])


def test_compiled_step_gives_the_same_runs(monkeypatch):
    # Long runs compile their step with torch.compile; DLGN_COMPILE=1 forces it on a short one.
    monkeypatch.setenv("DLGN_COMPILE", "1")
    configs = [config("dlgn", s, batch_size=32, shuffle=False) for s in SEEDS[:2]]
    for cfg, run in zip(configs, fused.train_seeds(configs, progress=False)):
        assert run.meta["compiled"] is True
        run.meta.update(engine="autograd", seeds_together=1, compiled=False)
        assert_runs_close(train.train(cfg, progress=False), run, rtol=1e-4, atol=1e-5)


def test_a_compiled_run_does_not_depend_on_the_runs_before_it(monkeypatch):
    # A process compiles the step once per shape; past torch._dynamo's recompile limit a new shape
    # would run uncompiled, whose last bits differ, so a run would depend on what its process (a
    # notebook's kernel) trained before it. Here the limit is 1, as if the process had used it up:
    # a run of a second shape after a run of the first must equal, bit for bit, the same run in a
    # fresh process (simulated by resetting dynamo).
    import torch._dynamo
    monkeypatch.setenv("DLGN_COMPILE", "1")
    first = [config("dlgn", s, batch_size=32, shuffle=False) for s in SEEDS[:2]]
    second = [config("dlgn", s, batch_size=24, shuffle=False) for s in SEEDS[:2]]
    try:
        torch._dynamo.reset()
        fresh = fused.train_seeds(second, progress=False)
        torch._dynamo.reset()
        with torch._dynamo.config.patch(recompile_limit=1):
            fused.train_seeds(first, progress=False)
            after = fused.train_seeds(second, progress=False)
    finally:
        torch._dynamo.reset()
    for a, b in zip(fresh, after):
        assert a.meta["compiled"] and b.meta["compiled"]
        assert a.history == b.history
        assert all(torch.equal(a.best_state[k], b.best_state[k]) for k in a.best_state)
        assert all(torch.equal(a.snapshots[e][k], b.snapshots[e][k]) for e in a.snapshots for k in a.snapshots[e])


def test_a_failing_compiler_falls_back_to_the_eager_step(monkeypatch):
    def broken(fn, **kwargs):
        def fail(*args):
            raise RuntimeError("no C compiler")
        return fail
    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setenv("DLGN_COMPILE", "1")
    cfg = config("relu", 3, batch_size=16)
    with pytest.warns(RuntimeWarning, match="no C compiler"):
        run, = fused.train_seeds([cfg], progress=False)
    assert run.meta["compiled"] is False
    run.meta.update(engine="autograd")
    assert_runs_close(train.train(cfg, progress=False), run, rtol=1e-4, atol=1e-5)


def test_compile_setting_is_checked(monkeypatch):
    monkeypatch.setenv("DLGN_COMPILE", "yes")
    with pytest.raises(ValueError, match="DLGN_COMPILE='yes'"):
        fused.use_compile(10)
    monkeypatch.setenv("DLGN_COMPILE", "auto")
    assert not fused.use_compile(fused.COMPILE_MIN_STEPS - 1) and fused.use_compile(fused.COMPILE_MIN_STEPS)


def test_compiling_for_the_cpu_silences_only_the_cuda_runtime_notice(caplog):
    import logging
    logger = logging.getLogger("torch.utils.cpp_extension")
    before = logger.level
    with caplog.at_level(logging.WARNING):
        with fused._quiet_cpu_compile():
            logger.warning("No CUDA runtime is found")
            logging.getLogger("dlgn_lib").warning("other loggers still speak")
        logger.warning("and this one again afterwards")
    assert "No CUDA runtime" not in caplog.text
    assert "other loggers still speak" in caplog.text and "afterwards" in caplog.text
    assert logger.level == before


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_a_seed_gives_the_same_run_alone_or_in_any_group(task):
    # The run cache trains only the seeds it lacks, together: a seed's run must not depend on
    # which other seeds were missing. Alone, in a group of two and in a group of five: bit for bit.
    ds = three_classes() if task == "multiclass" else None
    for kind, batching in (("dlgn", "full_batch"), ("relu", "shuffled"), ("dlgn_sf", "fixed_order")):
        seeds = [config(kind, s, **BATCHING[batching]) for s in range(5)]
        five = fused.train_seeds(seeds, progress=False, dataset=ds)
        groups = (fused.train_seeds(seeds[:2], progress=False, dataset=ds)
                  + fused.train_seeds(seeds[2:3], progress=False, dataset=ds)
                  + fused.train_seeds(seeds[3:], progress=False, dataset=ds))
        assert groups[2].meta["seeds_together"] == 1
        for a, b in zip(five, groups):
            assert a.history == b.history, (kind, a.config.seed)
            assert all(torch.equal(a.best_state[k], b.best_state[k]) for k in a.best_state)
            assert all(torch.equal(a.snapshots[e][k], b.snapshots[e][k]) for e in a.snapshots for k in a.snapshots[e])
