"""Where a process's time goes: training, analysis and file I/O, each counted once.

The run cache, the analysis cache and ``save_figure`` wrap their work in :func:`spent`. Time is
given to the innermost kind only (a cached analysis that trains a run counts that training as
training), so the kinds add up to no more than the wall time; the rest is plotting, analyses
that are not cached, and the kernel itself. When ``DLGN_COSTS_FILE`` names a file, the totals are
written there as JSON when the process ends (the series runner reads them per notebook).
"""
from __future__ import annotations

import atexit
import json
import os
import time
from contextlib import contextmanager

__all__ = ["KINDS", "spent", "totals"]

#: The kinds of work that are timed.
KINDS = ("training", "analysis", "io")
_seconds = dict.fromkeys(KINDS, 0.0)
_stack: list[list] = []   # [kind, start of its current stretch]
_started = time.perf_counter()


@contextmanager
def spent(kind: str):
    """Count the time of the ``with`` block as ``kind`` (one of :data:`KINDS`), minus inner blocks."""
    if kind not in _seconds:
        raise ValueError(f"cost kind {kind!r}: use one of {', '.join(KINDS)}")
    now = time.perf_counter()
    if _stack:
        _seconds[_stack[-1][0]] += now - _stack[-1][1]
    _stack.append([kind, now])
    try:
        yield
    finally:
        now = time.perf_counter()
        _seconds[kind] += now - _stack.pop()[1]
        if _stack:
            _stack[-1][1] = now


def totals() -> dict[str, float]:
    """Seconds per kind so far, and ``wall``: seconds since the library was imported."""
    return {**{k: round(v, 3) for k, v in _seconds.items()}, "wall": round(time.perf_counter() - _started, 3)}


def _write_at_exit() -> None:
    path = os.environ.get("DLGN_COSTS_FILE")
    if path:
        try:
            with open(path, "w") as out:
                json.dump(totals(), out)
        except OSError:   # a measurement is not worth a traceback at exit
            pass


atexit.register(_write_at_exit)
