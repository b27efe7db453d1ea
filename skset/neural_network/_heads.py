"""The linear head of the supervised OTK estimators in closed form: L2-regularised logistic
regression by L-BFGS, ridge regression by its normal equations, and the alternating solver's
callback that refits the head between epochs while Adam trains the rest of the network."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._callbacks import Callback

__all__ = ["fit_logistic_head", "fit_ridge_head", "AlternatingHead"]


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


def fit_ridge_head(head: torch.nn.Linear, Z: torch.Tensor, Y: torch.Tensor, alpha: float,
                    weight: torch.Tensor | None = None) -> None:
    """Closed form of ``min mean 0.5||Y - Z W^T - b||^2 + alpha/2 ||W||^2``.

    With ``weight``, the mean is the weighted mean (weighted centring, rows scaled by
    ``sqrt(w_i)``, penalty scaled by ``sum_i w_i``).
    """
    Z = Z.double()
    Y = Y.double().reshape(Z.shape[0], -1)
    n, D = Z.shape
    if weight is None:
        zm, ym = Z.mean(0), Y.mean(0)
        Zc, Yc = Z - zm, Y - ym
        total = n
    else:
        w = weight.to(Z).reshape(-1, 1)
        total = float(w.sum())
        zm, ym = (w * Z).sum(0) / total, (w * Y).sum(0) / total
        Zc, Yc = w.sqrt() * (Z - zm), w.sqrt() * (Y - ym)
    reg = max(alpha, 1e-10) * total
    if n < D:  # dual form: W^T = Zc^T (Zc Zc^T + reg I)^-1 Yc
        G = Zc @ Zc.T + reg * torch.eye(n, dtype=Z.dtype, device=Z.device)
        Wt = Zc.T @ torch.linalg.solve(G, Yc)
    else:
        G = Zc.T @ Zc + reg * torch.eye(D, dtype=Z.dtype, device=Z.device)
        Wt = torch.linalg.solve(G, Zc.T @ Yc)
    with torch.no_grad():
        head.weight.copy_(Wt.T.to(head.weight.dtype))
        head.bias.copy_((ym - zm @ Wt).to(head.bias.dtype))


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


# multi-label targets: one sigmoid per label (OTKClassifier with an indicator matrix y)
__all__.append("fit_multilabel_logistic_head")


def fit_multilabel_logistic_head(head: torch.nn.Linear, Z: torch.Tensor, Y: torch.Tensor,
                                 alpha: float, max_iter: int = 100,
                                 weight: torch.Tensor | None = None,
                                 pos_weight: torch.Tensor | None = None) -> None:
    """One L2-regularised logistic regression per label, all at once, from the current head.

    Minimises ``mean_i sum_l BCE(z_i . w_l + b_l, Y_il) + alpha/2 ||W||^2`` by L-BFGS over the
    whole ``(L, D)`` weight matrix and the ``(L,)`` biases: the objective is a sum of the labels'
    independent problems, so this is each label's regularised logistic regression, solved
    together in batched matrix products (one L-BFGS, one line search). ``Y`` is the 0/1
    indicator matrix ``(n, L)``; with ``weight`` ``(n,)`` the mean over the sets is the weighted
    mean ``sum_i w_i (.) / sum_i w_i``; ``pos_weight`` ``(L,)`` multiplies the loss of each
    label's positives (``BCEWithLogitsLoss``'s ``pos_weight``).
    """
    Z = Z.double()
    Y = Y.to(Z).reshape(Z.shape[0], -1)
    if weight is not None:
        weight = weight.to(Z)
    if pos_weight is not None:
        pos_weight = pos_weight.to(Z)
    W = head.weight.detach().double().clone().requires_grad_()
    b = head.bias.detach().double().clone().requires_grad_()
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=max_iter, tolerance_grad=1e-7,
                            tolerance_change=1e-10, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        per_set = F.binary_cross_entropy_with_logits(Z @ W.T + b, Y, pos_weight=pos_weight,
                                                     reduction="none").sum(1)
        bce = per_set.mean() if weight is None else (weight * per_set).sum() / weight.sum()
        loss = bce + 0.5 * alpha * W.square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        head.weight.copy_(W.detach().to(head.weight.dtype))
        head.bias.copy_(b.detach().to(head.bias.dtype))
