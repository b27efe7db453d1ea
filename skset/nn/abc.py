r"""The ABC kernel: a SAB encoder and a symmetric sigmoid compatibility (Attention-Based
Clustering).

For an instance :math:`X \in \mathbb{R}^{n \times d_x}` the model computes

.. math::
    Z = (\mathrm{SAB}_1 \circ \dots \circ \mathrm{SAB}_N)(\tanh(X W_e + b_e)), \qquad
    \kappa(z_i, z_j) = \tfrac12\big[\sigma(c(z_i, z_j)) + \sigma(c(z_j, z_i))\big] \in (0, 1),

with the compatibility :math:`c` either

* ``"multiplicative"``: :math:`c(z_i, z_j) = \langle W_q z_i + b_q, W_k z_j\rangle / \sqrt{d_c} + b`
  (scaled dot product; the reference code leaves it unscaled), or
* ``"additive"``: :math:`c(z_i, z_j) = v^\top \tanh(W_q z_i + b_q + W_k z_j + b_k) + b`.

We average the two **sigmoids** (the paper's formula, Sec. 4.2) rather than the two logits (the
reference code): both are symmetric and in ``(0, 1)``; averaging probabilities keeps
:math:`\kappa(z_i, z_j)` a mean of two calibrated "same cluster" guesses. The loss is the binary
cross-entropy of :math:`\kappa` against the same-cluster matrix, over the real pairs (diagonal
included) of each instance, computed in the log domain for stability.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._masks import as_mask
from .attention import SAB, _zero_padding

__all__ = ["ABCKernel", "abc_affinity", "abc_loss", "same_cluster_matrix"]

_LOG2 = math.log(2.0)


class ABCKernel(nn.Module):
    """Element-wise embedding, a stack of masked SABs and a compatibility head.

    Parameters
    ----------
    in_features : int
        ``d_x``.
    dim : int, default=128
        Width ``d_z`` of the embedding and of the SABs.
    n_layers : int, default=2
        Number of SABs ``N`` (0 gives the pairwise, context-free ablation).
    n_heads : int, default=4
        Attention heads per SAB.
    compatibility : {"multiplicative", "additive"}, default="multiplicative"
    compat_dim : int or None, default=None
        Width ``d_c`` of the query/key projections of the compatibility (``None``: ``dim``).
    norm : {"layer", "set", None}, default="layer"
        Normalisation inside the SABs.
    residual : {"original", "clean"}, default="original"
        SAB arrangement (see :mod:`skset.nn.attention`).
    input_similarity : {None, "knn", "rbf", "cosine"}, default=None
        A fixed similarity prior on the **inputs**, mixed with the learned compatibility: the
        logits are ``mix[0] * exp(a) * (s(x_i, x_j) + b) + mix[1] * c(z_i, z_j)``, with ``mix`` a
        buffer (``(0, 1)``, the learned kernel alone, when built). :class:`skset.ABCClusterer`
        trains the learned part alone, then keeps the mix (prior alone, learned alone, or both)
        that clusters its validation instances best, so the kernel it returns is never worse on
        them than the prior. ``"knn"``: ``s`` is the symmetrised graph of the ``n_neighbors`` nearest
        neighbours within the instance (1 for mutual neighbours, 1/2 for one-sided, 0 otherwise; ties
        at the last neighbour's distance all included), ``exp(a) = 12``, ``b = -1/2`` (affinities
        0.998 / 0.5 / 0.002: the kNN graph of spectral clustering); ``"rbf"``:
        ``s = -||x_i - x_j||^2 / m`` with ``m`` the mean squared distance over the instance's real
        pairs ``i != j`` (scale-free), ``exp(a) = 4``, ``b = 1``; ``"cosine"``: the cosine
        similarity, ``exp(a) = 4``, ``b = 1``. ``None``: the paper's model.
    n_neighbors : int, default=10
        Neighbours of the ``"knn"`` prior (at most ``n_b // 2 - 1`` in an instance of ``n_b`` elements, so
        that an element's neighbours and itself are at most half the instance).

    Shapes: ``forward(x (B, n, d_x), mask (B, n))`` -> logits ``C (B, n, n)`` with
    ``C[b, i, j] = c(z_i, z_j)`` (not symmetric); :func:`abc_affinity` turns them into ``kappa``.
    Padded rows of ``x`` (``mask`` False) may hold anything, NaN and infinity included: the logits
    of real pairs, and the gradients, do not depend on them.

    See Also
    --------
    skset.ABCClusterer : Trains this network and clusters with it (scikit-learn API).
    abc_affinity, abc_loss, spectral_cluster

    References
    ----------
    M. Coward, M. Visse-Martindale, C. Ramesh. "Attention-Based Clustering: Learning a Kernel
    from Context". arXiv:2010.01040, 2020.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import ABCKernel, abc_affinity
    >>> net = ABCKernel(2, dim=16, n_heads=2)
    >>> x, mask = torch.randn(3, 10, 2), torch.ones(3, 10, dtype=torch.bool)
    >>> A = abc_affinity(net(x, mask), mask)
    >>> A.shape, bool(torch.equal(A, A.transpose(1, 2)))
    (torch.Size([3, 10, 10]), True)
    """

    def __init__(self, in_features: int, dim: int = 128, n_layers: int = 2, n_heads: int = 4, *,
                 compatibility: str = "multiplicative", compat_dim: int | None = None,
                 norm: str | None = "layer", residual: str = "original",
                 input_similarity: str | None = None, n_neighbors: int = 10):
        super().__init__()
        if input_similarity not in (None, "knn", "rbf", "cosine"):
            raise ValueError(f"input_similarity={input_similarity!r} is not supported; use "
                             "None, 'knn', 'rbf' or 'cosine'.")
        self.input_similarity = input_similarity
        self.n_neighbors = int(n_neighbors)
        if compatibility not in ("multiplicative", "additive"):
            raise ValueError(f"compatibility={compatibility!r} is not supported; use "
                             "'multiplicative' or 'additive'.")
        self.compatibility = compatibility
        cd = int(dim if compat_dim is None else compat_dim)
        self.compat_dim = cd
        self.embed = nn.Linear(in_features, dim)
        self.blocks = nn.ModuleList(
            SAB(dim, n_heads, norm=norm, residual=residual) for _ in range(int(n_layers))
        )
        self.query = nn.Linear(dim, cd)
        self.key = nn.Linear(dim, cd, bias=compatibility == "additive")
        if compatibility == "additive":
            self.v = nn.Linear(cd, 1, bias=False)
        self.bias = nn.Parameter(torch.zeros(()))
        if input_similarity is not None:
            knn = input_similarity == "knn"
            self.register_buffer("sim_log_scale", torch.tensor(math.log(12.0 if knn else 4.0)))
            self.register_buffer("sim_offset", torch.tensor(-0.5 if knn else 1.0))
            # weights of the prior's and of the learned logits (see ``mix`` in the docstring)
            self.register_buffer("mix", torch.tensor([0.0, 1.0]))

    def input_prior(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The similarity ``s(x_i, x_j)`` of the inputs, (B, n, n) (see ``input_similarity``)."""
        mask = as_mask(mask, x)
        x = _zero_padding(x, mask)  # padding may hold anything (NaN * 0 would be NaN)
        if self.input_similarity == "cosine":
            xn = F.normalize(x, dim=-1, eps=1e-12)
            return xn @ xn.transpose(1, 2)
        # distances read differences only: each instance shifted by its per-feature minimum
        # first, so that features far from zero (near 100, spread 0.01) keep their digits in
        # float32; a minimum, not a mean, since a sum's rounding depends on the elements' order
        # (ties between distances broke differently in a permuted instance)
        low = x if mask is None else torch.where(mask.unsqueeze(-1), x, torch.full_like(x, torch.inf))
        x = _zero_padding(x - low.amin(1, keepdim=True), mask)
        if self.input_similarity == "knn":
            return _knn_graph(x, mask, self.n_neighbors)
        # scale-free: each instance divided by its largest |x| first, so that the squared
        # distances cannot overflow (float32 inputs of size 1e20 and more)
        big = x.detach().abs().amax((1, 2), keepdim=True)
        x = x / torch.where(big > 0, big, torch.ones_like(big))
        sq = (x * x).sum(-1)
        d2 = (sq[:, :, None] + sq[:, None, :] - 2 * x @ x.transpose(1, 2)).clamp_min(0)
        n = x.shape[1]
        off = ~torch.eye(n, dtype=torch.bool, device=x.device)
        pair = off.expand_as(d2) if mask is None else off & mask[:, :, None] & mask[:, None, :]
        pair = pair.to(x.dtype)
        m = (d2 * pair).sum((1, 2)) / pair.sum((1, 2)).clamp_min(1)
        return -d2 / m.clamp_min(1e-12)[:, None, None]

    def encode(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The contextual embedding ``Z = T(X)`` of shape (B, n, dim)."""
        mask = as_mask(mask, x)
        # padding may hold anything: zeroed by a select, so that no NaN or inf reaches a sum
        z = torch.tanh(self.embed(_zero_padding(x, mask)))
        for blk in self.blocks:
            z = blk(z, mask)
        return z

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = as_mask(mask, x)
        z = self.encode(x, mask)
        q, k = self.query(z), self.key(z)
        if self.compatibility == "multiplicative":
            c = q @ k.transpose(1, 2) / math.sqrt(self.compat_dim)
        else:
            c = self.v(torch.tanh(q[:, :, None, :] + k[:, None, :, :])).squeeze(-1)
        if getattr(self, "input_similarity", None) is not None:  # absent in older pickles
            mix = getattr(self, "mix", None)
            if mix is not None and float(mix[0]) == 0.0:
                # the learned part alone (as in training): the prior (a cdist and a top-k per
                # instance, a few % of a training step) is not computed
                return mix[1] * (c + self.bias)
            prior = self.sim_log_scale.exp() * (self.input_prior(x, mask) + self.sim_offset)
            if mix is None:  # models saved before the mix: plain sum
                return prior + c + self.bias
            return mix[0] * prior + mix[1] * (c + self.bias)
        return c + self.bias


def _knn_graph(x: torch.Tensor, mask: torch.Tensor | None, k: int) -> torch.Tensor:
    """Symmetrised k-nearest-neighbour graph within each instance, (B, n, n), values 0, 1/2, 1
    (the diagonal is 1: an element is its own neighbour); padded rows and columns are 0. Every
    element at the k-th distance is a neighbour (ties, from duplicated elements or integer
    features, are all kept rather than cut by the elements' order), so the graph of a permuted
    instance is the permuted graph. An element of an instance of ``n_b`` elements takes at most
    ``n_b // 2 - 1`` neighbours (at least one), so that its row holds at most half the instance:
    with ``k`` of ``n_b - 1`` or more every element would be every other's neighbour, a graph
    that tells no cluster from another."""
    B, n, _ = x.shape
    if mask is None:
        mask = torch.ones(B, n, dtype=torch.bool, device=x.device)
    pair = mask[:, :, None] & mask[:, None, :]
    # differences, not the matrix-product formula cdist switches to past 25 rows: an instance
    # padded into a longer batch gets the same distances (and ties) as alone
    d2 = torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist").square()
    d2 = d2.masked_fill(~pair, float("inf"))
    kk = min(int(k) + 1, n)  # + the element itself
    near = d2.topk(kk, dim=-1, largest=False).values  # (B, n, kk), ascending
    # the element itself is at 0; instance b's last neighbour at min(k, max(n_b // 2 - 1, 1))
    last = torch.clamp(mask.sum(1) // 2 - 1, min=1).clamp(max=kk - 1)
    kth = near.gather(-1, last[:, None, None].expand(B, n, 1))
    G = ((d2 <= kth) & pair).to(x.dtype)
    return 0.5 * (G + G.transpose(1, 2))


def abc_affinity(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The symmetric affinity ``kappa = (sigmoid(C) + sigmoid(C^T)) / 2`` in ``[0, 1]``.

    Parameters
    ----------
    logits : Tensor of shape (B, n, n)
        Compatibilities ``C`` from :class:`ABCKernel`.
    mask : bool Tensor of shape (B, n) or None
        ``True`` marks real elements; padded rows and columns of the result are 0.

    Returns
    -------
    Tensor of shape (B, n, n)
    """
    mask = as_mask(mask, logits)
    if mask is not None:  # padded logits may hold anything (NaN * 0 is NaN): zero them first
        pair = mask[:, :, None] & mask[:, None, :]
        logits = torch.where(pair, logits, torch.zeros((), dtype=logits.dtype,
                                                       device=logits.device))
    A = 0.5 * (torch.sigmoid(logits) + torch.sigmoid(logits.transpose(1, 2)))
    if mask is not None:
        A = torch.where(pair, A, torch.zeros((), dtype=A.dtype, device=A.device))
    return A


def same_cluster_matrix(labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The same-cluster matrix: ``T[b, i, j]`` is True when elements ``i`` and ``j`` share a label.

    Parameters
    ----------
    labels : int Tensor of shape (B, n)
    mask : bool Tensor of shape (B, n) or None
        Pairs with a padded element are False.

    Returns
    -------
    bool Tensor of shape (B, n, n)
    """
    mask = as_mask(mask, labels)
    T = (labels[:, :, None] == labels[:, None, :])
    if mask is not None:
        T = T & mask[:, :, None] & mask[:, None, :]
    return T


def abc_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None, *,
             class_weight=None) -> torch.Tensor:
    """Mean binary cross-entropy of ``kappa`` against the same-cluster matrix.

    Parameters
    ----------
    logits : Tensor of shape (B, n, n)
        Compatibilities from :class:`ABCKernel`.
    labels : int Tensor of shape (B, n)
        Cluster of each element (padding: anything).
    mask : bool Tensor of shape (B, n) or None
    class_weight : None, "balanced" or (float, float)
        ``None``: every real pair (diagonal included) weighs the same, which keeps the pressure on
        the many cross-cluster pairs (their affinities must approach 0 for the eigengap to work).
        ``"balanced"``: per instance, positives and negatives each carry half the weight.
        ``(w_neg, w_pos)``: fixed weights of negative and positive pairs.

    Returns
    -------
    loss : scalar Tensor
        The weighted mean over the real pairs of each instance, averaged over instances.
    """
    mask = as_mask(mask, logits)
    B, n, _ = logits.shape
    if mask is None:
        mask = torch.ones(B, n, dtype=torch.bool, device=logits.device)
    pair_bool = mask[:, :, None] & mask[:, None, :]
    pair = pair_bool.to(logits.dtype)
    T = same_cluster_matrix(labels, mask).to(logits.dtype)
    logits = torch.where(pair_bool, logits, 0.0)  # padding may hold anything (inf * 0 is NaN)
    ct = logits.transpose(1, 2)
    log_k = torch.logaddexp(F.logsigmoid(logits), F.logsigmoid(ct)) - _LOG2
    log_1mk = torch.logaddexp(F.logsigmoid(-logits), F.logsigmoid(-ct)) - _LOG2
    pos, neg = -log_k * T, -log_1mk * (1 - T) * pair
    n_pairs = pair.sum((1, 2))
    if class_weight is None:
        w_pos = w_neg = torch.ones_like(n_pairs)
    elif isinstance(class_weight, str) and class_weight == "balanced":
        n_pos = T.sum((1, 2))
        n_neg = n_pairs - n_pos
        w_pos = n_pairs / (2 * n_pos.clamp_min(1))
        w_neg = torch.where(n_neg > 0, n_pairs / (2 * n_neg.clamp_min(1)), torch.zeros_like(n_neg))
        w_pos = torch.where(n_neg > 0, w_pos, torch.ones_like(w_pos))
    else:
        try:
            w_neg_, w_pos_ = (float(v) for v in class_weight)
        except (TypeError, ValueError):
            w_neg_ = w_pos_ = math.nan
        if not (0 <= w_neg_ < math.inf and 0 <= w_pos_ < math.inf and w_neg_ + w_pos_ > 0):
            raise ValueError("class_weight must be None, 'balanced' or (w_neg, w_pos), two finite "
                             f"non-negative numbers not both 0, got {class_weight!r}")
        w_pos = torch.full_like(n_pairs, w_pos_)
        w_neg = torch.full_like(n_pairs, w_neg_)
    per_inst = (w_pos * pos.sum((1, 2)) + w_neg * neg.sum((1, 2))) / n_pairs.clamp_min(1)
    return per_inst.mean()
