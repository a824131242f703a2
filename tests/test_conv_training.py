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
