"""The README's generated blocks (``<!-- report:NAME -->``): bottom lines, claims, parts,
history, runtimes, spread and benchmark tables, and the reconstruction document's tolerance
table; :mod:`dlgn_lib.record.report` writes them."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence


from . import full_results
from .executed import Check, Verdict

__all__ = []


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


def seconds_text(value: float | None) -> str:
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


def _verdict_cell(m: full_results.Measured, claim: str, profile: str) -> str:
    verdicts = m.quick if profile == "quick" else m.full
    if verdicts is None:
        return "not run"
    mine = [v for v in verdicts if v.claim == claim]
    return "; ".join(v.short() + _failing(v) for v in mine) or "—"


def escape(text: str) -> str:
    return text.replace("|", "\\|")


def _bottom_line_cell(data: dict[str, full_results.Measured], claim: str) -> str:
    """A claim's bottom line under full (``verdict.bottom_line``), with each notebook's part."""
    from dlgn_lib.verdict import PENDING, bottom_line, combination_rule
    words, parts = {}, []
    for n in combination_rule()["claims"][claim]:
        mine = [v for v in (data[n].full or []) if v.claim == claim]
        current = full_results.full_is_current(data[n]) and bool(mine)
        words[n] = mine[0].word if current else None
        rule = f"rules v{full_results.current_rule(n)}"
        parts.append(f"{n}: {mine[0].short()} ({rule})" if current else
                     f"{n}: no `full` run under {rule} yet" + (f" (earlier rule: {mine[0].short()})" if mine else ""))
    line = bottom_line(claim, words)
    shown = {"SUPPORTED": "SUPPORTED", "NOT SUPPORTED": "**NOT SUPPORTED**"}.get(line, f"*{line}*")
    return f"{shown}" + ("" if line != PENDING else " (a notebook has no `full` verdict under its current rule)") \
        + "<br>" + "<br>".join(parts)


def _word(word: str) -> str:
    return {"SUPPORTED": "SUPPORTED", "NOT SUPPORTED": "**NOT SUPPORTED**"}.get(word, f"*{word}*")


def claim_by_parts(claim: str, record: dict) -> tuple[str, list[str]]:
    """A claim's bottom line by parts under full (rules v4) and each part's text: its word, where
    it was decided early or is machine-sensitive, and its key number (``full_results.key_check``)."""
    from dlgn_lib import parts
    words = full_results.part_words(claim, record)
    decided = [w for w, _ in words.values() if w != "pending"]
    if len(decided) == len(words):
        word, k, n = parts.claim_word(decided)
        line = f"{_word_v4(word)} ({k} of {n})" if word == parts.HOLDS_IN_PART else _word_v4(word)
    else:
        line = f"*pending*: {len(decided)} of {len(words)} parts decided"
    sensitive = full_results.sensitive_parts(claim, record)
    shown = []
    for label, (w, m) in words.items():
        if w == "pending":
            shown.append(f"({label}) *pending*: no v4 full run of {', '.join(m)}")
            continue
        text = f"({label}) {_word_v4(w)}" + (f" (decided before {', '.join(m)} ran)" if m else "")
        if label in sensitive:
            text += " (machine-sensitive: the CPUs' full records differ)"
        if (c := full_results.key_check(claim, label, record)) is not None:
            interval = f" [{c.low}, {c.high}]" if c.low is not None else ""
            text += f": {c.name} {c.value}{interval} ({c.op} {c.threshold})"
        shown.append(text)
    return line, shown


def _claims_text() -> dict[str, str]:
    return {claim: text for claim, text, _ in full_results.CLAIMS}


#: Order in which a claim's parts speak for it in the short table: the first that does not hold.
_LOUDEST = {"DOES NOT HOLD": 0, "INCONCLUSIVE": 1, "pending": 2, "HOLDS": 3}


def short_table(data: dict[str, full_results.Measured], record: dict, notebooks: str = "notebooks/") -> str:
    """The table that opens README and the book: per claim, its bottom line at paper scale by parts,
    one key number with its 90 % interval and bar (the part that speaks loudest against the claim:
    one that does not hold, else an inconclusive one, else the check nearest its bar) and the
    notebooks. ``notebooks``: the link prefix of the notebooks."""
    from dlgn_lib import parts
    rows = ["| claim | bottom line (`full`) | key number, 90 % interval (bar) | notebooks |", "|---|---|---|---|"]
    text = _claims_text()
    for claim, _, ids in full_results.CLAIMS:
        if not claim.startswith("C"):
            continue
        line, _ = claim_by_parts(claim, record)
        words = full_results.part_words(claim, record)
        keys = [(label, full_results.key_check(claim, label, record)) for label in parts.registered_parts(claim)]
        keys = [(label, c) for label, c in keys if c is not None]
        shown = "—"
        if keys:
            label, c = min(keys, key=lambda k: (_LOUDEST.get(words[k[0]][0], 2), full_results.margin(k[1])))
            interval = f" [{c.low}, {c.high}]" if c.low is not None else ""
            shown = f"({label}) {c.name}: {c.value}{interval} ({c.op} {c.threshold})"
        links = ", ".join(f"[{n}]({notebooks}{data[n].name}.ipynb)" for n in ids)
        rows.append(f"| {claim}: {escape(text[claim])} | {escape(line)} | {escape(shown)} | {links} |")
    return "\n".join(rows)


def bottom_lines_table(data: dict[str, full_results.Measured], record: dict, notebooks: str = "notebooks/") -> str:
    """The record's table of bottom lines by parts: per claim, its bottom line at paper scale by parts
    (rules v4: HOLDS, HOLDS IN PART k of n, DOES NOT HOLD, INCONCLUSIVE; pending while a notebook
    deciding a part has no v4 full run), each part with its word and key number (``key_check``),
    the rules v3 bottom line beside it (one AND over every check), the quick result and the
    notebooks (``notebooks``: their link prefix)."""
    from dlgn_lib.verdict import PENDING, bottom_line, combination_rule
    rows = ["| claim | at paper scale (`full`), by parts | its parts: word and key number | rules v3 (`full`, one AND "
            "over every check) | `quick` | notebooks |", "|---|---|---|---|---|---|"]
    prefix = notebooks
    for claim, _, ids in full_results.CLAIMS:
        if not claim.startswith("C"):
            continue
        line, shown = claim_by_parts(claim, record)
        v3 = {}
        for n in combination_rule()["claims"][claim]:
            mine = [v for v in (data[n].full or []) if v.claim == claim]
            v3[n] = mine[0].word if mine and full_results.full_is_current(data[n]) else None
        old = bottom_line(claim, v3)
        old = _word(old) if old != PENDING else "*pending*"
        quick_words = {n: v.word for n in ids for v in (data[n].quick or []) if v.claim == claim}
        quick = (_word(next(iter(quick_words.values()))) if len(set(quick_words.values())) == 1
                 else ", ".join(f"{n} {_word(w)}" for n, w in quick_words.items())) if quick_words else "—"
        links = ", ".join(f"[{n}]({prefix}{data[n].name}.ipynb)" for n in ids)
        rows.append(f"| {claim}: {escape(_claims_text()[claim])} | {escape(line)} | "
                    f"{escape('<br>'.join(shown))} | {escape(old)} | {escape(quick)} | {links} |")
    return "\n".join(rows)


def _word_v4(word: str) -> str:
    return {"HOLDS": "HOLDS", "DOES NOT HOLD": "**DOES NOT HOLD**"}.get(word, f"*{word}*")


def claims_table(data: dict[str, full_results.Measured], notebooks: str = "notebooks/") -> str:
    """One line per claim: its bottom line under full (the registered combination of its notebooks,
    reconstruction §8.1), its quick results, and where it is shown (``notebooks``: the link prefix)."""
    rows = ["| id | claim (paraphrased from the abstract) | bottom line as rules v3 read it (`full`, one AND) | `quick` | "
            "shown in |",
            "|---|---|---|---|---|"]
    prefix = notebooks
    for claim, text, ids in full_results.CLAIMS:
        links = ", ".join(f"[{data[n].name.replace('_', ' ', 1)}]({prefix}{data[n].name}.ipynb)" for n in ids)
        quick = "<br>".join(f"{n}: {_verdict_cell(data[n], claim, 'quick')}" for n in ids
                            if _verdict_cell(data[n], claim, "quick") != "—") or "— (no verdict)"
        bottom = _bottom_line_cell(data, claim) if claim.startswith("C") else "— (no verdict)"
        rows.append(f"| {claim} | {escape(text)} | {escape(bottom)} | {escape(quick)} | {links} |")
    return "\n".join(rows)


def history_table() -> str:
    """Every earlier verdict (``verdict_history.json``): claim, notebook, the setting it was measured
    under (rule version, convention, profile) and why it was superseded."""
    from dlgn_lib.verdict import HISTORY_FILE
    rows = ["| claim | notebook | earlier verdict | setting | why it was superseded |", "|---|---|---|---|---|"]
    for nb, entries in json.loads(HISTORY_FILE.read_text())["notebooks"].items():
        for e in entries:
            claim = e["verdict"].split(" ", 1)[0]
            rows.append(f"| {claim} | {nb} | {escape(e['verdict'])} | {escape(e['setting'])} | {escape(e['reason'])} |")
    return "\n".join(rows)


def earlier_label(entry: dict) -> str:
    """An earlier verdict in a few words: its rule, convention and profile, then its word and count,
    e.g. ``C6 v1, "he", full: SUPPORTED (2 of 2)``."""
    verdict, setting = entry["verdict"], entry["setting"]
    rule = re.search(r"rule v(\d+)", setting)
    convention = re.search(r'convention "(\w+)"', setting)
    profile = re.search(r"\[(quick|full)\]", verdict)
    outcome = re.search(r"\]: ([A-Z ]+) \((\d+ of \d+)", verdict)
    return (f"{verdict.split(' ', 1)[0]} v{rule[1] if rule else 1}, \"{convention[1] if convention else 'group'}\", "
            f"{profile[1] if profile else '?'}: {outcome[1]} ({outcome[2]})" if outcome else verdict)


def series_line(series: dict, ids: Sequence[str]) -> str:
    """What the record says of the whole series from an empty run cache, per CPU (a time on one CPU
    says little of another): one cold run of every notebook, or cold runs of parts of it (each from
    its own empty cache) added up, and what they leave out; parts that overlap are not added up."""
    cold = {key: run for key, run in series.items()
            if run.get("profile") == "full" and run.get("runs_cache_empty_at_start")
            and all(n.get("status") == "ok" for n in run.get("notebooks", {}).values())}
    how = "`python -m dlgn_lib.record.series run --profile full`, its `series.json`"
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


def times_table(data: dict[str, full_results.Measured], live: bool = False, series: dict | None = None) -> str:
    """Per notebook, its claims and times under both profiles: with how its ``full`` run was made
    (the record's page), or, ``live``, with what a reader can move instead (the course guide)."""
    claims = {n: ", ".join(c for c, _, nbs in full_results.CLAIMS if n in nbs and c != "—") or "—" for n in data}
    last = "live elements" if live else "how `full` was run"
    rows = [f"| notebook | claims | `quick`, warm cache | `full` | {last} |", "|---|---|---|---|---|"]
    for n, m in data.items():
        rows.append(f"| {m.name.replace('_', ' ', 1)} | {claims[n]} | {seconds_text(m.quick_seconds)} | "
                    f"{seconds_text(m.full_seconds)} | {LIVE.get(n, '—') if live else escape(m.full_note) or '—'} |")
    total = sum(m.full_seconds or 0 for m in data.values())
    cold = sum(m.full_cold_seconds or 0 for m in data.values())
    rows.append(f"\nAll {len(data)} notebooks: `quick` {sum(m.quick_seconds for m in data.values()):,.0f} s with a "
                f"warm run cache (the committed outputs' cell timings); `full` {total:,.0f} s as recorded, "
                f"{cold:,.0f} s with every notebook's runs trained from an empty cache (the record's "
                f"`cold_seconds` where a notebook read runs trained beforehand) (`docs/full_results.json`: "
                f"{full_results.FULL_SETTING}" + ("; how each was run: docs/record.md)." if live else
                                                   "; the last column says what ran beside each)."))
    if series is not None:
        rows.append("\n" + series_line(series, list(data)))
    return "\n".join(rows)


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
        fragile = "; ".join(escape(name) for name in s["fragile_checks"]) or "none"
        rows.append(f"| {nb_id} | {s['numbers']} | {s['numbers_that_moved']} | {s['largest_relative_spread']:.3g} | "
                    f"{fragile} | {max(rms, default=0):.2f} | "
                    f"{'; '.join(f'{k} ({escape(v)})' for k, v in entry.get('failed', {}).items()) or 'none'} |")
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
    from dlgn_lib.record import reproduce
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
    from dlgn_lib.record import bench
    several = len(runs) > 1
    lines = ["| benchmark | median | [min – max] | target | met |" + (" run |" if several else ""),
             "|---|---|---|---|---|" + ("---|" if several else "")]
    for row, run in rows:
        cells = [escape(row.name), *(escape(c) for c in bench.row_cells(row))]
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


def layers_table() -> str:
    """README's "Where things live" table: each layer's folders, lines of code and public names
    (``python -m dlgn_lib.record.layers`` prints the same counts)."""
    from . import layers
    counts, public = layers.line_counts(), layers.public_counts()
    where = {"science": "`dlgn_lib/` (models, data/, train, runs, paths, kernels, circle, clusters, saliency, nodes, "
                        "fidelity, intervals, verdict, parts, protocol, config, …)",
             "presentation": "`dlgn_lib/plots/`, `dlgn_lib/studies/`, `dlgn_lib/widgets.py`",
             "record tools": "`dlgn_lib/record/` (series, report and its blocks, reproduce, bench, bundle, classwalk, "
                             "solutions, student, slides, audit, layers, dask_cluster)",
             "root": "`dlgn_lib/__init__.py` (`dl.setup`, the modules on first use)"}
    rows = ["| layer (bottom to top) | where | lines | public names |", "|---|---|---|---|"]
    for layer in (*layers.LAYERS, "root"):
        rows.append(f"| {layer} | {where[layer]} | {counts[layer]:,} | {public[layer]} |")
    return "\n".join(rows)

