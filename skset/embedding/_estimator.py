"""Set-to-vector embeddings: the estimator :class:`OTKEmbedding` (its reference fitting is in
``_references.py``)."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._base import SksetEstimator, set_input_tags
from .._config import get_config
from .._sets import (
    check_choice_labels,
    check_finite_output,
    check_sets,
    length_batches,
    pack,
    pack_weights,
    to_numpy,
)
from .._streaming import PARTIAL_FIT_WEIGHTS_DOC, weight_scale
from .._threads import user_stacklevel
from .._torch import map_on_threads, resolve_dtype, split_for_threads
from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, TORCH_PARAMS, Boolean, check_sample_weight
from .._weighting import count_distinct, drop_zero_weight, element_masses, spanned_masses
from ..nn.otk import POSITION_MODES, OTKLayer, _zeroed_embed, embedding_output, otk_plans, zero_column
from ._offset import (
    check_offset_plans,
    fit_offset,
    fitted_dtype,
    input_space_mean,
    offset_embedding,
    reference_tensor,
    shifted,
    split_ones,
    with_ones,
)
from ._position_choice import select_position_sigma
from ._references import fit_references, reference_counts, update_references

__all__ = ["OTKEmbedding"]


class OTKEmbedding(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SksetEstimator):
    r"""Optimal transport kernel embedding (OTKE) of sets, with references learned without labels.

    Each set :math:`\mathbf{x} = (x_1..x_n)` is aligned to ``n_references`` references
    :math:`\mathbf{z}^{(r)} \in \mathbb{R}^{p \times d}` by the entropic transport plan
    :math:`\mathbf{P}` (uniform weights :math:`1/n` on the set, or the normalised
    ``element_weight`` of ``fit`` / ``transform``; :math:`1/p` on the references; similarity
    :math:`\langle x_i, z_j\rangle`), and each support pools the elements transported to it
    (Mialon et al. 2021, eq. 3 and 8):

    .. math:: \Phi(\mathbf{x}) = \frac{1}{\sqrt{q}}\Big(\sqrt{p}\;
              \mathbf{P}(\mathbf{x}, \mathbf{z}^{(r)})^\top \mathbf{x}\Big)_{r=1..q}
              \in \mathbb{R}^{q p d}.

    The embedding is a weighted match kernel whose weights come from optimal transport: elements
    that align with the same part of the reference are pooled together. Put it after
    :class:`NystromFeatures` to use a Gaussian kernel on the elements.

    Parameters
    ----------
    n_supports : int, default=10
        Supports per reference ``p``. At most the number of distinct training elements: above it,
        ``fit`` warns and uses that many (``n_supports_``), as :class:`NystromFeatures` does for
        its anchors, rather than duplicate supports that would only repeat output features.
    n_references : int, default=1
        Number of references ``q``. With several, they are fitted by Wasserstein k-means (Mialon
        et al. 2021, Section 2): each training set is assigned to the reference with the lowest
        transport cost :math:`\sum_{ij} P_{ij} \|x_i - z_j\|^2`, and each reference is refitted
        on its sets. ``P`` is the plan the embedding uses (before positional weights): the
        entropic plan of similarity :math:`\langle x_i, z_j\rangle` at ``epsilon``, which is the
        entropic plan of the squared Euclidean cost at ``2 * epsilon``. (Taking the largest
        :math:`\langle P, K\rangle` instead would favour references of large norm.)
    epsilon : float, default=0.1
        Entropic regularisation ``epsilon`` of the plan, relative to the features' scale: small
        values (0.01 to 0.1) give sharp, nearly one-to-one alignments, large ones (1 to 10)
        tend to mean pooling; 0.1 to 1 is the usual grid (the paper's: 0.01 to 1). Any value
        from 1e-3 to 10 is computed stably; smaller values need more Sinkhorn iterations
        (``sinkhorn_tol``). :class:`skset.nn.OTKLayer` and ``OTKRegressor`` keep 0.5, and
        ``OTKClassifier`` chooses 0.5 or 0.1: they run a fixed 10 iterations, which converge at
        0.5 but not always at 0.1. How the default was chosen: :ref:`otk-defaults` (user guide).
    sinkhorn_iter : int, default=3000
        Most Sinkhorn iterations per plan (the cap of the ``sinkhorn_tol`` rule; the exact count
        when ``sinkhorn_tol=None``); at least 1. Small ``epsilon`` and sets with heavy-tailed
        element norms can need thousands of iterations to converge, easy sets a few tens (the
        paper: 100 for its unsupervised embedding, 10 in its supervised models, App. D.3).
    sinkhorn_tol : float or None, default=1e-4
        Sinkhorn stopping tolerance on each plan's row-marginal error
        :math:`\sum_i |\sum_j P_{ij} - 1/n|` (between 0 and 2; the column marginals hold
        exactly), checked every 5 iterations, set by set (see :func:`skset.ot.sinkhorn`). Easy
        sets stop after 5 to a few tens of iterations, hard ones (small ``epsilon`` relative to
        the features' scale, heavy-tailed norms) run up to ``sinkhorn_iter``. Float32 rounding
        floors the error near 1e-6..1e-5: smaller values run to the cap. How far the default
        stops from a converged plan: :ref:`otk-defaults` in the user guide.
        ``None``: exactly ``sinkhorn_iter`` iterations (the paper's fixed count).
    fit_method : {"kmeans", "wasserstein"}, default="kmeans"
        How references are fitted: k-means on the elements of the training sets, or the
        free-support Wasserstein barycenter of the training sets (a fixed point on the Sinkhorn
        plans started from the k-means solution).
    position_sigma : float, None or "auto", default="auto"
        Positional weighting for ordered sets (sequences), with
        :math:`S_{ij} = \exp(-(i/n - j/p)^2/\sigma_{pos}^2)` (``n`` the set's length, ``i``, ``j``
        from 0); ``position_mode`` says how. ``None`` ignores order. Any positive finite value
        is computed safely: a huge one (1e300) is no positional weighting, a tiny one (1e-300)
        the limit of a vanishing bandwidth (weight 1 where :math:`i/n = j/p`, 0 elsewhere).
        ``"auto"``: ``position_sigma_`` chosen in ``fit`` from the labels ``y``, 0.3 or
        ``None``. Positions are taken only when, on the training sets, they beat both no
        positions and the same positions on the sets with their elements shuffled, by more than
        noise; without labels (``fit(X)``), with per-element or multi-output labels, or when no
        set has two elements: ``None``, and the fit is exactly the ``position_sigma=None`` fit.
        The choice reads the order of the elements of each set: on unordered bags it keeps
        ``None`` unless the draw of the sets' order happens to pass both tests (once in 400
        random bags). The :ref:`otk` guide ("Positions chosen from the data") gives the rule
        and the suite figures.
    position_mode : {"plan", "kernel", "similarity"}, default="kernel"
        How the positional weights enter the plan (see :mod:`skset.nn.otk`):
        ``"plan"``: :math:`\mathbf{P}(K) \odot S`, the plan multiplied by ``S`` after Sinkhorn
        (the paper, Appendix B.3); ``"kernel"``: Sinkhorn on the Gibbs kernel
        :math:`e^{K/\varepsilon} \odot S` (the cost plus
        :math:`\varepsilon (i/n - j/p)^2/\sigma_{pos}^2`), so the plan itself follows positions,
        then :math:`\odot S`; ``"similarity"``: Sinkhorn on :math:`e^{(K \odot S)/\varepsilon}`
        then :math:`\odot S`, what the authors' code does. Ignored without ``position_sigma``.
        How the default was chosen: :ref:`otk-defaults` in the user guide.
    reg_m : float or None, default=None
        Unbalanced transport: strength :math:`\rho` of a KL penalty that replaces the exact
        set-side marginal (POT's ``reg_m``, in the units of ``epsilon``; the reference side stays
        exact, so every support still pools mass ``1/p``; see :mod:`skset.ot`). Elements of low
        similarity to every support then send less than their mass (the others more), which
        makes the embedding robust to outlying elements; smaller is more relaxed (the row update's exponent is
        :math:`\rho / (\rho + \varepsilon)`). ``None``: balanced, every element sends exactly
        its mass. Its plans read the features as they are (no ``input_offset_``): standardise
        features far from zero first, or use float64 (a float32 fit warns).
    center : bool, default=True
        Subtract the mean training embedding from every output.
    normalize : bool, default=True
        Scale every output (after centring) to norm ``sqrt(n_features_out)``, i.e. unit average
        squared value per feature, which suits linear models with their default regularisation.
        An output that is within the computation's accuracy of 0 after centring (a set equal
        to the mean embedding, e.g. the training set of a fit on one set, or a permutation of
        it) is set to 0 rather than scaled up: rounding noise would otherwise become an
        arbitrary direction of norm ``sqrt(n_features_out)``, and the embedding would not be
        permutation invariant. The accuracy is ``1000 * eps`` (of ``dtype``) times the size of
        the raw embedding and of ``mean_``, plus ``10 * sinkhorn_tol`` times the raw embedding's
        spread over the supports (the plan is accurate to about the tolerance, and its errors
        move mass between supports).
    barycenter_iter : int, default=10
        Iterations of the Wasserstein barycenter / Wasserstein k-means (``max_iter`` before
        0.2); a barycenter still moving at the cap warns (``ConvergenceWarning``).
    max_samples : int or "auto", default="auto"
        Elements sampled for k-means (at least ``n_supports``). ``"auto"``: 100,000, fewer for
        wide elements: at most 2^25 values in the sample (as :class:`skset.NystromFeatures`).
    sinkhorn_method : {"auto", "log", "exp"}, default="auto"
        Sinkhorn solver, see :func:`skset.ot.sinkhorn`. ``"exp"`` alone can end on a NaN plan
        (a ``ValueError``) or, with no error, on a finite plan whose marginals are right but
        whose entries are off, at small ``epsilon`` in float32 (0.05 on standardised features);
        ``"auto"`` and ``"log"`` do not.
    max_elements : int, default=32768
        Budget of padded elements per batch: sets are sorted by length and cut into batches of at
        most this many padded elements, which bounds memory (a longer set gets a batch of its
        own). Small batches are also faster on a CPU (their cost and plan matrices stay in
        cache); 8192 to 131072 are reasonable, and on a GPU a larger budget may pay off. How the
        default was chosen: :ref:`otk-defaults` in the user guide.
    device : str, default="auto"
        Torch device; ``"auto"`` uses CUDA when available.
    dtype : {"float32", "float64"}, default="float32"
        Compute and output dtype.
    random_state : int, RandomState or None, default=None
        Seed for k-means and the reference initialisation.

    Attributes
    ----------
    references_ : ndarray of shape (n_references, p, n_features) with p = ``n_supports_``
        The references ``z``.
    n_supports_ : int
        Supports per reference used: ``n_supports``, or the number of distinct training elements
        when that is smaller. The output has ``n_references * n_supports_ * n_features_in_``
        features.
    mean_ : ndarray of shape (n_features_out,)
        Mean training embedding (zeros when ``center=False``).
    input_offset_ : ndarray of shape (n_features,) or None
        The training mean of each feature more than 10 spreads from zero (0 for the others),
        subtracted in float64 from every set before the plans read it (a shift of sets and
        references leaves converged plans unchanged; float32 products of such features lose
        their digits). ``references_`` and a centring ``mean_`` stay in the input space, in
        float64. None when no feature is that far, and with ``reg_m`` or similarity-scaled
        positions, whose plans a shift changes. ``to_module()`` reads the sets less it too.
    position_sigma_ : float or None
        The positional width used: ``position_sigma``, or the one chosen for ``"auto"``.
    position_scores_ : dict or None
        What ``position_sigma="auto"`` scored (minus the mean leave-one-out error of a ridge
        model on the training embeddings; higher is better): ``"none"``, ``"positions"`` and,
        when positions beat none, ``"shuffled"`` (the control); ``None`` when nothing was
        scored (explicit ``position_sigma``, no usable labels).
    assignments_ : ndarray of shape (n_training_sets,)
        Reference of each training set (zeros with one): of lowest transport cost, except that
        ``fit`` gives a reference no set chose the set its own fits worst; after ``partial_fit``,
        of that call's sets.
    n_iter_ : int
        Barycenter / Wasserstein k-means iterations run (by ``fit`` or the first
        ``partial_fit``; with several references, summed over them and the rounds).
    counts_ : ndarray of shape (n_references, p)
        Weight assigned to each support so far (the counts of ``partial_fit``'s updates): of
        the training elements nearest to it among its reference's sets
        (``fit_method="kmeans"``), or of its reference's sets (``"wasserstein"``).
    n_samples_seen_ : float
        Total weight of the training sets seen (their number without ``sample_weight``).
    n_steps_ : int
        Chunks the references were fitted on: 1 after ``fit`` or the first ``partial_fit``,
        plus one per later ``partial_fit`` call.
    n_features_in_ : int
        Features per element.
    device_ : torch.device
        Resolved device.
    dtype_ : torch.dtype
        Resolved compute dtype (``dtype``).

    Notes
    -----
    ``fit(X, sample_weight=..., element_weight=...)``: ``sample_weight`` weighs the sets (a set
    of weight 2 counts as the set given twice in every objective, though k-means' random start
    may then reach another local optimum than the repeated sets' do; one of weight 0 is the set
    left out, exactly), in the
    k-means of the elements, the set-mean k-means that starts several references, the
    barycenter and the mean embedding of ``center``. ``element_weight`` (one 1-D array per set,
    normalised per set) is each set's measure in every transport plan; in the k-means of the
    elements each set keeps its total weight (``n_i``, its elements of positive mass, times its
    ``sample_weight``), shared among them in proportion to ``element_weight``, so uniform element
    weights give exactly the unweighted fit, and an element of mass 0 is a removed element.

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

    _parameter_constraints = {
        "n_supports": [POSITIVE_INT],
        "n_references": [POSITIVE_INT],
        "epsilon": [POSITIVE],
        "sinkhorn_iter": [POSITIVE_INT],
        "sinkhorn_tol": [NON_NEGATIVE, None],
        "fit_method": ["kmeans", "wasserstein"],
        "position_sigma": [POSITIVE, None, "auto"],
        "position_mode": [*POSITION_MODES],
        "reg_m": [POSITIVE, None],
        "center": [Boolean()],
        "normalize": [Boolean()],
        "barycenter_iter": [POSITIVE_INT],
        "max_samples": ["auto", POSITIVE_INT],
        "sinkhorn_method": ["auto", "log", "exp"],
        "max_elements": [POSITIVE_INT],
        **TORCH_PARAMS,
    }
    _renamed_params = {"max_iter": "barycenter_iter"}  # max_iter means training epochs in skset
    _legacy_params = {"reg_m": None}  # models saved before reg_m were balanced

    def __init__(self, n_supports=10, n_references=1, *, epsilon=0.1, sinkhorn_iter=3000,
                 sinkhorn_tol=1e-4, fit_method="kmeans", position_sigma="auto",
                 position_mode="kernel", reg_m=None, center=True, normalize=True,
                 barycenter_iter=10, max_samples="auto", sinkhorn_method="auto",
                 max_elements=32_768, device="auto", dtype="float32", random_state=None):
        self.n_supports = n_supports
        self.n_references = n_references
        self.epsilon = epsilon
        self.sinkhorn_iter = sinkhorn_iter
        self.sinkhorn_tol = sinkhorn_tol
        self.fit_method = fit_method
        self.position_sigma = position_sigma
        self.position_mode = position_mode
        self.reg_m = reg_m
        self.center = center
        self.normalize = normalize
        self.barycenter_iter = barycenter_iter
        self.max_samples = max_samples
        self.sinkhorn_method = sinkhorn_method
        self.max_elements = max_elements
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    def _check_X(self, X, fitting=False):
        """The checked sets less ``input_offset_``, which every plan reads (a fit's: as given)."""
        coll = check_sets(X, n_features=None if fitting else self.n_features_in_,
                          compute_dtype=self._tdtype)
        self._check_columns(X, fitting)
        return coll.sets if fitting else self._shifted_sets(coll.sets)

    def _shifted_sets(self, sets, fitting=False):
        if (offset := getattr(self, "input_offset_", None)) is None:  # absent in older models
            return sets
        if not fitting:  # a fit's offset is computed for its own parameters
            check_offset_plans(self)
        np_dtype = np.float64 if self._tdtype == torch.float64 else np.float32
        return [(s - offset).astype(np_dtype) for s in sets]

    @property
    def _tdtype(self):
        return resolve_dtype(self.dtype)

    # -- engine calls ---------------------------------------------------------------------------
    def _batch_indices(self, sets) -> list[np.ndarray]:
        """Index arrays of the length batches of ``sets`` under ``max_elements``."""
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
        return length_batches(lengths, max_elements=self.max_elements, padding_tolerance=0.1)

    def _pack_batch(self, sets, masses, idx):
        """``(X, mask, weights)`` of the sets ``idx``; ``weights (B, n)`` packs their element
        masses ``masses`` (one 1-D array per set), or is ``None``."""
        X, M = pack([sets[i] for i in idx], device=self.device_, dtype=self._tdtype)
        W = None if masses is None else pack_weights(
            [masses[i] for i in idx], device=self.device_, dtype=self._tdtype, n_max=X.shape[1])
        return X, M, W

    def _batches(self, sets, masses=None):
        """``(idx, X, mask, weights)`` per length batch (see :meth:`_pack_batch`)."""
        for idx in self._batch_indices(sets):
            yield (idx, *self._pack_batch(sets, masses, idx))

    @property
    def _position_sigma(self):
        """The positional width the embedding uses: ``position_sigma``, or for ``"auto"`` the
        fitted ``position_sigma_`` (``None`` before the choice)."""
        auto = self.position_sigma == "auto"
        return getattr(self, "position_sigma_", None) if auto else self.position_sigma

    def _otk_settings(self, positions=True, position_sigma="fitted") -> dict:
        """The keyword arguments of :func:`skset.nn.otk_plans` / :func:`skset.nn.otk_embed`
        (``positions=False``: without positional weights; ``position_sigma``: a width in place
        of the estimator's, for :func:`select_position_sigma`)."""
        sigma = self._position_sigma if position_sigma == "fitted" else position_sigma
        return dict(epsilon=self.epsilon, sinkhorn_iter=self.sinkhorn_iter,
                    position_sigma=sigma if positions else None,
                    method=self.sinkhorn_method, sinkhorn_tol=self.sinkhorn_tol,
                    position_mode=self.position_mode, reg_m=self.reg_m)

    def _plans(self, X, M, W, references, positions=True):
        """The embedding's plans ``(B, q, n, p)`` (``positions=False``: without positional
        weights)."""
        return otk_plans(X, M, references, weights=W, **self._otk_settings(positions))

    def _check_masses(self, element_weight, sets):
        """Normalised masses, one 1-D array a set (None: uniform); a k-mer map's: spanned_masses."""
        return element_masses(spanned_masses(element_weight, sets), sets, type(self).__name__)

    def _raw_embed(self, sets, references: torch.Tensor, masses=None, *,
                   position_sigma="fitted") -> np.ndarray:
        """Embeddings ``(n_sets, q*p*d)`` before centring, one batched call per length batch
        (``position_sigma``: a width in place of the estimator's; ``references`` moved to its
        device); with ``input_offset_``, the input sets' less ``_offset.offset_embedding``."""
        references = references.to(self.device_)
        q, p, d = references.shape
        out = np.empty((len(sets), q * p * d), dtype=np.float64 if self._tdtype == torch.float64
                       else np.float32)
        blocks = out.reshape(len(sets), q, p, d)  # a view: each batch writes its own rows
        compile = get_config()["compile"]  # the compiled kernels where skset.set_config says so
        offset = getattr(self, "input_offset_", None)

        def run(idx):
            with torch.no_grad():  # thread-local in torch
                X, M, W = self._pack_batch(sets, masses, idx)
                settings = self._otk_settings(True, position_sigma)
                ones = offset is not None and settings["position_sigma"] is not None
                refs = references
                if ones:  # positions: each set's own column sums carry the offset
                    X, refs = with_ones(X, M, references)
                # skset.nn.otk_embed of the packed batch, whose padding is zero already
                pooled = _zeroed_embed(X, M, refs, weights=W, compile=compile, **settings)
                pooled = to_numpy(split_ones(pooled, offset) if ones else pooled)
                if np.all(np.diff(idx) == 1):  # a run of rows: a plain block copy (3x the fancy)
                    blocks[idx[0]: idx[-1] + 1] = pooled
                else:
                    blocks[idx] = pooled

        # on a CPU the length batches run side by side, one intra-op thread each: the Sinkhorn
        # iterations are many small, memory-bound operations that two OpenMP threads share
        # badly (S1 of benchmarks/bench_peers.py: see benchmarks/results/peers.md)
        batches = split_for_threads(self._batch_indices(sets), self.device_)
        map_on_threads(run, batches, device=self.device_)
        return out

    def _costs(self, sets, references: torch.Tensor, masses=None) -> np.ndarray:
        r"""Transport cost :math:`\sum_{ij} P_{ij} \|x_i - z_j\|^2` of every set onto every
        reference, ``(n_sets, q)``.

        ``P`` is the embedding's plan (similarity ``<x, z>`` at ``epsilon``, no positional
        weights), i.e. (balanced, ``reg_m=None``) the entropic plan of the cost ``||x - z||^2``
        at ``2 epsilon``. Not
        ``<P, K>``: with exact marginals the cost is ``mean_i ||x_i||^2 + mean_j ||z_j||^2 -
        2 <P, K>``, and the ``||z||^2`` term is what keeps large references from winning.
        """
        references = torch.as_tensor(references, dtype=self._tdtype, device=self.device_)
        costs = np.empty((len(sets), references.shape[0]))

        def run(idx):
            with torch.no_grad():  # thread-local in torch
                X, M, W = self._pack_batch(sets, masses, idx)
                P = self._plans(X, M, W, references, positions=False)  # (B, q, n, p)
                # expanded around each set's mean (the same cost for a given P): no cancellation
                # between large ||x||^2, ||z||^2 and <x, z> far from the origin. Pads: x = 0, P = 0
                m = M.to(X.dtype).unsqueeze(-1)
                mu = (X * m).sum(1) / m.sum(1)  # (B, d)
                Xc = (X - mu[:, None]) * m  # (B, n, d)
                Zc = references[None] - mu[:, None, None]  # (B, q, p, d)
                cost = ((P.sum(3) * Xc.square().sum(-1)[:, None]).sum(2)
                        + (P.sum(2) * Zc.square().sum(-1)).sum(2)
                        - 2.0 * (torch.einsum("bqnp,bnd->bqpd", P, Xc) * Zc).sum((2, 3)))
                costs[idx] = to_numpy(cost.clamp_min(0.0))

        # the length batches side by side, one intra-op thread each: the same costs whatever the
        # number of threads
        map_on_threads(run, self._batch_indices(sets), device=self.device_)
        return costs

    # -- public API -----------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, element_weight=None):
        """Fit the references on the training sets.

        Parameters
        ----------
        X : collection of sets (list of (n_i, d) arrays, 1-D object array or 3-D array)
        y : array-like of shape (n_sets,) or (n_sets, n_outputs), or None, default=None
            Labels (classes or continuous targets), used only by ``position_sigma="auto"``;
            ``None`` (or multi-output or per-element labels) keeps no positions. A given ``y``
            is checked as every estimator checks it (one label or row per set; finite; strings
            not mixed with numbers).
        sample_weight : array-like of shape (n_sets,) or None, default=None
            Weight of each set (see the Notes of the class): a set of weight 0 is left out, a
            weight of 2 counts the set twice. ``None``: equal weights.
        element_weight : list of 1-D arrays or None, default=None
            Mass of each element of each set (one array per set, of the set's length;
            non-negative, not all zero, normalised per set): the set's measure in the transport
            plans, and the weights of its elements in the k-means. ``None``: uniform. Pass the
            same to :meth:`transform`.

        Returns
        -------
        self
        """
        seed, rng = self._begin_fit()
        return self._fit(X, y, sample_weight, element_weight, seed, rng)

    def _fit(self, X, y, sample_weight, element_weight, seed, rng):
        sets = self._check_X(X, fitting=True)
        self.n_features_in_ = sets[0].shape[1]
        y = check_choice_labels(y, sets)
        masses = self._check_masses(element_weight, sets)
        sw = check_sample_weight(sample_weight, len(sets), type(self).__name__)
        # sets of weight 0 are left out (exactly), equal weights are no weights
        all_masses = masses
        kept, sw = drop_zero_weight(sw)
        self.input_offset_ = fit_offset(self, sets, masses, kept, sw)
        all_sets = sets = self._shifted_sets(sets, fitting=True)
        if kept is not None:
            sets = [sets[i] for i in kept]
            masses = None if masses is None else [masses[i] for i in kept]
            if y is not None:
                y = np.asarray(y)[kept] if isinstance(y, np.ndarray) else [y[i] for i in kept]
        np_dtype = np.float64 if self._tdtype == torch.float64 else np.float32
        q = self.n_references
        # like NystromFeatures' anchors: no more supports than distinct training elements
        self.n_supports_ = count_distinct(sets if masses is None else [
            s[m > 0] for s, m in zip(sets, masses, strict=True)], self.n_supports)
        if self.n_supports_ < self.n_supports:
            warnings.warn(f"n_supports={self.n_supports} is larger than the number of distinct "
                          f"training elements ({self.n_supports_}); using {self.n_supports_} "
                          "supports.", UserWarning, stacklevel=user_stacklevel())
        if q > 1 and len(sets) < q:
            raise ValueError(f"n_references={q} needs at least {q} training sets"
                             + (" of positive sample_weight" if kept is not None else "")
                             + f", got {len(sets)}.")
        refs, assign, n_iter, self._bary_iter = fit_references(self, sets, rng, masses, sw)
        self.references_ = shifted(self, refs, 1).astype(fitted_dtype(self, np_dtype))
        ref_t = reference_tensor(self)
        scale = weight_scale(sample_weight, sum(len(s) for s in sets))
        self.counts_ = reference_counts(self, sets, masses, sw, assign, rng) * scale
        self.n_samples_seen_ = scale * (len(sets) if sw is None else float(sw.sum()))
        self.n_steps_ = 1
        if kept is not None:  # the sets left out get their lowest-cost reference too
            full = np.zeros(len(all_sets), dtype=np.int64)
            full[kept] = assign
            out = np.setdiff1d(np.arange(len(all_sets)), kept)
            if q > 1:
                full[out] = self._costs(
                    [all_sets[i] for i in out], ref_t,
                    None if all_masses is None else [all_masses[i] for i in out]).argmin(1)
            assign = full
        self.assignments_ = assign
        self.n_iter_ = max(n_iter, self._bary_iter)
        if self.position_sigma == "auto":  # its own stream: no positions fits as None does
            self.position_sigma_, self.position_scores_, raw = select_position_sigma(
                self, sets, y, masses, ref_t, np.random.RandomState((seed + 3) % 2**32))
        else:
            self.position_sigma_, self.position_scores_, raw = self.position_sigma, None, None
        if self.center:
            self.mean_ = input_space_mean(self, self._mean_embedding(sets, ref_t, masses, sw,
                                                                     raw=raw))
        else:
            self.mean_ = np.zeros(q * self.n_supports_ * self.n_features_in_, dtype=np_dtype)
        return self

    def _mean_embedding(self, sets, references, masses, sw, raw=None) -> np.ndarray:
        """The mean raw embedding of ``sets`` (weighted by ``sw``, ``(n_sets,)`` or ``None``;
        ``raw``: their raw embeddings, already computed)."""
        emb = self._raw_embed(sets, references, masses) if raw is None else raw
        mean = emb.mean(0) if sw is None else np.average(emb, axis=0, weights=sw).astype(
            emb.dtype)
        self._check_finite(mean)
        return mean

    def partial_fit(self, X, y=None, sample_weight=None, element_weight=None):
        """Update the references with one chunk of sets (scikit-learn's ``partial_fit``), for
        data that arrives in chunks or does not fit in memory.

        The first call (on an unfitted estimator) is :meth:`fit` on its chunk (``n_supports_``
        and the starting references come from it). Each later call assigns every set of the
        chunk to its reference of lowest transport cost (with several references) and updates
        the references: ``fit_method="kmeans"``, one mini-batch k-means step on the elements
        of each reference's sets (each support moves to the weighted mean of all the elements
        assigned to it so far: counts ``counts_``); ``"wasserstein"``, one barycenter step (the
        Sinkhorn plans of the chunk's sets against the current reference, and each support
        moved to the running average, over all the sets seen, of their barycentric targets
        ``p (P^T x)_j``). With ``center``, ``mean_`` becomes the running mean of the raw
        embeddings of all the sets seen, each chunk's taken with the references of its call. A
        call after :meth:`fit` continues that model; :meth:`fit` starts afresh. It computes in
        the fitted ``dtype``: changed by ``set_params``, it raises a ``ValueError`` naming it
        before anything changes; every fitted attribute is updated only once the whole chunk
        has been processed.

        Parameters
        ----------
        X : collection of sets
            A chunk; the same number of features as the first.
        y : array-like or None, default=None
            Labels of the first call's sets, read as :meth:`fit` reads them
            (``position_sigma="auto"``: the choice is made on the first chunk and kept); unused
            by later calls.
        """
        if not hasattr(self, "references_"):
            return self.fit(X, y, sample_weight=sample_weight, element_weight=element_weight)
        return update_references(self, X, sample_weight, element_weight)

    partial_fit.__doc__ += PARTIAL_FIT_WEIGHTS_DOC

    @property
    def _n_features_out(self):
        return self.references_.shape[0] * self.references_.shape[1] * self.references_.shape[2]

    def transform(self, X, element_weight=None) -> np.ndarray:
        """Embed each set: ``(n_sets, n_references * n_supports * n_features_in_)``.

        Parameters
        ----------
        X : collection of sets
        element_weight : list of 1-D arrays or None, default=None
            Mass of each element of each set (see :meth:`fit`); ``None``: uniform.
        """
        check_is_fitted(self)
        sets = self._check_X(X)
        masses = self._check_masses(element_weight, sets)
        emb = self._raw_embed(sets, reference_tensor(self), masses)  # less the offset's part
        part = offset_embedding(self)
        if self.center or self.normalize:
            # the embedding's one output step (skset.nn.otk.embedding_output, also that of the
            # serving module): a row within the noise of 0 is 0 (the mean embedding), not noise
            # scaled up to norm sqrt(D) (which a permutation of the set would point elsewhere)
            raw = torch.from_numpy(emb)
            mean = self.mean_ if part is None else self.mean_ - part
            mean = torch.as_tensor(mean, dtype=raw.dtype, device=raw.device)
            emb = embedding_output(raw, mean,
                                   self.references_.shape, normalize=self.normalize,
                                   sinkhorn_tol=self.sinkhorn_tol).numpy()
        elif part is not None:
            emb = (emb + part).astype(emb.dtype)
        self._check_finite(emb)
        return emb

    def _check_finite(self, out):
        cause = None
        if self.sinkhorn_method == "exp":
            dt = str(self._tdtype).replace("torch.", "")
            cause = (f"the exp-domain Sinkhorn (sinkhorn_method='exp') under- or overflowed in "
                     f"{dt} at epsilon={self.epsilon:g}, which happens for small epsilon relative "
                     "to the features' scale; use sinkhorn_method='log' or 'auto' (log-domain "
                     "where needed), or a larger epsilon.")
        check_finite_output(out, type(self).__name__, self._tdtype, cause)

    def fit_transform(self, X, y=None, sample_weight=None, element_weight=None):
        """:meth:`fit`, then :meth:`transform` of ``X`` (with the same ``element_weight``)."""
        return self.fit(X, y, sample_weight=sample_weight, element_weight=element_weight
                        ).transform(X, element_weight=element_weight)

    def transport_plan(self, X, element_weight=None) -> list[np.ndarray]:
        """The transport plan of each set onto each reference (positional weights applied).

        Parameters
        ----------
        X : collection of sets
        element_weight : list of 1-D arrays or None, default=None
            Mass of each element of each set (see :meth:`fit`); ``None``: uniform.

        Returns
        -------
        list of ndarray of shape (n_references, n_i, n_supports)
            Entry ``[r, i, j]`` is the mass element ``i`` sends to support ``j`` of reference ``r``.
        """
        check_is_fitted(self)
        sets = self._check_X(X)
        masses = self._check_masses(element_weight, sets)
        ref_t = reference_tensor(self)
        plans: list = [None] * len(sets)
        lengths = [s.shape[0] for s in sets]
        with torch.no_grad():
            for idx, X_, M, W in self._batches(sets, masses):
                P = self._plans(X_, M, W, ref_t)
                self._check_finite(P)  # as transform: no NaN plan returned silently
                P = to_numpy(P)
                for b, i in enumerate(idx):
                    plans[i] = P[b, :, : lengths[i]]
        return plans

    def __sklearn_tags__(self):
        return set_input_tags(super().__sklearn_tags__(), self.dtype)

    _serving_outputs = ("transform",)

    def _serving_module(self, *, sinkhorn_method="log", sinkhorn_iter=None) -> torch.nn.Module:
        """The module :func:`skset.export.serving_module` returns: a fixed Sinkhorn count."""
        from .._serving import OTKEmbeddingServing, set_sinkhorn

        check_is_fitted(self)
        tol = self.sinkhorn_tol
        if sinkhorn_iter is None and tol is not None and tol > 0:
            raise ValueError(
                f"{type(self).__name__} stops Sinkhorn at sinkhorn_tol={tol:g} (at most "
                f"sinkhorn_iter={self.sinkhorn_iter}); an exported graph runs a fixed count: pass "
                "sinkhorn_iter= (the outputs then differ from transform by what the iterations "
                "after that count would still change, often far more than the tolerance: compare "
                "them on your sets), or fit with sinkhorn_tol=None and a sinkhorn_iter of a few hundred "
                "at most (each iteration is unrolled in the graph, so the export's time grows with "
                f"the count: the default {self.sinkhorn_iter} takes many minutes).")
        layer = self.to_module()
        set_sinkhorn(layer, sinkhorn_method, sinkhorn_iter)
        # as transform: mean_ subtracted with center or normalize (mean_ is zeros when fitted
        # with center=False), the raw embedding without either
        mean = self.mean_ if self.center or self.normalize else np.zeros_like(self.mean_)
        offset, part = getattr(self, "input_offset_", None), offset_embedding(self)
        if offset is not None:  # the layer's shifted sets, their part subtracted before centring
            layer.input_offset, mean = None, mean - part
        if offset is not None and layer.position_sigma is not None:  # a feature of ones
            layer.references = torch.nn.Parameter(zero_column(layer.references.detach()))
            layer.in_features += 1
        return OTKEmbeddingServing(layer, mean, self.normalize, self.sinkhorn_tol, offset)

    def to_module(self) -> OTKLayer:
        """A layer with the fitted references of this estimator.

        The layer returns the raw embedding; the estimator's optional centring and normalisation
        of its output (``center``, ``normalize``) is not part of the layer. With
        ``input_offset_`` it reads its sets less it, as ``transform`` does (the references held
        less it too: ``OTKLayer(input_offset=...)``). It takes the estimator's Sinkhorn settings,
        ``sinkhorn_tol`` included: without autograd it gives ``transform``'s raw embedding; under
        autograd it runs ``sinkhorn_iter`` iterations (the estimator's cap, 3000 by default),
        which differs from it by about the tolerance. To train the layer, a small fixed count is
        usual (the paper's supervised models use 10: set ``layer.sinkhorn_iter = 10``).

        Returns
        -------
        layer : skset.nn.OTKLayer
            The equivalent differentiable layer: the fitted references, Sinkhorn and positions.
        """
        check_is_fitted(self)
        refs, offset = reference_tensor(self).cpu(), getattr(self, "input_offset_", None)
        return OTKLayer(refs.shape[2], refs.shape[1], refs.shape[0], epsilon=self.epsilon,
                        sinkhorn_iter=self.sinkhorn_iter, position_sigma=self._position_sigma,
                        method=self.sinkhorn_method, references=refs,
                        sinkhorn_tol=self.sinkhorn_tol, position_mode=self.position_mode,
                        reg_m=self.reg_m, input_offset=None if offset is None
                        else torch.as_tensor(offset, dtype=self._tdtype))
