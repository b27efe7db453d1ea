"""Attention-Based Clustering (ABC): a kernel learned from labelled instances and applied, with
spectral clustering and the eigengap, to many new instances at once."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import spectral_clustering
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.validation import check_is_fitted

from .._sets import length_batches
from .._torch import (
    make_generator,
    map_on_threads,
    seed_from_random_state,
)
from .._validation import (
    POSITIVE_INT,
    TORCH_PARAMS,
    Boolean,
    Integer,
    Param,
    Real,
    Satisfies,
)
from ..neural_network._base import BaseNeuralEstimator
from ..neural_network._callbacks import Callback
from ..neural_network._training import TRAINING_PARAMS
from ..nn.abc import abc_affinity
from ..nn.spectral import (
    eigengap_n_clusters,
    laplacian_eigh,
    spectral_cluster,
    threshold_n_clusters,
)
from ._eigengap import _CPU_CHUNK_PAIRS

__all__ = ["ABCClusterer"]

#: thresholds of the calibrated k rule (``n_clusters_rule="calibrated"``)
_THRESHOLDS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
               0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)

_PAIR_OF_WEIGHTS = Satisfies(
    lambda v: not isinstance(v, str) and len(v) == 2 and all(float(w) >= 0 for w in v),
    "a pair (w_neg, w_pos) of non-negative numbers")
_CLUSTER_RANGE = Satisfies(
    lambda v: not isinstance(v, str) and len(v) == 2
    and all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in v)
    and 1 <= v[0] <= v[1], "an inclusive range (k_min, k_max) with 1 <= k_min <= k_max")


def _check_instance_labels(y, sets, name: str = "y") -> list[np.ndarray]:
    if y is None:
        raise ValueError(f"{name} is None; ABCClusterer needs one label array per instance.")
    if isinstance(y, np.ndarray) and y.dtype != object and y.ndim == 2:
        y = list(y)
    try:
        n_y = len(y)
    except TypeError:
        raise TypeError(f"{name} must be a list of label arrays, one per instance.") from None
    if n_y != len(sets):
        raise ValueError(f"{name} holds {n_y} label arrays but X holds {len(sets)} instances; give "
                         "one label array per instance.")
    out = []
    for i, (lab, s) in enumerate(zip(y, sets, strict=True)):
        lab = np.asarray(lab)
        if lab.ndim != 1:
            raise ValueError(f"{name}: the labels of instance {i} must be 1-D, got shape "
                             f"{lab.shape}.")
        if len(lab) != len(s):
            raise ValueError(f"{name}: instance {i} has {len(s)} elements but {len(lab)} labels.")
        if lab.dtype.kind == "f" and not np.isfinite(lab).all():
            raise ValueError(f"{name}: the labels of instance {i} contain NaN or infinity.")
        out.append(np.unique(lab, return_inverse=True)[1].astype(np.int64).ravel())
    return out


def _pack_labels(labels: list[np.ndarray], n: int) -> torch.Tensor:
    buf = np.full((len(labels), n), -1, dtype=np.int64)
    for r, lab in enumerate(labels):
        buf[r, :len(lab)] = lab
    return torch.from_numpy(buf)


class WarmupCosineSchedule(Callback):
    """Per optimiser step: a linear warm-up to the peak learning rate over ``warmup_steps``, the
    peak held, then a cosine decay over the last ``decay_steps`` to ``final_fraction`` of the peak
    at ``total_steps`` (held after that).

    The peak is each parameter group's learning rate when training begins. Step ``t`` (0-based,
    the steps already taken in this call) runs with ``lr * (t + 1) / warmup_steps`` during the
    warm-up, ``lr`` until ``s = total_steps - decay_steps``, and ``lr * (f + (1 - f) (1 +
    cos(pi u)) / 2)``, ``u = (t - s) / decay_steps``, after it (``decay_steps=None``: the decay
    starts right after the warm-up, the plain warm-up + cosine schedule). Holding the peak and
    decaying at the end ("warmup-stable-decay") keeps the progress of a constant rate when the
    budget is short and the end-of-training gain of a decay.

    With ``patience`` (validation checks) the schedule also owns the stopping rule: when the
    validation score has not risen above its best by ``tol`` for ``patience`` checks during the
    held phase, the decay starts at once (over the same number of steps, capped by
    ``total_steps``); during the decay the same stall stops training, and so does the end of the
    decay. So a plateau of the validation score ends in an annealing phase rather than in a stop
    at the peak rate (a stop before the decay lost 0.03-0.04 NMI on circles, see
    ``benchmarks/results/abc.md``). The caller keeps the loop's own rule out of the way (and
    its best-checkpoint restore on).
    """

    def __init__(self, total_steps: int, warmup_steps: int = 0, final_fraction: float = 0.0,
                 decay_steps: int | None = None, patience: int | None = None,
                 tol: float = 0.0):
        if int(total_steps) < 1 or int(warmup_steps) < 0:
            raise ValueError(f"total_steps={total_steps} must be >= 1 and "
                             f"warmup_steps={warmup_steps} >= 0.")
        self.total = int(total_steps)
        self.warmup = min(int(warmup_steps), self.total)
        self.final = float(final_fraction)
        span = self.total - self.warmup
        self.decay_start = self.warmup if decay_steps is None else \
            self.total - min(int(decay_steps), span)
        self.decay_end = self.total
        self.patience = None if patience is None else int(patience)
        self.tol = float(tol)

    def factor(self, t: int) -> float:
        """The multiplier of the peak learning rate at step ``t``."""
        if t < self.warmup:
            return (t + 1) / self.warmup
        span = max(self.decay_end - self.decay_start, 1)
        u = min(max(t - self.decay_start, 0) / span, 1.0)
        return float(self.final + (1.0 - self.final) * 0.5 * (1.0 + np.cos(np.pi * u)))

    def on_train_begin(self, state):
        self._base = [g["lr"] for g in state.optimizer.param_groups]
        self._best, self._bad = -np.inf, 0
        self.plateau_step = None

    def on_epoch_end(self, state):
        if self.patience is None or state.score is None:
            return
        if state.score > self._best + self.tol:
            self._bad = 0
        else:
            self._bad += 1
        self._best = max(self._best, state.score)
        decaying = state.step > self.decay_start
        if self._bad >= self.patience and not decaying:
            # a plateau at the peak rate: anneal now, over the planned length of the decay
            length = self.decay_end - self.decay_start
            self.decay_start = max(state.step, self.warmup)
            self.decay_end = min(self.decay_start + length, self.total)
            self.plateau_step = state.step
            self._bad = 0
        elif (decaying and self._bad >= self.patience) or state.step >= self.decay_end:
            state.stop = True
            state.stop_message = ("Validation score stalled during the learning-rate decay. "
                                  "Stopping." if state.step < self.decay_end else
                                  "Learning-rate decay finished. Stopping.")

    def on_batch_begin(self, state):
        f = self.factor(state.step)
        for g, lr in zip(state.optimizer.param_groups, self._base, strict=True):
            g["lr"] = lr * f

    def on_train_end(self, state):  # a warm start begins again from the peak
        for g, lr in zip(state.optimizer.param_groups, self._base, strict=True):
            g["lr"] = lr


class ABCClusterer(BaseNeuralEstimator):
    r"""Attention-Based Clustering: a learned, context-dependent kernel + spectral clustering.

    A network (:class:`skset.nn.ABCKernel`: element-wise ``tanh`` embedding, a stack of masked
    SABs, a symmetric sigmoid compatibility) maps an instance of ``n`` elements to an ``n x n``
    affinity in ``[0, 1]``; it is trained on labelled instances to predict the same-cluster matrix
    (mean binary cross-entropy over real pairs). New instances -- possibly of classes never seen in
    training -- are clustered by spectral clustering of their affinity, the number of clusters
    coming from the eigengap (:func:`estimate_n_clusters`) unless given.

    Training data is either

    * a list of instances ``(n_i, d)`` with one label array per instance: each optimisation step
      takes the next ``batch_size`` instances of a shuffled pass over the list, or
    * one labelled pool ``(N, d)`` + ``(N,)``: each step draws ``batch_size`` fresh instances of
      ``instance_size`` elements as in the paper's Appendix B (a number of clusters uniform in
      ``instance_n_clusters``, classes without replacement, random cluster sizes >= 1).

    Prediction is batched: instances are padded into length batches; the affinity, the Laplacian
    eigendecomposition (one ``torch.linalg.eigh`` per batch), the eigengap, the normalised spectral
    embedding and k-means (batched Lloyd with k-means++ seeding) all run on the whole batch.

    Parameters
    ----------
    compatibility : {"multiplicative", "additive"}, default="multiplicative"
        Form of the compatibility ``c(z_i, z_j)`` (scaled dot product, or ``v^T tanh(W_q z_i +
        W_k z_j)``).
    hidden_size : int, default=64
        Width of the embedding and the SABs. The paper uses 128; on a CPU a step of width 64 costs
        1.3-1.7x less and learns the 2-5 circles about as fast per step (validation ARI 0.48 at 5,600
        steps, 0.46 at 5,000 with 128), so in the same minutes it trains further: NMI 0.734
        against 0.689 (``benchmarks/results/abc.md``).
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
        :class:`skset.nn.ABCKernel`). So the returned kernel is never worse on held-out data than
        spectral clustering on the prior: a user is never better served by not learning.
        ``"knn"``: the symmetrised graph of the ``n_neighbors`` nearest neighbours within the
        instance; ``"rbf"``: minus the squared distance over the instance's mean squared
        distance; ``"cosine"``. ``"auto"``: the prior that clusters the validation instances best
        (``prior_scores_``) among kNN graphs of ``n_neighbors // 2``, ``n_neighbors`` and
        ``2 * n_neighbors`` neighbours and RBF kernels of eight sharpnesses (the prior learns
        nothing, so with a pool it is chosen on instances of every class); the kNN graph of
        ``n_neighbors`` without ``early_stopping``. Without ``early_stopping`` the sum is kept.
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
        scales, and a near-constant feature is never blown up (per-feature scaling amplified rare
        pixels and ruined distances on unseen digit classes, see ``benchmarks/results/abc.md``).
    instance_size : int, default=100
        Elements per sampled training instance (pool input only).
    instance_n_clusters : int or (int, int), default=(2, 6)
        Number of clusters of sampled training instances, or its inclusive range (pool only).
    max_steps : int, default=30000
        Most optimisation steps (one step = one batch of ``batch_size`` instances); with
        validation and the ``"cosine"`` schedule training can end earlier, at the end of the
        decay that a validation plateau starts, or at a stall during the decay (the 2-5 circles
        kernel: 24,500 steps, 12.4 min on the shared 2-core CPU with one thread under load;
        0.02-0.03 s per step of 8 instances of 100 points at the default width, quiet: see
        ``benchmarks/results/abc.md``).
    batch_size : int, default=8
        Instances per step. At a fixed budget of instances (wall time), small batches trained
        faster than the paper's 32-128 on a CPU: on 2-5 circles, 32,000 instances gave a
        validation ARI of 0.53 / 0.58 / 0.61 in batches of 32 / 16 / 8 (each ~3.2 min), and
        batches of 64 trained less than 32 (``benchmarks/results/abc.md``). On a GPU, where a
        larger batch costs little more time, raise it (the paper used up to 128).
    learning_rate_init : float, default=1e-3
        Peak step size of the optimiser (see ``learning_rate_schedule``). The paper uses 1e-4
        over tens of thousands of steps; with a budget of a few thousand steps 1e-4 leaves the
        circles kernel far from trained (validation NMI up to 0.25 after 1,000 steps, below the
        kNN prior's 0.37), and a peak of 2e-3 or 3e-3 trained less than 1e-3 in 500-1,000-step
        runs, so the default stays 1e-3 (``benchmarks/results/abc.md``).
    alpha : float, default=0.0
        L2 penalty (``"adam"``) or decoupled weight decay (``"adamw"``).
    optimizer : {"adam", "adamw"}, default="adam"
        The torch optimiser.
    learning_rate_schedule : {"cosine", "constant"}, default="cosine"
        ``"cosine"``: per step, a linear warm-up to ``learning_rate_init`` over the first
        ``warmup_fraction`` of ``max_steps``, the rate held, then a cosine decay to 1% of it over
        the last ``decay_fraction`` of ``max_steps`` (:class:`WarmupCosineSchedule`);
        ``"constant"``: ``learning_rate_init`` throughout (the schedule of models fitted before
        it existed).
    warmup_fraction : float in [0, 1), default=0.05
        Fraction of ``max_steps`` spent warming up (``"cosine"``).
    decay_fraction : float in [0, 1], default=0.3
        Fraction of ``max_steps`` over which the rate decays at the end (``"cosine"``; 1: the
        plain warm-up + cosine schedule). Holding the rate and decaying at the end kept the
        progress of a constant rate on short budgets (a cosine over the whole of 500 steps
        trained the circles kernel less than the constant rate, see
        ``benchmarks/results/abc.md``).
    eval_every : int, default=100
        Steps between two entries of ``loss_curve_`` / validations; the stopping rules count in
        these units (the default patience, 10 checks, is 1,000 steps).
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
        held out (the rest of ``validation_fraction`` trains).
    n_iter_no_change : int, default=20
        Checks (every ``eval_every`` steps) without an improvement of ``tol`` before the
        ``"cosine"`` schedule starts its decay early, or stops during it (without that schedule:
        before stopping): of the validation score with ``early_stopping``, else of the training
        BCE. 20 checks of 64 validation instances: with 10 the noise of the score started the
        decay at 5,900 of 12,000 steps on circles while the kernel was still improving.
    tol : float, default=1e-4
        Smallest improvement that counts.
    min_clusters : int, default=1
        Smallest number of clusters the k rule may return at prediction (and on the validation
        instances). ``min_clusters_`` records the smallest training k, a natural value when new
        instances hold at least as many clusters as the training ones; the default keeps one
        cluster possible (a bound of 2 gained 2-3 points of k right on circles and digits with
        the eigengap, but let a near-constant kernel of a barely trained model win the kernel
        selection on a single validation instance by a lucky split).
    n_clusters_rule : {"calibrated", "eigengap"}, default="calibrated"
        How ``k`` is found when ``predict`` is not given it. ``"eigengap"``: the largest gap of
        the Laplacian's eigenvalues within ``[min_clusters, max_clusters]``.
        ``"calibrated"``: after training, the eigengap or the count of eigenvalues below a
        threshold (:func:`skset.nn.spectral.threshold_n_clusters`, thresholds 0.02-0.95),
        whichever finds the true ``k`` of most validation instances (``eigen_threshold_``; the
        eigengap on ties). A kernel that is not perfectly sharp lifts the small eigenvalues, the more the
        more clusters, and the eigengap then under-counts (on 2-5 circles the calibrated count
        found k in 92% of the instances where the eigengap found it in 76%). Calibration needs
        validation instances of several ``k``: held-out classes of a small pool give one ``k``;
        then the prior's rule is calibrated on instances of every class (the prior learns from
        none) and the learned kernels keep the eigengap. Without ``early_stopping`` the eigengap
        is used.
    max_clusters : int or None, default=None
        Largest number of clusters the eigengap may return at prediction. ``None``: the largest
        number of clusters of a training instance (``max_clusters_``): the kernel has not learned
        to separate more, and a finite bound keeps the eigengap from running away on sharp
        kernels. Set it when new instances may hold more clusters than the training ones.
    n_init : int, default=10
        k-means restarts at prediction.
    assign_labels : {"kmeans", "sklearn"}, default="kmeans"
        ``"kmeans"``: the batched torch path; ``"sklearn"``: each instance's affinity goes to
        :func:`sklearn.cluster.spectral_clustering` (a Python loop; the reference).
    max_pairs : int, default=10_000_000
        Budget of padded pairs ``B * n_max^2`` per prediction batch (the affinity, the attention
        maps and the eigendecomposition all scale with it). On a CPU, inference batches are
        smaller (``2**18`` pairs, e.g. 26 instances of 100 elements) and run side by side on
        ``torch.get_num_threads()`` threads with one intra-op thread each: on 2 cores this made
        ``predict`` 3.3x faster than one big batch (see ``benchmarks/results/abc.md``). Labels do
        not depend on the number of threads.
    warm_start : bool, default=False
        Continue training the fitted network (and its optimiser state) in the next ``fit``.
    device : str, default="auto"
        Torch device (``"auto"``: CUDA when available, else the CPU).
    random_state : int, RandomState or None, default=None
        Seed of the weight initialisation, the training instances' order or sampling, and the
        k-means restarts at prediction.
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
        The validation score of each of the three (with ``early_stopping``).
    input_similarity_ : str or None
        The prior used: ``input_similarity``, or with ``"auto"`` the one chosen.
    prior_params_ : dict or None
        The prior's settings: ``n_neighbors`` (kNN), ``scale`` and ``offset`` of its logits
        ``scale * (s + offset)`` (see :class:`skset.nn.ABCKernel`).
    prior_scores_ : dict or None
        With ``input_similarity="auto"`` and ``early_stopping``: the validation score (mean ARI
        with the calibrated k rule) of each candidate prior alone.
    validation_classes_ : ndarray or None
        The classes of the pool held out for validation (``None`` for other validations).
    max_clusters_ : int
        The largest number of clusters of a training instance: the eigengap's bound when
        ``max_clusters`` is None.
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

    See Also
    --------
    EigengapSpectralClustering : Spectral clustering of one data set with a fixed affinity.
    estimate_n_clusters : The eigengap rule used when ``n_clusters`` is not given.
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

    _params = {
        "compatibility": Param("multiplicative", "multiplicative", "additive", positional=True),
        "hidden_size": Param(64, POSITIVE_INT),
        "n_layers": Param(2, Integer(0)),
        "n_heads": Param(4, POSITIVE_INT),
        "compat_dim": Param(None, POSITIVE_INT, None),
        "norm": Param("layer", "layer", "set", None),
        "residual": Param("original", "original", "clean"),
        "input_similarity": Param("auto", None, "auto", "knn", "rbf", "cosine"),
        "n_neighbors": Param(10, POSITIVE_INT),
        "class_weight": Param(None, None, "balanced", _PAIR_OF_WEIGHTS),
        "standardize": Param(True, Boolean()),
        "instance_size": Param(100, Integer(2)),
        "instance_n_clusters": Param((2, 6), POSITIVE_INT, _CLUSTER_RANGE),
        "max_steps": Param(30000, POSITIVE_INT),
        "batch_size": Param(8, POSITIVE_INT),
        "learning_rate_init": TRAINING_PARAMS["learning_rate_init"],
        "alpha": TRAINING_PARAMS["alpha"],
        "optimizer": TRAINING_PARAMS["optimizer"],
        "learning_rate_schedule": Param("cosine", "constant", "cosine"),
        "warmup_fraction": Param(0.05, Real(0, 1, closed="left")),
        "decay_fraction": Param(0.3, Real(0, 1)),
        "eval_every": Param(100, POSITIVE_INT),
        "early_stopping": Param(True, Boolean()),
        "validation_fraction": TRAINING_PARAMS["validation_fraction"],
        "n_validation_instances": Param(64, POSITIVE_INT),
        "n_iter_no_change": Param(20, POSITIVE_INT),
        "tol": TRAINING_PARAMS["tol"],
        "max_clusters": Param(None, POSITIVE_INT, None),
        "min_clusters": Param(1, POSITIVE_INT),
        "n_clusters_rule": Param("calibrated", "calibrated", "eigengap"),
        "n_init": Param(10, POSITIVE_INT),
        "assign_labels": Param("kmeans", "kmeans", "sklearn"),
        "max_pairs": Param(10_000_000, POSITIVE_INT),
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
                      "n_clusters_rule": "eigengap"}

    def _check_param_relations(self):
        if self.hidden_size % self.n_heads:
            raise self._param_error(f"hidden_size={self.hidden_size} must be divisible by "
                                    f"n_heads={self.n_heads}.")

    def _is_pool(self, X, y) -> bool:
        if isinstance(X, torch.Tensor):
            X = X.detach().cpu().numpy()
        if hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):
            X = X.to_numpy()
        if not (isinstance(X, np.ndarray) and X.dtype != object and X.ndim == 2):
            return False
        if y is None:
            return False
        try:
            y = np.asarray(y)
        except ValueError:  # a ragged list of label arrays
            return False
        return y.ndim == 1 and y.dtype != object

    # ------------------------------------------------------------------ fitting
    def _scale(self, sets):
        if not self.standardize:
            return sets
        return [(s - self.mean_) / self.scale_ for s in sets]

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
        from .._instances import (
            _check_cluster_range,
            _sample_instance,
        )
        from .._sets import check_sets, pack
        from ..neural_network._training import split_validation
        from ..nn.abc import abc_loss

        warm = bool(self.warm_start) and hasattr(self, "module_")
        seed, rng = self._start_fit(warm)  # the parameters are checked first
        name = type(self).__name__
        pool = self._is_pool(X, y)
        if pool:
            coll = check_sets(X, name="X", allow_pool=True, min_elements=2)
            Xp = coll.sets[0]
            yp = np.asarray(y)
            if len(yp) != len(Xp):
                raise ValueError(f"y has {len(yp)} labels but the pool X has {len(Xp)} elements.")
            if yp.dtype.kind == "f" and not np.isfinite(yp).all():
                raise ValueError("y contains NaN or infinity.")
            classes, yi = np.unique(yp, return_inverse=True)
            by_class = [np.flatnonzero(yi == c) for c in range(len(classes))]
            k_lo, k_hi = _check_cluster_range(self.instance_n_clusters, len(classes),
                                              self.instance_size)
            d = Xp.shape[1]
            elements = Xp
        else:
            coll = check_sets(X, name="X", min_elements=2)
            sets = coll.sets
            labels = _check_instance_labels(y, sets)
            d = coll.n_features
            elements = np.concatenate(sets, axis=0)
        if warm and d != self.n_features_in_:
            raise ValueError(f"{name}: warm_start with {d} features, but the model was fitted on "
                             f"{self.n_features_in_}.")
        dev = self.device_
        gen = make_generator(seed, "cpu")
        if not warm:
            self.n_features_in_ = d
            if self.standardize:  # one scale for all features: none is amplified
                self.mean_ = elements.mean(0)
                rms = float(np.sqrt(np.mean(elements.var(0))))
                self.scale_ = np.full(d, rms if rms > 1e-12 else 1.0)
            for attr in ("input_similarity_", "prior_params_"):  # a refit chooses again
                self.__dict__.pop(attr, None)
            self.module_ = self._seeded(seed, lambda: self._build_module(d)).to(dev)
            self._record_prior()
        cw = self.class_weight
        if cw is not None and not isinstance(cw, str):
            cw = tuple(float(v) for v in cw)

        def to_batch(xs, labs):
            Xb, Mb = pack(self._scale(xs), device=dev)
            return Xb, Mb, _pack_labels(labs, Xb.shape[1]).to(dev)

        val_batch = cal_batch = None
        self.validation_classes_ = None
        if pool:
            if self.early_stopping and len(classes) >= 4:
                # held-out classes: the validation measures clustering classes never trained on
                n_va = min(max(2, int(round(self.validation_fraction * len(classes)))),
                           len(classes) - 2)
                va_cls = np.sort(rng.choice(len(classes), n_va, replace=False))
                tr_cls = np.setdiff1d(np.arange(len(classes)), va_cls)
                self.validation_classes_ = classes[va_cls]
                tr_by = [by_class[c] for c in tr_cls]
                va_by = [by_class[c] for c in va_cls]
                va_lo, va_hi = min(k_lo, n_va), min(k_hi, n_va)
                k_lo, k_hi = min(k_lo, len(tr_cls)), min(k_hi, len(tr_cls))
            elif self.early_stopping:
                tr, va = split_validation(len(Xp), self.validation_fraction, y=yi, stratify=True,
                                          seed=seed)
                tr_by = [tr[yi[tr] == c] for c in range(len(classes))]
                va_by = [va[yi[va] == c] for c in range(len(classes))]
                if min(len(v) for v in va_by) == 0 or min(len(t) for t in tr_by) == 0:
                    raise ValueError(f"{name}: validation_fraction={self.validation_fraction} "
                                     "leaves a class without training or validation elements.")
                va_lo, va_hi = k_lo, k_hi
            else:
                tr_by = by_class
            if self.early_stopping:
                vx, vy = [], []
                for _ in range(self.n_validation_instances):
                    idx, lab = _sample_instance(rng, va_by, self.instance_size, va_lo, va_hi)
                    vx.append(Xp[idx])
                    vy.append(lab)
                val_batch = (vx, vy)
                if (self.validation_classes_ is not None and va_lo == va_hi and k_lo < k_hi
                        and getattr(self, "input_similarity", None) is not None
                        and self.n_clusters_rule == "calibrated"):
                    # held-out classes give instances of one k only: the k rule of the prior
                    # (which learns from no class) is calibrated on instances of every class
                    # with the training range of k (a separate stream: training is unchanged)
                    crng = np.random.RandomState(seed + 1)
                    cx, cy = [], []
                    for _ in range(self.n_validation_instances):
                        idx, lab = _sample_instance(crng, by_class, self.instance_size, k_lo,
                                                    k_hi)
                        cx.append(Xp[idx])
                        cy.append(lab)
                    cal_batch = (cx, cy)
            k_train_max, k_train_min = k_hi, k_lo

            def draw():
                xs, labs = [], []
                for _ in range(self.batch_size):
                    idx, lab = _sample_instance(rng, tr_by, self.instance_size, k_lo, k_hi)
                    xs.append(Xp[idx])
                    labs.append(lab)
                return to_batch(xs, labs)
        else:
            if self.early_stopping:
                frac = min(self.validation_fraction, self.n_validation_instances / len(sets))
                tr, va = split_validation(len(sets), frac, seed=seed)
                val_batch = ([sets[i] for i in va], [labels[i] for i in va])
            else:
                tr = np.arange(len(sets))
            k_train_max = max(int(lab.max()) + 1 for lab in labels)
            k_train_min = min(int(lab.max()) + 1 for lab in labels)
            state = {"order": np.empty(0, dtype=np.int64), "pos": 0}

            def draw():
                take = []
                while len(take) < min(self.batch_size, len(tr)):
                    if state["pos"] >= len(state["order"]):
                        state["order"] = tr[torch.randperm(len(tr), generator=gen).numpy()]
                        state["pos"] = 0
                    take.append(state["order"][state["pos"]])
                    state["pos"] += 1
                return to_batch([sets[i] for i in take], [labels[i] for i in take])

        max_steps = int(self.max_steps)
        every = int(self.eval_every)
        n_chunks = -(-max_steps // every)

        def batches(chunk):
            for _ in range(min(every, max_steps - chunk * every)):
                yield draw()

        def loss_fn(module, batch):
            Xb, Mb, Yb = batch
            return abc_loss(module(Xb, Mb), Yb, Mb, class_weight=cw), Xb.shape[0]

        if not warm:
            self.max_clusters_ = int(k_train_max)
            self.min_clusters_ = int(k_train_min)
            self.eigen_threshold_ = None
        validation = None

        def batched(xs_labs):
            if xs_labs is None:
                return None
            xs, labs = xs_labs
            out = []
            lens = np.array([len(s) for s in xs])
            for idx in length_batches(self._batch_cost(lens), max_elements=self.max_pairs):
                out.append((to_batch([xs[i] for i in idx], [labs[i] for i in idx]),
                            [labs[i] for i in idx]))
            return out

        val_parts, cal_parts = batched(val_batch), batched(cal_batch)
        if val_parts is not None:

            def validation(module):
                # the clustering quality a user gets: mean adjusted Rand index of the eigengap
                # clustering (ARI, unlike NMI, punishes a k that is too large)
                g = torch.Generator(device=dev).manual_seed(seed)
                scores = []
                for (Xb, Mb, _), labs in val_parts:
                    A = abc_affinity(module(Xb, Mb), Mb).double()
                    pred, _, _ = spectral_cluster(A, Mb, None, max_clusters=self._max_k(),
                                                  min_clusters=self._min_k(), n_init=3,
                                                  generator=g)
                    pred = pred.cpu().numpy()
                    scores += [adjusted_rand_score(lab, pred[r, :len(lab)])
                               for r, lab in enumerate(labs)]
                return float(np.mean(scores))

        # one "epoch" of the loop = eval_every optimisation steps; the learned part trains alone
        mix = getattr(self.module_, "mix", None)
        if mix is not None:
            mix.copy_(torch.tensor([0.0, 1.0]))
        callbacks, overrides = [], {}
        if getattr(self, "learning_rate_schedule", "constant") == "cosine":
            plateau = validation is not None
            schedule = WarmupCosineSchedule(
                max_steps, int(round(self.warmup_fraction * max_steps)), final_fraction=0.01,
                decay_steps=int(round(self.decay_fraction * max_steps)),
                patience=int(self.n_iter_no_change) if plateau else None, tol=float(self.tol))
            callbacks.append(schedule)
            if plateau:  # the schedule stops (after its decay); the loop restores the best
                overrides["n_iter_no_change"] = n_chunks + 1
        self._train(loss_fn, batches, validation=validation, max_iter=n_chunks,
                    warn_convergence=False, units_per_epoch=every, max_units=max_steps,
                    early_stopping=validation is not None, callbacks=callbacks, **overrides)
        if callbacks:  # where the decay began (earlier than planned after a plateau)
            self.lr_decay_start_ = int(schedule.decay_start)
        if not warm and getattr(self, "input_similarity", None) == "auto":
            self._choose_prior(mix, val_parts, cal_parts)
        self._choose_mix(mix, val_parts, cal_parts)
        return self

    def _prior_candidates(self):
        """``(input_similarity, n_neighbors, scale, offset)`` of the ``"auto"`` candidates (the
        kNN graph of ``n_neighbors`` first: it wins ties)."""
        k = int(self.n_neighbors)
        knn = [("knn", m, 12.0, -0.5) for m in dict.fromkeys((k, max(1, k // 2), 2 * k))]
        rbf = [("rbf", k, float(a), b) for a in (4, 8, 16, 32) for b in (0.0, 0.5)]
        return knn + rbf

    def _set_prior(self, sim, n_neighbors, scale, offset):
        net = self.module_
        net.input_similarity, net.n_neighbors = sim, int(n_neighbors)
        net.sim_log_scale.fill_(float(np.log(scale)))
        net.sim_offset.fill_(float(offset))
        self._record_prior()

    def _record_prior(self):
        net = self.module_
        sim = getattr(net, "input_similarity", None)
        self.input_similarity_ = sim
        self.prior_params_ = None if sim is None else {
            "n_neighbors": int(net.n_neighbors), "scale": float(net.sim_log_scale.exp()),
            "offset": float(net.sim_offset)}
        self.prior_scores_ = None

    def _choose_prior(self, mix, parts, cal_parts=None):
        """``input_similarity="auto"``: keep the candidate prior that, alone and with its own
        calibrated k rule, clusters the validation instances best. The prior learns nothing,
        so with a pool it is scored on ``cal_parts`` (instances of every class, several k)."""
        parts = cal_parts if cal_parts is not None else parts
        if parts is None or mix is None:
            return
        seed = seed_from_random_state(self.random_state)
        self.module_.eval()
        saved = mix.clone()
        mix.copy_(torch.tensor([1.0, 0.0]))
        scores = {}
        for cand in self._prior_candidates():
            self._set_prior(*cand)
            scores[cand] = self._calibrated_score(parts, seed)[0]
        mix.copy_(saved)
        best = max(scores, key=scores.get)  # ties: the first
        self._set_prior(*best)
        self.prior_scores_ = {
            (f"knn(n_neighbors={c[1]})" if c[0] == "knn" else f"rbf(scale={c[2]:g}, "
             f"offset={c[3]:g})"): v for c, v in scores.items()}

    def _spectra(self, parts):
        """Laplacian eigenpairs (float64) and true k of batched labelled instances."""
        out = []
        with torch.no_grad():
            for (Xb, Mb, _), labs in parts:
                A = abc_affinity(self.module_(Xb, Mb), Mb).double()
                w, V = laplacian_eigh(A, Mb)
                kt = torch.tensor([int(lab.max()) + 1 for lab in labs], device=w.device)
                out.append((w, V, Mb, labs, kt))
        return out

    def _k_rule_counts(self, spectra, thr):
        """``k`` per instance with the rule ``thr`` (None: the eigengap), both bounds applied."""
        lo, hi = self._min_k(), self._max_k()
        return [eigengap_n_clusters(w, M.sum(1), hi, lo) if thr is None else
                threshold_n_clusters(w, M.sum(1), thr, hi, lo) for w, _, M, _, _ in spectra]

    def _calibrate_k_rule(self, spectra):
        """The k rule that finds the true ``k`` of most calibration instances: the eigengap or a
        count of Laplacian eigenvalues below a threshold of ``_THRESHOLDS`` (ties: the eigengap,
        else the middle of the best thresholds; fewer absolute errors break ties in the count).
        Returns ``(threshold or None, fraction of instances with the right k)``."""
        def key(thr):
            ks = self._k_rule_counts(spectra, thr)
            right = sum(int((k == kt).sum()) for k, (*_, kt) in zip(ks, spectra, strict=True))
            err = sum(float((k - kt).abs().sum()) for k, (*_, kt) in zip(ks, spectra, strict=True))
            return right, -err

        n = sum(len(p[3]) for p in spectra)
        rules = {None: key(None)}
        n_k = len(torch.unique(torch.cat([p[4] for p in spectra])))
        # a threshold is calibrated only on instances of several k (held-out classes of a small
        # pool give instances of one k, on which any rule that always says that k would win)
        if getattr(self, "n_clusters_rule", "eigengap") == "calibrated" and n_k >= 2:
            for thr in _THRESHOLDS:
                rules[float(thr)] = key(float(thr))
        best = max(rules.values())
        if rules[None] == best:
            return None, best[0] / max(n, 1)
        tied = sorted(t for t, v in rules.items() if t is not None and v == best)
        return tied[len(tied) // 2], best[0] / max(n, 1)

    def _calibrated_score(self, parts, seed, cal_parts=None):
        """Calibrate the k rule (on ``cal_parts``, else on ``parts``) and score the clustering of
        ``parts`` with it: ``(mean ARI, threshold or None, fraction of calibration instances with
        the right k)``."""
        from ..nn.spectral import batched_kmeans, spectral_embedding

        spectra = self._spectra(parts)
        cal = spectra if cal_parts is None else self._spectra(cal_parts)
        thr, k_right = self._calibrate_k_rule(cal)
        g = torch.Generator(device=self.device_).manual_seed(seed)
        scores = []
        for (_, V, M, labs, _), k in zip(spectra, self._k_rule_counts(spectra, thr), strict=True):
            pred, _ = batched_kmeans(spectral_embedding(V, M, k), M, k, n_init=3, generator=g)
            pred = pred.cpu().numpy()
            scores += [adjusted_rand_score(lab, pred[r, :len(lab)]) for r, lab in enumerate(labs)]
        return float(np.mean(scores)), thr, k_right

    def _choose_mix(self, mix, parts, prior_cal_parts=None):
        """Keep the kernel (prior alone, learned alone, or both) and the k rule that validate
        best. ``prior_cal_parts``: instances of any class of a pool, which calibrate the k rule
        of the prior alone (it learned from no class) when the held-out classes are too few to
        give instances of several k."""
        candidates = {"prior": (1.0, 0.0), "learned": (0.0, 1.0), "prior+learned": (1.0, 1.0)}
        seed = seed_from_random_state(self.random_state)
        self.eigen_threshold_ = None
        if parts is None:
            if mix is not None:
                mix.copy_(torch.tensor(candidates["prior+learned"]))
                self.kernel_mix_, self.kernel_scores_ = "prior+learned", None
            return
        self.module_.eval()
        if mix is None:
            score, self.eigen_threshold_, self.validation_k_right_ = self._calibrated_score(
                parts, seed)
            self.best_validation_score_ = score
            return
        scores, rules = {}, {}
        for name, w in candidates.items():
            mix.copy_(torch.tensor(w))
            cal = prior_cal_parts if name == "prior" else None
            scores[name], *rules[name] = self._calibrated_score(parts, seed, cal)
        best = max(scores, key=scores.get)  # ties: the first, the prior
        mix.copy_(torch.tensor(candidates[best]))
        self.kernel_mix_, self.kernel_scores_ = best, scores
        self.eigen_threshold_, self.validation_k_right_ = rules[best]
        self.best_validation_score_ = scores[best]

    def _max_k(self):
        """The bound of the eigengap: ``max_clusters``, or the largest training k."""
        if self.max_clusters is not None:
            return int(self.max_clusters)
        return getattr(self, "max_clusters_", None)  # None for models fitted before it existed

    def _min_k(self):
        """The lower bound of ``k``: ``min_clusters``."""
        return int(getattr(self, "min_clusters", 1))

    def _build_module(self, n_features: int):
        from ..nn.abc import ABCKernel

        sim = getattr(self, "input_similarity", None)
        params = getattr(self, "prior_params_", None)  # a fitted model: the prior it chose
        if hasattr(self, "input_similarity_"):
            sim = self.input_similarity_
        elif sim == "auto":
            sim = "knn"  # until the validation chooses
        net = ABCKernel(n_features, self.hidden_size, self.n_layers, self.n_heads,
                        compatibility=self.compatibility, compat_dim=self.compat_dim,
                        norm=self.norm, residual=self.residual, input_similarity=sim,
                        n_neighbors=(params or {}).get("n_neighbors",
                                                       getattr(self, "n_neighbors", 10)))
        if params is not None and sim is not None:  # buffers, overwritten by a state dict
            net.sim_log_scale.fill_(float(np.log(params["scale"])))
            net.sim_offset.fill_(float(params["offset"]))
        return net

    def _persist_module(self, name: str):
        """The untrained architecture of fitted module ``name`` (for :func:`skset.load`)."""
        if name != "module_":
            raise ValueError(f"ABCClusterer has no torch module attribute {name!r}.")
        return self._build_module(self.n_features_in_)

    # ------------------------------------------------------------------ inference
    def _check_X(self, X):
        from .._sets import check_sets

        check_is_fitted(self, "module_")
        return check_sets(X, name="X", n_features=self.n_features_in_)

    def _chunks(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Index chunks of similar sizes for inference.

        On a GPU a chunk fills the ``max_pairs`` budget. On a CPU chunks are capped at
        ``_CPU_CHUNK_PAIRS`` padded pairs (they run in parallel on the intra-op threads, see
        :func:`skset._torch.map_on_threads`): the SAB activations of one chunk then stay in
        cache (the network's forward pass on 1,000 instances of 100 points took 1.27 s as one
        batch and 0.56-0.73 s in calls of 25-250 instances on the 2-core benchmark machine,
        ``benchmarks/bench_abc.py profile``).
        """
        budget = int(self.max_pairs)
        if self.device_.type == "cpu":
            budget = min(budget, _CPU_CHUNK_PAIRS)
        return list(length_batches(self._batch_cost(lengths), max_elements=budget))

    def _batch_cost(self, lengths):
        """An instance of ``n`` elements costs ``n^2`` pairs (the affinity, the attention)."""
        return np.asarray(lengths, dtype=np.int64) ** 2

    def _chunk_affinity(self, sets):
        """Affinity (B, n, n) float32 and mask of one chunk of (scaled) sets (callers run it
        under ``torch.no_grad()``)."""
        from .._sets import pack

        Xb, Mb = pack(sets, device=self.device_)
        # exactly symmetric: sigmoid(C) + sigmoid(C^T) is the same sum both ways
        return abc_affinity(self.module_(Xb, Mb), Mb), Mb

    def affinity(self, X) -> list[np.ndarray]:
        """The learned affinity of each instance.

        Parameters
        ----------
        X : list of array-like of shape (n_i, d)

        Returns
        -------
        list of ndarray of shape (n_i, n_i)
            Symmetric, entries in ``[0, 1]`` (float64).
        """
        coll = self._check_X(X)
        lengths = coll.lengths
        sets = self._scale(coll.sets)
        self.module_.eval()

        def run(idx):
            with torch.no_grad():
                A, _ = self._chunk_affinity([sets[i] for i in idx])
            A = A.cpu().numpy().astype(np.float64)
            return [A[r, :lengths[i], :lengths[i]] for r, i in enumerate(idx)]

        chunks = self._chunks(lengths)
        out = [None] * len(coll)
        for idx, mats in zip(chunks, map_on_threads(run, chunks, self.device_), strict=True):
            for i, a in zip(idx, mats, strict=True):
                out[i] = a
        return out

    def _n_clusters_arg(self, n_clusters, n_sets):
        if n_clusters is None:
            return None
        arr = np.asarray(n_clusters)
        if arr.ndim == 0 and arr.dtype.kind in "iu":  # never int(): 2.5 would become 2
            arr = np.full(n_sets, arr)
        if arr.shape != (n_sets,) or arr.dtype.kind not in "iu" or (arr < 1).any():
            raise ValueError(f"n_clusters must be None, an int >= 1 or one int >= 1 per instance "
                             f"({n_sets}), got {n_clusters!r}.")
        return arr.astype(np.int64)

    def predict(self, X, n_clusters=None) -> list[np.ndarray]:
        """Cluster each instance.

        Parameters
        ----------
        X : list of array-like of shape (n_i, d)
            Instances (an instance of one element gets the single label 0).
        n_clusters : None, int or array-like of int of shape (n_instances,), default=None
            Number of clusters (capped at ``n_i``); ``None`` estimates it per instance by the
            eigengap (bounded by ``max_clusters``).

        Returns
        -------
        list of ndarray of shape (n_i,)
            Labels ``0 .. k_i - 1`` of each instance.
        """

        coll = self._check_X(X)
        ks = self._n_clusters_arg(n_clusters, len(coll))
        lengths = coll.lengths
        sets = self._scale(coll.sets)
        seed = seed_from_random_state(self.random_state)
        self.module_.eval()

        def run(job):
            c, idx = job
            with torch.no_grad():
                A, M = self._chunk_affinity([sets[i] for i in idx])
                k_b = None if ks is None else torch.from_numpy(ks[idx]).to(M.device)
                if self.assign_labels == "kmeans":
                    # float32: batched eigh is ~10x faster than in float64 on a CPU, and the
                    # eigengap uses the float32 tolerance (1e-4). One generator per chunk, so
                    # the labels do not depend on the number of threads.
                    gen = make_generator(seed + c, self.device_)
                    labels, _, _ = spectral_cluster(A, M, k_b, max_clusters=self._max_k(),
                                                    min_clusters=self._min_k(),
                                                    threshold=getattr(self, "eigen_threshold_",
                                                                      None),
                                                    n_init=self.n_init, generator=gen)
                    return labels.cpu().numpy(), None
                if k_b is None:
                    w = laplacian_eigh(A, M, eigenvectors=False)
                    thr = getattr(self, "eigen_threshold_", None)
                    k_b = (eigengap_n_clusters(w, M.sum(1), self._max_k(), self._min_k())
                           if thr is None else
                           threshold_n_clusters(w, M.sum(1), thr, self._max_k(), self._min_k()))
                return A.cpu().numpy().astype(np.float64), k_b.cpu().numpy()

        chunks = self._chunks(lengths)
        out = [None] * len(coll)
        results = map_on_threads(run, list(enumerate(chunks)), self.device_)
        for idx, (res, k_b) in zip(chunks, results, strict=True):
            for r, i in enumerate(idx):
                m = lengths[i]
                if k_b is None:
                    lab = res[r, :m]
                else:
                    # the scikit-learn reference path (a Python loop, not threaded)
                    k = min(int(k_b[r]), int(m))
                    if k == 1:
                        out[i] = np.zeros(m, dtype=np.int64)
                        continue
                    lab = spectral_clustering(res[r, :m, :m], n_clusters=k, n_init=self.n_init,
                                              random_state=seed)
                out[i] = np.unique(lab, return_inverse=True)[1].astype(np.int64)
        return out

