"""The record of ``full`` runs, ``docs/full_results.json``: written from executed notebooks by
``python -m dlgn_lib.record.report record FOLDER``; read for each notebook's verdicts, its rule and
each claim's parts under rules v4."""
from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .. import locations
from ..files import Refusal, read_json, write_atomic
from ..locations import display_path
from .executed import (FULL_RECORD, SERIES_NOTE, _notebooks, _record_of, _stdout_lines, _unfinished,
                       _verdicts_from_record, code_path_of, seconds_of, verdicts_of)

__all__ = ["key_check", "recorded_for"]

NOTEBOOKS_DIR = locations.REPO_ROOT / "notebooks"
#: The claims of the paper's abstract (paraphrased; the one wording every table uses) and the
#: notebooks that test each.
CLAIMS = (
    ("—", "teaching: DLN vs ReLU vs DLGN in 2-D; build a DLGN by hand", ("00",)),
    ("C1", "a network is a mixture of path experts: output = Σ over paths of value × gate", ("01",)),
    ("C2", "the DLGN sits between a deep linear network and a ReLU net: it learns non-linear features",
     ("02",)),
    ("C3", "each feature is an intersection of half-spaces", ("03",)),
    ("C4", "this gives a global picture of every feature, unlike local saliency maps", ("04",)),
    ("C5", "half-spaces settle where the target is not smooth, so regions cover its smooth parts; "
           "simpler regions are learned first", ("05", "06", "10", "11")),
    ("C6", "later-layer half-spaces cluster in training", ("07", "11")),
    ("C7", "ReLU nets learn features the same way (a hypothesis)", ("06", "08", "10", "11")),
    ("T", "benchmarks against ReLU, DLN and frozen-gate baselines", ("09",)),
)


#: How the recorded ``full`` run was made (the record's ``note`` adds what was cached).
FULL_SETTING = "a 2-core CPU, one torch thread per process"


def record_full(folder: Path, record: Path = FULL_RECORD, another_machine: bool = False) -> dict:
    """Write the ``full`` record from the notebooks of ``folder`` (checked first; written atomically),
    keeping each entry's ``note`` and its same-rule ``other_machines``; ``another_machine``: add the
    folder's run to ``other_machines`` instead of replacing the entry."""
    old = full_record(record) or {"notebooks": {}}
    if not isinstance(old.get("notebooks"), dict):
        raise Refusal(f"{display_path(record)} has no \"notebooks\" mapping (the record of full runs)")
    found, run = _checked_folder(Path(folder))
    from dlgn_lib.record import provenance
    # the code path is the kernel's, printed in the notebook (code_path_of), not this process's
    machine = {k: v for k, v in provenance.machine().items() if k not in ("numerics", "aten_cpu_capability", "mkl_cbwr",
                                                                      "numpy_disabled_features", "onednn_max_cpu_isa")}
    version = provenance.code_version()
    for nb_id, path in found.items():   # a refusal midway leaves the file untouched: it is written last
        entry = {**_record_of(path), "code_version": version, "machine": machine, "code_path": code_path_of(path),
                 "rule": current_rule(nb_id)}
        if tables := written_comparisons(path):
            entry["tables"] = tables
        previous = old["notebooks"].get(nb_id, {})
        if another_machine:
            if previous.get("rule") != entry["rule"]:
                raise Refusal(f"{display_path(path)}: ran under rule v{entry['rule']}, but the record of {nb_id} "
                              f"is of rule v{previous.get('rule')}: record this machine's run first (without "
                              "--another-machine); nothing recorded")
            key = (machine.get("cpu_family_model_stepping"), entry["code_path"])
            previous["other_machines"] = [o for o in previous.get("other_machines", [])
                                          if (o["machine"].get("cpu_family_model_stepping"), o["code_path"]) != key]
            previous["other_machines"].append(entry)
            continue
        entry["note"] = previous.get("note", "")
        if kept := [o for o in previous.get("other_machines", []) if o.get("rule") == entry["rule"]]:
            entry["other_machines"] = kept
        old["notebooks"][nb_id] = entry
    if not another_machine:
        old["about"] = _ABOUT
        if run is not None:
            key = " ".join(sorted(found))
            run["note"] = old.get("series", {}).get(key, {}).get("note", run.get("note", ""))
            old.setdefault("series", {})[key] = run
    write_atomic(record, json.dumps(old, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    return old


_ABOUT = ("Verdicts and runtimes of the series executed with PROFILE=full (python -m dlgn_lib.record.report "
          "record FOLDER); `note` says how a notebook was run, `code_version` and `machine` (CPU, "
          "numeric code path, library versions) what ran it, `rule` the version of the notebook's "
          "verdict rule it ran under; entries without them predate that. `cold_seconds`, set by hand "
          "where `seconds` was measured from runs trained beforehand, is the time with those runs "
          "trained from an empty cache; a new record of the notebook drops it. `series` holds the "
          "runs of `series run` as their series.json states them, keyed by their notebook ids: wall "
          "time from start to end, workers, and whether the run cache was empty at the start. "
          "`other_machines` holds the same rule's full runs on other CPUs or code paths (report "
          "record FOLDER --another-machine): a check whose outcome differs between them is "
          "machine-sensitive, and a part it decides is INCONCLUSIVE (rules v4). `tables` holds the protocol "
          "comparisons a notebook printed and wrote (09's), read back from the CSV it wrote and checked "
          "against what it printed.")


#: The line that follows a printed comparison of the group's protocol (``dl.protocol``), naming its CSV.
_WRITTEN = re.compile(r"^written: (.+/)?(\d\d_\w+)\.csv$")


def written_comparisons(path: Path) -> dict[str, list[dict]]:
    """The protocol comparisons an executed notebook printed and wrote (``written: PATH.csv`` after the
    printed table), table id -> rows as in the CSV, so that the record page shows them generated.

    The CSV is read back and must print as the notebook printed it (``protocol.format_comparison``);
    a file written over since its run (by a later run of the notebook) is a Refusal."""
    import math

    import pandas as pd

    from dlgn_lib import protocol
    lines, found = _stdout_lines(nbformat.read(path, as_version=4)), {}
    for i, line in enumerate(lines):
        if not (m := _WRITTEN.match(line.strip())):
            continue
        csv = locations.REPO_ROOT / line.strip().removeprefix("written: ")
        if not csv.is_file():
            raise Refusal(f"{display_path(path)} wrote {display_path(csv)}, which is not there now; nothing recorded")
        table = pd.read_csv(csv)
        printed = protocol.format_comparison(table).splitlines()
        if lines[i - len(printed):i] != printed:
            raise Refusal(f"{display_path(csv)} does not print as {display_path(path)} printed it (written over by "
                          "a later run?); nothing recorded")
        found[m[2]] = [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
                       for row in table.to_dict("records")]
    return found


def _checked_folder(folder: Path) -> tuple[dict[str, Path], dict | None]:
    """The folder's notebooks (id -> path) and its finished ``full`` series note (or None), else a Refusal."""
    if not folder.is_dir():
        raise Refusal(f"{display_path(folder)} {'is a file, not a folder' if folder.exists() else 'does not exist'}")
    found = _notebooks(folder)
    if not found:
        raise Refusal(f"{display_path(folder)}: no executed notebooks (NN_*.ipynb) to record")
    series = {p.name for p in locations.find_notebooks(NOTEBOOKS_DIR)}
    for nb_id, path in found.items():
        if why := "not a notebook of this series" if path.name not in series else _not_full_run(nb_id, path):
            raise Refusal(f"{display_path(path)}: {why}; nothing recorded")
    note = folder / SERIES_NOTE
    if not note.exists():
        return found, None
    run = read_json(note, what="the note of `series run`")
    missing = [k for k in ("profile", "notebooks", "seconds", "workers") if k not in run]   # else a foreign file
    if missing or not isinstance(run["notebooks"], dict):
        missing = missing or ["notebooks mapping"]
        raise Refusal(f"{display_path(note)}: not a note of `series run` (no {', '.join(missing)}); nothing recorded")
    if run["profile"] != "full" or sorted(run["notebooks"]) != sorted(p.name for p in found.values()):
        raise Refusal(f"{display_path(note)}: a run of {sorted(run['notebooks'])} under {run['profile']!r}, "
                      "not of this folder's notebooks under 'full'; nothing recorded")
    status = {name: s.get("status") if isinstance(s, dict) else s for name, s in run["notebooks"].items()}
    if failed := [f"{name} {s}" for name, s in status.items() if s != "ok"]:
        raise Refusal(f"{display_path(note)}: the run did not finish ({'; '.join(failed)}); nothing recorded")
    return found, run


def _not_full_run(nb_id: str, path: Path) -> str | None:
    """Why an executed notebook cannot be recorded as a ``full`` run of notebook ``nb_id``, or None."""
    from dlgn_lib.verdict import combination_rule
    try:
        nb = nbformat.read(path, as_version=4)
        verdicts = verdicts_of(nb)
    except (OSError, ValueError) as err:
        why = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        return f"not a readable executed notebook ({why})"
    params = nb.metadata.get("papermill", {}).get("parameters", {})
    if params.get("PROFILE") != "full":
        return f"executed with parameters {params}, not PROFILE='full'"
    if why := _unfinished(nb):
        return why
    printed = {v.claim for v in verdicts if v.profile == "full"}
    if missing := [c for c, nbs in combination_rule()["claims"].items() if nb_id in nbs and c not in printed]:
        return f"printed no full verdict of {', '.join(missing)}"
    return None


@dataclass(frozen=True)
class Measured:
    """One notebook's verdicts and runtime under both profiles (full: None when not recorded)."""
    notebook: str
    name: str
    quick: list
    quick_seconds: float
    full: list | None
    full_seconds: float | None
    full_note: str
    full_rule: int | None = None   # the rule version the full run was recorded under (None: before rules v3)
    full_cold_seconds: float | None = None   # its runs trained from an empty cache (cold_seconds, else seconds)


def measured(notebooks_dir: Path = NOTEBOOKS_DIR, record: Path = FULL_RECORD) -> dict[str, Measured]:
    """Each executed notebook's :class:`Measured`, its ``full`` part from the record."""
    full = full_record(record).get("notebooks", {})
    out = {}
    for nb_id, path in _notebooks(notebooks_dir).items():
        nb, entry = nbformat.read(path, as_version=4), full.get(nb_id)
        recorded = ((_verdicts_from_record(entry), entry["seconds"], entry.get("note", ""), entry.get("rule"),
                     entry.get("cold_seconds", entry["seconds"])) if entry else (None, None, "", None, None))
        out[nb_id] = Measured(nb_id, path.stem, verdicts_of(nb), seconds_of(nb), *recorded)
    return out


def recorded_full(notebook: str, claim: str) -> str:
    """The recorded ``full`` verdict of ``claim`` in ``notebook``, e.g. "SUPPORTED (4 of 4 checks pass)"."""
    from ..verdict import FAIL, INCONCLUSIVE, NOT_RECORDED
    try:
        entry = json.loads(FULL_RECORD.read_text())["notebooks"].get(notebook)
    except (OSError, ValueError):
        return NOT_RECORDED
    for v in _verdicts_from_record(entry) if entry else []:
        if v.claim == claim:
            counts = f"{v.n_pass} of {v.n_checks} checks pass"
            rule, now = _recorded_rule(entry.get("rule"), notebook), current_rule(notebook)
            # rules v3 counts all three outcomes, also for checks without an interval (08's row counts)
            if any(c.low is not None for c in v.checks) or (rule or 0) >= 3:
                outcomes = [c.outcome for c in v.checks]
                counts += f", {outcomes.count(FAIL)} fail, {outcomes.count(INCONCLUSIVE)} inconclusive"
            stale = "" if rule == now else (f" under rule v{rule}" if rule is not None else " under an earlier rule")
            return f"{v.word} ({counts}){stale}" + (f"; no full run under rule v{now} yet" if stale else "")
    return NOT_RECORDED


def recorded_for(notebook: str, spread: dict | None = None):
    """What the record says about ``notebook``, for its verdict lines (``verdict.Recorded``)."""
    from . import reproduce
    from ..verdict import Recorded, combination_rule
    return Recorded(full={claim: recorded_full(notebook, claim) for claim in combination_rule()["claims"]},
                    outcomes=reproduce.check_outcomes(notebook, spread))


def current_rule(notebook: str) -> int:
    """The version of a notebook's verdict rule now: the highest registered (1 when none is)."""
    from dlgn_lib.verdict import registered_rules
    return max((r["version"] for r in registered_rules(notebook)), default=1)


def _recorded_rule(rule: int | None, notebook: str) -> int | None:
    """An entry's rule; without one (before rules v3) the current rule while below v3, else None."""
    if rule is None and (now := current_rule(notebook)) < 3:
        return now
    return rule


def full_is_current(m: Measured) -> bool:
    """Whether the recorded full run of a notebook ran under its current rule."""
    return m.full is not None and _recorded_rule(m.full_rule, m.notebook) == current_rule(m.notebook)


def _checks(entry: dict) -> list:
    return [c for v in _verdicts_from_record(entry) for c in v.checks]


def _part_of(entry: dict, claim: str, label: str) -> dict | None:
    return next((p for p in entry.get("parts", []) if (p["claim"], p["label"]) == (claim, label)), None)


def _part_word_across_machines(entry: dict, claim: str, label: str, patterns: list[str]) -> tuple[str, bool] | None:
    """(word, machines disagree) of a part in an entry and its ``other_machines``; None if not decided there."""
    from dlgn_lib import parts
    machines = [entry, *entry.get("other_machines", [])]
    found = [_part_of(one, claim, label) for one in machines]
    if None in found:
        return None
    words = [p["word"] for p in found]
    if len(set(words)) > 1:
        return parts.INCONCLUSIVE, True
    if words[0] == parts.DOES_NOT_HOLD and len(words) > 1:
        # all say DOES NOT HOLD: inconclusive unless one check of the part fails on every machine
        failing = set.intersection(*({c.name for c in _checks(one) if c.outcome == "fail" and any(
            fnmatch.fnmatchcase(c.name, p + "*") for p in patterns)} for one in machines))
        if not failing:
            return parts.INCONCLUSIVE, True
    return words[0], False


def sensitive_parts(claim: str, record: dict) -> set[str]:
    """The labels of ``claim``'s parts that the full records of several machines read differently."""
    from dlgn_lib import parts
    out = set()
    for label, part in parts.registered_parts(claim).items():
        for n in dict.fromkeys(r["notebook"] for r in part["checks"]):
            entry = record.get("notebooks", {}).get(n)
            if entry and (read := _part_word_across_machines(entry, claim, label, _part_patterns(part, n))) and read[1]:
                out.add(label)
    return out


def _part_patterns(part: dict, notebook: str) -> list[str]:
    """The registered check-name patterns of a part in one notebook (both sides of a like-for-like pair)."""
    return [r[k] for r in part["checks"] if r["notebook"] == notebook for k in ("check", "dlgn", "other") if k in r]


def part_words(claim: str, record: dict) -> dict[str, tuple[str, list[str]]]:
    """Each part of ``claim`` under full (rules v4): label → (its word, the notebooks without a v4 full record)."""
    from dlgn_lib import parts
    out = {}
    for label, part in parts.registered_parts(claim).items():
        words, undecided, missing = [], False, []
        for n in dict.fromkeys(r["notebook"] for r in part["checks"]):
            entry = record.get("notebooks", {}).get(n)
            if "decided_by" in part and entry:   # decided by a v3 rule's worst cases (C1, C3): its recorded checks
                outcomes = {c.outcome for r in part["checks"] for c in _checks(entry)
                            if fnmatch.fnmatchcase(c.name, r["check"] + "*")}
                words.append(parts.HOLDS if outcomes == {"pass"} else parts.DOES_NOT_HOLD if "fail" in outcomes
                             else parts.INCONCLUSIVE)
                continue
            found = _part_of(entry or {}, claim, label)
            if not entry or (entry.get("rule") or 0) < 4 or not found:
                missing.append(n)
                continue
            # a part read differently on the machines of the record is machine-sensitive: inconclusive
            read = _part_word_across_machines(entry, claim, label, _part_patterns(part, n))
            words.append(read[0] if read else found["word"])
            undecided |= found["dlgn_undecided"]
        kind = part.get("kind", "all")
        # while a notebook is missing, a check failing at the correction of the whole part decides it, and
        # (like for like) an undecided DLGN check leaves it inconclusive, whatever the rest shows
        out[label] = (parts.combine(kind, words, undecided) if not missing
                      else parts.DOES_NOT_HOLD if kind == "all" and parts.DOES_NOT_HOLD in words
                      else parts.INCONCLUSIVE if undecided else "pending", missing)
    return out


def key_check(claim: str, label: str, record: dict):
    """The check that speaks for a part in the full record: its failing or inconclusive check, else the
    passing check nearest its bar (like for like: the other net's checks); None when none is recorded."""
    from dlgn_lib import parts
    word = part_words(claim, record)[label][0]
    part = parts.registered_parts(claim)[label]
    found, dlgn = [], []
    for r in part["checks"]:
        entry = record.get("notebooks", {}).get(r["notebook"]) or {}
        if not entry or ((entry.get("rule") or 0) < 4 and "decided_by" not in part):
            continue
        found += [c for c in _checks(entry) if fnmatch.fnmatchcase(c.name, r.get("other", r.get("check")) + "*")]
        dlgn += [c for c in _checks(entry) if "dlgn" in r and fnmatch.fnmatchcase(c.name, r["dlgn"] + "*")]
    if not found:
        return None
    # an undecided or failing part: its check of that outcome (the DLGN's, where the other net's
    # checks do not explain it: a like-for-like part is inconclusive when the DLGN is undecided)
    wanted = {parts.DOES_NOT_HOLD: "fail", parts.INCONCLUSIVE: "inconclusive"}.get(word)
    pool = [c for c in found if c.outcome == wanted] or [c for c in dlgn if c.outcome == wanted] or found
    return min(pool, key=margin)


def margin(c) -> float:
    """A check's interval end (else value) to its bar, relative to the bar; negative on the wrong side."""
    try:
        bar = float(c.threshold)
        end = float(c.low if c.op.startswith(">") else c.high) if c.low is not None else float(c.value)
    except (TypeError, ValueError):
        return float("inf")
    return (end - bar if c.op.startswith(">") else bar - end) / max(abs(bar), 1e-12)


def full_record(path: Path = FULL_RECORD) -> dict:
    """The ``full`` record, ``{}`` when there is none; a Refusal naming it when it is not a JSON object."""
    return read_json(path, what="the record of full runs") if path.exists() else {}
