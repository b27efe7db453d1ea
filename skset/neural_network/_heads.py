"""The linear head of the supervised OTK estimators in closed form: L2-regularised logistic
regression by L-BFGS, ridge regression by its normal equations (its penalty chosen by exact
leave-one-out from one SVD), and the alternating solver's callback that refits the head between
epochs while Adam trains the rest of the network."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ._callbacks import Callback

__all__ = ["fit_logistic_head", "fit_ridge_head", "ridge_loo_errors", "ridge_loo_alpha",
           "RIDGE_ALPHAS", "AlternatingHead"]


def fit_logistic_head(head: torch.nn.Linear, Z: torch.Tensor, y: torch.Tensor, alpha: float,
                       max_iter: int = 100, weight: torch.Tensor | None = None) -> None:
    """Minimise ``mean CE(Z W^T + b, y) + alpha/2 ||W||^2`` by L-BFGS, from the current head.

    With ``weight``, the mean is the weighted mean ``sum_i w_i CE_i / sum_i w_i``.
    """
    Z = Z.double()
    if weight is not None:
        weight = weight.to(Z)
    W = head.weight.detach().double().clone().requires_grad_()
    b = head.bias.detach().double().clone().requires_grad_()
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=max_iter, tolerance_grad=1e-7,
                            tolerance_change=1e-10, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        if weight is None:
            ce = F.cross_entropy(Z @ W.T + b, y)
        else:
            ce = (weight * F.cross_entropy(Z @ W.T + b, y, reduction="none")).sum() / weight.sum()
        loss = ce + 0.5 * alpha * W.square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        head.weight.copy_(W.detach().to(head.weight.dtype))
        head.bias.copy_(b.detach().to(head.bias.dtype))


#: The penalties :func:`ridge_loo_alpha` compares by default (in the units of ``alpha``, the
#: penalty of the mean loss), ending with ``inf``: a zero head, the weighted training mean.
RIDGE_ALPHAS = (*np.logspace(-6, 3, 19).tolist(), math.inf)


def _centred(Z: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor | None):
    """``(Zc, Yc, zm, ym, sw, total)``: rows centred on the (weighted) means and scaled by
    ``sqrt(w_i)`` (``sw``; None without weights), float64."""
    Z = Z.double()
    Y = Y.double().reshape(Z.shape[0], -1)
    if weight is None:
        zm, ym = Z.mean(0), Y.mean(0)
        return Z - zm, Y - ym, zm, ym, None, float(Z.shape[0])
    w = weight.to(Z).reshape(-1, 1)
    total = float(w.sum())
    zm, ym = (w * Z).sum(0) / total, (w * Y).sum(0) / total
    sw = w.sqrt()
    return sw * (Z - zm), sw * (Y - ym), zm, ym, sw, total


def fit_ridge_head(head: torch.nn.Linear, Z: torch.Tensor, Y: torch.Tensor, alpha: float,
                    weight: torch.Tensor | None = None) -> None:
    """Closed form of ``min mean 0.5||Y - Z W^T - b||^2 + alpha/2 ||W||^2``.

    With ``weight``, the mean is the weighted mean (weighted centring, rows scaled by
    ``sqrt(w_i)``, penalty scaled by ``sum_i w_i``). ``alpha=inf`` gives ``W = 0`` and ``b`` the
    (weighted) mean of ``Y``.
    """
    Zc, Yc, zm, ym, _, total = _centred(Z, Y, weight)
    n, D = Zc.shape
    if math.isinf(alpha):
        Wt = Zc.new_zeros(D, Yc.shape[1])
    else:
        reg = max(alpha, 1e-10) * total
        if n < D:  # dual form: W^T = Zc^T (Zc Zc^T + reg I)^-1 Yc
            G = Zc @ Zc.T + reg * torch.eye(n, dtype=Zc.dtype, device=Zc.device)
            Wt = Zc.T @ torch.linalg.solve(G, Yc)
        else:
            G = Zc.T @ Zc + reg * torch.eye(D, dtype=Zc.dtype, device=Zc.device)
            Wt = torch.linalg.solve(G, Zc.T @ Yc)
    with torch.no_grad():
        head.weight.copy_(Wt.T.to(head.weight.dtype))
        head.bias.copy_((ym - zm @ Wt).to(head.bias.dtype))


def ridge_loo_errors(Z: torch.Tensor, Y: torch.Tensor, alphas=RIDGE_ALPHAS,
                     weight: torch.Tensor | None = None, per_row: bool = False) -> np.ndarray:
    """The exact leave-one-out mean squared error of :func:`fit_ridge_head` at each ``alpha``.

    The fit is the penalised least squares ``sum_i w_i ||y_i - W z_i - b||^2 + lam ||W||^2``
    with ``lam = alpha * sum_i w_i`` (the penalty of the whole training set, held fixed when a
    row is left out) and an unpenalised intercept: a linear smoother ``H`` of the targets, so the
    residual of row ``i`` fitted without it is ``e_i / (1 - H_ii)`` exactly. From one SVD of the
    centred, ``sqrt(w)``-scaled embeddings ``U S V^T``: ``H_ii = w_i / sum w + sum_k U_ik^2
    s_k^2 / (s_k^2 + lam)``. Returns the (weighted) mean over rows of the squared leave-one-out
    residuals summed over outputs, one value per ``alpha`` (``inf``: the mean predictor's); with
    ``per_row``, the ``(n_alphas, n)`` terms of those means (``w_i e_i^2 * n / sum w``).
    """
    Zc, Yc, _, _, sw, total = _centred(Z, Y, weight)
    n = Zc.shape[0]
    U, S, _ = torch.linalg.svd(Zc, full_matrices=False)
    keep = S > S.max() * 1e-10 if S.numel() else S > 0
    U, S2 = U[:, keep], S[keep].square()
    UtY = U.T @ Yc                                   # (r, m)
    U2 = U.square()                                  # (n, r)
    w = torch.full((n, 1), 1.0, dtype=Zc.dtype, device=Zc.device) if sw is None else sw.square()
    base = w / total                                 # the intercept's share of H_ii
    out = []
    for alpha in alphas:
        if math.isinf(alpha):
            f = torch.zeros_like(S2)
        else:
            f = S2 / (S2 + max(alpha, 1e-10) * total)
        h = base[:, 0] + U2 @ f                      # (n,)
        resid = Yc - U @ (f[:, None] * UtY)          # sqrt(w_i)-scaled residuals
        loo = resid / (1.0 - h).clamp_min(1e-12)[:, None]
        rows = loo.square().sum(1) * (n / total)     # their mean: sum_i w_i e_i^2 / sum_i w_i
        out.append(rows.cpu().numpy() if per_row else float(rows.mean()))
    return np.asarray(out)


def ridge_loo_alpha(Z: torch.Tensor, Y: torch.Tensor, alphas=RIDGE_ALPHAS,
                    weight: torch.Tensor | None = None, one_se: bool = True) -> float:
    """The penalty of ``alphas`` chosen by exact leave-one-out (:func:`ridge_loo_errors`).

    ``one_se=False``: the lowest leave-one-out error (ties to the larger penalty). ``one_se``
    (the default): the largest penalty whose error exceeds the lowest by at most one standard
    error of the paired per-row differences (the "one standard error" rule of Breiman et al.,
    paired): the minimum over many penalties is biased low, and on a target the embedding does
    not predict it often falls on a small penalty by chance; the rule then keeps the mean.
    """
    alphas = [float(a) for a in alphas]
    rows = ridge_loo_errors(Z, Y, alphas, weight, per_row=True)
    err = rows.mean(1)
    best = int(np.argmin(err))
    if one_se:
        n = rows.shape[1]
        diff = rows - rows[best]
        se = diff.std(1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(len(alphas))
        ok = err - err[best] <= se + 1e-12 * abs(err[best])
    else:
        ok = err <= err[best] * (1 + 1e-12)  # ties (to rounding) go to the larger penalty
    return max(a for a, keep in zip(alphas, ok) if keep)


class AlternatingHead(Callback):
    """The alternating solver's head: fitted in closed form (L-BFGS / ridge) on the training part
    before every epoch but the first of a fresh fit (fitted at initialisation), frozen while Adam
    trains the rest, and fitted once more at the end without a validation split (with one, the
    restored best epoch keeps the head it was validated with)."""

    def __init__(self, est, data, warm: bool):
        self.est, self.warm = est, warm
        self.validated = data.validation is not None
        self.sets, self.targets = data.subset(data.train)
        self.weights, self.masses = data.weights_of(data.train), data.side_of(data.train)

    def _refit(self, module):
        self.est._refit_head(module, self.sets, self.targets, self.weights, self.masses)

    def on_train_begin(self, state):
        state.module.head.requires_grad_(False)

    def on_epoch_begin(self, state):
        if state.epoch > 0 or self.warm:  # epoch 0 of a fresh fit: head just fitted at init
            self._refit(state.module)

    def on_train_end(self, state):
        state.module.head.requires_grad_(True)
        if not self.validated:
            self._refit(state.module)
