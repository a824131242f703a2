"""Numbers, skeletons and tolerances (dlgn_lib.record.reproduce), checked against hand-worked cases and
against nbval's own stream handling; the nbval plugin on a real kernel."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from dlgn_lib import locations

from dlgn_lib.record import reproduce

REPO = locations.REPO_ROOT


def test_split_finds_numbers_and_leaves_words():
    text = ("notebook 05, C5 [quick]: 05_smooth.ipynb 1,024 points, widths=(16, 16), "
            "R\u00b2 \u22120.945 and -2.389, residual 4.8e-06, bar 1.0e-10, 52%, width: 480px, colour #1f77b4, v2 S1")
    skeleton, numbers = reproduce.split(text)
    assert [n.text for n in numbers] == ["05", "1,024", "16", "16", "\u22120.945", "-2.389", "4.8e-06", "1.0e-10", "52"]
    assert [n.value for n in numbers] == [5, 1024, 16, 16, -0.945, -2.389, 4.8e-06, 1e-10, 52]
    assert skeleton == ("notebook #, C5 [quick]: 05_smooth.ipynb # points, widths=(#, #), "
                        "R\u00b2 # and #, residual #, bar #, #%, width: 480px, colour #1f77b4, v2 S1")


@pytest.mark.parametrize("text, unit", [("0.993", 1e-3), ("7.8", 0.1), ("4.8e-06", 1e-7), ("1.0e-10", 1e-11),
                                        ("12", 0.0), ("1,024", 0.0), ("0", 0.0), ("-2.5", 0.1)])
def test_unit_of_the_last_printed_digit(text, unit):
    assert reproduce.Number(text).unit == pytest.approx(unit)


def test_numbers_within_their_range_pass_and_a_planted_one_fails():
    ref = "  [pass] S2 purity gain = 0.0725  (threshold: >= 0.05)\nfit 0.886 / 0.889"
    tolerance = reproduce.Tolerance(ranges=(0.004, 0.0, 0.01, 0.0))   # numbers: 0.0725, 0.05, 0.886, 0.889 ("S2" is a word)
    near = "  [pass] S2 purity gain = 0.0806  (threshold: >= 0.05)\nfit 0.914 / 0.889"
    assert not reproduce.compare_text(ref, near, tolerance).differences    # 0.0081 <= 3 x 0.004; 0.028 <= 0.03
    planted = "  [pass] S2 purity gain = 0.0900  (threshold: >= 0.05)\nfit 0.886 / 0.890"
    result = reproduce.compare_text(ref, planted, tolerance)
    assert [d.kind for d in result.differences] == ["number"]              # 0.0175 > 0.012; 0.001 is one unit
    assert "0.0725 -> 0.0900" in result.differences[0].detail
    assert result.worst == pytest.approx(0.0175 / 0.012)


def test_a_number_that_never_moved_gets_one_unit_and_an_integer_none():
    assert not reproduce.compare_text("share 0.17", "share 0.18").differences
    assert reproduce.compare_text("share 0.17", "share 0.19").differences
    assert reproduce.compare_text("3 of 9 runs", "4 of 9 runs").differences
    assert not reproduce.compare_text("residual 0.0e+00", "residual 8.9e-16").differences   # within 0.1e+00
    assert reproduce.compare_text("residual 0", "residual 2.2e-16").differences     # an exact zero: only the record
    assert not reproduce.compare_text("residual 0", "residual 2.2e-16", reproduce.Tolerance((1.1e-16,))).differences


def test_a_table_whose_columns_shift_with_a_number_width_keeps_its_words():
    ref = "seed      100      101\nR2      0.865   -0.945"
    new = "seed      100       101\nR2      0.865    0.950"     # pandas realigns for the wider number
    assert reproduce.split(ref)[0] == reproduce.split(new)[0]
    assert [d.kind for d in reproduce.compare_text(ref, new, reproduce.Tolerance((0, 0, 0, 2.0))).differences] == []


def test_a_flipped_check_or_verdict_is_a_text_difference():
    ref = "  [pass] M2 ratio = 0.808  (threshold: < 1)\nVERDICT C5 [quick]: SUPPORTED (1 of 1 checks pass)"
    flipped = "  [FAIL] M2 ratio = 1.01  (threshold: < 1)\nVERDICT C5 [quick]: NOT SUPPORTED (0 of 1 checks pass)"
    tolerance = reproduce.Tolerance(ranges=(1.0, 0.0, 0.0, 0.0, 0.0))     # even a huge range: words decide
    result = reproduce.compare_text(ref, flipped, tolerance)
    assert [d.kind for d in result.differences] == ["text"]
    assert "[pass]" in result.differences[0].detail and "[FAIL]" in result.differences[0].detail
    seen = (("0.808", "1", "1", "1"), ("1.02", "1", "0", "1"), ("0.97", "1", "1", "1"))
    recorded = reproduce.Tolerance(ranges=(0.0, 1.0), skeletons=(reproduce.split(flipped)[0],), values=seen)
    assert not reproduce.compare_text(ref, flipped, recorded).differences, "a recorded fragile form is allowed"
    far = flipped.replace("1.01", "2.5")
    assert [d.kind for d in reproduce.compare_text(ref, far, recorded).differences] == ["number"]


def test_text_outputs_group_like_nbval():
    from nbval.plugin import coalesce_streams, transform_streams_for_comparison
    outputs = [nbformat.v4.new_output("stream", name="stdout", text="saved a\n"),
               nbformat.v4.new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure 1>"}),
               nbformat.v4.new_output("stream", name="stdout", text="saved b\n"),
               nbformat.v4.new_output("stream", name="stderr", text="warning 1\n"),
               nbformat.v4.new_output("execute_result", data={"text/plain": "42", "text/html": "<b>42</b>",
                                      "application/vnd.jupyter.widget-view+json": {"model_id": "x"}},
                                      execution_count=3)]
    ours = reproduce.text_outputs(outputs)
    theirs = {}
    for output in transform_streams_for_comparison(coalesce_streams(nbformat.from_dict(json.loads(json.dumps(outputs))))):
        for key, value in output.items():
            if key == "data":
                for data_key, data_value in value.items():
                    if data_key not in reproduce.SKIPPED_KEYS:
                        theirs.setdefault(data_key, []).append(data_value)
            elif key not in reproduce.SKIPPED_KEYS:
                theirs.setdefault(key, []).append(value)
    assert ours == theirs == {"stdout": ["saved a\nsaved b\n"], "text/plain": ["<Figure 1>", "42"],
                              "stderr": ["warning 1\n"], "text/html": ["<b>42</b>"]}


def test_spread_entries_have_one_range_per_printed_number():
    variants = {
        "committed": {"c1": {"stdout": ["a 0.50 b 12\n  [pass] x = 1.5e-06"]}},
        "v1": {"c1": {"stdout": ["a 0.52 b 12\n  [pass] x = 2.5e-06"]}},
        "v2": {"c1": {"stdout": ["a 0.47 b 12\n  [FAIL] x = 9.0e-01"]}},
    }
    entries = reproduce.spread_entries(variants)
    entry = entries["c1/stdout/0"]
    # ranges over the variants whose words equal the first one's (committed and v1)
    assert entry["ranges"] == pytest.approx([0.02, 0.0, 1.0e-06])
    assert entry["values"] == {"committed": ["0.50", "12", "1.5e-06"], "v1": ["0.52", "12", "2.5e-06"],
                               "v2": ["0.47", "12", "9.0e-01"]}
    assert entry["changed_words"] == ["[pass] x = # | [FAIL] x = #"]
    summary = reproduce.summarise(entries, "committed")
    assert summary["numbers"] == 3 and summary["numbers_that_moved"] == 2
    assert summary["checks_changed"] and summary["fragile_outputs"] == 1
    assert summary["largest_relative_spread"] == pytest.approx(1.0e-06 / 1.5e-06, rel=1e-3)


def test_every_number_of_every_committed_output_has_a_record_entry():
    record = reproduce.load_record()
    if not record["notebooks"]:
        pytest.fail("docs/spread.json is missing: run make spread")
    for path in locations.find_notebooks():
        nb_id = locations.notebook_id(path)
        outputs = reproduce.compared_outputs(path)
        entries = record["notebooks"][nb_id]["outputs"]
        for cell_id, groups in outputs.items():
            for key, texts in groups.items():
                for position, text in enumerate(texts):
                    n = len(reproduce.split(text)[1])
                    if n:
                        entry = entries[reproduce.output_key(cell_id, key, position)]
                        assert len(entry["ranges"]) == n, (nb_id, cell_id, key)
                        assert entry["values"]["committed"] == [x.text for x in reproduce.split(text)[1]]


def _notebook(path: Path, stored: str) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('print(f"[pass] value = {1/3:.3f}  (threshold: <= 1)")', execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored + "\n")]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("stored, passes", [
    ("[pass] value = 0.333  (threshold: <= 1)", True),
    ("[pass] value = 0.334  (threshold: <= 1)", True),     # one unit of the last digit
    ("[pass] value = 0.400  (threshold: <= 1)", False),    # a planted out-of-tolerance number
    ("[FAIL] value = 0.333  (threshold: <= 1)", False),    # a flipped check
])
def test_nbval_plugin_on_a_real_kernel(tmp_path, stored, passes):
    notebook = _notebook(tmp_path / "99_probe.ipynb", stored)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.nbval_tolerance", "--nbval",
                             "--nbval-current-env", "-q", "-p", "no:cacheprovider", str(notebook)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert (result.returncode == 0) == passes, result.stdout[-2000:]
    if not passes:
        assert "0.333" in result.stdout or "[FAIL]" in result.stdout


def _record(variants: dict, label: str) -> dict:
    """A one-notebook spread record of ``variants`` (name -> one cell's text), as build_record makes it."""
    entries = reproduce.spread_entries({name: {"c": {"stdout": [text]}} for name, text in variants.items()})
    checks = {"k": {name: "[pass]" in text for name, text in variants.items()}}
    return {"machine": {"cpu": label, "cpu_family_model_stepping": "1/2/3"},
            "variants": {n: {} for n in variants if n != "committed"},
            "notebooks": {"07": {"notebook": "07_x.ipynb", "variants": [n for n in variants if n != "committed"],
                                 "failed": {}, "checks": checks, "figures": {"07_a.png": {}},
                                 "summary": {}, "outputs": entries}}}


def test_merging_a_second_machine_equals_measuring_every_code_path_at_once():
    """reproduce.merge_records against a second method: one spread over all code paths together."""
    committed = "count 18 of 32, score 0.594 [pass] k\n"
    first = {"committed": committed, "pinned": committed, "native": "count 18 of 32, score 0.601 [pass] k\n"}
    second = {"committed": committed, "pinned @ B": "count 17 of 32, score 0.656 [pass] k\n",
              "native @ B": "count 19 of 32, score 0.580 [pass] k\n"}
    merged = reproduce.merge_records(_record(first, "A"), _record(second, "B"))
    together = reproduce.spread_entries({n: {"c": {"stdout": [t]}} for n, t in {**first, **second}.items()})
    entry = merged["notebooks"]["07"]["outputs"]["c/stdout/0"]
    assert entry["ranges"] == pytest.approx(together["c/stdout/0"]["ranges"])
    assert entry["ranges"] == pytest.approx([2, 0, 0.656 - 0.580])
    assert set(entry["values"]) == {"committed", "pinned", "native", "pinned @ B", "native @ B"}
    assert [m["cpu"] for m in merged["machines"]] == ["A", "B"]
    nb = merged["notebooks"]["07"]
    assert nb["variants"] == ["pinned", "native", "pinned @ B", "native @ B"]
    again = reproduce.merge_records(merged, _record(second, "B"))   # the same machine added twice
    assert again["notebooks"]["07"]["variants"] == nb["variants"]
    assert again["notebooks"]["07"]["outputs"] == merged["notebooks"]["07"]["outputs"]
    assert nb["summary"]["numbers_that_moved"] == 2 and nb["summary"]["fragile_checks"] == []
    # the 18 -> 17 of the second machine is now inside the tolerance; 18 -> 25 is not
    tolerance = reproduce.tolerance_for(merged, "07", "c", "stdout", 0)
    assert reproduce.compare_text(committed, "count 17 of 32, score 0.594 [pass] k\n", tolerance).differences == ()
    assert reproduce.compare_text(committed, "count 25 of 32, score 0.594 [pass] k\n", tolerance).differences


def test_merging_records_of_other_committed_outputs_is_refused():
    a = _record({"committed": "x 1.0\n", "pinned": "x 1.1\n"}, "A")
    b = _record({"committed": "x 2.0\n", "pinned @ B": "x 2.1\n"}, "B")
    with pytest.raises(ValueError, match="other committed outputs"):
        reproduce.merge_records(a, b)


def test_a_check_that_flips_on_the_second_machine_becomes_fragile():
    a = _record({"committed": "s 0.5 [pass] k\n", "pinned": "s 0.5 [pass] k\n"}, "A")
    b = _record({"committed": "s 0.5 [pass] k\n", "pinned @ B": "s 0.4 [FAIL] k\n"}, "B")
    merged = reproduce.merge_records(a, b)
    assert merged["notebooks"]["07"]["summary"]["fragile_checks"] == ["k"]
    assert merged["notebooks"]["07"]["outputs"]["c/stdout/0"]["skeletons"]


def test_new_outputs_of_one_notebook_replace_its_entry_and_keep_the_others():
    """A notebook re-committed with new outputs (a new rule) gets this machine's spread; the other
    notebooks keep every machine's, and the replaced entry names the machine that measured it."""
    old = reproduce.merge_records(_record({"committed": "x 1.0\n", "pinned": "x 1.1\n"}, "A"),
                               _record({"committed": "x 1.0\n", "pinned @ B": "x 0.9\n"}, "B"))
    old["notebooks"]["05"] = json.loads(json.dumps(old["notebooks"]["07"]))
    new = _record({"committed": "x 2.0 [pass] k\n", "pinned": "x 2.2 [pass] k\n", "native": "x 1.9 [pass] k\n"}, "C")
    replaced = reproduce.replace_notebooks(old, new, ["07"])
    assert replaced["notebooks"]["05"] == old["notebooks"]["05"]
    entry = replaced["notebooks"]["07"]
    label = reproduce.machine_label(new["machine"])
    assert entry["variants"] == [f"pinned @ {label}", f"native @ {label}"]
    assert set(entry["outputs"]["c/stdout/0"]["values"]) == {"committed", *entry["variants"]}
    assert entry["outputs"]["c/stdout/0"]["ranges"] == pytest.approx([0.3])
    assert entry["measured_on"]["machine"] == reproduce.machine_label(new["machine"])
    assert set(entry["checks"]["k"]) == {"committed", *entry["variants"]}
    assert [m["label"] for m in replaced["machines"]] == [m["label"] for m in old["machines"]] + [label]
    assert replaced["machines"][-1]["notebooks"] == ["07"] and "notebooks" not in replaced["machines"][0]
    again = reproduce.replace_notebooks(replaced, new, ["07"])      # the same machine again: listed once
    assert again["machines"] == replaced["machines"]
    # tolerance now comes from the new measurement alone
    tolerance = reproduce.tolerance_for(replaced, "07", "c", "stdout", 0)
    assert reproduce.compare_text("x 2.0 [pass] k\n", "x 2.25 [pass] k\n", tolerance).differences == ()
    assert reproduce.compare_text("x 2.0 [pass] k\n", "x 3.5 [pass] k\n", tolerance).differences
    with pytest.raises(ValueError, match="notebook 99: no code path ran it"):
        reproduce.replace_notebooks(old, new, ["99"])


def test_the_lines_that_follow_from_a_record_are_those_the_record_gives_now():
    """nbval's sanitize file drops fragile notes and masks the full result a smoke test names,
    because they follow from docs/spread.json and docs/full_results.json; here they are compared
    with what those records give now, in every committed notebook."""
    import re
    from dlgn_lib import verdict
    from dlgn_lib.record import executed, full_results
    patterns = reproduce.sanitize_patterns()
    assert any("full_results" in regex for regex, _ in patterns) and any("fragile" in regex for regex, _ in patterns)
    smoke = re.compile(r"^SMOKE TEST (\S+) \[quick\] \(quick cannot decide \S+: (.*); the full result in ")
    for path in locations.find_notebooks(locations.REPO_ROOT / "notebooks"):
        nb_id = locations.notebook_id(path)
        nb = nbformat.read(path, as_version=4)
        lines = executed._stdout_lines(nb)
        expected_fragile = [line for v in executed.verdicts_of(nb) if v.profile == "quick" and v.word != "SMOKE TEST"
                            for line in verdict.fragile_lines(reproduce.check_outcomes(nb_id), [c.name for c in v.checks])]
        assert [ln for ln in lines if ln.startswith(verdict.FRAGILE_MARK)] == ["  " + " ".join(x.split())
                                                                        for x in expected_fragile], nb_id
        for line in lines:
            if m := smoke.match(line):
                now = " ".join(verdict.smoke_line(m[1], m[2], full_results.recorded_full(nb_id, m[1])).split())
                assert line == now, f"{nb_id}: run python -m dlgn_lib.record.reproduce outputs --only {nb_id}"


def test_a_machine_is_listed_once_with_the_notebooks_it_measured():
    new = _record({"committed": "x 1.0\n", "pinned": "x 1.1\n"}, "C")
    label = reproduce.machine_label(new["machine"])
    first = reproduce.with_machine([{"label": "A"}], new, ["05"])
    assert [m["label"] for m in first] == ["A", label] and first[1]["notebooks"] == ["05"]
    again = reproduce.with_machine(first, {**new, "code_version": "later"}, ["08", "06"])
    assert [m["label"] for m in again] == ["A", label] and again[1]["notebooks"] == ["05", "06", "08"]
    assert again[1]["code_version"] == "later" and first[1]["code_version"] == new.get("code_version")
    assert "notebooks" not in reproduce.with_machine(first, new, None)[1]     # then it measured them all
    assert first[1]["notebooks"] == ["05"]                                  # the input is not changed


def test_check_outcomes_keep_inconclusive_for_a_count_without_an_interval(tmp_path):
    """A row-count check (08, rules v3) prints no interval but may be inconclusive: the spread record
    stores "inconclusive", not False; a one-number check stays True / False."""
    import nbformat
    lines = ["  [pass] rows where the DLGN shows the effect (R1) = 5  (threshold: >= 4; counted from the rows' "
             "outcomes, 5 to 5 with the undecided rows)",
             "  [inconclusive] of those, rows where the ReLU net does not (none; undecided: R6) = 0  (threshold: <= 0; "
             "counted from the rows' outcomes, 0 to 1 with the undecided rows)",
             "VERDICT C7 [quick]: INCONCLUSIVE (1 of 2 checks pass, 0 fail, 1 inconclusive)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x", outputs=[nbformat.v4.new_output("stream", name="stdout", text="\n".join(lines) + "\n")])])
    path = tmp_path / "08_x.ipynb"
    nbformat.write(nb, path)
    outcomes = reproduce.outcomes_of_copies({"pinned": path})
    assert outcomes["of those, rows where the ReLU net does not (none; undecided: R6)"] == {"pinned": "inconclusive"}
    assert outcomes["rows where the DLGN shows the effect (R1)"] == {"pinned": True}


def _outputs(text: str) -> dict:
    return {"c": {"stdout": [text]}}


def test_outputs_remade_on_a_recorded_code_path_move_the_committed_values_and_keep_the_spread():
    """reproduce outputs on a machine whose code path the record measured: the reference becomes that
    code path's outputs; every recorded code path still passes against it."""
    old = "count 18 of 32, score 0.594 [pass] k\n"
    variants = {"committed": old, "pinned @ A": old, "native @ A": "count 18 of 32, score 0.601 [pass] k\n",
                "pinned @ B": "count 17 of 32, score 0.620 [pass] k\n"}
    record = _record(variants, "A")
    rebased = reproduce.rebase_committed(record, "07", _outputs(old), _outputs(variants["pinned @ B"]))
    entry = rebased["notebooks"]["07"]["outputs"]["c/stdout/0"]
    assert entry["values"]["committed"] == ["17", "32", "0.620"]
    assert entry["ranges"] == record["notebooks"]["07"]["outputs"]["c/stdout/0"]["ranges"] == pytest.approx([1, 0, 0.026])
    assert rebased["notebooks"]["07"]["committed_on"]["machine"] == reproduce.machine_label()
    assert record["notebooks"]["07"]["outputs"]["c/stdout/0"]["values"]["committed"] == ["18", "32", "0.594"]  # not mutated
    tolerance = reproduce.tolerance_for(rebased, "07", "c", "stdout", 0)
    for text in variants.values():
        assert reproduce.compare_text(variants["pinned @ B"], text, tolerance).differences == ()


def test_outputs_no_recorded_code_path_printed_leave_the_record_and_say_to_measure_again():
    old = "score 0.594 [pass] k\n"
    record = _record({"committed": old, "pinned": old, "native": "score 0.601 [pass] k\n"}, "A")
    with pytest.raises(ValueError, match=r"prints 0\.7, which no recorded code path printed; "
                                         r"run python -m dlgn_lib.record.reproduce spread --only 07"):
        reproduce.rebase_committed(record, "07", _outputs(old), _outputs("score 0.7 [pass] k\n"))
    with pytest.raises(ValueError, match="its words changed"):     # a flip no code path showed
        reproduce.rebase_committed(record, "07", _outputs(old), _outputs("score 0.594 [FAIL] k\n"))
    with pytest.raises(ValueError, match="no longer printed"):
        reproduce.rebase_committed(record, "07", _outputs(old), {})
    with pytest.raises(ValueError, match="notebook 99: not in the spread record"):
        reproduce.rebase_committed(record, "99", _outputs(old), _outputs(old))


def test_a_fragile_output_remade_in_its_other_words_gets_the_range_over_every_code_path():
    """A check that passes on one code path and is inconclusive on another: remade where it is
    inconclusive, the reference takes those words, and its numbers' range spans every code path."""
    passing, straddling = "m 0.30 [0.24, 0.79] [pass] k\n", "m 0.30 [0.24, 1.00] [inconclusive] k\n"
    record = _record({"committed": passing, "pinned @ A": passing, "native @ A": "m 0.31 [0.25, 0.80] [pass] k\n",
                      "pinned @ B": straddling}, "A")
    assert record["notebooks"]["07"]["outputs"]["c/stdout/0"]["ranges"] == pytest.approx([0.01, 0.01, 0.01])
    rebased = reproduce.rebase_committed(record, "07", _outputs(passing), _outputs(straddling))
    entry = rebased["notebooks"]["07"]["outputs"]["c/stdout/0"]
    assert entry["ranges"] == pytest.approx([0.01, 0.01, 0.21])
    assert entry["skeletons"][0] == reproduce.split(straddling)[0]
    tolerance = reproduce.tolerance_for(rebased, "07", "c", "stdout", 0)
    for text in (passing, straddling, "m 0.31 [0.25, 0.80] [pass] k\n"):
        assert reproduce.compare_text(straddling, text, tolerance).differences == ()


def test_remade_outputs_carry_their_check_outcomes_if_a_recorded_code_path_had_them():
    text = "m 0.30 [pass] k\n"
    record = _record({"committed": text, "pinned": text, "native": "m 0.31 [FAIL] k\n"}, "A")
    rebased = reproduce.rebase_committed(record, "07", _outputs(text), _outputs(text), {"k": False})
    assert rebased["notebooks"]["07"]["checks"]["k"] == {"committed": False, "pinned": True, "native": False}
    with pytest.raises(ValueError, match="check 'k': 'inconclusive' is an outcome no recorded code path had"):
        reproduce.rebase_committed(record, "07", _outputs(text), _outputs(text), {"k": "inconclusive"})
