"""The library's layers, one way (README "Where things live"): the science at the bottom, the
presentation on it, the record tools on top. A module imports only from its own layer or below,
and no imports go round in a cycle. The graph is read from the code (every import statement,
also those inside functions), not from what happens to be imported at run time."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dlgn_lib"

#: Each module's layer, by its name under dlgn_lib (a subpackage's modules share its layer).
SCIENCE = {"batched", "circle", "clusters", "compare", "config", "costs", "data", "fidelity", "fused", "intervals", "kernels",
           "files", "locations", "losses", "models", "nodes", "numerics", "parts", "paths", "protocol", "runs",
           "saliency", "sensitivity", "tables", "text", "train", "verdict"}
PRESENTATION = {"plots", "studies", "widgets"}
RECORD = {"record"}   # dlgn_lib/record/: every record tool
LAYERS = {**{m: 0 for m in SCIENCE}, **{m: 1 for m in PRESENTATION}, **{m: 2 for m in RECORD}}
NAMES = ("science", "presentation", "record tools")


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_main_guard(node) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__")


def imports(module: str, path: Path, known) -> set[str]:
    """The dlgn_lib modules ``module`` imports anywhere in its code, but under ``if __name__ ==
    "__main__":`` (a command's entry point, not part of what importing the module loads)."""
    tree = ast.parse(path.read_text())
    guarded = {id(n) for g in ast.walk(tree) if _is_main_guard(g) for n in ast.walk(g)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "dlgn_lib"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "dlgn_lib":
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {m for m in found if m in known and m != module}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def layer_of(module: str) -> int | None:
    """A module's layer; None for the package root (``dlgn_lib``: the notebooks' entry, above all)."""
    parts = module.split(".")
    return None if len(parts) == 1 else LAYERS.get(parts[1])


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in modules() if m != "dlgn_lib" and layer_of(m) is None)
    assert not unplaced, f"place these modules in a layer (tests/test_layers.py): {unplaced}"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = []
    for module, targets in graph().items():
        if layer_of(module) is None:
            continue
        for target in sorted(targets):
            if layer_of(target) is not None and layer_of(target) > layer_of(module):
                upward.append(f"{module} ({NAMES[layer_of(module)]}) imports {target} ({NAMES[layer_of(target)]})")
    assert not upward, "\n".join(upward)


def test_no_import_cycles():
    edges = {m: {t for t in ts if t != "dlgn_lib"} for m, ts in graph().items() if m != "dlgn_lib"}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    pairs = [f"{a} <-> {b}" for c in cycles for a in c for b in sorted(edges[a] & set(c))]
    assert not cycles, "import cycles: " + "; ".join(" / ".join(c) for c in cycles) + "\nedges: " + ", ".join(pairs)


def test_the_graph_reader_finds_a_planted_upward_import_and_a_cycle(tmp_path):
    """The reader resolves relative imports, imports inside functions, and skips the entry point."""
    pkg = tmp_path / "dlgn_lib"
    (pkg / "plots").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text("def f():\n    from .report import x\n")
    (pkg / "report.py").write_text("from . import models\nif __name__ == '__main__':\n    from dlgn_lib import plots\n")
    (pkg / "plots" / "__init__.py").write_text("from ..models import f\nimport dlgn_lib.report\n")
    known = {"dlgn_lib": pkg / "__init__.py", "dlgn_lib.models": pkg / "models.py", "dlgn_lib.report": pkg / "report.py",
             "dlgn_lib.plots": pkg / "plots" / "__init__.py"}
    found = {m: imports(m, p, known) for m, p in known.items()}
    assert found == {"dlgn_lib": set(), "dlgn_lib.models": {"dlgn_lib.report"}, "dlgn_lib.report": {"dlgn_lib.models"},
                     "dlgn_lib.plots": {"dlgn_lib.models", "dlgn_lib.report"}}


@pytest.mark.parametrize("module", ["dlgn_lib.models", "dlgn_lib.verdict", "dlgn_lib.runs", "dlgn_lib.plots"])
def test_importing_the_science_or_the_presentation_loads_no_record_tool(module):
    code = (f"import sys, {module}\n"
            f"print(' '.join(sorted(m for m in sys.modules if m.startswith('dlgn_lib.'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=PACKAGE.parent).stdout.split()
    record = sorted(m for m in loaded if layer_of(m) == 2)
    assert not record, f"import {module} loads {record}"
