"""The benchmark runs end to end at toy sizes and writes a complete table (not a timed test)."""
import math
import re

import pytest

from dlgn_lib import files
from dlgn_lib.record import bench

CHEAP_ROWS = ("SD-I protocol (DLGN 6-6, batch 20, val every epoch), one seed, passes 1-2: plain loop / package",
              "(same), one seed, a whole run of 3 passes: plain loop / package",
              "SD-I protocol (DLGN 6-6, batch 20, val every epoch), 2 seeds, passes 1-2: plain loops / package, per seed",
              "peak memory of the 2-seed SD-I run (fresh process)", "SD-I FLOP/s / matmul FLOP/s, package, 2 seeds",
              "DLGN step / ReLU step", "DLGN-SF step / ReLU step", "2 seeds one by one / together",
              "overlap kernel FLOP/s / matmul FLOP/s", "training FLOP/s / matmul FLOP/s, ReLU step",
              "training FLOP/s / matmul FLOP/s, DLGN step",
              "pinned / native code path, time of: SD-I protocol", "pinned / native code path, time of: circle DLGN",
              "pinned / native code path, time of: FC",
              "cost of 2 seeds in one-seed runs: together / one seed (circle DLGN",
              "cost of 2 seeds in one-seed runs: together / one seed (SD-I protocol",
              "03's region checks, one seed")
SERIES_ROWS = ("quick series wall time, cold run cache", "quick series wall time, warm run cache")


@pytest.fixture()
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DLGN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("DLGN_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "build"


def test_tiny_bench_writes_every_row_with_a_finite_ratio(build_dir, capsys):
    assert bench.main(["--tiny"]) == 0
    printed = capsys.readouterr().out
    text = (build_dir / "bench.txt").read_text()
    assert "torch threads" in text and "BLAS" in text and "targets are for reconstruction" in text
    lines = text.splitlines()
    for name in CHEAP_ROWS:
        [line] = [ln for ln in lines if ln.startswith(name)]
        value = float(re.split(r"\s{2,}", line)[1].rstrip("×GBruns "))   # cells: name, median, …
        assert math.isfinite(value) and value > 0, line
        assert line in printed
    for name in SERIES_ROWS:
        [line] = [ln for ln in lines if ln.startswith(name)]
        assert "not run" in line and "--series" in line


def test_row_judges_its_target_on_the_median():
    row = bench.Row("r", (1.0, 2.0, 9.0), ("<=", 1.6))
    assert row.median == 2.0 and row.met() == "NO" and row.met(targets_apply=False) == "—"
    assert bench.Row("r", (6.0, 4.0, 5.5), (">=", 5.0)).met() == "yes"
    table = bench.format_table([row, bench.Row("no target", (0.5,))])
    assert "≤ 1.6×" in table and "[1× – 9×]" in table and "(1 run)" in table


HEAD = ["dlgn-halfspace benchmarks (reconstruction §6): python -m dlgn_lib.record.bench --record",
        "torch 2.x, device cpu", "mode default: 5 repeat(s)"]


def test_record_replaces_measured_rows_and_keeps_the_others_with_their_run(tmp_path):
    path = tmp_path / "bench.json"
    first = [bench.Row("a / b", (2.0, 3.0, 4.0), (">=", 3.0)), bench.Row("series", (300.0,), ("<=", 600.0), " s"),
             bench.Row("renamed later", (1.0,))]
    bench.record_rows(first, ["matmul 100 GFLOP/s"], HEAD, path, date="2026-01-01")
    # a second run without the series, and without the row that was renamed
    second = [bench.Row("a / b", (5.0, 6.0, 7.0), (">=", 3.0)),
              bench.Row("series", (), ("<=", 600.0), " s", note="add --series")]
    record = bench.record_rows(second, ["matmul 120 GFLOP/s"], HEAD, path, date="2026-02-02")
    rows, runs = bench.load_record(path)
    assert [r.name for r, _ in rows] == ["a / b", "series"]
    (ab, ab_run), (series, series_run) = rows
    assert ab.values == (5.0, 6.0, 7.0) and runs[ab_run]["date"] == "2026-02-02"
    assert series.values == (300.0,) and runs[series_run]["date"] == "2026-01-01"
    assert runs[series_run]["reference"] == ["matmul 100 GFLOP/s"] and len(runs) == 2
    assert record["runs"][ab_run]["command"] == "python -m dlgn_lib.record.bench --record"
    # a run that measures everything leaves one run in the record
    bench.record_rows(first[:2], [], HEAD, path, date="2026-03-03")
    assert len(bench.load_record(path)[1]) == 1
    # a row no run has measured is recorded as not run, with its note, until one measures it
    fresh = tmp_path / "fresh.json"
    bench.record_rows(second, [], HEAD, fresh, date="2026-04-04")
    (_, _), (never, _) = bench.load_record(fresh)[0]
    assert never.values == () and never.note == "add --series"


def test_readme_table_is_the_record(tmp_path):
    from dlgn_lib.record import readme_blocks
    path = tmp_path / "bench.json"
    bench.record_rows([bench.Row("x | y", (1.25, 1.5, 2.0), ("<=", 1.6)), bench.Row("none", (0.4,))],
                      ["ref line"], HEAD, path, date="2026-01-01")
    table = readme_blocks.bench_table(*bench.load_record(path))
    assert "| x \\| y | 1.5× | [1.25× – 2×] | ≤ 1.6× | yes |" in table
    assert "| none | 0.4× | (1 run) | — | — |" in table
    assert "2026-01-01" in table and "- ref line" in table
    assert "Notes of measured rows" not in table
    noted = tmp_path / "noted.json"
    bench.record_rows([bench.Row("series", (630.0,), ("<=", 600.0), " s", "the 12 notebooks' own times add to 1,156 s"),
                       bench.Row("not run", (), ("<=", 120.0), " s", "add --series")], [], HEAD, noted)
    table = readme_blocks.bench_table(*bench.load_record(noted))
    assert "- series: the 12 notebooks' own times add to 1,156 s" in table and "- not run:" not in table
    assert "Absolute numbers" not in table     # a run without reference lines promises none


def test_record_refuses_toy_sizes(build_dir):
    with pytest.raises(SystemExit):
        bench.main(["--tiny", "--record"])


SUMMARY = """notebook              status  seconds  verdict
--------------------  ------  -------  -------
00_primer.ipynb       ok         32.4  —
04_global.ipynb       ok        315.5  VERDICT C4 [quick]: NOT SUPPORTED (3 of 5 checks pass, 1 fail, 1 inconclusive)
07_clusters.ipynb     failed    740.1  —
10_nodes.ipynb        ok         37.1  SMOKE TEST C5 [quick] (quick cannot decide C5: 20 of 1,501 passes)
notebooks: 4, ok: 3, failed: 1
"""


def test_series_note_adds_the_notebooks_times_from_the_summary_table():
    times = bench.notebook_seconds(SUMMARY)
    assert times == {"00": 32.4, "04": 315.5, "07": 740.1, "10": 37.1}
    note = bench.series_note(times, shown=2)
    assert note == "the 4 notebooks' own times add to 1,125 s; longest: 07 740 s, 04 316 s"
    assert bench.series_note({}) == ""


def test_series_only_records_the_series_rows_and_keeps_every_other_row_with_its_run(build_dir, tmp_path, monkeypatch):
    path = tmp_path / "bench.json"
    earlier = [bench.Row("a / b", (2.0, 3.0, 4.0), (">=", 3.0)),
               bench.Row("quick series wall time, cold run cache", (900.0,), ("<=", 600.0), " s")]
    bench.record_rows(earlier, ["ref line"], HEAD, path, date="2026-01-01")
    monkeypatch.setattr(bench, "RECORD", path)
    monkeypatch.setattr(bench, "measure", lambda *a, **k: pytest.fail("--series-only measured the other rows"))
    timed = [bench.Row(f"quick series wall time, {state} run cache", (seconds,), ("<=", bench.SERIES_TARGETS[state]),
                       " s", "the 12 notebooks' own times add to 1,000 s") for state, seconds in (("cold", 500.0),
                                                                                          ("warm", 100.0))]
    monkeypatch.setattr(bench, "series_rows", lambda: timed)
    assert bench.main(["--series-only", "--record"]) == 0
    rows, runs = bench.load_record(path)
    by_name = {row.name: (row, runs[run]) for row, run in rows}
    kept, kept_run = by_name["a / b"]
    assert kept.values == (2.0, 3.0, 4.0) and kept_run["date"] == "2026-01-01" and kept_run["reference"] == ["ref line"]
    for row in timed:
        got, run = by_name[row.name]
        assert got.values == row.values and got.note == row.note and run["date"] != "2026-01-01"


def test_the_cost_split_adds_up_to_each_notebooks_seconds():
    """Other = seconds − training − analysis − file I/O, never below 0; notebooks without costs are left out."""
    record = {"profile": "full", "notebooks": {
        "03_regions.ipynb": {"status": "ok", "seconds": 100.0,
                             "costs": {"training": 60.0, "analysis": 25.5, "io": 4.5, "wall": 97.0}},
        "01_paths.ipynb": {"status": "ok", "seconds": 10.0,
                           "costs": {"training": 8.0, "analysis": 2.0, "io": 0.5, "wall": 9.0}},
        "02_sd1.ipynb": {"status": "ok", "seconds": 5.0}}}
    rows = bench.cost_rows(record)
    assert [r.name[:2] for r in rows] == ["01", "03"]
    assert rows[1].name == "03 under full, seconds: training, analysis, file I/O, other"
    assert rows[1].values == (100.0,) and rows[1].note == "60.0, 25.5, 4.5, 10.0"
    assert rows[0].note == "8.0, 2.0, 0.5, 0.0"   # the kinds overlap the kernel's start: other floors at 0
    assert bench.cost_table(record).splitlines()[3] == "| 03 | 100 | 60 | 26 | 4 | 10 |"
    with pytest.raises(files.Refusal, match="x.json: no notebook in it has its costs"):
        bench.cost_table({"notebooks": {"02_sd1.ipynb": {"seconds": 5.0}}}, "x.json")
