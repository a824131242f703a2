"""Verdict lines: numbers, thresholds and outcome as printed in the notebooks."""
import math

import pytest

from dlgn_lib import verdict as V


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
        rules(rule["notebook"])
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
