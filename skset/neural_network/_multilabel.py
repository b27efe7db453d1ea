"""Multi-label targets and class weights of the set classifiers.

A ``y`` that scikit-learn's ``type_of_target`` calls ``"multilabel-indicator"`` (a 2-D array, list
of lists or sparse matrix of 0 and 1) trains one sigmoid output per label (see
:class:`skset.neural_network._tasks.SetClassifierMixin`). This module holds what that needs beside
the mixin: reading such a ``y`` (:func:`multilabel_indicator`; :mod:`._targets` encodes it), the
``class_weight`` parameter (its specification, :func:`with_class_weight`, the weights it gives,
:func:`class_weights`), the validation score (:func:`mean_average_precision`) and the docstring
paragraphs the three classifiers share.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .._validation import Satisfies

__all__ = ["multilabel_indicator", "class_weights",
           "mean_average_precision", "CLASS_WEIGHT", "with_class_weight", "CLASS_WEIGHT_DOC",
           "MULTILABEL_DOC"]


def _positive_weights(v) -> bool:
    values = list(v.values()) if isinstance(v, dict) else v
    if isinstance(values, str):
        return False
    arr = np.asarray(values, dtype=np.float64)
    return arr.ndim == 1 and arr.size >= 1 and bool(np.all(np.isfinite(arr) & (arr > 0)))


#: ``class_weight`` of the set classifiers (see :func:`class_weights`)
CLASS_WEIGHT = [None, "balanced", Satisfies(
    _positive_weights, "a dict {class: weight} or an array of one weight per class, the weights "
    "positive and finite")]


def with_class_weight(table: dict) -> dict:
    """A classifier's ``_parameter_constraints``: ``table`` with ``class_weight`` after
    ``alpha`` (the order of the classifiers' signatures)."""
    out = {}
    for k, v in table.items():
        out[k] = v
        if k == "alpha":
            out["class_weight"] = CLASS_WEIGHT
    return out


def multilabel_indicator(y) -> np.ndarray | None:
    """The dense indicator matrix ``(n_sets, n_labels)`` of a multi-label ``y``, or None.

    ``y`` is multi-label when scikit-learn's ``type_of_target(y)`` is ``"multilabel-indicator"``
    (a 2-D array, list of lists or sparse matrix of 0 and 1 with two columns or more), the rule
    of ``MLPClassifier``; anything else (1-D labels, a single column) is single-label.
    """
    from scipy import sparse
    from sklearn.utils.multiclass import type_of_target

    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    if y is None or isinstance(y, str):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kind = type_of_target(y)
    except (TypeError, ValueError):
        return None
    if kind != "multilabel-indicator":
        return None
    return y.toarray() if sparse.issparse(y) else np.asarray(y)


def class_weights(class_weight, classes, targets: np.ndarray, name: str,
                  sample_weight=None) -> np.ndarray | None:
    """The class weights of an estimator's ``class_weight`` for the encoded targets of a first
    fit, float64 ``(len(classes),)``, or None for ``class_weight=None`` (every set weighs the
    same); ``classes`` are the fitted ``classes_``, ``name`` the estimator's in the messages.

    Single-label (``targets`` integer codes): the weight of each class, multiplying the sets'
    ``sample_weight`` in the cross-entropy; ``"balanced"`` is scikit-learn's
    ``n_sets / (n_classes * count_c)`` (1 for a class absent from ``y``). Multi-label (``targets``
    the 0/1 indicator matrix): the weight of a positive of each label in its binary
    cross-entropy (``pos_weight`` of ``BCEWithLogitsLoss``; negatives weigh 1); ``"balanced"`` is
    ``n_neg / n_pos`` of each label (1 for a label that is always 0 or always 1). With
    ``sample_weight`` the counts are sums of the sets' weights, as scikit-learn's
    ``compute_class_weight`` counts them (a set of weight k counts as k copies; weight 0: not
    counted). A dict maps a class (a label index for multi-label) to its weight, missing ones
    weigh 1; an array gives one weight per entry of ``classes_``, in that order.
    """
    cw = class_weight
    if cw is None:
        return None
    classes = np.asarray(classes)
    n = len(classes)
    if isinstance(cw, str):  # "balanced" (the parameter check admits no other string)
        # counts weighted by sample_weight, as scikit-learn's compute_class_weight counts them:
        # a set of weight k counts as k copies of it
        sw = (np.ones(len(targets)) if sample_weight is None
              else np.asarray(sample_weight, dtype=np.float64))
        total = float(sw.sum())
        if targets.ndim == 2:
            pos = sw @ targets.astype(np.float64)
            neg = total - pos
            return np.where((pos > 0) & (neg > 0), neg / np.where(pos > 0, pos, 1.0), 1.0)
        counts = np.bincount(targets, weights=sw, minlength=n)
        return np.where(counts > 0, total / (n * np.where(counts > 0, counts, 1.0)), 1.0)
    if isinstance(cw, dict):
        known = classes.tolist()
        unknown = [k for k in cw if k not in known]
        if unknown:
            raise ValueError(f"{name}: class_weight has keys {unknown!r} that are not classes "
                             f"({known}).")
        out = np.ones(n)
        for k, v in cw.items():
            out[known.index(k)] = float(v)
        return out
    out = np.asarray(cw, dtype=np.float64).ravel()
    if len(out) != n:
        what = "labels" if targets.ndim == 2 else "classes"
        raise ValueError(f"{name}: class_weight has {len(out)} weights but y has {n} {what} "
                         f"(one weight per entry of classes_ = {classes.tolist()}).")
    return out


def mean_average_precision(scores: torch.Tensor, targets: torch.Tensor,
                           weight: torch.Tensor | None = None) -> float:
    """The mean over labels of the average precision of ``scores`` ``(n, L)`` for the 0/1
    ``targets`` ``(n, L)``, each set weighted by ``weight`` ``(n,)`` when given.

    Per label it is scikit-learn's ``average_precision_score`` (precision at each distinct
    score, tied scores one threshold, weighted by the recall gained there), computed for all
    labels at once. Labels without a positive set (of positive weight) have no average
    precision and are left out of the mean; 0.0 when no label has one.
    """
    scores, targets = scores.double(), targets.double()
    w = torch.ones_like(scores[:, :1]) if weight is None else weight.double().reshape(-1, 1)
    order = torch.argsort(scores, dim=0, descending=True, stable=True)
    s = torch.gather(scores, 0, order)
    wy = torch.gather(targets * w, 0, order)
    wn = torch.gather((1 - targets) * w, 0, order)
    tp, fp = wy.cumsum(0), wn.cumsum(0)
    # the last row of each run of tied scores is a threshold
    end = torch.ones_like(s, dtype=torch.bool)
    end[:-1] = s[:-1] != s[1:]
    precision = tp / torch.where(tp + fp > 0, tp + fp, 1.0)
    tp_end = torch.where(end, tp, 0.0)
    prev = torch.cat([torch.zeros_like(tp[:1]), tp_end.cummax(0).values[:-1]])
    total = tp[-1]
    gain = torch.where(end, tp - prev, 0.0)
    ap = (gain * precision).sum(0) / torch.where(total > 0, total, 1.0)
    has = total > 0
    return float(ap[has].mean()) if bool(has.any()) else 0.0


#: the ``class_weight`` entry of the classifiers' parameter tables (after ``alpha``)
CLASS_WEIGHT_DOC = """
    class_weight : None, "balanced", dict or array-like, default=None
        Weights of the classes in the loss. Single-label: each set's cross-entropy is multiplied
        by its class's weight (scikit-learn's meaning: the weight multiplies ``sample_weight``);
        ``"balanced"`` gives class ``c`` the weight ``n_sets / (n_classes * count_c)``.
        Multi-label (``y`` an indicator matrix): the weight of a positive of each label in its
        binary cross-entropy, negatives weighing 1 (``pos_weight`` of torch's
        ``BCEWithLogitsLoss``); ``"balanced"`` gives label ``l`` the weight ``n_neg_l / n_pos_l``,
        so that positives and negatives of every label weigh the same in total (1 for a label
        that is always 0 or always 1), for rare labels that the plain loss would let the model
        predict as always absent. A dict maps a class (a label index ``0 .. n_labels - 1`` for
        multi-label) to its weight, classes it omits weighing 1; an array gives one positive
        weight per entry of ``classes_``, in that order. The weights come from the ``y`` of the
        first fit (the first chunk of ``partial_fit``) and are kept in ``class_weight_``."""

#: the multi-label paragraph of the classifiers' docstrings
MULTILABEL_DOC = """
    Multi-label targets: ``y`` may be an indicator matrix ``(n_sets, n_labels)`` of 0 and 1 (an
    array, a list of lists or a sparse matrix: scikit-learn's ``"multilabel-indicator"``, as
    ``MLPClassifier`` takes it), each set carrying any number of labels. The network then has
    one output per label, trained with the binary cross-entropy of each label summed over the
    labels; ``classes_`` is ``arange(n_labels)``, ``decision_function`` returns the logits and
    ``predict_proba`` the probability of each label ``(n_sets, n_labels)`` (rows do not sum to
    1), and ``predict`` the indicator matrix of the labels of probability above 0.5, in the
    dtype of ``y``. With ``early_stopping`` the validation score is the mean over labels of the
    average precision of the held-out sets (labels without a positive held-out set left out):
    it ranks without a threshold and is not swamped by the true negatives of rare labels, where
    the subset accuracy that ``MLPClassifier`` uses is near 0 with many labels and blind to
    gains short of a whole label set. The held-out sets are stratified on the label sets when
    every label set occurs at least twice, drawn at random otherwise. ``class_weight`` weighs
    the positives of rare labels.
"""
