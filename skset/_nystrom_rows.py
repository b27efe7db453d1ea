"""The CPU block engine of ``NystromFeatures.transform``: the Nystrom map of many rows, a block
of rows at a time, each block's kernel values kept in the cache."""

from __future__ import annotations

import threading

import numpy as np
import torch

from ._sets import check_finite_output
from ._torch import map_on_threads
from .nn.nystrom import nystrom_map_into

__all__ = ["CACHE_BYTES", "map_rows"]


#: rows of elements mapped per step of ``transform`` on the CPU: their kernel values (rows x
#: n_components) stay in the cache between the two matrix products and the exponential
#: (benchmarks/bench_nystrom_transform.py; benchmarks/results/nystrom_transform.md)
CACHE_BYTES = 1 << 20


def map_rows(x, idx, mean, scale, anchors, norm, bandwidth, *, normalize, keep_norm, max_rows,
              name):
    """The Nystrom map of every row of ``x`` (or of the k-mers ``x[idx].reshape(len(idx), -1)``),
    standardised by ``mean`` and ``scale`` (``None``: as they are), into one ``(rows, k)`` tensor.

    The same numbers as :func:`skset.nn.nystrom_map` of the standardised rows (up to float
    rounding), a block of rows at a time (:func:`skset.nn.nystrom.nystrom_map_into`: the kernel
    values in a buffer reused by every block, the product with ``norm`` written straight into
    the output). On the CPU a block is small enough that its kernel values stay in the cache
    (:data:`CACHE_BYTES`), so only the inputs and the output cross the memory, and the blocks
    are spread over the torch threads
    (:func:`skset._torch.map_on_threads`: one intra-op thread each, so the numbers do not depend
    on the thread count); elsewhere a block is ``max_rows`` rows. A non-finite output raises
    :func:`skset._sets.check_finite_output`'s ``ValueError``.
    """
    n = x.shape[0] if idx is None else idx.shape[0]
    k = anchors.shape[0]
    dtype, dev = anchors.dtype, anchors.device
    if dev.type == "cpu":
        step = max(64, min(max_rows, CACHE_BYTES // (k * anchors.element_size())))
        # numpy's allocator asks the kernel for huge pages on large arrays (madvise): writing the
        # output then faults in 2 MiB pages, not 4 KiB ones, several times faster than into
        # torch.empty for an output of hundreds of MB (benchmarks/results/nystrom_transform.md)
        np_dtype = np.float64 if dtype == torch.float64 else np.float32
        out = torch.from_numpy(np.empty((n, k), dtype=np_dtype))
    else:
        step = max_rows
        out = torch.empty(n, k, dtype=dtype, device=dev)
    step = min(step, max(n, 1))
    local = threading.local()  # one kernel buffer per thread, reused by its blocks

    def block(i):
        with torch.no_grad():
            xb = x[i : i + step] if idx is None else x[idx[i : i + step]].flatten(1)
            if getattr(local, "buf", None) is None:
                local.buf = torch.empty(step, k, dtype=dtype, device=dev)
            ob = out[i : i + step]
            nystrom_map_into(xb, anchors, norm, bandwidth, ob, local.buf, mean=mean, scale=scale,
                             normalize=normalize, keep_norm=keep_norm)
            return ob.sum()

    sums = map_on_threads(block, range(0, n, step), dev)
    if sums and not bool(torch.isfinite(torch.stack(sums)).all()):
        check_finite_output(out, name, dtype)  # raises unless only the sums overflowed
    return out


def bandwidth_in_range(bandwidth: float, dtype) -> bool:
    """Whether the kernel can square distances of order ``bandwidth`` in ``dtype``."""
    lim = np.finfo(dtype)
    return bool(lim.tiny / lim.eps < bandwidth**2 < lim.max * lim.eps)


def check_bandwidth_range(name: str, bandwidth: float, dtype, given: bool) -> None:
    """Refuse a fit that transform could not compute: the kernel squares distances of order
    ``bandwidth`` in the working ``dtype`` (data of magnitude 1e-30 without standardisation, or
    a bandwidth of 1e-20 given on the unit sphere). ``given``: the bandwidth is the user's."""
    if bandwidth_in_range(bandwidth, dtype):
        return
    what = (f"bandwidth={bandwidth:.3g} on the unit sphere" if given
            else f"the training elements' scale (bandwidth {bandwidth:.3g})")
    fix = "give another bandwidth" if given else "standardise the features (standardize=True or 'auto')"
    single = np.dtype(dtype) != np.float64
    raise ValueError(f"{name}: {what} is out of the range of {np.dtype(dtype).name} computations "
                     f"(squared distances would underflow or overflow); {fix}"
                     + (" or use dtype='float64'." if single else "."))
