"""Numbers in prose, generated from executed notebooks: nothing measured is copied by hand.

Three kinds of text are written here, each between markers ``<!-- report:NAME -->`` and
``<!-- /report:NAME -->`` that nothing else edits:

- the README's opening table of bottom lines (``bottom``), its claims table (``claims``),
  history (``history``), runtime table (``times``), spread table (``spread``) and benchmark
  table (``bench``, from ``docs/bench.json``, written by ``python -m dlgn_lib.bench --record``);
- the course guide's timing table (``times``, ``teaching/course_guide.md``) and its table of the
  class path's walk (``classwalk``, from ``docs/class_walk.json``, written by
  ``python -m dlgn_lib.classwalk --record``);
- each notebook's "## Results" cell (``results``): every verdict check with its value under
  ``quick`` and ``full``, and the runtimes.

``quick`` numbers are read from the committed notebooks (their outputs, their cell timings with
a warm run cache). ``full`` numbers are read from a record, ``docs/full_results.json``, written by
``record`` from a folder of notebooks executed with ``PROFILE=full`` (``make figures
PROFILE=full`` writes one under ``build/notebooks``). Commands::

    python -m dlgn_lib.report record build/notebooks   # refresh the full record
    python -m dlgn_lib.report write                    # rewrite every generated block
    python -m dlgn_lib.report check                    # exit 1 when a block disagrees, or a
                                                       # runtime is typed into prose by hand
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import locations
from .executed import (  # noqa: F401 (read here and by the report's callers)
    FULL_RECORD, SERIES_NOTE, Check, Verdict, _CHECK, _OUTCOME_OF_MARK, _PART, _SMOKE, _VERDICT, _check_record, _notebooks, _record_of, _stdout_lines, _verdicts_from_record, code_path_of, parts_of, seconds_of, verdicts_of)

NOTEBOOKS_DIR = locations.REPO_ROOT / "notebooks"
README = locations.REPO_ROOT / "README.md"
COURSE_GUIDE = locations.REPO_ROOT / "teaching" / "course_guide.md"

#: The claims of the paper's abstract (paraphrased) and the notebooks that test each.
CLAIMS = (
    ("—", "teaching: DLN vs ReLU vs DLGN in 2-D; build a DLGN by hand", ("00",)),
    ("C1", "a network is a mixture of path experts: output = Σ_π path value × path gate", ("01",)),
    ("C2", "the DLGN sits between a deep linear network and a ReLU net: it learns non-linear features",
     ("02",)),
    ("C3", "each feature is the indicator of an intersection of L half-spaces", ("03",)),
    ("C4", "a global picture of every feature, unlike local saliency maps", ("04",)),
    ("C5", "half-spaces settle on the smooth parts of the target; simpler regions get paths first",
     ("05", "06", "10", "11")),
    ("C6", "later-layer neurons are half-spaces too, but training makes them cluster", ("07", "11")),
    ("C7", "ReLU networks learn features the same way (hypothesis)", ("06", "08", "10", "11")),
    ("T", "benchmarks against ReLU, DLN and frozen-gate baselines", ("09",)),
)
#: Each claim in a few words, for the short table of bottom lines that opens README and the book.
SHORT_CLAIMS = {
    "C1": "output = sum over paths of value × gate",
    "C2": "the DLGN is midway between a linear net and a ReLU net",
    "C3": "each feature is an intersection of half-spaces",
    "C4": "DLGN features are global; saliency maps are local",
    "C5": "half-spaces settle where the target is not smooth",
    "C6": "later-layer half-spaces cluster in training",
    "C7": "ReLU nets learn features the same way",
}
#: What a reader can move in each notebook (course guide).
LIVE = {
    "00": "β slider: soft vs hard gates; epoch slider of gate lines; build-a-DLGN-by-hand panel",
    "01": "slider: largest paths and their regions",
    "02": "— (decision-function grid, accuracy table)",
    "03": "slider: DLGN vs ReLU partitions",
    "04": "slider: saliency maps over training",
    "05": "panel: target × setting × epoch",
    "06": "panel: kernel heatmaps × epoch",
    "07": "slider: similarity matrices per layer",
    "08": "panel: switch angles × epoch; slider: gate-vector matrices",
    "09": "— (table with provenance)",
    "10": "slider: units × tree nodes over passes",
    "11": "— (maps of effects: C5, C6, C7)",
}

#: How the recorded ``full`` run was made (the record's ``note`` adds what was cached).
FULL_SETTING = "a 2-core CPU, one torch thread per process"

def record_full(folder: Path, record: Path = FULL_RECORD, another_machine: bool = False) -> dict:
    """Write the ``full`` record from notebooks executed with ``PROFILE=full`` in ``folder``.

    Each notebook must have run under ``full`` (papermill's parameters say so); its verdicts and
    duration replace the old entry, whose ``note`` (how it was run) is kept, and whose records of
    other machines are kept while the rule is the same. The folder's ``series.json`` (written by
    ``series run``), when there is one, is recorded under ``series``, keyed by its notebook ids:
    the run's wall time, workers, and whether its run cache was empty.

    ``another_machine``: the folder holds the same rule's ``full`` run on another CPU or code path;
    it is kept beside the entry (``other_machines``), which it does not replace, so that a check
    whose outcome differs between the two is machine-sensitive (``machine_sensitive``).
    """
    old = json.loads(record.read_text()) if record.exists() else {"notebooks": {}}
    found = _notebooks(folder)
    if not found:
        raise FileNotFoundError(f"{folder}: no executed notebooks (NN_*.ipynb) to record")
    from dlgn_lib import provenance
    # the code path is the kernel's, printed in the notebook (code_path_of), not this process's
    machine = {k: v for k, v in provenance.machine().items() if k not in ("numerics", "aten_cpu_capability", "mkl_cbwr",
                                                                      "numpy_disabled_features", "onednn_max_cpu_isa")}
    version = provenance.code_version()
    entries = {}
    for nb_id, path in found.items():
        params = nbformat.read(path, as_version=4).metadata.get("papermill", {}).get("parameters", {})
        if params.get("PROFILE") != "full":
            raise ValueError(f"{path}: executed with parameters {params}, not PROFILE='full'")
        entry = _record_of(path)
        entry["code_version"], entry["machine"] = version, machine
        entry["code_path"] = code_path_of(path)
        entry["rule"] = current_rule(nb_id)
        previous = old["notebooks"].get(nb_id, {})
        if another_machine and previous.get("rule") != entry["rule"]:
            raise ValueError(f"{path}: another machine's run of rule v{entry['rule']}, but the record of {nb_id} "
                             f"is of rule v{previous.get('rule')}: record this machine's run first (without "
                             "--another-machine)")
        entries[nb_id] = (entry, previous)
    for nb_id, (entry, previous) in entries.items():
        if another_machine:
            key = (entry["machine"].get("cpu_family_model_stepping"), entry["code_path"])
            others = [o for o in previous.get("other_machines", [])
                      if (o["machine"].get("cpu_family_model_stepping"), o["code_path"]) != key]
            previous["other_machines"] = others + [entry]
            continue
        entry["note"] = previous.get("note", "")
        kept = [o for o in previous.get("other_machines", []) if o.get("rule") == entry["rule"]]
        if kept:
            entry["other_machines"] = kept
        old["notebooks"][nb_id] = entry
    if another_machine:
        record.write_text(json.dumps(old, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        return old
    series_note = Path(folder) / SERIES_NOTE
    if series_note.exists():
        run = json.loads(series_note.read_text())
        if run.get("profile") != "full" or sorted(run.get("notebooks", {})) != sorted(p.name for p in found.values()):
            raise ValueError(f"{series_note}: a run of {sorted(run.get('notebooks', {}))} under "
                             f"{run.get('profile')!r}, not of this folder's notebooks under 'full'")
        key = " ".join(sorted(found))
        run["note"] = old.get("series", {}).get(key, {}).get("note", run.get("note", ""))
        old.setdefault("series", {})[key] = run
    old["about"] = ("Verdicts and runtimes of the series executed with PROFILE=full (python -m dlgn_lib.report "
                    "record FOLDER); `note` says how a notebook was run, `code_version` and `machine` (CPU, "
                    "numeric code path, library versions) what ran it, `rule` the version of the notebook's "
                    "verdict rule it ran under; entries without them predate that. `cold_seconds`, set by hand "
                    "where `seconds` was measured from runs trained beforehand, is the time with those runs "
                    "trained from an empty cache; a new record of the notebook drops it. `series` holds the "
                    "runs of `series run` as their series.json states them, keyed by their notebook ids: wall "
                    "time from start to end, workers, and whether the run cache was empty at the start. "
                    "`other_machines` holds the same rule's full runs on other CPUs or code paths (report "
                    "record FOLDER --another-machine): a check whose outcome differs between them is "
                    "machine-sensitive, and a part it decides is INCONCLUSIVE (rules v4).")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(old, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    return old


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
    full_cold_seconds: float | None = None   # with its runs trained from an empty cache (the record's cold_seconds, else seconds)


def measured(notebooks_dir: Path = NOTEBOOKS_DIR, record: Path = FULL_RECORD) -> dict[str, Measured]:
    full = json.loads(record.read_text())["notebooks"] if record.exists() else {}
    out = {}
    for nb_id, path in _notebooks(notebooks_dir).items():
        nb = nbformat.read(path, as_version=4)
        entry = full.get(nb_id)
        out[nb_id] = Measured(nb_id, path.stem, verdicts_of(nb), seconds_of(nb),
                              _verdicts_from_record(entry) if entry else None,
                              entry["seconds"] if entry else None, entry.get("note", "") if entry else "",
                              entry.get("rule") if entry else None,
                              entry.get("cold_seconds", entry["seconds"]) if entry else None)
    return out


def _seconds(value: float | None) -> str:
    return "not run" if value is None else f"{value:,.0f} s"


def _failing(verdict: Verdict) -> str:
    """The checks that did not pass: "— fails: …" and, under rules v3, "— inconclusive: …"."""
    def show(c: Check) -> str:
        spread = f", 90% [{c.low}, {c.high}]" if c.low is not None else ""
        return f"{c.name} = {c.value}{spread} (needs {c.op} {c.threshold})"
    text = ""
    for outcome, label in (("fail", "fails"), ("inconclusive", "inconclusive")):
        found = [c for c in verdict.checks if c.outcome == outcome]
        if found:
            text += f" — {label}: " + "; ".join(show(c) for c in found)
    return text


def _verdict_cell(m: Measured, claim: str, profile: str) -> str:
    verdicts = m.quick if profile == "quick" else m.full
    if verdicts is None:
        return "not run"
    mine = [v for v in verdicts if v.claim == claim]
    return "; ".join(v.short() + _failing(v) for v in mine) or "—"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def recorded_full(notebook: str | None, claim: str, record: Path | None = None) -> str:
    """The ``full`` verdict of ``claim`` recorded for ``notebook`` in ``docs/full_results.json``, as
    "SUPPORTED (4 of 4 checks pass)", or "not recorded"; a record from before the notebook's current
    rule says so ("… under rule v2; no full run under rule v3 yet")."""
    from .verdict import FAIL, INCONCLUSIVE, NOT_RECORDED
    if notebook is None:
        return NOT_RECORDED
    try:
        entry = json.loads((FULL_RECORD if record is None else record).read_text())["notebooks"].get(notebook)
    except (OSError, ValueError):
        return NOT_RECORDED
    for v in _verdicts_from_record(entry) if entry else []:
        if v.claim == claim:
            counts = f"{v.n_pass} of {v.n_checks} checks pass"
            rule, now = recorded_rule(entry.get("rule"), notebook), current_rule(notebook)
            # rules v3 counts all three outcomes, also for checks without an interval (08's row counts)
            if any(c.low is not None for c in v.checks) or (rule or 0) >= 3:
                outcomes = [c.outcome for c in v.checks]
                counts += f", {outcomes.count(FAIL)} fail, {outcomes.count(INCONCLUSIVE)} inconclusive"
            stale = "" if rule == now else (f" under rule v{rule}" if rule is not None else " under an earlier rule")
            return f"{v.word} ({counts}){stale}" + (f"; no full run under rule v{now} yet" if stale else "")
    return NOT_RECORDED


def recorded_for(notebook: str, spread: dict | None = None):
    """What the record says about ``notebook``, for its verdict lines (``verdict.Recorded``): the
    recorded ``full`` result of each claim, and each check's outcome under the code paths of the
    spread record (``reproduce.check_outcomes``; ``spread``: that record, read when not given)."""
    from . import reproduce
    from .verdict import Recorded, combination_rule
    return Recorded(full={claim: recorded_full(notebook, claim) for claim in combination_rule()["claims"]},
                    outcomes=reproduce.check_outcomes(notebook, spread))


def current_rule(notebook: str) -> int:
    """The version of a notebook's verdict rule now: the highest registered (1 when none is)."""
    from dlgn_lib.verdict import registered_rules
    return max((r["version"] for r in registered_rules(notebook)), default=1)


def recorded_rule(rule: int | None, notebook: str) -> int | None:
    """The rule a full record entry ran under: its ``rule``, or, for an entry recorded before rules
    v3 (no version), the notebook's current rule while that is below v3, else None (unknown)."""
    if rule is not None:
        return rule
    now = current_rule(notebook)
    return now if now < 3 else None


def full_is_current(m: Measured) -> bool:
    """Whether the recorded full run of a notebook ran under its current rule. An entry recorded
    before rules v3 says no rule version; it is current while the notebook has no v3 rule."""
    if m.full is None:
        return False
    return recorded_rule(m.full_rule, m.notebook) == current_rule(m.notebook)


def bottom_line_cell(data: dict[str, Measured], claim: str) -> str:
    """A claim's bottom line under full (``verdict.bottom_line``), with each notebook's part."""
    from dlgn_lib.verdict import PENDING, bottom_line, combination_rule
    words, parts = {}, []
    for n in combination_rule()["claims"][claim]:
        mine = [v for v in (data[n].full or []) if v.claim == claim]
        current = full_is_current(data[n]) and bool(mine)
        words[n] = mine[0].word if current else None
        rule = f"rules v{current_rule(n)}"
        parts.append(f"{n}: {mine[0].short()} ({rule})" if current else
                     f"{n}: no `full` run under {rule} yet" + (f" (earlier rule: {mine[0].short()})" if mine else ""))
    line = bottom_line(claim, words)
    shown = {"SUPPORTED": "SUPPORTED", "NOT SUPPORTED": "**NOT SUPPORTED**"}.get(line, f"*{line}*")
    return f"{shown}" + ("" if line != PENDING else " (a notebook has no `full` verdict under its current rule)") \
        + "<br>" + "<br>".join(parts)


def _word(word: str) -> str:
    return {"SUPPORTED": "SUPPORTED", "NOT SUPPORTED": "**NOT SUPPORTED**"}.get(word, f"*{word}*")


def bottom_lines_table(data: dict[str, Measured]) -> str:
    """The short table that opens README and the book: per claim, its bottom line at paper scale
    (``full``, by the registered combination), the quick result, and the notebooks. Details and
    history follow in the claims table."""
    from dlgn_lib.verdict import PENDING, bottom_line, combination_rule
    rows = ["| claim | at paper scale (`full`) | `quick` (minutes on a laptop) | notebooks |", "|---|---|---|---|"]
    for claim, _, notebooks in CLAIMS:
        if not claim.startswith("C"):
            continue
        words, waiting = {}, []
        for n in combination_rule()["claims"][claim]:
            mine = [v for v in (data[n].full or []) if v.claim == claim]
            words[n] = mine[0].word if mine and full_is_current(data[n]) else None
            if words[n] is None:
                waiting.append(n + (f" (earlier rule: {mine[0].word})" if mine else ""))
        line = bottom_line(claim, words)
        full = _word(line) if line != PENDING else f"*pending*: no `full` run under the current rule in {', '.join(waiting)}"
        quick_words = {n: v.word for n in notebooks for v in (data[n].quick or []) if v.claim == claim}
        quick = (_word(next(iter(quick_words.values()))) if len(set(quick_words.values())) == 1
                 else ", ".join(f"{n} {_word(w)}" for n, w in quick_words.items())) if quick_words else "—"
        links = ", ".join(f"[{n}](notebooks/{data[n].name}.ipynb)" for n in notebooks)
        rows.append(f"| {claim}: {_escape(SHORT_CLAIMS[claim])} | {_escape(full)} | {_escape(quick)} | {links} |")
    return "\n".join(rows)


def machine_sensitive(entry: dict) -> set[str]:
    """The checks of a notebook's full record whose outcome differs between the CPUs and code paths
    it was run on (the entry and its ``other_machines``): machine-sensitive under rules v4."""
    outcomes: dict[str, set] = {}
    for one in [entry, *entry.get("other_machines", [])]:
        for v in _verdicts_from_record(one):
            for c in v.checks:
                outcomes.setdefault(c.name, set()).add(c.outcome)
    return {name for name, seen in outcomes.items() if len(seen) > 1}


def _part_word_across_machines(entry: dict, claim: str, label: str, patterns: list[str]) -> tuple[str, bool] | None:
    """A part's word in one notebook's full record, read on every machine it was run on: the
    common word, or INCONCLUSIVE when the machines' words differ, or when they all say DOES NOT
    HOLD but no check of the part fails on every machine (each fails on other checks). Returns
    (word, whether the machines disagreed), or None when the entry decides no such part."""
    from dlgn_lib import parts
    words = []
    for one in [entry, *entry.get("other_machines", [])]:
        found = [p for p in one.get("parts", []) if (p["claim"], p["label"]) == (claim, label)]
        if not found:
            return None
        words.append(found[0]["word"])
    if len(set(words)) > 1:
        return parts.INCONCLUSIVE, True
    if words[0] == parts.DOES_NOT_HOLD and len(words) > 1:
        failing = None
        for one in [entry, *entry.get("other_machines", [])]:
            names = {c.name for v in _verdicts_from_record(one) for c in v.checks if c.outcome == "fail"
                     and any(fnmatch.fnmatchcase(c.name, p + "*") for p in patterns)}
            failing = names if failing is None else failing & names
        if not failing:
            return parts.INCONCLUSIVE, True
    return words[0], False


def sensitive_parts(claim: str, record: dict) -> set[str]:
    """The labels of ``claim``'s parts that a notebook's full records on several machines read
    differently (``_part_word_across_machines``): machine-sensitive, counted INCONCLUSIVE."""
    from dlgn_lib import parts
    out = set()
    for label, part in parts.registered_parts(claim).items():
        for n in dict.fromkeys(r["notebook"] for r in part["checks"]):
            entry = record.get("notebooks", {}).get(n) or {}
            read = _part_word_across_machines(entry, claim, label, _part_patterns(part, n)) if entry else None
            if read and read[1]:
                out.add(label)
    return out


def _part_patterns(part: dict, notebook: str) -> list[str]:
    """The registered check-name patterns of a part in one notebook (both sides of a like-for-like pair)."""
    return [r[k] for r in part["checks"] if r["notebook"] == notebook for k in ("check", "dlgn", "other") if k in r]


def part_words(claim: str, record: dict) -> dict[str, tuple[str, list[str]]]:
    """Each registered part of ``claim`` (rules v4, ``dl.parts``) under full: label → (its word,
    the notebooks still without a full record under rules v4 that decide it). A part's word
    combines the words it has in each notebook's record (``dl.parts.combine``); a part decided by a
    v3 rule's worst cases (C1, C3: ``decided_by``) is read from those recorded checks. The word is
    "pending" while a notebook is missing."""
    from dlgn_lib import parts
    out = {}
    for label, part in parts.registered_parts(claim).items():
        notebooks = list(dict.fromkeys(r["notebook"] for r in part["checks"]))
        words, undecided, missing = [], False, []
        for n in notebooks:
            entry = record.get("notebooks", {}).get(n)
            if "decided_by" in part and entry:
                checks = [c for v in _verdicts_from_record(entry) for c in v.checks]
                mine = [c for r in part["checks"] for c in checks if fnmatch.fnmatchcase(c.name, r["check"] + "*")]
                outcomes = {c.outcome for c in mine}
                words.append(parts.HOLDS if outcomes == {"pass"} else parts.DOES_NOT_HOLD if "fail" in outcomes
                             else parts.INCONCLUSIVE)
                continue
            found = [p for p in (entry or {}).get("parts", []) if (p["claim"], p["label"]) == (claim, label)]
            if not entry or (entry.get("rule") or 0) < 4 or not found:
                missing.append(n)
                continue
            # a part read differently on the machines of the record is machine-sensitive: inconclusive
            read = _part_word_across_machines(entry, claim, label, _part_patterns(part, n))
            words.append(read[0] if read else found[0]["word"])
            undecided |= found[0]["dlgn_undecided"]
        kind = part.get("kind", "all")
        if not missing:
            out[label] = (parts.combine(kind, words, undecided), missing)
        elif kind == "all" and parts.DOES_NOT_HOLD in words:
            # a check failing at the correction of the whole part decides it, whatever the rest shows
            out[label] = (parts.DOES_NOT_HOLD, missing)
        elif undecided:   # like for like: an undecided DLGN check leaves the part inconclusive, whatever the rest shows
            out[label] = (parts.INCONCLUSIVE, missing)
        else:
            out[label] = ("pending", missing)
    return out


def full_record(path: Path = FULL_RECORD) -> dict:
    """The ``full`` record (``docs/full_results.json``), or an empty one when there is none."""
    return json.loads(path.read_text()) if path.exists() else {}


def parts_table(record: dict) -> str:
    """The bottom lines by parts (rules v4): per claim, its word from its parts' words under full,
    and each part with its word; pending parts name the notebooks whose v4 full run is missing."""
    from dlgn_lib import parts
    rows = ["| claim | bottom line by parts (rules v4, `full`) | its parts |", "|---|---|---|"]
    for claim in parts.registry()["claims"]:
        words = part_words(claim, record)
        decided = [w for w, _ in words.values() if w != "pending"]
        if len(decided) == len(words):
            word, k, n = parts.claim_word(decided)
            line = f"{_word_v4(word)} ({k} of {n})" if word == parts.HOLDS_IN_PART else _word_v4(word)
        else:
            line = f"*pending*: {len(decided)} of {len(words)} parts decided"
        sensitive = sensitive_parts(claim, record)
        shown = "<br>".join(f"({label}) " + ('*pending*: no v4 full run of ' + ', '.join(m) if w == "pending" else
                                             _word_v4(w) + (f" (decided before {', '.join(m)} ran)" if m else "")
                                             + (" (machine-sensitive: the CPUs' full records differ)"
                                                if label in sensitive else ""))
                            for label, (w, m) in words.items())
        rows.append(f"| {claim}: {_escape(SHORT_CLAIMS[claim])} | {_escape(line)} | {_escape(shown)} |")
    return "\n".join(rows)


def _word_v4(word: str) -> str:
    return {"HOLDS": "HOLDS", "DOES NOT HOLD": "**DOES NOT HOLD**"}.get(word, f"*{word}*")


def claims_table(data: dict[str, Measured]) -> str:
    """One line per claim: its bottom line under full (the registered combination of its notebooks,
    reconstruction §8.1), its quick results, and where it is shown."""
    rows = ["| id | claim (paraphrased from the abstract) | bottom line (`full`) | `quick` | shown in |",
            "|---|---|---|---|---|"]
    for claim, text, notebooks in CLAIMS:
        links = ", ".join(f"[{data[n].name.replace('_', ' ', 1)}](notebooks/{data[n].name}.ipynb)" for n in notebooks)
        quick = "<br>".join(f"{n}: {_verdict_cell(data[n], claim, 'quick')}" for n in notebooks
                            if _verdict_cell(data[n], claim, "quick") != "—") or "— (no verdict)"
        bottom = bottom_line_cell(data, claim) if claim.startswith("C") else "— (no verdict)"
        rows.append(f"| {claim} | {_escape(text)} | {_escape(bottom)} | {_escape(quick)} | {links} |")
    return "\n".join(rows)


def history_table() -> str:
    """Every earlier verdict (``verdict_history.json``): claim, notebook, the setting it was measured
    under (rule version, convention, profile) and why it was superseded."""
    from dlgn_lib.verdict import HISTORY_FILE
    rows = ["| claim | notebook | earlier verdict | setting | why it was superseded |", "|---|---|---|---|---|"]
    for nb, entries in json.loads(HISTORY_FILE.read_text())["notebooks"].items():
        for e in entries:
            claim = e["verdict"].split(" ", 1)[0]
            rows.append(f"| {claim} | {nb} | {_escape(e['verdict'])} | {_escape(e['setting'])} | {_escape(e['reason'])} |")
    return "\n".join(rows)


def _earlier_label(entry: dict) -> str:
    """An earlier verdict in a few words: its rule, convention and profile, then its word and count,
    e.g. ``C6 v1, "he", full: SUPPORTED (2 of 2)``."""
    verdict, setting = entry["verdict"], entry["setting"]
    rule = re.search(r"rule v(\d+)", setting)
    convention = re.search(r'convention "(\w+)"', setting)
    profile = re.search(r"\[(quick|full)\]", verdict)
    outcome = re.search(r"\]: ([A-Z ]+) \((\d+ of \d+)", verdict)
    return (f"{verdict.split(' ', 1)[0]} v{rule[1] if rule else 1}, \"{convention[1] if convention else 'group'}\", "
            f"{profile[1] if profile else '?'}: {outcome[1]} ({outcome[2]})" if outcome else verdict)


def verdicts_by_notebook_table(data: dict[str, Measured]) -> str:
    """The course guide's table: per notebook with a verdict, its claims' verdicts now under both
    profiles (the executed notebooks and the full record) and its earlier verdicts (rule,
    convention, profile), oldest first, from ``verdict_history.json``."""
    from dlgn_lib.verdict import HISTORY_FILE
    history = json.loads(HISTORY_FILE.read_text())["notebooks"]
    rows = ["| nb | `quick` now | `full` now | earlier verdicts (rule, convention, profile) |",
            "|---|---|---|---|"]
    for n, m in data.items():
        claims = [c for c, _, nbs in CLAIMS if n in nbs and c.startswith("C")]
        if not [v for v in (m.quick or []) + (m.full or []) if v.claim in claims] and not history.get(n):
            continue                                              # a map or table, no verdict
        def now(profile: str) -> str:
            verdicts = m.quick if profile == "quick" else m.full
            if verdicts is None:
                return "not run"
            if profile == "full" and not full_is_current(m):
                return f"no run under rules v{current_rule(n)} yet"
            cells = "<br>".join(f"{v.claim}: {v.short()}" for v in verdicts if v.claim in claims)
            return cells + ("" if profile == "quick" else f" (rules v{current_rule(n)})")
        earlier = "<br>".join(_earlier_label(e) for e in history.get(n, [])) or "—"
        rows.append(f"| {n} | {_escape(now('quick'))} | {_escape(now('full'))} | {_escape(earlier)} |")
    return "\n".join(rows)


def series_line(series: dict, ids: Sequence[str]) -> str:
    """What the record says of the whole series from an empty run cache, per CPU (a time on one CPU
    says little of another): one cold run of every notebook, or cold runs of parts of it (each from
    its own empty cache) added up, and what they leave out; parts that overlap are not added up."""
    cold = {key: run for key, run in series.items()
            if run.get("profile") == "full" and run.get("runs_cache_empty_at_start")
            and all(n.get("status") == "ok" for n in run.get("notebooks", {}).values())}
    how = "`python -m dlgn_lib.series run --profile full`, its `series.json`"
    if not cold:
        return f"The whole series from an empty run cache ({how}): not measured yet."
    by_cpu: dict[str, dict] = {}
    for key in sorted(cold, key=lambda k: cold[k].get("started", "")):
        by_cpu.setdefault(cold[key].get("cpu", "a CPU not recorded"), {})[key] = cold[key]
    return f"The whole series from an empty run cache ({how}): " + " ".join(
        _series_on_one_cpu(cpu, runs, ids) for cpu, runs in by_cpu.items())


def _series_on_one_cpu(cpu: str, runs: dict, ids: Sequence[str]) -> str:
    def part(key: str, run: dict) -> str:
        return (f"{key} in {run['seconds']:,.0f} s ({run['seconds'] / 3600:.2f} h; {run['workers']} workers, "
                f"{run.get('numerics', '?')} code path, code {run.get('code_version', '?')}, {run.get('started', '?')[:10]})")

    whole = [key for key in runs if set(key.split()) >= set(ids)]
    if whole:
        key = min(whole, key=lambda k: runs[k]["seconds"])
        return f"on {cpu}, all {len(ids)} notebooks, " + part(key, runs[key]) + "."
    chosen, covered = [], set()
    for key in runs:   # disjoint parts, earliest first
        if not covered & set(key.split()):
            chosen.append(key)
            covered |= set(key.split())
    text = f"on {cpu}, in parts, each from its own empty cache: " + "; ".join(part(k, runs[k]) for k in chosen)
    missing = [i for i in ids if i not in covered]
    if missing:
        return text + f"; not measured yet: {' '.join(missing)}."
    total = sum(runs[k]["seconds"] for k in chosen)
    return text + f"; the parts together: {total:,.0f} s ({total / 3600:.2f} h)."


def times_table(data: dict[str, Measured], live: bool = False, series: dict | None = None) -> str:
    claims = {n: ", ".join(c for c, _, nbs in CLAIMS if n in nbs and c != "—") or "—" for n in data}
    head = "| notebook | claims | `quick`, warm cache | `full` | how `full` was run |" + (" live elements |" if live else "")
    rows = [head, "|---|---|---|---|---|" + ("---|" if live else "")]
    for n, m in data.items():
        rows.append(f"| {m.name.replace('_', ' ', 1)} | {claims[n]} | {_seconds(m.quick_seconds)} | "
                    f"{_seconds(m.full_seconds)} | {_escape(m.full_note) or '—'} |" + (f" {LIVE.get(n, '—')} |" if live else ""))
    total = sum(m.full_seconds or 0 for m in data.values())
    cold = sum(m.full_cold_seconds or 0 for m in data.values())
    rows.append(f"\nAll {len(data)} notebooks: `quick` {sum(m.quick_seconds for m in data.values()):,.0f} s with a "
                f"warm run cache (the committed outputs' cell timings); `full` {total:,.0f} s as recorded, "
                f"{cold:,.0f} s with every notebook's runs trained from an empty cache (the record's "
                f"`cold_seconds` where a notebook read runs trained beforehand) (`docs/full_results.json`: "
                f"{FULL_SETTING}; the last column says what ran beside each).")
    if series is not None:
        rows.append("\n" + series_line(series, list(data)))
    return "\n".join(rows)


def results_block(m: Measured, spread: dict | None = None) -> str:
    """A notebook's results block; a quick check whose pass/fail changed across the CPU code paths of
    the spread record is marked fragile, with how many code paths passed it."""
    outcomes = (spread or {}).get("notebooks", {}).get(m.notebook, {}).get("checks", {})
    lines = []
    for profile, verdicts in (("quick", m.quick), ("full", m.full)):
        if verdicts is None:
            lines.append(f"**`{profile}`**: not recorded.")
            continue
        seconds = m.quick_seconds if profile == "quick" else m.full_seconds
        how = (" with a warm run cache" if profile == "quick"
               else f" ({FULL_SETTING}; {m.full_note})" if m.full_note else f" ({FULL_SETTING})")
        lines.append(f"**`{profile}`** ran in {_seconds(seconds)}{how}.")
        if profile == "full" and not full_is_current(m):
            lines[-1] += (f" It ran under rules v{m.full_rule}" if m.full_rule is not None else
                          " It ran under the rule before rules v3") + \
                f"; rules v{current_rule(m.notebook)} has no `full` run yet."
        for v in verdicts:
            seeds = any(c.low is not None for c in v.checks)   # rules v3: checks over seeds with intervals
            lines += ["", f"{v.claim}: {v.short()}", ""]
            lines += (["| check | value | 90% interval | threshold | over | |", "|---|---|---|---|---|---|"] if seeds
                      else ["| check | value | threshold | |", "|---|---|---|---|"])
            lines += [f"| {_escape(c.name)} | {c.value} | "
                      + (f"{c.low} to {c.high} | " if seeds and c.low is not None else "— | " if seeds else "")
                      + f"{c.op} {c.threshold} | " + (f"{_escape(c.over or '—')} | " if seeds else "")
                      + f"{c.outcome if c.outcome != 'fail' else 'FAIL'}"
                      f"{_fragile(outcomes.get(c.name, {})) if profile == 'quick' else ''} |" for c in v.checks]
        if not verdicts:
            lines.append("No verdict in this notebook.")
        lines.append("")
    return "\n".join(lines).rstrip()


def _fragile(outcomes: dict) -> str:
    outcomes = {k: v for k, v in outcomes.items() if k != "committed"}   # code paths only
    from dlgn_lib.verdict import outcome_name
    named = [outcome_name(v) for v in outcomes.values()]
    if len(set(named)) < 2:
        return ""
    return f" (fragile: passes under {named.count('pass')} of {len(named)} CPU code paths)"


def _replace_block(text: str, name: str, body: str, where: str) -> str:
    begin, end = f"<!-- report:{name} -->", f"<!-- /report:{name} -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{where}: needs exactly one {begin} … {end} block")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def _results_cell(nb):
    cells = [c for c in nb.cells if "results" in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError("no cell tagged 'results'")
    return cells[0]


RECONSTRUCTION = locations.REPO_ROOT / "docs" / "reconstruction.md"


def spread_table(spread: dict) -> str:
    """README's reproducibility table, from ``docs/spread.json``: per notebook, its printed numbers,
    how many moved across CPU code paths, the largest relative spread, and the fragile checks."""
    if not spread.get("notebooks"):
        return "No spread record yet (`make spread`)."
    rows = ["| notebook | numbers compared | moved across code paths | largest relative spread | "
            "checks whose pass/fail changed | figures: largest RMS | stopped with an error under |",
            "|---|---|---|---|---|---|---|"]
    for nb_id, entry in spread["notebooks"].items():
        s = entry["summary"]
        rms = [v for fig in entry["figures"].values() for v in fig.values()]
        fragile = "; ".join(_escape(name) for name in s["fragile_checks"]) or "none"
        rows.append(f"| {nb_id} | {s['numbers']} | {s['numbers_that_moved']} | {s['largest_relative_spread']:.3g} | "
                    f"{fragile} | {max(rms, default=0):.2f} | "
                    f"{'; '.join(f'{k} ({_escape(v)})' for k, v in entry.get('failed', {}).items()) or 'none'} |")
    machines = spread.get("machines") or [spread["machine"]]
    described = "; ".join(
        f"{m.get('label', m['cpu'])} at {m.get('code_version', spread['code_version'])}"
        f"{' (notebooks ' + ', '.join(m['notebooks']) + ' only)' if m.get('notebooks') else ''} "
        f"({', '.join(m['cpu_features'])}; {m['cores']} cores; OpenBLAS core type "
        f"{m.get('openblas_coretype', 'not recorded')}; torch {m['torch']}, numpy {m['numpy']})" for m in machines)
    rows += ["", f"Measured with `make spread` (and `make spread ADD=1` on each further machine) on "
                 f"{len(machines)} machine(s): {described}. Code paths: "
                 + "; ".join(f"`{name}`" for name in spread["variants"])
                 + "; relative spread = range / |committed value|."]
    return "\n".join(rows)


def tolerance_table(spread: dict) -> str:
    """The reconstruction's per-notebook tolerances (§7.1), from ``docs/spread.json``."""
    from dlgn_lib import reproduce
    if not spread.get("notebooks"):
        return "No spread record yet (`make spread`)."
    factor = spread.get("tolerance_factor", reproduce.TOLERANCE_FACTOR)
    rows = ["| notebook | numbers | numbers with a measured range | tolerance of each number | "
            "largest relative spread | figures (RMS allowed, largest) |", "|---|---|---|---|---|---|"]
    for nb_id, entry in spread["notebooks"].items():
        s = entry["summary"]
        allowed = [reproduce.figure_tolerance(spread, nb_id, name) for name in entry["figures"]]
        rows.append(f"| {nb_id} | {s['numbers']} | {s['numbers_that_moved']} | {factor:g} x its range, "
                    f"at least one unit of its last digit | {s['largest_relative_spread']:.3g} | "
                    f"{max(allowed, default=reproduce.FIGURE_FLOOR_RMS):.2f} |")
    return "\n".join(rows)


def bench_table(rows, runs) -> str:
    """README's Performance table from the bench record: one line per row, the run that measured
    it, then each run's command, machine and absolute reference numbers."""
    from dlgn_lib import bench
    several = len(runs) > 1
    lines = ["| benchmark | median | [min – max] | target | met |" + (" run |" if several else ""),
             "|---|---|---|---|---|" + ("---|" if several else "")]
    for row, run in rows:
        cells = [_escape(row.name), *(_escape(c) for c in bench.row_cells(row))]
        lines.append("| " + " | ".join(cells) + " |" + (f" {run + 1} |" if several else ""))
    notes = [f"- {row.name}: {row.note}" for row, _ in rows if row.note and row.values]
    if notes:
        lines += ["", "Notes of measured rows:", "", *notes]
    for i, run in enumerate(runs):
        label = f"Run {i + 1}" if several else "Measured"
        lines += ["", f"{label}: {run['date']}, `{run['command']}`, code {run['code_version']}, {run['cpu']}; "
                  + "; ".join(run["machine"]) + (". Absolute numbers of the same run:" if run["reference"] else ".")]
        if run["reference"]:
            lines += ["", *(f"- {ref}" for ref in run["reference"])]
    return "\n".join(lines)


def generated(notebooks_dir: Path = NOTEBOOKS_DIR, record: Path = FULL_RECORD) -> dict[Path, str]:
    """Every generated text as it should read now: README and course guide (path -> whole text),
    notebooks (path -> the source of the cell tagged ``results``)."""
    data = measured(notebooks_dir, record)
    out = {}
    readme = README.read_text()
    readme = _replace_block(readme, "bottom", bottom_lines_table(data), str(README))
    readme = _replace_block(readme, "claims", claims_table(data), str(README))
    readme = _replace_block(readme, "parts", parts_table(full_record(record)), str(README))
    readme = _replace_block(readme, "history", history_table(), str(README))
    from dlgn_lib import reproduce
    spread = reproduce.load_record()
    readme = _replace_block(readme, "spread", spread_table(spread), str(README))
    from dlgn_lib import bench
    readme = _replace_block(readme, "bench", bench_table(*bench.load_record()) if bench.RECORD.exists() else
                            "No benchmark record yet: run `python -m dlgn_lib.bench --series --record`.", str(README))
    series = json.loads(record.read_text()).get("series", {}) if record.exists() else {}
    out[README] = _replace_block(readme, "times", times_table(data, series=series), str(README))
    out[RECONSTRUCTION] = _replace_block(RECONSTRUCTION.read_text(), "tolerances", tolerance_table(spread),
                                         str(RECONSTRUCTION))
    from dlgn_lib import classwalk
    guide = _replace_block(COURSE_GUIDE.read_text(), "times", times_table(data, live=True), str(COURSE_GUIDE))
    guide = _replace_block(guide, "verdicts", verdicts_by_notebook_table(data), str(COURSE_GUIDE))
    out[COURSE_GUIDE] = _replace_block(guide, "classwalk", classwalk.table(classwalk.load_record()), str(COURSE_GUIDE))
    for nb_id, path in _notebooks(notebooks_dir).items():
        source = _results_cell(nbformat.read(path, as_version=4)).source
        out[path] = _replace_block(source, "results", results_block(data[nb_id], spread), str(path))
    return out


def _current(path: Path) -> str:
    if path.suffix == ".ipynb":
        return _results_cell(nbformat.read(path, as_version=4)).source
    return path.read_text()


def stale(notebooks_dir: Path = NOTEBOOKS_DIR, record: Path = FULL_RECORD) -> list[Path]:
    """Files whose generated blocks disagree with the executed notebooks and the full record."""
    return [path for path, text in generated(notebooks_dir, record).items() if _current(path) != text]


def write(notebooks_dir: Path = NOTEBOOKS_DIR, record: Path = FULL_RECORD) -> list[Path]:
    """Rewrite the generated blocks that are out of date; returns the files changed."""
    changed = []
    for path, text in generated(notebooks_dir, record).items():
        if _current(path) == text:
            continue
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            _results_cell(nb).source = text
            text = nbformat.writes(nb) + "\n"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        changed.append(path)
    return changed


#: A time as prose quotes one: a number followed by a unit of time.
_RUNTIME = re.compile(r"\b\d[\d,.]*\s?(?:s|min|minutes|seconds|h|hours)\b")
#: Times in the prose that are settings or targets of the code, not measurements.
NOT_MEASURED = (
    "a line every 30 s",                     # DLGN_HEARTBEAT_S's default
    "saying so after 3 s",                   # runs.py: a waiting process says so after this long
    "at most 10 minutes on 2 cores",         # reconstruction §6's targets
    "at most 2 minutes from a warm one",
)


def typed_runtimes(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[str]:
    """Times typed into prose by hand: every measured time in README, the course guide, the
    reconstruction document and the notebooks' markdown must sit in a generated block (runtimes
    come from the executed notebooks and ``docs/full_results.json`` only). Returns ``file: text``
    for each one found; settings and targets (``NOT_MEASURED``) are not measurements (README's
    benchmark table is generated too, from ``docs/bench.json``)."""
    texts = {}
    texts[README] = README.read_text()
    texts[COURSE_GUIDE] = COURSE_GUIDE.read_text()
    texts[RECONSTRUCTION] = RECONSTRUCTION.read_text()
    for path in sorted(Path(notebooks_dir).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        texts[path] = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    found = []
    for path, text in texts.items():
        text = re.sub(r"<!-- report:(\w+) -->.*?<!-- /report:\1 -->", "", text, flags=re.S)
        for phrase in NOT_MEASURED:
            text = text.replace(phrase, "")
        for m in _RUNTIME.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end()) % (len(text) + 1)]
            found.append(f"{locations.display_path(path)}: {m.group(0)!r} in {line.strip()[:120]!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.report", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the verdicts and runtimes of notebooks executed with PROFILE=full")
    rec.add_argument("folder", type=Path)
    rec.add_argument("--another-machine", action="store_true",
                     help="the folder is the same rule's full run on another CPU or code path: keep it beside the "
                          "record (a check whose outcome differs is machine-sensitive) instead of replacing it")
    sub.add_parser("write", help="rewrite every generated block")
    sub.add_parser("check", help="exit 1 when a generated block disagrees with the executed notebooks")
    args = parser.parse_args(argv)
    if args.command == "record":
        found = sorted(_notebooks(args.folder))
        record_full(args.folder, another_machine=args.another_machine)
        what = "as another machine's run of" if args.another_machine else "for"
        print(f"recorded {what} {len(found)} notebooks ({', '.join(found)}) in {locations.display_path(FULL_RECORD)}")
    elif args.command == "write":
        changed = write()
        print("rewritten: " + (", ".join(locations.display_path(p) for p in changed) or "nothing (all current)"))
    else:
        behind, typed = stale(), typed_runtimes()
        if behind:
            print("out of date (run `python -m dlgn_lib.report write`): "
                  + ", ".join(locations.display_path(p) for p in behind), file=sys.stderr)
        for place in typed:
            print(f"a runtime typed by hand (quote the generated runtime table instead): {place}", file=sys.stderr)
        if behind or typed:
            return 1
        print("every generated block agrees with the executed notebooks; no runtime is typed by hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
