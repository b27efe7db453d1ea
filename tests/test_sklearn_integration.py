"""skset estimators inside scikit-learn's machinery: searches in worker processes and threads equal
the sequential ones, pandas output of single estimators, pipelines and unions, metadata routing
through pipelines, unions and searches, clone / get_params / set_params / repr on nested models.
"""

import joblib
import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError, UnsetMetadataPassedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import FeatureUnion, Pipeline

from skset import (
    ABCClusterer,
    DeepSetsClassifier,
    DeepSetsRegressor,
    DilatedKernelFeatures,
    EigengapSpectralClustering,
    NystromFeatures,
    OTKClassifier,
    OTKEmbedding,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NN = dict(hidden_size=8, max_iter=2, random_state=0, device="cpu")
OTKS = dict(n_components=4, n_supports=2, max_iter=2, random_state=0, device="cpu")


def _sets(n=16, seed=0, shift=0.5):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=shift * (i % 2), size=(int(rng.integers(3, 8)), 3)) for i in range(n)]
    return X, np.arange(n) % 2


def _y(est, y):
    return y + 0.5 if is_regressor(est) else y


def _otk_pipeline():
    return Pipeline([("nys", NystromFeatures(n_components=6, random_state=0, device="cpu")),
                     ("otk", OTKEmbedding(n_supports=2, random_state=0, device="cpu")),
                     ("clf", LogisticRegression())])


def _out(model, X):
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


def _assert_same_search(search, reference, X):
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"],
                                  reference.cv_results_["mean_test_score"])
    assert search.best_params_ == reference.best_params_
    np.testing.assert_array_equal(_out(search.best_estimator_, X), _out(reference.best_estimator_, X))


# ----------------------------------------------------------------------------- processes and threads
def test_pipeline_grid_search_in_processes_and_threads_equals_the_sequential_one():
    """GridSearchCV of an OTK pipeline gives the same scores, best parameters and best model with
    n_jobs=2 (loky processes), under joblib's threading backend and with n_jobs=1."""
    X, y = _sets(20, shift=0.3)
    grid = {"otk__epsilon": [0.1, 1.0], "otk__n_supports": [2, 3]}

    def search(**kw):
        return GridSearchCV(_otk_pipeline(), grid, cv=2, scoring="neg_log_loss", **kw).fit(X, y)

    reference = search(n_jobs=1)
    assert len(set(reference.cv_results_["mean_test_score"])) > 1  # the grid points differ
    _assert_same_search(search(n_jobs=2), reference, X)
    with joblib.parallel_backend("threading", n_jobs=2):
        _assert_same_search(search(), reference, X)


@pytest.mark.parametrize("est, grid", [
    (DeepSetsClassifier(**NN), {"alpha": [1e-4, 1e-1]}),
    (SetTransformerRegressor(n_heads=2, n_inducing=3, **NN), {"hidden_size": [4, 8]}),
    (OTKClassifier(**OTKS), {"epsilon": [0.1, 1.0]}),
], ids=["DeepSetsClassifier", "SetTransformerRegressor", "OTKClassifier"])
def test_network_search_and_cross_val_score_in_processes_and_threads(est, grid):
    """A set network's GridSearchCV and cross_val_score give the same results with n_jobs=2
    (loky processes), under joblib's threading backend and with n_jobs=1."""
    X, y = _sets(16)
    y = _y(est, y)
    sc = None if is_regressor(est) else "neg_log_loss"  # accuracy: 0.5 whatever the fit
    reference = GridSearchCV(est, grid, cv=2, scoring=sc).fit(X, y)
    assert len(set(reference.cv_results_["mean_test_score"])) > 1
    _assert_same_search(GridSearchCV(est, grid, cv=2, scoring=sc, n_jobs=2).fit(X, y), reference, X)
    scores = cross_val_score(est, X, y, cv=2, scoring=sc)
    np.testing.assert_array_equal(cross_val_score(est, X, y, cv=2, scoring=sc, n_jobs=2), scores)
    with joblib.parallel_backend("threading", n_jobs=2):
        _assert_same_search(GridSearchCV(est, grid, cv=2, scoring=sc).fit(X, y), reference, X)
        np.testing.assert_array_equal(cross_val_score(est, X, y, cv=2, scoring=sc), scores)


# ----------------------------------------------------------------------------- pandas output
def _union():
    return FeatureUnion([
        ("a", Pipeline([("nys", NystromFeatures(n_components=5, random_state=0)),
                        ("otk", OTKEmbedding(n_supports=2, random_state=0))])),
        ("b", OTKEmbedding(n_supports=2, random_state=0)),
        ("c", DeepSetsClassifier(**NN)),
    ])


FRAMED = [
    OTKEmbedding(n_supports=3, random_state=0),
    OTKEmbedding(n_supports=2, n_references=2, random_state=0),
    DilatedKernelFeatures(n_thresholds=2, max_dilations=2, random_state=0),
    OTKRegressor(**OTKS),
    DeepSetsRegressor(**NN),
    SetTransformerClassifier(n_heads=2, **NN),
    Pipeline([("nys", NystromFeatures(n_components=5, random_state=0)),
              ("otk", OTKClassifier(**OTKS))]),
    _union(),
]


@pytest.mark.parametrize("est", FRAMED, ids=lambda e: type(e).__name__)
def test_pandas_output_has_unique_stable_string_columns_and_one_row_per_set(est):
    """Under set_output(transform="pandas") the columns are unique strings equal to
    get_feature_names_out() on every call, the index counts the sets, the values are the arrays'."""
    pd = pytest.importorskip("pandas")
    X, y = _sets(12)
    y = _y(est, y)
    framed = clone(est).set_output(transform="pandas")
    outputs = []
    if hasattr(framed, "fit_transform"):
        outputs.append((framed.fit_transform(X, y), len(X)))
    framed.fit(X, y)
    outputs += [(framed.transform(X), len(X)), (framed.transform(X[:5]), 5)]
    names = framed.get_feature_names_out()
    plain = clone(est).fit(X, y).transform(X)
    for out, n in outputs:
        assert isinstance(out, pd.DataFrame)
        assert all(type(c) is str for c in out.columns) and out.columns.is_unique
        assert list(out.columns) == list(names)
        assert out.index.equals(pd.RangeIndex(n))
    np.testing.assert_array_equal(outputs[-2][0].to_numpy(), plain)
    assert framed.get_feature_names_out().tolist() == names.tolist()  # stable after transforms


# ----------------------------------------------------------------------------- metadata routing
def test_routed_sample_weight_reaches_only_the_steps_that_request_it():
    """With metadata routing, sample_weight passed to a Pipeline (and a FeatureUnion inside it)
    fits the requesting skset steps as a direct weighted fit and the others as an unweighted fit."""
    X, y = _sets(16)
    w = np.linspace(0.2, 3.0, 16)
    nys = NystromFeatures(n_components=5, window=2, random_state=0)
    otk = OTKEmbedding(n_supports=2, random_state=0)
    ds = DeepSetsClassifier(hidden_size=4, max_iter=2, random_state=0)
    dk = DilatedKernelFeatures(n_thresholds=2, max_dilations=2, random_state=0)
    with sklearn.config_context(enable_metadata_routing=True):
        union = FeatureUnion([
            ("a", Pipeline([("nys", clone(nys).set_fit_request(sample_weight=True)),
                            ("otk", clone(otk).set_fit_request(sample_weight=False))])),
            ("b", clone(ds).set_fit_request(sample_weight=True)),
            ("c", clone(dk).set_fit_request(sample_weight=False))])
        pipe = Pipeline([("u", union), ("clf", LogisticRegression().set_fit_request(sample_weight=True))])
        proba = pipe.fit(X, y, sample_weight=w).predict_proba(X)
        unset = Pipeline([("otk", clone(otk)), ("clf", LogisticRegression())])
        with pytest.raises(UnsetMetadataPassedError):
            unset.fit(X, y, sample_weight=w)
    # Pipeline passes y to every fit: the "auto" choices read it
    n = clone(nys).fit(X, y, sample_weight=w)
    F = n.transform(X)
    o, d, k = clone(otk).fit(F, y), clone(ds).fit(X, y, sample_weight=w), clone(dk).fit(X, y)
    Z = np.hstack([o.transform(F), d.transform(X), k.transform(X)])
    np.testing.assert_array_equal(proba, LogisticRegression().fit(Z, y, sample_weight=w).predict_proba(Z))
    fitted = pipe[0].transformer_list[0][1]
    np.testing.assert_array_equal(fitted[0].anchors_, n.anchors_)
    np.testing.assert_array_equal(fitted[1].references_, o.references_)
    # the weights change both steps' fits: the equalities above say who received them
    assert not np.array_equal(clone(nys).fit(X, y).anchors_, n.anchors_)
    assert not np.array_equal(clone(otk).fit(F, y, sample_weight=w).references_, o.references_)


def test_grid_search_routes_sample_weight_through_the_pipeline():
    """GridSearchCV with metadata routing fits and scores each fold of an OTK pipeline with the
    fold's weights and refits the best pipeline as a direct weighted fit, in processes too."""
    X, y = _sets(16)
    w = np.linspace(0.2, 3.0, 16)
    cv, grid = KFold(2), {"otk__epsilon": [0.1, 1.0]}

    def steps(eps):
        return (NystromFeatures(n_components=6, random_state=0),
                OTKEmbedding(n_supports=2, epsilon=eps, random_state=0), LogisticRegression())

    def weighted_fit(idx, eps):
        nys, otk, clf = steps(eps)
        Xi = [X[i] for i in idx]
        F = nys.fit(Xi, y[idx], sample_weight=w[idx]).transform(Xi)
        Z = otk.fit(F, y[idx], sample_weight=w[idx]).transform(F)
        clf.fit(Z, y[idx], sample_weight=w[idx])
        return lambda Xt: clf.predict_proba(otk.transform(nys.transform(Xt)))

    expected = []
    for eps in grid["otk__epsilon"]:
        folds = []
        for tr, te in cv.split(X):
            proba = weighted_fit(tr, eps)([X[i] for i in te])
            folds.append(np.average(proba.argmax(1) == y[te], weights=w[te]))
        expected.append(np.mean(folds))
    with sklearn.config_context(enable_metadata_routing=True):
        nys, otk, clf = steps(0.1)
        clf.set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        pipe = Pipeline([("nys", nys.set_fit_request(sample_weight=True)),
                         ("otk", otk.set_fit_request(sample_weight=True)), ("clf", clf)])
        searches = [GridSearchCV(pipe, grid, cv=cv, n_jobs=n_jobs).fit(X, y, sample_weight=w)
                    for n_jobs in (1, 2)]
    for search in searches:
        np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-12)
        best = weighted_fit(np.arange(16), search.best_params_["otk__epsilon"])
        np.testing.assert_array_equal(search.best_estimator_.predict_proba(X), best(X))


def test_grid_search_routes_sample_and_element_weights_to_an_otk_classifier():
    """GridSearchCV with metadata routing gives an OTKClassifier each fold's sample_weight and
    element_weight in fit and element_weight in score, as direct fits and scores do."""
    X, y = _sets(16)
    rng = np.random.default_rng(1)
    w, ew = np.linspace(0.2, 3.0, 16), [rng.uniform(0.5, 1.5, len(x)) for x in X]
    cv, grid, est = KFold(2), {"epsilon": [0.1, 1.0]}, OTKClassifier(**OTKS)
    expected = []
    for eps in grid["epsilon"]:
        folds = []
        for tr, te in cv.split(X):
            m = clone(est).set_params(epsilon=eps).fit([X[i] for i in tr], y[tr], sample_weight=w[tr],
                                                       element_weight=[ew[i] for i in tr])
            pred = m.predict([X[i] for i in te], element_weight=[ew[i] for i in te])
            folds.append(np.mean(pred == y[te]))  # not OTKClassifier.score: the one under test
        expected.append(np.mean(folds))
    with sklearn.config_context(enable_metadata_routing=True):
        routed = (clone(est).set_fit_request(sample_weight=True, element_weight=True)
                  .set_score_request(sample_weight=False, element_weight=True))
        search = GridSearchCV(routed, grid, cv=cv).fit(X, y, sample_weight=w, element_weight=ew)
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"], expected)
    direct = clone(est).set_params(**search.best_params_).fit(X, y, sample_weight=w, element_weight=ew)
    np.testing.assert_array_equal(search.best_estimator_.predict_proba(X, element_weight=ew),
                                  direct.predict_proba(X, element_weight=ew))


def test_routed_element_weight_reaches_predict_log_proba():
    """With metadata routing, element_weight passed to Pipeline.predict_log_proba reaches the
    OTKClassifier as it does through Pipeline.predict_proba (it took it through ``**kwargs`` only:
    no ``set_predict_log_proba_request``, and the pipeline refused it with a TypeError)."""
    X, y = _sets(12)
    rng = np.random.default_rng(1)
    ew = [rng.uniform(0.5, 1.5, len(x)) for x in X]
    direct = OTKClassifier(**OTKS).fit(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = OTKClassifier(**OTKS).set_predict_proba_request(element_weight=True)
        clf.set_predict_log_proba_request(element_weight=True)
        pipe = Pipeline([("otk", clf)]).fit(X, y)
        np.testing.assert_array_equal(pipe.predict_proba(X, element_weight=ew),
                                      direct.predict_proba(X, element_weight=ew))
        got = pipe.predict_log_proba(X, element_weight=ew)
    np.testing.assert_array_equal(got, direct.predict_log_proba(X, element_weight=ew))
    # the masses change the output, and the log output is the log of the weighted proba
    assert not np.allclose(got, direct.predict_log_proba(X))
    np.testing.assert_allclose(got, np.log(direct.predict_proba(X, element_weight=ew)), rtol=1e-5)


# ----------------------------------------------------------------------------- clone, params, repr
def _instances(n=8, seed=0):
    """Instances of two separated blobs in 3-D with a label per element."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        sizes = rng.integers(3, 6, 2)
        centres = rng.normal(scale=4, size=(2, 3))
        X.append(np.concatenate([c + 0.3 * rng.normal(size=(m, 3)) for c, m in zip(centres, sizes)]))
        y.append(np.repeat([0, 1], sizes))
    return X, y


NON_DEFAULT = [
    NystromFeatures(n_components=np.int64(5), bandwidth=np.float64(0.7), anchors="random",
                    dtype=np.float64, random_state=0),
    OTKEmbedding(n_supports=3, epsilon=np.float32(0.3), position_sigma=0.5, dtype="float64",
                 device=torch.device("cpu"), random_state=0),
    DilatedKernelFeatures(n_thresholds=3, max_dilations=2, dtype=torch.float64, random_state=0),
    OTKClassifier(class_weight={0: 1.0, 1: 2.0}, epsilon=0.3, **OTKS),
    OTKRegressor(alpha=0.1, **OTKS),
    DeepSetsClassifier(class_weight="balanced", dtype=torch.float64, **NN),
    DeepSetsRegressor(norm="set", residual="clean", **NN),
    SetTransformerClassifier(n_heads=2, n_inducing=None, **NN),
    SetTransformerRegressor(n_heads=2, n_inducing=3, dropout=0.1, **NN),
    ABCClusterer(hidden_size=8, n_heads=2, max_steps=4, batch_size=4, eval_every=2,
                 instance_n_clusters=(2, 3), input_similarity="rbf", random_state=0),
    EigengapSpectralClustering(gamma=0.5, max_clusters=4, random_state=0),
]


def _fit_data(est):
    if isinstance(est, ABCClusterer):
        return _instances()
    if isinstance(est, EigengapSpectralClustering):
        return (np.random.default_rng(0).normal(size=(20, 3)),)
    X, y = _sets(12)
    return X, _y(est, y)


@pytest.mark.parametrize("est", NON_DEFAULT, ids=lambda e: type(e).__name__)
def test_clone_of_a_fitted_model_is_unfitted_with_its_params_and_repr(est):
    """clone of a fitted estimator with non-default parameters has the same parameters and repr
    and no fitted attribute; repr names the non-default parameters and is unchanged by fit."""
    fitted = clone(est).fit(*_fit_data(est))
    fresh = clone(fitted)
    assert type(fresh) is type(est)
    assert fresh.get_params() == fitted.get_params() == est.get_params()
    assert repr(fresh) == repr(fitted) == repr(est)
    assert not [k for k in vars(fresh) if k.endswith("_") and not k.startswith("__")]
    defaults = type(est)().get_params()
    changed = [k for k, v in est.get_params().items() if repr(v) != repr(defaults[k])]
    assert changed and all(f"{k}=" in repr(est) for k in changed)
    assert type(est).__name__ in est._repr_html_()
    method = next(m for m in ("transform", "predict", "affinity") if hasattr(fresh, m))
    if not isinstance(est, EigengapSpectralClustering):
        with pytest.raises(NotFittedError):
            getattr(fresh, method)(_fit_data(est)[0])


def test_nested_pipeline_params_round_trip_and_reach_the_inner_steps():
    """get_params(deep=True) / set_params of a Pipeline holding a FeatureUnion of an OTK pipeline
    and a network round-trip, and a GridSearchCV over the nested names sets the inner steps."""
    X, y = _sets(12)
    pipe = Pipeline([("u", _union()), ("clf", LogisticRegression())])
    new = {"u__a__otk__epsilon": 0.7, "u__a__nys__n_components": 4, "u__c__hidden_size": 6,
           "u__b__n_supports": 3}
    changed = clone(pipe).set_params(**new)
    deep = changed.get_params(deep=True)
    assert {k: deep[k] for k in new} == new
    assert changed.named_steps["u"].transformer_list[0][1].named_steps["otk"].epsilon == 0.7
    assert pipe.get_params(deep=True)["u__a__otk__epsilon"] == 0.1  # the original is untouched
    copied = clone(pipe).set_params(**{k: v for k, v in deep.items()
                                       if "__" in k and not hasattr(v, "get_params")})
    assert repr(copied.get_params(deep=True)) == repr(deep)
    fitted = clone(changed).fit(X, y)
    assert fitted[0].transformer_list[0][1][0].n_components_ == 4
    grid = {"u__a__otk__epsilon": [0.1, 1.0], "u__c__alpha": [0.0, 0.1]}
    search = GridSearchCV(pipe, grid, cv=2).fit(X, y)
    inner = search.best_estimator_.named_steps["u"]
    assert inner.transformer_list[0][1][1].epsilon == search.best_params_["u__a__otk__epsilon"]
    assert inner.transformer_list[2][1].alpha == search.best_params_["u__c__alpha"]
    assert search.best_estimator_.get_params(deep=True).keys() == pipe.get_params(deep=True).keys()
