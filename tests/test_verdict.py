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
    assert "no earlier verdict" in capsys.readouterr().out
