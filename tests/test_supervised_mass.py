"""Per-element mass (``element_weight``) and unbalanced transport (``reg_m``) in supervised OTK.

The masses travel with the sets through ``SetNetworkEstimator``'s per-set side data (training
batches, validation, head refits, prediction batches). What is compared:

* uniform masses == no masses, bit for bit (fit and predictions);
* an element of mass 0 == the element removed (``window=1``, no positions): the predictions of a
  fitted model, the training from a given start (warm start), and the whole fit where the
  k-means initialisation cannot tell (elements on a few exact points, no Nystrom layer);
* k-mer masses (``window > 1``): the mean of the window's element masses, in the module and in
  the unsupervised initialisation;
* non-uniform masses change the predictions; bad masses raise a ValueError naming the set;
* ``sample_weight`` together with ``element_weight``; pickling (and models pickled before
  ``reg_m``); Pipeline metadata routing; Set Transformer / Deep Sets take no masses.
"""

import copy
import inspect
import pickle

import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import Pipeline

from skset import (
    DeepSetsClassifier,
    NystromFeatures,
    OTKClassifier,
    OTKRegressor,
    SetTransformerRegressor,
)
from skset._sets import pack, pack_weights
from skset._weighting import kmer_weights as kmer_masses
from skset.neural_network._otk import kmer_mass

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# no positions: an element of mass 0 still counts in the positions i/n (the docstring's exception)
KW = dict(n_components=5, n_supports=3, max_iter=2, batch_size=64, random_state=0,
          dtype="float64", device="cpu", position_sigma=None)
# the regressor with a fixed penalty and no validation split: a fit on these few sets whose
# chosen penalty or validated shrinkage gives the mean would leave the masses nothing to change
ESTS = [OTKClassifier(**KW), OTKRegressor(alpha=1e-3, early_stopping=False, **KW)]


def _ids(ests):
    return [type(e).__name__ for e in ests]


def _data(n=12, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(4, 9)), d)) for i in range(n)]
    return X, np.arange(n) % 2


def _y(est, y):
    return y if is_classifier(est) else y + 0.3 * np.arange(len(y))


def _out(est, X, ew=None):
    if is_classifier(est):
        return est.decision_function(X, element_weight=ew)
    return est.predict(X, element_weight=ew)


def _masses(X, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.1, 2.0, size=len(s)) for s in X]


def _zero_one(X, i=2, j=1):
    """Masses 1 except element ``j`` of set ``i`` (mass 0), and the sets with it removed."""
    ew = [np.ones(len(s)) for s in X]
    ew[i][j] = 0.0
    cut = [s if k != i else np.delete(s, j, axis=0) for k, s in enumerate(X)]
    return ew, cut


# ---------------------------------------------------------------------- uniform == none
@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_uniform_masses_are_no_masses(est, window):
    X, y = _data()
    y = _y(est, y)
    est = clone(est).set_params(window=window)
    plain = clone(est).fit(X, y)
    uni = clone(est).fit(X, y, element_weight=[np.full(len(s), 2.5) for s in X])
    ones = [np.ones(len(s)) for s in X]
    np.testing.assert_array_equal(_out(uni, X, ones), _out(plain, X))
    np.testing.assert_array_equal(uni.transform(X, element_weight=ones), plain.transform(X))
    assert uni.loss_curve_ == plain.loss_curve_


# ---------------------------------------------------------------------- mass 0 == removed
@pytest.mark.parametrize("reg_m", [None, 0.5])
@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_zero_mass_is_a_removed_element_at_prediction(est, reg_m):
    X, y = _data()
    model = clone(est).set_params(reg_m=reg_m).fit(X, _y(est, y), element_weight=_masses(X))
    ew, cut = _zero_one(X)
    np.testing.assert_allclose(_out(model, X, ew), _out(model, cut), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(model.transform(X, element_weight=ew), model.transform(cut),
                               rtol=1e-9, atol=1e-10)
    if is_classifier(model):
        np.testing.assert_allclose(model.predict_proba(X, element_weight=ew),
                                   model.predict_proba(cut), rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(model.predict(X, element_weight=ew), model.predict(cut))


@pytest.mark.parametrize("solver", ["alternating", "adam"])
@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_zero_mass_is_a_removed_element_in_training(est, solver):
    """From a given start (warm start, one batch): the Adam steps, the head refits and the loss
    are those of the sets with the element removed."""
    X, y = _data()
    y = _y(est, y)
    start = clone(est).set_params(solver=solver).fit(X, y).set_params(warm_start=True)
    ew, cut = _zero_one(X)
    zero = copy.deepcopy(start).fit(X, y, element_weight=ew)
    removed = copy.deepcopy(start).fit(cut, y)
    np.testing.assert_allclose(_out(zero, cut), _out(removed, cut), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(zero.loss_curve_, removed.loss_curve_, rtol=1e-10)
    for name, p in zero.module_.state_dict().items():
        np.testing.assert_allclose(p.numpy(), removed.module_.state_dict()[name].numpy(),
                                   rtol=1e-7, atol=1e-9, err_msg=name)
    plain = copy.deepcopy(start).fit(X, y)  # and the element did matter
    assert np.abs(_out(plain, cut) - _out(zero, cut)).max() > 1e-6


@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_zero_mass_is_a_removed_element_in_the_whole_fit(est):
    """Elements on 3 exact points and no Nystrom layer: the k-means of the initialisation finds
    the same 3 references whatever the weights (their order may differ, which the head follows),
    so the whole fit with a mass-0 element is the fit with the element removed."""
    rng = np.random.default_rng(0)
    pts = np.array([[0.0, 0.0], [1.0, 0.5], [-0.5, 1.0]])
    X = [pts[rng.integers(0, 3, size=int(rng.integers(4, 8)))] for _ in range(12)]
    y = _y(est, np.arange(12) % 2)
    X[2][1] = pts[(int(np.flatnonzero((pts == X[2][1]).all(1))[0]) + 1) % 3]
    e = clone(est).set_params(n_components=None, n_supports=3, solver="adam")
    ew, cut = _zero_one(X)
    zero = clone(e).fit(X, y, element_weight=ew)
    removed = clone(e).fit(cut, y)
    np.testing.assert_allclose(_out(zero, X, ew), _out(removed, cut), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(zero.loss_curve_, removed.loss_curve_, rtol=1e-6)


# ---------------------------------------------------------------------- k-mers
@pytest.mark.parametrize("dilation", [1, 2])
def test_kmer_mass_is_the_window_mean_in_module_and_initialisation(dilation):
    X, y = _data(10)  # 4-8 elements: with dilation 2 (span 5) a set of 4 has one k-mer
    ew = _masses(X)
    window = 3
    model = OTKClassifier(**{**KW, "window": window, "dilation": dilation}).fit(
        X, y, element_weight=ew)
    assert model.dilation_ == dilation and model.module_.dilation == dilation
    m = [w / w.sum() for w in ew]
    # numpy and torch k-mer masses agree, and are the window means
    km = kmer_masses(m, window, dilation)
    for w, k in zip(m, km):
        n = len(w)
        np.testing.assert_allclose(k, [w[np.minimum(i + dilation * np.arange(window), n - 1)]
                                       .mean() for i in range(max(n - 2 * dilation, 1))])
    Xp, M = pack(X, dtype=torch.float64)
    W = pack_weights(m, dtype=torch.float64)
    Wk = kmer_mass(W, window, dilation, M)
    for i, k in enumerate(km):
        np.testing.assert_allclose(Wk[i, :len(k)].numpy(), k, rtol=1e-12)
    # the module: Nystrom k-mer features, then the OTK layer with the k-mer masses
    net = model.module_
    with torch.no_grad():
        feats, Mk = net.nystrom(Xp, M)
        z = net.otk(feats, Mk, torch.where(Mk, Wk, 0.0)).flatten(1) - net.center
        z = z * (z.shape[1] ** 0.5 / z.norm(dim=1, keepdim=True))
        logits = net.head(z).numpy()
    manual = logits[:, 1] - logits[:, 0]  # two classes: the score of classes_[1]
    np.testing.assert_allclose(model.decision_function(X, element_weight=ew), manual,
                               rtol=1e-9, atol=1e-10)
    # the unsupervised initialisation: OTKEmbedding fitted with the k-mer masses (its centring
    # is the mean embedding under them)
    emb = model.embedding_
    refs = torch.as_tensor(emb.references_)
    raw = emb._raw_embed(model.nystrom_.transform(X), refs, km)
    np.testing.assert_allclose(emb.mean_, raw.mean(0), rtol=1e-9, atol=1e-12)
    assert not np.allclose(emb.mean_, emb._raw_embed(model.nystrom_.transform(X), refs).mean(0))


def test_nystrom_features_element_weight():
    X, _ = _data(8)
    kw = dict(n_components=4, window=2, kmer_coding="plain", dtype="float64", random_state=0)
    base = NystromFeatures(**kw).fit(X)
    uni = NystromFeatures(**kw).fit(X, element_weight=[np.full(len(s), 3.0) for s in X])
    np.testing.assert_array_equal(uni.anchors_, base.anchors_)
    ew = _masses(X)
    w = NystromFeatures(**kw).fit(X, element_weight=ew)
    # each set keeps its total n_i, shared by mass, in the weighted standardisation
    e = np.concatenate([len(m) * m / m.sum() for m in ew])
    np.testing.assert_allclose(w.mean_, np.average(np.concatenate(X), axis=0, weights=e))
    assert not np.allclose(w.anchors_, base.anchors_)
    with pytest.raises(ValueError, match="element_weight: set 1 has 2 weights"):
        NystromFeatures(**kw).fit(X, element_weight=[ew[0], np.ones(2), *ew[2:]])
    with pytest.raises(ValueError, match="2-D pool"):
        NystromFeatures(**kw).fit(np.concatenate(X), element_weight=ew)


# ---------------------------------------------------------------------- masses matter
@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_masses_change_the_model_and_its_predictions(est):
    X, y = _data()
    y = _y(est, y)
    ew = _masses(X)
    plain = clone(est).fit(X, y)
    assert np.abs(_out(plain, X, ew) - _out(plain, X)).max() > 1e-4
    weighted = clone(est).fit(X, y, element_weight=ew)
    assert np.abs(_out(weighted, X, ew) - _out(plain, X, ew)).max() > 1e-4
    assert not np.allclose(weighted.embedding_.references_, plain.embedding_.references_)


@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_reg_m_reaches_the_layer_and_changes_the_model(est):
    X, y = _data()
    y = _y(est, y)
    relaxed = clone(est).set_params(reg_m=0.3).fit(X, y)
    assert relaxed.module_.otk.reg_m == 0.3 and relaxed.embedding_.reg_m == 0.3
    plain = clone(est).fit(X, y)
    assert plain.module_.otk.reg_m is None
    assert np.abs(_out(relaxed, X) - _out(plain, X)).max() > 1e-4


# ---------------------------------------------------------------------- errors
def test_bad_masses_name_the_set():
    X, y = _data(6)
    good = [np.ones(len(s)) for s in X]
    cases = [(good[:5], "holds 5 entries but X holds 6 sets"),
             ([*good[:2], np.ones(len(X[2]) + 1), *good[3:]], "set 2 has .* weights but"),
             ([*good[:1], -good[1], *good[2:]], "set 1 contains negative"),
             ([*good[:3], np.full(len(X[3]), np.nan), *good[4:]], "set 3 contains NaN"),
             ([*good[:4], np.zeros(len(X[4])), good[5]], "set 4 is all zero")]
    est = OTKClassifier(**KW)
    for ew, match in cases:
        with pytest.raises(ValueError, match="OTKClassifier: element_weight:? " + match):
            est.fit(X, y, element_weight=ew)
    est.fit(X, y)
    for method in ("predict", "predict_proba", "decision_function", "transform"):
        for ew, match in cases:
            with pytest.raises(ValueError, match="element_weight:? " + match):
                getattr(est, method)(X, element_weight=ew)
    with pytest.raises(ValueError, match="set 4 is all zero"):
        est.score(X, y, element_weight=cases[-1][0])


def test_set_networks_take_no_element_weight():
    for cls in (SetTransformerRegressor, DeepSetsClassifier):
        for method in ("fit", "predict", "transform"):
            assert "element_weight" not in inspect.signature(getattr(cls, method)).parameters
    X, y = _data(6)
    with pytest.raises(TypeError, match="element_weight"):
        DeepSetsClassifier(hidden_size=4, max_iter=1, device="cpu").fit(
            X, y, element_weight=[np.ones(len(s)) for s in X])


# ---------------------------------------------------------------------- with sample_weight
@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_sample_weight_and_element_weight_together(est):
    """Weight 0 is the set removed (its masses with it), with early stopping too; other
    weights change the fit."""
    X, y = _data(16)
    y = _y(est, y)
    ew = _masses(X)
    w = np.ones(16)
    w[[3, 8]] = 0.0
    keep = np.flatnonzero(w)
    for extra in (dict(), dict(early_stopping=True, validation_fraction=0.25,
                               n_iter_no_change=2)):
        e = clone(est).set_params(**extra)
        zero = clone(e).fit(X, y, sample_weight=w, element_weight=ew)
        removed = clone(e).fit([X[i] for i in keep], y[keep],
                               element_weight=[ew[i] for i in keep])
        np.testing.assert_array_equal(_out(zero, X, ew), _out(removed, X, ew))
        assert zero.validation_scores_ == removed.validation_scores_
    sw = np.linspace(0.5, 2.0, 16)
    both = clone(est).fit(X, y, sample_weight=sw, element_weight=ew)
    only = clone(est).fit(X, y, element_weight=ew)
    assert np.abs(_out(both, X, ew) - _out(only, X, ew)).max() > 1e-5
    if is_classifier(both):  # score: accuracy of predict with the masses, weighted
        acc = np.average(both.predict(X, element_weight=ew) == y, weights=sw)
        assert both.score(X, y, sample_weight=sw, element_weight=ew) == pytest.approx(acc)


# ---------------------------------------------------------------------- persistence, routing
@pytest.mark.parametrize("est", ESTS, ids=_ids(ESTS))
def test_pickle_round_trip_and_models_pickled_before_reg_m(est):
    X, y = _data()
    ew = _masses(X)
    model = clone(est).set_params(window=2, reg_m=0.5).fit(X, _y(est, y), element_weight=ew)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(_out(loaded, X, ew), _out(model, X, ew))
    assert loaded.reg_m == 0.5
    old = clone(est).fit(X, _y(est, y))
    del old.__dict__["reg_m"]  # a model pickled before reg_m existed
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.reg_m is None
    np.testing.assert_array_equal(_out(loaded, X, ew), _out(old, X, ew))


def test_pipeline_metadata_routing():
    X, y = _data()
    ew, sw = _masses(X), np.linspace(0.5, 2.0, len(X))
    direct = OTKClassifier(**KW).fit(X, y, sample_weight=sw, element_weight=ew)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = (OTKClassifier(**KW).set_fit_request(sample_weight=True, element_weight=True)
               .set_predict_proba_request(element_weight=True)
               .set_transform_request(element_weight=True)  # Pipeline.fit asks the last step
               .set_score_request(sample_weight=True, element_weight=True))
        pipe = Pipeline([("otk", clf)]).fit(X, y, sample_weight=sw, element_weight=ew)
        np.testing.assert_array_equal(pipe.predict_proba(X, element_weight=ew),
                                      direct.predict_proba(X, element_weight=ew))
        assert pipe.score(X, y, sample_weight=sw, element_weight=ew) == direct.score(
            X, y, sample_weight=sw, element_weight=ew)


def test_training_warnings_point_at_the_callers_fit():
    X, y = _data(6)
    for est in (OTKClassifier(**{**KW, "max_iter": 1, "tol": 0.0}),
                DeepSetsClassifier(hidden_size=4, max_iter=1, device="cpu", random_state=0)):
        with pytest.warns(ConvergenceWarning) as rec:
            est.fit(X, y)
        assert {r.filename for r in rec if r.category is ConvergenceWarning} == {__file__}
