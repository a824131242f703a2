"""What the run-cache tests share: a private cache folder for every test, and a small config that
trains in a moment."""
import pytest

from dlgn_lib import config as C


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("DLGN_QUIET", "1")
    return tmp_path / "runs"


def small_config(seed=0, epochs=5):
    return C.RunConfig(C.DataSpec.make("circle", target="steps", n_train=32, n_val=32, n_test=32),
                       C.ModelSpec.make("dlgn", (3, 3)), epochs=epochs, n_snapshots=3, seed=seed)
