"""Spectral clustering with the number of clusters from the eigengap.

* :func:`estimate_n_clusters`: eigengap of the symmetric normalised Laplacian, for one affinity
  matrix or (batched in torch) for many.
* :class:`EigengapSpectralClustering`: scikit-learn style spectral clustering of one data set, with
  ``n_clusters=None`` meaning "estimate it".
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import scipy.sparse
import torch
from sklearn.base import ClusterMixin
from sklearn.cluster import spectral_clustering
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.neighbors import kneighbors_graph
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from .._base import SksetEstimator
from .._sets import length_batches, to_numpy
from .._threads import user_stacklevel
from .._torch import CPU_CHUNK_PAIRS, map_on_threads
from .._validation import POSITIVE, POSITIVE_INT, RANDOM_STATE
from ..nn.spectral import eigengap_n_clusters, laplacian_eigh

__all__ = ["estimate_n_clusters", "EigengapSpectralClustering"]

def _check_affinity(A, where: str = "affinity") -> np.ndarray:
    """``A`` read as a float64 matrix and checked (square, finite, non-negative, symmetric)."""
    return _check_affinities([A], [where])[0]


def _check_affinities(items, wheres) -> list[np.ndarray]:
    """Each of ``items`` read as a float64 square matrix, then their values checked together in
    one pass (finite, non-negative, symmetric to ``np.allclose(A, A.T, rtol=1e-5, atol=1e-8
    max|A|)``): the error names the first faulty matrix (``wheres``: their names)."""
    mats = []
    for a, w in zip(items, wheres, strict=True):
        try:
            mats.append(_read_affinity(a, w))
        except (TypeError, ValueError):
            _check_values(mats, wheres)  # an earlier matrix's fault is named first
            raise
    _check_values(mats, wheres)
    return mats


def _check_values(mats, wheres) -> None:
    """The value checks of :func:`_check_affinities` on the matrices read (``wheres[i]`` names
    ``mats[i]``): the first faulty matrix, its first fault in the order finite, sign, symmetry."""
    if not mats:
        return
    sizes = np.fromiter((m.size for m in mats), dtype=np.int64, count=len(mats))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    flat = np.concatenate([m.ravel() for m in mats])
    flat_t = np.concatenate([m.T.ravel() for m in mats])
    finite = np.isfinite(flat)
    bad_finite = np.add.reduceat(~finite, starts) > 0
    bad_sign = np.add.reduceat(flat < 0, starts) > 0
    clean, clean_t = np.where(finite, flat, 0.0), np.where(np.isfinite(flat_t), flat_t, 0.0)
    scale = np.maximum(np.maximum.reduceat(np.abs(clean), starts), 1e-300)
    close = np.abs(clean - clean_t) <= np.repeat(1e-8 * scale, sizes) + 1e-5 * np.abs(clean_t)
    bad_symmetry = np.add.reduceat(~close, starts) > 0
    faulty = np.flatnonzero(bad_finite | bad_sign | bad_symmetry)
    if faulty.size:
        i = int(faulty[0])
        what = ("contains NaN or infinity." if bad_finite[i] else
                "has negative entries; affinities must be >= 0." if bad_sign[i] else
                "is not symmetric; symmetrise it first, e.g. (A + A.T) / 2.")
        raise ValueError(f"{wheres[i]} {what}")


def _read_affinity(A, where: str) -> np.ndarray:
    if hasattr(A, "toarray") and not isinstance(A, np.ndarray):
        A = A.toarray()
    if isinstance(A, torch.Tensor):
        A = to_numpy(A)
    if np.iscomplexobj(A):
        raise TypeError(f"{where} holds complex numbers; affinities are real.")
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} could not be read as a numeric matrix: {exc}") from None
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{where} must be a square 2-D matrix, got shape {A.shape}.")
    if A.shape[0] == 0:
        raise ValueError(f"{where} is empty (0 x 0).")
    return A


def _check_max_clusters(max_clusters):
    if max_clusters is None:
        return None
    if (not isinstance(max_clusters, numbers.Integral) or isinstance(max_clusters, bool)
            or max_clusters < 1):
        raise ValueError(f"max_clusters must be None or an int >= 1, got {max_clusters!r}.")
    return int(max_clusters)


def _eigengap_batched(mats: list[np.ndarray], max_clusters, max_elements: int = CPU_CHUNK_PAIRS):
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
    if affinity is None:
        raise TypeError("affinity is None; give an affinity matrix (n, n), a list of them or a "
                        "3-D array.")
    if isinstance(affinity, (list, tuple)) and not len(affinity):
        return np.empty(0, dtype=np.int64)  # no matrices: no counts
    if isinstance(affinity, (list, tuple)) and np.ndim(affinity[0]) == 2:
        mats = _check_affinities(affinity, [f"affinity {i}" for i in range(len(affinity))])
    else:
        arr = affinity
        if isinstance(arr, torch.Tensor):
            arr = to_numpy(arr)
        if hasattr(arr, "toarray") and not isinstance(arr, np.ndarray):
            arr = arr.toarray()
        arr = np.asarray(arr)
        if arr.ndim == 3:
            mats = _check_affinities(list(arr), [f"affinity {i}" for i in range(len(arr))])
        else:
            single = True
            mats = [_check_affinity(arr)]
    if not mats:
        return np.empty(0, dtype=np.int64)
    k = _eigengap_batched(mats, max_clusters)
    return int(k[0]) if single else k


class EigengapSpectralClustering(ClusterMixin, SksetEstimator):
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
        The number of clusters found: the number given or estimated, fewer (with a warning)
        where k-means leaves a cluster empty, as on duplicate points.
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

    _parameter_constraints = {
        "n_clusters": [POSITIVE_INT, None],
        "affinity": ["rbf", "nearest_neighbors", "precomputed"],
        "gamma": [POSITIVE],
        "n_neighbors": [POSITIVE_INT],
        "max_clusters": [POSITIVE_INT, None],
        "assign_labels": ["kmeans", "discretize", "cluster_qr"],
        "n_init": [POSITIVE_INT],
        "eigen_solver": [None, "arpack", "lobpcg", "amg"],
        "random_state": [RANDOM_STATE],
    }

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

    def _affinity_matrix(self, X) -> np.ndarray:
        if self.affinity == "precomputed":
            return _check_affinity(X, "X (precomputed affinity)")
        # both read distances only, which scikit-learn expands as |x|^2 + |y|^2 - 2 x.y: far
        # from zero (offsets of 1e7) the terms cancel, so dense samples are centred first
        if not scipy.sparse.issparse(X):
            X = X - X.mean(0)
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
        self._check_params()
        if isinstance(X, torch.Tensor):  # on a GPU, or in a dtype numpy lacks (bfloat16)
            X = to_numpy(X)
        # sparse too: a precomputed affinity is often kneighbors_graph's, and the rbf kernel and the
        # neighbour graph read sparse features (the affinity is then dense, affinity_matrix_)
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1,
                          accept_sparse=("csr", "csc", "coo"))
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
            if (found := int(labels.max()) + 1) < k:
                warnings.warn(f"{type(self).__name__}: {k} clusters asked, {found} found "
                              "(k-means left the others empty, as on duplicate points); "
                              "n_clusters_ counts the clusters found.", UserWarning,
                              stacklevel=user_stacklevel())
        self.affinity_matrix_ = A
        self.n_clusters_ = int(labels.max()) + 1
        self.labels_ = labels
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.affinity == "precomputed"
        tags.input_tags.sparse = True
        return tags
