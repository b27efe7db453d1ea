"""``partial_fit`` of NystromFeatures and OTKEmbedding: the first call is ``fit``; later calls
take one mini-batch k-means step (or one barycenter step) per chunk with counts."""

import copy

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from test_docstrings import documented_attributes

from skset import NystromFeatures, OTKEmbedding
from skset._streaming import minibatch_kmeans_step

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _sets(n, seed, d=3):
    """Class 1 has a second mode of elements at +2.5 (separable only by the distribution)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = []
    for c in y:
        m = int(rng.integers(6, 12))
        s = rng.normal(size=(m, d))
        if c:
            s[: m // 2] += 2.5
        X.append(s)
    return X, y


def _nf(**kw):
    return NystromFeatures(n_components=12, random_state=0, **kw)


def _otk(**kw):
    return OTKEmbedding(n_supports=4, epsilon=1.0, barycenter_iter=5, random_state=0, **kw)


def _chunks(X, k):
    edges = np.linspace(0, len(X), k + 1).astype(int)
    return [X[a:b] for a, b in zip(edges[:-1], edges[1:])]


ESTIMATORS = [_nf(), _otk(), _otk(fit_method="wasserstein"), _otk(n_references=2),
              _otk(n_references=2, fit_method="wasserstein", position_sigma=0.5)]
IDS = ["nystrom", "otk", "otk-wasserstein", "otk-2refs", "otk-2refs-wasserstein-pos"]


def _state(est):
    if isinstance(est, NystromFeatures):
        return est.anchors_
    return est.references_


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_two_calls_then_transform_like_fit(est):
    X, _ = _sets(40, 0)
    a, b = copy.deepcopy(est), copy.deepcopy(est)
    a.partial_fit(X[:20]).partial_fit(X[20:])
    b.fit(X)
    assert a.n_steps_ == 2 and b.n_steps_ == 1
    out_a, out_b = a.transform(X), b.transform(X)
    if isinstance(est, NystromFeatures):
        assert [o.shape for o in out_a] == [o.shape for o in out_b]
        assert all(np.isfinite(o).all() for o in out_a)
    else:
        assert out_a.shape == out_b.shape and np.isfinite(out_a).all()
    assert list(a.get_feature_names_out()) == list(b.get_feature_names_out())
    fitted = {k for k in vars(a) if k.endswith("_") and not k.startswith("_")}
    assert fitted <= documented_attributes(type(a))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_one_call_is_fit_and_fit_restarts(est):
    X, _ = _sets(40, 1)
    one = copy.deepcopy(est).partial_fit(X)
    ref = copy.deepcopy(est).fit(X)
    np.testing.assert_array_equal(_state(one), _state(ref))
    np.testing.assert_array_equal(one.counts_, ref.counts_)
    # a fit after partial_fit starts afresh
    streamed = copy.deepcopy(est).partial_fit(X[:20]).partial_fit(X[20:]).fit(X)
    np.testing.assert_array_equal(_state(streamed), _state(ref))
    assert streamed.n_steps_ == 1


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_partial_fit_after_fit_continues(est):
    X, _ = _sets(40, 2)
    a = copy.deepcopy(est).fit(X[:20]).partial_fit(X[20:])
    b = copy.deepcopy(est).partial_fit(X[:20]).partial_fit(X[20:])
    np.testing.assert_array_equal(_state(a), _state(b))
    assert not np.array_equal(_state(a), _state(copy.deepcopy(est).fit(X[:20])))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_same_chunk_again_barely_moves(est):
    """fit converged on a chunk is a fixed point of the k-means / barycenter step on it: a
    wrong update (a step of the wrong size or direction) would move it."""
    X, _ = _sets(30, 3)
    a = copy.deepcopy(est).fit(X)
    before = _state(a).copy()
    a.partial_fit(X)
    scale = np.abs(before).max()
    assert np.abs(_state(a) - before).max() < 0.05 * scale


def test_stream_converges():
    X, _ = _sets(240, 4)
    for est in (_nf(), _otk(), _otk(fit_method="wasserstein")):
        moves, prev = [], None
        for chunk in _chunks(X, 12):
            est.partial_fit(chunk)
            if prev is not None:
                moves.append(np.abs(_state(est) - prev).max())
            prev = _state(est).copy()
        assert np.mean(moves[-3:]) < 0.5 * np.mean(moves[:3]), (type(est).__name__, moves)


def test_stream_as_good_as_fit_for_a_linear_model():
    X, y = _sets(160, 5)
    Xt, yt = _sets(80, 6)
    scores = {}
    for how in ("fit", "stream"):
        nf, otk = _nf(), _otk()
        if how == "fit":
            F = nf.fit(X).transform(X)
            E = otk.fit(F).transform(F)
        else:
            for chunk in _chunks(X, 8):
                nf.partial_fit(chunk)
            F = nf.transform(X)
            for chunk in _chunks(F, 8):
                otk.partial_fit(chunk)
            E = otk.transform(F)
        clf = LogisticRegression(max_iter=2000).fit(E, y)
        scores[how] = clf.score(otk.transform(nf.transform(Xt)), yt)
    assert scores["stream"] >= 0.9 and scores["stream"] >= scores["fit"] - 0.05, scores


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_permutation_invariance_of_a_step(est):
    """Later calls: the order of the sets in a chunk and of the elements in a set (unordered
    sets: no position_sigma) do not change the update."""
    X, _ = _sets(40, 7)
    first = copy.deepcopy(est).fit(X[:20])
    rng = np.random.default_rng(0)
    chunk = X[20:]
    perm = [chunk[i] for i in rng.permutation(len(chunk))]
    if getattr(est, "position_sigma", None) is None:
        perm = [s[rng.permutation(len(s))] for s in perm]
    a = copy.deepcopy(first).partial_fit(chunk)
    b = copy.deepcopy(first).partial_fit(perm)
    np.testing.assert_allclose(_state(a), _state(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.counts_, b.counts_)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_weights_count_alike_across_calls(est):
    """A chunk with weights 2 updates as the chunk given twice (weights are not rescaled per
    call), and inputs are not modified."""
    X, _ = _sets(40, 8)
    first = copy.deepcopy(est).fit(X[:20])
    chunk = X[20:]
    kept = copy.deepcopy(chunk)
    sw = np.full(len(chunk), 2.0)
    ew = [np.linspace(1.0, 2.0, len(s)) for s in chunk]
    ew_kept = copy.deepcopy(ew)
    a = copy.deepcopy(first).partial_fit(chunk, sample_weight=sw)
    b = copy.deepcopy(first).partial_fit(chunk + chunk)
    np.testing.assert_allclose(_state(a), _state(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.counts_, b.counts_)
    copy.deepcopy(first).partial_fit(chunk, sample_weight=sw, element_weight=ew)
    for s, k in zip(chunk, kept):
        np.testing.assert_array_equal(s, k)
    for e, k in zip(ew, ew_kept):
        np.testing.assert_array_equal(e, k)
    np.testing.assert_array_equal(sw, 2.0)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_bad_input_raises_as_fit(est):
    X, _ = _sets(20, 9)
    fitted = copy.deepcopy(est).partial_fit(X)
    with pytest.raises(ValueError, match="features"):
        fitted.partial_fit([s[:, :2] for s in X])
    nan = [s.copy() for s in X]
    nan[3][1, 0] = np.nan
    empty = [*X[:2], np.empty((0, 3))]
    for bad in (nan, empty):
        with pytest.raises(ValueError) as from_fit:
            copy.deepcopy(est).fit(bad)
        with pytest.raises(ValueError) as from_stream:
            copy.deepcopy(fitted).partial_fit(bad)
        assert str(from_stream.value) == str(from_fit.value)


def test_random_anchors_stay_fixed():
    X, _ = _sets(40, 10)
    nf = _nf(anchors="random").partial_fit(X[:20])
    before = nf.anchors_.copy()
    nf.partial_fit(X[20:])
    np.testing.assert_array_equal(nf.anchors_, before)
    assert nf.n_steps_ == 2


def test_minibatch_step_against_a_loop():
    rng = np.random.default_rng(0)
    c, n = rng.normal(size=(4, 2)), np.array([3.0, 0.0, 1.0, 5.0])
    x, w = rng.normal(size=(30, 2)), rng.uniform(0.5, 2.0, 30)
    c_in, n_in = c.copy(), n.copy()
    got_c, got_n = minibatch_kmeans_step(c, n, x, w)
    lab = ((x[:, None] - c[None]) ** 2).sum(-1).argmin(1)
    for j in range(4):
        s = w[lab == j].sum()
        want = c[j] if s == 0 else (n[j] * c[j] + (w[lab == j, None] * x[lab == j]).sum(0)) / (
            n[j] + s)
        np.testing.assert_allclose(got_c[j], want, rtol=1e-12)
        assert got_n[j] == pytest.approx(n[j] + s)
    np.testing.assert_array_equal(c, c_in)
    np.testing.assert_array_equal(n, n_in)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_later_calls_do_not_depend_on_the_default_device(est):
    """As tests/test_device_safety.py for fit: every tensor of an update has its device."""
    import torch

    X, _ = _sets(30, 11)
    est = copy.deepcopy(est).set_params(device="cpu")
    with torch.device("meta"):
        est.partial_fit(X[:15]).partial_fit(X[15:])
    assert np.isfinite(_state(est)).all()


@pytest.mark.parametrize("est", ESTIMATORS[:3], ids=IDS[:3])
def test_a_saved_model_continues_the_stream(est):
    import io

    import skset

    X, _ = _sets(30, 12)
    a = copy.deepcopy(est).partial_fit(X[:15])
    buf = io.BytesIO()
    skset.save(a, buf)
    buf.seek(0)
    b = skset.load(buf)
    a.partial_fit(X[15:])
    b.partial_fit(X[15:])
    np.testing.assert_array_equal(_state(a), _state(b))
    assert b.n_steps_ == 2


def test_nystrom_on_a_pool_of_elements():
    rng = np.random.default_rng(13)
    P = rng.normal(size=(120, 3))
    nf = _nf().partial_fit(P[:60]).partial_fit(P[60:])
    assert nf.transform(P).shape == (120, 12) and nf.n_steps_ == 2
    assert nf.counts_.sum() == pytest.approx(120)
    with pytest.raises(ValueError, match="features"):
        nf.partial_fit(P[:, :2])


def test_the_first_chunk_weights_count_in_the_units_of_the_stream():
    # weights of 2 on the first chunk count twice its elements (the scale of the weights was
    # lost there, and the first chunk counted as if of weight 1), as OTKEmbedding counts them
    rng = np.random.default_rng(0)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 8)), 3)) for i in range(20)]
    n = sum(len(x) for x in X)
    for w, total in ((None, n), (2.0 * np.ones(20), 2 * n), (2.0, 2 * n),
                     (np.r_[np.ones(10), 2 * np.ones(10)],
                      sum(len(x) for x in X[:10]) + 2 * sum(len(x) for x in X[10:]))):
        for est in (_nf(), OTKEmbedding(n_supports=3, random_state=0)):
            assert est.partial_fit(X, sample_weight=w).counts_.sum() == pytest.approx(total)
