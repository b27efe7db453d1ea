"""Statistical rules shared by the estimators (numpy only: no scikit-learn, no estimator).

One copy of each rule that more than one choice made from data relies on:

* ``weighted_median``: the median of weighted values (the bandwidth scale of a weighted fit of
  :class:`~skset.NystromFeatures`, ``skset._map_selection.median_scale``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["weighted_median"]


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The smallest value with at least half the total weight at or below it."""
    order = np.argsort(values, kind="stable")
    weights = np.asarray(weights, dtype=np.float64)
    cum = np.cumsum(weights[order] / weights.max())  # scale-free: no under/overflow
    return float(values[order][np.searchsorted(cum, 0.5 * cum[-1])])
