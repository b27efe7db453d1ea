"""Attention-Based Clustering (ABC): a kernel learned from labelled instances and applied, with
spectral clustering and the eigengap, to many new instances at once."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import spectral_clustering
from sklearn.utils.validation import check_is_fitted

from .._sets import length_batches
from .._torch import (
    make_generator,
    map_on_threads,
    seed_from_random_state,
)
from .._validation import POSITIVE_INT, TORCH_PARAMS, Boolean, Integer, Param, Satisfies
from ..neural_network._base import BaseNeuralEstimator
from ..neural_network._training import TRAINING_PARAMS
from ..nn.spectral import eigengap_n_clusters, laplacian_eigh
from ._eigengap import _CPU_CHUNK_PAIRS

__all__ = ["ABCClusterer"]

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
    hidden_size : int, default=128
        Width of the embedding and the SABs.
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
    max_steps : int, default=1000
        Number of optimisation steps (one step = one batch of ``batch_size`` instances).
    batch_size : int, default=32
        Instances per step.
    learning_rate_init : float, default=1e-3
        Step size of the optimiser (1e-4 to 1e-3; lowering it once the loss plateaus helps).
    alpha : float, default=0.0
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
    >>> abc = ABCClusterer(hidden_size=16, n_heads=2, max_steps=5, batch_size=8,
    ...                    random_state=0).fit(X, y)
    >>> labels = abc.predict(X[:2], n_clusters=4)
    >>> [lab.shape for lab in labels]
    [(40,), (40,)]
    """

    _params = {
        "compatibility": Param("multiplicative", "multiplicative", "additive", positional=True),
        "hidden_size": Param(128, POSITIVE_INT),
        "n_layers": Param(2, Integer(0)),
        "n_heads": Param(4, POSITIVE_INT),
        "compat_dim": Param(None, POSITIVE_INT, None),
        "norm": Param("layer", "layer", "set", None),
        "residual": Param("original", "original", "clean"),
        "input_similarity": Param(None, None, "rbf", "cosine"),
        "class_weight": Param(None, None, "balanced", _PAIR_OF_WEIGHTS),
        "standardize": Param(True, Boolean()),
        "instance_size": Param(100, Integer(2)),
        "instance_n_clusters": Param((2, 6), POSITIVE_INT, _CLUSTER_RANGE),
        "max_steps": Param(1000, POSITIVE_INT),
        "batch_size": Param(32, POSITIVE_INT),
        "learning_rate_init": TRAINING_PARAMS["learning_rate_init"],
        "alpha": TRAINING_PARAMS["alpha"],
        "optimizer": TRAINING_PARAMS["optimizer"],
        "eval_every": Param(50, POSITIVE_INT),
        "early_stopping": TRAINING_PARAMS["early_stopping"],
        "validation_fraction": TRAINING_PARAMS["validation_fraction"],
        "n_validation_instances": Param(64, POSITIVE_INT),
        "n_iter_no_change": TRAINING_PARAMS["n_iter_no_change"],
        "tol": TRAINING_PARAMS["tol"],
        "max_clusters": Param(None, POSITIVE_INT, None),
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

        self._check_params()
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

        warm = bool(self.warm_start) and hasattr(self, "module_")
        seed, rng = self._start_fit(warm)
        dev = self.device_
        gen = make_generator(seed, "cpu")
        if not warm:
            self.n_features_in_ = d
            if self.standardize:
                self.mean_ = elements.mean(0)
                sd = elements.std(0)
                self.scale_ = np.where(sd > 1e-12, sd, 1.0)
            self.module_ = self._seeded(seed, lambda: self._build_module(d)).to(dev)
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

        max_steps = int(self.max_steps)
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
            for idx in length_batches(self._batch_cost(vlen), max_elements=self.max_pairs):
                val_parts.append(to_batch([val_batch[0][i] for i in idx],
                                          [val_batch[1][i] for i in idx]))

            def validation(module):
                tot = sum(float(abc_loss(module(Xb, Mb), Yb, Mb, class_weight=cw)) * len(Xb)
                          for Xb, Mb, Yb in val_parts)
                return -tot / len(vlen)

        # one "epoch" of the loop = eval_every optimisation steps
        self._train(loss_fn, batches, validation=validation, max_iter=n_chunks,
                    warn_convergence=False, units_per_epoch=every, max_units=max_steps)
        return self

    def _build_module(self, n_features: int):
        from ..nn.abc import ABCKernel

        return ABCKernel(n_features, self.hidden_size, self.n_layers, self.n_heads,
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
        from ..nn.abc import abc_affinity

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
        from ..nn.spectral import spectral_cluster

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

