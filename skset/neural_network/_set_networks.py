"""Neural estimators on sets: Set Transformer (and ST++) and Deep Sets (and DS++).

All of them validate their inputs with :func:`skset._sets.check_sets`, cut the sets into batches of
similar lengths (padded, with a mask, so that sets of different sizes share a batch and a set's
output never depends on its batch companions), and train with the one loop of
:mod:`skset.neural_network._training`.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
)
from sklearn.utils.validation import check_is_fitted

from .._sets import check_finite_output, check_sets, length_batches, pack
from .._torch import (
    TorchStateMixin,
    _to_cpu,
    make_generator,
    resolve_device,
    resolve_dtype,
    seed_from_random_state,
)
from ..nn.attention import SetTransformer
from ..nn.deep_sets import DeepSets
from ._training import (
    check_training_params,
    encode_class_targets,
    encode_regression_targets,
    epoch_batches,
    split_validation,
    train_module,
)

__all__ = [
    "SetTransformerClassifier",
    "SetTransformerRegressor",
    "DeepSetsClassifier",
    "DeepSetsRegressor",
]


class _BaseSetNetwork(ClassNamePrefixFeaturesOutMixin, TorchStateMixin, BaseEstimator):
    """Shared fit / predict machinery; subclasses define the network and the task."""

    _is_classifier = False

    # -- subclass hooks -------------------------------------------------------------------------
    def _build_module(self, in_dim: int, out_dim: int) -> torch.nn.Module:  # pragma: no cover
        raise NotImplementedError

    def _check_architecture(self) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------------------
    def _check_params(self) -> None:
        name = type(self).__name__
        check_training_params(self)
        h = self.hidden_size
        if isinstance(h, bool) or not isinstance(h, Integral) or h < 1:
            raise ValueError(f"{name}: hidden_size={h!r} must be a positive integer.")
        nl = self.n_layers
        if isinstance(nl, bool) or not isinstance(nl, Integral) or nl < 0:
            raise ValueError(f"{name}: n_layers={nl!r} must be a non-negative integer.")
        if self.norm not in ("layer", "set", None):
            raise ValueError(f"{name}: norm={self.norm!r} is not supported; use 'layer', 'set' "
                             "or None.")
        me = self.max_elements
        if me is not None and (isinstance(me, bool) or not isinstance(me, Integral) or me < 1):
            raise ValueError(f"{name}: max_elements={me!r} must be a positive integer or None.")
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise ValueError(f"{name}: warm_start={self.warm_start!r} must be a bool.")
        if not isinstance(self.early_stopping, (bool, np.bool_)):
            raise ValueError(f"{name}: early_stopping={self.early_stopping!r} must be a bool.")
        self._check_architecture()

    def _iter_batches(self, sets, dev, dtype):
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
        for idx in length_batches(lengths, max_elements=self.max_elements,
                                  max_sets=self.batch_size):
            X, M = pack([sets[i] for i in idx], device=dev, dtype=dtype)
            yield idx, X, M

    def _apply(self, sets, fn) -> np.ndarray:
        """Run ``fn(module, X, mask)`` over length batches of ``sets``; rows in input order."""
        out = None
        self.module_.eval()
        with torch.no_grad():
            for idx, X, M in self._iter_batches(sets, self.device_, self.dtype_):
                res = fn(self.module_, X, M).detach().cpu().numpy()
                if out is None:
                    out = np.empty((len(sets),) + res.shape[1:], dtype=res.dtype)
                out[idx] = res
        check_finite_output(out, type(self).__name__, self.dtype_)
        return out

    def _validate_predict_input(self, X):
        check_is_fitted(self, "module_")
        return check_sets(X, n_features=self.n_features_in_, compute_dtype=self.dtype_).sets

    def _encode_targets(self, y, n_sets: int, first_fit: bool):
        """Return targets as a tensor-ready numpy array and the number of outputs."""
        raise NotImplementedError  # pragma: no cover

    # -- fit ------------------------------------------------------------------------------------
    def fit(self, X, y):
        """Fit the network on the sets ``X`` with one target per set ``y``.

        Parameters
        ----------
        X : list of array-like of shape (n_i, n_features), or ndarray (n_sets, n, n_features)
            The training sets; sizes may differ.
        y : array-like of shape (n_sets,) (or (n_sets, n_outputs) for regressors)
            One target per set.

        Returns
        -------
        self
        """
        self._check_params()
        sets = check_sets(X, compute_dtype=resolve_dtype(self.dtype)).sets
        warm = bool(self.warm_start) and hasattr(self, "module_")
        if warm and sets[0].shape[1] != self.n_features_in_:
            raise ValueError(f"X has {sets[0].shape[1]} features, but {type(self).__name__} was "
                             f"fitted on {self.n_features_in_} features (warm_start=True).")
        targets, out_dim = self._encode_targets(y, len(sets), first_fit=not warm)

        self.device_ = resolve_device(self.device)
        self.dtype_ = resolve_dtype(self.dtype)
        seed = seed_from_random_state(self.random_state)
        if not warm:
            self.n_features_in_ = sets[0].shape[1]
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                module = self._build_module(self.n_features_in_, out_dim)
            self.module_ = module.to(device=self.device_, dtype=self.dtype_)
            self._optimizer_state = None
            self.loss_curve_ = []
            self.validation_scores_ = []
            self.best_validation_score_ = None
            self.n_iter_ = 0
        gen = make_generator(seed + self.n_iter_)
        n = len(sets)
        if self.early_stopping:
            tr, va = split_validation(
                n, self.validation_fraction, y=targets if self._is_classifier else None,
                stratify=self._is_classifier, seed=seed,
            )
        else:
            tr, va = np.arange(n), None
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=n)
        tdtype = torch.long if self._is_classifier else self.dtype_
        Y = torch.as_tensor(targets).to(device=self.device_, dtype=tdtype)
        dev, dt = self.device_, self.dtype_

        def batches(epoch):
            for b in epoch_batches(lengths[tr], batch_size=self.batch_size,
                                   max_elements=self.max_elements, generator=gen):
                idx = tr[b]
                Xb, Mb = pack([sets[i] for i in idx], device=dev, dtype=dt)
                yield Xb, Mb, Y[torch.as_tensor(idx, device=dev)]

        loss_of = self._loss

        def loss_fn(module, batch):
            Xb, Mb, Yb = batch
            return loss_of(module(Xb, Mb), Yb), Yb.shape[0]

        validation = None
        if self.early_stopping:
            val_sets = [sets[i] for i in va]
            val_targets = targets[va]

            def validation(module):
                return self._val_score(self._raw_outputs(val_sets), val_targets)

        result = train_module(
            self.module_, loss_fn, batches, validation=validation, optimizer=self.optimizer,
            learning_rate_init=self.learning_rate_init, weight_decay=self.alpha,
            max_iter=self.max_iter, tol=self.tol, early_stopping=bool(self.early_stopping),
            n_iter_no_change=self.n_iter_no_change,
            optimizer_state=self._optimizer_state, verbose=int(self.verbose),
            name=type(self).__name__,
        )
        self._optimizer_state = _to_cpu(result.optimizer_state, clone=True)
        self.loss_curve_ = list(self.loss_curve_) + result.loss_curve
        self.validation_scores_ = list(self.validation_scores_) + result.validation_scores
        if self.early_stopping:
            self.best_validation_score_ = result.best_score
        self.n_iter_ = self.n_iter_ + result.n_iter
        self._n_features_out = self._embed_dim()
        return self

    def _raw_outputs(self, sets) -> np.ndarray:
        return self._apply(sets, lambda m, X, M: m(X, M))

    def transform(self, X) -> np.ndarray:
        """The pooled set representation, shape ``(n_sets, n_features_out)``.

        The output of the pooling layer (PMA seeds, flattened, or the Deep Sets pool) that the
        decoder reads: a fixed-size vector per set for downstream estimators.
        """
        sets = self._validate_predict_input(X)
        return self._apply(sets, lambda m, X_, M: m.embed(X_, M))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.non_deterministic = False
        return tags


class _ClassifierMixin(ClassifierMixin):
    _is_classifier = True

    def _encode_targets(self, y, n_sets, first_fit):
        return encode_class_targets(self, y, n_sets, first_fit)

    @staticmethod
    def _loss(out, target):
        return F.cross_entropy(out, target)

    @staticmethod
    def _val_score(out, target):
        return float(np.mean(out.argmax(1) == target))

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape ``(n_sets, n_classes)``, rows summing to 1."""
        sets = self._validate_predict_input(X)
        p = self._apply(sets, lambda m, X_, M: torch.softmax(m(X_, M).double(), dim=1))
        return p / p.sum(1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """The most probable class of each set."""
        sets = self._validate_predict_input(X)
        return self.classes_[self._raw_outputs(sets).argmax(1)]


class _RegressorMixin(RegressorMixin):
    _is_classifier = False

    def _encode_targets(self, y, n_sets, first_fit):
        return encode_regression_targets(self, y, n_sets, first_fit)

    @staticmethod
    def _loss(out, target):
        return F.mse_loss(out, target)

    @staticmethod
    def _val_score(out, target):
        ss_res = ((target - out) ** 2).sum(0)
        ss_tot = ((target - target.mean(0)) ** 2).sum(0)
        r2 = 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0)
        return float(np.mean(r2))

    def predict(self, X) -> np.ndarray:
        """Predicted targets, shape ``(n_sets,)`` or ``(n_sets, n_outputs)`` like ``y`` in fit."""
        sets = self._validate_predict_input(X)
        out = self._raw_outputs(sets).astype(np.float64) * self.y_scale_ + self.y_mean_
        return out[:, 0] if self._y_ndim == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


_TRAINING_DOC = """
    optimizer : {"adam", "adamw"}, default="adam"
        ``adam`` adds ``alpha * w`` to the gradient (L2 penalty); ``adamw`` decouples the decay.
    learning_rate_init : float, default=1e-3
        Adam's learning rate.
    alpha : float, default=0.0
        Weight decay / L2 penalty.
    batch_size : int, default=64
        Most sets per batch.
    max_elements : int or None, default=131072
        Budget of padded elements per batch: sets are sorted by length and batches cut so that
        ``n_sets_in_batch * longest_in_batch`` stays under it (memory bound, little padding).
    max_iter : int, default=200
        Epochs.
    tol : float, default=1e-4
        Improvement threshold of the stopping rules (as in MLPClassifier).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the sets (stratified for classifiers), stop when the
        validation score (accuracy or R^2) stalls and restore the best weights.
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
        Patience in epochs.
    warm_start : bool, default=False
        Continue from the fitted network and optimizer state on the next ``fit``.
    verbose : int, default=0
        ``>= 1`` prints the loss (and validation score) of each epoch.
    device : str, default="auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``...
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, RandomState or None, default=None
        Seeds weight initialisation, shuffling and the validation split.

    Attributes
    ----------
    module_ : torch.nn.Module
        The trained network.
    n_features_in_ : int
        Features per element.
    loss_curve_ : list of float
        Mean training loss per epoch (cross-entropy, or MSE on standardised targets).
    validation_scores_ : list of float
        Validation score per epoch (with ``early_stopping``).
    best_validation_score_ : float or None
    n_iter_ : int
        Epochs run.
    device_ : torch.device
"""


class _SetTransformerBase(_BaseSetNetwork):
    def __init__(
        self,
        hidden_size: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        *,
        n_inducing: int | None = 16,
        n_seeds: int = 1,
        norm: str | None = "layer",
        residual: str = "original",
        optimizer: str = "adam",
        learning_rate_init: float = 1e-3,
        alpha: float = 0.0,
        batch_size: int = 64,
        max_elements: int | None = 131_072,
        max_iter: int = 200,
        tol: float = 1e-4,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        warm_start: bool = False,
        verbose: int = 0,
        device: str = "auto",
        dtype: str = "float32",
        random_state=None,
    ):
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_inducing = n_inducing
        self.n_seeds = n_seeds
        self.norm = norm
        self.residual = residual
        self.optimizer = optimizer
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

    def _check_architecture(self):
        name = type(self).__name__
        nh = self.n_heads
        if isinstance(nh, bool) or not isinstance(nh, Integral) or nh < 1:
            raise ValueError(f"{name}: n_heads={nh!r} must be a positive integer.")
        if self.hidden_size % nh:
            raise ValueError(f"{name}: hidden_size={self.hidden_size} must be divisible by "
                             f"n_heads={nh}.")
        ni = self.n_inducing
        if ni is not None and (isinstance(ni, bool) or not isinstance(ni, Integral) or ni < 1):
            raise ValueError(f"{name}: n_inducing={ni!r} must be None (SAB blocks) or a positive "
                             "integer (ISAB blocks).")
        ns = self.n_seeds
        if isinstance(ns, bool) or not isinstance(ns, Integral) or ns < 1:
            raise ValueError(f"{name}: n_seeds={ns!r} must be a positive integer.")
        if self.residual not in ("original", "clean"):
            raise ValueError(f"{name}: residual={self.residual!r} is not supported; use "
                             "'original' or 'clean'.")

    def _build_module(self, in_dim, out_dim):
        return SetTransformer(
            in_dim, int(self.hidden_size), out_dim, int(self.n_layers), int(self.n_heads),
            n_inducing=None if self.n_inducing is None else int(self.n_inducing),
            n_seeds=int(self.n_seeds), norm=self.norm, residual=self.residual,
        )

    def _embed_dim(self):
        return int(self.n_seeds) * int(self.hidden_size)


_ST_DOC = """
    Parameters
    ----------
    hidden_size : int, default=64
        Model width ``D`` of every block.
    n_layers : int, default=2
        Encoder blocks (SAB or ISAB).
    n_heads : int, default=4
        Attention heads; ``hidden_size`` must be divisible by it. Scores are scaled by
        ``1/sqrt(hidden_size / n_heads)``.
    n_inducing : int or None, default=16
        ``None``: SAB blocks (quadratic in the set size); an int ``m``: ISAB blocks with ``m``
        learned inducing points (linear in the set size).
    n_seeds : int, default=1
        PMA seed vectors; :meth:`transform` returns ``n_seeds * hidden_size`` features.
    norm : {"layer", "set", None}, default="layer"
        Layer norm (the Set Transformer), set norm (ST++) or none.
    residual : {"original", "clean"}, default="original"
        Post-norm MAB of the Set Transformer or the clean-path block of ST++ (eq. 21-26).
        ``norm="set", residual="clean"`` is Set Transformer++.
"""

_ST_REFS = """
    See Also
    --------
    DeepSetsClassifier, DeepSetsRegressor : sum/mean/max pooling networks.
    skset.nn.SetTransformer : the underlying torch module.

    References
    ----------
    .. [1] J. Lee, Y. Lee, J. Kim, A. Kosiorek, S. Choi, Y. W. Teh. Set Transformer: A Framework for
       Attention-based Permutation-Invariant Neural Networks. ICML 2019.
    .. [2] L. H. Zhang, V. Tozzo, J. M. Higgins, R. Ranganath. Set Norm and Equivariant Skip
       Connections: Putting the Deep in Deep Sets. ICML 2022.
"""


class SetTransformerClassifier(_ClassifierMixin, _SetTransformerBase):
    __doc__ = (
        """Set Transformer classifier (and Set Transformer++), one label per set.

    Sets of any sizes are padded into length-sorted batches with a mask; attention never looks
    at padding and set norm never counts it, so a set's prediction does not depend on its batch.
"""
        + _ST_DOC
        + _TRAINING_DOC
        + """    classes_ : ndarray of shape (n_classes,)
"""
        + _ST_REFS
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from skset import SetTransformerClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(loc=i % 2, size=(rng.integers(3, 9), 2)) for i in range(40)]
    >>> y = np.arange(40) % 2
    >>> clf = SetTransformerClassifier(hidden_size=16, n_layers=1, max_iter=5, random_state=0)
    >>> clf.fit(X, y).predict_proba(X[:2]).shape
    (2, 2)
"""
    )


class SetTransformerRegressor(_RegressorMixin, _SetTransformerBase):
    __doc__ = (
        """Set Transformer regressor (and Set Transformer++), one (multi-output) target per set.

    Targets are standardised internally; predictions are returned on the original scale.
"""
        + _ST_DOC
        + _TRAINING_DOC
        + _ST_REFS
        + """
    Examples
    --------
    >>> from skset import SetTransformerRegressor
    >>> from skset.datasets import make_max_regression
    >>> X, y = make_max_regression(64, set_size=(5, 10), random_state=0)
    >>> reg = SetTransformerRegressor(hidden_size=16, n_layers=1, max_iter=5, random_state=0)
    >>> reg.fit(X, y).predict(X[:3]).shape
    (3,)
"""
    )


class _DeepSetsBase(_BaseSetNetwork):
    def __init__(
        self,
        hidden_size: int = 64,
        n_layers: int = 2,
        *,
        pooling: str = "sum",
        norm: str | None = None,
        residual: str | None = None,
        optimizer: str = "adam",
        learning_rate_init: float = 1e-3,
        alpha: float = 0.0,
        batch_size: int = 64,
        max_elements: int | None = 131_072,
        max_iter: int = 200,
        tol: float = 1e-4,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        warm_start: bool = False,
        verbose: int = 0,
        device: str = "auto",
        dtype: str = "float32",
        random_state=None,
    ):
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.pooling = pooling
        self.norm = norm
        self.residual = residual
        self.optimizer = optimizer
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

    def _check_architecture(self):
        name = type(self).__name__
        if self.pooling not in ("sum", "mean", "max"):
            raise ValueError(f"{name}: pooling={self.pooling!r} is not supported; use 'sum', "
                             "'mean' or 'max'.")
        if self.residual not in (None, "original", "clean"):
            raise ValueError(f"{name}: residual={self.residual!r} is not supported; use None, "
                             "'original' or 'clean'.")

    def _build_module(self, in_dim, out_dim):
        return DeepSets(in_dim, int(self.hidden_size), out_dim, int(self.n_layers),
                        norm=self.norm, residual=self.residual, pooling=self.pooling)

    def _embed_dim(self):
        return int(self.hidden_size)


_DS_DOC = """
    Parameters
    ----------
    hidden_size : int, default=64
        Width of the encoder and decoder.
    n_layers : int, default=2
        Encoder blocks after the input layer.
    pooling : {"sum", "mean", "max"}, default="sum"
        Permutation-invariant pooling over the real elements of each set.
    norm : {"layer", "set", None}, default=None
        Normalisation inside residual blocks (ignored when ``residual=None``).
    residual : {None, "original", "clean"}, default=None
        ``None``: the plain Deep Sets MLP; ``"original"``: non-clean residual blocks
        ``relu(x + N(W relu(N(W x))))``; ``"clean"``: the Deep Sets++ block
        ``x + N(W relu(N(W x)))`` with a bias-free input layer and a final norm-relu-weight.
        ``norm="set", residual="clean"`` is Deep Sets++.
"""

_DS_REFS = """
    See Also
    --------
    SetTransformerClassifier, SetTransformerRegressor : attention-based set networks.
    skset.nn.DeepSets : the underlying torch module.

    References
    ----------
    .. [1] M. Zaheer, S. Kottur, S. Ravanbakhsh, B. Poczos, R. Salakhutdinov, A. Smola. Deep Sets.
       NeurIPS 2017.
    .. [2] L. H. Zhang, V. Tozzo, J. M. Higgins, R. Ranganath. Set Norm and Equivariant Skip
       Connections: Putting the Deep in Deep Sets. ICML 2022.
"""


class DeepSetsClassifier(_ClassifierMixin, _DeepSetsBase):
    __doc__ = (
        """Deep Sets classifier (and Deep Sets++), one label per set.
"""
        + _DS_DOC
        + _TRAINING_DOC
        + """    classes_ : ndarray of shape (n_classes,)
"""
        + _DS_REFS
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from skset import DeepSetsClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(loc=i % 2, size=(rng.integers(3, 9), 2)) for i in range(40)]
    >>> y = np.where(np.arange(40) % 2, "b", "a")
    >>> clf = DeepSetsClassifier(hidden_size=16, max_iter=5, random_state=0).fit(X, y)
    >>> clf.classes_.tolist()
    ['a', 'b']
"""
    )


class DeepSetsRegressor(_RegressorMixin, _DeepSetsBase):
    __doc__ = (
        """Deep Sets regressor (and Deep Sets++), one (multi-output) target per set.

    Targets are standardised internally; predictions are returned on the original scale.
"""
        + _DS_DOC
        + _TRAINING_DOC
        + _DS_REFS
        + """
    Examples
    --------
    >>> from skset import DeepSetsRegressor
    >>> from skset.datasets import make_normal_var
    >>> X, y = make_normal_var(64, set_size=50, random_state=0)
    >>> reg = DeepSetsRegressor(hidden_size=16, max_iter=5, random_state=0).fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
"""
    )
