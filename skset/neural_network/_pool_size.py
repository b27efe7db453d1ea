"""Deep Sets' poolings of the mean scaled to the training sets' size: the size, fitted from the
training sets (``pooling="sized_mean"`` and ``"scaled_mean"``; :class:`skset.nn.DeepSets`)."""

from __future__ import annotations

import numpy as np

__all__ = ["DS_POOLINGS", "POOLING_DOC", "POOL_SIZE_ATTR", "fit_pool_size"]

DS_POOLINGS = ("sized_mean", "sum", "scaled_mean", "mean", "max")

POOLING_DOC = """    pooling : {"sized_mean", "sum", "scaled_mean", "mean", "max"}, default="sized_mean"
        How the encoded elements (or k-mers) of a set meet. ``"sized_mean"``: their mean times
        the training sets' mean size (``pool_size_``), and beside it the set's size, as
        ``log(n / pool_size_)`` times a trained vector added to the decoder's first layer (zero
        at the start). On sets all of one size it is the sum to the last bit, weight for
        weight; on sets of different sizes no pooled vector grows with its set, and the decoder
        still reads the size, so that counts and sums are learned. ``"sum"``: the Deep Sets
        paper's; ``"scaled_mean"``: the scaled mean without the size (for sets whose size says
        nothing); ``"max"`` for "is there an element such that" targets. The user guide's
        "Pooling" gives the figures. :meth:`transform` returns the pooled vector (with
        ``"sized_mean"`` the scaled mean; the size is read beside it, not in it).
"""

POOL_SIZE_ATTR = """    pool_size_ : float or None
        The size ``pooling="sized_mean"`` and ``"scaled_mean"`` scale the mean by: the training
        sets' mean number of elements (of k-mers when the network reads k-mers); None for the
        other poolings.
"""


def fit_pool_size(est, module, data) -> None:
    """Set ``est.pool_size_`` and the module's ``pool_size`` buffer: the mean size of the sets
    ``data`` trains on, as the network reads them (elements or k-mers), a set of
    ``sample_weight`` k counted k times (so weights equal repetition); None (and no buffer) for
    the other poolings. Sets all of one size give exactly that size: the scaled mean is then
    the sum to the last bit."""
    if est.pooling not in ("scaled_mean", "sized_mean"):
        est.pool_size_ = None
        return
    lengths = data.lengths[data.train]
    if np.all(lengths == lengths[0]):  # exactly that size, whatever the weights' rounding
        est.pool_size_ = float(lengths[0])
    else:
        w = data.weights_of(data.train)
        est.pool_size_ = float(np.average(lengths, weights=None if w is None else w.cpu().numpy()))
    module.pool_size.fill_(est.pool_size_)
