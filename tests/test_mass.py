"""Element mass (a non-uniform measure per set) and unbalanced (semi-relaxed) transport: the engine
against POT, gradients, stability, and the estimators' ``element_weight`` / ``sample_weight`` /
``reg_m``.

Conventions: skset's plan for similarity ``K`` at ``epsilon`` is POT's plan for the cost ``-K`` at
``reg=epsilon`` (as in tests/test_ot.py); skset's ``reg_m`` is POT's ``reg_m`` on the first
marginal with the second one exact, ``reg_m=(rho, inf)``, under POT's default ``reg_type="kl"``.
"""

import pickle

import numpy as np
import ot as pot
import pytest
import sklearn
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from skset import NystromFeatures, OTKEmbedding
from skset.nn import OTKLayer, otk_plans
from skset.ot import sinkhorn, sinkhorn_exp

INF = float("inf")


def _problem(rng, lengths=(9, 6, 3, 1), p=4, scale=1.0):
    n = max(lengths)
    sim = torch.tensor(scale * rng.normal(size=(len(lengths), n, p)))
    mask = torch.arange(n)[None] < torch.tensor(lengths)[:, None]
    w = torch.tensor(rng.uniform(0.1, 2.0, size=(len(lengths), n)))
    w[0, 2] = 0.0  # an element of mass 0
    w[~mask] = float("nan")  # padded entries are ignored, whatever they hold
    return sim, mask, w


def _a(w, b, n):
    a = w[b, :n].numpy()
    return a / a.sum()


# -- engine: against POT -------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["log", "exp", "auto"])
@pytest.mark.parametrize("eps", [0.05, 0.5])
def test_weighted_matches_pot(rng, method, eps):
    sim, mask, w = _problem(rng)
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=3000, method=method, weights=w)
    for b, n in enumerate(mask.sum(1).tolist()):
        ref = pot.sinkhorn(_a(w, b, n), np.full(4, 0.25), -sim[b, :n].numpy(), eps,
                           method="sinkhorn_log", numItermax=100_000, stopThr=1e-14)
        np.testing.assert_allclose(P[b, :n].numpy(), ref, atol=1e-10)
        assert torch.all(P[b, n:] == 0)
    assert torch.all(P[0, 2] == 0)  # mass 0: an empty row


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
@pytest.mark.parametrize(("eps", "rho"), [(0.5, 0.3), (0.1, 1.0), (0.05, 0.05)])
def test_unbalanced_matches_pot_semi_relaxed(rng, method, eps, rho):
    sim, mask, w = _problem(rng)
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=3000, method=method, weights=w, reg_m=rho)
    for b, n in enumerate(mask.sum(1).tolist()):
        # POT's unbalanced solver gets the elements of positive mass (it mishandles a mass 0;
        # skset's zero-mass rows are checked against removal in another test)
        a = _a(w, b, n)
        pos = a > 0
        ref = pot.unbalanced.sinkhorn_unbalanced(
            a[pos], np.full(4, 0.25), -sim[b, :n].numpy()[pos], eps, (rho, INF),
            numItermax=20_000, stopThr=1e-15)
        np.testing.assert_allclose(P[b, :n].numpy()[pos], ref, atol=1e-10)
        assert np.all(P[b, :n].numpy()[~pos] == 0)
    # the reference side stays exact; the set side does not
    torch.testing.assert_close(P.sum(1), torch.full((4, 4), 0.25, dtype=P.dtype), atol=1e-12,
                               rtol=0)
    a = torch.where(mask, w, 0.0) / torch.where(mask, w, 0.0).sum(1, keepdim=True)
    assert (P.sum(2) - a)[0].abs().sum() > 1e-3


def test_unbalanced_down_weights_an_outlier_and_tends_to_balanced(rng):
    sim, mask, _ = _problem(rng, lengths=(8,))
    sim[0, 3] = -4.0  # element 3 is far from every support
    bal = sinkhorn(sim, mask, epsilon=0.2, n_iter=2000, method="log")
    masses = [sinkhorn(sim, mask, epsilon=0.2, n_iter=2000, method="log", reg_m=rho)[0, 3].sum()
              for rho in (0.05, 0.5, 5.0)]
    assert masses[0] < masses[1] < masses[2] < bal[0, 3].sum() - 1e-3
    near = sinkhorn(sim, mask, epsilon=0.2, n_iter=2000, method="log", reg_m=1e7)
    torch.testing.assert_close(near, bal, atol=1e-6, rtol=0)
    torch.testing.assert_close(sinkhorn(sim, mask, epsilon=0.2, reg_m=INF),
                               sinkhorn(sim, mask, epsilon=0.2))


@pytest.mark.parametrize("method", ["log", "exp"])
@pytest.mark.parametrize("reg_m", [None, 0.3])
@pytest.mark.parametrize("tol", [None, 1e-9])
def test_zero_mass_element_is_a_removed_element(rng, method, reg_m, tol):
    sim, mask, w = _problem(rng, lengths=(7,))
    w[0, 4] = 0.0
    keep = [i for i in range(7) if i != 4]
    P = sinkhorn(sim, mask, epsilon=0.3, n_iter=300, method=method, weights=w, reg_m=reg_m,
                 tol=tol)
    P_rm = sinkhorn(sim[:, keep], None, epsilon=0.3, n_iter=300, method=method,
                    weights=w[:, keep], reg_m=reg_m, tol=tol)
    torch.testing.assert_close(P[:, keep], P_rm, rtol=1e-12, atol=1e-15)
    assert torch.all(P[0, 4] == 0)


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
def test_uniform_weights_are_no_weights(rng, method):
    sim, mask, _ = _problem(rng)
    P = sinkhorn(sim, mask, epsilon=0.3, n_iter=50, method=method)
    P_w = sinkhorn(sim, mask, epsilon=0.3, n_iter=50, method=method,
                   weights=torch.full(mask.shape, 3.0, dtype=sim.dtype))
    torch.testing.assert_close(P_w, P, rtol=1e-12, atol=1e-15)


def _naive_stopped(K, a, eps, lam, tol, cap, every=5):
    """The documented stopping rule on one set, a plain numpy log-domain loop: returns the plan
    and the iteration count."""
    from scipy.special import logsumexp

    logK = K / eps
    with np.errstate(divide="ignore"):
        la = np.log(a)
    f, g = np.zeros(len(a)), np.zeros(K.shape[1])
    it = 0
    for it in range(cap):
        lse = logsumexp(logK + g[None], axis=1)
        if it > 0 and it % every == 0:
            r = np.exp(f + lse)  # row sums of the current plan
            t = np.exp(la + (1 - lam) * lse)  # row sums after the next row update
            if np.abs(r - t / t.sum()).sum() <= tol:
                break
        f = la - lam * lse
        g = -np.log(K.shape[1]) - logsumexp(logK + f[:, None], axis=0)
    else:
        it = cap
    return np.exp(logK + f[:, None] + g[None]), it


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
@pytest.mark.parametrize("reg_m", [None, 0.5])
def test_tol_stops_each_set_by_the_documented_rule(rng, method, reg_m):
    """With masses (and relaxed), each set stops at its first check where the L1 distance between
    its row sums and those of the next row update (normalised) is within ``tol``: compared with a
    naive loop; sets stop at different counts, before the cap."""
    B, n, p = 8, 12, 5
    sim = torch.tensor(rng.normal(size=(B, n, p)) * np.geomspace(0.1, 3, B)[:, None, None])
    lengths = torch.tensor(rng.integers(1, n + 1, B))
    mask = torch.arange(n)[None] < lengths[:, None]
    w = torch.tensor(rng.uniform(0.0, 2.0, size=(B, n)))
    w[torch.arange(B), 0] = 1.0  # every set has mass
    eps, tol, cap = 0.5, 1e-7, 300
    lam = 1.0 if reg_m is None else reg_m / (reg_m + eps)
    P = sinkhorn(sim, mask, n_iter=cap, tol=tol, epsilon=eps, method=method, weights=w,
                 reg_m=reg_m)
    counts = []
    for b, nb in enumerate(lengths.tolist()):
        ref, it = _naive_stopped(sim[b, :nb].numpy(), _a(w, b, nb), eps, lam, tol, cap)
        counts.append(it)
        np.testing.assert_allclose(P[b, :nb].numpy(), ref, rtol=1e-9, atol=1e-14)
    assert min(counts) < max(counts) < cap
    if reg_m is None:  # balanced: rows within tol of the masses
        a = torch.where(mask, w, 0.0) / torch.where(mask, w, 0.0).sum(1, keepdim=True)
        assert torch.all((P.sum(2) - a).abs().sum(1) <= tol)


def test_set_alone_equals_set_in_batch_with_weights(rng, monkeypatch):
    import skset.ot._sinkhorn as sot

    sim, mask, w = _problem(rng)
    for reg_m in (None, 0.4):
        for tol in (None, 1e-8):
            full = sinkhorn(sim, mask, epsilon=0.3, n_iter=200, weights=w, reg_m=reg_m, tol=tol)
            monkeypatch.setattr(sot, "_CPU_BLOCK_BYTES", 1)  # one set per block
            blocks = sinkhorn(sim, mask, epsilon=0.3, n_iter=200, weights=w, reg_m=reg_m, tol=tol)
            monkeypatch.undo()
            torch.testing.assert_close(blocks, full, rtol=1e-12, atol=1e-15)
            for b, n in enumerate(mask.sum(1).tolist()):
                alone = sinkhorn(sim[b:b + 1, :n], None, epsilon=0.3, n_iter=200,
                                 weights=w[b:b + 1, :n], reg_m=reg_m, tol=tol)
                torch.testing.assert_close(alone[0], full[b, :n], rtol=1e-12, atol=1e-15)


# -- engine: gradients and stability -------------------------------------------------------------
@pytest.mark.parametrize("method", ["log", "exp"])
@pytest.mark.parametrize("reg_m", [None, 0.4])
def test_gradcheck_similarity_and_weights(rng, method, reg_m):
    sim, mask, _ = _problem(rng, lengths=(4, 2), p=3)
    w = torch.tensor(rng.uniform(0.5, 2.0, size=mask.shape))
    sim.requires_grad_(True)
    w.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda s, ww: sinkhorn(s, mask, epsilon=0.5, n_iter=5, method=method, weights=ww,
                               reg_m=reg_m), (sim, w))


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
def test_zero_mass_gives_finite_gradients(rng, method):
    sim, mask, w = _problem(rng, lengths=(5, 3), p=3)
    w = torch.where(mask, w, 1.0).requires_grad_(True)
    sim.requires_grad_(True)
    P = sinkhorn(sim, mask, epsilon=0.5, n_iter=5, method=method, weights=w, reg_m=0.5)
    (P * torch.randn_like(P)).sum().backward()
    assert torch.isfinite(sim.grad).all() and torch.isfinite(w.grad).all()


@pytest.mark.parametrize("reg_m", [None, 0.5])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_zero_mass_gradient_is_the_derivative_at_zero(rng, reg_m, dtype):
    """The gradient with respect to a mass of 0 is the one-sided derivative there: in the exp
    domain (unbalanced, it was off by the element's tilt, -0.54 against -1.05) and in the
    balanced log domain (it gave 0: a weight at 0 learned nothing there); the unbalanced log
    domain keeps 0 for it (a row of mass delta times its tilt is not negligible) and the exp
    domain's gradient for the others. The plan's row stays empty, the plan that of the same
    weights without autograd."""
    sim, mask, w = _problem(rng, lengths=(5, 3), p=3)
    sim = sim.to(dtype)
    w = torch.where(mask, w, 1.0).to(dtype)
    w[0, 1] = 0.0
    C = torch.tensor(rng.normal(size=sim.shape), dtype=dtype)

    def loss(ww, method):
        return (sinkhorn(sim, mask, epsilon=0.5, n_iter=40, method=method, weights=ww,
                         reg_m=reg_m) * C).sum()

    grads = {}
    for method in ("log", "exp"):
        ww = w.clone().requires_grad_(True)
        grads[method], = torch.autograd.grad(loss(ww, method), ww)
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    zero = mask & (w == 0)  # (0, 1) and the problem's own (0, 2)
    torch.testing.assert_close(grads["log"][~zero], grads["exp"][~zero], **tol)
    if reg_m is None:
        torch.testing.assert_close(grads["log"], grads["exp"], **tol)
    else:
        # 0 up to rounding (only through the normalisation a = w / sum w, which sums to 0)
        assert float(grads["log"][zero].abs().max()) < 1e-6 * float(grads["exp"].abs().max())
    assert abs(float(grads["exp"][0, 1])) > 1e-3  # not the 0 of an empty row's -inf
    if dtype == torch.float64:
        h = 1e-7
        wh = w.clone()
        wh[0, 1] = h
        fd = (loss(wh, "exp") - loss(w, "exp")) / h
        assert abs(float(fd) - float(grads["exp"][0, 1])) < 1e-5
    ww = w.clone().requires_grad_(True)
    P = sinkhorn(sim, mask, epsilon=0.5, n_iter=40, method="log", weights=ww, reg_m=reg_m)
    assert float(P[0, 1].abs().max()) == 0.0
    torch.testing.assert_close(P.detach(), sinkhorn(sim, mask, epsilon=0.5, n_iter=40,
                                                    method="log", weights=w, reg_m=reg_m),
                               rtol=0, atol=1e-12 if dtype == torch.float64 else 1e-7)


def test_zero_mass_closer_to_the_supports_keeps_the_unbalanced_plan(rng):
    """Unbalanced, a zero-mass element more similar to the supports than the others leaves the
    plan as without autograd (read as a small mass, its row took the columns' mass: 3e-4 of it
    left in float32)."""
    sim = torch.zeros(1, 3, 4)
    sim[0, 1] = 4.0
    w = torch.tensor([[1.0, 0.0, 1.0]])
    kw = dict(epsilon=0.05, n_iter=50, method="log", reg_m=0.05)
    ref = sinkhorn(sim, weights=w, **kw)
    P = sinkhorn(sim, weights=w.clone().requires_grad_(True), **kw)
    torch.testing.assert_close(P.detach(), ref)
    assert abs(float(P.detach().sum()) - float(ref.sum())) < 1e-6


@pytest.mark.parametrize("eps", [1e-3, 1e-2])
@pytest.mark.parametrize("reg_m", [None, 1e-2, 1.0])
def test_stable_at_small_epsilon_float32(rng, eps, reg_m):
    sim, mask, w = _problem(rng, lengths=(40, 15, 1), p=8, scale=10.0)
    sim = sim.float().requires_grad_(True)
    w = w.float()
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=10, weights=w, reg_m=reg_m)
    assert torch.isfinite(P).all()
    # float32 logs of K / eps ~ 1e4: relative rounding ~1e-3 on the plan's entries
    torch.testing.assert_close(P.sum(1), torch.full((3, 8), 1 / 8), atol=2e-4, rtol=0)
    P_log = sinkhorn(sim, mask, epsilon=eps, n_iter=10, weights=w, reg_m=reg_m, method="log")
    torch.testing.assert_close(P, P_log, atol=2e-5, rtol=1e-3)
    (P * torch.randn_like(P)).sum().backward()
    assert torch.isfinite(sim.grad).all()
    # float64, 500 iterations: the naive log-domain loop (POT's unbalanced solvers overflow at
    # this epsilon)
    s64, a0 = sim.detach().double(), _a(w.double(), 1, 15)
    P64 = sinkhorn(s64[1:2, :15], None, epsilon=eps, n_iter=500, method="log",
                   weights=w[1:2, :15].double(), reg_m=reg_m)[0].numpy()
    lam = 1.0 if reg_m is None else reg_m / (reg_m + eps)
    ref, _ = _naive_stopped(s64[1, :15].numpy(), a0, eps, lam, tol=-1.0, cap=500)
    np.testing.assert_allclose(P64, ref, rtol=1e-8, atol=1e-14)


def test_exp_flags_unsafe_relaxed_sets(rng):
    sim, mask, w = _problem(rng, lengths=(12, 5), p=6, scale=10.0)
    _, ok = sinkhorn_exp(sim.float(), mask, epsilon=1e-3, n_iter=10, return_ok=True,
                         weights=w.float(), reg_m=0.1)
    assert not ok.all()  # auto redoes them in the log domain (test above)


# -- engine: errors and inputs ---------------------------------------------------------------------
@pytest.mark.parametrize(("value", "match"), [(-1.0, "set 1 .*negative"),
                                              (float("nan"), "set 1 .*NaN"),
                                              (INF, "set 1 .*infinite")])
def test_bad_weights_name_the_set(rng, value, match):
    sim, mask, w = _problem(rng)
    w[1, 2] = value
    for method in ("log", "exp", "auto"):
        with pytest.raises(ValueError, match=match):
            sinkhorn(sim, mask, epsilon=0.5, method=method, weights=w)


def test_all_zero_weights_and_shapes(rng):
    sim, mask, w = _problem(rng)
    w[2, :3] = 0.0
    with pytest.raises(ValueError, match="set 2 are all zero"):
        sinkhorn(sim, mask, epsilon=0.5, weights=w)
    with pytest.raises(ValueError, match="weights shape"):
        sinkhorn(sim, mask, epsilon=0.5, weights=w[:, :3])
    for bad in (0.0, -1.0, "x", True):
        with pytest.raises(ValueError, match="reg_m"):
            sinkhorn(sim, mask, epsilon=0.5, reg_m=bad)
    # otk_plans checks before repeating the sets for each reference: the message names set 2 of x
    x = torch.randn(4, 9, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="set 2 are all zero"):
        otk_plans(x, mask, torch.randn(3, 4, 3, dtype=torch.float64), epsilon=0.5, weights=w)


def test_inputs_not_modified(rng):
    sim, mask, w = _problem(rng)
    s0, w0 = sim.clone(), w.clone()
    for method in ("log", "exp", "auto"):
        sinkhorn(sim, mask, epsilon=0.05, method=method, weights=w, reg_m=0.1, tol=1e-6)
        sinkhorn(sim, mask, epsilon=0.05, method=method, weights=w, reg_m=0.1)
    assert torch.equal(sim, s0) and torch.equal(w.isnan(), w0.isnan())
    assert torch.equal(torch.nan_to_num(w), torch.nan_to_num(w0))


# -- OTKLayer --------------------------------------------------------------------------------------
@pytest.mark.parametrize("reg_m", [None, 0.3])
def test_layer_matches_pot_plans_and_pooling(rng, reg_m):
    q, p, k = 2, 3, 4
    lengths = (6, 4)
    x = torch.tensor(rng.normal(size=(2, 6, k)))
    mask = torch.arange(6)[None] < torch.tensor(lengths)[:, None]
    w = torch.tensor(rng.uniform(0.0, 2.0, size=(2, 6)))
    refs = torch.tensor(rng.normal(size=(q, p, k)))
    layer = OTKLayer(k, p, q, epsilon=0.4, sinkhorn_iter=3000, references=refs, reg_m=reg_m)
    out = layer(x, mask, w).detach().numpy()  # (B, q * p, k)
    for b, n in enumerate(lengths):
        xb = x[b, :n].numpy()
        for r in range(q):
            M = -xb @ refs[r].numpy().T
            a = _a(w, b, n)
            ref = (pot.sinkhorn(a, np.full(p, 1 / p), M, 0.4, method="sinkhorn_log",
                                numItermax=100_000, stopThr=1e-14) if reg_m is None else
                   pot.unbalanced.sinkhorn_unbalanced(a, np.full(p, 1 / p), M, 0.4, (reg_m, INF),
                                                      numItermax=100_000, stopThr=1e-15))
            pooled = np.sqrt(p / q) * ref.T @ xb
            np.testing.assert_allclose(out[b, r * p:(r + 1) * p], pooled, atol=1e-9)


# -- OTKEmbedding ----------------------------------------------------------------------------------
def _sets(rng, n_sets=8, d=3):
    return [rng.normal(size=(int(n), d)) for n in rng.integers(3, 9, n_sets)]


def _masses(rng, sets):
    out = [rng.uniform(0.0, 2.0, size=len(s)) for s in sets]
    for m in out:
        m[0] = 1.0
    return out


@pytest.mark.parametrize("reg_m", [None, 0.2])
def test_embedding_transform_matches_pot(rng, reg_m):
    sets = _sets(rng)
    ew = _masses(rng, sets)
    est = OTKEmbedding(n_supports=3, epsilon=0.3, reg_m=reg_m, center=False, normalize=False,
                       sinkhorn_tol=None, sinkhorn_iter=2000, dtype="float64",
                       random_state=0).fit(sets, element_weight=ew)
    emb = est.transform(sets, element_weight=ew)
    plans = est.transport_plan(sets, element_weight=ew)
    z = est.references_[0]
    for s, m, e, P in zip(sets, ew, emb, plans, strict=True):
        a = m / m.sum()
        ref = (pot.sinkhorn(a, np.full(3, 1 / 3), -s @ z.T, 0.3, method="sinkhorn_log",
                            numItermax=100_000, stopThr=1e-14) if reg_m is None else
               pot.unbalanced.sinkhorn_unbalanced(a, np.full(3, 1 / 3), -s @ z.T, 0.3,
                                                  (reg_m, INF), numItermax=100_000,
                                                  stopThr=1e-15))
        np.testing.assert_allclose(P[0], ref, atol=1e-9)
        np.testing.assert_allclose(e, (np.sqrt(3) * ref.T @ s).ravel(), atol=1e-9)
    layer = est.to_module()
    layer.sinkhorn_tol = None
    from skset._sets import pack, pack_weights
    X, M = pack(sets, dtype=torch.float64)
    out = layer(X, M, pack_weights([m / m.sum() for m in ew], dtype=torch.float64))
    np.testing.assert_allclose(out.detach().reshape(len(sets), -1).numpy(), emb, atol=1e-9)


def test_element_weight_uniform_is_none_and_zero_is_removed(rng):
    sets = _sets(rng)
    kw = dict(n_supports=3, epsilon=0.5, random_state=0, fit_method="wasserstein",
              barycenter_iter=2)
    base = OTKEmbedding(**kw).fit(sets)
    ones = OTKEmbedding(**kw).fit(sets, element_weight=[np.full(len(s), 2.0) for s in sets])
    np.testing.assert_array_equal(ones.references_, base.references_)
    np.testing.assert_array_equal(
        ones.transform(sets, element_weight=[np.ones(len(s)) for s in sets]),
        base.transform(sets))
    # an element of mass 0 is a removed element (without positions) in the plans
    ew = [np.ones(len(s)) for s in sets]
    ew[2][1] = 0.0
    cut = [s if i != 2 else np.delete(s, 1, axis=0) for i, s in enumerate(sets)]
    a = OTKEmbedding(**kw, dtype="float64").fit(sets, element_weight=ew)
    np.testing.assert_allclose(a.transform(sets, element_weight=ew), a.transform(cut),
                               rtol=1e-10, atol=1e-12)
    P, P_cut = a.transport_plan(sets, element_weight=ew)[2], a.transport_plan(cut)[2]
    np.testing.assert_allclose(np.delete(P, 1, axis=1), P_cut, rtol=1e-10, atol=1e-14)
    # and in the fit: set 2 counts its 6 elements of positive mass (it counted 7, the fit of a
    # set padded with elements of mass 0 moved with the padding)
    for fit_method in ("kmeans", "wasserstein"):
        kw2 = {**kw, "fit_method": fit_method, "dtype": "float64"}
        np.testing.assert_allclose(OTKEmbedding(**kw2).fit(sets, element_weight=ew).references_,
                                   OTKEmbedding(**kw2).fit(cut).references_, rtol=1e-12, atol=1e-14)
    # NystromFeatures' standardisation and anchors alike
    nkw = dict(n_components=4, standardize=True, normalize=False, keep_norm=True, bandwidth=0.5,
               random_state=0, dtype="float64")
    m, m_cut = NystromFeatures(**nkw).fit(sets, element_weight=ew), NystromFeatures(**nkw).fit(cut)
    np.testing.assert_allclose(m.mean_, m_cut.mean_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m.anchors_, m_cut.anchors_, rtol=1e-12, atol=1e-14)


def _clustered_sets(rng, n_sets=6, d=2):
    """Elements in 3 tight, far-apart clusters: k-means with 3 centres finds them from any start,
    so that a weight and a repetition reach the same optimum (k-means++ draws differ)."""
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    return [centres[rng.integers(0, 3, n)] + 0.1 * rng.normal(size=(n, d))
            for n in rng.integers(4, 9, n_sets)]


def _sorted_refs(est):
    z = est.references_[0]
    return z[np.lexsort(z.T[::-1])]


def _support_order(est):
    z = est.references_[0]
    return np.lexsort(z.T[::-1])


def _embedding_by_support(est, X, **kw):
    """transform's output with the supports in a canonical order (k-means orders them by its
    start)."""
    e = est.transform(X, **kw).reshape(len(X), est.references_.shape[1], -1)
    return e[:, _support_order(est)]


@pytest.mark.parametrize("fit_method", ["kmeans", "wasserstein"])
def test_sample_weight_two_is_the_set_given_twice(rng, fit_method):
    sets = _clustered_sets(rng)
    ew = _masses(rng, sets)
    kw = dict(n_supports=3, fit_method=fit_method, barycenter_iter=4, epsilon=0.5,
              dtype="float64", random_state=0)
    sw = np.array([1.0, 2.0, 1.0, 3.0, 1.0, 1.0])
    w = OTKEmbedding(**kw).fit(sets, sample_weight=sw, element_weight=ew)
    rep_idx = np.repeat(np.arange(len(sets)), sw.astype(int))
    rep = OTKEmbedding(**kw).fit([sets[i] for i in rep_idx],
                                 element_weight=[ew[i] for i in rep_idx])
    np.testing.assert_allclose(_sorted_refs(w), _sorted_refs(rep), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(_embedding_by_support(w, sets, element_weight=ew),
                               _embedding_by_support(rep, sets, element_weight=ew),
                               rtol=1e-7, atol=1e-9)
    # and the weights do matter
    plain = OTKEmbedding(**kw).fit(sets, element_weight=ew)
    assert np.abs(_sorted_refs(plain) - _sorted_refs(w)).max() > 1e-3


@pytest.mark.parametrize("n_references", [1, 2])
def test_sample_weight_zero_is_the_set_removed(rng, n_references):
    sets = _sets(rng, n_sets=9)
    ew = _masses(rng, sets)
    kw = dict(n_supports=3, n_references=n_references, barycenter_iter=3, epsilon=0.5,
              random_state=0)
    sw = np.ones(len(sets))
    sw[[1, 5]] = 0.0
    keep = [i for i in range(len(sets)) if sw[i] > 0]
    a = OTKEmbedding(**kw).fit(sets, sample_weight=sw, element_weight=ew)
    b = OTKEmbedding(**kw).fit([sets[i] for i in keep], element_weight=[ew[i] for i in keep])
    np.testing.assert_array_equal(a.references_, b.references_)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    np.testing.assert_array_equal(a.transform(sets, element_weight=ew),
                                  b.transform(sets, element_weight=ew))
    assert a.assignments_.shape == (len(sets),)
    np.testing.assert_array_equal(a.assignments_[keep], b.assignments_)
    # the sets left out get their lowest-cost reference
    costs = a._costs([sets[1], sets[5]], torch.as_tensor(a.references_),
                     [m / m.sum() for m in (ew[1], ew[5])])
    np.testing.assert_array_equal(a.assignments_[[1, 5]], costs.argmin(1))
    # equal weights are no weights
    c = OTKEmbedding(**kw).fit(sets, sample_weight=np.full(len(sets), 3.0))
    np.testing.assert_array_equal(c.references_, OTKEmbedding(**kw).fit(sets).references_)


def test_element_and_sample_weight_errors(rng):
    sets = _sets(rng, n_sets=4)
    est = OTKEmbedding(n_supports=2)
    good = [np.ones(len(s)) for s in sets]
    cases = [(good[:3], "holds 3 entries but X holds 4 sets"),
             ([*good[:2], np.ones(len(sets[2]) + 1), good[3]], "set 2 has .* weights but"),
             ([*good[:1], -good[1], *good[2:]], "set 1 contains negative"),
             ([*good[:3], np.full(len(sets[3]), np.nan)], "set 3 contains NaN"),
             ([*good[:3], np.zeros(len(sets[3]))], "set 3 is all zero"),
             ([*good[:1], np.ones((len(sets[1]), 2)), *good[2:]], "set 1 has shape"),
             ([*good[:2], None, good[3]], "set 2 is None; expected a 1-D array")]
    for ew, match in cases:
        with pytest.raises(ValueError, match="element_weight:? " + match):
            est.fit(sets, element_weight=ew)
    with pytest.raises(ValueError, match="sample_weight"):
        est.fit(sets, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="sample_weight"):
        est.fit(sets, sample_weight=-np.ones(4))
    est.fit(sets)
    with pytest.raises(ValueError, match="element_weight: set 0 has"):
        est.transform(sets, element_weight=[np.ones(1), *good[1:]])
    w0 = [g.copy() for g in good]
    est.fit(sets, element_weight=good, sample_weight=np.arange(1.0, 5.0))
    assert all(np.array_equal(a, b) for a, b in zip(good, w0, strict=True))  # not modified
    # finite masses whose sum overflows float64: only their ratios count
    ratios = [np.arange(1.0, len(s) + 1) for s in sets]
    huge = [r * (1.7e308 / r.max()) for r in ratios]
    np.testing.assert_allclose(est.transform(sets, element_weight=huge),
                               est.transform(sets, element_weight=ratios), rtol=1e-6, atol=1e-7)


def test_pipeline_sample_weight_and_metadata_routing(rng):
    sets = _sets(rng, n_sets=10)
    y = np.arange(10) % 2
    sw = rng.uniform(0.0, 2.0, size=10)
    ew = _masses(rng, sets)
    kw = dict(n_supports=3, random_state=0)
    ref = OTKEmbedding(**kw).fit(sets, sample_weight=sw)
    pipe = Pipeline([("otk", OTKEmbedding(**kw)), ("clf", LogisticRegression())])
    pipe.fit(sets, y, otk__sample_weight=sw)
    np.testing.assert_array_equal(pipe.named_steps["otk"].references_, ref.references_)
    ref = OTKEmbedding(**kw).fit(sets, sample_weight=sw, element_weight=ew)
    with sklearn.config_context(enable_metadata_routing=True):
        otk = OTKEmbedding(**kw).set_fit_request(sample_weight=True, element_weight=True
                                                 ).set_transform_request(element_weight=True)
        pipe = Pipeline([("otk", otk),
                         ("clf", LogisticRegression().set_fit_request(sample_weight=False))])
        pipe.fit(sets, y, sample_weight=sw, element_weight=ew)
        np.testing.assert_array_equal(pipe.named_steps["otk"].references_, ref.references_)
        proba = pipe.predict_proba(sets, element_weight=ew)
    clf = LogisticRegression().fit(ref.transform(sets, element_weight=ew), y)
    np.testing.assert_allclose(proba, clf.predict_proba(ref.transform(sets, element_weight=ew)))


def test_reg_m_param_legacy_pickle_and_module(rng):
    sets = _sets(rng, n_sets=5)
    est = OTKEmbedding(n_supports=3, reg_m=0.5, random_state=0).fit(sets)
    assert est.to_module().reg_m == 0.5
    assert not np.allclose(est.transform(sets), OTKEmbedding(n_supports=3, random_state=0)
                           .fit(sets).transform(sets))
    old = OTKEmbedding(n_supports=3, random_state=0).fit(sets)
    del old.__dict__["reg_m"]  # a model pickled before reg_m existed
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.reg_m is None
    np.testing.assert_array_equal(loaded.transform(sets),
                                  OTKEmbedding(n_supports=3, random_state=0).fit(sets)
                                  .transform(sets))


# -- NystromFeatures -------------------------------------------------------------------------------
def test_nystrom_sample_weight_zero_ones_and_repetition(rng):
    sets = _clustered_sets(rng, n_sets=6)
    kw = dict(n_components=3, normalize=True, bandwidth=0.6, dtype="float64", random_state=0)
    base = NystromFeatures(**kw).fit(sets)
    ones = NystromFeatures(**kw).fit(sets, sample_weight=np.ones(6))
    np.testing.assert_array_equal(ones.anchors_, base.anchors_)
    sw = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 1.0])
    keep = [0, 2, 3, 5]
    zero = NystromFeatures(**{**kw, "normalize": False}).fit(sets, sample_weight=sw == 1.0)
    rm = NystromFeatures(**{**kw, "normalize": False}).fit([sets[i] for i in (0, 3, 5)])
    for attr in ("anchors_", "mean_", "scale_", "normalization_"):
        np.testing.assert_array_equal(getattr(zero, attr), getattr(rm, attr))
    assert zero.bandwidth_ == rm.bandwidth_
    # weight 2 == the set twice (standardisation and k-means; absolute bandwidth)
    w = NystromFeatures(**kw).fit(sets, sample_weight=sw)
    rep = NystromFeatures(**kw).fit([sets[i] for i in np.repeat(keep, sw[keep].astype(int))])
    np.testing.assert_allclose(w.mean_, rep.mean_, rtol=1e-12)
    np.testing.assert_allclose(w.scale_, rep.scale_, rtol=1e-12)
    order = lambda e: np.lexsort(e.anchors_.T[::-1])  # noqa: E731
    np.testing.assert_allclose(w.anchors_[order(w)], rep.anchors_[order(rep)], atol=1e-9)
    assert np.abs(w.mean_ - base.mean_).max() > 1e-3  # the weights matter
    # a 2-D pool: one weight per row
    X = np.concatenate(sets)
    pool = NystromFeatures(**kw).fit(X, sample_weight=np.repeat(sw, [len(s) for s in sets]))
    np.testing.assert_allclose(pool.mean_, w.mean_, rtol=1e-12)
    with pytest.raises(ValueError, match="sample_weight"):
        NystromFeatures(**kw).fit(X, sample_weight=np.ones(6))


def test_user_guide_section_runs():
    """The element mass / unbalanced section of docs/user_guide/otk.rst is a doctest."""
    import doctest
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "docs" / "user_guide" / "otk.rst"
    assert "Element mass and unbalanced transport" in path.read_text()
    failures, tried = doctest.testfile(str(path), module_relative=False,
                                       optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried >= 10 and failures == 0


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
def test_tol_ignored_when_the_weights_need_gradients(rng, method):
    sim, mask, w = _problem(rng, lengths=(6, 4), p=3)
    w = torch.where(mask, w, 1.0).requires_grad_(True)
    P = sinkhorn(sim, mask, epsilon=0.5, n_iter=40, method=method, weights=w, reg_m=0.5,
                 tol=1e-3)
    fixed = sinkhorn(sim, mask, epsilon=0.5, n_iter=40, method=method, weights=w.detach(),
                     reg_m=0.5)
    torch.testing.assert_close(P.detach(), fixed, rtol=1e-12, atol=1e-15)
    (P * torch.randn_like(P)).sum().backward()
    assert torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0
