"""Statistical rules shared by the estimators (numpy only: no scikit-learn, no estimator).

One copy of each rule that more than one choice made from data relies on:

* ``weighted_median``: the median of weighted values (the bandwidth scale of a weighted fit of
  :class:`~skset.NystromFeatures`, ``skset._map_selection.median_scale``);
* ``paired_t`` and ``beats``: "a challenger replaces the incumbent only when it is better by more
  than noise", a paired t statistic over the same samples (the sets of the element map's
  leave-one-out errors, ``skset._map_selection``; the validation instances of
  :class:`~skset.cluster.ABCClusterer`'s prior and kernel, ``skset.cluster._abc_select``) above a
  threshold each caller keeps as its own constant.
"""

from __future__ import annotations

import numpy as np

__all__ = ["beats", "paired_t", "weighted_median"]


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """``np.median`` of each value repeated as often as its weight says: the mean of the smallest
    value with at least half the total weight at or below it and the smallest with more than
    half. Integer weights give the median of the repeated values exactly, equal weights
    ``np.median(values)``; cumulative weights within 1e-9 of half the total count as half, so
    that weights equal up to rounding give the unweighted median too."""
    order = np.argsort(values, kind="stable")
    weights = np.asarray(weights, dtype=np.float64)
    cum = np.cumsum(weights[order] / weights.max())  # scale-free: no under/overflow
    half, tol = 0.5 * cum[-1], 1e-9 * cum[-1]
    last = len(cum) - 1
    lower = min(int(np.searchsorted(cum, half - tol, side="left")), last)
    upper = min(int(np.searchsorted(cum, half + tol, side="right")), last)
    ordered = values[order]
    return float(ordered[lower]) if lower == upper else float((ordered[lower] + ordered[upper]) / 2)


def paired_t(a: np.ndarray, b: np.ndarray, *, flat: float = 1e-12) -> float:
    """The paired t statistic of ``a - b``: ``mean / (sd / sqrt(n))`` with the sample standard
    deviation (``ddof=1``). Differences that do not vary (``sd <= flat``, or one pair) give
    ``inf`` / ``-inf`` by the sign of their mean, 0 when it is within ``flat`` of 0 (the
    rounding of two equal computations, such as two maps that are one map: their sign is noise,
    and it made the choice depend on the data's scale); non-finite differences give NaN (or
    +-inf for a single pair)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    if sd <= flat:
        return float(np.sign(mean) * np.inf) if abs(mean) > flat else 0.0
    return mean / (sd / np.sqrt(len(d)))


def beats(a: np.ndarray, b: np.ndarray, min_t: float, *, flat: float = 1e-12) -> bool:
    """Whether the paired values ``a`` are higher than ``b`` by more than noise: every difference
    finite, a positive mean, and :func:`paired_t` (with ``flat``) above ``min_t``. For errors,
    where lower is better, pass the incumbent's first: ``beats(incumbent, challenger, ...)``."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if not np.all(np.isfinite(d)) or d.mean() <= 0:
        return False
    return paired_t(a, b, flat=flat) > min_t
