"""Conv runs through the training engine, on CIFAR-shaped synthetic tensors (no CIFAR offline)."""
import numpy as np
import pytest
import torch

from dlgn_lib import config as C
from dlgn_lib import data, train


@pytest.fixture(scope="module")
def synthetic_cifar():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(60, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=60)
    test_images = rng.integers(0, 256, size=(20, 32, 32, 3), dtype=np.uint8)
    test_labels = rng.integers(0, 10, size=20)
    return data.cifar_dataset_from_arrays(images, labels, test_images, test_labels, n_val=20)


@pytest.mark.parametrize("kind", ["conv_relu", "conv_dlgn", "conv_dlgn_frozen"])
def test_conv_run_trains_on_cifar_shaped_tensors(kind, synthetic_cifar):
    cfg = C.RunConfig(C.DataSpec.make("cifar10"), C.ModelSpec.make(kind, (4, 4, 4, 4, 4)), epochs=2,
                      batch_size=16, n_snapshots=3)
    run = train.train(cfg, dataset=synthetic_cifar, progress=False)
    assert run.epochs == [0, 1, 2]
    assert all(np.isfinite(v) for v in run.history["train_loss"])
    first, last = run.snapshots[0], run.snapshots[2]
    gating = [k for k in first if k.startswith("gating")]
    if kind == "conv_dlgn_frozen":
        assert gating and all(torch.equal(first[k], last[k]) for k in gating)
    changed = [k for k in first if not torch.equal(first[k], last[k])]
    assert changed
    if kind == "conv_dlgn":
        assert any(k.startswith("gating") for k in changed)


def test_chunked_evaluation_equals_one_pass(monkeypatch, synthetic_cifar):
    cfg = C.RunConfig(C.DataSpec.make("cifar10"), C.ModelSpec.make("conv_dlgn", (4, 4)), epochs=1)
    model = train.make_model(cfg, synthetic_cifar).double()
    splits = {s: (getattr(synthetic_cifar, f"x_{s}").double(), getattr(synthetic_cifar, f"y_{s}"))
              for s in train.SPLITS}
    whole = train.evaluation_row(model, splits, "multiclass")
    monkeypatch.setattr(train, "EVAL_CHUNK", 7)
    assert torch.allclose(train.evaluation_row(model, splits, "multiclass"), whole, atol=1e-12)


def test_conv_rows_of_the_benchmark_table_through_the_run_cache(monkeypatch, tmp_path, synthetic_cifar):
    """Notebook 09's CIFAR path: conv configs over seeds and learning rates, trained through the cache
    (seeds batched), the learning rate chosen on validation, then the table: checked against the
    runs' own numbers."""
    from dlgn_lib import runs as R
    from dlgn_lib import tables
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setitem(data._LOADERS, "cifar10", lambda **params: synthetic_cifar)
    configs = [C.RunConfig(C.DataSpec.make("cifar10", n_train=40), C.ModelSpec.make(kind, (4,) * 5), epochs=2,
                           batch_size=20, lr=lr, seed=seed, n_snapshots=2)
               for kind in ("conv_dlgn", "conv_relu") for lr in (1e-3, 3e-2) for seed in (0, 1)]
    runs = R.get_or_train_many(configs, progress=False, verbose=False)
    assert [r.config for r in runs] == configs
    again = R.get_or_train_many(configs, progress=False, verbose=False)   # now from the cache
    assert [r.meta["test_metric_at_best"] for r in again] == [r.meta["test_metric_at_best"] for r in runs]
    selected, chosen = tables.select_on_validation(runs, "model")
    assert set(chosen) == {"conv DLGN", "conv ReLU"}
    table = tables.accuracy_table(selected, lambda r: "CIFAR-10 (conv)", "kind")
    for kind in ("conv_dlgn", "conv_relu"):
        mine = [r for r in selected if r.config.model.kind == kind]
        assert len(mine) == 2 and len({r.config.lr for r in mine}) == 1
        values = [r.meta["test_metric_at_best"] for r in mine]
        assert tables.cell(table, "CIFAR-10 (conv)", kind) == pytest.approx(np.mean(values), rel=1e-12)
        assert all(0.0 <= v <= 1.0 for v in values)
