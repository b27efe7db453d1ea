"""Spectral clustering with the number of clusters from the eigengap, and ABC.

* :func:`estimate_n_clusters`: eigengap of the symmetric normalised Laplacian, for one affinity
  matrix or (batched in torch) for many.
* :class:`EigengapSpectralClustering`: scikit-learn style spectral clustering of one data set, with
  ``n_clusters=None`` meaning "estimate it".
* :class:`ABCClusterer`: Attention-Based Clustering, a kernel learned from labelled instances
  and applied to many new instances at once.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import spectral_clustering
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.neighbors import kneighbors_graph
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ._sets import length_batches
from ._torch import (
    TorchStateMixin,
    _to_cpu,
    make_generator,
    map_on_threads,
    seed_from_random_state,
)
from ._training import check_training_params
from .nn.spectral import eigengap_n_clusters, laplacian_eigh

__all__ = ["estimate_n_clusters", "EigengapSpectralClustering", "ABCClusterer"]

# padded pairs per inference chunk on a CPU (see ABCClusterer._chunks)
_CPU_CHUNK_PAIRS = 1 << 18


def _check_affinity(A, where: str = "affinity") -> np.ndarray:
    if hasattr(A, "toarray") and not isinstance(A, np.ndarray):
        A = A.toarray()
    if isinstance(A, torch.Tensor):
        A = A.detach().cpu().numpy()
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} could not be read as a numeric matrix: {exc}") from None
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{where} must be a square 2-D matrix, got shape {A.shape}.")
    if A.shape[0] == 0:
        raise ValueError(f"{where} is empty (0 x 0).")
    if not np.isfinite(A).all():
        raise ValueError(f"{where} contains NaN or infinity.")
    if (A < 0).any():
        raise ValueError(f"{where} has negative entries; affinities must be >= 0.")
    scale = max(float(np.abs(A).max()), 1e-300)
    if not np.allclose(A, A.T, rtol=1e-5, atol=1e-8 * scale):
        raise ValueError(f"{where} is not symmetric; symmetrise it first, e.g. (A + A.T) / 2.")
    return A


def _check_max_clusters(max_clusters):
    if max_clusters is None:
        return None
    if (not isinstance(max_clusters, numbers.Integral) or isinstance(max_clusters, bool)
            or max_clusters < 1):
        raise ValueError(f"max_clusters must be None or an int >= 1, got {max_clusters!r}.")
    return int(max_clusters)


def _eigengap_batched(mats: list[np.ndarray], max_clusters, max_elements: int = _CPU_CHUNK_PAIRS):
    """Eigengap k of each matrix, in float64 chunks of similar sizes (a budget of
    ``B * n_max**2`` padded entries), the chunks spread over the intra-op threads."""
    lengths = np.array([a.shape[0] for a in mats], dtype=np.int64)

    def run(idx):
        n = int(lengths[idx].max())
        buf = np.zeros((len(idx), n, n))
        mask = np.zeros((len(idx), n), dtype=bool)
        for r, i in enumerate(idx):  # a copy per matrix; the eigensolver is one batched call
            m = lengths[i]
            buf[r, :m, :m] = mats[i]
            mask[r, :m] = True
        mask_t = torch.from_numpy(mask)
        w = laplacian_eigh(torch.from_numpy(buf), mask_t, eigenvectors=False)
        return eigengap_n_clusters(w, mask_t.sum(1), max_clusters).numpy()

    chunks = list(length_batches(lengths**2, max_elements=max_elements))
    out = np.empty(len(mats), dtype=np.int64)
    for idx, k in zip(chunks, map_on_threads(run, chunks, "cpu"), strict=True):
        out[idx] = k
    return out


def estimate_n_clusters(affinity, max_clusters: int | None = None):
    r"""Number of clusters from the eigengap of the normalised Laplacian.

    With :math:`L = I - D^{-1/2} A D^{-1/2}` and its eigenvalues
    :math:`0 \le \lambda_1 \le \dots \le \lambda_n`,

    .. math:: k = \arg\max_{c \le i \le K} \; (\lambda_{i+1} - \lambda_i),
              \qquad \lambda_{n+1} := 1,

    (von Luxburg, 2007; ABC, Sec. 4.4) where ``c`` is the number of zero eigenvalues (connected
    components: ``k`` is never below it) and ``K = min(max_clusters, n)``.

    Decisions, deliberately:

    * The degrees **include the diagonal** :math:`A_{ii}` (as the ABC reference code does, unlike
      scikit-learn's spectral embedding). An element's affinity to itself is 1 for an RBF kernel and
      for the ideal same-cluster matrix; with it, an ideal ``k``-block matrix has eigenvalues 0
      (``k`` times) and 1 (the others) whatever the block sizes, so tiny clusters (even single
      elements) with near-zero affinity to the rest are found. A node of degree 0 is a cluster.
    * The virtual :math:`\lambda_{n+1} = 1` (the non-zero eigenvalue of an ideal block matrix)
      lets ``k = n`` be chosen when all elements are apart (the identity matrix gives ``n``), and
      ``k = 1`` is possible too (unlike Google's ``spectralcluster``). ``n = 1`` gives 1; for
      ``n = 2`` with ``A = [[1, a], [a, 1]]`` the answer is 2 when ``a < 1/3`` and 1 otherwise.
    * Disconnected graphs: ``k >= `` the number of components (eigenvalues below ``1e-8``), capped
      by ``max_clusters``.
    * Ties (gaps within ``1e-8`` of the largest) go to the smallest ``k``.

    Parameters
    ----------
    affinity : array-like of shape (n, n), or a list / 3-D array of such matrices
        Symmetric, non-negative affinities. A list of 2-D arrays (or a 3-D array) is processed in
        batches with one ``torch.linalg.eigvalsh`` call per batch of similar sizes; a list of
        lists of numbers is one matrix.
    max_clusters : int or None, default=None
        Largest ``k`` considered; ``None`` means ``n``.

    Returns
    -------
    k : int, or ndarray of int of shape (n_matrices,) for a list of matrices

    See Also
    --------
    EigengapSpectralClustering, ABCClusterer

    References
    ----------
    U. von Luxburg, "A tutorial on spectral clustering", Statistics and Computing 17(4), 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.linalg import block_diag
    >>> from skset.cluster import estimate_n_clusters
    >>> A = block_diag(np.ones((30, 30)), np.ones((30, 30)), np.ones((40, 40)))
    >>> int(estimate_n_clusters(A))
    3
    """
    max_clusters = _check_max_clusters(max_clusters)
    single = False
    if isinstance(affinity, (list, tuple)) and len(affinity) and np.ndim(affinity[0]) == 2:
        mats = [_check_affinity(a, f"affinity {i}") for i, a in enumerate(affinity)]
    else:
        arr = affinity
        if isinstance(arr, torch.Tensor):
            arr = arr.detach().cpu().numpy()
        if hasattr(arr, "toarray") and not isinstance(arr, np.ndarray):
            arr = arr.toarray()
        arr = np.asarray(arr)
        if arr.ndim == 3:
            mats = [_check_affinity(a, f"affinity {i}") for i, a in enumerate(arr)]
        else:
            single = True
            mats = [_check_affinity(arr)]
    if not mats:
        return np.empty(0, dtype=np.int64)
    k = _eigengap_batched(mats, max_clusters)
    return int(k[0]) if single else k


class EigengapSpectralClustering(ClusterMixin, BaseEstimator):
    """Spectral clustering of one data set, the number of clusters found by the eigengap.

    The affinity matrix is built from ``X`` (or given), ``k`` is estimated with
    :func:`estimate_n_clusters` when ``n_clusters`` is None, and the spectral embedding and label
    assignment are delegated to :func:`sklearn.cluster.spectral_clustering`. Note that
    scikit-learn's embedding ignores the diagonal of the affinity, while the eigengap counts it in
    the degrees (see :func:`estimate_n_clusters` for why).

    The eigengap needs a dense eigendecomposition (``O(n^3)``): meant for data sets of up to a few
    thousand points.

    Parameters
    ----------
    n_clusters : int or None, default=None
        Number of clusters; ``None`` estimates it by the eigengap.
    affinity : {"rbf", "nearest_neighbors", "precomputed"}, default="rbf"
        ``"rbf"``: ``exp(-gamma ||x - x'||^2)``; ``"nearest_neighbors"``: the symmetrised
        connectivity of the ``n_neighbors``-nearest-neighbour graph (self included), as in
        :class:`sklearn.cluster.SpectralClustering`; ``"precomputed"``: ``X`` is a symmetric
        non-negative ``(n, n)`` affinity matrix.
    gamma : float, default=1.0
        RBF kernel coefficient.
    n_neighbors : int, default=10
        Neighbours for ``affinity="nearest_neighbors"``.
    max_clusters : int or None, default=None
        Largest number of clusters the eigengap may return (``None``: ``n``).
    assign_labels : {"kmeans", "discretize", "cluster_qr"}, default="kmeans"
        Label assignment of :func:`sklearn.cluster.spectral_clustering`.
    n_init : int, default=10
        k-means restarts.
    eigen_solver : {None, "arpack", "lobpcg", "amg"}, default=None
        Passed to :func:`sklearn.cluster.spectral_clustering`.
    random_state : int, RandomState or None, default=None
        Seed of the embedding's eigensolver start and of k-means.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster labels ``0 .. n_clusters_ - 1``.
    n_clusters_ : int
        The number of clusters used (given or estimated).
    affinity_matrix_ : ndarray of shape (n_samples, n_samples)
        The dense affinity matrix.
    n_features_in_ : int
        Number of features seen in ``fit`` (``n_samples`` for ``affinity="precomputed"``).

    See Also
    --------
    estimate_n_clusters : The eigengap rule.
    sklearn.cluster.SpectralClustering : Spectral clustering with a given number of clusters.
    ABCClusterer : A learned, context-dependent affinity for many small instances.

    References
    ----------
    U. von Luxburg, "A tutorial on spectral clustering", Statistics and Computing 17(4), 2007.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from skset import EigengapSpectralClustering
    >>> X, _ = make_blobs(n_samples=90, centers=3, cluster_std=0.3, random_state=0)
    >>> EigengapSpectralClustering(random_state=0).fit(X).n_clusters_
    3
    """

    def __init__(self, n_clusters=None, *, affinity="rbf", gamma=1.0, n_neighbors=10,
                 max_clusters=None, assign_labels="kmeans", n_init=10, eigen_solver=None,
                 random_state=None):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.max_clusters = max_clusters
        self.assign_labels = assign_labels
        self.n_init = n_init
        self.eigen_solver = eigen_solver
        self.random_state = random_state

    def _validate_params(self):
        if self.n_clusters is not None and (
                not isinstance(self.n_clusters, numbers.Integral)
                or isinstance(self.n_clusters, bool) or self.n_clusters < 1):
            raise ValueError(f"n_clusters must be None or an int >= 1, got {self.n_clusters!r}.")
        if self.affinity not in ("rbf", "nearest_neighbors", "precomputed"):
            raise ValueError("affinity must be 'rbf', 'nearest_neighbors' or 'precomputed', got "
                             f"{self.affinity!r}.")
        if not isinstance(self.gamma, numbers.Real) or not self.gamma > 0:
            raise ValueError(f"gamma must be a positive number, got {self.gamma!r}.")
        if (not isinstance(self.n_neighbors, numbers.Integral) or isinstance(self.n_neighbors,
                                                                             bool)
                or self.n_neighbors < 1):
            raise ValueError(f"n_neighbors must be an int >= 1, got {self.n_neighbors!r}.")
        _check_max_clusters(self.max_clusters)
        if self.assign_labels not in ("kmeans", "discretize", "cluster_qr"):
            raise ValueError("assign_labels must be 'kmeans', 'discretize' or 'cluster_qr', got "
                             f"{self.assign_labels!r}.")
        if not isinstance(self.n_init, numbers.Integral) or self.n_init < 1:
            raise ValueError(f"n_init must be an int >= 1, got {self.n_init!r}.")

    def _affinity_matrix(self, X) -> np.ndarray:
        if self.affinity == "precomputed":
            return _check_affinity(X, "X (precomputed affinity)")
        if self.affinity == "rbf":
            return rbf_kernel(X, gamma=self.gamma)
        n_neighbors = min(self.n_neighbors, X.shape[0])
        G = kneighbors_graph(X, n_neighbors=n_neighbors, include_self=True).toarray()
        return 0.5 * (G + G.T)

    def fit(self, X, y=None):
        """Build the affinity, choose ``k`` and cluster.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or (n_samples, n_samples)
            Data, or the affinity matrix when ``affinity="precomputed"``.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1)
        A = self._affinity_matrix(X)
        n = A.shape[0]
        if self.n_clusters is None:
            k = estimate_n_clusters(A, max_clusters=self.max_clusters)
        else:
            if self.n_clusters > n:
                raise ValueError(f"n_clusters={self.n_clusters} is larger than the number of "
                                 f"samples ({n}).")
            k = int(self.n_clusters)
        if k == 1:
            labels = np.zeros(n, dtype=np.int64)
        else:
            labels = spectral_clustering(
                A, n_clusters=k, eigen_solver=self.eigen_solver,
                random_state=check_random_state(self.random_state), n_init=self.n_init,
                assign_labels=self.assign_labels,
            )
            # consecutive labels 0 .. k'-1 even if a cluster came out empty
            labels = np.unique(labels, return_inverse=True)[1].astype(np.int64)
        self.affinity_matrix_ = A
        self.n_clusters_ = int(k)
        self.labels_ = labels
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.affinity == "precomputed"
        return tags


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


class ABCClusterer(TorchStateMixin, BaseEstimator):
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
    dim : int, default=128
        Width of the embedding and the SABs.
    n_blocks : int, default=2
        Number of SABs (0: the pairwise, context-free ablation).
    n_heads : int, default=4
        Attention heads.
    compat_dim : int or None, default=None
        Width of the compatibility's projections (``None``: ``dim``; the additive form costs
        ``n^2 * compat_dim`` memory per instance).
    norm : {"layer", "set", None}, default="layer"
        Normalisation inside the SABs (layer norm, set norm, or none).
    residual : {"original", "clean"}, default="original"
        Arrangement of the SABs' residual connections and normalisation (see
        :class:`skset.nn.SAB`).
    input_similarity : {None, "rbf", "cosine"}, default=None
        Add a similarity prior on the inputs (after ``standardize``) to the compatibility logits,
        with a learned scale and offset (see :class:`skset.nn.ABCKernel`): ``"rbf"`` (minus the
        squared distance over the instance's mean squared distance) or ``"cosine"``. It helps the
        kernel generalise to unseen classes when training has few classes; ``None`` is the
        paper's model.
    class_weight : None, "balanced" or (float, float), default=None
        Weights of the BCE terms: ``None`` weighs every pair the same (the paper's mean BCE);
        ``"balanced"`` gives positives and negatives half the weight each per instance;
        ``(w_neg, w_pos)`` fixes them. (The reference code weights positives by #neg/#pos; that
        lowers the pressure on cross-cluster pairs, whose affinities must be near 0 for the
        eigengap to find ``k``, so it is not the default.)
    standardize : bool, default=True
        Standardise each feature by the mean and standard deviation of the training elements.
        Turn it off for features that share one scale, such as pixels: rare pixels (a tiny
        training standard deviation) get blown up, which ruins distances on unseen classes
        (digits: see ``benchmarks/results/abc.md``).
    instance_size : int, default=100
        Elements per sampled training instance (pool input only).
    instance_n_clusters : int or (int, int), default=(2, 6)
        Number of clusters of sampled training instances, or its inclusive range (pool only).
    max_iter : int, default=1000
        Number of optimisation steps (one step = one batch of ``batch_size`` instances).
    batch_size : int, default=32
        Instances per step.
    learning_rate_init : float, default=1e-3
        Step size of the optimiser (1e-4 to 1e-3; lowering it once the loss plateaus helps).
    weight_decay : float, default=0.0
        L2 penalty (``"adam"``) or decoupled weight decay (``"adamw"``).
    optimizer : {"adam", "adamw"}, default="adam"
        The torch optimiser.
    eval_every : int, default=50
        Steps between two entries of ``loss_curve_`` / validations; the stopping rules count in
        these units.
    early_stopping : bool, default=False
        Hold out a validation part (``validation_fraction`` of the instances, or of each class's
        elements of the pool, from which ``n_validation_instances`` fixed instances are drawn),
        stop when its BCE has not improved by ``tol`` for ``n_iter_no_change`` checks and restore
        the best weights.
    validation_fraction : float, default=0.1
        Held-out fraction for ``early_stopping``.
    n_validation_instances : int, default=64
        Validation instances drawn from a held-out pool.
    n_iter_no_change : int, default=10
        Checks (every ``eval_every`` steps) without an improvement of ``tol`` before stopping:
        of the validation BCE with ``early_stopping``, else of the training BCE.
    tol : float, default=1e-4
        Smallest improvement that counts.
    max_clusters : int or None, default=None
        Largest number of clusters the eigengap may return at prediction.
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
        Per-feature mean and standard deviation of the training elements (with ``standardize``).
    loss_curve_ : list of float
        Mean training BCE of each block of ``eval_every`` steps.
    validation_scores_ : list of float
        Negative validation BCE at each check (with ``early_stopping``).
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
    >>> abc = ABCClusterer(dim=16, n_heads=2, max_iter=5, batch_size=8,
    ...                    random_state=0).fit(X, y)
    >>> labels = abc.predict(X[:2], n_clusters=4)
    >>> [lab.shape for lab in labels]
    [(40,), (40,)]
    """

    def __init__(self, compatibility="multiplicative", *, dim=128, n_blocks=2, n_heads=4,
                 compat_dim=None, norm="layer", residual="original", input_similarity=None,
                 class_weight=None,
                 standardize=True, instance_size=100, instance_n_clusters=(2, 6), max_iter=1000,
                 batch_size=32, learning_rate_init=1e-3, weight_decay=0.0, optimizer="adam",
                 eval_every=50, early_stopping=False, validation_fraction=0.1,
                 n_validation_instances=64, n_iter_no_change=10, tol=1e-4, max_clusters=None,
                 n_init=10, assign_labels="kmeans", max_pairs=10_000_000, warm_start=False,
                 device="auto", random_state=None, verbose=0):
        self.compatibility = compatibility
        self.dim = dim
        self.n_blocks = n_blocks
        self.n_heads = n_heads
        self.compat_dim = compat_dim
        self.norm = norm
        self.residual = residual
        self.input_similarity = input_similarity
        self.class_weight = class_weight
        self.standardize = standardize
        self.instance_size = instance_size
        self.instance_n_clusters = instance_n_clusters
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.weight_decay = weight_decay
        self.optimizer = optimizer
        self.eval_every = eval_every
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_validation_instances = n_validation_instances
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.max_clusters = max_clusters
        self.n_init = n_init
        self.assign_labels = assign_labels
        self.max_pairs = max_pairs
        self.warm_start = warm_start
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ validation
    def _validate_params(self):
        check_training_params(self, with_early_stopping=self.early_stopping)
        name = type(self).__name__

        def _int(attr, low, allow_none=False):
            v = getattr(self, attr)
            if allow_none and v is None:
                return
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
                raise ValueError(f"{name}: {attr}={v!r} must be an int >= {low}.")

        if self.compatibility not in ("multiplicative", "additive"):
            raise ValueError(f"{name}: compatibility={self.compatibility!r} must be "
                             "'multiplicative' or 'additive'.")
        if self.input_similarity not in (None, "rbf", "cosine"):
            raise ValueError(f"{name}: input_similarity={self.input_similarity!r} must be None, "
                             "'rbf' or 'cosine'.")
        for attr, low in (("dim", 1), ("n_blocks", 0), ("n_heads", 1), ("instance_size", 2),
                          ("eval_every", 1), ("n_validation_instances", 1), ("n_init", 1),
                          ("max_pairs", 1)):
            _int(attr, low)
        _int("compat_dim", 1, allow_none=True)
        if self.dim % self.n_heads:
            raise ValueError(f"{name}: dim={self.dim} must be divisible by n_heads="
                             f"{self.n_heads}.")
        cw = self.class_weight
        if not (cw is None or (isinstance(cw, str) and cw == "balanced")):
            try:
                ok = len(cw) == 2 and all(float(v) >= 0 for v in cw)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"{name}: class_weight={cw!r} must be None, 'balanced' or a "
                                 "pair (w_neg, w_pos) of non-negative numbers.")
        if self.assign_labels not in ("kmeans", "sklearn"):
            raise ValueError(f"{name}: assign_labels={self.assign_labels!r} must be 'kmeans' or "
                             "'sklearn'.")
        _check_max_clusters(self.max_clusters)

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
        from ._sets import check_sets, pack
        from ._torch import resolve_device
        from ._training import split_validation, train_module
        from .datasets._clustering import (
            _check_cluster_range,
            _sample_instance,
        )
        from .nn.abc import abc_loss

        self._validate_params()
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
        if self.warm_start and hasattr(self, "module_") and d != self.n_features_in_:
            raise ValueError(f"{name}: warm_start with {d} features, but the model was fitted on "
                             f"{self.n_features_in_}.")

        seed = seed_from_random_state(self.random_state)
        rng = np.random.RandomState(seed % (2**31 - 1))
        dev = resolve_device(self.device)
        self.device_ = dev
        gen = make_generator(seed, "cpu")
        warm = self.warm_start and hasattr(self, "module_")
        if not warm:
            self.n_features_in_ = d
            if self.standardize:
                self.mean_ = elements.mean(0)
                sd = elements.std(0)
                self.scale_ = np.where(sd > 1e-12, sd, 1.0)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self.module_ = self._build_module(d).to(dev)
            self._optimizer_state = None
            self.loss_curve_, self.validation_scores_, self.n_iter_ = [], [], 0
        cw = self.class_weight
        if cw is not None and not isinstance(cw, str):
            cw = tuple(float(v) for v in cw)

        def to_batch(xs, labs):
            Xb, Mb = pack(self._scale(xs), device=dev)
            return Xb, Mb, _pack_labels(labs, Xb.shape[1]).to(dev)

        val_batch = None
        if pool:
            if self.early_stopping:
                tr, va = split_validation(len(Xp), self.validation_fraction, y=yi, stratify=True,
                                          seed=seed)
                tr_by = [tr[yi[tr] == c] for c in range(len(classes))]
                va_by = [va[yi[va] == c] for c in range(len(classes))]
                if min(len(v) for v in va_by) == 0 or min(len(t) for t in tr_by) == 0:
                    raise ValueError(f"{name}: validation_fraction={self.validation_fraction} "
                                     "leaves a class without training or validation elements.")
                vx, vy = [], []
                for _ in range(self.n_validation_instances):
                    idx, lab = _sample_instance(rng, va_by, self.instance_size, k_lo, k_hi)
                    vx.append(Xp[idx])
                    vy.append(lab)
                val_batch = (vx, vy)
            else:
                tr_by = by_class

            def draw():
                xs, labs = [], []
                for _ in range(self.batch_size):
                    idx, lab = _sample_instance(rng, tr_by, self.instance_size, k_lo, k_hi)
                    xs.append(Xp[idx])
                    labs.append(lab)
                return to_batch(xs, labs)
        else:
            if self.early_stopping:
                tr, va = split_validation(len(sets), self.validation_fraction, seed=seed)
                val_batch = ([sets[i] for i in va], [labels[i] for i in va])
            else:
                tr = np.arange(len(sets))
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

        max_steps = int(self.max_iter)
        every = int(self.eval_every)
        n_chunks = -(-max_steps // every)

        def batches(chunk):
            for _ in range(min(every, max_steps - chunk * every)):
                yield draw()

        def loss_fn(module, batch):
            Xb, Mb, Yb = batch
            return abc_loss(module(Xb, Mb), Yb, Mb, class_weight=cw), Xb.shape[0]

        validation = None
        if val_batch is not None:
            val_parts = []
            vlen = np.array([len(s) for s in val_batch[0]])
            for idx in length_batches(vlen**2, max_elements=self.max_pairs):
                val_parts.append(to_batch([val_batch[0][i] for i in idx],
                                          [val_batch[1][i] for i in idx]))

            def validation(module):
                tot = sum(float(abc_loss(module(Xb, Mb), Yb, Mb, class_weight=cw)) * len(Xb)
                          for Xb, Mb, Yb in val_parts)
                return -tot / len(vlen)

        result = train_module(
            self.module_, loss_fn, batches, validation=validation, optimizer=self.optimizer,
            learning_rate_init=self.learning_rate_init, weight_decay=self.weight_decay,
            max_iter=n_chunks, tol=self.tol, early_stopping=self.early_stopping,
            n_iter_no_change=self.n_iter_no_change, optimizer_state=self._optimizer_state,
            verbose=self.verbose, name=name, warn_convergence=False,
        )
        # on the CPU (as __getstate__ would put it): a GPU fit pickles and loads without CUDA
        self._optimizer_state = _to_cpu(result.optimizer_state, clone=True)
        self.loss_curve_ = list(self.loss_curve_) + list(result.loss_curve)
        self.validation_scores_ = list(self.validation_scores_) + list(result.validation_scores)
        self.n_iter_ = int(self.n_iter_) + min(result.n_iter * every, max_steps)
        return self

    def _build_module(self, n_features: int):
        from .nn.abc import ABCKernel

        return ABCKernel(n_features, self.dim, self.n_blocks, self.n_heads,
                         compatibility=self.compatibility, compat_dim=self.compat_dim,
                         norm=self.norm, residual=self.residual,
                         input_similarity=getattr(self, "input_similarity", None))

    def _persist_module(self, name: str):
        """The untrained architecture of fitted module ``name`` (for :func:`skset.load`)."""
        if name != "module_":
            raise ValueError(f"ABCClusterer has no torch module attribute {name!r}.")
        return self._build_module(self.n_features_in_)

    # ------------------------------------------------------------------ inference
    def _check_X(self, X):
        from ._sets import check_sets

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
        return list(length_batches(lengths**2, max_elements=budget))

    def _chunk_affinity(self, sets):
        """Affinity (B, n, n) float32 and mask of one chunk of (scaled) sets (callers run it
        under ``torch.no_grad()``)."""
        from ._sets import pack
        from .nn.abc import abc_affinity

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
        if arr.ndim == 0:
            arr = np.full(n_sets, int(arr))
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
        from .nn.spectral import spectral_cluster

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
                    labels, _, _ = spectral_cluster(A, M, k_b, max_clusters=self.max_clusters,
                                                    n_init=self.n_init, generator=gen)
                    return labels.cpu().numpy(), None
                if k_b is None:
                    w = laplacian_eigh(A, M, eigenvectors=False)
                    k_b = eigengap_n_clusters(w, M.sum(1), self.max_clusters)
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.non_deterministic = False
        return tags
