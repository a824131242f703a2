"""Hard- against soft-gate fits (reconstruction §2.1), with the hard output from the path sum."""
import numpy as np
import pytest
import torch

from dlgn_lib import fidelity, models, paths


def r2(pred, y):
    pred, y = np.asarray(pred, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return 1.0 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()


def test_small_beta_hard_gates_compute_another_function():
    torch.manual_seed(0)
    model = models.DLGN(2, (8, 8), beta=0.5, gate_bias=True).double()
    x = torch.randn(400, 2, dtype=torch.float64)
    y = model(x, hard=False)[:, 0].detach()          # the soft net fits its own output exactly
    result = fidelity.check(model, x, y, "regression")
    hard = paths.path_sum(model, x, hard=True)[:, 0]  # second method: the hard net as a path sum
    assert result.soft == pytest.approx(1.0)
    assert result.hard == pytest.approx(r2(hard, y.numpy()), rel=1e-9)
    assert result.hard < 0.9 and not result.agrees
    assert "DISAGREE" in result.describe()


def test_large_beta_hard_and_soft_agree_on_a_classification():
    torch.manual_seed(1)
    model = models.DLGN(2, (6, 6), beta=200.0).double()
    x = torch.randn(500, 2, dtype=torch.float64)
    y = torch.sign(model(x, hard=False)[:, 0]).detach()
    result = fidelity.check(model, x, y, "binary")
    want = float(((paths.path_sum(model, x, hard=True)[:, 0] >= 0) == (y > 0)).double().mean())
    assert result.soft == 1.0 and result.hard == pytest.approx(want)
    assert result.agrees == (abs(result.hard - 1.0) <= fidelity.MAX_ACCURACY_GAP)


def test_relu_and_dln_compute_the_same_function_either_way():
    x = torch.randn(50, 3, dtype=torch.float64)
    for model in (models.ReLUNet(3, (4,)).double(), models.DeepLinearNet(3, (4,)).double()):
        y = torch.randn(50, dtype=torch.float64)
        result = fidelity.check(model, x, y, "regression")
        assert result.soft == result.hard and result.agrees


@pytest.mark.parametrize("task,soft,hard,agrees", [
    ("regression", 0.95, 0.86, True), ("regression", 0.95, 0.85, False), ("regression", -0.2, -0.2, True),
    ("binary", 0.90, 0.891, True), ("binary", 0.90, 0.88, False)])
def test_agreement_rule_by_hand(task, soft, hard, agrees):
    assert fidelity.Fidelity(task, soft, hard).agrees is agrees


def test_check_run_reads_the_last_snapshot_on_the_test_split():
    from dlgn_lib import config, runs
    spec = config.DataSpec.make("circle", target="steps", n_train=32, n_val=8, n_test=16)
    run = runs.train_group([config.RunConfig(spec, config.ModelSpec.make("dlgn", (4, 4)), epochs=5, n_snapshots=2)])[0]
    dataset = run.dataset()
    assert fidelity.check_run(run) == fidelity.check(run.model_at(run.epochs[-1]), dataset.x_test, dataset.y_test, "binary")


def test_check_run_in_float64_measures_the_double_model():
    from dlgn_lib import config, runs
    spec = config.DataSpec.make("circle", target="steps", n_train=32, n_val=8, n_test=16)
    run = runs.train_group([config.RunConfig(spec, config.ModelSpec.make("dlgn", (4, 4)), epochs=5, n_snapshots=2)])[0]
    dataset = run.dataset()
    want = fidelity.check(run.model_at(run.epochs[-1]).double(), dataset.x_test, dataset.y_test, "binary")
    assert fidelity.check_run(run, float64=True) == want
