"""Verdict lines: numbers, thresholds and outcome as printed in the notebooks."""
import math

import pytest

from dlgn_lib import verdict as V
from dlgn_lib.record.executed import _HEADS
from dlgn_lib.text import logical_lines


@pytest.mark.parametrize("value,op,threshold,passed", [
    (1e-12, "<=", 1e-10, True), (1e-10, "<=", 1e-10, True), (2e-10, "<=", 1e-10, False),
    (0.5, ">=", 0.5, True), (0.5, ">", 0.5, False), (0.4, "<", 0.5, True), (math.nan, ">=", 0.0, False)])
def test_check_compares_as_written(value, op, threshold, passed):
    assert V.check("m", value, op, threshold).passed is passed


def test_verdict_needs_every_check(capsys):
    good, bad = V.check("a", 1.0, ">=", 0.5), V.check("b", 0.1, ">=", 0.5)
    assert V.evaluate("C9", [good], "quick").supported
    assert not V.evaluate("C9", [good, bad], "quick").supported
    V.verdict("C9", [good, bad], "full")
    out = capsys.readouterr().out.splitlines()
    assert out == ["  [pass] a = 1  (threshold: >= 0.5)", "  [FAIL] b = 0.1  (threshold: >= 0.5)",
                   "VERDICT C9 [full]: NOT SUPPORTED (1 of 2 checks pass)"]


# --- rules v3: intervals and three outcomes ----------------------------------------------------------

@pytest.mark.parametrize("low,high,op,threshold,outcome", [
    (0.61, 0.68, "<=", 0.5, "fail"), (0.30, 0.45, "<=", 0.5, "pass"), (0.45, 0.55, "<=", 0.5, "inconclusive"),
    (0.5, 0.7, ">=", 0.5, "pass"), (0.5, 0.7, ">", 0.5, "inconclusive"), (0.2, 0.5, "<", 0.5, "inconclusive"),
    (0.1, 0.4, ">=", 0.5, "fail"), (math.nan, 0.4, ">=", 0.0, "fail")])
def test_an_interval_passes_fails_or_is_inconclusive_against_its_threshold(low, high, op, threshold, outcome):
    assert V.outcome_of(low, high, op, threshold) == outcome


def test_a_planted_straddling_interval_gives_inconclusive(capsys):
    # ten seeds around the threshold: mean 0.1, exact 90 % seed-bootstrap interval straddles 0.1
    straddling = [0.02, 0.18, 0.05, 0.15, 0.10, 0.08, 0.12, 0.01, 0.19, 0.10]
    clear = [0.31, 0.29, 0.35, 0.30, 0.33, 0.28, 0.32, 0.30, 0.34, 0.31]
    checks = [V.seed_check("clear gain", clear, ">=", 0.1), V.seed_check("tolerant gain", straddling, ">=", 0.1)]
    assert [c.outcome for c in checks] == ["pass", "inconclusive"]
    assert V.evaluate("C9", checks, "quick").word == "INCONCLUSIVE"
    V.verdict("C9", checks, "full")
    out = [" ".join(line.split()) for line in logical_lines(capsys.readouterr().out.splitlines(), _HEADS)]
    e = checks[1].estimate
    assert e.low < 0.1 < e.high and e.method == "exact bootstrap" and e.n == 10
    assert out[1] == (f"[inconclusive] tolerant gain = 0.1, 90% [{V.format_number(e.low)}, {V.format_number(e.high)}]"
                      " (threshold: >= 0.1; mean over 10 seeds, exact bootstrap)")
    assert out[-1] == "VERDICT C9 [full]: INCONCLUSIVE (1 of 2 checks pass, 0 fail, 1 inconclusive)"


def test_one_failing_interval_makes_not_supported_even_beside_an_inconclusive_one():
    checks = [V.seed_check("a", [0.0, 0.05, 0.02, 0.01], ">=", 0.5),
              V.seed_check("b", [0.4, 0.6, 0.5, 0.55], ">=", 0.5),
              V.exact_check("max error over 10 seeds", 3e-15, 10, "<=", 1e-10)]
    assert [c.outcome for c in checks] == ["fail", "inconclusive", "pass"]
    assert V.evaluate("C9", checks, "quick").word == "NOT SUPPORTED"
    lines = checks[2].line().split("\n")   # wrapped to the book's column, the second line indented 6
    assert len(lines) == 2 and all(len(x) <= 76 for x in lines) and lines[1].startswith("      (threshold: <= 1.00e-10")
    assert " ".join(" ".join(lines).split()) == ("[pass] max error over 10 seeds = 3.00e-15 "
                                                 "(threshold: <= 1.00e-10; worst case over 10 seeds, exact)")


def test_a_check_that_already_passes_at_initialisation_is_refused():
    trained, init = [0.95, 0.97, 0.96, 0.98], [0.93, 0.99, 0.94, 0.97]
    with pytest.raises(V.RuleError, match="already passes at initialisation .* measures nothing"):
        V.seed_check("mean cos", trained, ">=", 0.9, init=init)
    # the same comparison as trained − init, which is 0 at init by construction, is a real check
    gain = V.seed_check("mean cos, trained − init", V.difference(trained, init), ">=", 0.0)
    assert gain.outcome == "inconclusive"
    # a check that fails at init keeps its init estimate
    kept = V.seed_check("share on a node", [0.3, 0.4, 0.35], ">=", 0.2, init=[0.0, 0.01, 0.0])
    assert kept.outcome == "pass" and kept.init.value == pytest.approx(0.01 / 3)


def test_a_share_uses_the_exact_binomial_interval():
    c = V.share_check("seeds where the smooth arc leads", 9, 10, ">=", 0.5)
    assert c.outcome == "pass" and c.estimate.method == "Clopper-Pearson"
    assert V.share_check("x", 6, 10, ">=", 0.5).outcome == "inconclusive"


def test_a_claims_bottom_line_follows_the_registered_combination():
    rule = V.combination_rule()
    assert rule["claims"]["C5"] == ["05", "06", "10"] and rule["claims"]["C7"] == ["06", "08", "10"]
    assert sorted(rule["claims"]) == ["C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    s, n, i = "SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE"
    assert V.bottom_line("C5", {"05": s, "06": s, "10": s}) == s
    assert V.bottom_line("C5", {"05": n, "06": s, "10": None}) == n      # one failure decides
    assert V.bottom_line("C5", {"05": i, "06": s, "10": s}) == i
    assert V.bottom_line("C5", {"05": s, "06": None, "10": i}) == V.PENDING
    assert V.bottom_line("C4", {"04": i}) == i
    with pytest.raises(ValueError, match="registered ones are"):
        V.bottom_line("C5", {"05": s, "06": s})
    with pytest.raises(ValueError, match="unknown verdict words"):
        V.bottom_line("C4", {"04": "MAYBE"})


def test_the_report_reads_v3_lines_back():
    import nbformat
    from dlgn_lib.record import executed
    checks = [V.seed_check("gain", [0.31, 0.29, 0.35], ">=", 0.1), V.seed_check("other", [0.0, 0.2, 0.1], ">=", 0.1)]
    text = V.evaluate("C9", checks, "quick").text() + "\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=text)])])
    (found,) = executed.verdicts_of(nb)
    assert (found.word, found.n_pass, found.n_checks) == ("INCONCLUSIVE", 1, 2)
    assert [(c.name, c.outcome, c.low, c.high) for c in found.checks] == [
        ("gain", "pass", V.format_number(checks[0].estimate.low), V.format_number(checks[0].estimate.high)),
        ("other", "inconclusive", V.format_number(checks[1].estimate.low), V.format_number(checks[1].estimate.high))]


def test_bad_operator_and_empty_verdict_are_errors():
    with pytest.raises(ValueError, match="op"):
        V.check("a", 1.0, "=>", 0.5)
    with pytest.raises(ValueError, match="at least one"):
        V.evaluate("C1", [], "quick")


@pytest.mark.parametrize("value,text", [(0.12345, "0.123"), (1.1e-14, "1.10e-14"), (0, "0"),
                                        (123456.0, "1.23e+05"), (12.5, "12.5")])
def test_format_number(value, text):
    assert V.format_number(value) == text


def test_history_prints_every_earlier_verdict_with_its_setting_and_reason(capsys):
    import json
    from dlgn_lib.verdict import HISTORY_FILE, earlier_verdicts, history
    registry = json.loads(HISTORY_FILE.read_text())["notebooks"]
    assert registry, "the registry lists earlier verdicts"
    for notebook, entries in registry.items():
        assert earlier_verdicts(notebook) == entries
        history(notebook)
        short = capsys.readouterr().out
        assert short.startswith(f"notebook {notebook}: {len(entries)} earlier verdict") and "docs/record.md" in short
        assert max(map(len, short.splitlines())) <= 76 and len(short.splitlines()) <= 2, "one line, at most wrapped once"
        history(notebook, every=True)
        out = capsys.readouterr().out
        for entry in entries:
            assert set(entry) == {"verdict", "setting", "status", "reason"}
            assert "SUPPORTED" in entry["verdict"] and entry["reason"]
            assert entry["verdict"] in out and entry["reason"] in out and entry["setting"] in out
    history("00")
    assert capsys.readouterr().out == "notebook 00: no verdict, and none earlier (a map or a table)\n"
    history("99")   # a notebook with a verdict but no earlier one
    assert capsys.readouterr().out == "notebook 99: no earlier verdict; the verdict above is its first\n"


def _code_of(notebook: str) -> str:
    import json
    from pathlib import Path
    path = next((Path(__file__).parents[1] / "notebooks").glob(f"{notebook}_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_a_notebook_prints_its_current_rule_short_and_names_the_replaced_ones(capsys):
    from dlgn_lib.text import TEXT_WIDTH
    from dlgn_lib.verdict import RULE_LINES, registered_rules, rules
    by_notebook = {}
    for rule in registered_rules():
        by_notebook.setdefault(rule["notebook"], []).append(rule)
    for notebook, entries in by_notebook.items():
        rules(notebook)
        lines = capsys.readouterr().out.splitlines()
        newest = {}
        for rule in entries:
            newest[rule["claim"]] = max(rule["version"], newest.get(rule["claim"], 0))
        printed = [line for line in lines if not line.startswith(" ")]
        assert printed == [next(line for line in lines if line.startswith(f"{claim} rule v{version} "))
                           for claim, version in newest.items()], "only the current rule of each claim"
        assert max(map(len, lines)) <= TEXT_WIDTH
        # per claim: its statement in at most RULE_LINES lines, its seeds and targets in one
        statements = [i for i, line in enumerate(lines) if not line.startswith(" ")]
        for i in statements:
            seeds = next(j for j in range(i, len(lines)) if lines[j].startswith("  seeds: "))
            assert seeds - i <= RULE_LINES and not lines[seeds + 1].startswith("      ")
        assert len(lines) <= len(newest) * (RULE_LINES + 1) + 2
        older = [f"v{r['version']}" for r in entries if r["version"] < newest[r["claim"]]]
        assert lines[-1] == f'  the whole rule: dl.verdict.rules("{notebook}", every=True)'
        if older:
            assert lines[-2].strip().startswith(f"replaced: {', '.join(older)} (docs/record.md")
        rules(notebook, every=True)
        every = capsys.readouterr().out
        assert all(f"{r['claim']} rule v{r['version']} (registered" in every and r["why"] in every for r in entries)


def test_a_rule_cut_short_ends_at_a_sentence_or_clause_and_says_so(capsys):
    from dlgn_lib.verdict import RULE_LINES, _say
    text = "First sentence is here. " * 12 + "And a last one that runs on and on"
    _say(text.strip(), most=RULE_LINES)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= RULE_LINES and lines[-1].endswith("here. …")
    _say("short one", most=RULE_LINES)
    assert capsys.readouterr().out == "short one\n"


def test_registered_rules_are_the_thresholds_their_notebooks_use(capsys):
    import re
    from dlgn_lib.verdict import registered_rules, rules
    entries = registered_rules()
    assert entries, "the registry lists at least one rule"
    for rule in entries:
        code = _code_of(rule["notebook"])
        assert f'dl.verdict.rules("{rule["notebook"]}")' in code, "the notebook prints its rules"
        if rule["status"] == "retired":
            continue
        for name, value in rule["thresholds"].items():
            found = re.findall(rf"^{name}\s*=\s*([-+0-9.eE]+)", code, flags=re.M)
            assert found and float(found[0]) == value, f"{rule['notebook']} {name}: {found} vs {value}"
        rules(rule["notebook"], every=True)
        out = capsys.readouterr().out
        assert f"{rule['claim']} rule v{rule['version']}" in out and rule["statement"] in out
    rules("00")
    assert "first ones" in capsys.readouterr().out


def test_a_malformed_rule_is_an_error_naming_it(tmp_path, monkeypatch):
    import json
    from dlgn_lib import verdict
    bad = tmp_path / "rules.json"
    bad.write_text(json.dumps({"rules": [{"notebook": "02", "claim": "C2", "version": 3, "status": "done"}]}))
    monkeypatch.setattr(verdict, "RULES_FILE", bad)
    with pytest.raises(ValueError, match=r"C2 v3 of notebook 02 is malformed.*status 'done'"):
        verdict.registered_rules()


def test_verify_reports_whether_quick_and_full_intervals_overlap():
    from dlgn_lib.record import executed, reproduce
    quick = [V.seed_check("share", [0.50, 0.52, 0.48, 0.55, 0.51], ">=", 0.2),
             V.seed_check("rise", [0.16, 0.17, 0.15, 0.17, 0.16], ">=", 0.1),
             V.check("old-style", 1.0, ">=", 0.5)]
    full = [V.seed_check("share", [0.28, 0.31, 0.30, 0.29, 0.32], ">=", 0.2),
            V.seed_check("rise", [0.14, 0.18, 0.16, 0.20, 0.17], ">=", 0.1)]

    def parsed(checks):
        import nbformat
        text = V.evaluate("C5", checks, "quick").text() + "\n"
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text=text)])])
        return executed.verdicts_of(nb)

    overlapping, compared, apart = reproduce.interval_overlaps(parsed(quick), parsed(full))
    assert (overlapping, compared) == (1, 2)   # the old-style check has no interval and is not compared
    assert len(apart) == 1 and apart[0].startswith("C5 share: quick [0.49") and "full [0.29" in apart[0]


def test_a_smoke_line_names_the_rule_an_older_full_record_ran_under(tmp_path, monkeypatch):
    import json
    from dlgn_lib.record import full_results
    checks = [{"name": "a", "op": ">=", "threshold": "0.1", "value": "0.2", "passed": True},
              {"name": "b", "op": ">=", "threshold": "0.1", "value": "0.0", "passed": False}]
    entry = {"verdicts": [{"claim": "C5", "profile": "full", "n_checks": 2, "n_pass": 1, "supported": False,
                           "checks": checks}]}
    record = tmp_path / "full_results.json"
    monkeypatch.setattr(full_results, "FULL_RECORD", record)
    monkeypatch.setattr(full_results, "current_rule", lambda notebook: 3)
    for rule, expected in ((None, "(1 of 2 checks pass) under an earlier rule; no full run under rule v3 yet"),
                           (2, "(1 of 2 checks pass) under rule v2; no full run under rule v3 yet"),
                           # rules v3 counts all three outcomes, with or without intervals (08's row counts)
                           (3, "(1 of 2 checks pass, 1 fail, 0 inconclusive)")):
        record.write_text(json.dumps({"notebooks": {"05": {**entry, **({} if rule is None else {"rule": rule})}}}))
        assert full_results.recorded_full("05", "C5") == "NOT SUPPORTED " + expected
    monkeypatch.setattr(full_results, "current_rule", lambda notebook: 2)   # before rules v3: the rule of its time
    record.write_text(json.dumps({"notebooks": {"05": entry}}))
    assert full_results.recorded_full("05", "C5") == "NOT SUPPORTED (1 of 2 checks pass)"
    assert full_results.recorded_full("06", "C5") == "not recorded"
