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

__all__ = ["fit_logistic_head", "fit_multilabel_logistic_head", "fit_ridge_head",
           "ridge_loo_errors", "ridge_loo_alpha", "RIDGE_ALPHAS", "AlternatingHead",
           "level_absent_classes"]


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
        # a pair of positive curvature, by a scale-free test (sy against ||s|| ||y||: the test
        # against y.y alone refused every pair of features near 1e6, and the solver stalled)
        if sy > 1e-10 * (dot(step, step) * dot(y_k, y_k)) ** 0.5:
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


def weight_unit(sample_weight) -> float:
    """The largest of a ``partial_fit`` chunk's ``sample_weight`` (a scalar's value; 1.0 without
    weights, or for weights the checks refuse, which the fit then refuses by name): the unit the
    checked weights (whose largest is 1, or ``None`` when all are equal) are given back in, so
    that an ``OTKRegressor`` stream weighs its chunks against each other by their weights."""
    if sample_weight is None:
        return 1.0
    try:
        top = float(np.max(np.asarray(sample_weight, dtype=np.float64)))
    except (TypeError, ValueError):
        return 1.0
    return top if np.isfinite(top) and top > 0 else 1.0


def ridge_stats(Z: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor | None = None,
                shift: torch.Tensor | None = None, unit: float = 1.0) -> dict:
    """The weighted sums :func:`fit_ridge_head_stats` solves from, float64 on ``Z``'s device:
    ``total`` (sum of weights), ``z``, ``y``, ``zz`` (``Z^T W Z``), ``zy``, over rows shifted by
    ``shift`` (default their mean; kept as ``shift``) so that the sums keep their digits; the
    weights (1 for ``None``) times ``unit``. Sums of several chunks with one shift add
    (:func:`add_ridge_stats`): the ridge head of all the rows seen, without keeping them."""
    Z = Z.double()
    Y = Y.double().reshape(Z.shape[0], -1)
    shift = Z.mean(0) if shift is None else shift.to(Z)
    Zs = Z - shift
    w = unit * (torch.ones_like(Z[:, :1]) if weight is None else weight.to(Z).reshape(-1, 1))
    return {"shift": shift, "total": w.sum(), "z": (w * Zs).sum(0), "y": (w * Y).sum(0),
            "zz": Zs.T @ (w * Zs), "zy": Zs.T @ (w * Y)}


def add_ridge_stats(a: dict | None, b: dict) -> dict:
    """The sums of two chunks (``b`` computed with ``a``'s shift); ``a=None``: ``b``."""
    return b if a is None else {k: a[k] if k == "shift" else a[k] + b[k] for k in a}


def fit_ridge_head_stats(head: torch.nn.Linear, stats: dict, alpha: float) -> None:
    """:func:`fit_ridge_head` from the sums of :func:`ridge_stats`: the same solution (the
    centred normal equations ``(C_zz + alpha * total I) W^T = C_zy``)."""
    total = stats["total"]
    zm, ym = stats["z"] / total, stats["y"] / total
    if math.isinf(alpha):
        Wt = zm.new_zeros(zm.shape[0], ym.shape[0])
    else:
        czz = stats["zz"] - total * torch.outer(zm, zm)
        czy = stats["zy"] - total * torch.outer(zm, ym)
        reg = max(alpha, 1e-10) * total
        Wt = torch.linalg.solve(czz + reg * torch.eye(czz.shape[0], dtype=czz.dtype,
                                                       device=czz.device), czy)
    with torch.no_grad():
        head.weight.copy_(Wt.T.to(head.weight.dtype))
        head.bias.copy_((ym - (zm + stats["shift"]) @ Wt).to(head.bias.dtype))


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


def level_absent_classes(head, targets: torch.Tensor, weight=None) -> None:
    """A class head's rows of the classes without a set of positive weight in ``targets``
    (class codes; a first ``partial_fit`` chunk may miss some): their unpenalised bias ran off to
    about -7, which later chunks' steps of 0.01 never bring back; they start level with the
    others instead (no weights, the others' mean bias). A plain fit keeps the solution, where
    such a class has a near-zero probability."""
    if targets.dim() != 1 or targets.is_floating_point():  # regression, multi-label
        return
    seen = targets if weight is None else targets[weight > 0]
    absent = torch.bincount(seen, minlength=head.weight.shape[0]) == 0
    if absent.any() and not absent.all():
        with torch.no_grad():
            head.weight[absent] = 0.0
            head.bias[absent] = head.bias[~absent].mean()


class AlternatingHead(Callback):
    """The alternating solver's head: fitted in closed form (L-BFGS / ridge) on the training part
    before every epoch but the first of a fresh fit (fitted at initialisation), frozen while Adam
    trains the rest, and fitted once more at the end without a validation split (with one, the
    restored best epoch keeps the head it was validated with). Every refit starts from the
    previous head with the head still frozen, which the classifier's head solve reads as
    "warm": a few iterations to a loose tolerance (see ``OTKClassifier._fit_head``). Where the
    estimator says a head solve is costly (``est._refits_between_epochs(head, n_sets)`` false:
    many classes), the refits before the epochs are left out: the head is fitted at
    initialisation and at the end only."""

    def __init__(self, est, data, warm: bool):
        self.est, self.warm, self.stream = est, warm, data.incremental
        self.validated = data.validation is not None
        self.sets, self.targets = data.subset(data.train)
        self.weights, self.masses = data.weights_of(data.train), data.side_of(data.train)

    def _refit(self, module):
        self.est._refit_head(module, self.sets, self.targets, self.weights, self.masses,
                             stream=self.stream)

    def on_train_begin(self, state):
        state.module.head.requires_grad_(False)

    def on_epoch_begin(self, state):
        if not self.est._refits_between_epochs(state.module.head, len(self.targets)):
            return
        if state.epoch > 0 or self.warm:  # epoch 0 of a fresh fit: head just fitted at init
            self._refit(state.module)

    def on_train_end(self, state):
        if not self.validated:  # still frozen: a refit from the previous epoch's head
            self._refit(state.module)
        state.module.head.requires_grad_(True)


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
