"""Result tables: a metric over seeds as mean ± std per (row, column), e.g. (dataset, model).

``select_on_validation`` keeps, per group of runs, the hyperparameter value (e.g. learning rate)
with the best mean validation metric; ``accuracy_table`` groups runs and summarises a metric;
``format_table`` turns the numbers into
"0.983 ± 0.012" strings; ``save_table`` writes ``<id>.csv`` (the numbers) and ``<id>.tex`` (the
formatted table) into the figures folder, each number to the decimals ``stable_texts`` reads from
the spread record, so that a regeneration within tolerance writes the same bytes. Used for claim
C2 (notebook 02) and the benchmark table T (notebook 09).
"""
from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import locations, models
from .text import listed
from .files import read_json, write_atomic

__all__ = ["accuracy_table", "cell", "format_table", "run_metric", "save_table", "select_on_validation",
           "stable_texts"]

#: The spread record (``make spread``): every printed number's range across CPU code paths, read here
#: as a plain file (the record tools sit above this layer).
SPREAD_RECORD = locations.REPO_ROOT / "docs" / "spread.json"

STATS = ("mean", "std", "n")
#: Shortcuts for ``row_key`` / ``col_key``.
KEYS: dict[str, Callable] = {
    "model": lambda run: models.display_name(run.config.model.kind),
    "kind": lambda run: run.config.model.kind,
    "data": lambda run: run.config.data.name,
    "seed": lambda run: run.config.seed,
}


def _key_fn(argument: str, key) -> Callable:
    if callable(key):
        return key
    if key in KEYS:
        return KEYS[key]
    raise ValueError(f"{argument}={key!r} is not allowed; pass a function run -> label or one of "
                     f"{sorted(KEYS)}")


def run_metric(run, metric: str) -> float:
    """A run's number by name: a key of ``run.meta`` (e.g. "test_metric_at_best"), else the last
    value of a history key (e.g. "test_metric")."""
    if metric in run.meta:
        return float(run.meta[metric])
    if metric in run.history:
        return float(run.history[metric][-1])
    numeric = sorted(k for k, v in run.meta.items() if isinstance(v, (int, float)))
    raise ValueError(f"metric={metric!r} is neither in run.meta (numbers: {numeric}) nor in "
                     f"run.history ({sorted(run.history)})")


def accuracy_table(runs: Sequence, row_key, col_key, metric: str = "test_metric_at_best", *,
                   rows: Sequence | None = None, cols: Sequence | None = None) -> pd.DataFrame:
    """Mean, standard deviation and count of a metric over the runs of each (row, column) cell.

    Runs sharing a cell are typically the seeds of one (dataset, model). The standard deviation
    is the sample one (``ddof=1``); NaN for a single run. A cell without runs is NaN with n = 0.

    Args:
        runs: ``Run`` objects.
        row_key, col_key: a function ``run -> label``, or a shortcut from ``KEYS`` ("model",
            "kind", "data", "seed").
        metric: see :func:`run_metric`; model selection stays on validation when it is
            "test_metric_at_best" (test accuracy at the best validation epoch).
        rows, cols: label order (default: order of first appearance). Labels listed here but
            without runs give empty cells; runs whose labels are not listed are an error.

    Returns:
        A DataFrame indexed by row label, with columns ``(column label, stat)`` for stat in
        ``STATS``.
    """
    row_fn, col_fn = _key_fn("row_key", row_key), _key_fn("col_key", col_key)
    values: dict[tuple, list[float]] = {}
    for run in runs:
        values.setdefault((row_fn(run), col_fn(run)), []).append(run_metric(run, metric))
    if not values and rows is None:
        raise ValueError("runs is empty; pass at least one run (or the rows and cols to show)")
    row_labels = list(rows) if rows is not None else list(dict.fromkeys(r for r, _ in values))
    col_labels = list(cols) if cols is not None else list(dict.fromkeys(c for _, c in values))
    unknown = [cell for cell in values if cell[0] not in row_labels or cell[1] not in col_labels]
    if unknown:
        raise ValueError(f"runs with (row, column) labels {unknown} are missing from rows/cols")
    columns = pd.MultiIndex.from_product([col_labels, STATS], names=[None, "stat"])
    table = pd.DataFrame(np.nan, index=pd.Index(row_labels), columns=columns)
    for r in row_labels:
        for c in col_labels:
            v = np.asarray(values.get((r, c), []), dtype=np.float64)
            table.loc[r, (c, "n")] = len(v)
            if len(v):
                table.loc[r, (c, "mean")] = v.mean()
                table.loc[r, (c, "std")] = v.std(ddof=1) if len(v) > 1 else np.nan
    return table


def select_on_validation(runs: Sequence, group_key, metric: str = "best_val_metric",
                         choice: Callable = lambda run: run.config.lr) -> tuple[list, dict]:
    """Choose one hyperparameter value per group by mean validation metric over its runs.

    Runs are grouped by ``group_key`` (e.g. (data set, model)); within a group, by the value of
    ``choice`` (default: the learning rate), whose runs are typically the seeds. The value with
    the highest mean ``metric`` (see :func:`run_metric`; by default the best validation metric)
    is kept; on a tie the first value met in ``runs``. No test number enters the choice.

    Returns:
        ``(selected, chosen)``: the runs of the chosen value of every group, in the order of
        ``runs``; and ``{group: chosen value}``.
    """
    key = _key_fn("group_key", group_key)
    scores: dict = {}
    for run in runs:
        scores.setdefault(key(run), {}).setdefault(choice(run), []).append(run_metric(run, metric))
    chosen = {}
    for group, by_value in scores.items():
        means = {value: float(np.mean(values)) for value, values in by_value.items()}
        chosen[group] = max(means, key=means.get)   # max keeps the first of equal means
    selected = [run for run in runs if choice(run) == chosen[key(run)]]
    return selected, chosen


def cell(table: pd.DataFrame, row, col, stat: str = "mean") -> float:
    """One number of an ``accuracy_table``: ``cell(t, "moons", "DLGN")`` is the mean there."""
    if stat not in STATS:
        raise ValueError(f"stat={stat!r} is not allowed; choose one of {list(STATS)}")
    return float(table.loc[row, (col, stat)])


def format_table(table: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The table as strings "mean ± std" (just "mean" for one run, "—" for an empty cell)."""
    return _formatted(table, lambda row, col, stat: f"{table.loc[row, (col, stat)]:.{digits}f}")


def _formatted(table: pd.DataFrame, number: Callable) -> pd.DataFrame:
    cols = list(dict.fromkeys(table.columns.get_level_values(0)))

    def text(row, col):
        mean, std, n = (table.loc[row, (col, s)] for s in STATS)
        if n == 0 or np.isnan(mean):
            return "—"
        return number(row, col, "mean") if np.isnan(std) else \
            f"{number(row, col, 'mean')} ± {number(row, col, 'std')}"

    return pd.DataFrame([[text(r, c) for c in cols] for r in table.index], index=table.index, columns=cols)


def save_table(table: pd.DataFrame, table_id: str, *, digits: int = 3, caption: str = "",
               verbose: bool = True, record: Mapping | None = None) -> list[Path]:
    """Write ``<table_id>.csv`` (mean, std, n per cell) and ``<table_id>.tex`` (the
    :func:`format_table` strings as a LaTeX tabular) into ``locations.figures_dir()``.

    ``table_id`` starts with the notebook id, e.g. "02_accuracy": each mean and std is written as
    :func:`stable_texts` gives it for the notebook's printed table (``digits`` decimals), so that a
    regeneration within tolerance writes the same bytes. Returns the written paths.
    """
    if not table_id or "/" in table_id or table_id.startswith("."):
        raise ValueError(f"table_id={table_id!r}: use a plain name such as '02_accuracy'")
    cols = list(dict.fromkeys(table.columns.get_level_values(0)))
    shown = [(r, c, stat) for r in table.index for c in cols for stat in ("mean", "std")
             if not np.isnan(table.loc[r, (c, stat)])]   # the numbers format_table prints, in its order
    texts = dict(zip(shown, stable_texts([table.loc[key[0], key[1:]] for key in shown],
                                         table_id.split("_", 1)[0], digits, record)))
    out_dir = locations.figures_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    flat = pd.DataFrame({f"{col} {stat}": [str(int(table.loc[r, (col, stat)])) if stat == "n"
                                           else texts.get((r, col, stat), "") for r in table.index]
                         for col, stat in table.columns}, index=table.index)
    csv_path, tex_path = out_dir / f"{table_id}.csv", out_dir / f"{table_id}.tex"
    write_atomic(csv_path, flat.to_csv())
    latex = _formatted(table, lambda *key: texts[key]).to_latex(caption=caption or None, escape=True)
    note = "% each number to the decimals that stay the same within the tolerance of docs/spread.json\n"
    write_atomic(tex_path, note + latex.replace("±", r"$\pm$").replace("—", "--"))
    written = [csv_path, tex_path]
    if verbose:
        print(listed("saved", [locations.display_path(p) for p in written]))
    return written


def stable_texts(values: Sequence[float], notebook: str, digits: int = 3, record: Mapping | None = None) -> list[str]:
    """``values`` as ``notebook`` prints them with ``digits`` decimals, each written with the most
    decimals (``digits`` down to 0) at which every value within its tolerance rounds to one text
    (whole units where even those move; such a number may still change).

    The recorded output of the notebook that prints these numbers in this order is the one whose
    numbers with ``digits`` decimals are as many and each within its tolerance (HTML outputs first);
    a number's tolerance is the comparison's (reconstruction §7.1): the record's ``tolerance_factor``
    times its range across CPU code paths, at least one unit of its last digit. So a regeneration
    that moves the numbers within tolerance writes the same texts. Values that no recorded output
    prints within tolerance keep ``digits`` decimals. ``record``: default ``docs/spread.json``.
    """
    record = _spread_record() if record is None else record
    printed = [Decimal(f"{value:.{digits}f}") for value in values]
    factor = float(record.get("tolerance_factor", 3.0))
    outputs = record.get("notebooks", {}).get(notebook, {}).get("outputs", {})
    for key in sorted(outputs, key=lambda key: "text/html" not in key):
        windows = _tolerance_windows(outputs[key], digits, factor)
        if len(windows) == len(printed) and all(low <= p <= high for p, (low, high) in zip(printed, windows)):
            return [_stable_text(p, low, high, digits) for p, (low, high) in zip(printed, windows)]
    return [str(p.copy_abs() if p.is_zero() else p) for p in printed]


def _stable_text(printed: Decimal, low: Decimal, high: Decimal, digits: int) -> str:
    decimals = next((d for d in range(digits, 0, -1) if _rounded(low, d) == _rounded(high, d)), 0)
    shown = _rounded(printed, decimals)
    return str(shown.copy_abs() if shown.is_zero() else shown)


def _rounded(value: Decimal, decimals: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)


def _tolerance_windows(entry: Mapping, digits: int, factor: float) -> list[tuple[Decimal, Decimal]]:
    """(lowest, highest) a regeneration may print for each number of one recorded output printed
    with ``digits`` decimals, in its order: the committed value ± the comparison's tolerance."""
    ranges, unit, windows = entry.get("ranges", ()), 10.0 ** -digits, []
    for i, text in enumerate(entry.get("values", {}).get("committed", ())):
        text = str(text).replace("\u2212", "-")
        whole, dot, tail = text.lstrip("-").partition(".")
        if not (dot and whole.isdigit() and tail.isdigit() and len(tail) == digits):
            continue
        measured = float(ranges[i]) if i < len(ranges) else 0.0
        allowed = Decimal(max(math.floor(factor * measured / unit + 1e-6), 1)).scaleb(-digits)
        windows.append((Decimal(text) - allowed, Decimal(text) + allowed))
    return windows


def _spread_record() -> dict:
    return read_json(SPREAD_RECORD, dict, "the spread record") if SPREAD_RECORD.exists() else {}
