"""Where does a claim hold? Effects over a grid of settings, each with a paired sign test.

A verdict is checked in one registered setting; a sensitivity map shows the same measurement over
a grid of factors (initialisation convention, β, gate biases, target, training-set size), so a
reader sees where the effect holds and where it breaks. Per cell of the grid every seed gives one
*effect* (e.g. purity gain over random rotation, trained minus init; positive = the claimed
direction). The cell reports the median effect, how many seeds point the claimed way, and the
one-sided **sign test** p-value: the chance of at least that many positive seeds out of the
non-zero ones if each were positive with probability 1/2. It needs no distributional assumption;
with 5 seeds the smallest possible p is 1/32 ≈ 0.031 (all five positive).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["agreement", "effect_table", "significant_shares", "summary_table"]

#: Significance level of the map's marks.
ALPHA = 0.05


def sign_test(effects: Sequence[float]) -> float:
    """One-sided sign test of "the effect is positive": P(K ≥ k) for K ~ Binomial(n, 1/2), where k
    is the number of positive effects and n the number of non-zero ones (ties dropped; NaN
    effects too). 1.0 when n = 0."""
    values = np.asarray(effects, dtype=np.float64)
    values = values[~np.isnan(values) & (values != 0)]
    n, k = len(values), int((values > 0).sum())
    if n == 0:
        return 1.0
    return float(sum(math.comb(n, j) for j in range(k, n + 1)) / 2 ** n)


def effect_table(frame: pd.DataFrame, factors: Sequence[str], effect: str, *, seed: str = "seed") -> pd.DataFrame:
    """Per cell of ``factors``: the median effect over seeds, the number of seeds with a positive
    effect, the number of seeds, and the sign test's p-value.

    Args:
        frame: one row per (cell, seed) with the factor columns, ``seed`` and ``effect``.
        factors: the columns that define a cell.
        effect: the column holding each seed's effect (positive = the claimed direction).

    Returns:
        A DataFrame with the factor columns and ``median``, ``positive``, ``n``, ``p``,
        ``significant`` (p ≤ ``ALPHA``), one row per cell, in order of first appearance.
    """
    missing = [c for c in [*factors, effect, seed] if c not in frame]
    if missing:
        raise ValueError(f"columns {missing} are missing; the frame has {list(frame.columns)}")
    duplicated = frame.duplicated([*factors, seed])
    if duplicated.any():
        raise ValueError(f"{int(duplicated.sum())} rows repeat a (cell, seed): each seed must appear once per cell")
    rows = []
    for cell, part in frame.groupby(list(factors), sort=False, dropna=False):
        values = part[effect].to_numpy(dtype=np.float64)
        p = sign_test(values)
        rows.append({**dict(zip(factors, cell if isinstance(cell, tuple) else (cell,))),
                     "median": float(np.nanmedian(values)) if (~np.isnan(values)).any() else math.nan,
                     "positive": int((values > 0).sum()), "n": int(len(values)), "p": p,
                     "significant": p <= ALPHA})
    return pd.DataFrame(rows)


def summary_table(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per effect (``tables``: effect name → ``effect_table`` output): its number of cells, of cells
    with p ≤ ``ALPHA``, and of cells whose median points the claimed way (> 0) or against it (< 0)."""
    return pd.DataFrame([{"effect": name, "cells": len(t), f"significant (p ≤ {ALPHA:g})": int(t["significant"].sum()),
                          "median > 0": int((t["median"] > 0).sum()), "median < 0": int((t["median"] < 0).sum())}
                         for name, t in tables.items()])


def significant_shares(tables: Mapping[str, pd.DataFrame], factor: str) -> pd.DataFrame:
    """The share of significant cells per effect (rows) and level of ``factor`` (columns)."""
    frame = pd.concat([t.assign(effect=name) for name, t in tables.items()])
    return frame.groupby(["effect", factor], sort=False)["significant"].mean().unstack(factor)


def agreement(tables: Mapping[str, pd.DataFrame], factor: str, first: str, second: str) -> pd.DataFrame:
    """Side by side, per effect: over the cells that differ only in ``factor`` (e.g. the model), how
    many are significant for both levels ``first`` and ``second``, for ``first`` only, for
    ``second`` only, and for neither."""
    rows = []
    for name, t in tables.items():
        others = [c for c in t.columns if c not in (factor, "median", "positive", "n", "p", "significant")]
        pairs = t.pivot_table(index=others, columns=factor, values="significant", aggfunc="first")[[first, second]]
        a, b = pairs[first].astype(bool), pairs[second].astype(bool)
        rows.append({"effect": name, "cells": len(pairs), "both": int((a & b).sum()),
                     f"{first} only": int((a & ~b).sum()), f"{second} only": int((~a & b).sum()),
                     "neither": int((~a & ~b).sum())})
    return pd.DataFrame(rows)
