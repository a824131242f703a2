"""Each notebook's generated cells: "What this notebook finds" (``finds``) near its top and "## Results"
(``results``: every verdict check under ``quick`` and ``full``, and the runtimes); :mod:`dlgn_lib.record.report`
writes them."""
from __future__ import annotations

from . import full_results, readme_blocks

__all__ = []


def results_block(m: full_results.Measured, spread: dict | None = None, record: dict | None = None) -> str:
    """A notebook's results block: per profile its runtime, the bottom line by parts of the claims it decides
    (``full``), and each verdict's checks (``quick``: marked fragile where the spread record's code paths differ)."""
    outcomes = (spread or {}).get("notebooks", {}).get(m.notebook, {}).get("checks", {})
    lines = []
    for profile, verdicts in (("quick", m.quick), ("full", m.full)):
        if verdicts is None:
            lines.append(f"**`{profile}`**: not recorded.")
            continue
        seconds = m.quick_seconds if profile == "quick" else m.full_seconds
        how = (" with a warm run cache" if profile == "quick"
               else f" ({full_results.FULL_SETTING}{'; ' + m.full_note if m.full_note else ''})")
        lines.append(f"**`{profile}`** ran in {readme_blocks.seconds_text(seconds)}{how}.")
        if profile == "full" and not full_results.full_is_current(m):
            lines[-1] += (f" It ran under rules v{m.full_rule}" if m.full_rule is not None else
                          " It ran under the rule before rules v3") + \
                f"; rules v{full_results.current_rule(m.notebook)} has no `full` run yet."
        elif profile == "full" and record is not None:
            for claim, line, shown in _claims_decided_in(m.notebook, record):
                lines += ["", f"{claim} by parts (rules v4, from every notebook deciding it): {line}", "",
                          *(f"- {text}" + ("" if here else " (decided elsewhere)") for text, here in shown)]
        for v in verdicts:
            seeds = any(c.low is not None for c in v.checks)   # rules v3: checks over seeds with intervals
            lines += ["", f"{v.claim}: {v.short()}" if profile == "quick" else
                      f"{v.claim}, its checks here (read as rules v3 did, one AND: {v.short()})", ""]
            lines += (["| check | value | 90% interval | threshold | over | |", "|---|---|---|---|---|---|"] if seeds
                      else ["| check | value | threshold | |", "|---|---|---|---|"])
            lines += [f"| {readme_blocks.escape(c.name)} | {c.value} | "
                      + (f"{c.low} to {c.high} | " if seeds and c.low is not None else "— | " if seeds else "")
                      + f"{c.op} {c.threshold} | " + (f"{readme_blocks.escape(c.over or '—')} | " if seeds else "")
                      + f"{c.outcome if c.outcome != 'fail' else 'FAIL'}"
                      f"{_fragile(outcomes.get(c.name, {})) if profile == 'quick' else ''} |" for c in v.checks]
        if not verdicts:
            lines.append("No verdict in this notebook.")
        lines.append("")
    return "\n".join(lines).rstrip()


def _claims_decided_in(notebook: str, record: dict):
    """Each claim with a part ``notebook`` decides: (claim, its bottom line by parts, [(part text, decided here)])."""
    from dlgn_lib import parts
    for claim in parts.registry()["claims"]:
        labels = [label for label, part in parts.registered_parts(claim).items()
                  if any(r["notebook"] == notebook for r in part["checks"])]
        if labels:
            line, shown = readme_blocks.claim_by_parts(claim, record)
            yield claim, line, [(text, text[1:text.index(")")] in labels) for text in shown]


def finds_block(m: full_results.Measured, record: dict) -> str:
    """A notebook's "What this notebook finds" block: the bottom line at paper scale of each claim whose
    parts it decides, with those parts, and what its committed ``quick`` outputs are."""
    from dlgn_lib.verdict import WITHOUT_VERDICT
    if m.notebook in WITHOUT_VERDICT:
        return ("This notebook judges no claim: it shows, tabulates or maps. The bottom line of every claim is "
                "in [the record](../docs/record.md).")
    lines = []
    for claim, line, shown in _claims_decided_in(m.notebook, record):
        here = [text for text, mine in shown if mine]
        elsewhere = [text[1:text.index(")")] for text, mine in shown if not mine]
        lines += [f"**{claim}** at paper scale (`full`): {line}. "
                  + ("Decided here:" if not elsewhere else f"Parts decided here ({len(here)} of {len(shown)}):"),
                  "", *(f"- {text}" for text in here), ""]
        if elsewhere:
            lines += [f"Part{'s' * (len(elsewhere) > 1)} {', '.join(f'({e})' for e in elsewhere)} "
                      f"{'are' if len(elsewhere) > 1 else 'is'} decided in other notebooks.", ""]
    quick = "; ".join(f"{v.claim} {v.short()}" for v in (m.quick or []))
    lines.append("Each number comes with its 90 % interval over seeds in square brackets (none for an exact worst "
                 "case) and the bar it must clear in parentheses. The outputs below are the `quick` profile"
                 + (f" ({quick})" if quick else "") + "; every check under both profiles is in the Results "
                 "section at the end, and how each run was made in [the record](../docs/record.md).")
    return "\n".join(lines)


def tagged_cell(nb, tag: str):
    """The notebook's cell tagged ``tag`` (``finds`` or ``results``)."""
    cells = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError(f"no cell tagged {tag!r}")
    return cells[0]


def _fragile(outcomes: dict) -> str:
    """" (fragile: …)" when a check's pass/fail differs across the CPU code paths of the spread record."""
    from dlgn_lib.verdict import outcome_name
    named = [outcome_name(v) for k, v in outcomes.items() if k != "committed"]   # code paths only
    if len(set(named)) < 2:
        return ""
    return f" (fragile: passes under {named.count('pass')} of {len(named)} CPU code paths)"
