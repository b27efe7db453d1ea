import warnings

import numpy as np
import ot as pot
import pytest
import torch

from skset.ot import position_weights, sinkhorn, sinkhorn_exp


def _problem(rng, lengths=(12, 7, 3, 1), p=5, scale=1.0):
    n = max(lengths)
    sim = torch.tensor(scale * rng.normal(size=(len(lengths), n, p)))
    mask = torch.arange(n)[None] < torch.tensor(lengths)[:, None]
    return sim, mask


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
@pytest.mark.parametrize("eps", [0.05, 0.5, 10.0])
def test_matches_pot_converged(rng, method, eps):
    sim, mask = _problem(rng)
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=2000, method=method)
    for b, l in enumerate(mask.sum(1).tolist()):
        ref = pot.bregman.sinkhorn_log(np.full(l, 1 / l), np.full(5, 0.2), -sim[b, :l].numpy(),
                                       reg=eps, numItermax=100000, stopThr=1e-14)
        np.testing.assert_allclose(P[b, :l].numpy(), ref, atol=1e-10)
        assert torch.all(P[b, l:] == 0)


@pytest.mark.parametrize("eps", [1e-3, 1e-2])
def test_small_epsilon_auto_falls_back_to_log(rng, eps):
    sim, mask = _problem(rng, scale=2.0)
    sim32 = sim.float()
    P_exp, ok = sinkhorn_exp(sim32, mask, epsilon=eps, n_iter=10, return_ok=True)
    P = sinkhorn(sim32, mask, epsilon=eps, n_iter=10)
    P_log = sinkhorn(sim32, mask, epsilon=eps, n_iter=10, method="log")
    assert torch.isfinite(P).all()
    torch.testing.assert_close(P, P_log, atol=1e-6, rtol=1e-4)
    # column marginals hold exactly after the last (column) update
    torch.testing.assert_close(P.sum(1), torch.full((4, 5), 0.2), atol=5e-5, rtol=0)


@pytest.mark.parametrize("method", ["log", "auto"])
def test_float32_sets_beyond_its_resolution_are_solved_in_float64(rng, method):
    """A float32 set whose similarity spans millions of epsilons (raw features of -1e6) has the
    float64 plan, alone and in a batch with other sets. Before, its potentials were beyond
    float32's resolution: the iterations stalled at a wrong plan (three equal elements: column
    sums 0.055, 0.27, 0.33 instead of 1/3), another one in each batch."""
    z = torch.tensor(rng.normal(size=(3, 31)))
    x = torch.full((3, 31), -1e6, dtype=torch.float64)
    wide = (x @ z.T)[None]  # three equal elements: every plan row is the same
    other = torch.tensor(rng.normal(size=(1, 3, 3)))
    kw = dict(epsilon=0.1, n_iter=100, tol=1e-4, method=method)
    ref = sinkhorn(wide, **kw)  # float64
    torch.testing.assert_close(ref[0].sum(0), torch.full((3,), 1 / 3, dtype=torch.float64))
    torch.testing.assert_close(ref[0].sum(1), torch.full((3,), 1 / 3, dtype=torch.float64))
    alone = sinkhorn(wide.float(), **kw)
    mask = torch.tensor([[True] * 3, [True, False, False]])
    batch = sinkhorn(torch.cat([wide, other]).float(), mask, **kw)
    assert alone.dtype == batch.dtype == torch.float32
    for P in (alone[0], batch[0]):
        torch.testing.assert_close(P, ref[0].float(), atol=1e-6, rtol=0)
    # the other set is solved as before, in float32
    torch.testing.assert_close(batch[1], sinkhorn(other.float(), mask[1:], **kw)[0])


def test_matches_pot_batched_solver_10_iterations(rng):
    """Same iterates as POT's batched log solver: same plan after 10 iterations."""
    lengths = [9] * 4
    sim, mask = _problem(rng, lengths=lengths)
    P = sinkhorn(sim, mask, epsilon=0.5, n_iter=10)
    res = pot.solve_batch(M=-sim.numpy(), reg=0.5, max_iter=10, tol=0, reg_type="entropy",
                          method="log_sinkhorn")
    ref = np.asarray(res.plan)
    # POT starts with the column update, skset with the row update; both reach the same plan
    # within the same tolerance of convergence
    np.testing.assert_allclose(P.sum(1).numpy(), 0.2, atol=1e-12)
    np.testing.assert_allclose(P.numpy(), ref, atol=2e-3)


def test_padding_never_changes_a_plan(rng):
    sim, mask = _problem(rng)
    full = sinkhorn(sim, mask, epsilon=0.3, n_iter=10)
    garbage = sim.clone()
    garbage[~mask] = 1e6
    torch.testing.assert_close(sinkhorn(garbage, mask, epsilon=0.3, n_iter=10), full)
    for b, l in enumerate(mask.sum(1).tolist()):
        alone = sinkhorn(sim[b : b + 1, :l], None, epsilon=0.3, n_iter=10)
        torch.testing.assert_close(alone[0], full[b, :l])


def test_permutation_equivariance(rng):
    sim, mask = _problem(rng, lengths=(10,))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(0))
    P = sinkhorn(sim, mask, epsilon=0.5)
    P2 = sinkhorn(sim[:, perm], mask, epsilon=0.5)
    torch.testing.assert_close(P[:, perm], P2)


@pytest.mark.parametrize("method", ["log", "exp"])
def test_gradcheck(rng, method):
    sim, mask = _problem(rng, lengths=(4, 2), p=3)
    sim.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda s: sinkhorn(s, mask, epsilon=0.5, n_iter=5, method=method), (sim,))


@pytest.mark.parametrize("eps", [1e-3, 0.01, 0.1, 1.0, 10.0])
def test_no_nan_over_epsilon_range_float32(rng, eps):
    sim, mask = _problem(rng, lengths=(50, 20, 1), p=8, scale=10.0)
    sim = sim.float().requires_grad_(True)
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=10)
    assert torch.isfinite(P).all()
    (P * torch.randn_like(P)).sum().backward()
    assert torch.isfinite(sim.grad).all()


def test_bad_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        sinkhorn(torch.zeros(1, 2, 2), epsilon=0.0)
    with pytest.raises(ValueError, match="method"):
        sinkhorn(torch.zeros(1, 2, 2), epsilon=1.0, method="foo")


def test_position_weights_use_real_length():
    mask = torch.arange(6)[None] < torch.tensor([[6], [3]])
    S = position_weights(mask, 4, 0.5, dtype=torch.float32)
    i = torch.arange(3.0)[:, None] / 3
    j = torch.arange(4.0)[None] / 4
    torch.testing.assert_close(S[1, :3], torch.exp(-((i - j) ** 2) / 0.25))
    assert torch.all(S[1, 3:] == 0)


# -- stopping tolerance --
def _row_error(P, mask):
    a = mask.to(P.dtype) / mask.sum(1, keepdim=True)
    return (P.sum(2) - a).abs().sum(1)


def _mixed_problem(rng, B=12, n=15, p=6):
    """Sets of various lengths and difficulty (similarity scales 0.1 to 3)."""
    sim = torch.tensor(rng.normal(size=(B, n, p)) * np.geomspace(0.1, 3, B)[:, None, None])
    lengths = torch.tensor(rng.integers(1, n + 1, B))
    lengths[0] = n
    mask = torch.arange(n)[None] < lengths[:, None]
    return sim, mask


@pytest.mark.parametrize("method", ["exp", "log", "auto"])
def test_tol_stops_each_set_at_its_first_check_within_tol(rng, method):
    """A set's plan is the fixed-count plan at the first check (every 5 iterations) where its
    own row-marginal error is <= tol: fewer iterations than the cap for easy sets, and a result
    within tol of the row marginals."""
    sim, mask = _mixed_problem(rng)
    eps, tol, cap = 0.5, 1e-6, 400
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=cap, method=method, tol=tol)
    assert torch.all(_row_error(P, mask) <= tol)
    torch.testing.assert_close(P.sum(1), torch.full((12, 6), 1 / 6, dtype=P.dtype), rtol=0,
                               atol=1e-12)
    stops = {}
    for k in range(5, cap + 1, 5):  # each set's first check within tol
        fixed = sinkhorn(sim, mask, epsilon=eps, n_iter=k, method=method)
        for b in (_row_error(fixed, mask) <= tol).nonzero().squeeze(1).tolist():
            if b not in stops:
                stops[b] = k
                torch.testing.assert_close(P[b], fixed[b], rtol=1e-12, atol=1e-15)
        if len(stops) == len(sim):
            break
    assert len(stops) == len(sim)  # below: early, and set by set
    assert max(stops.values()) < cap and min(stops.values()) < max(stops.values())


@pytest.mark.parametrize("method", ["exp", "log", "auto"])
def test_tol_none_or_zero_is_the_fixed_count(rng, method):
    sim, mask = _mixed_problem(rng)
    ref = sinkhorn(sim, mask, epsilon=0.3, n_iter=37, method=method)
    for tol in (None, 0, 0.0):
        assert torch.equal(sinkhorn(sim, mask, epsilon=0.3, n_iter=37, method=method, tol=tol),
                           ref)


def test_tol_auto_falls_back_to_log_and_runs_to_tol(rng):
    """Small epsilon: the exp domain fails on some sets; their log-domain redo also stops at the
    tolerance, and auto, log and exp (on the sets exp can do) agree."""
    sim, mask = _mixed_problem(rng, B=10)
    sim = sim.float()
    eps, tol, cap = 0.05, 1e-4, 3000
    _, ok = sinkhorn_exp(sim, mask, epsilon=eps, n_iter=50, return_ok=True)
    assert 0 < int(ok.sum()) < len(ok)  # a mixed batch
    P = sinkhorn(sim, mask, epsilon=eps, n_iter=cap, tol=tol)
    P_log = sinkhorn(sim, mask, epsilon=eps, n_iter=cap, method="log", tol=tol)
    assert torch.isfinite(P).all()
    # float32: the error the check reads and the error of the formed plan differ by rounding
    assert torch.all(_row_error(P, mask) <= 1.05 * tol)
    assert torch.all(_row_error(P_log, mask) <= 1.05 * tol)
    torch.testing.assert_close(P, P_log, atol=2 * tol, rtol=0)
    good = ok.nonzero().squeeze(1)
    P_exp = sinkhorn(sim[good], mask[good], epsilon=eps, n_iter=cap, method="exp", tol=tol)
    torch.testing.assert_close(P_exp, P[good], atol=2 * tol, rtol=0)
    # the log fallback stopped early too: not the cap's plan for every set
    P_cap = sinkhorn(sim, mask, epsilon=eps, n_iter=cap, method="log")
    assert not torch.equal(P_log, P_cap)


def test_exp_alone_warns_naming_the_sets_whose_plan_is_not_finite():
    """``method="exp"`` keeps the exp-domain plan of every set (no log-domain redo): where one is
    not finite (its scalings under- or overflowed) it warns, naming those sets of the batch; on the
    other sets, and under ``"auto"`` (which redoes them), it is silent."""
    g = torch.Generator().manual_seed(0)
    x, z = torch.randn(8, 50, 8, generator=g), torch.randn(1, 10, 8, generator=g)
    sim = -torch.cdist(x, z.expand(8, -1, -1)).square() / 2  # float32
    kw = dict(epsilon=0.03, n_iter=3000, tol=1e-4)
    P = sinkhorn_exp(sim, **kw)
    bad = (~torch.isfinite(P).all(dim=(1, 2))).nonzero().squeeze(1).tolist()
    assert 0 < len(bad) < 8
    with pytest.warns(RuntimeWarning, match=rf"{len(bad)} of 8 sets .*set {bad[0]}\b.*"
                                            r"epsilon=0.03 in float32") as rec:
        P_exp = sinkhorn(sim, method="exp", **kw)
    assert len(rec) == 1
    torch.testing.assert_close(P_exp, P, equal_nan=True)  # the plans are exp's own
    good = [b for b in range(8) if b not in bad]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P_auto = sinkhorn(sim, **kw)
        sinkhorn(sim[good], method="exp", **kw)
    assert torch.isfinite(P_auto).all()



def test_exp_plans_that_stay_finite_out_of_the_safe_range_are_the_log_domain_plans():
    """Why ``method="exp"`` warns about non-finite plans only: a set whose scalings leave the
    range ``"auto"`` trusts (near under- or overflow, where the backward pass could overflow) but
    whose plan stays finite has the log-domain plan to float32 rounding (here 15 of 64 sets at
    epsilon 0.005, at most 1.05e-5 relative, as the sets in range: 1.04e-5)."""
    g = torch.Generator().manual_seed(0)
    scale = torch.rand(64, 1, 1, generator=g) * 3
    sim = (torch.randn(64, 30, 8, generator=g) * scale).clamp(-1, 1)  # float32
    P, ok = sinkhorn_exp(sim, epsilon=0.005, n_iter=50, return_ok=True)
    finite = torch.isfinite(P).all(dim=(1, 2))
    out_of_range = finite & ~ok
    assert int(out_of_range.sum()) >= 5 and bool(finite.all())
    L = sinkhorn(sim, epsilon=0.005, n_iter=50, method="log")
    err = (P - L).abs().amax(dim=(1, 2)) / L.abs().amax(dim=(1, 2))
    assert float(err[out_of_range].max()) < 1e-4

@pytest.mark.parametrize("method", ["exp", "log", "auto"])
def test_tol_plan_does_not_depend_on_the_batch(rng, method):
    sim, mask = _mixed_problem(rng)
    garbage = sim.clone()
    garbage[~mask] = 1e6
    P = sinkhorn(garbage, mask, epsilon=0.2, n_iter=500, method=method, tol=1e-7)
    for b, n in enumerate(mask.sum(1).tolist()):
        alone = sinkhorn(sim[b:b + 1, :n], None, epsilon=0.2, n_iter=500, method=method, tol=1e-7)
        torch.testing.assert_close(alone[0], P[b, :n], rtol=1e-12, atol=1e-15)
        assert torch.all(P[b, n:] == 0)


def test_tol_on_cpu_blocks(rng, monkeypatch):
    """Block-wise processing (one set per block here) gives the same plans."""
    import skset.ot._sinkhorn as sot

    sim, mask = _mixed_problem(rng)
    P = sinkhorn(sim, mask, epsilon=0.2, n_iter=300, tol=1e-6)
    monkeypatch.setattr(sot, "_CPU_BLOCK_BYTES", 1)
    torch.testing.assert_close(sinkhorn(sim, mask, epsilon=0.2, n_iter=300, tol=1e-6), P,
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("method", ["exp", "log", "auto"])
def test_tol_ignored_under_autograd(rng, method):
    """With grad enabled and an input that requires grad, exactly n_iter iterations run."""
    sim, mask = _problem(rng, lengths=(4, 2), p=3)
    fixed = sinkhorn(sim, mask, epsilon=0.5, n_iter=40, method=method)
    early = sinkhorn(sim, mask, epsilon=0.5, n_iter=40, method=method, tol=1e-3)
    assert not torch.equal(early, fixed)
    s = sim.clone().requires_grad_(True)
    P = sinkhorn(s, mask, epsilon=0.5, n_iter=40, method=method, tol=1e-3)
    torch.testing.assert_close(P.detach(), fixed, rtol=1e-12, atol=1e-15)
    (P * torch.randn_like(P)).sum().backward()
    assert torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    assert torch.autograd.gradcheck(
        lambda x: sinkhorn(x, mask, epsilon=0.5, n_iter=5, method=method, tol=1e-2), (s,))


def test_bad_tol():
    for tol in (-1.0, float("nan"), float("inf"), "1e-3"):
        with pytest.raises(ValueError, match="tol"):
            sinkhorn(torch.zeros(1, 2, 2), epsilon=1.0, tol=tol)


def test_position_log_weights_finite_and_row_normalised():
    from skset.ot import position_log_weights

    mask = torch.arange(6)[None] < torch.tensor([[6], [3]])
    for sigma in (0.5, 1e-3, 1e-30):
        L = position_log_weights(mask, 4, sigma, dtype=torch.float32)
        assert torch.isfinite(L).all() and (L <= 0).all()
        torch.testing.assert_close(L[mask].amax(1), torch.zeros(9))  # each row's best is 0
        assert torch.all(L[1, 3:] == 0)
    # up to the row shift it is log S
    L = position_log_weights(mask, 4, 0.5, dtype=torch.float64)
    logS = torch.log(position_weights(mask, 4, 0.5, dtype=torch.float64))
    d = (L - logS)[1, :3]
    torch.testing.assert_close(d, d[:, :1].expand_as(d))


def test_plans_that_cannot_exist_or_overflow_are_named():
    """A real element (or a support) whose pairs are all forbidden (-inf): no plan exists; a
    similarity over epsilon beyond float16's range: the log domain overflows too. Both gave a
    NaN plan silently; a single forbidden pair is still allowed."""
    inf = float("inf")
    with pytest.raises(ValueError, match="set 0 of the batch forbids"):
        sinkhorn(torch.tensor([[[-inf, -inf], [0.0, 1.0]]]), epsilon=0.5)
    with pytest.raises(ValueError, match="set 1 of the batch forbids"):
        sinkhorn(torch.tensor([[[0.0, 0.0], [0.0, 1.0]], [[-inf, 0.0], [-inf, 1.0]]]), epsilon=0.5)
    P = sinkhorn(torch.tensor([[[-inf, 0.0], [0.0, 1.0]]]), epsilon=0.5)
    assert torch.isfinite(P).all() and P[0, 0, 0] == 0
    # the padded row may be all -inf: it is no element
    P = sinkhorn(torch.tensor([[[0.0, 1.0], [-inf, -inf]]]), torch.tensor([[True, False]]), epsilon=0.5)
    assert torch.isfinite(P).all()
    K = torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(0))
    for method in ("auto", "log"):
        with pytest.raises(ValueError, match="not finite even in the log domain.*float16"):
            sinkhorn(K.half(), epsilon=1e-5, method=method)


def test_position_weights_name_bad_arguments_and_keep_empty_rows_at_zero():
    """A set without a real element gets weights 0 as padding does (0 / 0 made them NaN); a
    fractional or non-positive count of supports and a non-positive or NaN sigma are named."""
    from skset.ot import position_log_weights

    mask = torch.tensor([[True, True, False], [False, False, False]])
    for fn in (position_weights, position_log_weights):
        out = fn(mask, 3, 0.5)
        assert torch.isfinite(out).all() and (out[1] == 0).all()
        for bad in (2.5, 0, -1, True):
            with pytest.raises(ValueError, match="n_supports must be a positive integer"):
                fn(mask, bad, 0.5)
        for bad in (0.0, -1.0, float("nan"), "1"):
            with pytest.raises(ValueError, match="sigma must be a positive number"):
                fn(mask, 3, bad)
