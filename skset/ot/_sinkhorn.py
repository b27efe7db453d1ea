"""The eager Sinkhorn solvers of :mod:`skset.ot` (the method, the stopping rule and the
references are in the package docstring): log and exp domains, blocks of sets that fit in a CPU
cache, the tolerance checks and the exp-domain fallback to the log domain of ``method="auto"``.
"""

from __future__ import annotations

import math
import numbers
import warnings

import torch

from ._common import (
    _CHECK_EVERY,
    _METHODS,
    _check_epsilon,
    _check_finite_rows,
    _check_nonempty,
    _check_tol,
    _check_weights,
    _relaxation,
    _tracing,
)

__all__ = ["sinkhorn", "sinkhorn_log", "sinkhorn_exp", "transport_similarity"]


def _log_marginal(mask: torch.Tensor, dtype, a: torch.Tensor | None = None,
                  balanced: bool = True) -> torch.Tensor:
    """``log a (B, n)``: ``-log n`` (uniform) or the log of the masses ``a``; ``-inf`` on pads.

    An element of mass 0 is ``-inf`` too (an empty row), except where autograd asks for the
    masses' gradient of a ``balanced`` plan: there its mass is read as ``delta = eps ** 2`` of
    the dtype (1.4e-14 in float32), which the row update holds its row to, a change of the plan
    far below rounding, so that its gradient is the derivative at 0 that the exp domain gives
    (with ``-inf`` it was 0: a weight at 0 learned nothing in the log domain). Not unbalanced,
    where the row's mass is ``delta`` times its tilt, unbounded (a zero-mass element closer to
    the supports than the others took their columns' mass), nor in float16, where ``delta`` is
    below the smallest normal number: there it stays ``-inf``, gradient 0."""
    if a is not None:
        pos = a > 0
        delta = torch.finfo(a.dtype).eps ** 2
        if (balanced and torch.is_grad_enabled() and a.requires_grad
                and delta > torch.finfo(a.dtype).tiny):
            return torch.where(mask, torch.log(torch.where(pos, a, a + delta)), -math.inf)
        return torch.where(pos, torch.log(torch.where(pos, a, torch.ones_like(a))), -math.inf)
    n_real = mask.sum(1, keepdim=True).to(dtype)
    log_a = -torch.log(n_real).expand(mask.shape)
    return torch.where(mask, log_a, torch.full_like(log_a, -math.inf))


def _as_similarity(similarity) -> torch.Tensor:
    """``similarity`` as a real floating-point tensor: a numpy array (or nested list) is converted,
    an integer or boolean one cast to the default float dtype (``torch.get_default_dtype()``).
    The input itself is never modified."""
    if not isinstance(similarity, torch.Tensor):
        try:
            similarity = torch.as_tensor(similarity)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError("similarity must be a tensor (or numpy array) of shape (B, n, p), got "
                            f"{type(similarity).__name__}") from exc
    if similarity.is_complex():
        raise TypeError(f"similarity must hold real numbers, got dtype {similarity.dtype}")
    if not similarity.is_floating_point():
        similarity = similarity.to(torch.get_default_dtype())
    return similarity


def _check(similarity: torch.Tensor, mask, epsilon: float, n_iter):
    if similarity.dim() != 3:
        raise ValueError(f"similarity must be (B, n, p), got shape {tuple(similarity.shape)}")
    _check_epsilon(epsilon)
    if not (isinstance(n_iter, numbers.Integral) and not isinstance(n_iter, bool) and n_iter >= 1):
        raise ValueError(f"n_iter must be a positive integer, got {n_iter!r}")
    if similarity.shape[0] and (similarity.shape[1] == 0 or similarity.shape[2] == 0):
        # (the log domain raised a math domain error, the exp domain an IndexError or an empty plan)
        raise ValueError(f"similarity has shape {tuple(similarity.shape)}: "
                         + ("sets without elements" if similarity.shape[1] == 0 else "no supports")
                         + "; every set needs an element and every plan a support.")
    if mask is None:
        mask = torch.ones(similarity.shape[:2], dtype=torch.bool, device=similarity.device)
    else:
        mask = torch.as_tensor(mask, device=similarity.device)
        if mask.shape != similarity.shape[:2]:
            raise ValueError(f"mask shape {tuple(mask.shape)} does not match similarity "
                             f"{tuple(similarity.shape[:2])}")
        mask = mask.to(torch.bool)
        _check_nonempty(mask)
    _check_finite_rows(similarity, mask, "similarity", allow_neg_inf=True)
    return mask


def _stopping(similarity: torch.Tensor, tol, check_every, weights=None) -> float | None:
    """The tolerance that applies: ``None`` for a fixed count (no tol, tol 0, or autograd through
    ``similarity`` or ``weights``)."""
    if tol is None:
        return None
    _check_tol(tol)
    if not (isinstance(check_every, numbers.Integral) and not isinstance(check_every, bool)
            and check_every >= 1):
        raise ValueError(f"check_every must be a positive integer, got {check_every!r}")
    grad = similarity.requires_grad or (isinstance(weights, torch.Tensor) and weights.requires_grad)
    if tol == 0 or (torch.is_grad_enabled() and grad):
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


# On CPU the Sinkhorn iterations are bound by memory traffic (two passes over the (B, n, p) block
# per iteration, a few flops per element): running all iterations on blocks of sets that fit in
# cache beats sweeping the whole batch each time (measured 1.3-1.7x on a 2-core EPYC, 2 MiB L2 /
# 32 MiB L3; with bmm matvecs 16 MiB blocks beat 4 MiB ones, 0.69 vs 0.82 s on 1024 x 500 x 64;
# benchmarks/bench_otk_transform.py). GPUs get the whole batch in one go.
_CPU_BLOCK_BYTES = 16 << 20


def _block_sets(similarity: torch.Tensor) -> int:
    """Sets per block: the whole batch off CPU or while tracing (blocks only change the speed,
    and a block size read off traced sizes would cap the exported program's batch), else as
    many as fit in ``_CPU_BLOCK_BYTES``."""
    B, n, p = similarity.shape
    if similarity.device.type != "cpu" or _tracing():
        return B
    return max(1, _CPU_BLOCK_BYTES // max(1, n * p * similarity.element_size()))


def _log_block(similarity, mask, epsilon, n_iter, a=None, lam=1.0):
    """Log-domain iterations on one block; ``a``: masses ``(B, n)`` or ``None`` (uniform),
    ``lam``: the unbalanced exponent (1: balanced)."""
    B, n, p = similarity.shape
    logK = (similarity / epsilon).masked_fill_(~mask.unsqueeze(-1), 0.0)
    log_a = _log_marginal(mask, similarity.dtype, a, lam == 1.0).unsqueeze(-1)  # -inf on pads
    log_b = -math.log(p)
    g = similarity.new_zeros(B, 1, p)
    f = similarity.new_zeros(B, n, 1)
    for _ in range(n_iter):
        lse = torch.logsumexp(logK + g, dim=2, keepdim=True)
        f = log_a - (lse if lam == 1.0 else lam * lse)  # pads: -inf; semi-relaxed: lam < 1
        g = log_b - torch.logsumexp(logK + f, dim=1, keepdim=True)
    P = torch.exp(logK + f + g)
    if a is not None and lam == 1.0 and torch.is_grad_enabled() and a.requires_grad:
        # the rows of mass 0 that _log_marginal read as delta: empty, with their gradient
        empty = (mask & (a == 0)).unsqueeze(-1)
        P = torch.where(empty, P - P.detach(), P)
    return P


def _row_error(row_sums, target, lam):
    """Per-set L1 error ``(B,)`` of the plan's row sums against the row update's ``target``
    (``a`` when balanced; otherwise scaled to total mass 1, see the module docstring). Both
    ``(B, n)`` or ``(B, n, 1)``, 0 on pads."""
    dims = tuple(range(1, row_sums.dim()))
    if lam != 1.0:
        target = target / target.sum(dim=dims, keepdim=True)
    return (row_sums - target).abs().sum(dim=dims)


def _log_block_tol(similarity, mask, epsilon, n_iter, tol, check_every, a=None, lam=1.0):
    """:func:`_log_block` stopping each set once its row-marginal L1 error is at most ``tol``."""
    B, n, p = similarity.shape
    logK = (similarity / epsilon).masked_fill_(~mask.unsqueeze(-1), 0.0)
    log_a = _log_marginal(mask, similarity.dtype, a).unsqueeze(-1)  # -inf on pads
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
            if lam == 1.0:
                err = (torch.exp(f + lse) - aa).abs().sum(dim=(1, 2))
            else:  # against the row sums after the next row update, exp(la + (1 - lam) lse)
                err = _row_error(torch.exp(f + lse), torch.exp(la + (1.0 - lam) * lse), lam)
            keep = snap.check(err, f, g)
            if keep is not None:
                if isinstance(keep, str):
                    break
                lk, la, aa, lse, g = lk[keep], la[keep], aa[keep], lse[keep], g[keep]
        f = la - lse if lam == 1.0 else la - lam * lse  # pads: -inf
        g = log_b - torch.logsumexp(lk + f, dim=1, keepdim=True)
    else:
        snap.finish(f, g)
    return logK.add_(F).add_(G).exp_()


#: the largest spread of a set's similarity over ``epsilon`` that the float32 log domain solves:
#: its potentials reach about that size, and their float32 spacing (the size times 2**-23) passes
#: 1e-3 beyond it, where the iterations stall at a wrong plan (three equal elements of -1e6 at
#: ``epsilon=0.1``, a spread of 3e7: column sums 0.055, 0.27, 0.33 instead of 1/3, and another
#: plan in another batch); such sets are solved in float64
_FLOAT32_LOG_SPREAD = 2.0 ** 13


def _maybe_wide(similarity: torch.Tensor, epsilon: float) -> bool:
    """Whether a float32 batch may hold a set of :func:`_wide_sets` (two reductions over the
    batch, padding included; anything not finite there says maybe): the one test every float32
    log-domain call pays. Not on MPS (no float64 there), nor for an empty batch."""
    if similarity.numel() == 0 or similarity.device.type == "mps":
        return False
    s = similarity.detach()
    return not float(s.amax() - s.amin()) <= _FLOAT32_LOG_SPREAD * epsilon


def _wide_sets(similarity: torch.Tensor, mask: torch.Tensor, epsilon: float) -> torch.Tensor:
    """``(B,)``: the sets whose real, finite similarities span more than ``_FLOAT32_LOG_SPREAD``
    times ``epsilon``."""
    s = similarity.detach()
    valid = mask.unsqueeze(-1) & torch.isfinite(s)
    spread = s.masked_fill(~valid, -math.inf).amax((1, 2)) - s.masked_fill(~valid, math.inf).amin((1, 2))
    return spread > _FLOAT32_LOG_SPREAD * epsilon


def sinkhorn_log(
    similarity: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float,
    n_iter: int = 10,
    tol: float | None = None,
    check_every: int = _CHECK_EVERY,
    weights: torch.Tensor | None = None,
    reg_m: float | None = None,
) -> torch.Tensor:
    """Log-domain Sinkhorn plan, ``(B, n, p)``; see the module docstring and :func:`sinkhorn`.

    A float32 set whose similarity spans more than ``_FLOAT32_LOG_SPREAD`` times ``epsilon`` is
    solved in float64 (the plan returned in float32): its potentials are too large for float32.
    """
    similarity = _as_similarity(similarity)

    def solve(sim, msk, w):
        blocks = _blockwise(sim, msk, epsilon, n_iter, tol, check_every, fixed=_log_block,
                            adaptive=_log_block_tol, weights=w, reg_m=reg_m)
        return blocks[0] if len(blocks) == 1 else torch.cat(blocks)

    if (similarity.dtype == torch.float32 and not _tracing() and not torch.compiler.is_compiling()
            and _maybe_wide(similarity, epsilon)):
        mask = _check(similarity, mask, epsilon, n_iter)
        wide = _wide_sets(similarity, mask, epsilon)
        if bool(wide.any()):
            a = _check_weights(weights, mask, similarity)  # errors name the set in this batch
            P = torch.zeros_like(similarity)
            for part, dtype in ((wide, torch.float64), (~wide, torch.float32)):
                idx = part.nonzero().squeeze(1)
                if len(idx):
                    P = P.index_put((idx,), solve(similarity[idx].to(dtype), mask[idx], None
                                                  if a is None else a[idx].to(dtype)).float())
            return P
    return solve(similarity, mask, weights)


def _blockwise(similarity, mask, epsilon, n_iter, tol, check_every, *, fixed, adaptive,
               weights=None, reg_m=None, **adaptive_kw) -> list:
    """Check the inputs, then run one solver (``fixed``: ``n_iter`` iterations; ``adaptive``:
    stop at ``tol``) over blocks of sets small enough for the cache (:func:`_block_sets`)."""
    mask = _check(similarity, mask, epsilon, n_iter)
    tol = _stopping(similarity, tol, check_every, weights)
    a = _check_weights(weights, mask, similarity)
    lam = _relaxation(reg_m, epsilon)

    def solve(sl):
        a_sl = None if a is None else a[sl]
        if tol is None:
            return fixed(similarity[sl], mask[sl], epsilon, n_iter, a=a_sl, lam=lam)
        return adaptive(similarity[sl], mask[sl], epsilon, n_iter, tol, check_every,
                        a=a_sl, lam=lam, **adaptive_kw)

    B = similarity.shape[0]
    step = _block_sets(similarity)
    if step >= B:
        return [solve(slice(None))]
    return [solve(slice(i, i + step)) for i in range(0, B, step)]


def _exp_setup(similarity, mask, epsilon, a=None, lam=1.0):
    """Row-shifted Gibbs kernel ``E (B, n, p)``, row marginal ``a (B, n)`` (tilted when
    unbalanced, see below) and ``pad_one`` (1 on padded rows, 0 elsewhere) shared by the
    exp-domain solvers."""
    pad = ~mask.unsqueeze(-1)
    # E = exp((K - max_j K) / eps): max, shift, scale and exp, plus a pass for padded rows;
    # the shift cancels exactly in the first row update, so it carries no gradient
    raw_max = similarity.detach().amax(dim=2, keepdim=True).masked_fill_(pad, 0.0)
    E = torch.sub(similarity, raw_max)
    # pads: exp(-inf) = 0, no mass and no gradient, whatever they hold (an exported graph holds
    # no data-dependent branch: it always fills)
    if _tracing() or torch.compiler.is_compiling() or not bool(mask.all()):
        E.masked_fill_(pad, -math.inf)
    E = E.div_(epsilon).exp_()
    if a is None:
        a = mask.to(E.dtype) / mask.sum(1, keepdim=True).to(E.dtype)
    if lam != 1.0:
        row_max = raw_max / epsilon
        # unbalanced: u = a / (e^m E v)^lam = a e^{(1 - lam) m} / (E v)^lam up to e^{-m}, which E
        # carries: the shift m moves into the marginal. Minus its largest value over the set's
        # elements of positive mass (a per-set constant, which the column update cancels), so
        # that it never overflows. Detached like the shift: the plan does not depend on it.
        t = (1.0 - lam) * row_max.squeeze(-1)
        pos = a.detach() > 0
        t = t - t.masked_fill(~pos, -math.inf).amax(1, keepdim=True)
        # an element of mass 0 keeps its own tilt, so that its gradient is the derivative at 0
        # (with the tilt 1 it was off by that factor: -0.54 against -1.05), capped at half the
        # dtype's exponent range (0 times it stays 0: no inf)
        a = a * torch.exp(torch.where(pos, t, t.clamp_max(math.log(torch.finfo(t.dtype).max) / 2)))
    # E v is 0 on padded rows: adding 1 there (0 elsewhere, exactly) avoids 0/0, in grads too
    return E, a, (~mask).to(E.dtype)


def _exp_block(similarity, mask, epsilon, n_iter, a=None, lam=1.0):
    """Exp-domain iterations on one block; returns the plan and the scalings ``u (B, n)``,
    ``v (B, 1, p)``."""
    B, n, p = similarity.shape
    E, a, pad_one = _exp_setup(similarity, mask, epsilon, a, lam)
    b = 1.0 / p
    v = similarity.new_ones(B, 1, p)
    u = a
    Et = E.transpose(1, 2)
    # batched row-vector products (bmm): no (B, n, p) temporary per iteration, which the
    # multiply-and-reduce form allocates and streams through twice (3x slower, measured); both
    # as row vector times matrix, ``v^T E^T`` and ``u^T E``: the matrix-times-column form of
    # ``E v`` runs 2x slower on CPU (1.7 vs 3.9 ms on 512 x 100 x 64, one thread)
    for _ in range(n_iter):
        Ev = torch.bmm(v, Et).squeeze(1) + pad_one
        u = a / (Ev if lam == 1.0 else Ev.pow(lam))  # semi-relaxed: u = a / (E v)^lam
        v = b / torch.bmm(u.unsqueeze(1), E)
    if torch.is_grad_enabled():  # autograd may need E, u and v as they are
        return E * u.unsqueeze(-1) * v, u, v
    return E.mul_(u.unsqueeze(-1)).mul_(v), u, v  # E is this block's own buffer


def _exp_block_tol(similarity, mask, epsilon, n_iter, tol, check_every, stop_unsafe, a=None,
                   lam=1.0):
    """:func:`_exp_block` stopping each set once its row-marginal L1 error is at most ``tol``
    (no autograd here: the plan is formed in place). With ``stop_unsafe``, a set whose scalings
    leave the range of :func:`_safe` also stops there (the caller redoes it in the log domain)."""
    B, n, p = similarity.shape
    E, a, pad_one = _exp_setup(similarity, mask, epsilon, a, lam)
    b = 1.0 / p
    v = similarity.new_ones(B, 1, p)
    u = a
    U, V = torch.empty_like(u), torch.empty_like(v)
    snap = _Snapshots(B, tol, similarity.device, U, V)
    Ea, aa, pa = E, a, pad_one
    for it in range(n_iter):
        Ev = torch.bmm(v, Ea.transpose(1, 2)).squeeze(1)  # row form, see _exp_block
        if it > 0 and it % check_every == 0:
            # row sums of the current plan diag(u) E diag(v): u * Ev (pads: 0 * 0 against 0)
            if lam == 1.0:
                err = torch.addcmul(-aa, u, Ev).abs_().sum(1)
            else:  # against the row sums after the next row update, a (E v)^(1 - lam)
                err = _row_error(u * Ev, aa * (Ev + pa).pow(1.0 - lam), lam)
            if stop_unsafe:
                err.masked_fill_(~_safe(u, v), math.nan)
            keep = snap.check(err, u, v)
            if keep is not None:
                if isinstance(keep, str):
                    break
                Ea, aa, pa, Ev, v = Ea[keep], aa[keep], pa[keep], Ev[keep], v[keep]
        u = aa / (Ev + pa) if lam == 1.0 else aa / (Ev + pa).pow(lam)
        v = b / torch.bmm(u.unsqueeze(1), Ea)
    else:
        snap.finish(u, v)
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
    weights: torch.Tensor | None = None,
    reg_m: float | None = None,
):
    """Row-stabilised exp-domain Sinkhorn plan, ``(B, n, p)``; see the module docstring and
    :func:`sinkhorn`.

    With ``return_ok=True`` also returns a ``(B,)`` boolean tensor, ``False`` for sets whose
    scalings under- or overflowed (their plan is then unusable: use :func:`sinkhorn_log`); with a
    ``tol``, such sets then stop iterating as soon as a check finds them out of range.
    """
    similarity = _as_similarity(similarity)
    blocks = _blockwise(similarity, mask, epsilon, n_iter, tol, check_every,
                        fixed=_exp_block, adaptive=_exp_block_tol, weights=weights, reg_m=reg_m,
                        stop_unsafe=return_ok)
    if len(blocks) == 1:
        P, u, v = blocks[0]
    else:
        P, u, v = (torch.cat(t) for t in zip(*blocks, strict=True))
    if not return_ok:
        return P
    return P, _safe(u, v)


def _safe(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(B,)``: whether the scalings ``u (B, n)``, ``v (B, 1, p)`` are safely in range.

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
    weights: torch.Tensor | None = None,
    reg_m: float | None = None,
) -> torch.Tensor:
    """Entropic OT plan between each set of a batch and a reference.

    Parameters
    ----------
    similarity : Tensor of shape (B, n_max, p)
        ``K[b, i, j] = <x_i, z_j>`` for set ``b``; the cost is ``-K``. Padded rows may hold
        anything; real ones are finite or ``-inf`` (a forbidden pair), and a real element or a
        support whose pairs are all forbidden raises a ``ValueError`` naming the set (no plan
        exists). A numpy array is converted (the plan is a tensor all the same), and integer or
        boolean values are cast to the default float dtype (``torch.get_default_dtype()``);
        complex values or a non-numeric input raise ``TypeError``.
    mask : bool Tensor of shape (B, n_max) or None
        ``True`` on real elements (a numpy array is converted). ``None``: every row is real.
        Every set needs at least one real element: a row all ``False`` (an empty set, whose
        measure ``1/n`` does not exist) raises a ``ValueError`` naming the set's index in the
        batch, rather than returning a NaN plan. (Not checked while tracing for export: an
        exported graph requires it of its inputs.)
    epsilon : float
        Entropic regularisation (``epsilon`` in the paper); smaller is closer to exact OT.
    n_iter : int
        Sinkhorn iterations (each a row then a column update), a positive integer (else
        ``ValueError``); the cap when ``tol`` is set. The paper uses 10 in its supervised models
        and 100 for its unsupervised embedding.
    method : {"auto", "log", "exp"}
        Solver; see the module docstring (``"exp"`` returns every plan as it ends, and warns,
        naming them, about the sets whose plan is not finite; ``"log"`` and ``"auto"`` raise a
        ``ValueError`` naming the sets whose log-domain plan is not finite, where similarity over
        ``epsilon`` exceeds the dtype's range, as float16's at ``epsilon=1e-5``). In the log
        domain a float32 set whose similarity spans more than 8,192 times ``epsilon`` is solved
        in float64 and its plan returned in float32: float32 cannot hold its potentials
        finely enough (raw features of size 1e6 at ``epsilon=0.1`` stalled at a wrong plan).
        Not on MPS (no float64), nor in a traced, exported or compiled graph.
    tol : float or None
        Stopping tolerance: a set stops at the first check where its row-marginal error
        ``sum_i |sum_j P_ij - a_i|`` (``a_i = 1/n`` without ``weights``) is at most ``tol`` (it
        lies in [0, 2]; the column marginals hold exactly; with ``reg_m``, ``a`` is replaced by
        the row sums of the next row update scaled to mass 1, see the module docstring). ``None``
        or 0: exactly ``n_iter`` iterations. Ignored under autograd (grad enabled and
        ``similarity`` or ``weights`` requiring grad): ``n_iter`` iterations then, so that the
        backward pass is that of a fixed computation.
    check_every : int
        Iterations between two checks of the tolerance.
    weights : Tensor of shape (B, n_max) or None
        Element masses: set ``b``'s measure is ``a = weights[b] / weights[b].sum()`` over its real
        elements (padded entries are ignored). Non-negative and finite, not all zero on a set
        (else ``ValueError`` naming the set); an element of weight 0 gets an empty row.
        Differentiable, at a weight of 0 too (its one-sided derivative; 0 in the unbalanced
        log domain).
        ``None``: uniform, ``1/n``.
    reg_m : float or None
        Unbalanced transport: strength ``rho > 0`` of the KL penalty on the row (set)
        marginal, in the units of ``epsilon`` (POT's ``reg_m`` on the first marginal; the
        column marginal stays exact). Smaller relaxes more: elements of low similarity to every
        support get less than their mass. ``None`` or ``inf``: balanced.

    Returns
    -------
    Tensor of shape (B, n_max, p)
        The plan: column sums ``1/p`` exactly, row sums ``a`` (``1/n_b``, or the normalised
        ``weights``) once converged when balanced, padded rows 0. Differentiable with respect to
        ``similarity`` (and ``weights``).

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
    similarity = _as_similarity(similarity)
    kw = dict(epsilon=epsilon, n_iter=n_iter, tol=tol, check_every=check_every)
    if reg_m is not None:
        kw["reg_m"] = reg_m
    if method == "log":
        return _finite_log_plans(sinkhorn_log(similarity, mask, weights=weights, **kw), epsilon)
    if method == "exp":
        P = sinkhorn_exp(similarity, mask, weights=weights, **kw)
        if not _tracing():
            _warn_nonfinite_exp(P, epsilon)
        return P
    mask = _check(similarity, mask, epsilon, n_iter)
    if weights is not None:
        weights = _check_weights(weights, mask, similarity)  # checked once, indexed below
    P, ok = sinkhorn_exp(similarity, mask, return_ok=True, weights=weights, **kw)
    if bool(ok.all()):
        return P
    bad = (~ok).nonzero().squeeze(1)
    P_bad = _finite_log_plans(sinkhorn_log(similarity[bad], mask[bad], weights=None
                                           if weights is None else weights[bad], **kw),
                              epsilon, bad.tolist())
    if torch.is_grad_enabled() and (similarity.requires_grad
                                    or (weights is not None and weights.requires_grad)):
        # the failed exp-domain iterates hold inf/NaN: keep them out of the autograd graph
        good = ok.nonzero().squeeze(1)
        P = torch.zeros_like(similarity).index_put(
            (good,), sinkhorn_exp(similarity[good], mask[good],
                                  weights=None if weights is None else weights[good], **kw))
    return P.index_put((bad,), P_bad)


def _finite_log_plans(P: torch.Tensor, epsilon: float, sets=None) -> torch.Tensor:
    """``P``, the log-domain plans, or a ``ValueError`` naming the sets (``sets``: their indices in
    the batch) whose plan is not finite: similarity over ``epsilon`` beyond the dtype's range
    (float16's 65,504 is reached at ``epsilon=1e-5``). Not checked while tracing."""
    if _tracing() or bool(torch.isfinite(P.detach().sum())):
        return P
    bad = (~torch.isfinite(P.detach()).all(dim=(1, 2))).nonzero().squeeze(1).tolist()
    if not bad:  # the sum overflowed, not a plan
        return P
    bad = [sets[i] for i in bad] if sets is not None else bad
    raise ValueError(f"the plans of set {', '.join(map(str, bad[:5]))}{', ...' if len(bad) > 5 else ''}"
                     f" of the batch are not finite even in the log domain: similarity / epsilon "
                     f"(epsilon={epsilon:g}) is beyond the range of {str(P.dtype).replace('torch.', '')}; "
                     "use a larger epsilon, or compute in float32 or float64.")


def _warn_nonfinite_exp(P: torch.Tensor, epsilon: float, stacklevel: int = 3) -> None:
    """Warn, naming them, about the sets whose exp-domain plan is not finite (its scalings under-
    or overflowed; ``method="auto"`` redoes such sets in the log domain)."""
    bad = (~torch.isfinite(P).all(dim=(1, 2))).nonzero().squeeze(1).tolist()
    if not bad:
        return
    shown = ", ".join(map(str, bad[:5])) + (", ..." if len(bad) > 5 else "")
    warnings.warn(f"sinkhorn(method='exp'): the plans of {len(bad)} of {len(P)} sets of the batch "
                  f"(set {shown}) are not finite: the exp-domain scalings under- or overflowed at "
                  f"epsilon={epsilon:g} in {str(P.dtype).replace('torch.', '')}. Use method='auto' "
                  "(the log domain for such sets) or 'log', or a larger epsilon.", RuntimeWarning,
                  stacklevel=stacklevel)


def transport_similarity(plan: torch.Tensor, similarity: torch.Tensor) -> torch.Tensor:
    """``<P, K>`` per set, ``(B,)``: the negated transport cost, higher is closer."""
    if not (isinstance(plan, torch.Tensor) and isinstance(similarity, torch.Tensor)) \
            or plan.dim() != 3 or plan.shape != similarity.shape:
        raise ValueError("plan and similarity must be tensors of one shape (B, n, p), got "
                         f"{tuple(getattr(plan, 'shape', ()))} and "
                         f"{tuple(getattr(similarity, 'shape', ()))}")
    return (plan * torch.nan_to_num(similarity, nan=0.0, posinf=0.0, neginf=0.0)).sum(dim=(1, 2))
