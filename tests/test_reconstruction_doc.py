"""docs/reconstruction.md against the code it describes.

The document is cited as "reconstruction §n" from code, notebooks and README, so its sections and
anchors must stay put; and every fact it states that the code also states is compared with the
code here: the files and ``dl.`` names it cites exist, the thresholds it quotes are the constants
of the notebooks' rule cells and of ``dlgn_lib.fidelity``, its size table is
``config.NOTEBOOK_SIZES``, and its table of registered rules is ``verdict_rules.json``, each rule
registered in the commit it names.
"""
import ast
import importlib
import inspect
import json
import re
import shutil
import subprocess

import nbformat
import pytest

import dlgn_lib
from dlgn_lib import config, fidelity, locations, verdict

ROOT = locations.REPO_ROOT
DOC = (ROOT / "docs" / "reconstruction.md").read_text()
SECTIONS = [("s0", "## §0 "), ("s1", "## §1 "), ("s1-1", "### §1.1 "), ("s2", "## §2 "), ("s2-1", "### §2.1 "),
            ("s3", "## §3 "), ("s4", "## §4 "), ("s5", "## §5 "), ("s6", "## §6 "), ("s7", "## §7 "),
            ("s8", "## §8 "), ("s8-1", "### §8.1 "), ("s8-2", "### §8.2 ")]


def section(anchor: str) -> str:
    """The text of a section, from its anchor to the next anchor."""
    start = DOC.index(f'<a id="{anchor}"></a>')
    following = [DOC.index(f'<a id="{a}"></a>') for a, _ in SECTIONS if DOC.index(f'<a id="{a}"></a>') > start]
    return DOC[start:min(following, default=len(DOC))]


def literal(text: str):
    """A number or tuple written in the document, e.g. ``1 - 1e-6`` or ``(16, 16, 16)``: constants
    and arithmetic only."""
    tree = ast.parse(text, mode="eval")
    allowed = (ast.Expression, ast.Constant, ast.Tuple, ast.UnaryOp, ast.BinOp, ast.USub, ast.Sub, ast.Add,
               ast.Mult, ast.Div, ast.Pow, ast.Load)
    assert all(isinstance(node, allowed) for node in ast.walk(tree)), text
    return eval(compile(tree, "<doc>", "eval"), {"__builtins__": {}})


def test_every_section_has_its_anchor_right_before_its_heading_in_order():
    lines = DOC.splitlines()
    positions = []
    for anchor, heading in SECTIONS:
        (i,) = [k for k, line in enumerate(lines) if line == f'<a id="{anchor}"></a>']
        assert lines[i + 1].startswith(heading), f"{anchor}: the line after the anchor is {lines[i + 1]!r}"
        positions.append(i)
    assert positions == sorted(positions)


def test_every_file_it_names_exists():
    paths = set(re.findall(r"(?<![\w/.])((?:dlgn_lib|tests|docs|data|notebooks)/[\w./-]*\w)", DOC))
    paths |= {p.removeprefix("../") for p in re.findall(r"\]\(([^)#]+)\)", DOC)}
    assert len(paths) > 30
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"named but not in the repository: {missing}"


def test_every_dl_name_it_cites_exists():
    names = set(re.findall(r"`(dl(?:\.\w+)+)", DOC))
    assert len(names) > 60
    missing = []
    for name in sorted(names):
        obj = dlgn_lib
        for part in name.split(".")[1:]:
            if not hasattr(obj, part) and inspect.ismodule(obj):
                try:   # a module the package does not import itself (dlgn_lib.record.series)
                    importlib.import_module(f"{obj.__name__}.{part}")
                except ModuleNotFoundError:
                    pass
            if not hasattr(obj, part):
                missing.append(name)
                break
            obj = getattr(obj, part)
    assert not missing, f"cited but not in dlgn_lib: {missing}"


def test_it_names_no_planning_file():
    assert "SP" + "EC" not in DOC   # the document speaks of itself alone


def rule_constants(nb_id: str) -> dict:
    """The numbers assigned in a notebook's rule cells: its thresholds."""
    (path,) = (ROOT / "notebooks").glob(f"{nb_id}_*.ipynb")
    constants = {}
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and "rule" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    try:
                        value = literal(ast.unparse(node.value))
                    except AssertionError:
                        continue   # computed by a function (08's gate threshold)
                    if isinstance(value, (int, float)):   # not the sets checked or the τ only reported
                        constants[node.targets[0].id] = value
    return constants


def quoted(text: str) -> dict:
    return {name: literal(value) for name, value in re.findall(r"`([A-Z][A-Z0-9_]+) = ([^`]+)`", text)}


@pytest.mark.parametrize("nb_id", sorted(set(config.NOTEBOOK_PARAMETERS) - set(verdict.WITHOUT_VERDICT)))
def test_the_thresholds_it_quotes_are_the_notebooks_constants(nb_id):
    measures = section("s4").split("### What each verdict measures")[1]
    (bullet,) = re.findall(rf"^- \*\*{nb_id} \(.*?(?=^- \*\*|\Z)", measures, flags=re.M | re.S)
    doc, notebook = quoted(bullet), rule_constants(nb_id)
    assert doc, f"notebook {nb_id}: no threshold quoted"
    assert {name: notebook.get(name) for name in doc} == doc
    # Every threshold the verdict uses is quoted (04's constants all are, 08's gate threshold is derived).
    assert set(notebook) - set(doc) <= {"HYPERPLANE_THRESHOLD"}


def test_the_fidelity_criteria_it_quotes_are_the_modules():
    doc = quoted(section("s2-1"))
    assert doc == {"MAX_ACCURACY_GAP": fidelity.MAX_ACCURACY_GAP, "R2_FRACTION": fidelity.R2_FRACTION}


def test_the_size_table_is_config_notebook_sizes():
    rows = re.findall(r"^\| (\d\d) \| `(\w+)` \| `([^`]+)` \| `([^`]+)` \|$", section("s5"), flags=re.M)
    assert len(rows) >= 30
    assert {nb for nb, *_ in rows} == set(config.NOTEBOOK_SIZES)
    for nb, size, quick, full in rows:
        sizes = config.NOTEBOOK_SIZES[nb]
        assert (literal(quick), literal(full)) == (sizes["quick"][size], sizes["full"][size]), f"{nb} {size}"


def test_every_notebook_has_a_line_in_the_series_table():
    linked = re.findall(r"^\| \[(\d\d) \w+\]\(\.\./(notebooks/[^)]+)\)", section("s4"), flags=re.M)
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [path for _, path in linked] == notebooks
    assert [nb for nb, path in linked] == [path[len("notebooks/"):][:2] for path in notebooks]


def registry_rows():
    return re.findall(r"^\| (\d\d) \| [^|]+ \| v(\d+) \| commit ([0-9a-f]{7,40}) \|", section("s8"), flags=re.M)


def test_the_rules_table_lists_every_registered_rule_once():
    listed = sorted((nb, int(v)) for nb, v, _ in registry_rows())
    registered = sorted((r["notebook"], r["version"]) for r in verdict.registered_rules())
    assert listed == registered


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs the git history")
def test_each_rule_was_registered_in_the_commit_it_names():
    for nb, version, commit in registry_rows():
        changed = subprocess.run(["git", "show", "--name-only", "--format=", commit], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout.split()
        assert "dlgn_lib/verdict_rules.json" in changed, f"{commit} did not touch the registry"
        before = subprocess.run(["git", "show", f"{commit}~1:dlgn_lib/verdict_rules.json"], cwd=ROOT,
                                capture_output=True, text=True)
        after = subprocess.run(["git", "show", f"{commit}:dlgn_lib/verdict_rules.json"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout

        def has_rule(text):
            data = json.loads(text) if text else {}
            rules = data.get("rules", []) + data.get("v4", {}).get("rules", [])   # rules v4 are registered apart
            return any(r["notebook"] == nb and r["version"] == int(version) for r in rules)
        assert has_rule(after), f"{commit} does not register rule v{version} of notebook {nb}"
        assert not has_rule(before.stdout if before.returncode == 0 else ""), f"{nb} v{version} was there before {commit}"
