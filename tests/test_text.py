"""What the notebooks print fits the book's column (dlgn_lib.text): wrapping, reading wrapped lines
back, tables in blocks, and every committed notebook's printed text (issue 47, item 4)."""
from __future__ import annotations

import json
import random
import re

import pandas as pd
import pytest

from dlgn_lib import locations, text
from dlgn_lib.record import executed

W = text.TEXT_WIDTH


def _words(s: str) -> list[str]:
    return s.split()


def test_wrapped_lines_fit_and_read_back_as_the_line_they_came_from():
    rng = random.Random(3)
    vocabulary = ["a", "path", "0.125,", "90%", "[0.1,", "0.2]", "(threshold:", ">=", "0.05;", "t ∪", "bootstrap-t)",
                  "DLGN − DLN", "x" * 30]
    heads = re.compile(r"^( *\[pass\] |VERDICT )")
    for _ in range(300):
        indent = rng.choice(["", "  "])
        head = "[pass] " if indent else "VERDICT "
        line = head + " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 40)))
        wrapped = text.wrap(line, indent).split("\n")
        assert all(len(x) <= W for x in wrapped), wrapped
        assert all(x.startswith(indent + text.CONTINUATION) and x[len(indent) + 4] != " " for x in wrapped[1:])
        # the tools read it back as one line with the same words, whatever follows it
        after = [indent + "[pass] next one", "VERDICT C9", "      a table row", "plain"]
        read = text.logical_lines(wrapped + after, heads)
        assert read[0] == indent + " ".join(_words(line)) and read[1:] == after


def test_a_kept_phrase_is_never_broken_and_blank_lines_and_indents_stay():
    phrase = "the full result in docs/full_results.json is"
    for n in range(1, 60):
        wrapped = text.wrap("w " * n + "; " + phrase + " SUPPORTED (3 of 3 checks pass)", keep=[phrase])
        assert any(phrase in x for x in wrapped.split("\n")), wrapped
    assert text.wrap("\nfirst\n  second") == "\nfirst\n  second"


def test_a_line_that_does_not_fit_starts_a_further_line_at_a_break_phrase():
    short = "[pass] x = 1  (threshold: <= 2)"
    assert text.wrap(short, "  ", breaks=["(threshold:"]) == "  " + short
    long = "[pass] " + "name " * 12 + "= 1  (threshold: <= 2; mean over 10 seeds, t ∪ exact bootstrap-t)"
    lines = text.wrap(long, "  ", breaks=["(threshold:"]).split("\n")
    assert lines[-1] == "      (threshold: <= 2; mean over 10 seeds, t ∪ exact bootstrap-t)"
    assert all(len(x) <= W for x in lines) and " ".join(" ".join(lines).split()) == " ".join(long.split())


def test_a_wide_table_is_printed_in_blocks_that_fit_and_keeps_every_value():
    frame = pd.DataFrame({f"column {k}": [1000.0 * k + r for r in range(4)] for k in range(12)},
                         index=pd.Index(range(7000, 7004), name="seed"))
    printed = text.table(frame)
    assert max(map(len, printed.splitlines())) <= W
    assert len(printed.splitlines()) > 5   # several blocks
    shown = sorted(float(v) for v in re.findall(r"(?<![\w.])\d+\.\d+", printed))
    assert shown == sorted(frame.to_numpy().ravel().tolist())


def test_setup_sets_pandas_display_to_the_column():
    text.use_width()
    frame = pd.DataFrame({f"c{k}": [0.123456] * 3 for k in range(20)})
    assert max(map(len, str(frame).splitlines())) <= W
    assert pd.get_option("display.width") == W


def _printed(nb: dict) -> list[tuple[int, str]]:
    out = []
    for k, cell in enumerate(nb["cells"], 1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                body = output["text"]
            elif "text/plain" in output.get("data", {}) and "text/html" not in output["data"]:
                body = output["data"]["text/plain"]
            else:
                continue
            out += [(k, line) for line in "".join(body).splitlines()]
    return out


@pytest.mark.parametrize("notebook", sorted(p.name for p in (locations.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
def test_every_committed_printed_line_fits_the_column(notebook):
    nb = json.loads((locations.REPO_ROOT / "notebooks" / notebook).read_text())
    lines = _printed(nb)
    assert len(lines) > 10
    wide = [f"cell {k}: {len(line)}: {line[:90]}" for k, line in lines if len(line) > W]
    assert wide == [], "\n".join(wide[:8])


def test_the_record_reads_wrapped_verdict_lines_as_one():
    from dlgn_lib import verdict
    checks = [verdict.seed_check("a long name of a check over seeds, measured on every set", [0.6, 0.7, 0.65], ">=", 0.5),
              verdict.exact_check("worst error", 1e-15, 3, "<=", 1e-10)]
    printed = verdict.evaluate("C9", checks, "quick").text()
    assert max(map(len, printed.splitlines())) <= W and len(printed.splitlines()) > 3
    nb = {"cells": [{"outputs": [{"output_type": "stream", "name": "stdout", "text": printed + "\n"}]}]}
    import nbformat
    (found,) = executed.verdicts_of(nbformat.from_dict(nb))
    assert (found.claim, found.word, found.n_pass, found.n_checks) == ("C9", "SUPPORTED", 2, 2)
    assert [c.name for c in found.checks] == [c.name for c in checks]
    first = found.checks[0]
    assert (first.value, first.op, first.threshold, first.outcome) == ("0.65", ">=", "0.5", "pass")
    assert first.over.startswith("mean over 3 seeds, ") and first.over in " ".join(checks[0].line().split())
