"""The statistical rules of skset._stats against independent references (scipy, a naive loop)."""

import numpy as np
import pytest
from scipy import stats

from skset._stats import beats, paired_t, weighted_median


@pytest.mark.parametrize("seed", range(5))
def test_weighted_median_is_the_median_of_the_repeated_values(seed):
    # integer weights: the weighted median is np.median of each value repeated w times
    rng = np.random.RandomState(seed)
    values = rng.normal(size=rng.randint(1, 40))
    weights = rng.randint(1, 6, size=len(values))
    assert weighted_median(values, weights) == np.median(np.repeat(values, weights))
    # the scale of the weights does not matter, down to tiny and up to huge
    for s in (1e-300, 1e300):
        assert weighted_median(values, weights * s) == weighted_median(values, weights)
    # equal weights, exactly or up to rounding, give np.median (even counts: the middle two's mean)
    for n in (1, 2, 3, 4, 10, 11):
        v = rng.normal(size=n)
        assert weighted_median(v, np.full(n, 0.3)) == np.median(v)
        w = np.ones(n)
        w[-1] += 1e-12
        assert weighted_median(v, w) == np.median(v)


def test_weighted_median_of_one_dominant_weight_and_of_ties():
    assert weighted_median(np.array([17.0, 41.0]), np.array([1.0, 1.0])) == 29.0
    assert weighted_median(np.array([17.0, 41.0]), np.array([1.0, 1.2])) == 41.0
    assert weighted_median(np.array([3.0, 1.0, 2.0]), np.array([0.1, 5.0, 0.1])) == 1.0


@pytest.mark.parametrize("n", [2, 3, 16, 200])
def test_paired_t_is_scipys(n):
    rng = np.random.RandomState(n)
    a, b = rng.normal(size=n), rng.normal(size=n)
    assert paired_t(a, b) == pytest.approx(stats.ttest_rel(a, b).statistic, rel=1e-12)
    assert paired_t(b, a) == pytest.approx(-paired_t(a, b), rel=1e-12)


def test_paired_t_of_differences_that_do_not_vary():
    a = np.array([0.5, 0.6, 0.7])
    assert paired_t(a + 0.1, a) == np.inf and paired_t(a, a + 0.1) == -np.inf
    assert paired_t(a, a) == 0.0
    assert paired_t(a[:1] + 1, a[:1]) == np.inf  # one pair
    tiny = a + 1e-3 + np.array([0.0, 1e-14, -1e-14])
    assert paired_t(tiny, a) == np.inf  # a spread below flat counts as none
    assert np.isfinite(paired_t(tiny, a, flat=0.0))
    # rounding noise of equal values (two maps that are one map) is no difference: it was +-inf by
    # the sign of a mean of 1e-16, and NystromFeatures' choice then depended on the data's scale
    noise = a + np.array([1e-16, 2e-16, 0.0])
    assert paired_t(noise, a) == 0.0 and paired_t(a, noise) == 0.0 and not beats(noise, a, 2.0)


def test_beats_needs_a_higher_mean_by_more_than_noise():
    rng = np.random.RandomState(0)
    b = rng.uniform(0.2, 0.8, 64)
    noisy = b + rng.normal(0.02, 0.2, 64)       # higher on average, within its noise
    clear = b + 0.1 + rng.uniform(0, 0.02, 64)  # higher on every pair
    assert noisy.mean() > b.mean() and not beats(noisy, b, 2.0)
    assert beats(clear, b, 2.0) and not beats(b, clear, 2.0)
    assert beats(noisy, b, 2.0) == (stats.ttest_rel(noisy, b).statistic > 2.0)
    assert beats(b + 0.1, b, 2.0)  # constant and positive: not noise
    assert not beats(b, b, 2.0) and not beats(b, b, -1.0)  # no higher mean, whatever the threshold
    for bad in (np.nan, np.inf, -np.inf):  # a non-finite difference never wins
        c = clear.copy()
        c[3] = bad
        assert not beats(c, b, 2.0) and not beats(b, c, 2.0)
