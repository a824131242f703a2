"""Compare a re-run of the series with the record, and measure how far code paths move its numbers.

    python -m dlgn_lib.series spread [--only 05 07 ...] [--variants NAME ...] [--reuse]
    python -m dlgn_lib.series verify [--profile quick|full] [--only 05 07 ...]

``spread`` executes the quick series once per CPU code path of :data:`VARIANTS` (each with an empty
run cache of its own, under ``build/spread/<variant>/``) and writes ``docs/spread.json``: for every
printed number of every compared output, the values it took under each code path and the
committed notebooks, and their range; for every figure, its RMS pixel difference from the
committed one; a summary per notebook (largest relative spread, outputs whose words changed, checks
whose pass/fail changed). The tolerances of :mod:`dlgn_lib.reproduce` come from it.

``verify`` executes the series into ``build/verify/`` (figures included: ``notebooks/`` and
``figures/`` are never touched) and compares every output with the committed notebooks (quick) or
every verdict and check with ``docs/full_results.json`` (full), and every figure with the committed
one, and prints one table. Exit status 1 when anything is outside its tolerance.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from dlgn_lib import executed, locations, reproduce, verdict
from dlgn_lib.provenance import code_version, machine, machine_label  # noqa: F401 (the record tools' names)

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

def slug(variant: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in variant.lower()).strip("-").replace("--", "-")


# --- running the series under a code path ------------------------------------------------------

def run_series_under(variant_env: Mapping[str, str] | None, out: Path, profile: str, only: Sequence[str] | None,
                     workers: int | None = None, fresh_cache: bool = True) -> int:
    """Execute the series in a child process with ``variant_env`` set (None: this process's code
    path as it is); notebooks, figures and (when ``fresh_cache``) the run cache all go under
    ``out``. Returns the child's exit status."""
    env = dict(os.environ)
    if variant_env is not None:
        # the pin this process applied to itself must not leak into a variant: the child pins anew
        env = {k: v for k, v in env.items() if k not in reproduce_variables()}
        env.update(variant_env)
    env["DLGN_FIGURES_DIR"] = str(out / "figures")
    if fresh_cache:
        env["DLGN_RUNS_DIR"] = str(out / "runs")
    command = [sys.executable, "-m", "dlgn_lib.series", "run", "--profile", profile, "--output", str(out / "notebooks")]
    if only:
        command += ["--only", *only]
    if workers:
        command += ["--workers", str(workers)]
    return subprocess.run(command, env=env, cwd=locations.REPO_ROOT).returncode


def reproduce_variables() -> set[str]:
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
    patterns = reproduce.sanitize_patterns() if patterns is None else patterns
    return {cid: groups for cid, groups in reproduce.cell_outputs(nb, patterns).items() if cid in keep}


def build_record(variant_dirs: Mapping[str, Path], committed_dir: Path | None = None,
                 figures_dir: Path | None = None) -> dict:
    """The spread record from executed copies of the series, one folder per code path."""
    committed = _committed(committed_dir)
    figures_dir = figures_dir or locations.REPO_ROOT / "figures"
    patterns = reproduce.sanitize_patterns()
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
        entries = reproduce.spread_entries(variants)
        checks = check_outcomes({"committed": path, **{name: folder / "notebooks" / path.name
                                                        for name, folder in variant_dirs.items() if name not in failed}})
        figures = {}
        for png in sorted(figures_dir.glob(f"{nb_id}_*.png")):
            rms = {name: reproduce.figure_rms(png, folder / "figures" / png.name)
                   for name, folder in variant_dirs.items()
                   if name not in failed and (folder / "figures" / png.name).exists()}
            figures[png.name] = {k: round(v, 3) for k, v in rms.items()}
        notebooks[nb_id] = {"notebook": path.name, "variants": [n for n in variants if n != "committed"],
                            "failed": failed,
                            "summary": _summary(entries, checks),
                            "checks": checks, "figures": figures, "outputs": entries}
    return {"about": "Spread of every printed number and figure of the quick series across CPU code paths "
                     "(python -m dlgn_lib.series spread); reconstruction §7 says how tolerances follow from it.",
            "machine": machine(), "code_version": code_version(),
            "variants": {name: VARIANTS.get(name, {}) for name in variant_dirs},
            "tolerance_factor": reproduce.TOLERANCE_FACTOR, "notebooks": notebooks}


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
    re-executed in place (``series outputs``) on a code path the record has measured; ``before``
    are its compared outputs as they were (both as :func:`compared_outputs` gives them).

    Every compared output must print, number for number, what one of the recorded code paths
    printed, in words it printed before or a recorded alternative (a fragile output); or quote the
    record of full runs (:data:`QUOTES_FULL_RECORD`), whose numbers are the same on every code
    path. The new reference is then one of the measured variants, and the measured spread still
    covers every code path: ranges do not depend on which variant is the reference, and a figure's
    RMS distance to the new reference is at most twice its recorded largest (the tolerance allows
    three times). An output whose words moved to a recorded alternative gets the range over every
    code path. ``checks`` (check name -> outcome, as :func:`check_outcomes` gives them) become the
    committed outcomes; each must be one a recorded code path had. Anything else raises
    ``ValueError`` naming the output or check: the outputs changed, and ``series spread`` must
    measure them again.
    """
    entry = record.get("notebooks", {}).get(nb_id)
    again = f"run python -m dlgn_lib.series spread --only {nb_id}"
    if entry is None:
        raise ValueError(f"notebook {nb_id}: not in the spread record; {again}")
    entry = json.loads(json.dumps(entry))
    old = {reproduce.output_key(c, k, i): text for c, groups in before.items()
           for k, texts in groups.items() for i, text in enumerate(texts)}
    seen = set()
    for cell_id, groups in after.items():
        for key, texts in groups.items():
            for position, text in enumerate(texts):
                where = reproduce.output_key(cell_id, key, position)
                seen.add(where)
                skeleton, numbers = reproduce.split(text)
                out = entry["outputs"].get(where, {})
                quotes = QUOTES_FULL_RECORD in text
                if where not in old or (skeleton != reproduce.split(old[where])[0]
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
                    columns = [[reproduce.Number(v[i]).value for v in [*measured, printed]] for i in range(len(printed))]
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
            finite = [x for x in (reproduce.Number(v[i]).value for v in values.values() if i < len(v)) if math.isfinite(x)]
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
    return {**reproduce.summarise(entries, "committed"),
            "fragile_checks": sorted(n for n, o in checks.items() if len({verdict.outcome_name(v) for v in o.values()}) > 1)}


def _error_of(path: Path) -> str | None:
    """The first error a notebook's executed copy stopped with (``ename: evalue``), else None."""
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{output.get('ename')}: {output.get('evalue')}"[:300]
    return None


def check_outcomes(copies: Mapping[str, Path]) -> dict[str, dict[str, bool | str]]:
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
    """
    names = list(variants or VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; available: {list(VARIANTS)}")
    out_root = out_root or locations.build_dir() / "spread"
    dirs = {}
    for i, name in enumerate(names, 1):
        folder = out_root / slug(name)
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
        status = run_series_under(VARIANTS[name], folder, "quick", only, workers)
        if status == 130:   # Ctrl-C reached the child too: stop here, the record is not rewritten
            raise KeyboardInterrupt(f"code path {name!r} interrupted; rerun with --reuse to keep the finished ones")
        print(f"[{i}/{len(names)}] {name}: exit {status} after {time.perf_counter() - start:.0f} s", flush=True)
    record = Path(record or reproduce.SPREAD_RECORD)
    if add:
        label = machine_label()
        new = build_record({f"{name} @ {label}": folder for name, folder in dirs.items()})
        if only:   # the other notebooks were not run here: they keep their entries as they are
            new["notebooks"] = {k: v for k, v in new["notebooks"].items() if k in only}
        data = merge_records(reproduce.load_record(record), new)
    elif only:
        data = replace_notebooks(reproduce.load_record(record), build_record(dirs), only)
    else:
        data = build_record(dirs)
    write_record(data, record)
    return data


def write_record(data: Mapping, record: Path | None = None) -> None:
    """Write the spread record atomically (a reader never sees half of it)."""
    record = Path(record or reproduce.SPREAD_RECORD)
    tmp = record.with_name(f".{record.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, record)


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


def compare_quick(nb_id: str, committed: Path, executed: Path, figures: Path, record: Mapping) -> NotebookCheck:
    """One notebook's executed copy against the committed one: outputs, verdict lines, figures."""
    result = NotebookCheck(committed.name)
    if not executed.exists():
        result.ran = False
        return result
    ref_nb, new_nb = nbformat.read(committed, as_version=4), nbformat.read(executed, as_version=4)
    keep, patterns = _compared_cells(ref_nb), reproduce.sanitize_patterns()
    ref, new = compared_outputs(committed, keep, patterns), compared_outputs(executed, keep, patterns)
    details = []
    for cid in ref:
        for comparison in reproduce.compare_groups(ref[cid], new.get(cid, {}), record, nb_id, cid):
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
        rms, allowed = reproduce.figure_rms(png, new), reproduce.figure_tolerance(record, nb_id, png.name)
        if rms <= allowed:
            result.figures_equal += 1
        else:
            details.append(f"{nb_id} figure {png.name}: RMS {rms:.2f} > allowed {allowed:.2f}")


def compare_full(nb_id: str, executed: Path, full_record: Mapping, record: Mapping) -> NotebookCheck:
    """One notebook executed under ``full`` against ``docs/full_results.json``: verdicts and check values."""
    result = NotebookCheck(executed.name)
    if not executed.exists():
        result.ran = False
        return result
    nb = nbformat.read(executed, as_version=4)
    new = executed.verdicts_of(nb)
    old = executed._verdicts_from_record(full_record["notebooks"].get(nb_id, {"verdicts": []}))
    result.verdicts_equal = [_verdict_key(v) for v in old] == [_verdict_key(v) for v in new]
    details = []
    for a, b in zip(old, new):
        for ca, cb in zip(a.checks, b.checks):
            result.numbers += 1
            comparison = reproduce.compare_text(ca.value, cb.value, reproduce.NO_RECORD)
            if comparison.differences and not _within_relative(ca.value, cb.value, record, nb_id):
                result.outside += 1
                details.append(f"{nb_id} {a.claim} {ca.name}: {ca.value} -> {cb.value}")
    result.seconds = executed.seconds_of(nb)
    result.details = tuple(details)
    return result


def _within_relative(a: str, b: str, record: Mapping, nb_id: str) -> bool:
    """Full-profile check values: within the tolerance factor times the notebook's largest quick relative spread."""
    rel = record.get("notebooks", {}).get(nb_id, {}).get("summary", {}).get("largest_relative_spread", 0.0)
    x, y = reproduce.Number(a).value, reproduce.Number(b).value
    return abs(x - y) <= reproduce.TOLERANCE_FACTOR * rel * max(abs(x), abs(y))


def verify(profile: str = "quick", only: Sequence[str] | None = None, out: Path | None = None,
           workers: int | None = None, run: bool = True) -> list[NotebookCheck]:
    """Execute the series into ``out`` (default ``build/verify``) and compare it with the record."""
    from dlgn_lib.config import PROFILES
    if profile not in PROFILES:
        raise ValueError(f"--profile: unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    out = Path(out or locations.build_dir() / "verify" / profile)
    committed = _committed()
    if only:
        unknown = sorted(set(only) - set(committed))
        if unknown:
            raise ValueError(f"--only: unknown notebook id(s) {', '.join(unknown)}; available: {', '.join(committed)}")
    if run:
        run_series_under(None, out, profile, only, workers, fresh_cache=False)
    record = reproduce.load_record()
    full_path = locations.REPO_ROOT / "docs" / "full_results.json"
    full_record = json.loads(full_path.read_text()) if full_path.exists() else {}
    results = []
    for nb_id, path in committed.items():
        if only and nb_id not in only:
            continue
        executed = out / "notebooks" / path.name
        if profile == "quick":
            result = compare_quick(nb_id, path, executed, out / "figures", record)
            if result.ran:   # this run's quick intervals against the recorded full ones
                _add_overlaps(result, nb_id, executed.verdicts_of(nbformat.read(executed, as_version=4)), full_record)
        else:
            result = compare_full(nb_id, executed, full_record, record)
            if result.ran:   # the committed quick intervals against this run's full ones
                _add_overlaps(result, nb_id, executed.verdicts_of(nbformat.read(path, as_version=4)),
                              {"notebooks": {nb_id: executed._record_of(executed)}})
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
