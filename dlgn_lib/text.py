"""Printed text that fits the book's column: what the notebooks print is at most :data:`TEXT_WIDTH`
characters wide, so that nothing wraps or is cut off in the book at 1280 px.

``wrap`` breaks a long line at spaces, each further line indented four more spaces than the first;
``logical_lines`` joins such lines again, for the tools that read what a notebook printed.
``table`` prints a pandas table within the width (columns that do not fit go into a block below,
as pandas does with ``display.width``); ``dl.setup`` sets pandas' display options to the same width.
"""
from __future__ import annotations

import re
import textwrap
from typing import Iterable, Pattern

__all__ = ["CONTINUATION", "TEXT_WIDTH", "listed", "logical_lines", "table", "use_width", "wrap"]

#: Characters per printed line: the book's output column at 1280 px holds 77 of its monospace
#: characters (656 px at 14 px DejaVu Sans Mono); one less leaves room for a wider font.
TEXT_WIDTH = 76
#: What a wrapped line's further lines start with, after the first line's own indentation.
CONTINUATION = "    "
_KEEP = "\x00"   # stands for a space that must not break a line


def wrap(text: str, indent: str = "", keep: Iterable[str] = (), breaks: Iterable[str] = ()) -> str:
    """``text`` on lines of at most :data:`TEXT_WIDTH` characters, broken at spaces: each of its lines
    starts with ``indent`` (and its own indentation), the lines it continues on with
    :data:`CONTINUATION` more. A phrase of ``keep`` is never broken; at a phrase of ``breaks`` a line
    that does not fit starts a further line; a word longer than a line stays whole; blank lines stay."""
    for phrase in keep:
        text = text.replace(phrase, phrase.replace(" ", _KEEP))
    out = []
    for line in text.split("\n"):
        own = indent + line[:len(line) - len(line.lstrip(" "))]
        line, parts = line.strip(" "), []
        for phrase in breaks if len(own) + len(line) > TEXT_WIDTH else ():
            head, found, tail = line.partition(phrase)
            if found and head.strip():
                parts.append(head.rstrip())
                line = found + tail
        parts.append(line)
        lines = _fill(parts[0], own, own + CONTINUATION)
        for part in parts[1:]:
            lines += _fill(part, own + CONTINUATION, own + CONTINUATION)
        out.append("\n".join(lines))
    return "\n".join(out).replace(_KEEP, " ")


def _fill(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, TEXT_WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False,
                         break_long_words=False)


def listed(word: str, items: list[str]) -> str:
    """``word item, item, …`` wrapped to the column, ``word`` and the first item on one line
    ("saved figures/05_x.png, figures/05_x.pdf")."""
    return wrap(f"{word} " + ", ".join(items), keep=[f"{word} {items[0]}"])


def logical_lines(lines: Iterable[str], heads: Pattern[str]) -> list[str]:
    """``lines`` with each line that ``heads`` matches joined with the lines ``wrap`` continued it on
    (those indented exactly :data:`CONTINUATION` deeper, themselves no head), one space between."""
    out: list[str] = []
    indent = None   # the indentation of the last head line, while its continuation may follow
    for line in lines:
        if indent is not None and line.startswith(indent + CONTINUATION) and not line[len(indent + CONTINUATION):].startswith(" ") \
                and not heads.match(line):
            out[-1] += " " + line.strip()
            continue
        out.append(line)
        indent = re.match(r" *", line)[0] if heads.match(line) else None
    return out


def table(frame, **options) -> str:
    """A pandas table as text within :data:`TEXT_WIDTH` (``DataFrame.to_string`` with its options):
    columns that do not fit continue in a block below."""
    if frame.ndim == 1:   # a Series: one column, which pandas does not split
        return frame.to_string(**options)
    return frame.to_string(line_width=TEXT_WIDTH, **options)


def use_width() -> None:
    """pandas' display options at the column's width (``dl.setup`` calls this): a table shown or
    printed as it is (``print(frame)``) keeps within :data:`TEXT_WIDTH`, its columns in blocks, and
    shows every row of up to 500."""
    import pandas as pd
    pd.set_option("display.width", TEXT_WIDTH)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_rows", 500)
    pd.set_option("display.max_colwidth", TEXT_WIDTH)
