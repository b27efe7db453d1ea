"""How the data-driven rules read the labels a fit is given (the element map, the k-mer width
and dilation of :mod:`skset._map_selection`, ``position_sigma="auto"`` of
:mod:`skset.embedding._position_choice`): the task they set (classification, regression or
none), the sets of the classes of two sets or more, and the ridge targets of the proxy."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.multiclass import type_of_target

__all__ = ["MIN_SETS", "TARGET_TYPES", "_shared_classes", "_targets", "_task", "check_target_type",
           "target_kind"]

#: the fewest labelled sets a rule chooses from (fewer: the fixed choice)
MIN_SETS = 10
#: what ``target_type`` takes (:func:`_task`), scikit-learn's names (``TargetEncoder``)
TARGET_TYPES = ("auto", "continuous", "binary", "multiclass")


def _shared_classes(y: np.ndarray) -> np.ndarray:
    """Which sets belong to a class of at least two sets (a class of one set has no spread to
    compare with)."""
    _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    return counts[inverse.ravel()] >= 2


def _numbers(y: np.ndarray) -> np.ndarray:
    """Numbers in an object column as a numeric array (``type_of_target`` says "unknown")."""
    if y.dtype == object and all(isinstance(v, numbers.Number) for v in y.tolist()):
        return np.asarray(y.tolist())
    return y


def check_target_type(y, target_type: str, name: str = "") -> None:
    """A ``ValueError`` where a given ``y`` (one label per set) is not of the kind
    ``target_type`` names: ``"continuous"`` targets that are not numbers, ``"binary"`` labels of
    more than two classes. Checked in ``fit`` whether or not a rule then reads ``y``."""
    if y is None or target_type in ("auto", "multiclass"):
        return
    try:
        y = np.asarray(y)
    except ValueError:  # ragged: per-element labels, read by no rule
        return
    if y.ndim != 1:
        return
    y = _numbers(y)
    where = f"{name}: " if name else ""
    if target_type == "continuous" and y.dtype.kind not in "biuf":
        raise ValueError(f"{where}target_type='continuous' needs numeric targets, got dtype "
                         f"{y.dtype}.")
    if target_type == "binary" and (k := np.unique(y).size) > 2:
        raise ValueError(f"{where}target_type='binary' got {k} classes.")


def target_kind(y, target_type: str) -> str:
    """``target_type`` made explicit on the whole ``y`` (``"continuous"`` or ``"multiclass"``
    for a task :func:`_task` reads; the parameter itself otherwise): for a caller that then
    reads a sample of ``y``, whose own shares of values held by one set differ."""
    kind = _task(y, len(y), target_type) if y is not None and np.ndim(y) == 1 else None
    return {"regression": "continuous", "classification": "multiclass"}.get(kind, target_type)


def _task(y, n_sets: int, target_type: str = "auto"):
    """``"classification"``, ``"regression"`` or ``None`` (no usable labels). ``target_type``
    (:data:`TARGET_TYPES`): ``"continuous"``, the targets are real numbers whatever their
    values (a regressor's targets that happen to be whole numbers are not classes);
    ``"binary"`` or ``"multiclass"``, classes whatever their values; ``"auto"``, scikit-learn's
    ``type_of_target``, except that whole numbers are read as real numbers when fewer than half
    the sets share their value with another set (a class of one set has nothing to compare
    with)."""
    if y is None:
        return None
    try:
        y = np.asarray(y)
    except ValueError:  # ragged: per-element labels (clustering instances), not one per set
        return None
    if y.ndim != 1 or len(y) != n_sets or n_sets < MIN_SETS:
        return None
    y = _numbers(y)
    check_target_type(y, target_type)
    if target_type == "continuous":
        y, kind = y.astype(np.float64), "continuous"
    else:
        try:
            with np.errstate(invalid="ignore"):  # its whole-number test casts values past 2**63
                kind = type_of_target(y)
        except (TypeError, ValueError):
            return None
        if target_type in ("binary", "multiclass"):
            kind = "multiclass"
        elif kind == "multiclass" and y.dtype.kind in "iuf" and 2 * _shared_classes(y).sum() < len(y):
            y, kind = y.astype(np.float64), "continuous"  # mostly values of one set each
    if kind in ("binary", "multiclass"):
        # the choice is made on the sets of the classes of at least two sets (many classes with
        # 1-5 sets each keep most of theirs)
        shared = _shared_classes(y)
        ok = np.unique(y[shared]).size >= 2 and shared.sum() >= MIN_SETS
        return "classification" if ok else None
    if kind == "continuous":
        return "regression" if np.all(np.isfinite(y)) and np.ptp(y) > 0 else None
    return None


def _targets(task, y):
    """The ridge targets the proxy scores: one-hot classes (one column for two), or the
    standardised scalar target (scaled by a power of two near its largest magnitude first:
    the squares of targets near 1e-300 or 1e300 under- or overflow)."""
    if task == "classification":
        classes, codes = np.unique(y, return_inverse=True)
        onehot = np.eye(len(classes))[codes]
        return onehot[:, 1:] if len(classes) == 2 else onehot
    y = np.asarray(y, dtype=np.float64)
    top = np.abs(y).max()
    y = np.ldexp(y, -np.frexp(top)[1]) if top > 0 else y  # exact: |y| < 1 after it
    y = y - y.mean()
    return (y / y.std())[:, None]
