"""Neural estimators on sets: Set Transformer (and ST++) and Deep Sets (and DS++).

All of them validate their inputs with :func:`skset._sets.check_sets`, cut the sets into batches of
similar lengths (padded, with a mask, so that sets of different sizes share a batch and a set's
output never depends on its batch companions), and train with the one loop of
:mod:`skset.neural_network._training`.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from .._map_selection import constant_below
from .._sets import iter_packed
from .._validation import POSITIVE_INT, Boolean, Integer, Real
from .._weighting import standardized_sets, weighted_mean_std
from ..nn.attention import SetTransformer
from ..nn.deep_sets import DeepSets
from ._base import SetNetworkEstimator, TrainingSetup, compose_doc
from ._callbacks import LowestLossCheckpoint
from ._multilabel import CLASS_WEIGHT_DOC, MULTILABEL_DOC, with_class_weight
from ._network_kmers import KMER_PARAMS, NetworkKmers, choose_kmers, read_kmers
from ._pool_size import DS_POOLINGS, POOL_SIZE_ATTR, POOLING_DOC, fit_pool_size
from ._pooled_skip import fit_pooled_skip
from ._set_scale import fit_set_scale, read_set_scale, with_summary
from ._st_docs import NETWORK_INPUT_DOC, ST_DOC, ST_REFS
from ._tasks import SetClassifierMixin, SetRegressorMixin
from ._training import TRAINING_PARAMS

__all__ = [
    "SetTransformerClassifier",
    "SetTransformerRegressor",
    "DeepSetsClassifier",
    "DeepSetsRegressor",
]


# batch_size="auto" and n_iter_no_change="auto" (see _BaseSetNetwork._fit_batch_size)
_AUTO_BATCH, _AUTO_STEPS = 64, 8
_AUTO_PATIENCE, _AUTO_PATIENCE_STEPS = 10, 160


class _BaseSetNetwork(NetworkKmers, SetNetworkEstimator):
    """Set Transformer and Deep Sets: a network built from the parameters alone."""

    # models saved before the input standardisation / pooled skip / k-mers had none
    _legacy_params = {"standardize": False, "pooled_skip": False, "window": 1, "dilation": 1}

    def _prepare_sets(self, sets, fitting, sample_weight=None, y=None, seed=0, side=None):
        """Standardise the element features with the training elements' mean and std (each
        element weighted by its set's ``sample_weight``: a set of weight 2 counts as two copies),
        each set by its own first where their scales lie far apart (``_set_scale.py``).

        Why: raw features alike ([0, 1] pixels) or far from 0 make attention logits alike or huge
        at initialisation (unique counting of digits: BENCHMARKS.md, st_tasks)."""
        if fitting:  # each set by its own scale where theirs lie far apart, then the k-mers
            fit_set_scale(self, sets, sample_weight)
        sets, summary = read_set_scale(self, sets)  # each set's mean and scale: after the k-mers
        if fitting:
            self.window_, self.dilation_ = choose_kmers(self, sets, y, seed, sample_weight)
        sets = with_summary(read_kmers(sets, *self._kmers), summary)
        if fitting:
            if self.standardize and sets:
                E = np.concatenate(sets)
                ew = None if sample_weight is None else np.repeat(sample_weight, [len(s) for s in sets])
                self.mean_, std = weighted_mean_std(E, ew)
                # constant: a spread within rounding of the magnitude of the feature's elements of
                # positive weight (features near 1e-13 are standardised too)
                seen = E if ew is None else E[ew > 0]
                self.scale_ = np.where(constant_below(std, np.abs(seen).max(0, initial=0.0)), 1.0, std)
            else:
                d = sets[0].shape[1]
                self.mean_, self.scale_ = np.zeros(d), np.ones(d)
        mean = getattr(self, "mean_", None)  # absent in models fitted before standardize
        if mean is None and self.standardize:  # a model file that lost it: not read unscaled
            raise ValueError(f"{type(self).__name__} has standardize=True but no fitted mean_ "
                             "(a damaged or hand-edited model): refit it.")
        if mean is None or (not np.any(mean) and np.all(self.scale_ == 1.0)):
            return sets
        return standardized_sets(sets, self.mean_, self.scale_, dtype=self.dtype_)

    def _training_setup(self, data, warm):
        return TrainingSetup(overrides={"optimizer": self.optimizer})

    def _fit_batch_size(self, n_train):
        """``batch_size="auto"``: ``min(64, ceil(n_train / 8))``, about 8 steps per epoch
        (see the user guide's "Small training sets")."""
        if self.batch_size == "auto":
            return int(min(_AUTO_BATCH, max(1, -(-n_train // _AUTO_STEPS))))
        return int(self.batch_size)

    def _fit_patience(self, n_train, batch_size):
        """``n_iter_no_change="auto"``: ``max(10, ceil(160 / steps_per_epoch))`` epochs, a patience
        of at least 160 optimisation steps (``steps_per_epoch = ceil(n_train / batch_size)``)."""
        if self.n_iter_no_change == "auto":
            steps = max(1, -(-n_train // int(batch_size)))
            return int(max(_AUTO_PATIENCE, -(-_AUTO_PATIENCE_STEPS // steps)))
        return int(self.n_iter_no_change)

    def _init_module(self, data, n_outputs, seed, rng):
        self._n_features_out = self._embed_dim()
        self.pooled_skip_ = bool(self.pooled_skip)
        module = self._seeded(seed, lambda: self._build_module(self._in_features, n_outputs))
        # on the fit's device and dtype before anything is fitted into it (float64 buffers exact)
        module = module.to(device=self.device_, dtype=self.dtype_)
        if module.skip is not None:
            fit_pooled_skip(self, module, data)
        return module

    @property
    def _fitted_pooled_skip(self) -> bool:
        """Whether the fitted network has the pooled skip (models saved before it: no)."""
        return bool(getattr(self, "pooled_skip_", False))

    def _untrained_module(self):
        return self._build_module(self._in_features, self._n_outputs_fitted)


_ALPHA_DOC = """
    alpha : float, default=0.0
        Weight decay / L2 penalty."""

_REGRESSION_NOTE = """
    Targets are standardised internally; predictions are returned on the original scale.
"""

_REGRESSION_ATTRS = """    y_mean_, y_scale_ : ndarray of shape (n_outputs,)
        The target standardisation (weighted by ``sample_weight``).
    output_shrinkage_ : float or ndarray of shape (n_outputs,)
        The factor the output layer was scaled by after a fit with a validation split (1.0
        without one); one per output with several outputs, each chosen on its own column. It
        scales the predictions only: a warm start or ``partial_fit`` trains from the output as
        training left it.
"""

_AUTO_PARAMS = {"batch_size": [POSITIVE_INT, "auto"], "n_iter_no_change": [POSITIVE_INT, "auto"]}

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
        Improvement threshold of the stopping rules (as in MLPClassifier; training stops after
        ``n_iter_no_change`` epochs in a row that do not improve by more than ``tol``, one epoch
        sooner than scikit-learn's MLP).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the sets (stratified for classifiers), stop when the
        validation score (accuracy or R^2) stalls and restore the best weights. The held-out
        sets take no part in what the fit learns from the elements: the k-mers
        ``window="auto"`` chooses and their standardisation.
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
        Patience in epochs.
    warm_start : bool, default=False
        Continue from the fitted network and optimizer state on the next ``fit`` (the
        parameters that built the network, and ``class_weight``, must be those of its fit: a
        ``ValueError`` names one changed since; those of training, learning rate and ``alpha``
        included, may change). The rate starts again at ``learning_rate_init``; with
        ``early_stopping`` the best validation score so far is kept: the fit ends with the
        weights it started from unless an epoch beats it (scikit-learn's MLP).
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
    pooled_skip_ : bool
        Whether the network has the pooled skip (``pooled_skip`` of the fit that built it).
    window_, dilation_ : int
        The k-mers the network reads: ``window`` and ``dilation``, or those chosen for
        ``"auto"`` (1 and 1: single elements).
    n_features_in_ : int
        Features per element.
    mean_, scale_ : ndarray of shape ``(n_features_in_,)``, or ``((window_ + 1) * n_features_in_,)``
        The standardisation of the element features, or of the coded k-mers' (zeros and ones
        with ``standardize=False``).
    set_standardized_, set_scale_floor_ : bool, ndarray of shape ``(n_features_in_,)`` or None
        Each set read by its own mean and deviation, both appended (``"auto"``; ``mean_`` 2 d wider).
    loss_curve_, validation_scores_ : list of float
        Mean training loss per epoch (cross-entropy, or MSE on standardised targets), and the
        validation score per epoch (with ``early_stopping``).
    best_validation_score_ : float or None
        Best validation score, the kept weights' (``early_stopping``; None after a fit or
        ``partial_fit`` without a validation split).
    learning_rates_ : list of float
        The learning rate of each epoch.
    n_iter_ : int
        Epochs run (summed over warm starts).
    device_ : torch.device
        Resolved device.
    dtype_ : torch.dtype
        Resolved compute dtype (``dtype``).
"""


_REGRESSION_TRAINING_DOC = _TRAINING_DOC.replace("""    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the sets (stratified for classifiers), stop when the
        validation score (accuracy or R^2) stalls and restore the best weights. The held-out
        sets take no part in what the fit learns from the elements: the k-mers
        ``window="auto"`` chooses and their standardisation.
""", """    early_stopping : bool or "auto", default="auto"
        Hold out ``validation_fraction`` of the sets, stop when the validation R^2 stalls and
        restore the best weights, then scale the network's output (standardised: towards the
        training mean) by a factor in [0, 1] chosen on the held-out sets (``output_shrinkage_``):
        the least-squares factor, clipped, times ``max(0, 1 - 1/t^2)`` with ``t`` its own
        t-statistic, so that a validation fit that could be chance gives a factor near 0 (a
        pure-noise target then predicts the training mean) and a clear one a factor near the
        least-squares one. The held-out sets take no part in the k-mers or the elements'
        standardisation; the targets are scaled on every set, so that a factor of 0 predicts
        the mean of all of them. ``"auto"``: on for fits of 20 to 999 sets, with
        at least 10 sets held out; off for fewer (nothing to hold out) or more (measured in
        BENCHMARKS.md, regression).
""")
assert _REGRESSION_TRAINING_DOC != _TRAINING_DOC

_AUTO_BATCH_DOC = ("""    batch_size : int, default=64
        Most sets per batch.
""", """    batch_size : int or "auto", default=64
        Most sets per batch. ``"auto"``: ``min(64, ceil(n_train / 8))`` for a fit on ``n_train``
        sets, so that every epoch makes about 8 optimisation steps (5 to 7 for some sizes under
        50 sets, the batch size rounded up; see
        :ref:`small-training-sets`).
""")
_AUTO_PATIENCE_DOC = ("""    n_iter_no_change : int, default=10
        Patience in epochs.
""", """    n_iter_no_change : int or "auto", default=10
        Patience in epochs. ``"auto"``: ``max(10, ceil(160 / steps_per_epoch))`` epochs, at least
        160 optimisation steps (``steps_per_epoch = ceil(n_train / batch size)``), so that a fit
        on a few dozen sets is not stopped by the noise of its first epochs (see
        :ref:`small-training-sets`).
""")


_PATIENCE_AUTO_DEFAULT_DOC = (_AUTO_PATIENCE_DOC[1], """    n_iter_no_change : int or "auto", default="auto"
        Patience in epochs. ``"auto"``: ``max(10, ceil(160 / steps_per_epoch))`` epochs, at least
        160 optimisation steps (``steps_per_epoch = ceil(n_train / batch size)``; 10 epochs from
        961 training sets on with batches of 64), so that a fit on a few dozen sets is not
        stopped by the noise of its first epochs (see :ref:`small-training-sets`).
""")


def _auto_training_doc(doc):
    for old, new in (_AUTO_BATCH_DOC, _AUTO_PATIENCE_DOC):
        assert old in doc
        doc = doc.replace(old, new)
    return doc


class _SetTransformerBase(_BaseSetNetwork):
    _legacy_params = {**_BaseSetNetwork._legacy_params, "dropout": 0.0}
    _parameter_constraints = {
        "hidden_size": [POSITIVE_INT],
        "n_layers": [Integer(0)],
        "n_heads": [POSITIVE_INT],
        "n_inducing": [POSITIVE_INT, None],
        "n_seeds": [POSITIVE_INT],
        "norm": ["layer", "set", None],
        "residual": ["original", "clean"],
        "point_init": ["xavier", "normal"],
        "decoder": ["mlp", "sab"],
        "dropout": [Real(0, 1, closed="left")],
        "standardize": ["auto", Boolean()],
        "pooled_skip": [Boolean()],
        **KMER_PARAMS,
        **TRAINING_PARAMS,
        **_AUTO_PARAMS,
    }

    @contextlib.contextmanager
    def _training_context(self, seed: int):
        """With ``dropout`` > 0: the masks drawn from a generator of this fit seeded with ``seed``
        (they repeat with ``random_state``, and fits in threads draw apart); none after."""
        if not self.dropout:
            yield
            return
        generator = torch.Generator(device=self.device_)
        generator.manual_seed(int(seed))
        self.module_.set_dropout_generator(generator)
        try:
            yield
        finally:
            self.module_.set_dropout_generator(None)

    def _training_setup(self, data, warm):
        """The shared setup (the network's dropout set to ``dropout``: a warm start may change
        it), plus :class:`LowestLossCheckpoint` when training stops on the
        training loss (no validation split, not a ``partial_fit`` step): the network ends with the
        weights of lowest training loss among its last weights and those at the start and end of
        its epoch of lowest recorded loss. Measured on the suite's small series sets
        (``trained_vs_pooling.md``): trained for long, the Set Transformer's loss can jump back to
        the class prior late in training (GunPoint 10-mers: 0.28 at epoch 171, 0.69 at 200).
        Deep Sets keep their last weights: with the checkpoint they scored lower on the same rows
        (GunPoint sets of scalars 79.1 -> 69.1 over three seeds)."""
        setup = super()._training_setup(data, warm)
        if hasattr(self, "module_"):
            self.module_.set_dropout(float(self.dropout))
        if data.validation is None and not data.incremental:
            setup.callbacks = [*setup.callbacks, LowestLossCheckpoint()]
        return setup

    def _check_param_relations(self):
        if self.hidden_size % self.n_heads:
            raise self._param_error(f"hidden_size={self.hidden_size} must be divisible by "
                                    f"n_heads={self.n_heads}.")

    def _build_module(self, in_features, out_features):
        return SetTransformer(
            in_features, int(self.hidden_size), out_features, int(self.n_layers), int(self.n_heads),
            n_inducing=None if self.n_inducing is None else int(self.n_inducing),
            n_seeds=int(self.n_seeds), norm=self.norm, residual=self.residual,
            point_init=self.point_init, decoder=self.decoder,
            n_decoder_layers=0 if self.decoder == "sab" else 1,
            pooled_skip=self._fitted_pooled_skip, dropout=float(self.dropout),
        )

    def _embed_dim(self):
        return int(self.n_seeds) * int(self.hidden_size)

    def attention_weights(self, X) -> list[dict[str, np.ndarray]]:
        """The attention weights of every attention block, per set and per head.

        The sets go through the fitted network as in :meth:`predict` (standardised with
        ``mean_`` and ``scale_``, in length-sorted padded batches), and each block's weights are
        cropped to the set's real elements, so a set's weights do not depend on the other sets.
        With k-mers (``window_ > 1``) the queries and keys are the set's k-mers (``max(n_i - span
        + 1, 1)``, k-mer ``j`` starting at element ``j``) where the shapes below say elements.

        Parameters
        ----------
        X : list of array-like of shape (n_i, n_features), or ndarray (n_sets, n, n_features)

        Returns
        -------
        list of dict
            One dict per set, ``{block name: ndarray (n_heads, n_queries, n_keys)}``, each row a
            distribution over the keys (it sums to 1). With ``n_i`` the set's size, ``m =
            n_inducing`` and ``k = n_seeds``: ``"blocks.l"`` (SAB ``l``, ``n_inducing=None``)
            ``(n_heads, n_i, n_i)``; ``"blocks.l.mab1"`` (ISAB ``l``: inducing points onto
            elements) ``(n_heads, m, n_i)`` and ``"blocks.l.mab2"`` (elements onto inducing
            points) ``(n_heads, n_i, m)``; ``"pool"`` (PMA: seeds onto elements, the weights of
            the pooling) ``(n_heads, k, n_i)``; ``"pool_sab"`` (``decoder="sab"``: seed to seed)
            ``(n_heads, k, k)``. Names are paths in ``module_`` (see
            :meth:`skset.nn.SetTransformer.attention_weights`).
        """
        sets = self._check_predict_X(X)  # checks that the model is fitted
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
        out: list = [None] * len(sets)
        module = self.module_
        was_training = module.training
        module.eval()
        try:
            for idx, Xb, Mb in iter_packed(sets, device=self.device_, dtype=self.dtype_,
                                           max_elements=self.max_elements, padding_tolerance=None,
                                           cost=self._batch_cost(lengths)):
                for i, weights in zip(idx, module.attention_weights(Xb, Mb)):
                    out[i] = {name: w.cpu().numpy() for name, w in weights.items()}
        finally:
            module.train(was_training)
        return out




class SetTransformerClassifier(SetClassifierMixin, _SetTransformerBase):
    _parameter_constraints = with_class_weight(_SetTransformerBase._parameter_constraints)
    __doc__ = compose_doc(
        """Set Transformer classifier (and Set Transformer++), one label per set, or several.

    Sets of any sizes are padded into length-sorted batches with a mask; attention never looks
    at padding and set norm never counts it, so a set's prediction does not depend on its batch.
""",
        MULTILABEL_DOC, ST_DOC,
        _auto_training_doc(_TRAINING_DOC.replace(_ALPHA_DOC, _ALPHA_DOC + CLASS_WEIGHT_DOC)
                           ).replace(*_PATIENCE_AUTO_DEFAULT_DOC),
        """    classes_ : ndarray of shape (n_classes,)
        Class labels (multi-label: ``arange(n_labels)``).
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights of ``class_weight`` (multi-label: the weight of each label's
        positives); None without.
""",
        ST_REFS,
        """
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
""",
    )

    def __init__(self, hidden_size=64, n_layers=2, n_heads=4, *, n_inducing=16, n_seeds=1,
                 norm="layer", residual="original", point_init="xavier", decoder="mlp",
                 dropout=0.0, standardize="auto", pooled_skip=False, window="auto", dilation="auto",
                 optimizer="adam", learning_rate_init=1e-3,
                 alpha=0.0, class_weight=None, batch_size=64, max_elements=131_072, max_iter=200,
                 tol=1e-4, early_stopping=False, validation_fraction=0.1, n_iter_no_change="auto",
                 warm_start=False, verbose=0, device="auto", dtype="float32", random_state=None):
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_inducing = n_inducing
        self.n_seeds = n_seeds
        self.norm = norm
        self.residual = residual
        self.point_init = point_init
        self.decoder = decoder
        self.dropout = dropout
        self.standardize = standardize
        self.pooled_skip = pooled_skip
        self.window = window
        self.dilation = dilation
        self.optimizer = optimizer
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


class SetTransformerRegressor(SetRegressorMixin, _SetTransformerBase):
    __doc__ = compose_doc(
        """Set Transformer regressor (and Set Transformer++), one (multi-output) target per set.
""",
        _REGRESSION_NOTE,
        ST_DOC, _auto_training_doc(_REGRESSION_TRAINING_DOC).replace(*_PATIENCE_AUTO_DEFAULT_DOC),
        _REGRESSION_ATTRS, ST_REFS,
        """
    Examples
    --------
    >>> from skset import SetTransformerRegressor
    >>> from skset.datasets import make_max_regression
    >>> X, y = make_max_regression(64, set_size=(5, 10), random_state=0)
    >>> reg = SetTransformerRegressor(hidden_size=16, n_layers=1, max_iter=5, random_state=0)
    >>> reg.fit(X, y).predict(X[:3]).shape
    (3,)
""",
    )

    _parameter_constraints = {**_SetTransformerBase._parameter_constraints,
                              "early_stopping": ["auto", Boolean()]}

    def __init__(self, hidden_size=64, n_layers=2, n_heads=4, *, n_inducing=16, n_seeds=1,
                 norm="layer", residual="original", point_init="xavier", decoder="mlp",
                 dropout=0.0, standardize="auto", pooled_skip=False, window="auto", dilation="auto",
                 optimizer="adam", learning_rate_init=1e-3,
                 alpha=0.0, batch_size=64, max_elements=131_072, max_iter=200, tol=1e-4,
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change="auto",
                 warm_start=False, verbose=0, device="auto", dtype="float32", random_state=None):
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_inducing = n_inducing
        self.n_seeds = n_seeds
        self.norm = norm
        self.residual = residual
        self.point_init = point_init
        self.decoder = decoder
        self.dropout = dropout
        self.standardize = standardize
        self.pooled_skip = pooled_skip
        self.window = window
        self.dilation = dilation
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


class _DeepSetsBase(_BaseSetNetwork):
    _parameter_constraints = {
        "hidden_size": [POSITIVE_INT],
        "n_layers": [Integer(0)],
        "pooling": list(DS_POOLINGS),
        "norm": ["layer", "set", None],
        "residual": [None, "original", "clean"],
        "standardize": ["auto", Boolean()],
        "pooled_skip": [Boolean()],
        **KMER_PARAMS,
        **TRAINING_PARAMS,
        **_AUTO_PARAMS,
    }

    def _model_params(self):
        """As the base's, without ``norm`` when ``residual=None`` (which builds no norm)."""
        params = super()._model_params()
        return {k: v for k, v in params.items() if k != "norm" or params["residual"] is not None}

    def _build_module(self, in_features, out_features):
        return DeepSets(in_features, int(self.hidden_size), out_features, int(self.n_layers),
                        norm=self.norm, residual=self.residual, pooling=self.pooling,
                        pooled_skip=self._fitted_pooled_skip)

    def _init_module(self, data, n_outputs, seed, rng):
        module = super()._init_module(data, n_outputs, seed, rng)
        fit_pool_size(self, module, data)  # pooling="scaled_mean" or "sized_mean"
        return module

    def _embed_dim(self):
        return int(self.hidden_size)


_DS_DOC = """
    Parameters
    ----------
    hidden_size : int, default=64
        Width of the encoder and decoder.
    n_layers : int, default=2
        Encoder blocks after the input layer.
""" + POOLING_DOC + """    norm : {"layer", "set", None}, default=None
        Normalisation inside residual blocks (ignored when ``residual=None``).
    residual : {None, "original", "clean"}, default=None
        ``None``: the plain Deep Sets MLP; ``"original"``: non-clean residual blocks
        ``relu(x + N(W relu(N(W x))))``; ``"clean"``: the Deep Sets++ block
        ``x + N(W relu(N(W x)))`` with a bias-free input layer and a final norm-relu-weight.
        ``norm="set", residual="clean"`` is Deep Sets++.
""" + NETWORK_INPUT_DOC

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


class DeepSetsClassifier(SetClassifierMixin, _DeepSetsBase):
    _parameter_constraints = with_class_weight(_DeepSetsBase._parameter_constraints)
    __doc__ = compose_doc(
        """Deep Sets classifier (and Deep Sets++), one label per set, or several.
""",
        MULTILABEL_DOC, _DS_DOC,
        _auto_training_doc(_TRAINING_DOC.replace(_ALPHA_DOC, _ALPHA_DOC + CLASS_WEIGHT_DOC)
                           ).replace(*_PATIENCE_AUTO_DEFAULT_DOC), POOL_SIZE_ATTR,
        """    classes_ : ndarray of shape (n_classes,)
        Class labels (multi-label: ``arange(n_labels)``).
    class_weight_ : ndarray of shape (n_classes,) or None
        The class weights of ``class_weight`` (multi-label: the weight of each label's
        positives); None without.
""",
        _DS_REFS,
        """
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

    Multi-label: ``y`` an indicator matrix, one column per label.

    >>> Y = np.column_stack([np.arange(40) % 2, np.arange(40) % 3 == 0]).astype(int)
    >>> clf = DeepSetsClassifier(hidden_size=16, max_iter=5, random_state=0).fit(X, Y)
    >>> clf.classes_.tolist(), clf.predict(X[:3]).shape, clf.predict_proba(X[:3]).shape
    ([0, 1], (3, 2), (3, 2))
""",
    )

    def __init__(self, hidden_size=64, n_layers=2, *, pooling="sized_mean", norm=None,
                 residual=None, standardize="auto", pooled_skip=False, window="auto", dilation="auto",
                 optimizer="adam", learning_rate_init=1e-3,
                 alpha=0.0, class_weight=None, batch_size=64, max_elements=131_072, max_iter=200,
                 tol=1e-4, early_stopping=False, validation_fraction=0.1, n_iter_no_change="auto",
                 warm_start=False, verbose=0, device="auto", dtype="float32", random_state=None):
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.pooling = pooling
        self.norm = norm
        self.residual = residual
        self.standardize = standardize
        self.pooled_skip = pooled_skip
        self.window = window
        self.dilation = dilation
        self.optimizer = optimizer
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


class DeepSetsRegressor(SetRegressorMixin, _DeepSetsBase):
    __doc__ = compose_doc(
        """Deep Sets regressor (and Deep Sets++), one (multi-output) target per set.
""",
        _REGRESSION_NOTE,
        _DS_DOC, _auto_training_doc(_REGRESSION_TRAINING_DOC).replace(*_PATIENCE_AUTO_DEFAULT_DOC),
        POOL_SIZE_ATTR, _REGRESSION_ATTRS,
        _DS_REFS,
        """
    Examples
    --------
    >>> from skset import DeepSetsRegressor
    >>> from skset.datasets import make_normal_var
    >>> X, y = make_normal_var(64, set_size=50, random_state=0)
    >>> reg = DeepSetsRegressor(hidden_size=16, max_iter=5, random_state=0).fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
""",
    )

    _parameter_constraints = {**_DeepSetsBase._parameter_constraints,
                              "early_stopping": ["auto", Boolean()]}

    def __init__(self, hidden_size=64, n_layers=2, *, pooling="sized_mean", norm=None,
                 residual=None, standardize="auto", pooled_skip=False, window="auto", dilation="auto",
                 optimizer="adam", learning_rate_init=1e-3,
                 alpha=0.0, batch_size=64, max_elements=131_072, max_iter=200, tol=1e-4,
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change="auto",
                 warm_start=False, verbose=0, device="auto", dtype="float32", random_state=None):
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.pooling = pooling
        self.norm = norm
        self.residual = residual
        self.standardize = standardize
        self.pooled_skip = pooled_skip
        self.window = window
        self.dilation = dilation
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
