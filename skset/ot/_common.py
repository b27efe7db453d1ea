"""What the eager and the compiled solvers of :mod:`skset.ot` share: the solver names, the
checks of masks and element masses, the unbalanced relaxation, the export test, the default
interval of the stopping checks and the similarity matrix. Package-internal
(:mod:`skset.nn.otk` checks its batches with the same functions before it calls either solver).
"""

from __future__ import annotations

import math
import numbers

import torch

_METHODS = ("auto", "log", "exp")

# iterations between two checks of a stopping tolerance
_CHECK_EVERY = 5


def _tracing() -> bool:
    """Whether the code is being traced for export (``torch.export``, ONNX, TorchScript)."""
    return (torch.compiler.is_exporting() or torch.jit.is_tracing()
            or torch.onnx.is_in_onnx_export())


def _check_nonempty(mask: torch.Tensor) -> None:
    """Raise a ``ValueError`` naming the first set (row of ``mask``) without a real element.

    Such a set has no measure (``a = 1/0``): its plan would be NaN. Not checked while tracing for
    export (a data-dependent branch): the exported graph documents the requirement instead.
    """
    if _tracing():
        return
    empty = ~mask.any(1)
    if bool(empty.any()):
        b = int(empty.nonzero()[0, 0])
        raise ValueError(f"mask row {b} is all False: set {b} of the batch has no real element; "
                         "every set needs at least one (leave empty sets out of the batch)")


def _check_finite_rows(t: torch.Tensor, mask: torch.Tensor, what: str,
                       allow_neg_inf: bool = False) -> None:
    """A ``ValueError`` naming the sets whose real rows of ``t (B, n, k)`` hold NaN or infinity
    (``allow_neg_inf``: -inf, a forbidden pair of a similarity, is allowed), which would make
    their plans NaN silently. One reduction when every value is finite; not while tracing."""
    if _tracing():
        return
    t = t.detach()
    total = torch.where(mask.unsqueeze(-1), t, torch.zeros((), dtype=t.dtype, device=t.device)).sum()
    if bool(torch.isfinite(total)):
        return
    if allow_neg_inf and float(total) == -math.inf:  # forbidden pairs: is any row or column all?
        return _check_forbidden(t, mask, what)
    bad = (t.isnan() | (t == math.inf)) if allow_neg_inf else ~torch.isfinite(t)
    bad = (bad & mask.unsqueeze(-1)).flatten(1).any(1)
    if bool(bad.any()):
        sets = bad.nonzero().squeeze(1).tolist()
        raise ValueError(f"{what} of set {', '.join(map(str, sets[:5]))}"
                         f"{', ...' if len(sets) > 5 else ''} of the batch holds NaN or "
                         f"{'+inf' if allow_neg_inf else 'infinity'} on a real element: its plan "
                         "would be NaN (padded rows may hold anything; real ones must be finite)")


def _check_forbidden(t: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    """A ``ValueError`` naming the sets where a real element's row, or a support's column over
    the real elements, of ``t (B, n, p)`` is all -inf: no plan exists (NaN before)."""
    neg = t == -math.inf
    row = (neg.all(2) & mask).any(1)
    col = (neg | ~mask.unsqueeze(-1)).all(1).any(1)
    bad = (row | col).nonzero().squeeze(1).tolist()
    if bad:
        raise ValueError(f"{what} of set {', '.join(map(str, bad[:5]))}"
                         f"{', ...' if len(bad) > 5 else ''} of the batch forbids (-inf) every pair "
                         "of an element or of a support: no transport plan exists (mask such an "
                         "element out, or allow one of its pairs)")


def _check_weights(weights, mask: torch.Tensor, similarity: torch.Tensor):
    """The normalised masses ``a (B, n)`` (0 on pads) of ``weights``, or ``None`` for uniform.

    Raises ``ValueError`` naming the set (its index in the batch) for a negative, NaN or infinite
    weight on a real element, or a set whose weights are all zero. Padded entries are ignored.
    Differentiable with respect to ``weights``.
    """
    if weights is None:
        return None
    w = torch.as_tensor(weights, device=similarity.device)
    if w.shape != mask.shape:
        raise ValueError(f"weights shape {tuple(w.shape)} does not match the sets "
                         f"{tuple(mask.shape)} (B, n_max)")
    if w.is_complex():
        raise ValueError(f"weights must be real numbers, got dtype {w.dtype}")
    # normalised in the wider of the two dtypes, each set by its largest weight first, then cast:
    # only relative weights matter, and float64 weights of 1e-12 or 1e39 (or float32 ones beside
    # a float16 similarity) must not underflow to 0 or overflow to inf in the cast
    wide = torch.promote_types(w.dtype, similarity.dtype) if w.is_floating_point() else \
        similarity.dtype
    w = torch.where(mask, w.to(wide), 0.0)  # pads: ignored, whatever they hold
    wd = w.detach()
    bad = (~torch.isfinite(wd) | (wd < 0)).any(1)
    if bool(bad.any()):
        b = int(bad.nonzero()[0, 0])
        raise ValueError(f"weights of set {b} hold a negative, NaN or infinite value; element "
                         "masses must be finite and non-negative")
    top = wd.amax(1, keepdim=True)
    bad = ~(top[:, 0] > 0)
    if bool(bad.any()):
        b = int(bad.nonzero()[0, 0])
        raise ValueError(f"weights of set {b} are all zero; a set needs a positive, finite total "
                         "mass")
    w = w / top  # in (0, 1]: the sum below cannot overflow
    return (w / w.sum(1, keepdim=True)).to(similarity.dtype)


def _check_epsilon(epsilon) -> None:
    """A ``ValueError`` unless ``epsilon`` is a positive finite number (not a bool)."""
    if not (isinstance(epsilon, numbers.Real) and not isinstance(epsilon, bool) and epsilon > 0
            and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")


def _check_tol(tol, name: str = "tol") -> None:
    """A ``ValueError`` unless ``tol`` (named ``name``) is None or a non-negative finite number."""
    if tol is not None and not (isinstance(tol, numbers.Real) and not isinstance(tol, bool)
                                and math.isfinite(tol) and tol >= 0):
        raise ValueError(f"{name} must be None or a non-negative number, got {tol!r}")


def _relaxation(reg_m, epsilon: float) -> float:
    """``lambda = reg_m / (reg_m + epsilon)`` of the unbalanced row update; 1.0 when balanced
    (``reg_m`` None or infinite)."""
    if reg_m is None:
        return 1.0
    if not (isinstance(reg_m, numbers.Real) and not isinstance(reg_m, bool) and reg_m > 0):
        raise ValueError(f"reg_m must be None or a positive number, got {reg_m!r}")
    if math.isinf(reg_m):
        return 1.0
    return float(reg_m) / (float(reg_m) + epsilon)


def _similarity(x: torch.Tensor, references: torch.Tensor, *, centred: bool) -> torch.Tensor:
    """The similarities ``x @ z^T`` ``(B, n, q*p)`` of the elements of ``x (B, n, k)`` and the
    supports of ``references (q, p, k)``, one matrix product for all references.

    With ``centred`` the supports are read less their mean ``m`` over all references:
    ``x @ (z - m)^T`` differs from ``x @ z^T`` by the row term ``x_i . m`` alone, which the first
    row update of a balanced Sinkhorn absorbs exactly (the same plans, iteration by iteration),
    and it keeps the digits that a shared offset of the features would take: at features of
    1,000 +- 1 in float32, ``x @ z^T`` rounds to about 0.2 and the plans were noise. Not for an
    unbalanced plan (``reg_m``) or similarity-scaled positions, where a row term changes the
    plan."""
    q, p, k = references.shape
    flat = references.reshape(q * p, k)
    if centred:
        flat = flat - flat.mean(0)
    return x @ flat.T

