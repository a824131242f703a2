"""The public surface (README "Where things live"): every module declares ``__all__``, each public
name exists and says in a line what it is, and the notebooks use public names only. The surface
is read from the files (dlgn_lib.record.layers), checked here against the modules as imported."""
import ast
import importlib
import json

import pytest

from dlgn_lib.record import layers

NAMES = layers.public_names()


def test_every_module_declares_all():
    missing = sorted(m for m, names in NAMES.items() if names is None)
    assert not missing, f"modules without __all__: {', '.join(missing)}"


@pytest.mark.parametrize("module", sorted(NAMES))
def test_each_public_name_exists_and_is_described(module):
    imported = importlib.import_module(module)
    for name in NAMES[module] or ():
        assert hasattr(imported, name), f"{module}.__all__ names {name}, which the module does not define"
        if name in layers.modules():   # a subpackage's module (the package root lists its modules)
            continue
        if module == "dlgn_lib":       # the root's helpers are described where they are defined
            continue
        assert layers.describe(module, name), f"{module}.{name}: no docstring (or #: comment for a constant)"
    assert imported.__all__ == NAMES[module], f"{module}: __all__ read from the file differs from the imported one"


def test_the_surface_is_about_a_third_of_the_defined_names():
    """Public names (``__all__``) against every top-level name the modules define, helpers with a
    leading underscore included: deleting dead code or renaming a helper moves both sides alike."""
    defined = 0
    for module, path in layers.modules().items():
        if path.name == "__main__.py":
            continue
        defined += len(layers._defined(ast.parse(path.read_text())))
    public = sum(len(v or ()) for v in NAMES.values())
    assert public <= defined / 3, f"{public} public names of {defined} defined"


def test_the_notebooks_use_public_names_only():
    wrong = []
    for notebook, used in layers.notebook_names().items():
        for module, name in sorted(used):
            if name.startswith("__") or name in (NAMES.get(module) or ()):
                continue
            wrong.append(f"{notebook}: {module}.{name}")
    assert not wrong, "notebooks use names outside __all__: " + "; ".join(wrong)


def test_the_reader_follows_aliases_and_attribute_chains(tmp_path):
    """A planted notebook: every way the series imports the library resolves to the defining module."""
    code = ("import dlgn_lib as dl\nfrom dlgn_lib.studies import circle as study\nfrom dlgn_lib import paths\n"
            "from dlgn_lib.plots.tables import accuracy_points\n%matplotlib inline\n"
            "dl.studies.circle.steps_configs()\nstudy._private_helper()\npaths.path_values()\ndl.verdict.FAIL\n")
    nb = tmp_path / "99_x.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": code}]}))
    assert layers.notebook_names([nb])["99_x.ipynb"] == {
        ("dlgn_lib.studies.circle", "steps_configs"), ("dlgn_lib.studies.circle", "_private_helper"),
        ("dlgn_lib.paths", "path_values"), ("dlgn_lib.plots.tables", "accuracy_points"), ("dlgn_lib.verdict", "FAIL")}


def test_the_api_page_lists_every_public_name_by_layer():
    page = layers.api_page()
    assert page.index("## Science") < page.index("## Presentation") < page.index("## Record tools")
    for module, names in NAMES.items():
        if names and module != "dlgn_lib" and layers.layer_of(module) != "root":
            assert f"### `{module}`" in page
            for name in names:
                assert f"- `{name}`: " in page, f"{module}.{name} missing from the API page"
