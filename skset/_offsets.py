"""Features far from zero in float32: what is subtracted from them, in float64, before a float32
computation reads them.

float32 keeps about 7 significant digits: a feature of 1e8 +- 1 arrives as 1e8 exactly, and one
of 1,000 +- 1 keeps its spread but not the digits that products of two such values need (the
similarities of an OTK plan). Each estimator that reads such features subtracts an offset in
float64 first, where it changes nothing but the rounding:

* :func:`recentred` - ``NystromFeatures.transform``'s rows less the fitted ``mean_`` when a
  feature sits more than ``OFFSET_RATIO`` spreads from zero (a Gaussian kernel reads
  differences only);
* :func:`far_offset` - the per-feature offset a fit stores: ``input_offset_`` of the supervised
  OTK models (``OFFSET_RATIO``) and of ``OTKEmbedding`` (``PLAN_OFFSET_RATIO``: the plans read
  products of features, which lose digits at far smaller offsets; it asks as float32 in either
  dtype, since the offset's term also moves unconverged plans).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ._threads import user_stacklevel
from ._weighting import weighted_mean_std

__all__ = ["OFFSET_RATIO", "PLAN_OFFSET_RATIO", "far_offset", "recentred", "unstandardized_mean"]


#: features whose mean is this many spreads from zero (``|mean_| / scale_``) are centred in float64
#: before a float32 map reads them: float32 keeps about 7 digits, so at an offset of 1e8 the
#: spread of unit-variance features would round away
OFFSET_RATIO = 1e3


def recentred(flat: np.ndarray, mean: np.ndarray, scale: np.ndarray, dtype: torch.dtype):
    """``(rows, mean)`` for the map: the rows centred in float64 and a zero mean when the map is
    float32 and a feature sits more than ``OFFSET_RATIO`` spreads from zero, else ``flat`` and
    ``mean`` themselves (the common case, at no cost). An unstandardised model passes ``scale``
    0: its ``mean_`` is non-zero only where a feature is far (:func:`unstandardized_mean`)."""
    if dtype != torch.float32 or not np.any(np.abs(mean) > OFFSET_RATIO * scale):
        return flat, mean
    return flat - mean.astype(np.float64), np.zeros_like(mean)


#: features whose mean is this many spreads from zero are read less their mean by OTKEmbedding
#: in float32: read as they were, float32 similarities moved the embedding by 3% of its range at
#: 100 spreads and made it noise at 1,000 (benchmarks/bench_offsets.py; 0.07% at 10)
PLAN_OFFSET_RATIO = 10.0


def far_offset(sets: list, weights: np.ndarray | None, dtype: torch.dtype,
               max_sets: int = 2000, ratio: float = OFFSET_RATIO,
               max_rows: int = 20000, masses: list | None = None) -> np.ndarray | None:
    """What a float32 network should subtract from each feature, in float64, before it reads the
    sets: the feature's (weighted) mean over up to ``max_sets`` training sets, evenly spaced
    (every few rows of each when they hold more than ``max_rows``: any value near the mean
    serves, the shift is exact), where it is more than ``ratio`` spreads from zero, and 0
    elsewhere; None when no feature is (or the network computes in float64). Sets of weight 0
    and elements of mass 0 (``masses``: one array per set, or None) do not count: the offset is
    that of the fit without them."""
    if masses is not None:
        sets = [s[m > 0] for s, m in zip(sets, masses, strict=True)]
    if weights is not None:
        keep = np.flatnonzero(np.asarray(weights) > 0)
        sets, weights = [sets[i] for i in keep], np.asarray(weights, np.float64)[keep]
    if dtype != torch.float32 or not sets:
        return None
    pick = np.unique(np.linspace(0, len(sets) - 1, min(len(sets), max_sets)).astype(np.int64))
    stride = max(1, -(-sum(len(sets[i]) for i in pick) // max_rows))
    parts = [sets[i][::stride] for i in pick]
    rows = np.concatenate(parts)
    w = None if weights is None else np.repeat(np.asarray(weights, np.float64)[pick],
                                                [len(part) for part in parts])
    if w is not None and not w.any():
        return None
    mean, std = weighted_mean_std(rows, w)
    far = np.abs(mean) > ratio * std
    return np.where(far, mean, 0.0) if far.any() else None


def unstandardized_mean(est, mean: np.ndarray, std: np.ndarray, np_dtype) -> np.ndarray:
    """``mean_`` of a ``NystromFeatures`` fit left unstandardised (``mean``, ``std``: the training
    rows'): zeros, but the mean of the features more than ``PLAN_OFFSET_RATIO`` spreads from zero
    in float32 (``OFFSET_RATIO`` in float64), which the map then reads less it. A Gaussian kernel
    reads differences only, so the map is the same; read as they are, its squared distances
    ``|x|^2 - 2 x.w + |w|^2`` cancel (float32: 0.06 away from float64 at 300 spreads, 0.9 at
    1,000, features of range about 1; float64: 0.001 at 1e6 spreads, 1.1 at 1e8). On the sphere
    (``normalize_``), which reads the features as they are, a warning instead."""
    single = getattr(est, "dtype_", None) == torch.float32
    far = np.abs(mean) > (PLAN_OFFSET_RATIO if single else OFFSET_RATIO) * np.maximum(std, 1e-300)
    if not far.any():
        return np.zeros(len(mean), dtype=np_dtype)
    if not est.normalize_:
        return np.where(far, mean, 0.0).astype(np_dtype)
    warnings.warn(
        f"{type(est).__name__}: features {', '.join(map(str, np.flatnonzero(far)[:5]))} sit more "
        f"than {PLAN_OFFSET_RATIO if single else OFFSET_RATIO:g} spreads from zero; unstandardised "
        "and on the sphere (normalize=True), the map reads their products rounded: standardise "
        "them (standardize=True)" + (" or fit with dtype='float64'." if single else "."),
        UserWarning,
        stacklevel=user_stacklevel())
    return np.zeros(len(mean), dtype=np_dtype)
