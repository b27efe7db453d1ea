"""The one reading of a mask that every module and function of ``skset.nn`` takes.

A mask ``(B, n)`` says which rows of ``x (B, n, ...)`` are real elements. It may come as a bool
tensor (the usual case, returned as it is), as a tensor of 0/1 integers or floats, or as a
numpy array or nested list: all are read as ``mask != 0`` on ``x``'s device, as
:func:`skset.ot.sinkhorn` reads them. A mask of another shape is refused by name rather than
broadcast into a wrong result or a torch error deep in the module.
"""

from __future__ import annotations

import torch

__all__ = ["as_mask"]


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def as_mask(mask, x: torch.Tensor, name: str = "mask") -> torch.Tensor | None:
    """``mask`` as a bool tensor on ``x``'s device, checked against ``x.shape[:2]``; ``None``
    stays ``None``."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        mask = torch.as_tensor(mask, device=x.device)
    elif mask.device != x.device and not _tracing():
        mask = mask.to(x.device)
    if mask.dtype != torch.bool:
        if mask.is_complex():
            raise TypeError(f"{name} must hold booleans or 0/1 numbers, got dtype {mask.dtype}")
        mask = mask != 0
    if not _tracing() and (mask.dim() != 2 or tuple(mask.shape) != tuple(x.shape[:2])):
        raise ValueError(f"{name} must have shape {tuple(x.shape[:2])} (sets, elements) to match "
                         f"the input, got {tuple(mask.shape)}")
    return mask
