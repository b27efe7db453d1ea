"""The targets a set-to-target network trains on, from a fit's ``y``.

Classes become integer codes (:func:`encode_class_targets`), a multi-label indicator matrix
(:func:`skset.neural_network._multilabel.multilabel_indicator`) the float64 0/1 matrix
(:func:`encode_multilabel_targets`), numeric targets standardised values
(:func:`encode_regression_targets`). Each is a function of ``y`` and of what a first fit
learned (passed in by the estimator, never read from it): it returns an :class:`EncodedTargets`
whose ``fitted`` holds the attributes a first fit gives the estimator (``classes_``,
``y_mean_``...), which the estimator sets on itself (the task mixins of :mod:`._tasks`).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator, Mapping, MappingView, Set
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from .._sets import check_set_labels, dtype_name, max_abs_value, missing_labels, to_numpy
from .._threads import user_stacklevel
from .._weighting import weighted_mean_std
from ._multilabel import class_weights, multilabel_indicator

__all__ = ["EncodedTargets", "check_every_class", "check_stream_classes", "encode_class_targets",
           "encode_multilabel_targets", "encode_regression_targets"]


@dataclass(frozen=True)
class EncodedTargets:
    """What an encoder returns.

    Attributes
    ----------
    targets : ndarray
        What the network trains on: int64 class codes ``(n_sets,)``, a float64 indicator matrix
        ``(n_sets, n_labels)`` or standardised float64 targets ``(n_sets, n_outputs)``.
    n_outputs : int
        The classes, labels or outputs: the width of the network's output.
    fitted : dict
        ``{attribute: value}`` that a first fit sets on the estimator (in this order); empty on
        a later fit (``warm_start``, ``partial_fit``).
    """

    targets: np.ndarray
    n_outputs: int
    fitted: dict = field(default_factory=dict)


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def check_target_container(y, n_sets: int) -> None:
    """A ``ValueError`` naming what ``y`` is when numpy would read it as one value though it is
    no number: a generator or other iterator (read once, without a length), a dict, a set or a
    dict view (a number is a scalar ``y``, named by :func:`check_set_labels`)."""
    if not isinstance(y, (Mapping, Set, MappingView, Iterator)):
        return
    what = ("a generator" if inspect.isgenerator(y) else "an iterator" if isinstance(y, Iterator)
            else _a(type(y).__name__))
    raise ValueError(f"y is {what}, not an array of targets; expected one target per set "
                     f"({n_sets} sets) in a list, an ndarray or a pandas Series"
                     + (" (list(y) reads it into one)." if isinstance(y, Iterator) else "."))


def _number_kind(v) -> str:
    """``"bool"``, ``"integer"``, ``"float"`` or ``"string"``: the kind of one label of an object
    array (whose labels :func:`check_set_labels` found to be all numbers or all strings)."""
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "integer"
    return "float" if isinstance(v, (float, np.floating)) else "string"


def check_label_kinds(y: np.ndarray, name: str, what: str = "y") -> None:
    """A ``ValueError`` for labels ``y`` (named ``what``) that are no classes of the classifier
    ``name``: real values (floats not all whole: scikit-learn's ``"continuous"``), in a float
    array or in an object array of floats (a pandas column of dtype object), and an object array
    that mixes bools, integers and floats (scikit-learn's ``"unknown"`` label type: ``True``
    and ``1``, ``2`` and ``2.0`` would be one class or two by the order of the sets)."""
    real = y
    # an object array of numbers (check_set_labels: all numbers or all strings; strings pass)
    if y.dtype == object and y.size and not isinstance(y.flat[0], str):
        kinds = {_number_kind(v) for v in y.ravel().tolist()}
        if len(kinds) > 1:
            raise ValueError(
                f"{what} holds labels of mixed types ({', '.join(sorted(kinds))}) in an object "
                f"array, not class labels of one type; {name} needs classes (numbers or strings) "
                f"of one type: convert {what} (e.g. with .astype(int) or .astype(str)).")
        if kinds == {"float"}:
            real = y.astype(np.float64)
    if type_of_target(real) != "continuous":  # scikit-learn's test (floats not all whole; it
        return  # refuses bytes labels)
    odd = real[real != np.round(real)]
    example = odd[0] if odd.size else real[np.argmax(np.abs(real))]
    regressor = name.replace("Classifier", "Regressor")
    raise ValueError(f"{what} holds continuous values (e.g. {example:g}), not class labels; {name} "
                     "needs classes (numbers or strings)"
                     + (f": use {regressor} for real targets." if regressor != name else "."))


def check_stream_classes(classes, name: str) -> np.ndarray:
    """``classes`` of ``partial_fit`` (every class of a stream) checked as ``y`` is, as a 1-D
    array: one class per entry, no missing (None, NaN, NA) or infinite one, one kind of label,
    no real values (:func:`check_label_kinds`); ``name`` is the classifier's."""
    if hasattr(classes, "detach"):  # a tensor, on a GPU too
        classes = to_numpy(classes)
    try:
        arr = np.asarray(classes)
    except ValueError:  # ragged
        raise ValueError("classes is ragged (entries of different lengths); expected a 1-D "
                         "array of every class of the stream.") from None
    if arr.ndim != 1:
        got = f"is {_a(type(classes).__name__)}" if arr.ndim == 0 else f"has shape {arr.shape}"
        raise ValueError(f"classes {got}; expected a 1-D array (n_classes,) of every class of "
                         "the stream (e.g. classes=np.unique(y_all)).")
    if missing_labels(arr).any():
        raise ValueError(f"classes contains a missing class (None, NaN or NA): "
                         f"{arr.tolist()[:10]}; give every class of the stream.")
    arr = check_set_labels(arr, len(arr), name="classes")  # infinity, mixed strings and numbers
    check_label_kinds(arr, name, "classes")
    return arr


def encode_class_targets(y, n_sets: int, first_fit: bool, classes=None, *, name: str,
                         sample_weight=None,
                         class_weight=None, fitted_classes=None,
                         multilabel: bool = False) -> EncodedTargets:
    """Class labels -> integer codes; on the first fit ``fitted`` holds ``classes_`` (from
    ``classes``, every class of a ``partial_fit`` stream, when given; else from ``y``),
    ``_multilabel`` and ``class_weight_`` (from ``class_weight``: :func:`class_weights`).

    Shared by every set classifier (``name`` in the messages). A later (``warm_start``,
    ``partial_fit``) fit may only use known classes: those of ``fitted_classes``, the
    estimator's ``classes_``, on a first fit learned with ``multilabel`` targets or not.

    A multi-label ``y`` (:func:`multilabel_indicator`) gives the float64 indicator matrix
    ``(n_sets, n_labels)`` instead (:func:`encode_multilabel_targets`).
    """
    check_target_container(y, n_sets)
    if classes is not None:
        classes = check_stream_classes(classes, name)
    Y = multilabel_indicator(y)
    if Y is not None:
        return encode_multilabel_targets(Y, n_sets, first_fit, classes, name=name,
                                         class_weight=class_weight,
                                         fitted_classes=fitted_classes, multilabel=multilabel,
                                         sample_weight=sample_weight)
    if not first_fit and multilabel:
        raise ValueError(f"{name} was fitted on multi-label targets (an indicator matrix of "
                         f"{len(fitted_classes)} labels); y here is not one (warm_start=True or "
                         "partial_fit).")
    try:
        shape = np.shape(y)
    except ValueError:  # ragged
        check_set_labels(y, n_sets)  # raises, naming y as ragged
        raise
    if len(shape) == 2 and shape[1] > 1:
        bad = _missing_or_infinite(y)
        if bad:
            raise ValueError(f"y has shape {shape} and contains {bad}; a multi-label indicator "
                             "matrix holds 0 (label absent) or 1 (label present) for every "
                             "label of every set.")
        raise ValueError(f"y has shape {shape}; expected ({n_sets},) class labels, or a "
                         f"multi-label indicator matrix ({n_sets}, n_labels) of 0 and 1 only "
                         "(multi-output targets of other values are not supported).")
    if len(shape) == 2:  # one column: warned and read as (n,), as scikit-learn's classifiers do
        warnings.warn(f"A column-vector y was passed when a 1d array was expected: read as shape "
                      f"({shape[0]},) (pass y.ravel()).", DataConversionWarning,
                      stacklevel=user_stacklevel())
    y = check_set_labels(y, n_sets)
    check_label_kinds(y, name)
    if first_fit and classes is not None:
        classes = np.unique(np.asarray(classes))
        unknown = np.setdiff1d(np.unique(y), classes)
        if len(unknown):
            raise ValueError(f"y holds classes {unknown.tolist()} not in classes="
                             f"{classes.tolist()}.")
        if len(classes) < 2:
            raise ValueError(f"{name} needs at least 2 classes; got "
                             f"classes={classes.tolist()}.")
        enc = np.searchsorted(classes, y).astype(np.int64)
        return EncodedTargets(enc, len(classes), {
            "classes_": classes, "_multilabel": False,
            "class_weight_": class_weights(class_weight, classes, enc, name, sample_weight)})
    if first_fit:
        classes, enc = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"{name} needs at least 2 classes in y; got "
                             f"only {classes.tolist()}.")
        return EncodedTargets(enc.astype(np.int64), len(classes), {
            "classes_": classes, "_multilabel": False,
            "class_weight_": class_weights(class_weight, classes, enc.astype(np.int64), name,
                                           sample_weight)})
    if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), fitted_classes):
        raise ValueError(f"classes={np.unique(np.asarray(classes)).tolist()} is not the fitted "
                         f"classes_ {np.asarray(fitted_classes).tolist()}: the classes are fixed "
                         "by the first fit (as scikit-learn's partial_fit).")
    unknown = np.setdiff1d(np.unique(y), fitted_classes)
    if len(unknown):
        raise ValueError(f"y holds classes {unknown.tolist()} not seen in the first fit "
                         "(warm_start=True or partial_fit).")
    enc = np.searchsorted(fitted_classes, y)
    return EncodedTargets(enc.astype(np.int64), len(fitted_classes))


def _missing_or_infinite(y) -> str | None:
    """What makes a 2-D ``y`` (dense, sparse or a frame) no indicator matrix when it is a
    missing or infinite value: ``"NaN ..."``, ``"infinity"``; else None."""
    a = y.toarray() if hasattr(y, "toarray") else np.asarray(y)
    if missing_labels(a).any():
        return "a missing label (NaN, None or NA)"
    try:
        return "infinity" if np.isinf(a.astype(np.float64)).any() else None
    except (TypeError, ValueError):  # strings: not a number at all
        return None


def check_every_class(codes: np.ndarray, classes, name: str) -> None:
    """A warm start (``warm_start=True``, not ``partial_fit``) trains on every fitted class, as
    scikit-learn's ``MLPClassifier`` requires: a class missing from ``y`` would be trained away
    (its probability pushed to 0)."""
    missing = np.setdiff1d(np.arange(len(classes)), codes)
    if len(missing):
        raise ValueError(f"{name}: warm_start=True needs y to hold every class of the first fit; "
                         f"classes {np.asarray(classes)[missing].tolist()} have no set here "
                         "(partial_fit trains on some classes at a time).")


def encode_multilabel_targets(Y: np.ndarray, n_sets: int, first_fit: bool, classes, *,
                              name: str, class_weight=None, fitted_classes=None,
                              multilabel: bool = False, sample_weight=None) -> EncodedTargets:
    """The float64 indicator matrix ``Y`` checked against ``n_sets`` and against the first fit
    (``fitted_classes``: its labels; ``multilabel``: whether it was multi-label); on the first
    fit ``fitted`` holds ``classes_ = arange(n_labels)`` (as ``MLPClassifier``),
    ``_multilabel``, ``_y_dtype`` (the dtype ``predict`` returns: ``Y``'s) and
    ``class_weight_``."""
    n_labels = Y.shape[1]
    if Y.shape[0] != n_sets:
        raise ValueError(f"y has {Y.shape[0]} rows but X holds {n_sets} sets; give one row of "
                         "labels per set.")
    values = np.unique(Y)
    if not np.isin(values, (0, 1)).all():  # type_of_target admits any two integer values
        raise ValueError(f"y has shape {Y.shape} with the values {values.tolist()}; a multi-label "
                         "indicator matrix holds 0 (label absent) and 1 (label present) only.")
    if first_fit:
        if classes is not None and not np.array_equal(np.asarray(classes).ravel(),
                                                      np.arange(n_labels)):
            raise ValueError(f"{name}: y is a multi-label indicator matrix of {n_labels} labels, "
                             f"whose classes are arange({n_labels}); classes={classes!r} differs "
                             "(leave classes=None: the width of y fixes the labels).")
        labels = np.arange(n_labels)
        # object 0/1 (a frame of pandas' nullable Int64 columns) predicts as int64 0/1, not as
        # Python bools that scikit-learn's metrics do not read as an indicator
        y_dtype = "int64" if Y.dtype == object else Y.dtype.name
        Y = Y.astype(np.float64)
        return EncodedTargets(Y, n_labels, {
            "classes_": labels, "_multilabel": True, "_y_dtype": y_dtype,
            "class_weight_": class_weights(class_weight, labels, Y, name, sample_weight)})
    if not multilabel:
        raise ValueError(f"{name} was fitted on single-label targets (classes "
                         f"{np.asarray(fitted_classes).tolist()}); y here is a multi-label "
                         f"indicator matrix of shape {Y.shape} (warm_start=True or partial_fit).")
    if n_labels != len(fitted_classes):
        raise ValueError(f"y has {n_labels} labels but the first fit had {len(fitted_classes)} "
                         "(warm_start=True or partial_fit).")
    if classes is not None and not np.array_equal(np.asarray(classes).ravel(),
                                                  np.arange(n_labels)):
        raise ValueError(f"{name}: classes={classes!r} is not the fitted classes_ "
                         f"arange({n_labels}) of this multi-label model (leave classes=None).")
    return EncodedTargets(Y.astype(np.float64), n_labels)


def encode_regression_targets(y, n_sets: int, first_fit: bool,
                              sample_weight: np.ndarray | None = None, *, name: str, dtype,
                              y_mean=None, y_scale=None,
                              how: str = "warm_start=True or partial_fit") -> EncodedTargets:
    """Standardise numeric targets ``(n_sets,)`` or ``(n_sets, n_outputs)``.

    Shared by every set regressor (``name`` in the messages): the network, of torch dtype
    ``dtype``, sees unit-scale targets. On the first fit ``fitted`` holds ``_y_ndim`` (so
    ``predict`` returns ``y``'s shape), ``y_mean_`` and ``y_scale_``, the mean and standard
    deviation weighted by ``sample_weight`` when given (:func:`weighted_mean_std`); a later fit
    standardises with the first fit's ``y_mean`` and ``y_scale``. ``targets`` are the
    standardised ``(n_sets, n_outputs)`` values; ``how`` names the later fit in its messages
    (``"partial_fit"``, ``"warm_start=True"``).
    """
    check_target_container(y, n_sets)
    y = check_set_labels(y, n_sets, multi_output=True)
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} needs numeric targets; y has dtype {y.dtype}.") from None
    y2 = y.reshape(n_sets, -1)
    fitted = {}
    if first_fit:
        y_mean, std = weighted_mean_std(y2, sample_weight)
        # constant: a spread within rounding of the targets' magnitude (0.1 x 30 gave 2.8e-17)
        # (of the sets that take part: weight 0 is as if removed)
        seen = y2 if sample_weight is None else y2[np.asarray(sample_weight) > 0]
        y_scale = np.where(std > 1e-12 * np.abs(seen).max(0, initial=0.0), std, 1.0)
        fitted = {"_y_ndim": y.ndim, "y_mean_": y_mean, "y_scale_": y_scale}
    elif y2.shape[1] != len(y_mean):
        raise ValueError(f"y has {y2.shape[1]} outputs but the first fit had "
                         f"{len(y_mean)} ({how}).")
    with np.errstate(over="ignore", invalid="ignore"):
        z = (y2 - y_mean) / y_scale
        if not np.isfinite(z).all():  # y - mean overflowed (near 1e308); z itself may not
            z = y2 / y_scale - y_mean / y_scale
    # the network fits z in its dtype (squared in the loss): it must be within the input limit;
    # sets of weight 0 take no part in the fit (their z is never used)
    used = slice(None) if sample_weight is None else sample_weight > 0
    limit = max_abs_value(dtype)
    if not np.abs(z[used]).max() <= limit:
        raise ValueError(
            f"{name}: the standardised targets (y - y_mean_) / y_scale_ reach "
            f"{np.abs(z[used]).max():.3g}, beyond what a {dtype_name(dtype)} network can fit "
            f"(|z| <= {limit:.0e}); y_mean_={y_mean.tolist()}, y_scale_={y_scale.tolist()}. "
            + ("Refit without warm_start, or rescale y." if not first_fit else "Rescale y."))
    if sample_weight is not None:
        z[~used] = np.clip(z[~used], -limit, limit)
    return EncodedTargets(z, y2.shape[1], fitted)
