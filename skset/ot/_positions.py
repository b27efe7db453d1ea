r"""Positional weights of the OTK embedding (Mialon et al. 2021, Appendix B.3): the weights
:math:`S_{ij} = \exp(-(i/n - j/p)^2 / \sigma^2)` and their row-normalised logarithm, shared by the
eager and the compiled OTK embedding."""

from __future__ import annotations

import numbers

import torch

__all__ = ["position_weights", "position_log_weights"]


def position_weights(
    mask: torch.Tensor, n_supports: int, sigma: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Positional weights :math:`S_{ij} = \exp(-(i/n - j/p)^2 / \sigma^2)`, ``(B, n_max, p)``.

    ``n`` is each set's real length (not the padded one), so a set's weights never depend on its
    batch; padded rows are 0. Any ``sigma > 0`` is safe, in float32 too: a huge one (up to
    ``inf``) gives weights 1 (no positional weighting), a tiny one (down to the smallest float64)
    weights 1 where ``i/n == j/p`` and 0 elsewhere, the limit of a vanishing bandwidth.
    """
    _check_args(n_supports, sigma)
    d = _position_offsets(mask, n_supports, dtype)
    # (d / sigma)^2, not d^2 / sigma^2: sigma^2 overflows for 1e300 (a Python OverflowError) and
    # underflows for 1e-300; a sigma below the dtype's range is 0 there, and 0 / 0 is NaN: where
    S = torch.where(d == 0, 1.0, torch.exp(-((d / sigma) ** 2)))
    return S * mask.unsqueeze(-1).to(S.dtype)


def _check_args(n_supports, sigma) -> None:
    if isinstance(n_supports, torch.Tensor):  # a size traced for export (TorchScript, ONNX)
        return
    if isinstance(n_supports, bool) or not isinstance(n_supports, numbers.Integral) \
            or n_supports < 1:
        raise ValueError(f"n_supports must be a positive integer, got {n_supports!r}")
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real) or not sigma > 0:
        raise ValueError(f"sigma must be a positive number (inf: no positions), got {sigma!r}")


def _position_offsets(mask, n_supports, dtype):
    """``i/n - j/p`` with ``n`` each set's real length and ``i`` an element's rank among the real
    ones (a mask need not be a prefix), ``(B, n_max, p)``; a row without a real element (all
    padding) has offsets, not NaN, and its weights are 0 by the mask."""
    n_real = mask.sum(1, keepdim=True).clamp_min(1).to(dtype)  # (B, 1)
    i = (mask.to(n_real.dtype).cumsum(1) - 1).clamp_min(0)  # (B, n_max); ONNX sums no bools
    j = torch.arange(n_supports, device=mask.device, dtype=n_real.dtype) / n_supports
    return (i / n_real).unsqueeze(-1) - j.view(1, 1, -1)


# floor of the row-shifted log weights, as a fraction of the dtype's largest value: far below any
# similarity over epsilon that sits beside it (a floor of -1e4 let a far support win over a near
# one once K / epsilon varied by more than 1e4 within a row: features x10, sigma 0.005,
# epsilon 0.01), and finite, which keeps the log-domain iterations free of inf - inf (times an
# epsilon up to 2**10 it stays finite too)
_LOG_WEIGHT_FLOOR_FRACTION = 2.0 ** -20


def position_log_weights(
    mask: torch.Tensor, n_supports: int, sigma: float, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    r"""Row-normalised log positional weights, ``(B, n_max, p)``, for the Gibbs kernel.

    :math:`\log S_{ij} - \max_{j'} \log S_{ij'}` with
    :math:`\log S_{ij} = -(i/n - j/p)^2 / \sigma^2`, floored at ``-finfo(dtype).max / 2**20``
    so that it stays finite for any ``sigma`` (and far below any similarity over epsilon beside
    it); 0 on padded rows. The row shift multiplies each row of
    :math:`\exp(K/\varepsilon) \odot S` by a constant, which changes the balanced Sinkhorn's
    scaling ``u`` but not its plan, and it keeps each row's best-placed support at 0 so that the
    floor only touches weights that are 0 in the dtype anyway. The unbalanced
    solver (``reg_m``) does not cancel the shift: there the weights are relative to each
    element's best-placed support (an element between two supports is not penalised for it).
    """
    _check_args(n_supports, sigma)
    d2 = _position_offsets(mask, n_supports, dtype) ** 2
    d2 = d2 - d2.amin(dim=2, keepdim=True)  # >= 0, exactly 0 at each row's best support
    # divided by sigma twice: sigma**2 overflows (1e300: a Python OverflowError) or underflows;
    # where: 0 / 0 when sigma is 0 in the dtype; inf / inf cannot happen (d2 <= 1)
    floor = -torch.finfo(dtype).max * _LOG_WEIGHT_FLOOR_FRACTION
    logS = torch.where(d2 > 0, -(d2 / sigma) / sigma, 0.0).clamp_min_(floor)
    return logS.masked_fill_(~mask.unsqueeze(-1), 0.0)
