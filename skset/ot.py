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

Stopping rule: with ``tol=None`` (or 0) every set gets exactly ``n_iter`` iterations. With a ``tol``,
``n_iter`` is a cap: every ``check_every`` iterations (5 by default) each set's row-marginal error
:math:`\|P\mathbf{1}_p - a\|_1` (the column marginals hold exactly) is read off the row sums that
the next row update computes anyway (:math:`u \odot Ev` in the exp domain, the row ``logsumexp``
in the log domain: no extra pass over the block), and a set whose error is at most ``tol`` keeps
that plan. A block stops once all its sets have, and sets that stopped are dropped from the
iterations when they are half of the block. Each set stops on its own error, so its plan still does
not depend on its batch. Under autograd (grad enabled and ``similarity.requires_grad``) ``tol`` is
ignored and ``n_iter`` iterations run, so that the backward pass differentiates a fixed,
deterministic computation.

References
----------
.. [1] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding for
   Feature Aggregation and its Relationship to Attention. ICLR 2021.
.. [2] M. Cuturi. Sinkhorn Distances: Lightspeed Computation of Optimal Transport. NeurIPS 2013.
.. [3] G. Peyre, M. Cuturi. Computational Optimal Transport. Foundations and Trends in ML, 2019.
"""

from __future__ import annotations

import math
import numbers

import torch

__all__ = ["sinkhorn", "sinkhorn_log", "sinkhorn_exp", "transport_similarity", "position_weights",
           "position_log_weights"]

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


def _stopping(similarity: torch.Tensor, tol, check_every) -> float | None:
    """The tolerance that applies: ``None`` for a fixed count (no tol, tol 0, or autograd)."""
    if tol is None:
        return None
    if not (isinstance(tol, numbers.Real) and not isinstance(tol, bool)
            and math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be None or a non-negative number, got {tol!r}")
    if not (isinstance(check_every, numbers.Integral) and not isinstance(check_every, bool)
            and check_every >= 1):
        raise ValueError(f"check_every must be a positive integer, got {check_every!r}")
    if tol == 0 or (torch.is_grad_enabled() and similarity.requires_grad):
        return None
    return float(tol)


class _Snapshots:
    """Early stopping bookkeeping of one block: which sets stopped, and their saved iterates.

    ``ids`` maps the working (possibly compacted) sets to the block's sets. ``check(err, *state)``
    saves the state of every set whose error is at most ``tol`` (a NaN error counts as stopped: such
    a set fails the ``ok`` test of the exp domain, or keeps its NaN in the log domain), and returns
    ``None`` while the working set stays, ``"stop"`` when every set stopped, or a boolean ``keep``
    mask when the stopped sets are at least half of the working set: the caller then drops them.
    """

    def __init__(self, B, tol, device, *saved):
        self.tol = tol
        self.ids = torch.arange(B, device=device)
        self.stopped = torch.zeros(B, dtype=torch.bool, device=device)
        self.saved = saved  # tensors (B, ...) receiving the final state of each set

    def check(self, err, *state):
        new = ~(err > self.tol) & ~self.stopped
        n_new = int(new.sum())
        if n_new == 0:
            return None
        idx = self.ids[new]
        for dst, src in zip(self.saved, state, strict=True):
            dst[idx] = src[new]
        self.stopped |= new
        n_stopped = int(self.stopped.sum())
        if n_stopped == self.stopped.numel():
            return "stop"
        if 2 * n_stopped < self.stopped.numel():
            return None
        keep = ~self.stopped
        self.ids, self.stopped = self.ids[keep], self.stopped[keep]
        return keep

    def finish(self, *state):
        """Save the state of the sets that ran to the cap."""
        rest = ~self.stopped
        idx = self.ids[rest]
        for dst, src in zip(self.saved, state, strict=True):
            dst[idx] = src[rest]


_CHECK_EVERY = 5


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


def _log_block_tol(similarity, mask, epsilon, n_iter, tol, check_every):
    """:func:`_log_block` stopping each set once its row-marginal L1 error is at most ``tol``."""
    B, n, p = similarity.shape
    logK = (similarity / epsilon).masked_fill_(~mask.unsqueeze(-1), 0.0)
    log_a = _log_marginal(mask, similarity.dtype).unsqueeze(-1)  # -inf on pads
    a = log_a.exp()
    log_b = -math.log(p)
    g = similarity.new_zeros(B, 1, p)
    f = similarity.new_zeros(B, n, 1)
    F, G = torch.empty_like(f), torch.empty_like(g)
    snap = _Snapshots(B, tol, similarity.device, F, G)
    lk, la, aa = logK, log_a, a
    for it in range(n_iter):
        lse = torch.logsumexp(lk + g, dim=2, keepdim=True)
        if it > 0 and it % check_every == 0:
            # row sums of the current plan exp(logK + f + g): exp(f + lse); pads give 0 - 0
            err = (torch.exp(f + lse) - aa).abs().sum(dim=(1, 2))
            keep = snap.check(err, f, g)
            if keep is not None:
                if isinstance(keep, str):
                    break
                lk, la, aa, lse, g = lk[keep], la[keep], aa[keep], lse[keep], g[keep]
        f = la - lse  # pads: -inf
        g = log_b - torch.logsumexp(lk + f, dim=1, keepdim=True)
    else:
        snap.finish(f, g)
    return logK.add_(F).add_(G).exp_()


def sinkhorn_log(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    tol: float | None = None,
    check_every: int = _CHECK_EVERY,
) -> torch.Tensor:
    """Log-domain Sinkhorn plan, ``(B, n, p)``; see the module docstring and :func:`sinkhorn`."""
    blocks = _blockwise(similarity, mask, epsilon, n_iter, tol, check_every,
                        fixed=_log_block, adaptive=_log_block_tol)
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks)


def _blockwise(similarity, mask, epsilon, n_iter, tol, check_every, *, fixed, adaptive,
               **adaptive_kw) -> list:
    """Check the inputs, then run one solver (``fixed``: ``n_iter`` iterations; ``adaptive``:
    stop at ``tol``) over blocks of sets small enough for the cache (:func:`_block_sets`)."""
    mask = _check(similarity, mask, epsilon)
    tol = _stopping(similarity, tol, check_every)

    def solve(sl):
        if tol is None:
            return fixed(similarity[sl], mask[sl], epsilon, n_iter)
        return adaptive(similarity[sl], mask[sl], epsilon, n_iter, tol, check_every,
                        **adaptive_kw)

    B = similarity.shape[0]
    step = _block_sets(similarity)
    if step >= B:
        return [solve(slice(None))]
    return [solve(slice(i, i + step)) for i in range(0, B, step)]


def _exp_setup(similarity, mask, epsilon):
    """Row-shifted Gibbs kernel ``E (B, n, p)``, row marginal ``a (B, n)`` and ``pad_one`` (1 on
    padded rows, 0 elsewhere) shared by the exp-domain solvers."""
    pad = ~mask.unsqueeze(-1)
    s = (similarity / epsilon).masked_fill_(pad, -math.inf)
    # the shift cancels exactly in the first row update, so it carries no gradient
    row_max = s.detach().amax(dim=2, keepdim=True).masked_fill_(pad, 0.0)
    E = s.sub_(row_max).exp_()  # pads: exp(-inf) = 0
    a = mask.to(s.dtype) / mask.sum(1, keepdim=True).to(s.dtype)
    # E v is 0 on padded rows: adding 1 there (0 elsewhere, exactly) avoids 0/0, in grads too
    return E, a, (~mask).to(s.dtype)


def _exp_block(similarity, mask, epsilon, n_iter):
    """Exp-domain iterations on one block; returns the plan and the scalings ``u (B, n)``,
    ``v (B, 1, p)``."""
    B, n, p = similarity.shape
    E, a, pad_one = _exp_setup(similarity, mask, epsilon)
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


def _exp_block_tol(similarity, mask, epsilon, n_iter, tol, check_every, stop_unsafe):
    """:func:`_exp_block` stopping each set once its row-marginal L1 error is at most ``tol``
    (no autograd here: the plan is formed in place). With ``stop_unsafe``, a set whose scalings
    leave the range of :func:`_safe` also stops there (the caller redoes it in the log domain)."""
    B, n, p = similarity.shape
    E, a, pad_one = _exp_setup(similarity, mask, epsilon)
    b = 1.0 / p
    v = similarity.new_ones(B, p, 1)
    u = a
    U, V = torch.empty_like(u), torch.empty_like(v)
    snap = _Snapshots(B, tol, similarity.device, U, V)
    Ea, aa, pa = E, a, pad_one
    for it in range(n_iter):
        Ev = torch.bmm(Ea, v).squeeze(-1)
        if it > 0 and it % check_every == 0:
            # row sums of the current plan diag(u) E diag(v): u * Ev (pads: 0 * 0 against 0)
            err = torch.addcmul(-aa, u, Ev).abs_().sum(1)
            if stop_unsafe:
                err.masked_fill_(~_safe(u, v), math.nan)
            keep = snap.check(err, u, v)
            if keep is not None:
                if isinstance(keep, str):
                    break
                Ea, aa, pa, Ev, v = Ea[keep], aa[keep], pa[keep], Ev[keep], v[keep]
        u = aa / (Ev + pa)
        v = b / torch.bmm(u.unsqueeze(1), Ea).transpose(1, 2)
    else:
        snap.finish(u, v)
    V = V.transpose(1, 2)  # (B, 1, p)
    return E.mul_(U.unsqueeze(-1)).mul_(V), U, V


def sinkhorn_exp(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    tol: float | None = None,
    check_every: int = _CHECK_EVERY,
    return_ok: bool = False,
):
    """Row-stabilised exp-domain Sinkhorn plan, ``(B, n, p)``; see the module docstring and
    :func:`sinkhorn`.

    With ``return_ok=True`` also returns a ``(B,)`` boolean tensor, ``False`` for sets whose
    scalings under- or overflowed (their plan is then unusable: use :func:`sinkhorn_log`); with a
    ``tol``, such sets then stop iterating as soon as a check finds them out of range.
    """
    blocks = _blockwise(similarity, mask, epsilon, n_iter, tol, check_every,
                        fixed=_exp_block, adaptive=_exp_block_tol, stop_unsafe=return_ok)
    if len(blocks) == 1:
        P, u, v = blocks[0]
    else:
        P, u, v = (torch.cat(t) for t in zip(*blocks, strict=True))
    if not return_ok:
        return P
    return P, _safe(u, v.transpose(1, 2))


def _safe(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(B,)``: whether the scalings ``u (B, n)``, ``v (B, p, 1)`` are safely in range.

    Scalings far from 1 mean the exp-domain iterates are near under/overflow, in the forward pass
    or in the backward one (which divides by (E v)^2): such sets go to the log domain. With
    0 <= E <= 1 these bounds also keep P finite (NaN scalings fail the comparisons).
    """
    thr = torch.finfo(u.dtype).tiny ** 0.25
    return ((v > thr) & (v < 1 / thr)).all(dim=(1, 2)) & (u < 1 / thr).all(dim=1)


def sinkhorn(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    method: str = "auto",
    tol: float | None = None,
    check_every: int = _CHECK_EVERY,
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
        Sinkhorn iterations (each a row then a column update); the cap when ``tol`` is set. The
        paper uses 10 in its supervised models and 100 for its unsupervised embedding.
    method : {"auto", "log", "exp"}
        Solver; see the module docstring.
    tol : float or None
        Stopping tolerance: a set stops at the first check where its row-marginal error
        ``sum_i |sum_j P_ij - 1/n|`` is at most ``tol`` (it lies in [0, 2]; the column marginals
        hold exactly). ``None`` or 0: exactly ``n_iter`` iterations. Ignored under autograd (grad
        enabled and ``similarity.requires_grad``): ``n_iter`` iterations then, so that the
        backward pass is that of a fixed computation.
    check_every : int
        Iterations between two checks of the tolerance.

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
    kw = dict(epsilon=epsilon, n_iter=n_iter, tol=tol, check_every=check_every)
    if method == "log":
        return sinkhorn_log(similarity, mask, **kw)
    if method == "exp":
        return sinkhorn_exp(similarity, mask, **kw)
    mask = _check(similarity, mask, epsilon)
    P, ok = sinkhorn_exp(similarity, mask, return_ok=True, **kw)
    if bool(ok.all()):
        return P
    bad = (~ok).nonzero().squeeze(1)
    P_bad = sinkhorn_log(similarity[bad], mask[bad], **kw)
    if torch.is_grad_enabled() and similarity.requires_grad:
        # the failed exp-domain iterates hold inf/NaN: keep them out of the autograd graph
        good = ok.nonzero().squeeze(1)
        P = torch.zeros_like(similarity).index_put(
            (good,), sinkhorn_exp(similarity[good], mask[good], **kw))
    return P.index_put((bad,), P_bad)


def position_weights(
    mask: torch.Tensor, n_supports: int, sigma: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Positional weights :math:`S_{ij} = \exp(-(i/n - j/p)^2 / \sigma^2)`, ``(B, n_max, p)``.

    ``n`` is each set's real length (not the padded one), so a set's weights never depend on its
    batch; padded rows are 0.
    """
    S = torch.exp(-(_position_offsets(mask, n_supports, dtype) ** 2) / sigma**2)
    return S * mask.unsqueeze(-1).to(S.dtype)


def _position_offsets(mask, n_supports, dtype):
    """``i/n - j/p`` with ``n`` each set's real length, ``(B, n_max, p)``."""
    n_real = mask.sum(1, keepdim=True).to(dtype)  # (B, 1)
    i = torch.arange(mask.shape[1], device=mask.device, dtype=n_real.dtype)
    j = torch.arange(n_supports, device=mask.device, dtype=n_real.dtype) / n_supports
    return (i.unsqueeze(0) / n_real).unsqueeze(-1) - j.view(1, 1, -1)


# floor of the row-shifted log weights: exp(-1e4) is 0 in any float, and a finite floor keeps the
# log-domain iterations free of inf - inf
_LOG_WEIGHT_FLOOR = -1e4


def position_log_weights(
    mask: torch.Tensor, n_supports: int, sigma: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Row-normalised log positional weights, ``(B, n_max, p)``, for the Gibbs kernel.

    :math:`\log S_{ij} - \max_{j'} \log S_{ij'}` with
    :math:`\log S_{ij} = -(i/n - j/p)^2 / \sigma^2`, floored at ``-1e4`` so that it stays finite
    for any ``sigma``; 0 on padded rows. The row shift multiplies each row of
    :math:`\exp(K/\varepsilon) \odot S` by a constant, which changes the Sinkhorn scaling ``u``
    but not the plan, and it keeps each row's best-placed support at 0 so that the floor only
    touches weights below :math:`e^{-10^4}` of the row's largest.
    """
    d2 = _position_offsets(mask, n_supports, dtype) ** 2
    d2 = d2 - d2.amin(dim=2, keepdim=True)  # >= 0, exactly 0 at each row's best support
    # where: 0 / 0 when sigma**2 underflows; inf / inf cannot happen (d2 <= 1)
    logS = torch.where(d2 > 0, -d2 / sigma**2, 0.0).clamp_min_(_LOG_WEIGHT_FLOOR)
    return logS.masked_fill_(~mask.unsqueeze(-1), 0.0)


def transport_similarity(plan: torch.Tensor, similarity: torch.Tensor) -> torch.Tensor:
    """``<P, K>`` per set, ``(B,)``: the negated transport cost, higher is closer."""
    return (plan * torch.nan_to_num(similarity, nan=0.0, posinf=0.0, neginf=0.0)).sum(dim=(1, 2))
