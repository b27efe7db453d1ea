"""The task of a set-to-target network, mixed into :class:`~skset.neural_network._base.SetNetworkEstimator`:
:class:`SetClassifierMixin` (classes or multi-label indicators: targets, loss, validation score,
``predict*``) and :class:`SetRegressorMixin` (standardised numeric targets, ``early_stopping="auto"``
and the validated output shrinkage of :func:`validated_shrinkage`)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import ClassifierMixin, RegressorMixin

from .._sets import check_finite_output
from ._multilabel import mean_average_precision
from ._targets import encode_class_targets, encode_regression_targets

__all__ = ["SetClassifierMixin", "SetRegressorMixin", "validated_shrinkage",
           "AUTO_VALIDATION_MIN", "AUTO_VALIDATION_MAX", "AUTO_VALIDATION_MIN_SETS"]


class SetClassifierMixin(ClassifierMixin):
    """Classes: cross-entropy on the logits, accuracy for validation, ``predict*``.

    Multi-label targets (an indicator matrix, see :func:`multilabel_indicator`): one logit per
    label, the binary cross-entropy of each label summed over the labels (``MLPClassifier``'s
    loss), the mean per-label average precision for validation; ``predict`` thresholds each
    label's probability at 0.5. ``class_weight_`` (from the estimator's ``class_weight``) weighs
    the classes, or the positives of each label.
    """

    _is_classifier = True

    @property
    def _is_multilabel(self) -> bool:
        return bool(getattr(self, "_multilabel", False))

    def _encode_targets(self, y, n_sets, first_fit, sample_weight=None, classes=None,
                        incremental=False):
        """``(targets, n_classes)`` of ``y``; a first fit sets ``classes_``, ``class_weight_``
        (and, for multi-label targets, the dtype ``predict`` returns)."""
        enc = encode_class_targets(
            y, n_sets, first_fit, classes, name=type(self).__name__, sample_weight=sample_weight,
            class_weight=getattr(self, "class_weight", None),  # absent in older models
            fitted_classes=None if first_fit else self.classes_, multilabel=self._is_multilabel)
        for attr, value in enc.fitted.items():
            setattr(self, attr, value)
        return enc.targets, enc.n_outputs

    @staticmethod
    def _loss(out, target):
        return F.cross_entropy(out, target)

    @staticmethod
    def _sample_loss(out, target):
        return F.cross_entropy(out, target, reduction="none")

    def _class_weight_tensor(self, out) -> torch.Tensor | None:
        cw = getattr(self, "class_weight_", None)  # absent in models saved before class_weight
        if cw is None:
            return None
        if not self._is_multilabel:  # the weighted means read their ratios only: scaled to a
            cw = np.asarray(cw, dtype=np.float64) / np.max(cw)  # largest of 1 (no float32 inf)
        return torch.as_tensor(cw, dtype=out.dtype, device=out.device)

    def _task_loss(self, out, target, weight=None):
        """The mean loss of a batch, weighted by the sets' ``weight`` when given: the
        cross-entropy, with ``class_weight_`` each set's loss times its class's weight (the
        weighted mean of scikit-learn's class weights: they multiply the sample weights);
        multi-label, the per-label binary cross-entropies summed over the labels, a positive of
        label ``l`` weighing ``class_weight_[l]`` (``pos_weight``)."""
        cw = self._class_weight_tensor(out)
        if self._is_multilabel:
            per_set = F.binary_cross_entropy_with_logits(
                out, target.to(out.dtype), pos_weight=cw, reduction="none").sum(1)
            if weight is None:
                return per_set.mean()
            return (weight * per_set).sum() / weight.sum()
        if cw is None:
            return super()._task_loss(out, target, weight)
        w = cw[target] if weight is None else weight * cw[target]
        return (w * F.cross_entropy(out, target, reduction="none")).sum() / w.sum()

    @staticmethod
    def _val_score(out, target, weight=None):
        """Accuracy, weighted by ``weight`` when given; multi-label (``target`` the 2-D
        indicator matrix, class codes being 1-D), the mean per-label average precision
        (:func:`mean_average_precision`)."""
        if target.dim() == 2:
            return mean_average_precision(out, target, weight)
        correct = (out.argmax(1) == target).double()
        if weight is None:
            return float(correct.mean())
        weight = weight.double()
        return float((weight * correct).sum() / weight.sum())

    def decision_function(self, X) -> np.ndarray:
        """The network's logits, ``(n_sets, n_classes)``; with two classes, scikit-learn's
        ``(n_sets,)``, the score of ``classes_[1]`` (its logit minus that of ``classes_[0]``,
        positive where it is predicted); multi-label: ``(n_sets, n_labels)``, one logit per
        label."""
        return self._decision_function(X)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, ``(n_sets, n_classes)``, rows summing to 1 (multi-label:
        ``(n_sets, n_labels)``, the probability of each label, the sigmoid of its logit)."""
        return self._predict_proba(X)

    def predict_log_proba(self, X) -> np.ndarray:
        """The log of :meth:`predict_proba`, from the logits in float64 (the log-softmax;
        multi-label: the log-sigmoid of each logit): finite where a probability rounds to 0."""
        return self._predict_log_proba(X)

    def predict(self, X) -> np.ndarray:
        """The most probable class of each set (multi-label: the indicator matrix ``(n_sets,
        n_labels)`` of the labels of probability above 0.5, in the dtype of the ``y`` fitted)."""
        return self._predict(X)

    # the bodies, with the per-set side data of an estimator that takes some
    def _decision_function(self, X, side=None) -> np.ndarray:
        out = self._raw_outputs(*self._predict_inputs(X, side))
        if out.shape[1] == 2 and not self._is_multilabel:
            out = out[:, 1] - out[:, 0]  # scikit-learn's binary decision_function
        return out.cpu().numpy()

    def _predict_log_proba(self, X, side=None) -> np.ndarray:
        logits = self._raw_outputs(*self._predict_inputs(X, side)).double()
        if self._is_multilabel:
            return torch.nn.functional.logsigmoid(logits).cpu().numpy()
        return torch.log_softmax(logits, dim=1).cpu().numpy()

    def _predict_proba(self, X, side=None) -> np.ndarray:
        logits = self._raw_outputs(*self._predict_inputs(X, side)).double()
        if self._is_multilabel:
            return torch.sigmoid(logits).cpu().numpy()
        p = torch.softmax(logits, dim=1).cpu().numpy()
        return p / p.sum(1, keepdims=True)

    def _predict(self, X, side=None) -> np.ndarray:
        logits = self._raw_outputs(*self._predict_inputs(X, side))
        if self._is_multilabel:  # probability > 0.5 exactly when the logit is > 0
            return (logits > 0).cpu().numpy().astype(self._y_dtype)
        return self.classes_[logits.argmax(1).cpu().numpy()]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


#: ``early_stopping="auto"`` holds out a validation split when a fit has this many sets or more
#: and fewer than ``AUTO_VALIDATION_MAX``; the split holds at least ``AUTO_VALIDATION_MIN_SETS``.
AUTO_VALIDATION_MIN, AUTO_VALIDATION_MAX, AUTO_VALIDATION_MIN_SETS = 20, 1000, 10


def validated_shrinkage(out: torch.Tensor, target: torch.Tensor,
                        weight: torch.Tensor | None = None) -> float:
    """The factor ``c`` in ``[0, 1]`` that multiplies the standardised predictions ``out`` of the
    validation sets (``0``: the training mean), from their targets ``target`` (both
    ``(n, n_outputs)``, standardised; weighted by ``weight``).

    ``c_hat = <out, target> / <out, out>`` (the least-squares factor, clipped to ``[0, 1]``) is
    shrunk further by its own noise: ``c = c_hat * max(0, 1 - 1 / t^2)`` with ``t^2 = c_hat^2
    <out, out> / s^2`` and ``s^2`` the residual mean square of ``c_hat * out`` on the ``n - 1``
    degrees of freedom left (a positive-part James-Stein factor; one validation set leaves none:
    0): a validation score that could be
    chance gives a factor near 0, a clear one a factor near ``c_hat``.
    """
    out, target = out.double().reshape(out.shape[0], -1), target.double().reshape(out.shape[0], -1)
    w = (torch.ones(out.shape[0], 1, dtype=out.dtype, device=out.device) if weight is None
         else weight.double().reshape(-1, 1) * out.shape[0] / weight.double().sum())
    ff = float((w * out * out).sum())
    if not ff > 0:
        return 0.0
    c = min(max(float((w * out * target).sum()) / ff, 0.0), 1.0)
    if c == 0.0 or out.shape[0] < 2:  # one held-out set: no residual to test the factor with
        return 0.0
    n = out.numel()
    s2 = float((w * (target - c * out).square()).sum()) / max(n - 1, 1)
    t2 = c * c * ff / max(s2, 1e-300)
    return c * max(0.0, 1.0 - 1.0 / t2)


class SetRegressorMixin(RegressorMixin):
    """Standardised numeric targets: mean squared error, R^2 for validation, ``predict``.

    With ``early_stopping="auto"`` (the Set Transformer and Deep Sets regressors' default) a fit
    of 20 to 999 sets holds out a
    validation split (``validation_fraction``, at least 10 sets), keeps the epoch of the best
    validation R^2, then multiplies the network's output (in standardised units: towards the
    training mean) by the factor :func:`validated_shrinkage` chooses on the validation sets
    (``output_shrinkage_``).
    """

    _is_classifier = False

    def _validation_split(self, n_sets):
        if self.early_stopping == "auto":
            if not AUTO_VALIDATION_MIN <= n_sets < AUTO_VALIDATION_MAX:
                return None
            return max(float(self.validation_fraction), AUTO_VALIDATION_MIN_SETS / n_sets)
        return super()._validation_split(n_sets)

    def _output_layer(self, module) -> torch.nn.Linear:
        """The last linear layer of the network (what the output shrinkage scales)."""
        return module.decoder[-1]

    def _shrunk_layers(self) -> list:
        """The layers the output shrinkage scales: the network's last layer and, where there is
        one, the pooled skip's."""
        skip = getattr(self.module_, "skip", None)
        return [self._output_layer(self.module_)] + ([] if skip is None else [skip.linear])

    def _after_training(self, data):
        self.output_shrinkage_ = 1.0
        self._unshrunk_output = None
        if data.validation is None:
            return
        val_sets, Y_va = data.subset(data.validation)
        out = self._predict_batches(val_sets, lambda m, X_, M_, *S_: m(X_, M_, *S_),
                                    side=data.side_of(data.validation))
        # one factor per output: a pure-noise output beside a predictable one goes to its mean
        out = out.reshape(out.shape[0], -1)
        Y_va, W_va = Y_va.reshape(out.shape), data.weights_of(data.validation)
        cs = [validated_shrinkage(out[:, j], Y_va[:, j], W_va) for j in range(out.shape[1])]
        c = cs[0] if len(cs) == 1 else np.array(cs)
        layers = self._shrunk_layers()
        # the trained values, which a warm start or partial_fit trains from (a factor of 0
        # could not be undone by division)
        self._unshrunk_output = [[p.detach().clone() for p in layer.parameters()]
                                 for layer in layers]
        factor = torch.tensor(cs, dtype=torch.float64, device=self.device_)  # not the default
        with torch.no_grad():
            for layer in layers:
                for p in layer.parameters():  # weight rows and bias entries: one per output
                    p.mul_(factor.to(p).reshape(-1, *[1] * (p.dim() - 1)))
        self.output_shrinkage_ = c

    def _before_warm_training(self):
        """Train from the network as training left it, not from its shrunk output: otherwise each
        warm fit would shrink the output again, by factors that compound."""
        saved = getattr(self, "_unshrunk_output", None)
        if saved is None:
            return None
        layers = self._shrunk_layers()
        shrunk = [[p.detach().clone() for p in layer.parameters()] for layer in layers]

        def put(values):
            with torch.no_grad():
                for layer, vals in zip(layers, values):
                    for p, v in zip(layer.parameters(), vals):
                        p.copy_(v.to(device=p.device, dtype=p.dtype))

        put(saved)
        self._unshrunk_output = None
        self.output_shrinkage_ = 1.0
        return lambda: put(shrunk)  # a warm fit that fails puts the shrunk output back

    def _fit(self, X, y, sample_weight=None, side=None, *, incremental=False, classes=None):
        # partial_fit(X, y, w), scikit-learn's regressors' call, would pass the weights as
        # classes, which a regressor has none of: refused before anything is fitted
        if classes is not None:
            raise TypeError(
                f"{type(self).__name__}.partial_fit takes no classes (a regressor has none), but "
                "classes is not None; pass sample weights by keyword: partial_fit(X, y, "
                "sample_weight=w).")
        return super()._fit(X, y, sample_weight, side, incremental=incremental)

    def _encode_targets(self, y, n_sets, first_fit, sample_weight=None, classes=None,
                        incremental=False):
        """``(standardised targets, n_outputs)`` of ``y``; a first fit sets ``y_mean_``,
        ``y_scale_`` (and the shape ``predict`` returns); a later fit's messages name it
        (``incremental``: ``partial_fit``, else ``warm_start=True``)."""
        enc = encode_regression_targets(
            y, n_sets, first_fit, sample_weight, name=type(self).__name__, dtype=self.dtype_,
            y_mean=None if first_fit else self.y_mean_,
            y_scale=None if first_fit else self.y_scale_,
            how="partial_fit" if incremental else "warm_start=True")
        for attr, value in enc.fitted.items():
            setattr(self, attr, value)
        return enc.targets, enc.n_outputs

    @staticmethod
    def _loss(out, target):
        return F.mse_loss(out, target.reshape(out.shape))

    @staticmethod
    def _sample_loss(out, target):
        return F.mse_loss(out, target.reshape(out.shape), reduction="none").flatten(1).mean(1)

    @staticmethod
    def _val_score(out, target, weight=None):
        """R^2 averaged over the outputs, weighted by ``weight`` when given (as ``r2_score``);
        an output whose held-out targets are all equal (one held-out set), where R^2 is
        undefined (``r2_score``: NaN or 0 for every epoch), scores ``1 - ss_res`` in
        standardised units, so that the epochs stay ranked by their error."""
        target = target.reshape(out.shape)
        if weight is None:
            ss_res = ((target - out) ** 2).sum(0)
            ss_tot = ((target - target.mean(0)) ** 2).sum(0)
        else:
            w = weight.to(out.dtype).reshape(-1, *([1] * (out.dim() - 1)))
            mean = (w * target).sum(0) / w.sum()
            ss_res = (w * (target - out) ** 2).sum(0)
            ss_tot = (w * (target - mean) ** 2).sum(0)
        return float((1.0 - ss_res / torch.where(ss_tot > 0, ss_tot, 1.0)).mean())

    def predict(self, X) -> np.ndarray:
        """Predicted targets, ``(n_sets,)`` or ``(n_sets, n_outputs)`` like ``y`` in fit."""
        return self._predict(X)

    def _predict(self, X, side=None) -> np.ndarray:  # with side data, see SetClassifierMixin
        out = self._raw_outputs(*self._predict_inputs(X, side)).double().cpu().numpy()
        with np.errstate(over="ignore", invalid="ignore"):
            out = out * self.y_scale_ + self.y_mean_
        check_finite_output(out, type(self).__name__, "float64", cause=(
            "the predictions overflow float64 once put back in the units of y (y_scale_="
            f"{self.y_scale_.tolist()}, y_mean_={self.y_mean_.tolist()}); rescale y."))
        return out[:, 0] if self._y_ndim == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags
