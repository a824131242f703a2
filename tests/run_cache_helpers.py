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


def bundle_members(file) -> dict:
    """A bundle's files by member name."""
    import tarfile
    with tarfile.open(file) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def write_tar(file, members: dict) -> None:
    """A gzipped tar of ``members`` (name -> bytes), as a crafted bundle."""
    import io
    import tarfile
    with tarfile.open(file, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
