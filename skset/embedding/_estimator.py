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
from .._label_tasks import TARGET_TYPES, check_target_type
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
from ._docs import OTK_EMBEDDING_DOC
from ._offset import (
    check_offset_plans,
    drop_offset,
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

__all__ = ["OTKEmbedding", "PLAN_PARAMS"]

#: the parameters the plans, references and ``mean_`` of a fit depend on: ``transform``,
#: ``partial_fit`` and ``to_module`` refuse a model whose values changed since its fit, and
#: ``center=True`` on a fit without it (its ``mean_`` is zeros). The output switches
#: ``center=False`` and ``normalize``, the Sinkhorn cap, tolerance and method, ``max_elements``
#: and ``device`` may change freely
PLAN_PARAMS = ("epsilon", "position_sigma", "position_mode", "reg_m")


class OTKEmbedding(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SksetEstimator):
    __doc__ = OTK_EMBEDDING_DOC  # the docstring: _docs.py

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
        "target_type": [*TARGET_TYPES],
        **TORCH_PARAMS,
    }
    _renamed_params = {"max_iter": "barycenter_iter"}  # max_iter means training epochs in skset
    _legacy_params = {"reg_m": None, "target_type": "auto"}  # models saved before these

    def __init__(self, n_supports=10, n_references=1, *, epsilon=0.1, sinkhorn_iter=3000,
                 sinkhorn_tol=1e-4, fit_method="kmeans", position_sigma="auto",
                 position_mode="kernel", reg_m=None, center=True, normalize=True,
                 barycenter_iter=10, max_samples="auto", sinkhorn_method="auto",
                 max_elements=32_768, target_type="auto", device="auto", dtype="float32",
                 random_state=None):
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
        self.target_type = target_type
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    def _check_X(self, X, fitting=False):
        """The checked sets less ``input_offset_``, which every plan reads (a fit's: as given)."""
        coll = check_sets(X, n_features=None if fitting else self.n_features_in_,
                          compute_dtype=self._tdtype)
        self._check_columns(X, fitting)
        return coll.sets if fitting else self._shifted_sets(coll.sets)

    def _check_plan_params(self) -> None:
        """A ``ValueError`` naming each parameter of :data:`PLAN_PARAMS` changed since the fit
        (``set_params``): the references and ``mean_`` were fitted with the old values."""
        fitted = getattr(self, "_fitted_plan", None) or {}  # absent in models saved before it
        changed = [f"{k}={getattr(self, k)!r} (fitted with {v!r})"
                   for k, v in fitted.items() if k != "center" and getattr(self, k) != v]
        if self.center and fitted.get("center", True) is False:
            changed.append("center=True (fitted with False: mean_ is zeros)")
        if changed:
            raise ValueError(f"{type(self).__name__}: {', '.join(changed)}; the references and "
                             "mean_ were fitted with the old values: set them back, or refit.")

    def _shifted_sets(self, sets, fitting=False):
        if not fitting:
            self._check_plan_params()
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
                   position_sigma="fitted", shifted=True) -> np.ndarray:
        """Embeddings ``(n_sets, q*p*d)`` before centring, one batched call per length batch
        (``position_sigma``: a width in place of the estimator's; ``references`` moved to its
        device); with ``input_offset_``, the input sets' less ``_offset.offset_embedding``
        (``shifted=False``: ``sets`` and ``references`` as given, no offset)."""
        references = references.to(self.device_)
        q, p, d = references.shape
        out = np.empty((len(sets), q * p * d), dtype=np.float64 if self._tdtype == torch.float64
                       else np.float32)
        blocks = out.reshape(len(sets), q, p, d)  # a view: each batch writes its own rows
        compile = get_config()["compile"]  # the compiled kernels where skset.set_config says so
        offset = getattr(self, "input_offset_", None) if shifted else None

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
        check_target_type(y, self.target_type, type(self).__name__)
        masses = self._check_masses(element_weight, sets)
        sw = check_sample_weight(sample_weight, len(sets), type(self).__name__)
        # sets of weight 0 are left out (exactly), equal weights are no weights
        all_masses = masses
        kept, sw = drop_zero_weight(sw)
        self.input_offset_ = fit_offset(self, sets, masses, kept, sw)
        given, all_sets = sets, self._shifted_sets(sets, fitting=True)
        sets = all_sets
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
            similarity = self.position_mode == "similarity" and self.input_offset_ is not None
            view = ((given if kept is None else [given[i] for i in kept], torch.as_tensor(
                self.references_, dtype=self._tdtype, device=self.device_)) if similarity else None)
            self.position_sigma_, self.position_scores_, raw = select_position_sigma(
                self, sets, y, masses, ref_t, np.random.RandomState((seed + 3) % 2**32), view)
            if self.position_sigma_ is not None and similarity:  # read the given features
                drop_offset(self, np_dtype)
                sets = given if kept is None else [given[i] for i in kept]
                ref_t, raw = reference_tensor(self), None
        else:
            self.position_sigma_, self.position_scores_, raw = self.position_sigma, None, None
        if self.center:
            self.mean_ = input_space_mean(self, self._mean_embedding(sets, ref_t, masses, sw,
                                                                     raw=raw))
        else:
            self.mean_ = np.zeros(q * self.n_supports_ * self.n_features_in_, dtype=np_dtype)
        self._fitted_plan = {k: getattr(self, k) for k in (*PLAN_PARAMS, "center")}
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
        self._check_plan_params()
        refs, offset = reference_tensor(self).cpu(), getattr(self, "input_offset_", None)
        return OTKLayer(refs.shape[2], refs.shape[1], refs.shape[0], epsilon=self.epsilon,
                        sinkhorn_iter=self.sinkhorn_iter, position_sigma=self._position_sigma,
                        method=self.sinkhorn_method, references=refs,
                        sinkhorn_tol=self.sinkhorn_tol, position_mode=self.position_mode,
                        reg_m=self.reg_m, input_offset=None if offset is None
                        else torch.as_tensor(offset, dtype=self._tdtype))
