"""Intervals over seeds for verdict checks (rules v3, reconstruction §8.1).

A check's statistic (mean, median, ratio of means) is computed over the seeds of a notebook, and
its uncertainty is a 90 % percentile interval of the seed bootstrap: the seeds are resampled with
replacement, the statistic is recomputed on each resample, and the interval runs from the 5th to
the 95th percentile of those values. Where the number of distinct resamples is small enough
(``EXACT_LIMIT``: up to 10 seeds), every resample is enumerated with its multinomial
probability, so the interval is exact and has no random part; above that, ``RESAMPLES`` resamples
are drawn with a fixed generator (``BOOTSTRAP_SEED``), so a notebook prints the same interval
every time. A count of successes gets the exact (Clopper–Pearson) binomial interval.

The quantile rule: the lower end is the smallest resampled value v with P(statistic <= v) >= 5 %,
the upper end the smallest with P(statistic <= v) >= 95 %. A percentile interval of a skewed
statistic (a median of few seeds) can leave out the value on the seeds themselves; the interval
is then widened to hold it, so that a check never passes on an interval its own value contradicts.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

#: The interval's coverage.
LEVEL = 0.90
#: Enumerate every distinct resample when there are at most this many (C(2n - 1, n) multisets of
#: n seeds: 92,378 for 10 seeds, 352,716 for 11).
EXACT_LIMIT = 100_000
#: Resamples drawn when there are more, and the seed of their generator.
RESAMPLES = 20_000
BOOTSTRAP_SEED = 0
STATISTICS = ("mean", "median", "ratio of means")


@dataclass(frozen=True)
class Estimate:
    """A statistic over seeds with its interval.

    Attributes:
        value: the statistic on the seeds themselves.
        low, high: the interval's ends (``LEVEL`` coverage).
        n: the number of seeds (trials for a binomial count).
        statistic: what was computed (``STATISTICS``, or "share" for a binomial count).
        method: how the interval was found ("exact bootstrap", "bootstrap of 20,000",
            "Clopper-Pearson", or "exact" for a worst case with no interval).
    """
    value: float
    low: float
    high: float
    n: int
    statistic: str
    method: str

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
    index = int(np.searchsorted(cumulative, q - 1e-12, side="left"))
    return float(values[order][min(index, len(values) - 1)])


def bootstrap(values, statistic: str = "mean", level: float = LEVEL) -> Estimate:
    """The statistic over seeds with its seed-bootstrap interval.

    Args:
        values: one number per seed; for "ratio of means", pairs (numerator, denominator) per seed.
        statistic: one of ``STATISTICS``.
        level: the interval's coverage.

    Raises:
        ValueError: an unknown statistic, fewer than 2 seeds, a NaN, or pairs of the wrong shape.
    """
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
    if np.isnan(data).any():
        raise ValueError(f"values contain NaN at seed positions {np.flatnonzero(np.isnan(data).any(axis=-1) if paired else np.isnan(data)).tolist()}")
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
