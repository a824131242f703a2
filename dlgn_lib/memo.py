"""The analysis cache: tables measured on cached runs are computed once per code and numeric path.

A warm run cache makes training free, but a notebook still spends most of its time measuring its
runs again (region metrics with hundreds of random rotations, switch angles on fine grids, saliency
cosines). :func:`frame` keeps such a table beside the runs it was measured on and serves it again
only when nothing it depends on has changed. Its key covers

- what was measured: a label naming the computation and its parameters (every argument that is not
  a run), which the caller must give in full;
- the runs' contents: each run's config key and a SHA-256 of its snapshots and best state, so a run
  retrained elsewhere (another CPU, another code path) counts as another run;
- the code: a SHA-256 of every source file of :mod:`dlgn_lib`, so any change to the library
  recomputes every table;
- the numeric code path (:func:`dlgn_lib.numerics.status`), torch's thread count, and the versions
  of torch, numpy, pandas and scipy.

A served table is exactly the computed one: a table is stored only when its stored form reads back
equal to it, bit for bit and dtype for dtype (otherwise it is recomputed every time), and an entry
that fails its checksum or cannot be read is removed and recomputed. Entries are JSON files
(``<runs dir>/analyses/<code hash>-<key>.json``, written atomically; no pickle), so a fresh runs
folder (``DLGN_RUNS_DIR``, the bench, the spread tool) starts with no analyses either; writing one
removes the entries of other library versions. A read-only runs folder serves what it has and
computes the rest. ``DLGN_ANALYSIS_CACHE=off`` turns the cache off (every table is computed).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from . import locations, numerics

FORMAT = 1
FOLDER = "analyses"
#: Column dtypes a stored table may have (anything else is computed every time).
_DTYPES = ("float64", "int64", "bool", "object", "str")


class _NotStorable(ValueError):
    """A table whose stored form would not read back equal to it."""


def enabled(environ=os.environ) -> bool:
    """Whether tables are cached (``DLGN_ANALYSIS_CACHE``: ``on``, the default, or ``off``)."""
    value = environ.get("DLGN_ANALYSIS_CACHE", "on")
    if value not in ("on", "off"):
        raise ValueError(f"DLGN_ANALYSIS_CACHE={value!r} is not allowed; use on or off (default: on)")
    return value == "on"


def folder() -> Path:
    """Where analyses are kept: ``analyses/`` inside the run cache."""
    return locations.runs_dir() / FOLDER


def _library_hash() -> str:
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json") and p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


# Taken once, when this module is imported (the library's sources as loaded then), not at each
# table: a process keeps one name for the code it runs even if the files change under it.
_CODE_HASH = _library_hash()


def code_hash() -> str:
    """SHA-256 of every ``.py`` and ``.json`` file of the library (paths and contents), as imported."""
    return _CODE_HASH


def _environment() -> dict:
    import scipy
    import torch
    return {**numerics.status(), "threads": torch.get_num_threads(), "pandas": pd.__version__,
            "scipy": scipy.__version__}


def tensor_hash(*tensors) -> str:
    """SHA-256 of tensors' dtypes, shapes and values (a parameter that is data, e.g. probe inputs)."""
    digest = hashlib.sha256()
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        digest.update(f"{t.dtype}{tuple(t.shape)}".encode())
        digest.update(t.numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def run_hash(run) -> str:
    """A run's identity: its config key and a SHA-256 of its saved states (kept on the run)."""
    cached = getattr(run, "_memo_hash", None)
    if cached is not None:
        return cached
    digest = hashlib.sha256(run.config.key().encode())
    states = [(f"snapshot {epoch}", state) for epoch, state in sorted(run.snapshots.items())]
    states.append(("best", run.best_state or {}))
    for name, state in states:
        digest.update(name.encode())
        for k in sorted(state):
            digest.update(k.encode() + tensor_hash(state[k]).encode())
    value = digest.hexdigest()
    try:
        run._memo_hash = value
    except AttributeError:   # a run type without attributes: hash again next time
        pass
    return value


def key(label: str, params: Mapping, runs: Iterable) -> str:
    """The cache key of a table (see the module's docstring)."""
    text = json.dumps({"format": FORMAT, "label": label, "params": params, "runs": [run_hash(r) for r in runs],
                       "environment": _environment()}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- stored form

def _value(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if v is None or isinstance(v, str):
        return v
    raise _NotStorable(f"value of type {type(v).__name__}")


def encode(table: pd.DataFrame) -> dict:
    """The JSON form of ``table``; raises when it would not read back exactly (see :func:`decode`)."""
    if not isinstance(table, pd.DataFrame):
        raise _NotStorable(f"not a DataFrame but {type(table).__name__}")
    if not table.index.equals(pd.RangeIndex(len(table))) or not isinstance(table.index, pd.RangeIndex):
        raise _NotStorable("index is not 0 .. n-1")
    if not all(isinstance(c, str) for c in table.columns) or table.columns.duplicated().any():
        raise _NotStorable("column names are not distinct strings")
    columns = []
    for name in table.columns:
        series = table[name]
        dtype = str(series.dtype)
        if dtype not in _DTYPES:
            raise _NotStorable(f"column {name!r} has dtype {dtype}")
        columns.append({"name": name, "dtype": dtype, "values": [_value(v) for v in series.tolist()]})
    stored = {"n": len(table), "columns": columns}
    if not _equal(decode(stored), table):
        raise _NotStorable("stored form reads back different")
    return stored


def decode(stored: dict) -> pd.DataFrame:
    """The table of :func:`encode`'s JSON form."""
    data = {}
    for column in stored["columns"]:
        values = column["values"]
        if column["dtype"] == "object":
            array = np.empty(len(values), dtype=object)
            array[:] = values
        elif column["dtype"] == "str":   # pandas' string dtype (NaN for a missing value)
            array = pd.array([np.nan if v is None else v for v in values], dtype="str")
        else:
            array = np.array(values, dtype=column["dtype"])
        data[column["name"]] = array
    return pd.DataFrame(data, index=pd.RangeIndex(stored["n"]))


def _equal(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True, check_dtype=True, check_index_type=True,
                                      check_column_type=True)
    except AssertionError:
        return False
    # assert_frame_equal treats -0.0 and 0.0 (and NaN payloads) as equal; the bits must match too.
    return all(a[c].to_numpy().tobytes() == b[c].to_numpy().tobytes() for c in a.columns
               if a[c].dtype.kind in "fib")


def _checksum(stored: dict) -> str:
    return hashlib.sha256(json.dumps(stored, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- read and write

def _path(k: str) -> Path:
    return folder() / f"{code_hash()[:16]}-{k[:32]}.json"


def _load(path: Path, k: str) -> pd.DataFrame | None:
    try:
        entry = json.loads(path.read_text())
        if entry.get("format") != FORMAT or entry.get("key") != k or entry.get("sha256") != _checksum(entry["table"]):
            raise ValueError("checksum or key does not match")
        return decode(entry["table"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        _remove(path)    # unreadable or altered: computed again below
        return None


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _save(path: Path, k: str, label: str, stored: dict) -> None:
    entry = {"format": FORMAT, "key": k, "label": label, "code": code_hash(), "sha256": _checksum(stored),
             "table": stored}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".tmp-", suffix=".json", delete=False) as fh:
            json.dump(entry, fh)
        os.chmod(fh.name, 0o666 & ~locations.UMASK)
        os.replace(fh.name, path)
    except OSError:   # a read-only or full runs folder: the table is simply not kept
        if "fh" in locals():
            _remove(Path(fh.name))
        return
    prefix = code_hash()[:16]
    for old in path.parent.glob("*.json"):   # entries of other library versions can never be served again
        if not old.name.startswith(prefix):
            _remove(old)


def frame(label: str, params: Mapping, runs: Iterable, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``compute()``, a table measured on ``runs``, or the stored one from an earlier call.

    Args:
        label: names the computation (e.g. ``"studies.circle.snapshot_tables"``).
        params: every other input of ``compute`` (JSON-able; tensors as :func:`tensor_hash`).
        runs: the runs ``compute`` reads, in a fixed order.
    """
    if not enabled():
        return compute()
    runs = list(runs)
    k = key(label, params, runs)
    path = _path(k)
    table = _load(path, k)
    if table is not None:
        return table
    table = compute()
    try:
        stored = encode(table)
    except _NotStorable:
        return table
    _save(path, k, label, stored)
    return table


def function_name(fn) -> str | None:
    """A stable name of a measure (``module.qualname``, or a ``functools.partial`` of one with
    JSON-able arguments); None for a lambda, a nested function or anything else without one."""
    if isinstance(fn, functools.partial):
        inner = function_name(fn.func)
        if inner is None:
            return None
        try:
            args = json.dumps([list(fn.args), fn.keywords], sort_keys=True)
        except TypeError:
            return None
        return f"partial({inner}, {args})"
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or not module.startswith("dlgn_lib."):
        return None
    return f"{module}.{qualname}"
