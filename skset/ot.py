r"""Batched, masked entropic optimal transport between sets and references.

For a set :math:`\mathbf{x} = (x_1, \dots, x_n)` and a reference
:math:`\mathbf{z} = (z_1, \dots, z_p)` with similarity :math:`K_{ij} = \langle x_i, z_j \rangle` (the
cost is :math:`C = -K`), the entropic plan of Mialon et al. (2021, eq. 1) is

.. math::

    \mathbf{P}(\mathbf{x}, \mathbf{z}) = \arg\max_{P \in U(a, b)} \langle P, K \rangle
    + \varepsilon H(P), \qquad a = \tfrac{1}{n}\mathbf{1}_n, \quad b = \tfrac{1}{p}\mathbf{1}_p,

computed by Sinkhorn's fixed-point iterations. Every function here takes a batch ``(B, n_max, p)`` of
similarities and a boolean mask ``(B, n_max)`` (``True`` on real elements): padded rows get zero
mass, and ``n`` in ``a`` is each set's real size, so a set's plan never depends on the rest of its
batch.

Two solvers share one iteration schedule (start from :math:`g = 0`, update the row potential then
the column potential, ``n_iter`` times, so the column marginals hold exactly):

* ``method="log"``: log-domain updates with ``logsumexp`` (Peyre & Cuturi 2019, Remark 4.23); never
  overflows, two exponentials of the whole ``(B, n, p)`` block per iteration.
* ``method="exp"``: the scaling form :math:`u = a / (E v)`, :math:`v = b / (E^\top u)` on
  :math:`E = \exp((K - \max_j K_{ij}) / \varepsilon)`: one exponential in all, then matrix-vector
  products. The row shift keeps every row's largest entry at 1, so :math:`E v` never vanishes, but a
  column far from every element can still underflow for small epsilon.
* ``method="auto"`` (default): ``"exp"``, then ``"log"`` again for just the sets whose scalings are
  not finite and positive. Same iterates, so the same plan up to rounding, at the exp-domain speed
  where it is safe and the log-domain stability where it is not.

References
----------
.. [1] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding for
   Feature Aggregation and its Relationship to Attention. ICLR 2021.
.. [2] M. Cuturi. Sinkhorn Distances: Lightspeed Computation of Optimal Transport. NeurIPS 2013.
.. [3] G. Peyre, M. Cuturi. Computational Optimal Transport. Foundations and Trends in ML, 2019.
"""

from __future__ import annotations

import math

import torch

__all__ = ["sinkhorn", "sinkhorn_log", "sinkhorn_exp", "transport_similarity", "position_weights"]

_METHODS = ("auto", "log", "exp")


def _log_marginal(mask: torch.Tensor, dtype) -> torch.Tensor:
    n_real = mask.sum(1, keepdim=True).to(dtype)
    log_a = -torch.log(n_real).expand(mask.shape)
    return torch.where(mask, log_a, torch.full_like(log_a, -math.inf))


def _check(similarity: torch.Tensor, mask, epsilon: float):
    if similarity.dim() != 3:
        raise ValueError(f"similarity must be (B, n, p), got shape {tuple(similarity.shape)}")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if mask is None:
        mask = torch.ones(similarity.shape[:2], dtype=torch.bool, device=similarity.device)
    elif mask.shape != similarity.shape[:2]:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match similarity "
                         f"{tuple(similarity.shape[:2])}")
    return mask.to(torch.bool)


# On CPU the Sinkhorn iterations are bound by memory traffic (two passes over the (B, n, p) block
# per iteration, a few flops per element): running all iterations on blocks of sets that fit in
# cache beats sweeping the whole batch each time (measured 1.3-1.7x on a 2-core EPYC, 2 MiB L2 /
# 32 MiB L3; with bmm matvecs 16 MiB blocks beat 4 MiB ones, 0.69 vs 0.82 s on 1024 x 500 x 64;
# benchmarks/bench_otk_transform.py). GPUs get the whole batch in one go.
_CPU_BLOCK_BYTES = 16 << 20


def _block_sets(similarity: torch.Tensor) -> int:
    """Sets per block: the whole batch off CPU, else as many as fit in ``_CPU_BLOCK_BYTES``."""
    B, n, p = similarity.shape
    if similarity.device.type != "cpu":
        return B
    return max(1, _CPU_BLOCK_BYTES // max(1, n * p * similarity.element_size()))


def _log_block(similarity, mask, epsilon, n_iter):
    B, n, p = similarity.shape
    logK = (similarity / epsilon).masked_fill_(~mask.unsqueeze(-1), 0.0)
    log_a = _log_marginal(mask, similarity.dtype).unsqueeze(-1)  # -inf on pads
    log_b = -math.log(p)
    g = similarity.new_zeros(B, 1, p)
    f = similarity.new_zeros(B, n, 1)
    for _ in range(n_iter):
        f = log_a - torch.logsumexp(logK + g, dim=2, keepdim=True)  # pads: -inf
        g = log_b - torch.logsumexp(logK + f, dim=1, keepdim=True)
    return torch.exp(logK + f + g)


def sinkhorn_log(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    tol: float | None = None,
) -> torch.Tensor:
    """Log-domain Sinkhorn plan, ``(B, n, p)``; see the module docstring."""
    mask = _check(similarity, mask, epsilon)
    B, n, p = similarity.shape
    if tol is None:
        step = _block_sets(similarity)
        if step >= B:
            return _log_block(similarity, mask, epsilon, n_iter)
        return torch.cat([_log_block(similarity[i:i + step], mask[i:i + step], epsilon, n_iter)
                          for i in range(0, B, step)])
    logK = torch.where(mask.unsqueeze(-1), similarity / epsilon, torch.zeros_like(similarity))
    log_a = _log_marginal(mask, similarity.dtype)
    log_b = -math.log(p)
    g = similarity.new_zeros(B, 1, p)
    f = similarity.new_zeros(B, n, 1)
    neg_inf = similarity.new_tensor(-math.inf)
    for it in range(n_iter):
        lse = torch.logsumexp(logK + g, dim=2, keepdim=True)
        f = torch.where(mask.unsqueeze(-1), log_a.unsqueeze(-1) - lse, neg_inf)
        g = log_b - torch.logsumexp(logK + f, dim=1, keepdim=True)
        if (it + 1) % 10 == 0:
            rows = torch.logsumexp(logK + f + g, dim=2).exp()
            err = torch.where(mask, (rows - log_a.exp()).abs(), 0).sum(1).max()
            if err.item() < tol:
                break
    return torch.exp(logK + f + g)


def _exp_block(similarity, mask, epsilon, n_iter):
    """Exp-domain iterations on one block; returns the plan and the scalings ``u (B, n)``,
    ``v (B, 1, p)``."""
    B, n, p = similarity.shape
    pad = ~mask.unsqueeze(-1)
    s = (similarity / epsilon).masked_fill_(pad, -math.inf)
    # the shift cancels exactly in the first row update, so it carries no gradient
    row_max = s.detach().amax(dim=2, keepdim=True).masked_fill_(pad, 0.0)
    E = s.sub_(row_max).exp_()  # pads: exp(-inf) = 0
    n_real = mask.sum(1, keepdim=True).to(s.dtype)
    a = mask.to(s.dtype) / n_real
    # E v is 0 on padded rows: adding 1 there (0 elsewhere, exactly) avoids 0/0, in grads too
    pad_one = (~mask).to(s.dtype)
    b = 1.0 / p
    v = similarity.new_ones(B, p, 1)
    u = a
    # batched matrix-vector products (bmm): no (B, n, p) temporary per iteration, which the
    # multiply-and-reduce form allocates and streams through twice (3x slower, measured)
    for _ in range(n_iter):
        u = a / (torch.bmm(E, v).squeeze(-1) + pad_one)
        v = b / torch.bmm(u.unsqueeze(1), E).transpose(1, 2)
    v = v.transpose(1, 2)  # (B, 1, p)
    return E * u.unsqueeze(-1) * v, u, v


def sinkhorn_exp(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    return_ok: bool = False,
):
    """Row-stabilised exp-domain Sinkhorn plan, ``(B, n, p)``; see the module docstring.

    With ``return_ok=True`` also returns a ``(B,)`` boolean tensor, ``False`` for sets whose
    scalings under- or overflowed (their plan is then unusable: use :func:`sinkhorn_log`).
    """
    mask = _check(similarity, mask, epsilon)
    B, n, p = similarity.shape
    step = _block_sets(similarity)
    if step >= B:
        P, u, v = _exp_block(similarity, mask, epsilon, n_iter)
    else:
        blocks = [_exp_block(similarity[i:i + step], mask[i:i + step], epsilon, n_iter)
                  for i in range(0, B, step)]
        P, u, v = (torch.cat(t) for t in zip(*blocks, strict=True))
    if not return_ok:
        return P
    # scalings far from 1 mean the exp-domain iterates are near under/overflow, in the forward
    # pass or in the backward one (which divides by (E v)^2): hand such sets to the log domain.
    # With 0 <= E <= 1 these bounds also keep P finite (NaN scalings fail the comparisons).
    thr = torch.finfo(similarity.dtype).tiny ** 0.25
    ok = ((v > thr) & (v < 1 / thr)).all(dim=(1, 2)) & (u < 1 / thr).all(dim=1)
    return P, ok


def sinkhorn(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    method: str = "auto",
    tol: float | None = None,
) -> torch.Tensor:
    """Entropic OT plan between each set of a batch and a reference.

    Parameters
    ----------
    similarity : Tensor of shape (B, n_max, p)
        ``K[b, i, j] = <x_i, z_j>`` for set ``b``; the cost is ``-K``. Padded rows may hold
        anything.
    mask : bool Tensor of shape (B, n_max) or None
        ``True`` on real elements. ``None``: every row is real.
    epsilon : float
        Entropic regularisation (``epsilon`` in the paper); smaller is closer to exact OT.
    n_iter : int
        Sinkhorn iterations (each a row then a column update). The paper uses 10.
    method : {"auto", "log", "exp"}
        Solver; see the module docstring. ``tol`` forces ``"log"``.
    tol : float or None
        Stop early once the row marginals are within ``tol`` (L1), checked every 10 iterations.

    Returns
    -------
    Tensor of shape (B, n_max, p)
        The plan: column sums ``1/p`` exactly, row sums ``1/n_b`` once converged, padded rows 0.
        Differentiable with respect to ``similarity``.

    See Also
    --------
    sinkhorn_log, sinkhorn_exp : the two solvers.
    skset.nn.otk_plans : plans of padded sets onto references, with positional weights.

    References
    ----------
    M. Cuturi. Sinkhorn Distances: Lightspeed Computation of Optimal Transport. NeurIPS 2013.

    Examples
    --------
    >>> import torch
    >>> from skset.ot import sinkhorn
    >>> K = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))
    >>> mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])  # set 1 has 3 elements
    >>> P = sinkhorn(K, mask, epsilon=0.5, n_iter=50)
    >>> P.shape
    torch.Size([2, 5, 3])
    >>> P.sum(1).round(decimals=3)  # columns: 1/p
    tensor([[0.3330, 0.3330, 0.3330],
            [0.3330, 0.3330, 0.3330]])
    >>> P[1, 3:].abs().max().item()  # padded rows get no mass
    0.0
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if method == "log" or tol is not None:
        return sinkhorn_log(similarity, mask, epsilon=epsilon, n_iter=n_iter, tol=tol)
    if method == "exp":
        return sinkhorn_exp(similarity, mask, epsilon=epsilon, n_iter=n_iter)
    mask = _check(similarity, mask, epsilon)
    P, ok = sinkhorn_exp(similarity, mask, epsilon=epsilon, n_iter=n_iter, return_ok=True)
    if bool(ok.all()):
        return P
    bad = (~ok).nonzero().squeeze(1)
    P_bad = sinkhorn_log(similarity[bad], mask[bad], epsilon=epsilon, n_iter=n_iter)
    if torch.is_grad_enabled() and similarity.requires_grad:
        # the failed exp-domain iterates hold inf/NaN: keep them out of the autograd graph
        good = ok.nonzero().squeeze(1)
        P = torch.zeros_like(similarity).index_put(
            (good,), sinkhorn_exp(similarity[good], mask[good], epsilon=epsilon, n_iter=n_iter))
    return P.index_put((bad,), P_bad)


def position_weights(
    mask: torch.Tensor, n_supports: int, sigma: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Positional weights :math:`S_{ij} = \exp(-(i/n - j/p)^2 / \sigma^2)`, ``(B, n_max, p)``.

    ``n`` is each set's real length (not the padded one), so a set's weights never depend on its
    batch; padded rows are 0.
    """
    n_real = mask.sum(1, keepdim=True).to(dtype)  # (B, 1)
    i = torch.arange(mask.shape[1], device=mask.device, dtype=n_real.dtype)
    j = torch.arange(n_supports, device=mask.device, dtype=n_real.dtype) / n_supports
    rel = (i.unsqueeze(0) / n_real).unsqueeze(-1) - j.view(1, 1, -1)
    S = torch.exp(-(rel**2) / sigma**2)
    return S * mask.unsqueeze(-1).to(S.dtype)


def transport_similarity(plan: torch.Tensor, similarity: torch.Tensor) -> torch.Tensor:
    """``<P, K>`` per set, ``(B,)``: the negated transport cost, higher is closer."""
    return (plan * torch.nan_to_num(similarity, nan=0.0, posinf=0.0, neginf=0.0)).sum(dim=(1, 2))
