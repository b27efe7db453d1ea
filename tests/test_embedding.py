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
    otk = _fit(sets, n_supports=4, epsilon=0.3, sinkhorn_iter=3000, center=False,
               normalize=False)
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
                                {"fit_method": "wasserstein"}])
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
    otk = _fit(sets, n_supports=3, fit_method="wasserstein", max_iter=200, sinkhorn_iter=50)
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


def test_layer_from_estimator_matches_transform(rng):
    sets = make_sets(rng, d=3)
    otk = _fit(sets, n_supports=3, n_references=2, position_sigma=0.3, center=False,
               normalize=False)
    layer = OTKLayer.from_estimator(otk)
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
