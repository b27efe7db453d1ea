"""Attention-Based Clustering (ABC): a kernel learned from labelled instances and applied, with
spectral clustering and the eigengap, to many new instances at once.

This file is the estimator (its parameters and ``fit``); ``_abc_train.py`` builds and trains the
kernel network, ``_abc_data.py`` holds its training data and batches, ``_abc_select.py`` what is
chosen on the validation instances after training (the prior, the kernel kept, the k rule),
``_abc_predict.py`` the inference on new instances."""

from __future__ import annotations

import numpy as np

from .._torch import seed_from_random_state
from .._validation import POSITIVE_INT, TORCH_PARAMS, Boolean, Integer, Real, Satisfies
from ..neural_network._base import BaseNeuralEstimator
from ..neural_network._training import TRAINING_PARAMS
from ._abc_data import (
    check_training_data,
    held_out_batches,
    training_instances,
)
from ._abc_predict import KernelInference
from ._abc_select import KernelSelection
from ._abc_train import KernelTraining

__all__ = ["ABCClusterer"]

_PAIR_OF_WEIGHTS = Satisfies(
    lambda v: not isinstance(v, str) and len(v) == 2
    and all(np.isfinite(float(w)) and float(w) >= 0 for w in v) and float(v[0]) + float(v[1]) > 0,
    "a pair (w_neg, w_pos) of finite non-negative numbers, not both 0")
_CLUSTER_RANGE = Satisfies(
    lambda v: not isinstance(v, str) and len(v) == 2
    and all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in v)
    and 1 <= v[0] <= v[1], "an inclusive range (k_min, k_max) with 1 <= k_min <= k_max")


class ABCClusterer(KernelTraining, KernelSelection, KernelInference, BaseNeuralEstimator):
    r"""Attention-Based Clustering: a learned, context-dependent kernel + spectral clustering.

    A network (:class:`skset.nn.ABCKernel`: element-wise ``tanh`` embedding, a stack of masked
    SABs, a symmetric sigmoid compatibility) maps an instance of ``n`` elements to an ``n x n``
    affinity in ``[0, 1]``; it is trained on labelled instances to predict the same-cluster matrix
    (mean binary cross-entropy over real pairs). New instances -- possibly of classes never seen in
    training -- are clustered by spectral clustering of their affinity, the number of clusters
    coming from the k rule (``n_clusters_rule``: the eigengap, or the threshold calibrated after
    training, ``eigen_threshold_``) unless given.

    Training data is either

    * a list of instances ``(n_i, d)`` with one label array per instance: each optimisation step
      takes the next ``batch_size`` instances of a shuffled pass over the list, or
    * one labelled pool ``(N, d)`` + ``(N,)``: each step draws ``batch_size`` fresh instances of
      ``instance_size`` elements as in the paper's Appendix B (a number of clusters uniform in
      ``instance_n_clusters``, classes without replacement, random cluster sizes >= 1).

    Prediction is batched: instances are padded into length batches; the affinity, the Laplacian
    eigendecomposition (one ``torch.linalg.eigh`` per batch), the eigengap, the normalised spectral
    embedding and k-means (batched Lloyd with k-means++ seeding) all run on the whole batch. Every
    batch draws the same k-means starts from ``random_state``, so an instance's labels do not
    depend on the other instances of ``X``, their order or the batches, up to the rounding of a
    padded batch's eigendecomposition where the clustering is ill-conditioned (a given
    ``n_clusters`` that splits a cluster; an eigengap near a tie).

    Parameters
    ----------
    compatibility : {"multiplicative", "additive"}, default="multiplicative"
        Form of the compatibility ``c(z_i, z_j)`` (scaled dot product, or ``v^T tanh(W_q z_i +
        W_k z_j)``).
    hidden_size : int, default=64
        Width of the embedding and the SABs, 32 to 256 (the paper uses 128); a wider network
        costs more per step. Why 64: :ref:`abc-training-defaults` in the user guide.
    n_layers : int, default=2
        Number of SABs (0: the pairwise, context-free ablation).
    n_heads : int, default=4
        Attention heads.
    compat_dim : int or None, default=None
        Width of the compatibility's projections (``None``: ``hidden_size``; the additive form costs
        ``n^2 * compat_dim`` memory per instance).
    norm : {"layer", "set", None}, default="layer"
        Normalisation inside the SABs (layer norm, set norm, or none).
    residual : {"original", "clean"}, default="original"
        Arrangement of the SABs' residual connections and normalisation (see
        :class:`skset.nn.SAB`).
    input_similarity : {"auto", "knn", "rbf", "cosine", None}, default="auto"
        A fixed similarity prior on the inputs (after ``standardize``), the fallback of the
        learned kernel: the network is trained as in the paper, then, with ``early_stopping``,
        the kernel kept is the one of the prior alone, the learned one, or their sum (of logits)
        that clusters the validation instances best (``kernel_mix_``; see
        :class:`skset.nn.ABCKernel`), the prior unless a learned kernel is better by more than
        the noise of the validation instances (a paired t statistic of their ARIs above 2). So
        the returned kernel is never worse on held-out data than spectral clustering on the
        prior: a user is never better served by not learning.
        ``"knn"``: the symmetrised graph of the ``n_neighbors`` nearest neighbours within the instance
        (at most half of it, the element counted; every element tied at the last neighbour's
        distance included); ``"rbf"``: minus the squared distance over the instance's mean squared
        distance; ``"cosine"``. ``"auto"``: the best of kNN
        graphs of ``n_neighbors // 2``, ``n_neighbors`` and ``2 * n_neighbors`` neighbours on the
        validation instances (``prior_scores_``: clustering with the calibrated k rule and with the
        true k), or the best of RBF kernels of eight sharpnesses where it is better by more than the
        noise (the prior learns nothing, so with a pool it is chosen on instances of every class); the
        kNN graph of ``n_neighbors`` without ``early_stopping``. Without ``early_stopping`` the sum is
        kept.
        ``None`` is the paper's model alone.
    n_neighbors : int, default=10
        Neighbours of the ``"knn"`` prior (the middle of the ``"auto"`` candidates).
    class_weight : None, "balanced" or (float, float), default=None
        Weights of the BCE terms: ``None`` weighs every pair the same (the paper's mean BCE);
        ``"balanced"`` gives positives and negatives half the weight each per instance;
        ``(w_neg, w_pos)`` fixes them. (The reference code weights positives by #neg/#pos; that
        lowers the pressure on cross-cluster pairs, whose affinities must be near 0 for the
        eigengap to find ``k``, so it is not the default.)
    standardize : bool, default=True
        Centre the features on the training elements' mean and divide them all by **one** scale,
        the root mean square of their standard deviations: distances keep the features' relative
        scales, and a near-constant feature (a rare pixel) is never blown up, as it is by
        per-feature scaling.
    instance_size : int, default=100
        Elements per sampled training instance (pool input only).
    instance_n_clusters : int or (int, int), default=(2, 6)
        Number of clusters of sampled training instances, or its inclusive range (pool only).
        With ``early_stopping`` on a pool of 4 classes or more, the classes held out for
        validation are not drawn in training: where fewer than the range's top are left, the
        training range (and ``max_clusters_``) stops at their number, with a warning.
    max_steps : int, default=40000
        Most optimisation steps (one step = one batch of ``batch_size`` instances); with
        validation and the ``"cosine"`` schedule training can end earlier, at the end of the
        decay that a validation plateau starts, or at a stall in the second half of the decay.
        How the defaults of ``max_steps``, ``batch_size`` and ``learning_rate_init`` were
        chosen: :ref:`abc-training-defaults` in the user guide.
    batch_size : int, default=8
        Instances per step. On a GPU, where a larger batch costs little more time, raise it
        (the paper used up to 128).
    learning_rate_init : float, default=1e-3
        Peak step size of the optimiser (see ``learning_rate_schedule``); 1e-4 to 1e-3.
    alpha : float, default=0.0
        L2 penalty (``"adam"``) or decoupled weight decay (``"adamw"``).
    optimizer : {"adam", "adamw"}, default="adam"
        The torch optimiser.
    learning_rate_schedule : {"cosine", "constant"}, default="cosine"
        ``"cosine"``: per step, a linear warm-up to ``learning_rate_init`` over the first
        ``warmup_fraction`` of ``max_steps``, the rate held, then a cosine decay to 0.01 times
        it over the last ``decay_fraction`` of ``max_steps``;
        ``"constant"``: ``learning_rate_init`` throughout (the schedule of models fitted before
        it existed).
    warmup_fraction : float in [0, 1), default=0.05
        Fraction of ``max_steps`` spent warming up (``"cosine"``).
    decay_fraction : float in [0, 1], default=0.3
        Fraction of ``max_steps`` over which the rate decays at the end (``"cosine"``; 1: the
        plain warm-up + cosine schedule). Why 0.3: :ref:`abc-training-defaults`.
    eval_every : int, default=100
        Steps between two entries of ``loss_curve_`` / validations; the stopping rules count in
        these units (the default patience, 20 checks, is 2,000 steps).
    early_stopping : bool, default=True
        Validate the clustering, stop when it stalls and restore the best checkpoint (with the
        ``"cosine"`` schedule a stall at the peak rate starts the decay instead, and training
        stops at a stall during the decay or at its end). The score
        is the mean adjusted Rand index of the eigengap clustering of validation instances (it
        punishes a wrong number of clusters more than NMI does). With a pool of at least 4
        classes the validation instances are drawn from **held-out classes**
        (``validation_fraction`` of the classes, at least 2; the kernel never trains on them),
        which measures what a user wants: clustering classes the kernel has not seen.
        Otherwise they are held-out instances (or, for a pool of fewer classes, held-out
        elements of every class).
    validation_fraction : float, default=0.1
        Held-out fraction of the instances, or of the classes of a pool.
    n_validation_instances : int, default=64
        Validation instances drawn from a held-out pool; for instance input, the most instances
        held out (the rest of ``validation_fraction`` trains). With a pool whose held-out
        classes give instances of one number of clusters, 4x as many calibration instances of
        every class are also drawn, once, to choose the prior and calibrate its rule for ``k``.
    n_iter_no_change : int, default=20
        Checks (every ``eval_every`` steps) without an improvement of ``tol`` before the
        ``"cosine"`` schedule starts its decay early, or stops during it (without that schedule:
        before stopping): of the validation score with ``early_stopping``, else of the training
        BCE; with the schedule, of the mean of the last 5 scores. 5 to 50; why 20:
        :ref:`abc-training-defaults`.
    tol : float, default=1e-4
        Smallest improvement that counts.
    min_clusters : int, default=1
        Smallest number of clusters the k rule may return at prediction (and on the validation
        instances). ``min_clusters_`` records the smallest training k, a natural value when new
        instances hold at least as many clusters as the training ones; the default keeps one
        cluster possible (why: :ref:`abc-training-defaults`).
    n_clusters_rule : {"calibrated", "eigengap"}, default="calibrated"
        How ``k`` is found when ``predict`` is not given it. ``"eigengap"``: the largest gap of
        the Laplacian's eigenvalues within ``[min_clusters, max_clusters]``.
        ``"calibrated"``: after training, the eigengap or the count of eigenvalues below a
        threshold (``skset.nn.spectral.threshold_n_clusters``, thresholds 0.02-0.95),
        whichever finds the true ``k`` of most validation instances (``eigen_threshold_``; the
        eigengap on ties). A kernel that is not perfectly sharp lifts the small eigenvalues, the
        more the more clusters, and the eigengap then under-counts (measured in the user guide,
        :ref:`clustering`). Calibration needs
        validation instances of several ``k``: held-out classes of a small pool give one ``k``;
        then the prior's rule is calibrated on instances of every class (the prior learns from
        none) and the learned kernels keep the eigengap. Without ``early_stopping`` the eigengap
        is used.
    max_clusters : int or None, default=None
        Largest number of clusters the k rule may return at prediction. ``None``: the largest
        number of clusters of a training instance (``max_clusters_``, or ``min_clusters`` where
        that is larger): the kernel has not learned to separate more, and a finite bound keeps
        the k rule from running away on sharp kernels. Set it when new instances may hold more
        clusters than the training ones.
    n_init : int, default=10
        k-means restarts at prediction.
    assign_labels : {"kmeans", "sklearn"}, default="kmeans"
        ``"kmeans"``: the batched torch path; ``"sklearn"``: each instance's affinity goes to
        :func:`sklearn.cluster.spectral_clustering` (a Python loop; the reference).
    max_pairs : int, default=10_000_000
        Budget of padded pairs ``B * n_max^2`` per prediction batch (the affinity, the attention
        maps and the eigendecomposition all scale with it). On a CPU, inference batches are
        smaller (``2**18`` pairs, e.g. 26 instances of 100 elements) and run side by side on
        ``torch.get_num_threads()`` threads with one intra-op thread each, which is faster than
        one big batch (user guide, :ref:`abc-cost`). Labels do not depend on the number of
        threads.
    warm_start : bool, default=False
        Continue training the fitted network (and its optimiser state) in the next ``fit``;
        the architecture, ``standardize``, ``input_similarity`` and ``n_neighbors`` must be the
        fit's (a ``ValueError`` names one changed since). ``predict`` and ``affinity`` read the
        fit's standardisation whatever ``standardize`` says now.
    device : str, default="auto"
        Torch device (``"auto"``: CUDA when available, else the CPU).
    random_state : int, RandomState or None, default=None
        Seed of the weight initialisation, the training instances' order or sampling, and the
        k-means restarts at prediction (their seed drawn once in ``fit``: a fitted model gives
        the same labels at every call, with ``None`` too).
    verbose : int, default=0
        Print the training loss every ``eval_every`` steps when > 0.

    Attributes
    ----------
    module_ : skset.nn.ABCKernel
        The trained kernel network.
    n_features_in_ : int
        Number of features of the elements.
    mean_, scale_ : ndarray of shape (n_features,)
        Mean of the training elements and the one scale of all features (with ``standardize``).
    loss_curve_ : list of float
        Mean training BCE of each block of ``eval_every`` steps.
    validation_scores_ : list of float
        Validation score (mean eigengap ARI) at each check (with ``early_stopping``).
    best_validation_score_ : float
        The validation score of the kernel kept (with ``early_stopping``).
    kernel_mix_ : str
        With ``input_similarity``: the kernel kept, ``"prior"``, ``"learned"`` or
        ``"prior+learned"``.
    kernel_scores_ : dict or None
        The validation score (mean ARI) of each of the three (with ``early_stopping``); the
        prior is kept unless another one's is higher by a paired t statistic above 2.
    input_similarity_ : str or None
        The prior used: ``input_similarity``, or with ``"auto"`` the one chosen.
    prior_params_ : dict or None
        The prior's settings: ``n_neighbors`` (kNN), ``scale`` and ``offset`` of its logits
        ``scale * (s + offset)`` (see :class:`skset.nn.ABCKernel`).
    prior_scores_ : dict or None
        With ``input_similarity="auto"`` and ``early_stopping``: the score of each candidate
        prior alone (the mean over instances of the ARI with its calibrated k rule and the ARI
        with the true k). The best kNN graph is kept unless the best RBF kernel's score is
        higher by a paired t statistic above 2.
    validation_classes_ : ndarray or None
        The classes of the pool held out for validation (``None`` for other validations). A
        warm start on a pool holding them holds out the same classes (drawn again, the kernel
        would be validated on classes it trained on in the fit before).
    max_clusters_ : int
        The largest number of clusters of a training instance (over every warm-started fit):
        the k rule's bound when ``max_clusters`` is None.
    min_clusters_ : int
        The smallest number of clusters of a training instance (a value for ``min_clusters``).
    eigen_threshold_ : float or None
        The calibrated threshold of the k rule (``None``: the eigengap).
    validation_k_right_ : float
        Fraction of the calibration instances whose ``k`` the kept rule finds (with
        ``early_stopping``).
    learning_rates_ : list of float
        The learning rate of each block of ``eval_every`` steps.
    lr_decay_start_ : int
        With the ``"cosine"`` schedule: the step (of the last fit) where the decay began, at
        ``(1 - decay_fraction) * max_steps`` or earlier when the validation score stalled
        ``n_iter_no_change`` checks at the peak rate.
    n_iter_ : int
        Optimisation steps run (over all warm-started fits).
    device_ : torch.device
        The device the network lives on.
    dtype_ : torch.dtype
        The compute dtype, ``torch.float32``.

    See Also
    --------
    EigengapSpectralClustering : Spectral clustering of one data set with a fixed affinity.
    estimate_n_clusters : The eigengap rule (``n_clusters_rule="eigengap"``).
    skset.nn.ABCKernel : The kernel network, for use in other torch models.
    skset.datasets.make_circles_instances : Labelled instances of overlapping circles.
    skset.datasets.sample_clustering_instances : Instances drawn from a labelled pool.

    References
    ----------
    .. [1] M. Coward, M. Visse-Martindale, C. Ramesh. "Attention-Based Clustering: Learning a
       Kernel from Context". arXiv:2010.01040, 2020.
    .. [2] J. Lee, Y. Lee, J. Kim, A. Kosiorek, S. Choi, Y. W. Teh. "Set Transformer: A Framework
       for Attention-based Permutation-Invariant Neural Networks". ICML 2019.

    Examples
    --------
    >>> from skset import ABCClusterer
    >>> from skset.datasets import make_circles_instances
    >>> X, y = make_circles_instances(64, 40, random_state=0)
    >>> abc = ABCClusterer(hidden_size=16, n_heads=2, max_steps=5, batch_size=8,
    ...                    random_state=0).fit(X, y)
    >>> labels = abc.predict(X[:2], n_clusters=4)
    >>> [lab.shape for lab in labels]
    [(40,), (40,)]
    """

    _parameter_constraints = {
        "compatibility": ["multiplicative", "additive"],
        "hidden_size": [POSITIVE_INT],
        "n_layers": [Integer(0)],
        "n_heads": [POSITIVE_INT],
        "compat_dim": [POSITIVE_INT, None],
        "norm": ["layer", "set", None],
        "residual": ["original", "clean"],
        "input_similarity": [None, "auto", "knn", "rbf", "cosine"],
        "n_neighbors": [POSITIVE_INT],
        "class_weight": [None, "balanced", _PAIR_OF_WEIGHTS],
        "standardize": [Boolean()],
        "instance_size": [Integer(2)],
        "instance_n_clusters": [POSITIVE_INT, _CLUSTER_RANGE],
        "max_steps": [POSITIVE_INT],
        "batch_size": [POSITIVE_INT],
        "learning_rate_init": TRAINING_PARAMS["learning_rate_init"],
        "alpha": TRAINING_PARAMS["alpha"],
        "optimizer": TRAINING_PARAMS["optimizer"],
        "learning_rate_schedule": ["constant", "cosine"],
        "warmup_fraction": [Real(0, 1, closed="left")],
        "decay_fraction": [Real(0, 1)],
        "eval_every": [POSITIVE_INT],
        "early_stopping": [Boolean()],
        "validation_fraction": TRAINING_PARAMS["validation_fraction"],
        "n_validation_instances": [POSITIVE_INT],
        "n_iter_no_change": [POSITIVE_INT],
        "tol": TRAINING_PARAMS["tol"],
        "max_clusters": [POSITIVE_INT, None],
        "min_clusters": [POSITIVE_INT],
        "n_clusters_rule": ["calibrated", "eigengap"],
        "n_init": [POSITIVE_INT],
        "assign_labels": ["kmeans", "sklearn"],
        "max_pairs": [POSITIVE_INT],
        "warm_start": TRAINING_PARAMS["warm_start"],
        "device": TORCH_PARAMS["device"],
        "random_state": TORCH_PARAMS["random_state"],
        "verbose": TRAINING_PARAMS["verbose"],
    }
    # models saved before the names were shared with the other neural estimators
    _renamed_params = {"dim": "hidden_size", "n_blocks": "n_layers", "max_iter": "max_steps",
                       "weight_decay": "alpha"}
    # saved before the prior existed: the paper's model, without prior
    _legacy_params = {"input_similarity": None, "learning_rate_schedule": "constant",
                      "warmup_fraction": 0.0, "decay_fraction": 1.0, "min_clusters": 1,
                      "n_clusters_rule": "eigengap", "n_neighbors": 10}

    def __init__(self, compatibility="multiplicative", *, hidden_size=64, n_layers=2, n_heads=4,
                 compat_dim=None, norm="layer", residual="original", input_similarity="auto",
                 n_neighbors=10, class_weight=None, standardize=True, instance_size=100,
                 instance_n_clusters=(2, 6), max_steps=40_000, batch_size=8,
                 learning_rate_init=1e-3, alpha=0.0, optimizer="adam",
                 learning_rate_schedule="cosine", warmup_fraction=0.05, decay_fraction=0.3,
                 eval_every=100, early_stopping=True, validation_fraction=0.1,
                 n_validation_instances=64, n_iter_no_change=20, tol=1e-4, max_clusters=None,
                 min_clusters=1, n_clusters_rule="calibrated", n_init=10, assign_labels="kmeans",
                 max_pairs=10_000_000, warm_start=False, device="auto", random_state=None,
                 verbose=0):
        self.compatibility = compatibility
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.compat_dim = compat_dim
        self.norm = norm
        self.residual = residual
        self.input_similarity = input_similarity
        self.n_neighbors = n_neighbors
        self.class_weight = class_weight
        self.standardize = standardize
        self.instance_size = instance_size
        self.instance_n_clusters = instance_n_clusters
        self.max_steps = max_steps
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.alpha = alpha
        self.optimizer = optimizer
        self.learning_rate_schedule = learning_rate_schedule
        self.warmup_fraction = warmup_fraction
        self.decay_fraction = decay_fraction
        self.eval_every = eval_every
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_validation_instances = n_validation_instances
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.max_clusters = max_clusters
        self.min_clusters = min_clusters
        self.n_clusters_rule = n_clusters_rule
        self.n_init = n_init
        self.assign_labels = assign_labels
        self.max_pairs = max_pairs
        self.warm_start = warm_start
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _compute_dtype(self):
        return "float32"  # no dtype parameter

    def _check_param_relations(self):
        if self.hidden_size % self.n_heads:
            raise self._param_error(f"hidden_size={self.hidden_size} must be divisible by "
                                    f"n_heads={self.n_heads}.")
        if self.max_clusters is not None and self.min_clusters > self.max_clusters:
            raise self._param_error(f"min_clusters={self.min_clusters} is above "
                                    f"max_clusters={self.max_clusters}.")

    # ------------------------------------------------------------------ fitting
    def _model_params(self) -> dict:
        """The parameters that build the network (``_build_module``) and what it reads (the
        standardisation, the prior): a warm start and ``skset.save`` refuse them changed since
        the fit."""
        return {k: getattr(self, k) for k in ("hidden_size", "n_layers", "n_heads",
                                              "compatibility", "compat_dim", "norm", "residual",
                                              "standardize", "input_similarity", "n_neighbors")}

    def fit(self, X, y):
        """Train the kernel on labelled instances or on a labelled pool.

        Parameters
        ----------
        X : list of array-like of shape (n_i, d), or ndarray of shape (N, d)
            Training instances (each with at least 2 elements), or one pool of elements.
        y : list of array-like of shape (n_i,), or array-like of shape (N,)
            The cluster of each element of each instance, or the class of each pool element.

        Returns
        -------
        self
        """
        warm = bool(self.warm_start) and hasattr(self, "module_")
        if warm:  # the fitted network's architecture, or nothing changes
            self._check_params()
            self._check_model_params("warm_start=True")
        seed, rng = self._start_fit(warm)  # the parameters are checked first
        data = check_training_data(X, y, instance_size=self.instance_size,
                                   instance_n_clusters=self.instance_n_clusters)
        self._check_columns(X, fitting=not warm)  # instances given as frames: their columns
        if warm and data.n_features != self.n_features_in_:
            raise ValueError(f"{type(self).__name__}: warm_start with {data.n_features} "
                             f"features, but the model was fitted on {self.n_features_in_}.")
        if not warm:
            self._init_kernel(data, seed)
        source = training_instances(
            data, n_elements=self.instance_size, validate=bool(self.early_stopping),
            validation_fraction=self.validation_fraction,
            n_validation=self.n_validation_instances,
            calibrate_prior=(self.input_similarity is not None
                             and self.n_clusters_rule == "calibrated"),
            rng=rng, seed=seed, name=type(self).__name__,
            held_out=getattr(self, "validation_classes_", None) if warm else None)
        self.validation_classes_ = source.validation_classes
        if not warm:
            self.max_clusters_, self.min_clusters_ = int(source.k_max), int(source.k_min)
            self.eigen_threshold_ = None
            self._model_params_ = self._model_params()
        else:  # the range of every fit so far
            self.max_clusters_ = max(int(self.max_clusters_), int(source.k_max))
            self.min_clusters_ = min(int(self.min_clusters_), int(source.k_min))
        val_parts, cal_parts = (held_out_batches(h, self._scale, self.device_, self.max_pairs)
                                for h in (source.validation, source.calibration))
        mix = getattr(self.module_, "mix", None)
        self._train_kernel(source.draw, val_parts, mix, seed)
        if not warm and self.input_similarity == "auto":
            self._choose_prior(mix, val_parts, cal_parts)
        self._choose_mix(mix, val_parts, cal_parts)
        # the seed of predict's k-means restarts, drawn once here: with random_state None or a
        # RandomState, predict drew it at every call (other partitions from one fitted model,
        # and the caller's global numpy state moved); an int gives the seed predict drew before
        self._predict_seed = seed_from_random_state(self.random_state)
        return self
