"""How :class:`skset.NystromFeatures` reads k-mers: the width, dilation and coding it fitted
(``KmerInputs``, a mixin), the rows its standardisation and map see, and the check that a later
``partial_fit`` reads the k-mers the fitted anchors were learnt from.

The k-mers themselves are built by :mod:`skset._sets` (``kmer_index``, ``kmer_windows``,
``kmer_level_shape``); the width and dilation of ``"auto"`` are chosen by
:func:`skset._map_selection.select_window`.
"""

from __future__ import annotations

from ._sets import kmer_dilation, kmer_level_shape, kmer_width

__all__ = ["KmerInputs", "KmerWidth"]


class KmerWidth:
    """The k-mer width and dilation an estimator with ``window`` and ``dilation`` parameters
    reads (its fitted ``window_`` and ``dilation_`` once fitted), and the fewest elements a set
    may then have (:class:`skset.NystromFeatures`, the supervised OTK models)."""

    @property
    def _width(self) -> int:
        return kmer_width(self)

    @property
    def _dilation(self) -> int:
        return kmer_dilation(self) if self._width > 1 else 1

    @property
    def _min_elements(self) -> int:
        """The fewest elements a training set may have: the window for contiguous k-mers, else 1
        (a fitted model reads a shorter set as one k-mer)."""
        return self._width if self._dilation == 1 else 1


class KmerInputs(KmerWidth):
    """The k-mer reading of :class:`skset.NystromFeatures` (``window``, ``dilation`` and
    ``kmer_coding``): the rows its map sees and the check of a later ``partial_fit``."""

    @property
    def _coded(self) -> bool:
        """k-mers coded as level + shape (:func:`skset._sets.kmer_level_shape`): the fitted
        coding once fitted (as the width is ``window_``), whatever ``set_params`` set since."""
        fitted = getattr(self, "_fitted_kmers", None)
        coding = fitted[1] if fitted is not None else getattr(self, "kmer_coding", "plain")
        return self._width > 1 and coding == "level_shape"

    def _map_inputs(self, coll):
        """``(sets, window, lengths)`` that the standardisation and the map see: the checked
        sets and the k-mer window, or, for coded k-mers, the coded k-mers of every set stacked in
        one array (window 1 from there on; the lengths are those of each set's k-mers)."""
        if self._coded:
            coded, n_out = kmer_level_shape(coll.sets, self._width, dilation=self._dilation,
                                            split=False)
            return [coded], 1, n_out
        return coll.sets, self._width, coll.lengths

    def _kmers_key(self, width: int, dilation: int) -> tuple:
        """What the fitted anchors read: ``(width, coding)``, plus the dilation when above 1
        (so that models saved before dilated k-mers compare equal)."""
        key = (width, self.kmer_coding if width > 1 else None)
        return key + (dilation,) if width > 1 and dilation > 1 else key

    def _check_warm_params(self) -> None:
        """A later ``partial_fit`` continues the fitted model: refuse, before anything changes,
        parameters changed since the fit that the fitted anchors cannot follow (the k-mers:
        ``window``, ``dilation``, ``kmer_coding``)."""
        w_now = self._width if self.window == "auto" else int(self.window)  # "auto": fitted
        d_now = self._dilation if self.dilation == "auto" else int(self.dilation)
        now = self._kmers_key(w_now, d_now)
        fitted = getattr(self, "_fitted_kmers", None)
        coded = w_now > 1 and self.kmer_coding == "level_shape"
        width = (w_now + (1 if coded else 0)) * self.n_features_in_
        if (fitted is None and width == self.anchors_.shape[1]) or (
                fitted is not None and tuple(fitted) == now):
            return
        dilated = len(now) > 2 or (fitted is not None and len(fitted) > 2)
        was = ("" if fitted is None else f" (fitted with window={fitted[0]}"
               + (f", kmer_coding={fitted[1]!r}" if fitted[1] else "")
               + (f", dilation={fitted[2] if len(fitted) > 2 else 1}" if dilated else "") + ")")
        n_fitted = self.anchors_.shape[1]
        what = (f"give k-mers of {width} values, but the fitted anchors have {n_fitted}{was}"
                if width != n_fitted else f"read other k-mers than the fitted anchors{was}")
        raise ValueError(
            f"{type(self).__name__}: window={self.window}, "
            + (f"dilation={self.dilation}, " if dilated else "")
            + f"kmer_coding={self.kmer_coding!r} {what}; partial_fit continues the fitted "
            "model: set the parameters back, or call fit to start afresh.")
