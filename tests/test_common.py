"""The set-estimator contract, checked on every public set estimator.

clone, idempotent fit, pickle and joblib round trip, determinism, permutation invariance within a
set, padding invariance (a set alone == the set in a batch beside a long one), NotFittedError, no
mutation of inputs, Pipeline / GridSearchCV / cross_val_score, and scikit-learn's data-free checks.
"""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (
    check_estimator_repr,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

import skset
from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    NystromFeatures,
    OTKClassifier,
    OTKEmbedding,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NN = dict(hidden_size=8, n_layers=1, max_iter=2, batch_size=8, random_state=0)
OTKS = dict(n_components=6, n_supports=3, max_iter=2, random_state=0)
ESTIMATORS = [
    NystromFeatures(n_components=6, random_state=0),
    OTKEmbedding(n_supports=3, random_state=0),
    OTKEmbedding(n_supports=3, n_references=2, fit_method="wasserstein", position_sigma=0.5,
                 random_state=0),
    SetTransformerClassifier(n_heads=2, n_inducing=3, **NN),
    SetTransformerRegressor(n_heads=2, n_inducing=None, norm="set", residual="clean", **NN),
    DeepSetsClassifier(**NN),
    DeepSetsRegressor(norm="set", residual="clean", **NN),
    OTKClassifier(**OTKS),
    OTKRegressor(**OTKS),
]
IDS = [type(e).__name__ + str(i) for i, e in enumerate(ESTIMATORS)]
ORDERED = (OTKEmbedding, OTKClassifier, OTKRegressor)  # position_sigma may make them order-aware


def _data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 10)), 3)) for i in range(n)]
    y = np.arange(n) % 2
    return X, y


def _y(est, y):
    return y.astype(float) + 0.5 if is_regressor(est) else y


def _out(est, X):
    if is_classifier(est):
        return est.predict_proba(X)
    if is_regressor(est):
        return est.predict(X)
    out = est.transform(X)
    if isinstance(out, np.ndarray) and out.dtype == object:
        out = list(out)
    if isinstance(out, list) or out.ndim == 3:
        return np.concatenate(list(out))
    return out


def _fit(est, X=None, y=None):
    X0, y0 = _data()
    return clone(est).fit(X0 if X is None else X, _y(est, y0 if y is None else y))


def test_all_public_estimators_are_covered():
    from sklearn.base import BaseEstimator

    public = {n for n in skset.__all__ if isinstance(getattr(skset, n), type)
              and issubclass(getattr(skset, n), BaseEstimator)}
    covered = {type(e).__name__ for e in ESTIMATORS}
    # the clustering estimators have their own contract tests in test_cluster.py
    assert public - covered <= {"ABCClusterer", "EigengapSpectralClustering"}


@pytest.mark.parametrize(
    "check", [check_parameters_default_constructible, check_no_attributes_set_in_init,
              check_get_params_invariance, check_set_params, check_estimator_repr])
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_sklearn_data_free_checks(est, check):
    check(type(est).__name__, clone(est))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_not_fitted(est):
    X, _ = _data()
    method = "transform" if not (is_classifier(est) or is_regressor(est)) else "predict"
    with pytest.raises(NotFittedError):
        getattr(clone(est), method)(X)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_idempotent_fit_determinism_and_no_mutation(est):
    X, y = _data()
    X_copy = [x.copy() for x in X]
    a = _fit(est, X, y)
    out = _out(a, X)
    a.fit(X, _y(est, y))  # refit on the same data: same result
    np.testing.assert_allclose(_out(a, X), out, rtol=1e-5, atol=1e-6)
    b = _fit(est, X, y)
    np.testing.assert_array_equal(_out(b, X), out)
    for x, c in zip(X, X_copy):
        np.testing.assert_array_equal(x, c)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_pickle_and_joblib_round_trip(est, tmp_path):
    X, _ = _data()
    a = _fit(est)
    b = pickle.loads(pickle.dumps(a))
    joblib.dump(a, tmp_path / "m.joblib")
    c = joblib.load(tmp_path / "m.joblib")
    np.testing.assert_array_equal(_out(b, X), _out(a, X))
    np.testing.assert_array_equal(_out(c, X), _out(a, X))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_permutation_and_padding_invariance(est):
    a = _fit(est)
    X, _ = _data(6, seed=1)
    rng = np.random.default_rng(0)
    long = 5 * rng.normal(size=(40, 3))
    alone = [_out(a, [x]) for x in X]
    in_batch = _out(a, X + [long])
    if isinstance(a, NystromFeatures):  # per-element: equivariant, rows of the concatenation
        np.testing.assert_allclose(in_batch[: sum(len(x) for x in X)], np.concatenate(alone),
                                   rtol=1e-4, atol=1e-5)
        return
    np.testing.assert_allclose(in_batch[:6], np.concatenate(alone), rtol=1e-4, atol=1e-5)
    if isinstance(a, ORDERED) and a.position_sigma is not None:
        return
    permuted = [x[rng.permutation(len(x))] for x in X]
    np.testing.assert_allclose(_out(a, permuted), _out(a, X), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_accepts_3d_and_object_arrays(est):
    a = _fit(est)
    rng = np.random.default_rng(2)
    X3 = rng.normal(size=(4, 5, 3))
    obj = np.empty(4, dtype=object)
    obj[:] = list(X3)
    np.testing.assert_allclose(_out(a, X3), _out(a, list(X3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_out(a, obj), _out(a, list(X3)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_bad_inputs_get_clear_errors(est):
    X, y = _data()
    a = _fit(est)
    method = getattr(a, "predict", None) or a.transform
    cases = [
        (X[:3] + [np.zeros((0, 3))], "set 3 is empty"),
        (X[:3] + [np.full((2, 3), np.nan)], "set 3 contains NaN"),
        ([np.zeros((4, 5))], "5 features"),
        (np.zeros((2, 3, 4, 5)), "4 dimensions"),
    ]
    if not isinstance(a, NystromFeatures):  # for it, a list of 1-D rows is one pool of elements
        cases.append(([np.zeros(3)], "1-D"))
    for bad, match in cases:
        with pytest.raises(ValueError, match=match):
            method(bad)
    if is_classifier(est) or is_regressor(est):
        with pytest.raises(ValueError, match="one target per set"):
            clone(est).fit(X, _y(est, y)[:-2])


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_model_selection_tools(est):
    X, y = _data(24)
    y = _y(est, y)
    if is_classifier(est) or is_regressor(est):
        scores = cross_val_score(clone(est), X, y, cv=2)
        assert scores.shape == (2,) and np.isfinite(scores).all()
        return
    if isinstance(est, NystromFeatures):
        pipe = Pipeline([("nf", clone(est)), ("otk", OTKEmbedding(n_supports=2, random_state=0)),
                         ("clf", LogisticRegression())])
        grid = {"nf__bandwidth": [0.5, 1.0]}
    else:
        pipe = Pipeline([("otk", clone(est)), ("clf", LogisticRegression())])
        grid = {"otk__epsilon": [0.1, 1.0], "otk__n_supports": [2, 3]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = GridSearchCV(pipe, grid, cv=2).fit(X, y)
    assert 0.0 <= search.score(X, y) <= 1.0
