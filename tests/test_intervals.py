"""Intervals over seeds (dlgn_lib.intervals) against hand-computed and brute-force bootstraps, and
the exact binomial interval against binomial tail sums in exact arithmetic."""
from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest

from dlgn_lib import intervals


def brute_force(values, statistic):
    """Every ordered resample (n**n of them, equally likely), in exact arithmetic: the 5 % and 95 %
    quantiles by the module's rule (smallest value whose cumulative probability reaches q)."""
    n = len(values)
    outcomes = {}
    for draw in itertools.product(range(n), repeat=n):
        picked = [values[i] for i in draw]
        if statistic == "mean":
            v = Fraction(sum(Fraction(x) for x in picked), n)
        elif statistic == "median":
            v = Fraction(statistics.median([Fraction(x) for x in picked]))
        else:   # ratio of means of (a, b) pairs
            v = Fraction(sum(Fraction(a) for a, _ in picked), sum(Fraction(b) for _, b in picked))
        outcomes[v] = outcomes.get(v, 0) + 1
    total, cumulative, ends = n ** n, 0, {}
    for v in sorted(outcomes):
        cumulative += outcomes[v]
        for q in (Fraction(5, 100), Fraction(95, 100)):
            if q not in ends and Fraction(cumulative, total) >= q:
                ends[q] = v
    return float(ends[Fraction(5, 100)]), float(ends[Fraction(95, 100)])


def test_a_hand_computed_bootstrap_of_three_seeds():
    # resample means of (1, 2, 4): 1 with probability 1/27, 4/3 with 3/27 (so 4/27 >= 5 % first
    # reached there); 4 with 1/27, 10/3 with 3/27 and everything below 10/3 has 23/27 < 95 %
    estimate = intervals.bootstrap([1, 2, 4])
    assert (estimate.low, estimate.value, estimate.high) == pytest.approx((4 / 3, 7 / 3, 10 / 3), abs=1e-12)
    assert estimate.method == "exact bootstrap" and estimate.n == 3


@pytest.mark.parametrize(("statistic", "values"), [
    ("mean", [0.3, -1.2, 2.5, 0.7, 0.1]),
    ("median", [0.3, -1.2, 2.5, 0.7]),
    ("median", [5, 1, 4, 2, 3]),
    ("ratio of means", [(1, 2), (2, 2), (3, 5), (1, 1), (0.5, 4)]),
])
def test_the_exact_bootstrap_equals_every_ordered_resample_enumerated(statistic, values):
    estimate = intervals.bootstrap(values, statistic)
    assert estimate.method == "exact bootstrap"
    assert (estimate.low, estimate.high) == pytest.approx(brute_force(values, statistic), abs=1e-12)


def test_multiset_probabilities_are_the_multinomial_ones():
    counts, probability = intervals.multisets(6)
    assert len(counts) == math.comb(11, 6) == len({tuple(c) for c in counts})
    assert (counts.sum(axis=1) == 6).all() and probability.sum() == pytest.approx(1, abs=1e-12)
    row = [tuple(c) for c in counts].index((2, 0, 1, 0, 3, 0))
    assert probability[row] == pytest.approx(math.factorial(6) / (2 * 1 * 6) / 6 ** 6, rel=1e-12)


def test_the_drawn_bootstrap_agrees_with_the_exact_distribution_of_the_sum():
    """12 seeds are past the exact limit: the drawn interval is held against the exact
    distribution of the resampled sum, by convolving the seeds' empirical distribution 12 times."""
    values = [3, 0, 7, 1, 1, 4, 9, 2, 5, 5, 0, 6]
    n = len(values)
    assert intervals.n_multisets(n) > intervals.EXACT_LIMIT
    estimate = intervals.bootstrap(values)
    assert estimate.method == f"bootstrap of {intervals.RESAMPLES:,}"
    one = np.zeros(max(values) + 1)
    for v in values:
        one[v] += 1 / n
    total = np.array([1.0])
    for _ in range(n):
        total = np.convolve(total, one)
    cumulative = np.cumsum(total)
    low = np.searchsorted(cumulative, 0.05) / n
    high = np.searchsorted(cumulative, 0.95) / n
    # a drawn quantile lies within a few grid steps (1 / n of the mean) of the exact one
    assert abs(estimate.low - low) <= 2 / n and abs(estimate.high - high) <= 2 / n
    assert intervals.bootstrap(values) == estimate   # the generator is fixed


@pytest.mark.parametrize(("k", "n"), [(3, 10), (1, 5), (7, 12), (0, 10), (10, 10)])
def test_clopper_pearson_ends_put_five_percent_in_each_tail(k, n):
    estimate = intervals.clopper_pearson(k, n)

    def tail_at_least(p):
        return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k, n + 1))

    def tail_at_most(p):
        return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(0, k + 1))

    if k == 0:
        assert estimate.low == 0 and estimate.high == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-10)
    elif k == n:
        assert estimate.high == 1 and estimate.low == pytest.approx(0.05 ** (1 / n), rel=1e-10)
    else:
        assert tail_at_least(estimate.low) == pytest.approx(0.05, abs=1e-10)
        assert tail_at_most(estimate.high) == pytest.approx(0.05, abs=1e-10)
    assert estimate.value == k / n and estimate.method == "Clopper-Pearson"


@pytest.mark.parametrize(("values", "statistic", "message"), [
    ([1.0], "mean", "at least 2 seeds"),
    ([1.0, float("nan"), 2.0], "mean", "NaN at seed positions [1]"),
    ([1.0, 2.0], "mode", "statistic='mode' is not known"),
    ([1.0, 2.0], "ratio of means", "expected (seeds, 2) pairs"),
])
def test_bad_input_is_named(values, statistic, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        intervals.bootstrap(values, statistic)


def test_an_interval_always_holds_its_value():
    # the median of 4 seeds with one far value: the percentile interval is widened to hold it
    for values in ([0, 0, 0, 10], [0, 10, 10, 10], [1, 2, 3, 100]):
        e = intervals.bootstrap(values, "median")
        assert e.low <= e.value <= e.high
