"""Printed outputs that hold on every machine, and the tools that measure and check them.

    python -m dlgn_lib.record.reproduce spread [--only 05 07 ...] [--variants NAME ...] [--reuse] [--add]
    python -m dlgn_lib.record.reproduce verify [--profile quick|full] [--only 05 07 ...] [--no-run]
    python -m dlgn_lib.record.reproduce outputs [--only 05 07 ...]

Words exactly, numbers within their tolerance measured across CPU code paths (reconstruction §7; nbval
compares the same way through ``tests/nbval_tolerance.py``). ``spread`` writes that record, ``docs/spread.json``;
``verify`` re-runs the series and compares it with the record; ``outputs`` re-executes the notebooks in place.
"""
from __future__ import annotations

import argparse
import itertools
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
_SPACES = re.compile(r"[ \t]+")
NUMBER = re.compile(r"(?<![\w.])[-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
                    r"|(?<![\w.])[-\u2212]?\.\d+(?![\w])")
_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)   # nbval drops what a \r overwrote

#: Tolerance = factor x the measured range of a number across code paths (at least one unit of its last
#: printed digit). Chosen before any cross-machine comparison: the range of a handful of code paths
#: underestimates the spread of all CPUs, so it is widened.
TOLERANCE_FACTOR = 3.0

#: Output keys nbval does not compare (its own list: random widget ids, images), left out here too.
SKIPPED_KEYS = frozenset({"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                          "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"})


def sanitize_patterns() -> list[tuple[str, str]]:
    """The (regex, replacement) pairs of ``tests/nbval_sanitize.cfg``: what differs on every run."""
    text = (locations.REPO_ROOT / "tests" / "nbval_sanitize.cfg").read_text()
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", text, flags=re.MULTILINE)


@dataclass(frozen=True)
class Number:
    """One printed number: its text, value, and one unit of its last printed digit (0 for integers)."""
    text: str

    @property
    def value(self) -> float:
        return float(self.text.replace(",", "").replace("\u2212", "-"))

    @property
    def unit(self) -> float:
        mantissa, _, exponent = self.text.replace(",", "").lower().partition("e")
        if not exponent and "." not in mantissa:
            return 0.0
        return 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def split(text: str) -> tuple[str, list[Number]]:
    """A text's skeleton (each number replaced by ``#``, runs of spaces by one: a table's columns
    shift when a number's width changes) and its numbers, in order. Two skeletons are the same words
    when :func:`_words` makes them equal (a wrapped line may break elsewhere when a number's width changes)."""
    return _SPACES.sub(" ", NUMBER.sub("#", text)), [Number(m.group(0)) for m in NUMBER.finditer(text)]


def _words(skeleton: str) -> str:
    """A skeleton's words: each run of white space, line breaks included, as one space."""
    return " ".join(skeleton.split())


def _distinct(skeletons: Iterable[str]) -> list[str]:
    """The first skeleton of each set of the same words, in order."""
    first: dict[str, str] = {}
    for skeleton in skeletons:
        first.setdefault(_words(skeleton), skeleton)
    return list(first.values())


def text_outputs(outputs: Iterable[Mapping], sanitize_text=lambda text: text) -> dict[str, list[str]]:
    """A cell's compared outputs grouped as nbval groups them (stream name or MIME key -> texts in order;
    streams of one name joined, as ``coalesce_streams`` does), :data:`SKIPPED_KEYS` left out, each text sanitized."""
    groups: dict[str, list] = defaultdict(list)
    streams: dict[str, list[str]] = defaultdict(list)
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            groups.setdefault(output["name"], [None])   # the joined text goes at the first stream's place
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


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _compared_cells(nb) -> set[str]:
    """Ids of the cells nbval compares (not marked NBVAL_IGNORE_OUTPUT / NBVAL_SKIP / nbval tags)."""
    tags = {"nbval-ignore-output", "nbval-skip", "raises-exception"}
    marks = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP", "NBVAL_RAISES_EXCEPTION")
    return {cell.get("id") for cell in nb.cells if cell.cell_type == "code"
            and not tags & set(cell.get("metadata", {}).get("tags", []))
            and not any(mark in cell.source for mark in marks)}


def compared_outputs(path: Path, keep: set[str] | None = None, patterns=None) -> dict:
    """A notebook's compared outputs by cell id, restricted to ``keep`` (default: its own compared cells)."""
    nb = nbformat.read(path, as_version=4)
    keep = _compared_cells(nb) if keep is None else keep
    patterns = sanitize_patterns() if patterns is None else patterns

    def sanitize(text: str) -> str:
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text
    cells = {}
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id") or f"cell-{index}"
        if cell.cell_type == "code" and cell_id in keep and (groups := text_outputs(cell.get("outputs", []), sanitize)):
            cells[cell_id] = groups
    return cells


def output_key(cell_id: str, key: str, position: int) -> str:
    """The record's name of one output: ``<cell id>/<MIME key>/<position among that key's outputs>``."""
    return f"{cell_id}/{key}/{position}"


def _by_output(cells: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, str]:
    """Output key -> text, for compared outputs by cell id."""
    return {output_key(cell_id, key, position): text for cell_id, groups in cells.items()
            for key, texts in groups.items() for position, text in enumerate(texts)}


# --- tolerances --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tolerance:
    """What the spread record says of one output: its numbers' ranges, skeletons, (fragile) every path's numbers."""
    ranges: tuple[float, ...] = ()
    skeletons: tuple[str, ...] = ()
    values: tuple[tuple[str, ...], ...] = ()

    def allowed(self, index: int, ref: Number, new: Number) -> float:
        """Largest allowed |new - ref| for the ``index``-th number of the output."""
        measured = self.ranges[index] if index < len(self.ranges) else 0.0
        return max(TOLERANCE_FACTOR * measured, ref.unit, new.unit)


def load_record(path: Path | None = None) -> dict:
    """The spread record (an empty one when there is none yet; a ``files.Refusal`` when it is damaged)."""
    path = Path(path or SPREAD_RECORD)
    return _read_record(path, "the spread record") if path.exists() else {"notebooks": {}}


def _read_record(path: Path, what: str) -> dict:
    """The record in ``path``; a ``files.Refusal`` naming it when missing, not JSON or without a notebooks table."""
    record = files.read_json(path, dict, what)
    if not isinstance(record.get("notebooks"), dict):
        raise files.Refusal(f"{locations.display_path(path)} has no \"notebooks\" table ({what})")
    return record


def check_outcomes(notebook: str, record: Mapping | None = None) -> dict[str, list[str]]:
    """Per check of ``notebook``, its outcome ("pass", "fail", "inconclusive") under each code path of the record."""
    checks = (load_record() if record is None else record).get("notebooks", {}).get(notebook, {}).get("checks", {})
    return {name: [verdict.outcome_name(v) for k, v in by_path.items() if k != "committed"]
            for name, by_path in checks.items()}


def sensitive_checks(notebook: str, record: Mapping | None = None) -> set[str]:
    """The checks of ``notebook`` whose outcome moves across the code paths and CPUs of the spread
    record: machine-sensitive, counted inconclusive in their part under rules v4 (``dl.parts``)."""
    return {name for name, outcomes in check_outcomes(notebook, record).items() if len(set(outcomes)) > 1}


def tolerance_for(record: Mapping, notebook: str, cell_id: str, key: str, position: int) -> Tolerance:
    """What ``record`` allows one output of ``notebook``."""
    entry = record.get("notebooks", {}).get(notebook, {}).get("outputs", {}).get(output_key(cell_id, key, position), {})
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


def compare_text(ref: str, new: str, tolerance: Tolerance = Tolerance(), where: str = "") -> Comparison:
    """Compare two output texts: skeletons exactly (or one recorded alternative), numbers within tolerance."""
    (ref_skeleton, ref_numbers), (new_skeleton, new_numbers) = split(ref), split(new)
    if _words(new_skeleton) != _words(ref_skeleton):
        if _words(new_skeleton) in map(_words, tolerance.skeletons):
            return _compare_alternative(new, new_numbers, tolerance, where)
        return Comparison((Difference("text", where, _first_difference(ref_skeleton, new_skeleton)),), 0, math.inf)
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
    """Numbers of an output in a recorded other form: within the recorded span, widened by the tolerance factor."""
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
    a_words, b_words = a.split(), b.split()
    for i, (x, y) in enumerate(zip(a_words, b_words)):
        if x != y:
            return (f"word {i + 1}: expected {' '.join(a_words[max(i - 6, 0):i + 10])[:160]!r}, "
                    f"got {' '.join(b_words[max(i - 6, 0):i + 10])[:160]!r}")
    return f"expected {len(a_words)} words, got {len(b_words)}"


def _context(text: str, index: int) -> str:
    """The line of ``text`` that holds its ``index``-th number, at most 100 characters."""
    match = list(NUMBER.finditer(text))[index]
    line = text[text.rfind("\n", 0, match.start()) + 1:].partition("\n")[0].strip()
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


def figure_tolerance(record: Mapping, notebook: str, name: str) -> float:
    """Allowed RMS of a figure: the tolerance factor times its largest measured RMS, at least ``FIGURE_FLOOR_RMS``."""
    measured = record.get("notebooks", {}).get(notebook, {}).get("figures", {}).get(name, {})
    return max(TOLERANCE_FACTOR * max((v for v in measured.values() if math.isfinite(v)), default=0.0),
               FIGURE_FLOOR_RMS)


# --- the spread record ---------------------------------------------------------------------------

def spread_entries(variants: Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]) -> dict[str, dict]:
    """Per output, the spread of its numbers across variants (``variant -> cell id -> groups``): ``values`` as
    printed, ``ranges`` over the variants that printed the first one's words, ``skeletons`` and ``changed_words``."""
    texts: dict[str, dict[str, str]] = defaultdict(dict)   # output key -> variant -> text
    for name, cells in variants.items():
        for where, text in _by_output(cells).items():
            texts[where][name] = text
    entries = {}
    for where, by_variant in texts.items():
        parts = {name: split(text) for name, text in by_variant.items()}
        skeletons = _distinct(skeleton for skeleton, _ in parts.values())
        same = [numbers for skeleton, numbers in parts.values() if _words(skeleton) == _words(skeletons[0])]
        entry = {"ranges": [_span(n.value for n in column) for column in zip(*same)],
                 "values": {name: [n.text for n in numbers] for name, (_, numbers) in parts.items()}}
        if len(skeletons) > 1:
            entry.update(skeletons=skeletons, changed_words=_changed_lines(skeletons))
        if entry["ranges"] or len(skeletons) > 1:
            entries[where] = entry
    return entries


def _span(values: Iterable[float]) -> float:
    """max - min of the finite ``values`` (0 when there are none)."""
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) - min(finite) if finite else 0.0


def _changed_lines(skeletons: Sequence[str]) -> list[str]:
    rows = itertools.zip_longest(*(s.splitlines() for s in skeletons), fillvalue="")
    return [" | ".join(forms)[:300] for row in rows if len(forms := list(dict.fromkeys(x.strip() for x in row))) > 1]


def _relative_spread(entry: Mapping, reference: str) -> float:
    """Largest range / |reference value| of an output's numbers (numbers printed as 0 left out)."""
    values = entry["values"].get(reference) or next(iter(entry["values"].values()))
    return max((r / v for r, text in zip(entry["ranges"], values)
                if r and (v := abs(Number(text).value)) and math.isfinite(v)), default=0.0)


def summarise(entries: Mapping[str, Mapping], reference: str, checks: Mapping[str, Mapping] | None = None) -> dict:
    """A notebook's summary in the record: numbers, how many moved, largest relative spread, fragile outputs, checks."""
    fragile = {k: e["changed_words"] for k, e in entries.items() if "changed_words" in e}
    spreads = {k: _relative_spread(e, reference) for k, e in entries.items()}
    worst_key = max(spreads, key=spreads.get, default=None)
    return {
        "numbers": sum(len(e["ranges"]) for e in entries.values()),
        "numbers_that_moved": sum(1 for e in entries.values() for r in e["ranges"] if r),
        "largest_relative_spread": round(spreads[worst_key], 4) if worst_key else 0.0,
        "largest_relative_spread_at": worst_key,
        "fragile_outputs": len(fragile),
        "checks_changed": [line for lines in fragile.values() for line in lines
                           if "[pass]" in line or "[FAIL]" in line or "VERDICT" in line],
        "fragile_checks": sorted(name for name, by_path in (checks or {}).items()
                                 if len({verdict.outcome_name(v) for v in by_path.values()}) > 1),
    }


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


def _slug(variant: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in variant.lower()).strip("-").replace("--", "-")


def _run_series_under(variant_env: Mapping[str, str] | None, out: Path, profile: str, only: Sequence[str] | None,
                      workers: int | None, *, then: str, rerun: str) -> None:
    """Run the series in a child into ``out`` (under a code path of VARIANTS, or None: as this process runs)."""
    from dlgn_lib import numerics
    env = dict(os.environ)
    if variant_env is not None:
        # the pin this process applied to itself must not leak into a variant: the child pins anew
        cleared = {name for e in VARIANTS.values() for name in e} | set(numerics.PINNED) | {"DLGN_NUMERICS"}
        env = {**{k: v for k, v in env.items() if k not in cleared}, **variant_env,
               "DLGN_RUNS_DIR": str(out / "runs")}
    env["DLGN_FIGURES_DIR"] = str(out / "figures")
    command = [sys.executable, "-m", "dlgn_lib.record.series", "run", "--profile", profile,
               "--output", str(out / "notebooks"), *(["--only", *only] if only else []),
               *(["--workers", str(workers)] if workers else [])]
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


def build_record(variant_dirs: Mapping[str, Path]) -> dict:
    """The spread record from executed copies of the series, one folder per code path."""
    patterns, notebooks = sanitize_patterns(), {}
    for path in locations.find_notebooks():
        nb_id = locations.notebook_id(path)
        keep = _compared_cells(nbformat.read(path, as_version=4))
        variants, copies, failed = {"committed": compared_outputs(path, keep, patterns)}, {"committed": path}, {}
        for name, folder in variant_dirs.items():
            copy = folder / "notebooks" / path.name
            if not copy.exists():
                failed[name] = "not executed"
            elif (error := _error_of(copy)) is not None:
                failed[name] = error   # a notebook that stopped with an error measures no spread
            else:
                variants[name], copies[name] = compared_outputs(copy, keep, patterns), copy
        entries, checks = spread_entries(variants), outcomes_of_copies(copies)
        figures = {png.name: {name: round(figure_rms(png, folder / "figures" / png.name), 3)
                              for name, folder in variant_dirs.items()
                              if name in copies and (folder / "figures" / png.name).exists()}
                   for png in sorted((locations.REPO_ROOT / "figures").glob(f"{nb_id}_*.png"))}
        notebooks[nb_id] = {"notebook": path.name, "variants": [n for n in variants if n != "committed"],
                            "failed": failed, "summary": summarise(entries, "committed", checks),
                            "checks": checks, "figures": figures, "outputs": entries}
    return {"about": "Spread of every printed number and figure of the quick series across CPU code paths "
                     "(python -m dlgn_lib.record.reproduce spread); reconstruction §7 says how tolerances follow "
                     "from it.",
            "machine": machine(), "code_version": code_version(),
            "variants": {name: VARIANTS.get(name, {}) for name in variant_dirs},
            "tolerance_factor": TOLERANCE_FACTOR, "notebooks": notebooks}


def with_machine(machines: Sequence[Mapping], new: Mapping, notebooks: Sequence[str] | None) -> list[dict]:
    """The record's ``machines`` with ``new``'s once, with the notebooks it measured (None: all), its code version."""
    label = machine_label(new["machine"])
    machines = [dict(m) for m in machines]
    if (mine := next((m for m in machines if m.get("label") == label), None)) is None:
        machines.append(mine := {"label": label, **new["machine"], "code_version": None, "notebooks": []})
    if new.get("code_version"):
        mine["code_version"] = new["code_version"]
    if notebooks is None:
        mine.pop("notebooks", None)
    elif "notebooks" in mine:
        mine["notebooks"] = sorted({*mine["notebooks"], *notebooks})
    return machines


def replace_notebooks(old: Mapping, new: Mapping, only: Sequence[str]) -> dict:
    """The record ``old`` with the notebooks ``only`` measured anew on this machine (their committed outputs changed):
    their entries replaced by ``new``'s, named ``<code path> @ <machine>``; every other entry kept."""
    label = machine_label(new["machine"])
    rename = {name: f"{name} @ {label}" for name in new.get("variants", {})}

    def renamed(by_path: Mapping) -> dict:
        return {rename.get(k, k): v for k, v in by_path.items()}
    notebooks = dict(old.get("notebooks", {}))
    for nb_id in only:
        entry = new["notebooks"].get(nb_id)
        if entry is None or entry.get("failed") and len(entry["failed"]) == len(rename):
            raise ValueError(f"notebook {nb_id}: no code path ran it; nothing to replace its record with")
        notebooks[nb_id] = {**entry, "variants": [rename.get(n, n) for n in entry["variants"]],
                            "failed": renamed(entry.get("failed", {})),
                            "checks": {c: renamed(o) for c, o in entry["checks"].items()},
                            "figures": {f: renamed(o) for f, o in entry["figures"].items()},
                            "outputs": {k: {**o, "values": renamed(o["values"])} for k, o in entry["outputs"].items()},
                            "measured_on": {"machine": label, "code_version": new.get("code_version")}}
    return {**old, "notebooks": notebooks, "machines": with_machine(old.get("machines", []), new, only),
            "variants": {**old.get("variants", {}), **{rename[n]: env for n, env in new.get("variants", {}).items()}}}


#: An output that quotes the record of ``full`` runs (a quick notebook's SMOKE TEST line): its
#: numbers come from that file, not from the code path, and change when a full run is recorded.
QUOTES_FULL_RECORD = "docs/full_results.json"


def rebase_committed(record: Mapping, nb_id: str, before: Mapping, after: Mapping,
                     checks: Mapping | None = None) -> dict:
    """The record with ``nb_id``'s committed values moved to its outputs ``after`` it was re-executed in place
    (``before``: as they were). Each output must print what a recorded code path printed (or quote the full record),
    each of ``checks`` be an outcome one had, so the spread still covers every code path; else ``ValueError``."""
    entry = record.get("notebooks", {}).get(nb_id)
    again = f"run python -m dlgn_lib.record.reproduce spread --only {nb_id}"
    if entry is None:
        raise ValueError(f"notebook {nb_id}: not in the spread record; {again}")
    entry = json.loads(json.dumps(entry))
    old, new = _by_output(before), _by_output(after)
    for where, text in new.items():
        skeleton, numbers = split(text)
        out = entry["outputs"].get(where, {})
        quotes = QUOTES_FULL_RECORD in text
        recorded_skeletons = [_words(k) for k in out.get("skeletons", ())]
        if where not in old or (_words(skeleton) != _words(split(old[where])[0])
                                and _words(skeleton) not in recorded_skeletons and not quotes):
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
        if recorded_skeletons and _words(skeleton) != recorded_skeletons[0]:
            out["ranges"] = [_span(Number(v[i]).value for v in [*measured, printed]) for i in range(len(printed))]
            out["skeletons"] = [skeleton, *(k for k in out["skeletons"] if _words(k) != _words(skeleton))]
        out["values"]["committed"] = printed
    if gone := sorted(set(old) - set(new)):
        raise ValueError(f"notebook {nb_id}: outputs {', '.join(gone[:5])} are no longer printed; {again}")
    for name, outcome in (checks or {}).items():
        recorded = entry["checks"].get(name, {})
        if outcome not in [v for k, v in recorded.items() if k != "committed"]:
            raise ValueError(f"notebook {nb_id}, check {name!r}: {outcome!r} is an outcome no recorded code path "
                             f"had; {again}")
        recorded["committed"] = outcome
    entry["committed_on"] = {"machine": machine_label(), "code_version": code_version()}
    return {**record, "notebooks": {**record["notebooks"], nb_id: entry}}


def merge_records(old: Mapping, new: Mapping) -> dict:
    """One spread record from two of the same committed outputs: each number's range the larger of theirs and (where
    every code path printed the committed words) the range over all; code paths, checks, figures, machines united."""
    machines = old.get("machines", [{"label": machine_label(old["machine"]), **old["machine"],
                                     "code_version": old.get("code_version")}] if old.get("machine") else [])
    measured = sorted(new.get("notebooks", {}))
    notebooks = {}
    for nb_id in {**old.get("notebooks", {}), **new.get("notebooks", {})}:
        a, b = old.get("notebooks", {}).get(nb_id), new.get("notebooks", {}).get(nb_id)
        if a is None or b is None:
            notebooks[nb_id] = a or b
            continue
        outputs = {key: _merge_output(a["outputs"].get(key), b["outputs"].get(key), f"{nb_id} {key}")
                   for key in {**a["outputs"], **b["outputs"]}}
        checks, figures = ({name: {**a[part].get(name, {}), **b[part].get(name, {})} for name in {**a[part], **b[part]}}
                           for part in ("checks", "figures"))
        notebooks[nb_id] = {
            "notebook": a["notebook"], "variants": list(dict.fromkeys([*a["variants"], *b["variants"]])),
            "failed": {**a.get("failed", {}), **b.get("failed", {})},
            "summary": summarise(outputs, "committed", checks),
            "checks": checks, "figures": figures, "outputs": outputs}
    return {**old, "notebooks": notebooks, "variants": {**old.get("variants", {}), **new.get("variants", {})},
            "code_version": new.get("code_version", old.get("code_version")),
            "machines": with_machine(machines, new, measured if measured != sorted(old.get("notebooks", {})) else None)}


def _merge_output(a: Mapping | None, b: Mapping | None, where: str) -> dict:
    if a is None or b is None:
        return dict(a or b)
    if a["values"].get("committed") != b["values"].get("committed"):
        raise ValueError(f"{where}: the two records measured other committed outputs "
                         f"({a['values'].get('committed')} against {b['values'].get('committed')}); re-measure instead")
    values = {**a["values"], **b["values"]}
    skeletons = _distinct([*a.get("skeletons", ()), *b.get("skeletons", ())])
    # words changed somewhere: which values share the committed words is not recorded, so the larger range
    ranges = [max(x, y) for x, y in itertools.zip_longest(a["ranges"], b["ranges"], fillvalue=0.0)]
    if not skeletons:   # every code path printed the committed words: the range over all of them
        ranges = [max(r, _span(Number(v[i]).value for v in values.values() if i < len(v)))
                  for i, r in enumerate(ranges)]
        return {"ranges": ranges, "values": values}
    changed = list(dict.fromkeys([*a.get("changed_words", ()), *b.get("changed_words", ())]))
    return {"ranges": ranges, "values": values, "skeletons": skeletons, "changed_words": changed}


def _error_of(path: Path) -> str | None:
    """The first error a notebook's executed copy stopped with (``ename: evalue``), else None."""
    errors = (o for cell in nbformat.read(path, as_version=4).cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error")
    return next((f"{o.get('ename')}: {o.get('evalue')}"[:300] for o in errors), None)


def outcomes_of_copies(copies: Mapping[str, Path]) -> dict[str, dict[str, bool | str]]:
    """Each printed check's outcome under each code path (check name -> variant -> outcome): True / False for
    a check with one number, "pass", "fail" or "inconclusive" for one over seeds or printed inconclusive."""
    outcomes: dict[str, dict[str, bool | str]] = {}
    for name, path in copies.items():
        if not path.exists():
            continue
        for v in executed.verdicts_of(nbformat.read(path, as_version=4)):
            for check in v.checks:
                three_valued = check.low is not None or check.outcome == "inconclusive"
                outcomes.setdefault(check.name, {})[name] = check.outcome if three_valued else check.passed
    return outcomes


def spread(variants: Sequence[str] | None = None, only: Sequence[str] | None = None, reuse: bool = False,
           workers: int | None = None, add: bool = False) -> dict:
    """Run the series under each code path and write the record: anew, with the notebooks ``only`` replaced, or
    (``add``) joined by this machine's code paths; all checked first, left as it was when a run fails or stops.
    Each code path keeps its run cache in ``build/spread/<path>/runs`` (a run's key names its code path and
    ``CODE_VERSION``), so a second measurement trains only what changed; delete the folder to train anew."""
    from dlgn_lib.record.series import select_notebooks
    names = list(variants or VARIANTS)
    if unknown := [n for n in names if n not in VARIANTS]:
        raise ValueError(f"unknown variant(s) {unknown}; available: {list(VARIANTS)}")
    notebooks = select_notebooks(locations.find_notebooks(), only)
    record = SPREAD_RECORD
    old = load_record(record) if add or only else None
    if record.is_dir():
        raise files.Refusal(f"{locations.display_path(record)} is a folder, not a file")
    files.check_writable_folder(record.parent)
    dirs = {name: locations.build_dir() / "spread" / _slug(name) for name in names}
    for i, name in enumerate(names, 1):
        folder, step = dirs[name], f"[{i}/{len(names)}] {name}:"
        if reuse and all((folder / "notebooks" / p.name).exists() for p in notebooks):
            print(f"{step} reusing {locations.display_path(folder)}", flush=True)
            continue
        settings = " ".join(f"{k}={v}" for k, v in VARIANTS[name].items()) or "no variables"
        print(f"{step} running the quick series ({settings})", flush=True)
        for made in ("notebooks", "figures"):   # its run cache stays: each key names the code path and CODE_VERSION
            shutil.rmtree(folder / made, ignore_errors=True)
        start = time.perf_counter()
        _run_series_under(VARIANTS[name], folder, "quick", only, workers,
                          then=f"{locations.display_path(record)} is unchanged",
                          rerun=f"code paths finished: {', '.join(repr(n) for n in names[:i - 1]) or 'none'}; "
                                "rerun with --reuse to keep them")
        print(f"{step} ran in {time.perf_counter() - start:.0f} s", flush=True)
    if add:
        label = machine_label()
        new = build_record({f"{name} @ {label}": folder for name, folder in dirs.items()})
        if only:   # the other notebooks were not run here: they keep their entries as they are
            new["notebooks"] = {k: v for k, v in new["notebooks"].items() if k in only}
        data = merge_records(old, new)
    else:
        data = replace_notebooks(old, build_record(dirs), only) if only else build_record(dirs)
    write_record(data, record)
    return data


def write_record(data: Mapping, record: Path | None = None) -> None:
    """Write the spread record atomically (a failed write leaves the old one and is a ``files.Refusal``)."""
    files.write_atomic(record or SPREAD_RECORD, json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


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
    result = NotebookCheck(committed.name, ran=copy.exists())
    if not result.ran:
        return result
    ref_nb, new_nb = nbformat.read(committed, as_version=4), nbformat.read(copy, as_version=4)
    keep, patterns = _compared_cells(ref_nb), sanitize_patterns()
    ref, new = compared_outputs(committed, keep, patterns), compared_outputs(copy, keep, patterns)
    details = []
    for cid in ref:
        for comparison in compare_groups(ref[cid], new.get(cid, {}), record, nb_id, cid):
            result.numbers += comparison.numbers
            result.text_differences += sum(d.kind == "text" for d in comparison.differences)
            result.outside += sum(d.kind == "number" for d in comparison.differences)
            details += [f"{nb_id} {d.where}: {d.detail}" for d in comparison.differences]
            if math.isfinite(comparison.worst):
                result.worst_excess = max(result.worst_excess, comparison.worst)
    result.verdicts_equal, result.fragile_flips = _verdicts_agree(
        executed.verdicts_of(ref_nb), executed.verdicts_of(new_nb),
        set(record.get("notebooks", {}).get(nb_id, {}).get("summary", {}).get("fragile_checks", ())), details)
    for png in sorted((locations.REPO_ROOT / "figures").glob(f"{nb_id}_*.png")):
        result.figures += 1
        if not (figures / png.name).exists():
            details.append(f"{nb_id} figure {png.name}: not written")
            continue
        rms, allowed = figure_rms(png, figures / png.name), figure_tolerance(record, nb_id, png.name)
        if rms <= allowed:
            result.figures_equal += 1
        else:
            details.append(f"{nb_id} figure {png.name}: RMS {rms:.2f} > allowed {allowed:.2f}")
    result.seconds, result.details = executed.seconds_of(new_nb), tuple(details)
    return result


def _verdicts_agree(old, new, fragile: set[str], details: list) -> tuple[bool, int]:
    """Whether two notebooks' verdicts agree (checks may differ where recorded fragile), and how many flipped."""
    if [(v.claim, v.profile, v.n_checks, tuple(c.name for c in v.checks)) for v in old] != \
            [(v.claim, v.profile, v.n_checks, tuple(c.name for c in v.checks)) for v in new]:
        details.append("verdicts: other claims or checks than the record's")
        return False, 0
    flips, agree = 0, True
    for a, b in zip(old, new):
        for ca, cb in zip(a.checks, b.checks):
            if ca.outcome != cb.outcome and ca.name in fragile:
                flips += 1
            elif ca.outcome != cb.outcome:
                agree = False
                details.append(f"{a.claim}: check {ca.name!r} {ca.outcome} -> {cb.outcome} "
                               "(not a recorded fragile check)")
    return agree, flips


def _compare_full(nb_id: str, copy: Path, full_record: Mapping, record: Mapping) -> NotebookCheck:
    """One notebook executed under ``full`` against ``docs/full_results.json``: verdicts and check values."""
    result = NotebookCheck(copy.name, ran=copy.exists())
    if not result.ran:
        return result
    nb = nbformat.read(copy, as_version=4)
    new = executed.verdicts_of(nb)
    old = executed._verdicts_from_record(full_record["notebooks"].get(nb_id, {"verdicts": []}))
    keys = [[(v.claim, v.profile, v.word, v.n_pass, v.n_checks, tuple((c.name, c.outcome) for c in v.checks))
             for v in verdicts] for verdicts in (old, new)]
    result.verdicts_equal = keys[0] == keys[1]
    rel = record.get("notebooks", {}).get(nb_id, {}).get("summary", {}).get("largest_relative_spread", 0.0)
    details = []
    for a, b in zip(old, new):
        for ca, cb in zip(a.checks, b.checks):
            result.numbers += 1
            if not compare_text(ca.value, cb.value).differences:
                continue
            x, y = Number(ca.value).value, Number(cb.value).value
            if not abs(x - y) <= TOLERANCE_FACTOR * rel * max(abs(x), abs(y)):
                result.outside += 1
                details.append(f"{nb_id} {a.claim} {ca.name}: {ca.value} -> {cb.value}")
    result.seconds, result.details = executed.seconds_of(nb), tuple(details)
    return result


def verify(profile: str = "quick", only: Sequence[str] | None = None, workers: int | None = None,
           run: bool = True) -> list[NotebookCheck]:
    """Execute the series into ``build/verify/<profile>`` and compare it with the record (profile, ``only`` and the
    records checked first; a series run that stops early compares nothing)."""
    from dlgn_lib.record.series import check_profile, select_notebooks
    check_profile(profile)
    out = locations.build_dir() / "verify" / profile
    notebooks = select_notebooks(locations.find_notebooks(), only)
    record = _read_record(SPREAD_RECORD, "the spread record, which the tolerances come from")
    full_path = executed.FULL_RECORD
    full_record = _read_record(full_path, "the record of full runs") if profile == "full" or full_path.exists() else {}
    if run:
        again = f"python -m dlgn_lib.record.reproduce verify --profile {profile}"
        _run_series_under(None, out, profile, only, workers, then="nothing was compared",
                          rerun=f"to verify, rerun: {again}" + (f" --only {' '.join(only)}" if only else ""))
    results = []
    for path in notebooks:
        nb_id, copy = locations.notebook_id(path), out / "notebooks" / path.name
        if profile == "quick":
            result = compare_quick(nb_id, path, copy, out / "figures", record)
            if result.ran:   # this run's quick intervals against the recorded full ones
                _add_overlaps(result, nb_id, copy, full_record.get("notebooks", {}).get(nb_id))
        else:
            result = _compare_full(nb_id, copy, full_record, record)
            if result.ran:   # the committed quick intervals against this run's full ones
                _add_overlaps(result, nb_id, path, executed._record_of(copy))
        results.append(result)
    return results


def interval_overlaps(quick_verdicts, full_verdicts) -> tuple[int, int, list[str]]:
    """Rules v3: (overlapping, compared, a line per check apart) of the checks with a 90 % interval under both
    quick and full; a quick interval that misses full's says quick measures another thing."""
    full = {(v.claim, c.name): c for v in full_verdicts for c in v.checks if c.low is not None}
    compared, overlapping, apart = 0, 0, []
    for v in quick_verdicts:
        for c in v.checks:
            other = full.get((v.claim, c.name))
            if c.low is None or other is None:
                continue
            compared += 1
            if max(float(c.low), float(other.low)) <= min(float(c.high), float(other.high)):
                overlapping += 1
            else:
                apart.append(f"{v.claim} {c.name}: quick [{c.low}, {c.high}], full [{other.low}, {other.high}]")
    return overlapping, compared, apart


def _add_overlaps(result: NotebookCheck, nb_id: str, quick: Path, full_entry: Mapping | None) -> None:
    """The quick verdicts of notebook ``quick`` against the full record's entry of the notebook."""
    if not full_entry:
        return
    overlapping, compared, apart = interval_overlaps(executed.verdicts_of(nbformat.read(quick, as_version=4)),
                                                     executed._verdicts_from_record(full_entry))
    result.intervals, result.intervals_overlap = compared, overlapping
    result.details = (*result.details, *(f"{nb_id} intervals apart: {line}" for line in apart))


def verify_table(results: Sequence[NotebookCheck], profile: str) -> str:
    rows = [("notebook", "numbers within", "outside (worst)", "words", "verdicts equal", "figures equal",
             "quick/full intervals overlap", "seconds")]
    for r in results:
        if not r.ran:
            rows.append((r.notebook, "-", "-", "-", "not run", "-", "-", "-"))
            continue
        rows.append((r.notebook, f"{r.numbers - r.outside} of {r.numbers}",
                     f"{r.outside} ({r.worst_excess:.2f}x allowed)" if r.numbers else "-",
                     f"{r.text_differences} differ" if r.text_differences else "equal",
                     ("NO" if not r.verdicts_equal else
                      f"yes ({r.fragile_flips} fragile check(s) flipped)" if r.fragile_flips else "yes"),
                     f"{r.figures_equal} of {r.figures}" if profile == "quick" else "-",
                     f"{r.intervals_overlap} of {r.intervals}" if r.intervals else "-", f"{r.seconds:.0f}"))
    lines = [_table(rows)]
    for r in results:
        lines += [f"  {d}" for d in r.details[:10]]
        if len(r.details) > 10:
            lines.append(f"  ... and {len(r.details) - 10} more in {r.notebook}")
    lines.append(f"verify ({profile}): {sum(r.ok for r in results)} of {len(results)} notebooks agree with the "
                 "record within tolerance")
    return "\n".join(lines)


def _outputs_in_place(notebooks: Sequence[Path]) -> int:
    """``reproduce outputs``: re-execute each notebook in place and move the record's committed values to it."""
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
        print(f"measure the spread again: python -m dlgn_lib.record.reproduce spread --only {' '.join(stale)}",
              file=sys.stderr)
    return 1 if stale else 0


@files.command
def main(argv: list[str] | None = None) -> int:
    """The command line, ``python -m dlgn_lib.record.reproduce`` (the module's docstring says what it does)."""
    from dlgn_lib.config import PROFILES
    from dlgn_lib.record.series import positive_int, select_notebooks
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.record.reproduce", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    spread_cmd = commands.add_parser("spread", help="run the quick series under several CPU code paths, "
                                                    "write docs/spread.json")
    verify_cmd = commands.add_parser("verify", help="re-run into build/verify and compare with the record")
    outputs_cmd = commands.add_parser("outputs", help="re-execute the committed notebooks in place and move the "
                                                      "spread record's committed values to them (maintainers)")
    for command in (spread_cmd, verify_cmd, outputs_cmd):
        command.add_argument("--only", nargs="+", metavar="ID", help="notebook ids (default: all)")
    spread_cmd.add_argument("--variants", nargs="+", metavar="NAME", help="code paths (default: all of VARIANTS)")
    spread_cmd.add_argument("--reuse", action="store_true", help="keep a code path's executed copies when complete")
    spread_cmd.add_argument("--workers", type=positive_int, metavar="N", help="worker processes per run")
    spread_cmd.add_argument("--add", action="store_true",
                            help="add this machine's code paths to the record instead of replacing it "
                                 "(run on a second CPU: the tolerances then cover it too)")
    verify_cmd.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    verify_cmd.add_argument("--workers", type=positive_int, metavar="N", help="worker processes")
    verify_cmd.add_argument("--no-run", action="store_true", help="compare the copies already in build/verify")
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
        results = verify(args.profile, args.only, workers=args.workers, run=not args.no_run)
    except ValueError as exc:
        parser.error(str(exc))
    print(verify_table(results, args.profile))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
