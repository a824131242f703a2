"""Bottom lines by parts (rules v4, reconstruction §8.2).

A claim of the abstract says several things. Under rules v4 each claim is split into **parts**,
registered in ``verdict_rules.json`` (``v4`` → ``claims``) before any v4 run, each decided by one
or more checks of the notebooks. A part has one of three outcomes, and the claim's bottom line
counts them:

- a part **HOLDS** when every check deciding it passes (its 90 % interval wholly on the claimed
  side);
- it **DOES NOT HOLD** when a check fails at the multiplicity-corrected level: with ``k`` checks
  deciding the part, a check counts as failed only when its interval at level 1 − 0.10 / k
  (Bonferroni) lies wholly on the other side of its bar. A check without seeds to resample (a worst
  case, a count of rows) fails as it is;
- otherwise it is **INCONCLUSIVE**: a check straddles its bar, has no value, or is
  machine-sensitive (its outcome moves across CPUs or code paths; the caller says which, this
  module reads no record).

A "like for like" part (C7) compares a model with the DLGN on the DLGN's own statistic and bar:
each pair (DLGN check, other model's check) counts only where the DLGN shows the effect (its check
passes); a pair whose DLGN check is inconclusive makes the part inconclusive; pairs where the DLGN
fails are reported and not counted. A like-for-like part with no counted pair is "not shown by the
DLGN" and is left out of the claim's count.

The claim's bottom line: **HOLDS** when every counted part holds, **DOES NOT HOLD** when none
holds and none is inconclusive, **HOLDS IN PART** (k of n, naming which) when some but not all
hold, **INCONCLUSIVE** when none holds and one or more is inconclusive (or no part is counted).
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from dlgn_lib import intervals, verdict
from dlgn_lib.text import wrap

#: A part's words: it holds, it does not hold, or the data cannot decide.
HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "HOLDS", "DOES NOT HOLD", "INCONCLUSIVE"
#: A claim's word when some of its parts hold and none fails to (rules v4).
HOLDS_IN_PART = "HOLDS IN PART"
#: A like-for-like part where the DLGN itself does not show the effect: not counted.
NOT_SHOWN = "not shown by the DLGN"
PART_WORDS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_SHOWN)
CLAIM_WORDS = (HOLDS, HOLDS_IN_PART, DOES_NOT_HOLD, INCONCLUSIVE)
KINDS = ("all", "like for like")


# --- checks of rules v4 --------------------------------------------------------------------------

def check(name: str, values, op: str, threshold: float, *, statistic: str = "mean", init=None,
          digits: int = 3) -> verdict.SeedCheck:
    """A check of rules v4: a statistic over seeds with the v4 interval (``intervals.estimate``).

    ``values`` may hold NaN for a seed where the statistic has no value: such a seed is counted by
    the registered rule (``intervals.estimate``'s missing-value bounds), never dropped. With fewer
    than two seeds that have a value the check has none and is undecided (inconclusive).

    ``init``: the same per-seed values at initialisation; the check is refused
    (``verdict.RuleError``) when it already passes there.
    """
    import numpy as np
    data = np.asarray(values, dtype=np.float64)
    present = ~np.isnan(data).any(axis=-1) if data.ndim == 2 else ~np.isnan(data)
    if int(present.sum()) < 2:
        return verdict.undecided_check(name, op, threshold, f"{int((~present).sum())} of {len(data)} seeds have no value")
    estimate = intervals.estimate(data, statistic)
    at_init = None
    if init is not None:
        at_init = intervals.estimate(init, statistic)
        if verdict.outcome_of(at_init.low, at_init.high, op, float(threshold)) == verdict.PASS:
            raise verdict.RuleError(
                f"check {name!r} already passes at initialisation ({statistic} {verdict.format_number(at_init.value)}, "
                f"90% [{verdict.format_number(at_init.low)}, {verdict.format_number(at_init.high)}] {op} "
                f"{verdict.format_number(threshold)}): it measures nothing; compare trained with init instead")
    return verdict.SeedCheck(name, estimate, op, float(threshold), digits, at_init, tuple(map(tuple, data))
                             if data.ndim == 2 else tuple(data.tolist()))


def fails_corrected(c: verdict.SeedCheck, k: int) -> bool:
    """Whether ``c`` fails at the Bonferroni level for a part decided by ``k`` checks: its interval
    at level 1 − (1 − LEVEL) / k wholly on the wrong side of its bar. A check without per-seed
    values (a worst case, a count of rows, a single number) fails as it is."""
    if c.outcome != verdict.FAIL:
        return False
    values = getattr(c, "values", None)
    if values is None or k <= 1:
        return True
    level = 1 - (1 - intervals.LEVEL) / k
    if c.estimate.statistic == "median" and len(values) < intervals.median_minimum(level):
        return False   # too few seeds for an order-statistic interval at this level: it is unbounded
    wide = intervals.estimate(values, c.estimate.statistic, level=level)
    return verdict.outcome_of(wide.low, wide.high, c.op, c.threshold) == verdict.FAIL


# --- parts ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """One part of a claim and the checks that decide it.

    Attributes:
        claim, label: "C6", "a".
        statement: what the part says.
        checks: for kind "all", the checks; for "like for like", pairs (DLGN check, other check).
        kind: "all" or "like for like" (``KINDS``).
        sensitive: names of machine-sensitive checks (counted inconclusive), given by the caller.
        registered: how many checks (pairs, like for like) the registry gives the part across
            notebooks, when only some are here: the multiplicity correction uses it (at least k).
    """
    claim: str
    label: str
    statement: str
    checks: tuple
    kind: str = "all"
    sensitive: frozenset = field(default_factory=frozenset)
    registered: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"part {self.claim}{self.label}: kind={self.kind!r}; choose one of {list(KINDS)}")
        if not self.checks:
            raise ValueError(f"part {self.claim}{self.label} has no checks; every part is decided by at least one")

    def _outcome(self, c) -> str:
        return verdict.INCONCLUSIVE if c.name in self.sensitive and c.outcome != verdict.INCONCLUSIVE else c.outcome

    def deciding(self) -> list:
        """The checks that decide the part (for like for like: the other model's checks of the pairs
        where the DLGN shows the effect)."""
        if self.kind == "all":
            return list(self.checks)
        return [other for dlgn, other in self.checks if self._outcome(dlgn) == verdict.PASS]

    @property
    def dlgn_undecided(self) -> bool:
        """Like for like: a DLGN check of the part is inconclusive, which leaves the part so."""
        return self.kind == "like for like" and any(self._outcome(d) == verdict.INCONCLUSIVE for d, _ in self.checks)

    @property
    def word(self) -> str:
        """HOLDS, DOES NOT HOLD, INCONCLUSIVE, or (like for like) not shown by the DLGN."""
        if self.dlgn_undecided:
            return INCONCLUSIVE
        if self.kind == "like for like" and not self.deciding():
            return NOT_SHOWN
        deciding = self.deciding()
        k = max(len(deciding), self.registered)
        outcomes = [self._outcome(c) for c in deciding]
        if all(o == verdict.PASS for o in outcomes):
            return HOLDS
        if any(fails_corrected(c, k) for c in deciding if c.name not in self.sensitive):
            return DOES_NOT_HOLD
        return INCONCLUSIVE

    def line(self) -> str:
        """``  C6 (b) DOES NOT HOLD: the clusters are several (2 checks; machine-sensitive: …)``."""
        k = len(self.deciding())
        sensitive = sorted(c.name for c in _flat(self.checks) if c.name in self.sensitive)
        extra = f"; machine-sensitive, counted inconclusive: {', '.join(sensitive)}" if sensitive else ""
        return f"  {self.claim} ({self.label}) {self.word}: {self.statement} (decided by {k} check{'s' * (k != 1)}{extra})"


def _flat(checks) -> list:
    return [c for item in checks for c in (item if isinstance(item, tuple) else (item,))]


def claim_word(words: Sequence[str]) -> tuple[str, int, int]:
    """A claim's bottom line from its parts' words: (word, parts that hold, parts counted)."""
    unknown = [w for w in words if w not in PART_WORDS]
    if unknown:
        raise ValueError(f"unknown part words {unknown}; known: {list(PART_WORDS)}")
    counted = [w for w in words if w != NOT_SHOWN]
    k, n = counted.count(HOLDS), len(counted)
    if n and k == n:
        return HOLDS, k, n
    if k:
        return HOLDS_IN_PART, k, n
    if n and all(w == DOES_NOT_HOLD for w in counted):
        return DOES_NOT_HOLD, k, n
    return INCONCLUSIVE, k, n


def bottom_line(claim: str, parts: Sequence[Part]) -> str:
    """``C6: HOLDS IN PART (1 of 2: (a) holds; (b) does not hold)``, one line."""
    word, k, n = claim_word([p.word for p in parts])
    detail = "; ".join(f"({p.label}) {p.word.lower()}" for p in parts)
    count = f"{k} of {n}" if n else "no part counted"
    return f"{claim}: {word} ({count}: {detail})"


# --- the registry --------------------------------------------------------------------------------

def registry() -> dict:
    """Rules v4 as registered (``verdict_rules.json`` → ``v4``): ``registered``, ``intervals``,
    ``combination``, ``multiplicity``, ``machine_sensitive``, ``missing``, ``rules`` (per notebook)
    and ``claims`` (claim → statement and parts)."""
    v4 = json.loads(verdict.RULES_FILE.read_text()).get("v4")
    needed = {"about", "registered", "intervals", "combination", "multiplicity", "machine_sensitive", "missing",
              "like_for_like", "rules", "claims"}
    if not isinstance(v4, dict) or needed - set(v4):
        raise ValueError(f"{verdict.RULES_FILE.name}: no well-formed 'v4' entry (needs {sorted(needed)})")
    for claim, entry in v4["claims"].items():
        for label, part in entry["parts"].items():
            if part.get("kind", "all") not in KINDS or not part.get("checks"):
                raise ValueError(f"{verdict.RULES_FILE.name}: v4 part {claim} ({label}) is malformed")
    return v4


def registered_parts(claim: str) -> dict:
    """The registered parts of ``claim``: label → ``statement``, ``kind``, ``checks`` (each
    ``{"notebook", "check"}`` or, like for like, ``{"notebook", "dlgn", "other"}``: check names)."""
    claims = registry()["claims"]
    if claim not in claims:
        raise ValueError(f"claim {claim!r} has no registered parts; registered: {sorted(claims)}")
    return claims[claim]["parts"]


def assemble(claim: str, checks: Mapping[str, Iterable[verdict.SeedCheck]], sensitive: Iterable[str] = ()) -> list[Part]:
    """The claim's registered parts filled with the checks measured (notebook id → its checks).

    A registered check name is a pattern (``fnmatch``, ``*`` for any text) that must match the start
    of exactly one measured check's name. Raises
    ``ValueError`` naming the part when a registered check is missing or matches twice, so a part
    is never decided by fewer checks than registered."""
    return _assemble(registry()["claims"], claim, checks, sensitive)


def _assemble(claims: Mapping, claim: str, checks: Mapping[str, Iterable[verdict.SeedCheck]],
              sensitive: Iterable[str]) -> list[Part]:
    if claim not in claims:
        raise ValueError(f"claim {claim!r} has no registered parts; registered: {sorted(claims)}")
    by_notebook = {nb: list(cs) for nb, cs in checks.items()}

    def find(notebook: str, name: str, where: str):
        found = [c for c in by_notebook.get(notebook, []) if fnmatch.fnmatchcase(c.name, name + "*")]
        if len(found) != 1:
            raise ValueError(f"part {where}: registered check {name!r} of notebook {notebook} matches "
                             f"{len(found)} measured checks (needs exactly 1)")
        return found[0]

    parts = []
    for label, part in claims[claim]["parts"].items():
        kind, where = part.get("kind", "all"), f"{claim} ({label})"
        if kind == "all":
            items = tuple(find(r["notebook"], r["check"], where) for r in part["checks"])
        else:
            items = tuple((find(r["notebook"], r["dlgn"], where), find(r["notebook"], r["other"], where))
                          for r in part["checks"])
        parts.append(Part(claim, label, part["statement"], items, kind, frozenset(sensitive)))
    return parts


def local(claim: str, notebook: str, checks: Iterable[verdict.SeedCheck], sensitive: Iterable[str] = ()) -> list[tuple[Part, list[str]]]:
    """The registered parts of ``claim`` that ``notebook`` decides, each filled with this notebook's
    checks only (the correction counts every check the registry gives the part), and the other
    notebooks that decide it too. A part that fails here does not hold whatever the others show;
    one that holds or is inconclusive here is combined with them in the claim's bottom line."""
    checks = list(checks)
    out = []
    for label, part in registered_parts(claim).items():
        mine = [r for r in part["checks"] if r["notebook"] == notebook]
        if not mine:
            continue
        others = sorted({r["notebook"] for r in part["checks"]} - {notebook})
        one = {claim: {"parts": {label: {**part, "checks": mine}}}}
        (filled,) = _assemble(one, claim, {notebook: checks}, sensitive)
        out.append((Part(claim, label, part["statement"], filled.checks, filled.kind, filled.sensitive,
                         len(part["checks"])), others))
    return out


#: How a part's line starts: decided (full), or read by a smoke test that decides nothing (quick).
PART_MARK, SMOKE_PART_MARK = "PART", "SMOKE TEST PART"


def show(claim: str, notebook: str, checks: Iterable[verdict.SeedCheck], sensitive: Iterable[str] = (),
         smoke: bool = False) -> None:
    """Print the parts of ``claim`` that ``notebook`` decides (``local``), one line each:
    ``PART C5 (b) HOLDS: statement (4 checks here)`` or ``… (2 of its 6 checks here; with 10)``.
    ``smoke``: the checks come from a smoke test (quick), which decides no part: each line then
    starts ``SMOKE TEST PART`` and says what the checks would read."""
    if smoke:
        print(wrap(f"{SMOKE_PART_MARK} lines: what these quick checks would read; quick decides no part of {claim}"))
    for part, others in local(claim, notebook, checks, sensitive):
        here = len(part.checks)
        unit = "pair" if part.kind == "like for like" else "check"
        units = f"{unit}s" if part.registered != 1 else unit
        count = (f"{here} {units} here" if not others
                 else f"{here} of its {part.registered} {units} here; with {', '.join(others)}")
        sensitive_names = sorted(c.name for c in _flat(part.checks) if c.name in part.sensitive)
        extra = f"; machine-sensitive: {', '.join(sensitive_names)}" if sensitive_names else ""
        extra += f"; {DLGN_UNDECIDED}" if part.dlgn_undecided else ""
        print(wrap(f"{SMOKE_PART_MARK if smoke else PART_MARK} {claim} ({part.label}) {part.word}: {part.statement} "
                   f"({count}{extra})"))


#: How a like-for-like part's line says that a DLGN check of it is inconclusive.
DLGN_UNDECIDED = "the DLGN undecided"


def combine(kind: str, words: Sequence[str], dlgn_undecided: bool = False) -> str:
    """A part's word from the words it has in each notebook that decides it (``local``), as the part
    would read on all their checks at once. ``dlgn_undecided``: like for like, a notebook's line
    said the DLGN is undecided (then the part is inconclusive whatever the others show)."""
    unknown = [w for w in words if w not in PART_WORDS]
    if unknown or kind not in KINDS or not words:
        raise ValueError(f"cannot combine part words {list(words)} of kind {kind!r}")
    if dlgn_undecided:
        return INCONCLUSIVE
    counted = [w for w in words if w != NOT_SHOWN]
    if not counted:
        return NOT_SHOWN
    if DOES_NOT_HOLD in counted:
        return DOES_NOT_HOLD
    return HOLDS if all(w == HOLDS for w in counted) else INCONCLUSIVE


def family_error(k: int, per_check: float = (1 - intervals.LEVEL) / 2) -> dict:
    """What combining ``k`` checks does to the chance of a wrong part outcome, at most (union
    bound): a false HOLDS needs the one check that is truly on the wrong side to pass (≤
    ``per_check``, whatever k); a false DOES NOT HOLD needs one of k true checks to fail, ≤ k ·
    ``per_check`` uncorrected and ≤ ``per_check`` with the Bonferroni level."""
    return {"false holds": per_check, "false does not hold, uncorrected": min(1.0, k * per_check),
            "false does not hold, corrected": per_check}


__all__ = ["HOLDS", "HOLDS_IN_PART", "DOES_NOT_HOLD", "INCONCLUSIVE", "NOT_SHOWN", "Part", "check",
           "fails_corrected", "claim_word", "bottom_line", "registry", "registered_parts", "assemble",
           "local", "show", "combine", "family_error"]
