"""Supervised, end-to-end OTK: :class:`OTKClassifier` and :class:`OTKRegressor`.

The model is the unsupervised pipeline ``NystromFeatures -> OTKEmbedding -> linear model`` made
trainable: a :class:`skset.nn.NystromLayer` (anchors ``w``), an :class:`skset.nn.OTKLayer`
(references ``z``), the embedding's centring and normalisation, and a linear head, initialised by
fitting the unsupervised estimators (and the head on their features), then trained end to end
(:mod:`skset.neural_network._training`; Mialon et al. 2021, Section 2.2 and Appendix D.3).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.validation import check_is_fitted

from .._config import get_config
from .._kmer_inputs import KmerWidth
from .._offsets import far_offset
from .._sets import kmer_windows, pack_weights
from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, Boolean, Integer
from .._weighting import element_masses, kmer_weights
from ..embedding import OTKEmbedding
from ..kernel_approximation import NystromFeatures
from ..nn.nystrom import DEFAULT_N_COMPONENTS, NystromLayer, kmer_mass, kmer_unfold
from ..nn.otk import POSITION_MODES, OTKLayer, embedding_output
from ._base import SetNetworkEstimator, TrainingSetup, compose_doc
from ._callbacks import ReduceLROnPlateau
from ._heads import (
    AlternatingHead,
    add_ridge_stats,
    fit_logistic_head,
    fit_multilabel_logistic_head,
    fit_ridge_head,
    fit_ridge_head_stats,
    level_absent_classes,
    ridge_loo_alpha,
    ridge_stats,
    weight_unit,
)
from ._multilabel import CLASS_WEIGHT_DOC, MULTILABEL_DOC, with_class_weight
from ._otk_docs import (
    _ALPHA_DOC,
    _CLF_RULE_ATTRS,
    _DOC_ATTRS,
    _DOC_PARAMS,
    _DOC_REFS,
    _ELEMENT_WEIGHT_DOC,
    _ELEMENT_WEIGHT_FIT_DOC,
    REGRESSOR_DOC_PARTS,
    _with_element_weight,
)
from ._otk_start import PAPER_EPSILON, chosen_start, head_alpha, sync_alpha
from ._tasks import SetClassifierMixin, SetRegressorMixin
from ._training import TRAINING_PARAMS

__all__ = ["OTKClassifier", "OTKRegressor"]

# The paper's CKN element map for its supervised models (Appendix D.3): k-mers standardised, on
# the unit sphere, norm kept, bandwidth 0.5. The "auto" map starts from it (kept unless the data
# say otherwise by more than noise): on a motif-order task the mean-pooled proxy cannot see order,
# and the unsupervised default map left the trained model at 0.54-0.60 against 0.72-0.74.
PAPER_MAP = {"standardize": True, "normalize": True, "keep_norm": True, "bandwidth": 0.5}

# The classifier's head solves stop when the largest gradient entry is HEAD_TOL of its value at
# W = 0 (see fit_logistic_head). Where an iteration is costly (more than HEAD_CHEAP_WORK
# multiply-adds in each of its two products: n_sets x (n_features + 1) x n_classes, a few ms
# on one core at the limit) the alternating solver fits the head at initialisation and at the end
# only, each time warm (from zero, then from the initial head) and stopping at HEAD_TOL_BETWEEN
# after at most HEAD_WARM_ITER iterations. On the 1,000-class task of
# benchmarks/bench_many_classes.py (--max-train 5 --max-size 300, 3 epochs) the refits before
# each epoch cost 9-11 s of a 33-35 s fit, and leaving them out did not lower test top-1 accuracy
# (seeds 0-2: 85.7 / 83.3 / 85.0 with them, 85.1 / 84.2 / 85.6 without); the end refit took 54
# iterations to 3e-4 and 10 to 1e-3 (objective 0.1127 against 0.1182), for the same test
# top-1/5/10 (85.6 / 99.1 / 99.7 and 85.7 / 99.1 / 99.6). On the small suite rows (cheap solves)
# the head's precision shows: seeds 0-2, PickupGestureWiimoteZ 10-mers 68.7 with loose refits,
# 70.7 to 3e-4, 72.0 to HEAD_TOL_CHEAP (L-BFGS to 1e-7 before), WatchWindows 88.9 / 88.9 / 89.7.
HEAD_TOL, HEAD_TOL_BETWEEN, HEAD_TOL_CHEAP, HEAD_WARM_ITER = 3e-4, 1e-3, 1e-5, 10
HEAD_CHEAP_WORK = 1 << 26


class _KmerUnfold(torch.nn.Module):
    """The element map without Nystrom: the k-mers of each sequence (:func:`kmer_unfold`; window
    1: the elements as they are)."""

    def __init__(self, window: int):
        super().__init__()
        self.window = int(window)

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        return kmer_unfold(x, mask, self.window)


class _OTKNetwork(torch.nn.Module):
    """Element map -> OTK -> centring / normalisation -> linear head.

    ``element_map``: any module ``(x (B, n, d), mask (B, n)) -> (x' (B, m, k), mask' (B, m))``
    whose output rows are real where ``mask'`` is (a :class:`skset.nn.NystromLayer`, the k-mers
    of :class:`_KmerUnfold`...); ``k`` is the OTK layer's ``in_features``. A map may define
    ``for_export()``, the copy that :func:`skset.export.serving_module` puts in its place
    (``NystromLayer.for_export``: the inverse square root as a fixed buffer).
    ``weights (B, n)``: optional element masses (see :class:`skset.nn.OTKLayer`); with k-mers
    (``window > 1``) a k-mer's mass is the mean of its elements' (:func:`kmer_mass`).
    """

    def __init__(self, element_map: torch.nn.Module, otk: OTKLayer, window: int,
                 center: torch.Tensor, normalize: bool, n_outputs: int, dilation: int = 1):
        super().__init__()
        self.element_map = element_map
        self.otk = otk
        self.window = int(window)
        self.dilation = int(dilation)
        self.normalize = bool(normalize)
        self.register_buffer("center", center.clone())
        self.head = torch.nn.Linear(center.shape[0], n_outputs, dtype=center.dtype)

    @property
    def nystrom(self) -> NystromLayer | None:
        """The element map when it is a Nystrom layer, else ``None`` (read-only; the name of the
        map before it could be any module)."""
        return self.element_map if isinstance(self.element_map, NystromLayer) else None

    def __setstate__(self, state):
        super().__setstate__(state)
        if "nystrom" in self._modules:  # pickled when the map was `nystrom` (None: k-mers)
            nystrom = self._modules.pop("nystrom")
            self._modules["element_map"] = _KmerUnfold(self.window) if nystrom is None else nystrom

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        old = prefix + "nystrom."  # models saved when the map was `nystrom`
        for key in [k for k in state_dict if k.startswith(old)]:
            state_dict[prefix + "element_map." + key[len(old):]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def embed(self, x: torch.Tensor, mask: torch.Tensor,
              weights: torch.Tensor | None = None) -> torch.Tensor:
        x, kmask = self.element_map(x, mask)
        if weights is not None:  # (models saved before dilated k-mers have no dilation)
            weights = kmer_mass(weights, self.window, getattr(self, "dilation", 1), mask)
        mask = kmask
        # the estimators' network reads skset's compile setting (the layer takes it as an
        # argument); a Nystrom layer's padded rows are 0, which the OTK layer need not redo
        raw = self.otk(x, mask, weights, compile=get_config()["compile"],
                       padding_zero=isinstance(self.element_map, NystromLayer)).flatten(1)
        # OTKEmbedding's output step without its noise floor: training needs no such switch
        return embedding_output(raw, self.center, tuple(self.otk.references.shape),
                                normalize=self.normalize, floor=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                weights: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.embed(x, mask, weights))


class _BaseSupervisedOTK(KmerWidth, SetNetworkEstimator):
    _parameter_constraints = {
        "n_components": [Integer(0), None],
        "bandwidth": ["auto", POSITIVE],
        "window": ["auto", POSITIVE_INT],
        "dilation": ["auto", POSITIVE_INT],
        "kmer_coding": ["level_shape", "plain"],
        "standardize": ["auto", Boolean()],
        "normalize": ["auto", Boolean()],
        "keep_norm": ["auto", Boolean()],
        "n_supports": [POSITIVE_INT],
        "n_references": [POSITIVE_INT],
        "epsilon": [POSITIVE, "auto"],
        "sinkhorn_iter": [POSITIVE_INT],
        "position_sigma": [POSITIVE, None, "auto"],
        "position_mode": [*POSITION_MODES],
        "reg_m": [POSITIVE, None],
        "fit_method": ["kmeans", "wasserstein"],
        "solver": ["alternating", "adam"],
        "learning_rate": ["adaptive", "constant"],
        **{k: c for k, c in TRAINING_PARAMS.items() if k != "optimizer"},  # always Adam
        # a budget always (no None, as the other networks take): OTKEmbedding batches by it
        "max_elements": [POSITIVE_INT],
    }
    # models saved before reg_m were balanced, before kmer_coding read plain k-mers, and before
    # dilation contiguous k-mers
    _legacy_params = {"reg_m": None, "kmer_coding": "plain", "dilation": 1}
    # whether the "auto" map may start from the pipeline's choice (_otk_start; the classifier)
    _chooses_start = False

    def _start_fit(self, warm: bool):
        if not warm:  # "auto" is chosen again by a fresh fit
            self.__dict__.pop("window_", None)
            self.__dict__.pop("dilation_", None)
        return super()._start_fit(warm)

    @property
    def _use_nystrom(self) -> bool:
        return bool(self.n_components)

    def _prepare_sets(self, sets, fitting, sample_weight=None, y=None, seed=0, side=None):
        """The sets less ``input_offset_`` (float64), the features a float32 network would
        otherwise read rounded (:func:`skset._offsets.far_offset`, masses ``side``; None: as is)."""
        if fitting:
            self.input_offset_ = far_offset(sets, sample_weight, self.dtype_, masses=side)
        offset = getattr(self, "input_offset_", None)  # absent in models fitted before it
        return sets if offset is None else [s - offset for s in sets]

    # -- element masses: the per-set side data of SetNetworkEstimator ---------------------------
    def _check_side_data(self, side, sets):
        """The element masses normalised per set (float64), None when every set's are uniform
        (exactly the computation without masses)."""
        return element_masses(side, sets, type(self).__name__)

    def _pack_side_data(self, items, X, mask):
        return pack_weights(items, device=X.device, dtype=X.dtype, n_max=X.shape[1])

    # -- initialisation -------------------------------------------------------------------------
    def _initial_module(self, sets, n_outputs: int, rng, sample_weight=None,
                        masses=None, y=None) -> _OTKNetwork:
        """Fit the unsupervised estimators and build the network from them (on the sets weighted
        by ``sample_weight``, float64 ``(n_sets,)`` or None, with element masses ``masses``, one
        1-D array per set, or None; ``y``, the training part's targets, chooses the ``"auto"``
        parameters of the element map as :class:`NystromFeatures` does)."""
        seeds = (rng.randint(2**31 - 1) if self._use_nystrom else None, rng.randint(2**31 - 1))
        fit = (sets, seeds, sample_weight, masses, y)
        parts = chosen_start(self, self._initial_embedding(self._initial_map(PAPER_MAP, *fit), *fit),
                             fit, y, sample_weight, masses)  # the classifier's rules (_otk_start)
        self.nystrom_, self.window_, _, self.embedding_ = parts
        self.dilation_ = 1 if self.nystrom_ is None else self.nystrom_.dilation_
        self.position_sigma_, self.epsilon_ = self.embedding_.position_sigma_, self.embedding_.epsilon
        otk = self.embedding_.to_module()
        center = torch.as_tensor(self.embedding_.mean_, dtype=self.dtype_)
        return _OTKNetwork(self._element_map(), otk, self.window_, center, True, n_outputs,
                           self.dilation_)

    def _initial_map(self, incumbent, sets, seeds, sample_weight, masses, y):
        """``(nystrom, window, features of sets)``, ``"auto"`` chosen from ``incumbent``."""
        if not self._use_nystrom:  # no map: "auto" is 1
            if self.dilation not in ("auto", 1):
                raise ValueError(f"{type(self).__name__}: dilation={self.dilation!r} needs the "
                                 "element map (n_components); without it the k-mers are "
                                 "contiguous: leave dilation at 'auto' or 1.")
            window = self._width
            return None, window, kmer_windows(sets, window) if window > 1 else sets
        nystrom = NystromFeatures(
            n_components=self.n_components, bandwidth=self.bandwidth, window=self.window,
            dilation=self.dilation,
            kmer_coding=self.kmer_coding,  # the network's Nystrom layer codes them too
            standardize=self.standardize, normalize=self.normalize, keep_norm=self.keep_norm,
            target_type=self._target_type, random_state=seeds[0], device=self.device_, dtype=self.dtype)
        nystrom._fit_with_incumbent(sets, y, sample_weight=sample_weight, element_weight=masses,
                                    incumbent=incumbent)
        return nystrom, nystrom.window_, nystrom.transform(sets)

    def _initial_embedding(self, mapped, sets, seeds, sample_weight, masses, y, epsilon=None):
        """``mapped`` and the embedding fitted on its features (and its "auto" positions), at
        ``epsilon`` (None: the parameter's; ``"auto"`` starts at the paper's)."""
        nystrom, window, feats = mapped
        if epsilon is None:
            epsilon = PAPER_EPSILON if self.epsilon == "auto" else self.epsilon
        embedding = OTKEmbedding(
            n_supports=self.n_supports, n_references=self.n_references, epsilon=epsilon,
            sinkhorn_iter=self.sinkhorn_iter, sinkhorn_tol=None, fit_method=self.fit_method,
            position_sigma=self.position_sigma, position_mode=self.position_mode, center=True,
            normalize=True, reg_m=self.reg_m, max_elements=self.max_elements,
            target_type=self._target_type, random_state=seeds[1], device=self.device_, dtype=self.dtype)
        # arrays whatever scikit-learn's transform_output (a pandas frame broke the start rule);
        # a barycenter short of converging is a start that training moves anyway (its advice,
        # barycenter_iter, is not a parameter here)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*Wasserstein barycenter", ConvergenceWarning)
            embedding.set_output(transform="default").fit(
                feats, y if self.position_sigma == "auto" else None, sample_weight=sample_weight,
                element_weight=None if masses is None else kmer_weights(
                    masses, window, 1 if nystrom is None else nystrom.dilation_))
        return nystrom, window, feats, embedding

    def _element_map(self) -> torch.nn.Module:
        """The network's element map, from the fitted ``nystrom_`` (``None``: the k-mers)."""
        if self.nystrom_ is None:
            return _KmerUnfold(self._width)
        return self.nystrom_.to_module()

    def _refits_between_epochs(self, head, n_sets: int) -> bool:
        """Whether the alternating solver refits the head before each epoch (else at
        initialisation and at the end only; see ``AlternatingHead``)."""
        return True

    def _head_alpha(self) -> float:
        return float(self.alpha_)

    def _refit_head(self, module: _OTKNetwork, sets, targets: torch.Tensor,
                    weight: torch.Tensor | None = None, masses=None, first: bool = False,
                    stream: bool = False) -> None:
        """Fit the head in closed form on the current embedding of ``sets`` (``first``: the fit
        at initialisation, where a regressor chooses its ``"auto"`` penalty; ``stream``: in a
        ``partial_fit``)."""
        was_training = module.training
        Z = self._predict_batches(sets, lambda m, X, M, *W: m.embed(X, M, *W), module,
                                  side=masses)
        self._fit_head(module.head, Z, targets, weight, first=first)
        if stream:  # a partial_fit chunk: its absent classes start level with the others
            level_absent_classes(module.head, targets, weight)
        module.train(was_training)

    # -- training (hooks of SetNetworkEstimator.fit) --------------------------------------------
    def _init_module(self, data, n_outputs, seed, rng):
        # the unsupervised initialisation sees the training part only: the validation sets of
        # early_stopping must stay unseen by the anchors and references too
        tr_sets, Y_tr = data.subset(data.train)
        W_tr = data.weights_of(data.train)
        sw = None if W_tr is None else W_tr.detach().cpu().double().numpy()
        S_tr = data.side_of(data.train)
        y_tr = self._targets_for_map(Y_tr)
        module = self._seeded(seed, lambda: self._initial_module(tr_sets, n_outputs, rng, sw,
                                                                 S_tr, y_tr))
        module = module.to(device=self.device_, dtype=self.dtype_)
        with torch.no_grad():
            module.head.weight.zero_(), module.head.bias.zero_()
        self._refit_head(module, tr_sets, Y_tr, W_tr, S_tr, first=True, stream=data.incremental)
        return module

    @staticmethod
    def _targets_for_map(Y) -> np.ndarray | None:
        """One label (class index or scalar target) per set, for the element map's choice."""
        Y = Y.detach().cpu().numpy()
        Y = Y[:, 0] if Y.ndim == 2 and Y.shape[1] == 1 else Y
        return Y if Y.ndim == 1 else None

    def _training_setup(self, data, warm):
        # partial_fit: a head refitted in closed form on each chunk would forget the others, so
        # after the first chunk Adam trains it with the rest (in the optimizer from the start,
        # so that its state carries over between calls)
        # (the regressor's head stays in closed form: the ridge of every chunk seen, from the
        # sums of its normal equations; Adam's steps of about the rate overran its small weights)
        alternating = self.solver == "alternating" and not (
            data.incremental and warm and self._is_classifier)
        callbacks = [AlternatingHead(self, data, warm)] if alternating else []
        self.module_.head.requires_grad_(True)
        if self.learning_rate == "adaptive":
            # the paper's rule: halve the rate after 5 epochs without progress of the validation
            # loss (the training loss without a validation split: no early_stopping, partial_fit)
            # partial_fit: each call is one epoch on its own chunk, whose loss is not comparable
            # with another chunk's, so the schedule does not count across calls and a stream
            # keeps its rate (counted across calls, the chunks' noise halved it again and again:
            # Japanese Vowels streams 98.27 -> 96.70 mean accuracy, worst seed 94.86)
            early = data.validation is not None
            callbacks.append(ReduceLROnPlateau(
                lambda state: state.validation_loss if early else state.epoch_loss,
                patience=5, factor=0.5, tol=self.tol))
        sync_alpha(self, data, warm)
        penalty = None
        # a regressor's chosen penalty may be infinite (the mean): a large finite one for Adam
        alpha = min(self._head_alpha(), 1e6)
        if not alternating and alpha > 0:
            def penalty(module, loss):  # alpha is the head's L2 penalty (not Adam's decay)
                return loss + 0.5 * alpha * module.head.weight.square().sum()
        # the alternating solver fits the head in closed form between epochs: Adam leaves it be
        adam_head = data.incremental and self._is_classifier
        parameters = [p for name, p in self.module_.named_parameters()
                      if not (alternating and not adam_head and name.startswith("head."))]
        return TrainingSetup(callbacks=callbacks, parameters=parameters, penalty=penalty,
                             overrides={"optimizer": "adam", "weight_decay": 0.0})

    def _untrained_module(self):
        n_out = self._n_outputs_fitted
        center = torch.as_tensor(self.embedding_.mean_, dtype=self.dtype_)
        return _OTKNetwork(self._element_map(), self.embedding_.to_module(), self._width, center,
                           True, n_out, self._dilation)

    def _serving_module(self, *, sinkhorn_method="log", sinkhorn_iter=None):
        from .._serving import for_export, network_serving, set_sinkhorn

        check_is_fitted(self, "module_")
        net = copy.deepcopy(self.module_)
        net.element_map = for_export(net.element_map)
        set_sinkhorn(net.otk, sinkhorn_method, sinkhorn_iter)
        return network_serving(self, net, net.head, None, None)

    # -- fit and outputs, with element masses ---------------------------------------------------
    def fit(self, X, y, sample_weight=None, element_weight=None):
        return self._fit(X, y, sample_weight, side=element_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None, element_weight=None):
        return self._fit(X, y, sample_weight, side=element_weight, incremental=True,
                         classes=classes)

    partial_fit.__doc__ = SetNetworkEstimator.partial_fit.__doc__.replace(
        "\n\n        Returns", _ELEMENT_WEIGHT_FIT_DOC + "\n\n        Returns", 1)

    fit.__doc__ = SetNetworkEstimator.fit.__doc__.replace(
        "\n\n        Returns", _ELEMENT_WEIGHT_FIT_DOC + "\n\n        Returns", 1)

    @property
    def _n_features_out(self):
        return self.module_.center.shape[0]

    def transform(self, X, element_weight=None) -> np.ndarray:
        """The learned embedding of each set, ``(n_sets, n_references * n_supports * k)``.

        The features the linear head reads: the OTK embedding with the trained anchors and
        references, centred and normalised like :class:`OTKEmbedding`'s output, but without
        its noise floor (a row within rounding noise of the centre is scaled up, not set to
        0: the head reads it so in training too).

        Parameters
        ----------
        X : collection of sets""" + _ELEMENT_WEIGHT_DOC + """
        """
        return self._transform(X, element_weight)


class OTKClassifier(SetClassifierMixin, _BaseSupervisedOTK):
    _parameter_constraints = with_class_weight({**_BaseSupervisedOTK._parameter_constraints,
                                                "alpha": ["auto", NON_NEGATIVE]})
    _chooses_start = True

    def __init__(self, n_components=DEFAULT_N_COMPONENTS, *, bandwidth="auto", window="auto",
                 dilation="auto", kmer_coding="level_shape", standardize="auto",
                 normalize="auto", keep_norm="auto", n_supports=10, n_references=1, epsilon="auto",
                 sinkhorn_iter=10, position_sigma="auto", position_mode="kernel", reg_m=None,
                 fit_method="kmeans", solver="alternating", learning_rate="adaptive",
                 learning_rate_init=0.01, alpha="auto", class_weight=None, batch_size=64,
                 max_elements=131_072, max_iter=50, tol=1e-4, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=10, warm_start=False, verbose=0,
                 device="auto", dtype="float32", random_state=None):
        self.n_components = n_components
        self.bandwidth = bandwidth
        self.window = window
        self.dilation = dilation
        self.kmer_coding = kmer_coding
        self.standardize = standardize
        self.normalize = normalize
        self.keep_norm = keep_norm
        self.n_supports = n_supports
        self.n_references = n_references
        self.epsilon = epsilon
        self.sinkhorn_iter = sinkhorn_iter
        self.position_sigma = position_sigma
        self.position_mode = position_mode
        self.reg_m = reg_m
        self.fit_method = fit_method
        self.solver = solver
        self.learning_rate = learning_rate
        self.learning_rate_init = learning_rate_init
        self.alpha = alpha
        self.class_weight = class_weight
        self.batch_size = batch_size
        self.max_elements = max_elements
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.verbose = verbose
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    def _auto_alpha(self, data) -> float:
        return head_alpha("auto", len(data.train), data.weights_of(data.train))

    @staticmethod
    def _costly_head(head, n_sets: int) -> bool:
        """Whether one L-BFGS iteration of the head is costly: more than ``HEAD_CHEAP_WORK``
        multiply-adds in each of its two products with the embedding."""
        return n_sets * (head.weight.shape[1] + 1) * head.weight.shape[0] > HEAD_CHEAP_WORK

    def _refits_between_epochs(self, head, n_sets: int) -> bool:
        # measured on single-label heads only: the multi-label head keeps every refit
        return self._is_multilabel or not self._costly_head(head, n_sets)

    def _fit_head(self, head, Z, targets, weight=None, first=False):
        cw = self._class_weight_tensor(Z)  # alpha_: set by chosen_start, or sync_alpha
        if self._is_multilabel:  # per-label logistic regressions, one (D, L) weight matrix
            fit_multilabel_logistic_head(head, Z, targets, self._head_alpha(), weight=weight,
                                         pos_weight=cw)
            return
        if cw is not None:  # class weights multiply the sets' weights (as in the loss)
            weight = cw[targets] if weight is None else weight * cw[targets]
        # Every refit of the alternating solver (AlternatingHead keeps the head frozen for Adam:
        # requires_grad is off) starts from the previous head, near the new solution, before
        # each epoch and at the end; at initialisation Adam then trains the embedding against
        # this head, and the head is refitted. Where an iteration is costly (many classes) the
        # refits before the epochs are left out (_refits_between_epochs) and the others stop
        # early: at most HEAD_WARM_ITER L-BFGS iterations to a looser tolerance, since the
        # embedding moves again and test accuracy does not move past it. A cheap head is solved
        # up to 100 iterations to HEAD_TOL_CHEAP, a costly one that starts cold (the adam
        # solver's first head) to HEAD_TOL. Each iteration costs two products of the (n_sets,
        # n_features) embedding with the (n_classes, n_features) head: with many classes these
        # solves would otherwise be most of the fit.
        warm = not head.weight.requires_grad or (
            first and self.solver == "alternating" and self.max_iter > 0)
        cheap = not self._costly_head(head, Z.shape[0])
        loose = warm and not cheap
        tol = HEAD_TOL_BETWEEN if loose else HEAD_TOL_CHEAP if cheap else HEAD_TOL
        fit_logistic_head(head, Z, targets, self._head_alpha(),
                          max_iter=HEAD_WARM_ITER if loose else 100, weight=weight, tol=tol)

    def decision_function(self, X, element_weight=None) -> np.ndarray:
        return self._decision_function(X, element_weight)

    def predict_proba(self, X, element_weight=None) -> np.ndarray:
        return self._predict_proba(X, element_weight)

    def predict_log_proba(self, X, element_weight=None) -> np.ndarray:  # named: routable
        return self._predict_log_proba(X, element_weight)

    def predict(self, X, element_weight=None) -> np.ndarray:
        return self._predict(X, element_weight)

    def score(self, X, y, sample_weight=None, element_weight=None) -> float:
        """Mean accuracy of ``predict(X, element_weight)`` on ``y``, weighted by
        ``sample_weight`` (scikit-learn's ``ClassifierMixin.score`` with element masses)."""
        return float(accuracy_score(y, self.predict(X, element_weight),
                                    sample_weight=sample_weight))

    # the set classifiers' texts, with the element masses' parameter
    decision_function.__doc__ = _with_element_weight(SetClassifierMixin.decision_function.__doc__)
    predict_proba.__doc__ = _with_element_weight(SetClassifierMixin.predict_proba.__doc__)
    predict.__doc__ = _with_element_weight(SetClassifierMixin.predict.__doc__)


OTKClassifier.__doc__ = compose_doc(
    """Supervised optimal transport kernel embedding with a linear classifier, trained end to end.

    Elements (or k-mers) go through a Nystrom map of a Gaussian kernel (trainable anchors), are
    pooled by the optimal transport embedding onto trainable references, and a linear layer reads
    the centred, normalised embedding. The model starts from the unsupervised pipeline
    ``NystromFeatures -> OTKEmbedding -> logistic regression`` fitted on the same data, then the
    anchors and references learn from the labels through the differentiable Sinkhorn plans.

    The ``"auto"`` element map starts from the paper's map; where the pipeline's start chooses
    another, both initial embeddings are built and the pipeline's is kept only if a logistic
    head on it classifies the training sets better in cross-validation (up to 5 folds) by more than noise
    (a paired t above 2 over the sets' hits; ``start_scores_``). ``epsilon="auto"`` is chosen by
    the same test between the paper's 0.5 and the pipeline's 0.1 (``epsilon_scores_``).

    Many classes with few sets each (the paper's SCOP task: 1,195 folds) fit as they are:
    ``classes_`` comes from all of ``y`` and ``predict_proba`` has a column per class (top-k
    scores with ``sklearn.metrics.top_k_accuracy_score(..., labels=clf.classes_)``). The head's
    refits cost two products of the embedding with the ``(n_classes, n_features)`` head per
    L-BFGS iteration: with many classes (more than 2**26 multiply-adds per product) the
    ``"alternating"`` solver fits the head at initialisation and at the end only, at most 10
    iterations each, and Adam trains the embedding against the initial head in between. With
    ``early_stopping`` and classes of a single set, the validation split keeps every class in
    training (a singleton is never held out; see the user guide); a class without training sets
    keeps a column of near-zero probability.
""",
    MULTILABEL_DOC,
    """
    With multi-label targets the ``"alternating"`` solver's head is one L2-regularised logistic
    regression per label (its binary cross-entropy, with ``class_weight``'s positive weights,
    plus ``alpha/2 ||w_l||^2``), all labels fitted at once by L-BFGS on one weight matrix. The
    ``"auto"`` element map then keeps its fixed choice (the paper's map), as without labels: its
    rule scores candidates with one target per set.
""",
    _DOC_PARAMS.replace(_ALPHA_DOC, _ALPHA_DOC + CLASS_WEIGHT_DOC),
    """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (multi-label: ``arange(n_labels)``).
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights of ``class_weight`` (multi-label: the weight of each label's
        positives); None without.
""" + _CLF_RULE_ATTRS,
    _DOC_ATTRS,
    """
    See Also
    --------
    OTKEmbedding, NystromFeatures : the unsupervised pipeline this model starts from.
    skset.nn.OTKLayer, skset.nn.NystromLayer : the layers, for use in any torch model.
""",
    _DOC_REFS,
    """
    Examples
    --------
    >>> from skset import OTKClassifier
    >>> from skset.datasets import make_motif_order
    >>> X, y = make_motif_order(n_samples=40, min_length=30, max_length=40, random_state=0)
    >>> clf = OTKClassifier(n_components=8, window=4, n_supports=4, position_sigma=0.3,
    ...                     max_iter=2, random_state=0, device="cpu").fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
""",
)


class OTKRegressor(SetRegressorMixin, _BaseSupervisedOTK):
    def __init__(self, n_components=DEFAULT_N_COMPONENTS, *, bandwidth="auto", window="auto",
                 dilation="auto", kmer_coding="plain", standardize="auto", normalize="auto", keep_norm="auto",
                 n_supports=10, n_references=1, epsilon=0.5, sinkhorn_iter=10, position_sigma=None,
                 position_mode="plan", reg_m=None, fit_method="kmeans", solver="alternating",
                 learning_rate="adaptive", learning_rate_init=0.01, alpha="auto", batch_size=64,
                 max_elements=131_072, max_iter=50, tol=1e-4, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=10, warm_start=False, verbose=0,
                 device="auto", dtype="float32", random_state=None):
        self.n_components = n_components
        self.bandwidth = bandwidth
        self.window = window
        self.dilation = dilation
        self.kmer_coding = kmer_coding
        self.standardize = standardize
        self.normalize = normalize
        self.keep_norm = keep_norm
        self.n_supports = n_supports
        self.n_references = n_references
        self.epsilon = epsilon
        self.sinkhorn_iter = sinkhorn_iter
        self.position_sigma = position_sigma
        self.position_mode = position_mode
        self.reg_m = reg_m
        self.fit_method = fit_method
        self.solver = solver
        self.learning_rate = learning_rate
        self.learning_rate_init = learning_rate_init
        self.alpha = alpha
        self.batch_size = batch_size
        self.max_elements = max_elements
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.verbose = verbose
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    @staticmethod
    def _loss(out, target):
        # half the squared error summed over outputs (the ridge head's objective), batch mean
        return 0.5 * F.mse_loss(out, target.reshape(out.shape), reduction="none").sum(1).mean()

    @staticmethod
    def _sample_loss(out, target):
        return 0.5 * F.mse_loss(out, target.reshape(out.shape), reduction="none").sum(1)

    _parameter_constraints = {**_BaseSupervisedOTK._parameter_constraints, "epsilon": [POSITIVE],
                              "alpha": ["auto", NON_NEGATIVE],
                              "early_stopping": ["auto", Boolean()]}

    def _auto_alpha(self, data) -> float:
        sets, Y = data.subset(data.train)
        was_training = self.module_.training
        Z = self._predict_batches(sets, lambda m, X, M, *W: m.embed(X, M, *W), self.module_,
                                  side=data.side_of(data.train))
        self.module_.train(was_training)
        return ridge_loo_alpha(Z, Y, weight=data.weights_of(data.train))

    def _fit_head(self, head, Z, targets, weight=None, first=False):
        if first or not hasattr(self, "alpha_"):  # "auto": the first fit's, kept (sync_alpha)
            auto = self.alpha == "auto"
            self.alpha_ = ridge_loo_alpha(Z, targets, weight=weight) if auto else float(self.alpha)
            self._alpha_given = not auto
        if not self.__dict__.get("_stream_on"):
            return fit_ridge_head(head, Z, targets, self.alpha_, weight)
        # partial_fit: the ridge of this chunk and the chunks before (head_stats_), in weight units
        prior = self.__dict__.get("_stream_prior")
        self._last_chunk = ridge_stats(Z, targets, weight, None if prior is None else prior["shift"],
                                       unit=self.__dict__.get("_stream_unit", 1.0))
        fit_ridge_head_stats(head, add_ridge_stats(prior, self._last_chunk), self.alpha_)

    def _fit(self, X, y, sample_weight=None, side=None, *, incremental=False, classes=None):
        stream = incremental and self.solver == "alternating"
        self._stream_on = stream
        self._stream_prior = self.__dict__.get("head_stats_") if stream else None
        self._stream_unit = weight_unit(sample_weight) if stream else 1.0
        try:
            return super()._fit(X, y, sample_weight, side, incremental=incremental, classes=classes)
        finally:
            for name in ("_stream_on", "_stream_prior", "_last_chunk", "_stream_unit"):
                self.__dict__.pop(name, None)

    def _after_training(self, data):
        last = self.__dict__.get("_last_chunk")
        if self.__dict__.get("_stream_on") and last is not None:
            self.head_stats_ = add_ridge_stats(self.__dict__.get("_stream_prior"), last)
        else:  # fit (or the adam solver) starts no stream: partial_fit's head then sees its chunks
            self.__dict__.pop("head_stats_", None)
        super()._after_training(data)

    def _output_layer(self, module):
        return module.head

    def predict(self, X, element_weight=None) -> np.ndarray:
        return self._predict(X, element_weight)

    def score(self, X, y, sample_weight=None, element_weight=None) -> float:
        """R^2 of ``predict(X, element_weight)`` on ``y``, weighted by ``sample_weight``
        (scikit-learn's ``RegressorMixin.score`` with element masses)."""
        return float(r2_score(y, self.predict(X, element_weight), sample_weight=sample_weight))

    predict.__doc__ = _with_element_weight(
        """Predicted targets, ``(n_sets,)`` or ``(n_sets, n_outputs)`` like ``y`` in fit.""")


OTKRegressor.__doc__ = compose_doc(*REGRESSOR_DOC_PARTS)
