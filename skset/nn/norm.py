"""Masked normalisation layers for sets: set norm and a mask-aware wrapper for layer norm."""

from __future__ import annotations

import numbers

import torch
from torch import nn

from ._masks import as_mask

__all__ = ["SetNorm", "set_norm", "make_norm", "row_norm", "graph_without_branches"]


def graph_without_branches() -> bool:
    """Whether the code runs traced, compiled, exported or under ``torch.func`` transforms,
    where a Python branch on the data is not allowed (the branch-free path is taken)."""
    return (torch.jit.is_tracing() or torch.compiler.is_compiling()
            or torch._C._are_functorch_transforms_active())


def _scaled_norm(x: torch.Tensor) -> torch.Tensor:
    """``m * ||x / m||`` over the last dimension (kept), ``m`` the largest magnitude of the row
    (out of the graph: exact, the norm is homogeneous in it): no square under- or overflows."""
    top = x.detach().abs().amax(-1, keepdim=True)
    top = torch.where(top > 0, top, torch.ones_like(top))
    return top * torch.linalg.vector_norm(x / top, dim=-1, keepdim=True)


def row_norm(x: torch.Tensor) -> torch.Tensor:
    """Euclidean norms of the rows of ``x`` (over its last dimension, kept), whatever the scale
    of each row: the plain norm, and the rows whose norm lies where squares are not exact
    (float32: rows near 1e-25 or 1e20; zero rows too) recomputed by :func:`_scaled_norm`, so
    that the common case costs one norm. A traced, compiled or exported graph (no branch on
    the data), and one under ``torch.func`` transforms (``vmap``, per-sample gradients), takes
    :func:`_scaled_norm` for every row."""
    if graph_without_branches():
        return _scaled_norm(x)
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    if x.shape[-1] == 0:  # no features: zero norms, nothing to rescue
        return norm
    lim = torch.finfo(x.dtype)
    out = ~((norm > lim.tiny ** 0.5 / lim.eps) & (norm < lim.max ** 0.5 * lim.eps))
    if not bool(out.any()):
        return norm
    return norm.masked_scatter(out, _scaled_norm(x[out.squeeze(-1)]))


def _check_eps(eps) -> None:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < float("inf"):
        raise ValueError(f"eps must be a positive finite number (a set of equal values has "
                         f"variance 0), got {eps!r}.")


def set_norm(
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    r"""Standardise each set over its real elements and all its features.

    .. math::

        \mathrm{SN}(a)_{nid} = \frac{a_{nid} - \mu_n}{\sqrt{\sigma_n^2 + \epsilon}}
        \gamma_d + \beta_d,
        \quad \mu_n = \frac{1}{M_n D}\sum_{i \le M_n}\sum_d a_{nid},
        \quad \sigma_n^2 = \frac{1}{M_n D}\sum_{i \le M_n}\sum_d (a_{nid} - \mu_n)^2,

    where :math:`M_n` counts the *real* elements of set ``n`` only: padded rows take no share of the
    statistics (Zhang et al., 2022, Section 4.2).

    Parameters
    ----------
    x : Tensor of shape (B, n, D)
    mask : bool Tensor of shape (B, n) or None
        ``True`` on real elements; ``None`` means all are real.
    weight, bias : Tensor of shape (D,) or None
        The per-feature affine transform (gamma, beta).
    eps : float
        Added to the variance; positive (a set of equal values has variance 0).

    Returns
    -------
    Tensor of shape (B, n, D)
        Padded rows hold finite values that carry no meaning.
    """
    _check_eps(eps)
    return _set_norm(x, mask, weight, bias, eps)


def _set_norm(x, mask, weight, bias, eps: float) -> torch.Tensor:
    """:func:`set_norm` without the argument checks (``SetNorm`` checks ``eps`` once, when built)."""
    mask = as_mask(mask, x)
    D = x.shape[-1]
    if mask is None:
        mu = x.mean(dim=(-2, -1), keepdim=True)
        var = (x - mu).pow(2).mean(dim=(-2, -1), keepdim=True)
    else:
        m = mask.unsqueeze(-1).to(x.dtype)
        count = m.sum(dim=-2, keepdim=True).clamp_min(1.0) * D  # (B, 1, 1)
        # zero the padded rows first so that garbage (even inf) there cannot leak into the sums
        xz = torch.where(mask.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))
        mu = xz.sum(dim=(-2, -1), keepdim=True) / count
        var = ((xz - mu).pow(2) * m).sum(dim=(-2, -1), keepdim=True) / count
        x = xz
    out = (x - mu) * torch.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


class SetNorm(nn.Module):
    """Set norm: per-set standardisation over real elements and all features, per-feature affine.

    Parameters
    ----------
    dim : int
        Number of features ``D``.
    eps : float, default=1e-5
        Added to the variance.
    affine : bool, default=True
        Learn the per-feature scale ``gamma`` (init 1) and shift ``beta`` (init 0).

    See Also
    --------
    set_norm : the functional form, with the formula.

    References
    ----------
    Zhang, Tozzo, Higgins, Ranganath. "Set Norm and Equivariant Skip Connections: Putting the Deep
    in Deep Sets", ICML 2022.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import SetNorm
    >>> x = torch.randn(2, 5, 3); mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()
    >>> SetNorm(3)(x, mask).shape
    torch.Size([2, 5, 3])
    """

    def __init__(self, dim: int, eps: float = 1e-5, affine: bool = True):
        super().__init__()
        self.dim = int(dim)
        _check_eps(eps)
        self.eps = float(eps)
        if affine:
            self.weight = nn.Parameter(torch.ones(self.dim))
            self.bias = nn.Parameter(torch.zeros(self.dim))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return _set_norm(x, mask, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}, affine={self.weight is not None}"


class _MaskedLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` (per element, so padding-safe by construction) taking an ignored mask."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(x)


class _Identity(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return x


def make_norm(norm: str | None, dim: int) -> nn.Module:
    """A norm called as ``module(x, mask)``: ``"set"``, ``"layer"`` or ``None`` (identity)."""
    if norm is None:
        return _Identity()
    if norm == "set":
        return SetNorm(dim)
    if norm == "layer":
        return _MaskedLayerNorm(dim)
    raise ValueError(f"norm={norm!r} is not supported; use 'set', 'layer' or None.")
