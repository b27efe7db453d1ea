r"""The optimal transport kernel embedding (OTKE) as a differentiable layer.

For a set :math:`\mathbf{x} \in \mathbb{R}^{n \times k}` and ``q`` references
:math:`\mathbf{z}^{(r)} \in \mathbb{R}^{p \times k}`,

.. math::

    \Phi_{\mathbf{z}}(\mathbf{x}) = \frac{1}{\sqrt{q}} \Big( \sqrt{p}\,
    \mathbf{P}(\mathbf{x}, \mathbf{z}^{(r)})^\top \mathbf{x} \Big)_{r = 1..q}
    \in \mathbb{R}^{q \times p \times k}

(Mialon et al. 2021, eq. 3 and 8), with :math:`\mathbf{P}` the entropic transport plan of
:func:`skset.ot.sinkhorn` for the similarity :math:`K_{ij} = \langle x_i, z_j \rangle`.

Positions: with ``position_sigma`` the weights
:math:`S_{ij} = \exp(-(i/n - j/p)^2 / \sigma_{pos}^2)` (``n`` each set's real length, ``i`` from 0
to ``n - 1``, ``j`` from 0 to ``p - 1``) enter in one of three ways (``position_mode``):

* ``"plan"`` (the paper, Appendix B.3): :math:`\mathbf{P} \odot S`, ``P`` the plan for ``K``
  alone.
* ``"kernel"``: Sinkhorn on the Gibbs kernel :math:`e^{K/\varepsilon} \odot S`, i.e. on
  :math:`K/\varepsilon + \log S` (the cost :math:`-K` plus
  :math:`\varepsilon (i/n - j/p)^2 / \sigma_{pos}^2`), so that the plan itself follows the
  positions and keeps its marginals; then :math:`\odot S` as in ``"plan"``.
* ``"similarity"``: what the authors' code does (``github.com/claying/OTK``,
  ``otk/sinkhorn.py::multihead_attn``): Sinkhorn on :math:`e^{(K \odot S)/\varepsilon}`, the
  similarity itself multiplied by ``S`` (so the penalty depends on the sign and size of ``K``:
  far-apart pairs are pulled towards similarity 0), then :math:`\odot S`. Unlike that code, ``n`` is
  each set's real length, not the padded one.

Element mass and unbalanced transport: ``weights (B, n)`` give each set a non-uniform measure
(normalised per set; an element of weight 0 is as if removed, except that it still counts in the
positions ``i/n``), and ``reg_m`` relaxes the set-side marginal by a KL penalty (see
:mod:`skset.ot`). The reference side stays exact, so every support still pools mass ``1/p`` and
the embedding keeps its scale.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ..ot import position_log_weights, position_weights, sinkhorn
from ..ot._common import (
    _METHODS,
    _check_epsilon,
    _check_finite_rows,
    _check_nonempty,
    _check_tol,
    _check_weights,
    _similarity,
)
from ..ot._compiled import try_embed
from ._masks import as_mask
from .attention import _zero_padding
from .norm import graph_without_branches, row_norm

__all__ = ["OTKLayer", "otk_embed", "otk_plans", "otk_pool"]

POSITION_MODES = ("plan", "kernel", "similarity")


def check_position_mode(position_mode) -> None:
    if position_mode not in POSITION_MODES:
        raise ValueError(f"position_mode must be one of {POSITION_MODES}, got {position_mode!r}")


def zero_column(references: torch.Tensor) -> torch.Tensor:
    """``references (q, p, k)`` with a last feature of 0 on every support."""
    return torch.cat([references, references.new_zeros(references.shape[:-1] + (1,))], -1)


def with_ones(x: torch.Tensor, mask: torch.Tensor, references: torch.Tensor):
    """``(x, references)`` with a feature of 1 on every real element (0 on the padding) and of 0
    on every support: the similarities do not change, and the pooled feature carries each
    support's mass (the share of an offset subtracted from the sets)."""
    return torch.cat([x, mask.unsqueeze(-1).to(x.dtype)], -1), zero_column(references)


def otk_plans(
    x: torch.Tensor,
    mask: torch.Tensor,
    references: torch.Tensor,
    *,
    epsilon: float,
    sinkhorn_iter: int = 10,
    position_sigma: float | None = None,
    method: str = "auto",
    sinkhorn_tol: float | None = None,
    position_mode: str = "kernel",
    weights: torch.Tensor | None = None,
    reg_m: float | None = None,
) -> torch.Tensor:
    """Plans ``(B, q, n, p)`` between each set of ``x (B, n, k)`` and each of ``references (q, p, k)``.

    ``sinkhorn_iter``, ``method``, ``sinkhorn_tol``, ``weights`` and ``reg_m`` go to
    :func:`skset.ot.sinkhorn` (``n_iter``, ``method``, ``tol``, ``weights``, ``reg_m``;
    ``sinkhorn_iter`` is the cap with a tolerance, which autograd ignores): ``weights (B, n)`` are
    the element masses of each set (``None``: uniform), ``reg_m`` the strength of the KL
    relaxation of the set-side marginal (``None``: balanced). ``position_sigma`` and
    ``position_mode`` are described in the module docstring.
    """
    mask = as_mask(mask, x)
    check_position_mode(position_mode)
    _check_references(x, references, position_sigma)
    if mask is None:
        mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    # padded rows may hold anything (NaN, inf): zeroed by a select, not a product (NaN * 0 = NaN)
    x = _zero_padding(x, mask)
    _check_finite_rows(x, mask, "x")  # real rows must be finite: named, not a NaN plan
    return _zeroed_plans(x, mask, references, epsilon=epsilon,
                         sinkhorn_iter=sinkhorn_iter, position_sigma=position_sigma,
                         method=method, sinkhorn_tol=sinkhorn_tol, position_mode=position_mode,
                         weights=weights, reg_m=reg_m)


def _check_references(x, references, position_sigma) -> None:
    """The public functions' ``references (q, p, k)`` against ``x (B, n, k)``, and
    ``position_sigma``: a ``ValueError`` naming the mismatch (torch's matmul errors before)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"x must be a tensor of shape (B, n, k), got {getattr(x, 'shape', x)!r}")
    if not isinstance(references, torch.Tensor) or references.dim() != 3:
        raise ValueError("references must be a tensor of shape (q, p, k), got "
                         f"{tuple(getattr(references, 'shape', ())) or type(references).__name__}")
    if references.shape[0] < 1 or references.shape[1] < 1:
        raise ValueError(f"references of shape {tuple(references.shape)} hold no support")
    if references.shape[2] != x.shape[2] or references.dtype != x.dtype:
        raise ValueError(f"references ({references.shape[2]} features, {references.dtype}) do not "
                         f"match x ({x.shape[2]} features, {x.dtype})")
    if position_sigma is not None and not (isinstance(position_sigma, numbers.Real)
                                           and not isinstance(position_sigma, bool)
                                           and position_sigma > 0):  # inf: no positions
        raise ValueError(f"position_sigma must be None or a positive number, got "
                         f"{position_sigma!r}")


def _zeroed_plans(x, mask, references, *, epsilon, sinkhorn_iter, position_sigma, method,
                  sinkhorn_tol, position_mode, weights, reg_m):
    """:func:`otk_plans` of ``x`` whose padded rows are already zero, ``mask`` a tensor."""
    # checked here, so that an error names the set of x, not its copy for one reference
    _check_nonempty(mask)
    a = _check_weights(weights, mask, x)
    B, n, _ = x.shape
    q, p, k = references.shape
    balanced = reg_m is None and (position_sigma is None or position_mode != "similarity")
    sim = _similarity(x, references, centred=balanced)  # (B, n, q*p), all references
    if q == 1:
        sim = sim.unsqueeze(1)
        rep_mask = mask
    else:
        sim = sim.view(B, n, q, p).permute(0, 2, 1, 3)
        rep_mask = mask.repeat_interleave(q, dim=0)
        if a is not None:
            a = a.repeat_interleave(q, dim=0)
    S = None
    if position_sigma is not None:
        S = position_weights(mask, p, position_sigma, dtype=sim.dtype).unsqueeze(1)
        if position_mode == "kernel":  # (K + eps log S) / eps = K / eps + log S
            logS = position_log_weights(mask, p, position_sigma, dtype=sim.dtype)
            sim = sim + epsilon * logS.unsqueeze(1)
        elif position_mode == "similarity":
            sim = sim * S
    P = sinkhorn(sim.reshape(B * q, n, p), rep_mask, epsilon=epsilon, n_iter=sinkhorn_iter,
                 method=method, tol=sinkhorn_tol, weights=a, reg_m=reg_m).view(B, q, n, p)
    if S is not None:
        P = P * S
    return P


def otk_pool(x: torch.Tensor, plans: torch.Tensor) -> torch.Tensor:
    """``sqrt(p) P^T x / sqrt(q)`` for every reference: ``(B, q, p, k)``."""
    B, q, n, p = plans.shape
    if q == 1:  # the scale inside the GEMM (alpha): no extra pass over the output
        return torch.baddbmm(x.new_zeros(()), plans[:, 0].transpose(1, 2), x, beta=0.0,
                             alpha=math.sqrt(p)).unsqueeze(1)
    return torch.einsum("bqnp,bnk->bqpk", plans, x) * math.sqrt(p / q)


def otk_embed(
    x: torch.Tensor,
    mask: torch.Tensor | None,
    references: torch.Tensor,
    *,
    epsilon: float,
    sinkhorn_iter: int = 10,
    position_sigma: float | None = None,
    method: str = "auto",
    sinkhorn_tol: float | None = None,
    position_mode: str = "kernel",
    weights: torch.Tensor | None = None,
    reg_m: float | None = None,
    compile: bool = False,
) -> torch.Tensor:
    """The OTK embeddings ``(B, q, p, k)``: :func:`otk_pool` of :func:`otk_plans` (same arguments),
    padded rows of ``x`` (``mask`` False) ignored whatever they hold.

    With ``compile=True`` and no autograd (``torch.no_grad()``, or no input requiring grad) the
    batch runs through compiled kernels (``torch.compile``: similarity, Gibbs kernel, Sinkhorn
    iterations and pooling fused), with the same result to float rounding; where compiling
    fails, a :class:`skset.CompileWarning` (once per process) and the eager code. The estimators
    pass ``skset.get_config()["compile"]`` here (``skset.set_config(compile=True)``).
    """
    mask = as_mask(mask, x)
    check_position_mode(position_mode)
    _check_references(x, references, position_sigma)
    if mask is None:
        mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    # padded rows may hold anything: zeroed once, for the plans and for P^T x (NaN * 0 = NaN)
    x = _zero_padding(x, mask)
    _check_finite_rows(x, mask, "x")  # real rows must be finite: named, not a NaN embedding
    return _zeroed_embed(x, mask, references, epsilon=epsilon,
                         sinkhorn_iter=sinkhorn_iter, position_sigma=position_sigma,
                         method=method, sinkhorn_tol=sinkhorn_tol, position_mode=position_mode,
                         weights=weights, reg_m=reg_m, compile=compile)


def _zeroed_embed(x, mask, references, *, epsilon, sinkhorn_iter=10, position_sigma=None,
                  method="auto", sinkhorn_tol=None, position_mode="kernel", weights=None,
                  reg_m=None, compile=False):
    """:func:`otk_embed` of ``x`` whose padded rows are already zero (:func:`skset._sets.pack`'s
    output), ``mask`` a tensor: no pass over ``x`` to zero them."""
    # skset.ot._compiled.try_embed chooses: the compiled kernels, or None for the eager code
    out = try_embed(x, mask, references, weights, compile=compile, epsilon=epsilon,
                    sinkhorn_iter=sinkhorn_iter, method=method, sinkhorn_tol=sinkhorn_tol,
                    position_sigma=position_sigma, position_mode=position_mode, reg_m=reg_m)
    if out is not None:
        return out
    return otk_pool(x, _zeroed_plans(x, mask, references, epsilon=epsilon,
                                     sinkhorn_iter=sinkhorn_iter, position_sigma=position_sigma,
                                     method=method, sinkhorn_tol=sinkhorn_tol,
                                     position_mode=position_mode, weights=weights, reg_m=reg_m))


class OTKLayer(nn.Module):
    """Optimal transport kernel embedding of padded sets, references as Parameters.

    Parameters
    ----------
    in_features : int
        Features per element ``k``.
    n_supports : int
        Supports per reference ``p``.
    n_references : int
        Number of references ``q`` (like attention heads).
    epsilon : float
        Entropic regularisation of the transport plan.
    sinkhorn_iter : int
        Sinkhorn iterations (10 in the paper's supervised models); the cap with ``sinkhorn_tol``.
    position_sigma : float or None
        Bandwidth ``sigma_pos`` of the positional weights; ``None`` ignores positions.
    method : {"auto", "log", "exp"}
        Sinkhorn solver, see :func:`skset.ot.sinkhorn`.
    sinkhorn_tol : float or None, default=None
        Sinkhorn stopping tolerance (row-marginal L1 error, see :func:`skset.ot.sinkhorn`); used
        only without autograd (e.g. under ``torch.no_grad()``). Under autograd, and with ``None``,
        exactly ``sinkhorn_iter`` iterations run, so training differentiates a fixed computation.
    position_mode : {"plan", "kernel", "similarity"}, default="kernel"
        How the positional weights enter (module docstring): on the plan after Sinkhorn (the
        paper), on the Gibbs kernel before it (and on the plan), or on the similarity before it
        (and on the plan; the authors' code). The default is :class:`skset.OTKEmbedding`'s
        (:ref:`otk-defaults` says how it was chosen).
    references : Tensor (q, p, k), optional
        Initial references; default small random values.
    reg_m : float or None, default=None
        Unbalanced transport: strength of the KL penalty on the set-side marginal (POT's
        ``reg_m``; see :mod:`skset.ot`): elements of low similarity to every support receive less
        than their mass. ``None``: balanced.
    input_offset : Tensor (k,), optional
        A per-feature value the layer subtracts from every element before it reads the sets
        (features far from zero in float32: their similarities would lose their digits;
        :meth:`skset.OTKEmbedding.to_module` passes the estimator's ``input_offset_``). The
        references are then held less it (``references + input_offset`` in the input space), and
        the output is that of the input sets: each support gains the offset times its pooled mass
        (``1 / sqrt(p q)`` without positions; with them, a feature of 1 beside the shifted
        elements carries each set's share). Only for balanced plans (``reg_m=None``, and
        ``position_mode`` other than ``"similarity"`` with positions), which a shared shift of sets
        and references leaves as they are once Sinkhorn has converged (it adds a term per support
        to the similarities, which the iterations absorb: at a few iterations the plans move
        slightly with it).

    Shapes: ``forward(x (B, n, k), mask (B, n), weights (B, n))`` -> ``(B, q * p, k)``; flatten it
    for a linear head. ``weights`` are optional element masses (non-negative, normalised per set;
    ``None``: uniform). Padded entries of ``x`` and ``weights`` (``mask`` False) may hold anything,
    NaN and infinity included: they change neither the outputs nor the gradients.
    ``forward(..., compile=True)`` runs the compiled kernels where there is no autograd (see
    :func:`otk_embed`); the layer itself reads no global setting.

    Examples
    --------
    >>> import torch
    >>> from skset.nn import OTKLayer
    >>> layer = OTKLayer(in_features=8, n_supports=4, epsilon=0.5)
    >>> x = torch.randn(3, 10, 8); mask = torch.arange(10) < torch.tensor([[10], [7], [3]])
    >>> layer(x, mask).shape
    torch.Size([3, 4, 8])
    """

    #: buffers that layers saved before them lack (:func:`skset.load` sets them to None)
    _optional_buffers = ("input_offset",)

    def __init__(
        self,
        in_features: int,
        n_supports: int = 10,
        n_references: int = 1,
        *,
        epsilon: float = 0.5,
        sinkhorn_iter: int = 10,
        position_sigma: float | None = None,
        method: str = "auto",
        references: torch.Tensor | None = None,
        sinkhorn_tol: float | None = None,
        position_mode: str = "kernel",
        reg_m: float | None = None,
        input_offset: torch.Tensor | None = None,
    ):
        super().__init__()
        for name, v in (("in_features", in_features), ("n_supports", n_supports),
                        ("n_references", n_references), ("sinkhorn_iter", sinkhorn_iter)):
            if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        _check_epsilon(epsilon)
        _check_tol(sinkhorn_tol, "sinkhorn_tol")
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if position_sigma is not None and not (isinstance(position_sigma, numbers.Real) and not
                                               isinstance(position_sigma, bool) and position_sigma > 0):
            raise ValueError(f"position_sigma must be None or a positive number, got "
                             f"{position_sigma!r}")
        self.in_features = in_features
        self.n_supports = n_supports
        self.n_references = n_references
        self.epsilon = float(epsilon)
        self.sinkhorn_iter = int(sinkhorn_iter)
        self.position_sigma = position_sigma
        self.method = method
        self.sinkhorn_tol = sinkhorn_tol
        check_position_mode(position_mode)
        self.position_mode = position_mode
        if reg_m is not None and not (isinstance(reg_m, numbers.Real)
                                      and not isinstance(reg_m, bool) and reg_m > 0):
            raise ValueError(f"reg_m must be None or a positive number, got {reg_m!r}")
        self.reg_m = None if reg_m is None else float(reg_m)
        if references is None:
            bound = 1.0 / math.sqrt(n_supports)
            references = torch.empty(n_references, n_supports, in_features).uniform_(-bound, bound)
        if tuple(references.shape) != (n_references, n_supports, in_features):
            raise ValueError(f"references must have shape {(n_references, n_supports, in_features)}"
                             f", got {tuple(references.shape)}")
        self.references = nn.Parameter(references.clone())
        if input_offset is not None:
            input_offset = torch.as_tensor(input_offset, dtype=self.references.dtype)
            if tuple(input_offset.shape) != (in_features,):
                raise ValueError(f"input_offset must have shape ({in_features},), got "
                                 f"{tuple(input_offset.shape)}")
            if not bool(torch.isfinite(input_offset).all()):
                raise ValueError("input_offset must be finite (it holds NaN or infinity)")
        self.register_buffer("input_offset", None if input_offset is None else input_offset.clone())
        self._check_offset()

    def _check_offset(self):
        if getattr(self, "input_offset", None) is not None and (
                getattr(self, "reg_m", None) is not None
                or (self.position_sigma is not None and self.position_mode == "similarity")):
            raise ValueError("input_offset needs a balanced plan that a shift of the features "
                             "leaves as it is: reg_m=None, and no position_mode='similarity' with "
                             "positions")

    def _read(self, x, mask):
        """``(x, mask, references, offset)`` as the plans read them: with ``input_offset``, the
        elements less it (0 on the padding); with positions too, beside a feature of 1 (0 on the
        padding), the references beside a feature of 0."""
        offset = getattr(self, "input_offset", None)  # absent in layers pickled before it
        if offset is None:
            return x, mask, self.references, None
        self._check_offset()  # reg_m or the mode may have been set since
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        x = torch.where(mask.unsqueeze(-1), x - offset, 0.0)
        if self.position_sigma is None:  # every support pools mass 1/p: its share is exact
            return x, mask, self.references, offset
        x, references = with_ones(x, mask, self.references)
        return x, mask, references, offset

    def plans(self, x: torch.Tensor, mask: torch.Tensor | None = None,
              weights: torch.Tensor | None = None) -> torch.Tensor:
        """The transport plans ``(B, q, n, p)`` (positional weights applied); ``weights (B, n)``:
        element masses, ``None`` for uniform."""
        mask = as_mask(mask, x)
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        x, mask, references, _ = self._read(x, mask)
        return otk_plans(x, mask, references, epsilon=self.epsilon,
                         sinkhorn_iter=self.sinkhorn_iter, position_sigma=self.position_sigma,
                         method=self.method, sinkhorn_tol=self.sinkhorn_tol,
                         position_mode=self.position_mode, weights=weights,
                         reg_m=getattr(self, "reg_m", None))  # layers pickled before reg_m

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                weights: torch.Tensor | None = None, *, compile: bool = False,
                padding_zero: bool = False) -> torch.Tensor:
        """The embeddings ``(B, q * p, k)`` of ``x (B, n, k)``; compiled without autograd with
        ``compile=True`` (see :func:`otk_embed`). Padded rows of ``x`` may hold anything (they
        are zeroed before ``P^T x``) unless ``padding_zero=True`` says that they are 0 already
        (the output of a :class:`skset.nn.NystromLayer`): then no pass over ``x`` zeroes them."""
        mask = as_mask(mask, x)
        embed = otk_embed
        x_in, mask, references, offset = self._read(x, mask)
        if offset is not None or (padding_zero and mask is not None):
            embed = _zeroed_embed  # _read zeroed the padding
        out = embed(x_in, mask, references, epsilon=self.epsilon,
                    sinkhorn_iter=self.sinkhorn_iter, position_sigma=self.position_sigma,
                    method=self.method, sinkhorn_tol=self.sinkhorn_tol,
                    position_mode=self.position_mode, weights=weights,
                    reg_m=getattr(self, "reg_m", None),  # layers pickled before reg_m
                    compile=compile)
        if offset is not None and self.position_sigma is None:  # mass 1/p a support
            out = out + offset / math.sqrt(out.shape[1] * out.shape[2])
        elif offset is not None:  # the input sets': offset times the pooled feature of 1
            out = out[..., :-1] + out[..., -1:] * offset
        return out.reshape(x.shape[0], -1, x.shape[-1])


# the relative accuracy of a raw embedding, in units of its dtype's eps: the rounding of
# thousands of Sinkhorn iterations (measured up to ~150 eps on permuted sets) with a margin
_ROUNDING_EPS = 1000.0
# the plan is accurate to about sinkhorn_tol (its row-marginal error): differences between the
# embeddings of permuted sets, in units of tol times the embedding's spread over the supports,
# were measured up to 1.3 (normal data) and 40 (heavy tails at epsilon=0.01, at the cap)
_TOL_FACTOR = 10.0


def noise_floor(raw: torch.Tensor, mean: torch.Tensor, shape, sinkhorn_tol) -> torch.Tensor:
    """Per row of the raw OTK embeddings ``raw (B, q*p*d)``, the norm below which the row minus
    ``mean`` is indistinguishable from 0: ``1000 eps (||raw|| + ||mean||)`` plus
    ``10 sinkhorn_tol`` times the spread of the row over the supports (``shape = (q, p, d)``)."""
    q, p, d = shape
    eps, blocks = torch.finfo(raw.dtype).eps, raw.reshape(-1, q, p, d)
    spread = torch.linalg.vector_norm((blocks - blocks.mean(2, keepdim=True)).flatten(1), dim=1)
    size = torch.linalg.vector_norm(raw, dim=1) + torch.linalg.vector_norm(mean)
    return _ROUNDING_EPS * eps * size + _TOL_FACTOR * float(sinkhorn_tol or 0.0) * spread


def normalize_rows(z: torch.Tensor, floor: torch.Tensor | None = None) -> torch.Tensor:
    """Rows of ``z (B, D)`` rescaled to norm ``sqrt(D)`` (the unit-variance scale of OTK's
    centred embeddings); with ``floor (B,)``, a row whose norm is not above its floor (noise of
    the computation, :func:`noise_floor`) becomes 0 instead of noise scaled up."""
    norm = row_norm(z)
    target = math.sqrt(z.shape[1])
    if floor is None:
        # training: the factor stays under 1e18, so that the gradient of a zero row squared
        # stays finite in float32 for Adam
        return z * (target / norm.clamp_min(target * 1e-18))
    # every row above its floor is rescaled, whatever its scale (an absolute clamp had shrunk
    # rows of features near 1e-17 and zeroed those near 1e-25); a row under its floor becomes
    # 0, and a row of NaN or inf stays non-finite (NaN * 0, inf * 0), for the caller's check to
    # name. One pass over z; a row whose norm is so small that target / norm overflows (a
    # subnormal norm) is divided by its norm first, then scaled (two passes: that row only
    # where the data may branch)
    keep = norm > floor.unsqueeze(1)
    if graph_without_branches():
        return z / torch.where(keep, norm, torch.inf) * target
    out = z * torch.where(keep, target / norm, 0.0)
    tiny = (keep & (norm < torch.finfo(z.dtype).tiny * target)).squeeze(1)
    if bool(tiny.any()):
        out[tiny] = z[tiny] / norm[tiny] * target
    return out


def embedding_output(raw: torch.Tensor, center: torch.Tensor, shape, *, normalize: bool = True,
                     floor: bool = True, sinkhorn_tol: float | None = None) -> torch.Tensor:
    """The output step of an OTK embedding: centre, noise floor, normalise.

    ``raw (B, q*p*d)`` are the flattened raw embeddings (:func:`otk_embed`), ``center (q*p*d,)``
    the mean embedding subtracted from each row (zeros: no centring), ``shape = (q, p, d)``.
    With ``normalize`` the centred rows are rescaled to norm ``sqrt(q*p*d)``
    (:func:`normalize_rows`); with ``floor`` too, a row whose norm is within the noise of the
    computation (:func:`noise_floor`, from ``raw``, ``center`` and ``sinkhorn_tol``) becomes 0
    rather than noise scaled up. :meth:`skset.OTKEmbedding.transform` and its serving module
    use the floor; the supervised OTK network trains without one (``floor=False``: no
    data-dependent switch in its gradient). Differentiable; the one copy of this step.
    """
    z = raw - center
    if not normalize:
        return z
    return normalize_rows(z, noise_floor(raw, center, shape, sinkhorn_tol) if floor else None)
