"""The library's layers, read from its files: where each module sits, how many lines each layer
has, the public names (``__all__``) and the names the notebooks use (README "Where things live").

    python -m dlgn_lib.record.layers            # lines and public names per layer
    python -m dlgn_lib.record.layers --api      # the API page of the book (markdown)

The layers, bottom to top: the science (models, data, training, the analyses, intervals and
verdicts), the presentation (``plots``, ``studies``, ``widgets``) and the record tools
(``dlgn_lib/record/``); the package root sits on top. Nothing is imported: the files are parsed.
"""
from __future__ import annotations

import argparse
import ast
import json
from itertools import takewhile
from pathlib import Path
from ..files import command

PACKAGE = Path(__file__).resolve().parents[1]
NOTEBOOKS = PACKAGE.parent / "notebooks"
#: The layers, bottom to top.
LAYERS = ("science", "presentation", "record tools")
#: The presentation's top-level modules and subpackages; ``record`` holds the record tools.
PRESENTATION = frozenset({"plots", "studies", "widgets"})

__all__ = ["LAYERS", "api_page", "layer_of", "line_counts", "main", "modules", "notebook_names", "public_counts",
           "public_names"]


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a subpackage by its ``__init__.py``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def layer_of(module: str) -> str:
    """The layer of a dotted module name: one of :data:`LAYERS`, or "root" for the package itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    return LAYERS[2] if parts[1] == "record" else LAYERS[1] if parts[1] in PRESENTATION else LAYERS[0]


def line_counts(package: Path = PACKAGE) -> dict[str, int]:
    """Lines of code (every line of every ``.py`` file) per layer, and of the package root."""
    counts = dict.fromkeys((*LAYERS, "root"), 0)
    for name, path in modules(package).items():
        counts[layer_of(name)] += len(path.read_text().splitlines())
    return counts


def public_counts(package: Path = PACKAGE) -> dict[str, int]:
    """Public names (``__all__`` entries) per layer, and of the package root."""
    names = public_names(package)
    return {layer: sum(len(names[m] or ()) for m in names if layer_of(m) == layer) for layer in (*LAYERS, "root")}


def _defined(tree: ast.Module) -> dict[str, ast.AST]:
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                out.update({t.id: node for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                            if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def _all_of(tree: ast.Module) -> list[str] | None:
    defined = _defined(tree)
    node = defined.get("__all__")
    if node is None or node.value is None:
        return None
    names = []
    for e in node.value.elts:   # a string, or *NAME of a tuple of strings defined in the module
        names += ast.literal_eval(defined[e.value.id].value) if isinstance(e, ast.Starred) else [ast.literal_eval(e)]
    return names


def public_names(package: Path = PACKAGE) -> dict[str, list[str] | None]:
    """Each module's ``__all__`` (None where a module has none)."""
    return {name: _all_of(ast.parse(path.read_text())) for name, path in modules(package).items()
            if path.name != "__main__.py"}


def describe(module: str, name: str, package: Path = PACKAGE) -> str:
    """A public name's first docstring line (a function or class) or its ``#:`` comment (a constant);
    "" when it has neither."""
    path = modules(package)[module]
    source = path.read_text()
    tree = ast.parse(source)
    node = _defined(tree).get(name)
    if node is None:   # a name the module re-exports: described where it is defined
        for imp in (n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level):
            if any(a.name == name and a.asname in (None, name) for a in imp.names):
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = base[:len(base) - imp.level + 1]
                return describe(".".join(base + ([imp.module] if imp.module else [])), name, package)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        doc = ast.get_docstring(node) or ""
        return doc.split("\n\n")[0].replace("\n", " ").strip()
    if node is None:
        return ""
    above = takewhile(lambda line: line.startswith("#:"), reversed(source.splitlines()[:node.lineno - 1]))
    return " ".join(reversed([line[2:].strip() for line in above]))


def notebook_names(notebooks: list[Path] | None = None, package: Path = PACKAGE) -> dict[str, set[tuple[str, str]]]:
    """The library names each notebook's code uses: notebook file name -> {(module, name)}.

    Reads ``import dlgn_lib as dl``, ``from dlgn_lib import paths``, ``from dlgn_lib.studies import
    circle as study`` and the like, and follows attribute chains (``dl.studies.circle.steps``) to the
    module that defines the name; IPython lines (``%``, ``!``) are skipped."""
    known = modules(package)
    notebooks = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if notebooks is None else notebooks
    out = {}
    for path in notebooks:
        cells = json.loads(Path(path).read_text())["cells"]
        code = "\n".join("\n".join(line for line in "".join(c["source"]).splitlines()
                                   if not line.lstrip().startswith(("%", "!")))
                         for c in cells if c["cell_type"] == "code")
        out[Path(path).name] = _names_used(ast.parse(code), known)
    return out


def _names_used(tree: ast.AST, known: dict[str, Path]) -> set[tuple[str, str]]:
    aliases, used = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "dlgn_lib":
                    aliases[a.asname or "dlgn_lib"] = a.name if a.asname else "dlgn_lib"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dlgn_lib":
            for a in node.names:
                if f"{node.module}.{a.name}" in known:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    used.add((node.module, a.name))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, base = [], node
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in aliases:
            continue
        module = aliases[base.id]
        for part in chain:
            if f"{module}.{part}" not in known:
                used.add((module, part))
                break
            module = f"{module}.{part}"
    return used


def api_page(package: Path = PACKAGE) -> str:
    """The book's API page: every module's public names with their one-line descriptions, by layer."""
    names = public_names(package)
    out = ["# The library's public names", "",
           "Each module's `__all__`: the names a reader of the notebooks or a researcher extending the work",
           "is meant to use, with their one-line descriptions, by layer (bottom to top; README, \"Where",
           "things live\"). Generated by `python -m dlgn_lib.record.layers --api`.", ""]
    for layer in LAYERS:
        out += [f"## {layer.capitalize()}", ""]
        for module in sorted(m for m in names if layer_of(m) == layer and names[m]):
            out += [f"### `{module}`", ""]
            out += [f"- `{name}`: {describe(module, name, package) or '(no description)'}" for name in names[module]]
            out.append("")
    return "\n".join(out)


@command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.layers`` (the module's docstring says what it does)."""
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.layers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", action="store_true", help="print the book's API page instead")
    args = parser.parse_args(argv)
    if args.api:
        print(api_page())
        return 0
    counts, public = line_counts(), public_counts()
    for layer in (*LAYERS, "root"):
        print(f"{layer:>13}: {counts[layer]:>6,} lines, {public[layer]} public names")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
