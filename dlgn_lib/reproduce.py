"""Printed outputs that hold on every machine: numbers, their spread across CPU code paths, tolerances.

Float results depend on the CPU's code path (MKL's branch, ATen's vector kernels), and training
magnifies last-bit differences, so a notebook's printed numbers differ from one x86-64 machine to
another while its words and verdicts do not (reconstruction §7). This module splits every text
output into a *skeleton* (the text with each number replaced by ``#``) and its numbers:

- skeletons are compared exactly (verdict lines, ``[pass]`` / ``[FAIL]``, every word);
- numbers are compared within a tolerance derived from their measured spread: for each printed
  number, ``TOLERANCE_FACTOR`` times the range of values it took across the code paths of
  ``docs/spread.json`` (written by ``python -m dlgn_lib.series spread``), and never less than one
  unit of its last printed digit (printing rounds; a plain integer gets no such allowance);
- a word that changed across code paths (a fragile result) may take any of its recorded forms.

The same comparison serves nbval (``tests/nbval_tolerance.py``, in ``make test``) and
``make verify`` (:mod:`dlgn_lib.verify`).
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlgn_lib import locations

SPREAD_RECORD = locations.REPO_ROOT / "docs" / "spread.json"

#: A number as the notebooks print it: optional sign (ASCII or Unicode minus), digits with optional
#: thousands commas and decimals, optional exponent; not part of a word (``C5``, ``05_smooth``,
#: ``480px`` and ``#1f77b4`` are words).
NUMBER = re.compile(r"(?<![\w.])[-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
                    r"|(?<![\w.])[-\u2212]?\.\d+(?![\w])")
PLACEHOLDER = "#"

#: Tolerance = factor x the measured range of a number across code paths (at least one unit of
#: its last printed digit). Chosen before any cross-machine comparison: the range of a handful of
#: code paths underestimates the spread of all CPUs, so it is widened.
TOLERANCE_FACTOR = 3.0

#: Output keys nbval does not compare (its own list: random widget ids, images), left out here too.
SKIPPED_KEYS = frozenset({"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                          "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"})


def sanitize_patterns(path: Path | None = None) -> list[tuple[str, str]]:
    """The (regex, replacement) pairs of ``tests/nbval_sanitize.cfg``: what differs on every run."""
    path = path or locations.REPO_ROOT / "tests" / "nbval_sanitize.cfg"
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", path.read_text(), flags=re.MULTILINE)


def sanitize(text: str, patterns: Sequence[tuple[str, str]]) -> str:
    for regex, replace in patterns:
        text = re.sub(regex, replace, text)
    return text


@dataclass(frozen=True)
class Number:
    """One printed number: its text, value, and one unit of its last printed digit (0 for integers)."""
    text: str

    @property
    def value(self) -> float:
        return float(self.text.replace(",", "").replace("\u2212", "-"))

    @property
    def unit(self) -> float:
        plain = self.text.replace(",", "").replace("\u2212", "-").lstrip("-")
        mantissa, _, exponent = plain.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        if not exponent and "." not in mantissa:
            return 0.0
        return 10.0 ** (int(exponent or 0) - decimals)


_SPACES = re.compile(r"[ \t]+")


def split(text: str) -> tuple[str, list[Number]]:
    """A text's skeleton (each number replaced by ``#``, runs of spaces by one: a table's columns
    shift when a number's width changes) and its numbers, in order."""
    numbers = [Number(m.group(0)) for m in NUMBER.finditer(text)]
    return _SPACES.sub(" ", NUMBER.sub(PLACEHOLDER, text)), numbers


def text_outputs(outputs: Iterable[Mapping], sanitize_text=lambda text: text) -> dict[str, list[str]]:
    """A cell's compared outputs grouped as nbval groups them: stream name or MIME key -> texts in order.

    Streams of one name are joined into one text, as nbval's ``coalesce_streams`` does; keys nbval
    does not compare (:data:`SKIPPED_KEYS`) are left out; ``sanitize_text`` is applied to each text.
    """
    groups: dict[str, list[str]] = defaultdict(list)
    streams: dict[str, list[str]] = {}
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            if output["name"] not in streams:
                streams[output["name"]] = []
                groups[output["name"]].append("")   # filled in below, at the first stream's place
            streams[output["name"]].append(_text(output["text"]))
        elif kind == "error":
            groups["error"].append(f"{output.get('ename')}: {output.get('evalue')}")
        elif "data" in output:
            for key, value in output["data"].items():
                if key not in SKIPPED_KEYS:
                    groups[key].append(sanitize_text(_text(value)))
    for name, parts in streams.items():
        groups[name][0] = sanitize_text(_CARRIAGE_RETURN.sub("", "".join(parts)))
    return dict(groups)


_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)   # nbval drops what a \r overwrote


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def cell_outputs(nb, patterns: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, list[str]]]:
    """Every code cell's compared outputs, by cell id (cells without outputs left out)."""
    cells = {}
    for index, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        groups = text_outputs(cell.get("outputs", []), lambda text: sanitize(text, patterns))
        if groups:
            cells[cell.get("id") or f"cell-{index}"] = groups
    return cells


def output_key(cell_id: str, key: str, position: int) -> str:
    """The record's name of one output: ``<cell id>/<MIME key>/<position among that key's outputs>``."""
    return f"{cell_id}/{key}/{position}"


# --- tolerances --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tolerance:
    """What the spread record says of one output: each number's range, the skeletons seen, and
    (for an output whose words changed) every code path's numbers."""
    ranges: tuple[float, ...] = ()
    skeletons: tuple[str, ...] = ()
    values: tuple[tuple[str, ...], ...] = ()

    def allowed(self, index: int, ref: Number, new: Number) -> float:
        """Largest allowed |new - ref| for the ``index``-th number of the output."""
        measured = self.ranges[index] if index < len(self.ranges) else 0.0
        floor = max(ref.unit, new.unit) if (ref.unit or new.unit) else 0.0
        return max(TOLERANCE_FACTOR * measured, floor)


NO_RECORD = Tolerance()


def load_record(path: Path | None = None) -> dict:
    """The spread record (``docs/spread.json``), or an empty one when there is none yet."""
    path = Path(path or SPREAD_RECORD)
    if not path.exists():
        return {"notebooks": {}}
    return json.loads(path.read_text())


def check_outcomes(notebook: str, record: Mapping | None = None) -> dict[str, list[str]]:
    """Per check of ``notebook``, its outcome under each code path of the spread record ("pass",
    "fail", "inconclusive"; a check with one number records True / False, read as pass / fail)."""
    from dlgn_lib.verdict import outcome_name
    record = load_record() if record is None else record
    checks = record.get("notebooks", {}).get(notebook, {}).get("checks", {})
    return {name: [outcome_name(v) for k, v in paths.items() if k != "committed"] for name, paths in checks.items()}


def sensitive_checks(notebook: str, record: Mapping | None = None) -> set[str]:
    """The checks of ``notebook`` whose outcome moves across the code paths and CPUs of the spread
    record: machine-sensitive, counted inconclusive in their part under rules v4 (``dl.parts``)."""
    return {name for name, outcomes in check_outcomes(notebook, record).items() if len(set(outcomes)) > 1}


def tolerance_for(record: Mapping, notebook: str, cell_id: str, key: str, position: int) -> Tolerance:
    entry = record.get("notebooks", {}).get(notebook, {}).get("outputs", {}).get(output_key(cell_id, key, position))
    if entry is None:
        return NO_RECORD
    values = tuple(tuple(v) for v in entry.get("values", {}).values()) if "skeletons" in entry else ()
    return Tolerance(tuple(entry.get("ranges", ())), tuple(entry.get("skeletons", ())), values)


@dataclass(frozen=True)
class Difference:
    """One disagreement between a reference output and a new one."""
    kind: str          # "text" (the words differ) or "number" (a number outside its tolerance)
    where: str         # output key (cell id / MIME key / position)
    detail: str
    excess: float = 0.0   # for numbers: |new - ref| / allowed (inf when nothing was allowed)


@dataclass(frozen=True)
class Comparison:
    """The result of comparing one output: its differences and how many numbers were compared."""
    differences: tuple[Difference, ...]
    numbers: int
    worst: float   # largest |new - ref| / allowed over the numbers (0 when all equal)


def compare_text(ref: str, new: str, tolerance: Tolerance = NO_RECORD, where: str = "") -> Comparison:
    """Compare two output texts: skeletons exactly (or one recorded alternative), numbers within tolerance."""
    ref_skeleton, ref_numbers = split(ref)
    new_skeleton, new_numbers = split(new)
    if new_skeleton != ref_skeleton and new_skeleton not in tolerance.skeletons:
        return Comparison((Difference("text", where, _first_difference(ref_skeleton, new_skeleton)),), 0, math.inf)
    if new_skeleton != ref_skeleton:
        return _compare_alternative(new, new_numbers, tolerance, where)
    differences, worst = [], 0.0
    for index, (a, b) in enumerate(zip(ref_numbers, new_numbers)):
        gap = abs(b.value - a.value)
        if math.isnan(gap) or gap == 0:
            continue
        allowed = tolerance.allowed(index, a, b)
        excess = gap / allowed if allowed > 0 else math.inf
        worst = max(worst, excess)
        if excess > 1 + 1e-9:   # decimal gaps such as 0.890 - 0.889 are not exact in binary
            differences.append(Difference(
                "number", where, f"number {index + 1} ({_context(ref, index)}): {a.text} -> {b.text}, "
                                 f"|difference| {gap:.3g} > allowed {allowed:.3g}", excess))
    return Comparison(tuple(differences), len(ref_numbers), worst)


def _compare_alternative(new: str, numbers: list[Number], tolerance: Tolerance, where: str) -> Comparison:
    """An output in one of its recorded other forms (a fragile result): each number must lie in the
    span of the values recorded for it, widened by the tolerance factor times that span and a unit."""
    recorded = [[Number(t).value for t in v] for v in tolerance.values if len(v) == len(numbers)]
    differences = []
    for index, number in enumerate(numbers):
        seen = [v[index] for v in recorded if math.isfinite(v[index])]
        if not seen or not math.isfinite(number.value):
            continue
        lo, hi = min(seen), max(seen)
        slack = TOLERANCE_FACTOR * (hi - lo) + number.unit
        if not lo - slack - 1e-12 <= number.value <= hi + slack + 1e-12:
            differences.append(Difference("number", where, f"number {index + 1} ({_context(new, index)}): "
                                          f"{number.text} outside the recorded {lo:g}..{hi:g} (+- {slack:.3g})"))
    return Comparison(tuple(differences), len(numbers), 0.0)


def _first_difference(a: str, b: str) -> str:
    a_lines, b_lines = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(a_lines, b_lines)):
        if x != y:
            return f"line {i + 1}: expected {x.strip()[:160]!r}, got {y.strip()[:160]!r}"
    return f"expected {len(a_lines)} lines, got {len(b_lines)}"


def _context(text: str, index: int) -> str:
    match = list(NUMBER.finditer(text))[index]
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    line = text[start:end if end >= 0 else None].strip()
    return line if len(line) <= 100 else line[:97] + "..."


def compare_groups(ref: Mapping[str, Sequence[str]], new: Mapping[str, Sequence[str]], record: Mapping,
                   notebook: str, cell_id: str) -> list[Comparison]:
    """Compare one cell's grouped outputs (as :func:`text_outputs` makes them)."""
    results = []
    for key in sorted(set(ref) | set(new)):
        r, n = list(ref.get(key, ())), list(new.get(key, ()))
        if len(r) != len(n):
            results.append(Comparison((Difference("text", f"{cell_id}/{key}",
                                                  f"{len(r)} {key} outputs expected, got {len(n)}"),), 0, math.inf))
            continue
        for position, (a, b) in enumerate(zip(r, n)):
            where = output_key(cell_id, key, position)
            results.append(compare_text(a, b, tolerance_for(record, notebook, cell_id, key, position), where))
    return results


# --- the spread record ---------------------------------------------------------------------------

def spread_entries(variants: Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]) -> dict[str, dict]:
    """Per output, the spread of its numbers across variants (``variant -> cell id -> groups``).

    Each entry: ``values`` (variant -> that output's numbers as printed), ``ranges`` (max - min of
    each number over the variants whose skeleton equals the first variant's), ``skeletons`` (every
    distinct skeleton; more than one marks a fragile output) and ``changed_words`` (lines whose
    words differ across variants).
    """
    names = list(variants)
    entries = {}
    cell_ids = list(dict.fromkeys(c for v in variants.values() for c in v))
    for cell_id in cell_ids:
        keys = list(dict.fromkeys(k for v in variants.values() for k in v.get(cell_id, {})))
        for key in keys:
            count = max(len(v.get(cell_id, {}).get(key, ())) for v in variants.values())
            for position in range(count):
                texts = {name: variants[name].get(cell_id, {}).get(key, [None] * count)[position]
                         for name in names}
                texts = {name: text for name, text in texts.items() if text is not None}
                if not texts:
                    continue
                parts = {name: split(text) for name, text in texts.items()}
                base = next(iter(parts.values()))[0]
                same = [name for name, (skeleton, _) in parts.items() if skeleton == base]
                n = len(parts[same[0]][1])
                ranges = []
                for i in range(n):
                    values = [parts[name][1][i].value for name in same]
                    finite = [v for v in values if math.isfinite(v)]
                    ranges.append(max(finite) - min(finite) if finite else 0.0)
                skeletons = list(dict.fromkeys(skeleton for skeleton, _ in parts.values()))
                entry = {"ranges": ranges,
                         "values": {name: [x.text for x in numbers] for name, (_, numbers) in parts.items()}}
                if len(skeletons) > 1:
                    entry["skeletons"] = skeletons
                    entry["changed_words"] = _changed_lines(skeletons)
                if n or len(skeletons) > 1:
                    entries[output_key(cell_id, key, position)] = entry
    return entries


def _changed_lines(skeletons: Sequence[str]) -> list[str]:
    lines = [s.splitlines() for s in skeletons]
    changed = []
    for i in range(max(len(x) for x in lines)):
        forms = list(dict.fromkeys(x[i].strip() if i < len(x) else "" for x in lines))
        if len(forms) > 1:
            changed.append(" | ".join(forms)[:300])
    return changed


def relative_spread(entry: Mapping, reference: str) -> float:
    """Largest range / |reference value| of an output's numbers (numbers printed as 0 left out)."""
    worst = 0.0
    values = entry["values"].get(reference) or next(iter(entry["values"].values()))
    for r, text in zip(entry["ranges"], values):
        value = abs(Number(text).value)
        if r and value and math.isfinite(value):
            worst = max(worst, r / value)
    return worst


def summarise(entries: Mapping[str, Mapping], reference: str) -> dict:
    """A notebook's line of the record: numbers, numbers that moved, largest relative spread, fragile outputs."""
    numbers = sum(len(e["ranges"]) for e in entries.values())
    moved = sum(1 for e in entries.values() for r in e["ranges"] if r)
    fragile = {k: e["changed_words"] for k, e in entries.items() if "changed_words" in e}
    checks_changed = [line for lines in fragile.values() for line in lines
                      if "[pass]" in line or "[FAIL]" in line or "VERDICT" in line]
    worst_key = max(entries, key=lambda k: relative_spread(entries[k], reference), default=None)
    return {
        "numbers": numbers,
        "numbers_that_moved": moved,
        "largest_relative_spread": round(relative_spread(entries[worst_key], reference), 4) if worst_key else 0.0,
        "largest_relative_spread_at": worst_key,
        "fragile_outputs": len(fragile),
        "checks_changed": checks_changed,
    }


# --- figures -------------------------------------------------------------------------------------

#: RMS pixel difference (0-255 scale) allowed to a figure whose pixels did not move in the spread,
#: the size slack of the comparison, and the comparison itself: the presentation layer's
#: (``dlgn_lib.plots``), which ``save_figure`` uses too.
from dlgn_lib.plots import FIGURE_FLOOR_RMS, FIGURE_SIZE_SLACK, figure_rms  # noqa: E402,F401


def figure_tolerance(record: Mapping, notebook: str, name: str) -> float:
    """Allowed RMS of a figure: the tolerance factor times its largest measured RMS across code
    paths, at least :data:`FIGURE_FLOOR_RMS`."""
    measured = record.get("notebooks", {}).get(notebook, {}).get("figures", {}).get(name, {})
    finite = [v for v in measured.values() if math.isfinite(v)]
    return max(TOLERANCE_FACTOR * max(finite, default=0.0), FIGURE_FLOOR_RMS)
