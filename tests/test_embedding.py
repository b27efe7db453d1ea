import warnings

import joblib
import numpy as np
import ot as pot
import pytest
import torch
from conftest import make_sets
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from skset import OTKEmbedding
from skset._sets import pack
from skset.nn import OTKLayer


def _fit(sets, **kw):
    kw.setdefault("dtype", "float64")
    kw.setdefault("random_state", 0)
    return OTKEmbedding(**kw).fit(sets)


def test_matches_naive_loop_with_pot(rng):
    """Each set's embedding equals sqrt(p) P^T x with P from POT's converged Sinkhorn."""
    sets = make_sets(rng, n_sets=6, d=3)
    otk = _fit(sets, n_supports=4, epsilon=0.3, sinkhorn_iter=3000, sinkhorn_tol=None,
               center=False, normalize=False)
    emb = otk.transform(sets)
    z = otk.references_[0]
    for s, e in zip(sets, emb):
        n = len(s)
        P = pot.bregman.sinkhorn_log(np.full(n, 1 / n), np.full(4, 0.25), -s @ z.T, reg=0.3,
                                     numItermax=100000, stopThr=1e-14)
        np.testing.assert_allclose(e, (2.0 * P.T @ s).ravel(), atol=1e-8)


def test_shape_feature_names_and_scaling(rng):
    sets = make_sets(rng, d=3)
    otk = _fit(sets, n_supports=4, n_references=2)
    out = otk.transform(sets)
    assert out.shape == (len(sets), 2 * 4 * 3) and out.dtype == np.float64
    assert otk.references_.shape == (2, 4, 3)
    assert len(otk.get_feature_names_out()) == 24
    # centred then scaled to norm sqrt(n_features_out)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), np.sqrt(24))
    raw = _fit(sets, n_supports=4, n_references=2, center=False, normalize=False)
    assert raw.transform(sets).dtype == np.float64
    assert OTKEmbedding(n_supports=2).fit(sets).transform(sets).dtype == np.float32


@pytest.mark.parametrize("kw", [{}, {"position_sigma": 0.5}, {"n_references": 3},
                                {"fit_method": "wasserstein"},
                                {"position_sigma": 0.5, "position_mode": "kernel"},
                                {"position_sigma": 0.5, "position_mode": "similarity"}])
def test_set_alone_equals_set_in_batch(rng, kw):
    sets = make_sets(rng, n_sets=10, d=3, low=1, high=30)
    otk = _fit(sets, n_supports=3, **kw)
    batch = otk.transform(sets)
    for i in (0, 3, 7):
        np.testing.assert_allclose(otk.transform([sets[i]])[0], batch[i], rtol=1e-9, atol=1e-12)
    tiny_budget = clone(otk).set_params(max_elements=5).fit(sets)
    np.testing.assert_allclose(tiny_budget.transform(sets), batch, rtol=1e-9, atol=1e-12)


def test_permutation_invariance_without_positions(rng):
    sets = make_sets(rng, d=3)
    otk = _fit(sets, n_supports=3)
    perm = [s[np.random.default_rng(1).permutation(len(s))] for s in sets]
    np.testing.assert_allclose(otk.transform(perm), otk.transform(sets), atol=1e-10)


def test_positions_change_embedding_of_reversed_sequence(rng):
    sets = make_sets(rng, d=3, low=8, high=20)
    otk = _fit(sets, n_supports=4, position_sigma=0.2)
    rev = [s[::-1] for s in sets]
    assert np.abs(otk.transform(rev) - otk.transform(sets)).max() > 1e-3


def test_kmeans_references_ignore_padding(rng):
    """Every support comes from real elements (the reference code put one on the padding)."""
    sets = [rng.normal(loc=5.0, size=(n, 2)) for n in (3, 30, 4, 25)]
    otk = _fit(sets, n_supports=5)
    assert np.all(np.linalg.norm(otk.references_[0], axis=1) > 2.0)


def test_wasserstein_barycenter_is_a_fixed_point(rng):
    sets = make_sets(rng, n_sets=8, d=2, low=5, high=12)
    otk = _fit(sets, n_supports=3, fit_method="wasserstein", barycenter_iter=200, sinkhorn_iter=50)
    z = torch.as_tensor(otk.references_)
    acc = torch.zeros(3, 2, dtype=torch.float64)
    for s in sets:
        layer = OTKLayer(2, 3, epsilon=otk.epsilon, sinkhorn_iter=50, references=z)
        P = layer.plans(torch.as_tensor(s)[None])[0, 0]
        acc += 3 * P.T @ torch.as_tensor(s)
    np.testing.assert_allclose((acc / len(sets)).detach().numpy(), otk.references_[0], atol=1e-4)


def test_several_references_assign_to_lowest_cost(rng):
    a = [rng.normal(loc=(4, 0), size=(int(n), 2)) for n in rng.integers(5, 15, 10)]
    b = [rng.normal(loc=(-4, 0), size=(int(n), 2)) for n in rng.integers(5, 15, 10)]
    otk = _fit(a + b, n_supports=3, n_references=2)
    assign = otk.assignments_
    assert len(set(assign[:10])) == 1 and len(set(assign[10:])) == 1 and assign[0] != assign[10]


def test_to_module_matches_transform(rng):
    sets = make_sets(rng, d=3)
    otk = _fit(sets, n_supports=3, n_references=2, position_sigma=0.3, center=False,
               normalize=False)
    layer = otk.to_module()
    X, M = pack(sets, dtype=torch.float64)
    with torch.no_grad():
        out = layer(X, M).reshape(len(sets), -1).numpy()
    np.testing.assert_allclose(out, otk.transform(sets), rtol=1e-9, atol=1e-12)


def test_transport_plan(rng):
    sets = make_sets(rng, d=3)
    otk = _fit(sets, n_supports=3, n_references=2)
    plans = otk.transport_plan(sets)
    for s, P in zip(sets, plans):
        assert P.shape == (2, len(s), 3)
        np.testing.assert_allclose(P.sum(1), 1 / 3, atol=1e-8)
        assert np.abs(P.sum(2) - 1 / len(s)).max() < 0.05


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 10.0])
def test_stable_over_epsilon_float32(rng, eps):
    sets = [10 * s for s in make_sets(rng, d=8)]
    out = OTKEmbedding(n_supports=5, epsilon=eps, random_state=0).fit(sets).transform(sets)
    assert np.isfinite(out).all()


def test_determinism_clone_pickle(rng, tmp_path):
    sets = make_sets(rng, d=3)
    a = _fit(sets, n_supports=3, random_state=5)
    b = clone(a).fit(sets)
    np.testing.assert_array_equal(a.transform(sets), b.transform(sets))
    joblib.dump(a, tmp_path / "m.joblib")
    c = joblib.load(tmp_path / "m.joblib")
    np.testing.assert_array_equal(a.transform(sets), c.transform(sets))


def test_errors(rng):
    sets = make_sets(rng, d=3)
    with pytest.raises(NotFittedError):
        OTKEmbedding().transform(sets)
    otk = _fit(sets, n_supports=3)
    with pytest.raises(ValueError, match="fitted on 3 features"):
        otk.transform([rng.normal(size=(4, 5))])
    with pytest.raises(ValueError, match="set 1 is empty"):
        otk.transform([sets[0], np.zeros((0, 3))])
    with pytest.raises(ValueError, match="epsilon"):
        OTKEmbedding(epsilon=0).fit(sets)
    with pytest.raises(ValueError, match="n_supports"):
        OTKEmbedding(n_supports=0).fit(sets)
    with pytest.raises(ValueError, match="fit_method"):
        OTKEmbedding(fit_method="x").fit(sets)
    with pytest.raises(ValueError, match="n_references=5 needs at least 5"):
        OTKEmbedding(n_references=5).fit(sets[:3])


# -- Wasserstein k-means assigns by transport cost, not by <P, K> --
def _two_groups(d, rng, n_sets=20):
    """Sets near e1 and sets near 3 (e1 + e2) / sqrt(2): the second group has the larger norm."""
    c1 = np.zeros(d)
    c1[0] = 1.0
    c2 = np.zeros(d)
    c2[:2] = 3.0 / np.sqrt(2.0)
    sets = [c + 0.1 * rng.normal(size=(int(rng.integers(10, 31)), d))
            for c in (c1, c2) for _ in range(n_sets)]
    return sets, np.repeat([0, 1], n_sets)


@pytest.mark.parametrize("fit_method", ["kmeans", "wasserstein"])
@pytest.mark.parametrize("d", [2, 8])
def test_several_references_do_not_favour_large_references(fit_method, d):
    """<P, K> grows with the reference's norm: the largest-similarity rule sent all 40 sets to
    the far reference (ARI 0); the transport cost separates the two groups."""
    from sklearn.metrics import adjusted_rand_score

    sets, groups = _two_groups(d, np.random.default_rng(d))
    otk = _fit(sets, n_supports=3, n_references=2, fit_method=fit_method)
    assert adjusted_rand_score(groups, otk.assignments_) == 1.0


def test_assignments_are_the_lowest_pot_transport_cost(rng):
    """Each set goes to the reference of lowest sum_ij P_ij ||x_i - z_j||^2, P the entropic plan
    of the squared Euclidean cost at 2 epsilon (= the embedding's plan of <x, z> at epsilon)."""
    d, eps = 3, 0.5
    sets = [rng.normal(loc=2.0 * rng.normal(size=d), scale=rng.uniform(0.3, 2.0),
                       size=(int(rng.integers(5, 20)), d)) for _ in range(30)]
    otk = _fit(sets, n_supports=4, n_references=3, epsilon=eps, sinkhorn_iter=500,
                sinkhorn_tol=None)
    z = otk.references_
    cost = np.empty((len(sets), 3))
    for i, s in enumerate(sets):
        for r in range(3):
            M = pot.dist(s, z[r])  # squared Euclidean
            P = pot.bregman.sinkhorn_log(np.full(len(s), 1 / len(s)), np.full(4, 0.25), M,
                                         reg=2 * eps, numItermax=100000, stopThr=1e-13)
            cost[i, r] = (P * M).sum()
    assert len(set(otk.assignments_)) == 3
    np.testing.assert_array_equal(otk.assignments_, cost.argmin(1))
    refs = torch.as_tensor(z)
    np.testing.assert_allclose(otk._costs(sets, refs), cost, rtol=1e-6, atol=1e-9)


# -- n_supports is capped at the number of distinct training elements --
def test_n_supports_capped_at_distinct_training_elements(rng):
    pts = rng.normal(size=(5, 3))
    sets = [pts[rng.integers(0, 5, size=8)] for _ in range(6)]  # 48 elements, 5 distinct
    with pytest.warns(UserWarning, match=r"n_supports=12 .*\(5\)"):
        otk = _fit(sets, n_supports=12)
    assert otk.n_supports_ == 5 and otk.references_.shape == (1, 5, 3)
    assert len(np.unique(otk.references_[0].round(8), axis=0)) == 5
    out = otk.transform(sets)
    assert out.shape == (6, 15) and len(otk.get_feature_names_out()) == 15
    for kw in ({"n_references": 2}, {"fit_method": "wasserstein"}, {"center": False}):
        with pytest.warns(UserWarning, match="n_supports"):
            capped = _fit(sets, n_supports=12, **kw)
        q = kw.get("n_references", 1)
        assert capped.n_supports_ == 5 and capped.transform(sets).shape == (6, q * 15)
    # no warning, nothing capped, at or below the count
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fit(sets, n_supports=5).n_supports_ == 5
    layer = otk.to_module()
    assert layer.n_supports == 5


def test_exp_sinkhorn_failure_names_dtype_and_remedy(rng):
    """In float64 the message must not blame the float32 range nor suggest dtype='float64'."""
    sets = [3 * s for s in make_sets(rng, n_sets=10, d=4, low=8, high=12)]
    far = [s + 10.0 for s in sets[:3]]
    otk = OTKEmbedding(n_supports=5, epsilon=1e-2, sinkhorn_method="exp", dtype="float64",
                       random_state=0)
    with pytest.raises(ValueError, match="float64") as err, \
            pytest.warns(RuntimeWarning, match="sinkhorn\\(method='exp'\\).*not finite"):
        otk.fit(sets).transform(far)  # fit (mean embedding) or transform, whichever fails first
    msg = str(err.value)
    assert "float32" not in msg and "dtype='float64'" not in msg
    assert "sinkhorn_method='log'" in msg and "'auto'" in msg
    # the same sets with the log-domain solver are fine
    assert np.isfinite(clone(otk).set_params(sinkhorn_method="auto").fit(sets).transform(far)).all()


def test_too_large_input_message_names_the_dtype_used(rng):
    """float64 gets float64's limit and name, however it is spelled, and no advice to use it."""
    from skset import NystromFeatures

    with pytest.raises(ValueError, match="too large for float64") as err:
        _fit([rng.normal(size=(5, 2)) * 1e200])
    assert "dtype='float64'" not in str(err.value)
    big = [rng.normal(size=(6, 2)) * 1e20]  # beyond float32's limit (1e15), fine in float64
    nf = NystromFeatures(n_components=3, dtype=np.float64, random_state=0).fit(big)
    assert np.isfinite(nf.transform(big)[0]).all()
    with pytest.raises(ValueError, match="too large for float32.*dtype='float64'"):
        NystromFeatures(n_components=3, dtype=np.float32).fit(big)


# -- Sinkhorn stopping: defaults close to convergence --
def _nystrom_case(kind):
    from skset import NystromFeatures
    from skset.datasets import load_japanese_vowels

    rng = np.random.default_rng(0)
    if kind == "vowels":
        sets = load_japanese_vowels(subset="train", return_X_y=True)[0][::3]
    elif kind == "random":
        sets = [rng.normal(size=(int(n), 6)) for n in rng.integers(10, 40, 90)]
    else:  # heavy-tailed element norms
        sets = [rng.normal(size=(int(n), 6)) * rng.lognormal(sigma=1.0, size=(int(n), 1))
                for n in rng.integers(10, 40, 90)]
    return NystromFeatures(n_components=64, random_state=0).fit(sets).transform(sets)


@pytest.mark.parametrize("kind", ["random", "vowels", "heavy-tailed norms"])
@pytest.mark.parametrize("eps", [0.5, 0.1])
def test_default_embedding_is_within_1_percent_of_converged(kind, eps):
    """Default settings: the raw embedding is within 1% (relative norm) of a 5,000-iteration
    solve on Nystrom features (10 fixed iterations were 6% to 40% off on most of these)."""
    from skset.nn.otk import otk_plans, otk_pool

    F = _nystrom_case(kind)
    otk = OTKEmbedding(epsilon=eps, center=False, normalize=False, random_state=0).fit(F)
    emb = otk.transform(F)
    X, M = pack(F, dtype=torch.float32)
    with torch.no_grad():
        P = otk_plans(X, M, torch.as_tensor(otk.references_), epsilon=eps, sinkhorn_iter=5000)
        ref = otk_pool(X, P).reshape(len(F), -1).numpy()
    assert np.linalg.norm(emb - ref) <= 0.01 * np.linalg.norm(ref)


def test_sinkhorn_tol_none_runs_sinkhorn_iter_iterations(rng):
    from skset.nn.otk import otk_plans, otk_pool

    sets = make_sets(rng, d=3)
    otk = _fit(sets, n_supports=4, epsilon=0.2, sinkhorn_iter=7, sinkhorn_tol=None,
               center=False, normalize=False)
    X, M = pack(sets, dtype=torch.float64)
    P = otk_plans(X, M, torch.as_tensor(otk.references_), epsilon=0.2, sinkhorn_iter=7)
    np.testing.assert_allclose(otk.transform(sets),
                               otk_pool(X, P).reshape(len(sets), -1).detach().numpy(),
                               rtol=1e-12, atol=1e-14)
    # with a tolerance the plans' rows are within it (columns exact)
    tight = clone(otk).set_params(sinkhorn_iter=5000, sinkhorn_tol=1e-9).fit(sets)
    for s, plan in zip(sets, tight.transport_plan(sets)):
        assert np.abs(plan[0].sum(1) - 1 / len(s)).sum() <= 1e-9
        np.testing.assert_allclose(plan[0].sum(0), 1 / 4, rtol=1e-12)
    with pytest.raises(ValueError, match="sinkhorn_tol"):
        _fit(sets, sinkhorn_tol=-1e-3)


def test_transform_on_threads_equals_one_thread():
    """On a CPU the length batches run side by side on the torch threads (each set in exactly
    one batch, written to its own row): the same embedding as one thread, in input order."""
    import torch

    from skset._threads import usable_cores
    from skset._torch import split_for_threads

    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(n, 6)) for n in rng.integers(1, 80, 150)]
    est = OTKEmbedding(n_supports=4, max_elements=512, random_state=0).fit(sets)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = est.transform(sets)
        torch.set_num_threads(2)
        two = est.transform(sets)
        batches = split_for_threads([np.arange(150)], "cpu", min_sets=8)
        if usable_cores() == 2:
            assert len(batches) == 4
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(two, one)  # the same batches: the same rounding
    assert sorted(np.concatenate(batches).tolist()) == list(range(150))
    # each row is its set's own embedding
    np.testing.assert_allclose(est.transform([sets[37]])[0], one[37], rtol=1e-6, atol=1e-7)


def test_transport_plan_refuses_a_non_finite_plan_as_transform_does():
    # where the exp-domain Sinkhorn overflows, transform names the cause; transport_plan
    # returned the NaN / inf plans silently
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 3)) for n in rng.integers(2, 12, size=30)]
    otk = OTKEmbedding(n_supports=4, epsilon=1e-3, sinkhorn_method="exp", position_sigma=None,
                       center=False, random_state=0).fit(X)
    big = [x * 50 for x in X]
    for method in (otk.transform, otk.transport_plan):
        with pytest.raises(ValueError, match="sinkhorn_method='exp'"):
            method(big)


def test_several_references_each_serve_a_set():
    # a reference whose group emptied was refitted on the worst-fitting set, which still
    # preferred another reference: the fit ended with a reference no set used (counts_ 0)
    rng = np.random.default_rng(2)
    sets = [rng.normal(size=(n, 3)) for n in (5, 7, 2, 4, 6, 3)]
    est = OTKEmbedding(n_supports=2, n_references=3, random_state=0, position_sigma=None).fit(sets)
    assert set(est.assignments_.tolist()) == {0, 1, 2} and (est.counts_.sum(1) > 0).all()
    for seed in range(12):
        r = np.random.default_rng(100 + seed)
        sets = [r.normal(size=(int(n), 2)) for n in r.integers(2, 8, 7)]
        est = OTKEmbedding(n_supports=2, n_references=3, random_state=seed,
                           position_sigma=None).fit(sets)
        assert (np.bincount(est.assignments_, minlength=3) > 0).all()


@pytest.mark.parametrize("kw", [{"normalize": False}, {}, {"center": False, "normalize": False},
                                {"fit_method": "wasserstein", "n_references": 2}])
def test_float32_features_far_from_zero(kw):
    """Features of 10,000 +- 1 in float32 give the embedding of the same sets at 0 (the plans
    are invariant to a shared shift of sets and references): the fit reads them less
    ``input_offset_`` in float64. Before, float32 similarities of such features rounded the
    plans to noise: the embedding was 91.5 away at a range of 0.9."""
    rng = np.random.default_rng(0)
    base = [rng.normal(size=(int(n), 3)) for n in rng.integers(5, 30, 40)]
    off = 1e4
    far = [b + off for b in base]
    e0 = OTKEmbedding(n_supports=4, random_state=0, **kw).fit(base)
    e1 = OTKEmbedding(n_supports=4, random_state=0, **kw).fit(far)
    assert e0.input_offset_ is None
    np.testing.assert_allclose(e1.input_offset_, np.concatenate(far).mean(0))
    q, p, _ = e1.references_.shape
    np.testing.assert_allclose(e1.references_, e0.references_ + off, atol=5e-3)
    part = off / np.sqrt(p * q) if kw.get("center") is False else 0.0
    np.testing.assert_allclose(e1.transform(far), e0.transform(base) + part, atol=2e-2)
    for a, b in zip(e1.transport_plan(far[:5]), e0.transport_plan(base[:5]), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-3)
    # a later chunk: the same update as at 0
    chunk = [rng.normal(size=(9, 3)) for _ in range(6)]
    e0.partial_fit(chunk)
    e1.partial_fit([c + off for c in chunk])
    np.testing.assert_allclose(e1.references_, e0.references_ + off, atol=5e-3)
    np.testing.assert_allclose(e1.transform(far), e0.transform(base) + part, atol=2e-2)


@pytest.mark.parametrize("kw", [{}, {"position_sigma": 0.5}, {"position_sigma": 0.5, "position_mode": "plan"},
                                {"position_sigma": 0.5, "center": False, "normalize": False}])
def test_float32_far_features_match_float64(kw):
    """At an offset of 1,000 the float32 embedding is float64's to float32's rounding of the
    offset, positions included (with positions each set's plan carries the offset in its own
    column sums, which the shift must not drop), and the serving module is transform."""
    from skset._sets import pack
    from skset.export import serving_module

    rng = np.random.default_rng(1)
    far = [rng.normal(size=(int(n), 3)) + 1e3 for n in rng.integers(5, 30, 30)]
    kw = dict(kw, n_supports=4, random_state=0, sinkhorn_tol=None, sinkhorn_iter=200)
    e32 = OTKEmbedding(**kw).fit(far)
    e64 = OTKEmbedding(dtype="float64", **kw).fit(far)
    assert e32.input_offset_ is not None and e64.input_offset_ is not None
    Z32, Z64 = e32.transform(far), e64.transform(far)
    np.testing.assert_allclose(Z32, Z64, atol=2e-3 * np.abs(Z64).max())
    X, M = pack(far, dtype=torch.float32)
    served = serving_module(e32)(X, M)[0].detach().numpy()
    np.testing.assert_allclose(served, Z32, atol=2e-3 * np.abs(Z64).max())


@pytest.mark.parametrize("kw", [{"reg_m": 1.0}, {"position_sigma": 0.5, "position_mode": "similarity"}])
def test_no_offset_where_a_shift_changes_the_plans(kw):
    """Unbalanced plans and similarity-scaled positions depend on a shared shift of the
    features: the sets are read as they are."""
    rng = np.random.default_rng(1)
    far = [rng.normal(size=(8, 3)) + 1e3 for _ in range(10)]
    assert OTKEmbedding(n_supports=3, random_state=0, **kw).fit(far).input_offset_ is None


def test_offset_from_the_sets_and_elements_that_count():
    """Sets of weight 0 and elements of mass 0 take no part in the offset, as in the rest of the
    fit: an outlier set of weight 0 (or an element of mass 0 in every set) at 1e5 took the offset
    away, and the float32 embedding of the sets at 1,000 was noise (2.25 off, range 4)."""
    rng = np.random.default_rng(3)
    sets = [rng.normal(size=(6, 2)) + 1000 for _ in range(20)]
    kw = dict(n_supports=3, position_sigma=None, random_state=0)
    ref = OTKEmbedding(**kw).fit(sets)
    outlier = OTKEmbedding(**kw).fit(sets + [rng.normal(size=(6, 2)) * 1e5],
                                     sample_weight=[1.0] * 20 + [0.0])
    massless = OTKEmbedding(**kw).fit([np.vstack([s, [[1e6, 1e6]]]) for s in sets],
                                      element_weight=[np.r_[np.ones(6), 0.0]] * 20)
    for e in (outlier, massless):
        np.testing.assert_array_equal(e.input_offset_, ref.input_offset_)
    np.testing.assert_array_equal(outlier.transform(sets), ref.transform(sets))
    e64 = OTKEmbedding(dtype="float64", **kw).fit(sets)
    np.testing.assert_allclose(outlier.transform(sets), e64.transform(sets), atol=1e-4)
    # weights count: twice the weight is the set twice, in the offset too
    w = np.r_[np.full(10, 2.0), np.ones(10)]
    twice = OTKEmbedding(**kw).fit(sets[:10] * 2 + sets[10:])
    np.testing.assert_allclose(OTKEmbedding(**kw).fit(sets, sample_weight=w).input_offset_,
                               twice.input_offset_, rtol=1e-12)


def test_plans_a_shift_changes_are_refused_after_a_fit_with_an_offset():
    """``reg_m`` (or similarity-scaled positions) set after a fit that took an offset: the
    shifted sets would give other plans (1.8 off in float64), so ``transform`` refuses, as
    ``to_module()`` does."""
    rng = np.random.default_rng(4)
    sets = [rng.normal(size=(6, 2)) + 100 for _ in range(10)]
    e = OTKEmbedding(n_supports=3, position_sigma=None, random_state=0).fit(sets)
    assert e.input_offset_ is not None
    Z = e.transform(sets)
    # the positions as set_params leaves them (the fitted position_sigma_ stays None): they
    # were read from position_sigma_ and let through, 23 off on sets at 50
    for kw in ({"reg_m": 1.0}, {"position_sigma": 0.5, "position_mode": "similarity"}):
        e.set_params(**kw)
        with pytest.raises(ValueError, match="refit"):
            e.transform(sets)
        e.set_params(reg_m=None, position_sigma=None, position_mode="kernel")
        np.testing.assert_array_equal(e.transform(sets), Z)


def test_offset_without_positions_whatever_the_mode_and_kept_by_a_refused_fit():
    """``position_mode`` without positions changes nothing, the offset included; a refit that
    raises leaves the fitted model's offset (it read its sets less the new one)."""
    rng = np.random.default_rng(2)
    base = [rng.normal(size=(8, 3)) for _ in range(10)]
    far = [b + 1e3 for b in base]
    e = OTKEmbedding(n_supports=3, position_sigma=None, position_mode="similarity",
                     random_state=0).fit(far)
    assert e.input_offset_ is not None
    before = OTKEmbedding(n_supports=3, random_state=0).fit(base)
    Z = before.transform(base)
    with pytest.raises(ValueError):
        before.fit(far, y=np.arange(3))  # one label per set: 10 expected
    assert before.input_offset_ is None
    np.testing.assert_array_equal(before.transform(base), Z)


def test_refit_after_positions_turned_off_takes_the_offset_as_a_fresh_fit():
    """A fit with similarity-scaled positions, then ``set_params(position_sigma=None)`` and a fit
    on far sets: the refit computes its offset for its own parameters (it had been refused,
    told to refit, by the check of the previous fit's ``position_sigma_``)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(6, 2)) for _ in range(10)]
    far = [x + 1e4 for x in X]
    kw = dict(n_supports=3, position_mode="similarity", random_state=0)
    e = OTKEmbedding(position_sigma=0.3, **kw).fit(X)
    e.set_params(position_sigma=None).fit(far)
    fresh = OTKEmbedding(position_sigma=None, **kw).fit(far)
    np.testing.assert_array_equal(e.input_offset_, fresh.input_offset_)
    np.testing.assert_array_equal(e.transform(far), fresh.transform(far))


def test_refused_partial_fit_leaves_float64_references_unchanged():
    """A chunk refused after the references' step began (non-finite plans): ``references_``
    keeps its values, and an array a user took from it earlier is not written into (the step
    wrote into the fitted array itself)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(6, 2)) for _ in range(10)]
    e = OTKEmbedding(n_supports=3, dtype="float64", epsilon=1e-4, random_state=0).fit(X)
    alias, before = e.references_, e.references_.copy()
    e.set_params(sinkhorn_method="exp")  # the solver may change after a fit; epsilon may not
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="non-finite"):
        e.partial_fit([x * 50 for x in X])
    np.testing.assert_array_equal(e.references_, before)
    e.set_params(sinkhorn_method="auto").partial_fit(X)
    np.testing.assert_array_equal(alias, before)
    assert not np.array_equal(e.references_, before)


def test_plan_mode_layer_reads_far_features_as_float64():
    """Positions applied to the plan (``position_mode="plan"``) leave a balanced plan: its
    similarities are read against centred references, as the kernel mode's."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 12, 3, generator=g, dtype=torch.float64) + 1e3
    layer = OTKLayer(3, 4, epsilon=0.5, sinkhorn_iter=20, position_sigma=0.5,
                     position_mode="plan").double()
    with torch.no_grad():
        layer.references.copy_(layer.references + 1e3)
        ref = layer(x, None)
        out = layer.float()(x.float(), None)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-3)


@pytest.mark.parametrize("kw", [{}, {"position_sigma": 0.5}, {"position_sigma": 0.5, "position_mode": "plan"},
                                {"n_references": 2, "fit_method": "wasserstein"}])
def test_to_module_reads_far_features_as_transform(kw):
    """The layer of a model with ``input_offset_`` reads its sets less it: in float32 at 1,000
    its raw embedding is ``transform``'s (``center=False, normalize=False``) of the same sets
    rounded to float32 (the layer's input; with positions each set's column sums carry the
    offset, so that rounding alone moves the embedding by 8e-3), and its plans are
    ``transport_plan``'s. Before, the layer read the input sets against the input-space
    references in float32: 0.69 away at 1,000 without positions, 122 at 1e4."""
    from skset._sets import pack

    rng = np.random.default_rng(3)
    far = [rng.normal(size=(int(n), 3)) + 1e3 for n in rng.integers(5, 20, 25)]
    est = OTKEmbedding(n_supports=4, random_state=0, center=False, normalize=False,
                       sinkhorn_tol=None, sinkhorn_iter=200, **kw).fit(far)
    assert est.input_offset_ is not None
    layer = est.to_module()
    X, M = pack(far, dtype=torch.float32)
    with torch.no_grad():
        out = layer(X, M).reshape(len(far), -1).numpy()
        plans = layer.plans(X, M).numpy()
    rounded = [s.astype(np.float32).astype(np.float64) for s in far]
    Z = est.transform(rounded)
    np.testing.assert_allclose(out, Z, atol=2e-6 * np.abs(Z).max())
    for i, P in enumerate(est.transport_plan(rounded[:4])):
        np.testing.assert_allclose(plans[i, :, : len(far[i])], P, atol=1e-5)
    # the references in the input space, the offset a buffer that follows the layer's dtype
    np.testing.assert_allclose(layer.references.detach().numpy() + est.input_offset_,
                               est.references_, atol=1e-3)
    assert layer.double().input_offset.dtype == torch.float64


def test_serving_module_without_positions_adds_the_offsets_exact_share():
    """Without positions every support pools mass 1/p, so the served embedding of far sets
    takes the offset's share exactly, as ``transform`` does: on the same float32-rounded sets
    the two agree to 1e-4 at 1,000 (the float32 pooled column of ones times the offset left
    0.0021)."""
    from skset._sets import pack
    from skset.export import serving_module

    rng = np.random.default_rng(0)
    far = [rng.normal(size=(int(n), 3)) + np.array([1e3, -300.0, 0.0])
           for n in rng.integers(3, 9, 20)]
    rounded = [s.astype(np.float32).astype(np.float64) for s in far]
    est = OTKEmbedding(n_supports=3, random_state=0, sinkhorn_tol=None, sinkhorn_iter=50).fit(far)
    module = serving_module(est)
    assert module.layer.references.shape[-1] == 3  # no column for a feature of ones
    X, M = pack(rounded, dtype=torch.float32)
    with torch.no_grad():
        served = module(X, M)[0].numpy()
    np.testing.assert_allclose(served, est.transform(rounded), atol=2e-4)


def test_unbalanced_plans_on_far_features_warn_in_float32():
    """No shift can spare ``reg_m``'s or similarity-scaled plans (a shift changes them): in
    float32 a fit on features far from zero says so, names the features, and points at the
    caller's line (float32 against float64 differed by 3.1 at a range of 2.6 at 10 spreads)."""
    rng = np.random.default_rng(1)
    sets = [rng.normal(size=(8, 3)) for _ in range(10)]
    far = [s + np.array([0.0, 1e3, 0.0]) for s in sets]
    for kw in ({"reg_m": 1.0}, {"position_sigma": 0.5, "position_mode": "similarity"}):
        with pytest.warns(UserWarning, match=r"features 1 sit more than 10 spreads") as rec:
            OTKEmbedding(n_supports=3, random_state=0, **kw).fit(far)
        assert {r.filename for r in rec} == {__file__}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            OTKEmbedding(n_supports=3, random_state=0, **kw).fit(sets)
            OTKEmbedding(n_supports=3, random_state=0, dtype="float64", **kw).fit(far)
            OTKEmbedding(n_supports=3, random_state=0).fit(far)  # shifted: nothing to say


def test_several_references_converge_and_keep_the_best_round():
    """Wasserstein k-means with several references starts each round from the previous
    references (each round drew a fresh k-means: 8 of 20 fits ran to the cap, the cost rising
    between rounds) and returns the round of lowest cost; a ``max_samples`` below ``n_supports``
    no longer gives supports repeated 1e-6 apart."""
    import warnings

    warnings.simplefilter("ignore")
    capped = 0
    for seed in range(8):
        r = np.random.default_rng(seed)
        X = [r.normal(size=(int(r.integers(5, 20)), 2)) for _ in range(30)]
        m = OTKEmbedding(n_supports=3, n_references=3, barycenter_iter=10, dtype="float64",
                         position_sigma=None, device="cpu", random_state=seed)
        totals, costs = [], m._costs
        m._costs = lambda s, z, masses=None, _c=costs, _t=totals: _t.append(_c(s, z, masses)) or _t[-1]
        m.fit(X)
        del m._costs
        capped += m.n_iter_ == 10
        final = np.asarray(m._costs(X, torch.as_tensor(m.references_), None))
        kept = final[np.arange(len(X)), m.assignments_].sum()
        assert any(np.isclose(kept, np.asarray(c)[np.arange(len(X)), m.assignments_].sum())
                   for c in totals)
    assert capped == 0
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(9, 2)) for _ in range(10)]
    z = OTKEmbedding(n_supports=6, max_samples=3, random_state=0).fit(X).references_[0]
    gaps = np.linalg.norm(z[:, None] - z[None], axis=-1)[np.triu_indices(6, 1)]
    assert gaps.min() > 1e-3


def test_a_barycenter_stopped_at_its_cap_warns():
    # it stopped at barycenter_iter silently (relative shift 2e-4 after 10 iterations here; it
    # converges in 16)
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(4, 9)), 3)) for _ in range(12)]
    kw = dict(fit_method="wasserstein", n_supports=3, epsilon=0.1, sinkhorn_tol=None,
              sinkhorn_iter=500, dtype="float64", random_state=0)
    with pytest.warns(ConvergenceWarning, match="barycenter_iter=10 .*still moving"):
        assert OTKEmbedding(**kw).fit(X).n_iter_ == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert OTKEmbedding(barycenter_iter=200, **kw).fit(X).n_iter_ < 200


@pytest.mark.parametrize("kw", [{"epsilon": 2.0}, {"position_mode": "similarity"},
                                {"position_sigma": 0.5}, {"reg_m": 1.0}])
def test_plan_parameters_changed_after_a_fit_are_refused(kw):
    """``set_params`` of a parameter the references and ``mean_`` were fitted with: transform,
    partial_fit and to_module embedded with the new value against the old fit (epsilon=2: the
    centred embedding's mean 0.26 instead of 3e-8; a stream's mean_ mixed both); now a
    ValueError names it. The Sinkhorn cap, tolerance and method may change."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 3)) for n in rng.integers(3, 9, 12)]
    e = OTKEmbedding(n_supports=3, position_sigma=0.3 if "position_mode" in kw else None,
                     random_state=0).fit(X)
    Z = e.transform(X)
    name = next(iter(kw))
    e.set_params(**kw)
    for call in (lambda: e.transform(X), lambda: e.partial_fit(X), e.to_module):
        with pytest.raises(ValueError, match=f"{name}=.*fitted with"):
            call()
    e.set_params(**{name: e._fitted_plan[name]})
    e.set_params(sinkhorn_iter=4000, sinkhorn_tol=1e-4, max_elements=1000)
    np.testing.assert_allclose(e.transform(X), Z, atol=1e-6)
    assert e.set_params(**kw).fit(X).transform(X).shape == Z.shape  # a refit takes the new value


def test_centring_switched_on_after_an_uncentred_fit_is_refused():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 3)) for n in rng.integers(3, 9, 12)]
    e = OTKEmbedding(n_supports=3, center=False, position_sigma=None, random_state=0).fit(X)
    e.set_params(normalize=False).transform(X)  # an output switch: allowed
    with pytest.raises(ValueError, match="center=True .fitted with False"):
        e.set_params(center=True).transform(X)
