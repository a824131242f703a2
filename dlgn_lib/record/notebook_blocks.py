"""Each notebook's generated "## Results" cell (``results``): every verdict check with its value
under ``quick`` and ``full``, fragile checks, and the runtimes; :mod:`dlgn_lib.record.report` writes it."""
from __future__ import annotations

from . import full_results, readme_blocks

__all__ = []


def results_block(m: full_results.Measured, spread: dict | None = None, record: dict | None = None) -> str:
    """A notebook's results block; a quick check whose pass/fail changed across the CPU code paths of
    the spread record is marked fragile, with how many code paths passed it. Under ``full``, each
    claim whose parts this notebook decides opens with its bottom line by parts (rules v4, from every
    notebook deciding it in ``record``); the checks follow, headed by their rules v3 reading."""
    outcomes = (spread or {}).get("notebooks", {}).get(m.notebook, {}).get("checks", {})
    lines = []
    for profile, verdicts in (("quick", m.quick), ("full", m.full)):
        if verdicts is None:
            lines.append(f"**`{profile}`**: not recorded.")
            continue
        seconds = m.quick_seconds if profile == "quick" else m.full_seconds
        how = (" with a warm run cache" if profile == "quick"
               else f" ({full_results.FULL_SETTING}; {m.full_note})" if m.full_note else f" ({full_results.FULL_SETTING})")
        lines.append(f"**`{profile}`** ran in {readme_blocks.seconds_text(seconds)}{how}.")
        if profile == "full" and not full_results.full_is_current(m):
            lines[-1] += (f" It ran under rules v{m.full_rule}" if m.full_rule is not None else
                          " It ran under the rule before rules v3") + \
                f"; rules v{full_results.current_rule(m.notebook)} has no `full` run yet."
        if profile == "full" and record is not None and full_results.full_is_current(m):
            lines += _by_parts(m.notebook, record)
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


def _by_parts(notebook: str, record: dict) -> list[str]:
    """The bottom line by parts of each claim whose parts ``notebook`` decides."""
    from dlgn_lib import parts
    lines = []
    for claim in parts.registry()["claims"]:
        labels = [label for label, part in parts.registered_parts(claim).items()
                  if any(r["notebook"] == notebook for r in part["checks"])]
        if not labels:
            continue
        line, shown = readme_blocks.claim_by_parts(claim, record)
        lines += ["", f"{claim} by parts (rules v4, from every notebook deciding it): {line}", ""]
        lines += [f"- {text}" + ("" if text[1:text.index(")")] in labels else " (decided elsewhere)") for text in shown]
    return lines


def finds_block(m: full_results.Measured, record: dict) -> str:
    """A notebook's "What this notebook finds" block, near its top: each claim whose parts it
    decides, with the claim's bottom line at paper scale and the parts decided here (word and key
    number), from the full record; and what its committed ``quick`` outputs are."""
    from dlgn_lib import parts
    from dlgn_lib.verdict import WITHOUT_VERDICT
    if m.notebook in WITHOUT_VERDICT:
        return ("This notebook judges no claim: it shows, tabulates or maps. The bottom line of every claim is "
                "in [the record](../docs/record.md).")
    lines = []
    for claim in parts.registry()["claims"]:
        labels = [label for label, part in parts.registered_parts(claim).items()
                  if any(r["notebook"] == m.notebook for r in part["checks"])]
        if not labels:
            continue
        line, shown = readme_blocks.claim_by_parts(claim, record)
        here = [text for text in shown if text[1:text.index(")")] in labels]
        elsewhere = [text[1:text.index(")")] for text in shown if text[1:text.index(")")] not in labels]
        lines += [f"**{claim}** at paper scale (`full`): {line}. "
                  + ("Decided here:" if len(here) == len(shown) else f"Parts decided here ({len(here)} of {len(shown)}):"),
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


def finds_cell(nb):
    """The cell tagged ``finds`` ("What this notebook finds"), right after the title."""
    cells = [c for c in nb.cells if "finds" in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError("no cell tagged 'finds'")
    return cells[0]


def _fragile(outcomes: dict) -> str:
    outcomes = {k: v for k, v in outcomes.items() if k != "committed"}   # code paths only
    from dlgn_lib.verdict import outcome_name
    named = [outcome_name(v) for v in outcomes.values()]
    if len(set(named)) < 2:
        return ""
    return f" (fragile: passes under {named.count('pass')} of {len(named)} CPU code paths)"


def results_cell(nb):
    cells = [c for c in nb.cells if "results" in c.metadata.get("tags", [])]
    if not cells:
        raise ValueError("no cell tagged 'results'")
    return cells[0]
