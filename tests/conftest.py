"""Library tests measure throw-away runs: they keep no tables in the analysis cache of the user's
run cache (dlgn_lib.runs.cached_table; tests/test_analysis_cache.py turns it on in a folder of its own)."""
import os

os.environ.setdefault("DLGN_ANALYSIS_CACHE", "off")


# --- the test groups mirror the library's layers (tests/test_layers.py) ----------------------------
# Each test file is marked by the highest layer among the dlgn_lib modules it imports: `science`,
# `presentation` or `record`; a file that reads the committed notebooks and is not a record-tool
# test is `notebooks`. `make test-fast` runs science and presentation.
import ast  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402

GROUPS = ("science", "presentation", "record", "notebooks")


@lru_cache(maxsize=None)
def group_of(path: str) -> str:
    from tests.test_layers import LAYERS
    text = Path(path).read_text()
    used = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dlgn_lib":
            used |= {a.name for a in node.names} if node.module == "dlgn_lib" else {node.module.split(".")[1]}
        elif isinstance(node, ast.Import):
            used |= {a.name.split(".")[1] for a in node.names if a.name.startswith("dlgn_lib.")}
    layer = max((LAYERS[m] for m in used if m in LAYERS), default=0)
    if layer < 2 and "notebooks" in text and ("nbformat" in text or ".ipynb" in text):
        return "notebooks"
    return GROUPS[layer]


def pytest_configure(config):
    for name in GROUPS:
        config.addinivalue_line("markers", f"{name}: a test of the {name} group (tests/conftest.py, by its imports)")


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        path = str(item.path)
        if Path(path).name.startswith("test_") and Path(path).parent.name == "tests":
            item.add_marker(getattr(pytest.mark, group_of(path)))


# --- a folder on a full disk (tests of the record never damaged, README "Reliability") -------------
import contextlib  # noqa: E402
import errno  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def full_folder(tmp_path, monkeypatch):
    """A folder where writing fails with ENOSPC: a real 64 kB tmpfs filled up where mounting is
    allowed, else a folder whose writes fail at fsync as they do on a full disk. Files put there
    before filling it (``full_folder.fill()`` fills it) stay readable."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                             capture_output=True).returncode == 0

    class Full(type(folder)):
        pass

    def fill():
        if mounted:
            with open(folder / ".filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
                for _ in range(100):
                    fh.write(b"\0" * 4096)
        else:
            import dlgn_lib.files as files

            def no_space(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            monkeypatch.setattr(files.os, "fsync", no_space)

    handle = Full(folder)
    handle.fill = fill
    handle.mounted = mounted
    yield handle
    if mounted:
        import gc
        gc.collect()
        subprocess.run(["umount", "-l", str(folder)], check=False)
