"""The torch modules that serve a fitted estimator (see :mod:`skset.export`).

Each estimator builds its own in ``_serving_module`` from these parts: the standardisation, the
network and the output transform of a set-to-target network (:class:`NetworkServing`; its
element map replaced by the map's export copy, :func:`for_export`), a frozen Nystrom layer
(:class:`NystromServing`) and the centred, normalised OTK embedding
(:class:`OTKEmbeddingServing`). Engine modules only: this file imports :mod:`skset.nn`, never an
estimator.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from .nn._masks import as_mask
from .nn.attention import _zero_padding  # a select, not a product: NaN * 0 is NaN
from .nn.deep_sets import add_pooled_skip
from .nn.nystrom import (
    NystromLayer,
    _FrozenNystromLayer,  # noqa: F401 (serving modules pickled before it moved)
)
from .nn.otk import embedding_output

__all__ = ["NetworkServing", "NystromServing", "OTKEmbeddingServing", "freeze_nystrom",
           "for_export", "set_sinkhorn", "network_serving", "check_width", "compute_dtype"]


def _buffer(value, dtype) -> torch.Tensor:
    """A copy of a fitted array as a buffer: the served module never shares the estimator's
    memory (a ``load_state_dict`` into it would change the estimator)."""
    return torch.as_tensor(np.asarray(value), dtype=dtype).clone()


def compute_dtype(module: nn.Module) -> torch.dtype | None:
    """The float dtype a served module reads its sets in: its first floating parameter's, else
    its first floating buffer's (a regressor's float64 target mean and scale come after the
    network's parameters)."""
    return next((t.dtype for t in (*module.parameters(), *module.buffers())
                 if t.is_floating_point()), None)


def check_width(module: nn.Module, x: torch.Tensor, mask: torch.Tensor | None = None, *,
                any_float: bool = False) -> torch.Tensor | None:
    """Refuse, by name, in eager calls (an exported graph fixes its inputs itself): ``x`` that is
    not a padded batch tensor ``(B, n, d)``, sets of another width than the fit's
    (``module.n_features``, set by :func:`skset.export.serving_module`; absent in modules pickled
    before it), sets in another dtype than the module's float dtype (with ``any_float``, sets of
    no float dtype only) and, with ``mask`` given, a mask that is not boolean (torch's errors
    before). Returns ``mask`` checked against ``x``'s sets and elements
    (:func:`skset.nn._masks.as_mask`: a mask of another shape is refused before any arithmetic
    broadcasts it)."""
    n = getattr(module, "n_features", None)
    tracing = torch.jit.is_tracing() or torch.compiler.is_compiling()
    if not tracing and not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch tensor (B, n, d), got {type(x).__name__} (from "
                        "skset.pad_sets' arrays: torch.from_numpy(x)).")
    if not tracing and x.dim() != 3:
        raise ValueError(f"x must be a padded batch of sets (B, n, {n or 'd'}); got shape "
                         f"{tuple(x.shape)}.")
    if n is not None and not tracing:
        if x.shape[-1] != n:
            raise ValueError(f"the sets have {x.shape[-1]} features, but the model was fitted "
                             f"on {n}.")
        dtype = compute_dtype(module)
        if dtype is not None and (not x.is_floating_point() if any_float else x.dtype != dtype):
            raise ValueError(f"the sets are {x.dtype}, the served model computes in {dtype}: "
                             f"convert them (x.to({dtype}), or skset.pad_sets(..., dtype=...)).")
        if mask is not None and mask.dtype != torch.bool:
            raise ValueError(f"the mask is {mask.dtype}; the served model takes a boolean mask "
                             "(True for real elements: mask.bool(), or skset.pad_sets' own).")
    return as_mask(mask, x)


def freeze_nystrom(layer: NystromLayer, normalization: torch.Tensor | None = None) -> NystromLayer:
    """A copy of a Nystrom layer whose ``kappa(w, w)^{-1/2}`` is a fixed buffer
    (:meth:`skset.nn.NystromLayer.for_export`)."""
    return layer.for_export(normalization)


def for_export(element_map: nn.Module) -> nn.Module:
    """What a serving module holds in place of an element map: its ``for_export()`` copy where it
    defines one (a Nystrom layer without its eigendecomposition), else a copy of the map."""
    export = getattr(element_map, "for_export", None)
    return export() if export is not None else copy.deepcopy(element_map)


def set_sinkhorn(otk, method: str, n_iter: int | None) -> None:
    otk.method = method
    otk.sinkhorn_tol = None  # a fixed count: no data-dependent stopping
    if n_iter is not None:
        otk.sinkhorn_iter = int(n_iter)


class NetworkServing(nn.Module):
    """k-mers (``front``), standardisation, set network, head and output transform of a
    set-to-target estimator. A regressor's target scale and mean are float64 buffers and its
    ``predict`` is float64, as the estimator's: targets far from zero (``1e7 + O(1)``) keep the
    digits a float32 output step rounds away."""

    def __init__(self, net: nn.Module, head: nn.Module, mean, scale, *, classifier: bool,
                 y_mean=None, y_scale=None, squeeze: bool = False, multilabel: bool = False,
                 binary: bool = False, front: nn.Module | None = None):
        super().__init__()
        self.binary = bool(binary)  # two classes: decision_function is the score of the second
        self.front = front
        self.net = net
        self.head = head
        self.classifier = bool(classifier)
        self.multilabel = bool(multilabel)
        self.squeeze = bool(squeeze)
        dtype = next(net.parameters()).dtype
        self.standardize = mean is not None
        if self.standardize:
            self.register_buffer("mean", _buffer(mean, dtype))
            self.register_buffer("scale", _buffer(scale, dtype))
        if not self.classifier:  # the output step in float64, as the estimators' predict
            self.register_buffer("y_mean", _buffer(y_mean, torch.float64))
            self.register_buffer("y_scale", _buffer(y_scale, torch.float64))

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        mask = check_width(self, x, mask)
        x = _zero_padding(x, mask)
        if self.front is not None:  # the set networks' k-mers
            x, mask = self.front(x, mask)
        if self.standardize:
            x = (x - self.mean) / self.scale
        z = self.net.embed(x, mask)
        # Deep Sets' decoder reads the sets' sizes too (pooling="sized_mean")
        decode = getattr(self.net, "decode", None)
        out = self.head(z) if decode is None else decode(z, x, mask)
        out = add_pooled_skip(self.net, out, x, mask)  # the set networks' option
        if self.classifier and self.multilabel:  # one sigmoid per label; predict: logit > 0
            return out, torch.sigmoid(out), (out > 0).to(torch.int64), z
        if self.classifier:
            decision = out[:, 1] - out[:, 0] if self.binary else out
            return decision, torch.softmax(out, dim=1), out.argmax(dim=1), z
        # float64 (modules pickled before hold the network's dtype: promoted alike)
        pred = out.to(torch.float64) * self.y_scale + self.y_mean
        return (pred[:, 0] if self.squeeze else pred), z


class TupleOutput(nn.Module):
    """A module of ``forward(x, mask) -> tensor`` (padding already ignored, as
    :class:`skset.nn.DilatedKernelPPV` does) served as ``forward(x, mask) -> (tensor,)``."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        # the module reads sets of any float dtype and any mask itself
        check_width(self, x, any_float=True)
        return (self.module(x, mask),)


class NystromServing(nn.Module):
    def __init__(self, layer: NystromLayer):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        mask = check_width(self, x, mask)
        return self.layer(_zero_padding(x, mask), mask)


class OTKEmbeddingServing(nn.Module):
    """``OTKEmbedding.transform`` as a module. With ``offset`` (the estimator's
    ``input_offset_``) the sets are read less it and ``center`` is the mean less the offset's part
    of the embedding, ``offset / sqrt(p q)`` a support; with positions, where each set's column
    sums carry its own part, ``layer``'s references hold a last column of zeros and a feature of
    1 beside the sets carries it (:mod:`skset.embedding._offset`)."""

    def __init__(self, layer, center, normalize: bool, sinkhorn_tol=None, offset=None):
        super().__init__()
        self.layer = layer
        self.normalize = bool(normalize)
        self.sinkhorn_tol = sinkhorn_tol  # the estimator's, for its noise floor (not the graph's)
        dtype = layer.references.dtype
        self.register_buffer("center", _buffer(center, dtype))
        self.register_buffer("offset", None if offset is None else _buffer(offset, dtype))

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        mask = check_width(self, x, mask)
        offset = getattr(self, "offset", None)  # absent in modules pickled before it
        if offset is not None and self.layer.references.shape[-1] == x.shape[-1]:
            x = x - offset  # no positions: column sums of 1/p, center holds the offset's part
        elif offset is not None:  # references with a column of zeros, for a feature of ones
            q, p, _ = self.layer.references.shape
            x = torch.cat([x - offset, mask.unsqueeze(-1).to(x.dtype)], -1)
            pooled = self.layer(_zero_padding(x, mask), mask)
            raw = (pooled[..., :-1] + (pooled[..., -1:] - (p * q) ** -0.5) * offset).flatten(1)
            return (embedding_output(raw, self.center, (q, p, x.shape[-1] - 1),
                                     normalize=self.normalize, sinkhorn_tol=self.sinkhorn_tol),)
        raw = self.layer(_zero_padding(x, mask), mask).flatten(1)
        # as OTKEmbedding.transform: a row within the noise of 0 stays 0
        return (embedding_output(raw, self.center, tuple(self.layer.references.shape),
                                 normalize=self.normalize, sinkhorn_tol=self.sinkhorn_tol),)


def network_serving(estimator, net, head, mean, scale) -> NetworkServing:
    """The :class:`NetworkServing` of a fitted classifier or regressor; without ``mean``, the
    sets read less ``input_offset_`` where a fit took one (the supervised OTK models)."""
    offset = getattr(estimator, "input_offset_", None)  # absent in models fitted before it
    if mean is None and offset is not None:
        mean, scale = offset, np.ones_like(offset)
    front = getattr(estimator, "_serving_front", lambda: None)()
    if hasattr(estimator, "classes_"):
        multilabel = getattr(estimator, "_multilabel", False)
        return NetworkServing(net, head, mean, scale, classifier=True, front=front,
                              multilabel=multilabel,
                              binary=not multilabel and len(estimator.classes_) == 2)
    return NetworkServing(net, head, mean, scale, classifier=False, y_mean=estimator.y_mean_,
                           y_scale=estimator.y_scale_, squeeze=estimator._y_ndim == 1,
                           front=front)
