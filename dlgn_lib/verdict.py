"""Verdicts: a claim's measured numbers against thresholds fixed in the notebook beforehand.

Each check prints its metric, the comparison and the threshold; the verdict line reads
``VERDICT C5 [quick]: SUPPORTED (3 of 3 checks pass)`` or ``NOT SUPPORTED``. Nothing here adjusts
a threshold: a claim that fails its checks is reported as not supported, with its numbers.
Earlier verdicts stay visible: ``history`` prints those of ``verdict_history.json`` beside the
current one (reconstruction §8).
"""
from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass
from pathlib import Path

_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def format_number(value: float, digits: int = 3) -> str:
    """Round for printing: ``digits`` significant figures, scientific notation when tiny or huge."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    value = float(value)
    if value == 0:
        return "0"
    if abs(value) < 1e-3 or abs(value) >= 1e5:
        return f"{value:.{max(digits - 1, 0)}e}"
    return f"{value:.{digits}g}"


@dataclass(frozen=True)
class Check:
    """One measured metric compared with a fixed threshold."""
    name: str
    value: float
    op: str
    threshold: float
    digits: int = 3

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"op={self.op!r} is not allowed; choose one of {list(_OPS)}")

    @property
    def passed(self) -> bool:
        return not math.isnan(float(self.value)) and bool(_OPS[self.op](float(self.value), self.threshold))

    def line(self) -> str:
        mark = "pass" if self.passed else "FAIL"
        return (f"  [{mark}] {self.name} = {format_number(self.value, self.digits)}"
                f"  (threshold: {self.op} {format_number(self.threshold, self.digits)})")


@dataclass(frozen=True)
class Verdict:
    claim: str
    profile: str
    checks: tuple[Check, ...]

    @property
    def supported(self) -> bool:
        return all(c.passed for c in self.checks)

    def text(self) -> str:
        n_pass = sum(c.passed for c in self.checks)
        word = "SUPPORTED" if self.supported else "NOT SUPPORTED"
        lines = [c.line() for c in self.checks]
        lines.append(f"VERDICT {self.claim} [{self.profile}]: {word} "
                     f"({n_pass} of {len(self.checks)} checks pass)")
        return "\n".join(lines)


def check(name: str, value: float, op: str, threshold: float, digits: int = 3) -> Check:
    """A check ``value op threshold``, e.g. ``check("max |path sum - forward|", err, "<=", 1e-10)``."""
    return Check(name, float(value), op, float(threshold), digits)


def evaluate(claim: str, checks, profile: str) -> Verdict:
    """Combine checks into a claim's verdict: supported when every check passes."""
    checks = tuple(checks)
    if not checks:
        raise ValueError("a verdict needs at least one check")
    return Verdict(claim, profile, checks)


def verdict(claim: str, checks, profile: str) -> None:
    """Print a claim's checks and its verdict line (see ``evaluate``); returns nothing, so the
    notebook shows the printed lines only.

    Under ``quick``, a check whose pass/fail changed across CPU code paths in ``docs/spread.json``
    (reconstruction §7) is named below the verdict line as a fragile result.
    """
    result = evaluate(claim, checks, profile)
    print(result.text())
    if profile == "quick":
        from dlgn_lib import config
        made_by = config.made_by()
        for line in fragile_lines(made_by["notebook"] if made_by else None, [c.name for c in result.checks]):
            print(line)


#: How a fragile-result line starts (nbval's sanitize file drops these lines: they follow from the
#: spread record, which tests/test_reproduce.py checks against the notebooks).
FRAGILE_MARK = "  fragile across CPU code paths:"


def fragile_lines(notebook: str | None, names) -> list[str]:
    """Lines naming the checks of ``names`` whose pass/fail changed across the code paths of the
    spread record, with how many code paths passed them."""
    if notebook is None:
        return []
    from dlgn_lib import reproduce
    checks = reproduce.load_record().get("notebooks", {}).get(notebook, {}).get("checks", {})
    lines = []
    for name in names:
        outcomes = {k: v for k, v in checks.get(name, {}).items() if k != "committed"}   # code paths only
        passed = sum(outcomes.values())
        if 0 < passed < len(outcomes):
            lines.append(f"{FRAGILE_MARK} {name}: passes under {passed} of {len(outcomes)} "
                         f"(docs/spread.json); its pass/fail is not decided by this run alone")
    return lines


HISTORY_FILE = Path(__file__).with_name("verdict_history.json")
#: Notebooks of the series that judge no claim: the primer, the benchmark table, the C5 map.
WITHOUT_VERDICT = ("00", "09", "11")
#: How ``history`` starts each earlier verdict line, so that readers of the outputs (the series
#: runner's summary) can tell earlier verdicts from current ones.
EARLIER_MARK = "earlier:"


def earlier_verdicts(notebook: str) -> list[dict]:
    """The earlier verdicts of a notebook ("04"), oldest first: each a dict with ``verdict``,
    ``setting``, ``status`` and ``reason`` (``verdict_history.json``, reconstruction §8)."""
    notebooks = json.loads(HISTORY_FILE.read_text())["notebooks"]
    return list(notebooks.get(notebook, []))


def history(notebook: str) -> None:
    """Print a notebook's earlier verdicts beside its current one (printed above by its verdict
    cell): what each said, under which setting, and why it was superseded."""
    entries = earlier_verdicts(notebook)
    if not entries:
        print(f"notebook {notebook}: no verdict, and none earlier (a map or a table)" if notebook in WITHOUT_VERDICT
              else f"notebook {notebook}: no earlier verdict; the verdict above is its first")
        return
    print(f"notebook {notebook}: earlier verdicts (the current one is printed above)")
    for entry in entries:
        print(f"  {EARLIER_MARK} {entry['verdict']}\n    setting: {entry['setting']}; {entry['status']}: "
              f"{entry['reason']}")


#: The registry of verdict rules (reconstruction §8): every rule that replaced an earlier one,
#: stated and committed before any of its runs, with its thresholds, settings, seeds and targets.
RULES_FILE = Path(__file__).with_name("verdict_rules.json")
_RULE_KEYS = {"notebook", "claim", "version", "registered", "status", "statement", "thresholds",
              "settings", "seeds", "targets", "replaces", "why"}
RULE_STATUSES = ("registered", "measured", "retired")


def registered_rules(notebook: str | None = None) -> list[dict]:
    """The registered rules, oldest first; only those of ``notebook`` ("02") when given.

    Each is a dict with ``notebook``, ``claim``, ``version``, ``registered`` (date), ``status``
    (``RULE_STATUSES``: registered before its runs, measured, or retired), ``statement``,
    ``thresholds`` (name → value, the notebook's constants), ``settings``, ``seeds``, ``targets``,
    ``replaces`` (the earlier rule) and ``why`` it was replaced.
    """
    rules = json.loads(RULES_FILE.read_text())["rules"]
    for rule in rules:
        missing, extra = _RULE_KEYS - set(rule), set(rule) - _RULE_KEYS
        if missing or extra or rule["status"] not in RULE_STATUSES:
            raise ValueError(f"{RULES_FILE.name}: rule {rule.get('claim')} v{rule.get('version')} of notebook "
                             f"{rule.get('notebook')} is malformed (missing {sorted(missing)}, unknown "
                             f"{sorted(extra)}, status {rule.get('status')!r}; allowed {list(RULE_STATUSES)})")
    return [r for r in rules if notebook is None or r["notebook"] == notebook]


def rules(notebook: str) -> None:
    """Print a notebook's registered rules: version, date, status, statement, thresholds, seeds."""
    entries = registered_rules(notebook)
    if not entries:
        print(f"notebook {notebook}: its rules are the first ones, stated in the notebook")
        return
    for rule in entries:
        thresholds = ", ".join(f"{k} = {v:g}" for k, v in rule["thresholds"].items())
        print(f"{rule['claim']} rule v{rule['version']} (registered {rule['registered']}, {rule['status']}): "
              f"{rule['statement']}\n  thresholds: {thresholds}\n  settings: {rule['settings']}\n"
              f"  seeds: {rule['seeds']}\n  targets: {rule['targets']}\n"
              f"  replaces: {rule['replaces']}\n  why: {rule['why']}")
