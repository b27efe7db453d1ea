"""Deep Sets' scaled-mean pooling: the size it scales the mean by, fitted from the
training sets (``pooling="scaled_mean"``; :func:`skset.nn.masked_pool`)."""

from __future__ import annotations

import numpy as np

__all__ = ["POOL_SIZE_ATTR", "fit_pool_size"]

POOL_SIZE_ATTR = """    pool_size_ : float or None
        The size ``pooling="scaled_mean"`` scales the mean by: the training sets' mean number
        of elements (of k-mers when the network reads k-mers); None for the other poolings.
"""


def fit_pool_size(est, module, data) -> None:
    """Set ``est.pool_size_`` and the module's ``pool_size`` buffer: the mean size of the sets
    ``data`` trains on, as the network reads them (elements or k-mers), a set of
    ``sample_weight`` k counted k times (so weights equal repetition); None (and no buffer) for
    the other poolings. Sets all of one size give exactly that size: the scaled mean is then
    the sum to the last bit."""
    if est.pooling != "scaled_mean":
        est.pool_size_ = None
        return
    w = data.weights_of(data.train)
    est.pool_size_ = float(np.average(data.lengths[data.train],
                                      weights=None if w is None else w.cpu().numpy()))
    module.pool_size.fill_(est.pool_size_)
