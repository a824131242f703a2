"""Generated numbers: parsed back from printed verdicts, and the committed files agree with them."""
import contextlib
import io
import json

import nbformat
import pytest

from dlgn_lib import files, verdict

from dlgn_lib.record import executed as executed_module, full_results, guide_blocks, readme_blocks, report


def executed(*printed: str, **metadata):
    """A notebook whose cells printed ``printed`` (one cell each)."""
    nb = nbformat.v4.new_notebook(metadata=metadata)
    for text in printed:
        cell = nbformat.v4.new_code_cell("print(...)")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells.append(cell)
    return nb


def printed_verdict(claim, checks, profile="quick"):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        verdict.verdict(claim, checks, profile)
    return out.getvalue()


def test_verdicts_are_read_back_exactly_as_verdict_printed_them():
    first = [verdict.check("max |path sum - forward|", 2.8e-14, "<=", 1e-10),
             verdict.check("DLGN - DLN (a = b)", 0.153, ">=", 0.05)]
    second = [verdict.check("ratio", 0.667, "<=", 0.5)]
    history = "notebook 05: earlier verdicts\n  earlier: C5 [quick]: SUPPORTED (3 of 3 checks pass)\n"
    nb = executed(printed_verdict("C1", first), "other output\n", printed_verdict("C5", second, "full"), history)
    found = executed_module.verdicts_of(nb)
    assert [(v.claim, v.profile, v.supported, v.n_pass, v.n_checks) for v in found] == \
        [("C1", "quick", True, 2, 2), ("C5", "full", False, 0, 1)]
    assert [(c.name, float(c.value), c.op, float(c.threshold), c.passed) for c in found[0].checks] == \
        [(c.name, c.value, c.op, c.threshold, True) for c in first]
    assert found[1].short() == "**NOT SUPPORTED**, 0 of 1"


def test_a_verdict_line_without_its_checks_is_an_error():
    with pytest.raises(ValueError, match="3 checks announced, 0 printed"):
        executed_module.verdicts_of(executed("VERDICT C2 [quick]: SUPPORTED (3 of 3 checks pass)\n"))


def test_seconds_come_from_papermill_or_from_the_cell_timings():
    assert executed_module.seconds_of(executed(papermill={"duration": 12.5})) == 12.5
    nb = executed("a\n", "b\n")
    nb.cells[0].metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00.000000Z",
                                         "shell.execute_reply": "2026-01-01T00:00:01.500000Z"}
    nb.cells[1].metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:01:00Z",
                                         "shell.execute_reply": "2026-01-01T00:01:02.25Z"}
    assert executed_module.seconds_of(nb) == pytest.approx(3.75)


def full_run(folder, *names):
    """``folder`` with notebooks ``names`` executed under full (217.4 s, one passing check per claim
    registered to the notebook)."""
    folder.mkdir()
    for name in names:
        claims = [c for c, nbs in verdict.combination_rule()["claims"].items() if name[:2] in nbs]
        nb = executed(*(printed_verdict(c, [verdict.check("disagreements", 0, "<=", 0)], "full") for c in claims),
                      papermill={"duration": 217.4, "parameters": {"PROFILE": "full"}})
        nbformat.write(nb, folder / name)
    return folder


def test_record_keeps_notes_and_refuses_a_run_that_was_not_full(tmp_path):
    folder, record = full_run(tmp_path / "full", "03_regions.ipynb"), tmp_path / "record.json"
    record.write_text(json.dumps({"notebooks": {"03": {"note": "empty run cache"}}}))
    entry = full_results.record_full(folder, record)["notebooks"]["03"]
    assert (entry["seconds"], entry["note"], entry["verdicts"][0]["n_pass"]) == (217, "empty run cache", 1)
    quick = executed(papermill={"duration": 1.0, "parameters": {"PROFILE": "quick"}})
    nbformat.write(quick, folder / "03_regions.ipynb")
    with pytest.raises(files.Refusal, match="not PROFILE='full'"):
        full_results.record_full(folder, record)
    (tmp_path / "empty").mkdir()
    with pytest.raises(files.Refusal, match="no executed notebooks"):
        full_results.record_full(tmp_path / "empty", record)


def test_record_keeps_a_series_run_beside_the_notebooks_and_refuses_one_of_other_notebooks(tmp_path):
    folder, record = full_run(tmp_path / "full", "03_regions.ipynb", "01_paths.ipynb"), tmp_path / "record.json"
    run = {"profile": "full", "workers": 2, "seconds": 300.0, "runs_cache_empty_at_start": True,
           "notebooks": {"03_regions.ipynb": {"status": "ok", "seconds": 217.4},
                         "01_paths.ipynb": {"status": "ok", "seconds": 80.0}}}
    (folder / "series.json").write_text(json.dumps(run))
    record.write_text(json.dumps({"notebooks": {}, "series": {"01 03": {"note": "two at a time"}}}))
    written = full_results.record_full(folder, record)
    assert written["series"] == {"01 03": {**run, "note": "two at a time"}}
    assert json.loads(record.read_text()) == written
    run["notebooks"].pop("01_paths.ipynb")
    (folder / "series.json").write_text(json.dumps(run))
    before = record.read_text()
    with pytest.raises(files.Refusal, match="not of this folder's notebooks"):
        full_results.record_full(folder, record)
    assert record.read_text() == before   # nothing recorded from a mismatched folder


def _run(ids, seconds, started, empty=True, status="ok", cpu="CPU A"):
    return " ".join(ids), {"profile": "full", "workers": 2, "seconds": seconds, "started": started, "cpu": cpu,
                           "runs_cache_empty_at_start": empty, "numerics": "native", "code_version": "abc1234",
                           "notebooks": {f"{i}_x.ipynb": {"status": status, "seconds": 1.0} for i in ids}}


def test_the_series_line_adds_disjoint_cold_parts_and_names_what_is_missing():
    ids = ["00", "01", "02", "03"]
    assert readme_blocks.series_line({}, ids).endswith("not measured yet.")
    first = dict([_run(["00", "02"], 3600.0, "2026-12-04T16:00:00+00:00")])
    line = readme_blocks.series_line(first, ids)
    assert "00 02 in 3,600 s (1.00 h; 2 workers, native code path, code abc1234, 2026-12-04)" in line
    assert line.endswith("not measured yet: 01 03.")
    # a warm run, a failed one and one overlapping an earlier part are not added up
    for other in (_run(["01", "03"], 999.0, "2026-12-05T09:00:00+00:00", empty=False),
                  _run(["01", "03"], 999.0, "2026-12-05T10:00:00+00:00", status="FAILED ValueError"),
                  _run(["01", "02", "03"], 999.0, "2026-12-05T11:00:00+00:00")):
        assert readme_blocks.series_line({**first, **dict([other])}, ids).endswith("not measured yet: 01 03.")
    both = {**first, **dict([_run(["01", "03"], 5400.0, "2026-12-05T09:00:00+00:00")])}
    assert readme_blocks.series_line(both, ids).endswith("the parts together: 9,000 s (2.50 h).")
    # a part measured on another CPU is not added to this CPU's parts
    other_cpu = {**first, **dict([_run(["01", "03"], 5400.0, "2026-12-05T09:00:00+00:00", cpu="CPU B")])}
    line = readme_blocks.series_line(other_cpu, ids)
    assert "on CPU A, in parts, each from its own empty cache: 00 02 in 3,600 s" in line
    assert "not measured yet: 01 03. on CPU B, in parts" in line and line.endswith("not measured yet: 00 02.")
    # one cold run of the whole series is the measurement itself
    whole = {**both, **dict([_run(ids, 7200.0, "2026-12-06T09:00:00+00:00")])}
    assert "on CPU A, all 4 notebooks, 00 01 02 03 in 7,200 s (2.00 h;" in readme_blocks.series_line(whole, ids)


def test_a_block_is_replaced_between_its_markers_only():
    text = "before\n<!-- report:x -->\nold\n<!-- /report:x -->\nafter\n"
    assert report._replace_block(text, "x", "new", "f") == "before\n<!-- report:x -->\nnew\n<!-- /report:x -->\nafter\n"
    with pytest.raises(files.Refusal, match="needs exactly one"):
        report._replace_block("no markers", "x", "new", "f")


def test_the_readme_course_guide_and_results_cells_agree_with_the_committed_outputs():
    """Fails when a notebook was re-executed (or the full record refreshed) without
    `python -m dlgn_lib.record.report write`, or when someone edited a generated number by hand."""
    assert report.stale() == [], "run: python -m dlgn_lib.record.report write"


def test_every_claim_and_notebook_is_in_the_generated_tables():
    data = full_results.measured()
    claims, times = readme_blocks.claims_table(data), readme_blocks.times_table(data, live=True)
    for claim, _, notebooks in full_results.CLAIMS:
        assert f"| {claim} |" in claims
    for m in data.values():
        assert f"notebooks/{m.name}.ipynb" in claims and m.name.replace("_", " ", 1) in times
    failing = [v for m in data.values() for v in m.quick if v.word in ("NOT SUPPORTED", "INCONCLUSIVE")]
    for v in failing:   # a verdict short of SUPPORTED shows the check that fails (or is open), with its number
        bad = next(c for c in v.checks if not c.passed)
        assert f"{bad.name} = {bad.value}".replace("|", "\\|") in claims
    for claim in ("C1", "C2", "C3", "C4", "C5", "C6", "C7"):   # one bottom line per claim
        row = next(line for line in claims.splitlines() if line.startswith(f"| {claim} |"))
        assert row.split(" | ")[2].split("<br>")[0].replace("*", "") in ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE",
                                                                  "pending (a notebook has no `full` verdict under its current rule)")


def test_the_full_record_takes_the_code_path_from_the_notebook_not_from_the_recording_process(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(dl.numerics.describe())")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text="dlgn_lib 0.1.0\nnumerics: native (ATen AVX512, MKL_CBWR (auto), numpy without (none))\n")]
    nb.cells = [cell]
    path = tmp_path / "01_paths.ipynb"
    nbformat.write(nb, path)
    assert executed_module.code_path_of(path) == "numerics: native (ATen AVX512, MKL_CBWR (auto), numpy without (none))"
    nb.cells[0].outputs = []
    nbformat.write(nb, path)
    assert executed_module.code_path_of(path) == "not printed"


def test_the_opening_table_has_one_short_line_per_claim_by_parts_with_the_v3_word_beside(monkeypatch):
    """README's and the book's first table: the bottom line by parts (pending without v4 records),
    the rules v3 reading beside it by the registered combination, the quick words, the notebooks."""
    def v(claim, word, profile):
        return executed_module.Verdict(claim, profile, word, 1, 1, ())

    monkeypatch.setattr(full_results, "current_rule", lambda n: 3 if n in ("05", "10") else 2)
    data = {}
    for claim, _, notebooks in full_results.CLAIMS:
        for n in notebooks:
            data.setdefault(n, full_results.Measured(n, f"{n}_x", [], 1.0, [], 1.0, "", 2))
            data[n].quick.append(v(claim, "SUPPORTED", "quick"))
            data[n].full.append(v(claim, "SUPPORTED", "full"))
    data["05"] = full_results.Measured("05", "05_x", [v("C5", "INCONCLUSIVE", "quick")], 1.0,
                                 [v("C5", "NOT SUPPORTED", "full")], 1.0, "", 3)        # current: decides C5
    data["10"] = full_results.Measured("10", "10_x", [v("C5", "SMOKE TEST", "quick"), v("C7", "SMOKE TEST", "quick")], 1.0,
                                 [v("C5", "SUPPORTED", "full"), v("C7", "SUPPORTED", "full")], 1.0, "", 1)
    record = {"notebooks": {"07": {"rule": 4, "verdicts": [], "parts": [
        {"claim": "C6", "label": "a", "word": "HOLDS", "dlgn_undecided": False},
        {"claim": "C6", "label": "b", "word": "DOES NOT HOLD", "dlgn_undecided": False}]}}}
    rows = {line.split(":")[0].strip("| "): line for line in readme_blocks.bottom_lines_table(data, record).splitlines()[2:]}
    assert list(rows) == ["C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    cells = {c: [x.strip() for x in row.split(" | ")] for c, row in rows.items()}
    assert cells["C6"][1:3] == ["*HOLDS IN PART* (1 of 2)", "(a) HOLDS<br>(b) **DOES NOT HOLD**"]
    assert cells["C2"][1].startswith("*pending*: 0 of ") and "(a) *pending*: no v4 full run of 02" in cells["C2"][2]
    assert cells["C1"][3:5] == ["SUPPORTED", "SUPPORTED"]
    assert cells["C5"][3] == "**NOT SUPPORTED**"                          # v3: one current failure decides
    assert cells["C5"][4] == "05 *INCONCLUSIVE*, 06 SUPPORTED, 10 *SMOKE TEST*, 11 SUPPORTED"
    assert cells["C7"][3] == "*pending*"                                  # 10's v3 record is of an older rule
    assert "[08](notebooks/08_x.ipynb)" in cells["C7"][5]


def test_a_parts_key_number_is_its_failing_or_undecided_check_else_the_nearest_to_its_bar():
    """Planted v4 records: the check that speaks for a part, computed from the printed values."""
    def check(name, value, low, high, op, bar, outcome):
        return {"name": name, "value": value, "low": low, "high": high, "op": op, "threshold": bar, "outcome": outcome}
    c2 = [check("moons: DLGN − DLN", "0.3", "0.25", "0.35", ">=", "0.1", "pass"),
          check("circles: DLGN − DLN", "0.12", "0.11", "0.13", ">=", "0.1", "pass"),   # nearest its bar
          check("xor: DLGN − ReLU", "0.01", "-0.02", "0.03", ">=", "-0.05", "pass"),
          check("spiral: DLGN − ReLU", "-0.04", "-0.07", "-0.01", ">=", "-0.05", "inconclusive")]
    record = {"notebooks": {"02": {"rule": 4, "verdicts": [{"claim": "C2", "profile": "full", "word": "INCONCLUSIVE",
                                                           "n_pass": 3, "n_checks": 4, "checks": c2}],
                                   "parts": [{"claim": "C2", "label": "a", "word": "HOLDS", "dlgn_undecided": False},
                                             {"claim": "C2", "label": "b", "word": "INCONCLUSIVE", "dlgn_undecided": False}]}}}
    assert full_results.key_check("C2", "a", record).name == "circles: DLGN − DLN"
    assert full_results.key_check("C2", "b", record).name == "spiral: DLGN − ReLU"
    assert full_results.key_check("C2", "c", record) is None          # no check of the part recorded
    # like for like: the ReLU net's check speaks, unless the DLGN's own check left the part undecided
    c7 = [check("R1 steps: switch distance, trained / init: DLGN", "0.6", "0.5", "0.95", "<=", "0.9", "inconclusive"),
          check("R1 steps: switch distance, trained / init: ReLU", "0.5", "0.45", "0.55", "<=", "0.9", "pass")]
    record["notebooks"]["08"] = {"rule": 4, "verdicts": [{"claim": "C7", "profile": "full", "word": "INCONCLUSIVE",
                                                        "n_pass": 1, "n_checks": 2, "checks": c7}],
                                 "parts": [{"claim": "C7", "label": "a", "word": "INCONCLUSIVE", "dlgn_undecided": True}]}
    assert full_results.key_check("C7", "a", record).name.endswith(": DLGN")
    record["notebooks"]["08"]["parts"][0].update(word="HOLDS", dlgn_undecided=False)
    c7[0]["outcome"] = "pass"
    assert full_results.key_check("C7", "a", record).name.endswith(": ReLU")


def test_no_runtime_is_typed_into_prose_by_hand():
    """Every runtime quoted in README, the course guide, the reconstruction document and the
    notebooks comes from the generated blocks (executed notebooks, docs/full_results.json)."""
    assert report.typed_runtimes() == []


def test_a_typed_runtime_is_found_and_a_generated_one_is_not(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("*Runtime:* `full` took **1,234 s** on one core."),
                nbformat.v4.new_markdown_cell("<!-- report:results -->\n`quick` ran in 56 s\n<!-- /report:results -->"),
                nbformat.v4.new_code_cell("print('7 s')")]
    nbformat.write(nb, tmp_path / "99_planted.ipynb")
    planted = [place for place in report.typed_runtimes(tmp_path) if "99_planted" in place]
    assert len(planted) == 1 and "'1,234 s'" in planted[0]


def test_the_course_guide_verdict_table_shows_now_and_every_earlier_verdict(monkeypatch, tmp_path):
    """Per notebook with a verdict: both profiles now (a full run under an older rule is not shown
    as current) and each earlier verdict as rule, convention and profile with its word and count."""
    def v(claim, word, profile, n_pass=1, n_checks=1):
        return executed_module.Verdict(claim, profile, word, n_pass, n_checks, ())

    history = {"notebooks": {"07": [
        {"verdict": "C6 [full]: SUPPORTED (2 of 2 checks pass): extra growth 0.997", "setting": 'convention "he", code version 2, full', "reason": "x"},
        {"verdict": "C6 [quick]: SUPPORTED (4 of 4 checks pass)", "setting": 'convention "group", quick (4 gating layers), rule v2, seed 100', "reason": "y"}]}}
    path = tmp_path / "history.json"
    path.write_text(json.dumps(history))
    monkeypatch.setattr(verdict, "HISTORY_FILE", path)
    monkeypatch.setattr(full_results, "current_rule", lambda n: 3)
    data = {"07": full_results.Measured("07", "07_x", [v("C6", "SMOKE TEST", "quick", 4, 4)], 1.0,
                                  [v("C6", "NOT SUPPORTED", "full", 3, 4)], 1.0, "", 3),
            "08": full_results.Measured("08", "08_x", [v("C7", "SUPPORTED", "quick")], 1.0,
                                  [v("C7", "SUPPORTED", "full")], 1.0, "", 2),
            "11": full_results.Measured("11", "11_x", [], 1.0, None, None, "", None)}
    rows = guide_blocks.verdicts_by_notebook_table(data).splitlines()
    assert rows[2] == ("| 07 | C6: *SMOKE TEST* (no verdict; 4 of 4 checks pass) | C6: **NOT SUPPORTED**, 3 of 4 (rules v3) | "
                       'C6 v1, "he", full: SUPPORTED (2 of 2)<br>C6 v2, "group", quick: SUPPORTED (4 of 4) |')
    assert rows[3] == "| 08 | C7: SUPPORTED, 1 of 1 | no run under rules v3 yet | — |"   # its full ran under v2
    assert len(rows) == 4                                                      # 11 has no verdict


def test_the_times_table_adds_the_cold_times_beside_the_recorded_ones():
    # A notebook recorded from runs trained beforehand (9 s, cold 5,000 s) beside one recorded cold
    # (100 s): as recorded 109 s, from an empty cache 5,100 s.
    data = {"01": full_results.Measured("01", "01_paths", [], 1.0, [], 100.0, "empty cache", 3, 100.0),
            "09": full_results.Measured("09", "09_table", [], 2.0, [], 9.0, "runs trained beforehand", 1, 5000.0)}
    total = readme_blocks.times_table(data).splitlines()[-1]
    assert "`full` 109 s as recorded, 5,100 s with every notebook's runs trained from an empty cache" in total


def _comparison_run(folder, monkeypatch, accuracies):
    """``folder`` with 09 executed under full: it printed a protocol comparison of SD-I runs with test
    accuracies ``accuracies`` (kind -> per-seed fractions) and wrote it as CSV, as notebook 09 does."""
    import types

    from dlgn_lib import locations, protocol
    runs = [types.SimpleNamespace(config=types.SimpleNamespace(data=protocol.all_configs(("SD-I",), seeds=(0,))[0].data,
                                                              model=types.SimpleNamespace(kind=kind), seed=seed),
                                  meta={"test_metric_at_best": acc})
            for kind, accs in accuracies.items() for seed, acc in enumerate(accs)]
    monkeypatch.setattr(protocol, "choose", lambda runs: runs)
    monkeypatch.setattr(protocol, "run_metric", lambda run, key: run.meta[key])
    monkeypatch.setattr(protocol, "_setting", lambda config: "their setting")
    table = protocol.comparison(runs, names=("SD-I",))
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(folder / "figures"))
    written = protocol.save_comparison(table, "09_odt")
    claims = [c for c, nbs in verdict.combination_rule()["claims"].items() if "09" in nbs]
    assert claims == []   # 09 judges no claim: its record is its time and its table
    nb = executed("test accuracy (%) at the first best validation pass\n" + protocol.format_comparison(table)
                  + f"\nwritten: {locations.display_path(written)}\n",
                  papermill={"duration": 12.0, "parameters": {"PROFILE": "full"}})
    nbformat.write(nb, folder / "09_table.ipynb")
    return written


def test_the_record_keeps_the_comparison_a_run_printed_and_the_record_page_shows_it(tmp_path, monkeypatch):
    folder, record = tmp_path / "full", tmp_path / "record.json"
    folder.mkdir()
    csv = _comparison_run(folder, monkeypatch, {"dlgn": [0.95, 0.97, 0.93], "dln": [0.60, 0.61, 0.59]})
    rows = full_results.record_full(folder, record)["notebooks"]["09"]["tables"]["09_odt"]
    assert [(r["model"], r["mean"], r["std"], r["n"]) for r in rows] == [("dlgn", 95.0, 2.0, 3), ("dln", 60.0, 1.0, 3)]
    assert rows[1]["published"] is None and rows[0]["published"] == 96.1
    table = readme_blocks.protocol_table(json.loads(record.read_text()))
    assert "| SD-I | DLGN | 96.1 | 95.0 ± 2.0 | -1.1 | yes | 3 |" in table   # |95.0 - 96.1| <= 2 std
    assert "| SD-I | DLN | — | 60.0 ± 1.0 | — | — | 3 |" in table
    # a table written over by a later run no longer prints as the run printed it: nothing recorded
    csv.write_text(csv.read_text().replace("95.0", "94.0"))
    before = record.read_text()
    with pytest.raises(files.Refusal, match="does not print as"):
        full_results.record_full(folder, record)
    csv.unlink()
    with pytest.raises(files.Refusal, match="not there now"):
        full_results.record_full(folder, record)
    assert record.read_text() == before
    assert "predates the record of its comparison" in readme_blocks.protocol_table({"notebooks": {"09": {}}})


def test_the_record_page_types_no_measured_number(tmp_path):
    """Every measured number on docs/record.md is in a generated block; a typed one is found."""
    assert report.typed_numbers() == []
    page = tmp_path / "record.md"
    page.write_text("Rules of reconstruction §8.2.\n<!-- report:times -->\n| 05 | 0.93 |\n<!-- /report:times -->\n"
                    "The DLGN reached 0.874 here, 37 % of the time.\n")
    found = report.typed_numbers(page)
    assert len(found) == 2 and "'0.874'" in found[0] and "'37 %'" in found[1]
