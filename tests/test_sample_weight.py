"""``sample_weight`` in ``fit`` of every supervised set estimator (Set Transformer, Deep Sets,
supervised OTK).

The convention (``SetNetworkEstimator.fit``): the loss of a batch is the weighted mean
``sum_i w_i l_i / sum_i w_i`` of its sets' losses (scikit-learn's MLP), the fitted
standardisations are weighted, sets of weight 0 are left out. What is compared:

* integer weights == the sets repeated, exactly (allclose at 1e-9 in float64) when one batch holds
  every set: the whole fit of Set Transformer / Deep Sets; for supervised OTK the training from a
  given initialisation (a warm start): its unsupervised initialisation is fitted with the weights
  (checked separately), but its random draws (k-means++ starts, anchors) from a weighted pool
  differ from those from a pool with repeated sets;
* weight 0 == the set removed, exactly, for every estimator, with mini-batches and early stopping;
* equal weights (ones or any constant) == no weights, bit for bit;
* scaling all weights changes nothing with mini-batches (the per-batch normalisation);
* up-weighting a class moves the predicted probabilities towards it;
* bad weights raise a ValueError naming ``sample_weight``; inputs are not modified;
* Pipeline, cross_val_score and metadata routing pass the weights to ``fit``.
"""

import copy

import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone, is_classifier
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    OTKClassifier,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# float64 on the CPU, one batch for up to 64 sets
NN = dict(hidden_size=8, n_layers=1, max_iter=5, batch_size=64, random_state=0, dtype="float64",
          device="cpu")
OTKS = dict(n_components=6, n_supports=3, max_iter=3, batch_size=64, random_state=0,
            dtype="float64", device="cpu")
NETWORKS = [
    SetTransformerClassifier(n_heads=2, n_inducing=3, **NN),
    SetTransformerRegressor(n_heads=2, n_inducing=None, norm="set", residual="clean", **NN),
    DeepSetsClassifier(**NN),
    DeepSetsRegressor(pooling="mean", **NN),
    # the pooled skip's first fit (logistic / ridge on the pooled features) weighs the sets too
    DeepSetsClassifier(pooled_skip=True, **NN),
    SetTransformerRegressor(n_heads=2, pooled_skip=True, **NN),
]
OTK = [OTKClassifier(**OTKS), OTKRegressor(solver="adam", **OTKS)]
ALL = NETWORKS + OTK
CLASSIFIERS = [e for e in ALL if is_classifier(e)]
SOME = [NETWORKS[0], NETWORKS[3], OTK[1]]
TWO = [NETWORKS[0], OTK[1]]


def _ids(ests):
    return [type(e).__name__ + str(i) for i, e in enumerate(ests)]


def _data(n=12, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 8)), 3)) for i in range(n)]
    return X, np.arange(n) % 2


def _y(est, y):
    return y if is_classifier(est) else y + 0.3 * np.arange(len(y))


def _out(est, X):
    return est.predict_proba(X) if is_classifier(est) else est.predict(X)


def _repeat(X, y, counts):
    idx = np.repeat(np.arange(len(X)), counts)
    return [X[i] for i in idx], y[idx]


WEIGHTS = np.array([1, 1, 1, 2, 3, 1, 1, 1, 2, 1, 1, 1], dtype=float)


# ------------------------------------------------------------------ integer weights == repetition
# the pooled skip's penalty counts the sets as given (scikit-learn's C = 1): not repetition
EXACT = [e for e in NETWORKS if not e.get_params()["pooled_skip"]]


@pytest.mark.parametrize("est", EXACT, ids=_ids(EXACT))
def test_integer_weights_equal_repetition_full_batch(est):
    """One batch holds every set (batch_size >= n): a set of weight k trains exactly as k copies
    (initialisation and standardisation included), and the weights matter."""
    X, y = _data()
    y = _y(est, y)
    weighted = clone(est).fit(X, y, sample_weight=WEIGHTS)
    repeated = clone(est).fit(*_repeat(X, y, WEIGHTS.astype(int)))
    plain = clone(est).fit(X, y)
    Xt, _ = _data(6, seed=1)
    np.testing.assert_allclose(_out(weighted, Xt), _out(repeated, Xt), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weighted.loss_curve_, repeated.loss_curve_, rtol=1e-9)
    np.testing.assert_allclose(weighted.mean_, repeated.mean_, rtol=1e-12)
    np.testing.assert_allclose(weighted.scale_, repeated.scale_, rtol=1e-12)
    if not is_classifier(est):
        np.testing.assert_allclose(weighted.y_mean_, np.average(y, weights=WEIGHTS))
        np.testing.assert_allclose(weighted.y_mean_, repeated.y_mean_)
        np.testing.assert_allclose(weighted.y_scale_, repeated.y_scale_)
    assert np.abs(_out(weighted, Xt) - _out(plain, Xt)).max() > 1e-4


@pytest.mark.parametrize("est", OTK, ids=_ids(OTK))
def test_otk_integer_weights_equal_repetition_from_a_given_start(est):
    """Supervised OTK's training (Adam steps and, for the alternating solver, the weighted head
    refits) from a fitted model (warm start): weights == repetition. Its whole fit is not compared:
    the unsupervised initialisation draws at random from the (weighted or repeated) pool, and the
    draws differ."""
    X, y = _data()
    y = _y(est, y)
    for solver in ("alternating", "adam"):
        start = clone(est).set_params(solver=solver).fit(X, y).set_params(warm_start=True)
        weighted = copy.deepcopy(start).fit(X, y, sample_weight=WEIGHTS)
        repeated = copy.deepcopy(start).fit(*_repeat(X, y, WEIGHTS.astype(int)))
        plain = copy.deepcopy(start).fit(X, y)
        np.testing.assert_allclose(_out(weighted, X), _out(repeated, X), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(weighted.loss_curve_, repeated.loss_curve_, rtol=1e-8)
        assert np.abs(_out(weighted, X) - _out(plain, X)).max() > 1e-5


@pytest.mark.parametrize("est", OTK, ids=_ids(OTK))
def test_otk_initialisation_is_fitted_with_the_weights(est):
    """The unsupervised NystromFeatures and OTKEmbedding that start supervised OTK are fitted with
    the sets' weights (and differ from the unweighted fits)."""
    X, y = _data()
    model = clone(est).set_params(max_iter=1).fit(X, _y(est, y), sample_weight=WEIGHTS)
    fitted = model.nystrom_  # the map it chose (on the labels), given explicitly
    nys = clone(fitted).set_params(
        standardize=fitted.standardize_, normalize=fitted.normalize_, keep_norm=fitted.keep_norm_,
        bandwidth=fitted.bandwidth_ if fitted.normalize_ else fitted.relative_bandwidth_,
    ).fit(X, sample_weight=WEIGHTS)
    np.testing.assert_array_equal(nys.anchors_, model.nystrom_.anchors_)
    emb = clone(model.embedding_).fit(nys.transform(X), sample_weight=WEIGHTS)
    np.testing.assert_array_equal(emb.references_, model.embedding_.references_)
    unweighted = clone(model.embedding_).fit(nys.transform(X))
    assert not np.array_equal(unweighted.references_, model.embedding_.references_)


# ----------------------------------------------------------------------- weight 0 == set removed
@pytest.mark.parametrize("est", ALL, ids=_ids(ALL))
def test_zero_weight_equals_removal(est):
    """With mini-batches (batch_size=4) and with early stopping (the split is drawn among the sets
    of positive weight): bit-identical predictions."""
    X, y = _data(16)
    y = _y(est, y)
    w = np.ones(16)
    w[[2, 7, 9]] = 0
    keep = np.flatnonzero(w)
    for extra in (dict(batch_size=4), dict(early_stopping=True, validation_fraction=0.25,
                                           n_iter_no_change=2)):
        e = clone(est).set_params(**extra)
        zero = clone(e).fit(X, y, sample_weight=w)
        removed = clone(e).fit([X[i] for i in keep], y[keep])
        np.testing.assert_array_equal(_out(zero, X), _out(removed, X))
        assert zero.loss_curve_ == removed.loss_curve_
        assert zero.validation_scores_ == removed.validation_scores_
        # the sets left out are not the same as the sets kept
        other = clone(e).fit(X[:13], y[:13])
        assert not np.array_equal(_out(zero, X), _out(other, X))
    if is_classifier(est):  # classes_ come from all of y, as in scikit-learn
        w2 = np.where(y == 1, 0.0, 1.0)
        w2[:2] = 1.0  # keep one set of class 1 (cross-entropy needs no more)
        np.testing.assert_array_equal(clone(est).fit(X, y, sample_weight=w2).classes_, [0, 1])


# -------------------------------------------------------------------- equal weights == no weights
@pytest.mark.parametrize("est", ALL, ids=_ids(ALL))
def test_equal_weights_equal_no_weights(est):
    X, y = _data()
    y = _y(est, y)
    est = clone(est).set_params(batch_size=4)
    plain = clone(est).fit(X, y)
    for w in (np.ones(len(X)), np.full(len(X), 3.5), 2.0):
        np.testing.assert_array_equal(_out(clone(est).fit(X, y, sample_weight=w), X),
                                      _out(plain, X))


@pytest.mark.parametrize("est", SOME, ids=_ids(SOME))
def test_scaled_weights_give_the_same_fit_with_mini_batches(est):
    """The loss of each batch is normalised by its total weight: multiplying every weight by 7
    changes nothing, also with several batches per epoch (a loss divided by the number of sets
    would take 7 times larger steps)."""
    X, y = _data(16)
    y = _y(est, y)
    est = clone(est).set_params(batch_size=4)
    w = np.linspace(0.5, 3.0, 16)
    a = clone(est).fit(X, y, sample_weight=w)
    b = clone(est).fit(X, y, sample_weight=7 * w)
    np.testing.assert_allclose(_out(a, X), _out(b, X), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, rtol=1e-8)
    c = clone(est).fit(X, y, sample_weight=w[::-1])
    assert np.abs(_out(a, X) - _out(c, X)).max() > 1e-5


# ------------------------------------------------------------------ weights move the predictions
@pytest.mark.parametrize("est", CLASSIFIERS, ids=_ids(CLASSIFIERS))
def test_upweighting_a_class_shifts_predictions_towards_it(est):
    """Labels unrelated to the sets: on new sets the (weighted) class prior decides. OTK's head
    gets a strong penalty, or it fits the training labels set by set rather than the prior."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 3)) for _ in range(24)]
    X_new = [rng.normal(size=(int(rng.integers(3, 8)), 3)) for _ in range(24)]
    y = rng.permutation(np.arange(24) % 2)
    if isinstance(est, OTKClassifier):
        est = clone(est).set_params(max_iter=2, alpha=1.0)
    else:
        est = clone(est).set_params(max_iter=10, learning_rate_init=0.01)
    p_plain = clone(est).fit(X, y).predict_proba(X_new)[:, 1].mean()
    for cls, sign in ((1, 1), (0, -1)):
        w = np.where(y == cls, 8.0, 1.0)
        p = clone(est).fit(X, y, sample_weight=w).predict_proba(X_new)[:, 1].mean()
        assert sign * (p - p_plain) > 0.1, (cls, p, p_plain)


def test_weighted_validation_scores_match_scikit_learn():
    """The early-stopping scores with weights are scikit-learn's weighted accuracy and R^2."""
    rng = np.random.default_rng(0)
    w = rng.uniform(0.1, 2.0, 30)
    logits = torch.as_tensor(rng.normal(size=(30, 3)))
    target = torch.as_tensor(rng.integers(0, 3, 30))
    acc = SetTransformerClassifier._val_score(logits, target, torch.as_tensor(w))
    assert acc == pytest.approx(accuracy_score(target, logits.argmax(1), sample_weight=w))
    assert acc != pytest.approx(accuracy_score(target, logits.argmax(1)))
    for shape in ((30, 1), (30, 2)):
        out, t = rng.normal(size=shape), rng.normal(size=shape)
        r2 = DeepSetsRegressor._val_score(torch.as_tensor(out), torch.as_tensor(t),
                                          torch.as_tensor(w))
        assert r2 == pytest.approx(r2_score(t, out, sample_weight=w))
        assert r2 != pytest.approx(r2_score(t, out))


@pytest.mark.parametrize("est", TWO, ids=_ids(TWO))
def test_early_stopping_with_weights_is_deterministic(est):
    X, y = _data(20)
    y = _y(est, y)
    est = clone(est).set_params(early_stopping=True, validation_fraction=0.3, max_iter=4)
    w = np.linspace(0.2, 2.0, 20)
    a = clone(est).fit(X, y, sample_weight=w)
    b = clone(est).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(_out(a, X), _out(b, X))
    assert a.validation_scores_ == b.validation_scores_ and len(a.validation_scores_) >= 1
    c = clone(est).fit(X, y)
    assert a.validation_scores_ != c.validation_scores_


# --------------------------------------------------------------------------------- bad weights
@pytest.mark.parametrize("est", ALL, ids=_ids(ALL))
@pytest.mark.parametrize("w, match", [
    (np.ones(11), r"sample_weight.*\(11,\), expected \(12,\)"),
    (np.r_[-1.0, np.ones(11)], "Negative values"),
    (np.r_[np.nan, np.ones(11)], "NaN"),
    (np.r_[np.inf, np.ones(11)], "infinity"),
    (np.zeros(12), "at least one non-zero"),
    (np.ones((12, 1)), "1D array"),
])
def test_bad_weights_are_rejected(est, w, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match) as info:
        clone(est).fit(X, _y(est, y), sample_weight=w)
    assert type(est).__name__ in str(info.value) and "sample_weight" in str(info.value)


def test_inputs_are_not_modified():
    X, y = _data()
    w = WEIGHTS.copy()
    w[0] = 0.0
    X0, y0, w0 = copy.deepcopy(X), y.copy(), w.copy()
    for est in ALL:
        clone(est).fit(X, _y(est, y), sample_weight=w)
        assert all(np.array_equal(a, b) for a, b in zip(X, X0))
        np.testing.assert_array_equal(y, y0)
        np.testing.assert_array_equal(w, w0)


# ------------------------------------------------------------------- Pipeline, CV and routing
def _manual_cv_scores(est, X, y, w, cv, weighted_score=False):
    scores = []
    for tr, te in cv.split(X):
        m = clone(est).fit([X[i] for i in tr], y[tr], sample_weight=w[tr])
        scores.append(m.score([X[i] for i in te], y[te],
                              sample_weight=w[te] if weighted_score else None))
    return np.array(scores)


def test_pipeline_and_cross_val_score_pass_sample_weight():
    X, y = _data(16)
    w = np.linspace(0.2, 3.0, 16)
    est = NETWORKS[0]
    pipe = make_pipeline(clone(est)).fit(X, y, settransformerclassifier__sample_weight=w)
    direct = clone(est).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(pipe.predict_proba(X), direct.predict_proba(X))
    assert not np.array_equal(pipe.predict_proba(X), clone(est).fit(X, y).predict_proba(X))

    cv = KFold(2)
    scores = cross_val_score(clone(est), X, y, cv=cv, params={"sample_weight": w})
    np.testing.assert_array_equal(scores, _manual_cv_scores(est, X, y, w, cv))


@pytest.mark.parametrize("est", TWO, ids=_ids(TWO))
def test_metadata_routing_requests_sample_weight(est):
    """``set_fit_request`` comes from the ``fit`` signature; with routing enabled the weights
    reach ``fit`` through cross_val_score and Pipeline only when requested."""
    X, y = _data(16)
    y = _y(est, y)
    w = np.linspace(0.2, 3.0, 16)
    cv = KFold(2)
    expected = _manual_cv_scores(est, X, y, w, cv)
    with sklearn.config_context(enable_metadata_routing=True):
        with pytest.raises(UnsetMetadataPassedError):
            cross_val_score(clone(est), X, y, cv=cv, params={"sample_weight": w})
        requested = clone(est).set_fit_request(sample_weight=True)
        with pytest.raises(UnsetMetadataPassedError):  # the scorer wants to know too
            cross_val_score(requested, X, y, cv=cv, params={"sample_weight": w})
        requested.set_score_request(sample_weight=False)
        scores = cross_val_score(requested, X, y, cv=cv, params={"sample_weight": w})
        np.testing.assert_array_equal(scores, expected)
        weighted_scores = cross_val_score(clone(requested).set_score_request(sample_weight=True),
                                          X, y, cv=cv, params={"sample_weight": w})
        np.testing.assert_array_equal(weighted_scores,
                                      _manual_cv_scores(est, X, y, w, cv, weighted_score=True))
        pipe = make_pipeline(clone(requested)).fit(X, y, sample_weight=w)
        np.testing.assert_array_equal(_out(pipe, X),
                                      _out(clone(est).fit(X, y, sample_weight=w), X))


def test_stream_counts_are_in_the_units_of_every_element():
    """``counts_`` (the weight a stream's later chunks are measured against) counts every
    element in the units of the weights: a reference of several whose sets all weigh 0.5 of the
    largest counted them as 1 each (48 for 24), and a fit whose elements were sampled
    (``max_samples``) counted the sample (50 for 200 elements)."""
    from skset import NystromFeatures, OTKEmbedding

    rng = np.random.RandomState(0)
    X = [rng.randn(8, 2) + 5 * (i % 2) for i in range(6)]
    sw = np.array([2.0, 1, 1, 1, 1, 1])
    P = {"n_supports": 2, "n_references": 2, "random_state": 0, "dtype": "float64"}
    m = OTKEmbedding(**P).fit(X, sample_weight=sw)
    np.testing.assert_allclose(m.counts_.sum(1), [8 * sw[m.assignments_ == r].sum() for r in range(2)])
    np.testing.assert_allclose(OTKEmbedding(**P).fit([X[0], *X]).counts_, m.counts_)
    a = OTKEmbedding(**P).fit(X[:4]).partial_fit(X, sample_weight=sw)
    b = OTKEmbedding(**P).fit(X[:4]).partial_fit([X[0], *X])
    np.testing.assert_allclose(a.references_, b.references_, atol=1e-12)
    big = [rng.randn(50, 2) for _ in range(4)]
    for est in (NystromFeatures(n_components=3, max_samples=50, window=1, random_state=0),
                OTKEmbedding(n_supports=3, max_samples=50, random_state=0)):
        est.fit(big)
        assert est.counts_.sum() == pytest.approx(200.0)
        est.partial_fit([rng.randn(50, 2)])
        assert est.counts_.sum() == pytest.approx(250.0)


def test_weights_targets_and_affinities_in_bfloat16_are_read_as_their_values():
    """Tensors in a dtype numpy lacks (bfloat16) as ``sample_weight``, element masses, a
    regressor's targets or a precomputed affinity are read as their float values (a torch
    ``TypeError`` before: numpy cannot hold bfloat16)."""
    import skset
    from skset.cluster import EigengapSpectralClustering

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 7)), 3)) for _ in range(12)]
    sw = torch.tensor(rng.integers(1, 4, size=12), dtype=torch.bfloat16)  # exact in bfloat16
    masses = [torch.ones(len(x), dtype=torch.bfloat16) * 2 for x in X]
    est = skset.OTKEmbedding(n_supports=2, random_state=0)
    a = clone(est).fit(X, sample_weight=sw, element_weight=masses).transform(X)
    b = clone(est).fit(X, sample_weight=sw.double().numpy(),
                       element_weight=[m.double().numpy() for m in masses]).transform(X)
    np.testing.assert_array_equal(a, b)
    y = torch.tensor(rng.normal(size=12), dtype=torch.bfloat16)
    reg = skset.DeepSetsRegressor(max_iter=2, random_state=0)
    np.testing.assert_array_equal(clone(reg).fit(X, y, sample_weight=sw).predict(X),
                                  clone(reg).fit(X, y.float().numpy(), sw.float().numpy()).predict(X))
    A = torch.tensor(np.exp(-rng.random((10, 10))), dtype=torch.bfloat16)
    A = (A + A.T) / 2
    esc = EigengapSpectralClustering(affinity="precomputed", random_state=0)
    np.testing.assert_array_equal(clone(esc).fit(A).labels_, clone(esc).fit(A.double().numpy()).labels_)


def test_zero_weight_set_takes_no_part_in_the_constant_thresholds():
    """A set of weight 0 with extreme values does not turn a varying target or feature into a
    'constant' one (the thresholds read the magnitude of every set, weight 0 included)."""
    from skset import DeepSetsClassifier, DeepSetsRegressor

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) for _ in range(12)]
    y = 1e-3 * rng.normal(size=12)
    w = np.ones(12)
    w[0] = 0.0
    y_far = y.copy()
    y_far[0] = 1e12
    kw = dict(hidden_size=8, max_iter=2, early_stopping=False, random_state=0, device="cpu")
    a = DeepSetsRegressor(**kw).fit(X, y_far, sample_weight=w)
    b = DeepSetsRegressor(**kw).fit(X[1:], y[1:])
    np.testing.assert_allclose(a.y_scale_, b.y_scale_)
    X_far = [x.copy() for x in X]
    X_far[0][:, 1] = 1e12
    labels = np.arange(12) % 2
    a = DeepSetsClassifier(**kw).fit(X_far, labels, sample_weight=w)
    b = DeepSetsClassifier(**kw).fit(X[1:], labels[1:])
    np.testing.assert_allclose(a.scale_, b.scale_)
