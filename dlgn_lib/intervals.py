"""Intervals over seeds for verdict checks (rules v3 and v4, reconstruction §8.1).

Rules v3 (``bootstrap``). A check's statistic (mean, median, ratio of means) is computed over the
seeds of a notebook, and its uncertainty is a 90 % percentile interval of the seed bootstrap: the
seeds are resampled with replacement, the statistic is recomputed on each resample, and the
interval runs from the 5th to the 95th percentile of those values. Where the number of distinct
resamples is small enough (``EXACT_LIMIT``: up to 10 seeds), every resample is enumerated with its
multinomial probability, so the interval is exact and has no random part; above that,
``RESAMPLES`` resamples are drawn with a fixed generator (``BOOTSTRAP_SEED``), so a notebook prints
the same interval every time (the median's resample distribution is computed exactly there too,
``_median_positions``). A count of successes gets the exact (Clopper–Pearson) binomial interval.

The quantile rule: the lower end is the smallest resampled value v with P(statistic <= v) >= 5 %,
the upper end the smallest with P(statistic <= v) >= 95 %. A percentile interval of a skewed
statistic (a median of few seeds) can leave out the value on the seeds themselves; the interval
is then widened to hold it, so that a check never passes on an interval its own value contradicts.

Rules v4 (``estimate``): intervals that cover. The percentile bootstrap of a mean or a ratio of
means holds the true value in only 76-79 % of data sets of 5 seeds and 82-85 % of 10, not 90 %
(the table), so rules v4 use intervals built to cover:

- mean: the hull of the Student-t interval (n - 1 degrees of freedom) and the studentised
  bootstrap (bootstrap-t) interval [m - q(95 %) se, m - q(5 %) se], q the quantiles (rule above)
  of T* = (m* - m) / se* over the resamples, enumerated or drawn as in v3; resamples whose seeds
  all have one value (se* = 0) are dropped. The t interval is right for normal seeds, the
  bootstrap-t widens it where the seeds are skewed.
- ratio of means: the same, with the delta-method standard error (residuals a - r b over mean(b)).
- median: the exact distribution-free interval [x_(k), x_(n+1-k)] between order statistics, k the
  largest with P(Binomial(n, 1/2) <= k - 1) <= 5 %: it covers at least 90 % for any continuous
  distribution (93.75 % at 5 seeds, 97.9 % at 10), and needs at least 5 seeds.
- a seed without a value (NaN) is neither dropped nor guessed: it is put at the smallest and then
  at the largest observed seed, and the interval is the hull of the two intervals
  (``Estimate.missing`` counts such seeds).

Coverage (``coverage``; ``python -m dlgn_lib.intervals coverage``): the share of 4,000 simulated
data sets (standard error about 0.5 %) whose 90 % interval holds the true value. Families: normal,
skewed (lognormal, sigma 0.5), heavy-tailed (Student t, 3 degrees of freedom); pairs for the ratio
of means are (1, 2) + 0.1 * centred noise of the family.

==============  ==  ============  ============  =====
statistic       n   family        v3 bootstrap  v4
==============  ==  ============  ============  =====
mean            5   normal        0.789         0.931
mean            5   skewed        0.757         0.912
mean            5   heavy-tailed  0.791         0.953
mean            10  normal        0.844         0.921
mean            10  skewed        0.816         0.908
mean            10  heavy-tailed  0.834         0.915
median          5   normal        0.935         0.935
median          5   skewed        0.935         0.935
median          5   heavy-tailed  0.947         0.947
median          10  normal        0.873         0.980
median          10  skewed        0.872         0.980
median          10  heavy-tailed  0.884         0.982
ratio of means  5   normal        0.790         0.945
ratio of means  5   skewed        0.780         0.934
ratio of means  5   heavy-tailed  0.778         0.942
ratio of means  10  normal        0.847         0.922
ratio of means  10  skewed        0.838         0.916
ratio of means  10  heavy-tailed  0.835         0.917
==============  ==  ============  ============  =====

At 5 seeds the v3 interval of a median is the v4 one ([x_(1), x_(5)]); the normal and skewed rows
of the median are alike because the lognormal draws are the normal ones transformed monotonically,
which leaves order statistics in place.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
from .files import command

__all__ = ["estimate"]

#: The interval's coverage.
LEVEL = 0.90
#: Enumerate every distinct resample when there are at most this many (C(2n - 1, n) multisets of
#: n seeds: 92,378 for 10 seeds, 352,716 for 11).
EXACT_LIMIT = 100_000
#: Resamples drawn when there are more, and the seed of their generator.
RESAMPLES = 20_000
BOOTSTRAP_SEED = 0
STATISTICS = ("mean", "median", "ratio of means")
#: Cumulative probabilities within this of a quantile's level count as reaching it (float sums).
QUANTILE_TOLERANCE = 1e-12
#: What ``estimate`` does with a seed that has no value (NaN): bound it, or refuse it.
MISSING = ("bounds", "refuse")
#: Coverage simulation: each family's sampler, mean and median (``coverage``).
FAMILIES = {
    "normal": (lambda rng, size: rng.standard_normal(size), 0.0, 0.0),
    "skewed": (lambda rng, size: rng.lognormal(0.0, 0.5, size), math.exp(0.125), 1.0),
    "heavy-tailed": (lambda rng, size: rng.standard_t(3, size), 0.0, 0.0),
}
#: The noise scale of the simulated (numerator, denominator) pairs: (1, 2) + RATIO_NOISE * centred noise.
RATIO_NOISE = 0.1
METHODS = ("v3", "v4")


@dataclass(frozen=True)
class Estimate:
    """A statistic over seeds with its interval.

    Attributes:
        value: the statistic on the seeds themselves.
        low, high: the interval's ends (``LEVEL`` coverage).
        n: the number of seeds (trials for a binomial count).
        statistic: what was computed (``STATISTICS``, or "share" for a binomial count).
        method: how the interval was found ("exact bootstrap", "bootstrap of 20,000",
            "Clopper-Pearson", "exact" for a worst case with no interval; rules v4:
            "t ∪ exact bootstrap-t", "order statistics (exact)", ...).
        missing: seeds without a value, bounded at the observed extremes (rules v4, ``estimate``).
    """
    value: float
    low: float
    high: float
    n: int
    statistic: str
    method: str
    missing: int = 0

    def __post_init__(self):
        if not (self.low <= self.value <= self.high) and not any(map(math.isnan, (self.low, self.value, self.high))):
            raise ValueError(f"an interval must hold its value: {self.low} <= {self.value} <= {self.high} is false")


def multisets(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct bootstrap resample of ``n`` seeds as counts (R, n), with its probability (R,)."""
    return _multisets(n)


@functools.lru_cache(maxsize=16)
def _multisets(n: int) -> tuple[np.ndarray, np.ndarray]:
    # stars and bars: n seeds drawn n times is n stars and n - 1 bars in 2n - 1 places
    bars = np.array(list(itertools.combinations(range(2 * n - 1), n - 1)), dtype=np.int64).reshape(-1, n - 1)
    edges = np.concatenate([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), 2 * n - 1)], axis=1)
    counts = np.diff(edges, axis=1) - 1
    # multinomial probability n! / prod(c_i!) / n^n, in logs for range
    log_factorial = np.array([math.lgamma(k + 1) for k in range(n + 1)])
    log_p = math.lgamma(n + 1) - log_factorial[counts].sum(axis=1) - n * math.log(n)
    probability = np.exp(log_p)
    counts.setflags(write=False)
    probability.setflags(write=False)
    return counts, probability


def n_multisets(n: int) -> int:
    return math.comb(2 * n - 1, n)


def _resamples(n: int) -> tuple[np.ndarray, np.ndarray, str]:
    if n_multisets(n) <= EXACT_LIMIT:
        counts, probability = multisets(n)
        return counts, probability, "exact bootstrap"
    rng = np.random.Generator(np.random.PCG64(BOOTSTRAP_SEED))
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=RESAMPLES)
    return counts, np.full(RESAMPLES, 1.0 / RESAMPLES), f"bootstrap of {RESAMPLES:,}"


def _apply(statistic: str, counts: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The statistic of each resample (rows of ``counts``) of the seeds' ``data``."""
    n = counts.shape[1]
    weights = counts.astype(np.float64)
    if statistic == "mean":
        return weights @ data / n
    if statistic == "ratio of means":
        return (weights @ data[:, 0]) / (weights @ data[:, 1])
    if statistic == "median":
        order = np.argsort(data, kind="stable")
        cumulative = np.cumsum(counts[:, order], axis=1)
        ranked = data[order]
        lower = ranked[np.argmax(cumulative > (n - 1) // 2, axis=1)]
        upper = ranked[np.argmax(cumulative > n // 2, axis=1)]
        with np.errstate(invalid="ignore"):
            return np.where(lower == upper, lower, (lower + upper) / 2)
    raise ValueError(f"statistic={statistic!r} is not known; choose one of {', '.join(STATISTICS)}")


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest of ``values`` whose cumulative weight reaches ``q`` (weights sum to 1)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    index = int(np.searchsorted(cumulative, q - QUANTILE_TOLERANCE, side="left"))
    return float(values[order][min(index, len(values) - 1)])


@functools.lru_cache(maxsize=16)
def _median_positions(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact bootstrap distribution of the median of ``n`` seeds, over their sorted positions:
    a resample's median is the mean of the seeds at sorted positions ``i <= j`` (0-based; ``i == j``
    for odd ``n``) with probability ``p``.

    In counts of the n**n ordered resamples: the k-th order statistic of a resample lies below
    position t when at least k of the n draws do, N_k(t) = sum_{c >= k} C(n, c) t^c (n - t)^(n - c)
    (a Binomial(n, t / n) tail), so it lies at position i in N_k(i + 1) - N_k(i) of them. For odd n
    the median is the order statistic k = (n + 1) / 2. For even n, m = n / 2, the two middle order
    statistics lie at i < j when exactly m draws fall at or below i with one at i, and the other m
    draws fall above i with the lowest at j (a trinomial count): C(n, m) ((i + 1)^m - i^m)
    ((n - j)^m - (n - j - 1)^m); they coincide at i in the rest of the N_m(i + 1) - N_m(i).
    """
    def below(k: int, t: int) -> int:
        return sum(math.comb(n, c) * t ** c * (n - t) ** (n - c) for c in range(k, n + 1))

    k = (n + 1) // 2   # the median's order statistic (odd n), the lower of the two middle ones (even n)
    at = [below(k, s + 1) - below(k, s) for s in range(n)]   # the k-th order statistic at position s
    if n % 2:
        i = j = np.arange(n)
        counts = at
    else:
        first = [(s + 1) ** k - s ** k for s in range(n)]          # k draws at or below s, one at s
        lowest = [(n - s) ** k - (n - s - 1) ** k for s in range(n)]   # the other k above, the lowest at s
        pairs = [(low, high) for low in range(n) for high in range(low, n)]
        counts = [at[low] - math.comb(n, k) * first[low] * (n - low - 1) ** k if low == high
                  else math.comb(n, k) * first[low] * lowest[high] for low, high in pairs]
        i, j = (np.array(side) for side in zip(*pairs))
    probability = np.array([float(c / n ** n) for c in counts])   # exact integers, one rounding
    for a in (i, j, probability):
        a.setflags(write=False)
    return i, j, probability


def _checked(values, statistic: str, nan: bool = False) -> np.ndarray:
    """``values`` as an array of seeds (pairs for "ratio of means"), or a ValueError naming what is
    wrong: an unknown statistic, the wrong shape, fewer than 2 seeds, or a NaN unless ``nan``."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic={statistic!r} is not known; choose one of {', '.join(STATISTICS)}")
    data = np.asarray(values, dtype=np.float64)
    paired = statistic == "ratio of means"
    if (data.ndim != 2 or data.shape[1] != 2) if paired else data.ndim != 1:
        raise ValueError(f"{statistic}: expected {'(seeds, 2) pairs' if paired else 'one number per seed'}, "
                         f"got shape {data.shape}")
    n = data.shape[0]
    if n < 2:
        raise ValueError(f"an interval over seeds needs at least 2 seeds, got {n}")
    if not nan and np.isnan(data).any():
        raise ValueError(f"values contain NaN at seed positions {np.flatnonzero(_gaps(data)).tolist()}")
    return data


def _gaps(data: np.ndarray) -> np.ndarray:
    """The seeds without a value: a NaN (in either member of a pair)."""
    return np.isnan(data).reshape(len(data), -1).any(axis=1)


def bootstrap(values, statistic: str = "mean", level: float = LEVEL) -> Estimate:
    """The statistic over seeds with its seed-bootstrap interval (rules v3).

    The median's resample distribution is exact at any number of seeds (``_median_positions``
    above ``EXACT_LIMIT``; the enumeration of every resample below).

    Args:
        values: one number per seed; for "ratio of means", pairs (numerator, denominator) per seed.
        statistic: one of ``STATISTICS``.
        level: the interval's coverage.

    Raises:
        ValueError: an unknown statistic, fewer than 2 seeds, a NaN, or pairs of the wrong shape.
    """
    data = _checked(values, statistic)
    n = data.shape[0]
    if statistic == "median" and n_multisets(n) > EXACT_LIMIT:
        i, j, probability = _median_positions(n)
        ranked = np.sort(data)
        resampled, method = (ranked[i] + ranked[j]) / 2, "exact bootstrap"
    else:
        counts, probability, method = _resamples(n)
        resampled = _apply(statistic, counts, data)
    value = float(_apply(statistic, np.ones((1, n), dtype=np.int64), data)[0])
    keep = ~np.isnan(resampled)   # 0 / 0 in a ratio of means: that resample has no ratio
    if not keep.all():
        probability = probability[keep] / probability[keep].sum()
        resampled = resampled[keep]
    alpha = (1 - level) / 2
    low, high = weighted_quantile(resampled, probability, alpha), weighted_quantile(resampled, probability, 1 - alpha)
    return Estimate(value, min(low, value), max(high, value), n, statistic, method)


# --- rules v4: intervals that cover ------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _one_key_rows(n: int, labels: tuple[int, ...]) -> np.ndarray:
    """The resamples (rows of ``_resamples(n)``) whose drawn seeds all share one key, where seed i's
    key is labelled by the first seed with the same key (``labels[i]``)."""
    counts = _resamples(n)[0]
    per_key = counts @ (np.array(labels)[:, None] == np.arange(n))
    rows = per_key.max(axis=1) == n
    rows.setflags(write=False)
    return rows


def _studentised(a: np.ndarray, b: np.ndarray | None = None):
    """Ratio of means over the seeds (rows) of each data set (column) of numerators ``a`` and
    denominators ``b`` (n, m); the mean when ``b`` is None (a denominator of 1).

    Returns the ratio r and its delta-method standard error se (m,): the residuals e = a - r b,
    sd(e) / sqrt(n) / |mean(b)|, with n - 1 in the sd; the studentised statistic of each resample
    (``_resamples(n)``), T* = (r* - r) / se* (R, m), NaN where the resample is dropped: its drawn
    seeds all have one value (for pairs: one ratio), so that its se* is zero, or no ratio (0 / 0);
    and the resamples' probabilities (R,) and the method's name.
    """
    n = a.shape[0]
    counts, probability, method = _resamples(n)
    w = counts.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_b = 1.0 if b is None else b.mean(axis=0)
        r = a.mean(axis=0) / mean_b
        e = a - r * (1.0 if b is None else b)
        se = np.sqrt((e * e).sum(axis=0) / (n * (n - 1))) / np.abs(mean_b)
        # a resample's ratio is r* = r + delta, its residuals e - delta b (e - delta for the mean)
        sum_e, squares = w @ e, w @ (e * e)
        if b is None:
            delta = sum_e / n
            squares -= n * delta * delta
        else:
            sum_b = w @ b
            delta = sum_e / sum_b
            squares -= delta * (2 * (w @ (e * b)) - delta * (w @ (b * b)))
            delta *= np.abs(sum_b / n)   # se* divides by |mean(b*)|
        # se* = 0 exactly (not to rounding) where the drawn seeds all have one value (one ratio)
        keys = a if b is None else a / b
        same = (keys[:, None, :] == keys[None, :, :]) | np.eye(n, dtype=bool)[:, :, None]
        labels, which = np.unique(same.argmax(axis=1).T, axis=0, return_inverse=True)   # data sets alike in ties
        tied = np.stack([_one_key_rows(n, tuple(int(i) for i in label)) for label in labels], axis=1)
        squares[tied[:, which.ravel()]] = 0
        np.maximum(squares, 0, out=squares)
        squares /= n * (n - 1)
        t_star = np.divide(delta, np.sqrt(squares, out=squares), out=delta)   # inf or NaN where se* = 0
    t_star[~np.isfinite(t_star)] = np.nan
    return r, se, t_star, probability, method


def _t_quantile(n: int, level: float) -> float:
    from scipy.stats import t
    return float(t.ppf(1 - (1 - level) / 2, n - 1))


def median_minimum(level: float = LEVEL) -> int:
    """The fewest seeds whose median has an order-statistic interval at ``level`` (5 at 90 %)."""
    alpha = (1 - level) / 2
    return math.ceil(-math.log2(alpha) - QUANTILE_TOLERANCE)


def _order_rank(n: int, level: float) -> int:
    """k of the order-statistic interval [x_(k), x_(n+1-k)] of a median: the largest k with
    P(Binomial(n, 1/2) <= k - 1) <= (1 - level) / 2, so that it covers the true median with at
    least ``level`` probability whatever the distribution (continuous)."""
    from scipy.stats import binom
    alpha = (1 - level) / 2
    k = int((binom.cdf(np.arange(n), n, 0.5) <= alpha + QUANTILE_TOLERANCE).sum())
    if k < 1:
        least = median_minimum(level)   # 2 * (1/2)^n <= 1 - level
        raise ValueError(f"the median's order-statistic interval at level {level:g} needs at least {least} seeds, "
                         f"got {n}")
    return k


def _interval(data: np.ndarray, statistic: str, level: float) -> Estimate:
    """``estimate`` on seeds that all have a value."""
    n = data.shape[0]
    if statistic == "median":
        k = _order_rank(n, level)
        ranked = np.sort(data)
        return Estimate(float(np.median(data)), float(ranked[k - 1]), float(ranked[n - k]), n, statistic,
                        "order statistics (exact)")
    a, b = (data[:, :1], data[:, 1:]) if statistic == "ratio of means" else (data[:, None], None)
    r, se, t_star, probability, method = _studentised(a, b)
    r, se, t_star = float(r[0]), float(se[0]), t_star[:, 0]
    half = _t_quantile(n, level) * se
    low, high = r - half, r + half
    kept = ~np.isnan(t_star)
    if kept.any():   # the bootstrap-t interval [r - q(1 - alpha) se, r - q(alpha) se]
        alpha, p = (1 - level) / 2, probability[kept] / probability[kept].sum()
        low = min(low, r - weighted_quantile(t_star[kept], p, 1 - alpha) * se)
        high = max(high, r - weighted_quantile(t_star[kept], p, alpha) * se)
    name = "t ∪ " + method.replace("bootstrap", "bootstrap-t")
    return Estimate(r, low, high, n, statistic, name if b is None else f"delta-method {name}")


def estimate(values, statistic: str = "mean", level: float = LEVEL, missing: str = "bounds") -> Estimate:
    """The statistic over seeds with its rules-v4 interval, which covers at ``level`` (see the
    module's table).

    - "mean": the hull of the Student-t interval (n - 1 degrees of freedom) and the studentised
      bootstrap (bootstrap-t) interval; "ratio of means" the same with the delta-method standard
      error. The bootstrap-t enumerates every resample up to ``EXACT_LIMIT`` (10 seeds), and draws
      ``RESAMPLES`` with a fixed generator above; resamples with zero standard error are dropped.
    - "median": the exact distribution-free order-statistic interval [x_(k), x_(n+1-k)]
      (``_order_rank``); at least 5 seeds at level 0.9.

    Args:
        values: one number per seed; for "ratio of means", pairs (numerator, denominator) per seed.
        statistic: one of ``STATISTICS``.
        level: the interval's coverage.
        missing: "bounds" (default): a seed without a value (NaN; for pairs, a NaN in either
            member) is neither dropped nor guessed: it is put at the smallest and, separately, at
            the largest of the observed seeds (for pairs: the observed pair of the smallest and of
            the largest ratio), and the interval is the hull of the two intervals. The value is the
            statistic over the observed seeds; ``Estimate.missing`` counts the missing seeds.
            "refuse": a NaN is an error.

    Raises:
        ValueError: an unknown statistic or ``missing``, pairs of the wrong shape, fewer than 2
            seeds (or fewer than 2 with a value), a NaN under "refuse", a median of too few seeds.
    """
    if missing not in MISSING:
        raise ValueError(f"missing={missing!r} is not known; choose one of {', '.join(MISSING)}")
    data = _checked(values, statistic, nan=missing == "bounds")
    gaps = _gaps(data)
    if not gaps.any():
        return _interval(data, statistic, level)
    observed = data[~gaps]
    if len(observed) < 2:
        raise ValueError(f"an interval over seeds needs at least 2 seeds with a value, got {len(observed)} "
                         f"of {len(data)}")
    with np.errstate(divide="ignore", invalid="ignore"):
        order = observed[:, 0] / observed[:, 1] if observed.ndim == 2 else observed

    def imputed(seed: np.ndarray) -> np.ndarray:
        full = data.copy()
        full[gaps] = seed
        return full

    bounds = [_interval(imputed(observed[pick(order)]), statistic, level) for pick in (np.nanargmin, np.nanargmax)]
    value = _statistic(statistic, observed)
    return Estimate(value, min(value, *(e.low for e in bounds)), max(value, *(e.high for e in bounds)), len(data),
                    statistic, f"{bounds[0].method}, {gaps.sum()} missing at the observed extremes",
                    int(gaps.sum()))


def _statistic(statistic: str, data: np.ndarray) -> float:
    if statistic == "median":
        return float(np.median(data))
    return float(data.mean() if data.ndim == 1 else data[:, 0].mean() / data[:, 1].mean())


def clopper_pearson(successes: int, trials: int, level: float = LEVEL) -> Estimate:
    """The share ``successes / trials`` with its exact (Clopper–Pearson) binomial interval."""
    from scipy.stats import beta
    if not (isinstance(successes, (int, np.integer)) and isinstance(trials, (int, np.integer))):
        raise ValueError(f"successes and trials must be integers, got {successes!r} and {trials!r}")
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    alpha = (1 - level) / 2
    low = 0.0 if successes == 0 else float(beta.ppf(alpha, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - alpha, successes + 1, trials - successes))
    return Estimate(successes / trials, low, high, int(trials), "share", "Clopper-Pearson")


def exact(value: float, n: int, statistic: str = "worst case") -> Estimate:
    """A number with no sampling uncertainty (a worst case over every seed, an identity)."""
    value = float(value)
    return Estimate(value, value, value, int(n), statistic, "exact")


# --- coverage by simulation ------------------------------------------------------------------------


def _simulate(statistic: str, n: int, family: str, reps: int, seed: int) -> tuple[np.ndarray, float]:
    """``reps`` data sets of ``n`` seeds, in columns ((n, reps), or (n, 2, reps) pairs), and the
    true value of the statistic. Pairs are (1, 2) + ``RATIO_NOISE`` * (noise - its mean), so their
    true ratio of means is 1 / 2 (see ``coverage``)."""
    sample, mean, median = FAMILIES[family]
    rng = np.random.Generator(np.random.PCG64(seed))
    if statistic == "ratio of means":
        return np.array([1.0, 2.0])[:, None] + RATIO_NOISE * (sample(rng, (n, 2, reps)) - mean), 0.5
    return sample(rng, (n, reps)), (median if statistic == "median" else mean)


def _tails(stat: np.ndarray, probability: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each column's quantiles by ``weighted_quantile``'s rule at alpha = (1 - LEVEL) / 2
    and 1 - alpha lie at or below and at or above ``x``: P(stat <= x) >= alpha and
    P(stat < x) < 1 - alpha, over the rows of ``stat`` (R, m) that are not NaN."""
    alpha = (1 - LEVEL) / 2
    with np.errstate(invalid="ignore"):
        kept = probability @ ~np.isnan(stat)
        return (probability @ (stat <= x) / kept >= alpha - QUANTILE_TOLERANCE,
                probability @ (stat < x) / kept < 1 - alpha - QUANTILE_TOLERANCE)


def _covered(statistic: str, data: np.ndarray, theta: float, method: str) -> np.ndarray:
    """Whether the interval of each data set (column of ``data``) holds ``theta``: the interval of
    ``estimate`` (v4) or ``bootstrap`` (v3) at ``LEVEL``, decided without computing its ends (a
    quantile lies below theta when enough probability does)."""
    n = data.shape[0]
    ranked = np.sort(data, axis=0) if statistic == "median" else None
    if method == "v4" and statistic == "median":
        k = _order_rank(n, LEVEL)
        return (ranked[k - 1] <= theta) & (theta <= ranked[n - k])
    if method == "v4":   # the hull of [r -+ t se] and of the bootstrap-t [r - q(1 - alpha) se, r - q(alpha) se]
        a, b = (data[:, 0], data[:, 1]) if statistic == "ratio of means" else (data, None)
        r, se, t_star, probability, _ = _studentised(a, b)
        half = _t_quantile(n, LEVEL) * se
        with np.errstate(divide="ignore", invalid="ignore"):
            q_alpha_below, q_upper_above = _tails(t_star, probability, (r - theta) / se)
        return ((theta >= r - half) | q_upper_above) & ((theta <= r + half) | q_alpha_below)
    # v3: the percentile interval [q(alpha), q(1 - alpha)], widened to hold the value
    if statistic == "median":
        i, j, probability = _median_positions(n)
        resampled, value = (ranked[i] + ranked[j]) / 2, np.median(data, axis=0)
    else:
        counts, probability, _ = _resamples(n)
        resampled = _apply(statistic, counts, data)
        value = _apply(statistic, np.ones((1, n), dtype=np.int64), data)[0]
    q_alpha_below, q_upper_above = _tails(resampled, probability, theta)
    return ((theta >= value) | q_alpha_below) & ((theta <= value) | q_upper_above)


def coverage(statistic: str, n: int, family: str, reps: int = 4000, seed: int = 0, method: str = "v4") -> float:
    """The share of ``reps`` simulated data sets of ``n`` seeds whose ``LEVEL`` interval holds the
    true value of ``statistic``: the interval of ``estimate`` (``method="v4"``) or of ``bootstrap``
    ("v3"). Deterministic (``seed``); every resample of a block of data sets is evaluated at once,
    and each data set is decided as the interval function decides it (``_covered``). At 4,000 data
    sets the standard error of a coverage near 90 % is 0.47 %.

    Families (``FAMILIES``): "normal" (standard normal), "skewed" (lognormal, sigma 0.5: mean
    exp(1/8), median 1), "heavy-tailed" (Student t, 3 degrees of freedom). For "ratio of means" a
    seed is the pair (1 + 0.1 e1, 2 + 0.1 e2), e1 and e2 drawn from the family less its mean, so the
    true ratio of means is 1/2. A denominator falls below zero never for "skewed" (it is at least
    2 - 0.1 exp(1/8)), with probability 3e-89 per seed for "normal", and 1.4e-4 per seed for
    "heavy-tailed" (a few of the 40,000 seeds of 4,000 data sets of 10); the mean of the
    denominators, which the ratio divides by, falls below zero with probability under 6e-6 per
    heavy-tailed data set of 5 seeds (less at 10), and stays above 1.2 in the simulated data sets of
    the tests and the table.
    """
    for name, value, known in (("statistic", statistic, STATISTICS), ("family", family, FAMILIES),
                               ("method", method, METHODS)):
        if value not in known:
            raise ValueError(f"{name}={value!r} is not known; choose one of {', '.join(known)}")
    data, theta = _simulate(statistic, n, family, reps, seed)
    width = max(1, 2 ** 20 // len(_resamples(n)[1]))   # data sets per block: (R, width) arrays of 8 MB
    return float(np.concatenate([_covered(statistic, data[..., start:start + width], theta, method)
                                 for start in range(0, reps, width)]).mean())


def _coverage_table(sizes=(5, 10), reps: int = 4000, seed: int = 0) -> list[tuple[str, int, str, float, float]]:
    """(statistic, n, family, v3 coverage, v4 coverage) for every statistic, size and family."""
    return [(statistic, n, family, *(coverage(statistic, n, family, reps, seed, method) for method in METHODS))
            for statistic in STATISTICS for n in sizes for family in FAMILIES]


@command
def main(argv=None) -> None:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m dlgn_lib.intervals",
                                     description="Intervals over seeds (rules v3 and v4).")
    commands = parser.add_subparsers(dest="command", required=True)
    table = commands.add_parser("coverage", help=f"print the simulated coverage of the {LEVEL:.0%}% intervals")
    table.add_argument("--reps", type=int, default=4000, help="data sets per cell (default 4000)")
    table.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"coverage of the {LEVEL:.0%} intervals, {args.reps:,} simulated data sets per cell (seed {args.seed})")
    print(f"{'statistic':<16}{'n':>3}  {'family':<14}{'v3 bootstrap':>13}{'v4':>8}")
    for statistic, n, family, v3, v4 in _coverage_table(reps=args.reps, seed=args.seed):
        print(f"{statistic:<16}{n:>3}  {family:<14}{v3:>13.3f}{v4:>8.3f}")


if __name__ == "__main__":
    main()
