"""The base of every trained estimator in skset.

:class:`BaseNeuralEstimator` (Set Transformer / Deep Sets, supervised OTK, ABC) owns what they
share: the parameter table and its check, device and dtype, the random streams, the one training
loop of :mod:`skset.neural_network._training` (callbacks, early stopping, best-checkpoint restore,
learning-rate schedules), the training history, prediction batches bounded by the element budget,
and pickling with every tensor, module and optimizer state moved to the CPU and back
(:class:`skset._base.SksetEstimator`).

:class:`SetNetworkEstimator` adds the whole ``fit`` of a network that maps a set to one target:
input checks, target encoding, warm start, the validation split, length-bucketed batches and the
per-epoch validation, and the ``sample_weight`` of the sets (one weighted loss, see
:meth:`SetNetworkEstimator.fit`); subclasses build the network and may add a loss term, callbacks,
or work before and after training. :class:`~skset.neural_network._tasks.SetClassifierMixin` and
:class:`~skset.neural_network._tasks.SetRegressorMixin` (:mod:`._tasks`) give
the task: targets, loss, validation score and the ``predict*`` methods.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.utils._set_output import _SetOutputMixin
from sklearn.utils.validation import check_is_fitted

from .._base import SksetEstimator
from .._sets import check_finite_output, check_kmer_lengths, check_sets, iter_packed, pack, to_numpy
from .._torch import GLOBAL_RNG_LOCK, _to_cpu, make_generator
from .._validation import check_sample_weight
from ._callbacks import BestCheckpoint, Callback, EpochPrinter
from ._multilabel import multilabel_indicator
from ._targets import check_every_class
from ._training import (
    TRAINING_PARAMS,
    TrainResult,
    epoch_batches,
    split_validation,
    standard_callbacks,
    train_module,
)

__all__ = ["BaseNeuralEstimator", "SetNetworkEstimator", "compose_doc"]


def compose_doc(*parts: str) -> str:
    """A class docstring from its parts: the class's own paragraphs and the sections it shares
    with its siblings (parameters, training parameters, references)."""
    return "".join(parts)


#: the parameters a warm start or ``partial_fit`` may change: how the network trains. The others
#: (architecture, preprocessing, ``class_weight``, whose ``class_weight_`` the first fit computes)
#: say what the fitted model is; its fit fixed them
_TRAINING_ONLY = frozenset(TRAINING_PARAMS) | {"batch_size", "n_iter_no_change", "solver",
                                               "learning_rate", "dropout"}


def _same_param(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays
        return bool(np.array_equal(a, b))


class BaseNeuralEstimator(SksetEstimator):
    """The training loop and its history on top of :class:`skset._base.SksetEstimator`."""

    #: fitted attributes of the training history, reset by a fit that is not a warm start
    _history = ("loss_curve_", "validation_scores_", "learning_rates_")

    def _start_fit(self, warm: bool) -> tuple[int, np.random.RandomState]:
        """:meth:`_begin_fit`, and the history reset unless ``warm``; returns ``(seed, rng)``."""
        streams = self._begin_fit()
        if not warm:
            # a fresh fit builds its network anew (a fit that raises gets the fitted one back:
            # skset._base._training_call)
            self.__dict__.pop("module_", None)
            self._optimizer_state = None
            for attr in self._history:
                setattr(self, attr, [])
            self.best_validation_score_ = None
            self.n_iter_ = 0
        return streams

    def _model_params(self) -> dict:
        """The parameters that say what the network is (every one but :data:`_TRAINING_ONLY`)."""
        return {k: v for k, v in self.get_params(deep=False).items() if k not in _TRAINING_ONLY}

    def _check_model_params(self, how: str) -> None:
        """A ``ValueError`` naming the parameters of :meth:`_model_params` changed
        (``set_params``) since the fit that built the network (``_model_params_``; models
        fitted before it was recorded are not checked): ``how`` (a warm start, ``partial_fit``,
        ``skset.save``) would keep the fitted network under parameters that describe another."""
        fitted = getattr(self, "_model_params_", None)
        if fitted is None:
            return
        now = self._model_params()
        changed = [k for k, v in fitted.items() if k in now and not _same_param(now[k], v)]
        if changed:
            said = ", ".join(f"{k}={now[k]!r} (fitted with {fitted[k]!r})" for k in changed)
            raise ValueError(
                f"{type(self).__name__}: {said}: the fitted model was built with the other "
                f"value{'s' if len(changed) > 1 else ''}, and {how} keeps it; set "
                f"{'them' if len(changed) > 1 else 'it'} back, or call fit (warm_start=False) "
                "to build a new network.")

    @staticmethod
    def _seeded(seed: int, build):
        """``build()`` with torch's global RNG seeded privately (the caller's RNG is untouched):
        built on the CPU from its generator, forked and seeded alone (``torch.manual_seed`` would
        also reseed every CUDA device's), then moved by the caller."""
        with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]), torch.device("cpu"):
            torch.random.default_generator.manual_seed(seed)
            return build()

    def _train(self, loss_fn, batches, callbacks: list[Callback], *, optimizer: str,
               max_iter: int, units_per_epoch: int = 1, max_units: int | None = None,
               incremental: bool = False, **overrides) -> TrainResult:
        """Run :func:`train_module` on ``self.module_`` with the complete list of ``callbacks``
        (see :func:`standard_callbacks`) and this estimator's learning rate and ``alpha`` as weight
        decay (``overrides`` replace them), and append the result to the history.

        ``optimizer`` and ``max_iter`` (epochs, or chunks of steps) come from the caller: not
        every estimator has those parameters. ``n_iter_`` counts epochs, or optimisation steps
        for an estimator whose "epoch" is a chunk of ``units_per_epoch`` steps (capped at
        ``max_units``).
        """
        kw = dict(optimizer=optimizer, max_iter=max_iter,
                  learning_rate_init=self.learning_rate_init, weight_decay=self.alpha,
                  optimizer_state=self._optimizer_state, verbose=int(self.verbose),
                  name=type(self).__name__)
        kw.update(overrides)
        if kw.get("parameters") is not None:  # read twice: its names here, then the optimizer
            kw["parameters"] = list(kw["parameters"])
        state = self._optimizer_state
        names = self._optimizer_names(kw.get("parameters"))
        saved_names = getattr(self, "_optimizer_param_names", None)
        if state is not None and saved_names is not None and list(saved_names) != names \
                and len(state["param_groups"]) == 1:
            # another set of trained parameters than the saved state's (OTKClassifier: the head
            # out of Adam in a fit, in it in partial_fit): each parameter keeps its own moments,
            # found by name (torch refuses a state of another length, and it was dropped)
            at = {n: i for i, n in enumerate(saved_names)}
            state = {"state": {j: state["state"][at[n]] for j, n in enumerate(names)
                               if n in at and at[n] in state["state"]},
                     "param_groups": [{**state["param_groups"][0],
                                       "params": list(range(len(names)))}]}
        if state is not None:  # a warm start: the optimizer's state, with today's alpha, the
            # learning rate (a schedule's own changes are kept only between partial_fit calls: a
            # warm fit starts again at learning_rate_init, as scikit-learn's MLP does) and
            # today's optimizer (torch's Adam reads AdamW's decoupled decay from a saved state)
            lr = kw["learning_rate_init"]
            keep = incremental and getattr(self, "_optimizer_lr_", lr) == lr
            new_lr = {} if keep else {"lr": lr}
            decay = {"weight_decay": kw["weight_decay"]}
            if "decoupled_weight_decay" in state["param_groups"][0]:
                decay["decoupled_weight_decay"] = kw["optimizer"] == "adamw"
            kw["optimizer_state"] = {**state, "param_groups": [
                {**g, **decay, **new_lr} for g in state["param_groups"]]}
        result = train_module(self.module_, loss_fn, batches, callbacks=callbacks,
                              epochs_before=int(self.n_iter_) // units_per_epoch, **kw)
        self._optimizer_lr_ = kw["learning_rate_init"]
        self._optimizer_param_names = names
        # on the CPU (as __getstate__ would put it): a GPU fit pickles and loads without CUDA
        self._optimizer_state = _to_cpu(result.optimizer_state, clone=True)
        self.loss_curve_ = [*self.loss_curve_, *result.loss_curve]
        self.validation_scores_ = [*self.validation_scores_, *result.validation_scores]
        self.learning_rates_ = [*self.learning_rates_, *result.learning_rates]
        if any(isinstance(cb, BestCheckpoint) for cb in callbacks):
            self.best_validation_score_ = result.best_score
        else:  # the weights moved with no validation: the old best describes other weights
            self.best_validation_score_ = None
        units = result.n_iter * units_per_epoch
        self.n_iter_ = int(self.n_iter_) + (units if max_units is None else min(units, max_units))
        return result

    def _optimizer_names(self, parameters=None) -> list[str]:
        """The names of the parameters :func:`train_module` trains (``parameters``, or every
        parameter of ``module_``, those that require gradients), in the optimizer's order."""
        name = {id(p): n for n, p in self.module_.named_parameters()}
        params = self.module_.parameters() if parameters is None else parameters
        return [name.get(id(p), "") for p in params if p.requires_grad]

    def _standard_callbacks(self, validation=None, callbacks=(),
                            early_stopping=None, n_iter_no_change=None) -> list[Callback]:
        """:func:`standard_callbacks` with this estimator's ``early_stopping`` (or the resolved
        value given), ``tol`` and ``n_iter_no_change`` (or the resolved patience given)."""
        early = bool(self.early_stopping) if early_stopping is None else bool(early_stopping)
        patience = self.n_iter_no_change if n_iter_no_change is None else n_iter_no_change
        # a warm start keeps the best score so far (None after a cold start's reset)
        best = getattr(self, "best_validation_score_", None) if early else None
        return standard_callbacks(validation, callbacks, early_stopping=early,
                                  tol=self.tol, n_iter_no_change=patience, best_score=best)

    def _persist_module(self, name: str) -> torch.nn.Module:
        """The untrained architecture of fitted module ``name`` (for :func:`skset.load`, which
        then loads the saved weights into it)."""
        if name != "module_":
            raise ValueError(f"{type(self).__name__} has no torch module attribute {name!r}.")
        return self._untrained_module()

    def _untrained_module(self) -> torch.nn.Module:  # pragma: no cover - every subclass writes it
        raise NotImplementedError

    def __sklearn_tags__(self):  # collections of sets in; deterministic on the CPU (the base's)
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    def _batch_cost(self, lengths: np.ndarray) -> np.ndarray:
        """The memory cost of a set in a batch, counted against ``max_elements``."""
        return lengths

    def _pack_side_data(self, items: list, X: torch.Tensor, mask: torch.Tensor):
        """The per-set side data of one batch as the module takes it (its third argument):
        ``items`` holds one entry per set of the batch, in the batch's order, and ``X``, ``mask``
        are the packed sets. Only estimators that take side data (e.g. supervised OTK's element
        masses) implement it."""
        raise NotImplementedError(f"{type(self).__name__} takes no per-set side data.")

    def _predict_batches(self, sets, fn, module=None, budget=None, side=None) -> torch.Tensor:
        """``fn(module, X, mask)`` over length-sorted batches of ``sets`` whose padded cost stays
        under the element budget (``max_elements``); rows in input order, on the device.

        ``side``: per-set side data (one entry per set, see :meth:`_pack_side_data`) or None;
        when given, each batch's packed side data is ``fn``'s fourth argument,
        ``fn(module, X, mask, S)``.
        """
        module = self.module_ if module is None else module
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
        budget = self.max_elements if budget is None else budget
        out = None
        was_training = module.training
        module.eval()
        try:
            with torch.no_grad():
                for idx, X, M in iter_packed(sets, device=self.device_, dtype=self.dtype_,
                                             max_elements=budget, padding_tolerance=None,
                                             cost=self._batch_cost(lengths)):
                    extra = () if side is None else (
                        self._pack_side_data([side[i] for i in idx], X, M),)
                    res = fn(module, X, M, *extra)
                    if out is None:
                        out = torch.empty((len(sets),) + tuple(res.shape[1:]), dtype=res.dtype,
                                          device=res.device)
                    out[torch.as_tensor(idx, device=res.device)] = res
        finally:  # the mode it had, also when a batch raises
            module.train(was_training)
        check_finite_output(out, type(self).__name__, self.dtype_)
        return out


@dataclass
class TrainingSetup:
    """What an estimator adds to the shared training of :meth:`SetNetworkEstimator.fit` (the
    strategy object of :meth:`SetNetworkEstimator._training_setup`).

    ``callbacks`` run between the validation and the progress line (see
    :func:`standard_callbacks`); ``parameters`` are what the optimizer updates (None: every
    parameter that requires a gradient); ``penalty(module, loss)`` returns the batch loss with
    any extra term; ``overrides`` give the optimizer settings of :func:`train_module`
    (``optimizer`` always; ``weight_decay``, ``grad_clip``, ...).
    """

    callbacks: list = field(default_factory=list)
    parameters: list | None = None
    penalty: Callable | None = None
    overrides: dict = field(default_factory=dict)


@dataclass
class FitData:
    """The training sets of one ``fit``, its split and its encoded targets (on the device).

    ``weights`` are the sets' ``sample_weight`` (on the device, in the compute dtype), or None
    when the fit has none or the weights of the sets it trains on are all equal (the plain mean
    loss then). Sets of weight 0 are in neither ``train`` nor ``validation``.

    ``side`` is the per-set side data of an estimator that takes some (one entry per set, e.g.
    supervised OTK's element masses; see :meth:`SetNetworkEstimator._check_side_data`), or None.
    ``incremental``: the sets are one chunk of a ``partial_fit`` stream.
    """

    sets: list
    targets: torch.Tensor
    train: np.ndarray
    validation: np.ndarray | None
    lengths: np.ndarray
    weights: torch.Tensor | None = None
    side: list | None = None
    incremental: bool = False  # one call of partial_fit (a chunk of a stream)

    def subset(self, idx):
        return [self.sets[i] for i in idx], self.targets[torch.as_tensor(idx,
                                                                         device=self.targets.device)]

    def weights_of(self, idx) -> torch.Tensor | None:
        """The weights of sets ``idx`` (None: equal weights)."""
        if self.weights is None:
            return None
        return self.weights[torch.as_tensor(idx, device=self.weights.device)]

    def side_of(self, idx) -> list | None:
        """The side data of sets ``idx`` (None: the fit has none)."""
        if self.side is None:
            return None
        return [self.side[i] for i in idx]


class SetNetworkEstimator(_SetOutputMixin, BaseNeuralEstimator):
    """The ``fit`` of a network from a set to one target (see the module docstring).

    Subclass hooks: :meth:`_init_module` (required: the network, and any initialisation from
    the data), :meth:`_training_setup` (a :class:`TrainingSetup`: callbacks, the parameters the
    optimizer updates, a loss penalty, optimizer settings), :meth:`_prepare_sets` (a fitted
    preprocessing of the sets); :attr:`_min_elements` (the k-mer window).

    Per-set side data (opt-in): a subclass whose network takes more than the sets (supervised
    OTK: element masses) writes :meth:`_check_side_data` and :meth:`_pack_side_data`, and its
    public ``fit`` / ``predict*`` / ``transform`` take the data under their own name and pass it
    to :meth:`_fit` / :meth:`_predict_inputs` as ``side``. The side data then travels with the
    sets: ``FitData.side``, the training batches (the module is called ``module(X, mask, S)``)
    and :meth:`_predict_batches` (validation, prediction, subclass refits).
    """

    _is_classifier = False

    @property
    def _target_type(self) -> str:
        """How the ``"auto"`` rules read ``y`` (``target_type`` of :class:`skset.NystromFeatures`)."""
        return "multiclass" if self._is_classifier else "continuous"

    @property
    def _min_elements(self) -> int:
        return 1

    # -- hooks ------------------------------------------------------------------------------------
    def _init_module(self, data: FitData, n_outputs: int, seed: int,
                     rng: np.random.RandomState) -> torch.nn.Module:  # pragma: no cover
        raise NotImplementedError

    def _training_setup(self, data: FitData, warm: bool) -> TrainingSetup:  # pragma: no cover
        """How this estimator trains beyond the shared loop (its ``overrides`` give
        ``optimizer`` at least); called after :meth:`_init_module` (or the warm start's module)
        is in ``module_``."""
        raise NotImplementedError

    def _prepare_sets(self, sets: list, fitting: bool, sample_weight=None, y=None,
                      seed: int = 0, side=None) -> list:
        """The sets the network sees, from the checked input sets (default: unchanged).

        ``fitting`` is True in a ``fit`` that is not a warm start (fit preprocessing state then,
        weighting each set by ``sample_weight``, float64 ``(n_sets,)`` or None, e.g. with
        :func:`skset._weighting.weighted_mean_std`, from the targets ``y`` as given, the
        checked side data ``side`` and the fit's ``seed``).
        """
        return sets

    def _check_side_data(self, side, sets: list) -> list | None:
        """The checked per-set side data (one entry per set of ``sets``, the checked input sets),
        or None for none (which must give exactly the computation without side data). Default:
        the estimator takes none."""
        if side is not None:
            raise TypeError(f"{type(self).__name__} takes no per-set side data.")
        return None

    def _task_loss(self, out, target, weight=None):
        """The task loss of a batch: ``_loss`` (the mean over the sets), or with ``weight`` the
        weighted mean ``sum_i w_i l_i / sum_i w_i`` of the per-set losses ``_sample_loss``."""
        if weight is None:
            return self._loss(out, target)
        return (weight * self._sample_loss(out, target)).sum() / weight.sum()

    # -- fit --------------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Fit the network on the sets ``X`` with one target per set ``y``.

        Parameters
        ----------
        X : list of array-like of shape (n_i, n_features), or ndarray (n_sets, n, n_features)
            The training sets; sizes may differ.
        y : array-like of shape (n_sets,), or (n_sets, n_outputs) for regressors, or \
(n_sets, n_labels) for classifiers
            One target per set. Classifiers also take a multi-label indicator matrix (array,
            list of lists or sparse matrix of 0 and 1, scikit-learn's ``"multilabel-indicator"``
            target): one sigmoid output and binary cross-entropy per label, ``classes_ =
            arange(n_labels)`` (see the class docstring).
        sample_weight : array-like of shape (n_sets,), float or None, default=None
            Non-negative weight of each set (scikit-learn's semantics). The loss of a batch is
            the weighted mean ``sum_i w_i l_i / sum_i w_i`` of its sets' losses (as in
            ``MLPClassifier``), so with one batch holding every set (``batch_size >= n_sets``)
            an integer weight ``k`` trains exactly as ``k`` copies of the set (supervised OTK
            starts from random draws over the sets, k-means and the bandwidth's sample, which
            differ between weights and copies); with smaller batches it only does so in
            expectation (each batch is normalised by its own total weight). Weights also enter
            the fitted standardisations (element features of Set Transformer / Deep Sets,
            targets of regressors), Deep Sets' ``pool_size_``
            (its mean-scaled poolings), supervised OTK's unsupervised
            initialisation (``NystromFeatures`` and ``OTKEmbedding`` fitted with them) and its
            head refits, ``loss_curve_`` (the weighted mean over the epoch), and with
            ``early_stopping`` the validation score (weighted accuracy or R^2, as ``score``
            with ``sample_weight``) of the held-out sets, drawn as without weights. Sets of
            weight 0 take no part in the fit, exactly as if removed (``classes_`` still comes
            from all of ``y``). Only relative weights matter; equal weights are exactly no
            weights. The ``"auto"`` choices (k-mer width, element map, positions, supervised
            OTK's start) count each set of positive weight once. None: every set weighs 1.

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch over the sets ``X`` (scikit-learn's ``partial_fit``), for data that arrives
        in chunks or does not fit in memory.

        The first call (on an unfitted estimator) builds the network and fits what ``fit``
        fits from the data (standardisations, target scaling, supervised OTK's initialisation)
        **on this first chunk**; every call then runs one epoch over its chunk, with the
        optimizer's state kept between calls, and adds 1 to ``n_iter_``. A call after ``fit``
        continues that model (a parameter that built the network, changed by ``set_params``
        since, is a ``ValueError``). No validation split or early stopping (as scikit-learn's
        MLP): hold out data and score it between calls.

        Parameters
        ----------
        X : list of array-like of shape (n_i, n_features), or ndarray (n_sets, n, n_features)
            A chunk of training sets.
        y : array-like of shape (n_sets,) (or (n_sets, n_outputs) for regressors, (n_sets, \
n_labels) multi-label indicators for classifiers)
            Their targets.
        classes : array-like of shape (n_classes,), default=None
            Classifiers: every class of the whole stream, required on the first call (a chunk
            may miss some); a later call may repeat it (other classes: a ``ValueError``); not
            needed for a multi-label ``y``, whose width fixes the labels (``arange(n_labels)``,
            the only value accepted). Regressors: none (a ``TypeError``; weights: ``sample_weight=``).
        sample_weight : array-like of shape (n_sets,), float or None, default=None
            As in :meth:`fit` (each chunk's loss a weighted mean); ``OTKRegressor`` adds each
            chunk to its head's sums in the weights' own units (chunks weigh by their weights).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight, incremental=True, classes=classes)

    def _fit(self, X, y, sample_weight=None, side=None, *, incremental=False, classes=None):
        """:meth:`fit` (or one epoch of :meth:`partial_fit` with ``incremental``), with the
        per-set side data ``side`` of a subclass that takes some."""
        if isinstance(y, torch.Tensor):  # targets on a GPU, or in a dtype numpy lacks (bfloat16)
            y = to_numpy(y)
        warm = (incremental or bool(self.warm_start)) and hasattr(self, "module_")
        if warm:  # the fitted network's dtype and architecture, or nothing changes
            how = "partial_fit" if incremental else "warm_start=True"
            self._check_warm_dtype(self.dtype_, how)
            self._check_model_params(how)
        if (incremental and not warm and self._is_classifier and classes is None
                and multilabel_indicator(y) is None):  # multi-label: y's width fixes the labels
            raise ValueError(f"{type(self).__name__}: classes must be passed on the first call "
                             "to partial_fit (every class of the stream).")
        seed, rng = self._start_fit(warm)
        coll = check_sets(X, compute_dtype=self.dtype_)
        self._check_columns(X, fitting=not warm)
        if warm and coll.n_features != self.n_features_in_:
            how = "partial_fit" if incremental else "warm_start=True"
            raise ValueError(f"X has {coll.n_features} features, but {type(self).__name__} was "
                             f"fitted on {self.n_features_in_} features ({how}).")
        sw = check_sample_weight(sample_weight, len(coll.sets), type(self).__name__, "sets")
        if sw is not None and self.dtype_ == torch.float32:  # weights float32 rounds to 0 are 0
            sw = np.where(sw < np.finfo(np.float32).tiny, 0.0, sw)  # (0/0 in a batch of them)
        # a fitted model (a later partial_fit, warm_start) reads a set shorter than its k-mers as
        # one k-mer, as predict does: only a first fit refuses training sets (of positive weight)
        # shorter than a given window, naming it
        if not warm and self._min_elements > 1:
            check_kmer_lengths(coll.lengths if sw is None else np.where(
                sw > 0, coll.lengths, self._min_elements), self._min_elements)
        side = self._check_side_data(side, coll.sets)
        # the targets are checked before the sets are prepared (a k-mer choice reads y)
        targets, n_outputs = self._encode_targets(y, len(coll.sets), first_fit=not warm, sample_weight=sw,
                                                  classes=classes, incremental=incremental)
        if warm and not incremental and self._is_classifier and not self._is_multilabel:
            check_every_class(targets, self.classes_, type(self).__name__)
        n = len(coll.sets)
        # sets of weight 0 take no part (as if removed): the split and the batches see the others
        pool = np.arange(n) if sw is None else np.flatnonzero(sw > 0)
        fraction = self._validation_split(len(pool)) if not incremental else None
        early = fraction is not None
        if early:
            tr, va = split_validation(len(pool), fraction,
                                      y=targets[pool] if self._is_classifier else None,
                                      stratify=self._is_classifier, seed=seed)
            tr, va = pool[tr], pool[va]
        else:
            tr, va = pool, None
        # what a first fit learns from the sets (k-mers, scaling, balanced class weights)
        # leaves the held-out sets out;
        # a regressor's targets are scaled on every set: the mean a shrinkage factor of 0
        # predicts is that of every training target, the factor chosen against it (conservative)
        sw_fit = sw
        if early and not warm:
            sw_fit = np.zeros(n)
            sw_fit[tr] = 1.0 if sw is None else sw[tr]
            if self._is_classifier:  # class_weight="balanced" counts the training part too
                # (a column of labels read as the first reading read it, without its warning)
                column = np.ndim(y) == 2 and np.shape(y)[1] == 1  # dense or scipy.sparse
                y1 = np.ravel(y.toarray() if hasattr(y, "toarray") else y) if column else y
                targets, n_outputs = self._encode_targets(y1, n, first_fit=True,
                                                          sample_weight=sw_fit, classes=classes)
        sets = self._prepare_sets(coll.sets, fitting=not warm, sample_weight=sw_fit, y=y,
                                  seed=seed, side=side)
        # class codes are integers; regression targets and multi-label indicators are floats
        tdtype = torch.long if targets.dtype.kind in "iu" else self.dtype_
        weighted = sw is not None and not np.all(sw[pool] == sw[pool[0]])
        data = FitData(
            sets=sets, targets=torch.as_tensor(targets, dtype=tdtype, device=self.device_),
            train=tr, validation=va,
            lengths=np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=n),
            weights=torch.as_tensor(sw, device=self.device_, dtype=self.dtype_) if weighted
            else None, side=side, incremental=incremental)
        if not warm:
            self.n_features_in_ = coll.n_features
            self.module_ = self._init_module(data, n_outputs, seed, rng).to(
                device=self.device_, dtype=self.dtype_)
            self._model_params_ = self._model_params()
            undo = None
        else:
            undo_applied = self._before_warm_training()
            # the weights as training starts from them: an interrupted warm fit or partial_fit
            # leaves the network as it was, with the history it had (not half-trained weights)
            saved = {k: v.detach().clone() for k, v in self.module_.state_dict().items()}

            def undo():
                self.module_.load_state_dict(saved)
                if undo_applied is not None:
                    undo_applied()

        gen = make_generator(seed + self.n_iter_)
        dev, dt, Y = self.device_, self.dtype_, data.targets
        batch_size = self._fit_batch_size(len(tr))

        def batches(epoch):
            for b in epoch_batches(data.lengths[tr], batch_size=batch_size,
                                   max_elements=self.max_elements, generator=gen):
                idx = tr[b]
                Xb, Mb = pack([sets[i] for i in idx], device=dev, dtype=dt)
                Sb = () if side is None else (self._pack_side_data(data.side_of(idx), Xb, Mb),)
                yield Xb, Mb, Y[torch.as_tensor(idx, device=dev)], data.weights_of(idx), Sb

        validation = None
        if early:
            val_sets, Y_va = data.subset(va)
            W_va, S_va = data.weights_of(va), data.side_of(va)

            def validation(module):  # weighted by the validation sets' sample_weight
                out = self._predict_batches(val_sets, lambda m, X_, M_, *S_: m(X_, M_, *S_),
                                            module, side=S_va)
                return self._val_score(out, Y_va, W_va), float(self._task_loss(out, Y_va, W_va))

        setup = self._training_setup(data, warm)
        penalty = setup.penalty

        def loss_fn(module, batch):
            # the one place the sample weights enter the training loss; the batch's share of the
            # epoch loss (loss_curve_) is its number of sets, or its total weight
            Xb, Mb, Yb, Wb, Sb = batch
            loss = self._task_loss(module(Xb, Mb, *Sb), Yb, Wb)
            if penalty is not None:
                loss = penalty(module, loss)
            return loss, (Yb.shape[0] if Wb is None else float(Wb.sum()))

        if incremental:  # one epoch, no stopping rule
            callbacks, max_iter = [*setup.callbacks, EpochPrinter()], 1
        else:
            callbacks = self._standard_callbacks(
                validation, setup.callbacks, early,
                n_iter_no_change=self._fit_patience(len(tr), batch_size))
            max_iter = self.max_iter
        try:
            with self._training_context(seed + self.n_iter_):
                self._train(loss_fn, batches, callbacks, max_iter=max_iter, incremental=incremental,
                            parameters=setup.parameters, warn_convergence=not incremental,
                            **setup.overrides)
            self._after_training(data)  # (a regressor's shrinkage: undone with the training)
        except BaseException:
            if undo is not None:  # the network as the fit before left it
                undo()
            raise
        return self

    def _training_context(self, seed: int):
        """The context the training runs in (``seed``: this fit's, plus the epochs run
        before); nothing here, the Set Transformer's seeds its dropout masks."""
        return contextlib.nullcontext()

    def _fit_batch_size(self, n_train: int) -> int:
        """The most sets per training batch in a fit on ``n_train`` sets (default:
        ``batch_size``)."""
        return int(self.batch_size)

    def _fit_patience(self, n_train: int, batch_size: int) -> int:
        """The stopping rule's patience in epochs for a fit on ``n_train`` sets in batches of
        at most ``batch_size`` (default: ``n_iter_no_change``)."""
        return int(self.n_iter_no_change)

    def _validation_split(self, n_sets: int) -> float | None:
        """The fraction of the ``n_sets`` training sets held out for early stopping, or None for
        no validation split (``early_stopping=False``)."""
        return float(self.validation_fraction) if self.early_stopping else None

    def _after_training(self, data: FitData) -> None:
        """Work after training (``data.validation``: the validation split, None without one;
        with one, the best epoch is restored); default none."""

    def _before_warm_training(self):
        """Work before a warm start or ``partial_fit`` trains the fitted network again (undo
        what :meth:`_after_training` applied for prediction only); returns what puts it back
        where training raises (a callable), or None; default none."""
        return None

    @property
    def _n_outputs_fitted(self) -> int:
        return len(self.classes_) if self._is_classifier else len(self.y_mean_)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the columns of :meth:`transform`: ``"<classname><i>"`` (lower-cased class
        name), as scikit-learn's transformers with new features name them.

        Parameters
        ----------
        input_features : None
            Ignored (the features are learned, not one per input feature); present for the
            scikit-learn API.

        Returns
        -------
        ndarray of str, shape (n_features_out,)
        """
        check_is_fitted(self, "_n_features_out")
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self._n_features_out)], dtype=object)

    # -- serving (skset.export) ----------------------------------------------------------------
    @property
    def _serving_outputs(self) -> tuple[str, ...]:
        if self._is_classifier and getattr(self, "_multilabel", False):
            return ("decision_function", "predict_proba", "predict", "transform")
        if self._is_classifier:
            return ("decision_function", "predict_proba", "predict_index", "transform")
        return ("predict", "transform")

    def _serving_module(self, *, sinkhorn_method: str = "log",
                        sinkhorn_iter: int | None = None) -> torch.nn.Module:
        """A copy of the fitted network as the module :func:`skset.export.serving_module`
        returns (``sinkhorn_*``: for networks with an OTK layer)."""
        from .._serving import network_serving

        check_is_fitted(self, "module_")
        net = copy.deepcopy(self.module_)
        mean = getattr(self, "mean_", None)  # absent in models fitted before standardize
        scale = getattr(self, "scale_", None)
        if mean is not None and not np.any(mean) and np.all(scale == 1.0):
            mean = None
        return network_serving(self, net, self._serving_head(net), mean,
                               None if mean is None else scale)

    def _serving_head(self, net):
        return net.decoder

    # -- outputs ----------------------------------------------------------------------------------
    def _check_predict_X(self, X):
        return self._predict_inputs(X)[0]

    def _predict_inputs(self, X, side=None) -> tuple[list, list | None]:
        """The checked, prepared sets of ``X`` and their checked side data (or None)."""
        check_is_fitted(self, "module_")
        # any set of one element or more: one shorter than the k-mers is read as one k-mer
        sets = check_sets(X, n_features=self.n_features_in_, compute_dtype=self.dtype_).sets
        self._check_columns(X, fitting=False)
        side = self._check_side_data(side, sets)
        return self._prepare_sets(sets, fitting=False), side

    def _raw_outputs(self, sets, side=None) -> torch.Tensor:
        return self._predict_batches(sets, lambda m, X_, M, *S: m(X_, M, *S), side=side)

    def transform(self, X) -> np.ndarray:
        """The learned representation of each set, ``(n_sets, n_features_out)``: what the
        network's output layer reads (see the class docstring)."""
        return self._transform(X)

    def _transform(self, X, side=None) -> np.ndarray:
        sets, side = self._predict_inputs(X, side)
        return self._predict_batches(sets, lambda m, X_, M, *S: m.embed(X_, M, *S),
                                     side=side).cpu().numpy()
