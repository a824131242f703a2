"""Every notebook of the series has one anatomy; the cells that make it carry these tags, in order:

``title``           markdown: ``# NN · title`` and the claim it tests (``**Claim C5.**``, ``**Claims C5 and
                    C7.**``, ``**Claim T.**``) or ``**No verdict.**``
``finds``           markdown, right after the title: ``## What this notebook finds``, generated from the
                    record (its claims' bottom lines at paper scale, the parts it decides)
``reconstruction``  markdown: what is rebuilt and measured, and how
``parameters``      code: the papermill parameters, exactly ``config.NOTEBOOK_PARAMETERS``
``setup``           code, right after the parameters: ``cfg = dl.setup("NN", globals())``
``rule``            (notebooks with a verdict) markdown + code: thresholds and ``dl.verdict.rules("NN")``,
                    before any training or cache read
``verdict``         (notebooks with a verdict) code: ``dl.verdict.verdict(...)``
``exercises``       markdown: ``## Exercises``
``results``         markdown: ``## Results``, its numbers generated (``python -m dlgn_lib.record.report``)
``history``         markdown ``## History of the verdicts`` and, last, code ``dl.verdict.history("NN")``

Untagged cells (data, runs, figures, sliders) sit between ``setup`` and ``exercises``. A notebook
orchestrates: functions it defines are a few lines at most, everything longer lives in ``dlgn_lib``
with tests. Sizes are read with one spelling, the keys of ``config.NOTEBOOK_SIZES``.
"""
import ast
import re

import nbformat
import pytest

from dlgn_lib import config, locations, verdict

NOTEBOOKS = sorted((locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ORDER = ("title", "finds", "reconstruction", "parameters", "setup", "rule", "verdict", "exercises", "results", "history")
WITH_VERDICT = set(config.NOTEBOOK_PARAMETERS) - set(verdict.WITHOUT_VERDICT)
MAX_FUNCTION_LINES = 6   # a def line and a few lines of body
MEASURES = re.compile(r"get_or_train|\bdl\.train\.|\.fit\(")
CONFIG_ATTRIBUTES = {"seeds", "run", "describe", "target_seed", "seed", "profile", "notebook", "sizes"}


def cells_of(notebook):
    return nbformat.read(notebook, as_version=4).cells


def tag_of(cell):
    tags = [t for t in cell.metadata.get("tags", []) if t in ORDER]
    assert len(tags) <= 1, f"a cell has two anatomy tags: {tags}"
    return tags[0] if tags else None


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_sections_are_present_and_in_order(notebook):
    nb_id, cells = notebook.name[:2], cells_of(notebook)
    tagged = [(i, tag_of(c)) for i, c in enumerate(cells) if tag_of(c)]
    order = [tag for _, tag in tagged]
    required = set(ORDER) if nb_id in WITH_VERDICT else set(ORDER) - {"rule", "verdict"}
    assert set(order) == required, f"sections present {sorted(set(order))}, needed {sorted(required)}"
    ranks = [ORDER.index(tag) for tag in order]
    assert ranks == sorted(ranks), f"sections out of order: {order}"
    assert tagged[0] == (0, "title")
    assert tagged[1] == (1, "finds") and cells[1].source.startswith("## What this notebook finds\n"), \
        "the findings come right after the title"
    assert cells[-1].source.strip() == f'dl.verdict.history("{nb_id}")' and tag_of(cells[-1]) == "history"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_each_section_says_what_it_must(notebook):
    nb_id, cells = notebook.name[:2], cells_of(notebook)
    by_tag = {}
    for i, cell in enumerate(cells):
        if tag_of(cell):
            by_tag.setdefault(tag_of(cell), []).append((i, cell))
    title = by_tag["title"][0][1]
    assert title.cell_type == "markdown" and title.source.startswith(f"# {nb_id} · ")
    assert re.search(r"\*\*(Claims? (C\d|T)|No verdict\.)", title.source), "the title names no claim"
    assert all(c.cell_type == "markdown" for _, c in by_tag["reconstruction"])
    (p, params), = by_tag["parameters"]
    (s, setup), = by_tag["setup"]
    assert s == p + 1 and f'cfg = dl.setup("{nb_id}", globals())' in setup.source
    names = tuple(t.id for node in ast.parse(params.source).body for t in node.targets)
    assert names == config.NOTEBOOK_PARAMETERS[nb_id]
    (e, exercises), = by_tag["exercises"]
    assert exercises.source.startswith("## Exercises")
    assert by_tag["results"][0][1].source.startswith("## Results")
    assert by_tag["history"][0][1].source.startswith("## History of the verdicts")
    verdict_calls = [i for i, c in enumerate(cells) if c.cell_type == "code" and "dl.verdict.verdict(" in c.source]
    if nb_id in WITH_VERDICT:
        rule_code = [c for _, c in by_tag["rule"] if c.cell_type == "code"]
        assert len(rule_code) == 1 and f'dl.verdict.rules("{nb_id}")' in rule_code[0].source
        last_rule = by_tag["rule"][-1][0]
        first_measure = min(i for i, c in enumerate(cells) if c.cell_type == "code" and MEASURES.search(c.source))
        assert last_rule < first_measure, "the verdict rule must come before any run is trained or read"
        assert verdict_calls and all(tag_of(cells[i]) == "verdict" for i in verdict_calls)
    else:
        assert not verdict_calls


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_notebooks_orchestrate_and_keep_logic_in_the_library(notebook):
    for cell in cells_of(notebook):
        if cell.cell_type != "code":
            continue
        tree = ast.parse("\n".join(line for line in cell.source.splitlines() if not line.startswith(("%", "!"))))
        for node in ast.walk(tree):
            assert not isinstance(node, ast.ClassDef), f"class {node.name} belongs in dlgn_lib"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= MAX_FUNCTION_LINES, \
                    f"function {node.name} has {length} lines; move it into dlgn_lib (with a test)"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_sizes_are_read_with_one_spelling(notebook):
    nb_id = notebook.name[:2]
    known = set().union(*(sizes for sizes in config.NOTEBOOK_SIZES[nb_id].values())) | CONFIG_ATTRIBUTES
    used = {m for c in cells_of(notebook) if c.cell_type == "code" for m in re.findall(r"\bcfg\.(\w+)", c.source)}
    assert used <= known, f"unknown sizes {sorted(used - known)}"


def test_every_notebook_is_checked():
    assert {n.name[:2] for n in NOTEBOOKS} == set(config.NOTEBOOK_PARAMETERS)
