"""Comparison helpers shared by the tests of the training engines (imported, not collected)."""
import types

import torch

from dlgn_lib import train


def assert_states_close(a, b, rtol, atol):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        torch.testing.assert_close(b[k], a[k], rtol=rtol, atol=atol, msg=k)


def assert_runs_close(single, multi, rtol, atol):
    """``multi`` (from ``train_seeds``) equals ``single`` (from ``train.train``) within tolerance."""
    assert multi.config == single.config
    assert multi.history.keys() == single.history.keys()
    assert multi.history["epoch"] == single.history["epoch"]
    for key, values in single.history.items():
        assert all(type(v) is float for v in multi.history[key]), key
        torch.testing.assert_close(torch.tensor(multi.history[key], dtype=torch.float64),
                                   torch.tensor(values, dtype=torch.float64), rtol=rtol, atol=atol, msg=key,
                                   equal_nan=True)
    assert multi.epochs == single.epochs
    for epoch in single.epochs:
        assert_states_close(single.snapshots[epoch], multi.snapshots[epoch], rtol, atol)
    assert_states_close(single.best_state, multi.best_state, rtol, atol)
    assert set(multi.meta) == set(single.meta)
    for key in ("best_epoch", "device", "data_source", "task", "metric", "n_params", "n_trainable",
                "versions"):
        assert multi.meta[key] == single.meta[key], key


def float64_copy(ds):
    """The dataset's splits in float64 (``data.Dataset`` itself holds float32 only)."""
    fields = {f"{a}_{s}": getattr(ds, f"{a}_{s}").double() for a in "xy" for s in train.SPLITS}
    return types.SimpleNamespace(**fields, task=ds.task, source=ds.source, in_dim=ds.in_dim,
                                 out_dim=ds.out_dim)
