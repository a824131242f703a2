"""The course guide's generated blocks (``teaching/course_guide.md``): the verdicts by notebook
(its timing table is README's, with what a reader can move; its class-walk table is
``dlgn_lib.record.classwalk``'s); :mod:`dlgn_lib.record.report` writes them."""
from __future__ import annotations

import json

from . import full_results, readme_blocks

__all__ = []


def verdicts_by_notebook_table(data: dict[str, full_results.Measured]) -> str:
    """The course guide's table: per notebook with a verdict, its claims' verdicts now under both
    profiles (the executed notebooks and the full record) and its earlier verdicts (rule,
    convention, profile), oldest first, from ``verdict_history.json``."""
    from dlgn_lib.verdict import HISTORY_FILE
    history = json.loads(HISTORY_FILE.read_text())["notebooks"]
    rows = ["| nb | `quick` now | `full` now | earlier verdicts (rule, convention, profile) |",
            "|---|---|---|---|"]
    for n, m in data.items():
        claims = [c for c, _, nbs in full_results.CLAIMS if n in nbs and c.startswith("C")]
        if not [v for v in (m.quick or []) + (m.full or []) if v.claim in claims] and not history.get(n):
            continue                                              # a map or table, no verdict
        def now(profile: str) -> str:
            verdicts = m.quick if profile == "quick" else m.full
            if verdicts is None:
                return "not run"
            if profile == "full" and not full_results.full_is_current(m):
                return f"no run under rules v{full_results.current_rule(n)} yet"
            cells = "<br>".join(f"{v.claim}: {v.short()}" for v in verdicts if v.claim in claims)
            return cells + ("" if profile == "quick" else f" (rules v{full_results.current_rule(n)})")
        earlier = "<br>".join(readme_blocks.earlier_label(e) for e in history.get(n, [])) or "—"
        rows.append(f"| {n} | {readme_blocks.escape(now('quick'))} | {readme_blocks.escape(now('full'))} | {readme_blocks.escape(earlier)} |")
    return "\n".join(rows)
