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
