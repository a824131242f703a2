"""Printed outputs that hold on every machine, and the tools that measure and check them.

    python -m dlgn_lib.record.reproduce spread [--only 05 07 ...] [--variants NAME ...] [--reuse] [--add]
    python -m dlgn_lib.record.reproduce verify [--profile quick|full] [--only 05 07 ...] [--no-run]
    python -m dlgn_lib.record.reproduce outputs [--only 05 07 ...]

Float results depend on the CPU's code path (MKL's branch, ATen's vector kernels), and training
magnifies last-bit differences, so a notebook's printed numbers differ from one x86-64 machine to
another while its words and verdicts do not (reconstruction §7). This module splits every text
output into a *skeleton* (the text with each number replaced by ``#``) and its numbers:

- skeletons are compared exactly (verdict lines, ``[pass]`` / ``[FAIL]``, every word);
- numbers are compared within a tolerance derived from their measured spread: for each printed
  number, ``TOLERANCE_FACTOR`` times the range of values it took across the code paths of
  ``docs/spread.json`` (written by ``python -m dlgn_lib.record.reproduce spread``), and never less than one
  unit of its last printed digit (printing rounds; a plain integer gets no such allowance);
- a word that changed across code paths (a fragile result) may take any of its recorded forms.

The same comparison serves nbval (``tests/nbval_tolerance.py``, in ``make test``) and
``make verify`` (:func:`verify`, below).

``spread`` executes the quick series once per CPU code path of :data:`VARIANTS` (each with an empty
run cache of its own, under ``build/spread/<variant>/``) and writes ``docs/spread.json``: for every
printed number of every compared output, the values it took under each code path and the
committed notebooks, and their range; for every figure, its RMS pixel difference from the
committed one; a summary per notebook (largest relative spread, outputs whose words changed, checks
whose pass/fail changed). The tolerances above come from it.

``verify`` executes the series into ``build/verify/`` (figures included: ``notebooks/`` and
``figures/`` are never touched) and compares every output with the committed notebooks (quick) or
every verdict and check with ``docs/full_results.json`` (full), and every figure with the committed
one, and prints one table. Exit status 1 when anything is outside its tolerance.

Both check their inputs before they run anything (``--only`` ids, ``--variants``, the records they
read): a refusal is one line naming the file and the reason, exit status 1 (2 for bad arguments). The
series runs in a child process; when it stops before it has run every notebook, nothing is compared
and ``docs/spread.json`` is unchanged. On Ctrl-C the child prints what finished and this command
what to rerun (exit status 130). The record is written whole or not at all.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from dlgn_lib import files, locations, verdict

from dlgn_lib.record import executed
from dlgn_lib.plots import FIGURE_FLOOR_RMS, figure_rms  # noqa: F401 (figure_rms: the record tools' name)
from dlgn_lib.record.provenance import code_version, machine, machine_label  # noqa: F401 (the record tools' names)

__all__ = ["figure_tolerance", "load_record", "main"]

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


def _cell_outputs(nb, patterns: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, list[str]]]:
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
    """The spread record (``docs/spread.json``), or an empty one when there is none yet; a
    ``files.Refusal`` naming the file when it is damaged."""
    path = Path(path or SPREAD_RECORD)
    if not path.exists():
        return {"notebooks": {}}
    return _read_record(path, "the spread record")


def _read_record(path: Path, what: str) -> dict:
    """The record in ``path`` (``docs/spread.json``, ``docs/full_results.json``); a ``files.Refusal``
    naming the file when it is missing, not JSON, or has no ``notebooks`` table."""
    record = files.read_json(path, dict, what)
    if not isinstance(record.get("notebooks"), dict):
        raise files.Refusal(f"{locations.display_path(path)} has no \"notebooks\" table ({what})")
    return record


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


def _relative_spread(entry: Mapping, reference: str) -> float:
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
    worst_key = max(entries, key=lambda k: _relative_spread(entries[k], reference), default=None)
    return {
        "numbers": numbers,
        "numbers_that_moved": moved,
        "largest_relative_spread": round(_relative_spread(entries[worst_key], reference), 4) if worst_key else 0.0,
        "largest_relative_spread_at": worst_key,
        "fragile_outputs": len(fragile),
        "checks_changed": checks_changed,
    }


# --- figures -------------------------------------------------------------------------------------

# The floor of a figure's tolerance (FIGURE_FLOOR_RMS) and the comparison itself (figure_rms) are
# the presentation layer's (dlgn_lib.plots), which save_figure uses too.


def figure_tolerance(record: Mapping, notebook: str, name: str) -> float:
    """Allowed RMS of a figure: the tolerance factor times its largest measured RMS across code
    paths, at least :data:`FIGURE_FLOOR_RMS`."""
    measured = record.get("notebooks", {}).get(notebook, {}).get("figures", {}).get(name, {})
    finite = [v for v in measured.values() if math.isfinite(v)]
    return max(TOLERANCE_FACTOR * max(finite, default=0.0), FIGURE_FLOOR_RMS)


#: The code paths ``spread`` runs: name -> environment. "pinned" is the default of every run
#: (:mod:`dlgn_lib.numerics`) and so the one that made the committed outputs; the others are
#: stand-ins for other x86-64 CPUs on this one.
VARIANTS: dict[str, dict[str, str]] = {
    "pinned": {},
    "pinned, libm without FMA/AVX2": {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F"},
    "native": {"DLGN_NUMERICS": "native"},
    "native, MKL_CBWR=AVX2": {"DLGN_NUMERICS": "native", "MKL_CBWR": "AVX2"},
    "native, MKL_CBWR=COMPATIBLE": {"DLGN_NUMERICS": "native", "MKL_CBWR": "COMPATIBLE"},
    "native, ATEN_CPU_CAPABILITY=avx2": {"DLGN_NUMERICS": "native", "ATEN_CPU_CAPABILITY": "avx2"},
    "native, ATEN_CPU_CAPABILITY=default": {"DLGN_NUMERICS": "native", "ATEN_CPU_CAPABILITY": "default"},
}
#: The code path ``.ci/run`` runs nbval under: not the one that made the committed outputs (ATen's
#: AVX-512 or AVX2 kernels and MKL's own branch, whichever the CPU has).
CI_VARIANT = "native"

def _slug(variant: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in variant.lower()).strip("-").replace("--", "-")


# --- running the series under a code path ------------------------------------------------------

def _run_series_under(variant_env: Mapping[str, str] | None, out: Path, profile: str, only: Sequence[str] | None,
                     workers: int | None = None, fresh_cache: bool = True, *, then: str, rerun: str) -> None:
    """Execute the series in a child process with ``variant_env`` set (None: this process's code
    path as it is); notebooks, figures and (when ``fresh_cache``) the run cache all go under
    ``out``. A ``files.Refusal`` when the child stopped before it ran every notebook (it wrote no
    ``series.json``); ``KeyboardInterrupt`` on Ctrl-C, once the child has printed what finished.
    Their messages end with ``then`` (what became of the record) and ``rerun`` (what to run again)."""
    env = dict(os.environ)
    if variant_env is not None:
        # the pin this process applied to itself must not leak into a variant: the child pins anew
        env = {k: v for k, v in env.items() if k not in _reproduce_variables()}
        env.update(variant_env)
    env["DLGN_FIGURES_DIR"] = str(out / "figures")
    if fresh_cache:
        env["DLGN_RUNS_DIR"] = str(out / "runs")
    command = [sys.executable, "-m", "dlgn_lib.record.series", "run", "--profile", profile, "--output", str(out / "notebooks")]
    if only:
        command += ["--only", *only]
    if workers:
        command += ["--workers", str(workers)]
    note = out / "notebooks" / executed.SERIES_NOTE
    note.unlink(missing_ok=True)   # the child writes it when it has run every notebook
    where = f"the series run into {locations.display_path(out / 'notebooks')}"
    # A process group of its own: Ctrl-C reaches it once, from here, and this process waits while
    # it stops its notebooks, prints what finished and removes its kernels' files.
    child = subprocess.Popen(command, env=env, cwd=locations.REPO_ROOT, process_group=0)
    try:
        status = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        child.wait()
        raise KeyboardInterrupt(f"{where} was stopped (what finished is above); {then}; {rerun}") from None
    if status not in (0, 1) or not note.is_file():
        raise files.Refusal(f"{where} stopped with exit status {status} before it ran every notebook "
                            f"(its message is above); {then}")


def _reproduce_variables() -> set[str]:
    """Every variable a variant or the pin sets (cleared before a variant's own are applied)."""
    from dlgn_lib import numerics
    return {name for env in VARIANTS.values() for name in env} | set(numerics.PINNED) | {"DLGN_NUMERICS"}


# --- the spread record -------------------------------------------------------------------------

def _committed(folder: Path | None = None) -> dict[str, Path]:
    return {locations.notebook_id(p): p for p in locations.find_notebooks(folder)}


def _compared_cells(nb) -> set[str]:
    """Ids of the cells nbval compares (not marked NBVAL_IGNORE_OUTPUT / NBVAL_SKIP / nbval tags)."""
    ids = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        if {"nbval-ignore-output", "nbval-skip", "raises-exception"} & tags:
            continue
        if "NBVAL_IGNORE_OUTPUT" in cell.source or "NBVAL_SKIP" in cell.source or "NBVAL_RAISES_EXCEPTION" in cell.source:
            continue
        ids.add(cell.get("id"))
    return ids


def compared_outputs(path: Path, keep: set[str] | None = None, patterns=None) -> dict:
    """A notebook's compared outputs by cell id, restricted to ``keep`` (default: its own compared cells)."""
    nb = nbformat.read(path, as_version=4)
    keep = _compared_cells(nb) if keep is None else keep
    patterns = sanitize_patterns() if patterns is None else patterns
    return {cid: groups for cid, groups in _cell_outputs(nb, patterns).items() if cid in keep}


def build_record(variant_dirs: Mapping[str, Path], committed_dir: Path | None = None,
                 figures_dir: Path | None = None) -> dict:
    """The spread record from executed copies of the series, one folder per code path."""
    committed = _committed(committed_dir)
    figures_dir = figures_dir or locations.REPO_ROOT / "figures"
    patterns = sanitize_patterns()
    notebooks = {}
    for nb_id, path in committed.items():
        keep = _compared_cells(nbformat.read(path, as_version=4))
        variants = {"committed": compared_outputs(path, keep, patterns)}
        failed = {}
        for name, folder in variant_dirs.items():
            copy = folder / "notebooks" / path.name
            if not copy.exists():
                failed[name] = "not executed"
            elif (error := _error_of(copy)) is not None:
                failed[name] = error   # a notebook that stopped with an error measures no spread
            else:
                variants[name] = compared_outputs(copy, keep, patterns)
        entries = spread_entries(variants)
        checks = outcomes_of_copies({"committed": path, **{name: folder / "notebooks" / path.name
                                                        for name, folder in variant_dirs.items() if name not in failed}})
        figures = {}
        for png in sorted(figures_dir.glob(f"{nb_id}_*.png")):
            rms = {name: figure_rms(png, folder / "figures" / png.name)
                   for name, folder in variant_dirs.items()
                   if name not in failed and (folder / "figures" / png.name).exists()}
            figures[png.name] = {k: round(v, 3) for k, v in rms.items()}
        notebooks[nb_id] = {"notebook": path.name, "variants": [n for n in variants if n != "committed"],
                            "failed": failed,
                            "summary": _summary(entries, checks),
                            "checks": checks, "figures": figures, "outputs": entries}
    return {"about": "Spread of every printed number and figure of the quick series across CPU code paths "
                     "(python -m dlgn_lib.record.reproduce spread); reconstruction §7 says how tolerances follow from it.",
            "machine": machine(), "code_version": code_version(),
            "variants": {name: VARIANTS.get(name, {}) for name in variant_dirs},
            "tolerance_factor": TOLERANCE_FACTOR, "notebooks": notebooks}


def with_machine(machines: Sequence[Mapping], new: Mapping, notebooks: Sequence[str] | None) -> list[dict]:
    """The record's ``machines`` with the machine of ``new`` in it once, and the notebooks it measured
    (``notebooks``; None when it measured them all). A machine already listed gains the notebooks,
    and its ``code_version`` becomes that of this measurement (the code its latest code paths ran)."""
    label = machine_label(new["machine"])
    machines = [dict(m) for m in machines]
    mine = [m for m in machines if m.get("label") == label]
    if not mine:
        entry = {"label": label, **new["machine"], "code_version": new.get("code_version")}
        if notebooks is not None:
            entry["notebooks"] = sorted(notebooks)
        return [*machines, entry]
    if new.get("code_version"):
        mine[0]["code_version"] = new["code_version"]
    if notebooks is None:
        mine[0].pop("notebooks", None)
    elif "notebooks" in mine[0]:
        mine[0]["notebooks"] = sorted({*mine[0]["notebooks"], *notebooks})
    return machines


def replace_notebooks(old: Mapping, new: Mapping, only: Sequence[str]) -> dict:
    """The record ``old`` with the entries of the notebooks ``only`` measured anew in ``new``.

    For notebooks whose committed outputs changed (a new rule, new seeds), the old entries measure
    outputs that no longer exist, so they cannot be merged: they are replaced by this machine's
    measurement, named ``<code path> @ <machine>``, and the entry says which machine measured it.
    The other notebooks' entries, from every machine, are kept as they were; the record's
    ``machines`` gains this machine, with the notebooks it measured.
    """
    label = machine_label(new["machine"])
    merged = {k: v for k, v in old.items() if k != "notebooks"}
    merged["notebooks"] = dict(old.get("notebooks", {}))
    for nb_id in only:
        entry = new["notebooks"].get(nb_id)
        if entry is None or entry.get("failed") and len(entry["failed"]) == len(new.get("variants", {})):
            raise ValueError(f"notebook {nb_id}: no code path ran it; nothing to replace its record with")
        rename = {name: f"{name} @ {label}" for name in new.get("variants", {})}
        entry = json.loads(json.dumps(entry))
        entry["variants"] = [rename.get(n, n) for n in entry["variants"]]
        entry["failed"] = {rename.get(k, k): v for k, v in entry.get("failed", {}).items()}
        entry["checks"] = {c: {rename.get(k, k): v for k, v in o.items()} for c, o in entry["checks"].items()}
        entry["figures"] = {f: {rename.get(k, k): v for k, v in o.items()} for f, o in entry["figures"].items()}
        for output in entry["outputs"].values():
            if isinstance(output, dict) and isinstance(output.get("values"), dict):
                output["values"] = {rename.get(k, k): v for k, v in output["values"].items()}
        entry["measured_on"] = {"machine": label, "code_version": new.get("code_version")}
        merged["notebooks"][nb_id] = entry
    merged["machines"] = with_machine(old.get("machines", []), new, only)
    merged["variants"] = {**old.get("variants", {}),
                          **{f"{n} @ {label}": env for n, env in new.get("variants", {}).items()}}
    return merged


#: An output that quotes the record of ``full`` runs (a quick notebook's SMOKE TEST line): its
#: numbers come from that file, not from the code path, and change when a full run is recorded.
QUOTES_FULL_RECORD = "docs/full_results.json"


def rebase_committed(record: Mapping, nb_id: str, before: Mapping, after: Mapping,
                     checks: Mapping | None = None) -> dict:
    """The record with notebook ``nb_id``'s committed values taken from its outputs ``after`` it was
    re-executed in place (``reproduce outputs``) on a code path the record has measured; ``before``
    are its compared outputs as they were (both as :func:`compared_outputs` gives them).

    Every compared output must print, number for number, what one of the recorded code paths
    printed, in words it printed before or a recorded alternative (a fragile output); or quote the
    record of full runs (:data:`QUOTES_FULL_RECORD`), whose numbers are the same on every code
    path. The new reference is then one of the measured variants, and the measured spread still
    covers every code path: ranges do not depend on which variant is the reference, and a figure's
    RMS distance to the new reference is at most twice its recorded largest (the tolerance allows
    three times). An output whose words moved to a recorded alternative gets the range over every
    code path. ``checks`` (check name -> outcome, as :func:`outcomes_of_copies` gives them) become the
    committed outcomes; each must be one a recorded code path had. Anything else raises
    ``ValueError`` naming the output or check: the outputs changed, and ``reproduce spread`` must
    measure them again.
    """
    entry = record.get("notebooks", {}).get(nb_id)
    again = f"run python -m dlgn_lib.record.reproduce spread --only {nb_id}"
    if entry is None:
        raise ValueError(f"notebook {nb_id}: not in the spread record; {again}")
    entry = json.loads(json.dumps(entry))
    old = {output_key(c, k, i): text for c, groups in before.items()
           for k, texts in groups.items() for i, text in enumerate(texts)}
    seen = set()
    for cell_id, groups in after.items():
        for key, texts in groups.items():
            for position, text in enumerate(texts):
                where = output_key(cell_id, key, position)
                seen.add(where)
                skeleton, numbers = split(text)
                out = entry["outputs"].get(where, {})
                quotes = QUOTES_FULL_RECORD in text
                if where not in old or (skeleton != split(old[where])[0]
                                        and skeleton not in out.get("skeletons", ()) and not quotes):
                    raise ValueError(f"notebook {nb_id}, output {where}: its words changed; {again}")
                if not numbers:
                    continue
                printed = [n.text for n in numbers]
                if len(out.get("ranges", ())) != len(printed):
                    raise ValueError(f"notebook {nb_id}, output {where}: not measured in this form; {again}")
                measured = [v for name, v in out["values"].items() if name != "committed"]
                if printed not in measured and not quotes:
                    raise ValueError(f"notebook {nb_id}, output {where}: prints {' '.join(printed)[:120]}, "
                                     f"which no recorded code path printed; {again}")
                if out.get("skeletons") and skeleton != out["skeletons"][0]:
                    columns = [[Number(v[i]).value for v in [*measured, printed]] for i in range(len(printed))]
                    out["ranges"] = [max(f) - min(f) if (f := [x for x in c if math.isfinite(x)]) else 0.0
                                     for c in columns]
                    out["skeletons"] = [skeleton, *(s for s in out["skeletons"] if s != skeleton)]
                out["values"]["committed"] = printed
    gone = sorted(set(old) - seen)
    if gone:
        raise ValueError(f"notebook {nb_id}: outputs {', '.join(gone[:5])} are no longer printed; {again}")
    for name, outcome in (checks or {}).items():
        recorded = entry["checks"].get(name, {})
        if outcome not in [v for k, v in recorded.items() if k != "committed"]:
            raise ValueError(f"notebook {nb_id}, check {name!r}: {outcome!r} is an outcome no recorded code path had; {again}")
        recorded["committed"] = outcome
    entry["committed_on"] = {"machine": machine_label(), "code_version": code_version()}
    rebased = json.loads(json.dumps(record))
    rebased["notebooks"][nb_id] = entry
    return rebased


def merge_records(old: Mapping, new: Mapping) -> dict:
    """One spread record from two: every code path of both, each output's ranges over all of them.

    Both records measure against the same committed notebooks (their "committed" values must
    agree: a record of other committed outputs cannot be merged). Per output, ``values`` gains the
    new code paths; a number's range becomes the larger of the two records' ranges and the range
    over the union of values of the code paths that printed the output's committed words; skeletons
    and changed words are united. Checks' outcomes, figure RMS and failures are united, and the
    summary is computed again. The record's ``machines`` lists every machine that contributed.
    """
    merged = {k: v for k, v in old.items() if k != "notebooks"}
    machines = old.get("machines", [{"label": machine_label(old["machine"]), **old["machine"],
                                     "code_version": old.get("code_version")}] if old.get("machine") else [])
    measured = sorted(new.get("notebooks", {}))
    merged["machines"] = with_machine(machines, new, measured if measured != sorted(old.get("notebooks", {})) else None)
    merged["variants"] = {**old.get("variants", {}), **new.get("variants", {})}
    merged["code_version"] = new.get("code_version", old.get("code_version"))
    notebooks = {}
    for nb_id in dict.fromkeys([*old.get("notebooks", {}), *new.get("notebooks", {})]):
        a, b = old.get("notebooks", {}).get(nb_id), new.get("notebooks", {}).get(nb_id)
        if a is None or b is None:
            notebooks[nb_id] = a or b
            continue
        outputs = {}
        for key in dict.fromkeys([*a["outputs"], *b["outputs"]]):
            outputs[key] = _merge_output(a["outputs"].get(key), b["outputs"].get(key), f"{nb_id} {key}")
        checks = {name: {**a["checks"].get(name, {}), **b["checks"].get(name, {})}
                  for name in dict.fromkeys([*a["checks"], *b["checks"]])}
        figures = {name: {**a["figures"].get(name, {}), **b["figures"].get(name, {})}
                   for name in dict.fromkeys([*a["figures"], *b["figures"]])}
        notebooks[nb_id] = {
            "notebook": a["notebook"], "variants": list(dict.fromkeys([*a["variants"], *b["variants"]])),
            "failed": {**a.get("failed", {}), **b.get("failed", {})},
            "summary": _summary(outputs, checks),
            "checks": checks, "figures": figures, "outputs": outputs}
    merged["notebooks"] = notebooks
    return merged


def _merge_output(a: Mapping | None, b: Mapping | None, where: str) -> dict:
    if a is None or b is None:
        return dict(a or b)
    if a["values"].get("committed") != b["values"].get("committed"):
        raise ValueError(f"{where}: the two records measured other committed outputs "
                         f"({a['values'].get('committed')} against {b['values'].get('committed')}); re-measure instead")
    values = {**a["values"], **b["values"]}
    skeletons = list(dict.fromkeys([*a.get("skeletons", ()), *b.get("skeletons", ())]))
    ranges = []
    for i in range(max(len(a["ranges"]), len(b["ranges"]))):
        larger = max(a["ranges"][i] if i < len(a["ranges"]) else 0.0, b["ranges"][i] if i < len(b["ranges"]) else 0.0)
        if not skeletons:   # every code path printed the committed words: the range over all of them
            finite = [x for x in (Number(v[i]).value for v in values.values() if i < len(v)) if math.isfinite(x)]
            larger = max(larger, max(finite) - min(finite) if finite else 0.0)
        ranges.append(larger)   # words changed somewhere: which values share the committed words is not
                                # recorded, so the larger of the two records' ranges
    entry = {"ranges": ranges, "values": values}
    if skeletons:
        entry["skeletons"] = skeletons
        entry["changed_words"] = list(dict.fromkeys([*a.get("changed_words", ()), *b.get("changed_words", ())]))
    return entry


def _summary(entries: Mapping, checks: Mapping[str, Mapping[str, bool | str]]) -> dict:
    """A notebook's summary line of the record, with its fragile checks (pass/fail differs across code paths)."""
    return {**summarise(entries, "committed"),
            "fragile_checks": sorted(n for n, o in checks.items() if len({verdict.outcome_name(v) for v in o.values()}) > 1)}


def _error_of(path: Path) -> str | None:
    """The first error a notebook's executed copy stopped with (``ename: evalue``), else None."""
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{output.get('ename')}: {output.get('evalue')}"[:300]
    return None


def outcomes_of_copies(copies: Mapping[str, Path]) -> dict[str, dict[str, bool | str]]:
    """Each printed check's outcome under each code path (check name -> variant -> outcome): True or
    False for a check with one number, "pass", "fail" or "inconclusive" for a check over seeds and
    for any check printed inconclusive (a count of rows with undecided ones, rules v3)."""
    outcomes: dict[str, dict[str, bool]] = {}
    for name, path in copies.items():
        if not path.exists():
            continue
        for v in executed.verdicts_of(nbformat.read(path, as_version=4)):
            for check in v.checks:
                three_valued = check.low is not None or check.outcome == "inconclusive"
                outcomes.setdefault(check.name, {})[name] = check.outcome if three_valued else check.passed
    return outcomes


def spread(variants: Sequence[str] | None = None, only: Sequence[str] | None = None, reuse: bool = False,
           out_root: Path | None = None, record: Path | None = None, workers: int | None = None,
           add: bool = False) -> dict:
    """Run the series under each code path (reusing finished ones with ``reuse``) and write the record.

    With ``add`` the record is not replaced: this machine's code paths join the ones already in it
    (:func:`merge_records`), named ``<code path> @ <machine>``, so that the tolerances cover what
    another physical CPU computes as well as the code paths one machine can stand in for.

    The code paths, the ``only`` ids, the record it adds to (``add`` or ``only``) and the record's
    folder are checked before anything runs or is removed. A code path whose series run stops
    before it ran every notebook, or Ctrl-C, leaves the record as it was.
    """
    from dlgn_lib.record.series import _writable
    names = list(variants or VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; available: {list(VARIANTS)}")
    _check_only(only)
    record = Path(record or SPREAD_RECORD)
    old = load_record(record) if add or only else None
    if record.is_dir():
        raise files.Refusal(f"{locations.display_path(record)} is a folder, not a file")
    _writable(record.parent)
    out_root = out_root or locations.build_dir() / "spread"
    dirs = {}
    for i, name in enumerate(names, 1):
        folder = out_root / _slug(name)
        dirs[name] = folder
        expected = [folder / "notebooks" / p.name for p in locations.find_notebooks()
                    if not only or locations.notebook_id(p) in only]
        if reuse and all(p.exists() for p in expected):
            print(f"[{i}/{len(names)}] {name}: reusing {locations.display_path(folder)}", flush=True)
            continue
        print(f"[{i}/{len(names)}] {name}: running the quick series ({' '.join(f'{k}={v}' for k, v in VARIANTS[name].items()) or 'no variables'})", flush=True)
        if folder.exists():
            shutil.rmtree(folder)
        start = time.perf_counter()
        _run_series_under(VARIANTS[name], folder, "quick", only, workers,
                          then=f"{locations.display_path(record)} is unchanged",
                          rerun=f"code paths finished: {', '.join(repr(n) for n in names[:i - 1]) or 'none'}; "
                                "rerun with --reuse to keep them")
        print(f"[{i}/{len(names)}] {name}: ran in {time.perf_counter() - start:.0f} s", flush=True)
    if add:
        label = machine_label()
        new = build_record({f"{name} @ {label}": folder for name, folder in dirs.items()})
        if only:   # the other notebooks were not run here: they keep their entries as they are
            new["notebooks"] = {k: v for k, v in new["notebooks"].items() if k in only}
        data = merge_records(old, new)
    elif only:
        data = replace_notebooks(old, build_record(dirs), only)
    else:
        data = build_record(dirs)
    write_record(data, record)
    return data


def write_record(data: Mapping, record: Path | None = None) -> None:
    """Write the spread record atomically (a reader never sees half of it; a failed write leaves the
    old one and no temporary file, and is a ``files.Refusal`` naming the record)."""
    files.write_atomic(record or SPREAD_RECORD, json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


def _check_only(only: Sequence[str] | None) -> None:
    """A ``ValueError`` naming the ids of ``only`` that are no committed notebook's, and the known ones."""
    from dlgn_lib.record.series import select_notebooks
    if only:
        select_notebooks(locations.find_notebooks(), only)


def spread_table(data: Mapping) -> str:
    """Per notebook: numbers, how many moved, the largest relative spread, fragile outputs, checks changed."""
    rows = [("notebook", "numbers", "moved", "largest relative spread", "outputs whose words changed",
             "fragile checks", "figure RMS max", "failed under")]
    for nb_id, entry in data["notebooks"].items():
        s = entry["summary"]
        rms = [v for fig in entry["figures"].values() for v in fig.values()]
        rows.append((nb_id, str(s["numbers"]), str(s["numbers_that_moved"]), f"{s['largest_relative_spread']:.3g}",
                     str(s["fragile_outputs"]), str(len(s["fragile_checks"])), f"{max(rms, default=0):.2f}",
                     "; ".join(entry.get("failed", {})) or "-"))
    return _table(rows)


def _table(rows) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --- verify --------------------------------------------------------------------------------------

@dataclass
class NotebookCheck:
    notebook: str
    numbers: int = 0
    outside: int = 0
    worst: str = ""
    worst_excess: float = 0.0
    text_differences: int = 0
    verdicts_equal: bool = True
    fragile_flips: int = 0       # checks whose pass/fail differs, each a recorded fragile check
    figures: int = 0
    figures_equal: int = 0
    seconds: float = 0.0
    ran: bool = True
    details: tuple = ()
    intervals: int = 0           # checks with a 90 % interval both in quick and in the full record
    intervals_overlap: int = 0   # of those, the ones whose quick and full intervals overlap

    @property
    def ok(self) -> bool:
        return self.ran and not self.outside and not self.text_differences and self.verdicts_equal \
            and self.figures == self.figures_equal


def compare_quick(nb_id: str, committed: Path, copy: Path, figures: Path, record: Mapping) -> NotebookCheck:
    """One notebook's executed copy against the committed one: outputs, verdict lines, figures."""
    result = NotebookCheck(committed.name)
    if not copy.exists():
        result.ran = False
        return result
    ref_nb, new_nb = nbformat.read(committed, as_version=4), nbformat.read(copy, as_version=4)
    keep, patterns = _compared_cells(ref_nb), sanitize_patterns()
    ref, new = compared_outputs(committed, keep, patterns), compared_outputs(copy, keep, patterns)
    details = []
    for cid in ref:
        for comparison in compare_groups(ref[cid], new.get(cid, {}), record, nb_id, cid):
            result.numbers += comparison.numbers
            for d in comparison.differences:
                details.append(f"{nb_id} {d.where}: {d.detail}")
                if d.kind == "text":
                    result.text_differences += 1
                else:
                    result.outside += 1
            if comparison.worst > result.worst_excess and math.isfinite(comparison.worst):
                result.worst_excess = comparison.worst
    result.verdicts_equal, result.fragile_flips = _verdicts_agree(
        executed.verdicts_of(ref_nb), executed.verdicts_of(new_nb),
        set(record.get("notebooks", {}).get(nb_id, {}).get("summary", {}).get("fragile_checks", ())), details)
    _compare_figures(result, nb_id, figures, record, details)
    result.seconds = executed.seconds_of(new_nb)
    result.details = tuple(details)
    return result


def _verdicts_agree(old, new, fragile: set[str], details: list) -> tuple[bool, int]:
    """Whether two notebooks' verdicts agree: the same claims and checks, each check's pass/fail
    equal unless it is a recorded fragile check (those are counted); the verdict line may then
    differ only as the fragile checks make it."""
    if [(v.claim, v.profile, v.n_checks, tuple(c.name for c in v.checks)) for v in old] != \
            [(v.claim, v.profile, v.n_checks, tuple(c.name for c in v.checks)) for v in new]:
        details.append("verdicts: other claims or checks than the record's")
        return False, 0
    flips, agree = 0, True
    for a, b in zip(old, new):
        for ca, cb in zip(a.checks, b.checks):
            if ca.outcome != cb.outcome:
                if ca.name in fragile:
                    flips += 1
                else:
                    agree = False
                    details.append(f"{a.claim}: check {ca.name!r} {ca.outcome} -> {cb.outcome} "
                                   "(not a recorded fragile check)")
    return agree, flips


def _verdict_key(v):
    return (v.claim, v.profile, v.word, v.n_pass, v.n_checks, tuple((c.name, c.outcome) for c in v.checks))


def _compare_figures(result: NotebookCheck, nb_id: str, figures: Path, record: Mapping, details: list) -> None:
    for png in sorted((locations.REPO_ROOT / "figures").glob(f"{nb_id}_*.png")):
        new = figures / png.name
        result.figures += 1
        if not new.exists():
            details.append(f"{nb_id} figure {png.name}: not written")
            continue
        rms, allowed = figure_rms(png, new), figure_tolerance(record, nb_id, png.name)
        if rms <= allowed:
            result.figures_equal += 1
        else:
            details.append(f"{nb_id} figure {png.name}: RMS {rms:.2f} > allowed {allowed:.2f}")


def _compare_full(nb_id: str, copy: Path, full_record: Mapping, record: Mapping) -> NotebookCheck:
    """One notebook executed under ``full`` against ``docs/full_results.json``: verdicts and check values."""
    result = NotebookCheck(copy.name)
    if not copy.exists():
        result.ran = False
        return result
    nb = nbformat.read(copy, as_version=4)
    new = executed.verdicts_of(nb)
    old = executed._verdicts_from_record(full_record["notebooks"].get(nb_id, {"verdicts": []}))
    result.verdicts_equal = [_verdict_key(v) for v in old] == [_verdict_key(v) for v in new]
    details = []
    for a, b in zip(old, new):
        for ca, cb in zip(a.checks, b.checks):
            result.numbers += 1
            comparison = compare_text(ca.value, cb.value, NO_RECORD)
            if comparison.differences and not _within_relative(ca.value, cb.value, record, nb_id):
                result.outside += 1
                details.append(f"{nb_id} {a.claim} {ca.name}: {ca.value} -> {cb.value}")
    result.seconds = executed.seconds_of(nb)
    result.details = tuple(details)
    return result


def _within_relative(a: str, b: str, record: Mapping, nb_id: str) -> bool:
    """Full-profile check values: within the tolerance factor times the notebook's largest quick relative spread."""
    rel = record.get("notebooks", {}).get(nb_id, {}).get("summary", {}).get("largest_relative_spread", 0.0)
    x, y = Number(a).value, Number(b).value
    return abs(x - y) <= TOLERANCE_FACTOR * rel * max(abs(x), abs(y))


def verify(profile: str = "quick", only: Sequence[str] | None = None, out: Path | None = None,
           workers: int | None = None, run: bool = True) -> list[NotebookCheck]:
    """Execute the series into ``out`` (default ``build/verify``) and compare it with the record.
    ``only`` and the records (``docs/spread.json``; ``docs/full_results.json``, which ``full`` needs)
    are checked before anything runs; a series run that stops early compares nothing."""
    from dlgn_lib.config import PROFILES
    if profile not in PROFILES:
        raise ValueError(f"--profile: unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    out = Path(out or locations.build_dir() / "verify" / profile)
    committed = _committed()
    _check_only(only)
    record = _read_record(SPREAD_RECORD, "the spread record, which the tolerances come from")
    full_path = executed.FULL_RECORD
    full_record = _read_record(full_path, "the record of full runs") if profile == "full" or full_path.exists() else {}
    if run:
        again = f"python -m dlgn_lib.record.reproduce verify --profile {profile}" + (" --only " + " ".join(only) if only else "")
        _run_series_under(None, out, profile, only, workers, fresh_cache=False, then="nothing was compared",
                          rerun=f"to verify, rerun: {again}")
    results = []
    for nb_id, path in committed.items():
        if only and nb_id not in only:
            continue
        copy = out / "notebooks" / path.name
        if profile == "quick":
            result = compare_quick(nb_id, path, copy, out / "figures", record)
            if result.ran:   # this run's quick intervals against the recorded full ones
                _add_overlaps(result, nb_id, executed.verdicts_of(nbformat.read(copy, as_version=4)), full_record)
        else:
            result = _compare_full(nb_id, copy, full_record, record)
            if result.ran:   # the committed quick intervals against this run's full ones
                _add_overlaps(result, nb_id, executed.verdicts_of(nbformat.read(path, as_version=4)),
                              {"notebooks": {nb_id: executed._record_of(copy)}})
        results.append(result)
    return results


def interval_overlaps(quick_verdicts, full_verdicts) -> tuple[int, int, list[str]]:
    """Rules v3: for each check printed with a 90 % interval under quick and under full (same claim
    and name), whether the two intervals overlap. Returns (overlapping, compared, one line per check
    that does not overlap). A quick interval that misses full's says quick measures another thing."""
    full = {(v.claim, c.name): c for v in full_verdicts for c in v.checks if c.low is not None}
    compared, overlapping, apart = 0, 0, []
    for v in quick_verdicts:
        for c in v.checks:
            other = full.get((v.claim, c.name))
            if c.low is None or other is None:
                continue
            compared += 1
            lo, hi = max(float(c.low), float(other.low)), min(float(c.high), float(other.high))
            if lo <= hi:
                overlapping += 1
            else:
                apart.append(f"{v.claim} {c.name}: quick [{c.low}, {c.high}], full [{other.low}, {other.high}]")
    return overlapping, compared, apart


def _add_overlaps(result: NotebookCheck, nb_id: str, quick_verdicts, full_record: Mapping) -> None:
    entry = full_record.get("notebooks", {}).get(nb_id)
    if not entry:
        return
    overlapping, compared, apart = interval_overlaps(quick_verdicts, executed._verdicts_from_record(entry))
    result.intervals, result.intervals_overlap = compared, overlapping
    result.details = (*result.details, *(f"{nb_id} intervals apart: {line}" for line in apart))


def verify_table(results: Sequence[NotebookCheck], profile: str) -> str:
    rows = [("notebook", "numbers within", "outside (worst)", "words", "verdicts equal", "figures equal",
             "quick/full intervals overlap", "seconds")]
    for r in results:
        if not r.ran:
            rows.append((r.notebook, "-", "-", "-", "not run", "-", "-", "-"))
            continue
        worst = f"{r.outside} ({r.worst_excess:.2f}x allowed)" if r.numbers else "-"
        rows.append((r.notebook, f"{r.numbers - r.outside} of {r.numbers}", worst,
                     "equal" if not r.text_differences else f"{r.text_differences} differ",
                     ("yes" if not r.fragile_flips else f"yes ({r.fragile_flips} fragile check(s) flipped)")
                     if r.verdicts_equal else "NO",
                     f"{r.figures_equal} of {r.figures}" if profile == "quick" else "-",
                     f"{r.intervals_overlap} of {r.intervals}" if r.intervals else "-", f"{r.seconds:.0f}"))
    lines = [_table(rows)]
    for r in results:
        lines += [f"  {d}" for d in r.details[:10]]
        if len(r.details) > 10:
            lines.append(f"  ... and {len(r.details) - 10} more in {r.notebook}")
    ok = sum(r.ok for r in results)
    lines.append(f"verify ({profile}): {ok} of {len(results)} notebooks agree with the record within tolerance")
    return "\n".join(lines)


def _outputs_in_place(notebooks: Sequence[Path]) -> int:
    """``reproduce outputs``: re-execute each notebook in place, then move the spread record's
    committed values to the new outputs (``rebase_committed``). When a notebook's outputs
    are ones no recorded code path printed, its record entry is left as it was and the command
    says to measure it again with ``reproduce spread`` (exit status 1); the notebook keeps its new
    outputs."""
    from dlgn_lib.record.series import execute_in_place
    load_record()   # a damaged record is refused before any notebook runs
    stale = []
    for path in notebooks:
        nb_id = locations.notebook_id(path)
        before = compared_outputs(path)
        execute_in_place([path])
        record = load_record()
        if not record.get("notebooks"):
            continue
        try:
            checks = {name: by_path["committed"] for name, by_path in outcomes_of_copies({"committed": path}).items()}
            write_record(rebase_committed(record, nb_id, before, compared_outputs(path), checks))
        except ValueError as exc:
            stale.append(nb_id)
            print(f"spread record not updated: {exc}", file=sys.stderr)
        else:
            print(f"{locations.display_path(SPREAD_RECORD)}: committed values of {nb_id} updated "
                  f"(each output as a recorded code path printed it)")
    if stale:
        print(f"measure the spread again: python -m dlgn_lib.record.reproduce spread --only {' '.join(stale)}", file=sys.stderr)
    return 1 if stale else 0


# --- the command ---------------------------------------------------------------------------------

@files.command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.reproduce`` (the module's docstring says what it does)."""
    from dlgn_lib.config import PROFILES
    from dlgn_lib.record.series import _positive_int, check_profile, select_notebooks
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.reproduce", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    spread_cmd = commands.add_parser("spread", help="run the quick series under several CPU code paths, "
                                                "write docs/spread.json")
    spread_cmd.add_argument("--only", nargs="+", metavar="ID", help="notebook ids (default: all)")
    spread_cmd.add_argument("--variants", nargs="+", metavar="NAME", help="code paths (default: all of VARIANTS)")
    spread_cmd.add_argument("--reuse", action="store_true", help="keep a code path's executed copies when complete")
    spread_cmd.add_argument("--workers", type=_positive_int, metavar="N", help="worker processes per run")
    spread_cmd.add_argument("--add", action="store_true",
                        help="add this machine's code paths to the record instead of replacing it "
                             "(run on a second CPU: the tolerances then cover it too)")
    verify_cmd = commands.add_parser("verify", help="re-run into build/verify and compare with the record")
    verify_cmd.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    verify_cmd.add_argument("--only", nargs="+", metavar="ID", help="notebook ids (default: all)")
    verify_cmd.add_argument("--workers", type=_positive_int, metavar="N", help="worker processes")
    verify_cmd.add_argument("--no-run", action="store_true", help="compare the copies already in build/verify")
    outputs_cmd = commands.add_parser("outputs", help="re-execute the committed notebooks in place and move the "
                                                      "spread record's committed values to them (maintainers)")
    outputs_cmd.add_argument("--only", nargs="+", metavar="ID", help="notebook ids (default: all)")
    args = parser.parse_args(argv)
    if args.command == "outputs":
        try:
            chosen = select_notebooks(locations.find_notebooks(), args.only)
        except ValueError as exc:
            parser.error(str(exc))
        return _outputs_in_place(chosen)
    try:
        if args.command == "spread":
            data = spread(args.variants, args.only, args.reuse, workers=args.workers, add=args.add)
            print(spread_table(data))
            print(f"wrote {locations.display_path(SPREAD_RECORD)}")
            return 0
        check_profile(args.profile)
        results = verify(args.profile, args.only, workers=args.workers, run=not args.no_run)
    except ValueError as exc:
        parser.error(str(exc))
    print(verify_table(results, args.profile))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
