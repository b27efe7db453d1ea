"""The inference of a trained :class:`ABCClusterer` on new instances: the affinity of each, and
its clustering, in chunks of similar sizes (run side by side on the CPU's threads): the
Laplacian eigendecomposition, the number of clusters, the spectral embedding and k-means all
run on the whole chunk."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import spectral_clustering
from sklearn.utils.validation import check_is_fitted

from .._sets import check_sets, length_batches, pack
from .._torch import CPU_CHUNK_PAIRS, make_generator, map_on_threads, seed_from_random_state
from ..nn.abc import abc_affinity
from ..nn.spectral import laplacian_eigh, spectral_cluster
from ._abc_data import pair_cost


def first_appearance_labels(labels: np.ndarray) -> np.ndarray:
    """Relabel a partition ``0 .. k-1`` in the order in which its clusters first appear.

    The same partition always gets the same labels, whatever numbering k-means gave it (a
    spectral embedding's sign, which differs between runs on a GPU, permutes k-means' labels).
    """
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.ravel()]


def first_appearance_rows(labels: torch.Tensor) -> np.ndarray:
    """:func:`first_appearance_labels` of every row of a padded batch ``(B, n)`` (``-1`` on
    padding) at once: each row's clusters ranked by the position of their first element (a
    cluster absent from a row ranks after the present ones, whose ranks are ``0 .. k-1``)."""
    B, n = labels.shape
    dev = labels.device  # every tensor on it (never the default device)
    valid = labels >= 0
    lab = torch.where(valid, labels, torch.zeros_like(labels))
    k = int(lab.max()) + 1 if lab.numel() else 1
    pos = torch.where(valid, torch.arange(n, device=dev).expand(B, n), torch.full_like(labels, n))
    first = torch.full((B, k), n, dtype=torch.int64, device=dev).scatter_reduce(1, lab, pos, "amin")
    rank = torch.empty_like(first).scatter_(1, torch.argsort(first, dim=1, stable=True),
                                            torch.arange(k, device=dev).expand(B, k).contiguous())
    return torch.where(valid, rank.gather(1, lab), labels).numpy()


class KernelInference:
    """``affinity`` and ``predict`` of :class:`ABCClusterer`, with the standardisation of the
    inputs (``_scale``) and their chunks of similar sizes (``_chunks``); :class:`ABCClusterer`
    gives the fitted network and, through
    :class:`~skset.cluster._abc_select.KernelSelection`, the k rule."""

    def _scale(self, sets):
        """The sets standardised as in the fit, in one pass over all their rows (each set its
        own view of the result); a ``ValueError`` naming the first set beyond float32's range."""
        fitted = "mean_" in self.__dict__  # the fit's standardisation, whatever set_params says
        if not sets:
            return sets
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
        flat = np.concatenate(sets)
        if fitted:
            flat = (flat - self.mean_) / self.scale_
        limit = float(np.finfo(np.float32).max)  # the network reads float32
        row_top = np.abs(flat).max(1) if flat.shape[1] else np.zeros(len(flat))
        if not (row_top <= limit).all():
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            tops = np.maximum.reduceat(row_top, starts)
            i = int(np.flatnonzero(~(tops <= limit))[0])
            raise ValueError(f"X: set {i} has values of magnitude {tops[i]:.3g} "
                             f"{'after the standardisation ' if fitted else ''}"
                             f"beyond float32's range ({limit:.3g}); rescale the data.")
        return np.split(flat, np.cumsum(lengths)[:-1])

    def _chunks(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Index chunks of similar sizes for inference.

        On a GPU a chunk fills the ``max_pairs`` budget. On a CPU chunks are capped at
        ``CPU_CHUNK_PAIRS`` padded pairs (they run in parallel on the intra-op threads, see
        :func:`skset._torch.map_on_threads`): the SAB activations of one chunk then stay in
        cache, which is faster than one batch (``benchmarks/bench_abc.py profile``).
        """
        budget = int(self.max_pairs)
        if self.device_.type == "cpu":
            budget = min(budget, CPU_CHUNK_PAIRS)
        return list(length_batches(self._batch_cost(lengths), max_elements=budget))

    def _batch_cost(self, lengths):
        return pair_cost(lengths)


    def _check_X(self, X):
        check_is_fitted(self, "module_")
        coll = check_sets(X, name="X", n_features=self.n_features_in_)
        self._check_columns(X, fitting=False)
        return coll

    def _chunk_affinity(self, sets):
        """Affinity (B, n, n) float32 and mask of one chunk of (scaled) sets (callers run it
        under ``torch.no_grad()``)."""
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
            k rule (``n_clusters_rule``: the eigengap or the calibrated threshold,
            ``eigen_threshold_``), within ``min_clusters`` and ``max_clusters``.

        Returns
        -------
        list of ndarray of shape (n_i,)
            Labels ``0 .. k_i - 1`` of each instance, numbered in the order in which the
            clusters first appear (the same partition always gets the same labels).
        """

        self._check_params()  # what predict reads may have been set since the fit
        coll = self._check_X(X)
        ks = self._n_clusters_arg(n_clusters, len(coll))
        # the calibrated threshold where the rule says so: "eigengap" set since reads the gap
        threshold = getattr(self, "eigen_threshold_", None) \
            if self.n_clusters_rule == "calibrated" else None
        lengths = coll.lengths
        sets = self._scale(coll.sets)
        seed = getattr(self, "_predict_seed", None)  # drawn in fit (models saved before: here)
        if seed is None:
            seed = seed_from_random_state(self.random_state)
        self.module_.eval()

        def run(idx):
            with torch.no_grad():
                A, M = self._chunk_affinity([sets[i] for i in idx])
                k_b = None if ks is None else torch.from_numpy(ks[idx]).to(M.device)
                if self.assign_labels == "kmeans":
                    # float32: batched eigh is ~10x faster than in float64 on a CPU, and the
                    # eigengap uses the float32 tolerance (1e-4). Every chunk seeds k-means
                    # alike (batched_kmeans draws per restart, not per instance), so an
                    # instance's labels depend neither on the others in X nor on the threads
                    # (up to the rounding of the padded eigendecomposition).
                    gen = make_generator(seed, "cpu")
                    labels, _, _ = spectral_cluster(A, M, k_b, max_clusters=self._max_k(),
                                                    min_clusters=self._min_k(),
                                                    threshold=threshold,
                                                    n_init=self.n_init, generator=gen)
                    return first_appearance_rows(labels.cpu()), None
                if k_b is None:
                    w = laplacian_eigh(A, M, eigenvectors=False)
                    k_b = self._k_rule().n_clusters(w, M.sum(1), threshold)
                return A.cpu().numpy().astype(np.float64), k_b.cpu().numpy()

        chunks = self._chunks(lengths)
        out = [None] * len(coll)
        results = map_on_threads(run, chunks, self.device_)
        for idx, (res, k_b) in zip(chunks, results, strict=True):
            for r, i in enumerate(idx):
                m = lengths[i]
                if k_b is None:  # relabelled in run, the whole chunk at once
                    out[i] = res[r, :m]
                    continue
                else:
                    # the scikit-learn reference path (a Python loop, not threaded)
                    k = min(int(k_b[r]), int(m))
                    if k == 1:
                        out[i] = np.zeros(m, dtype=np.int64)
                        continue
                    lab = spectral_clustering(res[r, :m, :m], n_clusters=k, n_init=self.n_init,
                                              random_state=seed)
                out[i] = first_appearance_labels(lab)
        return out

