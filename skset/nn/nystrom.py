r"""Nystrom kernel map on set elements, as a differentiable layer.

For anchors :math:`w_1, \dots, w_k` and the Gaussian kernel
:math:`\kappa(x, x') = \exp(-\|x - x'\|^2 / (2\sigma^2))` (on unit vectors this is the CKN form
:math:`\exp((\langle x, x' \rangle - 1)/\sigma^2)`), the Nystrom map is

.. math:: \psi(x) = \kappa(w, w)^{-1/2} \kappa(w, x) \in \mathbb{R}^k,

so that :math:`\langle \psi(x), \psi(x') \rangle` approximates :math:`\kappa(x, x')` (Williams and
Seeger 2001; Mialon et al. 2021, Appendix A.2). The inverse square root floors small eigenvalues of
:math:`\kappa(w, w)` at ``eigenvalue_floor`` times the largest one, which keeps it defined (and its
gradient bounded) when anchors nearly coincide.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ._masks import as_mask
from .norm import row_norm

__all__ = ["NystromLayer", "gaussian_kernel", "inv_sqrt_psd", "nystrom_map", "kmer_unfold",
           "kmer_level_shape"]

# Defaults of the Nystrom map, shared by NystromLayer (here) and skset.NystromFeatures (which
# imports them: the estimator builds on this engine module, never the other way round). They were
# chosen for NystromFeatures on the real-data suite (benchmarks/bench_suite.py; BENCHMARKS.md):
# no projection on the unit sphere (it maps scalar elements to +-1 and amplifies k-mers near the
# mean to unit norm), a Gaussian kernel of bandwidth 0.5 times the data's scale. NystromFeatures
# reads the bandwidth relative to the median distance of training elements when normalize=False
# (its ``bandwidth_`` is the absolute value); the layer, which sees no training data, reads it as
# absolute, so ``NystromFeatures.to_module`` is the way to get the estimator's map.
DEFAULT_N_COMPONENTS = 128
DEFAULT_BANDWIDTH = 0.5
DEFAULT_NORMALIZE = False
DEFAULT_KEEP_NORM = True
DEFAULT_EIGENVALUE_FLOOR = 1e-4


def gaussian_kernel(x: torch.Tensor, w: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """``exp(-||x - w||^2 / (2 bandwidth^2))`` between the rows of ``x (..., D)`` and ``w (k, D)``."""
    if isinstance(bandwidth, numbers.Real) and not 0 < bandwidth < math.inf:
        raise ValueError(f"bandwidth must be a positive finite number, got {bandwidth!r}")
    c = 1.0 / (2.0 * bandwidth**2)
    xx = (x * x).sum(-1, keepdim=True)
    # one GEMM with the anchors' norms folded in, then in place: -||x - w||^2, clamped at 0,
    # scaled, exponentiated (2 passes over the output, not 6)
    k = torch.addmm((w * w).sum(-1).neg(), x.reshape(-1, x.shape[-1]), w.T, alpha=2.0)
    k = k.view(*x.shape[:-1], w.shape[0]).sub_(xx)
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
        # the same operations; the clamp out of place, as its backward reads its input
        return k.clamp_max(0.0).mul_(c).exp_()
    return k.clamp_max_(0.0).mul_(c).exp_()


def anchor_gram(w: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """``gaussian_kernel(w, w, bandwidth)`` for the anchors' own Gram matrix, exact where the
    expansion of ``||w_i - w_j||^2`` loses digits: the anchors are centred on their mean first
    (the kernel only reads differences) and the diagonal is 1 exactly. Anchors far from zero, or
    far apart, cancel ``||w||^2`` against ``2 w.w`` to an error larger than the bandwidth: the
    diagonal then came out 0, the whole matrix 0, and its inverse square root infinite.
    Differentiable (the diagonal, a constant, has no gradient)."""
    w = w - w.mean(0, keepdim=True)
    k = gaussian_kernel(w, w, bandwidth)
    eye = torch.eye(k.shape[0], dtype=torch.bool, device=k.device)
    return torch.where(eye, torch.ones((), dtype=k.dtype, device=k.device), k)


class _InvSqrtPSD(torch.autograd.Function):
    """``K^{-1/2}`` by ``eigh`` with a relative eigenvalue floor, and a stable backward.

    The backward is the Daleckii-Krein formula ``dF = U (D o (U^T dK U)) U^T`` with ``D`` the
    divided differences of ``f(l) = max(l, c)^{-1/2}``, written without subtractions of nearly
    equal numbers. Autograd through ``eigh`` divides by eigenvalue gaps instead, which blows up
    (or gives NaN) when anchors nearly coincide or when many eigenvalues sit at the floor, exactly
    the cases a trained anchor set runs into. The floor ``c = floor * max(l)`` moves with the top
    eigenvalue; that dependence is in the backward too.
    """

    @staticmethod
    def forward(ctx, K, eigenvalue_floor):
        K = 0.5 * (K + K.transpose(-1, -2))
        evals, evecs = torch.linalg.eigh(K)
        top = evals.amax(-1, keepdim=True)
        # a matrix with no positive eigenvalue (the zero matrix) has the pseudo-inverse's answer,
        # 0, not the inverse square root of a floor at the dtype's tiniest number (inf in float32)
        live = top > torch.finfo(K.dtype).tiny
        c = eigenvalue_floor * top.clamp_min(torch.finfo(K.dtype).tiny)
        lam = torch.maximum(evals, c)
        ctx.save_for_backward(evals, evecs, c, live)
        ctx.eigenvalue_floor = eigenvalue_floor
        inv = torch.where(live, lam.rsqrt(), torch.zeros_like(lam))
        return (evecs * inv.unsqueeze(-2)) @ evecs.transpose(-1, -2)

    @staticmethod
    def backward(ctx, grad):
        evals, evecs, c, live = ctx.saved_tensors
        floored = evals < c
        lam = torch.maximum(evals, c)
        s = lam.sqrt()
        li, lj = lam.unsqueeze(-1), lam.unsqueeze(-2)
        si, sj = s.unsqueeze(-1), s.unsqueeze(-2)
        # both above the floor: (li^-1/2 - lj^-1/2) / (li - lj) = -1 / (si sj (si + sj))
        D = -1.0 / (si * sj * (si + sj))
        # one floored (raw eigenvalue e_j < c <= l_i): the chord from (e_j, c^-1/2) to
        # (l_i, l_i^-1/2)
        # = slope(l_i, c) * (l_i - c) / (l_i - e_j), the last factor in [0, 1]
        ei, ej = evals.unsqueeze(-1), evals.unsqueeze(-2)
        fi, fj = floored.unsqueeze(-1), floored.unsqueeze(-2)
        gap_j = (li - c.unsqueeze(-1)) / (li - ej).clamp_min(torch.finfo(lam.dtype).tiny)
        gap_i = (lj - c.unsqueeze(-1)) / (lj - ei).clamp_min(torch.finfo(lam.dtype).tiny)
        D = torch.where(fj & ~fi, D * gap_j.clamp(0, 1), D)
        D = torch.where(fi & ~fj, D * gap_i.clamp(0, 1), D)
        D = torch.where(fi & fj, torch.zeros_like(D), D)
        G = 0.5 * (grad + grad.transpose(-1, -2))
        Gt = evecs.transpose(-1, -2) @ G @ evecs
        inner = D * Gt
        # floored eigenvalues follow c = floor * l_max: d f / d l_max = -c^-3/2 floor / 2 each
        top_idx = evals.argmax(-1, keepdim=True)
        dtop = (torch.diagonal(Gt, dim1=-2, dim2=-1) * floored).sum(-1, keepdim=True)
        dtop = dtop * (-0.5) * ctx.eigenvalue_floor * c.pow(-1.5)
        onehot = torch.zeros_like(evals).scatter(-1, top_idx, 1.0)
        inner = inner + torch.diag_embed(onehot * dtop)
        inner = torch.where(live.unsqueeze(-1), inner, torch.zeros_like(inner))
        gK = evecs @ inner @ evecs.transpose(-1, -2)
        return 0.5 * (gK + gK.transpose(-1, -2)), None


def inv_sqrt_psd(K: torch.Tensor, eigenvalue_floor: float = 1e-4) -> torch.Tensor:
    """Symmetric inverse square root of a PSD matrix, eigenvalues floored relative to the largest.

    Computed in float64 (the matrix is small; float32 ``eigh`` loses digits at a 1e-4 floor) and
    returned in ``K``'s dtype. Differentiable, with a backward that stays finite when eigenvalues
    coincide (a closed-form backward through the eigendecomposition). A matrix with no positive
    eigenvalue (the zero matrix) gives the zero matrix, as a pseudo-inverse does, with a zero
    gradient.
    """
    return _InvSqrtPSD.apply(K.double(), float(eigenvalue_floor)).to(K.dtype)


def _unit(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows projected on the unit sphere, and their norms. Scale-free: every row of nonzero norm
    is divided by it, whatever its magnitude (no absolute floor, so the same data at 1e-13 or
    1e13 gives the same directions); a row of norm 0 stays 0."""
    norm = row_norm(x)
    return x / torch.where(norm > 0, norm, torch.ones_like(norm)), norm


def nystrom_map(
    x: torch.Tensor,
    anchors: torch.Tensor,
    normalization: torch.Tensor,
    bandwidth: float,
    *,
    normalize: bool = DEFAULT_NORMALIZE,
    keep_norm: bool = DEFAULT_KEEP_NORM,
) -> torch.Tensor:
    """psi(x) for rows ``x (..., D)``: ``kappa(x, anchors) @ normalization`` (normalization symmetric).

    With ``normalize`` the rows are projected on the unit sphere first (anchors are assumed unit
    too); with ``keep_norm`` the output is multiplied back by each row's norm, as CKN does.
    """
    if normalize:
        x, norm = _unit(x)
    psi = gaussian_kernel(x, anchors, bandwidth) @ normalization
    if normalize and keep_norm:
        psi = psi * norm
    return psi


#: a row whose ``||x||^2 / (2 bandwidth^2)`` exceeds this over the dtype's eps gets its kernel from
#: the differences (an error of about 1e-5 in the exponent)
_FAR_EXPONENT_ERROR = 1e-5


def nystrom_map_into(x, anchors, normalization, bandwidth, out, buf, *, mean=None, scale=None,
                     normalize=DEFAULT_NORMALIZE, keep_norm=DEFAULT_KEEP_NORM) -> torch.Tensor:
    """:func:`nystrom_map` of the rows ``x (n, D)``, standardised by ``mean`` and ``scale`` first
    (``None``: as they are), written into ``out (n, k)``, for inference (no gradient).

    The kernel values ``exp(c (2 x.w - ||w||^2 - ||x||^2))``, ``c = 1 / (2 bandwidth^2)``, are one
    matrix product with the anchors' norms folded in and three in-place passes over ``buf`` (at
    least ``n`` rows of ``k``; small enough to stay in the cache when the caller maps a large
    input block by block), then one matrix product into ``out``. The same numbers as
    :func:`nystrom_map` up to float rounding, and closer where a row is far from zero against the
    bandwidth (its kernel row then comes from the differences ``x - w`` themselves, not the
    expansion, whose terms cancel). Returns ``out``.
    """
    if mean is not None:
        x = (x - mean) / scale
    if normalize:
        x, norm = _unit(x)
    c = 1.0 / (2.0 * bandwidth**2)
    k = buf[: x.shape[0]]
    xx = (x * x).sum(-1, keepdim=True).mul_(c)
    torch.addmm((anchors * anchors).sum(-1).mul_(-c), x, anchors.T, alpha=2.0 * c, out=k)
    k.sub_(xx).clamp_max_(0.0).exp_()
    # rows far from zero against the bandwidth: the expansion's terms cancel to an error of about
    # eps * c * ||x||^2 in the exponent (heavy-tailed data: an element on an anchor read 0 for
    # 1). Their kernel rows again from the differences themselves, a block at a time.
    limit = _FAR_EXPONENT_ERROR / torch.finfo(x.dtype).eps
    if x.shape[0] and float(xx.max()) > limit:  # one read: no such row in ordinary data
        rows = (xx[:, 0] > limit).nonzero()[:, 0]
        # torch's distances from the differences (its matrix-product form is the expansion)
        d = torch.cdist(x[rows], anchors, compute_mode="donot_use_mm_for_euclid_dist").square_()
        # a non-finite row stays NaN, as the expansion gives it (the caller's check names it)
        k[rows] = torch.where(d.isfinite(), d.mul(-c).exp_(), torch.nan)
    torch.mm(k, normalization, out=out)
    if normalize and keep_norm:
        out.mul_(norm)
    return out


def _check_kmer_args(window, dilation=1) -> None:
    for name, v in (("window", window), ("dilation", dilation)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def kmer_unfold(x: torch.Tensor, mask: torch.Tensor, window: int, dilation: int = 1):
    """Concatenate ``window`` consecutive elements of padded sequences (``dilation`` apart).

    ``x (B, n, d)``, ``mask (B, n)`` (a prefix mask: real elements come first) -> ``(B, m, window
    * d)`` and its mask, ``m = max(n - span + 1, 1)`` with ``span = (window - 1) * dilation + 1``:
    k-mer ``i`` holds elements ``i, i + dilation, ...``, and a set of ``n_b`` real elements has
    ``max(n_b - span + 1, 1)`` real k-mers: a set shorter than the span has one, its last element
    repeated past its end (as :class:`skset.NystromFeatures` builds them).
    """
    mask = as_mask(mask, x)
    _check_kmer_args(window, dilation)
    if mask is None:
        mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    if window == 1:
        return x, mask
    B, n, d = x.shape
    span = (window - 1) * dilation + 1
    m = n - span + 1 if n >= span else 1
    steps = (torch.arange(m, device=x.device)[:, None]
             + dilation * torch.arange(window, device=x.device)[None, :]).reshape(1, -1)
    last = (mask.sum(1, keepdim=True) - 1).clamp_min(0)  # (B, 1)
    index = torch.minimum(steps, last)  # (B, m * window): clipped at each set's last element
    real = torch.arange(m, device=x.device)[None, :] < (last + 2 - span).clamp_min(1)
    real = real & mask[:, :1]
    # one gather (not Tensor.unfold, whose export guards the length of univariate sequences)
    xw = x.gather(1, index.unsqueeze(-1).expand(B, m * window, d)).reshape(B, m, window * d)
    return xw, real


def kmer_mass(weights: torch.Tensor, window: int, dilation: int = 1,
              mask: torch.Tensor | None = None) -> torch.Tensor:
    """The mass of each k-mer of padded sequences: the mean of its ``window`` elements' masses.

    ``weights (B, n)`` -> ``(B, m)``, aligned with :func:`kmer_unfold` (a real k-mer holds real
    elements only, so pads never enter a real k-mer's mass; k-mers that reach past a set's end
    need the sets' ``mask`` to know where each ends). Every element is in at least one k-mer, so
    a set with positive mass keeps a positive total mass; an element of mass 0 still lends its
    features to the k-mers it is in.
    """
    if window == 1:
        return weights
    if mask is None:
        mask = torch.ones(weights.shape, dtype=torch.bool, device=weights.device)
    return kmer_unfold(weights.unsqueeze(-1), mask, window, dilation)[0].mean(-1)


def kmer_level_shape(x: torch.Tensor, window: int) -> torch.Tensor:
    """k-mers ``(B, m, window * d)`` of :func:`kmer_unfold` coded as level + shape: the
    deviations from each k-mer's mean over its steps, then that mean: ``(B, m, window * d + d)``
    (the coding of :class:`skset.NystromFeatures` with ``kmer_coding="level_shape"``)."""
    _check_kmer_args(window)
    window = int(window)
    # sizes read from x (reshape, not unflatten; a broadcast, not repeat): the legacy ONNX
    # exporter traced unflatten's sizes as constants, and a Set Transformer's graph then held
    # the batch and the number of k-mers of the example it was traced on
    steps = x.reshape(*x.shape[:-1], window, x.shape[-1] // window)  # (..., window, d)
    level = steps.mean(-2)  # (..., d)
    return torch.cat([(steps - level.unsqueeze(-2)).flatten(-2), level], dim=-1)


class NystromLayer(nn.Module):
    """Nystrom map of each element (or k-mer) of padded sets, anchors as Parameters.

    The map expands squared distances as ``|x|^2 - 2 x.w + |w|^2``: give it centred (or
    standardised) elements, as :class:`skset.NystromFeatures` does. In float32, elements and
    anchors far from zero (a level of 1e3 against a bandwidth of 1) lose the digits of their
    distances (the kernel's diagonal reads 1.06 at 1e3, 3.9 at 1e4).

    Parameters
    ----------
    in_features : int
        Features per element ``d``.
    n_components : int, default=DEFAULT_N_COMPONENTS
        Number of anchors ``k`` (output features).
    bandwidth : float, default=DEFAULT_BANDWIDTH
        Gaussian kernel bandwidth ``sigma`` (on the unit sphere when ``normalize``).
    window : int, default=1
        k-mer width: ``window`` consecutive elements are concatenated before the map (a set
        shorter than ``window`` has one k-mer, its last element repeated, :func:`kmer_unfold`).
    dilation : int, default=1
        With ``window > 1``: the k-mer's elements are ``dilation`` steps apart (its span
        ``(window - 1) * dilation + 1``; a set shorter than the span has one k-mer, its last
        element repeated, :func:`kmer_unfold`).
    kmer_coding : {"level_shape", "plain"}, default="level_shape"
        With ``window > 1``: ``"level_shape"`` codes each k-mer as its deviations from its mean
        followed by the mean (:func:`kmer_level_shape`); the standardisation buffers ``mean`` and
        ``scale`` then apply to the coded k-mers (``window * d + d`` features), not to the
        elements.
    normalize, keep_norm : bool, default=DEFAULT_NORMALIZE, DEFAULT_KEEP_NORM
        Project (k-mers of) elements on the unit sphere; multiply the output back by the norm.
    eigenvalue_floor : float, default=DEFAULT_EIGENVALUE_FLOOR
        Relative floor on the eigenvalues of ``kappa(w, w)`` for its inverse square root.

    The defaults are the module constants ``DEFAULT_*`` of :mod:`skset.nn.nystrom`, which
    :class:`skset.NystromFeatures` uses too: a layer and an estimator built with defaults compute
    the same map (their values are listed in :class:`skset.NystromFeatures`).

    The input standardisation ``(x - mean) / scale`` is held in buffers (identity by default) so a
    layer built by :meth:`skset.NystromFeatures.to_module` gives exactly the estimator's numbers.

    Shapes: ``forward(x (B, n, d), mask (B, n))`` -> ``(B, n - window + 1, k)``, new mask.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import NystromLayer
    >>> layer = NystromLayer(in_features=4, n_components=8, window=3)
    >>> x = torch.randn(2, 10, 4); mask = torch.arange(10) < torch.tensor([[10], [6]])
    >>> out, out_mask = layer(x, mask)
    >>> out.shape, out_mask.sum(1).tolist()  # 3-mers: n - 2 per set
    (torch.Size([2, 8, 8]), [8, 4])
    """

    def __init__(
        self,
        in_features: int,
        n_components: int = DEFAULT_N_COMPONENTS,
        *,
        bandwidth: float = DEFAULT_BANDWIDTH,
        window: int = 1,
        dilation: int = 1,
        kmer_coding: str = "level_shape",
        normalize: bool = DEFAULT_NORMALIZE,
        keep_norm: bool = DEFAULT_KEEP_NORM,
        eigenvalue_floor: float = DEFAULT_EIGENVALUE_FLOOR,
        anchors: torch.Tensor | None = None,
    ):
        super().__init__()
        self.in_features = in_features
        self.n_components = n_components
        self.bandwidth = float(bandwidth)
        self.window = int(window)
        self.dilation = int(dilation)
        if kmer_coding not in ("plain", "level_shape"):
            raise ValueError(f"kmer_coding={kmer_coding!r} must be 'plain' or 'level_shape'.")
        self.kmer_coding = kmer_coding if self.window > 1 else "plain"
        self.normalize = normalize
        self.keep_norm = keep_norm
        self.eigenvalue_floor = eigenvalue_floor
        D = in_features * self.window
        coded = self.kmer_coding == "level_shape"
        if coded:
            D += in_features
        if anchors is None:
            anchors = torch.randn(n_components, D) / math.sqrt(D)
            if normalize:
                anchors = _unit(anchors)[0]
        self.anchors = nn.Parameter(anchors.clone())
        n_std = D if coded else in_features  # what the standardisation applies to
        self.register_buffer("mean", torch.zeros(n_std, dtype=self.anchors.dtype))
        self.register_buffer("scale", torch.ones(n_std, dtype=self.anchors.dtype))

    def normalization(self) -> torch.Tensor:
        """``kappa(w, w)^{-1/2}``, recomputed (differentiably) from the current anchors."""
        w = _unit(self.anchors)[0] if self.normalize else self.anchors
        return inv_sqrt_psd(anchor_gram(w, self.bandwidth), self.eigenvalue_floor)

    def for_export(self, normalization: torch.Tensor | None = None) -> NystromLayer:
        """A copy of this layer whose ``kappa(w, w)^{-1/2}`` is a fixed buffer, for export (ONNX
        has no eigendecomposition; for a fitted layer the matrix depends on the anchors alone).

        ``normalization``: the matrix to hold (default: :meth:`normalization` of the current
        anchors, without autograd). The copy computes the same map and is not meant for training
        (its matrix no longer follows the anchors).
        """
        if normalization is None:
            with torch.no_grad():
                normalization = self.normalization()
        return _FrozenNystromLayer(self, normalization)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        mask = as_mask(mask, x)
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        # padding may hold anything (NaN, inf): zero it first, or it would reach the padded
        # outputs (NaN * 0 is NaN) and, through them, the gradients of the anchors
        x = torch.where(mask.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))
        dilation = getattr(self, "dilation", 1)  # absent in older pickles, as kmer_coding
        if getattr(self, "kmer_coding", "plain") == "level_shape":
            x, mask = kmer_unfold(x, mask, self.window, dilation)
            x = (kmer_level_shape(x, self.window) - self.mean) / self.scale
        else:
            x = (x - self.mean) / self.scale
            x, mask = kmer_unfold(x, mask, self.window, dilation)
        w = _unit(self.anchors)[0] if self.normalize else self.anchors
        psi = nystrom_map(x, w, self.normalization(), self.bandwidth,
                          normalize=self.normalize, keep_norm=self.keep_norm)
        # in place: the product that made psi does not read it back in its backward
        return psi.mul_(mask.unsqueeze(-1).to(psi.dtype)), mask


class _FrozenNystromLayer(NystromLayer):
    """:meth:`NystromLayer.for_export`: a copy of ``layer`` (its settings, anchors and
    standardisation) whose ``kappa(w, w)^{-1/2}`` is the buffer ``frozen_normalization``."""

    def __init__(self, layer: NystromLayer, normalization: torch.Tensor):
        super().__init__(
            layer.in_features, layer.n_components, bandwidth=layer.bandwidth,
            window=layer.window, dilation=getattr(layer, "dilation", 1),
            kmer_coding=getattr(layer, "kmer_coding", "plain"),
            normalize=layer.normalize, keep_norm=layer.keep_norm,
            eigenvalue_floor=layer.eigenvalue_floor, anchors=layer.anchors.detach())
        self.anchors.requires_grad_(layer.anchors.requires_grad)
        self.mean = layer.mean.detach().clone()
        self.scale = layer.scale.detach().clone()
        self.train(layer.training)
        self.register_buffer("frozen_normalization",
                             normalization.detach().to(layer.anchors.dtype).clone())

    def normalization(self) -> torch.Tensor:
        return self.frozen_normalization
