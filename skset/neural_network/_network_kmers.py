"""k-mers for the Set Transformer and Deep Sets: ``window`` and ``dilation`` chosen in ``fit``
from the labels by :class:`skset.NystromFeatures`' rule (:func:`skset._map_selection.
select_window`), the sets read as their k-mers coded as level + shape, and the same step on
padded tensors for export (:class:`KmerFront`).

Why the networks read k-mers: a series handed over as a set of its time points loses its order
in a permutation-invariant network; on the suite's univariate series given that way, both
networks sat near the class prior or far under raw pooling (ItalyPowerDemand, GunPoint,
ArrowHead; ``benchmarks/results/trained_vs_pooling.md``), while the k-mers the rule takes read
them at 80-98. Why the order test: NystromFeatures' rule scores what mean-pooled Nystrom features
of the k-mers separate, and k-mers of sets whose order is arbitrary can separate more there (on
unique counting's sets of digits it took 3-mers) while a network reading them loses the
invariance it is built for (the Set Transformer fell from 0.79 to 0.42 there); k-mers that beat
k-mers of the same sets shuffled say that the order itself carries the signal
(``benchmarks/results/order_test.md``).
"""

from __future__ import annotations

import numpy as np
import torch

from .._map_selection import DEFAULT_CHOICE, format_window_scores, select_window
from .._sets import check_kmer_lengths, kmer_level_shape
from .._validation import POSITIVE_INT
from ..nn.nystrom import DEFAULT_EIGENVALUE_FLOOR, DEFAULT_N_COMPONENTS, kmer_unfold
from ..nn.nystrom import kmer_level_shape as coded_tensor
from ._set_scale import set_standardized_tensor

__all__ = ["KMER_DOC", "KMER_PARAMS", "KmerFront", "NetworkKmers", "choose_kmers", "read_kmers"]

KMER_PARAMS = {"window": ["auto", POSITIVE_INT], "dilation": ["auto", POSITIVE_INT]}

KMER_DOC = """    window : int or "auto", default="auto"
        k-mer width: each (ordered) set is read as its k-mers, ``window`` elements (``dilation``
        apart) coded as level + shape (their deviations from their mean, then the mean; as
        :class:`skset.NystromFeatures` codes them), so a set of ``n`` elements of ``d`` features
        becomes ``n - span + 1`` elements of ``(window + 1) * d``, ``span = (window - 1) *
        dilation + 1`` (a fit refuses training sets shorter than an explicit contiguous
        ``window``; a set shorter than the span is read as one k-mer, its last element
        repeated); 1 reads single elements, and a set's output does not depend on
        its rows' order. ``"auto"``: chosen in ``fit`` from single-output labels (``window_``;
        printed with the rule's scores under ``verbose``) by :class:`skset.NystromFeatures`'
        rule, then kept only when the order of the elements means something: the k-mers must
        beat the k-mers of the same sets with their elements shuffled, on the rule's proxy, by a
        margin above 3 in the spread of five shuffled copies (``order_statistic``). A series
        handed over as a set of its time points is read as k-mers; a bag of i.i.d. elements,
        or any set whose order is arbitrary, as single elements (the output
        then does not depend on the order); without labels (multi-label, no ``y``), 1.
    dilation : int or "auto", default="auto"
        Steps between a k-mer's elements (a set shorter than the span ``(window - 1) *
        dilation + 1`` has one k-mer, its last element repeated). ``"auto"``: with
        ``window="auto"``, chosen with the width (a dilated pair only by a clear margin;
        ``dilation_``), else 1. An explicit dilation with ``window="auto"``: the widths are
        scored as k-mers of that dilation (those whose span is at most 2/3 of the median
        training length), and the one chosen read with it (``dilation_`` is 1 where the width
        is 1).
"""


def choose_kmers(est, sets, y, seed: int, sample_weight=None) -> tuple[int, int]:
    """``(window, dilation)`` of ``est`` for the checked training ``sets`` and targets ``y``:
    explicit values kept; ``"auto"`` by :func:`skset._map_selection.select_window` with the
    default element map and its order test (from its own random stream), 1 without
    single-output labels. Dilated pairs are scored only once a contiguous width is taken
    (``pairs_alone=False``): taken against single elements as ``NystromFeatures`` takes them,
    they moved Deep Sets on PickupGestureWiimoteZ 10-mers from 78.0 to 74.7 and the Set
    Transformer from 64.0 to 72.0 (seeds 0-2, ``benchmarks/results/dilated_kmers.md``).
    Sets of ``sample_weight`` 0 take no part (in the choice, nor in the
    check of an explicit window's lengths); a regressor's targets are real numbers, whole or
    not, and a ``(n_sets, 1)`` target is one output."""
    window = 1 if est.window == "auto" else int(est.window)
    dilation = 1 if est.dilation == "auto" else int(est.dilation)
    y = None if y is None else np.asarray(y.toarray() if hasattr(y, "toarray") else y)  # sparse
    if y is not None and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if est.window != "auto":  # sets of weight 0 unchecked; an error names the set's index in X
        lengths = np.array([len(s) for s in sets])
        if sample_weight is not None:
            lengths = np.where(np.asarray(sample_weight) > 0, lengths, window)
        check_kmer_lengths(lengths, window, dilation=dilation)
    if sample_weight is not None:
        keep = np.flatnonzero(np.asarray(sample_weight) > 0)
        sets = [sets[i] for i in keep]
        y = None if y is None or len(y) != len(sample_weight) else y[keep]
    if est.window != "auto" or y is None or y.ndim != 1 or len(y) != len(sets):
        return window, dilation
    w, d, scores = select_window(sets, y, kmer_coding="level_shape", fixed={},
                                 default=DEFAULT_CHOICE, n_components=DEFAULT_N_COMPONENTS,
                                 eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
                                 rng=np.random.RandomState((seed + 2) % 2**32),
                                 dilate=est.dilation == "auto", order_test=True,
                                 target_type=est._target_type, dilation=dilation, pairs_alone=False)
    w, d = int(w), int(d) if est.dilation == "auto" else dilation
    d = d if w > 1 else 1  # single elements have no dilation
    if est.verbose and scores:
        print(f"[{type(est).__name__}] k-mers: window={w}, dilation={d} (scores "
              f"{format_window_scores(scores)})")
    return w, d


def read_kmers(sets: list, window: int, dilation: int) -> list:
    """The sets as their level + shape coded k-mers (unchanged with ``window=1``)."""
    return sets if window <= 1 else kmer_level_shape(sets, window, dilation=dilation)


class KmerFront(torch.nn.Module):
    """:func:`read_kmers` on padded sets: ``(x (B, n, d), mask)`` -> the coded k-mers
    ``(B, m, (window + 1) * d)`` and their mask (the front of an exported network); with
    ``floor`` (the fitted ``set_scale_floor_``), each set read by its own mean and deviation
    first (:func:`~skset.neural_network._set_scale.set_standardized_tensor`)."""

    def __init__(self, window: int, dilation: int, floor: torch.Tensor | None = None):
        super().__init__()
        self.window, self.dilation = int(window), int(dilation)
        self.register_buffer("floor", floor)

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        floor = getattr(self, "floor", None)  # absent in fronts pickled before it
        summary = None
        if floor is not None:  # each set's shape, its mean and log deviation appended after
            x, summary = set_standardized_tensor(x, mask, floor)
        if self.window > 1:
            x, mask = kmer_unfold(x, mask, self.window, self.dilation)
            x = coded_tensor(x, self.window)
        if summary is not None:  # padded rows 0, as the estimators' packed sets
            x = torch.cat([x, summary.expand(-1, x.shape[1], -1)], -1)
            x = torch.where(mask.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype))
        return x, mask


class NetworkKmers:
    """The k-mers a set network reads (a mixin of the Set Transformer and Deep Sets estimators):
    its fitted ``window_`` and ``dilation_``, the fewest elements a set may have, the network's
    input width, and the front of its exported module."""

    @property
    def _kmers(self) -> tuple[int, int]:
        """The fitted ``(window_, dilation_)`` (models saved before k-mers: ``(1, 1)``)."""
        return int(getattr(self, "window_", 1)), int(getattr(self, "dilation_", 1))

    @property
    def _in_features(self) -> int:
        """The network's input width: ``n_features_in_``, or that of coded k-mers, plus ``2 *
        n_features_in_`` for sets read by their own scale (``set_standardized_``: each set's mean
        and log deviation appended)."""
        w, d = self._kmers[0], self.n_features_in_
        return d * (w + 1 if w > 1 else 1) + (2 * d if getattr(self, "set_standardized_", False) else 0)

    def _start_fit(self, warm: bool):
        if not warm:  # a fresh fit chooses its k-mers again (and checks the sets without them)
            self.__dict__.pop("window_", None)
            self.__dict__.pop("dilation_", None)
        return super()._start_fit(warm)

    def _serving_front(self):
        w, d = self._kmers
        floor = getattr(self, "set_scale_floor_", None) if getattr(self, "set_standardized_", False) \
            else None
        if floor is not None:  # float64, as the statistics it floors (see set_standardized_tensor)
            floor = torch.as_tensor(np.asarray(floor, dtype=np.float64), dtype=torch.float64)
        return KmerFront(w, d, floor) if w > 1 or floor is not None else None
