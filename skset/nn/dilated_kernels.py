r"""Fixed dilated kernels read over a set of time points, pooled as proportions above thresholds.

A series is the set of its time points. Each point :math:`t` is described by the responses of
84 fixed kernels of nine taps around it, at dilation :math:`d` (the taps
:math:`x_{t-4d}, \dots, x_t, \dots, x_{t+4d}`, zero beyond the series): weight 2 on three of
the nine taps, -1 on the other six, so that each kernel sums to zero and sees shape, not level,
wherever its taps fall inside the series (within :math:`4d` steps of an end the zeros beyond it
make the level count) (the kernels of MiniRocket, Dempster et al. 2021). The response of kernel :math:`k`,

.. math:: c_{kd}(t) = 3 \sum_{j \in S_k} x_{t + (j-4)d} - \sum_{j=0}^{8} x_{t + (j-4)d},

is computed as written, a sum of the same nine taps in the same order at every time point, so
that a point's response does not depend on the batch it is computed in (with several channels,
a kernel's sum over its channels is taken in float64, exact there for float32 values, and float64
values are added channel by channel in one order). Each response is compared with thresholds
:math:`b_{kdq}` and pooled by the proportion of the set's points above each, the mean of the
indicators :math:`\mathbb{1}[c_{kd}(t) > b_{kdq}]` (MiniRocket's PPV): an element map followed by
mean pooling. Sets of several channels sum each kernel's taps over a
subset of the channels (one subset per kernel and dilation).
"""

from __future__ import annotations

import itertools
import numbers

import torch
from torch import nn

from ._masks import as_mask
from .attention import _zero_padding  # a select, not a product: NaN * 0 is NaN

__all__ = ["N_TAPS", "KERNEL_TAPS", "DilatedKernelPPV", "kernel_responses"]

N_TAPS = 9
#: the three taps of weight 2 of each of the 84 kernels (the other six weigh -1)
KERNEL_TAPS = tuple(itertools.combinations(range(N_TAPS), 3))


def _taps(x: torch.Tensor, dilation: int) -> list[torch.Tensor]:
    """The nine taps around each point of ``x`` (``(B, C, n)``), zero beyond it: nine shifted
    slices ``(B, C, n)`` (slices, not ``unfold``, so that every exporter takes them)."""
    n = x.shape[-1]
    padded = nn.functional.pad(x, ((N_TAPS // 2) * dilation, (N_TAPS // 2) * dilation))
    return [padded[..., j * dilation: j * dilation + n] for j in range(N_TAPS)]


def _kernel_channel_sums(x: torch.Tensor, channels: torch.Tensor) -> torch.Tensor:
    """``(84, B, n)``: each kernel's channels (``channels``, 0/1 ``(84, C)``) summed at each
    point of ``x (B, n, C)``, the same at every point whatever the batch, so that a point's
    response does not depend on its batch (a threshold on a response flips for one rounding).
    Below float64 the sums are a product in float64, exact for float32 values (values within
    2^29 of each other) whatever order the product's blocking takes for the batch's shape; in
    float64 the channels are added one by one in their order (a product there rounded by the
    batch's shape: 7e-15 apart, features 0.5 apart, alone against in a batch)."""
    if torch.finfo(x.dtype).bits < 64:
        return torch.einsum("bnc,kc->kbn", x.to(torch.float64), channels.to(torch.float64)
                            ).to(x.dtype)
    chan = channels.to(x.dtype)[:, :, None, None]                        # (84, C, 1, 1)
    summed = chan[:, 0] * x[None, :, :, 0]
    for c in range(1, x.shape[-1]):
        summed = summed + chan[:, c] * x[None, :, :, c]
    return summed


def kernel_responses(x: torch.Tensor, mask: torch.Tensor, dilation: int,
                     channels: torch.Tensor | None = None, *,
                     padding_zero: bool = False) -> torch.Tensor:
    """The 84 kernels' responses at every point of each set.

    Parameters
    ----------
    x : tensor of shape (B, n, C)
        Padded sets of ``C``-channel time points.
    mask : bool tensor of shape (B, n) or None
        Which points are real; the others count as zero for their neighbours' taps. ``None``:
        every point.
    dilation : int
        Steps between two taps.
    channels : tensor of shape (84, C) or None
        0/1: the channels each kernel sums; ``None`` sums every channel.
    padding_zero : bool, default=False
        The caller's padded points are 0 already (an inner call), so they are not zeroed here.

    Returns
    -------
    tensor of shape (84, B, n)
        Responses, kernel first; those of padded points are garbage that
        :class:`DilatedKernelPPV` masks.
    """
    mask = as_mask(mask, x)
    if not padding_zero:
        x = _zero_padding(x, mask)
    single = channels is None or x.shape[-1] == 1
    if single:  # the channels summed in their order, then shifted: 9 x (B, n)
        summed = x[..., 0]
        for c in range(1, x.shape[-1]):
            summed = summed + x[..., c]
        taps = _taps(summed, dilation)
    else:  # each kernel's channels summed once per point, then shifted: 9 x (84, B, n)
        taps = _taps(_kernel_channel_sums(x, channels), dilation)
    total = taps[0]
    for j in range(1, N_TAPS):  # the nine taps added in one order at every point
        total = total + taps[j]
    if single:  # the 36 pair sums shared by the kernels
        pairs = {}
        rows = []
        for a, b, c in KERNEL_TAPS:  # 84 kernels, each a pass over the batch
            if (a, b) not in pairs:
                pairs[a, b] = taps[a] + taps[b]
            rows.append(pairs[a, b] + taps[c])
    else:
        rows = [taps[a][k] + taps[b][k] + taps[c][k] for k, (a, b, c) in enumerate(KERNEL_TAPS)]
    # out of place throughout: the exporters (TorchScript's tracer too) take every step
    return 3 * torch.stack(rows) - total


def _shape(t) -> str:
    return f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__


class DilatedKernelPPV(nn.Module):
    """The proportion of each set's points where each kernel's response exceeds each threshold.

    Parameters
    ----------
    dilations : sequence of int
        The dilations, one block of features each.
    thresholds : tensor of shape (n_dilations, 84, n_thresholds)
        Thresholds of each kernel at each dilation.
    channels : tensor of shape (n_dilations, 84, C) or None
        0/1: the channels each kernel sums at each dilation; ``None``: every channel.
    n_features : int or None, default=None
        With ``channels=None``, the number of channels ``forward`` takes (``None``: any; a
        fitted :class:`~skset.DilatedKernelFeatures` passes its own). With ``channels``, C.

    ``forward(x (B, n, C), mask (B, n) or None) -> (B, n_dilations * 84 * n_thresholds)``, features
    ordered by dilation, then kernel, then threshold (in the order given). Each point's bucket
    among a kernel's sorted thresholds is counted in one small-integer pass per threshold, and
    the points of each bucket counted once: no tensor of every point against every threshold is
    built or reduced.
    """

    def __init__(self, dilations, thresholds: torch.Tensor, channels: torch.Tensor | None = None,
                 n_features: int | None = None):
        super().__init__()
        dilations = list(dilations)
        if not dilations or any(isinstance(d, bool) or not isinstance(d, numbers.Integral)
                                or d < 1 for d in dilations):
            raise ValueError(f"dilations must be positive integers, at least one; got {dilations!r}.")
        self.dilations = [int(d) for d in dilations]
        blocks = (len(self.dilations), len(KERNEL_TAPS))
        if not isinstance(thresholds, torch.Tensor) or thresholds.dim() != 3 \
                or tuple(thresholds.shape[:2]) != blocks or thresholds.shape[2] < 1:
            raise ValueError(f"thresholds must be a tensor of shape {(*blocks, 'n_thresholds')} "
                             f"(one block per dilation); got {_shape(thresholds)}.")
        if channels is not None and (not isinstance(channels, torch.Tensor) or channels.dim() != 3
                                     or tuple(channels.shape[:2]) != blocks):
            raise ValueError(f"channels must be None or a tensor of shape {(*blocks, 'C')}; got "
                             f"{_shape(channels)}.")
        #: the width ``forward`` takes: the channels' C, or ``n_features`` (None: any width)
        self.n_features = int(channels.shape[2]) if channels is not None else n_features
        ordered, order = torch.sort(thresholds, dim=-1)
        self.register_buffer("thresholds", thresholds)
        self.register_buffer("sorted_thresholds", ordered.contiguous())
        self.register_buffer("rank", torch.argsort(order, dim=-1))  # position of each in order
        self.register_buffer("channels", channels)

    @staticmethod
    def _thresholds_below(r: torch.Tensor, ordered: torch.Tensor) -> torch.Tensor:
        """``(84, B, n)`` int64: how many of each kernel's thresholds (``ordered``, ``(84, q)``,
        ascending) are strictly below each response: one comparison pass per threshold, counted
        in the smallest integer type that holds ``q``."""
        small = torch.uint8 if ordered.shape[1] < 256 else torch.int32
        below = (r > ordered[:, 0, None, None]).to(small)
        for j in range(1, ordered.shape[1]):
            below = below + (r > ordered[:, j, None, None]).to(small)
        return below.long()

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if x.dim() != 3 or (self.n_features is not None and x.shape[-1] != self.n_features):
            raise ValueError(f"x must be of shape (B, n, {self.n_features or 'C'}); got "
                             f"{tuple(x.shape)}.")
        mask = as_mask(mask, x)
        if mask is None:  # every point real
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        B = x.shape[0]
        n_thr = self.thresholds.shape[-1]
        counts = mask.sum(1).clamp(min=1).to(x.dtype)[None, :, None]        # (1, B, 1)
        x = _zero_padding(x, mask)  # once, for every dilation
        out = []
        for i, d in enumerate(self.dilations):  # a few dilations, each a batched pass
            chan = None if self.channels is None else self.channels[i]
            r = kernel_responses(x, mask, d, chan, padding_zero=True)        # (84, B, n)
            below = self._thresholds_below(r, self.sorted_thresholds[i])
            hist = torch.zeros((*r.shape[:2], n_thr + 1), dtype=torch.int32,
                               device=x.device).scatter_add(
                2, below, mask[None].expand_as(below).to(torch.int32))
            # points above sorted threshold j: those with more than j thresholds below them
            above = hist.flip(-1).cumsum(-1).flip(-1)[..., 1:]               # (84, B, q)
            rank = self.rank[i][:, None].expand(-1, B, -1)
            out.append((above.gather(2, rank).to(x.dtype) / counts).permute(1, 0, 2).flatten(1))
        return torch.cat(out, 1)
