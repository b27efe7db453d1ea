"""Sets of very different scales: each standardised by its own mean and deviation first, its
scale kept as a feature.

The set networks standardise every element feature by its mean and deviation over all training
elements. Where the sets themselves sit at scales orders of magnitude apart (plug-load current:
an appliance that is off draws noise of 1e-4, a heater hundreds of amperes), that leaves most
sets near zero, alike to the network: on PLAID (11 appliance types, 537 training series whose
within-series deviation spans five orders of magnitude) Deep Sets with defaults scored 30.7 and
the Set Transformer 34.1 against 32.2 for raw mean+max pooling (``benchmarks/results/suite.md``,
"Series never used to choose a default"). ``standardize="auto"`` (the networks' default) then
reads each set less its mean over its deviation, feature by feature, beside the logarithm of
that deviation (floored at ``set_scale_floor_``, the smallest deviation of the training sets)
as one more feature per feature, constant over the set: the shape in the first half, the scale
in the second, both of unit size after the global standardisation. The rule: the training
sets' deviations span more than ``SET_SCALE_SPREAD`` between their 10th and 90th percentiles
(every data set of the suite: at most 17, BasicMotions; PLAID 1.25e5; Covid3Month's case
counts 280). It runs before the k-mers and the global standardisation, at fit and predict, and
on padded tensors in the exported module.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SET_SCALE_SPREAD", "SET_SCALE_MIN_SETS", "CONSTANT_RELATIVE", "fit_set_scale",
           "read_set_scale", "scale_floor", "scale_spread", "set_standardized",
           "set_standardized_tensor"]

#: the spread (90th over 10th percentile of the sets' deviations) above which sets are
#: standardised one by one
SET_SCALE_SPREAD = 100.0
#: the fewest sets of two elements or more the spread is read from
SET_SCALE_MIN_SETS = 10
#: a feature of a set whose deviation is at most this times its largest magnitude in the set is
#: constant there (rounding in the mean, not variation): it reads 0
CONSTANT_RELATIVE = 1e-6


def _set_stats(sets: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each set's mean, population deviation and largest magnitude per feature, ``(N, d)`` each,
    in float64, in one pass over the concatenated elements."""
    lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    E = np.concatenate(sets).astype(np.float64, copy=False)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    mean = np.add.reduceat(E, starts, axis=0) / lengths[:, None]
    dev = E - np.repeat(mean, lengths, axis=0)
    std = np.sqrt(np.add.reduceat(dev * dev, starts, axis=0) / lengths[:, None])
    top = np.maximum.reduceat(np.abs(E), starts, axis=0)
    return mean, std, top


def scale_spread(sets: list, sample_weight=None) -> float:
    """The 90th over the 10th percentile of the sets' deviations (the root mean square over the
    features of each set's deviation relative to that feature's deviation over all elements), over
    the sets of two elements or more and positive weight; 1.0 with fewer than
    ``SET_SCALE_MIN_SETS`` of them, ``inf`` where the 10th percentile is 0."""
    keep = [i for i, s in enumerate(sets) if len(s) > 1
            and (sample_weight is None or sample_weight[i] > 0)]
    if len(keep) < SET_SCALE_MIN_SETS:
        return 1.0
    sub = [sets[i] for i in keep]
    _, std, _ = _set_stats(sub)
    overall = np.concatenate(sub).astype(np.float64, copy=False).std(0)
    overall = np.where(overall > 0, overall, 1.0)
    scale = np.sqrt(np.mean((std / overall) ** 2, axis=1))
    low, high = np.percentile(scale, [10, 90])
    return float(high / low) if low > 0 else float("inf")


def fit_set_scale(est, sets: list, sample_weight=None) -> None:
    """Set ``est.set_standardized_`` (``standardize="auto"`` and a spread above
    ``SET_SCALE_SPREAD``) and ``est.set_scale_floor_`` (``None`` without) from the training
    sets."""
    est.set_standardized_ = bool(est.standardize == "auto"
                                 and scale_spread(sets, sample_weight) > SET_SCALE_SPREAD)
    est.set_scale_floor_ = scale_floor(sets, sample_weight) if est.set_standardized_ else None


def read_set_scale(est, sets: list) -> list:
    """The sets as a fitted ``est`` reads them: :func:`set_standardized` with its floor where
    ``set_standardized_`` (absent in models fitted before it: the sets unchanged)."""
    if not getattr(est, "set_standardized_", False):
        return sets
    return set_standardized(sets, est.set_scale_floor_)


def scale_floor(sets: list, sample_weight=None) -> np.ndarray:
    """``(d,)``: per feature, the smallest positive deviation of a training set of positive weight
    (1.0 where none has one), the floor of the scale feature: a set of one element, or constant,
    reads as the quietest training set."""
    keep = [s for i, s in enumerate(sets) if sample_weight is None or sample_weight[i] > 0]
    _, std, top = _set_stats(keep)
    std = np.where(std > CONSTANT_RELATIVE * top, std, np.inf)
    low = std.min(0)
    return np.where(np.isfinite(low), low, 1.0)


def set_standardized(sets: list, floor: np.ndarray) -> list:
    """Each set less its mean over its deviation, per feature, beside ``log(max(deviation,
    floor))`` of each feature (``(n_i, 2 d)``), computed in float64 and returned in the set's
    dtype (new arrays); a feature constant in a set (see ``CONSTANT_RELATIVE``) reads 0 in the
    first half, as does a set of one element."""
    if not sets:
        return sets
    mean, std, top = _set_stats(sets)
    constant = std <= CONSTANT_RELATIVE * top
    lengths = [len(s) for s in sets]
    E = np.concatenate(sets).astype(np.float64, copy=False)
    rep = lambda a: np.repeat(a, lengths, axis=0)  # noqa: E731
    rows = np.where(rep(constant), 0.0, (E - rep(mean)) / rep(np.where(constant, 1.0, std)))
    rows = np.hstack([rows, rep(np.log(np.maximum(np.where(constant, 0.0, std), floor)))])
    dtypes = {s.dtype for s in sets}
    if len(dtypes) == 1:
        return np.split(rows.astype(dtypes.pop(), copy=False), np.cumsum(lengths)[:-1])
    return [r.astype(s.dtype, copy=False) for r, s in zip(np.split(rows, np.cumsum(lengths)[:-1]),
                                                            sets, strict=True)]


def set_standardized_tensor(x: torch.Tensor, mask: torch.Tensor, floor: torch.Tensor) -> torch.Tensor:
    """:func:`set_standardized` on padded sets ``x (B, n, d)`` with their ``mask (B, n)``:
    ``(B, n, 2 d)`` in ``x``'s dtype; padded rows read 0."""
    m = mask.unsqueeze(-1)
    count = mask.sum(1, keepdim=True).clamp(min=1).unsqueeze(-1).to(x.dtype)
    xz = torch.where(m, x, torch.zeros_like(x))
    mean = xz.sum(1, keepdim=True) / count
    dev = torch.where(m, x - mean, torch.zeros_like(x))
    std = torch.sqrt((dev * dev).sum(1, keepdim=True) / count)
    constant = std <= CONSTANT_RELATIVE * xz.abs().amax(1, keepdim=True)
    shape = torch.where(constant, torch.zeros_like(dev),
                        dev / torch.where(constant, torch.ones_like(std), std))
    level = torch.log(torch.maximum(torch.where(constant, torch.zeros_like(std), std),
                                    floor.to(x.dtype))).expand_as(x)
    return torch.where(m, torch.cat([shape, level], -1), torch.zeros((), dtype=x.dtype))
