"""Verdicts: a claim's measured numbers against thresholds fixed in the notebook beforehand.

Each check prints its metric, the comparison and the threshold; the verdict line reads
``VERDICT C5 [quick]: SUPPORTED (3 of 3 checks pass)`` or ``NOT SUPPORTED``. Nothing here adjusts
a threshold: a claim that fails its checks is reported as not supported, with its numbers.

Rules v3 (reconstruction §8.1): a check over seeds (``seed_check``, ``share_check``) carries a 90 %
interval and has three outcomes: pass (the interval on the claimed side of the threshold), fail
(on the other side), inconclusive (it straddles). A verdict is SUPPORTED when every check passes,
NOT SUPPORTED when one fails, else INCONCLUSIVE. A check given its values at initialisation is
refused (``RuleError``) when it already passes there: it would measure nothing.

Earlier verdicts stay visible: ``history`` prints those of ``verdict_history.json`` beside the
current one (reconstruction §8).
"""
from __future__ import annotations

import json
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .text import wrap

__all__ = ["EARLIER_MARK", "FAIL", "HISTORY_FILE", "INCONCLUSIVE", "MARKS", "NOT_RECORDED", "PASS", "PENDING",
           "RULES_FILE", "Recorded", "SMOKE_MARK", "UndecidedCheck", "bottom_line", "combination_rule",
           "difference", "exact_check", "format_number", "history", "outcome_name", "registered_rules",
           "row_count_check", "rules", "seed_check", "undecided_check", "use_record", "verdict"]

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

    @property
    def outcome(self) -> str:
        """"pass" or "fail": a single number has no third outcome."""
        return PASS if self.passed else FAIL

    def line(self) -> str:
        mark = "pass" if self.passed else "FAIL"
        return wrap(f"[{mark}] {self.name} = {format_number(self.value, self.digits)}"
                    f"  (threshold: {self.op} {format_number(self.threshold, self.digits)})", "  ", breaks=[THRESHOLD_PHRASE])


#: Where a check's line that does not fit the column continues on a further line.
THRESHOLD_PHRASE = "(threshold:"
#: A check's outcomes: it passes, it fails, or its interval straddles the threshold.
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
#: How each outcome is marked at the start of a check's line.
MARKS = {PASS: "pass", FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}
#: The verdict words (rules v3 adds INCONCLUSIVE).
WORDS = ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE")


class RuleError(ValueError):
    """A verdict rule that cannot measure its claim (a check that already passes at initialisation)."""


def outcome_name(recorded: bool | str) -> str:
    """A recorded outcome by name: True / False (a check with one number, as older records hold
    it) as pass / fail; a name as it is."""
    return PASS if recorded is True else FAIL if recorded is False else recorded


def outcome_of(low: float, high: float, op: str, threshold: float) -> str:
    """pass when the whole interval [low, high] satisfies ``op threshold``, fail when none of it
    does, else inconclusive. A NaN end fails."""
    if math.isnan(low) or math.isnan(high):
        return FAIL
    compare = _OPS[op]
    if compare(low, threshold) and compare(high, threshold):
        return PASS
    if not compare(low, threshold) and not compare(high, threshold):
        return FAIL
    return INCONCLUSIVE


@dataclass(frozen=True)
class SeedCheck:
    """A statistic over seeds with its 90 % interval, against a fixed threshold (rules v3).

    ``init`` is the same statistic at initialisation where the check was held against it."""
    name: str
    estimate: "intervals.Estimate"
    op: str
    threshold: float
    digits: int = 3
    init: "intervals.Estimate | None" = None
    #: The per-seed values (rules v4), so that a part can recompute the interval at a corrected level.
    values: tuple | None = None

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"op={self.op!r} is not allowed; choose one of {list(_OPS)}")

    @property
    def value(self) -> float:
        return self.estimate.value

    @property
    def outcome(self) -> str:
        return outcome_of(self.estimate.low, self.estimate.high, self.op, self.threshold)

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    def line(self) -> str:
        e, f = self.estimate, (lambda v: format_number(v, self.digits))
        spread = "" if e.method == "exact" else f", 90% [{f(e.low)}, {f(e.high)}]"
        return wrap(f"[{MARKS[self.outcome]}] {self.name} = {f(e.value)}{spread}"
                    f"  (threshold: {self.op} {f(self.threshold)}; {e.statistic} over {e.n} seeds, {e.method})", "  ", breaks=[THRESHOLD_PHRASE])


@dataclass(frozen=True)
class Verdict:
    claim: str
    profile: str
    checks: tuple[Check, ...]

    @property
    def supported(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def word(self) -> str:
        """SUPPORTED when every check passes, NOT SUPPORTED when one fails, else INCONCLUSIVE."""
        outcomes = [c.outcome for c in self.checks]
        if all(o == PASS for o in outcomes):
            return "SUPPORTED"
        return "NOT SUPPORTED" if FAIL in outcomes else "INCONCLUSIVE"

    def text(self) -> str:
        outcomes = [c.outcome for c in self.checks]
        lines = [c.line() for c in self.checks]
        counts = f"{outcomes.count(PASS)} of {len(self.checks)} checks pass"
        if any(isinstance(c, SeedCheck) for c in self.checks):   # rules v3: all three outcomes counted
            counts += f", {outcomes.count(FAIL)} fail, {outcomes.count(INCONCLUSIVE)} inconclusive"
        lines.append(wrap(f"VERDICT {self.claim} [{self.profile}]: {self.word} ({counts})"))
        return "\n".join(lines)


def check(name: str, value: float, op: str, threshold: float, digits: int = 3) -> Check:
    """A check ``value op threshold``, e.g. ``check("max |path sum - forward|", err, "<=", 1e-10)``."""
    return Check(name, float(value), op, float(threshold), digits)


def seed_check(name: str, values, op: str, threshold: float, *, statistic: str = "mean", init=None,
               digits: int = 3) -> SeedCheck:
    """A check of a statistic over seeds with its 90 % seed-bootstrap interval (rules v3).

    Args:
        values: one number per seed (pairs per seed for "ratio of means"); a trained − init
            difference is passed as such (``difference``).
        statistic: "mean", "median" or "ratio of means" (``intervals.STATISTICS``).
        init: the same per-seed values at initialisation. The check is computed on them too, and
            refused when it passes there.

    Raises:
        RuleError: the check passes at initialisation, so it measures nothing.
    """
    from dlgn_lib import intervals
    estimate = intervals.bootstrap(values, statistic)
    at_init = None
    if init is not None:
        at_init = intervals.bootstrap(init, statistic)
        if outcome_of(at_init.low, at_init.high, op, float(threshold)) == PASS:
            raise RuleError(
                f"check {name!r} already passes at initialisation ({statistic} {format_number(at_init.value)}, "
                f"90% [{format_number(at_init.low)}, {format_number(at_init.high)}] {op} {format_number(threshold)}): "
                "it measures nothing; compare trained with init (trained − init) instead")
    return SeedCheck(name, estimate, op, float(threshold), digits, at_init)


def share_check(name: str, successes: int, trials: int, op: str, threshold: float, digits: int = 3) -> SeedCheck:
    """A share of seeds (or runs) with the exact Clopper–Pearson interval (rules v3)."""
    from dlgn_lib import intervals
    estimate = intervals.clopper_pearson(successes, trials)
    return SeedCheck(name, estimate, op, float(threshold), digits)


def exact_check(name: str, value: float, n_seeds: int, op: str, threshold: float, digits: int = 3,
                statistic: str = "worst case") -> SeedCheck:
    """A number with no sampling uncertainty over ``n_seeds`` seeds (the worst case of an identity,
    checked on every seed): pass or fail, never inconclusive."""
    from dlgn_lib import intervals
    return SeedCheck(name, intervals.exact(value, n_seeds, statistic), op, float(threshold), digits)


@dataclass(frozen=True)
class RowCountCheck(SeedCheck):
    """A count of rows by their outcomes (rules v3, notebook 08): ``value`` rows are decided, up to
    ``value + undecided`` could be. Its interval is that range, so it passes when the whole range is
    on the claimed side of the threshold, fails when none of it is, and is inconclusive otherwise."""

    def line(self) -> str:
        e, f = self.estimate, (lambda v: format_number(v, self.digits))
        return (f"  [{MARKS[self.outcome]}] {self.name} = {f(e.value)}  (threshold: {self.op} {f(self.threshold)}; "
                f"counted from the rows' outcomes, {f(e.low)} to {f(e.high)} with the undecided rows)")


def row_count_check(name: str, decided: int, undecided: int, op: str, threshold: float) -> RowCountCheck:
    """A check on a number of rows: ``decided`` rows counted for sure, ``undecided`` rows whose
    interval straddles their bar and might count too (the range [decided, decided + undecided])."""
    from dlgn_lib import intervals
    if decided < 0 or undecided < 0:
        raise ValueError(f"row counts must be non-negative; got {decided} decided and {undecided} undecided")
    estimate = intervals.Estimate(float(decided), float(decided), float(decided + undecided),
                                  int(decided + undecided), "count of rows", "rows")
    return RowCountCheck(name, estimate, op, float(threshold), 3)


@dataclass(frozen=True)
class UndecidedCheck(SeedCheck):
    """A check whose statistic has no value on these runs (``why``): the data cannot decide it, so
    its outcome is inconclusive, never pass or fail (rules v3)."""
    why: str = ""

    @property
    def outcome(self) -> str:
        return INCONCLUSIVE

    def line(self) -> str:
        return wrap(f"[{MARKS[INCONCLUSIVE]}] {self.name} = nan  (threshold: {self.op} "
                    f"{format_number(self.threshold, self.digits)}; no value: {self.why})", "  ", breaks=[THRESHOLD_PHRASE])


def undecided_check(name: str, op: str, threshold: float, why: str) -> UndecidedCheck:
    """A check that cannot be computed on these runs (e.g. every seed's statistic is undefined):
    inconclusive, with the reason printed."""
    from dlgn_lib import intervals
    nan = float("nan")
    return UndecidedCheck(name, intervals.Estimate(nan, nan, nan, 0, "none", "no value"), op, float(threshold), 3,
                          why=why)


def difference(trained, init):
    """Per-seed trained − init, seed by seed (both in the same seed order)."""
    import numpy as np
    trained, init = np.asarray(trained, dtype=float), np.asarray(init, dtype=float)
    if trained.shape != init.shape:
        raise ValueError(f"trained and init must have one value per seed each; shapes {trained.shape} and {init.shape}")
    return trained - init


#: How a quick run that cannot decide a claim says so, in place of a verdict (reconstruction §5).
SMOKE_MARK = "SMOKE TEST"


@dataclass(frozen=True)
class Recorded:
    """What the record says about one notebook, handed to the verdict code from above: the record
    tools build it (``dlgn_lib.record.report.recorded_for``) and ``dl.setup`` installs it for the notebook
    it sets up (``use_record``). The verdict code reads no record itself.

    ``full``: claim → its recorded ``full`` result, as "SUPPORTED (4 of 4 checks pass)";
    ``outcomes``: check name → its outcome under each recorded code path (the spread record)."""
    full: Mapping[str, str] = field(default_factory=dict)
    outcomes: Mapping[str, Sequence[str]] = field(default_factory=dict)


#: What a SMOKE TEST line says when the record has no full run of the claim.
NOT_RECORDED = "not recorded"
_RECORDED = Recorded()


def use_record(recorded: Recorded | None) -> None:
    """Install what the record says about the notebook now running (``None``: nothing)."""
    global _RECORDED
    _RECORDED = recorded if recorded is not None else Recorded()


#: The words before a SMOKE TEST line's quote of the record, never broken across lines (nbval's
#: sanitize file finds the quote after them).
FULL_RESULT_PHRASE = "the full result in docs/full_results.json is"


def smoke_line(claim: str, why: str, full: str) -> str:
    """``SMOKE TEST C5 [quick] (quick cannot decide C5: why; the full result is …)``; ``full`` is the
    recorded full result (``Recorded.full``), or "not recorded"."""
    return wrap(f"{SMOKE_MARK} {claim} [quick] (quick cannot decide {claim}: {why}; the full result in "
                f"docs/full_results.json is {full})", keep=[FULL_RESULT_PHRASE])


def evaluate(claim: str, checks, profile: str) -> Verdict:
    """Combine checks into a claim's verdict: supported when every check passes."""
    checks = tuple(checks)
    if not checks:
        raise ValueError("a verdict needs at least one check")
    return Verdict(claim, profile, checks)


def verdict(claim: str, checks, profile: str, smoke: str | None = None, recorded: Recorded | None = None) -> None:
    """Print a claim's checks and its verdict line (see ``evaluate``); returns nothing, so the
    notebook shows the printed lines only.

    ``smoke``: why ``quick`` cannot decide the claim (its rule says so, reconstruction §8.1). Under
    ``quick`` the checks are then printed with a ``SMOKE TEST`` line naming the recorded ``full``
    result in place of the verdict line.

    Under ``quick``, a check whose pass/fail changed across CPU code paths in ``docs/spread.json``
    (reconstruction §7) is named below the verdict line as a fragile result.

    ``recorded``: what the record says about this notebook (``Recorded``); by default the one
    ``dl.setup`` installed (``use_record``).
    """
    result = evaluate(claim, checks, profile)
    recorded = _RECORDED if recorded is None else recorded
    if smoke is not None and profile == "quick":
        print("\n".join(c.line() for c in result.checks))
        print(smoke_line(claim, smoke, recorded.full.get(claim, NOT_RECORDED)))
        return
    print(result.text())
    if profile == "quick":
        for line in fragile_lines(recorded.outcomes, [c.name for c in result.checks]):
            print(line)


#: How a fragile-result line starts (nbval's sanitize file drops these lines: they follow from the
#: spread record, which tests/test_reproduce.py checks against the notebooks).
FRAGILE_MARK = "  fragile across CPU code paths:"


def fragile_lines(outcomes: Mapping[str, Sequence[str]], names) -> list[str]:
    """Lines naming the checks of ``names`` whose pass/fail changed across the code paths of the
    spread record (``outcomes``: check name → its outcome under each code path, ``Recorded``),
    with how many code paths passed them."""
    lines = []
    for name in names:
        named = outcomes.get(name, [])
        if len(set(named)) < 2:
            continue
        if set(named) <= {PASS, FAIL}:
            lines.append(wrap(f"{FRAGILE_MARK.strip()} {name}: passes under {named.count(PASS)} of {len(named)} "
                              f"(docs/spread.json); its pass/fail is not decided by this run alone", "  "))
        else:
            counts = ", ".join(f"{o} under {named.count(o)}" for o in (PASS, FAIL, INCONCLUSIVE) if o in named)
            lines.append(wrap(f"{FRAGILE_MARK.strip()} {name}: {counts} of {len(named)} (docs/spread.json); "
                              "its outcome is not decided by this run alone", "  "))
    return lines


#: The earlier verdicts of every claim, by rule (shown in each notebook's history cell).
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


def history(notebook: str, every: bool = False) -> None:
    """Print how many earlier verdicts a notebook has and where they are (one line); ``every``:
    each of them, what it said, under which setting, and why it was superseded."""
    entries = earlier_verdicts(notebook)
    if not entries:
        print(f"notebook {notebook}: no verdict, and none earlier (a map or a table)" if notebook in WITHOUT_VERDICT
              else f"notebook {notebook}: no earlier verdict; the verdict above is its first")
        return
    if not every:
        _say(f"notebook {notebook}: {len(entries)} earlier verdict{'s' * (len(entries) != 1)}, each superseded "
             f"for a stated reason: docs/record.md; here: dl.verdict.history(\"{notebook}\", every=True)")
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
#: ``amended``: a correction of what a rule's settings say, made after it (what the runs did);
#: ``profiles`` and ``files`` (rules v4): the settings per profile as the config states them, and the
#: files its registration commit carries (``dlgn_lib.record.audit``).
_OPTIONAL_RULE_KEYS = {"amended", "profiles", "files"}
RULE_STATUSES = ("registered", "measured", "retired")


def registered_rules(notebook: str | None = None) -> list[dict]:
    """The registered rules, oldest first; only those of ``notebook`` ("02") when given.

    Each is a dict with ``notebook``, ``claim``, ``version``, ``registered`` (date), ``status``
    (``RULE_STATUSES``: registered before its runs, measured, or retired), ``statement``,
    ``thresholds`` (name → value, the notebook's constants), ``settings``, ``seeds``, ``targets``,
    ``replaces`` (the earlier rule) and ``why`` it was replaced.
    """
    from dlgn_lib import config
    registry = json.loads(RULES_FILE.read_text())
    # rules v4 count for a notebook once it runs them (config.AT_RULES_V4); until then they are
    # registered (dl.parts.registry) and its rule v3 is its current one
    rules = registry["rules"] + [r for r in registry.get("v4", {}).get("rules", []) if r["notebook"] in config.AT_RULES_V4]
    for rule in rules:
        missing, extra = _RULE_KEYS - set(rule), set(rule) - _RULE_KEYS - _OPTIONAL_RULE_KEYS
        if missing or extra or rule["status"] not in RULE_STATUSES:
            raise ValueError(f"{RULES_FILE.name}: rule {rule.get('claim')} v{rule.get('version')} of notebook "
                             f"{rule.get('notebook')} is malformed (missing {sorted(missing)}, unknown "
                             f"{sorted(extra)}, status {rule.get('status')!r}; allowed {list(RULE_STATUSES)})")
    return [r for r in rules if notebook is None or r["notebook"] == notebook]


#: Lines a notebook's current rule's statement takes at most (its seeds and targets: one); the
#: whole of it with ``every=True``.
RULE_LINES = 3


def _say(text: str, indent: str = "", most: int | None = None) -> None:
    """Print ``text`` wrapped to the column; ``most``: in at most that many lines, cut after its
    last sentence or clause that fits (else its last word that fits) and marked " …"."""
    lines = wrap(text, indent).splitlines()
    if most is not None and len(lines) > most:
        fits = " ".join(line.strip() for line in lines[:most])
        room = len(fits) - 2
        cut = max(fits.rfind(". ", 0, room), fits.rfind("; ", 0, room))
        fits = fits[:cut + 1] if cut > len(fits) // 2 else fits[:fits.rfind(" ", 0, room)]
        lines = wrap(fits + " …", indent).splitlines()
    print("\n".join(lines))


def rules(notebook: str, every: bool = False) -> None:
    """Print a notebook's current rule per claim: version, date, status, statement, seeds and
    targets (its thresholds are the constants of the cell that calls this), and one line naming
    the rules it replaced. ``every``: every registered rule, oldest first, in full."""
    entries = registered_rules(notebook)
    if not entries:
        print(f"notebook {notebook}: its rules are the first ones, stated in the notebook")
        return
    if every:
        for rule in entries:
            thresholds = ", ".join(f"{k} = {v:g}" for k, v in rule["thresholds"].items())
            print(f"{rule['claim']} rule v{rule['version']} (registered {rule['registered']}, {rule['status']}): "
                  f"{rule['statement']}\n  thresholds: {thresholds}\n  settings: {rule['settings']}\n"
                  f"  seeds: {rule['seeds']}\n  targets: {rule['targets']}\n"
                  f"  replaces: {rule['replaces']}\n  why: {rule['why']}")
        return
    current: dict[str, dict] = {}
    for rule in entries:
        if rule["claim"] not in current or rule["version"] > current[rule["claim"]]["version"]:
            current[rule["claim"]] = rule

    for rule in current.values():
        _say(f"{rule['claim']} rule v{rule['version']} (registered {rule['registered']}, {rule['status']}): "
             f"{rule['statement']}", most=RULE_LINES)
        _say(f"seeds: {rule['seeds']}; targets: {rule['targets']}", "  ", most=1)
    earlier = [f"v{r['version']}" for r in entries if r not in current.values()]
    if earlier:
        _say(f"replaced: {', '.join(earlier)} (docs/record.md, verdict history)", "  ")
    _say(f"the whole rule: dl.verdict.rules(\"{notebook}\", every=True)", "  ")


def combination_rule() -> dict:
    """The registered rule by which a claim's notebooks combine into its bottom line (rules v3):
    ``rule`` (its statement), ``registered`` (date) and ``claims`` (claim → the notebooks judging it)."""
    combinations = json.loads(RULES_FILE.read_text()).get("combinations")
    if not combinations or set(combinations) != {"about", "registered", "rule", "claims"}:
        raise ValueError(f"{RULES_FILE.name}: no well-formed 'combinations' entry (about, registered, rule, claims)")
    return combinations


#: The bottom line of a claim whose notebooks have not all been judged under full.
PENDING = "pending"


def bottom_line(claim: str, verdicts: dict[str, str | None]) -> str:
    """A claim's bottom line from its notebooks' verdict words under full (``combination_rule``):
    SUPPORTED when every notebook says SUPPORTED, NOT SUPPORTED when any says NOT SUPPORTED, else
    INCONCLUSIVE; ``PENDING`` when a notebook has no full verdict (None) and none says NOT SUPPORTED.

    Args:
        verdicts: notebook id → its verdict word for ``claim`` under full, None where there is none.

    Raises:
        ValueError: the notebooks are not the registered ones for the claim, or a word is unknown.
    """
    notebooks = combination_rule()["claims"].get(claim)
    if notebooks is None or sorted(verdicts) != sorted(notebooks):
        raise ValueError(f"claim {claim}: verdicts of notebooks {sorted(verdicts)} given; the registered ones are {notebooks}")
    words = list(verdicts.values())
    unknown = [w for w in words if w is not None and w not in WORDS]
    if unknown:
        raise ValueError(f"claim {claim}: unknown verdict words {unknown}; known: {list(WORDS)}")
    if "NOT SUPPORTED" in words:
        return "NOT SUPPORTED"
    if None in words:
        return PENDING
    return "SUPPORTED" if all(w == "SUPPORTED" for w in words) else "INCONCLUSIVE"
