"""The set-estimator contract, checked on every public set estimator.

clone, idempotent fit, pickle and joblib round trip, determinism, permutation invariance within a
set, padding invariance (a set alone == the set in a batch beside a long one), NotFittedError, no
mutation of inputs, Pipeline / GridSearchCV / cross_val_score, scikit-learn's data-free checks, and
a model fitted on a GPU loading on a CPU-only machine. ABCClusterer (instances with per-element
labels in, a partition of each instance out) has its own versions of the checks at the end.
"""

import copy
import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from conftest import OnGPU, make_blob_instances, simulate_gpu_fit, tensors
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score
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
    ABCClusterer,
    DeepSetsClassifier,
    DeepSetsRegressor,
    DilatedKernelFeatures,
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
    DilatedKernelFeatures(n_thresholds=3, max_dilations=2, random_state=0),
]
IDS = [type(e).__name__ + str(i) for i, e in enumerate(ESTIMATORS)]
# the rbf prior makes the 4-step kernel cluster the blobs of _instances: the labels compared below
# are not all one cluster
ABC = ABCClusterer(hidden_size=8, n_heads=2, max_steps=4, batch_size=4, eval_every=2,
                   input_similarity="rbf", random_state=0)
ALL, ALL_IDS = ESTIMATORS + [ABC], IDS + ["ABCClusterer"]
ORDERED = (OTKEmbedding, OTKClassifier, OTKRegressor)  # positions or k-mers make them order-aware
SERIES = (DilatedKernelFeatures,)  # reads every set as a series: always order-aware


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
    covered = {type(e).__name__ for e in ALL}
    # a scikit-learn clusterer of one data set: parametrize_with_checks in test_cluster.py
    assert public - covered <= {"EigengapSpectralClustering"}


@pytest.mark.parametrize(
    "check", [check_parameters_default_constructible, check_no_attributes_set_in_init,
              check_get_params_invariance, check_set_params, check_estimator_repr])
@pytest.mark.parametrize("est", ALL, ids=ALL_IDS)
def test_sklearn_data_free_checks(est, check):
    check(type(est).__name__, clone(est))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_a_refit_that_raises_leaves_the_fitted_model(est):
    """A fit refused after it began (sets of another width, then a label per set missing; a set
    of NaN for the transformer that reads no labels) leaves every attribute as it was: the model
    computes as before. A half-written model had taken the new ``n_features_in_`` beside the old
    references (a torch shape error on the old sets)."""
    X, y = _data()
    fitted = _fit(est, X, y)
    before, expected = dict(vars(fitted)), _out(fitted, X)
    wide = [np.hstack([x, x]) for x in X] + ([np.full((4, 6), np.nan)] if isinstance(est, SERIES) else [])
    with pytest.raises(ValueError):
        fitted.fit(wide, _y(est, y)[:3])
    assert vars(fitted).keys() == before.keys()
    assert all(vars(fitted)[k] is v for k, v in before.items())
    np.testing.assert_array_equal(_out(fitted, X), expected)
    fresh = clone(est)
    with pytest.raises(ValueError):  # a first fit that raises leaves an unfitted estimator
        fresh.fit(wide, _y(est, y)[:3])
    assert not [k for k in vars(fresh) if k.endswith("_")]


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
    # the fitted choices say whether the order is read ("auto" positions or widths may keep it out)
    if isinstance(a, SERIES) or isinstance(a, ORDERED) and (
            getattr(a, "position_sigma_", None) is not None or getattr(a, "window_", 1) > 1):
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
    elif isinstance(est, SERIES):
        pipe = Pipeline([("dk", clone(est)), ("clf", LogisticRegression())])
        grid = {"dk__n_thresholds": [2, 4], "dk__max_dilations": [1, 3]}
    else:
        pipe = Pipeline([("otk", clone(est)), ("clf", LogisticRegression())])
        grid = {"otk__epsilon": [0.1, 1.0], "otk__n_supports": [2, 3]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = GridSearchCV(pipe, grid, cv=2).fit(X, y)
    assert 0.0 <= search.score(X, y) <= 1.0


# ----------------------------------------------------------------------------- a GPU fit, on a CPU
def _fitted_with_outputs(est):
    """``est`` fitted on small data, its training data, and its outputs on other data as a
    function of a model."""
    if isinstance(est, ABCClusterer):
        X, y = _instances()
        Xt, _ = _instances(6, seed=1)
        return clone(est).fit(X, y), (X, y), lambda m: [*m.affinity(Xt), *m.predict(Xt)]
    X, y = _data()
    Xt, _ = _data(6, seed=1)
    return _fit(est, X, y), (X, _y(est, y)), lambda m: [_out(m, Xt)]


# NystromFeatures, OTKEmbedding and DilatedKernelFeatures keep no tensor once fitted
# (test_persist.py checks that their recorded device falls back to the CPU)
TORCH_STATE = [e for e in ALL
               if not isinstance(e, (NystromFeatures, OTKEmbedding, DilatedKernelFeatures))]


@pytest.mark.parametrize("est", TORCH_STATE, ids=lambda e: type(e).__name__)
def test_gpu_fitted_model_loads_on_cpu(est, monkeypatch):
    """Pickle and joblib a model whose tensors (optimizer state, module buffers) look like CUDA
    tensors, then load it where CUDA is not available: ``__getstate__`` must have moved them all,
    nested ones included, to the CPU."""
    # a CPU fit (also where CUDA is available), dressed up below as a GPU one
    a, (X, y), outputs = _fitted_with_outputs(clone(est).set_params(device="cpu"))
    expected, before, n_iter = outputs(a), [t.clone() for t in tensors(a)], a.n_iter_
    n = simulate_gpu_fit(a)
    assert n >= len(tensors(a._optimizer_state)) > 0
    state = a.__getstate__()
    assert all(not isinstance(t, OnGPU) and t.device.type == "cpu" for t in tensors(state))
    assert sum(isinstance(t, OnGPU) for t in tensors(a)) == n  # on a copy: `a` is unchanged
    blob = pickle.dumps(a)
    buf = io.BytesIO()
    joblib.dump(a, buf)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA"):  # the simulation holds: raw, they need CUDA
        pickle.loads(pickle.dumps(dict(vars(a))))
    for load in (lambda: pickle.loads(blob), lambda: joblib.load(io.BytesIO(buf.getvalue()))):
        with pytest.warns(UserWarning, match="not available here; it is loaded on the CPU") as rec:
            loaded = load()
        assert {r.filename for r in rec if "not available" in str(r.message)} == {__file__}
        assert loaded.device_ == torch.device("cpu")
        got = tensors(loaded)
        assert len(got) == len(before)
        for u, v in zip(got, before, strict=True):
            assert not isinstance(u, OnGPU) and u.device.type == "cpu"
            torch.testing.assert_close(u, v, rtol=0, atol=0)
        for u, v in zip(outputs(loaded), expected, strict=True):
            np.testing.assert_array_equal(u, v)
        loaded.set_params(warm_start=True).fit(X, y)  # resumes from the loaded optimizer state
        assert loaded.n_iter_ == 2 * n_iter


# ----------------------------------------------------------------------------- ABCClusterer
def _instances(n=12, seed=0):
    """:func:`conftest.make_blob_instances` with labels that do not start at 0, so that a
    relabelling in place would show."""
    X, y = make_blob_instances(n, seed)
    return X, [2 * labels + 5 for labels in y]


def _abc_outputs(est, X):
    """Affinities, eigengap labels and labels for a given number of clusters of each instance."""
    ks = [2 + i % 2 for i in range(len(X))]
    return est.affinity(X), est.predict(X), est.predict(X, n_clusters=ks)


def _assert_same_outputs(got, expected, exact=True):
    for u, v in zip(got[0], expected[0], strict=True):
        if exact:
            np.testing.assert_array_equal(u, v)
        else:
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    for labels, labels_ref in zip(got[1:], expected[1:], strict=True):
        for u, v in zip(labels, labels_ref, strict=True):
            np.testing.assert_array_equal(u, v)


def test_abc_not_fitted():
    X, _ = _instances(2)
    for method in ("predict", "affinity"):
        with pytest.raises(NotFittedError):
            getattr(clone(ABC), method)(X)


def test_abc_idempotent_fit_determinism_and_no_mutation():
    X, y = _instances()
    Xt, _ = _instances(6, seed=1)
    inputs = (X, y, Xt)
    copies = copy.deepcopy(inputs)
    a = clone(ABC).fit(X, y)
    out = _abc_outputs(a, Xt)
    assert max(len(np.unique(lab)) for lab in out[1]) > 1
    a.fit(X, y)  # refit on the same data: same result
    _assert_same_outputs(_abc_outputs(a, Xt), out, exact=False)
    fresh = clone(a)  # a clone of the fitted model: the same parameters, nothing fitted
    assert fresh.get_params() == a.get_params() and not hasattr(fresh, "module_")
    _assert_same_outputs(_abc_outputs(fresh.fit(X, y), Xt), out)  # a fresh fit, same seed
    # a labelled pool (2-D X, 1-D classes) is not modified either
    pool, classes = np.concatenate(X), np.concatenate(y)
    pool_copy, classes_copy = pool.copy(), classes.copy()
    b = clone(ABC).set_params(instance_size=8, instance_n_clusters=(2, 3)).fit(pool, classes)
    b.predict([pool[:10]])
    np.testing.assert_array_equal(pool, pool_copy)
    np.testing.assert_array_equal(classes, classes_copy)
    for got, want in zip(inputs, copies, strict=True):
        for u, v in zip(got, want, strict=True):
            np.testing.assert_array_equal(u, v)


def test_abc_pickle_joblib_and_save_load_round_trip(tmp_path):
    X, y = _instances()
    Xt, _ = _instances(6, seed=1)
    a = clone(ABC).fit(X, y)
    out = _abc_outputs(a, Xt)
    joblib.dump(a, tmp_path / "m.joblib")
    skset.save(a, tmp_path / "m.skset")
    for b in (pickle.loads(pickle.dumps(a)), joblib.load(tmp_path / "m.joblib"),
              skset.load(tmp_path / "m.skset")):
        assert type(b) is ABCClusterer
        _assert_same_outputs(_abc_outputs(b, Xt), out)
    assert pickle.loads(pickle.dumps(a)).get_params() == a.get_params()


def test_abc_save_load_keeps_tuple_parameters(tmp_path):
    # skset.save writes the parameters as JSON, which has no tuples: they are tagged and given back
    est = clone(ABC).set_params(class_weight=(1.0, 2.5))
    skset.save(est, tmp_path / "m.skset")
    loaded = skset.load(tmp_path / "m.skset").get_params()
    assert loaded == est.get_params()
    assert type(loaded["instance_n_clusters"]) is tuple and type(loaded["class_weight"]) is tuple


def test_abc_permutation_equivariance_and_padding_invariance():
    a = clone(ABC).fit(*_instances())
    X, _ = _instances(6, seed=1)
    A, labels, labels_k = _abc_outputs(a, X)
    assert max(len(np.unique(lab)) for lab in labels) > 1
    rng = np.random.default_rng(0)
    perms = [rng.permutation(len(x)) for x in X]
    Ap, labels_p, labels_kp = _abc_outputs(a, [x[p] for x, p in zip(X, perms, strict=True)])
    for i, p in enumerate(perms):  # rows and columns permuted; the same partition
        np.testing.assert_allclose(Ap[i], A[i][p][:, p], rtol=1e-5, atol=1e-6)
        assert adjusted_rand_score(labels[i][p], labels_p[i]) == 1.0
        assert adjusted_rand_score(labels_k[i][p], labels_kp[i]) == 1.0
    # an instance alone == the instance padded in a batch beside a much longer one
    long = 5 * rng.normal(size=(40, 3))
    in_batch = a.affinity(X + [long])
    for x, A_batch in zip(X, in_batch, strict=False):
        np.testing.assert_allclose(A_batch, a.affinity([x])[0], rtol=1e-5, atol=1e-6)
    ks = [2 + i % 2 for i in range(len(X))]
    for lab, lab_batch in zip(labels_k, a.predict(X + [long], n_clusters=ks + [2]), strict=False):
        assert adjusted_rand_score(lab, lab_batch) == 1.0


def test_abc_accepts_3d_and_object_arrays():
    a = clone(ABC).fit(*_instances())
    X3 = np.random.default_rng(2).normal(size=(4, 5, 3))
    obj = np.empty(4, dtype=object)
    obj[:] = list(X3)
    ref = a.affinity(list(X3))
    for X in (X3, obj):
        for u, v in zip(a.affinity(X), ref, strict=True):
            np.testing.assert_array_equal(u, v)


def _mean_ari(est, X, y):
    return float(np.mean([adjusted_rand_score(t, p) for t, p in zip(y, est.predict(X),
                                                                     strict=True)]))


def test_abc_model_selection_tools():
    X, y = _instances(16)
    scores = cross_val_score(clone(ABC), X, y, cv=2, scoring=_mean_ari)
    assert scores.shape == (2,) and np.all(scores > 0.5), scores
    pipe = Pipeline([("nf", NystromFeatures(n_components=6, random_state=0)),
                     ("abc", clone(ABC))])
    search = GridSearchCV(pipe, {"abc__n_layers": [0, 1]}, cv=2, scoring=_mean_ari).fit(X, y)
    assert search.best_params_["abc__n_layers"] in (0, 1) and np.isfinite(search.best_score_)
    labels = search.predict(X)
    assert [lab.shape for lab in labels] == [(len(x),) for x in X]
    fixed = search.best_estimator_.predict(X, n_clusters=3)  # predict's keyword goes to ABC
    assert all(len(np.unique(lab)) == 3 for lab in fixed)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize("est", ALL, ids=ALL_IDS)
def test_fit_inside_no_grad_or_inference_mode_trains_as_outside(est, mode):
    """A fit called inside ``torch.no_grad()`` or ``torch.inference_mode()`` (a user's
    inference block, a notebook cell) trains as outside it, and the fitted model predicts there."""
    fitted, data, outputs = _fitted_with_outputs(est)
    with getattr(torch, mode)():
        inside = clone(est).fit(*data)
        got = outputs(inside)
    for u, v in zip(got, outputs(fitted), strict=True):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_sets_as_data_frames_keep_their_columns(est):
    """Sets given as pandas frames: ``feature_names_in_`` records their columns; sets whose
    columns differ (from each other, or from the fit's) are refused, naming the set, rather than
    read by position; arrays of the same values give the same outputs."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frames = [pd.DataFrame(x, columns=["a", "b", "c"]) for x in X]
    fitted = _fit(est, frames, y)
    assert list(fitted.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_array_equal(_out(fitted, frames), _out(_fit(est, X, y), X))
    np.testing.assert_array_equal(_out(fitted, X), _out(fitted, frames))  # arrays: no names
    reordered = [f[["c", "a", "b"]] for f in frames]
    with pytest.raises(ValueError, match=r"fitted on \['a', 'b', 'c'\]"):
        _out(fitted, reordered)
    with pytest.raises(ValueError, match=r"set 1 has the columns \['c', 'a', 'b'\] but set 0"):
        _fit(est, [frames[0], *reordered[1:]], y)
    assert not hasattr(_fit(est, X, y), "feature_names_in_")
    # a pandas Series of frames is read as the list (it was read by position, unchecked)
    assert list(_fit(est, pd.Series(frames), y).feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"fitted on \['a', 'b', 'c'\]"):
        _out(fitted, pd.Series(reordered))
