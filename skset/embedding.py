"""Set-to-vector embeddings: :class:`OTKEmbedding`."""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.cluster import KMeans
from sklearn.utils.validation import check_is_fitted

from ._sets import check_finite_output, check_sets, iter_packed
from ._torch import TorchStateMixin, resolve_device, resolve_dtype, seed_from_random_state, to_numpy
from .nn.otk import otk_plans, otk_pool
from .ot import sinkhorn, transport_similarity

__all__ = ["OTKEmbedding"]


class OTKEmbedding(ClassNamePrefixFeaturesOutMixin, TransformerMixin, TorchStateMixin,
                   BaseEstimator):
    r"""Optimal transport kernel embedding (OTKE) of sets, with references learned without labels.

    Each set :math:`\mathbf{x} = (x_1..x_n)` is aligned to ``n_references`` references
    :math:`\mathbf{z}^{(r)} \in \mathbb{R}^{p \times d}` by the entropic transport plan
    :math:`\mathbf{P}` (uniform weights :math:`1/n` on the set, :math:`1/p` on the references,
    similarity :math:`\langle x_i, z_j\rangle`), and each support pools the elements transported to
    it (Mialon et al. 2021, eq. 3 and 8):

    .. math:: \Phi(\mathbf{x}) = \frac{1}{\sqrt{q}}\Big(\sqrt{p}\;
              \mathbf{P}(\mathbf{x}, \mathbf{z}^{(r)})^\top \mathbf{x}\Big)_{r=1..q}
              \in \mathbb{R}^{q p d}.

    The embedding is a weighted match kernel whose weights come from optimal transport: elements
    that align with the same part of the reference are pooled together. Put it after
    :class:`NystromFeatures` to use a Gaussian kernel on the elements.

    Parameters
    ----------
    n_supports : int, default=10
        Supports per reference ``p``.
    n_references : int, default=1
        Number of references ``q``. With several, they are fitted by Wasserstein k-means: each
        training set is assigned to the reference it is closest to in OT cost, and each reference
        is refitted on its sets.
    epsilon : float, default=0.5
        Entropic regularisation ``epsilon`` of the plan (relative to the features' scale; the
        paper's grid is 0.01-1). Stable from 1e-3 to 10.
    sinkhorn_iter : int, default=10
        Sinkhorn iterations per plan.
    fit_method : {"kmeans", "wasserstein"}, default="kmeans"
        How references are fitted: k-means on the elements of the training sets, or the
        free-support Wasserstein barycenter of the training sets (a fixed point on the Sinkhorn
        plans started from the k-means solution).
    position_sigma : float or None, default=None
        Positional weighting for ordered sets (sequences): the plan is multiplied by
        :math:`S_{ij} = \exp(-(i/n - j/p)^2/\sigma_{pos}^2)`. ``None`` ignores order.
    center : bool, default=True
        Subtract the mean training embedding from every output.
    normalize : bool, default=True
        Scale every output (after centring) to norm ``sqrt(n_features_out)``, i.e. unit average
        squared value per feature, which suits linear models with their default regularisation.
    max_iter : int, default=10
        Iterations of the Wasserstein barycenter / Wasserstein k-means.
    max_samples : int, default=100000
        Elements sampled for k-means.
    sinkhorn_method : {"auto", "log", "exp"}, default="auto"
        Sinkhorn solver, see :func:`skset.ot.sinkhorn`.
    max_elements : int, default=32768
        Budget of padded elements per batch: sets are sorted by length and cut into batches of at
        most this many padded elements, which bounds memory. Small batches are also faster on a
        CPU (their cost and plan matrices stay in cache): 32768 transformed 1.1-1.7x faster
        than 131072 (part 6 of ``benchmarks/results/otk_transform.md``). On a GPU a larger
        budget may pay off (not measured: no GPU was available when the default was chosen).
    device : str, default="auto"
        Torch device; ``"auto"`` uses CUDA when available.
    dtype : {"float32", "float64"}, default="float32"
        Compute and output dtype.
    random_state : int, RandomState or None, default=None
        Seed for k-means and the reference initialisation.

    Attributes
    ----------
    references_ : ndarray of shape (n_references, n_supports, n_features)
        The references ``z``.
    mean_ : ndarray of shape (n_features_out,)
        Mean training embedding (zeros when ``center=False``).
    assignments_ : ndarray of shape (n_training_sets,)
        Reference each training set was assigned to (all zeros with one reference).
    n_iter_ : int
        Barycenter / Wasserstein k-means iterations run.
    n_features_in_ : int
        Features per element.
    device_ : torch.device
        Resolved device.

    See Also
    --------
    NystromFeatures : element-wise Gaussian kernel features to use before this embedding.
    skset.nn.OTKLayer : the same embedding as a trainable torch module.
    skset.ot.sinkhorn : the batched Sinkhorn solver.

    References
    ----------
    .. [1] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding
       for Feature Aggregation and its Relationship to Attention. ICLR 2021.
    .. [2] M. Cuturi, A. Doucet. Fast Computation of Wasserstein Barycenters. ICML 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from skset import OTKEmbedding
    >>> rng = np.random.default_rng(0)
    >>> sets = [rng.normal(size=(n, 4)) for n in (6, 9, 3, 7)]
    >>> otk = OTKEmbedding(n_supports=3, random_state=0).fit(sets)
    >>> otk.transform(sets).shape
    (4, 12)
    """

    def __init__(
        self,
        n_supports: int = 10,
        n_references: int = 1,
        *,
        epsilon: float = 0.5,
        sinkhorn_iter: int = 10,
        fit_method: str = "kmeans",
        position_sigma: float | None = None,
        center: bool = True,
        normalize: bool = True,
        max_iter: int = 10,
        max_samples: int = 100_000,
        sinkhorn_method: str = "auto",
        max_elements: int = 32_768,
        device: str = "auto",
        dtype: str = "float32",
        random_state=None,
    ):
        self.n_supports = n_supports
        self.n_references = n_references
        self.epsilon = epsilon
        self.sinkhorn_iter = sinkhorn_iter
        self.fit_method = fit_method
        self.position_sigma = position_sigma
        self.center = center
        self.normalize = normalize
        self.max_iter = max_iter
        self.max_samples = max_samples
        self.sinkhorn_method = sinkhorn_method
        self.max_elements = max_elements
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    # -- parameters -----------------------------------------------------------------------------
    def _validate_params(self):
        for name in ("n_supports", "n_references", "sinkhorn_iter", "max_iter", "max_samples",
                     "max_elements"):
            v = getattr(self, name)
            if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        e = self.epsilon
        if not (isinstance(e, numbers.Real) and math.isfinite(e) and e > 0):
            raise ValueError(f"epsilon must be a positive number, got {e!r}")
        s = self.position_sigma
        if s is not None and not (isinstance(s, numbers.Real) and math.isfinite(s) and s > 0):
            raise ValueError(f"position_sigma must be None or a positive number, got {s!r}")
        if self.fit_method not in ("kmeans", "wasserstein"):
            raise ValueError(f"fit_method must be 'kmeans' or 'wasserstein', got "
                             f"{self.fit_method!r}")
        if self.sinkhorn_method not in ("auto", "log", "exp"):
            raise ValueError(f"sinkhorn_method must be 'auto', 'log' or 'exp', got "
                             f"{self.sinkhorn_method!r}")

    def _check_X(self, X, fitting=False):
        coll = check_sets(X, n_features=None if fitting else self.n_features_in_,
                          compute_dtype=self._tdtype)
        return coll.sets

    @property
    def _tdtype(self):
        return resolve_dtype(self.dtype)

    # -- engine calls ---------------------------------------------------------------------------
    def _batches(self, sets):
        return iter_packed(sets, device=self.device_, dtype=self._tdtype,
                           max_elements=self.max_elements)

    def _raw_embed(self, sets, references: torch.Tensor) -> np.ndarray:
        """Embeddings ``(n_sets, q*p*d)`` before centring, one batched call per length batch."""
        q, p, d = references.shape
        out = np.empty((len(sets), q * p * d), dtype=np.float64 if self._tdtype == torch.float64
                       else np.float32)
        with torch.no_grad():
            for idx, X, M in self._batches(sets):
                P = otk_plans(X, M, references, epsilon=self.epsilon,
                              sinkhorn_iter=self.sinkhorn_iter, position_sigma=self.position_sigma,
                              method=self.sinkhorn_method)
                out[idx] = to_numpy(otk_pool(X, P).reshape(len(idx), -1))
        return out

    def _similarities(self, sets, references: torch.Tensor) -> np.ndarray:
        """``<P, K>`` between every set and every reference, ``(n_sets, q)``."""
        q, p, d = references.shape
        sims = np.empty((len(sets), q))
        with torch.no_grad():
            for idx, X, M in self._batches(sets):
                B, n, _ = X.shape
                K = (X @ references.reshape(q * p, d).T).view(B, n, q, p).permute(0, 2, 1, 3)
                K = K.reshape(B * q, n, p)
                P = sinkhorn(K, M.repeat_interleave(q, 0), epsilon=self.epsilon,
                             n_iter=self.sinkhorn_iter, method=self.sinkhorn_method)
                sims[idx] = to_numpy(transport_similarity(P, K).view(B, q))
        return sims

    def _kmeans_reference(self, sets, rng) -> np.ndarray:
        elems = np.concatenate(sets, axis=0)
        if elems.shape[0] > self.max_samples:
            elems = elems[rng.choice(elems.shape[0], self.max_samples, replace=False)]
        p = self.n_supports
        if elems.shape[0] < p:
            # too few elements for p clusters: repeat them with tiny jitter (deterministic)
            reps = elems[rng.choice(elems.shape[0], p, replace=True)]
            return reps + 1e-6 * rng.standard_normal(reps.shape)
        km = KMeans(n_clusters=p, n_init=1, random_state=rng.randint(2**31 - 1))
        with np.errstate(all="ignore"):
            return km.fit(elems).cluster_centers_

    def _barycenter(self, sets, z0: np.ndarray) -> np.ndarray:
        """Free-support Wasserstein barycenter: z_j <- mean over sets of p * (P^T x)_j."""
        z = torch.as_tensor(z0, dtype=self._tdtype, device=self.device_)[None]
        p = z.shape[1]
        for _ in range(self.max_iter):
            acc = torch.zeros_like(z[0])
            with torch.no_grad():
                for _, X, M in self._batches(sets):
                    P = otk_plans(X, M, z, epsilon=self.epsilon, sinkhorn_iter=self.sinkhorn_iter,
                                  method=self.sinkhorn_method)
                    acc += p * torch.einsum("bnp,bnd->pd", P[:, 0], X)
            z_new = acc / len(sets)
            shift = float((z_new - z[0]).norm() / z[0].norm().clamp_min(1e-12))
            z = z_new[None]
            self._bary_iter += 1
            if shift < 1e-5:
                break
        return to_numpy(z[0])

    def _fit_one(self, sets, rng) -> np.ndarray:
        z = self._kmeans_reference(sets, rng)
        if self.fit_method == "wasserstein":
            z = self._barycenter(sets, z)
        return z

    # -- public API -----------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Fit the references on the training sets.

        Parameters
        ----------
        X : collection of sets (list of (n_i, d) arrays, 1-D object array or 3-D array)
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        self.device_ = resolve_device(self.device)
        sets = self._check_X(X, fitting=True)
        self.n_features_in_ = sets[0].shape[1]
        rng = np.random.RandomState(seed_from_random_state(self.random_state))
        np_dtype = np.float64 if self._tdtype == torch.float64 else np.float32
        q = self.n_references
        self._bary_iter = 0
        n_iter = 0
        if q == 1:
            refs = self._fit_one(sets, rng)[None]
            assign = np.zeros(len(sets), dtype=np.int64)
        else:
            if len(sets) < q:
                raise ValueError(f"n_references={q} needs at least {q} training sets, got "
                                 f"{len(sets)}.")
            # initial groups: k-means on set means (cheap, spreads references over the data)
            means = np.stack([s.mean(0) for s in sets])
            assign = KMeans(n_clusters=q, n_init=1, random_state=rng.randint(2**31 - 1)
                            ).fit_predict(means)
            refs = np.empty((q, self.n_supports, self.n_features_in_))
            worst = 0
            for it in range(self.max_iter):
                for r in range(q):
                    members = np.flatnonzero(assign == r)
                    if len(members) == 0:  # empty cluster: take the worst-fitting set
                        members = np.array([worst])
                    refs[r] = self._fit_one([sets[i] for i in members], rng)
                sims = self._similarities(sets, torch.as_tensor(refs, dtype=self._tdtype,
                                                                device=self.device_))
                new_assign = sims.argmax(1)
                worst = int(sims.max(1).argmin())
                n_iter = it + 1
                if np.array_equal(new_assign, assign):
                    break
                assign = new_assign
        self.references_ = np.asarray(refs, dtype=np_dtype)
        self.assignments_ = assign
        self.n_iter_ = max(n_iter, self._bary_iter)
        ref_t = torch.as_tensor(self.references_, device=self.device_)
        if self.center:
            self.mean_ = self._raw_embed(sets, ref_t).mean(0)
        else:
            self.mean_ = np.zeros(q * self.n_supports * self.n_features_in_, dtype=np_dtype)
        return self

    @property
    def _n_features_out(self):
        return self.references_.shape[0] * self.references_.shape[1] * self.references_.shape[2]

    def transform(self, X) -> np.ndarray:
        """Embed each set: ``(n_sets, n_references * n_supports * n_features_in_)``."""
        check_is_fitted(self)
        sets = self._check_X(X)
        ref_t = torch.as_tensor(self.references_, device=self.device_)
        emb = self._raw_embed(sets, ref_t) - self.mean_
        if self.normalize:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = emb * (math.sqrt(emb.shape[1]) / np.maximum(norms, 1e-12))
        check_finite_output(emb, type(self).__name__, self._tdtype)
        return emb

    def transport_plan(self, X) -> list[np.ndarray]:
        """The transport plan of each set onto each reference (positional weights applied).

        Returns
        -------
        list of ndarray of shape (n_references, n_i, n_supports)
            Entry ``[r, i, j]`` is the mass element ``i`` sends to support ``j`` of reference ``r``.
        """
        check_is_fitted(self)
        sets = self._check_X(X)
        ref_t = torch.as_tensor(self.references_, device=self.device_)
        plans: list = [None] * len(sets)
        lengths = [s.shape[0] for s in sets]
        with torch.no_grad():
            for idx, X_, M in self._batches(sets):
                P = to_numpy(otk_plans(X_, M, ref_t, epsilon=self.epsilon,
                                       sinkhorn_iter=self.sinkhorn_iter,
                                       position_sigma=self.position_sigma,
                                       method=self.sinkhorn_method))
                for b, i in enumerate(idx):
                    plans[i] = P[b, :, : lengths[i]]
        return plans

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = [self.dtype]
        return tags
