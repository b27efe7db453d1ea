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

import torch
from torch import nn

__all__ = ["NystromLayer", "gaussian_kernel", "inv_sqrt_psd", "nystrom_map", "kmer_unfold"]


def gaussian_kernel(x: torch.Tensor, w: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """``exp(-||x - w||^2 / (2 bandwidth^2))`` between the rows of ``x (..., D)`` and ``w (k, D)``."""
    sq = (x * x).sum(-1, keepdim=True) + (w * w).sum(-1) - 2.0 * (x @ w.T)
    return torch.exp(-sq.clamp_min(0.0) / (2.0 * bandwidth**2))


def inv_sqrt_psd(K: torch.Tensor, eigenvalue_floor: float = 1e-4) -> torch.Tensor:
    """Symmetric inverse square root of a PSD matrix, eigenvalues floored relative to the largest."""
    K = 0.5 * (K + K.transpose(-1, -2))
    evals, evecs = torch.linalg.eigh(K)
    floor = eigenvalue_floor * evals.amax(-1, keepdim=True).clamp_min(torch.finfo(K.dtype).tiny)
    evals = torch.maximum(evals, floor)
    return (evecs * evals.rsqrt().unsqueeze(-2)) @ evecs.transpose(-1, -2)


def _unit(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / norm.clamp_min(1e-12), norm


def nystrom_map(
    x: torch.Tensor,
    anchors: torch.Tensor,
    normalization: torch.Tensor,
    bandwidth: float,
    *,
    normalize: bool = True,
    keep_norm: bool = False,
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


def kmer_unfold(x: torch.Tensor, mask: torch.Tensor, window: int):
    """Concatenate ``window`` consecutive elements of padded sequences.

    ``x (B, n, d)``, ``mask (B, n)`` -> ``(B, n - window + 1, window * d)`` and its mask; window
    ``i`` is real when its last element is (masks are prefix masks: real elements come first).
    """
    if window == 1:
        return x, mask
    B, n, d = x.shape
    if n < window:
        raise ValueError(f"sequences of padded length {n} are shorter than the k-mer window {window}")
    xw = x.unfold(1, window, 1)  # (B, n-w+1, d, w)
    xw = xw.transpose(2, 3).reshape(B, n - window + 1, window * d)
    return xw, mask[:, window - 1 :]


class NystromLayer(nn.Module):
    """Nystrom map of each element (or k-mer) of padded sets, anchors as Parameters.

    Parameters
    ----------
    in_features : int
        Features per element ``d``.
    n_components : int
        Number of anchors ``k`` (output features).
    bandwidth : float
        Gaussian kernel bandwidth ``sigma`` (on the unit sphere when ``normalize``).
    window : int
        k-mer width: ``window`` consecutive elements are concatenated before the map.
    normalize, keep_norm : bool
        Project (k-mers of) elements on the unit sphere; multiply the output back by the norm.
    eigenvalue_floor : float
        Relative floor on the eigenvalues of ``kappa(w, w)`` for its inverse square root.

    The input standardisation ``(x - mean) / scale`` is held in buffers (identity by default) so a
    layer built by :meth:`from_estimator` gives exactly the estimator's numbers.

    Shapes: ``forward(x (B, n, d), mask (B, n))`` -> ``(B, n - window + 1, k)``, new mask.
    """

    def __init__(
        self,
        in_features: int,
        n_components: int = 128,
        *,
        bandwidth: float = 0.6,
        window: int = 1,
        normalize: bool = True,
        keep_norm: bool = False,
        eigenvalue_floor: float = 1e-4,
        anchors: torch.Tensor | None = None,
    ):
        super().__init__()
        self.in_features = in_features
        self.n_components = n_components
        self.bandwidth = float(bandwidth)
        self.window = int(window)
        self.normalize = normalize
        self.keep_norm = keep_norm
        self.eigenvalue_floor = eigenvalue_floor
        D = in_features * self.window
        if anchors is None:
            anchors = torch.randn(n_components, D) / math.sqrt(D)
            if normalize:
                anchors = _unit(anchors)[0]
        self.anchors = nn.Parameter(anchors.clone())
        self.register_buffer("mean", torch.zeros(in_features, dtype=self.anchors.dtype))
        self.register_buffer("scale", torch.ones(in_features, dtype=self.anchors.dtype))

    def normalization(self) -> torch.Tensor:
        """``kappa(w, w)^{-1/2}``, recomputed (differentiably) from the current anchors."""
        w = _unit(self.anchors)[0] if self.normalize else self.anchors
        return inv_sqrt_psd(gaussian_kernel(w, w, self.bandwidth), self.eigenvalue_floor)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        x = (x - self.mean) / self.scale
        x, mask = kmer_unfold(x, mask, self.window)
        w = _unit(self.anchors)[0] if self.normalize else self.anchors
        psi = nystrom_map(x, w, self.normalization(), self.bandwidth,
                          normalize=self.normalize, keep_norm=self.keep_norm)
        return psi * mask.unsqueeze(-1).to(psi.dtype), mask

    @classmethod
    def from_estimator(cls, est) -> NystromLayer:
        """A layer with the fitted parameters of a :class:`skset.NystromFeatures`."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(est)
        dtype = torch.float64 if est.anchors_.dtype.name == "float64" else torch.float32
        layer = cls(
            est.n_features_in_,
            est.anchors_.shape[0],
            bandwidth=est.bandwidth_,
            window=est.window,
            normalize=est.normalize,
            keep_norm=est.keep_norm,
            eigenvalue_floor=est.eigenvalue_floor,
            anchors=torch.as_tensor(est.anchors_, dtype=dtype),
        )
        layer.mean.copy_(torch.as_tensor(est.mean_, dtype=dtype))
        layer.scale.copy_(torch.as_tensor(est.scale_, dtype=dtype))
        return layer
