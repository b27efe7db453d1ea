"""Per-element kernel feature maps for sets: :class:`NystromFeatures`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.cluster import KMeans
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import SksetEstimator, set_input_tags
from ._kmer_inputs import KmerInputs
from ._label_tasks import TARGET_TYPES, check_target_type, target_kind
from ._map_selection import (
    DEFAULT_CHOICE,
    constant_below,
    distinct_rows,
    format_window_scores,
    has_distinct_rows,
    median_scale,
    sample_sets,
    select_element_map,
    select_window,
    unit_rows,
)
from ._nystrom_docs import NYSTROM_FEATURES_DOC
from ._nystrom_rows import check_bandwidth_range, map_rows
from ._offsets import recentred, unstandardized_mean
from ._sets import check_choice_labels, check_kmer_lengths, check_sets, kmer_index, kmer_windows, to_numpy
from ._streaming import PARTIAL_FIT_WEIGHTS_DOC, center_counts, minibatch_kmeans_step, step_rng, weight_scale
from ._threads import one_thread, user_stacklevel
from ._torch import resolve_dtype
from ._validation import POSITIVE, POSITIVE_INT, TORCH_PARAMS, Boolean, Integer, Real, check_sample_weight
from ._weighting import (
    check_kept_sets,
    element_masses,
    kmer_weights,
    positive_rows,
    positive_sets,
    resolve_max_samples,
    sample_elements,
    set_totals,
    weighted_mean_std,
)
from .nn.nystrom import (
    DEFAULT_EIGENVALUE_FLOOR,
    DEFAULT_N_COMPONENTS,
    NystromLayer,
    anchor_gram,
    inv_sqrt_psd,
)

__all__ = ["NystromFeatures"]


@dataclass(frozen=True)
class _TrainingElements:
    """What :meth:`NystromFeatures._training_elements` returns: a fit's inputs, checked."""

    #: the checked collection (its form, lengths, features)
    coll: object
    #: the sets the standardisation and the map see (:meth:`NystromFeatures._map_inputs`): the
    #: checked sets, or the coded k-mers of each set (views of ``raw``)
    sets: list
    #: the k-mer window of ``sets`` (1 for coded k-mers)
    window: int
    #: the length of each of ``sets``
    lengths: np.ndarray
    #: the elements (or coded k-mers) of ``sets`` stacked, ``(sum(lengths), width)``
    raw: np.ndarray
    #: the weight of each row of ``raw`` (``None``: equal)
    weights: np.ndarray | None
    #: the largest raw ``sample_weight`` (the checked weights are relative to it)
    scale: float


class NystromFeatures(KmerInputs, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                      SksetEstimator, auto_wrap_output_keys=None):  # set-valued output
    __doc__ = NYSTROM_FEATURES_DOC  # the docstring: _nystrom_docs.py

    _output_rows = "element"  # one feature row per element of each set (or per k-mer)
    _parameter_constraints = {
        "n_components": [POSITIVE_INT],
        "bandwidth": ["auto", POSITIVE],
        "window": ["auto", POSITIVE_INT],
        "dilation": ["auto", POSITIVE_INT],
        "kmer_coding": ["level_shape", "plain"],
        "standardize": ["auto", Boolean()],
        "normalize": ["auto", Boolean()],
        "keep_norm": ["auto", Boolean()],
        "anchors": ["kmeans", "random"],
        "max_samples": ["auto", POSITIVE_INT],
        "eigenvalue_floor": [Real(0, 1, closed="left")],
        "max_elements": [POSITIVE_INT],
        "target_type": [*TARGET_TYPES],
        "verbose": [Integer(0), Boolean()],
        **TORCH_PARAMS,
    }

    def __init__(self, n_components=DEFAULT_N_COMPONENTS, *, bandwidth="auto", window="auto",
                 dilation="auto", kmer_coding="level_shape", standardize="auto", normalize="auto",
                 keep_norm="auto", anchors="kmeans",
                 max_samples="auto", eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
                 max_elements=262_144, target_type="auto", verbose=0, device="auto", dtype="float32",
                 random_state=None):
        self.n_components = n_components
        self.bandwidth = bandwidth
        self.window = window
        self.dilation = dilation
        self.kmer_coding = kmer_coding
        self.standardize = standardize
        self.normalize = normalize
        self.keep_norm = keep_norm
        self.anchors = anchors
        self.max_samples = max_samples
        self.eigenvalue_floor = eigenvalue_floor
        self.max_elements = max_elements
        self.target_type = target_type
        self.verbose = verbose
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    #: models saved before k-mers were coded as level + shape used plain k-mers, before dilated
    #: k-mers contiguous ones, before target_type read targets as "auto" does
    _legacy_params = {"kmer_coding": "plain", "dilation": 1, "target_type": "auto"}

    def _choose_map(self, coll, sets, window, y, mean, std, rng, incumbent: dict) -> None:
        """Resolve the ``"auto"`` parameters (``standardize_``, ``normalize_``, ``keep_norm_``,
        ``relative_bandwidth_``, ``selection_scores_``), from ``incumbent`` (the fixed choice
        without labels, and the incumbent with them); see :mod:`skset._map_selection`."""
        fixed = {k: getattr(self, k) for k in DEFAULT_CHOICE}
        if all(v != "auto" for v in fixed.values()):
            choice, scores = dict(fixed), None
        else:
            y_sel, target_type = y, self.target_type
            if coll.form == "2d":  # a pool of elements: each row is a set of one (labels per row)
                if self._width > 1 or y is None:  # k-mers span rows: a row label labels no k-mer
                    sets, y_sel = [], None
                else:  # the sample the selection scores, drawn here from the pool's rows
                    target_type = target_kind(y, target_type)  # read on every row's label
                    rows, y_sel = sample_sets(coll.sets[0], y, rng)
                    sets = [r[None, :] for r in rows]
            choice, scores = select_element_map(
                sets, y_sel, mean=mean, scale=std, window=window, dilation=self._dilation,
                n_components=self.n_components, fixed=fixed, eigenvalue_floor=self.eigenvalue_floor,
                rng=rng, dtype=self.dtype_, default=incumbent, target_type=target_type)
        self.standardize_ = bool(choice["standardize"])
        self.normalize_ = bool(choice["normalize"])
        self.keep_norm_ = bool(choice["keep_norm"])
        self.relative_bandwidth_ = float(choice["bandwidth"])
        self.selection_scores_ = scores

    def _choose_window(self, coll, y, rng, incumbent: dict) -> None:
        """Resolve ``window="auto"`` (:func:`skset._map_selection.select_window`; a pool: 1)."""
        if coll.form != "2d":
            step = 1 if self.dilation == "auto" else int(self.dilation)  # widths read with it
            self.window_, dilation, self.window_scores_ = select_window(
                coll.sets, y, kmer_coding=self.kmer_coding, default=incumbent,
                fixed={k: getattr(self, k) for k in DEFAULT_CHOICE}, rng=rng,
                n_components=self.n_components, eigenvalue_floor=self.eigenvalue_floor,
                dtype=self.dtype_, dilate=self.dilation == "auto", dilation=step,
                target_type=self.target_type)
            if self.dilation == "auto" or self.window_ == 1:  # single elements: no dilation
                self.dilation_ = dilation

    def _check_y(self, y, coll):
        """``y`` checked as every estimator checks it (and against ``target_type``), or
        ``None``; per-element labels and multi-output ``y`` choose nothing
        (:func:`skset._sets.check_choice_labels`)."""
        y = check_choice_labels(y, coll.sets, pool=coll.form == "2d")
        check_target_type(y, self.target_type, type(self).__name__)
        return y

    def _positive_sets(self, X, y, sample_weight, element_weight):
        """The inputs of the sets of positive weight (:func:`positive_sets`), checked first."""
        coll = self._elements(X, fitting=True, lengths=False)
        if coll.form == "2d":
            return X, y, sample_weight, element_weight
        sw = check_sample_weight(sample_weight, len(coll.lengths), type(self).__name__)  # named
        check_kept_sets(coll, sw, self._width, self._dilation, element_weight, type(self).__name__)
        return positive_sets(X, self._check_y(y, coll), sample_weight, element_weight)  # as given

    def _elements(self, X, *, fitting: bool, lengths: bool = True):
        """The checked collection of X (``lengths``: and, fitting, the sets as long as a k-mer)."""
        if isinstance(X, torch.Tensor) or not isinstance(X, (list, tuple, np.ndarray)) and hasattr(
                X, "__array__") and not hasattr(X, "columns"):  # a frame keeps its column names
            X = to_numpy(X) if isinstance(X, torch.Tensor) else np.asarray(X)
        elif isinstance(X, (list, tuple)) and len(X) and (  # np.ndim raises on a ragged set
                getattr(X[0], "ndim", None) or np.asarray(X[0], dtype=object).ndim) == 1:
            # a nested list of rows is one pool of elements (as scikit-learn reads it)
            try:
                X = np.asarray(X, dtype=float)
            except ValueError:
                pass  # ragged: check_sets names the offending set
        if (isinstance(X, np.ndarray) and X.ndim == 2) or hasattr(X, "iloc"):  # a pool
            arr = validate_data(self, X, reset=fitting, dtype=[np.float64, np.float32],
                                ensure_min_samples=self._min_elements if fitting else 1)
            coll = check_sets(arr, allow_pool=True,
                              min_elements=self._min_elements if fitting else 1,
                              compute_dtype=self.dtype,
                              n_features=None if fitting else self.n_features_in_)
        else:
            coll = check_sets(X, n_features=None if fitting else self.n_features_in_,
                              compute_dtype=self.dtype, allow_pool=getattr(X, "ndim", 0) == 1)
            self._check_columns(X, fitting)
            if fitting:
                self.n_features_in_ = coll.n_features
        if fitting and lengths:  # a fitted map reads a shorter set as one k-mer (kmer_index)
            check_kmer_lengths(coll.lengths, self._width, dilation=self._dilation)
        return coll

    def _training_elements(self, X, sample_weight, element_weight, *, fitting: bool,
                           coll=None) -> _TrainingElements:
        """Validate a fit's inputs: the checked collection, the sets, window and lengths of
        :meth:`_map_inputs`, their elements (or coded k-mers) stacked, the weight of each and
        the scale of ``sample_weight`` (:class:`_TrainingElements`); ``coll``: ``X`` already
        checked by :meth:`_elements`."""
        coll = self._elements(X, fitting=fitting) if coll is None else coll
        lengths = coll.lengths
        sw = check_sample_weight(sample_weight, lengths.sum() if coll.form == "2d" else
                                 len(lengths), type(self).__name__)
        # the weight of every raw element: its row's (pool) or its set's
        ew = None if sw is None else (sw if coll.form == "2d" else np.repeat(sw, lengths))
        if element_weight is not None:
            if coll.form == "2d":
                raise ValueError(f"{type(self).__name__}: element_weight needs a collection of "
                                 "sets; for a 2-D pool of elements use sample_weight (one weight "
                                 "per row).")
            masses = element_masses(element_weight, coll.sets, type(self).__name__)
            if masses is not None:  # uniform masses are no weights; each set keeps its total n_i
                em = np.concatenate(set_totals(masses))  # (elements of mass 0 out), shared by mass
                ew = em if ew is None else ew * em

        sets, window, lengths = self._map_inputs(coll)
        if self._coded and ew is not None:  # a coded k-mer weighs the mean of its elements'
            ew = np.concatenate(kmer_weights(np.split(ew, np.cumsum(coll.lengths)[:-1]),
                                             self._width, self._dilation))
        raw = sets[0] if self._coded else np.concatenate(sets, axis=0)  # coded: stacked already
        if self._coded:  # the coded k-mers are read as views of raw from here on (one copy)
            sets = np.split(raw, np.cumsum(lengths)[:-1])
        return _TrainingElements(coll=coll, sets=sets, window=window, lengths=lengths,
                                 raw=raw, weights=ew, scale=weight_scale(sample_weight, len(raw)))

    def _anchor_elements(self, raw, ew, window, lengths, rng):
        """``(elements, weights)`` the anchors learn from: ``raw`` standardised, cut into k-mers,
        sampled (``max_samples``) and projected on the sphere as the map does."""
        if window > 1:  # all elements standardised at once, then k-mers per set
            std_sets = np.split((raw - self.mean_) / self.scale_, np.cumsum(lengths)[:-1])
            elems = np.concatenate(kmer_windows(std_sets, window, dilation=self._dilation), axis=0)
            if ew is not None:  # a k-mer weighs the mean of its elements' weights
                ew = np.concatenate(kmer_weights(np.split(ew, np.cumsum(lengths)[:-1]), window,
                                                 self._dilation))
        else:  # rows sampled first, then standardised: the same rows, one copy of the sample
            elems = raw
        max_samples = resolve_max_samples(self.max_samples, elems.shape[1], self.n_components)
        elems, w, unit = sample_elements(elems, ew, max_samples, rng)
        if window == 1:
            elems = elems - self.mean_
            elems /= self.scale_
        return (unit_rows(elems) if self.normalize_ else elems), w, unit

    def _set_anchors(self, anchors) -> None:
        """``anchors_`` (projected on the sphere with ``normalize_``) and ``normalization_``."""
        if self.normalize_:
            anchors = unit_rows(anchors)
        np_dtype = np.float64 if self.dtype_ == torch.float64 else np.float32
        self.anchors_ = anchors.astype(np_dtype)
        w = torch.as_tensor(self.anchors_, device="cpu")
        norm = inv_sqrt_psd(anchor_gram(w.double(), self.bandwidth_), self.eigenvalue_floor)
        self.normalization_ = to_numpy(norm).astype(np_dtype)

    # -- fit / transform ------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None, element_weight=None):
        """Fit the standardisation and the anchors on the elements of ``X``.

        Parameters
        ----------
        X : collection of sets, or ndarray of shape (n_elements, n_features)
        y : array-like of shape (n_sets,) or (n_sets, n_outputs), or None, default=None
            Labels (classes or continuous targets), used only to choose the ``"auto"``
            parameters; ``None`` (or multi-output ``y``) takes the fixed choice. A given ``y``
            is checked as every estimator checks it (one label or row per set, or per row of a
            2-D pool; finite; strings not mixed with numbers: a ``ValueError`` / ``TypeError``
            naming ``y``); per-element labels (one 1-D array per set, of its length, as
            :class:`~skset.ABCClusterer` takes after this step in a ``Pipeline``) are accepted
            and choose nothing.
        sample_weight : array-like of shape (n_sets,) or None, default=None
            Weight of each set (of each row for a 2-D pool of elements), given to its elements in
            the standardisation, the k-means of the anchors and the median distance that scales
            the bandwidth: weight 0 leaves a set out exactly, equal weights are no weights (an
            integer weight counts a set that many times, up to the random draws of k-means++
            and of the bandwidth's pairs). ``None``: equal weights.
        element_weight : list of 1-D arrays or None, default=None
            Mass of each element of each set (one array per set, of the set's length;
            non-negative, not all zero, normalised per set), as in :meth:`OTKEmbedding.fit`:
            each set keeps its total weight (``n_i``, its elements of positive mass, times its
            ``sample_weight``) in the standardisation, the k-means and the bandwidth, shared by
            ``element_weight`` (an element of mass 0 is a removed element; a k-mer weighs
            the mean of its elements' weights). Uniform masses are exactly ``None``. Not for a
            2-D pool of elements (its ``sample_weight`` is already per element). The map itself
            (``transform``) does not depend on masses.

        Returns
        -------
        self
        """
        return self._fit_with_incumbent(X, y, sample_weight, element_weight,
                                        incumbent=DEFAULT_CHOICE)

    def _fit_with_incumbent(self, X, y=None, sample_weight=None, element_weight=None, *,
                            incumbent: dict):
        """:meth:`fit`, with ``incumbent`` (the four map parameters, as ``DEFAULT_CHOICE``) in
        place of the fixed choice of the ``"auto"`` parameters: taken without usable labels, and
        kept with them unless a candidate beats it by more than noise
        (:func:`skset._map_selection.select_element_map`'s ``default``). Private: ``fit`` passes
        ``DEFAULT_CHOICE``; the supervised OTK models (``skset.neural_network._otk``) pass the
        paper's map, ``PAPER_MAP``. The fitted estimator is a plain ``NystromFeatures`` (a later
        ``fit`` or ``clone`` starts from ``DEFAULT_CHOICE`` again)."""
        seed, rng = self._begin_fit()
        np_dtype = np.float64 if self.dtype_ == torch.float64 else np.float32
        self.__dict__.pop("_fitted_kmers", None)  # not a former fit's k-mers (coding, width)
        self.window_, self.dilation_ = (1 if v == "auto" else int(v) for v in (self.window, self.dilation))
        if sample_weight is not None:  # sets of weight 0 take no part, in the choices either
            X, y, sample_weight, element_weight = self._positive_sets(X, y, sample_weight, element_weight)
        data = self._training_elements(X, sample_weight, element_weight, fitting=True)
        y = self._check_y(y, data.coll)
        self.window_scores_ = None
        if self.window == "auto":  # its own stream: keeping 1 fits exactly as window=1
            self._choose_window(data.coll, y, np.random.RandomState((seed + 2) % 2**32), incumbent)
            if self.window_ > 1:
                data = self._training_elements(X, sample_weight, element_weight, fitting=True,
                                               coll=data.coll)
        raw, ew, window, lengths = data.raw, data.weights, data.window, data.lengths
        mean, std = weighted_mean_std(raw, ew, keep_dtype=True)
        # constant: a spread within rounding noise of the feature's magnitude (any scale alike)
        top = np.abs(raw if ew is None else raw[ew > 0]).max(0)
        std = np.where(constant_below(std, top), 1.0, std)
        # its own stream (taking the fixed choice, the fit is exactly the one given it); weight > 0
        coll, sets, y_map = positive_rows(data.coll, data.sets, y, ew, window == 1 or self._coded)
        self._choose_map(coll, sets, window, y_map, mean, std, np.random.RandomState((seed + 1) % 2**32),
                         incumbent)
        if self.standardize_:
            self.mean_, self.scale_ = mean.astype(np_dtype), std.astype(np_dtype)
        else:  # zeros; in float32 the mean of features far from zero (skset._offsets)
            self.mean_ = unstandardized_mean(self, mean, std, np_dtype)
            self.scale_ = np.ones(raw.shape[1], dtype=np_dtype)
        elems, w, unit = self._anchor_elements(raw, ew, window, lengths, rng)

        if (self.anchors == "kmeans" and self.n_components < elems.shape[0]
                and has_distinct_rows(elems, self.n_components)):
            k = self.n_components  # enough distinct rows for k-means: no need to list them
        else:
            first = distinct_rows(elems)  # relative to the elements' scale
            n_distinct = len(first)
            k = min(self.n_components, n_distinct)
        if k < self.n_components:
            sphere = " on the sphere (normalize)" if self.normalize_ else ""
            among = (f" among the {len(elems)} {'k-mers' if window > 1 else 'elements'} the anchors are "
                     f"drawn from, max_samples={self.max_samples}" if window > 1 or len(elems) < len(raw)
                     else "")
            warnings.warn(f"n_components={self.n_components} is larger than the number of distinct "
                          f"training elements as the map reads them{sphere} ({n_distinct}{among}); "
                          f"using {k} anchors.", UserWarning, stacklevel=user_stacklevel())
        if self.anchors == "kmeans" and k < elems.shape[0]:
            km = KMeans(n_clusters=k, n_init=1, random_state=rng.randint(2**31 - 1))
            with one_thread():  # the same anchors whatever the threads
                anchors = km.fit(elems, sample_weight=w).cluster_centers_
        else:
            anchors = elems[rng.choice(np.sort(first), k, replace=False)]
        self.n_components_ = k

        if self.normalize_ and self.bandwidth != "auto":
            self.bandwidth_ = float(self.bandwidth)  # an explicit bandwidth on the sphere
        else:  # relative to the data: median distance of sampled pairs / sqrt(2)
            self.bandwidth_ = float(self.relative_bandwidth_) * median_scale(elems, rng, w)
        given = self.normalize_ and self.bandwidth != "auto"
        check_bandwidth_range(type(self).__name__, self.bandwidth_, np_dtype, given)
        if self.verbose:
            if self.window_scores_:
                print(f"[NystromFeatures] k-mer width: window={self.window_}, "
                      f"dilation={self.dilation_} (scores "
                      f"{format_window_scores(self.window_scores_)})")
            print(f"[NystromFeatures] element map: standardize={self.standardize_}, "
                  f"normalize={self.normalize_}, keep_norm={self.keep_norm_}, bandwidth "
                  + (f"{self.bandwidth_:.4g} (given, on the unit sphere)" if given else
                     f"{self.relative_bandwidth_} x scale = {self.bandwidth_:.4g}") + " "
                  f"({'chosen on y' if self.selection_scores_ else 'not chosen'})")
        self._set_anchors(anchors)
        self.counts_ = data.scale * unit * center_counts(self.anchors_, elems, w)
        self.n_steps_ = 1
        self._fitted_kmers = self._kmers_key(self._width, self._dilation)
        return self

    def partial_fit(self, X, y=None, sample_weight=None, element_weight=None):
        """Update the anchors with one chunk of sets (scikit-learn's ``partial_fit``), for data
        that arrives in chunks or does not fit in memory.

        The first call (on an unfitted estimator) is :meth:`fit` on its chunk: every choice
        that reads the data is made there, **from the first chunk**, and stays fixed afterwards
        (the ``"auto"`` map and its labels ``y``, the standardisation ``mean_`` / ``scale_``,
        the bandwidth, the number of anchors), so make the first chunk representative. Each
        later call assigns the chunk's elements (standardised, as k-mers, sampled and projected
        as in ``fit``) to their nearest anchor and moves every anchor to the weighted mean of all
        the elements assigned to it so far (a mini-batch k-means step with the counts
        ``counts_``), then recomputes ``normalization_``; ``y`` is ignored there. With
        ``anchors="random"`` the anchors are drawn from the first chunk and stay fixed. A call
        after :meth:`fit` continues that model; :meth:`fit` starts afresh.

        Parameters
        ----------
        X : collection of sets, or ndarray of shape (n_elements, n_features)
            A chunk; the same number of features as the first.
        y : array-like of shape (n_sets,) or None, default=None
            Labels of the first chunk, used to choose the ``"auto"`` parameters (see
            :meth:`fit`); checked as :meth:`fit` checks them, and otherwise unused, by later
            calls.

        A later call continues the fitted model in its ``dtype``, ``window`` and
        ``kmer_coding``: when ``set_params`` changed one of them, it raises a ``ValueError``
        naming it before anything changes (:meth:`fit` starts afresh with the new values).
        """
        if not hasattr(self, "anchors_"):
            return self.fit(X, y, sample_weight=sample_weight, element_weight=element_weight)
        self._check_warm_dtype(self.anchors_.dtype)
        self._check_warm_params()
        data = self._training_elements(X, sample_weight, element_weight, fitting=False)
        self._check_y(y, data.coll)  # checked as fit checks it, though a later call does not use it
        elems, w, unit = self._anchor_elements(data.raw, data.weights, data.window, data.lengths,
                                         step_rng(self.random_state, self.n_steps_))
        if self.anchors == "kmeans" and len(elems):
            anchors, self.counts_ = minibatch_kmeans_step(
                self.anchors_, self.counts_, elems, data.scale * unit * (np.ones(len(elems)) if w is None
                                                                  else w))
            self._set_anchors(anchors)
        self.n_steps_ += 1
        return self

    partial_fit.__doc__ += PARTIAL_FIT_WEIGHTS_DOC

    @property
    def _n_features_out(self):
        return self.n_components_

    def transform(self, X):
        """Map every element (or k-mer) of every set.

        Parameters
        ----------
        X : collection of sets, or ndarray of shape (n_elements, n_features)

        Returns
        -------
        Same form as ``X``: per set an array ``(n_i - window + 1, n_components_)``.
        """
        check_is_fitted(self)
        coll = self._elements(X, fitting=False)
        sets, window, lengths = self._map_inputs(coll)
        tdtype = getattr(self, "dtype_", None) or resolve_dtype(self.dtype)  # the fit's
        dev = self.device_
        scale, anchors, norm = (torch.as_tensor(a, dtype=tdtype, device=dev)
                                for a in (self.scale_, self.anchors_, self.normalization_))
        flat = sets[0] if len(sets) == 1 else np.concatenate(sets, axis=0)
        flat, mean = recentred(flat, self.mean_, self.scale_ * bool(self.standardize_), tdtype)
        mean = torch.as_tensor(mean, dtype=tdtype, device=dev)
        if not (flat.flags.c_contiguous and flat.flags.writeable):
            flat = np.array(flat, order="C")  # torch reads neither negative strides nor read-only
        x = torch.as_tensor(flat, dtype=tdtype, device=dev)
        idx = None
        if window > 1:  # plain k-mers: the rows of each window, gathered chunk by chunk
            idx, n_out = kmer_index(lengths, window, self._dilation)
            idx = torch.as_tensor(idx, device=dev)
            mean, scale = mean.repeat(window), scale.repeat(window)  # per value of a k-mer
        else:
            n_out = lengths
        # the identity standardisation (standardize=False) is skipped: x - 0 and x / 1 are exact
        standardized = bool(np.any(self.mean_ != 0) or np.any(self.scale_ != 1))
        out = map_rows(x, idx, mean if standardized else None,
                        scale if standardized else None, anchors, norm, self.bandwidth_,
                        normalize=self.normalize_, keep_norm=self.keep_norm_,
                        max_rows=self.max_elements, name=type(self).__name__)
        out = to_numpy(out)
        if coll.form == "3d" and len(n_out):  # sets of one length: a view, not a stacked copy
            return out.reshape(len(n_out), int(n_out[0]), out.shape[1])
        ends = np.cumsum(n_out).tolist()  # one view per set (np.split costs 15 us a set)
        return coll.wrap([out[a:b] for a, b in zip([0, *ends[:-1]], ends)])

    def set_output(self, *, transform=None):
        """Accepted and ignored: the output is one array per set, which no data frame holds."""
        return self

    def __sklearn_tags__(self):
        return set_input_tags(super().__sklearn_tags__(), self.dtype, pool=True)

    _serving_outputs = ("transform", "transform_mask")

    def _serving_module(self, *, sinkhorn_method="log", sinkhorn_iter=None) -> torch.nn.Module:
        """The module :func:`skset.export.serving_module` returns (``sinkhorn_*`` unused)."""
        from ._serving import NystromServing, freeze_nystrom

        check_is_fitted(self)
        return NystromServing(freeze_nystrom(self.to_module(),
                                             torch.as_tensor(self.normalization_)))

    def to_module(self) -> NystromLayer:
        """A layer with the fitted parameters of this estimator.

        Returns
        -------
        layer : skset.nn.NystromLayer
            The equivalent differentiable layer: its anchors, absolute bandwidth ``bandwidth_``
            and input standardisation are the estimator's, so that it gives ``transform``'s
            features up to rounding.
        """
        check_is_fitted(self)
        dtype = torch.float64 if self.anchors_.dtype.name == "float64" else torch.float32
        layer = NystromLayer(
            self.n_features_in_, self.anchors_.shape[0], bandwidth=self.bandwidth_,
            window=self._width, dilation=self._dilation,
            kmer_coding="level_shape" if self._coded else "plain", normalize=self.normalize_,
            keep_norm=self.keep_norm_, eigenvalue_floor=self.eigenvalue_floor,
            anchors=torch.as_tensor(self.anchors_, dtype=dtype))
        layer.mean.copy_(torch.as_tensor(self.mean_, dtype=dtype))
        layer.scale.copy_(torch.as_tensor(self.scale_, dtype=dtype))
        return layer
