r"""Deep Sets and Deep Sets++: per-element encoder, masked pooling, decoder.

``rho(pool_i phi(x_i))`` (Zaheer et al., 2017). The encoder ``phi`` is an input layer followed by
``n_layers`` blocks of width ``D``, chosen by ``residual``:

* ``None`` - the plain Deep Sets MLP: ``x <- W relu(x)`` (no residual; ``norm`` ignored);
* ``"original"`` - non-clean-path residual block (ResNet order, eq. 17):
  ``x <- relu(x + Norm(W relu(Norm(W x))))``;
* ``"clean"`` - the Deep Sets++ block (Zhang et al., 2022, Section 4.3):
  ``x <- x + Norm(W relu(Norm(W x)))``; the input layer has no bias and the encoder ends with a
  norm-relu-weight ``W relu(Norm(x))``.

DS++ is ``residual="clean", norm="set"``. Pooling (``"sum"``, ``"mean"``, ``"max"``,
``"scaled_mean"``, ``"sized_mean"``) only sees the real elements of each set.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import nn

from ._masks import as_mask
from .norm import make_norm

__all__ = ["masked_pool", "PooledLinear", "DeepSetsBlock", "DeepSetsEncoder", "DeepSets",
           "mlp_head"]

_POOLS = ("sum", "mean", "max", "scaled_mean")
# DeepSets' poolings: masked_pool's, and the scaled mean with the set's size beside it
_DS_POOLS = _POOLS + ("sized_mean",)


def masked_pool(x: torch.Tensor, mask: torch.Tensor | None, how: str = "sum",
                size: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Pool ``x (B, n, D)`` over the real elements of each set: ``"sum"``, ``"mean"``, ``"max"``
    or ``"scaled_mean"``, the sum times ``size / n_i`` (``n_i`` the set's real elements): the
    mean times ``size``, and on a set of ``size`` elements the sum itself (to the last bit).

    Returns a ``(B, D)`` tensor; padded elements contribute nothing (not even to a max), and a
    row without a real element pools to 0 (whatever ``how``).
    """
    mask = as_mask(mask, x)
    if how not in _POOLS:
        raise ValueError(f"pooling={how!r} is not supported; use "
                         f"{', '.join(map(repr, _POOLS[:-1]))} or {_POOLS[-1]!r}.")
    if x.shape[1] == 0:  # sets without elements pool to 0, as padding rows do (any mask)
        return x.new_zeros(x.shape[0], x.shape[2])
    if mask is None:
        if how == "max":
            return x.amax(1)
        if how == "mean":
            return x.mean(1)
        s, count = x.sum(1), x.shape[1]
    else:
        m = mask.unsqueeze(-1)
        if how == "max":
            fill = torch.finfo(x.dtype).min
            top = torch.where(m, x, torch.full((), fill, dtype=x.dtype, device=x.device)).amax(1)
            return torch.where(mask.any(1, keepdim=True), top, torch.zeros((), dtype=x.dtype,
                                                                           device=x.device))
        s = torch.where(m, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum(1)
        if how == "sum":
            return s
        count = mask.sum(1, keepdim=True).clamp_min(1).to(x.dtype)
    if how == "sum":
        return s
    if how == "mean":
        return s / count
    return s * (torch.as_tensor(size, dtype=x.dtype, device=x.device) / count)


def mlp_head(in_features: int, dim: int, out_features: int, n_layers: int) -> nn.Sequential:
    """``n_layers`` Linear-ReLU layers of width ``dim``, then a Linear to ``out_features``."""
    layers: list[nn.Module] = []
    d = in_features
    for _ in range(n_layers):
        layers += [nn.Linear(d, dim), nn.ReLU()]
        d = dim
    layers.append(nn.Linear(d, out_features))
    return nn.Sequential(*layers)


class PooledLinear(nn.Module):
    """A linear model of the mean and the max of a set's raw elements: ``W z + b`` with ``z`` the
    masked mean and max of ``x (B, n, d)`` (``2 d`` features), each standardised by the buffers
    ``shift`` and ``scale`` (fitted, not trained; 0 and 1 until set).

    The set networks add it to their output (``pooled_skip=True``): fitted first alone, as the
    raw-pooling baseline a practitioner would try (mean and max pooling, standardised, then a
    linear model), it is the network's starting point, and the deep path learns what it misses.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import PooledLinear
    >>> skip = PooledLinear(in_features=3, out_features=2)
    >>> x = torch.randn(2, 5, 3); mask = torch.arange(5) < torch.tensor([[5], [2]])
    >>> skip.features(x, mask).shape, skip(x, mask).shape
    (torch.Size([2, 6]), torch.Size([2, 2]))
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.register_buffer("shift", torch.zeros(2 * in_features))
        self.register_buffer("scale", torch.ones(2 * in_features))
        self.linear = nn.Linear(2 * in_features, out_features)

    def features(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The standardised mean and max of each set, ``(B, 2 d)``."""
        mask = as_mask(mask, x)
        z = torch.cat([masked_pool(x, mask, "mean"), masked_pool(x, mask, "max")], dim=1)
        return (z - self.shift) / self.scale

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        return self.linear(self.features(x, mask))


def add_pooled_skip(module: nn.Module, out: torch.Tensor, x: torch.Tensor,
                    mask: torch.Tensor | None) -> torch.Tensor:
    """``out`` plus the module's pooled skip (``module.skip``), where it has one (modules saved
    before the option have no ``skip`` attribute)."""
    skip = getattr(module, "skip", None)
    return out if skip is None else out + skip(x, mask)


class DeepSetsBlock(nn.Module):
    """One encoder block of width ``dim`` (see the module docstring for the three forms)."""

    def __init__(self, dim: int, *, norm: str | None = None, residual: str | None = None):
        super().__init__()
        if residual not in (None, "original", "clean"):
            raise ValueError(f"residual={residual!r} is not supported; use None, 'original' or "
                             "'clean'.")
        self.residual = residual
        if residual is None:
            self.lin = nn.Linear(dim, dim)
        else:
            self.lin1 = nn.Linear(dim, dim)
            self.norm1 = make_norm(norm, dim)
            self.lin2 = nn.Linear(dim, dim)
            self.norm2 = make_norm(norm, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *,
                padding_finite: bool = False) -> torch.Tensor:
        """``x (B, n, dim)``: padded rows may hold anything (zeroed here: NaN there made the
        weights' gradients NaN), unless ``padding_finite=True`` says that they hold finite values
        (the encoder's own rows: the zeroing skipped, the same outputs on real rows)."""
        mask = as_mask(mask, x)
        if mask is not None and not padding_finite:
            x = x.masked_fill(~mask.unsqueeze(-1), 0.0)
        if self.residual is None:
            return self.lin(F.relu(x))
        f = self.norm2(self.lin2(F.relu(self.norm1(self.lin1(x), mask))), mask)
        if self.residual == "clean":
            return x + f
        return F.relu(x + f)


class DeepSetsEncoder(nn.Module):
    """Per-element encoder ``phi``: input layer, ``n_layers`` blocks, (clean) norm-relu-weight.

    Parameters
    ----------
    in_features : int
        Features per element.
    dim : int
        Hidden width ``D``.
    n_layers : int
        Number of blocks.
    norm : {"layer", "set", None}
        Normalisation inside residual blocks.
    residual : {None, "original", "clean"}
        Block form.
    """

    def __init__(self, in_features: int, dim: int, n_layers: int, *, norm: str | None = None,
                 residual: str | None = None):
        super().__init__()
        make_norm(norm, 1)  # an unknown norm refused, also where the blocks ignore it
        self.residual = residual
        self.input = nn.Linear(in_features, dim, bias=residual != "clean")
        self.blocks = nn.ModuleList(
            DeepSetsBlock(dim, norm=norm, residual=residual) for _ in range(int(n_layers))
        )
        if residual == "clean":
            self.final_norm = make_norm(norm, dim)
            self.final = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        h = self.input(x if mask is None else x.masked_fill(~mask.unsqueeze(-1), 0.0))
        for blk in self.blocks:  # padded rows: the input layer's bias, then finite
            h = blk(h, mask, padding_finite=True)
        if self.residual == "clean":
            h = self.final(F.relu(self.final_norm(h, mask)))
        return h


class DeepSets(nn.Module):
    """Deep Sets network ``rho(pool(phi(x)))`` on padded batches with a mask.

    Parameters
    ----------
    in_features, dim, n_layers, norm, residual
        The encoder, see :class:`DeepSetsEncoder`.
    out_features : int
        Outputs of the decoder ``rho``.
    pooling : {"sum", "mean", "max", "scaled_mean", "sized_mean"}, default="sum"
        ``"scaled_mean"``: the mean times ``pool_size`` (the buffer ``self.pool_size``), the sum
        itself on sets of ``pool_size`` elements (:func:`masked_pool`). ``"sized_mean"``: the
        scaled mean, and the set's size as ``log(n_i / pool_size)`` times a trained vector
        (``self.size_weight``) added to the decoder's first layer; the vector starts at zero,
        and on sets of ``pool_size`` elements the term is exactly zero: there the network is
        the sum's, weight for weight.
    n_decoder_layers : int, default=2
        Hidden Linear-ReLU layers of the decoder.
    pooled_skip : bool, default=False
        Add a :class:`PooledLinear` of the raw elements to the output (``self.skip``).

    References
    ----------
    Zaheer et al. "Deep Sets", NeurIPS 2017. Zhang, Tozzo, Higgins, Ranganath. "Set Norm and
    Equivariant Skip Connections: Putting the Deep in Deep Sets", ICML 2022.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import DeepSets
    >>> net = DeepSets(in_features=3, dim=16, out_features=1, n_layers=4, norm="set",
    ...                residual="clean")
    >>> x = torch.randn(2, 6, 3); mask = torch.arange(6) < torch.tensor([[6], [4]])
    >>> net(x, mask).shape  # Deep Sets++: one output per set
    torch.Size([2, 1])
    """

    def __init__(self, in_features: int, dim: int, out_features: int, n_layers: int = 2, *,
                 norm: str | None = None, residual: str | None = None, pooling: str = "sum",
                 n_decoder_layers: int = 2, pooled_skip: bool = False, pool_size: float = 1.0):
        super().__init__()
        if pooling not in _DS_POOLS:
            raise ValueError(f"pooling={pooling!r} is not supported; use one of {_DS_POOLS}.")
        self.pooling = pooling
        if isinstance(pool_size, bool) or not (isinstance(pool_size, numbers.Real)
                                               and 0 < float(pool_size) < float("inf")):
            raise ValueError(f"pool_size={pool_size!r} must be a positive finite number (the "
                             "set size at which the scaled mean is the sum).")
        if pooling in ("scaled_mean", "sized_mean"):  # only then: other modules keep their keys
            self.register_buffer("pool_size", torch.tensor(float(pool_size)))
        self.encoder = DeepSetsEncoder(in_features, dim, n_layers, norm=norm, residual=residual)
        self.decoder = mlp_head(dim, dim, out_features, n_decoder_layers)
        if pooling == "sized_mean":  # zeros draw nothing: the other weights start as the sum's
            self.size_weight = nn.Parameter(torch.zeros(self.decoder[0].out_features))
        # only built when asked, so the default module keeps its parameters and names
        self.skip = PooledLinear(in_features, out_features) if pooled_skip else None

    def embed(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The pooled representation ``(B, dim)`` (``"sized_mean"``: the scaled mean)."""
        mask = as_mask(mask, x)
        how = "scaled_mean" if self.pooling == "sized_mean" else self.pooling
        return masked_pool(self.encoder(x, mask), mask, how, getattr(self, "pool_size", 1.0))

    def log_size(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``log(n_i / pool_size)`` of each set, ``(B, 1)``: 0 on sets of ``pool_size``."""
        mask = as_mask(mask, x)
        if mask is None:
            n = torch.full((x.shape[0], 1), max(x.shape[1], 1), dtype=x.dtype, device=x.device)
        else:
            n = mask.sum(1, keepdim=True).clamp_min(1).to(x.dtype)
        return torch.log(n / self.pool_size.to(x.dtype))

    def decode(self, z: torch.Tensor, x: torch.Tensor,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """The decoder on the pooled ``z`` of the sets ``x`` (their sizes, for ``"sized_mean"``)."""
        if self.pooling != "sized_mean":
            return self.decoder(z)
        return self.decoder[1:](self.decoder[0](z) + self.log_size(x, mask) * self.size_weight)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        return add_pooled_skip(self, self.decode(self.embed(x, mask), x, mask), x, mask)
