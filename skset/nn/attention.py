r"""Masked attention blocks of the Set Transformer and Set Transformer++.

Every block works on padded batches ``x`` of shape ``(B, n, D)`` with a boolean ``mask`` of shape
``(B, n)`` (``True`` on real elements). Padded elements get no attention weight (they are masked
out of the keys) and no share of any set-norm statistic, so a set gives the same output whatever
else is in its batch. Each block zeroes the padding of its inputs once, where it is called (so
that even non-finite padding cannot leak through a zero weight); inside a block, padded rows hold
finite values that no real row reads. A set without a real element attends to nothing: its
attention output is 0 (the output projection's bias after it).

Two residual arrangements (Zhang et al., 2022, Section 4):

``residual="original"`` (the Set Transformer's post-norm MAB, Lee et al., 2019)::

    H   = Norm(X + Multihead(X, Y, Y))
    out = Norm(H + relu(W H))

``residual="clean"`` (the clean path of ST++, eq. 21-24: nothing but the addition on the residual
path, normalisation off it)::

    H   = X + Multihead(Norm(X), Norm(Y), Y)      # Norm(X) skipped when X are learned points
    out = H + W relu(Norm(H))

``norm`` is ``"layer"`` (per element), ``"set"`` (:class:`~skset.nn.SetNorm`, per set) or ``None``.

Learned query points (the inducing points of ISAB, the seeds of PMA) are initialised by
``point_init``: ``"xavier"`` (uniform, entries of size about ``sqrt(2 / (m + D))``, ~0.15 at
``D = 64``: the reference code's choice and the default here) or ``"normal"`` (standard normal
entries, the scale of a layer- or set-normalised element). With the post-norm block and
``"xavier"`` points, ``MAB(I, X) = Norm(I + Multihead(I, X, X))`` starts as ``Norm(I_j + c(X))``
with a near-uniform attention average ``c(X)`` that dominates the small ``I_j``: the ``m``
outputs are nearly equal, the next block sees a single summary of ``X``, and training sits on a
plateau (on small sets of digits: at the class prior for tens of epochs). ``"normal"`` points
keep the ``m`` outputs apart from the first step.

Multi-head attention scales the scores by ``1/sqrt(head_dim)`` (the width of one head, not of the
whole model), and concatenated heads go through an output projection, as in Vaswani et al. (2017).

Attention weights: the forward pass runs the fused ``scaled_dot_product_attention`` and keeps no
weights. Inside :func:`record_attention` every :class:`MultiheadAttention` of a module also forms
its weights ``softmax(q k^T / sqrt(head_dim))`` (``(B, n_heads, n_queries, n_keys)``, 0 on padded
keys and on the rows of padded queries) and stores them under the block's name;
:meth:`SetTransformer.attention_weights` returns them cropped to each set's real elements.
Recording does not change the forward's outputs (they still come from the fused kernel).

References
----------
Lee, Lee, Kim, Kosiorek, Choi, Teh. "Set Transformer: A Framework for Attention-based
Permutation-Invariant Neural Networks", ICML 2019.
Zhang, Tozzo, Higgins, Ranganath. "Set Norm and Equivariant Skip Connections: Putting the Deep in
Deep Sets", ICML 2022.
"""

from __future__ import annotations

import contextlib
import math
import operator

import torch
import torch.nn.functional as F
from torch import nn

from ._masks import as_mask
from .deep_sets import PooledLinear, add_pooled_skip, mlp_head
from .norm import make_norm

__all__ = ["MultiheadAttention", "MAB", "SAB", "ISAB", "PMA", "SetTransformer", "AttentionRecord",
           "record_attention"]

_RESIDUALS = ("original", "clean")
_POINT_INITS = ("xavier", "normal")
_DECODERS = ("mlp", "sab")


def _init_points(points: torch.Tensor, how: str) -> None:
    """Initialise learned query points (inducing points, seeds) in place, see the module doc."""
    if how == "xavier":
        nn.init.xavier_uniform_(points)
    elif how == "normal":
        nn.init.normal_(points)
    else:
        raise ValueError(f"point_init={how!r} is not supported; use 'xavier' or 'normal'.")


def _check_heads(dim: int, n_heads: int) -> None:
    n_heads = _check_count(n_heads, "n_heads")
    if dim % n_heads:
        raise ValueError(f"dim={dim} must be divisible by n_heads={n_heads}.")


def _check_count(value, name: str) -> int:
    """``value`` (heads, inducing points, seeds: an integer, numpy's or a 0-d tensor's) as an
    int, or a ``ValueError``."""
    try:
        count = operator.index(value)
    except TypeError:
        count = None
    if isinstance(value, bool) or count is None or count < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer.")
    return count


def _check_options(dim: int, n_heads: int, norm, residual) -> None:
    _check_heads(dim, n_heads)
    if residual not in _RESIDUALS:
        raise ValueError(f"residual={residual!r} is not supported; use 'original' or 'clean'.")
    if norm not in ("layer", "set", None):
        raise ValueError(f"norm={norm!r} is not supported; use 'layer', 'set' or None.")


def _check_dropout(p) -> float:
    """``p`` as a float in ``[0, 1)``, or a ``ValueError``."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= float(p) < 1.0:
        raise ValueError(f"dropout={p!r} must be a number in [0, 1).")
    return float(p)


class _Dropout:
    """Dropout with rate ``self.dropout`` on a block's feed-forward output, in training mode only
    (a class attribute of 0.0: modules built or saved without it drop nothing), its masks drawn
    from ``generator`` (None: torch's global generator)."""

    dropout: float = 0.0
    generator: torch.Generator | None = None

    def _drop(self, t: torch.Tensor) -> torch.Tensor:
        if not (self.dropout and self.training):
            return t
        if self.generator is None:
            return F.dropout(t, self.dropout, True)
        keep = torch.empty_like(t).bernoulli_(1.0 - self.dropout, generator=self.generator)
        return t * keep / (1.0 - self.dropout)


def _zero_padding(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return x
    return torch.where(mask.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))


def _block_name(module_name: str) -> str:
    """The name of the block an attention module belongs to: its path less ``.attn`` / ``.mab``
    (``"blocks.0.mab.attn"`` -> ``"blocks.0"``, ``"blocks.0.mab1.attn"`` -> ``"blocks.0.mab1"``)."""
    parts = module_name.split(".") if module_name else []
    for last in ("attn", "mab"):
        if parts and parts[-1] == last:
            parts.pop()
    return ".".join(parts)


class AttentionRecord(dict):
    """Attention weights recorded by :func:`record_attention`: ``{block name: weights}``.

    Each value is the ``(B, n_heads, n_queries, n_keys)`` tensor of the block's last call, rows
    summing to 1 over the real keys, 0 on padded keys and on the rows of padded queries. Block
    names are module paths less the trailing ``.mab.attn`` (see
    :meth:`SetTransformer.attention_weights`).
    """

    def __init__(self):
        super().__init__()
        #: ``{block name: (query_mask, key_mask)}`` (``None`` for an unmasked axis)
        self.masks: dict[str, tuple[torch.Tensor | None, torch.Tensor | None]] = {}

    def _add(self, name, weights, query_mask, key_mask) -> None:
        self[name] = weights
        self.masks[name] = (query_mask, key_mask)

    def per_set(self) -> list[dict[str, torch.Tensor]]:
        """One ``{block name: (n_heads, n_queries_i, n_keys_i)}`` dict per set: each masked axis
        cropped to the set's real elements (learned points, unmasked, stay whole)."""
        if not self:
            return []
        B = next(iter(self.values())).shape[0]
        out: list[dict[str, torch.Tensor]] = [{} for _ in range(B)]
        for name, w in self.items():
            qm, km = self.masks[name]
            for b in range(B):
                wb = w[b]
                if qm is not None:
                    wb = wb[:, qm[b]]
                if km is not None:
                    wb = wb[:, :, km[b]]
                out[b][name] = wb
        return out


@contextlib.contextmanager
def record_attention(module: nn.Module):
    """Record the attention weights of every :class:`MultiheadAttention` inside ``module``.

    Yields an :class:`AttentionRecord` that the forward passes run inside the ``with`` block fill
    (the forward itself is unchanged; outside the block no weights are formed).

    Examples
    --------
    >>> import torch
    >>> from skset.nn import SetTransformer, record_attention
    >>> net = SetTransformer(in_features=3, dim=8, out_features=2, n_layers=1, n_heads=2)
    >>> x = torch.randn(2, 5, 3); mask = torch.arange(5) < torch.tensor([[5], [3]])
    >>> with record_attention(net) as rec:
    ...     _ = net(x, mask)
    >>> {name: tuple(w.shape) for name, w in rec.items()}
    {'blocks.0': (2, 2, 5, 5), 'pool': (2, 2, 1, 5)}
    """
    record = AttentionRecord()
    attns = [(name, m) for name, m in module.named_modules() if isinstance(m, MultiheadAttention)]
    before = [m._record for _, m in attns]  # an enclosing record resumes after this one
    for name, m in attns:
        m._record = (record, _block_name(name))
    try:
        yield record
    finally:
        for (_, m), prev in zip(attns, before):
            m._record = prev


class MultiheadAttention(nn.Module):
    r"""Multi-head scaled dot-product attention with a key mask.

    ``Attn(q, k, v) = concat_h softmax(q W_q^h (k W_k^h)^T / sqrt(D/K)) v W_v^h`` followed by the
    output projection ``W_o``. Queries, keys and values are passed separately so that keys can be
    normalised while values are not (ST++ eq. 22).

    Parameters
    ----------
    dim : int
        Model width ``D`` (input and output features).
    n_heads : int
        Number of heads ``K``; ``dim`` must be divisible by it.
    bias : bool, default=True
        Biases in the four projections.
    """

    #: ``(record, name)`` while inside :func:`record_attention`, else None (no weights formed)
    _record: tuple[AttentionRecord, str] | None = None

    def __init__(self, dim: int, n_heads: int, bias: bool = True):
        super().__init__()
        _check_heads(dim, n_heads)
        self.dim = int(dim)
        self.n_heads = int(n_heads)
        self.head_dim = self.dim // self.n_heads
        self.q_proj = nn.Linear(dim, dim, bias=bias)
        self.k_proj = nn.Linear(dim, dim, bias=bias)
        self.v_proj = nn.Linear(dim, dim, bias=bias)
        self.out_proj = nn.Linear(dim, dim, bias=bias)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, n, _ = t.shape
        return t.view(B, n, self.n_heads, self.head_dim).transpose(1, 2)  # (B, K, n, D/K)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        query_mask: torch.Tensor | None = None,
        *,
        padding_finite: bool = False,
    ) -> torch.Tensor:
        """``query (B, n_q, D)``, ``key``/``value`` ``(B, n_k, D)``, ``key_mask (B, n_k)``.

        ``query_mask (B, n_q)`` serves :func:`record_attention` (the rows of padded queries
        are recorded as 0, and the record can crop them); the outputs of real queries do not
        depend on it (padded queries are zeroed, so their rows are finite but meaningless).
        Padded keys, values and queries may hold anything, NaN and infinity included (queries:
        where ``query_mask`` marks them, or, in self-attention, ``query is key``, where
        ``key_mask`` does; other queries must be finite), unless
        ``padding_finite=True`` says that they hold finite values of moderate size (the blocks'
        inner calls, which zeroed their inputs' padding once; a score that overflows would be
        NaN once masked): then they are not zeroed again. A masked key gets a weight of exactly
        0, so a padded row of finite values adds nothing; a set without a real key attends to
        all its rows (a fully masked row is NaN in the plain softmax of torch < 2.5) and its
        attention output is then set to 0, on any torch and kernel.
        """
        if key_mask is query_mask:
            key_mask = query_mask = as_mask(key_mask, key, "key_mask")
        else:
            key_mask = as_mask(key_mask, key, "key_mask")
            query_mask = as_mask(query_mask, query, "query_mask")
        if not padding_finite:
            # padding may hold anything (NaN, inf): zero it before the projections, or a NaN
            # key would turn its masked score into NaN, and NaN rows would reach the weights'
            # gradients
            # in self-attention the queries are the keys: their padding is the keys'
            qmask = key_mask if query_mask is None and query is key else query_mask
            query = _zero_padding(query, qmask)
            same = value is key
            key = _zero_padding(key, key_mask)
            value = key if same else _zero_padding(value, key_mask)
        B, n_q, _ = query.shape
        q = self._heads(self.q_proj(query))
        k = self._heads(self.k_proj(key))
        v = self._heads(self.v_proj(value))
        attn_mask = has_key = None
        if key_mask is not None:
            has_key = key_mask.any(-1, keepdim=True)  # (B, 1)
            attn_mask = (key_mask | ~has_key)[:, None, None, :]  # (B, 1, 1, n_k), True: attend
        scale = 1.0 / math.sqrt(self.head_dim)  # SDPA's default: the per-head width
        if self._record is not None:
            self._store_weights(q, k, scale, attn_mask, query_mask, key_mask)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)
        o = o.transpose(1, 2).reshape(B, n_q, self.dim)
        o = _zero_padding(o, has_key)  # (B, 1): a set without a real key gets 0
        return self.out_proj(o)

    def _store_weights(self, q, k, scale, attn_mask, query_mask, key_mask) -> None:
        """The weights of this call, ``(B, n_heads, n_q, n_k)``, into the active record."""
        scores = (q @ k.transpose(-1, -2)) * scale
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        w = torch.softmax(scores, dim=-1)
        zero = torch.zeros((), dtype=w.dtype, device=w.device)
        if key_mask is not None:  # a set without a real key: zero rows, not uniform ones
            w = torch.where(key_mask.any(-1)[:, None, None, None], w, zero)
        if query_mask is not None:
            w = torch.where(query_mask[:, None, :, None], w, zero)
        record, name = self._record
        record._add(name, w.detach(), query_mask, key_mask)


class MAB(_Dropout, nn.Module):
    """Multihead attention block ``MAB(X, Y)``: the elements of ``X`` attend to those of ``Y``.

    Parameters
    ----------
    dim : int
        Width ``D`` of ``X``, ``Y`` and the output.
    n_heads : int
        Number of attention heads.
    norm : {"layer", "set", None}, default="layer"
        Normalisation layer.
    residual : {"original", "clean"}, default="original"
        Post-norm Set Transformer block or clean-path ST++ block (see the module docstring).
    norm_query : bool, default=True
        In the clean block, normalise the queries ``X`` before attention (eq. 24); ``False`` for
        learned queries such as inducing points and seeds (eq. 22).
    dropout : float, default=0.0
        Dropout rate on the feed-forward output ``W h`` before the residual sum, in training
        mode only (the attribute ``dropout`` may be changed later).
    """

    def __init__(self, dim: int, n_heads: int, *, norm: str | None = "layer",
                 residual: str = "original", norm_query: bool = True, dropout: float = 0.0):
        super().__init__()
        _check_options(dim, n_heads, norm, residual)
        self.dropout = _check_dropout(dropout)
        self.residual = residual
        self.attn = MultiheadAttention(dim, n_heads)
        self.ff = nn.Linear(dim, dim)
        if residual == "original":
            self.norm0 = make_norm(norm, dim)
            self.norm1 = make_norm(norm, dim)
        else:
            self.norm_q = make_norm(norm if norm_query else None, dim)
            self.norm_k = make_norm(norm, dim)
            self.norm_ff = make_norm(norm, dim)

    def forward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        x_mask: torch.Tensor | None = None,
        y_mask: torch.Tensor | None = None,
        *,
        padding_finite: bool = False,
    ) -> torch.Tensor:
        """``x (B, n_x, D)`` queries, ``y (B, n_y, D)`` keys/values, with their masks.

        Padded rows of ``x`` and ``y`` may hold anything (NaN, inf): they are zeroed first
        (once), unless ``padding_finite=True`` says that they hold finite values."""
        if y_mask is x_mask:
            x_mask = y_mask = as_mask(x_mask, x, "x_mask")
        else:
            x_mask, y_mask = as_mask(x_mask, x, "x_mask"), as_mask(y_mask, y, "y_mask")
        if not padding_finite:
            same = y is x and y_mask is x_mask
            x = _zero_padding(x, x_mask)
            y = x if same else _zero_padding(y, y_mask)
        if self.residual == "original":
            a = self.attn(x, y, y, y_mask, x_mask, padding_finite=True)
            h = self.norm0(x + a, x_mask)
            return self.norm1(h + F.relu(self._drop(self.ff(h))), x_mask)
        a = self.attn(self.norm_q(x, x_mask), self.norm_k(y, y_mask), y, y_mask, x_mask,
                      padding_finite=True)
        h = x + a
        return h + self._drop(self.ff(F.relu(self.norm_ff(h, x_mask))))


class SAB(nn.Module):
    """Set attention block ``SAB(X) = MAB(X, X)``: O(n^2) self-attention within each set."""

    def __init__(self, dim: int, n_heads: int, *, norm: str | None = "layer",
                 residual: str = "original", dropout: float = 0.0):
        super().__init__()
        self.mab = MAB(dim, n_heads, norm=norm, residual=residual, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        return self.mab(x, x, mask, mask)


class ISAB(nn.Module):
    """Induced set attention block: ``H = MAB(I, X)``, ``ISAB(X) = MAB(X, H)``; O(n m) per set.

    Parameters
    ----------
    dim, n_heads, norm, residual
        As in :class:`MAB`.
    n_inducing : int
        Number ``m`` of learned inducing points ``I`` (a Parameter of shape ``(m, dim)``).
        With ``residual="clean"`` this is ISAB++ (Zhang et al., eq. 25-26).
    point_init : {"xavier", "normal"}, default="xavier"
        Initialisation of the inducing points (see the module docstring).
    dropout : float, default=0.0
        As in :class:`MAB` (both MABs).
    """

    def __init__(self, dim: int, n_heads: int, n_inducing: int, *, norm: str | None = "layer",
                 residual: str = "original", point_init: str = "xavier", dropout: float = 0.0):
        super().__init__()
        self.inducing = nn.Parameter(torch.empty(_check_count(n_inducing, "n_inducing"), dim))
        _init_points(self.inducing, point_init)
        self.mab1 = MAB(dim, n_heads, norm=norm, residual=residual, norm_query=False,
                        dropout=dropout)
        self.mab2 = MAB(dim, n_heads, norm=norm, residual=residual, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        x = _zero_padding(x, mask)  # once for both MABs
        ind = self.inducing.unsqueeze(0).expand(x.shape[0], -1, -1)
        h = self.mab1(ind, x, None, mask, padding_finite=True)
        return self.mab2(x, h, mask, None, padding_finite=True)


class PMA(_Dropout, nn.Module):
    """Pooling by multihead attention: ``PMA_k(Z) = MAB(S, rFF(Z))`` with ``k`` learned seeds ``S``.

    The row-wise feed-forward ``rFF`` before pooling is ``relu(W z)`` in the original block and the
    clean-path ``W relu(Norm(z))`` (norm-relu-weight, as closing a pre-norm stack) in the clean one.

    Parameters
    ----------
    dim, n_heads, norm, residual
        As in :class:`MAB`.
    n_seeds : int, default=1
        Number ``k`` of seed vectors; the output has shape ``(B, k, dim)``.
    point_init : {"xavier", "normal"}, default="xavier"
        Initialisation of the seeds (see the module docstring).
    dropout : float, default=0.0
        As in :class:`MAB`, on the output of ``rFF``'s ``W`` and in the MAB.
    """

    def __init__(self, dim: int, n_heads: int, n_seeds: int = 1, *, norm: str | None = "layer",
                 residual: str = "original", point_init: str = "xavier", dropout: float = 0.0):
        super().__init__()
        n_seeds = _check_count(n_seeds, "n_seeds")
        _check_options(dim, n_heads, norm, residual)
        self.dropout = _check_dropout(dropout)
        self.residual = residual
        self.seeds = nn.Parameter(torch.empty(n_seeds, dim))
        _init_points(self.seeds, point_init)
        self.ff = nn.Linear(dim, dim)
        self.ff_norm = make_norm(norm if residual == "clean" else None, dim)
        self.mab = MAB(dim, n_heads, norm=norm, residual=residual, norm_query=False,
                       dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        x = _zero_padding(x, mask)  # padding may hold anything: keep it out of ff's gradients
        if self.residual == "original":
            z = F.relu(self._drop(self.ff(x)))
        else:
            z = self._drop(self.ff(F.relu(self.ff_norm(x, mask))))
        seeds = self.seeds.unsqueeze(0).expand(x.shape[0], -1, -1)
        return self.mab(seeds, z, None, mask, padding_finite=True)  # z: finite padding


class SetTransformer(nn.Module):
    """Set Transformer network: input layer, SAB/ISAB encoder, PMA pooling, decoder.

    ``residual="clean", norm="set"`` with ``n_inducing`` set gives Set Transformer++ (ISAB++).

    Two decoders: ``"mlp"`` flattens ``PMA_k(Z)`` into an MLP (``n_decoder_layers`` hidden
    Linear-ReLU layers); ``"sab"`` is the paper's ``rFF(SAB(PMA_k(Z)))`` (Lee et al., eq. 11): a
    SAB over the ``k`` pooled seeds (same ``norm`` and ``residual`` as the encoder), flattened,
    then the same MLP head (``n_decoder_layers=0``: a single Linear layer, the reference code's).

    Parameters
    ----------
    in_features : int
        Features per element.
    dim : int
        Model width ``D``.
    out_features : int
        Outputs of the decoder.
    n_layers : int, default=2
        Encoder blocks.
    n_heads : int, default=4
        Attention heads.
    n_inducing : int or None, default=None
        ``None``: SAB blocks (O(n^2)); an int ``m``: ISAB blocks with ``m`` inducing points.
    n_seeds : int, default=1
        PMA seeds; the pooled representation has ``n_seeds * dim`` features.
    norm : {"layer", "set", None}, default="layer"
    residual : {"original", "clean"}, default="original"
    n_decoder_layers : int, default=1
        Hidden Linear-ReLU layers of the decoder head.
    point_init : {"xavier", "normal"}, default="xavier"
        Initialisation of the inducing points and seeds (see the module docstring).
    decoder : {"mlp", "sab"}, default="mlp"
        MLP on the pooled seeds, or a SAB over them first (the paper's decoder).
    pooled_skip : bool, default=False
        Add a :class:`~skset.nn.PooledLinear` of the raw elements to the output (``self.skip``).
    dropout : float, default=0.0
        Dropout rate on the feed-forward output of every attention block and of PMA's ``rFF``,
        in training mode only (see :class:`MAB`; :meth:`set_dropout` changes it).

    Examples
    --------
    >>> import torch
    >>> from skset.nn import SetTransformer
    >>> net = SetTransformer(in_features=3, dim=16, out_features=2, n_inducing=4,
    ...                      norm="set", residual="clean")  # Set Transformer++
    >>> x = torch.randn(2, 7, 3); mask = torch.arange(7) < torch.tensor([[7], [5]])
    >>> net(x, mask).shape, net.embed(x, mask).shape
    (torch.Size([2, 2]), torch.Size([2, 16]))
    """

    def __init__(self, in_features: int, dim: int, out_features: int, n_layers: int = 2,
                 n_heads: int = 4, *, n_inducing: int | None = None, n_seeds: int = 1,
                 norm: str | None = "layer", residual: str = "original",
                 n_decoder_layers: int = 1, point_init: str = "xavier", decoder: str = "mlp",
                 pooled_skip: bool = False, dropout: float = 0.0):
        super().__init__()
        _check_options(dim, n_heads, norm, residual)
        if point_init not in _POINT_INITS:
            raise ValueError(f"point_init={point_init!r} is not supported; use 'xavier' or "
                             "'normal'.")
        if decoder not in _DECODERS:
            raise ValueError(f"decoder={decoder!r} is not supported; use 'mlp' or 'sab'.")
        self.input = nn.Linear(in_features, dim)
        if n_inducing is None:
            blocks = [SAB(dim, n_heads, norm=norm, residual=residual) for _ in range(n_layers)]
        else:
            blocks = [ISAB(dim, n_heads, n_inducing, norm=norm, residual=residual,
                           point_init=point_init) for _ in range(n_layers)]
        self.blocks = nn.ModuleList(blocks)
        self.pool = PMA(dim, n_heads, n_seeds, norm=norm, residual=residual,
                        point_init=point_init)
        # only built for decoder="sab", so the default module keeps its parameters and names
        self.pool_sab = (SAB(dim, n_heads, norm=norm, residual=residual) if decoder == "sab"
                         else None)
        self.decoder = mlp_head(int(n_seeds) * dim, dim, out_features, n_decoder_layers)
        self.skip = PooledLinear(in_features, out_features) if pooled_skip else None
        self.set_dropout(dropout)

    def set_dropout_generator(self, generator: torch.Generator | None) -> SetTransformer:
        """Draw the dropout masks of every block from ``generator`` (on the module's device; None:
        torch's global generator, as ``F.dropout``); returns the module."""
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}.")
        for m in self.modules():
            if isinstance(m, _Dropout):
                m.generator = generator
        return self

    def set_dropout(self, p: float) -> SetTransformer:
        """Set the dropout rate ``p`` (in ``[0, 1)``) of every attention block and of PMA's
        ``rFF``; returns the module."""
        p = _check_dropout(p)
        for m in self.modules():
            if isinstance(m, _Dropout):
                m.dropout = p
        return self

    def embed(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The pooled representation ``(B, n_seeds * dim)``."""
        mask = as_mask(mask, x)
        h = self.input(_zero_padding(x, mask))
        for blk in self.blocks:
            h = blk(h, mask)
        z = self.pool(h, mask)
        if self.pool_sab is not None:
            z = self.pool_sab(z)  # the k seeds are all real: no mask
        return z.flatten(1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        return add_pooled_skip(self, self.decoder(self.embed(x, mask)), x, mask)

    def attention_weights(self, x: torch.Tensor,
                          mask: torch.Tensor | None = None) -> list[dict[str, torch.Tensor]]:
        """The attention weights of every block, per set, cropped to its real elements.

        Returns one dict per set of ``x``, ``{block name: (n_heads, n_queries, n_keys)}``, each
        row a distribution over the keys (it sums to 1). With ``n`` the set's size, ``m`` the
        inducing points and ``k`` the seeds, the blocks are:

        * ``"blocks.i"`` (SAB ``i``): ``(n_heads, n, n)``, element to element;
        * ``"blocks.i.mab1"`` (ISAB ``i``, first MAB): ``(n_heads, m, n)``, inducing points
          onto elements; ``"blocks.i.mab2"`` (second MAB): ``(n_heads, n, m)``, elements onto
          inducing points;
        * ``"pool"`` (PMA): ``(n_heads, k, n)``, seeds onto elements (the weights of the
          pooling);
        * ``"pool_sab"`` (``decoder="sab"`` only): ``(n_heads, k, k)``, seed to seed.

        Computed without gradients, in ``x``'s dtype; see :func:`record_attention` for the
        padded tensors.
        """
        with torch.no_grad(), record_attention(self) as record:
            self.embed(x, mask)
        return record.per_set()
