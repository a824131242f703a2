"""Running leaves tracked files alone (issue 47, item 8): a notebook run by hand saves its figures and
tables under build/figures, only `make figures` names the committed figures/, and a table's numbers
are written to the decimals the spread record shows stable, so that a regeneration within tolerance
writes the same bytes."""
from __future__ import annotations

import json
import subprocess

import nbformat
import numpy as np
import pandas as pd
import pytest
from nbclient import NotebookClient

from dlgn_lib import locations, tables
from dlgn_lib.record.series import CURRENT_INTERPRETER_KERNEL, _KernelManager
from fingerprint import tree

REPO = locations.REPO_ROOT


def test_the_default_figures_folder_is_under_build_unless_a_variable_names_another(tmp_path, monkeypatch):
    monkeypatch.delenv("DLGN_FIGURES_DIR", raising=False)
    monkeypatch.delenv("DLGN_BUILD_DIR", raising=False)
    assert locations.figures_dir() == REPO / "build" / "figures"
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "elsewhere"))
    assert locations.figures_dir() == tmp_path / "elsewhere" / "figures"
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path / "mine"))
    assert locations.figures_dir() == tmp_path / "mine"


def test_a_kernel_run_by_hand_writes_build_figures_and_leaves_figures_alone(tmp_path, monkeypatch):
    """As in JupyterLab or papermill: a kernel with no DLGN_FIGURES_DIR saves a figure and a table."""
    monkeypatch.delenv("DLGN_FIGURES_DIR", raising=False)
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    before = tree(REPO / "figures")
    code = ("import dlgn_lib as dl, matplotlib.pyplot as plt, pandas as pd\n"
            "fig, ax = plt.subplots(); ax.plot([0, 1], [0, 1]); dl.plots.save_figure(fig, '02_accuracy')\n"
            "cols = pd.MultiIndex.from_product([['DLGN'], ['mean', 'std', 'n']])\n"
            "dl.tables.save_table(pd.DataFrame([[0.5, 0.1, 2]], index=['moons'], columns=cols), '02_accuracy')\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(nb, kernel_name=CURRENT_INTERPRETER_KERNEL, kernel_manager_class=_KernelManager,
                   resources={"metadata": {"path": str(REPO / "notebooks")}}, timeout=300).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert printed.count(f"saved {tmp_path}/build/figures/02_accuracy.") == 2, printed
    assert sorted(p.name for p in (tmp_path / "build" / "figures").iterdir()) == \
        ["02_accuracy.csv", "02_accuracy.pdf", "02_accuracy.png", "02_accuracy.tex"]
    assert tree(REPO / "figures") == before


@pytest.mark.parametrize("given", [None, "somewhere"])
def test_make_figures_names_the_committed_figures_folder_unless_told_another(tmp_path, given):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **({"DLGN_FIGURES_DIR": given} if given else {})}
    done = subprocess.run(["make", "--no-print-directory", "-n", "figures", f"VENV={tmp_path / 'venv'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    run = [line for line in done.stdout.splitlines() if line.startswith("DLGN_FIGURES_DIR=")]
    assert run == [f"DLGN_FIGURES_DIR={REPO / (given or 'figures')} \\"], done.stdout + done.stderr


# --- the numbers of a table ---------------------------------------------------------------------------

def _record(committed: list[str], ranges: list[float], factor: float = 3.0) -> dict:
    output = {"values": {"committed": committed}, "ranges": ranges}
    return {"tolerance_factor": factor, "notebooks": {"97": {"outputs": {"97-01/text/html/0": output}}}}


def _half_up(units: int, drop: int) -> int:
    """``units`` (integers of the last digit) rounded half away from zero by ``drop`` digits."""
    scale = 10 ** drop
    return (1 if units >= 0 else -1) * ((2 * abs(units) + scale) // (2 * scale))


def _text(units: int, decimals: int) -> str:
    whole, part = divmod(abs(units), 10 ** decimals)
    sign = "-" if units < 0 else ""   # a zero is written without a sign
    return f"{sign}{whole}.{part:0{decimals}d}" if decimals else f"{sign}{whole}"


def _decimals(committed_units: int, allowed: int, digits: int) -> int | None:
    """By enumeration: the most decimals at which every value of the window rounds to one text."""
    window = range(committed_units - allowed, committed_units + allowed + 1)
    return next((d for d in range(digits, -1, -1) if len({_half_up(u, digits - d) for u in window}) == 1), None)


def _shown(printed_units: int, decimals: int, digits: int) -> str:
    return _text(_half_up(printed_units, digits - decimals), decimals)


def test_stable_texts_agree_with_an_enumeration_of_every_value_within_tolerance():
    rng = np.random.default_rng(47)
    digits, factor = 3, 3.0
    committed = [int(u) for u in rng.integers(-200, 1200, size=40)]
    steps = [int(s) for s in rng.choice([0, 0, 1, 2, 3, 7, 10, 200], size=40)]    # measured ranges, in units
    record = _record([_text(u, digits) for u in committed], [s / 1000 for s in steps], factor)
    allowed = [max(int(factor * s), 1) for s in steps]
    decimals = [_decimals(c, a, digits) for c, a in zip(committed, allowed)]
    assert None in decimals and {0, 1, 2} <= set(decimals), "the draw covers every case"
    for _ in range(30):   # regenerations: each number moved anywhere within its tolerance
        moved = [c + int(rng.integers(-a, a + 1)) for c, a in zip(committed, allowed)]
        texts = tables.stable_texts([u / 1000 for u in moved], "97", digits, record)
        for c, m, d, text in zip(committed, moved, decimals, texts):
            if d is None:     # even whole units move: written whole, and may differ
                assert text == _shown(m, 0, digits)
            else:             # the same text as the committed value's
                assert text == _shown(m, d, digits) == _shown(c, d, digits)
    outside = list(committed)
    outside[0] += allowed[0] + 1      # one number beyond its tolerance: no recorded output prints these
    assert tables.stable_texts([u / 1000 for u in outside], "97", digits, record) == \
        [_shown(u, digits, digits) for u in outside]


def test_a_table_written_twice_from_values_that_differ_below_the_stable_digits_is_byte_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path))
    cols = pd.MultiIndex.from_product([["DLGN", "ReLU"], ["mean", "std", "n"]])
    first = pd.DataFrame([[0.8771, 0.0234, 10, 0.8889, 0.0061, 10]], index=["odt"], columns=cols)
    record = _record(["0.877", "0.023", "0.889", "0.006"], [0.007, 0.010, 0.0, 0.0])
    written = {}
    for name, moved in (("first", first), ("again", first + [0.006, -0.008, 0, 0.0009, 0.0008, 0]),
                        ("beyond", first + [0.05, 0, 0, 0, 0, 0])):
        tables.save_table(moved, "97_table", caption="test accuracy", verbose=False, record=record)
        written[name] = [(tmp_path / f"97_table.{ext}").read_bytes() for ext in ("csv", "tex")]
    assert written["again"] == written["first"]
    assert written["beyond"] != written["first"], "a number beyond its tolerance is written as it is"
    csv = written["first"][0].decode()
    # 0.877 ± 0.021 spans 0.856..0.898: one decimal; 0.023 ± 0.030 spans -0.007..0.053: none;
    # 0.889 ± 0.001 and 0.006 ± 0.001 (never moved: one unit of the last digit): two decimals
    assert csv.splitlines()[1] == "odt,0.9,0,10,0.89,0.01,10"


@pytest.mark.parametrize("table_id", ["02_accuracy", "09_table"])
def test_every_recorded_code_path_writes_the_committed_table(table_id, tmp_path, monkeypatch):
    """The table a notebook displays, as each CPU code path of docs/spread.json printed it, written
    by save_table: the committed figures/<table_id>.csv, byte for byte."""
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path))
    committed = REPO / "figures" / f"{table_id}.csv"
    shown = pd.read_csv(committed, index_col=0, dtype=str, keep_default_na=False)
    models = list(dict.fromkeys(c.rsplit(" ", 1)[0] for c in shown.columns))
    slots = [(r, m, s) for r in shown.index for m in models for s in ("mean", "std") if shown.loc[r, f"{m} {s}"]]
    record = json.loads((REPO / "docs" / "spread.json").read_text())
    outputs = record["notebooks"][table_id[:2]]["outputs"]
    printed = [o["values"] for k, o in outputs.items() if "text/html" in k
               and sum(len(t.partition(".")[2]) == 3 for t in o["values"]["committed"]) == len(slots)]
    assert len(printed) == 1, f"one displayed table of {len(slots)} numbers in the record"
    paths = printed[0]
    assert len(paths) > 5
    for path, values in paths.items():
        numbers = [float(t) for t in values if len(t.partition(".")[2]) == 3]
        table = pd.DataFrame(np.nan, index=shown.index, columns=pd.MultiIndex.from_product([models, tables.STATS]))
        for m in models:
            table[(m, "n")] = shown[f"{m} n"].astype(float)
        for (r, m, s), number in zip(slots, numbers, strict=True):
            table.loc[r, (m, s)] = number
        tables.save_table(table, table_id, verbose=False)
        assert (tmp_path / f"{table_id}.csv").read_bytes() == committed.read_bytes(), path

