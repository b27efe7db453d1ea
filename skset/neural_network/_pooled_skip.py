"""The set networks' pooled skip (``pooled_skip=True``): the linear model of the mean and max of a
set's elements (:class:`skset.nn.PooledLinear`) that the network adds to its output, fitted alone
before training as the raw-pooling baseline, the network's last layer set to zero."""

from __future__ import annotations

import numpy as np
import torch

from .._map_selection import constant_below
from .._sets import to_numpy
from .._weighting import weighted_mean_std
from ._heads import fit_logistic_head, fit_multilabel_logistic_head, fit_ridge_head, ridge_loo_alpha

__all__ = ["POOLED_SKIP_DOC", "fit_pooled_skip"]

POOLED_SKIP_DOC = """    pooled_skip : bool, default=False
        Add to the network's output a linear model of the mean and the max of each set's
        (standardised) elements (:class:`skset.nn.PooledLinear`, ``module_.skip``). Before
        training it is fitted alone, as the raw-pooling baseline (L2-regularised logistic
        regression with ``C=1`` for classifiers, in the multinomial form: with two classes, two
        rows of weights, which is scikit-learn's one-vector binary model at ``C=2``; ridge with
        its penalty chosen by leave-one-out
        for regressors, on the pooled features standardised over the training sets), and the
        network's last layer starts at zero: the untrained network predicts as that baseline,
        and training adds what mean and max pooling miss (the logistic penalty counts the sets
        as given: with the skip an integer ``sample_weight`` is not exactly as many copies).
        Not the default: on the real-data suite it lifted Deep Sets on series and DNA and
        lowered it on bags of images (see :ref:`pooled-skip`).
"""


def fit_pooled_skip(est, module, data) -> None:
    """Fit ``module.skip`` alone on the training sets of ``data`` (the raw-pooling baseline) and
    zero the network's last layer (``module.decoder[-1]``), so that the untrained network
    predicts as the baseline. ``est``: the estimator (its batches, task and class weights)."""
    skip, tr = module.skip, data.train
    sets = [data.sets[i] for i in tr]
    Z = est._predict_batches(sets, lambda m, X_, M_: m.skip.features(X_, M_), module)
    weight = data.weights_of(tr)
    w = None if weight is None else to_numpy(weight).astype(np.float64)
    Zn = to_numpy(Z).astype(np.float64)
    shift, std = weighted_mean_std(Zn, w)
    # constant: a spread within rounding of the feature's magnitude, or, on standardised inputs
    # (unit scale), within 1000 roundings of 1: the mean of sets read by their own scale is 0 up
    # to rounding, whose spread a relative test keeps (scaled to 1: outputs followed the batch)
    tiny = 1e3 * torch.finfo(est.dtype_).eps if est.standardize else 0.0
    scale = np.where(constant_below(std, np.abs(Zn).max(0)) | (std <= tiny), 1.0, std)
    with torch.no_grad():
        skip.shift.copy_(torch.as_tensor(shift, device=skip.shift.device))
        skip.scale.copy_(torch.as_tensor(scale, device=skip.scale.device))
        last = module.decoder[-1]
        last.weight.zero_()
        last.bias.zero_()
    Z = (Z - skip.shift) / skip.scale
    _fit_skip_head(est, skip.linear, Z, data.targets[torch.as_tensor(tr, device=Z.device)],
                   weight)


def _fit_skip_head(est, head, Z, targets, weight) -> None:
    """The skip's linear layer fitted alone, from zero: scikit-learn's multinomial
    ``LogisticRegression()`` (``C=1``; two classes: two rows, the binary model's ``C=2``;
    multi-label: one per label) for classifiers, ridge with the penalty of
    :func:`ridge_loo_alpha` for regressors (standardised targets). The penalty depends on the
    number of sets, so with the skip an integer ``sample_weight`` is not exactly as many copies
    of the set (without it, it is: see ``fit``)."""
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    if not est._is_classifier:
        fit_ridge_head(head, Z, targets, ridge_loo_alpha(Z, targets, weight=weight), weight)
        return
    cw = est._class_weight_tensor(Z)
    # scikit-learn's multinomial C = 1 for the n training sets as given (weights only weigh the
    # loss); two classes keep two rows, the one-vector binary model's C = 2
    alpha = 1.0 / Z.shape[0]
    if est._is_multilabel:
        fit_multilabel_logistic_head(head, Z, targets, alpha, weight=weight, pos_weight=cw)
        return
    if cw is not None:  # class weights multiply the sets' weights (as in the loss)
        weight = cw[targets] if weight is None else weight * cw[targets]
    fit_logistic_head(head, Z, targets, alpha, weight=weight)
