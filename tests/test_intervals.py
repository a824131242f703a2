"""Intervals over seeds (dlgn_lib.intervals) against hand-computed and brute-force bootstraps, and
the exact binomial interval against binomial tail sums in exact arithmetic."""
from __future__ import annotations

import itertools
import math
import re
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


# --- the exact median beyond the enumeration limit (rules v3) ----------------------------------------

@pytest.mark.parametrize("n", range(2, 11))
def test_the_median_positions_are_the_enumerated_resample_distribution(n):
    counts, probability = intervals.multisets(n)
    values = np.random.default_rng(n).standard_normal(n)
    enumerated = intervals._apply("median", counts, values)
    i, j, p = intervals._median_positions(n)
    ranked = np.sort(values)
    exact = (ranked[i] + ranked[j]) / 2
    assert p.sum() == pytest.approx(1, abs=1e-14) and (p >= 0).all()
    for v in np.unique(enumerated):
        assert p[exact <= v].sum() == pytest.approx(probability[enumerated <= v].sum(), abs=1e-13)


@pytest.mark.parametrize("values", [
    [3.1, 0.2, 7.5, 1.4, 1.9, 4.0, 9.3, 2.2, 5.6, 5.0, 0.7],          # n = 11: the drawn path slipped here
    [3, 0, 7, 1, 1, 4, 9, 2, 5, 5, 0],                                 # ties
    [3.1, 0.2, 7.5, 1.4, 1.9, 4.0, 9.3, 2.2, 5.6, 5.0, 0.7, 6.1],     # n = 12: even, two middle seeds
])
def test_the_median_beyond_the_exact_limit_follows_the_rule_on_every_resample(values):
    """Every distinct resample of 11 or 12 seeds (352,716 and 1,352,078 multisets) with its
    multinomial probability: the module's quantile rule applied to all of them."""
    n = len(values)
    assert intervals.n_multisets(n) > intervals.EXACT_LIMIT
    counts, probability = intervals._multisets.__wrapped__(n)   # not kept in the cache
    medians = intervals._apply("median", counts, np.asarray(values, dtype=float))
    low, high = (intervals.weighted_quantile(medians, probability, q) for q in (0.05, 0.95))
    estimate = intervals.bootstrap(values, "median")
    assert (estimate.low, estimate.high) == (min(low, estimate.value), max(high, estimate.value))
    assert estimate.method == "exact bootstrap"


# --- rules v4: estimate ------------------------------------------------------------------------------

def brute_force_t(values, statistic):
    """The Student-t interval (scipy.stats.t) and the bootstrap-t interval over every ordered
    resample (n**n, equally likely), each resample's standard error computed from its own seeds;
    resamples whose seeds all have one value (one ratio for pairs) are dropped."""
    from scipy.stats import t
    data = np.asarray(values, dtype=float)
    n = len(data)
    draws = data[np.array(list(itertools.product(range(n), repeat=n)))]

    def ratio_and_se(d):
        if statistic == "mean":
            return d.mean(axis=-1), d.std(axis=-1, ddof=1) / math.sqrt(n), d
        a, b = d[..., 0], d[..., 1]
        r = a.sum(axis=-1) / b.sum(axis=-1)
        residual = a - r[..., None] * b
        return r, residual.std(axis=-1, ddof=1) / math.sqrt(n) / np.abs(b.mean(axis=-1)), a / b

    r, se, _ = ratio_and_se(data)
    low_t, high_t = t.interval(0.9, n - 1, loc=r, scale=se)
    r_star, se_star, keys = ratio_and_se(draws)
    kept = np.ptp(keys, axis=-1) > 0
    studentised = np.sort((r_star[kept] - r) / se_star[kept])
    count = len(studentised)
    q05, q95 = studentised[math.ceil(0.05 * count - 1e-9) - 1], studentised[math.ceil(0.95 * count - 1e-9) - 1]
    return (low_t, high_t), (r - q95 * se, r - q05 * se)


@pytest.mark.parametrize(("statistic", "values"), [
    ("mean", [0.3, -1.2, 2.5, 0.7, 0.1]),
    ("mean", [0.1, 0.2, 0.3, 0.5, 3.0]),                        # skewed: the bootstrap-t reaches further up
    ("mean", [1, 1, 1, 1, 5]),                                 # ties: resamples of the 1s alone are dropped
    ("mean", [2.0, 0.5, 1.5, 4.0]),
    ("ratio of means", [(1, 2), (2, 2), (3, 5), (1, 1), (0.5, 4)]),
    ("ratio of means", [(1, 2), (2, 4), (1, 2), (3, 5), (0.5, 1)]),   # four seeds of one ratio
])
def test_the_v4_interval_is_the_hull_of_t_and_bootstrap_t(statistic, values):
    (low_t, high_t), (low_b, high_b) = brute_force_t(values, statistic)
    estimate = intervals.estimate(values, statistic)
    assert (estimate.low, estimate.high) == pytest.approx((min(low_t, low_b), max(high_t, high_b)), abs=1e-12)
    assert estimate.method == ("" if statistic == "mean" else "delta-method ") + "t ∪ exact bootstrap-t"
    if values == [0.1, 0.2, 0.3, 0.5, 3.0]:
        assert high_b > high_t and low_t < low_b   # each end from its own part


def test_the_v4_interval_of_many_seeds_draws_resamples_and_holds_the_t_interval():
    from scipy.stats import t
    values = [3, 0, 7, 1, 1, 4, 9, 2, 5, 5, 0, 6]
    estimate = intervals.estimate(values)
    low, high = t.interval(0.9, 11, loc=np.mean(values), scale=np.std(values, ddof=1) / math.sqrt(12))
    assert estimate.low <= low + 1e-12 and high - 1e-12 <= estimate.high
    assert estimate.method == f"t ∪ bootstrap-t of {intervals.RESAMPLES:,}"
    assert intervals.estimate(values) == estimate   # the generator is fixed


def test_seeds_of_one_value_have_a_point_interval():
    assert intervals.estimate([2.0] * 5) == intervals.Estimate(2.0, 2.0, 2.0, 5, "mean", "t ∪ exact bootstrap-t")


@pytest.mark.parametrize("n", range(5, 31))
def test_the_median_interval_is_the_order_statistic_one(n):
    """k from a binomial sum in exact arithmetic: the largest k with P(Binomial(n, 1/2) <= k - 1) <= 5 %."""
    k = max(k for k in range(1, n + 1) if Fraction(sum(math.comb(n, j) for j in range(k)), 2 ** n) <= Fraction(1, 20))
    values = np.random.default_rng(n).standard_normal(n)
    ranked = np.sort(values)
    estimate = intervals.estimate(values, "median")
    assert (estimate.low, estimate.value, estimate.high) == (ranked[k - 1], np.median(values), ranked[n - k])
    assert estimate.method == "order statistics (exact)"


def test_the_median_interval_names_the_seeds_it_needs():
    with pytest.raises(ValueError, match="needs at least 5 seeds, got 4"):
        intervals.estimate([1, 2, 3, 4], "median")
    with pytest.raises(ValueError, match="needs at least 6 seeds, got 5"):
        intervals.estimate([1, 2, 3, 4, 5], "median", level=0.95)
    assert intervals.estimate([1, 2, 3, 4, 5, 6], "median", level=0.95).low == 1


nan = float("nan")


@pytest.mark.parametrize(("statistic", "values", "low_fill", "high_fill"), [
    ("mean", [1.0, nan, 3.0, 2.5, nan, 0.5], 0.5, 3.0),
    ("median", [1.0, nan, 3.0, 2.5, 0.7, 0.5], 0.5, 3.0),
    # ratios 0.5, 1, 0.6, 1, 0.125: the smallest from (0.5, 4), the largest from (2, 2) (the first of two)
    ("ratio of means", [(1, 2), (2, 2), (3, 5), (nan, 1), (1, 1), (0.5, 4), (2, nan)], (0.5, 4), (2, 2)),
])
def test_missing_seeds_are_bounded_by_two_imputations(statistic, values, low_fill, high_fill):
    gaps = [i for i, v in enumerate(values) if np.isnan(v).any()]

    def filled(fill):
        return [fill if i in gaps else v for i, v in enumerate(values)]

    at_low, at_high = intervals.estimate(filled(low_fill), statistic), intervals.estimate(filled(high_fill), statistic)
    observed = [v for i, v in enumerate(values) if i not in gaps]
    value = {"mean": np.mean, "median": np.median}[statistic](observed) if statistic != "ratio of means" else \
        sum(a for a, _ in observed) / sum(b for _, b in observed)
    estimate = intervals.estimate(values, statistic)
    assert estimate.value == pytest.approx(value, rel=1e-14)
    assert (estimate.low, estimate.high) == (min(at_low.low, at_high.low, estimate.value),
                                             max(at_low.high, at_high.high, estimate.value))
    assert estimate.missing == len(gaps) and estimate.n == len(values)
    assert f"{len(gaps)} missing" in estimate.method


@pytest.mark.parametrize(("call", "message"), [
    (lambda: intervals.estimate([1.0, nan, 2.0], missing="refuse"), "NaN at seed positions [1]"),
    (lambda: intervals.estimate([1.0, nan, nan]), "at least 2 seeds with a value, got 1 of 3"),
    (lambda: intervals.estimate([1.0, 2.0], missing="drop"), "missing='drop' is not known"),
    (lambda: intervals.estimate([1.0]), "at least 2 seeds, got 1"),
    (lambda: intervals.estimate([1.0, 2.0], "mode"), "statistic='mode' is not known"),
    (lambda: intervals.estimate([1.0, 2.0], "ratio of means"), "expected (seeds, 2) pairs"),
    (lambda: intervals.estimate([[1.0, 2.0]], "mean"), "expected one number per seed"),
])
def test_bad_input_to_estimate_is_named(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
