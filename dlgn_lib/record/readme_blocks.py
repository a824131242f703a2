"""The generated tables of README, the record's page, the guide and the reconstruction document
(``<!-- report:NAME -->`` blocks); :mod:`dlgn_lib.record.report` writes them."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

from . import full_results

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


def escape(text: str) -> str:
    return text.replace("|", "\\|")


def _word(word: str) -> str:
    """A verdict's or part's word as the tables show it: bold when it goes against the claim."""
    return word if word in ("SUPPORTED", "HOLDS") else f"**{word}**" if word in ("NOT SUPPORTED", "DOES NOT HOLD") \
        else f"*{word}*"


def _interval(c, lead: str = " ") -> str:
    return f"{lead}[{c.low}, {c.high}]" if c.low is not None else ""


def _quick_cell(m: full_results.Measured, claim: str) -> str:
    """A notebook's quick verdicts of ``claim`` with the checks that did not pass ("— fails: …")."""
    if m.quick is None:
        return "not run"
    cells = []
    for v in (v for v in m.quick if v.claim == claim):
        cell = v.short()
        for outcome, label in (("fail", "fails"), ("inconclusive", "inconclusive")):
            if found := [c for c in v.checks if c.outcome == outcome]:
                cell += f" — {label}: " + "; ".join(f"{c.name} = {c.value}{_interval(c, ', 90% ')} "
                                                   f"(needs {c.op} {c.threshold})" for c in found)
        cells.append(cell)
    return "; ".join(cells) or "—"


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
    return _word(line) + (" (a notebook has no `full` verdict under its current rule)" if line == PENDING else "") \
        + "<br>" + "<br>".join(parts)


def claim_by_parts(claim: str, record: dict) -> tuple[str, list[str]]:
    """A claim's bottom line by parts under full (rules v4) and each part's text with its key number."""
    from dlgn_lib import parts
    words = full_results.part_words(claim, record)
    decided = [w for w, _ in words.values() if w != "pending"]
    if len(decided) == len(words):
        word, k, n = parts.claim_word(decided)
        line = f"{_word(word)} ({k} of {n})" if word == parts.HOLDS_IN_PART else _word(word)
    else:
        line = f"*pending*: {len(decided)} of {len(words)} parts decided"
    sensitive = full_results.sensitive_parts(claim, record)
    shown = []
    for label, (w, m) in words.items():
        if w == "pending":
            shown.append(f"({label}) *pending*: no v4 full run of {', '.join(m)}")
            continue
        text = f"({label}) {_word(w)}" + (f" (decided before {', '.join(m)} ran)" if m else "")
        if label in sensitive:
            text += " (machine-sensitive: the CPUs' full records differ)"
        if (c := full_results.key_check(claim, label, record)) is not None:
            text += f": {c.name} {c.value}{_interval(c)} ({c.op} {c.threshold})"
        shown.append(text)
    return line, shown


#: Order in which a claim's parts speak for it in the short table: the first that does not hold.
_LOUDEST = {"DOES NOT HOLD": 0, "INCONCLUSIVE": 1, "pending": 2, "HOLDS": 3}


def short_table(data: dict[str, full_results.Measured], record: dict) -> str:
    """README's opening table: per claim, its bottom line by parts and the key number that speaks loudest against it."""
    from dlgn_lib import parts
    rows = ["| claim | bottom line (`full`) | key number, 90 % interval (bar) | notebooks |", "|---|---|---|---|"]
    for claim, text, ids in (c for c in full_results.CLAIMS if c[0].startswith("C")):
        words = full_results.part_words(claim, record)
        keys = [(label, c) for label in parts.registered_parts(claim)
                if (c := full_results.key_check(claim, label, record)) is not None]
        label, c = min(keys, key=lambda k: (_LOUDEST.get(words[k[0]][0], 2), full_results.margin(k[1])),
                       default=(None, None))
        shown = f"({label}) {c.name}: {c.value}{_interval(c)} ({c.op} {c.threshold})" if c else "—"
        links = ", ".join(f"[{n}](notebooks/{data[n].name}.ipynb)" for n in ids)
        line = claim_by_parts(claim, record)[0]
        rows.append(f"| {claim}: {escape(text)} | {escape(line)} | {escape(shown)} | {links} |")
    return "\n".join(rows)


def bottom_lines_table(data: dict[str, full_results.Measured], record: dict, notebooks: str = "notebooks/") -> str:
    """The record's table: per claim, its bottom line and parts (rules v4), its rules v3 line and quick result."""
    from dlgn_lib.verdict import bottom_line, combination_rule
    rows = ["| claim | at paper scale (`full`), by parts | its parts: word and key number | rules v3 (`full`, one AND "
            "over every check) | `quick` | notebooks |", "|---|---|---|---|---|---|"]
    for claim, text, ids in (c for c in full_results.CLAIMS if c[0].startswith("C")):
        line, shown = claim_by_parts(claim, record)
        old = _word(bottom_line(claim, {n: next((v.word for v in data[n].full if v.claim == claim), None)
                                        if full_results.full_is_current(data[n]) else None
                                        for n in combination_rule()["claims"][claim]}))
        quick_words = {n: v.word for n in ids for v in (data[n].quick or []) if v.claim == claim}
        quick = (_word(next(iter(quick_words.values()))) if len(set(quick_words.values())) == 1
                 else ", ".join(f"{n} {_word(w)}" for n, w in quick_words.items())) if quick_words else "—"
        links = ", ".join(f"[{n}]({notebooks}{data[n].name}.ipynb)" for n in ids)
        rows.append(f"| {claim}: {escape(text)} | {escape(line)} | "
                    f"{escape('<br>'.join(shown))} | {escape(old)} | {escape(quick)} | {links} |")
    return "\n".join(rows)


def claims_table(data: dict[str, full_results.Measured], notebooks: str = "notebooks/") -> str:
    """One line per claim: its rules v3 bottom line under full, its quick results, and where it is shown."""
    rows = ["| id | claim (paraphrased from the abstract) | bottom line as rules v3 read it (`full`, one AND) | "
            "`quick` | shown in |", "|---|---|---|---|---|"]
    for claim, text, ids in full_results.CLAIMS:
        links = ", ".join(f"[{data[n].name.replace('_', ' ', 1)}]({notebooks}{data[n].name}.ipynb)" for n in ids)
        quick = "<br>".join(f"{n}: {cell}" for n in ids if (cell := _quick_cell(data[n], claim)) != "—") \
            or "— (no verdict)"
        bottom = _bottom_line_cell(data, claim) if claim.startswith("C") else "— (no verdict)"
        rows.append(f"| {claim} | {escape(text)} | {escape(bottom)} | {escape(quick)} | {links} |")
    return "\n".join(rows)


def history_table() -> str:
    """Every earlier verdict (``verdict_history.json``): its setting and why it was superseded."""
    from dlgn_lib.verdict import HISTORY_FILE
    rows = ["| claim | notebook | earlier verdict | setting | why it was superseded |", "|---|---|---|---|---|"]
    for nb, entries in json.loads(HISTORY_FILE.read_text())["notebooks"].items():
        rows += [f"| {e['verdict'].split(' ', 1)[0]} | {nb} | {escape(e['verdict'])} | {escape(e['setting'])} | "
                 f"{escape(e['reason'])} |" for e in entries]
    return "\n".join(rows)


def earlier_label(entry: dict) -> str:
    """An earlier verdict in a few words, e.g. ``C6 v1, "he", full: SUPPORTED (2 of 2)``."""
    verdict, setting = entry["verdict"], entry["setting"]
    rule = re.search(r"rule v(\d+)", setting)
    convention = re.search(r'convention "(\w+)"', setting)
    profile = re.search(r"\[(quick|full)\]", verdict)
    outcome = re.search(r"\]: ([A-Z ]+) \((\d+ of \d+)", verdict)
    return (f"{verdict.split(' ', 1)[0]} v{rule[1] if rule else 1}, \"{convention[1] if convention else 'group'}\", "
            f"{profile[1] if profile else '?'}: {outcome[1]} ({outcome[2]})" if outcome else verdict)


def series_line(series: dict, ids: Sequence[str]) -> str:
    """The whole series from an empty run cache, per CPU: one cold run of it, or disjoint cold parts added up."""
    cold = {key: run for key, run in series.items()
            if run.get("profile") == "full" and run.get("runs_cache_empty_at_start")
            and all(n.get("status") == "ok" for n in run.get("notebooks", {}).values())}
    how = "The whole series from an empty run cache (`python -m dlgn_lib.record.series run --profile full`, its " \
        "`series.json`): "
    if not cold:
        return how + "not measured yet."
    by_cpu: dict[str, dict] = {}
    for key in sorted(cold, key=lambda k: cold[k].get("started", "")):
        by_cpu.setdefault(cold[key].get("cpu", "a CPU not recorded"), {})[key] = cold[key]
    return how + " ".join(_series_on_one_cpu(cpu, runs, ids) for cpu, runs in by_cpu.items())


def _series_on_one_cpu(cpu: str, runs: dict, ids: Sequence[str]) -> str:
    def part(key: str, run: dict) -> str:
        return (f"{key} in {run['seconds']:,.0f} s ({run['seconds'] / 3600:.2f} h; {run['workers']} workers, "
                f"{run.get('numerics', '?')} code path, code {run.get('code_version', '?')}, "
                f"{run.get('started', '?')[:10]})")

    if whole := [key for key in runs if set(key.split()) >= set(ids)]:
        key = min(whole, key=lambda k: runs[k]["seconds"])
        return f"on {cpu}, all {len(ids)} notebooks, " + part(key, runs[key]) + "."
    chosen, covered = [], set()
    for key in runs:   # disjoint parts, earliest first
        if not covered & set(key.split()):
            chosen.append(key)
            covered |= set(key.split())
    text = f"on {cpu}, in parts, each from its own empty cache: " + "; ".join(part(k, runs[k]) for k in chosen)
    if missing := [i for i in ids if i not in covered]:
        return text + f"; not measured yet: {' '.join(missing)}."
    total = sum(runs[k]["seconds"] for k in chosen)
    return text + f"; the parts together: {total:,.0f} s ({total / 3600:.2f} h)."


def times_table(data: dict[str, full_results.Measured], live: bool = False, series: dict | None = None) -> str:
    """Per notebook, its claims, times and how ``full`` ran (or, ``live``, what a reader can move)."""
    claims = {n: ", ".join(c for c, _, nbs in full_results.CLAIMS if n in nbs and c != "—") or "—" for n in data}
    last = "live elements" if live else "how `full` was run"
    rows = [f"| notebook | claims | `quick`, warm cache | `full` | {last} |", "|---|---|---|---|---|"]
    rows += [f"| {m.name.replace('_', ' ', 1)} | {claims[n]} | {seconds_text(m.quick_seconds)} | "
             f"{seconds_text(m.full_seconds)} | {LIVE.get(n, '—') if live else escape(m.full_note) or '—'} |"
             for n, m in data.items()]
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


def protocol_table(full: dict, notebook: str = "09", table: str = "09_odt") -> str:
    """The group's protocol, published beside reproduced, from ``notebook``'s recorded ``full`` run
    (its ``tables``, read back from the CSV the run wrote; ``full_results.written_comparisons``)."""
    from dlgn_lib.models import display_name
    entry = full.get("notebooks", {}).get(notebook, {})
    rows = entry.get("tables", {}).get(table)
    if not rows:
        return (f"{notebook}'s recorded `full` run (code {entry.get('code_version', 'not recorded')}) predates the record "
                "of its comparison: `python -m dlgn_lib.record.report record FOLDER` of its next run shows it here.")

    def number(value, form: str) -> str:
        return "—" if value is None else format(value, form)

    def reproduced(r: dict) -> str:
        return f"{r['mean']:.1f}" + ("" if r["std"] is None else f" ± {r['std']:.1f}")

    out = ["| data | model | published | reproduced | difference | within 2 std | seeds |", "|---|---|---|---|---|---|---|"]
    out += [f"| {r['data']} | {display_name(r['model'])} | {number(r['published'], '.1f')} | {reproduced(r)} | "
            f"{number(r['difference'], '+.1f')} | {r['within 2 std']} | {r['n']} |" for r in rows]
    machine = entry.get("machine", {})
    out.append(f"\nTest accuracy (%), mean ± std over seeds, from {notebook}'s recorded `full` run: code "
               f"{entry.get('code_version', '?')}, {machine.get('cpu', '?')} (family/model/stepping "
               f"{machine.get('cpu_family_model_stepping', '?')}), {entry.get('code_path', '?')}.")
    return "\n".join(out)


def spread_table(spread: dict) -> str:
    """The record's reproducibility table (``docs/spread.json``): per notebook, how its numbers moved."""
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
    """The guide's benchmark table: one line per row, then each run's command, machine and reference numbers."""
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
    """README's table of layers: each layer's folders, lines of code and public names."""
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

