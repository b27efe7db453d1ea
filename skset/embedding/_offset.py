"""``OTKEmbedding``'s features far from zero (``input_offset_``): the sets are read less the
offset (``OTKEmbedding._check_X``, in float64), and these helpers move references, means and
embeddings between that space and the input space, where the fitted attributes stay.

Balanced plans without positions are invariant to a shift of sets and references alike, and every
support takes mass ``1/p``: the raw embedding of the input sets is then that of the shifted sets
plus ``offset / sqrt(p q)`` in every support (:func:`offset_embedding`). Positional weights
(``P * S``) give each set its own column sums: the embedding carries ``offset`` times the pooled
embedding of a column of ones, which :func:`skset.nn.otk.with_ones` appends to the sets (a
reference column of zeros: the similarities do not change) and :func:`split_ones` folds back.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .._offsets import PLAN_OFFSET_RATIO, far_offset
from .._threads import user_stacklevel
from ..nn.otk import with_ones

__all__ = ["check_offset_plans", "drop_offset", "fit_offset", "fitted_dtype", "input_space_mean",
           "offset_embedding", "reference_tensor", "shifted", "split_ones", "with_ones"]


def _offset(otk):
    return getattr(otk, "input_offset_", None)  # absent in models fitted before it


def fit_offset(otk, sets, masses, kept, sw) -> np.ndarray | None:
    """``input_offset_`` for the training ``sets`` (``OTKEmbedding._fit``'s: the sets of
    positive weight ``kept`` (None: all), their weights ``sw`` (None: equal), the elements of
    positive mass (``masses``: one array per set, or None) count):
    :func:`skset._offsets.far_offset` at ``PLAN_OFFSET_RATIO`` where a shift leaves
    the plans as they are (balanced, positions not scaling the similarities; ``"auto"``
    positions: as ``None``, until :func:`drop_offset`), asked as float32 in either dtype (the
    offset's ``c.z_j`` is absorbed from the first column update on: it moved unconverged
    plans); elsewhere None, with a warning in float32, whose unbalanced or similarity-scaled
    plans lose digits to such features and no shift can spare them."""
    if kept is not None:
        sets, masses = [sets[i] for i in kept], None if masses is None else [masses[i] for i in kept]
    offset = far_offset(sets, sw, torch.float32, ratio=PLAN_OFFSET_RATIO, masses=masses)
    if otk.reg_m is None and (otk.position_mode != "similarity"
                              or otk.position_sigma in (None, "auto")):
        return offset
    _warn_far(otk, offset)
    return None


def drop_offset(otk, np_dtype) -> None:
    """``input_offset_`` dropped once ``position_sigma="auto"`` has chosen positions with
    ``position_mode="similarity"``, whose plans read the features as they are (the references,
    fitted without positions, are the same in either space; :func:`fit_offset`'s warning in
    float32)."""
    _warn_far(otk, otk.input_offset_)
    otk.input_offset_ = None
    otk.references_ = otk.references_.astype(np_dtype)


def _warn_far(otk, offset) -> None:
    if offset is not None and otk._tdtype == torch.float32:
        what = "reg_m" if otk.reg_m is not None else "position_mode='similarity'"
        warnings.warn(
            f"{type(otk).__name__}: features {', '.join(map(str, np.flatnonzero(offset)[:5]))} "
            f"sit more than {PLAN_OFFSET_RATIO:g} spreads from zero; with {what} the plans read "
            "products of the features as they are, and float32 rounds them (the embedding can "
            "move by as much as its range): standardise the features first (NystromFeatures "
            "before it does) or fit with dtype='float64'.", UserWarning,
            stacklevel=user_stacklevel())


def shifted(otk, refs: np.ndarray, sign: int) -> np.ndarray:
    """``refs`` (float64) less (``sign=-1``) or plus (``+1``) ``input_offset_``: the space of
    ``OTKEmbedding._check_X``'s sets, or the input space (``refs`` themselves without one)."""
    refs = np.array(refs, dtype=np.float64)  # a copy: the caller may write into it
    return refs if _offset(otk) is None else refs + sign * _offset(otk)


def fitted_dtype(otk, np_dtype):
    """The dtype of ``references_`` and ``mean_``: float64 with an offset (float32 would round
    them by about ``1e-7 * offset``, which the normalised rows near the mean scale up), else
    ``np_dtype``, the compute dtype's."""
    return np.float64 if _offset(otk) is not None else np_dtype


def reference_tensor(otk, refs=None) -> torch.Tensor:
    """``refs`` (default ``references_``) as the plans read them: less ``input_offset_``, in
    the compute dtype, on the estimator's device."""
    refs = otk.references_ if refs is None else refs
    return torch.as_tensor(shifted(otk, refs, -1), dtype=otk._tdtype, device=otk.device_)


def offset_embedding(otk) -> np.ndarray | None:
    """What ``input_offset_`` adds to every raw embedding at mass ``1/p`` a support (float64,
    ``(q*p*d,)``): ``offset / sqrt(p q)``; None without an offset."""
    if _offset(otk) is None:
        return None
    q, p, _ = otk.references_.shape
    return np.tile(_offset(otk) / np.sqrt(p * q), q * p)


def input_space_mean(otk, mean: np.ndarray) -> np.ndarray:
    """A mean raw embedding of the shifted sets in the input space (``mean_``'s)."""
    part = offset_embedding(otk)
    return mean if part is None else mean + part  # float64


def split_ones(pooled: torch.Tensor, offset: np.ndarray) -> torch.Tensor:
    """The pooled ``(B, q, p, d + 1)`` of :func:`skset.nn.otk.with_ones` sets as the input sets'
    raw embedding less :func:`offset_embedding`: ``offset`` times the ones' pooled value beyond
    mass ``1/p``."""
    _, q, p, _ = pooled.shape
    off = torch.as_tensor(offset, dtype=pooled.dtype, device=pooled.device)
    return pooled[..., :-1] + (pooled[..., -1:] - 1.0 / np.sqrt(p * q)) * off


def check_offset_plans(otk) -> None:
    """A ``ValueError`` where a model fitted with ``input_offset_`` now asks for plans a shift
    changes: ``reg_m`` or similarity-scaled positions set since the fit (``set_params``)."""
    sigma = otk._position_sigma  # the width the plans use now: the parameter, or "auto"'s fit
    if otk.reg_m is not None or (otk.position_mode == "similarity" and sigma is not None):
        raise ValueError(
            f"{type(otk).__name__} was fitted on features far from zero and reads them less "
            "input_offset_, which needs balanced plans that a shift leaves as they are: reg_m=None "
            "and no position_mode='similarity' with positions. Set them back, or refit.")
