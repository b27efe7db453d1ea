"""The linear head of the supervised OTK estimators in closed form: L2-regularised logistic
regression by L-BFGS, ridge regression by its normal equations, and the alternating solver's
callback that refits the head between epochs while Adam trains the rest of the network."""

from __future__ import annotations

import math

import torch

from ._callbacks import Callback

__all__ = ["fit_logistic_head", "fit_ridge_head", "AlternatingHead"]


def fit_logistic_head(head: torch.nn.Linear, Z: torch.Tensor, y: torch.Tensor, alpha: float,
                      max_iter: int = 100, weight: torch.Tensor | None = None, *,
                      tol: float = 1e-4, history: int = 10) -> int:
    """Minimise ``mean CE(Z W^T + b, y) + alpha/2 ||W||^2`` by L-BFGS, from the current head.

    With ``weight``, the mean is the weighted mean ``sum_i w_i CE_i / sum_i w_i``. This is
    scikit-learn's multinomial ``LogisticRegression(C=1 / (alpha * n))`` (``n`` the number of
    rows, or the sum of ``weight``), intercept unpenalised. Every row of the head is a class:
    a class with no row in ``y`` keeps a column whose bias falls until its probability is
    negligible.

    The solver works in ``Z``'s dtype (float32 or float64; other dtypes in float32) and costs two
    products with ``Z`` per iteration, however many classes: the logits of a trial step along
    the search direction ``d`` are ``A + t Z d^T`` (the line search evaluates the loss and its
    derivative along the line from them, with no product), and the gradient at the accepted
    step is one more. It stops when the largest gradient entry falls to ``tol`` times the
    largest entry of the gradient at ``W = 0, b = 0`` (a tolerance relative to the problem's
    own scale, so that it means the same with 10 or 1,000 classes, few or many rows), or after
    ``max_iter`` iterations. Started from a head already near the solution (the refits between
    epochs), it stops after few iterations.

    Returns the number of iterations run.
    """
    dt = Z.dtype if Z.dtype in (torch.float32, torch.float64) else torch.float32
    Z = Z.detach().to(dt)
    n, D = Z.shape
    dev = Z.device
    y = y.detach().to(device=dev, dtype=torch.long)
    if weight is None:
        s = torch.full((n, 1), 1.0 / n, dtype=dt, device=dev)
    else:
        w = weight.detach().to(device=dev, dtype=torch.float64).reshape(n, 1)
        s = (w / w.sum()).to(dt)
    Z1 = torch.cat([Z, torch.ones(n, 1, dtype=dt, device=dev)], 1)  # the bias as a column
    X = torch.cat([head.weight.detach().to(dt), head.bias.detach().to(dt)[:, None]], 1)
    C = X.shape[0]
    pen = torch.full((1, D + 1), float(alpha), dtype=dt, device=dev)
    pen[0, D] = 0.0  # the bias is not penalised
    # the problem's scale: the largest gradient entry at W = 0, b = 0 (class sums: no product)
    sZ = s * Z1
    g0 = sZ.sum(0, keepdim=True) / C - torch.zeros_like(X).index_add_(0, y, sZ)
    del sZ
    gtol = float(tol) * float(g0.abs().max())
    yi = y[:, None]

    def dot(a, b):
        return float(torch.dot(a.reshape(-1), b.reshape(-1)))

    def data_loss(A):  # the weighted mean cross-entropy (float64) and the softmax
        lse = torch.logsumexp(A, 1, keepdim=True)
        f = float((s * (lse - A.gather(1, yi))).sum(dtype=torch.float64))
        return f, torch.exp(A - lse)

    def gradient(P, X):
        G = P * s
        G.scatter_add_(1, yi, -s)
        return G.T @ Z1 + pen * X

    A = Z1 @ X.T
    f_data, P = data_loss(A)
    f = f_data + 0.5 * dot(pen * X, X)
    g = gradient(P, X)
    S, Yh, rho = [], [], []
    it = 0
    while it < max_iter:
        if not float(g.abs().max()) > gtol:  # (also stops on a NaN gradient)
            break
        # the L-BFGS direction (two-loop recursion) ...
        d = g.neg()
        coef = []
        for s_k, y_k, r_k in zip(reversed(S), reversed(Yh), reversed(rho)):
            a = r_k * dot(s_k, d)
            coef.append(a)
            d.add_(y_k, alpha=-a)
        if S:
            d.mul_(dot(S[-1], Yh[-1]) / dot(Yh[-1], Yh[-1]))
        for s_k, y_k, r_k, a in zip(S, Yh, rho, reversed(coef)):
            d.add_(s_k, alpha=a - r_k * dot(y_k, d))
        dphi0 = dot(g, d)
        if not dphi0 < 0:  # not a descent direction: restart from the gradient
            S, Yh, rho = [], [], []
            d = -g
            dphi0 = dot(g, d)
        # ... and a line search along it on phi(t) = f(X + t d), convex: logits A + t B
        B = Z1 @ d.T
        Xd, dd, XX = dot(pen * X, d), dot(pen * d, d), dot(pen * X, X)
        B_y = B.gather(1, yi)
        if S:
            t = 1.0
        else:  # first step (or a restart): Newton's step on phi from its curvature at 0
            PB = (P * B).sum(1, keepdim=True)
            curv = float((s * ((P * B * B).sum(1, keepdim=True) - PB * PB)).sum()) + dd
            t = -dphi0 / curv if curv > 0 else 1.0
        lo, dlo, hi, dhi = 0.0, dphi0, math.inf, math.nan
        accepted = None
        for _ in range(30):
            At = A + t * B
            fd, Pt = data_loss(At)
            ft = fd + 0.5 * XX + t * Xd + 0.5 * t * t * dd
            dphi = float((s * ((Pt * B).sum(1, keepdim=True) - B_y)).sum(dtype=torch.float64))
            dphi += Xd + t * dd
            decrease = ft <= f + 1e-4 * t * dphi0
            if not math.isfinite(ft) or not math.isfinite(dphi) or (dphi > 0 and not decrease):
                hi, dhi = t, dphi  # too far
            elif abs(dphi) <= 0.9 * abs(dphi0):
                # strong Wolfe; with dphi <= 0 the decrease holds by convexity whatever the
                # rounding of ft: phi(t) <= phi(0) + t phi'(t)
                accepted = (t, At, Pt, ft)
                break
            elif dphi > 0:
                hi, dhi = t, dphi
            else:
                lo, dlo = t, dphi  # too short
            if math.isinf(hi):  # extrapolate: the secant of phi' through 0 and lo
                t_new = lo - dlo * lo / (dlo - dphi0) if dlo > dphi0 else 4.0 * lo
                t = min(max(t_new, 1.5 * lo), 10.0 * lo)
            else:  # the secant of phi' between lo and hi, kept inside the bracket
                t_new = (lo - dlo * (hi - lo) / (dhi - dlo) if math.isfinite(dhi) and dhi > dlo
                         else 0.5 * (lo + hi))
                t = min(max(t_new, lo + 0.1 * (hi - lo)), hi - 0.1 * (hi - lo))
        if accepted is None:
            if lo <= 0:  # no decrease along d: converged to the rounding of the dtype
                break
            At = A + lo * B
            fd, Pt = data_loss(At)
            accepted = (lo, At, Pt, fd + 0.5 * XX + lo * Xd + 0.5 * lo * lo * dd)
        t, A, P, f = accepted
        step = d.mul_(t)
        X.add_(step)
        g_new = gradient(P, X)
        y_k = g_new - g
        sy = dot(step, y_k)
        if sy > 1e-10 * dot(y_k, y_k):
            S.append(step)
            Yh.append(y_k)
            rho.append(1.0 / sy)
            if len(S) > history:
                del S[0], Yh[0], rho[0]
        g = g_new
        it += 1
    with torch.no_grad():
        head.weight.copy_(X[:, :D].to(head.weight.dtype))
        head.bias.copy_(X[:, D].to(head.bias.dtype))
    return it


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
