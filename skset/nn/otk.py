r"""The optimal transport kernel embedding (OTKE) as a differentiable layer.

For a set :math:`\mathbf{x} \in \mathbb{R}^{n \times k}` and ``q`` references
:math:`\mathbf{z}^{(r)} \in \mathbb{R}^{p \times k}`,

.. math::

    \Phi_{\mathbf{z}}(\mathbf{x}) = \frac{1}{\sqrt{q}} \Big( \sqrt{p}\,
    \mathbf{P}(\mathbf{x}, \mathbf{z}^{(r)})^\top \mathbf{x} \Big)_{r = 1..q}
    \in \mathbb{R}^{q \times p \times k}

(Mialon et al. 2021, eq. 3 and 8), with :math:`\mathbf{P}` the entropic transport plan of
:func:`skset.ot.sinkhorn` for the similarity :math:`\langle x_i, z_j \rangle`. With
``position_sigma`` the plan is multiplied element-wise by
:math:`S_{ij} = \exp(-(i/n - j/p)^2 / \sigma_{pos}^2)` (Appendix B.3), ``n`` being each set's real
length.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ot import position_weights, sinkhorn

__all__ = ["OTKLayer", "otk_plans", "otk_pool"]


def otk_plans(
    x: torch.Tensor,
    mask: torch.Tensor,
    references: torch.Tensor,
    *,
    epsilon: float,
    sinkhorn_iter: int = 10,
    position_sigma: float | None = None,
    method: str = "auto",
) -> torch.Tensor:
    """Plans ``(B, q, n, p)`` between each set of ``x (B, n, k)`` and each of ``references (q, p, k)``."""
    B, n, _ = x.shape
    q, p, k = references.shape
    sim = x @ references.reshape(q * p, k).T  # (B, n, q*p): one matmul for all references
    if q == 1:
        sim = sim.unsqueeze(1)
        rep_mask = mask
    else:
        sim = sim.view(B, n, q, p).permute(0, 2, 1, 3)
        rep_mask = mask.repeat_interleave(q, dim=0)
    P = sinkhorn(sim.reshape(B * q, n, p), rep_mask, epsilon=epsilon, n_iter=sinkhorn_iter,
                 method=method).view(B, q, n, p)
    if position_sigma is not None:
        P = P * position_weights(mask, p, position_sigma, dtype=P.dtype).unsqueeze(1)
    return P


def otk_pool(x: torch.Tensor, plans: torch.Tensor) -> torch.Tensor:
    """``sqrt(p) P^T x / sqrt(q)`` for every reference: ``(B, q, p, k)``."""
    B, q, n, p = plans.shape
    if q == 1:
        out = torch.bmm(plans[:, 0].transpose(1, 2), x).unsqueeze(1)
    else:
        out = torch.einsum("bqnp,bnk->bqpk", plans, x)
    return out * math.sqrt(p / q)


class OTKLayer(nn.Module):
    """Optimal transport kernel embedding of padded sets, references as Parameters.

    Parameters
    ----------
    in_features : int
        Features per element ``k``.
    n_supports : int
        Supports per reference ``p``.
    n_references : int
        Number of references ``q`` (like attention heads).
    epsilon : float
        Entropic regularisation of the transport plan.
    sinkhorn_iter : int
        Sinkhorn iterations (10 in the paper).
    position_sigma : float or None
        Bandwidth ``sigma_pos`` of the positional weights; ``None`` ignores positions.
    method : {"auto", "log", "exp"}
        Sinkhorn solver, see :func:`skset.ot.sinkhorn`.
    references : Tensor (q, p, k), optional
        Initial references; default small random values.

    Shapes: ``forward(x (B, n, k), mask (B, n))`` -> ``(B, q * p, k)``; flatten it for a linear head.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import OTKLayer
    >>> layer = OTKLayer(in_features=8, n_supports=4, epsilon=0.5)
    >>> x = torch.randn(3, 10, 8); mask = torch.arange(10) < torch.tensor([[10], [7], [3]])
    >>> layer(x, mask).shape
    torch.Size([3, 4, 8])
    """

    def __init__(
        self,
        in_features: int,
        n_supports: int = 10,
        n_references: int = 1,
        *,
        epsilon: float = 0.5,
        sinkhorn_iter: int = 10,
        position_sigma: float | None = None,
        method: str = "auto",
        references: torch.Tensor | None = None,
    ):
        super().__init__()
        self.in_features = in_features
        self.n_supports = n_supports
        self.n_references = n_references
        self.epsilon = float(epsilon)
        self.sinkhorn_iter = int(sinkhorn_iter)
        self.position_sigma = position_sigma
        self.method = method
        if references is None:
            bound = 1.0 / math.sqrt(n_supports)
            references = torch.empty(n_references, n_supports, in_features).uniform_(-bound, bound)
        if tuple(references.shape) != (n_references, n_supports, in_features):
            raise ValueError(f"references must have shape {(n_references, n_supports, in_features)}"
                             f", got {tuple(references.shape)}")
        self.references = nn.Parameter(references.clone())

    def plans(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The transport plans ``(B, q, n, p)`` (positional weights applied)."""
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        return otk_plans(x, mask, self.references, epsilon=self.epsilon,
                         sinkhorn_iter=self.sinkhorn_iter, position_sigma=self.position_sigma,
                         method=self.method)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        out = otk_pool(x, self.plans(x, mask))
        return out.reshape(x.shape[0], -1, x.shape[-1])

    @classmethod
    def from_estimator(cls, est) -> OTKLayer:
        """A layer with the fitted references of a :class:`skset.OTKEmbedding`.

        The layer returns the raw embedding; the estimator's optional centring and normalisation
        of its output (``center``, ``normalize``) is not part of the layer.
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(est)
        refs = torch.as_tensor(est.references_)
        return cls(refs.shape[2], refs.shape[1], refs.shape[0], epsilon=est.epsilon,
                   sinkhorn_iter=est.sinkhorn_iter, position_sigma=est.position_sigma,
                   method=est.sinkhorn_method, references=refs)
