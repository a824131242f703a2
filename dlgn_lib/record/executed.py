"""Reading executed notebooks: the verdicts, checks and parts they printed, how long they ran, the
code path their kernel ran, and a ``full`` record entry made of them. The record tools (report,
verify, series, the class walk) read notebooks through this module only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import nbformat

from .. import locations, text
from ..verdict import EARLIER_MARK

__all__ = []

#: The record of ``full`` runs (``python -m dlgn_lib.record.report record``), and the note ``series run``
#: writes beside the executed copies.
FULL_RECORD = locations.REPO_ROOT / "docs" / "full_results.json"
SERIES_NOTE = "series.json"

_CHECK = re.compile(r"^\s*\[(pass|FAIL|inconclusive)\] (.*) = (\S+)(?:, 90% \[(\S+), (\S+)\])?"
                    r"\s+\(threshold: (\S+) (\S+)(?:; (.*))?\)$")
_VERDICT = re.compile(r"^VERDICT (\S+) \[(\w+)\]: (SUPPORTED|NOT SUPPORTED|INCONCLUSIVE) \((\d+) of (\d+) checks pass"
                      r"(?:, (\d+) fail, (\d+) inconclusive)?\)$")
_SMOKE = re.compile(r"^SMOKE TEST (\S+) \[(\w+)\] \(quick cannot decide ")


@dataclass(frozen=True)
class Check:
    """A printed check: its value as printed, and for a check over seeds (rules v3) its interval
    and how it was computed ("mean over 10 seeds, exact bootstrap")."""
    name: str
    value: str
    op: str
    threshold: str
    outcome: str
    low: str | None = None
    high: str | None = None
    over: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"


@dataclass(frozen=True)
class Verdict:
    claim: str
    profile: str
    word: str
    n_pass: int
    n_checks: int
    checks: tuple[Check, ...]

    @property
    def supported(self) -> bool:
        return self.word == "SUPPORTED"

    def short(self) -> str:
        if self.word == "SMOKE TEST":
            return f"*SMOKE TEST* (no verdict; {self.n_pass} of {self.n_checks} checks pass)"
        word = {"SUPPORTED": "SUPPORTED", "NOT SUPPORTED": "**NOT SUPPORTED**"}.get(self.word, f"*{self.word}*")
        return f"{word}, {self.n_pass} of {self.n_checks}"


#: The printed lines the record reads, each joined with the lines it was wrapped onto (``dlgn_lib.text``).
_HEADS = re.compile(r"^( *\[(pass|FAIL|inconclusive)\] |VERDICT |SMOKE TEST |PART |numerics: |written: | *earlier: | *fragile "
                    r"|\S+(?:, \S+)* rule v\d+ \(registered | +seeds: )")


def _stdout_lines(nb) -> list[str]:
    return text.logical_lines([line for cell in nb.cells for output in cell.get("outputs", [])
                               if output.get("output_type") == "stream" and output.get("name") == "stdout"
                               for line in output["text"].splitlines()], _HEADS)


def verdicts_of(nb) -> list[Verdict]:
    """The verdicts a notebook printed (``dl.verdict.verdict``), each with its checks, in order."""
    found, pending = [], []
    for line in _stdout_lines(nb):
        if line.strip().startswith(EARLIER_MARK):
            continue
        if m := _CHECK.match(line):
            pending.append(Check(m[2], m[3], m[6], m[7], m[1].lower(), m[4], m[5], m[8]))
        elif m := _VERDICT.match(line.strip()):
            if len(pending) != int(m[5]):
                raise ValueError(f"verdict {m[1]}: {int(m[5])} checks announced, {len(pending)} printed above it")
            found.append(Verdict(m[1], m[2], m[3], int(m[4]), int(m[5]), tuple(pending)))
            pending = []
        elif m := _SMOKE.match(line.strip()):   # quick cannot decide the claim: its checks, no verdict
            found.append(Verdict(m[1], m[2], "SMOKE TEST", sum(c.passed for c in pending), len(pending),
                                 tuple(pending)))
            pending = []
    return found


_PART = re.compile(r"^PART (\S+) \((\w+)\) (HOLDS|DOES NOT HOLD|INCONCLUSIVE|not shown by the DLGN): ")


def parts_of(nb) -> list[dict]:
    """The parts a notebook decided (``dl.parts.show`` under full: ``PART C5 (b) HOLDS: …``), each
    ``{"claim", "label", "word", "dlgn_undecided"}``; a smoke test's lines decide nothing and are
    not read."""
    from dlgn_lib.parts import DLGN_UNDECIDED
    return [{"claim": m[1], "label": m[2], "word": m[3], "dlgn_undecided": DLGN_UNDECIDED in line}
            for line in _stdout_lines(nb) if (m := _PART.match(line))]


def seconds_of(nb) -> float:
    """Execution time: papermill's duration, else the sum of the cells' recorded timings."""
    duration = nb.metadata.get("papermill", {}).get("duration")
    if duration is not None:
        return float(duration)
    total = 0.0
    for timing in (cell.get("metadata", {}).get("execution", {}) for cell in nb.cells):
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            start, end = (datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))
            total += (end - start).total_seconds()
    return total


def _unfinished(nb) -> str | None:
    """Why an executed notebook did not finish, or None: a cell that printed an error, a cell
    papermill left pending or running (the run stopped or was interrupted), papermill's exception."""
    for k, cell in enumerate(nb.cells, 1):
        error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        if error is not None:
            said = (str(error.get("evalue", "")).strip().splitlines() or [""])[0][:120]
            return f"stopped at an error in cell {k} ({error.get('ename', 'an error')}: {said})"
        if cell.get("metadata", {}).get("papermill", {}).get("status") in ("pending", "running"):
            return f"did not finish: cell {k} never ran to its end (the run stopped or was interrupted)"
    if nb.metadata.get("papermill", {}).get("exception"):
        return "did not finish: papermill recorded an exception"
    return None


def _notebooks(folder: Path) -> dict[str, Path]:
    return {locations.notebook_id(p): p for p in locations.find_notebooks(folder)}


def _record_of(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    return {"notebook": path.name, "seconds": round(seconds_of(nb)),
            "verdicts": [{"claim": v.claim, "profile": v.profile, "word": v.word, "n_pass": v.n_pass,
                          "n_checks": v.n_checks,
                          # the interval fields only where the check has them (rules v3)
                          "checks": [{k: x for k, x in c.__dict__.items() if x is not None} for c in v.checks]}
                         for v in verdicts_of(nb)], **({"parts": parts} if (parts := parts_of(nb)) else {})}


def _verdicts_from_record(entry: dict) -> list[Verdict]:
    """Verdicts of a record entry; entries recorded before rules v3 say ``supported`` and ``passed``."""
    def check(c: dict) -> Check:
        old = {"outcome": "pass" if c["passed"] else "fail"} if "passed" in c else {}
        return Check(**{k: v for k, v in c.items() if k != "passed"}, **old)

    return [Verdict(v["claim"], v["profile"], v["word"] if "word" in v else
                    ("SUPPORTED" if v["supported"] else "NOT SUPPORTED"), v["n_pass"], v["n_checks"],
                    tuple(check(c) for c in v["checks"])) for v in entry["verdicts"]]


def code_path_of(path: Path) -> str:
    """The numeric code path an executed notebook's kernel ran (the ``numerics: ...`` line its versions
    cell prints, ``dlgn_lib.numerics.describe``), or "not printed"."""
    return next((line for line in _stdout_lines(nbformat.read(path, as_version=4)) if line.startswith("numerics: ")),
                "not printed")
