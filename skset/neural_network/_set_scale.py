"""Sets of very different scales: each read by its own mean and deviation first, both kept as
features.

The set networks standardise every element feature by its mean and deviation over all training
elements. Where the sets themselves sit at scales orders of magnitude apart (plug-load current:
an appliance that is off draws noise of 1e-4, a heater hundreds of amperes), that leaves most
sets near zero, alike to the network: on PLAID (11 appliance types, 537 training series whose
within-series deviation spans five orders of magnitude) Deep Sets with defaults scored 30.7 and
the Set Transformer 34.1 against 32.2 for raw mean+max pooling (``benchmarks/results/suite.md``,
"Series never used to choose a default"). ``standardize="auto"`` (the networks' default) then
reads each set's elements less the set's mean over its deviation, feature by feature (the
shape: what the k-mers are read from), and appends to every element, after the k-mers, the
set's mean and the logarithm of its deviation (floored at ``set_scale_floor_``, the smallest
deviation of a training set), constant over the set: nothing of the set is lost, and the global
standardisation then reads each part on its own footing. The rule: the training sets'
deviations span more than ``SET_SCALE_SPREAD`` between their 10th and 90th percentiles (every
data set of the suite: at most 17, BasicMotions; PLAID 1.25e5; Covid3Month's case counts 280),
sets whose every feature is constant left out. It runs at fit and predict, and on padded
tensors in the exported module (``KmerFront``).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SET_SCALE_SPREAD", "SET_SCALE_MIN_SETS", "CONSTANT_RELATIVE", "fit_set_scale",
           "read_set_scale", "scale_floor", "scale_spread", "set_standardized",
           "set_standardized_tensor", "with_summary"]

#: the spread (90th over 10th percentile of the sets' deviations) above which sets are
#: standardised one by one
SET_SCALE_SPREAD = 100.0
#: the fewest sets of two elements or more the spread is read from
SET_SCALE_MIN_SETS = 10
#: a feature of a set whose deviation is at most this times its largest magnitude in the set is
#: constant there (rounding of the float64 mean, not variation: 1e-6 read a feature of 1e7 and
#: a deviation of 1 as constant): it reads 0
CONSTANT_RELATIVE = 1e-12


def _set_stats(sets: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each set's mean, population deviation and largest magnitude per feature, ``(N, d)`` each,
    in float64, in one pass over the concatenated elements; the deviation is computed on the
    deviations over the largest magnitude (no square underflows, in float32 either: see
    :func:`set_standardized_tensor`), and is 0 for a feature constant in the set (at most
    ``CONSTANT_RELATIVE`` of its magnitude: rounding in the mean)."""
    lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    E = np.concatenate(sets).astype(np.float64, copy=False)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    mean = np.add.reduceat(E, starts, axis=0) / lengths[:, None]
    top = np.maximum.reduceat(np.abs(E), starts, axis=0)
    dev = (E - np.repeat(mean, lengths, axis=0)) / np.repeat(np.where(top > 0, top, 1.0), lengths, axis=0)
    std = top * np.sqrt(np.add.reduceat(dev * dev, starts, axis=0) / lengths[:, None])
    return mean, np.where(std > CONSTANT_RELATIVE * top, std, 0.0), top


def _multi_element_sets(sets: list, sample_weight=None) -> list:
    """The sets of two elements or more and positive weight: those a scale is read from (one
    element has none)."""
    return [s for i, s in enumerate(sets) if len(s) > 1
            and (sample_weight is None or sample_weight[i] > 0)]


def _spread(sub: list, std: np.ndarray) -> float:
    """:func:`scale_spread` of the sets ``sub`` whose deviations (:func:`_set_stats`) are ``std``."""
    overall = np.concatenate(sub).astype(np.float64, copy=False).std(0)
    overall = np.where(overall > 0, overall, 1.0)
    scale = np.sqrt(np.mean((std / overall) ** 2, axis=1))
    scale = scale[scale > 0]
    if len(scale) < SET_SCALE_MIN_SETS:
        return 1.0
    low, high = np.percentile(scale, [10, 90])
    return float(high / low)


def _floor(std: np.ndarray) -> np.ndarray:
    """:func:`scale_floor` from the sets' deviations ``std`` (0 where constant)."""
    low = np.where(std > 0, std, np.inf).min(0)
    return np.where(np.isfinite(low), low, 1.0)


def scale_spread(sets: list, sample_weight=None) -> float:
    """The 90th over the 10th percentile of the sets' deviations (the root mean square over the
    features of each set's deviation relative to that feature's deviation over all elements), over
    the sets of positive weight with a feature that is not constant (a set of one element, or of
    one repeated row, has no scale); 1.0 with fewer than ``SET_SCALE_MIN_SETS`` of them."""
    sub = _multi_element_sets(sets, sample_weight)
    return 1.0 if len(sub) < SET_SCALE_MIN_SETS else _spread(sub, _set_stats(sub)[1])


def fit_set_scale(est, sets: list, sample_weight=None) -> None:
    """Set ``est.set_standardized_`` (``standardize="auto"`` and a spread above
    ``SET_SCALE_SPREAD``) and ``est.set_scale_floor_`` (``None`` without) from the training
    sets, their statistics computed once for both."""
    est.set_standardized_, est.set_scale_floor_ = False, None
    sub = _multi_element_sets(sets, sample_weight)
    if est.standardize != "auto" or len(sub) < SET_SCALE_MIN_SETS:
        return
    std = _set_stats(sub)[1]
    if _spread(sub, std) > SET_SCALE_SPREAD:
        est.set_standardized_, est.set_scale_floor_ = True, _floor(std)


def read_set_scale(est, sets: list) -> tuple[list, np.ndarray | None]:
    """``(shapes, summary)``: the sets as a fitted ``est`` reads them before its k-mers, and
    each set's mean and log deviation to append after them (:func:`with_summary`); the sets
    unchanged and ``None`` without ``set_standardized_`` (absent in models fitted before it)."""
    if not getattr(est, "set_standardized_", False) or not sets:
        return sets, None
    return set_standardized(sets, est.set_scale_floor_)


def scale_floor(sets: list, sample_weight=None) -> np.ndarray:
    """``(d,)``: per feature, the smallest positive deviation of a training set of positive weight
    (1.0 where none has one), the floor of the scale feature: a set of one element, or constant,
    reads as the quietest training set."""
    sub = _multi_element_sets(sets, sample_weight)  # one element: no deviation
    return _floor(_set_stats(sub)[1]) if sub else np.ones(sets[0].shape[1])


def set_standardized(sets: list, floor: np.ndarray) -> tuple[list, np.ndarray]:
    """``(shapes, summary)``: each set less its mean over its deviation, per feature (a feature
    constant in a set, or a set of one element, reads 0), computed in float64 and returned in the
    set's dtype (new arrays); and ``(N, 2 d)`` float64, each set's mean and ``log(max(deviation,
    floor))``."""
    mean, std, _ = _set_stats(sets)
    lengths = [len(s) for s in sets]
    E = np.concatenate(sets).astype(np.float64, copy=False)
    rep = lambda a: np.repeat(a, lengths, axis=0)  # noqa: E731
    rows = np.where(rep(std) > 0, (E - rep(mean)) / rep(np.where(std > 0, std, 1.0)), 0.0)
    return _split_as(rows, sets), np.hstack([mean, np.log(np.maximum(std, floor))])


def with_summary(sets: list, summary: np.ndarray | None) -> list:
    """Each set (its coded k-mers) with its row of ``summary`` appended to every element, in the
    set's dtype; the sets unchanged for ``None``."""
    if summary is None or not sets:
        return sets
    rows = np.hstack([np.concatenate(sets), np.repeat(summary, [len(s) for s in sets], axis=0)])
    return _split_as(rows, sets)


def _split_as(rows: np.ndarray, sets: list) -> list:
    """``rows`` (the sets' elements, stacked) split back into sets, each in its set's dtype."""
    cuts = np.cumsum([len(s) for s in sets])[:-1]
    dtypes = {s.dtype for s in sets}
    if len(dtypes) == 1:  # one cast, then views
        return np.split(rows.astype(dtypes.pop(), copy=False), cuts)
    return [p.astype(s.dtype, copy=False) for p, s in zip(np.split(rows, cuts), sets, strict=True)]


def set_standardized_tensor(x: torch.Tensor, mask: torch.Tensor, floor: torch.Tensor):
    """:func:`set_standardized` on padded sets ``x (B, n, d)`` with their ``mask (B, n)``: the
    shapes ``(B, n, d)`` (padded rows 0) and the summary ``(B, 1, 2 d)``, in ``x``'s dtype. The
    statistics are computed in float64 (not on MPS, which has none), as the estimators compute
    them, the deviation on the deviations over each set's largest magnitude (no square
    underflows); ``floor`` (float64: a float32 floor below 1.4e-45 was 0, and a constant set's
    log scale -inf)."""
    work = torch.float64 if x.device.type != "mps" else x.dtype
    xw, fw = x.to(work), floor.to(work)
    m = mask.unsqueeze(-1)
    count = mask.sum(1, keepdim=True).clamp(min=1).unsqueeze(-1).to(work)
    xz = torch.where(m, xw, torch.zeros_like(xw))
    mean = xz.sum(1, keepdim=True) / count
    top = xz.abs().amax(1, keepdim=True)
    rel = torch.where(m, (xw - mean) / torch.where(top > 0, top, torch.ones_like(top)),
                      torch.zeros_like(xw))
    std = top * torch.sqrt((rel * rel).sum(1, keepdim=True) / count)
    std = torch.where(std > CONSTANT_RELATIVE * top, std, torch.zeros_like(std))
    shape = torch.where(m & (std > 0), (xw - mean) / torch.where(std > 0, std, torch.ones_like(std)),
                        torch.zeros_like(xw))
    summary = torch.cat([mean, torch.log(torch.maximum(std, fw))], -1)
    return shape.to(x.dtype), summary.to(x.dtype)
