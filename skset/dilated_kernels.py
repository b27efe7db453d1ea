"""Series as sets of time points, each read by fixed dilated kernels: :class:`DilatedKernelFeatures`
(the engine is :mod:`skset.nn.dilated_kernels`)."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._base import SksetEstimator, set_input_tags
from ._sets import check_finite_output, check_sets, dtype_name, length_batches, pack, to_numpy
from ._stats import weighted_median
from ._threads import user_stacklevel
from ._validation import POSITIVE_INT, TORCH_PARAMS, check_sample_weight
from .nn.dilated_kernels import KERNEL_TAPS, N_TAPS, DilatedKernelPPV, kernel_responses

__all__ = ["DilatedKernelFeatures"]

#: low-discrepancy levels of the thresholds' quantiles (multiples of the golden ratio's
#: fractional part), so that any number of thresholds spreads over (0, 1)
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
#: the most channels one kernel sums (as many as its taps)
MAX_KERNEL_CHANNELS = N_TAPS


def dilations_for(length: float, max_dilations: int) -> list[int]:
    """Up to ``max_dilations`` dilations spaced exponentially from 1 to the largest whose nine
    taps span ``length`` steps (duplicates after rounding down dropped)."""
    top = np.log2(max((length - 1) / (N_TAPS - 1), 1.0))
    # 2 ** log2(5) is 4.999...: round down with a margin, or the largest dilation is lost
    return sorted({int(2.0 ** e + 1e-9) for e in np.linspace(0.0, top, max_dilations)})


def _quantiles(r: torch.Tensor, levels: torch.Tensor, lengths: torch.Tensor | None = None
               ) -> torch.Tensor:
    """``(rows, q)``: the quantiles of each row of ``r`` at ``levels``, interpolated linearly
    between order statistics (numpy's default), over the first ``lengths[i]`` values of row ``i``
    (all of them without ``lengths``; ``torch.quantile`` refuses inputs of more than 2**24
    values, 84 responses of a series of 200,000 steps)."""
    if lengths is None:
        lengths = torch.full((r.shape[0],), r.shape[1], device=r.device)
    inside = torch.arange(r.shape[1], device=r.device)[None, :] < lengths[:, None]
    ordered = torch.sort(torch.where(inside, r, torch.full((), float("inf"), dtype=r.dtype,
                                                                device=r.device)), dim=1).values
    last = (lengths - 1)[:, None]
    pos = levels[None, :] * last.to(levels.dtype)
    lo = pos.floor().long()
    hi = torch.minimum(lo + 1, last)
    frac = (pos - lo.to(pos.dtype)).to(r.dtype)
    low, high = ordered.gather(1, lo), ordered.gather(1, hi)
    return low + (high - low) * frac


class DilatedKernelFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SksetEstimator):
    r"""Series read as sets of time points by fixed dilated kernels, pooled as proportions.

    Each set is a series: its elements are time points in order (one row per step, one column
    per channel). Each point is described by the responses of 84 fixed kernels of nine taps
    around it, at several dilations (the taps ``d`` steps apart, zero beyond the series), and
    each response is compared with thresholds learnt from the training series; the output of a
    set is, for each kernel, dilation and threshold, the proportion of its points whose
    response is above the threshold. That is an element map (a point's indicators) followed by
    mean pooling, MiniRocket's features [1]_ written for sets: series of any
    lengths are read as they are, without resampling, and a set of one length pools as many
    points as it has. The kernels (weight 2 on three taps, -1 on six) sum to zero, so inside a
    series they see its shape around each point and not its level; within ``4 d`` steps of
    either end, where taps fall beyond the series and read zero, the level counts too (at the
    larger dilations of a short series, that is most points). Put a linear model after it
    (``StandardScaler`` and ``RidgeClassifierCV`` or ``LogisticRegression``); see
    :mod:`skset.nn.dilated_kernels` for the maths.

    Parameters
    ----------
    n_thresholds : int, default=12
        Thresholds per kernel and dilation: quantiles of the kernel's responses over one
        training series (drawn at random for each kernel and dilation, as MiniRocket draws
        them) at levels spread over (0, 1). The output has
        ``84 * len(dilations_) * n_thresholds`` features (8,064 with the defaults and eight
        dilations).
    max_dilations : int, default=8
        At most this many dilations, spaced exponentially from 1 to the largest whose nine taps
        span the median length of the training series (fewer where rounding makes two equal).
    max_elements : int, default=32_768
        Padded points per batch of :meth:`transform` (series of similar lengths batched
        together): bounds its memory, a few kilobytes per point (the 84 responses of each point,
        their indicators, and for several channels each kernel's nine summed taps).
    device : {"auto", "cpu", "cuda", ...} or torch.device, default="auto"
        Where the responses are computed.
    dtype : {"float32", "float64"}, default="float32"
        The dtype of the responses and of the output. The kernels' weighted sums of nine taps
        cancel the series' level in their own arithmetic: in float32, series far from zero
        (a level of 1e4 against steps of 1) lose digits (up to 0.03 of a proportion at 1e4,
        0.2 at 1e6); subtract the level first, or use ``"float64"``.
    random_state : int, RandomState instance or None, default=None
        Draws the series the thresholds come from, and the channels of each kernel.

    Attributes
    ----------
    dilations_ : list of int
        The dilations, one block of ``84 * n_thresholds`` features each.
    thresholds_ : ndarray of shape (n_dilations, 84, n_thresholds)
        The thresholds of each kernel at each dilation (``n_dilations = len(dilations_)``).
    channels_ : ndarray of shape (n_dilations, 84, n_channels) or None
        0/1: the channels each kernel sums at each dilation (between 1 and nine, drawn at
        random for each kernel and dilation); ``None`` for series of one channel.
    n_features_in_ : int
        Channels of the training series.
    device_, dtype_ : the fitted device and dtype.

    See Also
    --------
    skset.nn.DilatedKernelPPV : the same map as a torch module (:meth:`to_module`).
    NystromFeatures : a Gaussian kernel map of elements or of k-mers, for the OTK pipeline.
    OTKEmbedding : an embedding that pools by optimal transport instead of the mean.

    Notes
    -----
    On the suite's univariate series (``benchmarks/results/dilated_kernels.md``), this map with
    ``StandardScaler`` and ``RidgeClassifierCV`` scores within 1.0 point of aeon's
    ``MiniRocketClassifier`` on the five series of one length (0.1 under it on average); on the
    two of varied lengths, which MiniRocket reads resampled to one length, 3.2 points above it
    (WatchMagnitude) and 4.0 under it (PickupGestureWiimoteZ).

    References
    ----------
    .. [1] A. Dempster, D. F. Schmidt and G. I. Webb. "MiniRocket: A Very Fast (Almost)
       Deterministic Transform for Time Series Classification." KDD 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import RidgeClassifierCV
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skset import DilatedKernelFeatures
    >>> rng = np.random.default_rng(0)
    >>> t = np.linspace(0, 6, 60)
    >>> X = [np.sin(t * (1 + i % 2) + rng.normal())[:, None] for i in range(20)]
    >>> y = np.arange(20) % 2
    >>> model = make_pipeline(DilatedKernelFeatures(random_state=0), StandardScaler(),
    ...                       RidgeClassifierCV()).fit(X, y)
    >>> model.score(X, y)
    1.0
    """

    _parameter_constraints = {
        "n_thresholds": [POSITIVE_INT],
        "max_dilations": [POSITIVE_INT],
        "max_elements": [POSITIVE_INT],
        **TORCH_PARAMS,
    }

    def __init__(self, n_thresholds=12, max_dilations=8, *, max_elements=32_768, device="auto",
                 dtype="float32", random_state=None):
        self.n_thresholds = n_thresholds
        self.max_dilations = max_dilations
        self.max_elements = max_elements
        self.device = device
        self.dtype = dtype
        self.random_state = random_state

    def _check_X(self, X, fitting=False):
        # the fitted dtype (``_begin_fit`` sets it before ``fit`` reads the sets)
        coll = check_sets(X, n_features=None if fitting else self.n_features_in_,
                          compute_dtype=self.dtype_)
        self._check_columns(X, fitting)
        return coll.sets

    def fit(self, X, y=None, sample_weight=None):
        """Choose the dilations and the channels of each kernel, and learn the thresholds.

        Parameters
        ----------
        X : collection of sets (list of (n_i, d) arrays, 1-D object array or 3-D array)
            The training series, each a set of time points in order.
        y : ignored
        sample_weight : array-like of shape (n_sets,) or None, default=None
            Each series' chance of being drawn for a kernel's thresholds is proportional to its
            weight (a series of weight 0 is never drawn), and the median length that sets the
            dilations is the weighted median. Equal weights fit exactly as ``None``.

        Returns
        -------
        self
        """
        _, rng = self._begin_fit()
        sets = self._check_X(X, fitting=True)
        self.n_features_in_ = n_channels = sets[0].shape[1]
        lengths = np.array([s.shape[0] for s in sets], dtype=np.float64)
        sw = check_sample_weight(sample_weight, len(sets), type(self).__name__, "sets")
        if sw is not None and np.ptp(sw) <= 1e-9 * sw.max():  # equal up to rounding, as the
            sw = None  # weighted median reads them: the unweighted fit, draw for draw
        median = float(np.median(lengths) if sw is None else weighted_median(lengths, sw))
        if n_channels > 1 and median < n_channels:
            warnings.warn(
                f"{type(self).__name__} reads each set's rows as time points and its columns as "
                f"channels: the training series have a median of {median:g} time "
                f"points of {n_channels} channels. An array laid out as (n_series, n_channels, "
                "n_timepoints) (aeon's, sktime's) is read as series of n_channels steps: pass "
                "X.transpose(0, 2, 1).", UserWarning, stacklevel=user_stacklevel())
        self.dilations_ = dilations_for(median, self.max_dilations)
        n_kernels = len(KERNEL_TAPS)
        self.channels_ = None
        if n_channels > 1:
            self.channels_ = np.zeros((len(self.dilations_), n_kernels, n_channels),
                                      dtype_name(self.dtype_))
            most = min(n_channels, MAX_KERNEL_CHANNELS)
            for block in self.channels_.reshape(-1, n_channels):
                block[rng.choice(n_channels, size=rng.randint(1, most + 1), replace=False)] = 1
        levels = torch.as_tensor((np.arange(1, self.n_thresholds + 1) * _GOLDEN) % 1.0,
                                 dtype=self.dtype_, device=self.device_)
        def draw():  # the series each kernel's thresholds come from, at one dilation
            if sw is None:
                return rng.randint(len(sets), size=n_kernels)
            return rng.choice(len(sets), size=n_kernels, p=sw / sw.sum())

        self.thresholds_ = np.stack([to_numpy(self._fit_thresholds(sets, draw(), i, levels))
                                     for i in range(len(self.dilations_))])
        return self

    def _fit_thresholds(self, sets, drawn, i, levels) -> torch.Tensor:
        """``(84, q)``: each kernel's thresholds at dilation ``i``, the quantiles at ``levels`` of
        its responses over the training series drawn for it (``drawn[k]``, MiniRocket's draw of
        one series per kernel and dilation). The drawn series are read in batches of similar
        lengths under ``max_elements`` padded points."""
        series, column = np.unique(drawn, return_inverse=True)  # column: each kernel's series
        lengths = np.array([sets[j].shape[0] for j in series])
        out = torch.empty((len(drawn), len(levels)), dtype=self.dtype_, device=self.device_)
        for idx in length_batches(lengths, max_elements=self.max_elements):
            x, mask = pack([sets[j] for j in series[idx]], device=self.device_, dtype=self.dtype_)
            r = kernel_responses(x, mask, self.dilations_[i], self._channels(i))  # (84, b, n)
            where = np.full(len(series), -1)
            where[idx] = np.arange(len(idx))
            kernels = np.flatnonzero(where[column] >= 0)
            k_t = torch.as_tensor(kernels, device=self.device_)
            b_t = torch.as_tensor(where[column[kernels]], device=self.device_)
            out[k_t] = _quantiles(r[k_t, b_t], levels, mask.sum(1)[b_t])
        return out

    def partial_fit(self, X, y=None, sample_weight=None):
        """Fit on the first chunk; later chunks are checked and change nothing.

        The map is fixed once fitted: the thresholds come from training series drawn from the
        first chunk (as :meth:`fit` draws one series per kernel and dilation), so that a pipeline
        with this transformer can learn from chunks (``skset.utils.partial_fit``,
        ``skset.distributed.fit``) and its later steps see one map throughout.

        Parameters
        ----------
        X : collection of sets
        y : ignored
        sample_weight : array-like of shape (n_sets,) or None, default=None
            The first chunk's weights, as in :meth:`fit`; a later chunk's are checked.

        Returns
        -------
        self
        """
        if not hasattr(self, "thresholds_"):
            return self.fit(X, y, sample_weight=sample_weight)
        self._check_warm_dtype(self.dtype_)
        sets = self._check_X(X)
        check_sample_weight(sample_weight, len(sets), type(self).__name__, "sets")
        return self

    def _channels(self, i):
        if self.channels_ is None:
            return None
        return torch.as_tensor(self.channels_[i], device=self.device_)

    @property
    def _n_features_out(self):
        return int(np.prod(self.thresholds_.shape))

    def to_module(self) -> DilatedKernelPPV:
        """The fitted map as a torch module (``forward(x, mask) -> (B, n_features_out)``)."""
        check_is_fitted(self)
        # copies: the module (and a serving module made from it) never writes into the estimator
        chan = None if self.channels_ is None else torch.tensor(self.channels_)
        return DilatedKernelPPV(self.dilations_, torch.tensor(self.thresholds_), chan,
                                n_features=self.n_features_in_)

    _serving_outputs = ("transform",)

    def _serving_module(self, *, sinkhorn_method="log", sinkhorn_iter=None) -> torch.nn.Module:
        """The module :func:`skset.export.serving_module` returns (``sinkhorn_*`` unused):
        ``forward(x, mask) -> (transform,)``."""
        from ._serving import TupleOutput

        return TupleOutput(self.to_module().to(self.dtype_))

    def transform(self, X) -> np.ndarray:
        """The proportions of each series' points above each threshold:
        ``(n_sets, 84 * len(dilations_) * n_thresholds)``, ordered by dilation, kernel and
        threshold.

        Parameters
        ----------
        X : collection of sets
        """
        check_is_fitted(self)
        sets = self._check_X(X)
        module = self.to_module().to(device=self.device_, dtype=self.dtype_)
        out = np.empty((len(sets), self._n_features_out), dtype=dtype_name(self.dtype_))
        lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
        with torch.no_grad():
            for idx in length_batches(lengths, max_elements=self.max_elements,
                                      padding_tolerance=0.1):
                x, mask = pack([sets[i] for i in idx], device=self.device_, dtype=self.dtype_)
                out[idx] = to_numpy(module(x, mask))
        check_finite_output(out, type(self).__name__, self.dtype_)
        return out

    def __sklearn_tags__(self):
        return set_input_tags(super().__sklearn_tags__(), self.dtype)
