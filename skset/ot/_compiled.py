"""The compiled OTK embedding: ``torch.compile`` kernels for one batch of :func:`skset.nn.otk_embed`.

Opt-in: the caller passes ``compile=True`` (:func:`skset.nn.otk_embed`, :class:`skset.nn.OTKLayer`);
the estimators pass ``skset.get_config()["compile"]`` (``skset.set_config(compile=True)``). The
choice between these kernels and the eager code is made in one place, :func:`try_embed`. The eager
engine
(:func:`skset.nn.otk_plans` then :func:`skset.nn.otk_pool`) runs each element-wise step of the
Gibbs kernel and of every Sinkhorn iteration as its own pass over the ``(B, n, p)`` block; here
they are fused into the reductions by inductor, and the plan is formed inside the pooling's
operand. The computation is the eager one step for step (the same iterates, stopping checks and
log-domain redo of the sets whose exp-domain scalings leave the safe range), so the embeddings
agree to float rounding.

Kernels are compiled with dynamic shapes (batch size, padded length, supports, features,
references): one compilation per process of each kernel's variant (its static choices: the
domain, one reference or several, positions, unbalanced plans; the dtype and device) for every
estimator and length batch, not one per shape. Sizes 1 would be specialised by the compiler (a
recompilation), so a batch of one set or of sets of one element is padded to two (a copy of the
set, a masked row), which changes nothing. A process that mixes settings compiles a dozen
variants of some kernels, past dynamo's default limit of 8 (beyond which a kernel runs
uncompiled, without a word): the first compilation raises ``torch._dynamo.config.recompile_limit``
to at least 64.

When compiling fails (no C++ compiler, an unsupported platform or torch), one
:class:`CompileWarning` per process says why and the caller runs the eager code.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
import warnings

import torch

from ._common import (
    _CHECK_EVERY,
    _METHODS,
    _check_nonempty,
    _check_weights,
    _relaxation,
    _similarity,
    _tracing,
)
from ._positions import position_log_weights, position_weights
from ._sinkhorn import _FLOAT32_LOG_SPREAD, _warn_nonfinite_exp

__all__ = ["CompileWarning", "try_embed", "otk_embed", "compile_seconds"]


class CompileWarning(UserWarning):
    """``torch.compile`` failed: skset runs its eager code instead (same results, slower).

    Issued once per process by the compiled paths (``skset.set_config(compile=True)`` for the
    estimators, ``compile=True`` for :func:`skset.nn.otk_embed` and :class:`skset.nn.OTKLayer`).
    """


_lock = threading.RLock()
_state = {"failed": None}  # the reason, once compiling failed in this process
_compiled: dict = {}  # (kernel name, device type) -> its torch.compile'd function
_warm: set = set()  # keys (kernel, static arguments, dtype, device) compiled in this process
#: seconds spent in the first call of each kernel variant (its compilation), by key
compile_seconds: dict = {}


# -- the kernels (traced by dynamo, compiled by inductor) -------------------------------------------
def _pairs(sim, q: int):
    """``(B, n, q*p)`` similarities -> ``(B*q, n, p)`` (set-major, as ``otk_plans`` orders them)."""
    B, n, qp = sim.shape
    return sim.view(B, n, q, qp // q).transpose(1, 2).reshape(B * q, n, qp // q)


def _k_setup_exp(sim, mask, a, epsilon, lam, *, q: int, unbalanced: bool):
    """Row-shifted Gibbs kernel ``E``, (tilted) marginal ``a``, ``pad_one`` and ``E 1`` (the row
    products of the first iteration, ``v = 1``): ``skset.ot._sinkhorn._exp_setup``."""
    s = _pairs(sim, q)
    pad = ~mask.unsqueeze(-1)
    raw_max = s.amax(2, keepdim=True).masked_fill(pad, 0.0)
    E = torch.exp((s - raw_max).masked_fill(pad, -math.inf) / epsilon)
    if unbalanced:
        t = (1.0 - lam) * (raw_max / epsilon).squeeze(-1)
        pos = a > 0
        t = t - t.masked_fill(~pos, -math.inf).amax(1, keepdim=True)
        a = a * torch.exp(t.masked_fill(~pos, 0.0))
    return E, a, (~mask).to(E.dtype), E.sum(2)


def _k_chunk_exp(E, a, pad_one, Ev, b, lam, *, k: int, unbalanced: bool):
    """``k`` exp-domain iterations from the row products ``Ev = E v``; returns ``u``, ``v``, the
    next row products, each set's row-marginal error and whether its scalings are in range
    (``skset.ot._sinkhorn._exp_block_tol`` and ``_safe``)."""
    for _ in range(k):
        d = Ev + pad_one
        # unbalanced: a / d^lam as exp(-lam log d), vectorised in the dtype (pow with the float64
        # exponent ran as a scalar double pow per row and vector of E: 2.6x slower iterations)
        u = a * torch.exp(-lam * torch.log(d)) if unbalanced else a / d
        v = b / (E * u.unsqueeze(2)).sum(1)
        Ev = (E * v.unsqueeze(1)).sum(2)
    if unbalanced:
        target = a * torch.exp((1.0 - lam) * torch.log(Ev + pad_one))
        err = (u * Ev - target / target.sum(1, keepdim=True)).abs().sum(1)
    else:
        err = (u * Ev - a).abs().sum(1)
    thr = torch.finfo(E.dtype).tiny ** 0.25
    ok = ((v > thr) & (v < 1 / thr)).all(1) & (u < 1 / thr).all(1)
    return u, v, Ev, err, ok


def _k_setup_log(sim, mask, a, epsilon, *, q: int):
    """``K / epsilon`` (0 on pads), ``log a`` (``-inf`` on pads and elements of mass 0) and the row
    log-sum-exp of the first iteration (``g = 0``): ``skset.ot._sinkhorn._log_block_tol``."""
    logK = (_pairs(sim, q) / epsilon).masked_fill(~mask.unsqueeze(-1), 0.0)
    pos = a > 0
    log_a = torch.where(pos, torch.log(torch.where(pos, a, 1.0)), -math.inf).unsqueeze(-1)
    return logK, log_a, torch.logsumexp(logK, dim=2, keepdim=True)


def _k_chunk_log(logK, log_a, lse, log_b, lam, *, k: int, unbalanced: bool):
    """``k`` log-domain iterations from the row log-sum-exp ``lse``; returns ``f (B, n)``,
    ``g (B, p)``, the next ``lse`` and each set's row-marginal error."""
    for _ in range(k):
        f = log_a - (lam * lse if unbalanced else lse)
        g = log_b - torch.logsumexp(logK + f, dim=1, keepdim=True)
        lse = torch.logsumexp(logK + g, dim=2, keepdim=True)
    rows = torch.exp(f + lse)
    if unbalanced:
        target = torch.exp(log_a + (1.0 - lam) * lse)
        err = (rows - target / target.sum(1, keepdim=True)).abs().sum((1, 2))
    else:
        err = (rows - log_a.exp()).abs().sum((1, 2))
    return f.squeeze(2), g.squeeze(1), lse, err, err == err


def _k_finish(E, u, v, x, S, scale, *, q: int, log_domain: bool):
    """``scale P^T x`` per reference, ``(B, q, p, k)``, with the plan ``P = E u v^T`` (log domain:
    ``exp(E + u + v^T)``) times the positional weights ``S (B, n, p)`` (or ``None``) formed
    inside the pooling GEMM's operand."""
    Bq, n, p = E.shape
    B = x.shape[0]
    if log_domain:
        P = torch.exp(E + u.unsqueeze(2) + v.unsqueeze(1))
    else:
        P = E * u.unsqueeze(2) * v.unsqueeze(1)
    P = P.view(B, q, n, p)
    if S is not None:
        P = P * S.unsqueeze(1)
    P = (P * scale).permute(0, 2, 1, 3).reshape(B, n, q * p)
    return torch.bmm(P.transpose(1, 2), x).view(B, q, p, x.shape[2])


_KERNELS = {"setup_exp": _k_setup_exp, "chunk_exp": _k_chunk_exp, "setup_log": _k_setup_log,
            "chunk_log": _k_chunk_log, "finish": _k_finish}


# -- compiling and calling ----------------------------------------------------------------------
def _compile(fn, device_type: str):
    """``torch.compile`` of a kernel for a device type (a separate function, so that a test can
    make it fail).

    On a CPU: the C++ wrapper, whose entry point releases the GIL (the default Python wrapper
    calls the C++ kernels with the GIL held, so that the length batches that
    :class:`skset.OTKEmbedding` runs side by side on the torch threads would take turns), and
    kernels that read the thread count at run time (one per batch thread, all of them in the
    main thread) rather than the count at compile time.
    """
    options = {"cpp.dynamic_threads": True, "cpp_wrapper": True} if device_type == "cpu" else {}
    return torch.compile(fn, dynamic=True, options=options)


#: the least recompile limit of dynamo while the kernels compile (its default is 8)
_RECOMPILE_LIMIT = 64


def _call(name, *args, **static):
    """Run kernel ``name``; its first call per static variant, dtype and device compiles it (under
    a lock: threads running batches side by side wait for one compilation)."""
    t = args[0]
    fn = _compiled.get((name, t.device.type))
    if fn is None:
        with _lock:
            fn = _compiled.get((name, t.device.type))
            if fn is None:
                # each kernel has a variant per static choice, dtype, device and size class
                # (a dozen in a process that mixes settings); past dynamo's default limit of 8 a
                # kernel it ran uncompiled without a word: the limit is raised, never lowered
                torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                                           _RECOMPILE_LIMIT)
                fn = _compiled[name, t.device.type] = _compile(_KERNELS[name], t.device.type)
    key = (name, tuple(sorted(static.items())), tuple(a is None for a in args), t.dtype,
           t.device.type)
    if key in _warm:
        return fn(*args, **static)
    with _lock:
        t0 = time.perf_counter()
        out = fn(*args, **static)
        if key not in _warm:
            compile_seconds[key] = time.perf_counter() - t0
            _warm.add(key)
        return out


def _failed(exc: BaseException) -> None:
    """Turn the compiled path off for this process, with one warning saying why."""
    with _lock:
        if _state["failed"] is not None:
            return
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        _state["failed"] = reason
    warnings.warn(
        "skset.set_config(compile=True): torch.compile failed, so skset runs its eager code "
        f"(same results, slower) for the rest of this process. Cause: {reason[:500]}. A C++ "
        "compiler (g++, or $CXX) is needed on a CPU, triton on a GPU; "
        "skset.set_config(compile=False) silences this.", CompileWarning, stacklevel=5)


def compile_failed() -> str | None:
    """Why compiling failed in this process, or ``None``."""
    return _state["failed"]


def _reset() -> None:
    """Forget compiled kernels and failures (tests)."""
    with _lock:
        _state["failed"] = None
        _compiled.clear()
        _warm.clear()
        compile_seconds.clear()


# -- the choice: compiled or eager -------------------------------------------------------------
def applies(x, mask, references, weights, epsilon, sinkhorn_iter, method, sinkhorn_tol) -> bool:
    """Whether the compiled kernels can take this batch: no autograd, not inside an export or
    another compiler's trace, float32/float64 inputs of consistent shapes and valid settings
    (anything else goes the eager way, which raises the usual errors)."""
    if _tracing() or torch.compiler.is_compiling():
        return False
    if torch.is_grad_enabled() and (x.requires_grad or references.requires_grad or (
            isinstance(weights, torch.Tensor) and weights.requires_grad)):
        return False
    if not (isinstance(x, torch.Tensor) and isinstance(references, torch.Tensor)
            and x.dtype in (torch.float32, torch.float64) and references.dtype == x.dtype
            and x.dim() == 3 and references.dim() == 3 and references.shape[2] == x.shape[2]
            and x.device == references.device and x.shape[0] > 0 and x.shape[1] > 0):
        return False
    if mask is not None and not (isinstance(mask, torch.Tensor) and mask.shape == x.shape[:2]
                                 and mask.device == x.device):
        return False
    if method not in _METHODS or not (
            isinstance(epsilon, numbers.Real) and 0 < epsilon < math.inf):
        return False
    if not (isinstance(sinkhorn_iter, numbers.Integral) and not isinstance(sinkhorn_iter, bool)
            and sinkhorn_iter >= 1):
        return False
    return sinkhorn_tol is None or (isinstance(sinkhorn_tol, numbers.Real) and not isinstance(
        sinkhorn_tol, bool) and 0 <= sinkhorn_tol < math.inf)


def _maybe_beyond_float32(x, references, epsilon, position_sigma, position_mode) -> bool:
    """Whether a set of the batch may span more than ``_FLOAT32_LOG_SPREAD`` times ``epsilon``
    (the sets the eager log domain solves in float64), by a bound: ``|<x, z - m>|`` is at most
    ``|x| (|z| + |m|) <= 2 |x| max |z|`` (the balanced similarity reads supports less their mean
    ``m``; ``x``'s padded rows are zero), twice that for the spread, and the positions of the
    kernel mode add at most ``1 / sigma ** 2`` over ``epsilon``."""
    spread = 4.0 * float(x.norm(dim=2).amax()) * float(references.norm(dim=2).amax()) / epsilon
    if position_sigma is not None and position_mode == "kernel":
        spread += (1.0 / position_sigma) / position_sigma
    return not spread <= _FLOAT32_LOG_SPREAD


def try_embed(x, mask, references, weights, *, compile: bool, epsilon, sinkhorn_iter, method,
              sinkhorn_tol, position_sigma, position_mode, reg_m):
    """The raw OTK embeddings ``(B, q, p, k)`` by the compiled kernels, or ``None``: the caller
    (:func:`skset.nn.otk_embed`) then runs the eager code.

    The one place where compiled or eager is chosen: ``None`` unless ``compile`` is true, the
    batch :func:`applies` and compiling works in this process. ``x (B, n, k)`` has zero padded
    rows, ``mask (B, n)`` is a tensor; ``weights (B, n)`` are the element masses (``None``:
    uniform), checked here as the eager code checks them, so that errors name the same set.
    """
    if not compile or _state["failed"] is not None or not applies(
            x, mask, references, weights, epsilon, sinkhorn_iter, method, sinkhorn_tol):
        return None
    if not bool(torch.isfinite(references).all()):  # the eager code names the sets it spoils
        return None
    if x.dtype == torch.float32 and method != "exp" and _maybe_beyond_float32(
            x, references, epsilon, position_sigma, position_mode):
        return None  # the eager log domain solves such sets in float64
    _relaxation(reg_m, float(epsilon))  # a bad reg_m is the caller's error, not the compiler's
    mask = mask.to(torch.bool)
    _check_nonempty(mask)
    a = _check_weights(weights, mask, x)
    if a is None:
        a = mask.to(x.dtype) / mask.sum(1, keepdim=True).to(x.dtype)
    out = otk_embed(x, mask, references, a, epsilon=epsilon, sinkhorn_iter=sinkhorn_iter,
                    method=method, sinkhorn_tol=sinkhorn_tol, position_sigma=position_sigma,
                    position_mode=position_mode, reg_m=reg_m)
    if out is not None and method != "exp" and not bool(torch.isfinite(out.sum())):
        return None  # the eager code names what spoilt it (a NaN input, plans out of range)
    return out


# -- the driver ---------------------------------------------------------------------------------
def _at_least_two(rows: int, *tensors):
    """``tensors`` (each ``(rows, ...)``) with their first row repeated once when ``rows == 1``:
    a dimension of size 1 would be specialised (recompiled) by torch.compile."""
    if rows != 1:
        return tensors
    return tuple(None if t is None else torch.cat([t, t[:1]]) for t in tensors)


def _iterate(chunk, blocks, carry, extra, n_iter, tol, check_every, stop_unsafe, **static):
    """Run ``n_iter`` iterations in chunks of ``check_every`` (and single ones for the rest),
    with the stopping rule of ``skset.ot`` when ``tol`` is set: every ``check_every`` iterations
    each row (a set and a reference) whose error is at most ``tol`` keeps that state; rows that
    stopped are dropped once they are half of the working rows (two rows at least stay: a size
    of 1 would recompile). ``blocks``: per-row tensors handed to the chunk first, then ``carry``
    (updated by each chunk), then ``extra``. Returns the two state tensors and the in-range flags
    of the last chunk (``None`` with ``tol``: the caller checks the saved states)."""
    def step(k, blocks, carry):
        return _call(chunk, *blocks, carry, *extra, k=k, **static)

    done = 0
    if tol is None:
        while done < n_iter:
            k = check_every if n_iter - done >= check_every else 1
            s1, s2, carry, _, ok = step(k, blocks, carry)
            done += k
        return s1, s2, ok
    rows = blocks[0].shape[0]
    ids = torch.arange(rows, device=carry.device)
    stopped = torch.zeros(rows, dtype=torch.bool, device=carry.device)
    S1 = S2 = None
    while True:
        k = check_every if n_iter - done >= check_every else 1
        s1, s2, carry, err, ok = step(k, blocks, carry)
        if S1 is None:
            S1, S2 = s1.new_empty((rows, *s1.shape[1:])), s2.new_empty((rows, *s2.shape[1:]))
        done += k
        if done >= n_iter:
            break
        if done % check_every:
            continue
        if stop_unsafe:
            err = err.masked_fill(~ok, math.nan)
        new = ~(err > tol) & ~stopped
        if not bool(new.any()):
            continue
        idx = ids[new]
        S1[idx], S2[idx] = s1[new], s2[new]
        stopped |= new
        n_stopped = int(stopped.sum())
        if n_stopped == stopped.numel():
            return S1, S2, None
        if 2 * n_stopped >= stopped.numel() and stopped.numel() - n_stopped >= 2:
            keep = ~stopped
            ids, stopped, carry = ids[keep], stopped[keep], carry[keep]
            blocks = [t[keep] for t in blocks]
    rest = ~stopped
    S1[ids[rest]], S2[ids[rest]] = s1[rest], s2[rest]
    return S1, S2, None


def _solve_exp(sim, mask, a, epsilon, n_iter, tol, check_every, lam, q, stop_unsafe):
    unbalanced = lam != 1.0
    E, a, pad_one, Ev = _call("setup_exp", sim, mask, a, epsilon, lam, q=q,
                              unbalanced=unbalanced)
    p = E.shape[2]
    u, v, ok = _iterate("chunk_exp", [E, a, pad_one], Ev, (1.0 / p, lam), n_iter, tol,
                        check_every, stop_unsafe, unbalanced=unbalanced)
    if ok is None:  # the saved states: the range test of skset.ot._sinkhorn._safe
        thr = torch.finfo(u.dtype).tiny ** 0.25
        ok = ((v > thr) & (v < 1 / thr)).all(1) & (u < 1 / thr).all(1)
    return E, u, v, ok


def _solve_log(sim, mask, a, epsilon, n_iter, tol, check_every, lam, q):
    unbalanced = lam != 1.0
    logK, log_a, lse = _call("setup_log", sim, mask, a, epsilon, q=q)
    f, g, _ = _iterate("chunk_log", [logK, log_a], lse, (-math.log(logK.shape[2]), lam), n_iter,
                       tol, check_every, False, unbalanced=unbalanced)
    return logK, f, g


def otk_embed(x, mask, references, a, *, epsilon, sinkhorn_iter, method, sinkhorn_tol,
              position_sigma, position_mode, reg_m, check_every=_CHECK_EVERY):
    """The raw OTK embeddings ``(B, q, p, k)`` of ``x (B, n, k)`` (padded rows zero) with real
    rows ``mask (B, n)`` and element masses ``a (B, n)`` (normalised, 0 on pads), computed by the
    compiled kernels; the arguments are those of :func:`skset.nn.otk_plans` (checked by the
    caller). ``None`` when compiling failed (now or before): the caller runs the eager code."""
    if _state["failed"] is not None:
        return None
    try:
        with torch.no_grad():
            return _embed(x, mask, references, a, epsilon=epsilon, n_iter=sinkhorn_iter,
                          method=method, tol=sinkhorn_tol, position_sigma=position_sigma,
                          position_mode=position_mode, reg_m=reg_m, check_every=check_every)
    except (MemoryError, torch.OutOfMemoryError, KeyboardInterrupt, Warning):
        raise  # (a Warning: the data's, turned into an error by the caller's filters)
    except Exception as exc:  # compilers fail in many ways: warn once, run eagerly
        _failed(exc)
        return None


def _embed(x, mask, references, a, *, epsilon, n_iter, method, tol, position_sigma,
           position_mode, reg_m, check_every):
    B0 = x.shape[0]
    if x.shape[1] == 1:  # a padded row (masked, mass 0): sizes of 1 recompile
        x = torch.cat([x, torch.zeros_like(x)], 1)
        mask = torch.cat([mask, torch.zeros_like(mask)], 1)
        a = torch.cat([a, torch.zeros_like(a)], 1)
    x, mask, a = _at_least_two(B0, x, mask, a)
    B, n, k = x.shape
    q, p, _ = references.shape
    epsilon = float(epsilon)
    lam = _relaxation(reg_m, epsilon)
    tol = None if not tol else float(tol)  # 0: a fixed count, as in skset.ot
    balanced = reg_m is None and (position_sigma is None or position_mode != "similarity")
    sim = _similarity(x, references, centred=balanced)  # (B, n, q*p): one GEMM
    S = None
    if position_sigma is not None:
        S = position_weights(mask, p, position_sigma, dtype=sim.dtype)
        if position_mode == "kernel":  # (K + eps log S) / eps = K / eps + log S
            logS = epsilon * position_log_weights(mask, p, position_sigma, dtype=sim.dtype)
            sim = (sim.view(B, n, q, p) + logS.unsqueeze(2)).view(B, n, q * p)
        elif position_mode == "similarity":
            sim = (sim.view(B, n, q, p) * S.unsqueeze(2)).view(B, n, q * p)
    rep_mask = mask if q == 1 else mask.repeat_interleave(q, dim=0)
    rep_a = a if q == 1 else a.repeat_interleave(q, dim=0)
    scale = math.sqrt(p / q)
    if method == "log":
        logK, f, g = _solve_log(sim, rep_mask, rep_a, epsilon, n_iter, tol, check_every, lam, q)
        out = _call("finish", logK, f, g, x, S, scale, q=q, log_domain=True)
        return out[:B0]
    E, u, v, ok = _solve_exp(sim, rep_mask, rep_a, epsilon, n_iter, tol, check_every, lam, q,
                             stop_unsafe=method == "auto")
    if method == "auto" and not bool(ok.all()):
        # the (set, reference) rows whose exp-domain scalings left the safe range: redone in
        # the log domain (skset.ot.sinkhorn), their plan put in E with scalings 1
        bad = (~ok).nonzero().squeeze(1)
        nb = bad.numel()
        s_bad = sim.view(B, n, q, p)[bad // q, :, bad % q]  # (nb, n, p)
        s_bad, m_bad, a_bad = _at_least_two(nb, s_bad, rep_mask[bad], rep_a[bad])
        logK, f, g = _solve_log(s_bad, m_bad, a_bad, epsilon, n_iter, tol, check_every, lam, 1)
        E[bad] = torch.exp(logK + f.unsqueeze(2) + g.unsqueeze(1))[:nb]
        u[bad] = 1.0
        v[bad] = 1.0
    out = _call("finish", E, u, v, x, S, scale, q=q, log_domain=False)[:B0]
    if method == "exp":  # returned as computed, the sets that over- or underflowed named
        _warn_nonfinite_exp(out.view(B0, q * p, k), epsilon, stacklevel=7)
    return out
