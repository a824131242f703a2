"""The course guide's verdicts by notebook (``teaching/course_guide.md``; its timing table is
:mod:`dlgn_lib.record.readme_blocks`'s); :mod:`dlgn_lib.record.report` writes it."""
from __future__ import annotations

import json

from . import full_results, readme_blocks

__all__ = []


def verdicts_by_notebook_table(data: dict[str, full_results.Measured]) -> str:
    """Per notebook with a verdict: its claims' verdicts now under both profiles and its earlier verdicts."""
    from dlgn_lib.verdict import HISTORY_FILE
    history = json.loads(HISTORY_FILE.read_text())["notebooks"]
    rows = ["| nb | `quick` now | `full` now | earlier verdicts (rule, convention, profile) |",
            "|---|---|---|---|"]
    for n, m in data.items():
        claims = [c for c, _, nbs in full_results.CLAIMS if n in nbs and c.startswith("C")]
        if not [v for v in (m.quick or []) + (m.full or []) if v.claim in claims] and not history.get(n):
            continue                                              # a map or table, no verdict
        rule = full_results.current_rule(n)
        quick, full = ("not run" if verdicts is None else "<br>".join(f"{v.claim}: {v.short()}" for v in verdicts
                                                                     if v.claim in claims)
                       for verdicts in (m.quick, m.full))
        if m.full is not None:
            full = f"{full} (rules v{rule})" if full_results.full_is_current(m) else f"no run under rules v{rule} yet"
        earlier = "<br>".join(readme_blocks.earlier_label(e) for e in history.get(n, [])) or "—"
        rows.append(f"| {n} | {readme_blocks.escape(quick)} | {readme_blocks.escape(full)} | "
                    f"{readme_blocks.escape(earlier)} |")
    return "\n".join(rows)
